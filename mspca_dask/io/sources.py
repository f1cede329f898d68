"""Data sources opened lazily: arrays, xarray objects and Zarr stores, and genotype files.

This module owns every read of the data to analyse; it does no numerical work.

* :func:`open_source` turns a NumPy array, a ``scipy.sparse`` CSR or CSC matrix, a Dask
  array (of dense or sparse chunks), an ``xarray.DataArray`` or ``Dataset``, the path /
  fsspec URL of a Zarr store (format 2 or 3), or an AnnData object, ``.h5ad`` file or
  AnnData Zarr store (:mod:`mspca_dask.io.anndata`) into a :class:`Source`: a lazy
  ``(n_samples, n_features)`` Dask array of a real floating dtype, plus the sample and
  feature coordinates and a human-readable description.  Opening never reads the data (only
  metadata, the store's listing to find missing chunks, and the small 1-D coordinate arrays
  of a Zarr group).  Sparse chunks stay sparse: the passes densify them one at a time.
* :class:`ZarrChunkReader` is the array-like Dask reads a Zarr array through: a chunk that
  cannot be read or decoded becomes a :class:`~mspca_dask.errors.ChunkReadError` naming the
  store, the variable and the slice.
* :func:`is_genotype_source` recognises, cheaply (a file test, a group's metadata), the
  genotype inputs that :mod:`mspca_dask.genomics` reads instead (a VCF Zarr store, a PLINK
  fileset), so that :func:`mspca_dask.fit` can dispatch without importing genomics.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dask.array as da
import numpy as np
import scipy.sparse as sp
import xarray as xr
import zarr
from dask.base import tokenize

from ..errors import (
    ChunkReadError,
    DTypeError,
    InputError,
    NotAnnDataError,
    ShapeError,
    SourceNotFoundError,
    VariableNotFoundError,
)
from .chunks import chunk_read_error
from .safety import check_chunks_present
from .urls import local_path, zarr_store

if TYPE_CHECKING:
    from collections.abc import Hashable, Mapping

__all__ = [
    "Source",
    "open_source",
    "ZarrChunkReader",
    "GENOTYPE_VARIABLES",
    "plink_fileset",
    "is_vcf_zarr",
    "is_genotype_source",
]

#: Default name of the feature dimension when the source does not name it.
_DEFAULT_FEATURE_DIM = "features"

_SOURCE_KINDS = ("numpy", "sparse", "dask", "xarray", "zarr", "anndata")


# --------------------------------------------------------------------------------------
# The opened source
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, repr=False)
class Source:
    """A data source opened lazily as a ``(n_samples, n_features)`` Dask array.

    Attributes
    ----------
    data : (n_samples, n_features) dask.array.Array
        The data, samples along axis 0, of a real floating dtype (``float32`` or
        ``float64``).  Nothing has been computed or read.  Its chunks may be
        ``scipy.sparse`` matrices (sparse input): the passes densify each chunk in the task
        that reads it (:func:`mspca_dask._passes._dense`).
    sample_coords : (n_samples,) numpy.ndarray or None
        Labels of the samples (the coordinate of the sample dimension), if the source
        has them.
    feature_coords : (n_features,) numpy.ndarray or None
        Labels of the features, if the source has them.
    sample_dim : str
        Name of the sample dimension.
    feature_dim : str
        Name of the feature dimension.
    kind : {"numpy", "sparse", "dask", "xarray", "zarr", "anndata"}
        What the source was (a dense array in an AnnData Zarr store is read as ``"zarr"``).
    description : str
        Human-readable origin, used in error messages and result metadata, e.g.
        ``"zarr store /data/x.zarr variable 'X'"``.
    attrs : dict
        Attributes of the source variable (xarray ``attrs`` or Zarr array attributes,
        without xarray's internal ``_ARRAY_DIMENSIONS``).
    missing_chunks : int
        Chunks of a Zarr source absent from its store, read as the fill value (non-zero only
        when opened with ``allow_missing_chunks=True``).
    """

    data: da.Array
    sample_coords: np.ndarray | None
    feature_coords: np.ndarray | None
    sample_dim: str
    feature_dim: str
    kind: str
    description: str
    attrs: dict[str, Any] = field(default_factory=dict)
    missing_chunks: int = 0

    @property
    def n_samples(self) -> int:
        """Number of samples ``n`` (rows of :attr:`data`)."""
        return int(self.data.shape[0])

    @property
    def n_features(self) -> int:
        """Number of features ``d`` (columns of :attr:`data`)."""
        return int(self.data.shape[1])

    def __repr__(self) -> str:
        return (
            f"Source(kind={self.kind!r}, shape=({self.n_samples}, {self.n_features}), "
            f"dims=({self.sample_dim!r}, {self.feature_dim!r}), dtype={self.data.dtype}, "
            f"chunksize={self.data.chunksize}, description={self.description!r})"
        )


# --------------------------------------------------------------------------------------
# open_source
# --------------------------------------------------------------------------------------


def open_source(
    source: Any,
    *,
    variable: str | None = None,
    sample_dim: str = "samples",
    feature_dim: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    allow_missing_chunks: bool = False,
    layer: str | None = None,
    mask_obs: Any = None,
    mask_var: Any = None,
) -> Source:
    """Open a data source lazily as a ``(n_samples, n_features)`` Dask array.

    Parameters
    ----------
    source : array, xarray object, str or os.PathLike
        One of

        * a NumPy array shaped ``(n_samples, n_features)``, or anything else
          :func:`numpy.asarray` accepts (a list, a pandas DataFrame), which is then
          loaded into memory;
        * a ``scipy.sparse`` CSR or CSC matrix or array, wrapped in Dask chunks of whole
          rows (CSR) or whole columns (CSC), each small enough (Dask's ``array.chunk-size``)
          to be densified in its task;
        * a Dask array shaped ``(n_samples, n_features)`` with known chunk sizes, of NumPy
          or ``scipy.sparse`` chunks;
        * an ``anndata.AnnData`` (its ``X`` or ``layer``; samples are its observations),
          the path of an ``.h5ad`` file, or the path or URL of an AnnData Zarr store, read
          by :func:`mspca_dask.io.anndata.open_anndata` (needs the ``anndata`` extra);
        * a 2-D ``xarray.DataArray``: ``sample_dim`` names the sample dimension, the
          other dimension holds the features; it is transposed so samples come first;
        * an ``xarray.Dataset``: ``variable`` names the data variable (optional when the
          Dataset has exactly one);
        * an open ``zarr.Array`` or ``zarr.Group`` (read lazily like a path);
        * the path or fsspec URL (``"file://"``, ``"memory://"``, ``"s3://"``, ...) of a
          Zarr store, format 2 or 3, holding either an array at its root or a group; in a
          group, ``variable`` names the array (optional when the group holds exactly one
          2-D array).  xarray-style dimension names (format 3 ``dimension_names`` or the
          format 2 ``_ARRAY_DIMENSIONS`` attribute) orient the array as for a
          ``DataArray``; without them the array is taken as ``(samples, features)``.
    variable : str, optional
        Name of the variable in a ``Dataset`` or Zarr group.
    sample_dim : str, default "samples"
        Name of the sample dimension.  For sources with named dimensions it must be one
        of them; for plain arrays it only names axis 0.
    feature_dim : str, optional
        Name of the feature dimension.  For sources with named dimensions it defaults to
        (and must equal) the dimension that is not ``sample_dim``; for plain arrays it
        defaults to ``"features"``.
    storage_options : mapping, optional
        Passed to fsspec when ``source`` is a remote URL (credentials, endpoint, ...).
    allow_missing_chunks : bool, default False
        For a Zarr source: read chunks absent from the store as the fill value (zarr's own
        behaviour) instead of refusing the store; their number is
        :attr:`Source.missing_chunks`.
    layer : str, optional
        For an AnnData source: the layer to analyse (``None``: ``X``).
    mask_obs, mask_var : (n_obs,) / (n_vars,) bool array or str, optional
        For an AnnData source: the observations / variables to analyse, as a boolean mask
        or the name of a boolean column of ``obs`` / ``var`` (e.g. ``"highly_variable"``),
        as scanpy's ``mask_obs`` and ``mask_var``.

    Returns
    -------
    Source
        The lazy data and their coordinates.  Integer and boolean data are converted
        (lazily) to ``float64``, ``float16`` to ``float32`` and extended precision to
        ``float64``; ``float32`` and ``float64`` are kept as they are.

    Raises
    ------
    ShapeError
        The data are not 2-D, have fewer than 2 samples or no feature, ``sample_dim`` is
        not a dimension of a source with named dimensions, or a Dask array has unknown
        (NaN) chunk sizes.
    DTypeError
        The data are not real numbers (strings, objects, complex, dates), ``source`` is of
        a type this function does not read, or a sparse matrix is neither CSR nor CSC.
    NotAnnDataError
        ``layer``, ``mask_obs`` or ``mask_var`` is given for a source that is not AnnData
        (an :class:`InputError`).
    InputError
        ``variable`` is given for an AnnData source.
    MissingDependencyError
        An ``.h5ad`` file or AnnData Zarr store is given and ``anndata`` is not installed.
    SourceNotFoundError
        The path or URL does not exist or holds no Zarr array or group.
    VariableNotFoundError
        ``variable`` is not in the Dataset or Zarr group, or it is needed and missing.
    ChunkReadError
        A chunk of the Zarr array is absent from the store's listing (and
        ``allow_missing_chunks`` is False); the message names the array and the chunk index.

    Notes
    -----
    Opening is lazy: no chunk of the data is read or computed.  A Zarr array is wrapped
    so that a chunk that cannot be read or decoded raises :class:`ChunkReadError`
    (naming the store, the variable and the slice) when the data are computed.  Only the
    small 1-D coordinate arrays of a Zarr group are read at opening, as xarray does for
    its indexes.

    Examples
    --------
    >>> import numpy as np
    >>> src = open_source(np.arange(12).reshape(4, 3))
    >>> src.kind, src.data.shape, src.data.dtype
    ('numpy', (4, 3), dtype('float64'))
    """
    if not isinstance(sample_dim, str):
        raise InputError(f"sample_dim must be a string (got {sample_dim!r})")
    if feature_dim is not None and not isinstance(feature_dim, str):
        raise InputError(f"feature_dim must be a string or None (got {feature_dim!r})")
    if feature_dim is not None and feature_dim == sample_dim:
        raise InputError(f"sample_dim and feature_dim must differ (both are {sample_dim!r})")

    # AnnData is recognised without importing anndata (which is optional); the module is
    # imported here because it builds on this one.
    from . import anndata as _anndata

    annotated = {"layer": layer, "mask_obs": mask_obs, "mask_var": mask_var}
    if _anndata.is_anndata(source) or _anndata.is_h5ad_path(source):
        return _anndata.open_anndata(
            source,
            variable=variable,
            sample_dim=sample_dim,
            feature_dim=feature_dim,
            allow_missing_chunks=allow_missing_chunks,
            **annotated,
        )
    if isinstance(source, (str, os.PathLike)):
        source, where = _open_zarr(source, storage_options)
    else:
        where = str(source.store_path) if isinstance(source, (zarr.Array, zarr.Group)) else ""
    if _anndata.is_anndata_group(source):
        return _anndata.open_anndata(
            source,
            where=where,
            variable=variable,
            sample_dim=sample_dim,
            feature_dim=feature_dim,
            allow_missing_chunks=allow_missing_chunks,
            **annotated,
        )
    given = tuple(name for name, value in annotated.items() if value is not None)
    if given:
        verb = "applies" if len(given) == 1 else "apply"
        raise NotAnnDataError(
            f"{' and '.join(f'{name}=' for name in given)} only {verb} to AnnData sources (an "
            f"AnnData object, an .h5ad file or an AnnData Zarr store), not to a "
            f"{_kind_name(source)}; select the rows and columns of the array itself instead",
            options=given,
            found=_kind_name(source),
        )
    if isinstance(source, xr.Dataset):
        return _open_dataset(source, variable, sample_dim, feature_dim)
    if isinstance(source, (zarr.Array, zarr.Group)):
        # Before the generic ``__array__`` case below, which would load the whole array.
        return _open_zarr_node(
            source, where, variable, sample_dim, feature_dim, allow_missing_chunks
        )
    if variable is not None:
        # ``variable`` only makes sense for containers; silently ignoring it would hide a
        # mistake (the caller probably meant another object).
        raise InputError(
            f"variable={variable!r} was given but the source is a "
            f"{type(source).__name__}, which has no variables; pass variable= only "
            "with an xarray.Dataset or a Zarr group"
        )
    if isinstance(source, xr.DataArray):
        name = f" {source.name!r}" if source.name is not None else ""
        return _open_dataarray(
            source,
            sample_dim,
            feature_dim,
            kind="xarray",
            description=f"xarray DataArray{name}",
        )
    if isinstance(source, da.Array):
        return _from_dask(
            source,
            sample_dim,
            feature_dim or _DEFAULT_FEATURE_DIM,
            kind="dask",
            description=f"Dask array {source.name!r}",
        )
    if sp.issparse(source):
        return _open_sparse(source, sample_dim, feature_dim or _DEFAULT_FEATURE_DIM)
    if (
        isinstance(source, np.ndarray)
        or hasattr(source, "__array__")
        or isinstance(source, (list, tuple))
    ):
        arr = np.asarray(source)
        _check_ndim(arr.ndim, arr.shape, "the NumPy array")
        _check_dtype(arr.dtype, "the NumPy array")
        data = da.from_array(arr, chunks="auto")
        return _from_dask(
            data,
            sample_dim,
            feature_dim or _DEFAULT_FEATURE_DIM,
            kind="numpy",
            description=f"NumPy array of shape {arr.shape}",
        )
    raise DTypeError(
        "source must be a NumPy or Dask array, a scipy.sparse CSR or CSC matrix, an xarray "
        "DataArray or Dataset, an AnnData object or .h5ad file, or the path or URL of a Zarr "
        f"store (got an object of type {type(source).__name__})"
    )


def _kind_name(source: Any) -> str:
    if isinstance(source, (zarr.Array, zarr.Group)):
        return f"Zarr {'array' if isinstance(source, zarr.Array) else 'group'}"
    return type(source).__name__


def _open_sparse(matrix: Any, sample_dim: str, feature_dim: str) -> Source:
    """A ``scipy.sparse`` CSR or CSC matrix as a Dask array of sparse chunks (no copy).

    CSR is cut into chunks of whole rows and CSC into chunks of whole columns, the slices
    each format gives without scanning the others; :func:`mspca_dask._passes.orient` then
    makes the products run along whichever side the chunks span.  The number of rows (or
    columns) per chunk is Dask's ``"auto"`` for the *dense* size, so that the dense copy a
    pass makes of one chunk stays within ``array.chunk-size`` (128 MiB by default).
    """
    fmt = str(matrix.format)
    what = f"the scipy.sparse {fmt.upper()} matrix"
    _check_ndim(matrix.ndim, matrix.shape, what)
    if fmt not in ("csr", "csc"):
        raise DTypeError(
            f"{what} cannot be cut into rows or columns without a copy; convert it with "
            ".tocsr() (or .tocsc()) first"
        )
    _check_dtype(np.dtype(matrix.dtype), what)
    chunks = {0: "auto", 1: -1} if fmt == "csr" else {0: -1, 1: "auto"}
    data = da.from_array(matrix, chunks=chunks, asarray=False)
    return _from_dask(
        data,
        sample_dim,
        feature_dim,
        kind="sparse",
        description=f"scipy.sparse {fmt.upper()} matrix of shape {tuple(matrix.shape)}",
    )


def _check_ndim(ndim: int, shape: tuple[Any, ...], what: str) -> None:
    if ndim != 2:
        raise ShapeError(
            f"{what} must be 2-D, shaped (n_samples, n_features), but it has {ndim} "
            f"dimension(s) with shape {tuple(shape)}; reshape or select a 2-D slice first"
        )


def _check_dtype(dtype: np.dtype[Any], what: str) -> None:
    # ``kind`` rather than ``np.issubdtype(dtype, np.number)``: timedelta64 counts as a
    # signed integer for issubdtype, and we refuse it like datetime64.
    if dtype.kind in "biuf":
        return
    reason = {
        "c": "complex numbers are not supported (analyse the real and imaginary parts "
        "separately, or their modulus)",
        "M": "dates are not numeric data",
        "m": "time differences are not numeric data; convert them to numbers first",
        "O": "an object array may hold anything; convert it with .astype(float)",
        "U": "strings are not numeric data",
        "S": "bytes are not numeric data",
        "T": "strings are not numeric data",
    }.get(dtype.kind, "it is not a real numeric dtype")
    raise DTypeError(
        f"{what} has dtype {dtype}, but a real numeric dtype (float, integer or bool) is "
        f"required: {reason}"
    )


def _float_dtype(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """The floating dtype the analysis runs in for data of ``dtype``."""
    if dtype == np.float32 or dtype == np.float64:
        return dtype
    if dtype == np.float16:
        return np.dtype(np.float32)  # half precision has no linear algebra kernels
    return np.dtype(np.float64)  # ints, bools, and extended precision (no LAPACK for it)


def _from_dask(
    data: da.Array,
    sample_dim: str,
    feature_dim: str,
    *,
    kind: str,
    description: str,
    sample_coords: np.ndarray | None = None,
    feature_coords: np.ndarray | None = None,
    attrs: Mapping[Any, Any] | None = None,
) -> Source:
    """Validate a Dask array already oriented ``(samples, features)`` and build the Source."""
    assert kind in _SOURCE_KINDS
    _check_ndim(data.ndim, data.shape, description)
    _check_dtype(data.dtype, description)
    if any(math.isnan(c) for axis in data.chunks for c in axis):
        raise ShapeError(
            f"{description} has unknown (NaN) chunk sizes, shape {data.shape}; call "
            "`x = x.compute_chunk_sizes()` (or build it with known chunks) before fitting"
        )
    n, d = (int(s) for s in data.shape)
    if n < 2:
        raise ShapeError(
            f"{description} has {n} sample(s) along {sample_dim!r}; at least 2 samples "
            "are needed (if samples are along the other axis, transpose the data or pass "
            "sample_dim=)"
        )
    if d < 1:
        raise ShapeError(
            f"{description} has no feature along {feature_dim!r}; at least 1 feature is needed"
        )
    target = _float_dtype(data.dtype)
    if data.dtype != target:
        data = data.astype(target)
    return Source(
        data=data,
        sample_coords=sample_coords,
        feature_coords=feature_coords,
        sample_dim=sample_dim,
        feature_dim=feature_dim,
        kind=kind,
        description=description,
        attrs=dict(attrs or {}),
    )


def _orient(
    dims: tuple[Hashable, ...], sample_dim: str, feature_dim: str | None, what: str
) -> tuple[str, str]:
    """Return ``(sample_dim, feature_dim)`` for a 2-D object with named ``dims``."""
    if sample_dim not in dims:
        raise ShapeError(
            f"{what} has dimensions {tuple(dims)!r}, none of which is the sample dimension "
            f"{sample_dim!r}; pass sample_dim= with the name of the dimension that indexes "
            f"the samples (one of {list(dims)!r})"
        )
    other = next(str(dim) for dim in dims if dim != sample_dim)
    if feature_dim is not None and feature_dim != other:
        raise ShapeError(
            f"{what} has dimensions {tuple(dims)!r}: with sample_dim={sample_dim!r} the "
            f"feature dimension is {other!r}, not feature_dim={feature_dim!r}; pass "
            f"feature_dim={other!r} or leave it out"
        )
    return sample_dim, other


def _open_dataset(
    ds: xr.Dataset, variable: str | None, sample_dim: str, feature_dim: str | None
) -> Source:
    names = [str(k) for k in ds.data_vars]
    if variable is None:
        if len(names) != 1:
            raise VariableNotFoundError(
                f"the xarray Dataset has {len(names)} data variables {names!r}; pass "
                "variable= to choose the one to analyse"
            )
        variable = names[0]
    if variable not in ds.data_vars:
        raise VariableNotFoundError(
            f"variable {variable!r} is not a data variable of the xarray Dataset; "
            f"available: {names!r}"
        )
    return _open_dataarray(
        ds[variable],
        sample_dim,
        feature_dim,
        kind="xarray",
        description=f"xarray Dataset variable {variable!r}",
    )


def _open_dataarray(
    arr: xr.DataArray,
    sample_dim: str,
    feature_dim: str | None,
    *,
    kind: str,
    description: str,
) -> Source:
    _check_ndim(arr.ndim, arr.shape, description)
    sdim, fdim = _orient(arr.dims, sample_dim, feature_dim, description)
    _check_dtype(arr.dtype, description)
    arr = arr.transpose(sdim, fdim)
    # ``.data`` of a lazily indexed backend array (xr.open_dataset without chunks) would
    # load it; ``.chunk`` wraps it in Dask without reading.
    if arr.chunks is None:
        arr = arr.chunk("auto")
    data = arr.data
    return _from_dask(
        data,
        sdim,
        fdim,
        kind=kind,
        description=description,
        sample_coords=_dim_coord(arr, sdim),
        feature_coords=_dim_coord(arr, fdim),
        attrs=arr.attrs,
    )


def _dim_coord(arr: xr.DataArray, dim: str) -> np.ndarray | None:
    if dim in arr.coords:
        return np.asarray(arr.coords[dim].values)
    return None


# --------------------------------------------------------------------------------------
# Zarr sources
# --------------------------------------------------------------------------------------


class ZarrChunkReader:
    """Array-like view of a Zarr array whose read errors become :class:`ChunkReadError`.

    Hand it to :func:`dask.array.from_array` (``asarray=False``: it already returns NumPy
    arrays).  Dask calls ``__getitem__`` with one tuple of slices per chunk.  Any failure
    while reading or decoding (a truncated or corrupt chunk file, a codec error, a vanished
    object in a bucket) is re-raised with the store, the variable and the slice, so that the
    user learns which file to check instead of seeing a bare codec error.

    Parameters
    ----------
    array : zarr.Array
        The array to read, of any number of dimensions.
    store : str
        The store's path or URL, for messages.
    variable : str or None
        The array's name in its group (None: the store's root array), for messages.

    Attributes
    ----------
    shape : tuple of int
    dtype : numpy.dtype
    ndim : int
        Those of ``array``, as :func:`dask.array.from_array` needs them.

    Examples
    --------
    >>> import zarr
    >>> z = zarr.create_array(store={}, shape=(4, 3), chunks=(2, 3), dtype="f8")
    >>> z[:] = 1.0
    >>> reader = ZarrChunkReader(z, "memory", "X")
    >>> reader[0:2, 0:3].sum()
    np.float64(6.0)
    """

    def __init__(self, array: zarr.Array[Any], store: str, variable: str | None) -> None:
        self.array = array
        self.store = store
        self.variable = variable
        self.shape: tuple[int, ...] = tuple(array.shape)
        self.dtype: np.dtype[Any] = np.dtype(array.dtype)
        self.ndim = len(self.shape)

    def __getitem__(self, key: Any) -> np.ndarray:
        try:
            return np.asarray(self.array[key])
        except MemoryError:
            raise
        except Exception as exc:
            where = f"at index {_format_key(key)}"
            raise chunk_read_error(self.store, self.variable, where, exc) from exc

    def __repr__(self) -> str:
        return f"ZarrChunkReader({self.store!r}, {self.variable!r}, shape={self.shape})"


def _format_key(key: Any) -> str:
    if not isinstance(key, tuple):
        key = (key,)
    parts = []
    for k in key:
        if isinstance(k, slice):
            start = "" if k.start is None else k.start
            stop = "" if k.stop is None else k.stop
            step = "" if k.step in (None, 1) else f":{k.step}"
            parts.append(f"{start}:{stop}{step}")
        else:
            parts.append(repr(k))
    return "[" + ", ".join(parts) + "]"


def _open_zarr(
    path: str | os.PathLike[str], storage_options: Mapping[str, Any] | None
) -> tuple[zarr.Array[Any] | zarr.Group, str]:
    """The Zarr array or group at ``path`` (metadata only) and its description for messages."""
    local = local_path(path)
    if local is not None and not os.path.exists(local):
        raise SourceNotFoundError(
            f"no file or directory at {local} (from source {os.fspath(path)!r}); check "
            "the path of the Zarr store"
        )
    store, where = zarr_store(path, storage_options, read_only=True)
    try:
        node = zarr.open(store=store, mode="r")
    except FileNotFoundError as exc:  # zarr's NodeNotFoundError derives from it
        raise SourceNotFoundError(
            f"{where} does not hold a Zarr array or group (format 2 or 3): {exc}"
        ) from exc
    return node, where


def _open_zarr_node(
    node: zarr.Array[Any] | zarr.Group,
    where: str,
    variable: str | None,
    sample_dim: str,
    feature_dim: str | None,
    allow_missing_chunks: bool = False,
) -> Source:
    group: zarr.Group | None = None
    if isinstance(node, zarr.Array):
        if variable is not None:
            raise VariableNotFoundError(
                f"{where} is a Zarr array, not a group, so it has no variable "
                f"{variable!r}; leave variable= out"
            )
        array = node
        description = f"zarr store {where}"
    else:
        group = node
        array, variable = _select_zarr_variable(group, variable, where)
        description = f"zarr store {where} variable {variable!r}"

    attrs = dict(array.attrs.asdict())
    dims = _zarr_dims(array, attrs)
    _check_ndim(array.ndim, array.shape, description)
    if dims is not None:
        sdim, fdim = _orient(dims, sample_dim, feature_dim, description)
        transpose = dims[0] != sdim
    else:
        sdim, fdim = sample_dim, feature_dim or _DEFAULT_FEATURE_DIM
        transpose = False
    _check_dtype(np.dtype(array.dtype), description)
    # zarr reads an absent chunk as the fill value: compare with the store's listing first.
    missing = check_chunks_present(array, where, variable, allow_missing=allow_missing_chunks)

    # Read whole shards when the array is sharded: a shard is the unit of storage, and
    # reading it per inner chunk would fetch its index once per chunk.
    chunks = getattr(array, "shards", None) or array.chunks
    reader = ZarrChunkReader(array, where, variable)
    meta_token = tokenize(array.shape, str(array.dtype), chunks, array.metadata.zarr_format)
    name = f"zarr-{tokenize(where, variable, meta_token)}"
    data = da.from_array(
        reader,
        chunks=chunks,
        name=name,
        fancy=False,
        asarray=False,  # the reader already returns NumPy arrays
        meta=np.empty((0,) * array.ndim, dtype=reader.dtype),
    )
    if transpose:
        data = data.T

    sample_coords = feature_coords = None
    if group is not None and dims is not None:
        sample_coords = _zarr_coord(group, sdim, data.shape[0], where)
        feature_coords = _zarr_coord(group, fdim, data.shape[1], where)
    src = _from_dask(
        data,
        sdim,
        fdim,
        kind="zarr",
        description=description,
        sample_coords=sample_coords,
        feature_coords=feature_coords,
        attrs=attrs,
    )
    return dataclasses.replace(src, missing_chunks=missing)


def _zarr_arrays(group: zarr.Group) -> dict[str, zarr.Array[Any]]:
    return {str(name): arr for name, arr in group.arrays()}


def _select_zarr_variable(
    group: zarr.Group, variable: str | None, where: str
) -> tuple[zarr.Array[Any], str]:
    arrays = _zarr_arrays(group)
    if variable is None:
        two_d = sorted(name for name, arr in arrays.items() if arr.ndim == 2)
        if len(two_d) != 1:
            raise VariableNotFoundError(
                f"the Zarr group {where} holds {len(two_d)} 2-D arrays {two_d!r} (arrays: "
                f"{sorted(arrays)!r}); pass variable= to choose the one to analyse"
            )
        return arrays[two_d[0]], two_d[0]
    try:
        node = group[variable]
    except KeyError:
        node = None
    if not isinstance(node, zarr.Array):
        what = "is a group, not an array" if node is not None else "is not in it"
        raise VariableNotFoundError(
            f"variable {variable!r} {what}: the Zarr group {where} holds the arrays "
            f"{sorted(arrays)!r}"
        )
    return node, variable


def _zarr_dims(array: zarr.Array[Any], attrs: dict[str, Any]) -> tuple[str, ...] | None:
    """xarray-style dimension names of a Zarr array, or None; pops ``_ARRAY_DIMENSIONS``."""
    names: Any = attrs.pop("_ARRAY_DIMENSIONS", None)
    if array.metadata.zarr_format == 3:
        v3_names = getattr(array.metadata, "dimension_names", None)
        if v3_names is not None:
            names = v3_names
    if names is None or len(names) != array.ndim or any(n is None for n in names):
        return None
    if len(set(names)) != len(names):
        return None
    return tuple(str(n) for n in names)


def _zarr_coord(group: zarr.Group, dim: str, size: int, where: str) -> np.ndarray | None:
    """Values of the 1-D coordinate array named ``dim`` in ``group``, if it exists."""
    try:
        node = group[dim]
    except KeyError:
        return None
    if not isinstance(node, zarr.Array) or node.shape != (size,):
        return None
    try:
        values = np.asarray(node[...])
    except Exception as exc:
        raise ChunkReadError(
            f"could not read the coordinate array {dim!r} of the Zarr store {where}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    if values.dtype.kind == "T":
        # NumPy's variable-width StringDType (how zarr reads format 3 strings) is not yet
        # understood everywhere (pandas, older libraries); object strings are.
        values = values.astype(object)
    return values


# --------------------------------------------------------------------------------------
# Genotype sources: recognised here, read by mspca_dask.genomics
# --------------------------------------------------------------------------------------

#: Variables of a VCF Zarr store (bio2zarr's layout) that hold the genotypes.
GENOTYPE_VARIABLES = ("call_genotype", "call_dosage", "call_DS")

_PLINK_EXTENSIONS = {"bed": (".bed", ".bim", ".fam"), "pgen": (".pgen", ".pvar", ".psam")}


def plink_fileset(source: Any) -> tuple[Path, str] | None:
    """The prefix and kind of the PLINK fileset ``source`` names, or None.

    Parameters
    ----------
    source : object
        ``cohort.bed``, ``cohort.bim``, ``cohort.fam`` and the bare prefix ``cohort`` all name
        the PLINK 1 fileset ``cohort.{bed,bim,fam}`` (a bare prefix must not itself be a file
        or directory, and ``cohort.bed`` must exist beside it); ``cohort.pgen``, ``.pvar``,
        ``.psam`` (or a bare prefix with only a ``.pgen``) name the PLINK 2 fileset.  A URL or
        anything that is not a path is not a fileset.

    Returns
    -------
    (prefix, kind) or None
        ``prefix`` without extension; ``kind`` is ``"bed"`` or ``"pgen"``.  Only names are
        looked at for an explicit extension: whether the three files exist is checked when
        the fileset is opened.

    Examples
    --------
    >>> plink_fileset("cohort.bed")
    (PosixPath('cohort'), 'bed')
    >>> plink_fileset("s3://bucket/cohort.bed") is None
    True
    """
    if not isinstance(source, str | os.PathLike):
        return None
    text = os.fspath(source)
    if "://" in text:
        return None
    p = Path(text)
    suffix = p.suffix.lower()
    for kind, extensions in _PLINK_EXTENSIONS.items():
        if suffix in extensions:
            return p.with_suffix(""), kind
    if not p.exists():
        for kind, extensions in _PLINK_EXTENSIONS.items():
            if p.with_name(p.name + extensions[0]).is_file():
                return p, kind
    return None


def is_vcf_zarr(
    source: Any,
    variable: str | None = None,
    *,
    storage_options: Mapping[str, Any] | None = None,
) -> bool:
    """Whether ``source`` is the path or URL of a VCF Zarr store (bio2zarr's layout).

    Parameters
    ----------
    source : object
        A path or fsspec URL (anything else is not a VCF Zarr store).
    variable : str, optional
        The variable the caller asked for: a store only counts when ``variable`` is None or
        one of :data:`GENOTYPE_VARIABLES` (asking for another array means "analyse that
        array", which :func:`open_source` does).
    storage_options : mapping, optional
        Passed to fsspec for a URL.

    Returns
    -------
    bool
        True when ``source`` is a Zarr group holding ``sample_id`` and one of
        :data:`GENOTYPE_VARIABLES`.  Only the group's metadata and member names are read;
        anything that cannot be opened as a group is not one (:func:`open_source` then says
        why).
    """
    if not isinstance(source, str | os.PathLike):
        return False
    if variable is not None and variable not in GENOTYPE_VARIABLES:
        return False
    local = local_path(source)
    if local is not None and not os.path.isdir(local):
        return False
    try:
        store, _ = zarr_store(source, storage_options, read_only=True)
        keys = set(zarr.open_group(store=store, mode="r").keys())
    except Exception:  # not a group (an array, nothing there, unreadable metadata)
        return False
    return "sample_id" in keys and any(v in keys for v in GENOTYPE_VARIABLES)


def is_genotype_source(
    source: Any,
    variable: str | None = None,
    *,
    storage_options: Mapping[str, Any] | None = None,
) -> bool:
    """Whether ``source`` names genotypes: a PLINK fileset or a VCF Zarr store.

    The core dispatches on this before opening anything, so it is cheap: file names and
    existence for PLINK (:func:`plink_fileset`), the group's metadata for VCF Zarr
    (:func:`is_vcf_zarr`).

    Parameters
    ----------
    source : object
        What was handed to :func:`mspca_dask.fit`; only paths and URLs can be genotypes.
    variable : str, optional
        The variable asked for (see :func:`is_vcf_zarr`); ignored for a PLINK fileset.
    storage_options : mapping, optional
        Passed to fsspec for a URL.

    Returns
    -------
    bool

    Examples
    --------
    >>> import numpy as np
    >>> is_genotype_source(np.zeros((3, 2))), is_genotype_source("no-such-store.zarr")
    (False, False)
    """
    if plink_fileset(source) is not None:
        return True
    return is_vcf_zarr(source, variable, storage_options=storage_options)
