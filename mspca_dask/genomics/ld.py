"""Per-PC linkage-disequilibrium diagnostic: is a PC one region's haplotypes?

A PC of ancestry moves variants all along the genome; a PC made by one region in strong
linkage disequilibrium (an inversion such as 8p23 or 17q21, the HLA, LCT) puts its largest
loadings side by side.  For each PC, :func:`region_diagnostic` takes its
:data:`LD_TOP_VARIANTS` largest ``|loadings|`` and finds the window of
:data:`LD_WINDOW_BP` base pairs of one contig that holds most of them:

* ``share``: the fraction of those top variants inside the window;
* ``background``: the fraction of *all* analysed variants inside the same window, what
  loadings spread evenly over the variants would put there;
* the window, ``contig:start-end`` (first and last top variant inside it).

A PC is flagged as driven by one region when ``share ≥ LD_WARN_SHARE`` and
``share ≥ LD_WARN_ENRICHMENT × background``.  The usual remedy is to prune variants in LD
(``plink --indep-pairwise``) or drop the region, and fit again.

Pure NumPy; no Dask, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "LD_TOP_VARIANTS",
    "LD_WINDOW_BP",
    "LD_WARN_SHARE",
    "LD_WARN_ENRICHMENT",
    "RegionDiagnostic",
    "region_diagnostic",
    "describe",
    "warning_line",
]

#: Top |loadings| per PC: a fixed count, not a percentage, so the share is measured to about
#: ±3.5 % (binomial sd at 0.5) on any cohort, and stays within the loadings' top tail on a
#: genome-wide panel (200 of 500,000 variants is the top 0.04 %).
LD_TOP_VARIANTS = 200
#: 2 Mb: longer than typical LD blocks (tens to hundreds of kb), as long as the long-range
#: ones that distort PCA (the 8p23 inversion is about 4 Mb, the HLA about 4 Mb: their densest
#: part); a window anchored on a top variant, so no fixed grid splits a block.
LD_WINDOW_BP = 2_000_000
#: Half of a PC's top variants in one window: the PC then describes that region more than the
#: genome (Price et al. 2008 drop such regions before PCA); with diffuse loadings the share is
#: the window's background, a few % at most on genome-wide data.
LD_WARN_SHARE = 0.5
#: ... and five times the window's share of all variants, so that a cohort covering only a
#: few windows (every top variant necessarily "in one region") is not flagged for its layout.
LD_WARN_ENRICHMENT = 5.0


@dataclass(frozen=True)
class RegionDiagnostic:
    """The densest window of each PC's top |loadings| (:func:`region_diagnostic`).

    Attributes
    ----------
    share : (K,) ndarray of float
        Fraction of the PC's ``n_top`` largest |loadings| inside its densest window.
    background : (K,) ndarray of float
        Fraction of all analysed variants inside that window.
    contig : (K,) ndarray of str
    start, end : (K,) ndarray of int
        Positions of the first and last top variant inside the window.
    flagged : (K,) ndarray of bool
        ``share ≥ LD_WARN_SHARE`` and ``share ≥ LD_WARN_ENRICHMENT × background``.
    n_top : int
        Top variants counted per PC (``min(LD_TOP_VARIANTS, d)``).
    window_bp : int
    """

    share: np.ndarray
    background: np.ndarray
    contig: np.ndarray
    start: np.ndarray
    end: np.ndarray
    flagged: np.ndarray
    n_top: int
    window_bp: int


def region_diagnostic(
    loadings: np.ndarray,
    contig: np.ndarray,
    position: np.ndarray,
    *,
    n_top: int = LD_TOP_VARIANTS,
    window_bp: int = LD_WINDOW_BP,
) -> RegionDiagnostic:
    """For each PC, the share of its largest |loadings| in its densest window of one contig.

    Parameters
    ----------
    loadings : (d, K) array
        Loadings of the analysed variants (finite).
    contig : (d,) array of str
    position : (d,) array of int
    n_top : int
        Largest |loadings| counted per PC (all ``d`` when fewer).
    window_bp : int
        Window length; a window ``[p, p + window_bp)`` starts at a top variant ``p``.

    Returns
    -------
    RegionDiagnostic

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> pos = np.arange(1000) * 20_000  # 20 Mb of one contig
    >>> L = rng.standard_normal((1000, 2))
    >>> L[300:400, 1] += 10  # PC2: 100 neighbours (2 Mb) dominate
    >>> r = region_diagnostic(L, np.full(1000, "1"), pos, n_top=100)
    >>> r.flagged.tolist(), float(r.share[1]), int(r.start[1]), int(r.end[1])
    ([False, True], 1.0, 6000000, 7980000)
    """
    L = np.abs(np.asarray(loadings, float))
    d, K = L.shape
    contig = np.asarray(contig).astype(str)
    position = np.asarray(position, np.int64)
    m = max(min(int(n_top), d), 1)
    names = list(dict.fromkeys(contig.tolist()))
    # All analysed positions per contig, sorted, for the background counts.
    sorted_pos = {c: np.sort(position[contig == c]) for c in names}
    share = np.zeros(K)
    background = np.zeros(K)
    where = np.empty(K, dtype=object)
    start = np.zeros(K, np.int64)
    end = np.zeros(K, np.int64)
    for k in range(K):
        # Stable sort of -|L|: ties go to the earlier variant, so the result is deterministic.
        top = np.argsort(-L[:, k], kind="stable")[:m]
        best = (-1, "", 0, 0)
        for c in names:
            p = np.sort(position[top][contig[top] == c])
            if p.size == 0 or p.size <= best[0]:
                continue
            stop = np.searchsorted(p, p + window_bp, side="left")
            count = stop - np.arange(p.size)
            i = int(np.argmax(count))
            if count[i] > best[0]:
                best = (int(count[i]), c, int(p[i]), int(p[stop[i] - 1]))
        n_in, c, lo, hi = best
        share[k] = n_in / m
        where[k], start[k], end[k] = c, lo, hi
        sp = sorted_pos[c]
        n_bg = np.searchsorted(sp, lo + window_bp, side="left") - np.searchsorted(sp, lo)
        background[k] = n_bg / d
    flagged = (share >= LD_WARN_SHARE) & (share >= LD_WARN_ENRICHMENT * background)
    return RegionDiagnostic(
        share, background, where.astype(str), start, end, flagged, m, int(window_bp)
    )


def describe(
    pc: str, share: float, background: float, region: str, n_top: int, window_bp: int
) -> str:
    """One line of the log and the summary: ``"PC2: 64% of its top 200 |loadings| in
    1:6000000-7980000 (densest 2 Mb window; 4.0% of all analysed variants there)"``."""
    return (
        f"{pc}: {100 * share:.0f}% of its top {n_top} |loadings| in {region} "
        f"(densest {window_bp / 1e6:g} Mb window; {100 * background:.1f}% of all analysed "
        "variants there)"
    )


def warning_line(pc: str, share: float, background: float, region: str) -> str:
    """The log's and the report's warning for a PC flagged by :func:`region_diagnostic`."""
    return (
        f"{pc} looks driven by one region: {100 * share:.0f}% of its top |loadings| lie in "
        f"{region}, {share / max(background, 1e-12):.0f}x that window's share of the variants "
        f"(flagged at >= {100 * LD_WARN_SHARE:.0f}% and >= {LD_WARN_ENRICHMENT:g}x); prune "
        "variants in LD or exclude the region and fit again"
    )
