"""``mspca demo``: simulate the paper's mixture, fit it on a local cluster, explain the result.

The data are simulated by :func:`mspca_dask.testing.make_spiked_mixture` into ``DIR/data.zarr``
(reused when simulated earlier with the same parameters), fitted on a local Dask cluster of
worker processes (or Dask's threads with ``--no-cluster``), and the fit is compared, in words,
with the simulation's truth.  Writes ``DIR/result.zarr`` and ``DIR/spectrum.png``.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import EXIT_OK, ParameterError, ResultExistsError
from ._outputs import matplotlib_available, save_plot, write_result

if TYPE_CHECKING:
    from ..result import MSPCAResult
    from ..testing import SpikedMixture

__all__ = ["add_parser", "run", "DEMO_CHUNK_ROWS", "DEMO_COMPONENTS", "DEMO_ATTR"]

#: Row chunk of the demo's Zarr store (8 chunks at the default 2000 samples).
DEMO_CHUNK_ROWS = 250
#: Number of eigenpairs the demo examines.
DEMO_COMPONENTS = 10
#: Group attribute of the demo's data store holding the parameters it was simulated with.
DEMO_ATTR = "mspca_demo"


def _checked(
    convert: Callable[[str], Any], ok: Callable[[Any], bool], words: str
) -> Callable[[str], Any]:
    """An argparse type: ``convert`` the text, and refuse it unless ``ok`` ("must be WORDS")."""

    def parse(text: str) -> Any:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {words} (not {text!r})") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"must be {words} (not {text!r})")
        return value

    return parse


_positive_int = _checked(int, lambda v: v >= 1, "a positive integer")
_non_negative_int = _checked(int, lambda v: v >= 0, "a non-negative integer")
_fraction = _checked(float, lambda v: 0 < v < 1, "a number in (0, 1)")


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``demo`` subcommand to ``sub`` (the ``add_subparsers`` action of ``mspca``).

    Returns
    -------
    argparse.ArgumentParser
        The subcommand's parser; its handler is :func:`run`.
    """
    d: argparse.ArgumentParser = sub.add_parser(
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
    d.set_defaults(handler=run)
    return d


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
    from ..testing import alignment

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
    order = result.component_index  # the components' order, as res.components has it
    if order.size:
        i = int(order[0])
        lines.append(
            f"MS-PCA's first stable component (eigenpair #{i}, eigenvalue {ev[i]:.3g}) aligns "
            f"{_pct(alignment(result.eigenvectors[i], truth_pc))} with the true covariance PC."
        )
    else:
        lines.append(
            "MS-PCA kept no stable component: no eigenpair was judged covariance or mixed."
        )
    shifted = [int(i) for i in range(result.n_components) if verdicts[i] == "mean shift"]
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


def run(args: argparse.Namespace) -> int:
    """``mspca demo``: simulate, write, fit on a local cluster, explain, save.

    Returns
    -------
    int
        :data:`~mspca_dask.errors.EXIT_OK`; errors are raised for :func:`mspca_dask.cli.main`
        to report.
    """
    # Imported here, not at the top: ``mspca --help`` builds this parser without Dask.
    from ..api import fit
    from ..io import is_complete
    from ..testing import make_spiked_mixture

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
    centred = (
        " (and, since these data are centred on their inliers, whether the scores' mean left them)"
        if result.group_centre == "origin"
        else ""
    )
    print(
        "What happened: MS-PCA tests whether some samples form groups displaced from the rest "
        f"in the scores on the eigenvectors above the noise{centred}; along each eigenvector, "
        "the shift z "
        "column says whether the groups are shifted along it, and whether a covariance spike "
        "remains once each group's own mean is removed tells a mean shift from a covariance "
        "component (or both, mixed).  The knockoff and displacement columns report how far "
        "random 'knockoff' mean shifts move each eigenvalue; they do not decide the verdict."
    )
    for line in _explain(result, model):
        print("  " + line)
    print()

    written = write_result(result, str(result_path), overwrite=True)
    print(f"result written to {written} (read it with mspca_dask.open_result)")
    if matplotlib_available():
        save_plot(result, png_path)
        print(f"spectrum plot written to {png_path}")
    else:
        print("spectrum plot skipped: matplotlib is not installed")
    print(f"demo finished in {time.perf_counter() - t_start:.1f} s")
    return EXIT_OK
