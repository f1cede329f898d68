"""The compact working matrix of the genomics job: kept variants as int8 calls, read once.

A raw VCF Zarr ``call_genotype`` is ``(variants, samples, ploidy)`` int8 and, on a typical
cohort, mostly variants that QC drops (rare ones): of the 625,974 variants of the benchmark's
Out-of-Africa cohort (``benchmarks/genomics_vs_plink2.py``) 52,846 pass MAF ≥ 0.05.  The job
used to decompress and standardise all of it in each of the fit's ~12 passes.  Now it reads the
raw store once:

1. the statistics pass (:func:`statistics_and_candidates`, or :func:`statistics_from_chunks`
   when the store's layout lets each raw chunk be decoded straight into a buffer its worker
   thread reuses) works on int8 calls (:func:`calls_from_genotypes`: the sum of a diploid
   call's two alleles, with a 64 Ki-entry lookup table for the few variants that have a
   missing, fill or second ALT allele; ~10× faster than summing allele indices into float32
   with NaN) and, as it goes, writes the rows of the variants that pass the per-variant
   filters (:class:`CandidateFilter`) to a temporary directory next to the output
   (:func:`workspace`, removed afterwards, failure or not; never inside the input store);
2. :func:`compact_from_parts` makes the compact int8 matrix (``-1`` missing) of the kept
   variants from those rows: in memory when it fits ``memory_budget`` bytes and the passes
   run in this process, else read where it lies (on a cluster a matrix held here would be
   sent to the workers with every pass; on disk each worker reads its own chunks).  Only
   when samples fail the call-rate filter (the candidates were chosen over all samples) does
   :func:`compact_calls` read the raw store a second time.

Every pass of the fit then reads the compact matrix through :func:`standardized`, which turns
one int8 chunk into ``(g − 2p)/s`` float32 (missing → 0, i.e. imputed at the centre) inside
the task; the fit's block-Krylov products then run as float32 GEMMs whose per-chunk partials
are summed in float64 (:mod:`mspca_dask._passes`), so results equal the float64 path to float32
rounding.

Nothing here computes unless an :class:`~mspca_dask._execution.Executor` is handed in.
"""

from __future__ import annotations

import contextlib
import logging
import math
import shutil
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dask.array as da
import numpy as np

from .._passes import _pick, merged_columns
from ..errors import ParameterError, ShapeError
from ..io.chunks import ChunkDecoder
from . import preprocess

__all__ = [
    "DEFAULT_MEMORY_BUDGET",
    "usable_memory",
    "CompactCalls",
    "Candidates",
    "CandidateFilter",
    "HeldParts",
    "calls_from_genotypes",
    "call_statistics",
    "compact_from_parts",
    "statistics_and_candidates",
    "workspace",
    "compact_calls",
    "standardized",
]

logger = logging.getLogger(__name__)

#: Where a container's memory limit is read (cgroup v2, then v1).
_CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")


def usable_memory(cgroup_files: tuple[str, ...] = _CGROUP_LIMITS) -> int:
    """Bytes of memory this process may use: the machine's, or less where its container
    (cgroup) or its resource limit says so."""
    import psutil

    limits = [int(psutil.virtual_memory().total)]
    for path in cgroup_files:
        with contextlib.suppress(OSError):
            text = Path(path).read_text().strip()
            if text.isdigit():  # "max": no limit
                limits.append(int(text))
    with contextlib.suppress(ImportError):  # POSIX only
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY and soft > 0:
            limits.append(int(soft))
    return min(limits)


#: Bytes the compact matrix may take in memory before it goes to a temporary Zarr store: a
#: quarter of :func:`usable_memory`, at least 2 GiB (``[compute] memory_budget``).  The
#: fit's passes read it many times; from memory each pass costs its products only.
DEFAULT_MEMORY_BUDGET = max(2 * 1024**3, usable_memory() // 4)
#: Bytes of int8 calls per chunk of the compact matrix (a float32 chunk is 4× that, the
#: float64 operand of the fit's products 8×).  Chunks this small keep those operands below
#: glibc's mmap threshold (32 MiB), so that their memory is reused instead of mapped and
#: faulted in afresh by every task: a Krylov product on 5,000-sample rows took 0.10 s per
#: 3,355 rows in chunks of 800 rows against 0.20 s in chunks of 3,355 (16 MiB).
CHUNK_BYTES = 4 * 1024**2
#: Fewest rows (variants) per chunk, whatever the samples: each chunk's Krylov partial is
#: samples × basis width (about 30) in float64, which at 256 rows is under a quarter of the
#: chunk's float32 operand.  At 100,000 samples 4 MiB is 41 rows, and the partials were 1.5×
#: the data they summed: on two worker processes the fit took 23 s against 14 s at 256 rows.
MIN_CHUNK_ROWS = 256
#: The name of the temporary store, next to the job's output (a hidden directory).
TEMP_PREFIX = ".mspca-compact-"


# --------------------------------------------------------------------------------------
# Calls
# --------------------------------------------------------------------------------------


def _diploid_table() -> np.ndarray:
    """``(65536,)`` int8: the call of two int8 alleles read as one little-endian uint16.

    ``-1`` when either allele is missing (``-1``), else the number of alleles ``> 0``
    (``-2``, bio2zarr's fill for a lower ploidy, counts as neither).
    """
    code = np.arange(65536, dtype=np.uint32)
    a = (code & 0xFF).astype(np.uint8).view(np.int8)
    b = ((code >> 8) & 0xFF).astype(np.uint8).view(np.int8)
    if np.little_endian is False:  # pragma: no cover - big-endian hosts
        a, b = b, a
    alt = (a > 0).astype(np.int8) + (b > 0).astype(np.int8)
    return np.where((a == -1) | (b == -1), np.int8(-1), alt).astype(np.int8)


_DIPLOID = _diploid_table()


def _calls_block(gt: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Chunk function: ``(v, s, ploidy)`` allele indices → ``(v, s)`` int8 calls, ``-1`` missing.

    With ``out`` (an int8 buffer of at least ``v·s`` entries, reused by the caller) the calls
    are written there, as a view of it; see :func:`_calls_into`.
    """
    shape = gt.shape[:2]
    if out is None:
        target = np.empty(shape, dtype=np.int8)
    else:
        target = out.reshape(-1)[: shape[0] * shape[1]].reshape(shape)
    return _calls_into(gt, target)


def _odd_rows(gt: np.ndarray) -> np.ndarray:
    """Rows of diploid int8 ``gt`` holding an allele other than ``0`` or ``1``.

    An allele byte is ``0`` or ``1`` exactly when its bits other than the lowest are clear,
    so the OR of a row's bytes, read two at a time, shows any other allele: one reduction
    over half as many elements as a row's min and max.
    """
    if gt.strides[-1] == 1 and gt.strides[-2] == 2 and gt.size:
        pairs = gt.view(np.uint16)[..., 0]
        rows = np.bitwise_or.reduce(pairs.reshape(pairs.shape[0], -1), axis=1)
        return np.flatnonzero(rows & np.uint16(0xFEFE))
    flat = gt.reshape(gt.shape[0], -1)
    return np.flatnonzero((flat.min(axis=1) < 0) | (flat.max(axis=1) > 1))


def _calls_into(gt: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Write the int8 calls of ``(v, s, ploidy)`` allele indices ``gt`` into ``target``.

    ``target`` is any ``(v, s)`` int8 array (a column slice of a larger one too); returned.
    Diploid int8 chunks add the two alleles, which is the call wherever both are ``0`` or
    ``1``; the few variants with another allele anywhere (a missing ``-1``, a lower-ploidy
    fill ``-2``, a second ALT allele) are redone with the lookup table (one gather per call).
    On the benchmark's 10,000 × 5,000 chunks (75 such variants) this takes 0.08 s against
    0.14 s for the table on the whole chunk.  Other ploidies and dtypes count alleles
    directly.  All give the same calls.
    """
    if gt.ndim == 3 and gt.shape[-1] == 2 and gt.dtype == np.int8:
        if gt.size == 0:
            target[...] = 0
            return target
        odd = _odd_rows(gt)
        np.add(gt[..., 0], gt[..., 1], out=target)
        if len(odd):
            pairs = np.ascontiguousarray(gt[odd]).view(np.uint16)[..., 0]
            target[odd] = _DIPLOID[pairs]
        return target
    missing = (gt == -1).any(axis=-1)
    calls = (gt > 0).sum(axis=-1, dtype=np.int8)
    calls[missing] = -1
    target[...] = calls
    return target


def calls_from_genotypes(call_genotype: da.Array) -> da.Array:
    """Alternate-allele counts per variant and sample as int8, ``-1`` for a missing call.

    Parameters
    ----------
    call_genotype : (n_variants, n_samples, ploidy) dask array of int
        Allele indices as in VCF Zarr (``-1`` missing, ``-2`` fill).

    Returns
    -------
    (n_variants, n_samples) dask array of int8
        The same counts as :func:`mspca_dask.genomics.preprocess.dosage_from_genotypes` (which gives
        them as float32 with NaN), a quarter of the bytes.

    Examples
    --------
    >>> gt = da.from_array(np.array([[[0, 1], [1, 1], [-1, -1], [1, -2]]], dtype=np.int8))
    >>> calls_from_genotypes(gt).compute().tolist()
    [[1, 2, -1, 1]]
    """
    call_genotype = preprocess.checked_genotypes(call_genotype)
    return da.map_blocks(_calls_block, call_genotype, drop_axis=2, dtype=np.int8)


def _sum_type(largest: int) -> type[np.integer[Any]]:
    """The narrowest integer type that sums exactly up to ``largest`` in magnitude.

    Narrow sums of int8 are faster: int16 ~1.5× int32, which is ~2× int64.
    """
    return np.int16 if largest < 2**15 else np.int32 if largest < 2**31 else np.int64


#: Bytes of calls per slice of the statistics' row sums: their buffers are allocated per
#: chunk at this size, below the allocator's mapping threshold, so they cost no page faults
#: (a temporary the size of the chunk is mapped and zeroed afresh on every task).
_SUM_BYTES = 2**20


def _slice_rows(n_cols: int) -> int:
    """Rows per slice of :data:`_SUM_BYTES` calls (one row at least)."""
    return max(1, _SUM_BYTES // max(n_cols, 1))


def _variant_stats_block(calls: np.ndarray, ref: np.ndarray | None) -> np.ndarray:
    """Chunk function: ``(v, 1, k)`` partial ``alt_sum, n_called, alt_sq_sum [, ref_alt_sum,
    ref_n_called]``.

    Counts are exact (integer sums in the narrowest type that holds them, returned as
    float64, below 2⁵³), taken slice by slice of rows through buffers of
    :data:`_SUM_BYTES`: no temporary the size of the chunk.

    * Missing calls are ``-1``: they add ``-1`` to the plain sums and ``1`` to the sums of
      squares, so their count (the sum of each call's sign bit, ``c >> 7``) is added back
      instead of masking the chunk; a chunk without any skips counting them.
    * Calls in ``{-1, 0, 1, 2}`` need no product for their squares: ``c² = c + (c & 2)``.
      Other calls (higher ploidies) are squared.
    * ``alt_sq_sum`` finds variants whose called dosages are all equal
      (:attr:`mspca_dask.genomics.preprocess.GenotypeStats.constant_calls`).
    * The reference sums read the smaller of the reference and the other samples (gathered,
      then subtracted from the row totals when they are the other samples).
    """
    n_rows, n_cols = calls.shape
    low, high = (int(calls.min()), int(calls.max())) if calls.size else (0, 0)
    bound = max(-low, high, 1)
    has_missing = low < 0
    by_bits = low >= -1 and high <= 2
    cols: np.ndarray | None = None
    small_is_ref = False
    if ref is not None:
        r = np.asarray(ref, dtype=bool)
        n_ref = int(r.sum())
        small_is_ref = n_ref <= n_cols - n_ref
        cols = np.flatnonzero(r if small_is_ref else ~r)
    sums = np.zeros((5, n_rows), dtype=np.int64)  # alt, squares' excess, missing; sub alt, missing
    row_t = _sum_type(n_cols * bound)
    excess_t = _sum_type(2 * n_cols) if by_bits else _sum_type(n_cols * bound * bound)
    sub_t = _sum_type((0 if cols is None else len(cols)) * bound)
    step = _slice_rows(n_cols)
    buf = np.empty(min(n_rows, step) * n_cols, dtype=np.int8)
    sub_buf = np.empty(0 if cols is None else min(n_rows, step) * len(cols), dtype=np.int8)
    for r0 in range(0, n_rows, step):
        part = calls[r0 : r0 + step]
        rows = slice(r0, r0 + len(part))
        work = buf[: part.size].reshape(part.shape)
        sums[0, rows] = part.sum(axis=1, dtype=row_t)
        if by_bits:
            sums[1, rows] = np.bitwise_and(part, 2, out=work).sum(axis=1, dtype=excess_t)
        else:
            sums[1, rows] = np.einsum("ij,ij->i", part, part, dtype=excess_t) - sums[0, rows]
        if has_missing:
            sums[2, rows] = -np.right_shift(part, 7, out=work).sum(axis=1, dtype=row_t)
        if cols is not None and len(cols):
            sub = sub_buf[: len(part) * len(cols)].reshape(len(part), len(cols))
            np.take(part, cols, axis=1, out=sub)
            sums[3, rows] = sub.sum(axis=1, dtype=sub_t)
            if has_missing:
                sums[4, rows] = -np.right_shift(sub, 7, out=sub).sum(axis=1, dtype=sub_t)
    alt = sums[0] + sums[2]
    n_called = n_cols - sums[2]
    parts = [alt, n_called, sums[0] + sums[1] - sums[2]]
    if cols is not None:
        sub_alt = sums[3] + sums[4]
        sub_called = len(cols) - sums[4]
        if small_is_ref:
            parts += [sub_alt, sub_called]
        else:
            parts += [alt - sub_alt, n_called - sub_called]
    return np.stack(parts, axis=1).astype(np.float64)[:, None, :]


def _sample_stats_block(calls: np.ndarray, has_missing: bool | None = None) -> np.ndarray:
    """Chunk function: ``(1, s)`` called variants per sample in this chunk.

    Missing calls (``-1``) are counted by their sign bit, slice by slice of rows (as in
    :func:`_variant_stats_block`).  ``has_missing``: whether the chunk has any, when the
    caller knows it (from the per-variant counts); else the chunk's minimum tells.
    """
    n_rows, n_cols = calls.shape
    called = np.full((1, n_cols), n_rows, dtype=np.int64)
    if has_missing is None:
        has_missing = calls.size > 0 and int(calls.min()) < 0
    if not has_missing:
        return called
    step = _slice_rows(n_cols)
    buf = np.empty(min(n_rows, step) * n_cols, dtype=np.int8)
    for r0 in range(0, n_rows, step):
        part = calls[r0 : r0 + step]
        work = np.right_shift(part, 7, out=buf[: part.size].reshape(part.shape))
        called[0] += work.sum(axis=0, dtype=_sum_type(len(part)))
    return called


def _sample_n_called(calls: da.Array) -> da.Array:
    """``(n_samples,)`` called variants per sample (lazy)."""
    return da.blockwise(
        _sample_stats_block,
        "ij",
        calls,
        "ij",
        adjust_chunks={"i": 1},
        dtype=np.int64,
        meta=np.empty((0, 0), dtype=np.int64),
    ).sum(axis=0)


def _statistics_products(
    per_variant: da.Array, per_sample: da.Array, with_reference: bool
) -> dict[str, da.Array]:
    """Name the columns of :func:`_variant_stats_block` (any further column is ignored)."""
    out = {
        "alt_sum": per_variant[:, 0],
        "n_called": per_variant[:, 1].astype(np.int64),
        "alt_sq_sum": per_variant[:, 2],
        "sample_n_called": per_sample,
    }
    if with_reference:
        out["ref_alt_sum"] = per_variant[:, 3]
        out["ref_n_called"] = per_variant[:, 4].astype(np.int64)
    return out


def _checked_reference(reference: np.ndarray | None, n_samples: int) -> np.ndarray | None:
    """``reference`` as a ``(n_samples,)`` bool array (None stays None)."""
    if reference is None:
        return None
    ref = np.asarray(reference, dtype=bool)
    if ref.shape != (n_samples,):
        raise ShapeError(
            f"reference must be a boolean vector over the {n_samples} samples (got shape "
            f"{ref.shape})"
        )
    return ref


def call_statistics(calls: da.Array, reference: np.ndarray | None = None) -> dict[str, da.Array]:
    """The statistics pass on int8 calls: the products of ``preprocess.genotype_statistics``.

    Parameters
    ----------
    calls : (n_variants, n_samples) dask array of int8
        :func:`calls_from_genotypes`.
    reference : (n_samples,) bool array, optional
        Adds ``ref_alt_sum`` and ``ref_n_called``.

    Returns
    -------
    dict of str to dask array
        ``alt_sum``, ``n_called``, ``alt_sq_sum`` (variants,), ``sample_n_called`` (samples,)
        and, with a reference, ``ref_alt_sum``, ``ref_n_called``: the values of
        :func:`mspca_dask.genomics.preprocess.genotype_statistics` on the float32 dosages.  Computed
        together they read every chunk once.

    Examples
    --------
    >>> c = da.from_array(np.array([[0, 1, -1], [2, 2, 1]], dtype=np.int8))
    >>> out = call_statistics(c, reference=np.array([True, True, False]))
    >>> {k: v.compute().tolist() for k, v in sorted(out.items())}  # doctest: +NORMALIZE_WHITESPACE
    {'alt_sq_sum': [1.0, 9.0], 'alt_sum': [1.0, 5.0], 'n_called': [2, 3],
     'ref_alt_sum': [1.0, 4.0], 'ref_n_called': [2, 2], 'sample_n_called': [2, 2, 1]}
    """
    ns = int(calls.shape[1])
    ref = _checked_reference(reference, ns)
    ref_d = None if ref is None else da.from_array(ref, chunks=(calls.chunks[1],))
    k = 3 if ref_d is None else 5
    args: list[Any] = [calls, "vj"] + ([None, None] if ref_d is None else [ref_d, "j"])
    per_variant = da.blockwise(
        _variant_stats_block,
        "vjk",
        *args,
        new_axes={"k": k},
        adjust_chunks={"j": 1},
        dtype=np.float64,
        meta=np.empty((0, 0, 0)),
    ).sum(axis=1)
    return _statistics_products(per_variant, _sample_n_called(calls), ref_d is not None)


# --------------------------------------------------------------------------------------
# One raw pass: statistics, and the candidate rows written as they are read
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CandidateFilter:
    """The per-variant QC filters, applied inside the statistics pass to pick candidate rows.

    A variant is a candidate when it is polymorphic, its minor allele frequency is at least
    ``min_maf`` and at most ``max_missing`` of the samples miss it, over *all* samples: the
    filters of :func:`mspca_dask.genomics.qc.run_qc` with the same float64 arithmetic as
    :class:`mspca_dask.genomics.preprocess.GenotypeStats`.  When no sample fails the call-rate
    filter the variants that pass QC are these candidates, or fewer of them (the reference-set
    missingness filter only removes); otherwise the job reads the raw store again.
    """

    min_maf: float
    max_missing: float
    ploidy: int
    n_samples: int

    def keep(self, alt_sum: np.ndarray, n_called: np.ndarray) -> np.ndarray:
        """(v,) bool: the candidates among variants with these sums and call counts."""
        with np.errstate(invalid="ignore", divide="ignore"):
            p = np.asarray(alt_sum, dtype=float) / (self.ploidy * np.asarray(n_called))
        p = np.nan_to_num(p, nan=0.0)
        maf = np.minimum(p, 1.0 - p)
        missing = 1.0 - np.asarray(n_called) / max(self.n_samples, 1)
        return (maf > 0) & (maf >= self.min_maf) & (missing <= self.max_missing)


def _part_path(root: str, index: int) -> str:
    return f"{root}/part-{index:07d}"


def _create_part(root: str, index: int, shape: tuple[int, int], width: int) -> Any:
    """The empty int8 part of raw chunk ``index``: a Zarr format 2 array, chunks of ``width``.

    Format 2 with one compressor, so that :func:`_read_part` decodes a part of one chunk
    straight into the array it returns (:class:`~mspca_dask.io.chunks.ChunkDecoder`).
    Rewriting the same part on a retry writes the same bytes.
    """
    import zarr

    return zarr.create_array(
        _part_path(root, index),
        shape=shape,
        chunks=(max(1, shape[0]), max(1, width)),
        dtype=np.int8,
        zarr_format=2,
        overwrite=True,
    )


def _write_part(root: str, index: int, rows: np.ndarray) -> None:
    """Write the candidate rows of raw chunk ``index`` as one chunk (:func:`_create_part`)."""
    part = _create_part(root, index, (int(rows.shape[0]), int(rows.shape[1])), rows.shape[1])
    part[...] = rows


def _read_part(path: str, take: np.ndarray | None) -> np.ndarray:
    """The rows of one part (all, or those of ``take``), decoded into the array returned."""
    import zarr

    arr = zarr.open_array(zarr.storage.LocalStore(path, read_only=True), mode="r")
    dec = ChunkDecoder.of(arr, path, "candidate rows")
    if dec is None or tuple(arr.chunks) != tuple(arr.shape):
        rows = np.asarray(arr[...])
    else:
        rows = dec.read_row_block(0, np.empty(dec.row_block_nbytes, dtype=np.uint8))
    return rows if take is None else rows[take]


class HeldParts:
    """Candidate rows that the statistics pass keeps in this process instead of writing them.

    Under a local threaded scheduler the pass's tasks run in this process, so the parts can
    be kept as the arrays their tasks made, not compressed into the temporary directory and
    decompressed again for the compact matrix: on the benchmark cohort that round trip cost
    1.4 of the pass's 10 CPU-s and 0.4 s of single-threaded compaction.  Parts are held while
    the ones held so far, projected over all ``n_parts``, fit ``budget``: a matrix that will
    not fit (and is then read from the directory by every fit pass) is written there from
    its first parts on, as before, instead of being held up to the budget and written out
    afterwards.  Tasks on a cluster run in other processes: there the job passes no holder.

    Parameters
    ----------
    budget : int
        Bytes of rows held at most (the compact matrix's memory budget).
    n_parts : int
        Parts the pass makes (one per row of raw chunks).
    """

    def __init__(self, budget: int, n_parts: int) -> None:
        self.budget = int(budget)
        self.n_parts = max(1, int(n_parts))
        self._parts: dict[int, np.ndarray] = {}
        self._nbytes = 0
        self._full = False
        self._lock = threading.Lock()
        self._token = uuid.uuid4().hex

    def __dask_tokenize__(self) -> str:  # one holder, one token (its rows are not hashed)
        return self._token

    def put(self, index: int, rows: np.ndarray) -> bool:
        """Hold ``rows`` as part ``index`` if the projection fits; whether they were held.

        Once a part is refused every later part is too.  A retried task puts the same rows
        again: they replace the first copy.
        """
        with self._lock:
            before = self._parts.get(index)
            grow = rows.nbytes - (0 if before is None else before.nbytes)
            count = len(self._parts) + (before is None)
            projected = (self._nbytes + grow) / count * self.n_parts
            if self._full or self._nbytes + grow > self.budget or projected > self.budget:
                self._full = True
                return False
            self._parts[index] = rows
            self._nbytes += grow
            return True

    def get(self, index: int) -> np.ndarray | None:
        """Part ``index``'s rows, or None when that part was written to disk."""
        with self._lock:
            return self._parts.get(index)

    def pop(self, index: int) -> np.ndarray | None:
        """Part ``index``'s rows, no longer held; None when that part was written to disk."""
        with self._lock:
            rows = self._parts.pop(index, None)
            self._nbytes -= 0 if rows is None else rows.nbytes
            return rows

    @property
    def nbytes(self) -> int:
        """Bytes of rows held now."""
        return self._nbytes

    def clear(self) -> None:
        """Drop every held part (the compact matrix has been made, or will not be)."""
        with self._lock:
            self._parts.clear()
            self._nbytes = 0


def _stats_candidates_block(
    calls: np.ndarray,
    ref: np.ndarray | None,
    filt: CandidateFilter,
    root: str,
    held: HeldParts | None = None,
    block_info: Any = None,
) -> np.ndarray:
    """Chunk function: ``(v, k)`` statistics and candidate flag; writes the candidate rows.

    Columns: those of :func:`_variant_stats_block`, then the candidate flag.  The candidate
    rows go to ``root/part-<chunk index>`` (int8, one array per raw chunk; rewriting the same
    part on a retry writes the same bytes), or into ``held`` when they fit its budget.
    """
    index = int(block_info[0]["chunk-location"][0])
    return _stats_and_part(calls, ref, filt, root, index, held)


def _stats_and_part(
    calls: np.ndarray,
    ref: np.ndarray | None,
    filt: CandidateFilter,
    root: str,
    index: int,
    held: HeldParts | None = None,
) -> np.ndarray:
    """``(v, k)`` statistics and candidate flag of one raw chunk's calls; keeps its part.

    The part (``calls[cand]``, a copy: ``calls`` may be a reused buffer) is held in
    ``held`` when it fits, else written to ``root``.
    """
    stats = _variant_stats_block(calls, ref)[:, 0, :]
    cand = filt.keep(stats[:, 0], stats[:, 1])
    rows = calls[cand]
    if held is None or not held.put(index, rows):
        _write_part(root, index, rows)
    return np.column_stack([stats, cand])


def statistics_and_candidates(
    calls: da.Array,
    reference: np.ndarray | None,
    filt: CandidateFilter,
    root: str | Path,
    held: HeldParts | None = None,
) -> dict[str, da.Array]:
    """:func:`call_statistics` plus ``candidate`` (variants,) bool, in the same one read.

    Every raw chunk (merged to span all samples) writes its candidate rows, int8 calls, to
    ``root/part-<i>`` as a side effect of the pass, so that the compact matrix needs no
    second read of the raw store (:func:`compact_from_parts`).
    """
    ns = int(calls.shape[1])
    calls = merged_columns(calls)  # streaming: each row of chunks merges on its own
    ref = _checked_reference(reference, ns)
    k = 4 if ref is None else 6
    per_variant = da.map_blocks(
        _stats_candidates_block,
        calls,
        ref=ref,
        filt=filt,
        root=str(root),
        held=held,
        chunks=(calls.chunks[0], (k,)),
        dtype=np.float64,
        meta=np.empty((0, 0)),
    )
    out = _statistics_products(per_variant, _sample_n_called(calls), ref is not None)
    out["candidate"] = per_variant[:, -1].astype(bool)
    return out


_SCRATCH: dict[tuple[int, str], np.ndarray] = {}
_SCRATCH_LOCK = threading.Lock()


def _scratch(name: str, nbytes: int) -> np.ndarray:
    """A uint8 buffer of at least ``nbytes`` owned by this thread, reused from task to task.

    Fresh arrays the size of a genotype chunk are mapped and zeroed by the kernel on every
    task (half the statistics pass's CPU time); a worker thread runs one task at a time, so
    its buffers can be reused by its next task.  :func:`release_scratch` frees them all.
    """
    key = (threading.get_ident(), name)
    with _SCRATCH_LOCK:
        buf = _SCRATCH.get(key)
        if buf is None or buf.nbytes < nbytes:
            buf = _SCRATCH[key] = np.empty(nbytes, dtype=np.uint8)
    return buf


def release_scratch() -> None:
    """Free the buffers of :func:`_scratch` (in this process): the pass that used them is over."""
    with _SCRATCH_LOCK:
        _SCRATCH.clear()


def _raw_statistics_block(
    index: np.ndarray,
    decoder: ChunkDecoder,
    ref: np.ndarray | None,
    filt: CandidateFilter,
    root: str,
    hold_rows: bool = True,
    held: HeldParts | None = None,
) -> np.ndarray:
    """Task function of :func:`statistics_from_chunks`: one row of raw chunks.

    Returns a one-element object array holding ``((v, k) statistics and candidate flag,
    (1, s) called variants per sample)``; the candidate rows go to ``root/part-<row>`` (or
    ``held``) as in
    :func:`_stats_candidates_block`.  Every buffer is this thread's, reused from task to task.

    * One chunk across (or chunks :meth:`ChunkDecoder.read_chunk` cannot take one by one):
      the row is decoded whole, then made into calls.
    * Several chunks across, ``hold_rows``: each chunk is decoded in turn into a buffer of
      one chunk and made into its columns of the row's calls (no buffer of the whole row of
      genotypes, which is twice the calls).
    * Several chunks across, not ``hold_rows``: the row's calls are never held.  The
      statistics are summed chunk by chunk; then each chunk is decoded again and its
      columns of the candidate rows written.  Memory: one chunk and its calls, whatever the
      number of samples, for a second decompression of the row.
    """
    i = int(index[0])
    if decoder.column_spans is not None and not hold_rows:
        stats, per_sample = _stats_and_part_by_columns(decoder, i, ref, filt, root)
    else:
        calls = _row_calls(decoder, i)
        stats = _stats_and_part(calls, ref, filt, root, i, held)
        per_sample = _sample_stats_block(calls, bool((stats[:, 1] < calls.shape[1]).any()))
    out = np.empty(1, dtype=object)
    out[0] = (stats, per_sample)
    return out


def _decoded_chunk(decoder: ChunkDecoder, i: int, j: int) -> np.ndarray:
    """Raw chunk ``(i, j)`` decoded into this thread's chunk buffer."""
    return decoder.read_chunk(i, j, _scratch("chunk", decoder.chunk_nbytes))


def _row_calls(decoder: ChunkDecoder, i: int) -> np.ndarray:
    """The int8 calls of row ``i`` of raw chunks, in this thread's buffers.

    One chunk across (or chunks :meth:`ChunkDecoder.read_chunk` cannot take one by one): the
    row decoded whole, then made into calls.  Several chunks across: each chunk decoded in
    turn into a buffer of one chunk and made into its columns of the row's calls.
    """
    spans = decoder.column_spans
    if spans is None:
        gt = decoder.read_row_block(i, _scratch("genotypes", decoder.row_block_nbytes))
        return _calls_block(gt, out=_scratch("calls", gt.shape[0] * gt.shape[1]).view(np.int8))
    n_rows, n_cols = decoder.row_blocks[i], spans[-1][1]
    buf = _scratch("calls", n_rows * n_cols).view(np.int8)
    calls = buf[: n_rows * n_cols].reshape(n_rows, n_cols)
    for j, (c0, c1) in enumerate(spans):
        _calls_into(_decoded_chunk(decoder, i, j), calls[:, c0:c1])
    return calls


def _chunk_calls(decoder: ChunkDecoder, i: int, j: int) -> np.ndarray:
    """The int8 calls of raw chunk ``(i, j)``, in this thread's buffers."""
    gt = _decoded_chunk(decoder, i, j)
    buf = _scratch("chunk-calls", gt.shape[0] * gt.shape[1]).view(np.int8)
    return _calls_block(gt, out=buf)


def _stats_and_part_by_columns(
    decoder: ChunkDecoder, i: int, ref: np.ndarray | None, filt: CandidateFilter, root: str
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_stats_and_part` and :func:`_sample_stats_block` of row ``i``, chunk by chunk.

    The per-variant statistics are integer sums, exact in float64, so their sum over the
    chunks equals the row's.  The part has the same rows as :func:`_write_part` writes,
    chunked like the raw columns.
    """
    spans = decoder.column_spans
    assert spans is not None
    stats: np.ndarray | None = None
    per_sample = []
    for j, (c0, c1) in enumerate(spans):
        calls = _chunk_calls(decoder, i, j)
        part = _variant_stats_block(calls, None if ref is None else ref[c0:c1])[:, 0, :]
        stats = part if stats is None else stats + part
        per_sample.append(_sample_stats_block(calls, bool((part[:, 1] < calls.shape[1]).any())))
    assert stats is not None
    cand = filt.keep(stats[:, 0], stats[:, 1])
    n_cand, width = int(cand.sum()), spans[0][1] - spans[0][0]
    arr = _create_part(root, i, (n_cand, spans[-1][1]), width)
    if n_cand:
        for j, (c0, c1) in enumerate(spans):
            arr[:, c0:c1] = _chunk_calls(decoder, i, j)[cand]
    return np.column_stack([stats, cand]), np.concatenate(per_sample, axis=1)


def statistics_from_chunks(
    decoder: ChunkDecoder,
    reference: np.ndarray | None,
    filt: CandidateFilter,
    root: str | Path,
    *,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
    workers: int = 2,
    held: HeldParts | None = None,
) -> dict[str, da.Array]:
    """:func:`statistics_and_candidates` reading the raw genotype chunks straight.

    One task per row of raw chunks decodes it into buffers its thread reuses
    (:class:`~mspca_dask.io.chunks.ChunkDecoder`) and makes the calls in another: no
    chunk-sized array is allocated per task.  The products are those of
    :func:`statistics_and_candidates`, equal to them exactly.

    Memory: with several chunks across the samples, each task holds one decoded chunk and
    the int8 calls of its row of chunks (rows × samples bytes) when ``workers`` such rows fit
    ``memory_budget``; otherwise one chunk and its calls only, whatever the number of
    samples, and each row is decompressed twice (:func:`_raw_statistics_block`).

    Parameters
    ----------
    decoder : ChunkDecoder
        Of the ``(variants, samples, ploidy)`` int8 genotypes.
    reference : (n_samples,) bool array, optional
    filt : CandidateFilter
    root : path
        Where the candidate rows are written.
    memory_budget : int
        Bytes.
    workers : int
        Tasks that run at once.
    held : HeldParts, optional
        Keeps the candidate rows that fit its budget in this process instead (a local
        threaded scheduler only).
    """
    ns = int(decoder.array.shape[1])
    ref = _checked_reference(reference, ns)
    rows = decoder.row_blocks
    nb = len(rows)
    k = 4 if ref is None else 6
    hold_rows = max(1, workers) * decoder.chunk_shape[0] * ns <= memory_budget
    if decoder.column_spans is not None:
        logger.info(
            "statistics pass: %d chunks across the samples, %s",
            len(decoder.column_spans),
            "each row of calls held while its chunks are read"
            if hold_rows
            else f"rows of calls ({decoder.chunk_shape[0] * ns / 2**20:.0f} MiB each) over the "
            f"memory budget of {memory_budget / 2**20:.0f} MiB for {workers} workers: every "
            "row is read chunk by chunk, twice",
        )
    pairs = da.map_blocks(
        _raw_statistics_block,
        da.arange(nb, chunks=1),
        decoder=decoder,
        ref=ref,
        filt=filt,
        root=str(root),
        hold_rows=hold_rows,
        held=held,
        dtype=object,
        meta=np.empty((0,), dtype=object),
    )
    per_variant = pairs.map_blocks(
        _pick,
        index=0,
        new_axis=1,
        chunks=(rows, (k,)),
        dtype=np.float64,
        meta=np.empty((0, 0)),
    )
    per_sample = pairs.map_blocks(
        _pick,
        index=1,
        new_axis=1,
        chunks=((1,) * nb, (ns,)),
        dtype=np.int64,
        meta=np.empty((0, 0), dtype=np.int64),
    ).sum(axis=0)
    out = _statistics_products(per_variant, per_sample, ref is not None)
    out["candidate"] = per_variant[:, -1].astype(bool)
    return out


@dataclass(frozen=True)
class Candidates:
    """Where the statistics pass wrote its candidate rows, and which variants they are."""

    root: Path
    mask: np.ndarray  # (n_variants,) bool
    chunks: tuple[int, ...]  # raw variant chunks (one part each)
    n_cols: int  # samples: the parts' columns
    held: HeldParts | None = None  # the parts kept in this process (the others are in root)


# --------------------------------------------------------------------------------------
# The compact matrix
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CompactCalls:
    """The kept variants × kept samples as int8 calls, in memory or in a temporary store.

    Attributes
    ----------
    calls : (n_kept_variants, n_kept_samples) dask array of int8
        ``-1`` missing; row chunks of about :data:`CHUNK_BYTES`, each spanning all samples.
    where : str
        ``"memory"`` or ``"zarr"``.
    path : Path or None
        The temporary store (``where == "zarr"``); removed when the context exits.
    has_missing : bool
        Whether any kept call is missing (else standardisation skips the mask).
    nbytes : int
    held : (n_kept_variants, n_kept_samples) int8 ndarray or None
        The matrix itself when it is in memory (the blocks of ``calls`` are views of it).
    """

    calls: da.Array
    where: str
    path: Path | None
    has_missing: bool
    nbytes: int
    held: np.ndarray | None = None


def _in_memory(
    executor: Any,
    name: str,
    calls: da.Array,
    rows: int,
    memory_budget: int,
    has_missing: bool,
) -> CompactCalls:
    """Compute the ``(variants, samples)`` int8 ``calls`` in one pass and hold them in memory."""
    arr = np.ascontiguousarray(executor.run(name, {"calls": calls})["calls"], dtype=np.int8)
    return _held(arr, rows, name, memory_budget, has_missing)


def _holds_in_memory(nbytes: int, memory_budget: int, executor: Any) -> bool:
    """Whether the compact matrix is held in this process rather than left on disk.

    Only within the budget and when the passes' tasks run here: a matrix held by a
    cluster's client is part of every pass's graph, sent to the workers each time.
    """
    return nbytes <= memory_budget and bool(executor.shares_memory)


def _why_on_disk(nbytes: int, memory_budget: int) -> str:
    size, budget = nbytes / 2**20, memory_budget / 2**20
    if nbytes > memory_budget:
        return f"{size:.0f} MiB over the memory budget of {budget:.0f} MiB"
    return f"{size:.0f} MiB: the workers read it where it lies instead of receiving it every pass"


def _held(
    arr: np.ndarray, rows: int, name: str, memory_budget: int, has_missing: bool
) -> CompactCalls:
    """The computed ``(variants, samples)`` int8 matrix ``arr`` as the in-memory compact matrix."""
    n_rows, n_cols = arr.shape
    logger.info(
        "compact matrix: %d variants x %d samples int8 in memory (%.0f MiB, budget %.0f MiB)",
        n_rows,
        n_cols,
        arr.nbytes / 2**20,
        memory_budget / 2**20,
    )
    return CompactCalls(
        _blocks_of(arr, rows, f"{name}-{uuid.uuid4().hex}"),
        "memory",
        None,
        has_missing,
        int(arr.nbytes),
        arr,
    )


def _blocks_of(arr: np.ndarray, rows: int, name: str, axis: int = 0) -> da.Array:
    """``arr`` as a dask array of row blocks (``axis=1``: column blocks) that are views of
    it (no copy, no hashing).

    ``da.from_array`` copies a NumPy array and hashes it for its name: 1 s on the benchmark
    cohort's 264 MB matrix, which is the job's own and never changes while it is used.
    """
    size = arr.shape[axis]
    starts = range(0, max(size, 1), rows)
    spans = tuple(max(0, min(rows, size - r0)) for r0 in starts)
    if axis == 0:
        graph = {(name, i, 0): arr[r0 : r0 + rows] for i, r0 in enumerate(starts)}
        chunks = (spans, (arr.shape[1],))
    else:
        graph = {(name, 0, i): arr[:, r0 : r0 + rows] for i, r0 in enumerate(starts)}
        chunks = ((arr.shape[0],), spans)
    return da.Array(graph, name, chunks, meta=arr[:0, :0])


def _row_chunk(n_rows: int, n_cols: int, workers: int = 2) -> int:
    """Rows per chunk: about :data:`CHUNK_BYTES` but at least :data:`MIN_CHUNK_ROWS`, and at
    least ``2·workers`` chunks."""
    by_bytes = max(MIN_CHUNK_ROWS, CHUNK_BYTES // max(n_cols, 1))
    by_split = max(1, math.ceil(n_rows / (2 * max(workers, 1))))
    return max(1, min(by_bytes, by_split, n_rows))


def _write_block(block: np.ndarray, path: str, block_info: Any = None) -> np.ndarray:
    """Chunk function: write one block of calls into the temporary store; return its size."""
    import zarr

    (r0, r1), (c0, c1) = block_info[0]["array-location"]
    arr = zarr.open_array(path, mode="r+")
    arr[r0:r1, c0:c1] = block
    return np.full((1, 1), block.size, dtype=np.int64)


@contextlib.contextmanager
def compact_calls(
    calls: da.Array,
    variant_keep: np.ndarray,
    sample_keep: np.ndarray,
    executor: Any,
    *,
    has_missing: bool,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
    spill_dir: str | Path | None = None,
    workers: int = 2,
) -> Iterator[CompactCalls]:
    """Read the raw calls once and keep the kept variants × samples, as a context manager.

    Parameters
    ----------
    calls : (n_variants, n_samples) dask array of int8
        :func:`calls_from_genotypes` of the raw store.
    variant_keep : (n_variants,) bool
    sample_keep : (n_samples,) bool
    executor : Executor
        Runs the one compaction pass (``"genomics-compact"``).
    has_missing : bool
        Whether any kept call is missing (from the statistics pass).
    memory_budget : int
        Bytes the matrix may take in memory (int8: one byte a call); above it, a temporary
        Zarr store in ``spill_dir``.
    spill_dir : path, optional
        Where the temporary store goes (the job puts it next to its output).  Required when
        the matrix exceeds the budget.
    workers : int
        Chunks are cut so that at least ``2·workers`` of them exist.

    Yields
    ------
    CompactCalls
        Removed (the temporary store) when the context exits, whether or not it failed.
    """
    vk = np.flatnonzero(np.asarray(variant_keep, dtype=bool))
    sk = np.asarray(sample_keep, dtype=bool)
    if memory_budget < 0:
        raise ParameterError(f"memory_budget must be >= 0 bytes (got {memory_budget})")
    sel = calls if len(vk) == calls.shape[0] else calls[vk]
    if not sk.all():
        sel = sel[:, np.flatnonzero(sk)]
    n_rows, n_cols = (int(s) for s in sel.shape)
    rows = _row_chunk(n_rows, n_cols, workers)
    sel = sel.rechunk((rows, n_cols))
    nbytes = n_rows * n_cols
    if _holds_in_memory(nbytes, memory_budget, executor) or (
        nbytes <= memory_budget and spill_dir is None
    ):
        yield _in_memory(executor, "genomics-compact", sel, rows, memory_budget, has_missing)
        return
    if spill_dir is None:
        raise ParameterError(
            f"the compact matrix needs {nbytes / 2**20:.0f} MiB, over the memory budget of "
            f"{memory_budget / 2**20:.0f} MiB, and no directory was given for its temporary store"
        )
    import zarr

    path = Path(spill_dir) / f"{TEMP_PREFIX}{uuid.uuid4().hex}.zarr"
    try:
        zarr.create_array(str(path), shape=(n_rows, n_cols), chunks=(rows, n_cols), dtype=np.int8)
        written = da.map_blocks(
            _write_block, sel, str(path), chunks=(1, 1), dtype=np.int64, meta=np.empty((0, 0))
        )
        total = executor.run("genomics-compact", {"written": written.sum()})["written"]
        if int(total) != nbytes:  # pragma: no cover - a write went missing
            raise RuntimeError(f"the compact store received {int(total)} of {nbytes} calls")
        logger.info(
            "compact matrix: %d variants x %d samples int8 in a temporary store %s (%s)",
            n_rows,
            n_cols,
            path,
            _why_on_disk(nbytes, memory_budget),
        )
        stored = da.from_zarr(str(path))
        yield CompactCalls(stored, "zarr", path, has_missing, nbytes)
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def workspace(parent: str | Path) -> Iterator[Path]:
    """A hidden temporary directory in ``parent`` (next to the job's output), removed on exit.

    Removed whether or not the block fails; ``parent`` must be writable.  Never inside the
    input store: the job passes its output's parent directory.
    """
    path = Path(parent) / f"{TEMP_PREFIX}{uuid.uuid4().hex}"
    path.mkdir(parents=True)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _open_part(path: str, n_rows: int, n_cols: int, take: np.ndarray | None) -> da.Array:
    """The kept rows of one part the statistics pass wrote, as one lazy chunk (not hashed)."""
    name = f"genomics-part-{uuid.uuid4().hex}"
    rows = n_rows if take is None else len(take)
    graph = {(name, 0, 0): (_read_part, path, take)}
    return da.Array(graph, name, ((rows,), (n_cols,)), meta=np.empty((0, 0), dtype=np.int8))


def compact_from_parts(
    cand: Candidates,
    variant_keep: np.ndarray,
    executor: Any,
    *,
    has_missing: bool,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
    workers: int = 2,
) -> CompactCalls | None:
    """The compact matrix from the candidate rows the statistics pass wrote (no raw read).

    Returns None when a kept variant is not a candidate (then the raw store must be read
    again: :func:`compact_calls`).  In memory (the parts held in this process as they are,
    the others read once) when the kept rows fit ``memory_budget`` bytes; else the fit's
    passes read the parts where they are (held parts are written there first).  Either way
    ``cand.held`` is emptied.
    """
    keep = np.asarray(variant_keep, dtype=bool)
    if (keep & ~cand.mask).any():
        if cand.held is not None:
            cand.held.clear()
        return None
    offsets = np.concatenate([[0], np.cumsum(cand.chunks)])
    kept: list[tuple[int, np.ndarray | None, int]] = []  # (part, rows to take, rows kept)
    for i in range(len(cand.chunks)):
        m = cand.mask[offsets[i] : offsets[i + 1]]
        k = keep[offsets[i] : offsets[i + 1]][m]  # kept among this part's candidates
        if k.any():
            kept.append((i, None if k.all() else np.flatnonzero(k), len(k)))
    if not kept:
        raise ParameterError("no variant is kept: nothing to compact")
    held = cand.held if cand.held is not None else HeldParts(0, 1)
    n_cols = cand.n_cols
    n_rows = sum(n if take is None else len(take) for _, take, n in kept)
    rows = _row_chunk(n_rows, n_cols, workers)
    nbytes = n_rows * n_cols
    try:
        if _holds_in_memory(nbytes, memory_budget, executor):
            # each part on disk read by its own task, then all put in place once
            on_disk = {
                str(i): _open_part(_part_path(str(cand.root), i), n, n_cols, take)
                for i, take, n in kept
                if held.get(i) is None
            }
            read = executor.run("genomics-compact-load", on_disk) if on_disk else {}
            # each part is let go once it is in place: the parts and the matrix are not all
            # held at once
            arr = np.empty((n_rows, n_cols), dtype=np.int8)
            r0 = 0
            for i, take, _ in kept:
                part = held.pop(i)
                if part is None:
                    part = read.pop(str(i))
                elif take is not None:
                    part = part[take]
                arr[r0 : r0 + len(part)] = part
                r0 += len(part)
                del part
            return _held(arr, rows, "genomics-compact", memory_budget, has_missing)
        for i, _, _ in kept:  # the fit's passes read the parts where they lie: all on disk
            part = held.get(i)
            if part is not None:
                _write_part(str(cand.root), i, part)
    finally:
        held.clear()
    logger.info(
        "compact matrix: %d variants x %d samples int8 left in the temporary store %s (%s)",
        n_rows,
        n_cols,
        cand.root,
        _why_on_disk(nbytes, memory_budget),
    )
    pieces = [_open_part(_part_path(str(cand.root), i), n, n_cols, take) for i, take, n in kept]
    stacked = da.concatenate(pieces, axis=0)
    # the in-memory matrix's chunks: the same sums in the same order, bit for bit
    return CompactCalls(stacked.rechunk((rows, n_cols)), "zarr", cand.root, has_missing, nbytes)


# --------------------------------------------------------------------------------------
# Standardisation fused into the passes
# --------------------------------------------------------------------------------------


def _standardize_block(
    calls: np.ndarray, inv_scale: np.ndarray, shift: np.ndarray, has_missing: bool
) -> np.ndarray:
    """Chunk function: ``(v, s)`` int8 calls → ``(s, v)`` float32 ``g/s − 2p/s``, missing → 0.

    Returned as the transpose of a C-ordered ``(v, s)`` array: the fit's dual orientation
    (``M = Xᵀ``) sees C-ordered chunks, the primal F-ordered ones, both read by BLAS
    without a copy.
    """
    # the int8 → float32 cast happens inside the product: one pass writes the float32 chunk
    z = np.multiply(calls, inv_scale[:, None], dtype=np.float32)
    z -= shift[:, None]
    if has_missing:
        z[calls < 0] = 0.0
    return z.T


def standardized(compact: CompactCalls, centre: np.ndarray, scale: np.ndarray) -> da.Array:
    """The ``(samples, variants)`` float32 data of the PCA, ``(g − centre)/scale``, lazily.

    Parameters
    ----------
    compact : CompactCalls
    centre : (n_kept_variants,) array
        Mean dosage to subtract (``P·p``).
    scale : (n_kept_variants,) array
        Positive divisor (Patterson's ``√(P p (1 − p))``).

    Returns
    -------
    (n_samples, n_variants) dask array of float32
        Chunks span all samples, or all variants when the matrix is in memory and has
        more samples than variants (the fit's operator is then the variants' side, as
        :func:`mspca_dask._passes.orient` picks from the chunks); a missing call is 0
        (imputed at the centre), as in
        :func:`mspca_dask.genomics.preprocess.standardize`, whose float64 values these equal to
        float32 rounding.
    """
    nv, ns = (int(n) for n in compact.calls.shape)
    centre, scale = preprocess.checked_centre_scale(nv, centre, scale)
    calls = compact.calls
    if compact.held is not None and ns > nv:
        # chunks spanning all variants: the fit takes the smaller side, the variants, as its
        # operator space (its basis is then variants long, not samples long)
        width = _row_chunk(ns, nv)
        calls = _blocks_of(compact.held, width, f"genomics-by-samples-{uuid.uuid4().hex}", 1)
    rows = calls.chunks[0]
    inv = da.from_array((1.0 / scale).astype(np.float32), chunks=(rows,))
    shift = da.from_array((centre / scale).astype(np.float32), chunks=(rows,))
    return da.blockwise(
        _standardize_block,
        "sv",
        calls,
        "vs",
        inv,
        "v",
        shift,
        "v",
        has_missing=compact.has_missing,
        dtype=np.float32,
        concatenate=True,
    )
