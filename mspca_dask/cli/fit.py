"""``mspca fit SOURCE --out RESULT.zarr``: fit a Zarr store, print the table, write the result.

SOURCE is a Zarr store, an ``.h5ad`` file or an AnnData Zarr store; ``--layer``,
``--mask-obs`` and ``--mask-var`` choose the matrix, cells and genes of an AnnData source
(``layer``, ``mask_obs`` and ``mask_var`` of :func:`mspca_dask.fit`, the masks named by
their ``obs`` / ``var`` column).  The tuning options come from the parameter registry
(:mod:`mspca_dask._params`), so their names, ranges, defaults and messages are those of
:func:`mspca_dask.fit`.
"""

from __future__ import annotations

import argparse
from typing import Any

from .._params import PARAMETERS, add_arguments
from ..errors import EXIT_OK, NotAnnDataError
from ._outputs import check_plot_available, save_plot, write_result

__all__ = ["add_parser", "run", "ANNDATA_OPTIONS"]

#: The options that select inside an AnnData source, by the keyword of ``fit`` they set.
ANNDATA_OPTIONS = {"layer": "--layer", "mask_obs": "--mask-obs", "mask_var": "--mask-var"}


def fit(*args: Any, **kwargs: Any) -> Any:
    """:func:`mspca_dask.fit`, imported on the first call: ``mspca --help`` builds this
    subcommand's parser without loading Dask."""
    from ..api import fit as _fit

    return _fit(*args, **kwargs)


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``fit`` subcommand to ``sub`` (the ``add_subparsers`` action of ``mspca``).

    Returns
    -------
    argparse.ArgumentParser
        The subcommand's parser; its handler is :func:`run`.
    """
    p: argparse.ArgumentParser = sub.add_parser(
        "fit",
        help="fit a Zarr store or an AnnData (.h5ad) file and write the result",
        description=(
            "Run MS-PCA on a Zarr store, an .h5ad file or an AnnData Zarr store, print one "
            "row per eigenpair (eigenvalue, knockoff eigenvalue, verdict, reason) and write "
            "the result atomically to a Zarr store. The output path is checked before any "
            "data are read."
        ),
    )
    p.add_argument(
        "source",
        metavar="SOURCE",
        help=(
            "path or fsspec URL of a Zarr store (v2 or v3): an array, a group with --variable, "
            "or an AnnData Zarr store; or the path of an .h5ad file (cells as samples)"
        ),
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
    cells = p.add_argument_group(
        "AnnData sources (an .h5ad file or an AnnData Zarr store; refused for other sources)"
    )
    cells.add_argument("--layer", metavar="NAME", help="analyse adata.layers[NAME] instead of X")
    cells.add_argument(
        "--mask-obs",
        metavar="COLUMN",
        help="analyse only the cells where the boolean obs column COLUMN is true",
    )
    cells.add_argument(
        "--mask-var",
        metavar="COLUMN",
        help="analyse only the genes where the boolean var column COLUMN is true "
        "(e.g. highly_variable)",
    )
    tuning = p.add_argument_group("tuning (the parameters of mspca_dask.fit)")
    add_arguments(tuning)  # type: ignore[arg-type]  # an argument group adds like a parser
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
    p.set_defaults(handler=run)
    return p


def run(args: argparse.Namespace) -> int:
    """``mspca fit``: check the outputs, fit, print the table, write the result.

    Every output is checked before any data are read: an ``--out`` that overlaps the
    input, holds data mspca did not write, or exists without ``--overwrite`` is refused
    (:func:`mspca_dask.io.safety.check_output_path`), as is ``--plot`` without matplotlib.

    Returns
    -------
    int
        :data:`~mspca_dask.errors.EXIT_OK`; errors are raised for :func:`mspca_dask.cli.main`
        to report.
    """
    from ..io.safety import check_output_path

    check_output_path(
        args.out,
        overwrite=args.overwrite,
        inputs=[args.source],
        what="--out",
        overwrite_flag="--overwrite",
    )
    if args.plot is not None:
        check_plot_available()
    try:
        result = fit(
            args.source,
            variable=args.variable,
            sample_dim=args.sample_dim,
            location=None if args.location == "none" else "auto",
            scheduler=args.scheduler,
            progress=args.progress,
            allow_missing_chunks=args.allow_missing_chunks,
            **{name: getattr(args, name) for name in ANNDATA_OPTIONS},
            **{name: getattr(args, name) for name in PARAMETERS},
        )
    except NotAnnDataError as err:
        # fit names its keywords (layer=); name the options that were typed instead.
        flags = [ANNDATA_OPTIONS[name] for name in err.options]
        verb = "applies" if len(flags) == 1 else "apply"
        raise NotAnnDataError(
            f"{' and '.join(flags)} only {verb} to AnnData sources (an .h5ad file or an "
            f"AnnData Zarr store), but {args.source} is a {err.found}; leave "
            f"{'it' if len(flags) == 1 else 'them'} out",
            options=err.options,
            found=err.found,
        ) from err
    print(result.summary())
    print()
    written = write_result(result, args.out, overwrite=args.overwrite)
    print(f"result written to {written}")
    if args.plot is not None:
        save_plot(result, args.plot)
        print(f"spectrum plot written to {args.plot}")
    return EXIT_OK
