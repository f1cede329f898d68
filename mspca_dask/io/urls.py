"""Where a path or URL points: the one rule for "is this a URL?" and the store it names.

fsspec reads ``file://`` and ``local://`` URLs from the local filesystem, so they are paths
here: they can be renamed atomically, resolved through symbolic links and checked with
``os.path``.  Every other ``protocol://`` (``s3://``, ``gs://``, ``memory://``, chained
URLs such as ``simplecache::s3://``) is a URL, reached through fsspec.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import zarr

__all__ = ["LOCAL_PROTOCOLS", "is_url", "local_path", "zarr_store"]

#: The fsspec protocols of the local filesystem: their URLs are treated as paths.
LOCAL_PROTOCOLS = ("file://", "local://")


def is_url(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` names a remote (non-local) location, an fsspec URL.

    Parameters
    ----------
    path : str or os.PathLike
        A filesystem path or an fsspec URL.

    Returns
    -------
    bool
        True for ``protocol://...`` other than ``file://`` and ``local://``; False for a
        plain path, an ``os.PathLike``, and the local filesystem's URLs.

    Notes
    -----
    This is the only rule in the package.  A second one counted ``local://`` as a URL,
    which refused a local output directory that fsspec itself treats as local.

    Examples
    --------
    >>> is_url("s3://bucket/data.zarr"), is_url("memory://x.zarr")
    (True, True)
    >>> is_url("data.zarr"), is_url("file:///tmp/data.zarr"), is_url("local:///tmp/x")
    (False, False, False)
    """
    if isinstance(path, os.PathLike):
        return False
    text = str(path)
    return "://" in text and not text.startswith(LOCAL_PROTOCOLS)


def local_path(path: str | os.PathLike[str]) -> str | None:
    """The absolute local filesystem path of ``path``, or None for a remote URL.

    Parameters
    ----------
    path : str or os.PathLike
        A path (``~`` is expanded, relative paths are made absolute against the working
        directory), a ``file://`` or ``local://`` URL, or another fsspec URL.

    Returns
    -------
    str or None
        The absolute path (symbolic links are *not* resolved), or None when
        :func:`is_url` is true.

    Examples
    --------
    >>> local_path("file:///tmp/data.zarr")
    '/tmp/data.zarr'
    >>> local_path("s3://bucket/data.zarr") is None
    True
    """
    if isinstance(path, os.PathLike):
        return os.path.abspath(os.path.expanduser(os.fspath(path)))
    text = str(path)
    if "://" not in text:
        return os.path.abspath(os.path.expanduser(text))
    if text.startswith(LOCAL_PROTOCOLS):
        from fsspec.implementations.local import LocalFileSystem

        return os.path.abspath(str(LocalFileSystem._strip_protocol(text)))
    return None


def zarr_store(
    path: str | os.PathLike[str],
    storage_options: Mapping[str, Any] | None = None,
    *,
    read_only: bool,
) -> tuple[Any, str]:
    """A Zarr store for ``path`` and its display name (absolute path or URL).

    Parameters
    ----------
    path : str or os.PathLike
        Local path or fsspec URL.
    storage_options : mapping, optional
        Passed to fsspec for a URL (credentials, endpoint, ...); ignored for a local path.
    read_only : bool
        Open the store read-only.

    Returns
    -------
    store : zarr.storage.LocalStore or zarr.storage.FsspecStore
    where : str
        The absolute path, or the URL, for messages.
    """
    local = local_path(path)
    if local is not None:
        return zarr.storage.LocalStore(local, read_only=read_only), local
    url = str(path)
    store = zarr.storage.FsspecStore.from_url(
        url, storage_options=dict(storage_options or {}), read_only=read_only
    )
    return store, url
