"""Measure the embedded default: Dask's threaded scheduler against a LocalCluster.

Writes generated Zarr stores (the paper's Gaussian mixture) to a temporary directory and fits
each with ``mspca_dask.fit`` on

* ``threads``       — Dask's threaded scheduler (the embedded default, BLAS threads limited
  per pass as ``mspca_dask._execution.blas_threads`` decides),
* ``threads, BLAS free`` — the same with BLAS left to its own thread pool
  (``mspca.blas-threads: None``),
* ``cluster 2x1``   — a ``LocalCluster`` of 2 worker processes with 1 thread each,
* ``cluster 1xN``   — a ``LocalCluster`` of 1 worker process with all cores as threads,

reporting the cluster's start-up and each fit's wall time (median of ``--repeat`` fits).
Results are printed as a Markdown table; ``deploy/README.md`` keeps the numbers we measured.

    python examples/choose_scheduler.py --sizes 2000x1000 20000x1000 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import mspca_dask
from mspca_dask.testing import make_spiked_mixture


def _fit_times(path: str, scheduler: object, solver: str, repeat: int) -> tuple[float, int]:
    times, passes = [], 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        res = mspca_dask.fit(path, n_components=10, solver=solver, scheduler=scheduler)
        times.append(time.perf_counter() - t0)
        passes = res.n_passes
    return statistics.median(times), passes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["2000x1000", "20000x1000"])
    parser.add_argument("--chunk-rows", type=int, default=2000)
    parser.add_argument("--solvers", nargs="+", default=["exact", "randomized"])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from distributed import Client, LocalCluster

    cores = os.cpu_count() or 1
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        stores = {}
        for size in args.sizes:
            n, d = (int(v) for v in size.split("x"))
            path = os.path.join(tmp, f"{size}.zarr")
            make_spiked_mixture(n, d, mean_shift_weights=(0.1,), random_state=0).write_zarr(
                path, chunks=(min(args.chunk_rows, n), None)
            )
            stores[size] = path

        setups = [
            ("threads", None),
            ("threads, BLAS free", "free"),
            ("cluster 2x1", (2, 1)),
            (f"cluster 1x{cores}", (1, cores)),
        ]
        import dask

        for label, shape in setups:
            cluster = client = None
            start = 0.0
            blas = dask.config.set({"mspca.blas-threads": None if shape == "free" else "auto"})
            if isinstance(shape, tuple):
                t0 = time.perf_counter()
                cluster = LocalCluster(
                    n_workers=shape[0], threads_per_worker=shape[1], dashboard_address=":0"
                )
                client = Client(cluster)
                start = time.perf_counter() - t0
            try:
                for size, path in stores.items():
                    for solver in args.solvers:
                        sched = client if client is not None else "threads"
                        seconds, passes = _fit_times(path, sched, solver, args.repeat)
                        rows.append((label, size, solver, passes, seconds, start))
                        print(
                            f"{label:>14} {size:>12} {solver:>10} passes={passes:2d} "
                            f"fit={seconds:7.2f}s start={start:5.2f}s",
                            flush=True,
                        )
            finally:
                blas.__exit__(None, None, None)
                if client is not None:
                    client.close()
                    cluster.close()

    print("\n| scheduler | n x d | solver | passes | fit (s, median) | start-up (s) |")
    print("|---|---|---|---|---|---|")
    for label, size, solver, passes, seconds, start in rows:
        print(f"| {label} | {size} | {solver} | {passes} | {seconds:.2f} | {start:.2f} |")


if __name__ == "__main__":
    main()
