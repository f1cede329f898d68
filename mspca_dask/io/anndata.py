"""AnnData in and out: ``X`` or a layer read lazily, results stored as scanpy stores its PCA.

Single-cell data come as AnnData: cells are the observations (``obs``, the samples of the
PCA), genes the variables (``var``, the features), and the matrix — ``X`` or one of
``layers`` — is usually sparse.  This module opens it as a :class:`~mspca_dask.io.Source`
without reading it, and writes a fit's result back into the object.

* :func:`is_anndata`, :func:`is_h5ad_path` and :func:`is_anndata_group` recognise an
  in-memory AnnData, an ``.h5ad`` file and an AnnData Zarr store from the object's type, the
  file's name and the group's ``encoding-type`` attribute, without importing anndata.
* :func:`open_anndata` reads the matrix lazily: a sparse matrix on disk through anndata's
  :func:`anndata.experimental.read_elem_lazy` (chunks of whole rows of a CSR matrix, or whole
  columns of a CSC one, each small enough to be densified in its task), a dense Zarr array
  through :func:`~mspca_dask.io.open_source`'s own Zarr reader (which names a corrupt or
  missing chunk), a dense HDF5 dataset by anndata's per-chunk reader.  Only the names of the
  observations and variables and the mask columns are read when opening.
* :func:`add_to_anndata` stores a result where scanpy's ``pp.pca`` stores its own:
  ``obsm["X_mspca"]``, ``varm["MSPCA"]`` and ``uns["mspca"]``.

anndata is an optional dependency (``pip install 'mspca-dask[anndata]'``); without it the
files and stores raise :class:`~mspca_dask.errors.MissingDependencyError`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dask.array as da
import numpy as np
import pandas as pd
import zarr
from dask.base import tokenize

from ..errors import (
    ChunkReadError,
    DTypeError,
    InputError,
    MissingDependencyError,
    ResultExistsError,
    ShapeError,
    SourceNotFoundError,
    VariableNotFoundError,
)
from .sources import Source, _from_dask, _open_zarr_node, open_source
from .urls import local_path

if TYPE_CHECKING:
    from ..result import MSPCAResult

__all__ = [
    "is_anndata",
    "is_h5ad_path",
    "is_anndata_group",
    "open_anndata",
    "add_to_anndata",
    "H5RowReader",
    "OBSM_KEY",
    "VARM_KEY",
    "UNS_KEY",
]

#: Default keys of :func:`add_to_anndata`, after scanpy's ``X_pca``, ``PCs`` and ``pca``.
OBSM_KEY, VARM_KEY, UNS_KEY = "X_mspca", "MSPCA", "mspca"

_INSTALL = "pip install 'mspca-dask[anndata]'"


# --------------------------------------------------------------------------------------
# Recognising AnnData (cheap, without importing anndata)
# --------------------------------------------------------------------------------------


def is_anndata(source: Any) -> bool:
    """Whether ``source`` is an ``anndata.AnnData`` (false when anndata was never imported).

    Examples
    --------
    >>> import numpy as np
    >>> is_anndata(np.zeros((2, 2)))
    False
    """
    module = sys.modules.get("anndata")
    return module is not None and isinstance(source, module.AnnData)


def is_h5ad_path(source: Any) -> bool:
    """Whether ``source`` is a path or URL whose name ends in ``.h5ad``.

    Examples
    --------
    >>> is_h5ad_path("pbmc.h5ad"), is_h5ad_path("pbmc.zarr")
    (True, False)
    """
    if not isinstance(source, str | os.PathLike):
        return False
    return os.fspath(source).lower().rstrip("/").endswith(".h5ad")


def is_anndata_group(node: Any) -> bool:
    """Whether ``node`` is the root group of an AnnData Zarr store (its ``encoding-type``)."""
    if not isinstance(node, zarr.Group):
        return False
    return node.attrs.get("encoding-type") == "anndata"


def _import_anndata(what: str) -> Any:
    try:
        import anndata
    except ImportError as exc:
        raise MissingDependencyError(
            f"reading {what} needs the optional dependency anndata, which is not installed "
            f"({exc}); install it with {_INSTALL}"
        ) from exc
    return anndata


# --------------------------------------------------------------------------------------
# Opening
# --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Axis:
    """The names of one axis (``obs`` or ``var``) and a reader of its columns."""

    name: str
    names: np.ndarray
    columns: tuple[str, ...]
    column: Any  # column name -> values (read on demand)


def open_anndata(
    source: Any,
    *,
    layer: str | None = None,
    mask_obs: Any = None,
    mask_var: Any = None,
    variable: str | None = None,
    sample_dim: str = "samples",
    feature_dim: str | None = None,
    allow_missing_chunks: bool = False,
    where: str | None = None,
) -> Source:
    """Open the matrix of an AnnData lazily, observations as samples and variables as features.

    Parameters
    ----------
    source : anndata.AnnData, str, os.PathLike or zarr.Group
        An in-memory (or backed) AnnData, the path of an ``.h5ad`` file, or the root group
        of an AnnData Zarr store (:func:`~mspca_dask.io.open_source` opens a store's path or
        URL and hands its group here).
    layer : str, optional
        The layer to analyse; ``None`` analyses ``X`` (as in scanpy).
    mask_obs, mask_var : (n_obs,) / (n_vars,) bool array or str, optional
        The observations / variables to analyse: a boolean mask, or the name of a boolean
        column of ``obs`` / ``var`` (``mask_var="highly_variable"``), as in scanpy.  The
        mask is applied lazily; the result's sample and feature labels are the kept
        ``obs_names`` and ``var_names``.
    variable : None
        Refused: an AnnData names its matrices by ``layer``.
    sample_dim, feature_dim : str
        Names of the two dimensions in the result (``"samples"``, ``"features"``).
    allow_missing_chunks : bool
        For a dense array in a Zarr store, as in :func:`~mspca_dask.io.open_source`.
    where : str, optional
        The store's path or URL, for messages (with a Zarr group).

    Returns
    -------
    Source
        ``kind="anndata"`` (``"zarr"`` for a dense array of a Zarr store, read by the
        package's own Zarr reader); ``sample_coords`` and ``feature_coords`` are the
        ``obs_names`` and ``var_names`` kept by the masks.

    Raises
    ------
    MissingDependencyError
        A file or store is given and anndata is not installed.
    SourceNotFoundError
        The ``.h5ad`` file does not exist or is not an HDF5 file.
    VariableNotFoundError
        ``layer`` is not a layer, a mask column is not in ``obs`` / ``var``, or the AnnData
        has no ``X`` and no ``layer`` was given.
    InputError
        ``variable`` was given.
    ShapeError
        A mask has the wrong length, or keeps fewer than 2 observations or no variable.
    DTypeError
        A mask (or its column) is not boolean, or the matrix is not of a real numeric dtype.

    Examples
    --------
    >>> import anndata as ad, numpy as np, scipy.sparse as sp
    >>> adata = ad.AnnData(sp.random(6, 4, density=0.5, format="csr", random_state=0))
    >>> src = open_anndata(adata, mask_obs=np.arange(6) < 5)
    >>> src.kind, src.data.shape, type(src.data._meta).__name__
    ('anndata', (5, 4), 'csr_matrix')
    """
    if variable is not None:
        raise InputError(
            f"variable={variable!r} was given for an AnnData source, whose matrices are "
            "chosen with layer= (leave both out for X, or pass layer='name' for "
            "adata.layers['name'])"
        )
    if layer is not None and not isinstance(layer, str):
        raise InputError(f"layer must be the name of a layer or None for X (not {layer!r})")
    masks = (mask_obs, mask_var)
    if is_anndata(source):
        if source.isbacked and layer is None:
            src, obs, var = _open_file(Path(source.filename), None, masks, sample_dim, feature_dim)
        else:
            src, obs, var = _open_in_memory(source, layer, masks, sample_dim, feature_dim)
    elif isinstance(source, zarr.Group):
        where = where or str(source.store_path)
        src, obs, var = _open_group(
            source, where, layer, masks, sample_dim, feature_dim, allow_missing_chunks
        )
    else:
        src, obs, var = _open_file(source, layer, masks, sample_dim, feature_dim)
    return _select(src, obs, var)


#: The masks asked for, ``(mask_obs, mask_var)``, and the boolean arrays they give.
_Masks = tuple[Any, Any]
_Kept = tuple[np.ndarray | None, np.ndarray | None]


def _masks(masks: _Masks, obs: _Axis, var: _Axis) -> _Kept:
    return _mask(masks[0], obs, "mask_obs"), _mask(masks[1], var, "mask_var")


def _layer_name(layer: str | None) -> str:
    return "X" if layer is None else f"layer {layer!r}"


def _check_layer(layer: str | None, layers: Any, where: str) -> None:
    if layer is not None and layer not in layers:
        raise VariableNotFoundError(
            f"layer {layer!r} is not a layer of {where}; its layers are {sorted(layers)!r} "
            "(layer=None analyses X)"
        )


def _open_in_memory(
    adata: Any, layer: str | None, masks: _Masks, sample_dim: str, feature_dim: str | None
) -> tuple[Source, np.ndarray | None, np.ndarray | None]:
    _check_layer(layer, adata.layers.keys(), "the AnnData")
    matrix = adata.X if layer is None else adata.layers[layer]
    if matrix is None:
        raise VariableNotFoundError(
            f"the AnnData has no X; pass layer= with one of its layers {sorted(adata.layers)!r}"
        )
    what = f"{_layer_name(layer)} of the AnnData"
    try:
        inner = open_source(matrix, sample_dim=sample_dim, feature_dim=feature_dim)
    except DTypeError as exc:
        raise DTypeError(f"{what}: {exc}") from exc
    shape = (adata.n_obs, adata.n_vars)
    src = dataclasses.replace(
        inner,
        kind="anndata",
        description=f"{what} ({type(matrix).__name__} of shape {shape})",
        sample_coords=np.asarray(adata.obs_names, dtype=object),
        feature_coords=np.asarray(adata.var_names, dtype=object),
    )
    return src, *_masks(masks, _frame_axis("obs", adata.obs), _frame_axis("var", adata.var))


def _frame_axis(name: str, frame: pd.DataFrame) -> _Axis:
    return _Axis(
        name=name,
        names=np.asarray(frame.index, dtype=object),
        columns=tuple(str(c) for c in frame.columns),
        column=lambda col: frame[col],
    )


def _open_file(
    path: Any, layer: str | None, masks: _Masks, sample_dim: str, feature_dim: str | None
) -> tuple[Source, np.ndarray | None, np.ndarray | None]:
    """An ``.h5ad`` file: the HDF5 file is open only while its metadata are read; every
    chunk task opens it again (anndata's lazy readers hold its path, not the open file)."""
    local = local_path(path)
    if local is None:
        raise InputError(
            f"{os.fspath(path)!r}: an .h5ad file is read from a local path only; copy it "
            "here, or convert it to an AnnData Zarr store (adata.write_zarr) to read it "
            "from a URL"
        )
    if not os.path.isfile(local):
        raise SourceNotFoundError(f"no file at {local} (from source {os.fspath(path)!r})")
    anndata = _import_anndata(f"the .h5ad file {local}")
    import h5py

    try:
        file = h5py.File(local, "r")
    except OSError as exc:
        raise SourceNotFoundError(f"{local} is not an HDF5 (.h5ad) file: {exc}") from exc
    with file:
        where = f".h5ad file {local}"
        _check_layer(layer, _layer_names(file), f"the {where}")
        elem = _matrix_elem(file, layer, where)
        if isinstance(elem, h5py.Dataset):
            data = _h5_dense(local, elem)
        else:
            data = _read_sparse(anndata, elem)
        obs, var = _store_axis(anndata, file, "obs"), _store_axis(anndata, file, "var")
        src = _from_dask(
            data,
            sample_dim,
            feature_dim or "features",
            kind="anndata",
            description=f"{_layer_name(layer)} of the {where}",
            sample_coords=obs.names,
            feature_coords=var.names,
        )
        kept = _masks(masks, obs, var)  # mask columns are read while the file is open
    return src, *kept


def _open_group(
    group: zarr.Group,
    where: str,
    layer: str | None,
    masks: _Masks,
    sample_dim: str,
    feature_dim: str | None,
    allow_missing_chunks: bool,
) -> tuple[Source, np.ndarray | None, np.ndarray | None]:
    anndata = _import_anndata(f"the AnnData Zarr store {where}")
    _check_layer(layer, _layer_names(group), f"the AnnData Zarr store {where}")
    where_text = f"AnnData Zarr store {where}"
    elem = _matrix_elem(group, layer, where_text)
    obs, var = _store_axis(anndata, group, "obs"), _store_axis(anndata, group, "var")
    description = f"{_layer_name(layer)} of the {where_text}"
    if isinstance(elem, zarr.Array):
        # A dense array: the package's own reader, which names a corrupt or missing chunk.
        path = "X" if layer is None else f"layers/{layer}"
        inner = _open_zarr_node(group, where, path, sample_dim, feature_dim, allow_missing_chunks)
        src = dataclasses.replace(
            inner, description=description, sample_coords=obs.names, feature_coords=var.names
        )
    else:
        src = _from_dask(
            _read_sparse(anndata, elem),
            sample_dim,
            feature_dim or "features",
            kind="anndata",
            description=description,
            sample_coords=obs.names,
            feature_coords=var.names,
        )
    return src, *_masks(masks, obs, var)


def _layer_names(root: Any) -> list[str]:
    """Names of the layers of an AnnData file or store (its ``layers`` group)."""
    return sorted(str(k) for k in root["layers"].keys()) if "layers" in root else []


def _matrix_elem(root: Any, layer: str | None, where: str) -> Any:
    key = "X" if layer is None else f"layers/{layer}"
    if key not in root:
        raise VariableNotFoundError(
            f"the {where} has no X; pass layer= with one of its layers {_layer_names(root)!r}"
        )
    elem = root[key]
    if hasattr(elem, "shape") and hasattr(elem, "dtype"):  # a dense array or dataset
        return elem
    encoding = elem.attrs.get("encoding-type")
    if encoding not in ("csr_matrix", "csc_matrix"):
        found = f"encoded as {encoding!r}" if encoding else "a group without anndata's encoding"
        raise DTypeError(
            f"{_layer_name(layer)} of the {where} is {found}; only dense arrays and CSR or CSC "
            "sparse matrices can be analysed (a file from an old anndata: read it and write "
            "it again with a current one)"
        )
    return elem


def _row_chunks(shape: tuple[int, int], dtype: Any, csc: bool = False) -> tuple[int, int]:
    """Chunks of whole rows (whole columns for CSC) sized by Dask's ``"auto"`` for the dense
    chunk (``array.chunk-size``): the size of the dense copy a pass makes of one chunk."""
    wanted = (-1, "auto") if csc else ("auto", -1)
    chunks = da.core.normalize_chunks(wanted, shape, dtype=np.dtype(dtype))
    return (shape[0], max(chunks[1])) if csc else (max(chunks[0]), shape[1])


def _read_sparse(anndata: Any, elem: Any) -> da.Array:
    """A CSR or CSC matrix of a file or store, by anndata's lazy reader: chunks of whole rows
    (CSR) or whole columns (CSC), read by slicing its ``indptr``, ``indices`` and ``data``."""
    shape = (int(elem.attrs["shape"][0]), int(elem.attrs["shape"][1]))
    csc = elem.attrs["encoding-type"] == "csc_matrix"
    chunks = _row_chunks(shape, elem["data"].dtype, csc)
    return anndata.experimental.read_elem_lazy(elem, chunks=chunks)


class H5RowReader:
    """Array-like view of a dense HDF5 dataset that opens the file for each chunk it reads.

    Hand it to :func:`dask.array.from_array` (``asarray=False``).  It holds the file's path,
    not an open file, so that the graph can travel to other processes (an open HDF5 file
    cannot be pickled); a read that fails becomes a
    :class:`~mspca_dask.errors.ChunkReadError` naming the file, the dataset and the slice.
    Old ``.h5ad`` files whose ``X`` has no encoding metadata are read the same way.

    Parameters
    ----------
    path : str
        The HDF5 file.
    name : str
        The dataset's name in it (``"/X"``, ``"/layers/counts"``).
    shape, dtype
        The dataset's, as :func:`dask.array.from_array` needs them.
    """

    def __init__(self, path: str, name: str, shape: tuple[int, ...], dtype: Any) -> None:
        self.path, self.name = path, name
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        self.ndim = len(self.shape)

    def __getitem__(self, key: Any) -> np.ndarray:
        import h5py

        try:
            with h5py.File(self.path, "r") as file:
                return np.asarray(file[self.name][key])
        except MemoryError:
            raise
        except Exception as exc:
            raise ChunkReadError(
                f"could not read the .h5ad file {self.path} dataset {self.name!r} at "
                f"{key!r}: {type(exc).__name__}: {exc}"
            ) from exc

    def __repr__(self) -> str:
        return f"H5RowReader({self.path!r}, {self.name!r}, shape={self.shape})"


def _h5_dense(path: str, elem: Any) -> da.Array:
    shape = (int(elem.shape[0]), int(elem.shape[1])) if elem.ndim == 2 else tuple(elem.shape)
    reader = H5RowReader(path, str(elem.name), shape, elem.dtype)
    chunks = _row_chunks(shape, elem.dtype) if len(shape) == 2 else "auto"
    return da.from_array(
        reader,
        chunks=chunks,
        name=f"h5ad-{tokenize(path, reader.name, os.path.getmtime(path), shape)}",
        fancy=False,
        asarray=False,
        meta=np.empty((0,) * len(shape), dtype=reader.dtype),
    )


def _store_axis(anndata: Any, root: Any, name: str) -> _Axis:
    """Names and columns of ``obs`` / ``var`` in a file or store, reading only the index."""
    frame = root[name]
    fields = getattr(getattr(frame, "dtype", None), "names", None)
    if fields:  # an old .h5ad: the table is one HDF5 dataset of records
        names = np.asarray([_text(v) for v in frame["index"]], dtype=object)
        return _Axis(
            name=name,
            names=names,
            columns=tuple(f for f in fields if f != "index"),
            column=lambda col: np.asarray(frame[col]),
        )
    index_key = frame.attrs.get("_index", "_index")
    names = np.asarray(anndata.io.read_elem(frame[index_key]), dtype=object)
    columns = tuple(str(c) for c in frame.attrs.get("column-order", ()))

    def column(col: str) -> Any:
        return anndata.io.read_elem(frame[col])

    return _Axis(name=name, names=names, columns=columns, column=column)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _mask(spec: Any, axis: _Axis, what: str) -> np.ndarray | None:
    """The boolean mask ``spec`` over ``axis`` (None: keep all)."""
    if spec is None:
        return None
    n = len(axis.names)
    if isinstance(spec, str):
        if spec not in axis.columns:
            raise VariableNotFoundError(
                f"{what}={spec!r} is not a column of {axis.name}; its columns are "
                f"{list(axis.columns)!r}"
            )
        values, label = axis.column(spec), f"{what}: {axis.name} column {spec!r}"
    else:
        values, label = spec, what
    if isinstance(values, pd.Series | pd.Index):
        values = values.array
    if isinstance(values, pd.api.extensions.ExtensionArray):
        if pd.api.types.is_bool_dtype(values.dtype) and not bool(pd.isna(values).any()):
            values = values.to_numpy(dtype=bool)
        else:
            raise DTypeError(
                f"{label} must be boolean without missing values (it has dtype "
                f"{values.dtype}); e.g. {axis.name}[col] == value"
            )
    mask = np.asarray(values)
    if mask.dtype != bool:
        raise DTypeError(
            f"{label} must be a boolean mask (it has dtype {mask.dtype}); to keep "
            f"positions or names, build the mask, e.g. adata.{axis.name}_names.isin(names)"
        )
    if mask.shape != (n,):
        raise ShapeError(
            f"{label} must have one entry per {axis.name} ({n}), but it has shape {mask.shape}"
        )
    return mask


def _select(src: Source, obs: np.ndarray | None, var: np.ndarray | None) -> Source:
    """``src`` restricted to the masked rows and columns (lazily), with their labels."""
    if obs is None and var is None:
        return src
    data = src.data
    sample_coords, feature_coords = src.sample_coords, src.feature_coords
    kept = []
    if obs is not None:
        data = _drop_empty_chunks(data[obs, :])
        sample_coords = None if sample_coords is None else sample_coords[obs]
        kept.append(f"{int(obs.sum())} of {obs.size} observations")
    if var is not None:
        data = _drop_empty_chunks(data[:, var])
        feature_coords = None if feature_coords is None else feature_coords[var]
        kept.append(f"{int(var.sum())} of {var.size} variables")
    description = f"{src.description}, {' and '.join(kept)}"
    selected = _from_dask(
        data,
        src.sample_dim,
        src.feature_dim,
        kind=src.kind,
        description=description,
        sample_coords=sample_coords,
        feature_coords=feature_coords,
        attrs=src.attrs,
    )
    return dataclasses.replace(selected, missing_chunks=src.missing_chunks)


def _drop_empty_chunks(data: da.Array) -> da.Array:
    """Merge away the empty chunks a mask leaves (a task per empty chunk would be waste)."""
    if all(c > 0 for axis in data.chunks for c in axis):
        return data
    chunks = tuple(tuple(c for c in axis if c > 0) or (0,) for axis in data.chunks)
    return data.rechunk(chunks)


# --------------------------------------------------------------------------------------
# Writing a result back
# --------------------------------------------------------------------------------------


def add_to_anndata(
    result: MSPCAResult,
    adata: Any,
    *,
    key_added: str | None = None,
    overwrite: bool = False,
) -> None:
    """Store a fit's result in an AnnData, where scanpy's ``pp.pca`` stores its own.

    Parameters
    ----------
    result : MSPCAResult
        A fit of this AnnData (or of a subset of its observations or variables, as with
        ``mask_obs`` / ``mask_var``), or a result opened again with
        :func:`~mspca_dask.open_result`.
    adata : anndata.AnnData
        Written in place (not a view: write into the AnnData it was taken from).
    key_added : str, optional
        ``None``: ``obsm["X_mspca"]``, ``varm["MSPCA"]`` and ``uns["mspca"]``.  A name:
        ``obsm[key_added]``, ``varm[key_added]`` and ``uns[key_added]``, as in scanpy.
    overwrite : bool
        Replace those keys when they exist.  Without it an existing key is an error and
        nothing is written.

    Notes
    -----
    * ``obsm`` holds the scores of the *stable* (covariance) components, ``(n_obs,
      n_stable)``, in the order of ``result.components``; observations left out of the
      fit (``mask_obs``) get NaN.
    * ``varm`` holds their loadings, ``(n_vars, n_stable)``; variables left out of the fit
      (``mask_var``) get 0, as scanpy does.
    * ``uns`` holds, for all ``K`` eigenpairs, ``eigenvalues``, ``knockoff_eigenvalues``,
      ``stable``, ``verdicts`` (:data:`~mspca_dask.result.VERDICTS`: ``"covariance"``,
      ``"mean shift"``, ``"mixed"``, ``"undetermined"`` or ``"bulk"``), ``shift_z`` and
      ``reasons``; ``stable_components`` (which of the ``K`` the columns of ``obsm`` and
      ``varm`` are), ``noise_variance``, ``threshold``, ``mp_edge`` and the fit's
      ``params`` (``None`` values left out and the list of passes as JSON text, so that
      the AnnData can still be written to ``.h5ad`` and Zarr).
    * ``uns`` also holds, per observation, ``groups``, ``(n_obs,)``: each one's group from
      the verdict's group test, 0 for the inliers and -1 for observations left out of the
      fit; ``group_p_value``, the test's p-value; ``group_centre`` when the test's null
      was one group about the origin; and ``within_samples``, the samples the covariance
      components are the within-group covariance of.  Results stored before the groups
      were kept have neither (nor ``shift_z`` if they predate it).

    Rows are matched by name when the result has labels (``obs_names`` and ``var_names``
    of a fit from AnnData) and by position otherwise.

    Raises
    ------
    ResultExistsError
        A key exists and ``overwrite`` is False (nothing is written).
    InputError
        ``adata`` is not an AnnData or is a view, ``key_added`` is not a non-empty string,
        or the result's labels are not (unique) names of this AnnData.
    ShapeError
        A result without labels has another number of samples or features.

    Examples
    --------
    >>> import anndata as ad, scipy.sparse as sp
    >>> from mspca_dask import fit
    >>> from mspca_dask.testing import make_spiked_mixture
    >>> X = make_spiked_mixture(300, 200, covariance_spikes=(6.0,), mean_shift_weights=(0.1,),
    ...                         mean_shift_strengths=(8.0,), random_state=4).to_numpy()
    >>> adata = ad.AnnData(sp.csr_matrix(X))
    >>> add_to_anndata(fit(adata, n_components=4), adata)
    >>> adata.obsm["X_mspca"].shape, list(adata.uns["mspca"]["verdicts"])
    ((300, 1), ['mean shift', 'covariance', 'bulk', 'bulk'])
    """
    if not is_anndata(adata):
        raise InputError(
            f"adata must be an anndata.AnnData (got an object of type {type(adata).__name__})"
        )
    if adata.is_view:
        raise InputError(
            "adata is a view (adata[...]); write into the AnnData it was taken from, or "
            "into adata.copy()"
        )
    if key_added is not None and (not isinstance(key_added, str) or not key_added):
        raise InputError(f"key_added must be a non-empty string or None (not {key_added!r})")
    keys = {
        "obsm": key_added or OBSM_KEY,
        "varm": key_added or VARM_KEY,
        "uns": key_added or UNS_KEY,
    }
    taken = [f"{slot}[{key!r}]" for slot, key in keys.items() if key in getattr(adata, slot)]
    if taken and not overwrite:
        raise ResultExistsError(
            f"adata.{', adata.'.join(taken)} already exist{'s' if len(taken) == 1 else ''}; "
            "pass overwrite=True to replace, or key_added= another name"
        )
    rows = _positions(result.sample_coords, adata.obs_names, result.n_samples, "obs")
    cols = _positions(result.feature_coords, adata.var_names, result.n_features, "var")

    stable = np.asarray(result.stable, dtype=bool)
    order = result.component_index
    scores = np.full((adata.n_obs, order.size), np.nan)
    scores[rows] = np.asarray(result.scores, dtype=np.float64)[:, order]
    loadings = np.zeros((adata.n_vars, order.size))
    loadings[cols] = np.asarray(result.eigenvectors, dtype=np.float64)[order].T
    summary = {
        "eigenvalues": np.asarray(result.eigenvalues, dtype=np.float64),
        "knockoff_eigenvalues": np.asarray(result.knockoff_eigenvalues, dtype=np.float64),
        "stable": stable,
        "verdicts": np.asarray(result.verdicts, dtype=object),
        "reasons": np.asarray(result.reasons, dtype=object),
        "stable_components": order,
        "noise_variance": float(result.noise_variance),
        "threshold": float(result.threshold),
        "mp_edge": float(result.mp_edge),
        "params": _storable(dict(result.params)),
    }
    if result.shift_z is not None:
        summary["shift_z"] = np.asarray(result.shift_z, dtype=np.float64)
    if result.groups is not None:
        groups = np.full(adata.n_obs, -1, dtype=np.int64)
        groups[rows] = np.asarray(result.groups, dtype=np.int64)
        summary["groups"] = groups
    if result.group_p_value is not None:
        summary["group_p_value"] = float(result.group_p_value)
    if result.group_centre is not None:
        summary["group_centre"] = str(result.group_centre)
    if result.within_samples is not None:
        summary["within_samples"] = int(result.within_samples)
    # Every check is done: only now is anything written.
    adata.obsm[keys["obsm"]] = scores
    adata.varm[keys["varm"]] = loadings
    adata.uns[keys["uns"]] = summary


def _positions(coords: Any, names: pd.Index, n: int, axis: str) -> np.ndarray:
    """Rows of the AnnData's ``axis`` that the result's ``n`` labels name, in their order."""
    if coords is None:
        if n != len(names):
            raise ShapeError(
                f"the result has {n} {'samples' if axis == 'obs' else 'features'} and no "
                f"labels, but the AnnData has {len(names)} {axis}; store a result fitted on "
                "this AnnData"
            )
        return np.arange(n)
    if not names.is_unique:
        raise InputError(
            f"the AnnData's {axis}_names are not unique, so the result's rows cannot be "
            f"matched to them; call adata.{axis}_names_make_unique() before fitting"
        )
    labels = np.asarray(coords).astype(str)
    found = pd.Index(np.asarray(names).astype(str)).get_indexer(labels)
    missing = labels[found < 0]
    if missing.size:
        raise InputError(
            f"{missing.size} of the result's {labels.size} labels are not {axis}_names of "
            f"this AnnData (e.g. {missing[:3].tolist()!r}); store a result fitted on it"
        )
    return found


def _storable(value: Any) -> Any:
    """``value`` in the types an AnnData writes to ``.h5ad`` and Zarr (None dropped, lists
    of numbers or strings as arrays, anything nested deeper as JSON text)."""
    if isinstance(value, dict):
        return {str(k): _storable(v) for k, v in value.items() if v is not None}
    if isinstance(value, bool | int | float | str | np.generic):
        return value
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, list | tuple):
        items = list(value)
        if all(isinstance(v, str) for v in items):
            return np.asarray(items, dtype=object)
        if all(isinstance(v, bool | int | float | np.number) for v in items):
            return np.asarray(items)
    return json.dumps(value, default=str)
