"""Per eigenpair: the shift between groups, the within-group spike it carries, the verdict.

For each candidate pair ``j`` (scores ``t_j``, groups from :mod:`~mspca_dask.verdict.groups`):

* ``shift_z`` — the between-group shift along ``j``: Welch's F of the group means (Welch's
  ANOVA: groups of unequal spread, with degrees of freedom for the small groups' variance
  estimates), as the normal deviate of its p-value: ``N(0, 1)`` under "no shift along
  ``j``", so ``E z² ≈ 1`` on covariance pairs (NaN with no displaced group);
  shifted when ``shift_z ≥ z* = Φ⁻¹(1 − α/k)`` (one-sided, Bonferroni over ``k`` candidates).
* whether it *carries a spike of the within-group covariance* ``S_w`` (the data re-centred at
  each group's own mean, each group at the inliers' scale): ``S_w``'s eigenpairs above its
  own candidate line (the bulk edge at its own noise level) are matched one-to-one to the
  candidates, largest total ``|cos|``, and a match within 60° counts.

=================  =====================  ======================
                   carries a spike        carries none
=================  =====================  ======================
shifted            mixed                  mean shift
not shifted        covariance             undetermined
=================  =====================  ======================

"Undetermined": a spike of the pooled data that is neither a shift of the group means nor a
spike once they are removed (a noisier group's own noise is one).  With no displaced group
every candidate is covariance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import betaln, fdtr, fdtrc, ndtri, ndtri_exp

from .knockoff import max_overlap_assignment
from .levels import MIN_CARRIED_COSINE
from .ranks import mann_whitney_greater

__all__ = [
    "VERDICTS",
    "PairVerdicts",
    "between_group_share",
    "own_spread_p",
    "f_deviate",
    "judge_pairs",
    "match_spikes",
    "shift_statistics",
    "spread_z",
]

#: The verdicts of an eigenpair.
VERDICTS = ("covariance", "mean shift", "mixed", "undetermined", "bulk")


@dataclass(frozen=True)
class PairVerdicts:
    """The verdict of each of ``K`` eigenpairs and the statistics behind it."""

    verdicts: np.ndarray  # (K,) str, one of VERDICTS
    shift_z: np.ndarray  # (K,)
    share: np.ndarray  # (K,) share of the pair's variance between the groups (η²)
    carried: np.ndarray  # (K,) int: the within-group spike matched to the pair, −1 none
    carried_cosine: np.ndarray  # (K,) |cos| with it (0 for none)
    reasons: np.ndarray  # (K,) str
    z_critical: float

    @property
    def stable(self) -> np.ndarray:
        """Covariance structure: "covariance" or "mixed"."""
        return np.isin(self.verdicts, ("covariance", "mixed"))


def _welch_anova(T: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, int, np.ndarray]:
    """Welch's F of the group means per column, and its degrees of freedom.

    Welch (1951): ``w_g = n_g / s_g²``, ``A = Σ w_g (m_g − m̄)² / (G − 1)`` about the
    weighted mean, ``Λ = Σ (1 − w_g/W)² / (n_g − 1)``; ``F = A / (1 + 2(G − 2)Λ / (G² − 1))``
    is ``F(G − 1, (G² − 1) / 3Λ)`` without a shift.  Large groups make it ``χ²_{G−1}/(G − 1)``;
    ten groups of ten, whose variances are estimated from ten samples each, are not.
    """
    groups = [g for g in np.unique(labels) if np.count_nonzero(labels == g) >= 2]
    if len(groups) < 2:
        return np.zeros(T.shape[1]), 1, np.full(T.shape[1], np.inf)
    size = np.array([np.count_nonzero(labels == g) for g in groups], dtype=float)[:, None]
    means = np.array([T[labels == g].mean(axis=0) for g in groups])
    var = np.array([T[labels == g].var(axis=0, ddof=1) for g in groups])
    return _welch_f(means, var, size)


def _welch_f(
    means: np.ndarray, var: np.ndarray, size: np.ndarray
) -> tuple[np.ndarray, int, np.ndarray]:
    """Welch's F from the groups' means and variances ``(G, k)`` and sizes ``(G, 1)``."""
    G = means.shape[0]
    w = size / np.maximum(var, 1e-300)
    W = w.sum(axis=0)
    centre = (w * means).sum(axis=0) / W
    between = (w * (means - centre) ** 2).sum(axis=0) / (G - 1)
    lam = ((1.0 - w / W) ** 2 / (size - 1.0)).sum(axis=0)
    F = between / (1.0 + 2.0 * (G - 2) * lam / (G * G - 1))
    return F, G - 1, (G * G - 1) / np.maximum(3.0 * lam, 1e-300)


def shift_statistics(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """``shift_z`` of every pair: Welch's F of the group means as a normal deviate.

    Parameters
    ----------
    scores : (n, K) ndarray
    labels : (n,) int ndarray
        Groups (all 0: none).

    Returns
    -------
    (K,) ndarray
        ``N(0, 1)`` per pair under no shift along it (:func:`f_deviate`), so ``E z² = 1``;
        NaN with one group (there is no shift to measure).
    """
    T = np.asarray(scores, dtype=float)
    if labels.max(initial=0) == 0:
        return np.full(T.shape[1], np.nan)
    F, dfn, dfd = _welch_anova(T, labels)
    return f_deviate(F, dfn, dfd)


def spread_z(distances: np.ndarray, labels: np.ndarray, offsets: np.ndarray) -> float:
    """Whether the groups differ in spread: Welch's F of the group means of the samples' log
    squared distances to their own group's mean, as a normal deviate (``N(0, 1)`` when the
    groups share one spread).

    Parameters
    ----------
    distances : (n,) ndarray
        ``‖x_i − o‖²``, each sample's squared distance to an origin ``o``.
    labels : (n,) int ndarray
        Groups ``0 .. G − 1``.
    offsets : (G,) ndarray
        ``‖μ_g − o‖²``.

    Notes
    -----
    Groups of one covariance shape at their own scales ``τ_g`` have squared distances to
    their means distributed as ``τ_g`` times one law (times ``(n_g − 1)/n_g``, the sample
    mean's share, corrected here): on the log scale the spread is a shift, and the logs are
    near symmetric, so Welch's test of the means holds its level with small groups too.  A
    sample's distance to its group's mean is taken as ``distances − offsets[g]``, which is it
    plus ``2(μ_g − o)ᵀe``, a zero-mean term that only adds variance (the test then leans
    towards equal spreads).  NaN with fewer than two groups of two samples.
    """
    groups = np.unique(labels)
    size = np.array([np.count_nonzero(labels == g) for g in groups], dtype=float)
    keep = size >= 2
    if np.count_nonzero(keep) < 2:
        return float("nan")
    own = distances - offsets[labels]
    tiny = np.finfo(float).tiny
    logs = (
        np.log(np.maximum(own, tiny))
        + np.log(size / np.maximum(size - 1.0, 1.0))[np.searchsorted(groups, labels)]
    )
    kept = groups[keep]
    means = np.array([logs[labels == g].mean() for g in kept])[:, None]
    var = np.array([logs[labels == g].var(ddof=1) for g in kept])[:, None]
    F, dfn, dfd = _welch_f(means, var, size[keep, None])
    return float(f_deviate(F, dfn, dfd)[0])


def own_spread_p(scores: np.ndarray, labels: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """Whether each displaced group spreads along its own shift more than the inliers do:
    one-sided p-values of the Mann–Whitney rank test on the samples' log squared deviations
    along the shift, each over the sample's own mean squared deviation across the other
    candidates.

    Parameters
    ----------
    scores : (n, k) ndarray
        The scores the groups were found on.
    labels : (n,) int ndarray
        Groups ``0 .. G − 1``, 0 the inliers'.
    scales : (G,) ndarray
        ``τ_g``, each group's scale over the inliers' (ones when the spreads do not differ):
        the reference when there is no other candidate (``k = 1``).

    Returns
    -------
    (G,) ndarray
        1 for the inliers and for groups of fewer than three samples.

    Notes
    -----
    The model's groups share one covariance shape at their own scales, so along the line
    ``u_g`` from the inliers' mean to group ``g``'s, over the other candidates' directions,
    the two groups' deviations have one law: so do the ratios' logs.  A batch shifted
    by a varying amount (``m·s`` with ``s`` spread) spreads along ``u_g`` by its own
    amounts, which no covariance the groups share makes.  The ratio is each sample's own:
    a sample's scale (heavy tails of the elliptical kind) cancels in it, and so does a
    group's, and a noisier group's noise, which the candidates may follow (they are the
    directions where the data spread most), raises both parts.  Groups cut by their
    posterior are cut along ``u_g``, a displaced group more than the inliers when it is
    smaller: the test then leans towards "no own spread".  The rank test needs no law of
    the log ratios (they are skewed to the left, where a t on their means runs above its
    level).  It assumes each group's ratios independent: they share their group's estimated
    mean, which under a skewed factor moves them together and leans the test slightly
    above its level in groups of a hundred samples.
    """
    T = np.asarray(scores, dtype=float)
    G = int(labels.max()) + 1 if labels.size else 1
    p = np.ones(G)
    inliers = labels == 0
    k = T.shape[1]
    if np.count_nonzero(inliers) < 3 or k == 0:
        return p
    tiny = np.finfo(float).tiny

    def logs(rows: np.ndarray, u: np.ndarray) -> np.ndarray:
        e = T[rows] - T[rows].mean(axis=0)
        along = e @ u
        y = np.log(np.maximum(along * along, tiny))
        if k > 1:
            across = np.sum(e * e, axis=1) - along * along
            y -= np.log(np.maximum(across / (k - 1), tiny))
        return y

    m0 = T[inliers].mean(axis=0)
    for g in range(1, G):
        rows = labels == g
        u = T[rows].mean(axis=0) - m0
        norm = float(np.linalg.norm(u))
        if np.count_nonzero(rows) < 3 or norm == 0.0:
            continue
        own, base = logs(rows, u / norm), logs(inliers, u / norm)
        reference = 0.0 if k > 1 else math.log(scales[g] / scales[0])
        p[g] = mann_whitney_greater(own - reference, base)
    return p


def f_deviate(F: np.ndarray, dfn: int, dfd: np.ndarray) -> np.ndarray:
    """An ``F(dfn, dfd)`` statistic as the normal deviate of its upper-tail p-value.

    ``N(0, 1)`` under the null whatever the degrees of freedom.  Far in the tail, where the
    p-value underflows, ``log p`` is the leading term of the incomplete beta function's
    series, ``I_x(a, b) ≈ x^a (1 − x)^b / (a B(a, b))`` at ``x = dfd / (dfd + dfn F)``.

    Examples
    --------
    >>> f_deviate(np.array([3.841459]), 1, np.array([np.inf])).round(3).tolist()  # χ²_1's 5 %
    [1.645]
    >>> float(f_deviate(np.array([1e4]), 1, np.array([30.0]))[0]) > 10
    True
    """
    x = np.maximum(np.asarray(F, dtype=float), 0.0)
    d2 = np.minimum(np.broadcast_to(np.asarray(dfd, dtype=float), x.shape), 1e12)
    p = fdtrc(dfn, d2, x)
    z = np.empty_like(x)
    lower = p >= 0.5  # there the lower tail keeps the digits
    z[lower] = ndtri(np.maximum(fdtr(dfn, d2[lower], x[lower]), 1e-300))
    under = ~lower & (p < 1e-280)
    fine = ~lower & ~under
    z[fine] = -ndtri(p[fine])
    if np.any(under):
        a, b = d2[under] / 2.0, dfn / 2.0
        log_d2, log_t = np.log(d2[under]), np.log(dfn * x[under])
        log_sum = np.logaddexp(log_d2, log_t)  # x = d2 / (d2 + t), 1 − x = t / (d2 + t)
        log_p = a * (log_d2 - log_sum) + b * (log_t - log_sum) - np.log(a) - betaln(a, b)
        z[under] = -ndtri_exp(log_p)
    return z


def between_group_share(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """The share ``η²`` of each column's variance that lies between the groups.

    Parameters
    ----------
    scores : (n, K) ndarray
    labels : (n,) int ndarray

    Returns
    -------
    (K,) ndarray in [0, 1]

    Examples
    --------
    >>> between_group_share(np.array([[0.0], [0.0], [2.0], [2.0]]), np.array([0, 0, 1, 1]))
    array([1.])
    """
    T = np.asarray(scores, dtype=float)
    total = T.var(axis=0)
    between = np.zeros(T.shape[1])
    for g in np.unique(labels):
        rows = labels == g
        between += rows.mean() * (T[rows].mean(axis=0) - T.mean(axis=0)) ** 2
    return between / np.where(total > 0, total, 1.0)


def match_spikes(
    components: np.ndarray, candidate: np.ndarray, spikes: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Match within-group spikes one-to-one to candidate pairs, largest total ``|cos|``.

    A match counts when the pair lies within 60° of its spike
    (:data:`~mspca_dask.verdict.levels.MIN_CARRIED_COSINE`): a spike that lies along no
    candidate (outside their span, or spread over several) is carried by none.

    Parameters
    ----------
    components : (K, d) ndarray
        The pairs' unit eigenvectors.
    candidate : (K,) bool ndarray
    spikes : (s, d) ndarray
        Unit eigenvectors of the within-group spikes, largest first.

    Returns
    -------
    carried : (K,) int ndarray
        The spike matched to each pair (−1: none; non-candidates get none).
    cosine : (K,) ndarray
    """
    K = components.shape[0]
    carried = np.full(K, -1, dtype=np.intp)
    cosine = np.zeros(K)
    pairs = np.flatnonzero(candidate)
    if not pairs.size or not spikes.shape[0]:
        return carried, cosine
    cos = np.abs(spikes @ components[pairs].T)  # (s, k)
    if cos.shape[0] <= cos.shape[1]:
        rows, cols = max_overlap_assignment(cos)
    else:
        cols, rows = max_overlap_assignment(cos.T)
    close = cos[rows, cols] >= MIN_CARRIED_COSINE
    carried[pairs[cols[close]]] = rows[close]
    cosine[pairs[cols[close]]] = cos[rows[close], cols[close]]
    return carried, cosine


def judge_pairs(
    scores: np.ndarray,
    candidate: np.ndarray,
    labels: np.ndarray,
    *,
    carried: np.ndarray,
    carried_cosine: np.ndarray,
    level: float,
    within_values: np.ndarray | None = None,
    within_line: float | None = None,
) -> PairVerdicts:
    """The verdict of every eigenpair (module docstring).

    Parameters
    ----------
    scores : (n, K) ndarray
        Sample scores on the K eigenvectors.
    candidate : (K,) bool ndarray
        Pairs above the bulk edge; the others are "bulk".
    labels : (n,) int ndarray
        Groups from :func:`~mspca_dask.verdict.groups.fit_groups` (0: the inliers).
    carried, carried_cosine : (K,) ndarrays
        The within-group spike matched to each pair (:func:`match_spikes`) and its ``|cos|``.
    level : float
        ``α``.
    within_values : (s,) ndarray or None
        The within-group spikes' eigenvalues (for the reasons).
    within_line : float or None
        Their candidate line (for the reasons).
    """
    T = np.asarray(scores, dtype=float)
    K = T.shape[1]
    cand = np.asarray(candidate, dtype=bool)
    k = max(1, int(np.count_nonzero(cand)))
    zc = float(ndtri(1.0 - level / k))
    shift_z = shift_statistics(T, labels)
    grouped = labels.max(initial=0) > 0
    share = between_group_share(T, labels)
    verdicts = np.full(K, "bulk", dtype=object)
    reasons = np.full(K, "bulk: not above the bulk edge", dtype=object)
    for j in np.flatnonzero(cand):
        if not grouped:
            verdicts[j] = "covariance"
            reasons[j] = "covariance: no displaced group (the group test did not reject)"
            continue
        shifted = bool(shift_z[j] >= zc)
        s = int(carried[j])
        spike = (
            f"within-group spike {s + 1} (eigenvalue {within_values[s]:.4g} above its line "
            f"{within_line:.4g}; |cos| {carried_cosine[j]:.2f} with this eigenvector)"
            if s >= 0 and within_values is not None and within_line is not None
            else "no within-group spike"
        )
        shift = (
            f"shift z {shift_z[j]:.2f} (critical {zc:.2f}), {100 * share[j]:.0f} % of its "
            f"variance between the groups"
        )
        if shifted and s >= 0:
            verdicts[j], what = "mixed", "the groups are shifted along it and it carries a "
        elif s >= 0:
            verdicts[j], what = "covariance", "not shifted between the groups; it carries a "
        elif shifted:
            verdicts[j], what = "mean shift", "the groups are shifted along it and it carries "
        else:
            verdicts[j], what = (
                "undetermined",
                "neither shifted between the groups nor a spike once their means are removed: ",
            )
        reasons[j] = f"{verdicts[j]}: {what}{spike}; {shift}"
    return PairVerdicts(verdicts, shift_z, share, carried, carried_cosine, reasons, zc)
