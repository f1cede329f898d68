"""Guards that keep a user's data safe: where an output may go, and whether a store is whole.

No numerical work, and no writes: every function here only looks (``stat``, a directory or
bucket listing, a store's root metadata).

* :func:`check_output_path` refuses, *before* any computation, an output path that is the
  input store, lies inside it or contains it (:class:`OutputOverlapsInputError`, whatever
  ``overwrite`` says), that already exists without ``overwrite`` (:class:`ResultExistsError`),
  or that holds data mspca_dask did not write (:class:`ForeignOutputError`, even with
  ``overwrite``), or whose directory is not writable.
* :func:`is_our_store` / :func:`is_replaceable` say whether a path holds a store we wrote
  (the completion marker or our schema attributes) and may therefore be replaced.
* :func:`missing_chunks` compares the chunk keys an array must have with the store's
  *listing* (one listing, no chunk read): zarr-python reads an absent chunk as the fill value,
  so a deleted or never-copied chunk file would otherwise be analysed as zeros, silently.
"""

from __future__ import annotations

import itertools
import math
import os
import posixpath
import tempfile
from typing import TYPE_CHECKING, Any

from ..errors import (
    ChunkReadError,
    ForeignOutputError,
    OutputOverlapsInputError,
    ParameterError,
    ResultExistsError,
)
from .urls import local_path, zarr_store

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

__all__ = [
    "check_output_path",
    "exists_error",
    "foreign_error",
    "check_output_not_input",
    "is_our_store",
    "is_replaceable",
    "missing_chunks",
    "check_chunks_present",
]

#: Root attributes of the stores mspca_dask writes (the completion marker first).
OUR_ATTRS = ("mspca_complete", "mspca_schema_version", "mspca_genomics_schema_version")


# --------------------------------------------------------------------------------------
# Where a path or URL points
# --------------------------------------------------------------------------------------


def _local(path: str | os.PathLike[str], *, resolve: bool = True) -> str | None:
    """The absolute filesystem path of a local path or ``file://`` URL, else None.

    With ``resolve``, symbolic links are resolved (also in a path that does not exist yet,
    up to its first missing component), so a link to the input store is recognised as the
    input store.
    """
    plain = local_path(path)
    if plain is None:
        return None
    return os.path.realpath(plain) if resolve else plain


def _where(
    path: str | os.PathLike[str], storage_options: Mapping[str, Any] | None = None
) -> tuple[str, str] | None:
    """``(filesystem, absolute path)`` of a local path or an fsspec URL, or None if unknown."""
    local = _local(path)
    if local is not None:
        return "file", local
    try:
        import fsspec

        fs, fs_path = fsspec.core.url_to_fs(str(path), **dict(storage_options or {}))
    except (ImportError, ValueError, TypeError):
        return None
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    clean = posixpath.normpath("/" + str(fs_path).strip("/"))
    return str(protocol), clean


def _input_where(source: Any) -> tuple[tuple[str, str] | None, str]:
    """Where a data source lives (for paths, URLs and open Zarr nodes) and how to name it."""
    if isinstance(source, (str, os.PathLike)):
        return _where(source), os.fspath(source)
    store_path = getattr(source, "store_path", None)  # an open zarr.Array or zarr.Group
    store = getattr(store_path, "store", None)
    if store is None:
        return None, repr(source)
    sub = str(getattr(store_path, "path", "") or "")
    root = getattr(store, "root", None)  # zarr.storage.LocalStore
    if root is not None:
        full = os.path.join(os.fspath(root), sub) if sub else os.fspath(root)
        return _where(full), full
    fs, base = getattr(store, "fs", None), getattr(store, "path", None)  # FsspecStore
    if fs is not None and base is not None:
        protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
        joined = posixpath.normpath("/" + posixpath.join(str(base).strip("/"), sub))
        return (str(protocol), joined), f"{protocol}://{joined.lstrip('/')}"
    return None, repr(source)


def _relation(out: tuple[str, str], inp: tuple[str, str]) -> str | None:
    """How ``out`` sits relative to ``inp`` on the same filesystem, or None if apart."""
    if out[0] != inp[0]:
        return None
    sep = "/" if out[0] != "file" else os.sep
    o, i = out[1].rstrip(sep) or sep, inp[1].rstrip(sep) or sep
    if o == i:
        return "is"
    if o.startswith(i.rstrip(sep) + sep):
        return "inside"
    if i.startswith(o.rstrip(sep) + sep):
        return "contains"
    return None


def check_output_not_input(
    out: str | os.PathLike[str],
    inputs: Iterable[Any],
    *,
    storage_options: Mapping[str, Any] | None = None,
    what: str = "the output",
) -> None:
    """Refuse an output path that is, lies inside, or contains one of the inputs.

    Parameters
    ----------
    out : str or os.PathLike
        Local path or fsspec URL the result would be written to.
    inputs : iterable
        Data sources: paths, URLs or open Zarr nodes (others, such as in-memory arrays,
        are skipped: they cannot be overwritten).
    storage_options : mapping, optional
        fsspec options, used to resolve URLs.
    what : str
        Name of the output in the message (``"--out"``, ``"[output] dir"``, ``"out"``).

    Raises
    ------
    OutputOverlapsInputError
        ``out`` is an input store (also through a symbolic link or as the same fsspec URL),
        lies inside one, or contains one.  ``overwrite`` cannot lift this.
    """
    target = _where(out, storage_options)
    if target is None:
        return
    for source in inputs:
        where, name = _input_where(source)
        if where is None:
            continue
        rel = _relation(target, where)
        if rel is None:
            continue
        how = {
            "is": "is the input store",
            "inside": "lies inside the input store",
            "contains": "contains the input store",
        }[rel]
        resolved = target[1] if target[0] == "file" else f"{target[0]}://{target[1].lstrip('/')}"
        raise OutputOverlapsInputError(
            f"{what} {os.fspath(out)} ({resolved}) {how} {name}; writing there would destroy "
            "the data being analysed, so it is refused even with overwrite. Choose an output "
            "path outside the input store"
        )


# --------------------------------------------------------------------------------------
# Whose data is at a path
# --------------------------------------------------------------------------------------


def _root_attrs(
    path: str | os.PathLike[str], storage_options: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """Root attributes of the Zarr group at ``path`` (its own metadata only), or None."""
    import zarr

    try:
        store, _ = zarr_store(path, storage_options, read_only=True)
        group = zarr.open_group(store=store, mode="r", use_consolidated=False)
        return dict(group.attrs.asdict())
    except (FileNotFoundError, ValueError, TypeError, KeyError, OSError):
        return None


def is_our_store(
    path: str | os.PathLike[str], *, storage_options: Mapping[str, Any] | None = None
) -> bool:
    """Whether ``path`` holds a Zarr store written by mspca_dask (complete or interrupted).

    Recognised by the completion marker ``mspca_complete`` or by our schema attributes
    (``mspca_schema_version``, ``mspca_genomics_schema_version``) at the root.
    """
    attrs = _root_attrs(path, storage_options)
    return attrs is not None and any(k in attrs for k in OUR_ATTRS)


def _is_empty_dir(local: str) -> bool:
    try:
        with os.scandir(local) as it:
            return next(it, None) is None
    except OSError:
        return False


def is_replaceable(
    path: str | os.PathLike[str],
    *,
    storage_options: Mapping[str, Any] | None = None,
    result_name: str | None = None,
) -> bool:
    """Whether ``overwrite`` may replace what is at ``path``: nothing, an empty directory,
    or a store we wrote (``result_name``: a directory whose ``result_name`` is ours, as the
    genomics job writes).  A symbolic link is judged by what it points to.
    """
    local = _local(path)
    if local is not None:
        if not os.path.lexists(str(_local(path, resolve=False))):
            return True
        if os.path.isdir(local) and _is_empty_dir(local):
            return True
        if result_name is not None:
            return is_our_store(os.path.join(local, result_name))
        return is_our_store(local)
    try:
        import fsspec

        fs, fs_path = fsspec.core.url_to_fs(str(path), **dict(storage_options or {}))
        if not fs.exists(fs_path):
            return True
    except (ImportError, ValueError, OSError):
        return False
    inner = f"{str(path).rstrip('/')}/{result_name}" if result_name else str(path)
    return is_our_store(inner, storage_options=storage_options)


def foreign_error(path: str, what: str) -> ForeignOutputError:
    """The error for a path that holds data we did not write."""
    return ForeignOutputError(
        f"{what} {path} already holds data that mspca_dask did not write (no mspca result "
        "marker); it is never replaced, not even with overwrite. Choose another path, or "
        "move those files away yourself"
    )


def exists_error(
    name: str, what: str, overwrite_flag: str, *, replaceable: bool
) -> ResultExistsError:
    """The error for an existing output when overwriting was not asked."""
    attrs = _root_attrs(name, None) if replaceable else None
    if attrs is not None and attrs.get("mspca_complete") is True:
        return ResultExistsError(
            f"a complete result already exists at {name}; pass {overwrite_flag} to replace "
            f"it, or choose another {what}"
        )
    if replaceable:
        return ResultExistsError(
            f"{name} already exists and is not a complete result (an interrupted write, or "
            f"an empty directory); pass {overwrite_flag} to replace it, or choose another {what}"
        )
    return ResultExistsError(
        f"{name} already exists and is not a complete result: it holds data that mspca_dask "
        f"did not write, which {overwrite_flag} would not replace either; choose another {what}"
    )


def check_output_path(
    out: str | os.PathLike[str],
    *,
    overwrite: bool,
    inputs: Iterable[Any] = (),
    storage_options: Mapping[str, Any] | None = None,
    what: str = "out",
    overwrite_flag: str = "overwrite=True",
    result_name: str | None = None,
) -> None:
    """Check, before any work, that a result may be written at ``out``.

    Parameters
    ----------
    out : str or os.PathLike
        Local path or fsspec URL of the output.
    overwrite : bool
        Whether an existing result of ours may be replaced.
    inputs : iterable
        The data sources of the run (see :func:`check_output_not_input`).
    storage_options : mapping, optional
        fsspec options for URLs.
    what, overwrite_flag : str
        How the output and the overwrite switch are called where the user set them.
    result_name : str, optional
        For an output *directory* (the genomics job): the name of the result store in it.

    Raises
    ------
    OutputOverlapsInputError
        ``out`` overlaps an input store.
    ResultExistsError
        Something exists at ``out`` and ``overwrite`` is False.
    ForeignOutputError
        ``out`` holds data we did not write (even with ``overwrite``).
    ParameterError
        ``out`` is local and its directory does not exist or is not writable.
    """
    check_output_not_input(out, inputs, storage_options=storage_options, what=what)
    name = os.fspath(out)
    local = _local(out)
    if local is not None:
        exists = os.path.lexists(str(_local(out, resolve=False)))
    else:
        import fsspec

        fs, fs_path = fsspec.core.url_to_fs(name, **dict(storage_options or {}))
        exists = bool(fs.exists(fs_path))
    if exists:
        replaceable = is_replaceable(out, storage_options=storage_options, result_name=result_name)
        if not overwrite:
            raise exists_error(name, what, overwrite_flag, replaceable=replaceable)
        if not replaceable:
            raise foreign_error(name, what)
    if local is None:
        return
    parent = os.path.dirname(local.rstrip(os.sep)) or os.sep
    if not os.path.isdir(parent):
        raise ParameterError(
            f"cannot write {what} {name}: its directory {parent} does not exist (or is not a "
            f"directory); create it first"
        )
    if not _can_create_in(parent):
        raise ParameterError(f"cannot write {what} {name}: {parent} is not a writable directory")


def _can_create_in(directory: str) -> bool:
    """Whether a file can be created in ``directory``, tried with a uniquely named probe.

    ``os.access`` answers yes to root everywhere, also in read-only mounts and ``/proc``, where
    the write would fail only after the fit; creating (and removing) our own empty file does
    not."""
    try:
        fd, probe = tempfile.mkstemp(prefix=".mspca-probe-", dir=directory)
    except OSError:
        return False
    os.close(fd)
    os.unlink(probe)
    return True


# --------------------------------------------------------------------------------------
# Chunks that must exist
# --------------------------------------------------------------------------------------


def _listing(store: Any, prefix: str) -> set[str]:
    """Every key under ``prefix`` of a Zarr store: one directory walk or bucket listing."""
    root = getattr(store, "root", None)
    if root is not None:  # LocalStore: os.walk (scandir) is far cheaper than stat per file
        base = os.path.join(os.fspath(root), prefix) if prefix else os.fspath(root)
        keys: set[str] = set()
        strip = len(os.fspath(root).rstrip(os.sep)) + 1
        for dirpath, _dirs, files in os.walk(base):
            rel = dirpath[strip:].replace(os.sep, "/")
            keys.update(f"{rel}/{f}" if rel else f for f in files)
        return keys
    from zarr.core.sync import sync

    async def collect() -> set[str]:
        return {k async for k in store.list_prefix(prefix)}

    return sync(collect())


def missing_chunks(array: Any) -> tuple[int, list[tuple[int, ...]]]:
    """Chunks of a Zarr array whose key is absent from the store's listing.

    Parameters
    ----------
    array : zarr.Array
        Format 2 or 3; for a sharded array the stored unit, the shard, is checked (an inner
        chunk missing from a present shard cannot be seen in a listing).

    Returns
    -------
    count : int
        Number of absent chunks (shards).
    first : list of tuple of int
        Grid indices of the first (at most 5) absent ones, in C order.
    """
    shape = tuple(int(s) for s in array.shape)
    if any(s == 0 for s in shape):
        return 0, []
    unit = getattr(array, "shards", None) or array.chunks
    grid = [math.ceil(s / c) for s, c in zip(shape, unit, strict=True)]
    prefix = str(array.store_path.path or "")
    listed = _listing(array.store_path.store, prefix)
    head = f"{prefix}/" if prefix else ""
    encode = array.metadata.encode_chunk_key
    count = 0
    first: list[tuple[int, ...]] = []
    for coords in itertools.product(*(range(g) for g in grid)):
        if head + encode(coords) not in listed:
            count += 1
            if len(first) < 5:
                first.append(tuple(int(c) for c in coords))
    return count, first


def check_chunks_present(
    array: Any, where: str, variable: str | None, *, allow_missing: bool = False
) -> int:
    """Raise :class:`ChunkReadError` if a chunk of ``array`` is absent from its store.

    Parameters
    ----------
    array : zarr.Array
    where : str
        The store, for the message.
    variable : str or None
        The array's name in the store, for the message.
    allow_missing : bool
        Return the count instead of raising (the user's store is sparse on purpose, and
        zarr's fill value is what absent chunks mean).

    Returns
    -------
    int
        Number of absent chunks (0 unless ``allow_missing``).
    """
    count, first = missing_chunks(array)
    if count and not allow_missing:
        unit = "shard" if getattr(array, "shards", None) else "chunk"
        size = getattr(array, "shards", None) or array.chunks
        shown = ", ".join(str(list(c)) for c in first) + (" ..." if count > len(first) else "")
        name = f"variable {variable!r}" if variable else "root array"
        raise ChunkReadError(
            f"{count} {unit}(s) of the Zarr store {where} {name} are missing from the store "
            f"(first {unit} index {shown}, {unit} shape {tuple(size)}); Zarr would read them "
            "as the fill value and the analysis would silently use made-up numbers. Copy the "
            "store again or rewrite the missing chunks. If the store is sparse on purpose "
            "(chunks equal to the fill value not written), pass allow_missing_chunks=True "
            "(mspca fit --allow-missing-chunks; [input] allow_missing_chunks = true)"
        )
    return count
