"""The genomics command: argparse, logging, SIGTERM, exit status.

The job's modules (config, fit, I/O) are imported by the handlers, not here: ``mspca --help``
and ``mspca genomics --help`` build these parsers without loading Dask, xarray or Zarr.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import signal
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ..cli.messages import error_line, report_warnings
from ..errors import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    EXIT_USAGE,
    MSPCAError,
    exit_code,
)

logger = logging.getLogger("mspca.genomics")


class _Terminated(BaseException):
    """Raised in the main thread by the SIGTERM handler (so cleanup code runs)."""


def build_parser(prog: str = "mspca-genomics") -> argparse.ArgumentParser:
    """Parser of the genomics command (``run`` and ``check`` subcommands)."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Scheduled genomics MS-PCA: VCF Zarr in, population structure flagged, "
        "report out. One config file per job.",
        epilog="Exit status: 0 done or up to date, 1 runtime error, 2 bad config or input, "
        "3 a complete result of other inputs exists (overwrite not asked), 75 another run holds "
        "the lock, 130 interrupted, 143 terminated.",
    )
    sub = parser.add_subparsers(dest="genomics_command", metavar="COMMAND", required=True)
    _add_subcommands(sub)
    return parser


def _add_subcommands(sub: Any) -> None:
    r = sub.add_parser(
        "run",
        help="run a job (a no-op when its result is up to date)",
        description="Run the job described by CONFIG (TOML or YAML). Reruns with the same "
        "input fingerprint and parameters do nothing and exit 0.",
    )
    r.add_argument("config", metavar="CONFIG", help="job config file (.toml, .yaml)")
    r.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a complete result of other inputs/parameters ([output] overwrite)",
    )
    r.add_argument("--quiet", "-q", action="store_true", help="log warnings and errors only")
    r.set_defaults(genomics_handler=_cmd_run)
    c = sub.add_parser(
        "check",
        help="validate a config and say whether its result is up to date",
        description="Validate CONFIG and fingerprint its input; exit 0 if the result is up to "
        "date, 1 if a run would compute, 2 if the config or input is bad.",
    )
    c.add_argument("config", metavar="CONFIG")
    c.add_argument("--quiet", "-q", action="store_true")
    c.set_defaults(genomics_handler=_cmd_check)
    p = sub.add_parser(
        "project",
        help="put new samples on a result's components",
        description="Score the samples of NEW_STORE (VCF Zarr or PLINK fileset) on every "
        "component of RESULT with the stored centre frequencies, scales and loadings; "
        "variants matched by contig, position and alleles (swaps and strand flips handled, "
        "unmatched ones imputed at the centre). New samples' scores are divided by each PC's "
        "shrinkage factor (Lee, Zou & Wright 2010), which puts them on the fitted samples' "
        "scale, unless --method plain. Writes SCORES atomically: a TSV (a '#' line with the "
        "method and factors, then FID IID PC1..PCK, as FlashPCA2 --project) or, for a .zarr "
        "path, a Zarr Dataset.",
    )
    p.add_argument("result", metavar="RESULT", help="job output directory or its result.zarr")
    p.add_argument("new_store", metavar="NEW_STORE", help="VCF Zarr store or PLINK .bed/prefix")
    p.add_argument("--out", required=True, metavar="SCORES", help="TSV file or .zarr path")
    p.add_argument("--overwrite", action="store_true", help="replace an existing SCORES")
    p.add_argument(
        "--drop-ambiguous",
        action="store_true",
        help="treat strand-ambiguous SNPs (A/T, C/G) as missing instead of matching as written",
    )
    p.add_argument(
        "--method",
        choices=("corrected", "plain"),
        default="corrected",
        help="corrected (default): scores divided by each PC's shrinkage factor, read off the "
        "fitted spectrum; plain: the projection as is, pulled towards 0",
    )
    p.add_argument("--quiet", "-q", action="store_true")
    p.set_defaults(genomics_handler=_cmd_project)


def register_cli(subparsers: Any) -> None:
    """Add ``genomics run|check`` to the ``mspca`` command's subparsers.

    In :func:`mspca_dask.cli.build_parser`::

        from .genomics import register_cli
        register_cli(sub)

    The handler returns its own exit status (including 75 and 143), so ``cli.main`` only
    returns it.
    """
    g = subparsers.add_parser(
        "genomics",
        help="scheduled genomics PCA job: VCF Zarr in, report out",
        description="Run or check a genomics MS-PCA job described by a config file.",
    )
    _add_subcommands(g.add_subparsers(dest="genomics_command", metavar="COMMAND", required=True))
    g.set_defaults(handler=lambda args: args.genomics_handler(args))


def _setup_logging(quiet: bool) -> logging.Handler:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        logging.Formatter(
            "%(asctime)s %(levelname)s mspca-genomics: %(message)s", datefmt="%Y-%m-%dT%H:%M:%S%z"
        )
    )
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING if quiet else logging.INFO)
    logger.propagate = False
    return handler


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    """Turn SIGTERM into an exception in the main thread so temporary files are removed."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise _Terminated()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _guarded(fn: Any, args: argparse.Namespace) -> int:
    handler = _setup_logging(getattr(args, "quiet", False))
    try:
        with _sigterm_raises(), report_warnings(lambda line: logger.warning("%s", line)):
            return int(fn(args))
    except MSPCAError as err:
        logger.error("%s", error_line(err))
        return exit_code(err)
    except KeyboardInterrupt:
        logger.error("interrupted; no result was committed")
        return EXIT_INTERRUPTED
    except _Terminated:
        logger.error("terminated (SIGTERM); no result was committed")
        return EXIT_TERMINATED
    except Exception:  # a bug or an unexpected library error: keep the traceback for the log
        logger.exception("unexpected error")
        return EXIT_ERROR
    finally:
        logger.removeHandler(handler)


def _cmd_run(args: argparse.Namespace) -> int:
    def go(a: argparse.Namespace) -> int:
        from .config import load_config
        from .job import run_job

        cfg = load_config(a.config)
        outcome = run_job(cfg, overwrite=True if a.overwrite else None)
        print(f"{outcome.status}: {outcome.output_dir}")
        return EXIT_OK

    return _guarded(go, args)


def _cmd_check(args: argparse.Namespace) -> int:
    def go(a: argparse.Namespace) -> int:
        from .config import load_config
        from .job import _existing_fingerprint, job_fingerprint
        from .sources import input_fingerprint

        cfg = load_config(a.config)
        if cfg.simulate is not None and not Path(cfg.store).exists():
            print(f"would simulate {cfg.store} and compute {cfg.output_dir}")
            return EXIT_ERROR
        fp = job_fingerprint(
            cfg,
            input_fingerprint(cfg.store, mode=cfg.fingerprint, storage_options=cfg.storage_options),
        )
        if _existing_fingerprint(cfg.output_dir) == fp:
            print(f"up to date: {cfg.output_dir}")
            return EXIT_OK
        print(f"would compute: {cfg.output_dir}")
        return EXIT_ERROR

    return _guarded(go, args)


def _cmd_project(args: argparse.Namespace) -> int:
    def go(a: argparse.Namespace) -> int:
        from .projection import project

        ds = project(
            a.result,
            a.new_store,
            out=a.out,
            overwrite=a.overwrite,
            ambiguous="drop" if a.drop_ambiguous else "keep",
            method=a.method,
        )
        verdicts = ", ".join(
            f"PC{k + 1} {v}" for k, v in enumerate(ds["verdict"].values.astype(str))
        )
        print(f"projected {ds.sizes['samples']} samples: {a.out} ({verdicts})")
        print(f"variant matching: {ds.attrs['match_counts']}")
        factors = " ".join(f"{r:.3g}" for r in ds["shrinkage_factor"].values)
        print(f"method: {a.method} (shrinkage factors, PC1 first: {factors})")
        return EXIT_OK

    return _guarded(go, args)


def main(argv: Sequence[str] | None = None, prog: str = "mspca-genomics") -> int:
    """Run the genomics command; returns the exit status (see the module docstring)."""
    parser = build_parser(prog)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (EXIT_OK if code is None else EXIT_USAGE)
    return int(args.genomics_handler(args))
