"""Count the passes a computation makes over the data, by counting its chunk reads.

A pass reads every chunk of the data once, so ``reads / n_chunks`` is the number of passes,
whatever the engine says it did: this is an independent check of the pass-count contract
("``fit`` reads the data exactly the planned number of times").
"""

from __future__ import annotations

import threading
import uuid
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ParameterError
from .simulators import BLOCK_ROWS, SpikedMixture

if TYPE_CHECKING:
    import dask.array

__all__ = ["ReadCounter"]


class ReadCounter:
    """A lazily read ``(n_samples, n_features)`` Dask array that counts its chunk reads.

    Parameters
    ----------
    data : SpikedMixture, array_like or dask.array.Array, shape (n_samples, n_features)
        What to read: a simulated model (its rows are generated on each read, so nothing is
        held in memory), an in-memory array, or a Dask array (each read of a chunk of
        :attr:`array` computes that chunk of ``data``).
    chunks : dask chunk specification, optional
        Chunks of :attr:`array`, irregular ones included; default ``(1024, -1)`` for a model
        and an in-memory array, the chunks of a Dask array otherwise (which is rechunked
        when ``chunks`` is given).

    Attributes
    ----------
    array : (n_samples, n_features) dask.array.Array
        The data to hand to the computation; reading it is what is counted.
    counts : ndarray of int, shape ``array.numblocks``
        How often each chunk was read.

    Notes
    -----
    The counts live in this process: use Dask's ``"threads"`` or ``"sync"`` scheduler (or
    an in-process distributed cluster, ``processes=False``).  Chunks read in worker
    processes are not counted.

    Examples
    --------
    >>> import numpy as np
    >>> counter = ReadCounter(np.ones((6, 4)), chunks=(2, 4))
    >>> counter.n_chunks, counter.reads
    (3, 0)
    >>> float(counter.array.sum().compute(scheduler="sync")), counter.passes
    (24.0, 1.0)
    >>> _ = counter.array.mean(axis=0).compute(scheduler="sync")
    >>> counter.reads, counter.passes
    (6, 2.0)
    """

    def __init__(self, data: Any, chunks: Any = None) -> None:
        import dask.array as da

        self._lock = threading.Lock()
        name = f"read-counter-{uuid.uuid4().hex}"
        if isinstance(data, SpikedMixture):
            self._model: SpikedMixture | None = data
            normalized = da.core.normalize_chunks(
                (BLOCK_ROWS, -1) if chunks is None else chunks, shape=data.shape, dtype=float
            )
            self.array: dask.array.Array = da.map_blocks(
                self._generate,
                dtype=np.float64,
                chunks=normalized,
                meta=np.empty((0, 0)),
                name=name,
            )
        else:
            self._model = None
            source = data if isinstance(data, da.Array) else np.asarray(data)
            if source.ndim != 2:
                raise ParameterError(
                    f"data must be 2-D, shaped (n_samples, n_features) (got shape {source.shape})"
                )
            if isinstance(source, da.Array):
                source = source if chunks is None else source.rechunk(chunks)
            else:
                source = da.from_array(
                    source, chunks=(BLOCK_ROWS, -1) if chunks is None else chunks
                )
            self.array = da.map_blocks(
                self._pass_through,
                source,
                dtype=source.dtype,
                meta=np.empty((0, 0), dtype=source.dtype),
                name=name,
            )
        self.counts = np.zeros(self.array.numblocks, dtype=np.int64)

    def _count(self, block_info: dict[Any, Any]) -> tuple[tuple[int, int], tuple[int, int]]:
        """Count one read of the chunk ``block_info`` describes; its row and column ranges."""
        info = block_info[None]
        i, j = info["chunk-location"]
        with self._lock:
            self.counts[i, j] += 1
        rows, cols = info["array-location"]
        return rows, cols

    def _generate(self, block_info: dict[Any, Any] | None = None) -> np.ndarray:
        assert block_info is not None and self._model is not None
        (r0, r1), (c0, c1) = self._count(block_info)
        return np.ascontiguousarray(self._model.rows(r0, r1)[:, c0:c1])

    def _pass_through(
        self, block: np.ndarray, block_info: dict[Any, Any] | None = None
    ) -> np.ndarray:
        assert block_info is not None
        self._count(block_info)
        return block

    @property
    def n_chunks(self) -> int:
        """Number of chunks of :attr:`array`."""
        return int(self.counts.size)

    @property
    def reads(self) -> int:
        """Chunk reads so far, all chunks together."""
        return int(self.counts.sum())

    @property
    def passes(self) -> float:
        """``reads / n_chunks``: whole passes over the data when every chunk was read alike.

        See :attr:`uniform` for whether every chunk was read the same number of times.
        """
        return self.reads / self.n_chunks

    @property
    def uniform(self) -> bool:
        """Whether every chunk was read the same number of times (whole passes only)."""
        return bool(np.all(self.counts == self.counts.flat[0]))

    def reset(self) -> None:
        """Set every count back to zero."""
        with self._lock:
            self.counts[...] = 0

    def __repr__(self) -> str:
        return (
            f"ReadCounter(shape={self.array.shape}, n_chunks={self.n_chunks}, "
            f"reads={self.reads}, passes={self.passes:g})"
        )
