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


def _unit_rows(
    g: np.ndarray, ploidy: int, out: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Rows centred on their called mean (missing → 0) and scaled to unit norm; and MAF.

    ``g``: ``(v, n)`` int8 calls (``-1`` missing) or floats (NaN missing); ``out``: a
    ``(v, n)`` float64 array to write the rows into (else a new one).
    """
    z = np.empty(g.shape) if out is None else out
    z[...] = g  # one conversion, into place
    called = z >= 0 if np.issubdtype(g.dtype, np.integer) else ~np.isnan(z)
    complete = bool(called.all())
    if not complete:
        z[~called] = 0.0
    n_called = called.sum(axis=1) if not complete else np.full(g.shape[0], g.shape[1])
    mean = z.sum(axis=1) / np.maximum(n_called, 1)
    z -= mean[:, None]
    if not complete:
        z[~called] = 0.0  # a missing call adds nothing to the covariance
    norm = np.sqrt(np.einsum("ij,ij->i", z, z))
    z /= np.where(norm > 0, norm, 1.0)[:, None]
    p = mean / ploidy
    return z, np.minimum(p, 1.0 - p)


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
    Each block is correlated with the kept variants of the window before it (carried over
    from the previous blocks) in one product, then the rule runs over that matrix; so a
    window across a block border is handled as within one block.

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
    keep = np.zeros(V, dtype=bool)
    carry_idx = np.zeros(0, dtype=np.int64)
    carry_z = np.zeros((0, 0))
    carry_maf = np.zeros(0)
    r0 = 0
    for block in blocks:
        g = np.asarray(block)
        v = g.shape[0]
        if v == 0:
            continue
        idx = np.arange(r0, r0 + v)
        c = len(carry_idx)
        ctx_z = np.empty((c + v, g.shape[1]))
        if c:
            ctx_z[:c] = carry_z
        z, maf = _unit_rows(g, ploidy, out=ctx_z[c:])
        ctx_idx = np.concatenate([carry_idx, idx])
        ctx_maf = np.concatenate([carry_maf, maf])
        kept_ctx = np.concatenate([keep[carry_idx], np.zeros(v, dtype=bool)])
        ctx_genome = genome[ctx_idx]
        # first context row of each row's window (same contig, pos_j - pos_i < window_bp)
        lo = np.searchsorted(ctx_genome, ctx_genome - window_bp, side="right")
        for s0 in range(0, v, _ROWS_PER_PRODUCT):
            s1 = min(v, s0 + _ROWS_PER_PRODUCT)
            first = int(lo[c + s0])  # windows start no earlier further down the block
            # a row before these can only lose its place while they are visited: the columns
            # that matter are the rows kept now in the first window, and these rows
            cols = np.concatenate(
                [np.flatnonzero(kept_ctx[first : c + s0]) + first, np.arange(c + s0, c + s1)]
            )
            band = (z[s0:s1] @ ctx_z[cols].T) ** 2
            starts = np.searchsorted(cols, lo[c + s0 : c + s1])
            ends = np.searchsorted(cols, np.arange(c + s0, c + s1))
            for jj in range(s0, s1):
                j = c + jj
                at = np.arange(starts[jj - s0], ends[jj - s0])  # band columns of j's window
                at = at[kept_ctx[cols[at]]]
                alive = True
                for i in cols[at[band[jj - s0, at] > r2]]:
                    if ctx_maf[i] < ctx_maf[j]:
                        kept_ctx[i] = False
                    else:
                        alive = False
                        break
                kept_ctx[j] = alive
        keep[ctx_idx] = kept_ctx
        # Carry the kept variants a later one can still reach: within the window of the
        # block's last (later coordinates are not smaller).
        reach = kept_ctx & (genome[ctx_idx[-1]] - ctx_genome < window_bp)
        carry_idx, carry_z, carry_maf = ctx_idx[reach], ctx_z[reach], ctx_maf[reach]
        r0 += v
    if r0 != V:
        raise ValueError(f"the blocks hold {r0} rows, not the {V} variants")
    return keep


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
    for i in range(calls.numblocks[0]):
        yield np.asarray(calls.blocks[i].compute(scheduler="sync"))


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
