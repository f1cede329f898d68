"""The ``mspca`` command: fit a Zarr store from the shell, run the demonstration, run a job.

``mspca fit SOURCE --out RESULT.zarr`` runs :func:`mspca_dask.fit` on a Zarr store (path or
fsspec URL), prints :meth:`MSPCAResult.summary` and writes the result atomically
(:mod:`mspca_dask.cli.fit`).  ``mspca demo`` simulates the paper's Gaussian mixture into a
Zarr store, fits it on a local Dask cluster and says, in words, what MS-PCA found
(:mod:`mspca_dask.cli.demo`).  ``mspca genomics run|check JOB.toml`` runs the genomics job
(:func:`mspca_dask.genomics.register_cli`).  Also reachable as ``python -m mspca_dask``.

Exit status: each error carries its own (:func:`mspca_dask.errors.exit_code`, shared with the
genomics job): 0 on success, 2 for bad input or parameters (argparse's own convention too),
3 when the output already holds a result and ``--overwrite`` was not given, 1 for any other
error (an unreadable chunk, an unreachable scheduler, a failed write), 130 when interrupted.
Our own errors print one line ``mspca: error: <message>`` on stderr, never a traceback; our
warnings print as ``mspca: warning: <message>`` (:func:`~mspca_dask.cli.messages.report_warnings`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from ..errors import (
    EXIT_ERROR,
    EXIT_EXISTS,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    MSPCAError,
    exit_code,
)
from .messages import error_line, report_warnings

__all__ = [
    "main",
    "build_parser",
    "EXIT_OK",
    "EXIT_ERROR",
    "EXIT_USAGE",
    "EXIT_EXISTS",
    "EXIT_INTERRUPTED",
]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``mspca`` command and its subcommands.

    Returns
    -------
    argparse.ArgumentParser
        ``prog`` is ``"mspca"`` whichever way the command was started (console script or
        ``python -m mspca_dask``).  Each subcommand's parser sets ``handler``, the function
        that runs it.
    """
    # The subcommands are imported here, not at the top: the genomics job imports
    # mspca_dask.cli.messages, which must not pull in the fit and the demo.
    from .. import __version__
    from . import demo, fit

    parser = argparse.ArgumentParser(
        prog="mspca",
        description=(
            "Mean-Shift PCA by Knockoff Mean, out of core on Dask: split the leading principal "
            "components of a Zarr store into covariance components and components caused by "
            "groups of samples shifted from the rest (mean shifts)."
        ),
        epilog=(
            "Exit status: 0 success, 1 other error, 2 bad input or parameters, 3 the output "
            "already holds a result, 130 interrupted. Run 'mspca demo' for a one-minute tour."
        ),
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    fit.add_parser(sub)
    demo.add_parser(sub)

    from ..genomics import register_cli  # ``mspca genomics run|check JOB.toml``

    register_cli(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``mspca`` command.

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments after the program name; ``sys.argv[1:]`` when None.

    Returns
    -------
    int
        The exit status (:func:`mspca_dask.errors.exit_code` of the error, if any): 0
        success, 1 other error, 2 bad input or parameters, 3 the output already holds a
        result, 130 interrupted.  ``--help`` and ``--version`` return 0.

    Examples
    --------
    >>> main(["fit", "no-such-store.zarr", "--out", "r.zarr"])  # doctest: +SKIP
    mspca: error: no file or directory at ... check the path of the Zarr store
    2
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help, --version, or argparse's own usage error
        code = exit_.code
        return code if isinstance(code, int) else (EXIT_OK if code is None else EXIT_USAGE)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        with report_warnings(_print_warning):
            return handler(args)
    except MSPCAError as err:
        print(f"mspca: error: {error_line(err)}", file=sys.stderr)
        return exit_code(err)
    except KeyboardInterrupt as err:
        print("mspca: interrupted", file=sys.stderr)
        return exit_code(err)


def _print_warning(line: str) -> None:
    print(f"mspca: warning: {line}", file=sys.stderr)
