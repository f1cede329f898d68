"""A biobank-shaped cohort through the genomics job on a Dask cluster of worker processes.

    python benchmarks/cluster_cohort.py                      # 100,000 samples x 100,000 variants
    python benchmarks/cluster_cohort.py --samples 5000 --variants 5000   # a small check
    python benchmarks/cluster_cohort.py --killed-only    # the killed run alone, added to the
                                                         # stored results of the same cohort
    python benchmarks/cluster_cohort.py --plink2-only    # plink2 alone, its row replaced

The cohort is a Balding–Nichols simulation: three populations (70, 20 and 8 % of the samples)
drawn from one ancestral frequency per variant (uniform on [0.05, 0.95]) at F_ST 0.005, 0.02
and 0.05, and a 2 % admixed group whose members mix the first two populations in proportions
uniform on [0.2, 0.8].  Variants are unlinked (10 kb apart, across 22 chromosomes), so no LD
step is run.  It is written once as a PLINK 1 fileset by bed-reader's streaming writer and
cached under ``benchmarks/_data/``.

The cluster is Dask's own command line on 127.0.0.1: ``dask scheduler`` and ``dask worker
--nworkers W --nthreads 1 --memory-limit M`` (W worker processes, each under a nanny).  The
job (``python -m pipelines.genomics run``, 10 components, 5 knockoffs, MAF >= 0.05, report
off, ``[compute] scheduler`` = the scheduler's address) runs twice:

* undisturbed: wall time, passes, the peak resident memory of each worker process and of the
  workers together (sampled every 0.25 s), and the task stream (from the scheduler);
* with one worker process killed by SIGKILL while it runs a task of a fit pass: the job must
  finish, on the worker the nanny restarts, with the same eigenvalues and verdicts.

``plink2 --bfile ... --maf 0.05 --pca approx 10 --threads W`` runs on the same fileset, with
its peak memory sampled alike.  Without ``plink2`` (``apt-get install plink2
libopenblas0-pthread``) that row is skipped and said so.  Writes
``benchmarks/results/cluster_cohort.{md,json,png}``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import (  # noqa: E402
    RESULTS,
    SHARED_NOTE,
    dump,
    finish_info,
    git_commit,
    machine_info,
    machine_line,
)
from genomics_vs_plink2 import (  # noqa: E402
    _biobank,
    _biobank_lines,
    _plink_blas,
    _timed,
    job_result,
)

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "_data"
K = 10
#: Population shares (the rest is the admixed group) and their F_ST from the ancestor.
SHARES = (0.70, 0.20, 0.08)
FST = (0.005, 0.02, 0.05)
POPULATIONS = ("POP1", "POP2", "POP3", "ADMIXED")
#: Variants simulated and written per block (bounded memory whatever the cohort).
BLOCK = 256
SAMPLE_EVERY = 0.25
#: The spill directory is measured every this many memory samples.
SPILL_EVERY = 8


# ------------------------------------------------------------------------- the cohort
def _labels(n: int) -> np.ndarray:
    counts = [int(round(s * n)) for s in SHARES]
    counts.append(n - sum(counts))
    return np.repeat(np.arange(len(counts)), counts)


def write_cohort(n: int, d: int, seed: int = 0, data: Path = DATA) -> Path:
    """The cohort's PLINK 1 fileset prefix in ``data``, simulated and written once (atomically)."""
    from bed_reader import create_bed

    prefix = data / f"bn-{n}x{d}-s{seed}"
    if all(prefix.with_suffix(e).exists() for e in (".bed", ".bim", ".fam", ".tsv")):
        return prefix
    data.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    labels = _labels(n)
    admixed = labels == len(SHARES)
    q = rng.uniform(0.2, 0.8, int(admixed.sum())).astype(np.float32)
    iid = np.array([f"S{i:07d}" for i in range(n)])
    fid = np.array(POPULATIONS)[labels]
    chrom = np.repeat(np.arange(1, 23), -(-d // 22))[:d]
    within = np.concatenate([np.arange(c) for c in np.bincount(chrom)[1:]])
    properties = {
        "fid": fid,
        "iid": iid,
        "sid": [f"{c}:{1_000_000 + 10_000 * w}" for c, w in zip(chrom, within, strict=True)],
        "chromosome": chrom.astype(str),
        "bp_position": 1_000_000 + 10_000 * within,
        "allele_1": ["A"] * d,
        "allele_2": ["G"] * d,
    }
    tmp = prefix.parent / f".{prefix.name}.tmp"
    with create_bed(tmp.with_suffix(".bed"), n, d, properties=properties, count_A1=True) as out:
        for v0 in range(0, d, BLOCK):
            b = min(BLOCK, d - v0)
            anc = rng.uniform(0.05, 0.95, b)
            freq = np.stack(
                [rng.beta(anc * (1 - f) / f, (1 - anc) * (1 - f) / f) for f in FST]
            ).astype(np.float32)  # (populations, b)
            p = np.empty((b, n), dtype=np.float32)
            for k in range(len(SHARES)):
                p[:, labels == k] = freq[k][:, None]
            p[:, admixed] = q * freq[0][:, None] + (1 - q) * freq[1][:, None]
            g = (rng.random((b, n), dtype=np.float32) < p).astype(np.int8)
            g += rng.random((b, n), dtype=np.float32) < p
            for row in g:
                out.write(row)
    tsv = tmp.with_suffix(".tsv")
    tsv.write_text(
        "sample_id\tpopulation\n" + "".join(f"{i}\t{f}\n" for i, f in zip(iid, fid, strict=True))
    )
    for ext in (".bim", ".fam", ".tsv", ".bed"):
        os.replace(tmp.with_suffix(ext), prefix.with_suffix(ext))
    return prefix


# ------------------------------------------------------------------------- the cluster
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    """``dask scheduler`` and ``dask worker --nworkers W`` on 127.0.0.1, as processes."""

    def __init__(self, workers: int, memory_limit: str, work: Path) -> None:
        self.workers, self.memory_limit, self.work = workers, memory_limit, work
        self.address = f"tcp://127.0.0.1:{_free_port()}"
        self.procs: list[subprocess.Popen] = []

    def __enter__(self) -> Cluster:
        from distributed import Client

        env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
        env["PYTHONPATH"] = str(ROOT)
        log = open(self.work / "cluster.log", "w")  # noqa: SIM115 - closed with the processes
        port = self.address.rsplit(":", 1)[1]
        dask_cli = [sys.executable, "-m", "dask"]
        self.procs.append(
            subprocess.Popen(
                [*dask_cli, "scheduler", "--host", "127.0.0.1", "--port", port]
                + ["--dashboard-address", "127.0.0.1:0"],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.work,
            )
        )
        time.sleep(1.0)
        self.procs.append(
            subprocess.Popen(
                [*dask_cli, "worker", self.address, "--nworkers", str(self.workers)]
                + ["--nthreads", "1", "--memory-limit", self.memory_limit]
                + ["--local-directory", str(self.work / "workers")],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.work,
            )
        )
        self.client = Client(self.address, timeout=60)
        self.client.wait_for_workers(self.workers, timeout=120)
        self.limit_bytes = int(
            next(iter(self.client.scheduler_info()["workers"].values()))["memory_limit"]
        )
        return self

    def worker_pids(self) -> dict[str, int]:
        return dict(self.client.run(os.getpid))

    def __exit__(self, *exc: object) -> None:
        self.client.close()
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()


def _dir_bytes(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.stat(os.path.join(root, f)).st_size
    return total


class WorkerMemory:
    """Resident memory of every process under the ``dask worker`` command, and the bytes the
    workers spilled to their local directory, sampled."""

    def __init__(self, cluster: Cluster) -> None:
        import psutil

        self._root = psutil.Process(cluster.procs[1].pid)
        self._spill_dir = cluster.work / "workers"
        self.samples: list[tuple[float, dict[int, int]]] = []
        self.spilled: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        import psutil

        while not self._stop.is_set():
            rss: dict[int, int] = {}
            for p in self._root.children(recursive=True):
                try:
                    rss[p.pid] = p.memory_info().rss
                except psutil.Error:
                    pass
            self.samples.append((time.time(), rss))
            if len(self.samples) % SPILL_EVERY == 1:
                self.spilled.append(_dir_bytes(self._spill_dir))
            self._stop.wait(SAMPLE_EVERY)

    def __enter__(self) -> WorkerMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def peaks(self, worker_pids: set[int]) -> dict[str, float]:
        per = [v for _, s in self.samples for pid, v in s.items() if pid in worker_pids]
        total = [sum(v for pid, v in s.items() if pid in worker_pids) for _, s in self.samples]
        return {"per_worker": max(per, default=0), "all_workers": max(total, default=0)}


# ------------------------------------------------------------------------- the job
def _config(prefix: Path, out: Path, address: str, workers: int) -> Path:
    path = out.parent / f"{out.name}.toml"
    path.write_text(
        textwrap.dedent(
            f"""
            [job]
            name = "cluster-{prefix.name}"
            [input]
            store = "{prefix}.bed"
            sample_metadata = "{prefix}.tsv"
            color_by = "population"
            [qc]
            min_maf = 0.05
            [pca]
            n_components = {K}
            n_knockoffs = 5
            [compute]
            scheduler = "{address}"
            workers = {workers}
            [output]
            dir = "{out}"
            overwrite = true
            [report]
            enabled = false
            """
        )
    )
    return path


def run_job(cluster: Cluster, cfg: Path, out: Path, kill: bool) -> dict[str, Any]:
    """One run of the job on ``cluster``; with ``kill``, SIGKILL a worker busy in a fit pass."""
    from distributed.utils import key_split_group

    shutil.rmtree(out, ignore_errors=True)  # else the job finds its result up to date
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    pids = cluster.worker_pids()
    killed: dict[str, Any] = {}
    stop = threading.Event()

    def kill_a_busy_worker() -> None:
        while not stop.is_set():
            for addr, keys in cluster.client.processing().items():
                busy = [k for k in keys if key_split_group(k).startswith("mspca-pass-")]
                if busy and addr in pids:
                    os.kill(pids[addr], signal.SIGKILL)
                    killed.update(worker=addr, pid=pids[addr], task=key_split_group(busy[0]))
                    killed["at_s"] = time.time() - t0
                    return
            stop.wait(0.05)

    from distributed import get_task_stream

    t0 = time.time()
    killer = threading.Thread(target=kill_a_busy_worker, daemon=True)
    with WorkerMemory(cluster) as mem, get_task_stream(client=cluster.client) as ts:
        if kill:
            killer.start()
        try:
            r = _timed([sys.executable, "-m", "pipelines.genomics", "run", str(cfg)], env)
        finally:
            stop.set()
            if kill:
                killer.join(timeout=10)
    cluster.client.wait_for_workers(cluster.workers, timeout=120)
    seen = set(pids.values()) | set(cluster.worker_pids().values())
    r.pop("log")
    r["job_process_peak_rss"] = r.pop("peak_rss")  # the job's own process (the client)
    r.update(job_result(out))
    r["worker_peak_rss"] = mem.peaks(seen)
    r["peak_spilled_bytes"] = max(mem.spilled, default=0)
    r["task_stream"] = _tasks(ts.data, t0)
    r["memory_trace"] = [
        [t - t0, [v for pid, v in s.items() if pid in seen]] for t, s in mem.samples
    ]
    if kill:
        r["killed"] = killed
    return r


#: Name parts Dask appends to a pass's name in its tasks' keys (besides function names).
_DASK_PARTS = {
    "array",
    "astype",
    "concatenate",
    "genomics",
    "getitem",
    "original",
    "rechunk",
    "sum",
    "transpose",
}


def pass_of(key: Any) -> str:
    """The pass a task belongs to: its key's name up to the parts Dask appended."""
    name = str(key[0] if isinstance(key, tuple) else key)
    parts = name.split("-")
    kept = parts[:1]
    for part in parts[1:]:
        # a pass's name has no underscore; a function's has; 32 hex digits are a token
        if part in _DASK_PARTS or "_" in part or len(part) == 32:
            break
        kept.append(part)
    return "-".join(kept)


def _tasks(records: list[dict[str, Any]], start: float) -> list[dict[str, Any]]:
    """(worker, pass, start s, stop s) of every task in the scheduler's task stream records."""
    out = []
    for rec in records:
        for ss in rec.get("startstops", ()):
            if ss["action"] == "compute":
                out.append(
                    {
                        "worker": rec["worker"],
                        "group": pass_of(rec["key"]),
                        "start": ss["start"] - start,
                        "stop": ss["stop"] - start,
                    }
                )
    return out


def pass_spans(stream: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each pass's wall span on the cluster, first task start to last task stop.

    Dask's ``finalize`` tasks, which gather each pass's results, belong to no one pass.
    """
    spans: dict[str, list[float]] = {}
    for t in stream:
        if t["group"].startswith("finalize"):
            continue
        s = spans.setdefault(t["group"], [t["start"], t["stop"]])
        s[0], s[1] = min(s[0], t["start"]), max(s[1], t["stop"])
    return [
        {"name": g, "seconds": b - a} for g, (a, b) in sorted(spans.items(), key=lambda x: x[1])
    ]


def picture(path: Path, stream: list[dict[str, Any]], run: dict[str, Any], limit: int) -> None:
    """Task stream (one row per worker, coloured by pass) above each worker's memory."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    workers = sorted({t["worker"] for t in stream})
    groups = sorted({t["group"] for t in stream})
    colours = plt.get_cmap("tab20")
    for t in stream:
        y = workers.index(t["worker"])
        c = colours(groups.index(t["group"]) % 20)
        top.barh(y, t["stop"] - t["start"], left=t["start"], color=c, height=0.8)
    top.set_yticks(range(len(workers)), [f"worker {i + 1}" for i in range(len(workers))])
    top.set_title("Task stream (colour: pass)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=colours(i % 20)) for i in range(len(groups))]
    top.legend(handles, groups, fontsize=6, ncol=4, loc="upper right")
    trace = run["memory_trace"]
    width = max((len(v) for _, v in trace), default=0)
    for i in range(width):
        xs = [t for t, v in trace if len(v) > i]
        bottom.plot(xs, [v[i] / 2**30 for _, v in trace if len(v) > i], lw=1)
    bottom.axhline(limit / 2**30, color="k", ls="--", lw=1, label="memory limit per worker")
    bottom.set_ylabel("resident GiB per process")
    bottom.set_xlabel("seconds since the job started")
    bottom.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


# ------------------------------------------------------------------------- results
HOW_TO_READ = (
    "How to read it: one cohort, one machine, one run of each row. *wall s* is the whole "
    "command (the job's start-up, reading the fileset, QC, the fit and the result written). "
    "*peak per worker* is the largest resident memory any one worker process reached, "
    "*all workers* the largest sum over the worker processes at one instant, *spilled* the most "
    "the workers held on disk at once (Dask moves task results there past 60 % of a worker's "
    "memory limit, so memory stays within the limit at the cost of disk traffic); the job's own "
    "process, the cluster's client, is reported apart: it holds the scores and the per-variant "
    "vectors (the compact matrix stays on disk, where the workers read their chunks). The run "
    "with a killed worker must give the same eigenvalues and verdicts as the undisturbed one."
)


def markdown(p: dict[str, Any]) -> list[str]:
    gib = 2**30
    u, k = p["undisturbed"], p.get("killed")
    rows = [
        "| run | wall s | passes | peak per worker GiB | all workers GiB | spilled GiB "
        "| job process GiB |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, r in (("the job, undisturbed", u), ("the job, one worker killed", k)):
        if r is None:
            continue
        rows.append(
            f"| {name} | {r['seconds']:.0f} | {r['n_passes']} | "
            f"{r['worker_peak_rss']['per_worker'] / gib:.2f} | "
            f"{r['worker_peak_rss']['all_workers'] / gib:.2f} | "
            f"{r['peak_spilled_bytes'] / gib:.2f} | {r['job_process_peak_rss'] / gib:.2f} |"
        )
    pl = p.get("plink2")
    if pl:
        rows.append(
            f"| `plink2 --maf 0.05 --pca approx {K} --threads {p['workers']}` | "
            f"{pl['seconds']:.0f} | — | — | — | — | {pl['peak_rss'] / gib:.2f} |"
        )
    c = p["cohort"]
    lines = [
        "# A biobank-shaped cohort on a Dask cluster of worker processes",
        "",
        f"Generated by `{p['command']}`. {machine_line(p['meta'])}",
        "",
        f"Commit: `{p['meta'].get('commit') or 'not recorded'}`.",
        "",
        SHARED_NOTE,
        "",
        f"Cohort: Balding–Nichols, {c['samples']:,} samples × {c['variants']:,} unlinked "
        f"variants (populations {', '.join(f'{int(100 * s)} %' for s in SHARES)} at F_ST "
        f"{', '.join(str(f) for f in FST)}, and a {100 - int(round(100 * sum(SHARES)))} % "
        "admixed group), PLINK 1 fileset by bed-reader's `create_bed`; MAF ≥ 0.05 keeps "
        f"{u['variants_fitted']:,}. Cluster: `dask scheduler` and `dask worker --nworkers "
        f"{p['workers']} --nthreads 1 --memory-limit {p['memory_limit']}` on 127.0.0.1 "
        f"({p['memory_limit_bytes'] / gib:.2f} GiB per worker); the job's `[compute] "
        "scheduler` is the scheduler's address. PLINK 2's BLAS: " + p["plink2_blas"] + ".",
        "",
        *rows,
        "",
        *(
            [
                f"The plink2 row is from a separate run on the same cohort and machine: "
                f"`{p['plink2_command']}`, {p['plink2_date']}, 1-minute load "
                f"{p['plink2_load'][0]} at its start, {p['plink2_load'][1]} at its end.",
                "",
            ]
            if "plink2_command" in p
            else []
        ),
        HOW_TO_READ,
        "",
        "Phases of the undisturbed run (s): "
        + ", ".join(f"{k} {v:.1f}" for k, v in u["timings"].items() if isinstance(v, float))
        + f". Verdicts: {', '.join(u['verdicts'])}.",
        "",
    ]
    if k is not None:
        same_values = bool(np.allclose(u["eigenvalues"], k["eigenvalues"], rtol=1e-6))
        lines += [
            f"Worker lost: {k['killed'].get('worker', 'none')} was killed by SIGKILL "
            f"{k['killed'].get('at_s', float('nan')):.0f} s into the job, while it ran a task of "
            f"`{k['killed'].get('task', '?')}`; its nanny restarted it and the job finished"
            + (
                f" (a separate run: `{p['killed_command']}`, commit `{p['killed_commit']}`)"
                if "killed_command" in p
                else ""
            )
            + ". "
            f"Same eigenvalues (rtol 1e-6): {'yes' if same_values else 'NO'}; same verdicts: "
            f"{'yes' if u['verdicts'] == k['verdicts'] else 'NO'}.",
            "",
        ]
    lines += [
        "What the dashboard shows, drawn from the scheduler's task stream and the sampled "
        "memory of the undisturbed run:",
        "",
        "![Task stream and worker memory](cluster_cohort.png)",
        "",
    ]
    # on a cluster the workers read the compact matrix from disk in every pass
    est = _biobank(
        {"passes": u["passes"]},
        c["variants"],
        c["samples"],
        u["variants_fitted"],
        False,
        p["workers"],
    )
    measured = (
        f"the undisturbed run above (each pass's span in its task stream, on {p['workers']} "
        "single-threaded workers)"
    )
    return lines + _biobank_lines(est, measured)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=100_000)
    ap.add_argument("--variants", type=int, default=100_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--memory-limit", default="4GiB")
    ap.add_argument("--no-kill", action="store_true", help="skip the run with a killed worker")
    ap.add_argument(
        "--killed-only",
        action="store_true",
        help="only the run with a killed worker, added to the stored results of the same cohort",
    )
    ap.add_argument(
        "--plink2-only",
        action="store_true",
        help="only plink2's run, replacing its row in the stored results of the same cohort",
    )
    ap.add_argument("--quick", action="store_true", help="3,000 x 4,000, 1 GiB per worker: a check")
    ap.add_argument("--out", type=Path, default=RESULTS, help="where the results go")
    ap.add_argument("--data", type=Path, default=DATA, help="where the cohort is cached")
    ap.add_argument(
        "--render", action="store_true", help="rewrite the .md from the stored .json; run nothing"
    )
    args = ap.parse_args(argv)
    if args.render:
        payload = json.loads((args.out / "cluster_cohort.json").read_text())
        (args.out / "cluster_cohort.md").write_text("\n".join(markdown(payload)) + "\n")
        return 0
    if args.quick:
        args.samples, args.variants, args.memory_limit = 3000, 4000, "1GiB"
    if args.killed_only:
        return _killed_only(args, argv)
    if args.plink2_only:
        return _plink2_only(args, argv)
    meta = machine_info()
    meta["quick"] = args.quick
    meta["commit"] = git_commit()
    t = time.perf_counter()
    prefix, work = _cohort(args)
    print(f"cohort {prefix.name} ready ({time.perf_counter() - t:.0f} s)", flush=True)
    payload: dict[str, Any] = {
        "command": _command(argv),
        "meta": meta,
        "workers": args.workers,
        "memory_limit": args.memory_limit,
        "cohort": {"samples": args.samples, "variants": args.variants, "prefix": prefix.name},
    }
    with Cluster(args.workers, args.memory_limit, work) as cluster:
        payload["memory_limit_bytes"] = cluster.limit_bytes
        cfg = _config(prefix, work / "result", cluster.address, args.workers)
        u = run_job(cluster, cfg, work / "result", kill=False)
        stream = u.pop("task_stream")
        u["passes"] = pass_spans(stream)
        print(f"undisturbed: {u['seconds']:.0f} s, {u['n_passes']} passes", flush=True)
        payload["undisturbed"] = u
        if not args.no_kill:
            k = run_job(cluster, cfg, work / "result", kill=True)
            print(f"killed: {k['seconds']:.0f} s, {k.get('killed')}", flush=True)
            payload["killed"] = _without_traces(k)
    if shutil.which("plink2"):
        payload["plink2_blas"] = _plink_blas()
        payload["plink2"] = _plink2_run(prefix, work, args.workers)
        print(f"plink2: {payload['plink2']['seconds']:.0f} s", flush=True)
    else:
        payload["plink2_blas"] = "not run (plink2 is not installed)"
    finish_info(meta)
    args.out.mkdir(parents=True, exist_ok=True)
    picture(args.out / "cluster_cohort.png", stream, u, payload["memory_limit_bytes"])
    u.pop("memory_trace")
    dump("cluster_cohort", args.out, payload, markdown(payload))
    return 0


def _without_traces(run: dict[str, Any]) -> dict[str, Any]:
    """A run's results without its memory trace and task stream (drawn for one run only)."""
    return {key: v for key, v in run.items() if key not in ("memory_trace", "task_stream")}


def _plink2_run(prefix: Path, work: Path, threads: int) -> dict[str, Any]:
    """``plink2 --pca approx`` on the cohort: its wall time and peak memory."""
    cmd = ["plink2", "--bfile", str(prefix), "--maf", "0.05", "--pca", "approx", str(K)]
    cmd += ["--threads", str(threads), "--out", str(work / "plink2")]
    r = _timed(cmd)
    return {"seconds": r["seconds"], "peak_rss": r["peak_rss"]}


def _command(argv: list[str] | None) -> str:
    """The command line that made a run, as the results file names it."""
    return "python benchmarks/cluster_cohort.py" + ("" if argv is None else " " + " ".join(argv))


def _cohort(args: argparse.Namespace) -> tuple[Path, Path]:
    """The cohort's fileset prefix (written once) and the runs' working directory."""
    prefix = write_cohort(args.samples, args.variants, data=args.data)
    work = args.data / f"cluster-{prefix.name}"
    work.mkdir(parents=True, exist_ok=True)
    return prefix, work


def _stored(args: argparse.Namespace) -> dict[str, Any]:
    """The stored results, when they are of this cohort and cluster."""
    payload: dict[str, Any] = json.loads((args.out / "cluster_cohort.json").read_text())
    c = payload["cohort"]
    if (c["samples"], c["variants"], payload["workers"], payload["memory_limit"]) != (
        args.samples,
        args.variants,
        args.workers,
        args.memory_limit,
    ):
        raise SystemExit("the stored results are of another cohort or cluster")
    return payload


def _plink2_only(args: argparse.Namespace, argv: list[str] | None) -> int:
    """plink2's run alone (on a quiet machine), replacing its row in the stored results."""
    if not shutil.which("plink2"):
        raise SystemExit("plink2 is not installed (apt-get install plink2 libopenblas0-pthread)")
    payload = _stored(args)
    prefix, work = _cohort(args)
    start = machine_info()
    payload["plink2"] = _plink2_run(prefix, work, args.workers)
    print(f"plink2: {payload['plink2']['seconds']:.0f} s", flush=True)
    payload["plink2_blas"] = _plink_blas()
    payload["plink2_command"] = _command(argv)
    payload["plink2_date"] = start["date"]
    payload["plink2_load"] = [start["load_average_start"][0], round(os.getloadavg()[0], 2)]
    dump("cluster_cohort", args.out, payload, markdown(payload))
    return 0


def _killed_only(args: argparse.Namespace, argv: list[str] | None) -> int:
    """The run with a killed worker, compared with the stored undisturbed run of the cohort."""
    payload = _stored(args)
    prefix, work = _cohort(args)
    with Cluster(args.workers, args.memory_limit, work) as cluster:
        cfg = _config(prefix, work / "result", cluster.address, args.workers)
        k = run_job(cluster, cfg, work / "result", kill=True)
    print(f"killed: {k['seconds']:.0f} s, {k.get('killed')}", flush=True)
    payload["killed"] = _without_traces(k)
    payload["killed_command"] = _command(argv)
    payload["killed_commit"] = git_commit()
    dump("cluster_cohort", args.out, payload, markdown(payload))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:] or None))
