"""The whole genomics job against ``plink2 --pca approx`` and ``plink2 --pca``, same cohort.

    python benchmarks/genomics_vs_plink2.py                 # 4000 CEU + 500 YRI + 500 CHB
    python benchmarks/genomics_vs_plink2.py --samples 1000  # a smaller cohort, same shape
    python benchmarks/genomics_vs_plink2.py --ld 500,0.2 --exact-repeats 0 \
        --name genomics_vs_plink2_ld     # LD pruning in both: [ld] vs --indep-pairwise

The cohort is simulated once with stdpopsim (HomSap ``OutOfAfrica_3G09``, chr22 10-40 Mb;
80 % CEU, 10 % YRI, 10 % CHB) and written as VCF Zarr by bio2zarr's tskit2zarr
(:func:`mspca_dask.genomics.simulate_cohort`), then as a PLINK 1 fileset by bed-reader's
``create_bed`` (alternate-allele counts as A1); both are cached under ``benchmarks/_data/``.

Timed, alternating, ``--repeats`` times each (medians reported), every one in its own process
with its peak resident memory sampled (process tree):

* ``plink2 --bfile ... --maf 0.05 --pca approx 10 --threads 2``;
* ``plink2 --bfile ... --maf 0.05 --pca 10 --threads 2`` (exact GRM);
* the genomics job, ``python -m pipelines.genomics run`` (CEU reference, 10 components,
  5 knockoffs, report on, ``[compute] workers = 2``): QC, compaction, MS-PCA with its
  certified spectra and knockoffs, result and report written.

It then checks that the library's plain PCA (all-sample Patterson scaling
``(g − 2p)/√(2p(1 − p))``, ``location=None``: no knockoff decision involved) gives the same
top PCs as ``plink2 --pca`` (|correlation| of the sample scores per PC).  PLINK 2's
variance-standardised GRM uses the same scaling (its default; ``--pca`` without
``meanimpute`` imputes missing dosages at the mean, as we do).

PLINK 2 comes from Debian's ``plink2`` package (``apt-get install plink2``); without it the
benchmark says so and exits 0.  Debian's ``plink2`` does its linear algebra in whatever
``libblas.so.3`` / ``liblapack.so.3`` the system provides.  ``apt-get install plink2`` alone
brings the reference BLAS (``libblas3``), with which ``--pca approx`` ran about three times
slower on the 5,000-sample cohort than with OpenBLAS.  So install OpenBLAS too
(``apt-get install libopenblas0-pthread``) to compare against PLINK 2 at its best; the
results record which library PLINK 2 loaded, and the benchmark warns when it is the reference
BLAS.  Results: ``benchmarks/results/genomics_vs_plink2.md`` and
``.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _bench import (  # noqa: E402
    RESULTS,
    ROOT,
    SHARED_NOTE,
    PeakRSS,
    commit_line,
    finish_info,
    machine_info,
    machine_line,
    median,
)

DATA = Path(__file__).resolve().parent / "_data"
THREADS = 2
K = 10


def _cohort(n: int, writer_processes: int = 0) -> dict[str, Any]:
    from mspca_dask import genomics as gx

    pops = {"CEU": n * 8 // 10, "YRI": n // 10, "CHB": n - n * 8 // 10 - n // 10}
    cfg = gx.SimulateConfig(
        populations=pops,
        left=10_000_000.0,
        length=30_000_000.0,
        seed=1,
        variants_chunk_size=10_000,
        writer_processes=writer_processes,
    )
    tag = f"ooa{n}"
    t0 = time.perf_counter()
    sim = gx.simulate_cohort(DATA / f"{tag}.vcz", metadata=DATA / f"{tag}.tsv", config=cfg)
    sim["seconds"] = time.perf_counter() - t0
    sim["populations_config"] = pops
    sim["tag"] = tag
    return sim


def _bed(sim: dict[str, Any]) -> Path:
    """The PLINK 1 fileset of the cohort (bed-reader's streaming writer), written once.

    ``create_bed`` takes one variant at a time, so memory stays at one chunk of the VCF Zarr
    store whatever the cohort (a 50,000-sample cohort's dense matrix would not fit).
    """
    import zarr
    from bed_reader import create_bed

    prefix = DATA / sim["tag"]
    bed = prefix.with_suffix(".bed")
    if bed.exists() and prefix.with_suffix(".bim").exists() and prefix.with_suffix(".fam").exists():
        return prefix
    from mspca_dask.genomics import compact as _compact

    g = zarr.open_group(sim["store"], mode="r")
    gt = g["call_genotype"]
    nv, ns = int(gt.shape[0]), int(gt.shape[1])
    pos = np.asarray(g["variant_position"][:]).astype(np.int64)
    alleles = np.array([[str(a) for a in row] for row in g["variant_allele"][:]])
    ids = np.array([str(x) for x in g["sample_id"][:]])
    tmp = prefix.parent / f".{prefix.name}.tmp"
    properties = {
        "fid": ids,
        "iid": ids,
        "sid": [f"22:{p}" for p in pos],
        "chromosome": ["22"] * nv,
        "bp_position": pos,
        "allele_1": alleles[:, 1],  # counted: the alternate allele
        "allele_2": alleles[:, 0],
    }
    step = int(gt.chunks[0])
    with create_bed(tmp.with_suffix(".bed"), ns, nv, properties=properties, count_A1=True) as out:
        for v0 in range(0, nv, step):
            calls = _compact._calls_block(np.asarray(gt[v0 : v0 + step])).astype(np.int8)
            calls[calls < 0] = -127  # bed-reader's missing value for int8
            for row in calls:
                out.write(row)
    for ext in (".bim", ".fam", ".bed"):
        os.replace(tmp.with_suffix(ext), prefix.with_suffix(ext))
    return prefix


def _plink_blas() -> str:
    """The BLAS library Debian's ``plink2`` loads: its ``libblas.so.3`` as ``ldd`` resolves it.

    ``/usr/bin/plink2`` is a script that runs one of several builds (by CPU flags); they all
    link the same ``libblas.so.3``, which Debian's alternatives point at OpenBLAS or at the
    reference BLAS.
    """
    exe = Path(shutil.which("plink2") or "plink2").resolve()
    with exe.open("rb") as f:
        is_binary = f.read(4) == b"\x7fELF"
    builds = [exe] if is_binary else sorted(exe.parent.glob("plink2-*"))
    for build in builds:
        try:
            out = subprocess.run(["ldd", str(build)], capture_output=True, text=True).stdout
        except OSError:
            break
        for line in out.splitlines():
            if "libblas.so" in line and "=>" in line:
                path = Path(os.path.realpath(line.split("=>", 1)[1].split("(")[0].strip()))
                kind = "OpenBLAS" if "openblas" in str(path).lower() else "reference BLAS"
                # the library's folder and name (openblas-pthread/libblas.so.3), not its path
                return f"{kind} ({path.parent.name}/{path.name})"
    return "unknown (ldd found no libblas.so)"


def _timed(cmd: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT
    )
    with PeakRSS(proc.pid) as mem:
        out, _ = proc.communicate()
    seconds = time.perf_counter() - t0
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd[:3])} ... failed ({proc.returncode}):\n{out[-3000:]}")
    return {"seconds": seconds, "peak_rss": mem.peak, "log": out}


def _plink(
    prefix: Path, approx: bool, out: Path, ld: tuple[float, float] | None = None
) -> dict[str, Any]:
    """``plink2 --pca``; with ``ld``, ``--indep-pairwise`` first and its ``prune.in`` kept.

    Both steps are timed (their wall times add up; the peak is the larger)."""
    pruned: dict[str, Any] | None = None
    extract: list[str] = []
    if ld is not None:
        pruned = _timed(
            [
                "plink2",
                "--bfile",
                str(prefix),
                "--maf",
                "0.05",
                "--indep-pairwise",
                f"{ld[0]:g}kb",
                "1",
                f"{ld[1]:g}",
                "--threads",
                str(THREADS),
                "--out",
                f"{out}-prune",
            ]
        )
        extract = ["--extract", f"{out}-prune.prune.in"]
    cmd = [
        "plink2",
        "--bfile",
        str(prefix),
        "--maf",
        "0.05",
        *extract,
        "--pca",
        *(["approx"] if approx else []),
        str(K),
        "--threads",
        str(THREADS),
        "--out",
        str(out),
    ]
    res = _timed(cmd)
    if pruned is not None:
        with open(f"{out}-prune.prune.in") as f:
            res["variants_kept_after_ld"] = sum(1 for line in f if line.strip())
        res["prune_seconds"] = pruned["seconds"]
        res["seconds"] += pruned["seconds"]
        res["peak_rss"] = max(res["peak_rss"], pruned["peak_rss"])
    return res


def _job_config(
    sim: dict[str, Any],
    out: Path,
    budget: str | None,
    report: bool = True,
    ld: tuple[float, float] | None = None,
) -> Path:
    ld_section = (
        f'[ld]\nwindow_kb = {ld[0]:g}\nr2 = {ld[1]:g}\nexclude_regions = "none"\n' if ld else ""
    )
    text = (
        textwrap.dedent(
            f"""
        [job]
        name = "benchmark-{sim["tag"]}"
        [input]
        store = "{sim["store"]}"
        sample_metadata = "{sim["metadata"]}"
        color_by = "population"
        [reference]
        metadata_column = "population"
        metadata_values = ["CEU"]
        [qc]
        min_maf = 0.05
        [pca]
        n_components = {K}
        n_knockoffs = 5
        [compute]
        scheduler = "threads"
        workers = {THREADS}
        {f'memory_budget = "{budget}"' if budget else ""}
        [output]
        dir = "{out}"
        overwrite = true
        [report]
        enabled = {"true" if report else "false"}
        """
        )
        + ld_section
    )
    path = out.parent / f"{out.name}{'' if report else '-noreport'}.toml"
    path.write_text(text)
    return path


def job_result(out: Path) -> dict[str, Any]:
    """What the benchmarks record of a genomics job's result in ``out``."""
    from mspca_dask import genomics as gx

    ds = gx.open_genomics_result(out / gx.RESULT_NAME)
    return {
        "n_passes": int(ds.attrs["n_passes"]),
        "variants_fitted": int(np.asarray(ds["variant_included"]).sum()),
        "timings": json.loads(ds.attrs["timings"]),
        "verdicts": [str(v) for v in ds["verdict"].values],
        "eigenvalues": [float(v) for v in ds["eigenvalue"].values],
    }


def _ours(cfg: Path, out: Path) -> dict[str, Any]:
    shutil.rmtree(out, ignore_errors=True)  # else the job finds its result up to date
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT)
    env["DASK_NUM_WORKERS"] = str(THREADS)
    r = _timed([sys.executable, "-m", "pipelines.genomics", "run", str(cfg)], env)
    r.update(job_result(out))
    fit_line = [ln for ln in r.pop("log").splitlines() if "fit: solver" in ln]
    r["fit"] = fit_line[-1].split("fit: ", 1)[1] if fit_line else "?"
    return r


def _plain_pca_scores(sim: dict[str, Any], spill: Path) -> tuple[np.ndarray, dict[str, Any]]:
    """Our plain PCA: QC as the job, all-sample Patterson scaling, ``location=None``.

    A compact matrix over the default memory budget goes to a temporary store in ``spill``.
    """
    import mspca_dask
    from mspca_dask import genomics as gx
    from mspca_dask._execution import Executor
    from mspca_dask.genomics import compact as _compact
    from mspca_dask.genomics import preprocess

    vz = gx.open_vcf_zarr(sim["store"])
    ex = Executor("threads")
    assert vz.calls is not None
    stats = preprocess.GenotypeStats.from_pass(
        ex.run("stats", _compact.call_statistics(vz.calls)), vz.n_samples
    )
    maf = stats.minor_allele_frequency
    keep = (maf > 0) & (maf >= 0.05) & (stats.missing_rate <= 0.1)
    p = stats.allele_frequency[keep]
    has_missing = bool((stats.n_called[keep] < vz.n_samples).any())
    t0 = time.perf_counter()
    with _compact.compact_calls(
        vz.calls, keep, np.ones(vz.n_samples, bool), ex, has_missing=has_missing, spill_dir=spill
    ) as compact:
        X = _compact.standardized(compact, 2 * p, preprocess.patterson_scale(p))
        res = mspca_dask.fit(X, n_components=K, location=None, random_state=0)
        # plain PCA's axes: ``res.eigenvectors`` gives a stable pair with displaced groups
        # its within-group spike instead
        scores = np.asarray((X @ res.pca_eigenvectors.T).compute(scheduler="threads"))
    info = {
        "variants_kept": int(keep.sum()),
        "seconds": time.perf_counter() - t0,
        "solver": res.params.get("solver"),
    }
    return scores, info


def _profile(cfg: Path, out: Path) -> dict[str, Any]:
    """One more run of the job in this process, with every pass it ran (name, seconds)."""
    import mspca_dask.genomics as gx

    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    outcome = gx.run_job(gx.load_config(cfg))
    seconds = time.perf_counter() - t0
    return {"seconds_in_process": seconds, "passes": list(outcome.passes)}


#: The biobank of the issue's estimate, and the cluster it runs on.
BIOBANK = {"samples": 500_000, "variants": 1_000_000, "workers": 20, "threads_per_worker": 2}


def _biobank(
    profile: dict[str, Any],
    n_variants: int,
    n_samples: int,
    kept: int,
    in_memory: bool,
    cores_here: int = THREADS,
) -> dict[str, Any]:
    """What the biobank costs on the cluster, scaled from this run's measured throughput.

    Per core and second, from the in-process run's passes: raw genotype calls decoded and
    summarised by the statistics pass; compact-matrix entries read (the compaction pass);
    compact-matrix entries multiplied by one fit pass (median of the passes after the first:
    Krylov, location and within-group passes, each counted; the first pass apart).  Scaled
    linearly to the biobank's calls and entries on ``workers × threads`` cores, with this
    run's kept fraction and pass count: no network, no scheduler overhead, perfect parallel
    speed-up, so a lower bound of the order of magnitude, not a promise.
    """
    passes = {p["name"]: p["seconds"] for p in profile["passes"]}
    later = [
        p["seconds"]
        for p in profile["passes"]
        if p["name"].startswith("mspca-") and p["name"] != "mspca-stats"
    ]
    if "genomics-statistics" not in passes or not later:
        return {}
    raw_calls = n_variants * n_samples
    entries = kept * n_samples
    rate_raw = raw_calls / (passes["genomics-statistics"] * cores_here)
    rate_fit = entries / (median(later) * cores_here)
    rate_first = entries / (passes.get("mspca-stats", median(later)) * cores_here)
    load = passes.get("genomics-compact-load")
    rate_load = entries / (load * cores_here) if load else None
    b = BIOBANK
    cores = b["workers"] * b["threads_per_worker"]
    b_raw = b["variants"] * b["samples"]
    b_entries = round(b["variants"] * kept / n_variants) * b["samples"]
    n_fit = 1 + len(later)
    seconds = {
        "statistics": b_raw / rate_raw / cores,
        "compaction": (b_entries / rate_load / cores) if rate_load else 0.0,
        "fit_first_pass": b_entries / rate_first / cores,
        "fit_krylov_passes": len(later) * b_entries / rate_fit / cores,
    }
    return {
        **b,
        "compact_in_memory": in_memory,
        "kept_fraction": kept / n_variants,
        "fit_passes": n_fit,
        "compact_bytes": b_entries,
        "per_core_per_second": {
            "raw_calls_statistics": rate_raw,
            "compact_entries_loaded": rate_load,
            "compact_entries_first_pass": rate_first,
            "compact_entries_krylov_pass": rate_fit,
        },
        "seconds": seconds,
        "total_seconds": sum(seconds.values()),
    }


def _biobank_lines(est: dict[str, Any], measured: str = "the in-process run above") -> list[str]:
    if not est:
        return []
    rate = est["per_core_per_second"]
    sec = est["seconds"]
    return [
        "## What a biobank would cost, on paper",
        "",
        f"{est['samples']:,} samples × {est['variants']:,} variants on a Dask cluster of "
        f"{est['workers']} workers × {est['threads_per_worker']} threads, scaled linearly from "
        f"the throughput per core measured in {measured}: the statistics pass "
        f"summarised {rate['raw_calls_statistics'] / 1e6:.0f} M raw calls per core-second "
        "(decompression included); a fit pass multiplied "
        f"{rate['compact_entries_krylov_pass'] / 1e6:.0f} M compact-matrix entries per "
        f"core-second (the passes after the first; "
        f"{rate['compact_entries_first_pass'] / 1e6:.0f} M in the first "
        "pass, which also takes the statistics and the knockoff images); "
        + (
            f"loading the compact matrix read {rate['compact_entries_loaded'] / 1e6:.0f} M "
            "entries per core-second"
            if rate["compact_entries_loaded"]
            else "the compact matrix needed no loading pass: the statistics pass held its rows "
            "in memory as it read them (the local threaded scheduler; on a cluster the workers "
            "write them to disk, a cost this estimate leaves out)"
            if est["compact_in_memory"]
            else "the compact matrix was not loaded (over the memory budget, or on a cluster: "
            "every fit pass read it from its temporary Zarr store, and the fit rate above "
            "includes those reads)"
        )
        + ".  Assumed: this cohort's kept fraction "
        f"({est['kept_fraction']:.1%}: a {est['compact_bytes'] / 1e9:.0f} GB int8 compact "
        f"matrix, out of core) and pass count ({est['fit_passes']}), perfect speed-up, no "
        "network or scheduler cost.  A lower bound of the order of magnitude, not a promise:",
        "",
        "| phase | minutes |",
        "|---|---|",
        f"| statistics pass (the raw store, once) | {sec['statistics'] / 60:.1f} |",
        f"| compaction | {sec['compaction'] / 60:.1f} |",
        f"| fit, first pass | {sec['fit_first_pass'] / 60:.1f} |",
        f"| fit, {est['fit_passes'] - 1} later passes (Krylov, location, within-group) | "
        f"{sec['fit_krylov_passes'] / 60:.1f} |",
        f"| **total** | **{est['total_seconds'] / 60:.1f}** |",
        "",
        "Out of core, each fit pass also reads the compact matrix from the workers' disks; at "
        "that size the reads, not the products, may set the pace ("
        + (
            "this cohort's matrix was in memory)."
            if est["compact_in_memory"]
            else "this cohort's matrix was read from disk by every fit pass too)."
        ),
        "",
    ]


def _plink_eigenvec(path: Path, sample_ids: np.ndarray) -> np.ndarray:
    lines = path.read_text().splitlines()
    header = lines[0].lstrip("#").split()
    iid = header.index("IID")
    pcs = [i for i, h in enumerate(header) if h.startswith("PC")]
    rows = {ln.split()[iid]: [float(ln.split()[i]) for i in pcs] for ln in lines[1:]}
    return np.array([rows[s] for s in sample_ids])


HOW_TO_READ = (
    "How to read: one row per command, its median wall time over the alternating repeats, "
    "the peak memory of its process tree and its ratio to `plink2 --pca approx` (below 1: "
    "faster than PLINK 2). The job reads the cohort's VCF Zarr store, PLINK 2 the PLINK 1 "
    "fileset written from it (the same genotypes), with the same filters and threads; with "
    "LD pruning both prune first, and PLINK 2's row holds both of its commands. "
    "The job's rows include its start-up, QC, the verdicts and its outputs; PLINK 2's compute "
    "PCs only. The biobank section scales this run's throughput per core linearly: a lower "
    "bound of the order of magnitude, not a measurement. The PC table says whether the job's "
    "plain PCA spans what PLINK 2's does (|correlation| of the scores, 1 = the same)."
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=5000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--memory-budget", default=None, help="the job's [compute] memory_budget")
    ap.add_argument("--name", default="genomics_vs_plink2")
    ap.add_argument(
        "--exact-repeats", type=int, default=None, help="runs of plink2 --pca (default: --repeats)"
    )
    ap.add_argument("--profile", action="store_true", help="one more run in process, per pass")
    ap.add_argument(
        "--prepare",
        action="store_true",
        help="only simulate the cohort and write its PLINK fileset (cached), then exit",
    )
    ap.add_argument(
        "--writer-processes",
        type=int,
        default=0,
        help="worker processes bio2zarr encodes the simulated cohort with",
    )
    ap.add_argument(
        "--ld",
        default=None,
        metavar="WINDOW_KB,R2",
        help="prune by pairwise r² first, e.g. 500,0.2: the job's [ld] section against "
        "plink2 --indep-pairwise WINDOW_KBkb 1 R2 then --extract (both steps timed)",
    )
    args = ap.parse_args(argv)
    ld = tuple(float(v) for v in args.ld.split(",")) if args.ld else None
    if ld is not None and len(ld) != 2:
        ap.error("--ld takes WINDOW_KB,R2")
    if shutil.which("plink2") is None:
        print("plink2 not found: install it with `apt-get install plink2`; skipping.")
        return 0
    plink_blas = _plink_blas()
    print(f"plink2 loads {plink_blas}")
    if plink_blas.startswith("reference"):
        print(
            "warning: plink2 runs on the reference BLAS here, about 3x slower than with "
            "OpenBLAS; `apt-get install libopenblas0-pthread` compares against PLINK 2 at its best"
        )
    DATA.mkdir(parents=True, exist_ok=True)
    meta = machine_info()
    sim = _cohort(args.samples, args.writer_processes)
    t0 = time.perf_counter()
    prefix = _bed(sim)
    bed_seconds = time.perf_counter() - t0
    if args.prepare:
        print(f"cohort {sim['store']} ({sim['seconds']:.0f} s); fileset {bed_seconds:.0f} s")
        return 0
    work = DATA / f"runs-{sim['tag']}"
    work.mkdir(exist_ok=True)
    out = work / "result"
    cfg = _job_config(sim, out, args.memory_budget, ld=ld)
    # The same job without the HTML report: the outputs plink2 writes too (scores, loadings,
    # eigenvalues, as the result dataset and its summary), the like-for-like comparison.
    cfg_bare = _job_config(sim, out, args.memory_budget, report=False, ld=ld)
    runs: dict[str, list[dict[str, Any]]] = {
        "plink2_approx": [],
        "plink2_exact": [],
        "ours": [],
        "ours_noreport": [],
    }
    loads: list[list[float]] = []
    for r in range(args.repeats):
        exact_runs = args.repeats if args.exact_repeats is None else args.exact_repeats
        names = ("plink2_approx", "ours", "ours_noreport") + (
            ("plink2_exact",) if r < exact_runs else ()
        )
        for name in names:
            loads.append([round(x, 2) for x in os.getloadavg()])
            if name.startswith("ours"):
                res = _ours(cfg if name == "ours" else cfg_bare, out)
            else:
                res = _plink(prefix, name == "plink2_approx", work / name, ld)
                res.pop("log")
            res["load_before"] = loads[-1]
            runs[name].append(res)
            print(
                f"repeat {r}: {name} {res['seconds']:.1f} s, peak {res['peak_rss'] / 2**20:.0f} MiB"
            )
    profile = _profile(cfg, out) if args.profile else {"passes": [], "seconds_in_process": None}
    scores, plain = _plain_pca_scores(sim, work)
    from mspca_dask import genomics as gx

    ids = gx.open_vcf_zarr(sim["store"]).sample_id.astype(str)
    # The exact GRM is n x n: at 50,000 samples 20 GB and hours, so large cohorts skip it
    # (--exact-repeats 0) and check our PCs against --pca approx instead.
    with_exact = bool(runs["plink2_exact"])
    approx = _plink_eigenvec(work.joinpath("plink2_approx.eigenvec"), ids)
    ref = _plink_eigenvec(work.joinpath("plink2_exact.eigenvec"), ids) if with_exact else approx
    corr = [abs(float(np.corrcoef(scores[:, k], ref[:, k])[0, 1])) for k in range(K)]
    corr_approx = [abs(float(np.corrcoef(approx[:, k], ref[:, k])[0, 1])) for k in range(K)]
    finish_info(meta)
    runs = {k: v for k, v in runs.items() if v}
    med = {k: median([x["seconds"] for x in v]) for k, v in runs.items()}
    peak = {k: max(x["peak_rss"] for x in v) for k, v in runs.items()}
    last = runs["ours"][-1]
    payload = {
        "machine": meta,
        "cohort": {
            "model": "HomSap OutOfAfrica_3G09, chr22 10-40 Mb",
            "populations": sim["populations_config"],
            "n_variants": int(len(gx.open_vcf_zarr(sim["store"]).variant_position)),
            "variants_kept": plain["variants_kept"],
            "simulated_seconds": sim["seconds"],
            "reused": bool(sim["reused"]),
            "bed_seconds": bed_seconds,
        },
        "threads": THREADS,
        "plink2_blas": plink_blas,
        "repeats": args.repeats,
        "memory_budget": args.memory_budget,
        "ld": {"window_kb": ld[0], "r2": ld[1]} if ld else None,
        "variants_after_ld": {
            "ours": runs["ours"][-1]["variants_fitted"],
            "plink2": runs["plink2_approx"][-1].get("variants_kept_after_ld"),
        }
        if ld
        else None,
        "median_seconds": med,
        "peak_rss_bytes": peak,
        "ratio_ours_to_plink2_approx": med["ours"] / med["plink2_approx"],
        "ratio_ours_to_plink2_exact": med["ours"] / med["plink2_exact"] if with_exact else None,
        "ratio_ours_noreport_to_plink2_approx": med["ours_noreport"] / med["plink2_approx"],
        "runs": runs,
        "profile": profile,
        "plain_pca": {**plain, "abs_corr_with_plink2_pca": corr},
        "plink2_approx_abs_corr_with_plink2_pca": corr_approx,
    }
    vz_info = gx.open_vcf_zarr(sim["store"])
    payload["biobank_estimate"] = _biobank(
        profile,
        int(len(vz_info.variant_position)),
        int(vz_info.n_samples),
        plain["variants_kept"],
        in_memory="(memory)" in last.get("fit", ""),
    )
    md = [
        "# The genomics job against PLINK 2's PCA, same cohort, same threads",
        "",
        f"Generated by `python benchmarks/genomics_vs_plink2.py --samples {args.samples}"
        + f" --repeats {args.repeats}"
        + (" --profile" if args.profile else "")
        + (f" --memory-budget {args.memory_budget}" if args.memory_budget else "")
        + (f" --exact-repeats {args.exact_repeats}" if args.exact_repeats is not None else "")
        + (f" --name {args.name}" if args.name != "genomics_vs_plink2" else "")
        + (f" --ld {args.ld}" if args.ld else "")
        + f"`. Machine: {machine_line(meta)}",
        "",
        f"Commit: {commit_line(meta, RESULTS / f'{args.name}.json')}.",
        "",
        SHARED_NOTE,
        "",
        HOW_TO_READ,
        "",
        f"Cohort: stdpopsim HomSap OutOfAfrica_3G09, {sim['populations_config']}, chr22 10-40 "
        f"Mb, {payload['cohort']['n_variants']:,} variants, MAF >= 0.05 keeps "
        f"{plain['variants_kept']:,}; VCF Zarr by bio2zarr's tskit2zarr (10,000 variants per "
        "chunk), PLINK 1 fileset by bed-reader's create_bed. Each tool in its own process, "
        f"{THREADS} threads, alternating (approx, ours, ours without report[, exact]) x "
        f"{args.repeats}; peak memory is "
        "the resident set of the process tree, sampled every 20 ms. PLINK 2's BLAS: "
        f"{plink_blas}.",
        "",
        *(
            [
                f"LD pruning by pairwise r² in windows of {ld[0]:g} kb at r² > {ld[1]:g} "
                "(after MAF ≥ 0.05, no regions excluded): the job's `[ld]` section kept "
                f"{payload['variants_after_ld']['ours']:,} variants, `plink2 "
                f"--indep-pairwise {ld[0]:g}kb 1 {ld[1]:g}` kept "
                f"{payload['variants_after_ld']['plink2']:,}; PLINK 2's time is both of its "
                "steps (pruning, then `--extract` with `--pca`), in one row.",
                "",
            ]
            if ld
            else []
        ),
        "| run | median wall s | runs (s) | peak memory MiB | ratio to `--pca approx` |",
        "|---|---|---|---|---|",
    ]
    labels = {
        "plink2_approx": f"`plink2 --bfile … --maf 0.05 --pca approx {K} --threads {THREADS}`",
        "plink2_exact": f"`plink2 --bfile … --maf 0.05 --pca {K} --threads {THREADS}`",
        "ours": "`python -m pipelines.genomics run` (CEU reference, K = 10, 5 knockoffs, "
        "report on)",
        "ours_noreport": "the same job, report off (result dataset and summary only)",
    }
    if ld:
        prune = f"`plink2 --bfile … --maf 0.05 --indep-pairwise {ld[0]:g}kb 1 {ld[1]:g}`, then "
        labels = {k: (prune + v if k.startswith("plink2") else v) for k, v in labels.items()}
        labels = {k: v.replace("--maf 0.05 --pca", "--extract … --pca") for k, v in labels.items()}
        labels["ours"] = labels["ours"].replace("5 knockoffs,", f"5 knockoffs, `[ld]` {args.ld},")
    for k in (k for k in ("plink2_approx", "plink2_exact", "ours", "ours_noreport") if k in runs):
        xs = ", ".join(f"{x['seconds']:.1f}" for x in runs[k])
        md.append(
            f"| {labels[k]} | {med[k]:.1f} | {xs} | {peak[k] / 2**20:.0f} | "
            f"{med[k] / med['plink2_approx']:.2f} |"
        )
    md += [
        "",
        f"Load average (1 min) before each run: {[x[0] for x in loads]}.",
        "",
        f"Our job, last run: {last['n_passes']} passes over genotypes in all (the raw store "
        "is read once, by the statistics pass, which also keeps the kept variants' rows, in "
        "memory within the budget, else in a temporary directory; the "
        f"rest read the compact int8 matrix); {last['fit']}; "
        "phases (s): "
        + ", ".join(f"{k} {v:.1f}" for k, v in last["timings"].items())
        + ". Verdicts: "
        + ", ".join(last["verdicts"])
        + ".",
        "",
        *(
            [
                "Passes of one more run of the job, in process (seconds): "
                + ", ".join(f"{p['name']} {p['seconds']:.2f}" for p in profile["passes"])
                + f"; whole job {profile['seconds_in_process']:.1f} s in process.",
                "",
            ]
            if args.profile
            else []
        ),
        *_biobank_lines(payload["biobank_estimate"]),
    ]
    if not ld:  # with LD pruning the two tools fit different variant sets
        md += [
            f"## Same PCs as `plink2 --pca{'' if with_exact else ' approx'}`",
            "",
            "Our plain PCA (same QC, all-sample Patterson scaling, `location=None`, solver "
            f"`{plain['solver']}`) against `plink2 --pca {'' if with_exact else 'approx '}{K}`"
            + ("" if with_exact else " (the exact GRM is n × n: not run at this n)")
            + ": |correlation| of the sample scores per PC:",
            "",
            "| PC | " + " | ".join(str(k + 1) for k in range(K)) + " |",
            "|---|" + "---|" * K,
            f"| ours vs `--pca{'' if with_exact else ' approx'}` | "
            + " | ".join(f"{c:.4f}" for c in corr)
            + " |",
            *(
                [
                    "| `--pca approx` vs `--pca` | "
                    + " | ".join(f"{c:.4f}" for c in corr_approx)
                    + " |"
                ]
                if with_exact
                else []
            ),
            "",
        ]
    from _bench import dump

    dump(args.name, RESULTS, payload, md)
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
