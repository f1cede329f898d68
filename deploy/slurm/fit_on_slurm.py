"""Fit a Zarr store on worker jobs that dask-jobqueue submits to SLURM.

Run it in a small job of its own (``fit.sbatch``) or on a login node::

    python deploy/slurm/fit_on_slurm.py --jobs 4 -- \\
        /scratch/cohort/data.zarr --variable X --components 10 --out /scratch/cohort/result.zarr

It starts a Dask scheduler in this process, submits ``--jobs`` worker jobs with the settings of
``jobqueue.yaml`` (beside this file, or ``--config``), and runs ``mspca fit ... --scheduler
<that scheduler>``: the same command line interface as everywhere else, and the first pass
waits up to ``--worker-timeout`` for the first worker job to leave the queue.  Everything
after ``--`` is handed to ``mspca fit`` unchanged.  The exit status is the command's own
(0 success, 1 other error, 2 bad input, 3 result exists); the worker jobs are cancelled when
the fit ends, whatever its outcome.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
#: The dask-jobqueue configuration used when ``--config`` is not given.
DEFAULT_CONFIG = HERE / "jobqueue.yaml"


def read_config(path: str | Path = DEFAULT_CONFIG) -> dict[str, Any]:
    """Read a dask-jobqueue YAML file (a ``jobqueue: slurm:`` section) and return it.

    Raises
    ------
    SystemExit
        The file has no ``jobqueue.slurm`` section (with the message saying so).
    """
    import yaml

    with open(path) as f:
        config = yaml.safe_load(f) or {}
    slurm = config.get("jobqueue", {}).get("slurm") if isinstance(config, Mapping) else None
    if not isinstance(slurm, Mapping):
        raise SystemExit(
            f"fit_on_slurm.py: {path} has no 'jobqueue: slurm:' section; start from "
            "deploy/slurm/jobqueue.yaml"
        )
    return config


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mapping -> ``{"jobqueue.slurm.cores": 8, ...}`` for ``dask.config.set``.

    ``dask.config.set({"jobqueue": {...}})`` would replace the whole ``jobqueue`` section and
    drop dask-jobqueue's defaults for the keys the file leaves out; dotted keys set only the
    leaves the file names.
    """
    flat: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flatten(value, prefix=f"{name}."))
        else:
            flat[name] = value
    return flat


@contextlib.contextmanager
def slurm_cluster(config: Mapping[str, Any], **overrides: Any) -> Iterator[Any]:
    """A ``dask_jobqueue.SLURMCluster`` configured by ``config``; no job is submitted yet.

    The configuration stays in force for the cluster's whole life: dask-jobqueue reads it
    again for every job it submits.  The cluster (and any job it submitted) is closed on exit.
    """
    import dask.config
    from dask_jobqueue import SLURMCluster

    with dask.config.set(flatten(config)):
        cluster = SLURMCluster(**overrides)
        try:
            yield cluster
        finally:
            cluster.close()


def fit_argv(fit_args: Sequence[str], scheduler_address: str) -> list[str]:
    """The ``mspca`` argument list: ``fit`` + the user's arguments + ``--scheduler``."""
    args = list(fit_args)
    if args and args[0] == "--":
        args = args[1:]
    if "--scheduler" in args:
        raise SystemExit("fit_on_slurm.py: do not pass --scheduler; the SLURM cluster provides it")
    return ["fit", *args, "--scheduler", scheduler_address]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of this script."""
    parser = argparse.ArgumentParser(
        prog="fit_on_slurm.py",
        description="Fit a Zarr store with `mspca fit` on Dask workers submitted as SLURM jobs.",
        epilog="Example: fit_on_slurm.py --jobs 4 -- DATA.zarr --components 10 --out R.zarr",
    )
    parser.add_argument("--jobs", type=int, default=2, help="worker jobs to submit (default: 2)")
    parser.add_argument(
        "--config",
        default=str(DEFAULT_CONFIG),
        help="dask-jobqueue YAML file (default: jobqueue.yaml beside this script)",
    )
    parser.add_argument(
        "--worker-timeout",
        default="30min",
        help="how long a pass waits for a worker job to start, i.e. queue time (default: 30min)",
    )
    parser.add_argument(
        "fit_args",
        nargs=argparse.REMAINDER,
        metavar="-- FIT_ARGS",
        help="the arguments of `mspca fit` (SOURCE --out RESULT.zarr ...), after --",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the script; returns the exit status of ``mspca fit``."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1 (not {args.jobs})")
    if not [a for a in args.fit_args if a != "--"]:
        parser.error("give the arguments of `mspca fit` after --, e.g. -- DATA.zarr --out R.zarr")

    import dask.config

    from mspca_dask.cli import main as mspca_main

    config = read_config(args.config)
    with dask.config.set({"mspca.worker-timeout": args.worker_timeout}):
        with slurm_cluster(config) as cluster:
            argv_fit = fit_argv(args.fit_args, cluster.scheduler_address)
            print(f"Dask scheduler {cluster.scheduler_address}, dashboard {cluster.dashboard_link}")
            print(cluster.job_script(), flush=True)
            cluster.scale(jobs=args.jobs)
            return mspca_main(argv_fit)


if __name__ == "__main__":
    sys.exit(main())
