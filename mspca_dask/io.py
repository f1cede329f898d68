"""Input and output: open data sources lazily, write results atomically.

This module owns every contact with Zarr, xarray and fsspec.  It does no numerical work.

* :func:`open_source` turns a NumPy array, a Dask array, an ``xarray.DataArray`` or
  ``Dataset``, or the path / fsspec URL of a Zarr store (format 2 or 3) into a
  :class:`Source`: a lazy ``(n_samples, n_features)`` Dask array of a real floating dtype,
  plus the sample and feature coordinates and a human-readable description.  Opening never
  reads the data (only metadata, and the small 1-D coordinate arrays of a Zarr group).
* :func:`write_dataset_atomic` writes an ``xarray.Dataset`` to a Zarr store so that a crash
  never leaves a complete-looking result: the store is written under a hidden temporary
  name in the same directory, marked complete (root attribute ``mspca_complete = True``) and
  then renamed into place.
* :func:`open_dataset_checked` and :func:`is_complete` read such a store back, refusing one
  that was never marked complete.
"""

from __future__ import annotations

import dataclasses
import math
import os
import posixpath
import shutil
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import dask.array as da
import numpy as np
import xarray as xr
import zarr
from dask.base import tokenize

from mspca_dask._safety import (
    check_chunks_present,
    exists_error,
    foreign_error,
    is_replaceable,
)
from mspca_dask.errors import (
    ChunkReadError,
    DTypeError,
    InputError,
    ResultCorruptError,
    ResultExistsError,
    ShapeError,
    SourceNotFoundError,
    VariableNotFoundError,
)

if TYPE_CHECKING:
    from collections.abc import Hashable, Mapping

__all__ = [
    "COMPLETE_ATTR",
    "Source",
    "open_source",
    "write_dataset_atomic",
    "open_dataset_checked",
    "is_complete",
]

#: Root attribute that marks a result store as completely written.
COMPLETE_ATTR = "mspca_complete"

#: Default name of the feature dimension when the source does not name it.
_DEFAULT_FEATURE_DIM = "features"

_SOURCE_KINDS = ("numpy", "dask", "xarray", "zarr")


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
        ``float64``).  Nothing has been computed or read.
    sample_coords : (n_samples,) numpy.ndarray or None
        Labels of the samples (the coordinate of the sample dimension), if the source
        has them.
    feature_coords : (n_features,) numpy.ndarray or None
        Labels of the features, if the source has them.
    sample_dim : str
        Name of the sample dimension.
    feature_dim : str
        Name of the feature dimension.
    kind : {"numpy", "dask", "xarray", "zarr"}
        What the source was.
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
) -> Source:
    """Open a data source lazily as a ``(n_samples, n_features)`` Dask array.

    Parameters
    ----------
    source : array, xarray object, str or os.PathLike
        One of

        * a NumPy array shaped ``(n_samples, n_features)``, or anything else
          :func:`numpy.asarray` accepts (a list, a pandas DataFrame), which is then
          loaded into memory;
        * a Dask array shaped ``(n_samples, n_features)`` with known chunk sizes;
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
        The data are not real numbers (strings, objects, complex, dates), or ``source``
        is of a type this function does not read.
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

    if isinstance(source, xr.Dataset):
        return _open_dataset(source, variable, sample_dim, feature_dim)
    if isinstance(source, (zarr.Array, zarr.Group)):
        # Before the generic ``__array__`` case below, which would load the whole array.
        return _open_zarr_node(
            source, str(source.store_path), variable, sample_dim, feature_dim, allow_missing_chunks
        )
    if variable is not None:
        # ``variable`` only makes sense for containers; silently ignoring it would hide a
        # mistake (the caller probably meant another object).
        if not isinstance(source, (str, os.PathLike)):
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
    if isinstance(source, (str, os.PathLike)):
        return _open_zarr(
            source, variable, sample_dim, feature_dim, storage_options, allow_missing_chunks
        )
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
        "source must be a NumPy or Dask array, an xarray DataArray or Dataset, or the "
        f"path or URL of a Zarr store (got an object of type {type(source).__name__})"
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


class _ZarrChunkReader:
    """Array-like view of a Zarr array whose read errors become :class:`ChunkReadError`.

    Dask calls ``__getitem__`` with one tuple of slices per chunk.  Any failure while
    reading or decoding (a truncated or corrupt chunk file, a codec error, a vanished
    object in a bucket) is re-raised with the store, the variable and the slice, so that
    the user learns which file to check instead of seeing a bare codec error.
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
            var = f"variable {self.variable!r}" if self.variable else "root array"
            raise ChunkReadError(
                f"could not read or decode Zarr store {self.store} {var} at index "
                f"{_format_key(key)}: {type(exc).__name__}: {exc}. A chunk file is "
                "probably corrupt or truncated; check or rewrite the store"
            ) from exc

    def __repr__(self) -> str:
        return f"_ZarrChunkReader({self.store!r}, {self.variable!r}, shape={self.shape})"


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


def _local_path(path: str | os.PathLike[str]) -> str | None:
    """The local filesystem path of ``path``, or None if it is a non-local fsspec URL."""
    if isinstance(path, os.PathLike):
        return os.path.abspath(os.path.expanduser(os.fspath(path)))
    if "://" not in path:
        return os.path.abspath(os.path.expanduser(path))
    if path.startswith(("file://", "local://")):
        from fsspec.implementations.local import LocalFileSystem

        return os.path.abspath(str(LocalFileSystem._strip_protocol(path)))
    return None


def _zarr_store(
    path: str | os.PathLike[str],
    storage_options: Mapping[str, Any] | None,
    *,
    read_only: bool,
) -> tuple[Any, str]:
    """A Zarr store for ``path`` and its display name (absolute path or URL)."""
    local = _local_path(path)
    if local is not None:
        return zarr.storage.LocalStore(local, read_only=read_only), local
    url = str(path)
    store = zarr.storage.FsspecStore.from_url(
        url, storage_options=dict(storage_options or {}), read_only=read_only
    )
    return store, url


def _open_zarr(
    path: str | os.PathLike[str],
    variable: str | None,
    sample_dim: str,
    feature_dim: str | None,
    storage_options: Mapping[str, Any] | None,
    allow_missing_chunks: bool = False,
) -> Source:
    local = _local_path(path)
    if local is not None and not os.path.exists(local):
        raise SourceNotFoundError(
            f"no file or directory at {local} (from source {os.fspath(path)!r}); check "
            "the path of the Zarr store"
        )
    store, where = _zarr_store(path, storage_options, read_only=True)
    try:
        node = zarr.open(store=store, mode="r")
    except FileNotFoundError as exc:  # zarr's NodeNotFoundError derives from it
        raise SourceNotFoundError(
            f"{where} does not hold a Zarr array or group (format 2 or 3): {exc}"
        ) from exc
    return _open_zarr_node(node, where, variable, sample_dim, feature_dim, allow_missing_chunks)


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
    reader = _ZarrChunkReader(array, where, variable)
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
# Atomic result store
# --------------------------------------------------------------------------------------


def is_complete(
    path: str | os.PathLike[str], *, storage_options: Mapping[str, Any] | None = None
) -> bool:
    """Whether ``path`` holds a completely written result store.

    Parameters
    ----------
    path : str or os.PathLike
        Local path or fsspec URL of a Zarr store.
    storage_options : mapping, optional
        Passed to fsspec for remote URLs.

    Returns
    -------
    bool
        True if ``path`` is a Zarr group whose root attribute ``mspca_complete`` is
        ``True``; False if it does not exist, is not a Zarr group, or lacks the flag.
    """
    local = _local_path(path)
    if local is not None and not os.path.isdir(local):
        return False
    try:
        group = _open_group(path, storage_options)
    except (FileNotFoundError, ValueError, TypeError):
        # Missing store, a node that is an array and not a group, unreadable metadata.
        return False
    return group.attrs.get(COMPLETE_ATTR) is True


def _open_group(
    path: str | os.PathLike[str], storage_options: Mapping[str, Any] | None
) -> zarr.Group:
    store, _ = _zarr_store(path, storage_options, read_only=True)
    # The root metadata document, not consolidated metadata: it is what is written last.
    return zarr.open_group(store=store, mode="r", use_consolidated=False)


def open_dataset_checked(
    path: str | os.PathLike[str], *, storage_options: Mapping[str, Any] | None = None
) -> xr.Dataset:
    """Open a result store written by :func:`write_dataset_atomic`, fully in memory.

    Parameters
    ----------
    path : str or os.PathLike
        Local path or fsspec URL of the Zarr store.
    storage_options : mapping, optional
        Passed to fsspec for remote URLs.

    Returns
    -------
    xarray.Dataset
        The stored Dataset, loaded (results are small); its attributes include
        ``mspca_complete = True``.  Strings are returned as object arrays.

    Raises
    ------
    SourceNotFoundError
        Nothing is stored at ``path``.
    InputError
        The store exists but was never marked complete (an interrupted write), or is
        not a Zarr group.
    ResultCorruptError
        A chunk fails its CRC32C checksum or cannot be decoded.
    """
    local = _local_path(path)
    where = local if local is not None else str(path)
    if local is not None and not os.path.exists(local):
        raise SourceNotFoundError(f"no result store at {where}; check the path")
    try:
        group = _open_group(path, storage_options)
    except FileNotFoundError as exc:
        raise SourceNotFoundError(
            f"no result store at {where} (no Zarr group found): {exc}"
        ) from exc
    except ValueError as exc:  # e.g. zarr's ContainsArrayError: an array, not a group
        raise InputError(f"{where} is not a result store (not a Zarr group): {exc}") from exc
    if group.attrs.get(COMPLETE_ATTR) is not True:
        raise InputError(
            f"the result store {where} is incomplete (a crashed or interrupted write?): "
            f"its root attribute {COMPLETE_ATTR!r} is missing; recompute the result and "
            "write it again with overwrite=True"
        )
    target: Any = local if local is not None else str(path)
    kwargs: dict[str, Any] = {}
    if local is None and storage_options:
        kwargs["storage_options"] = dict(storage_options)
    try:
        with xr.open_dataset(
            target, engine="zarr", consolidated=False, chunks=None, **kwargs
        ) as ds:
            ds = ds.load()
    except (ValueError, OSError, RuntimeError, TypeError) as exc:
        # A CRC32C mismatch (zarr raises ValueError), a truncated or undecodable chunk.
        raise ResultCorruptError(
            f"the result store {where} is damaged: a stored chunk fails its checksum or "
            f"cannot be decoded ({type(exc).__name__}: {exc}); recompute the result, or "
            "restore it from a backup"
        ) from exc
    # Format 3 strings read back as NumPy's StringDType; return object strings, as for
    # the coordinates of a source (see _zarr_coord).
    strings = [k for k, v in ds.variables.items() if v.dtype.kind == "T"]
    return _strings_as_objects(ds, strings)


def _strings_as_objects(ds: xr.Dataset, names: list[str]) -> xr.Dataset:
    """Replace the named string variables (fixed-width, bytes or StringDType) by object arrays."""
    for k in names:
        var = ds.variables[k]
        if var.dtype.kind == "S":
            values = np.char.decode(np.asarray(var.values), "utf-8").astype(object)
        else:
            values = np.asarray(var.values).astype(object)
        if k in ds.coords:
            ds = ds.assign_coords({k: (var.dims, values, var.attrs)})
        else:
            ds[k] = (var.dims, values, var.attrs)
    return ds


def write_dataset_atomic(
    ds: xr.Dataset,
    path: str | os.PathLike[str],
    *,
    overwrite: bool = False,
    zarr_format: int = 3,
    storage_options: Mapping[str, Any] | None = None,
) -> str:
    """Write ``ds`` to a Zarr store so that a crash never leaves a complete-looking result.

    Parameters
    ----------
    ds : xarray.Dataset
        The result to write.  Its data are computed if they are lazy.
    path : str or os.PathLike
        Local path, ``file://`` URL, or other fsspec URL of the store to create.
    overwrite : bool, default False
        Replace a store that mspca_dask wrote at ``path`` (or an empty directory).  Without
        it, an existing ``path`` is refused; with it, data we did not write are still refused.
    zarr_format : {3, 2}, default 3
        Zarr format of the store.
    storage_options : mapping, optional
        Passed to fsspec for remote URLs.

    Returns
    -------
    str
        The absolute local path, or the URL, of the written store.

    Raises
    ------
    ResultExistsError
        ``path`` already exists (a complete result, or anything else) and ``overwrite``
        is False.
    ForeignOutputError
        ``path`` holds data that mspca_dask did not write (no completion marker or schema
        attribute at its root); ``overwrite`` never replaces those.

    Notes
    -----
    On a local filesystem the store is written to a hidden sibling
    ``.{name}.tmp-{uuid}`` in the same directory, marked complete by setting the root
    attribute ``mspca_complete = True`` as its last write, and renamed into place with
    :func:`os.replace` (atomic on POSIX).  An existing store replaced with
    ``overwrite=True`` is first renamed aside and deleted after the new one is in place.
    A crash at any point leaves either the old store, or the new complete one, plus at
    most a hidden temporary directory — never an incomplete store under ``path``.

    Object stores (``s3://``, ``gs://``, ``memory://``, ...) have no atomic rename, so
    there the store is written in place and the completion attribute is written last: a
    crash leaves an *incomplete* store, which :func:`open_dataset_checked` refuses and
    :func:`is_complete` reports as such.

    Every chunk is followed by its CRC32C checksum (format 3, ``zarr.codecs.Crc32cCodec``),
    so a flipped or truncated byte in a stored result is a read error
    (:class:`~mspca_dask.errors.ResultCorruptError`), not a wrong number.

    Fixed-width unicode variables are stored as variable-length strings in format 3
    (Zarr has no stable format 3 encoding of fixed-width strings); they read back with
    NumPy's string dtype.
    """
    if zarr_format not in (2, 3):
        raise InputError(f"zarr_format must be 2 or 3 (got {zarr_format!r})")
    if not isinstance(ds, xr.Dataset):
        raise DTypeError(f"ds must be an xarray.Dataset (got {type(ds).__name__})")
    ds = _prepare_for_zarr(ds, zarr_format)
    local = _local_path(path)
    if local is None:
        return _write_remote(ds, str(path), overwrite, zarr_format, storage_options)

    target = local.rstrip(os.sep) or local
    parent, name = os.path.split(target)
    if not name:
        raise InputError(f"cannot write a result store at the filesystem root {target!r}")
    if os.path.lexists(target) and not overwrite:
        raise _exists_error(target)
    if not is_replaceable(target):
        raise foreign_error(target, "the output")
    os.makedirs(parent, exist_ok=True)

    token = uuid.uuid4().hex
    tmp = os.path.join(parent, f".{name}.tmp-{token}")
    try:
        _write_and_mark(ds, tmp, zarr_format, storage_options=None)
        _commit(tmp, target, overwrite, token)
    except BaseException:
        _remove(tmp)
        raise
    _fsync_dir(parent)
    return target


def _prepare_for_zarr(ds: xr.Dataset, zarr_format: int) -> xr.Dataset:
    """A shallow copy of ``ds`` without the completion flag, ready for ``to_zarr``."""
    ds = ds.copy(deep=False)
    ds.attrs = {k: v for k, v in ds.attrs.items() if k != COMPLETE_ATTR}
    if zarr_format == 3:
        # zarr-python warns (UnstableSpecificationWarning) on fixed-width strings in
        # format 3; variable-length strings have a specified encoding.
        fixed = [k for k, v in ds.variables.items() if v.dtype.kind in "US"]
        ds = _strings_as_objects(ds, fixed)
    return ds


def _write_and_mark(
    ds: xr.Dataset,
    where: str,
    zarr_format: int,
    storage_options: Mapping[str, Any] | None,
    *,
    mark: bool = True,
) -> None:
    """Write ``ds`` at ``where``, then set the completion flag as the very last write."""
    kwargs: dict[str, Any] = {}
    if storage_options:
        kwargs["storage_options"] = dict(storage_options)
    # Consolidated metadata is not part of the Zarr format 3 specification (zarr-python
    # warns); in format 2 it is written and refreshed after the flag is set.
    consolidated = zarr_format == 2
    if zarr_format == 3:
        kwargs["encoding"] = _checksummed(ds)
    ds.to_zarr(where, mode="w", zarr_format=zarr_format, consolidated=consolidated, **kwargs)
    if mark:
        _mark_complete(where, storage_options, consolidated)


def _mark_complete(
    where: str, storage_options: Mapping[str, Any] | None, consolidated: bool
) -> None:
    """Set the completion flag (and refresh format 2's consolidated metadata)."""
    store, _ = _zarr_store(where, storage_options, read_only=False)
    group = zarr.open_group(store=store, mode="r+", use_consolidated=False)
    group.attrs[COMPLETE_ATTR] = True
    if consolidated:
        zarr.consolidate_metadata(store)


def _checksummed(ds: xr.Dataset) -> dict[str, dict[str, Any]]:
    """Format 3 encoding of every variable: zarr's default compressor, then a CRC32C."""
    from zarr.codecs import Crc32cCodec, ZstdCodec

    return {str(k): {"compressors": (ZstdCodec(), Crc32cCodec())} for k in ds.variables}


def _commit(
    tmp: str, target: str, overwrite: bool, token: str, *, result_name: str | None = None
) -> None:
    """Rename the finished store ``tmp`` to ``target``, moving an old one aside first.

    ``target`` is replaced only with ``overwrite`` and only if it is ours (a store we wrote,
    or for ``result_name`` a directory whose ``result_name`` store we wrote, or an empty
    directory); the old one is put back if the rename fails, and deleted only once the new
    one is in place.
    """
    aside: str | None = None
    if os.path.lexists(target):
        if not overwrite:  # appeared while we were writing
            raise _exists_error(target)
        if not is_replaceable(target, result_name=result_name):
            raise foreign_error(target, "the output")
        parent, name = os.path.split(target)
        aside = os.path.join(parent, f".{name}.old-{token}")
        os.replace(target, aside)
    try:
        os.replace(tmp, target)
    except OSError as exc:
        if aside is not None:
            os.replace(aside, target)  # put the old result back
        elif os.path.lexists(target):
            raise _exists_error(target) from exc
        raise
    if aside is not None:
        _remove(aside)


def _exists_error(target: str) -> ResultExistsError:
    return exists_error(target, "path", "overwrite=True", replaceable=is_replaceable(target))


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        try:
            os.remove(path)
        except OSError:
            pass


def _fsync_dir(path: str) -> None:
    """Make a rename in ``path`` durable (best effort; not every platform allows it)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_remote(
    ds: xr.Dataset,
    url: str,
    overwrite: bool,
    zarr_format: int,
    storage_options: Mapping[str, Any] | None,
) -> str:
    """Write to an object store; the completion flag is the last write.

    An existing result (``overwrite``) is kept until the new one is written: the new store is
    written beside it under a hidden name, the old one moved aside, the new one moved into
    place and flagged complete, and only then is the old one deleted (put back if the move
    fails).  Object stores move by copying, so the flag is set after the move.
    """
    import fsspec

    fs, fs_path = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
    exists = fs.exists(fs_path)
    if exists:
        if not is_replaceable(url, storage_options=storage_options):
            raise foreign_error(url, "the output")
        if not overwrite:
            if is_complete(url, storage_options=storage_options):
                raise ResultExistsError(
                    f"a complete result already exists at {url}; pass overwrite=True to "
                    "replace it, or choose another path"
                )
            raise ResultExistsError(
                f"{url} already exists and is not a complete result (an interrupted "
                "write, or other data); pass overwrite=True to replace it"
            )
    if not exists:
        _write_and_mark(ds, url, zarr_format, storage_options)
        return url
    parent, name = posixpath.split(str(fs_path).rstrip("/"))
    token = uuid.uuid4().hex
    tmp, aside = f"{parent}/.{name}.tmp-{token}", f"{parent}/.{name}.old-{token}"
    try:
        _write_and_mark(ds, fs.unstrip_protocol(tmp), zarr_format, storage_options, mark=False)
        fs.mv(fs_path, aside, recursive=True)
        try:
            fs.mv(tmp, fs_path, recursive=True)
        except BaseException:
            if fs.exists(fs_path):
                fs.rm(fs_path, recursive=True)
            fs.mv(aside, fs_path, recursive=True)  # put the old result back
            raise
    finally:
        if fs.exists(tmp):
            fs.rm(tmp, recursive=True)
    _mark_complete(url, storage_options, zarr_format == 2)
    fs.rm(aside, recursive=True)
    return url
