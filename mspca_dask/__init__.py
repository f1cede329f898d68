"""mspca_dask — out-of-core, distributed Mean-Shift PCA by Knockoff Mean.

>>> import mspca_dask
>>> res = mspca_dask.fit(source, n_components=10)          # doctest: +SKIP
>>> res.components, res.mean_shift_components, res.stable  # doctest: +SKIP

Samples are the observations (``n``, rows), features the variables (``d``, columns).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from . import errors, matching, rmt
from .api import fit
from .errors import (
    ChunkReadError,
    ConvergenceWarning,
    DTypeError,
    ForeignOutputError,
    InputError,
    MissingDependencyError,
    ModelFitWarning,
    MSPCAError,
    MSPCAWarning,
    NonFiniteError,
    NoSpikeWarning,
    NoStableComponentWarning,
    OutputOverlapsInputError,
    ParameterError,
    ResultCorruptError,
    ResultExistsError,
    SchedulerError,
    ShapeError,
    SourceNotFoundError,
    VariableNotFoundError,
)
from .io.anndata import add_to_anndata
from .result import MSPCAResult, open_result

try:
    __version__ = version("mspca-dask")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"

__all__ = [
    "fit",
    "open_result",
    "add_to_anndata",
    "MSPCAResult",
    "MeanShiftPCA",
    "errors",
    "matching",
    "rmt",
    "MSPCAError",
    "InputError",
    "NonFiniteError",
    "ShapeError",
    "DTypeError",
    "ParameterError",
    "SourceNotFoundError",
    "VariableNotFoundError",
    "ChunkReadError",
    "MissingDependencyError",
    "ResultExistsError",
    "ForeignOutputError",
    "OutputOverlapsInputError",
    "ResultCorruptError",
    "SchedulerError",
    "MSPCAWarning",
    "NoSpikeWarning",
    "ConvergenceWarning",
    "ModelFitWarning",
    "NoStableComponentWarning",
    "__version__",
]


def __getattr__(name: str) -> object:
    # The estimator imports scikit-learn's base classes; load it on first use.
    if name == "MeanShiftPCA":
        from .estimator import MeanShiftPCA

        return MeanShiftPCA
    raise AttributeError(f"module 'mspca_dask' has no attribute {name!r}")
