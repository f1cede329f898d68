"""What the ``mspca`` subcommands write: the result store and the spectrum plot."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..errors import MSPCAError, ParameterError

if TYPE_CHECKING:
    from ..result import MSPCAResult


class WriteError(MSPCAError, OSError):
    """Writing an output of the command failed (exit status 1)."""


def matplotlib_available() -> bool:
    """Whether matplotlib can be imported (the plots need it)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def check_plot_available() -> None:
    """Refuse ``--plot`` before any work when matplotlib is missing.

    Raises
    ------
    ParameterError
        matplotlib cannot be imported.
    """
    if not matplotlib_available():
        raise ParameterError("--plot needs matplotlib: pip install 'mspca-dask[plot]'")


def save_plot(result: MSPCAResult, png: str | os.PathLike[str]) -> None:
    """Save :meth:`MSPCAResult.plot` to ``png``; an I/O failure is a :class:`WriteError`."""
    fig = result.plot()
    try:
        fig.savefig(png, dpi=120)
    except OSError as err:
        raise WriteError(f"could not write the plot to {os.fspath(png)}: {err}") from err


def write_result(result: MSPCAResult, out: str, *, overwrite: bool) -> str:
    """Write ``result`` atomically to ``out``; an I/O failure is a :class:`WriteError`.

    Returns
    -------
    str
        The path or URL written.
    """
    try:
        return result.to_zarr(out, overwrite=overwrite)
    except MSPCAError:
        raise
    except OSError as err:
        raise WriteError(f"could not write the result to {out}: {err}") from err
