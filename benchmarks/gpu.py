"""MS-PCA on CuPy-backed chunks (one GPU) against the same fit on NumPy chunks, in one run.

Data: the paper's mixture (one covariance spike, a 10 % shifted cluster) written as two float32
Zarr stores (:func:`_bench.write_zarr_store`): a *tall* one with row chunks (more samples than
features: the passes multiply row chunks) and a *wide* one with more features than samples in
square-ish blocks (the dual orientation: the passes multiply the transposed blocks, and the
location step also takes every group's sum).  For each store and solver (``exact``,
``randomized``) the store is fitted three ways with the defaults otherwise:

* ``cpu``: chunks read from the store as NumPy arrays (the threaded scheduler, every core);
* ``gpu``: every chunk read from the store and copied to the GPU in its task
  (``da.from_zarr(path).map_blocks(cupy.asarray)``), so each pass pays the read and the copy;
* ``gpu, chunks held``: the same array persisted on the GPU first (``.persist()``), so the
  passes only multiply.

Reported per fit: the median wall time over ``--repeats``, the passes, and the agreement with
the ``cpu`` fit of the same solver: the largest relative eigenvalue difference, the smallest
``|cos|`` between matching eigenvectors, and whether the verdicts and the group memberships are
the same.  Without CuPy or a GPU the script says so and exits 0 (nothing is written).

Run:  python benchmarks/gpu.py [--n 100000] [--d 2000] [--chunk-rows 10000]
          [--wide-n 4000] [--wide-d 40000] [--wide-chunk 4000] [--repeats 3]
Writes benchmarks/results/gpu.{md,json} (or ``--out DIR``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import numpy as np
from _bench import RESULTS, dump, finish_info, machine_info, machine_line, median, write_zarr_store

import mspca_dask

SOLVERS = ("exact", "randomized")


def _gpu() -> Any | None:
    """CuPy when it is importable and sees a GPU, else None."""
    try:
        import cupy
    except ImportError:
        return None
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return None
    except Exception:  # noqa: BLE001 - no driver, no device: no GPU to measure
        return None
    return cupy


def _device_name(cupy: Any) -> str:
    props = cupy.cuda.runtime.getDeviceProperties(0)
    name = props["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def _agreement(ref: Any, res: Any) -> dict[str, Any]:
    rel = np.abs(res.eigenvalues - ref.eigenvalues) / np.abs(ref.eigenvalues)
    cos = np.abs(np.sum(res.eigenvectors * ref.eigenvectors, axis=1))  # (K, d): rows
    return {
        "max_rel_eigenvalue_diff": float(rel.max()),
        "min_abs_cos": float(cos.min()),
        "same_verdicts": bool(np.array_equal(res.verdicts, ref.verdicts)),
        "same_groups": bool(
            (res.groups is None and ref.groups is None)
            or (
                res.groups is not None
                and ref.groups is not None
                and np.array_equal(res.groups, ref.groups)
            )
        ),
    }


def _timed_fit(data: da.Array, solver: str, repeats: int) -> tuple[Any, list[float]]:
    times, res = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        res = mspca_dask.fit(data, n_components=10, solver=solver, random_state=0)
        times.append(time.perf_counter() - t0)
    return res, times


def _stores(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The stores to fit: name, shape and chunks."""
    return [
        {"store": "tall", "n": args.n, "d": args.d, "chunks": (args.chunk_rows, args.d)},
        {
            "store": "wide",
            "n": args.wide_n,
            "d": args.wide_d,
            "chunks": (args.wide_chunk, args.wide_chunk),
        },
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--d", type=int, default=2_000)
    ap.add_argument("--chunk-rows", type=int, default=10_000)
    ap.add_argument("--wide-n", type=int, default=4_000)
    ap.add_argument("--wide-d", type=int, default=40_000)
    ap.add_argument("--wide-chunk", type=int, default=4_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    cupy = _gpu()
    if cupy is None:
        print("gpu.py: CuPy with a visible GPU is needed; skipped (nothing written).")
        return 0
    warnings.simplefilter("ignore")
    meta = machine_info()
    meta["gpu"] = _device_name(cupy)
    meta["versions"]["cupy"] = cupy.__version__
    stores = _stores(args)
    rows: list[dict[str, Any]] = []
    tmp = tempfile.mkdtemp()
    try:
        for spec in stores:
            path = f"{tmp}/{spec['store']}.zarr"
            spec["written"] = write_zarr_store(
                path, spec["n"], spec["d"], spec["chunks"][0], chunk_cols=spec["chunks"][1]
            )
            cpu = da.from_zarr(path)
            gpu = cpu.map_blocks(cupy.asarray)
            with dask.config.set(scheduler="threads"):
                held = gpu.persist()
                for solver in SOLVERS:
                    ref, t_ref = _timed_fit(cpu, solver, args.repeats)
                    for way, data in (("cpu", cpu), ("gpu", gpu), ("gpu, chunks held", held)):
                        res, times = (
                            (ref, t_ref) if way == "cpu" else _timed_fit(data, solver, args.repeats)
                        )
                        rows.append(
                            {
                                "store": spec["store"],
                                "solver": solver,
                                "chunks": way,
                                "seconds": median(times),
                                "all_seconds": times,
                                "passes": int(res.n_passes),
                                "n_groups": int(res.n_groups),
                                **_agreement(ref, res),
                            }
                        )
                        print(json.dumps(rows[-1]), flush=True)
                del held
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    meta["stores"] = stores
    finish_info(meta)
    store_lines = [
        f"{spec['store']}: {spec['n']:,} × {spec['d']:,} float32 Zarr, chunks of "
        f"{spec['chunks'][0]:,} × {spec['chunks'][1]:,}"
        for spec in stores
    ]
    md = [
        "# MS-PCA on CuPy-backed chunks (one GPU) against NumPy chunks",
        "",
        f"Command: `python benchmarks/gpu.py --n {args.n} --d {args.d} "
        f"--chunk-rows {args.chunk_rows} --wide-n {args.wide_n} --wide-d {args.wide_d} "
        f"--wide-chunk {args.wide_chunk} --repeats {args.repeats}`  ",
        f"Machine: {machine_line(meta)} GPU: {meta['gpu']}, CuPy {cupy.__version__}.  ",
        f"Commit: `{meta['commit']}`",
        "",
        "Data: the paper's mixture (one covariance spike, a 10 % shifted cluster) in two stores "
        f"({'; '.join(store_lines)}); `n_components=10`, defaults otherwise.",
        "",
        "| store | solver | chunks | seconds (median) | passes | groups | "
        "max rel. eigenvalue diff | min abs cos | same verdicts | same groups |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *(
            f"| {r['store']} | {r['solver']} | {r['chunks']} | {r['seconds']:.2f} | "
            f"{r['passes']} | {r['n_groups']} | "
            f"{r['max_rel_eigenvalue_diff']:.1e} | {r['min_abs_cos']:.6f} | "
            f"{'yes' if r['same_verdicts'] else 'no'} | {'yes' if r['same_groups'] else 'no'} |"
            for r in rows
        ),
        "",
        "How to read: each row is one way of holding the same store's chunks; the agreement "
        "columns compare its fit with the NumPy-chunk fit of the same store and solver (the "
        "first row of each compares that fit with itself). `tall` has more samples than "
        "features and row chunks; `wide` has more features than samples, so the fit runs in "
        "the dual orientation over transposed blocks, and its location step also takes each "
        "group's sum; `groups` counts the groups the location step found. `gpu` reads every "
        "chunk from the store and copies it to the GPU on every pass; `gpu, chunks held` keeps "
        "the chunks on the GPU, so its time is the passes' arithmetic and the host-side linear "
        "algebra. The CPU rows use every core of the machine named above; the GPU and the CPU "
        "were measured in the same run. The first GPU fit of the run also pays for CuPy compiling "
        "its kernels and starting cuBLAS (its time is in the JSON file); the medians do not "
        "depend on that one fit.",
    ]
    dump("gpu", args.out, {"meta": meta, "rows": rows}, md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
