"""Scaling of an out-of-core MS-PCA fit: wall time, peak memory and per-pass throughput.

For each data size (GB of float32), a float32 Zarr store of the paper's kind of mixture (one
covariance spike, one shifted cluster, ``n`` samples × ``d`` features, row chunks spanning all
features) is written chunk by chunk under a temporary directory, then:

* **streaming-read limit** — every chunk read in order with zarr (decompressed, nothing else);
* **GEMM limits** — the per-chunk products of a pass, timed in NumPy on one chunk held in
  memory and scaled to the store: the Gram product ``bᵀb``, the Krylov product ``bᵀ(bV)``,
  the thin product ``bW``; each as the package does it (chunk up-cast to float64) and in
  float32 (the chunk as stored);
* **the fit** — ``mspca_dask.fit(path, n_components=K)`` with the defaults (``solver="auto"``,
  ``location="auto"``, 5 knockoffs) in a fresh subprocess whose whole process tree is sampled
  for its peak resident memory; every pass is timed (name, products, seconds).

Per pass, the achieved throughput is the store's float32 size over the pass's seconds,
beside the read limit and the GEMM limit of that pass's product.  A chunking study on one size
compares stores written with different chunk sizes and a dask rechunk to larger blocks.
The largest point (``--big-gb``, default 32, larger than the machine's memory) is written,
fitted once and deleted.

A *wide* point (``--wide N D``, issue 12: 100 000 × 10 000, 3.7 GiB) measures the randomized
solver in read-equivalents: the fit's wall time over the time of one chunk-by-chunk streaming
read of the same store, reads and fits alternating (R F R F R); it is merged into the
existing results (``scale.json``) without rerunning the size points.

Run:  python benchmarks/scale.py [--quick] [--sizes-gb 0.25 0.5 1 2 4] [--big-gb 32]
      python benchmarks/scale.py --wide 100000 10000 [--wide-fits 2]
Writes benchmarks/results/scale.{md,json,png}.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _bench import (
    RESULTS,
    SHARED_NOTE,
    dump,
    finish_info,
    machine_info,
    machine_line,
    median,
    run_measured,
    write_zarr_store,
)

GB = 1e9
#: The scaling fits use ``location=None`` (the paper's setting, data already centred); the
#: driver-side cost of ``location="auto"``'s group test is measured apart (the location study).
LOCATION = None
#: The wide point measures a fit with every default, the location step included.
WIDE_LOCATION = "auto"
#: Rows of the scores the group test's driver time is measured on.
GROUP_TEST_SIZES = [10_000, 30_000, 100_000]
#: Points at least this large are fitted once and get no parallel-read measurement.
BIG_GB = 16.0


# ---------------------------------------------------------------------------- limits
def read_limit(path: str, repeats: int) -> dict[str, Any]:
    """Seconds to read every chunk of the store in order (zarr, decompressed)."""
    import zarr

    a = zarr.open_array(path, mode="r")
    n, step = a.shape[0], a.chunks[0]
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for r0 in range(0, n, step):
            a[r0 : r0 + step]
        times.append(time.perf_counter() - t0)
    return {"seconds": median(times), "repeats": times}


def parallel_read_limit(path: str, workers: int) -> float:
    """Seconds to read every chunk with ``workers`` threads (as the threaded scheduler does)."""
    from concurrent.futures import ThreadPoolExecutor

    import zarr

    a = zarr.open_array(path, mode="r")
    n, step = a.shape[0], a.chunks[0]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        for _ in pool.map(lambda r0: a[r0 : r0 + step].shape, range(0, n, step)):
            pass
    return time.perf_counter() - t0


def gemm_limits(path: str, K: int, ell: int, repeats: int = 3) -> dict[str, float]:
    """Seconds per *store* of each per-chunk product, with the package's threading.

    The threaded scheduler runs one task per core with one BLAS thread each (the package's
    ``mspca.blas-threads="auto"``; on this machine two BLAS threads on a tall-skinny ``bᵀb``
    were up to 20× slower than one).  So each kernel runs on ``2 × cores`` copies of the first
    chunk in a pool of ``cores`` threads, BLAS limited to one thread, and the time is scaled to
    the store's number of chunks.
    """
    import os
    from concurrent.futures import ThreadPoolExecutor

    import threadpoolctl
    import zarr

    a = zarr.open_array(path, mode="r")
    n, d = a.shape
    rows = min(a.chunks[0], n)
    b32 = np.ascontiguousarray(a[:rows])
    rng = np.random.default_rng(0)
    V = rng.standard_normal((d, ell))
    W = rng.standard_normal((d, K))
    V32, W32 = V.astype(np.float32), W.astype(np.float32)

    def up(x: np.ndarray) -> np.ndarray:
        return x.astype(np.float64)

    def gram(b: np.ndarray) -> np.ndarray:
        return b.T @ b  # one operand: NumPy calls syrk, as the package's kernel does

    kernels = {
        "gram_f64": lambda: gram(up(b32)),
        "gram_f32": lambda: gram(b32),
        "krylov_f64": lambda: (lambda b: b.T @ (b @ V))(up(b32)),
        "krylov_f32": lambda: b32.T @ (b32 @ V32),
        "thin_f64": lambda: up(b32) @ W,
        "thin_f32": lambda: b32 @ W32,
        "stats_f64": lambda: _stats_kernel(b32),
        "gram_stats_f64": lambda: (gram(up(b32)), _stats_kernel(b32)),
        "gram_stats_f32": lambda: (gram(b32), _stats_kernel(b32)),
        "krylov_stats_f64": lambda: ((lambda b: b.T @ (b @ V))(up(b32)), _stats_kernel(b32)),
        "krylov_stats_f32": lambda: (b32.T @ (b32 @ V32), _stats_kernel(b32)),
    }
    cores = os.cpu_count() or 1
    jobs = 2 * cores
    out = {}
    with threadpoolctl.threadpool_limits(1, user_api="blas"), ThreadPoolExecutor(cores) as pool:
        for name, fn in kernels.items():
            fn()
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                list(pool.map(lambda _i, fn=fn: fn(), range(jobs)))
                times.append(time.perf_counter() - t0)
            out[name] = median(times) / jobs * (n / rows)
    return out


def _stats_kernel(b32: np.ndarray) -> None:
    b = b32.astype(np.float64)
    fin = np.isfinite(b)
    c = np.where(fin, b, 0.0)
    sq = c * c
    c.sum(0), c.sum(1), sq.sum(0), sq.sum(1), (~fin).sum(0), (~fin).sum(1)


def pass_kernel(products: list[str]) -> str:
    stats = "_stats" if "row_sum" in products else ""
    if "gram" in products:
        return "gram" + stats
    if "krylov" in products:
        return "krylov" + stats
    return "thin"


# ---------------------------------------------------------------------------- the fit
FIT_CODE = """
import dask.array as da
import mspca_dask
source = {source}
t0 = time.perf_counter()
res = mspca_dask.fit(source, n_components={K}, solver={solver!r}, location={location!r},
                     scheduler="threads")
seconds = time.perf_counter() - t0
print(json.dumps(dict(
    seconds=seconds, n_passes=int(res.n_passes), solver=res.solver,
    passes=res.passes, eigenvalues=res.eigenvalues.tolist(),
    knockoff_eigenvalues_all=res.knockoff_eigenvalues_all.tolist(),
    stable=res.stable.tolist(), bounds=res.eigenvalue_bounds.tolist())))
"""

BASELINE_CODE = """
import dask.array as da, zarr, mspca_dask
print(json.dumps({}))
"""


def fit_once(source: str, K: int, solver: str, location: str | None) -> dict[str, Any]:
    return run_measured(FIT_CODE.format(source=source, K=K, solver=solver, location=location))


def fit_summary(runs: list[dict[str, Any]], nbytes: int, limits: dict[str, Any]) -> dict[str, Any]:
    """Medians over repeats, per pass name: seconds, GB/s and the limits of that pass."""
    by_name: dict[str, list[float]] = {}
    products: dict[str, list[str]] = {}
    for r in runs:
        for p in r["passes"]:
            by_name.setdefault(p["name"], []).append(p["seconds"])
            products[p["name"]] = p["products"]
    read_s = limits["read"]["seconds"]
    passes = []
    for name, secs in by_name.items():
        s = median(secs)
        kern = pass_kernel(products[name])
        g64, g32 = limits["gemm"][f"{kern}_f64"], limits["gemm"][f"{kern}_f32"]
        passes.append(
            {
                "name": name,
                "products": products[name],
                "seconds": s,
                "kernel": kern,
                "gb_per_s": nbytes / s / GB,
                "read_limit_gb_per_s": nbytes / read_s / GB,
                "parallel_read_limit_gb_per_s": (
                    nbytes / limits["parallel_read_seconds"] / GB
                    if limits["parallel_read_seconds"]
                    else None
                ),
                "gemm_f64_limit_gb_per_s": nbytes / g64 / GB,
                "gemm_f32_limit_gb_per_s": nbytes / g32 / GB,
                # read then compute, not overlapped: the limit of a one-thread-per-chunk pipeline
                "serial_limit_gb_per_s": nbytes / (read_s + g64) / GB,
            }
        )
    wall = median([r["seconds"] for r in runs])
    return {
        "seconds": wall,
        "seconds_repeats": [r["seconds"] for r in runs],
        "peak_rss": median([r["peak_rss"] for r in runs]),
        "peak_rss_repeats": [r["peak_rss"] for r in runs],
        "n_passes": runs[0]["n_passes"],
        "solver": runs[0]["solver"],
        "driver_seconds": wall - sum(p["seconds"] for p in passes),
        "passes": passes,
        "eigenvalues": runs[0]["eigenvalues"][:4],
        "knockoff_eigenvalues_first": [k[:4] for k in runs[0]["knockoff_eigenvalues_all"]],
        "stable": runs[0]["stable"][:4],
    }


def one_point(
    tmp: Path,
    gb: float,
    d: int,
    chunk_mb: float,
    K: int,
    repeats: int,
    read_repeats: int,
    ell: int,
    label: str,
    rechunk: int = 1,
) -> dict[str, Any]:
    n = max(2 * d, int(gb * GB / (4 * d)))
    rows = max(1, int(chunk_mb * 1e6 / (4 * d)))
    path = str(tmp / f"{label}.zarr")
    t0 = time.perf_counter()
    written = write_zarr_store(path, n, d, rows)
    nbytes = n * d * 4
    print(
        f"[{label}] wrote {nbytes / GB:.2f} GB (n={n}, d={d}, {rows} rows/chunk) in "
        f"{written['write_seconds']:.0f} s",
        flush=True,
    )
    try:
        import os

        limits = {
            "read": read_limit(path, read_repeats),
            # the parallel read is skipped for the big point (minutes, and the sequential
            # read is the limit the issue asks for)
            "parallel_read_seconds": (
                parallel_read_limit(path, os.cpu_count() or 1) if gb < BIG_GB else None
            ),
            "gemm": gemm_limits(path, K, ell),
        }
        source = repr(path)
        if rechunk > 1:
            source = f"da.from_zarr({path!r}).rechunk(({rows * rechunk}, -1))"
        runs = [fit_once(source, K, "auto", LOCATION) for _ in range(repeats)]
    finally:
        shutil.rmtree(path, ignore_errors=True)
    summary = fit_summary(runs, nbytes, limits)
    out = {
        "label": label,
        "gb": nbytes / GB,
        "n": n,
        "d": d,
        "chunk_rows": rows,
        "chunk_mb": rows * d * 4 / 1e6,
        "rechunk_factor": rechunk,
        "disk_gb": written["disk_bytes"] / GB,
        "write_seconds": written["write_seconds"],
        "repeats": repeats,
        "limits": limits,
        **summary,
        "total_seconds": time.perf_counter() - t0,
    }
    print(
        f"[{label}] fit {summary['seconds']:.1f} s, {summary['n_passes']} passes, peak RSS "
        f"{summary['peak_rss'] / 2**20:.0f} MiB; read limit "
        f"{nbytes / limits['read']['seconds'] / GB:.3f} GB/s; passes "
        + ", ".join(f"{p['name']} {p['gb_per_s']:.3f}" for p in summary["passes"]),
        flush=True,
    )
    return out


# ---------------------------------------------------------------------------- report
def _fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def linear_fit(x: list[float], y: list[float]) -> dict[str, float]:
    X = np.column_stack([np.ones(len(x)), x])
    coef, *_ = np.linalg.lstsq(X, np.asarray(y), rcond=None)
    pred = X @ coef
    ss = float(np.sum((np.asarray(y) - np.mean(y)) ** 2)) or 1.0
    return {
        "intercept": float(coef[0]),
        "slope": float(coef[1]),
        "r2": 1 - float(np.sum((np.asarray(y) - pred) ** 2)) / ss,
    }


def plot(points: list[dict[str, Any]], baseline: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gb = [p["gb"] for p in points]
    fig, ax = plt.subplots(1, 3, figsize=(15, 4.2))
    ax[0].plot(gb, [p["seconds"] for p in points], "o-", label="MS-PCA fit (location=None)")
    ax[0].plot(
        gb,
        [p["limits"]["read"]["seconds"] * p["n_passes"] for p in points],
        "s--",
        label="n_passes × streaming read",
    )
    if len(gb) >= 2:
        lf = linear_fit(gb, [p["seconds"] for p in points])
        xs = np.geomspace(min(gb), max(gb), 50)
        ax[0].plot(
            xs,
            lf["intercept"] + lf["slope"] * xs,
            "k:",
            lw=0.8,
            label=f"{lf['intercept']:.0f} s + {lf['slope']:.0f} s/GB",
        )
    ax[0].set(
        xlabel="data (GB, float32)",
        ylabel="wall time (s)",
        xscale="log",
        yscale="log",
        title="wall time vs data size",
    )
    ax[0].legend()
    ax[1].plot(gb, [p["peak_rss"] / 2**20 for p in points], "o-", label="peak RSS, process tree")
    ax[1].axhline(baseline / 2**20, color="grey", ls=":", label="interpreter + imports")
    ax[1].plot(gb, [p["gb"] * 1e9 / 2**20 for p in points], "k--", lw=0.8, label="data size")
    ax[1].set(
        xlabel="data (GB, float32)",
        ylabel="MiB",
        xscale="log",
        yscale="log",
        title="peak memory vs data size",
    )
    ax[1].legend()
    for key, style in (
        ("gb_per_s", "o-"),
        ("read_limit_gb_per_s", "s--"),
        ("gemm_f64_limit_gb_per_s", "^:"),
    ):
        ax[2].plot(
            gb,
            [median([q[key] for q in p["passes"]]) for p in points],
            style,
            label={
                "gb_per_s": "achieved (median pass)",
                "read_limit_gb_per_s": "streaming read",
                "gemm_f64_limit_gb_per_s": "GEMM (f64, median pass kind)",
            }[key],
        )
    ax[2].set(
        xlabel="data (GB, float32)",
        ylabel="GB/s per pass",
        xscale="log",
        title="throughput per pass",
    )
    ax[2].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def report(payload: dict[str, Any], out: Path, png: bool) -> None:
    meta, points, chunking = payload["meta"], payload["points"], payload["chunking"]
    base = payload["baseline_rss"]
    md = [
        "# Scaling of an out-of-core MS-PCA fit",
        "",
        f"Generated by `python benchmarks/scale.py{' --quick' if meta['quick'] else ''}`. "
        f"Machine: {machine_line(meta)}",
        "",
        SHARED_NOTE,
        "",
        f"Data: float32 Zarr stores (zstd, row chunks spanning all d = {meta['d']} features) "
        f"of a spiked mixture, written chunk by chunk to a temporary directory and deleted "
        f"after the point. Fit: `mspca_dask.fit(path, n_components={meta['K']}, "
        'location=None)`, otherwise defaults (solver="auto", 5 knockoffs, threaded '
        "scheduler; location=None, the paper's setting: the default location's group test "
        "runs on the driver, timed in the last section), in a "
        "fresh subprocess. Peak memory: resident set of the whole process tree sampled every "
        f"20 ms; the interpreter with dask, zarr and mspca_dask imported takes "
        f"{base / 2**20:.0f} MiB.",
        "",
        "## Wall time and peak memory vs data size",
        "",
        *[
            f"Measured in a separate run of the script and merged here "
            f"({', '.join(m.get('parts', []))}): {m['date']}, load average "
            f"{m['load_average_start']} at its start, {m.get('load_average_end')} at its end."
            for m in payload.get("merged_runs", [])
        ],
        "",
        "| data GB | n | chunk MB | repeats | fit s | passes | solver | s per GB | peak RSS MiB "
        "| peak − imports MiB | peak / data | driver s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in points:
        md.append(
            f"| {p['gb']:.2f} | {p['n']} | {p['chunk_mb']:.0f} | {p['repeats']} | "
            f"{p['seconds']:.1f} | {p['n_passes']} | {p['solver']} | {p['seconds'] / p['gb']:.1f} "
            f"| {p['peak_rss'] / 2**20:.0f} | {(p['peak_rss'] - base) / 2**20:.0f} | "
            f"{p['peak_rss'] / (p['gb'] * 1e9):.4f} | {p['driver_seconds']:.1f} |"
        )
    lf = payload["linear_fit_seconds"]
    md += [
        "",
        f"Least-squares line through the fit times: {lf['intercept']:.1f} s + "
        f"{lf['slope']:.1f} s/GB (R² = {lf['r2']:.4f}). "
        + ("![scaling](scale.png)" if png else ""),
        "",
        "## Throughput per pass against the machine's limits (GB/s of float32 data)",
        "",
        "Limits measured in the same run: *read* = a plain chunk-by-chunk zarr read of the "
        "store (decompression included); *GEMM f64* = the pass's per-chunk product as the "
        "package computes it (chunk up-cast to float64; `bᵀb` by syrk; the first pass also "
        "computes the statistics: finite check, sums and squares along both axes), run on "
        "copies of one in-memory chunk by as many threads as cores with one BLAS thread "
        "each, and scaled to the store; *GEMM f32* = the same on the float32 chunk; *serial* "
        "= read then f64 GEMM, one after the other.",
        "",
        "| data GB | pass | product | achieved | read | read, parallel | GEMM f64 | GEMM f32 | "
        "serial | achieved / min(read, GEMM f64) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in points:
        for q in p["passes"]:
            lim = min(q["read_limit_gb_per_s"], q["gemm_f64_limit_gb_per_s"])
            md.append(
                f"| {p['gb']:.2f} | {q['name']} | {q['kernel']} | {q['gb_per_s']:.3f} | "
                f"{q['read_limit_gb_per_s']:.3f} | "
                f"{_fmt(q['parallel_read_limit_gb_per_s'])} | "
                f"{q['gemm_f64_limit_gb_per_s']:.3f} | "
                f"{q['gemm_f32_limit_gb_per_s']:.3f} | {q['serial_limit_gb_per_s']:.3f} | "
                f"{q['gb_per_s'] / lim:.2f} |"
            )
    if chunking:
        md += [
            "",
            "## Chunk handling",
            "",
            "The same data written with different chunk sizes, and the 8 MB store rechunked "
            "in dask to 4× taller blocks before the fit.",
            "",
            "| variant | chunk MB | fit s | read limit GB/s | median pass GB/s | peak RSS MiB |",
            "|---|---|---|---|---|---|",
        ]
        for p in chunking:
            variant = f"rechunk ×{p['rechunk_factor']}" if p["rechunk_factor"] > 1 else "as stored"
            md.append(
                f"| {variant} | {p['chunk_mb'] * p['rechunk_factor']:.0f} | {p['seconds']:.1f} | "
                f"{p['passes'][0]['read_limit_gb_per_s']:.3f} | "
                f"{median([q['gb_per_s'] for q in p['passes']]):.3f} | "
                f"{p['peak_rss'] / 2**20:.0f} |"
            )
    md += ["", "## Knockoff spectra cost no extra pass", ""]
    for p in points[-1:]:
        names = ", ".join(f"`{q['name']}` ({'+'.join(q['products'])})" for q in p["passes"])
        md.append(
            f"At {p['gb']:.2f} GB the fit read the data {p['n_passes']} times: {names}. The "
            f"original spectrum and all {len(p['knockoff_eigenvalues_first'])} knockoff "
            "spectra come from the same passes (no pass computes anything knockoff-specific)."
        )
    wide = payload.get("wide")
    if wide:
        wm = wide["meta"]
        lo = [x[0] for x in wide["load_average_before_steps"]]
        fs, rs = wide["fit_seconds"], wide["read_seconds"]
        md += [
            "",
            "## Read-equivalents of the randomized solver on a wide store",
            "",
            f"Measured in a separate run (`python benchmarks/scale.py --wide {wide['n']} "
            f"{wide['d']}`, commit `{wm.get('commit')}`, {wm['cpu']}, {wm['cores']} cores; "
            f"{wm['date']}; 1-minute load average {min(lo):.1f} to {max(lo):.1f} before the steps"
            + (
                ": **the load was high**, other engineers' work ran alongside"
                if max(lo) > 1.5 * (wm.get("cores") or 2)
                else ""
            )
            + f"). A {wide['n']} × {wide['d']} float32 store ({wide['gib']:.1f} GiB, "
            f"{wide['chunk_rows']} rows per chunk, zstd), fitted with "
            + (
                "`mspca_dask.fit(path, n_components=10)` with every default"
                if wide.get("location") == "auto"
                else "`mspca_dask.fit(path, n_components=10, location=None)`"
            )
            + f' (`solver="auto"` picks the {wide["solver"]} path), reads and fits alternating '
            f"({' '.join(['R'] + ['F R'] * len(wide['fit_seconds']))}).",
            "",
            "| streaming reads s | fits s | passes | fit / read (read-equivalents) | passes' "
            "own time / read | largest spike bound | peak RSS MiB |",
            "|---|---|---|---|---|---|---|",
            f"| {', '.join(f'{x:.1f}' for x in rs)} | {', '.join(f'{x:.1f}' for x in fs)} | "
            f"{wide['n_passes']} | **{wide['read_equivalents']:.1f}** | "
            f"{wide['pass_seconds_over_read']:.1f} | {max(wide['bounds'][:2]):.1e} | "
            f"{max(wide['peak_rss']) / 2**20:.0f} |",
            "",
            "Passes: "
            + ", ".join(f"`{q['name']}` {q['seconds']:.1f} s" for q in wide["passes"])
            + ".",
        ]
    loc = payload.get("location_study") or []
    if loc:
        md += [
            "",
            "## The verdict's group test on the driver",
            "",
            '`location="auto"` runs the verdict\'s group test on the (n, k) score matrix on the '
            "driver (`mspca_dask.verdict.fit_groups`: mixtures and unimodal twins on at most "
            "4,000 rows, then every row's group). Its time, for k = 2 scores with 10 % "
            "shifted rows"
            + (
                f" (measured in a separate run, {payload['location_study_date']})"
                if payload.get("location_study_date")
                else ""
            )
            + ":",
            "",
            "| n | seconds | µs per sample |",
            "|---|---|---|",
        ]
        md += [
            f"| {r['n']} | {r['seconds']:.2f} | {1e6 * r['seconds'] / r['n']:.0f} |" for r in loc
        ]
    dump("scale", out, payload, md)


def merge(out: Path, other: Path) -> None:
    """Add the size points measured in another run (e.g. the big point) and re-render."""
    payload = json.loads((out / "scale.json").read_text())
    extra = json.loads((other / "scale.json").read_text())
    have = {p["label"] for p in payload["points"]}
    payload["points"] += [p for p in extra["points"] if p["label"] not in have]
    payload["points"].sort(key=lambda p: p["gb"])
    for key in ("chunking", "location_study"):
        if extra.get(key):
            payload[key] = extra[key]
    payload.setdefault("merged_runs", []).append(
        {
            **extra["meta"],
            "parts": [p["label"] for p in extra["points"]]
            + (["chunk study"] if extra.get("chunking") else []),
        }
    )
    pts = payload["points"]
    payload["linear_fit_seconds"] = linear_fit([p["gb"] for p in pts], [p["seconds"] for p in pts])
    plot(pts, payload["baseline_rss"], out / "scale.png")
    report(payload, out, True)


def wide_point(out: Path, n: int, d: int, chunk_mb: float, K: int, fits: int) -> None:
    """Read-equivalents of a randomized fit on a wide store, merged into ``out/scale.json``."""
    rows = max(1, int(chunk_mb * 1e6 / (4 * d)))
    meta = machine_info()
    tmp = Path(tempfile.mkdtemp(prefix="mspca-wide-"))
    path = str(tmp / "wide.zarr")
    try:
        written = write_zarr_store(path, n, d, rows)
        print(f"[wide] wrote {n * d * 4 / 2**30:.2f} GiB in {written['write_seconds']:.0f} s")
        reads, runs, load = [], [], []
        for i in range(2 * fits + 1):  # R F R F R: alternating, same load drift for both
            load.append([round(x, 2) for x in os.getloadavg()])
            if i % 2 == 0:
                reads.append(read_limit(path, 1)["seconds"])
                print(f"[wide] read {reads[-1]:.1f} s", flush=True)
            else:
                runs.append(fit_once(repr(path), K, "auto", WIDE_LOCATION))
                print(
                    f"[wide] fit {runs[-1]['seconds']:.1f} s, {runs[-1]['n_passes']} passes "
                    f"({runs[-1]['solver']})",
                    flush=True,
                )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    finish_info(meta)
    fit_s, read_s = median([r["seconds"] for r in runs]), median(reads)
    point = {
        "meta": meta,
        "n": n,
        "d": d,
        "gib": n * d * 4 / 2**30,
        "chunk_rows": rows,
        "disk_gb": written["disk_bytes"] / GB,
        "read_seconds": reads,
        "fit_seconds": [r["seconds"] for r in runs],
        "peak_rss": [r["peak_rss"] for r in runs],
        "n_passes": runs[0]["n_passes"],
        "location": WIDE_LOCATION,
        "solver": runs[0]["solver"],
        "passes": runs[0]["passes"],
        "read_equivalents": fit_s / read_s,
        "pass_seconds_over_read": sum(p["seconds"] for p in runs[0]["passes"]) / read_s,
        "bounds": runs[0]["bounds"][:4],
        "eigenvalues": runs[0]["eigenvalues"][:4],
        "stable": runs[0]["stable"][:4],
        "load_average_before_steps": load,
    }
    target = out / "scale.json"
    payload = json.loads(target.read_text()) if target.is_file() else None
    if payload is None:
        raise SystemExit(f"{target} not found: run the size points first")
    payload["wide"] = point
    report(payload, out, True)


def location_study(sizes: list[int]) -> list[dict[str, Any]]:
    from mspca_dask.verdict import fit_groups

    out = []
    for n in sizes:
        rng = np.random.default_rng(0)
        T = rng.standard_normal((n, 2))
        T[: n // 10, 0] += 6
        t0 = time.perf_counter()
        fit_groups(T)
        out.append({"n": n, "seconds": time.perf_counter() - t0})
        print(f"[location] n={n}: {out[-1]['seconds']:.2f} s", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="tiny sizes, for a smoke test")
    ap.add_argument("--sizes-gb", type=float, nargs="*", default=[0.25, 0.5, 1, 2])
    ap.add_argument("--big-gb", type=float, default=32.0, help="0 to skip the big point")
    ap.add_argument("--features", type=int, default=500)
    ap.add_argument("--chunk-mb", type=float, default=32.0)
    ap.add_argument("--components", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--chunk-study-gb", type=float, default=0.5)
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--no-chunk-study", action="store_true")
    ap.add_argument(
        "--merge",
        type=Path,
        default=None,
        help="add the points of DIR/scale.json to --out's results and re-render",
    )
    ap.add_argument(
        "--wide",
        type=int,
        nargs=2,
        metavar=("N", "D"),
        default=None,
        help="only the wide read-equivalents point, merged into --out's scale.json",
    )
    ap.add_argument("--wide-fits", type=int, default=2)
    ap.add_argument(
        "--group-test",
        action="store_true",
        help="only the group test's driver time, merged into --out's scale.json",
    )
    args = ap.parse_args()
    if args.merge is not None:
        merge(args.out, args.merge)
        return
    if args.group_test:
        payload = json.loads((args.out / "scale.json").read_text())
        payload["location_study"] = location_study(GROUP_TEST_SIZES)
        payload["location_study_date"] = time.strftime("%Y-%m-%d %H:%M")
        report(payload, args.out, True)
        return
    if args.wide is not None:
        wide_point(args.out, *args.wide, args.chunk_mb, args.components, args.wide_fits)
        return
    if args.quick:
        args.sizes_gb, args.big_gb, args.features = [0.005, 0.015], 0.0, 200
        args.repeats, args.chunk_study_gb, args.chunk_mb = 1, 0.01, 2.0
    K, d = args.components, args.features
    ell = K + 10 + 5 + 3  # Krylov block: K + oversampling + knockoffs + 3
    meta = {**machine_info(), "quick": args.quick, "d": d, "K": K, "krylov_block": ell}
    payload: dict[str, Any] = {
        "meta": meta,
        "baseline_rss": run_measured(BASELINE_CODE)["peak_rss"],
        "points": [],
        "chunking": [],
        "linear_fit_seconds": {},
        "location_study": [],
    }
    tmp = Path(tempfile.mkdtemp(prefix="mspca-scale-"))
    png = True

    def save() -> None:
        pts = payload["points"]
        if len(pts) >= 2:
            payload["linear_fit_seconds"] = linear_fit(
                [p["gb"] for p in pts], [p["seconds"] for p in pts]
            )
        else:
            payload["linear_fit_seconds"] = {"intercept": 0.0, "slope": 0.0, "r2": 1.0}
        finish_info(meta)
        args.out.mkdir(parents=True, exist_ok=True)
        if pts:
            plot(pts, payload["baseline_rss"], args.out / "scale.png")
        report(payload, args.out, png)

    try:
        for gb in args.sizes_gb:
            payload["points"].append(
                one_point(
                    tmp, gb, d, args.chunk_mb, K, args.repeats, args.repeats, ell, f"size-{gb:g}GB"
                )
            )
            save()
        if not args.no_chunk_study:
            payload["location_study"] = location_study(
                [2000, 5000] if args.quick else GROUP_TEST_SIZES
            )
        study = [(mb, 1) for mb in (2, 8, 32, 128)] + [(8, 4)]
        if args.quick:
            study = [(0.5, 4)]
        if args.no_chunk_study:
            study = []
        for mb, factor in study:
            payload["chunking"].append(
                one_point(
                    tmp,
                    args.chunk_study_gb,
                    d,
                    mb,
                    K,
                    1,
                    1,
                    ell,
                    f"chunk-{mb:g}MB-x{factor}",
                    rechunk=factor,
                )
            )
            save()
        if args.big_gb > 0:
            payload["points"].append(
                one_point(
                    tmp, args.big_gb, d, args.chunk_mb, K, 1, 1, ell, f"size-{args.big_gb:g}GB"
                )
            )
            save()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    save()
    print(json.dumps(payload["linear_fit_seconds"]))


if __name__ == "__main__":
    main()
