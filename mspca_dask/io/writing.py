"""Result stores: written atomically, read back only when complete.

The one implementation of "write a result so that a crash never leaves a complete-looking
one" in the package; the genomics job commits its output directory with
:func:`commit_directory` too.

* :func:`write_dataset_atomic` writes an ``xarray.Dataset`` to a Zarr store under a hidden
  temporary name in the same directory, marks it complete (root attribute
  ``mspca_complete = True``) and renames it into place with :func:`commit_directory`.
* :func:`commit_directory` renames a finished directory into place, moving an old one of
  ours aside first and putting it back if the rename fails.
* :func:`open_dataset_checked` and :func:`is_complete` read such a store back, refusing one
  that was never marked complete.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import uuid
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr
import zarr

from ..errors import (
    DTypeError,
    InputError,
    ResultCorruptError,
    ResultExistsError,
    SourceNotFoundError,
)
from .safety import exists_error, foreign_error, is_replaceable
from .urls import local_path, zarr_store

if TYPE_CHECKING:
    from collections.abc import Hashable, Mapping

__all__ = [
    "COMPLETE_ATTR",
    "write_dataset_atomic",
    "commit_directory",
    "open_dataset_checked",
    "is_complete",
    "str_objects",
]

#: Root attribute that marks a result store as completely written.
COMPLETE_ATTR = "mspca_complete"


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
    local = local_path(path)
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
    store, _ = zarr_store(path, storage_options, read_only=True)
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
    local = local_path(path)
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


#: The object dtype of an array known to hold only ``str``: xarray's variable-length string
#: dtype (``xarray.coding.strings.create_vlen_dtype(str)``), equal to ``object``.  xarray
#: writes such an array as it is; a plain object array it first scans element by element
#: for missing values and types (0.5 s for a genomics result's 626k × 4 allele strings).
STR_OBJECT = np.dtype(object, metadata={"element_type": str})


def _known_strings(dtype: np.dtype[Any]) -> bool:
    """Whether ``dtype`` says its array holds ``str`` only (:data:`STR_OBJECT`)."""
    metadata: Mapping[str, Any] = dtype.metadata or {}
    return metadata.get("element_type") is str


def str_objects(values: Any) -> np.ndarray:
    """An object array of Python ``str`` from any string array (StringDType, fixed width,
    bytes, or objects), of the same shape, with the dtype :data:`STR_OBJECT`.

    NumPy's casts convert where the dtype says what the elements are; element by element
    only for object arrays holding something other than ``str`` (bytes are decoded as UTF-8,
    anything else goes through ``str``): 626k x 2 alleles took 0.6 s one at a time.

    Examples
    --------
    >>> str_objects(np.array([b"A", b"TT"])).tolist(), str_objects(np.array([1, 2])).tolist()
    (['A', 'TT'], ['1', '2'])
    """
    arr = np.asarray(values)
    if arr.dtype.kind == "S":
        out = np.char.decode(arr, "utf-8").astype(object)
    elif arr.dtype.kind in "UT":  # fixed width or StringDType: NumPy makes the str objects
        out = arr.astype(object)
    elif arr.dtype.kind == "O" and (
        _known_strings(arr.dtype) or set(map(type, arr.ravel())) <= {str}
    ):
        out = arr.copy()
    else:
        flat = [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in arr.ravel()]
        out = np.asarray(flat, dtype=object).reshape(arr.shape)
    return out.view(STR_OBJECT)


def _strings_as_objects(ds: xr.Dataset, names: list[Hashable]) -> xr.Dataset:
    """Replace the named string variables (fixed-width, bytes or StringDType) by object arrays.

    All in one assignment (one alignment of the Dataset, not one per variable).
    """
    coords: dict[Hashable, Any] = {}
    data: dict[Hashable, Any] = {}
    for k in names:
        var = ds.variables[k]
        (coords if k in ds.coords else data)[k] = (var.dims, str_objects(var.values), var.attrs)
    return ds.assign_coords(coords).assign(data)


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
    :func:`os.replace` (atomic on POSIX) by :func:`commit_directory`.  An existing store
    replaced with ``overwrite=True`` is first renamed aside and deleted after the new one is
    in place.
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
    local = local_path(path)
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
        commit_directory(tmp, target, overwrite, token)
    except BaseException:
        _remove(tmp)
        raise
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


#: Rows per chunk of a string variable (the whole variable up to this many).
STRING_CHUNK_ROWS = 2**20


def _string_chunks(ds: xr.Dataset) -> dict[str, dict[str, Any]]:
    """Chunks of every in-memory string variable: whole, up to :data:`STRING_CHUNK_ROWS` rows.

    zarr assembles each chunk that is a part of the array it is given into a new array of
    its own string dtype (converting every string) before it encodes it, but encodes an
    array that is one whole chunk as it is: the 626k × 4 allele strings of a genomics result
    wrote in 0.2 s less so.
    """
    return {
        str(k): {"chunks": (min(v.shape[0], STRING_CHUNK_ROWS), *v.shape[1:])}
        for k, v in ds.variables.items()
        if v.dtype.kind in "OTUS" and v.ndim and v.size and v.chunks is None
    }


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
    encoding = _string_chunks(ds)
    if zarr_format == 3:
        for name, codecs in _checksummed(ds).items():
            encoding[name] = {**encoding.get(name, {}), **codecs}
    kwargs["encoding"] = encoding
    ds.to_zarr(where, mode="w", zarr_format=zarr_format, consolidated=consolidated, **kwargs)
    if mark:
        _mark_complete(where, storage_options, consolidated)


def _mark_complete(
    where: str, storage_options: Mapping[str, Any] | None, consolidated: bool
) -> None:
    """Set the completion flag (and refresh format 2's consolidated metadata)."""
    store, _ = zarr_store(where, storage_options, read_only=False)
    group = zarr.open_group(store=store, mode="r+", use_consolidated=False)
    group.attrs[COMPLETE_ATTR] = True
    if consolidated:
        zarr.consolidate_metadata(store)


def _checksummed(ds: xr.Dataset) -> dict[str, dict[str, Any]]:
    """Format 3 encoding of every variable: zarr's default compressor, then a CRC32C."""
    from zarr.codecs import Crc32cCodec, ZstdCodec

    return {str(k): {"compressors": (ZstdCodec(), Crc32cCodec())} for k in ds.variables}


def commit_directory(
    tmp: str | os.PathLike[str],
    target: str | os.PathLike[str],
    overwrite: bool,
    token: str | None = None,
    *,
    result_name: str | None = None,
) -> None:
    """Rename the finished directory ``tmp`` to ``target``, moving an old one aside first.

    Parameters
    ----------
    tmp : str or os.PathLike
        The finished store or directory, a hidden sibling of ``target`` (same filesystem).
    target : str or os.PathLike
        Where it must end up.
    overwrite : bool
        Whether an existing ``target`` of ours may be replaced.
    token : str, optional
        Suffix of the hidden name the old ``target`` is moved to (``.NAME.old-TOKEN``);
        a fresh random one by default.
    result_name : str, optional
        For an output *directory* (the genomics job): the name of the result store in it,
        by which the directory is recognised as ours.

    Raises
    ------
    ResultExistsError
        ``target`` exists (it may have appeared while ``tmp`` was written) and ``overwrite``
        is False.
    ForeignOutputError
        ``target`` holds data we did not write; it is never replaced.

    Notes
    -----
    ``target`` is replaced only with ``overwrite`` and only if it is ours (a store we
    wrote, for ``result_name`` a directory whose ``result_name`` store we wrote, or an empty
    directory).  It is renamed aside, ``tmp`` is renamed into place with :func:`os.replace`
    (atomic on POSIX), the old one is put back if that rename fails and deleted only once
    the new one is in place; the parent directory is then synced so the rename is durable.
    A crash at any point leaves the old ``target`` or the new one, plus hidden leftovers.
    """
    tmp, target = os.fspath(tmp), os.fspath(target)
    token = token or uuid.uuid4().hex
    aside: str | None = None
    if os.path.lexists(target):
        if not overwrite:  # appeared while we were writing
            raise _exists_error(target, result_name)
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
            raise _exists_error(target, result_name) from exc
        raise
    if aside is not None:
        _remove(aside)
    _fsync_dir(os.path.dirname(target) or os.curdir)


def _exists_error(target: str, result_name: str | None = None) -> ResultExistsError:
    replaceable = is_replaceable(target, result_name=result_name)
    return exists_error(target, "path", "overwrite=True", replaceable=replaceable)


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
