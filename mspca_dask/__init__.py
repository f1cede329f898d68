"""mspca_dask — out-of-core, distributed Mean-Shift PCA by Knockoff Mean.

>>> import mspca_dask
>>> res = mspca_dask.fit(source, n_components=10)          # doctest: +SKIP
>>> res.components, res.mean_shift_components, res.stable  # doctest: +SKIP

Samples are the observations (``n``, rows), features the variables (``d``, columns).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from . import errors
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
    NotAnnDataError,
    OutputOverlapsInputError,
    ParameterError,
    ResultCorruptError,
    ResultExistsError,
    SchedulerError,
    ShapeError,
    SourceNotFoundError,
    VariableNotFoundError,
)

if TYPE_CHECKING:
    from . import rmt, verdict
    from .api import fit
    from .estimator import MeanShiftPCA
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
    "rmt",
    "verdict",
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


#: Names loaded on first use, and the module that defines each: importing the package (and
#: so ``mspca --help``) loads no Dask, xarray, Zarr, SciPy or scikit-learn.
_LAZY = {
    "fit": ".api",
    "open_result": ".result",
    "MSPCAResult": ".result",
    "MeanShiftPCA": ".estimator",
    "add_to_anndata": ".io.anndata",
    "rmt": ".rmt",
    "verdict": ".verdict",
}


def __getattr__(name: str) -> object:
    import importlib

    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'mspca_dask' has no attribute {name!r}")
    module = importlib.import_module(where, __name__)
    value = module if where == f".{name}" else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
