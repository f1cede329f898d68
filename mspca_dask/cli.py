"""The ``mspca`` command: fit a Zarr store from the shell, or run the demonstration.

``mspca fit SOURCE --out RESULT.zarr`` runs :func:`mspca_dask.fit` on a Zarr store (path or
fsspec URL), prints :meth:`MSPCAResult.summary` and writes the result atomically.
``mspca demo`` simulates the paper's Gaussian mixture into a Zarr store, fits it on a local
Dask cluster and says, in words, what MS-PCA found.  Also reachable as ``python -m mspca_dask``.

Exit status: 0 on success, 2 for bad input or parameters (argparse's own convention too), 3
when the output already holds a result and ``--overwrite`` was not given, 1 for any other error
(an unreadable chunk, an unreachable scheduler, a failed write), 130 when interrupted.  Our own
errors print one line ``mspca: error: <message>`` on stderr, never a traceback; our warnings
print as ``mspca: warning: <message>``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from .io.safety import check_output_path
from .api import fit
from .errors import (
    USAGE_ERRORS,
    MSPCAError,
    MSPCAWarning,
    ParameterError,
    ResultExistsError,
)
from .io import is_complete

if TYPE_CHECKING:
    from .result import MSPCAResult
    from .testing import SpikedMixture

__all__ = ["main", "build_parser", "EXIT_OK", "EXIT_ERROR", "EXIT_USAGE", "EXIT_EXISTS"]

#: Exit status of a successful command.
EXIT_OK = 0
#: Exit status of an error that is not the caller's input (unreadable chunk, scheduler, I/O).
EXIT_ERROR = 1
#: Exit status of bad input data or parameters (argparse uses 2 for bad arguments too).
EXIT_USAGE = 2
#: Exit status when the output path already holds a result and ``--overwrite`` was not given.
EXIT_EXISTS = 3
#: Exit status after Ctrl-C (128 + SIGINT), as shells report it.
EXIT_INTERRUPTED = 130


#: Row chunk of the demo's Zarr store (8 chunks at the default 2000 samples).
DEMO_CHUNK_ROWS = 250
#: Number of eigenpairs the demo examines.
DEMO_COMPONENTS = 10
#: Group attribute of the demo's data store holding the parameters it was simulated with.
DEMO_ATTR = "mspca_demo"


# --------------------------------------------------------------------------------------
# Parser
# --------------------------------------------------------------------------------------


def _positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer (not {text!r})") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer (not {text!r})")
    return value


def _non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer (not {text!r})") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer (not {text!r})")
    return value


def _fraction(text: str) -> float:
    """argparse type: a number strictly between 0 and 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1) (not {text!r})") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1) (not {text!r})")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``mspca`` command and its ``fit`` and ``demo`` subcommands.

    Returns
    -------
    argparse.ArgumentParser
        ``prog`` is ``"mspca"`` whichever way the command was started (console script or
        ``python -m mspca_dask``).
    """
    from . import __version__

    parser = argparse.ArgumentParser(
        prog="mspca",
        description=(
            "Mean-Shift PCA by Knockoff Mean, out of core on Dask: split the leading principal "
            "components of a Zarr store into covariance components (stable under a knockoff "
            "mean shift) and components caused by a shifted minority of samples."
        ),
        epilog=(
            "Exit status: 0 success, 1 other error, 2 bad input or parameters, 3 the output "
            "already holds a result. Run 'mspca demo' for a one-minute tour."
        ),
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser(
        "fit",
        help="fit a Zarr store and write the result",
        description=(
            "Run MS-PCA on a Zarr store, print one row per eigenpair (eigenvalue, knockoff "
            "eigenvalue, verdict, reason) and write the result atomically to a Zarr store. "
            "The output path is checked before any data are read."
        ),
    )
    p.add_argument(
        "source",
        metavar="SOURCE",
        help="path or fsspec URL of a Zarr store (v2 or v3): an array, or a group with --variable",
    )
    p.add_argument(
        "--components",
        "-k",
        metavar="K",
        type=_positive_int,
        default=10,
        help="number K of leading eigenpairs examined (default: 10)",
    )
    p.add_argument(
        "--out",
        "-o",
        metavar="RESULT.zarr",
        required=True,
        help="where to write the result (a Zarr store); read it with mspca_dask.open_result",
    )
    p.add_argument("--variable", metavar="V", help="array of a Zarr group to analyse")
    p.add_argument(
        "--sample-dim",
        metavar="D",
        default="samples",
        help="name of the sample dimension of a labelled store (default: samples)",
    )
    p.add_argument(
        "--location",
        choices=("auto", "none"),
        default="auto",
        help="'auto': subtract the robust inlier mean (default); 'none': data as they are",
    )
    p.add_argument(
        "--solver",
        choices=("auto", "exact", "randomized"),
        default="auto",
        help=(
            "eigensolver (default: auto, the one a cost model fitted to measured timings "
            "predicts faster)"
        ),
    )
    p.add_argument(
        "--knockoffs",
        metavar="B",
        type=_positive_int,
        default=5,
        help="number of independent knockoffs (default: 5)",
    )
    p.add_argument(
        "--seed",
        metavar="S",
        type=_non_negative_int,
        default=0,
        help="random seed of the sketch and the knockoffs (default: 0)",
    )
    p.add_argument(
        "--scheduler",
        metavar="ADDRESS_OR_NAME",
        help=(
            "Dask scheduler address (tcp://host:8786) or a local scheduler name (threads, "
            "sync, processes); default: threads"
        ),
    )
    p.add_argument("--overwrite", action="store_true", help="replace an existing store at --out")
    p.add_argument(
        "--progress", action="store_true", help="show a progress bar per pass (on stderr)"
    )
    p.add_argument(
        "--allow-missing-chunks",
        action="store_true",
        help=(
            "read chunks absent from the store as Zarr's fill value instead of refusing the "
            "store (only for stores sparse on purpose; the result records it)"
        ),
    )
    p.add_argument(
        "--plot",
        metavar="PNG",
        help="also save the spectrum (eigenvalues, knockoffs, bulk edge); needs matplotlib",
    )
    p.set_defaults(handler=_cmd_fit)

    d = sub.add_parser(
        "demo",
        help="simulate the paper's mixture, fit it on a local cluster, explain the result",
        description=(
            "Simulate the paper's Gaussian mixture (one covariance spike l1 = 2 sqrt(c), one "
            "mean-shift cluster of weight pi1 and strength theta1^2 = 4 sqrt(c), c = d/n), "
            "write it to DIR/data.zarr chunk by chunk, fit it on a local Dask cluster and say "
            "how well plain PCA and MS-PCA recover the covariance component. Writes "
            "DIR/result.zarr and DIR/spectrum.png."
        ),
    )
    d.add_argument(
        "--dir",
        metavar="DIR",
        type=Path,
        default=Path("mspca-demo"),
        help="working directory of the demo (default: ./mspca-demo)",
    )
    d.add_argument(
        "--workers",
        metavar="N",
        type=_positive_int,
        default=2,
        help="worker processes of the local cluster, one thread each (default: 2)",
    )
    d.add_argument(
        "--pi1",
        metavar="PI1",
        type=_fraction,
        default=0.1,
        help="weight of the mean-shift cluster (default: 0.1)",
    )
    d.add_argument(
        "--samples",
        metavar="N",
        type=_positive_int,
        default=2000,
        help="number of samples n (default: 2000)",
    )
    d.add_argument(
        "--features",
        metavar="D",
        type=_positive_int,
        default=1000,
        help="number of features d (default: 1000)",
    )
    d.add_argument(
        "--seed",
        metavar="S",
        type=_non_negative_int,
        default=0,
        help="seed of the simulation and of the fit (default: 0)",
    )
    d.add_argument(
        "--no-cluster",
        action="store_true",
        help="run on Dask's threaded scheduler instead of a local cluster",
    )
    d.set_defaults(handler=_cmd_demo)

    from .genomics import register_cli  # ``mspca genomics run|check JOB.toml``

    register_cli(sub)
    return parser


# --------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``mspca`` command.

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments after the program name; ``sys.argv[1:]`` when None.

    Returns
    -------
    int
        The exit status: 0 success, 1 other error, 2 bad input or parameters, 3 the output
        already holds a result, 130 interrupted.  ``--help`` and ``--version`` return 0.

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
        with _report_warnings():
            return handler(args)
    except ResultExistsError as err:
        return _fail(err, EXIT_EXISTS)
    except USAGE_ERRORS as err:
        return _fail(err, EXIT_USAGE)
    except MSPCAError as err:
        return _fail(err, EXIT_ERROR)
    except KeyboardInterrupt:
        print("mspca: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _fail(err: BaseException, code: int) -> int:
    """Print ``mspca: error: <message>`` on one line and return ``code``."""
    message = " ".join(str(err).split()) or type(err).__name__
    print(f"mspca: error: {message}", file=sys.stderr)
    return code


@contextlib.contextmanager
def _report_warnings() -> Iterator[None]:
    """Show mspca_dask's warnings as ``mspca: warning: <message>`` on stderr.

    Every :class:`MSPCAWarning` is shown (each occurrence); other warnings keep the filters
    and the format in force.
    """
    with warnings.catch_warnings():  # restores the filters and showwarning on exit
        warnings.simplefilter("always", MSPCAWarning)
        previous = warnings.showwarning

        def show(
            message: Warning | str,
            category: type[Warning],
            filename: str,
            lineno: int,
            file: TextIO | None = None,
            line: str | None = None,
        ) -> None:
            if issubclass(category, MSPCAWarning):
                text = " ".join(str(message).split())
                print(f"mspca: warning: {text}", file=sys.stderr)
            else:
                previous(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        yield


# --------------------------------------------------------------------------------------
# mspca fit
# --------------------------------------------------------------------------------------


def _check_output_free(
    out: str, *, overwrite: bool, what: str = "--out", inputs: Sequence[str] = ()
) -> None:
    """Refuse, before any work, an output path that would be refused after the fit.

    Raises
    ------
    OutputOverlapsInputError
        ``out`` is, lies inside, or contains an input store (even with ``overwrite``).
    ForeignOutputError
        ``out`` holds data mspca did not write (even with ``overwrite``).
    ResultExistsError
        ``out`` holds a complete result, or (local paths) anything at all, and ``overwrite``
        is False.
    ParameterError
        ``out`` is a local path whose nearest existing ancestor is not a writable directory.
    """
    check_output_path(
        out, overwrite=overwrite, inputs=inputs, what=what, overwrite_flag="--overwrite"
    )


def _check_plot_available() -> None:
    if not _matplotlib_available():
        raise ParameterError("--plot needs matplotlib: pip install 'mspca-dask[plot]'")


def _matplotlib_available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _save_plot(result: MSPCAResult, png: str | os.PathLike[str]) -> None:
    """Save :meth:`MSPCAResult.plot` to ``png``; an I/O failure is a clear error."""
    fig = result.plot()
    try:
        fig.savefig(png, dpi=120)
    except OSError as err:
        raise _WriteError(f"could not write the plot to {os.fspath(png)}: {err}") from err


def _write_result(result: MSPCAResult, out: str, *, overwrite: bool) -> str:
    try:
        return result.to_zarr(out, overwrite=overwrite)
    except MSPCAError:
        raise
    except OSError as err:
        raise _WriteError(f"could not write the result to {out}: {err}") from err


class _WriteError(MSPCAError, OSError):
    """Writing an output of the command failed (exit status 1)."""


def _cmd_fit(args: argparse.Namespace) -> int:
    """``mspca fit``: check the outputs, fit, print the table, write the result."""
    _check_output_free(args.out, overwrite=args.overwrite, inputs=[args.source])
    if args.plot is not None:
        _check_plot_available()
    result = fit(
        args.source,
        n_components=args.components,
        variable=args.variable,
        sample_dim=args.sample_dim,
        location=None if args.location == "none" else "auto",
        solver=args.solver,
        n_knockoffs=args.knockoffs,
        random_state=args.seed,
        scheduler=args.scheduler,
        progress=args.progress,
        allow_missing_chunks=args.allow_missing_chunks,
    )
    print(result.summary())
    print()
    written = _write_result(result, args.out, overwrite=args.overwrite)
    print(f"result written to {written}")
    if args.plot is not None:
        _save_plot(result, args.plot)
        print(f"spectrum plot written to {args.plot}")
    return EXIT_OK


# --------------------------------------------------------------------------------------
# mspca demo
# --------------------------------------------------------------------------------------


def _demo_params(args: argparse.Namespace) -> dict[str, Any]:
    """What the demo's data store was simulated with; reused only when all of it matches."""
    return {
        "generator": "mspca_dask.testing.make_spiked_mixture",
        "layout": 1,  # bump when the store's layout (chunks, names) changes
        "n_samples": int(args.samples),
        "n_features": int(args.features),
        "mean_shift_weights": [float(args.pi1)],
        "random_state": int(args.seed),
        "chunk_rows": DEMO_CHUNK_ROWS,
    }


def _stored_demo_params(path: Path) -> dict[str, Any] | None:
    """The demo parameters recorded in ``path``, or None if it is not a demo store."""
    import zarr

    if not path.is_dir():
        return None
    try:
        group = zarr.open_group(str(path), mode="r", use_consolidated=False)
        params = group.attrs.get(DEMO_ATTR)
        ok = "X" in group
    except (FileNotFoundError, ValueError, TypeError, KeyError):
        return None
    return params if ok and isinstance(params, dict) else None


def _write_demo_data(model: SpikedMixture, path: Path, params: dict[str, Any]) -> None:
    """Write the simulated data to ``path`` chunk by chunk, parameters last.

    The parameters are the last metadata written, so an interrupted write is never taken
    for a finished store (it lacks them) and is simply written again next time.
    """
    import zarr

    if path.exists() or path.is_symlink():
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    model.write_zarr(
        path, name="X", chunks=(DEMO_CHUNK_ROWS, None), zarr_format=3, consolidated=False
    )
    group = zarr.open_group(str(path), mode="r+", use_consolidated=False)
    group.attrs[DEMO_ATTR] = params
    with warnings.catch_warnings():
        # Consolidated metadata is not (yet) in the Zarr v3 specification; xarray writes and
        # reads it by default, and xarray.open_zarr warns without it.
        warnings.filterwarnings("ignore", message="Consolidated metadata is currently not part")
        zarr.consolidate_metadata(str(path), zarr_format=3)


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _explain(result: MSPCAResult, model: SpikedMixture) -> list[str]:
    """Plain-words account of the fit against the simulation's truth."""
    from .testing import alignment

    truth_pc = model.clean_top_eigenvectors(1)[:, 0]
    shift = model.mean_shift_vectors[:, 0]
    ev = result.eigenvalues
    verdicts = result.verdicts
    lines: list[str] = []
    top = result.eigenvectors[0]
    lines.append(
        f"Plain PCA's first component (eigenpair #0, eigenvalue {ev[0]:.3g}, judged "
        f"'{verdicts[0]}') aligns {_pct(alignment(top, truth_pc))} with the true covariance PC "
        f"and {_pct(alignment(top, shift))} with the contamination direction."
    )
    stable = [int(i) for i in range(result.n_components) if result.stable[i]]
    if stable:
        i = stable[0]
        lines.append(
            f"MS-PCA's first stable component (eigenpair #{i}, eigenvalue {ev[i]:.3g}) aligns "
            f"{_pct(alignment(result.eigenvectors[i], truth_pc))} with the true covariance PC."
        )
    else:
        lines.append(
            "MS-PCA kept no stable component: no eigenpair was invariant under the knockoffs."
        )
    shifted = [
        int(i) for i in range(result.n_components) if result.candidate[i] and not result.stable[i]
    ]
    if shifted:
        i = shifted[0]
        lines.append(
            f"The mean-shift component (eigenpair #{i}, eigenvalue {ev[i]:.3g}) aligns "
            f"{_pct(alignment(result.eigenvectors[i], shift))} with the contamination direction."
        )
    else:
        lines.append("MS-PCA flagged no mean-shift component.")
    lines.append(
        "(True covariance PC: the top eigenvector of the clean sample covariance, as in the "
        "paper; contamination direction: the simulated shift m1 of the "
        f"{_pct(model.mean_shift_weights[0])} shifted samples.)"
    )
    return lines


@contextlib.contextmanager
def _demo_scheduler(args: argparse.Namespace) -> Iterator[Any]:
    """A local cluster and its client (closed on exit), or ``"threads"`` with --no-cluster."""
    if args.no_cluster:
        print("scheduler: Dask threads (--no-cluster)")
        yield "threads"
        return
    from distributed import Client, LocalCluster

    print(f"starting a local Dask cluster: {args.workers} worker processes, 1 thread each ...")
    with (
        LocalCluster(
            n_workers=args.workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",
        ) as cluster,
        Client(cluster) as client,
    ):
        print(f"Dask dashboard: {client.dashboard_link}", flush=True)
        yield client


def _cmd_demo(args: argparse.Namespace) -> int:
    """``mspca demo``: simulate, write, fit on a local cluster, explain, save."""
    from .testing import make_spiked_mixture

    t_start = time.perf_counter()
    directory: Path = args.dir
    data_path = directory / "data.zarr"
    result_path = directory / "result.zarr"
    png_path = directory / "spectrum.png"
    if directory.exists() and not directory.is_dir():
        raise ParameterError(f"--dir {directory} exists and is not a directory")
    # The demo replaces only its own previous result, never other data.
    if result_path.exists() and not is_complete(str(result_path)):
        raise ResultExistsError(
            f"{result_path} exists and is not an mspca result; remove it or choose another --dir"
        )

    model = make_spiked_mixture(
        args.samples,
        args.features,
        mean_shift_weights=(args.pi1,),
        random_state=args.seed,
    )
    n, d = model.shape
    c = model.aspect_ratio
    print(
        f"The paper's Gaussian mixture: n = {n} samples, d = {d} features (c = d/n = {c:.3g}), "
        f"one covariance spike l1 = 2 sqrt(c) = {model.covariance_spikes[0]:.3g}, and "
        f"{_pct(args.pi1)} of the samples shifted by m1 with theta1^2 = 4 sqrt(c) = "
        f"{model.mean_shift_strengths[0]:.3g}."
    )
    params = _demo_params(args)
    if _stored_demo_params(data_path) == params:
        print(f"data: {data_path} (reused: simulated earlier with the same parameters)")
    else:
        directory.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        _write_demo_data(model, data_path, params)
        size = n * d * 8 / 2**20
        print(
            f"data: {data_path} written ({size:.0f} MiB float64, Zarr v3, chunks of "
            f"{DEMO_CHUNK_ROWS} rows) in {time.perf_counter() - t0:.1f} s"
        )

    with _demo_scheduler(args) as scheduler:
        t0 = time.perf_counter()
        result = fit(
            str(data_path),
            n_components=min(DEMO_COMPONENTS, n, d),
            variable="X",
            random_state=args.seed,
            scheduler=scheduler,
        )
        seconds = time.perf_counter() - t0
    print(
        f"\nMS-PCA fit of {data_path} in {seconds:.1f} s "
        f"({result.n_passes} passes over the data):\n"
    )
    print(result.summary())
    print()
    print(
        "What happened: MS-PCA adds random 'knockoff' mean shifts to the data and keeps the "
        "eigenpairs whose eigenvalue does not move; covariance components stay put, components "
        "made by a shifted group of samples move."
    )
    for line in _explain(result, model):
        print("  " + line)
    print()

    written = _write_result(result, str(result_path), overwrite=True)
    print(f"result written to {written} (read it with mspca_dask.open_result)")
    if _matplotlib_available():
        _save_plot(result, png_path)
        print(f"spectrum plot written to {png_path}")
    else:
        print("spectrum plot skipped: matplotlib is not installed")
    print(f"demo finished in {time.perf_counter() - t_start:.1f} s")
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
