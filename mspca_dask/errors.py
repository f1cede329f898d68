"""Exception and warning classes of mspca_dask.

Every error raised on bad input derives from :class:`MSPCAError` *and* from the builtin a
caller would naturally catch (``ValueError``, ``TypeError``, ``FileNotFoundError``,
``KeyError``, ``OSError``), in the manner of zarr-python's ``NodeNotFoundError``.  So
``except mspca_dask.InputError`` and ``except ValueError`` both work.
"""

from __future__ import annotations

__all__ = [
    "MSPCAError",
    "InputError",
    "NonFiniteError",
    "ShapeError",
    "DTypeError",
    "ParameterError",
    "SourceNotFoundError",
    "VariableNotFoundError",
    "ChunkReadError",
    "ResultCorruptError",
    "ResultExistsError",
    "ForeignOutputError",
    "OutputOverlapsInputError",
    "SchedulerError",
    "MSPCAWarning",
    "NoSpikeWarning",
    "ConvergenceWarning",
    "ModelFitWarning",
    "NoStableComponentWarning",
]


class MSPCAError(Exception):
    """Base class of every error raised by mspca_dask."""


class InputError(MSPCAError, ValueError):
    """The data handed to :func:`mspca_dask.fit` cannot be analysed as given."""


class NonFiniteError(InputError):
    """The data contain NaN or infinite values (the message says where)."""


class ShapeError(InputError):
    """The data have the wrong number of dimensions, too few samples or unknown chunks."""


class DTypeError(MSPCAError, TypeError):
    """The data are not of a real numeric dtype."""


class ParameterError(MSPCAError, ValueError):
    """A parameter of :func:`mspca_dask.fit` is out of its documented range."""


class SourceNotFoundError(MSPCAError, FileNotFoundError):
    """The path or URL given as source does not hold a Zarr array or group."""


class VariableNotFoundError(MSPCAError, KeyError):
    """The requested variable is not in the Zarr group or xarray Dataset."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class ChunkReadError(MSPCAError, OSError):
    """A chunk of the input could not be read or decoded (corrupt or missing chunk)."""


class ResultCorruptError(ChunkReadError):
    """A stored result fails its checksum or cannot be decoded (a flipped or truncated byte)."""


class ResultExistsError(MSPCAError, FileExistsError):
    """A complete result already exists at the output path and overwriting was not asked."""


class ForeignOutputError(ResultExistsError):
    """The output path holds data that mspca_dask did not write; even overwrite keeps them."""


class OutputOverlapsInputError(ParameterError):
    """The output path is the input store, lies inside it, or contains it."""


class SchedulerError(MSPCAError, RuntimeError):
    """No Dask scheduler or workers could be reached in time."""


#: Errors that mean "the input, the config or the parameters are wrong": the commands
#: (``mspca``, the genomics job) exit with status 2 for them.
USAGE_ERRORS: tuple[type[MSPCAError], ...] = (
    InputError,
    DTypeError,
    ParameterError,
    SourceNotFoundError,
    VariableNotFoundError,
)


class MSPCAWarning(UserWarning):
    """Base class of warnings issued by mspca_dask."""


class NoSpikeWarning(MSPCAWarning):
    """No eigenvalue lies clearly above the Marchenko–Pastur bulk edge."""


class ConvergenceWarning(MSPCAWarning):
    """The iterative solver hit its pass budget before certifying the eigenvalues."""


class ModelFitWarning(MSPCAWarning):
    """The data do not fit the spiked model the verdicts rest on (see the result's
    ``diagnostics``): heteroscedastic noise, a bulk far from Marchenko–Pastur, or too few
    samples or features for its asymptotics."""


class NoStableComponentWarning(MSPCAWarning):
    """Spikes were found but every one is a mean shift: no covariance component is kept."""
