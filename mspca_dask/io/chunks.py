"""Whole chunks of a Zarr array decoded straight into a buffer the caller reuses.

zarr-python reads a selection by decoding each chunk into a new buffer and copying it into a
new output array: two fresh allocations the size of a chunk, which the kernel maps and zeroes
page by page.  A genotype chunk of bio2zarr's VCF Zarr (10,000 variants × 5,000 samples × 2,
int8: 100 MB) took 0.27 s to read that way against 0.07 s to decode the same bytes into a
buffer that is reused (one thread each); on the genomics benchmark's statistics pass the
kernel's page zeroing was half of all CPU time.  :class:`ChunkDecoder` reads a chunk's stored
bytes through the array's own store (local or remote) and decodes them with the array's own
compressor into the caller's buffer.

Only the simple layout allows this, and :meth:`ChunkDecoder.of` returns None for any other
(the caller then reads through zarr): Zarr format 2, C order, no filters, a numcodecs
compressor or none (stored chunks are then the raw bytes), a fixed-size numeric dtype.  That is
what bio2zarr writes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ChunkReadError

__all__ = ["ChunkDecoder", "chunk_read_error", "read_strings"]


def _stored_chunk(array: Any, key: str) -> np.ndarray | None:
    """The stored (encoded) bytes of chunk ``key`` of a zarr ``array``, or None if absent.

    Read through the array's own store, local or remote.
    """
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    buf = sync((array.store_path / key).get(prototype=default_buffer_prototype()))
    return None if buf is None else buf.as_numpy_array()


def chunk_read_error(
    store: str, variable: str | None, where: str, exc: Exception
) -> ChunkReadError:
    """The error for a chunk that could not be read or decoded, naming where it lies.

    ``where`` locates the chunk (``"chunk 1.0"``, ``"at index [0:5, 0:4]"``); ``variable``
    None means the store's root array.
    """
    var = f"variable {variable!r}" if variable else "root array"
    return ChunkReadError(
        f"could not read or decode Zarr store {store} {var} {where}: {type(exc).__name__}: "
        f"{exc}. A chunk file is probably corrupt or truncated; check or rewrite the store"
    )


@dataclass(frozen=True, eq=False)
class ChunkDecoder:
    """Decode whole chunks of one Zarr format 2 array into caller-owned buffers.

    Attributes
    ----------
    array : zarr.Array
    store : str
        The store's path or URL (for messages).
    variable : str
        The array's name in its group (for messages).

    Examples
    --------
    >>> import zarr
    >>> z = zarr.create_array(store={}, shape=(5, 4), chunks=(2, 4), dtype="i1", zarr_format=2)
    >>> z[:] = np.arange(20, dtype="i1").reshape(5, 4)
    >>> dec = ChunkDecoder.of(z, "memory", "x")
    >>> dec.row_blocks
    (2, 2, 1)
    >>> dec.read_row_block(2, np.empty(dec.row_block_nbytes, dtype=np.uint8)).tolist()
    [[16, 17, 18, 19]]
    """

    array: Any
    store: str
    variable: str

    @classmethod
    def of(cls, array: Any, store: str, variable: str) -> ChunkDecoder | None:
        """A decoder for ``array``, or None when its layout needs zarr's own read."""
        meta = getattr(array, "metadata", None)
        if meta is None or getattr(meta, "zarr_format", None) != 2:
            return None
        if meta.filters or meta.order != "C" or not hasattr(meta, "encode_chunk_key"):
            return None
        dtype = np.dtype(array.dtype)
        if dtype.kind not in "iuf" or dtype.byteorder == ">" or array.ndim == 0:
            return None
        compressor = meta.compressor
        if compressor is not None and not hasattr(compressor, "decode"):
            return None
        return cls(array, store, variable)

    def __dask_tokenize__(self) -> tuple[Any, ...]:
        return ("mspca-chunk-decoder", self.store, self.variable, tuple(self.array.shape))

    # ------------------------------------------------------------------ geometry
    @property
    def chunk_shape(self) -> tuple[int, ...]:
        return tuple(int(c) for c in self.array.chunks)

    @property
    def row_blocks(self) -> tuple[int, ...]:
        """Length along axis 0 of each row of chunks (the last may be short)."""
        n, c = int(self.array.shape[0]), self.chunk_shape[0]
        return tuple(min(c, n - r0) for r0 in range(0, n, c)) or (0,)

    @property
    def row_block_nbytes(self) -> int:
        """Bytes a buffer needs to hold one row of chunks, whole (full chunks along axis 0)."""
        itemsize = np.dtype(self.array.dtype).itemsize
        rest = math.prod(int(s) for s in self.array.shape[1:])
        return self.chunk_shape[0] * rest * itemsize

    @property
    def column_spans(self) -> tuple[tuple[int, int], ...] | None:
        """``(start, stop)`` along axis 1 of each column of chunks, or None.

        None unless the array has at least two axes, several chunks along axis 1 and one
        along every later axis (genotypes: variants × samples × ploidy, chunked on the
        first two): only then can :meth:`read_chunk` give a row of chunks column by column.
        """
        shape, chunk = self.array.shape, self.chunk_shape
        if len(shape) < 2 or any(c < s for s, c in zip(shape[2:], chunk[2:], strict=True)):
            return None
        n, c = int(shape[1]), chunk[1]
        if c <= 0 or c >= n:
            return None
        return tuple((c0, min(c0 + c, n)) for c0 in range(0, n, c))

    @property
    def chunk_nbytes(self) -> int:
        """Bytes a buffer needs to hold one (full-size) chunk."""
        return math.prod(self.chunk_shape) * np.dtype(self.array.dtype).itemsize

    # ------------------------------------------------------------------ reading
    def _in_buffer(self, buffer: np.ndarray, shape: tuple[int, ...], what: str) -> np.ndarray:
        """The first bytes of ``buffer`` as a C-ordered array of ``shape`` and the array's dtype."""
        dtype = np.dtype(self.array.dtype)
        flat = buffer.view(np.uint8).reshape(-1)
        need = math.prod(shape) * dtype.itemsize
        if flat.nbytes < need:
            raise ValueError(f"buffer of {flat.nbytes} bytes for a {what} of {need}")
        return flat[:need].view(dtype).reshape(shape)

    def read_chunk(self, i: int, j: int, buffer: np.ndarray) -> np.ndarray:
        """Chunk ``(i, j, 0, ...)`` decoded into ``buffer``, cut to its extent in the array.

        Only where :attr:`column_spans` is not None.

        Parameters
        ----------
        i, j : int
            Index of the chunk along axes 0 and 1.
        buffer : ndarray
            At least :attr:`chunk_nbytes` bytes, C-contiguous; reused by the caller.

        Returns
        -------
        ndarray, shape (row_blocks[i], stop - start, *array.shape[2:])
            A view of ``buffer`` (``start, stop = column_spans[j]``): valid until the caller
            reuses it.  Its last axes are contiguous; it is C-contiguous unless the chunk is
            the last, short one along axis 1.
        """
        spans = self.column_spans
        if spans is None:
            raise ValueError(f"{self.variable}: chunks along axis 1 only can be read one by one")
        block = self._in_buffer(buffer, self.chunk_shape, "chunk")
        self._decode_chunk((i, j, *([0] * (len(self.chunk_shape) - 2))), block)
        c0, c1 = spans[j]
        return block[: self.row_blocks[i], : c1 - c0]

    def _encoded(self, coords: tuple[int, ...]) -> Any:
        key = self.array.metadata.encode_chunk_key(coords)
        stored = _stored_chunk(self.array, key)
        if stored is None:
            raise ChunkReadError(
                f"Zarr store {self.store} variable {self.variable!r}: chunk {key} is missing "
                "(it was present when the store was opened); check the store"
            )
        return stored

    def _decode_chunk(self, coords: tuple[int, ...], out: np.ndarray) -> np.ndarray:
        """Decode one stored (full-size) chunk into ``out`` (C-ordered bytes); return ``out``."""
        encoded = self._encoded(coords)
        compressor = self.array.metadata.compressor
        try:
            if compressor is None:
                if encoded.nbytes != out.nbytes:
                    raise ValueError(f"{encoded.nbytes} bytes stored for {out.nbytes}")
                out.view(np.uint8).reshape(-1)[:] = encoded.view(np.uint8).reshape(-1)
            else:
                compressor.decode(encoded, out=out)
        except MemoryError:
            raise
        except Exception as exc:
            key = self.array.metadata.encode_chunk_key(coords)
            raise chunk_read_error(self.store, self.variable, f"chunk {key}", exc) from exc
        return out

    def read_row_block(self, i: int, buffer: np.ndarray) -> np.ndarray:
        """Row ``i`` of chunks, every column, decoded into ``buffer`` (no allocation).

        Parameters
        ----------
        i : int
            Index of the row of chunks along axis 0.
        buffer : ndarray
            At least :attr:`row_block_nbytes` bytes, C-contiguous; reused by the caller.

        Returns
        -------
        ndarray, shape (row_blocks[i], *array.shape[1:])
            A view of ``buffer``: valid until the caller reuses it.
        """
        shape = tuple(int(s) for s in self.array.shape)
        chunk = self.chunk_shape
        rows = self.row_blocks[i]
        grid = [math.ceil(s / c) if c else 1 for s, c in zip(shape[1:], chunk[1:], strict=True)]
        block = self._in_buffer(buffer, (chunk[0], *shape[1:]), "row")
        if all(g <= 1 for g in grid) and tuple(chunk[1:]) == tuple(shape[1:]):
            self._decode_chunk((i, *([0] * len(grid))), block)
            return block[:rows]
        # Several chunks across: each decoded into a scratch chunk, then copied into place.
        scratch = np.empty(chunk, dtype=block.dtype)
        for rest in np.ndindex(*grid):
            self._decode_chunk((i, *rest), scratch)
            where = tuple(
                slice(j * c, min((j + 1) * c, s))
                for j, c, s in zip(rest, chunk[1:], shape[1:], strict=True)
            )
            extent = tuple(slice(0, w.stop - w.start) for w in where)
            block[(slice(None), *where)] = scratch[(slice(None), *extent)]
        return block[:rows]


def read_strings(array: Any, store: str, variable: str) -> np.ndarray | None:
    """A whole Zarr format 2 array of variable-length strings as ``str`` objects, or None.

    zarr-python decodes each chunk's strings into objects, converts them to NumPy's
    StringDType and copies them into its output, which callers then convert back to objects:
    the 626k × 4 alleles of the genomics benchmark's VCF Zarr took 0.46 s so, 0.16 s here
    (decompressed with the array's compressor, decoded with its ``VLenUTF8`` filter).

    Parameters
    ----------
    array : zarr.Array
    store, variable : str
        For messages.

    Returns
    -------
    ndarray of :data:`~mspca_dask.io.writing.STR_OBJECT`, shaped like ``array``, or None
        None unless the layout is bio2zarr's: Zarr format 2, C order, exactly one
        ``VLenUTF8`` filter, chunks split along axis 0 only, every chunk stored (a missing
        one is zarr's to fill); the caller then reads through zarr.
    """
    from .writing import STR_OBJECT

    meta = getattr(array, "metadata", None)
    if meta is None or getattr(meta, "zarr_format", None) != 2 or meta.order != "C":
        return None
    filters: tuple[Any, ...] = tuple(meta.filters or ())
    if len(filters) != 1 or getattr(filters[0], "codec_id", None) != "vlen-utf8":
        return None
    vlen = filters[0]
    shape, chunks = tuple(int(s) for s in array.shape), tuple(int(c) for c in array.chunks)
    if not shape or chunks[1:] != shape[1:] or chunks[0] < 1:
        return None
    out = np.empty(shape, dtype=STR_OBJECT)
    for i, r0 in enumerate(range(0, shape[0], chunks[0])):
        key = meta.encode_chunk_key((i, *([0] * (len(shape) - 1))))
        raw = _stored_chunk(array, key)
        if raw is None:
            return None
        rows = min(chunks[0], shape[0] - r0)
        try:
            if meta.compressor is not None:
                raw = meta.compressor.decode(raw)
            strings = vlen.decode(raw).reshape(chunks)
        except Exception as exc:
            raise chunk_read_error(store, variable, f"chunk {key}", exc) from exc
        out[r0 : r0 + rows] = strings[:rows]
    return out
