"""Exception and warning classes of mspca_dask.

Every error raised on bad input derives from :class:`MSPCAError` *and* from the builtin a
caller would naturally catch (``ValueError``, ``TypeError``, ``FileNotFoundError``,
``KeyError``, ``OSError``), in the manner of zarr-python's ``NodeNotFoundError``.  So
``except mspca_dask.InputError`` and ``except ValueError`` both work.

Each error also carries the exit status the commands (``mspca``, the genomics job) return
for it: :func:`exit_code` is the one place that maps an error to a status.
"""

from __future__ import annotations

__all__ = [
    "MSPCAError",
    "InputError",
    "NonFiniteError",
    "ShapeError",
    "NotAnnDataError",
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
    "ConfigError",
    "JobLockedError",
    "MissingDependencyError",
    "exit_code",
    "EXIT_OK",
    "EXIT_ERROR",
    "EXIT_USAGE",
    "EXIT_EXISTS",
    "EXIT_LOCKED",
    "EXIT_INTERRUPTED",
    "EXIT_TERMINATED",
    "MSPCAWarning",
    "NoSpikeWarning",
    "ConvergenceWarning",
    "ModelFitWarning",
    "NoStableComponentWarning",
]


#: Exit status of a successful command (or a genomics job already up to date).
EXIT_OK = 0
#: Exit status of an error that is not the caller's input (unreadable chunk, scheduler, I/O).
EXIT_ERROR = 1
#: Exit status of bad input data, parameters or config (argparse uses 2 for bad arguments too).
EXIT_USAGE = 2
#: Exit status when the output already holds a result and overwriting was not asked.
EXIT_EXISTS = 3
#: Exit status when another run of the same job holds its lock (sysexits' EX_TEMPFAIL).
EXIT_LOCKED = 75
#: Exit status after Ctrl-C (128 + SIGINT), as shells report it.
EXIT_INTERRUPTED = 130
#: Exit status after SIGTERM (128 + 15), e.g. Kubernetes stopping a pod.
EXIT_TERMINATED = 143


class MSPCAError(Exception):
    """Base class of every error raised by mspca_dask."""

    #: The status a command exits with for this error (see :func:`exit_code`).
    exit_code: int = EXIT_ERROR


class InputError(MSPCAError, ValueError):
    """The data handed to :func:`mspca_dask.fit` cannot be analysed as given."""

    exit_code = EXIT_USAGE


class NonFiniteError(InputError):
    """The data contain NaN or infinite values (the message says where)."""


class ShapeError(InputError):
    """The data have the wrong number of dimensions, too few samples or unknown chunks."""


class NotAnnDataError(InputError):
    """``layer``, ``mask_obs`` or ``mask_var`` was given for a source that is not AnnData.

    Attributes
    ----------
    options : tuple of str
        The keywords given (``"layer"``, ``"mask_obs"``, ``"mask_var"``), so that a caller
        can name them its own way (the ``mspca fit`` command names its options).
    found : str
        What the source is instead, e.g. ``"Zarr array"``.
    """

    def __init__(self, message: str, *, options: tuple[str, ...] = (), found: str = "") -> None:
        super().__init__(message)
        self.options, self.found = tuple(options), found


class DTypeError(MSPCAError, TypeError):
    """The data are not of a real numeric dtype."""

    exit_code = EXIT_USAGE


class ParameterError(MSPCAError, ValueError):
    """A parameter of :func:`mspca_dask.fit` is out of its documented range."""

    exit_code = EXIT_USAGE


class SourceNotFoundError(MSPCAError, FileNotFoundError):
    """The path or URL given as source does not hold a Zarr array or group."""

    exit_code = EXIT_USAGE


class VariableNotFoundError(MSPCAError, KeyError):
    """The requested variable is not in the Zarr group or xarray Dataset."""

    exit_code = EXIT_USAGE

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class ChunkReadError(MSPCAError, OSError):
    """A chunk of the input could not be read or decoded (corrupt or missing chunk)."""


class ResultCorruptError(ChunkReadError):
    """A stored result fails its checksum or cannot be decoded (a flipped or truncated byte)."""


class ResultExistsError(MSPCAError, FileExistsError):
    """A complete result already exists at the output path and overwriting was not asked."""

    exit_code = EXIT_EXISTS


class ForeignOutputError(ResultExistsError):
    """The output path holds data that mspca_dask did not write; even overwrite keeps them."""


class OutputOverlapsInputError(ParameterError):
    """The output path is the input store, lies inside it, or contains it."""


class SchedulerError(MSPCAError, RuntimeError):
    """No Dask scheduler or workers could be reached in time."""


class ConfigError(ParameterError):
    """A job's config file is missing, unreadable, or holds an invalid value."""


class JobLockedError(MSPCAError, BlockingIOError):
    """Another run of the same job (same output directory) holds its lock."""

    exit_code = EXIT_LOCKED


class MissingDependencyError(MSPCAError, ImportError):
    """An optional dependency that the input needs is not installed (the message says which
    extra installs it, e.g. ``pip install 'mspca-dask[anndata]'``); the environment, not the
    input, is at fault, so commands exit with :data:`EXIT_ERROR`."""


def exit_code(err: BaseException) -> int:
    """The exit status of a command that stopped on ``err``.

    Our errors carry theirs (:attr:`MSPCAError.exit_code`); ``KeyboardInterrupt`` is
    :data:`EXIT_INTERRUPTED`; anything else (a bug, a library's own error) :data:`EXIT_ERROR`.

    Examples
    --------
    >>> exit_code(ParameterError("n_components must be ...")), exit_code(OSError())
    (2, 1)
    """
    if isinstance(err, MSPCAError):
        return err.exit_code
    if isinstance(err, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    return EXIT_ERROR


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
    """Spikes were found but none is a covariance component (each is a mean shift or
    undetermined): no component is kept."""
