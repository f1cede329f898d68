"""LD pruning and long-range-LD region exclusion, as geneticists do before a genotype PCA.

Two filters of the job's ``[ld]`` section, applied to the variants that passed QC:

* **Regions** (:func:`region_mask`): variants inside the long-range LD regions of
  Price et al. (2008) (``exclude_regions = "hg19"`` or ``"hg38"``: the BED files shipped in
  ``mspca_dask/genomics/data``) or of a BED file of one's own are dropped, from the variant
  metadata alone (no pass).
* **Pairwise r²** (:func:`prune_blocks`): the semantics of
  ``plink2 --indep-pairwise <window_kb>kb 1 <r2>``
  (https://www.cog-genomics.org/plink/2.0/ld#indep): within a window sliding along each
  contig, of every pair of variants with r² above the threshold one is removed, the one
  with the lower minor allele frequency.  The greedy order implemented here, exactly:

  1. variants are visited in the store's order (by position along each contig);
  2. variant ``j`` is compared with the variants still kept ``i`` before it on its contig
     with ``pos_j - pos_i < window_bp``, in order;
  3. when ``r²(i, j) > r2``: if ``maf_i < maf_j``, ``i`` is removed and the comparisons
     go on; otherwise (lower or equal MAF: the later variant on a tie) ``j`` is removed and
     the comparisons stop;
  4. ``j`` is kept if it was not removed.

  So no two kept variants of one window have r² above the threshold, and which are kept
  does not depend on how the variants are cut into chunks.  plink2's own order of removal
  within a window is not specified beyond "the lower MAF"; results can differ from it on a
  few variants of a dense cluster.

r² is the squared Pearson correlation of two variants' dosages over the analysed samples
(after QC), a missing call imputed at that variant's mean (it adds nothing to the
covariance; plink2 uses the samples called at both).  MAF is from the same calls.

Pure NumPy (the job streams the blocks, :func:`prune_dask`); no I/O but the BED files.

References
----------
Price, A. L. et al. (2008). Long-range LD can confound genome scans in admixed
populations. Am J Hum Genet 83, 132-135.
Chang, C. C. et al. (2015). Second-generation PLINK. GigaScience 4, 7.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, InputError

__all__ = [
    "DEFAULT_WINDOW_KB",
    "DEFAULT_R2",
    "BUILDS",
    "Region",
    "read_bed",
    "builtin_regions",
    "region_mask",
    "prune_blocks",
    "prune_dask",
]

#: 500 kb: the window of the usual ``--indep-pairwise 500kb 1 0.2`` (plink2 docs' example
#: scale; LD blocks are tens to hundreds of kb long).
DEFAULT_WINDOW_KB = 500.0
#: r² above 0.2 is the threshold most PCA pipelines prune at (plinkQC, bigsnpr's clumping).
DEFAULT_R2 = 0.2
#: Builds whose long-range LD regions are shipped with the package.
BUILDS = ("hg19", "hg38")


@dataclass(frozen=True)
class Region:
    """A BED interval: ``contig``, 0-based ``start``, ``end`` exclusive."""

    contig: str
    start: int
    end: int


def _contig_key(name: str) -> str:
    """``"chr6"`` and ``"6"`` name one contig (stores and BED files differ in the prefix)."""
    return name[3:] if name.lower().startswith("chr") else name


def read_bed(path: str | Path, where: str = "exclude_regions") -> tuple[Region, ...]:
    """The intervals of a BED file (first three columns; ``#``, ``track``, ``browser`` skipped).

    Raises
    ------
    ConfigError
        The file is missing or a line is not ``contig start end`` with ``0 <= start <= end``.
    """
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise ConfigError(f"{where}: could not read the BED file {p}: {exc}") from exc
    regions = []
    for n, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if not fields or fields[0].startswith("#") or fields[0] in ("track", "browser"):
            continue
        try:
            start, end = int(fields[1]), int(fields[2])
        except (IndexError, ValueError):
            start = end = -1
        if start < 0 or end < start:
            raise ConfigError(
                f"{where}: line {n} of {p} is not a BED interval 'contig start end' (got {line!r})"
            )
        regions.append(Region(fields[0], start, end))
    return tuple(regions)


def builtin_regions(build: str) -> tuple[Region, ...]:
    """The long-range LD regions shipped for ``build`` (one of :data:`BUILDS`)."""
    if build not in BUILDS:
        raise ConfigError(f"exclude_regions must be one of {[*BUILDS, 'none']} or a BED path")
    ref = resources.files("mspca_dask.genomics") / "data" / f"long_range_ld_{build}.bed"
    with resources.as_file(ref) as path:
        return read_bed(path, f"the shipped {build} regions")


def region_mask(contig: np.ndarray, position: np.ndarray, regions: Iterable[Region]) -> np.ndarray:
    """``(V,)`` bool: the variants inside any region.

    A VCF position ``p`` (1-based) lies in ``[start, end)`` of a BED interval (0-based) when
    ``start < p <= end``.  Contigs match with or without a ``chr`` prefix.

    Examples
    --------
    >>> r = [Region("chr6", 100, 200)]
    >>> region_mask(np.array(["6", "6", "6", "7"]), np.array([100, 101, 200, 150]), r).tolist()
    [False, True, True, False]
    """
    keys = np.array([_contig_key(str(c)) for c in np.asarray(contig).astype(str)])
    pos = np.asarray(position, np.int64)
    out = np.zeros(len(pos), dtype=bool)
    for r in regions:
        out |= (keys == _contig_key(r.contig)) & (pos > r.start) & (pos <= r.end)
    return out


@dataclass(frozen=True)
class _Rows:
    """Variants' rows as the r² products need them, with their moments over called samples.

    Integer calls are held as float32 when ``ploidy² · n < 2²⁴``: their products and sums
    are then exact integers at single precision's speed, and r² is formed from them in
    float64.  A missing call is 0 in ``y`` and imputed at its variant's mean, where it adds
    nothing to the sums; only the rows with a missing call keep their mask.
    """

    y: np.ndarray  # (v, n) the calls, a missing one 0
    mask_of: np.ndarray  # (v,) int: the row's row in ``masks``, -1 when it is complete
    masks: np.ndarray  # (m, n) bool: the called samples of the rows with a missing call
    n_called: np.ndarray  # (v,)
    total: np.ndarray  # (v,) the sum of the calls
    mean: np.ndarray  # (v,)
    var: np.ndarray  # (v,) the sum of squares about the mean (not divided)
    maf: np.ndarray  # (v,)

    @classmethod
    def of(cls, g: np.ndarray, ploidy: int, out: np.ndarray) -> _Rows:
        """``g``: (v, n) int calls (``-1`` missing) or floats (NaN missing), as rows in
        ``out`` (at least (v, n), of :func:`_calls_dtype`; ``y`` is a view of it)."""
        y = out[: len(g)]
        np.copyto(y, g, casting="unsafe")
        if np.issubdtype(g.dtype, np.integer):
            incomplete = np.flatnonzero(g.min(axis=1) < 0) if g.size else np.zeros(0, int)
            masks = g[incomplete] >= 0
        else:
            incomplete = np.flatnonzero(np.isnan(g).any(axis=1))
            masks = ~np.isnan(g[incomplete])
        if len(incomplete):
            y[incomplete] = np.where(masks, y[incomplete], 0)
        n_called = np.full(len(g), float(g.shape[1]))
        n_called[incomplete] = masks.sum(axis=1)
        mask_of = np.full(len(g), -1, dtype=np.int64)
        mask_of[incomplete] = np.arange(len(incomplete))
        total = y.sum(axis=1).astype(np.float64)
        sumsq = np.einsum("ij,ij->i", y, y).astype(np.float64)
        mean = total / np.maximum(n_called, 1.0)
        var = np.maximum(sumsq - total * mean, 0.0)
        p = mean / ploidy
        return cls(y, mask_of, masks, n_called, total, mean, var, np.minimum(p, 1.0 - p))


def _calls_dtype(g: np.ndarray, ploidy: int) -> np.dtype[Any]:
    """float32 for integer calls whose products sum exactly in it, else float64."""
    exact = np.issubdtype(g.dtype, np.integer) and ploidy * ploidy * g.shape[1] < 2**24
    return np.dtype(np.float32 if exact else np.float64)


#: The per-row moments of :class:`_Rows`, in their field order.
_MOMENTS = ("n_called", "total", "mean", "var", "maf")


class _Window:
    """The variants kept so far that later ones can still reach, their rows contiguous.

    Rows are appended in the store's order and dropped from the front once out of reach;
    a row removed by a later variant stays until then (its r² are computed, and ignored).
    So the kept variants of a window are one slice of :attr:`rows`, with no gather.  Every
    array holds one row per variant; the called masks only once a row with a missing call
    is appended (a complete row's mask is never read).
    """

    def __init__(self, n: int, dtype: np.dtype[Any]) -> None:
        self._y = np.empty((64, n), dtype=dtype)
        self._index = np.zeros(64, dtype=np.int64)
        self._moments = np.zeros((64, len(_MOMENTS)))
        self._complete = np.ones(64, dtype=bool)
        self._called = np.ones((0, n), dtype=bool)
        self._start = self._end = 0

    @property
    def index(self) -> np.ndarray:
        """(m,) the variants (store rows) of :attr:`rows`, increasing."""
        return self._index[self._start : self._end]

    def rows(self) -> _Rows:
        a, b = self._start, self._end
        complete = self._complete[a:b]
        mask_of = np.where(complete, -1, np.arange(b - a))
        masks = self._called[a:b] if not complete.all() else self._called[:0]
        return _Rows(self._y[a:b], mask_of, masks, *self._moments[a:b].T)

    def drop_before(self, first: int) -> None:
        """Forget the variants before store row ``first``."""
        self._start += int(np.searchsorted(self.index, first))

    def append(self, rows: _Rows, which: np.ndarray, index: np.ndarray) -> None:
        """Append ``rows``' rows ``which`` (store rows ``index``)."""
        k = len(which)
        if not k:
            return
        mask_of = rows.mask_of[which]
        if (mask_of >= 0).any() and not len(self._called):
            self._called = np.empty((len(self._index), self._y.shape[1]), dtype=bool)
        if self._end + k > len(self._index):  # move the live rows to the front, grow if full
            live = self._end - self._start
            size = max(len(self._index), 2 * (live + k))
            for name in ("_y", "_index", "_moments", "_complete", "_called"):
                old = getattr(self, name)
                if len(old):
                    new = np.empty((size, *old.shape[1:]), dtype=old.dtype)
                    new[:live] = old[self._start : self._end]
                    setattr(self, name, new)
            self._start, self._end = 0, live
        a, b = self._end, self._end + k
        self._y[a:b] = rows.y[which]
        self._index[a:b] = index
        self._moments[a:b] = np.column_stack([getattr(rows, f)[which] for f in _MOMENTS])
        self._complete[a:b] = mask_of < 0
        has = np.flatnonzero(mask_of >= 0)
        if len(has):
            self._called[a + has] = rows.masks[mask_of[has]]
        self._end = b


def _r2(a: _Rows, b: _Rows) -> np.ndarray:
    """``(len(a), len(b))``: r² between the rows of ``a`` and those of ``b``, missing calls
    imputed.

    The covariance ``Σ_k c_ik c_jk (y_ik − m_i)(y_jk − m_j)`` (``c`` the called mask) is
    expanded into products of the calls and masks; a complete row's mask is all ones, so
    the mask products are only formed for rows with a missing call.
    """
    cov = (a.y @ b.y.T).astype(np.float64)  # Σ y_i y_j
    y_c = np.repeat(a.total[:, None], len(b.y), axis=1)  # Σ y_i c_j
    c_y = np.repeat(b.total[None, :], len(a.y), axis=0)  # Σ c_i y_j
    c_c = np.minimum.outer(a.n_called, b.n_called)  # Σ c_i c_j when either row is complete
    ai, bi = np.flatnonzero(a.mask_of >= 0), np.flatnonzero(b.mask_of >= 0)
    # the masks of the rows with a missing call, in the calls' dtype
    ma = a.masks[a.mask_of[ai]].astype(a.y.dtype)
    mb = b.masks[b.mask_of[bi]].astype(b.y.dtype)
    if bi.size:
        y_c[:, bi] = a.y @ mb.T
    if ai.size:
        c_y[ai] = ma @ b.y.T
    if ai.size and bi.size:
        c_c[np.ix_(ai, bi)] = ma @ mb.T
    cov -= y_c * b.mean + a.mean[:, None] * c_y - np.multiply.outer(a.mean, b.mean) * c_c
    scale = np.multiply.outer(a.var, b.var)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(scale > 0, cov * cov / scale, 0.0)


#: Rows whose r² with their windows' kept variants are computed in one product.
_ROWS_PER_PRODUCT = 64


def prune_blocks(
    blocks: Iterable[np.ndarray],
    contig: np.ndarray,
    position: np.ndarray,
    *,
    window_bp: int,
    r2: float,
    ploidy: int = 2,
) -> np.ndarray:
    """``(V,)`` bool: the variants the greedy r² rule of this module keeps.

    Parameters
    ----------
    blocks : iterable of (v_i, n) arrays
        The variants' calls over the analysed samples, consecutive row blocks in order
        (int8 with ``-1`` missing, or float with NaN missing); the ``v_i`` sum to ``V``.
    contig, position : (V,) arrays
        Each contig one run of the rows, positions non-decreasing within it.
    window_bp : int
        Pairs with ``pos_j - pos_i < window_bp`` are compared.
    r2 : float
        A pair with r² above it loses one variant (the lower MAF; the later on a tie).
    ploidy : int

    Notes
    -----
    Rows are taken :data:`_ROWS_PER_PRODUCT` at a time, converted to floating point in one
    small buffer, and correlated in one product with the kept variants of their windows
    (:class:`_Window`, carried across blocks) and with each other; then the rule runs over
    that matrix.  So a window across a block border is handled as within one block, and
    nothing the size of a block is held but the block.

    Raises
    ------
    InputError
        A contig's variants are not one run sorted by position.

    Examples
    --------
    >>> g = np.array([[0, 1, 2, 1], [0, 1, 2, 1], [2, 0, 1, 1]], dtype=np.int8)
    >>> prune_blocks([g[:1], g[1:]], np.array(["1"] * 3), np.array([10, 20, 30]),
    ...              window_bp=100, r2=0.5).tolist()
    [True, False, True]
    """
    contig = np.asarray(contig).astype(str)
    position = np.asarray(position, np.int64)
    V = len(position)
    # one coordinate along the store: each contig's run after the previous one's, with more
    # than a window between them, so a variant's window is the rows with a coordinate within
    # ``window_bp`` before its own, a contiguous range ending at it
    run = _contig_runs(contig, position)
    genome = run * (2 * (int(position.max(initial=0)) + window_bp + 1)) + position
    # first row of each row's window (same contig, pos_j - pos_i < window_bp)
    lo = np.searchsorted(genome, genome - window_bp, side="right")
    # the rule is sequential: its scalar steps on Python lists
    kept = [False] * V
    window: _Window | None = None
    group = np.empty((0, 0))
    r0 = 0
    for block in blocks:
        g = np.asarray(block)
        v = g.shape[0]
        if v == 0:
            continue
        if window is None:
            dtype = _calls_dtype(g, ploidy)
            window = _Window(g.shape[1], dtype)
            group = np.empty((_ROWS_PER_PRODUCT, g.shape[1]), dtype=dtype)
        for s0 in range(r0, r0 + v, _ROWS_PER_PRODUCT):
            s1 = min(r0 + v, s0 + _ROWS_PER_PRODUCT)
            rows = _Rows.of(g[s0 - r0 : s1 - r0], ploidy, group)
            window.drop_before(int(lo[s0]))  # windows start no earlier further down
            now = window.rows()
            m = len(now.y)
            hits = np.hstack([_r2(rows, now), _r2(rows, rows)]) > r2
            cols = np.concatenate([window.index, np.arange(s0, s1)])
            # each row's window: from its first row up to, not including, itself
            k = np.arange(m + s1 - s0)
            starts = np.searchsorted(cols, lo[s0:s1])
            hits &= (k >= starts[:, None]) & (k < (m + np.arange(s1 - s0))[:, None])
            cols_l = cols.tolist()
            maf = [*now.maf.tolist(), *rows.maf.tolist()]
            any_hit = np.asarray(hits.any(axis=1)).tolist()
            for j, row, some in zip(range(s0, s1), hits, any_hit, strict=True):
                alive = True
                for h in np.flatnonzero(row).tolist() if some else ():
                    i = cols_l[h]
                    if not kept[i]:
                        continue
                    if maf[h] < maf[m + j - s0]:
                        kept[i] = False
                    else:
                        alive = False
                        break
                kept[j] = alive
            alive_rows = np.flatnonzero(kept[s0:s1])
            window.append(rows, alive_rows, s0 + alive_rows)
        r0 += v
    if r0 != V:
        raise ValueError(f"the blocks hold {r0} rows, not the {V} variants")
    return np.array(kept, dtype=bool)


def _contig_runs(contig: np.ndarray, position: np.ndarray) -> np.ndarray:
    """(V,) int64: each variant's contig run, numbered in store order.

    Raises
    ------
    InputError
        A contig's variants are not one run sorted by position.
    """
    if len(contig) == 0:
        return np.zeros(0, dtype=np.int64)
    new_run = contig[1:] != contig[:-1]
    runs = contig[np.concatenate([[0], np.flatnonzero(new_run) + 1])]
    if len(set(runs.tolist())) != len(runs):
        raise InputError(
            "LD pruning needs each contig's variants together (a sorted store); the variants "
            "of a contig appear in more than one run"
        )
    if (~new_run & (np.diff(position) < 0)).any():
        raise InputError(
            "LD pruning needs the variants sorted by position within each contig; sort the "
            "store (bcftools sort) or set [ld] enabled = false"
        )
    return np.concatenate([[0], np.cumsum(new_run)]).astype(np.int64)


def _blocks_in_order(calls: Any) -> Iterator[np.ndarray]:
    """The row blocks of a dask array, computed one at a time in this process."""
    from .._execution import local_get

    sync = local_get("sync")
    for i in range(calls.numblocks[0]):
        yield np.asarray(calls.blocks[i].compute(scheduler=sync))


def prune_dask(
    calls: Any,
    contig: np.ndarray,
    position: np.ndarray,
    *,
    window_bp: int,
    r2: float,
    ploidy: int = 2,
) -> tuple[np.ndarray, dict[str, Any]]:
    """:func:`prune_blocks` over a ``(V, n)`` dask array read once, block by block, in order.

    The rule is sequential along the genome, so the blocks are read in order in this process
    (the compact int8 matrix: in memory, or a local temporary store).  Returns the keep mask
    and the pass's record (``{"name", "products", "seconds"}``).
    """
    t0 = time.perf_counter()
    keep = prune_blocks(
        _blocks_in_order(calls), contig, position, window_bp=window_bp, r2=r2, ploidy=ploidy
    )
    record = {
        "name": "genomics-ld-prune",
        "products": ["ld_keep"],
        "seconds": time.perf_counter() - t0,
    }
    return keep, record
