"""Shared helpers of the performance benchmarks (scale.py, peers.py, runtime.py).

* :func:`machine_info` — CPU model, cores, RAM, library versions, BLAS, load average;
* :class:`PeakRSS` — a sampling thread that records the peak resident memory of a process
  *tree* (the process and all its children: driver and workers alike);
* :func:`run_measured` — run a Python snippet in a fresh subprocess, sample its memory from
  the outside, and return what it printed as JSON (so every measurement starts from a clean
  interpreter and the peak is not polluted by the benchmark's own arrays);
* :func:`write_zarr_store` — a simulated spiked mixture written chunk by chunk, float32.

No path of the machine is recorded: temporary stores live in ``tempfile.mkdtemp()``.
"""

from __future__ import annotations

import json
import math
import os
import platform
import statistics
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"

SHARED_NOTE = (
    "Timings were taken on a shared 2-core virtual machine, where other work (test suites) "
    "sometimes ran alongside: every time is the median of the repeats stated, and the load "
    "average before and after each script is recorded (a 1-minute load near 0 at the start "
    "means a quiet machine). Read ratios and orders of magnitude, not the last digit."
)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(module: str) -> str | None:
    try:
        mod = __import__(module)
    except Exception:  # noqa: BLE001 - optional peers
        return None
    return str(getattr(mod, "__version__", "?"))


def git_commit(*, short: bool = True, paths: tuple[str, ...] = ()) -> str | None:
    """The commit the benchmark runs on, ``+dirty`` when tracked files (below ``paths``, if
    given, else outside ``benchmarks/results``, which a run writes itself) differ from it;
    None outside a git checkout."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        head = git("rev-parse", *(["--short=10"] if short else []), "HEAD")
        where = paths or (".", ":(exclude)benchmarks/results")
        dirty = git("status", "--porcelain", "--untracked-files=no", "--", *where)
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+dirty" if dirty else "")


def last_commit_of(path: Path) -> str | None:
    """The last commit that changed ``path``; None when it is untracked or outside git."""
    try:
        out = subprocess.run(
            ["git", "log", "-1", "--format=%h", "--", str(path)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return out or None


def commit_line(meta: dict[str, Any], stored: Path) -> str:
    """What a results file says of the code its numbers come from."""
    if meta.get("commit"):
        return f"`{meta['commit']}`"
    committed = meta.get("results_committed_in") or last_commit_of(stored)
    return "not recorded by the run" + (
        f"; its results were committed in `{committed}`" if committed else ""
    )


def machine_info() -> dict[str, Any]:
    """What the timings were taken on (no host names, no paths)."""
    import psutil
    import threadpoolctl

    blas = [
        {k: v for k, v in info.items() if k in ("internal_api", "version", "num_threads")}
        for info in threadpoolctl.threadpool_info()
    ]
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "ram_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "versions": {
            m: _version(m)
            for m in ("mspca_dask", "numpy", "scipy", "dask", "zarr", "sklearn", "dask_ml")
        },
        "blas": blas,
        "load_average_start": [round(x, 2) for x in os.getloadavg()],
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "commit": git_commit(),
        "shared_machine": True,
    }


def finish_info(meta: dict[str, Any]) -> None:
    meta["load_average_end"] = [round(x, 2) for x in os.getloadavg()]


def machine_line(meta: dict[str, Any]) -> str:
    v = meta["versions"]
    vers = ", ".join(f"{k} {val}" for k, val in v.items() if val)
    blas = "; ".join(f"{b.get('internal_api')} {b.get('version')}" for b in meta["blas"])
    return (
        f"{meta['cpu']}, {meta['cores']} cores, {meta['ram_gib']} GiB RAM, {meta['os']}, "
        f"Python {meta['python']}; {vers}; BLAS: {blas or 'unknown'}. Date {meta['date']}; "
        f"load average (1, 5, 15 min) {meta['load_average_start']} at the start, "
        f"{meta.get('load_average_end')} at the end."
    )


class PeakRSS:
    """Peak resident set size (bytes) of a process and all its descendants, sampled."""

    def __init__(self, pid: int | None = None, interval: float = 0.02) -> None:
        import psutil

        self._proc = psutil.Process(pid or os.getpid())
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _sample(self) -> int:
        import psutil

        total = 0
        try:
            procs = [self._proc, *self._proc.children(recursive=True)]
        except psutil.Error:
            return 0
        for p in procs:
            try:
                total += p.memory_info().rss
            except psutil.Error:
                pass
        return total

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._sample())
            self._stop.wait(self.interval)

    def __enter__(self) -> PeakRSS:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


_PRELUDE = """
import json, sys, time, warnings
import numpy as np
warnings.simplefilter("ignore")
"""


def run_measured(code: str, timeout: float | None = None) -> dict[str, Any]:
    """Run ``code`` in a fresh interpreter; it must print one JSON object on its last line.

    Returns that object plus ``peak_rss`` (bytes, whole process tree, sampled every 20 ms) and
    ``process_seconds`` (wall time of the subprocess, interpreter start included).
    """
    src = _PRELUDE + textwrap.dedent(code)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "benchmarks")])
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", src],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    with PeakRSS(proc.pid) as mem:
        out, err = proc.communicate(timeout=timeout)
    if proc.returncode:
        raise RuntimeError(f"measured subprocess failed ({proc.returncode}):\n{err[-4000:]}")
    lines = [ln for ln in out.splitlines() if ln.strip()]
    result = json.loads(lines[-1])
    result["peak_rss"] = mem.peak
    result["process_seconds"] = time.perf_counter() - t0
    return result


def write_zarr_store(
    path: str,
    n: int,
    d: int,
    chunk_rows: int,
    *,
    seed: int = 0,
    pi1: float = 0.1,
    chunk_cols: int | None = None,
) -> dict[str, Any]:
    """The paper's mixture (one covariance spike, one shifted cluster) as float32 Zarr,
    chunked ``(chunk_rows, chunk_cols)`` (whole rows when ``chunk_cols`` is None)."""
    from mspca_dask.testing import make_spiked_mixture

    c = d / n
    model = make_spiked_mixture(
        n,
        d,
        covariance_spikes=(3.0 * max(1.0, np.sqrt(c)),),
        mean_shift_weights=(pi1,),
        mean_shift_strengths=(5.0 * max(1.0, np.sqrt(c)),),
        random_state=seed,
    )
    t0 = time.perf_counter()
    model.write_zarr(path, chunks=(chunk_rows, chunk_cols), dtype="float32", overwrite=True)
    return {"write_seconds": time.perf_counter() - t0, "disk_bytes": dir_bytes(path)}


def dir_bytes(path: str) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            total += os.path.getsize(os.path.join(root, f))
    return total


def median(xs: list[float]) -> float:
    return float(statistics.median(xs))


def dump(name: str, out: Path, payload: dict[str, Any], md: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(payload, indent=2, default=float) + "\n")
    (out / f"{name}.md").write_text("\n".join(md) + "\n")


def wilson(k: int, n: int) -> tuple[float, float]:
    """Wilson 95 % interval of a proportion ``k / n``."""
    if n == 0:
        return (math.nan, math.nan)
    z = 1.959964
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))
