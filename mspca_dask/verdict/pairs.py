"""Per eigenpair: the shift between groups, the within-group spike it carries, the verdict.

For each candidate pair ``j`` (scores ``t_j``, groups from :mod:`~mspca_dask.verdict.groups`):

* ``shift_z`` — the between-group shift along ``j``: Welch's χ² of the group means with
  ``G − 1`` degrees of freedom, as the normal deviate of its p-value: ``N(0, 1)`` under "no
  shift along ``j``", so ``E z² ≈ 1`` on covariance pairs (NaN with no displaced group);
  shifted when ``shift_z ≥ z* = Φ⁻¹(1 − α/k)`` (one-sided, Bonferroni over ``k`` candidates).
* whether it *carries a spike of the within-group covariance* ``S_w`` (the data re-centred at
  each group's own mean): ``S_w``'s eigenpairs above its own candidate line (the bulk edge at
  its own noise level) are matched one-to-one to the candidates, largest total ``|cos|``, and
  a match within 60° counts.

=================  =====================  ======================
                   carries a spike        carries none
=================  =====================  ======================
shifted            mixed                  mean shift
not shifted        covariance             undetermined
=================  =====================  ======================

"Undetermined": a spike of the pooled data that is neither a shift of the group means nor a
spike once they are removed.  With no displaced group every candidate is covariance.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import gammainc, gammaincc, gammaln, ndtri, ndtri_exp

from .knockoff import max_overlap_assignment
from .levels import MIN_CARRIED_COSINE

__all__ = [
    "VERDICTS",
    "PairVerdicts",
    "between_group_share",
    "chi2_deviate",
    "judge_pairs",
    "match_spikes",
    "shift_statistics",
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


def _welch_chi2(T: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, int]:
    """Welch's χ² of the group means per column, and its degrees of freedom."""
    groups = [g for g in np.unique(labels) if np.count_nonzero(labels == g) >= 2]
    if len(groups) < 2:
        return np.zeros(T.shape[1]), 1
    means = np.array([T[labels == g].mean(axis=0) for g in groups])
    prec = np.array(
        [
            np.count_nonzero(labels == g) / np.maximum(T[labels == g].var(axis=0, ddof=1), 1e-300)
            for g in groups
        ]
    )
    centre = (prec * means).sum(axis=0) / prec.sum(axis=0)
    return (prec * (means - centre) ** 2).sum(axis=0), len(groups) - 1


def shift_statistics(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """``shift_z`` of every pair: Welch's χ² of the group means as a normal deviate.

    Parameters
    ----------
    scores : (n, K) ndarray
    labels : (n,) int ndarray
        Groups (all 0: none).

    Returns
    -------
    (K,) ndarray
        ``N(0, 1)`` per pair under no shift along it (:func:`chi2_deviate`), so ``E z² = 1``;
        NaN with one group (there is no shift to measure).
    """
    T = np.asarray(scores, dtype=float)
    if labels.max(initial=0) == 0:
        return np.full(T.shape[1], np.nan)
    chi2, dof = _welch_chi2(T, labels)
    return chi2_deviate(chi2, dof)


def chi2_deviate(chi2: np.ndarray, dof: int) -> np.ndarray:
    """A ``χ²_dof`` statistic as the normal deviate of its upper-tail p-value, ``Φ⁻¹(1 − p)``.

    ``N(0, 1)`` under the null whatever ``dof``.  Far in the tail, where ``p`` underflows,
    ``log p`` comes from the asymptotic series of the incomplete gamma function.

    Examples
    --------
    >>> chi2_deviate(np.array([3.841459]), 1).round(3).tolist()  # the 5 % point of χ²_1
    [1.645]
    >>> float(chi2_deviate(np.array([1e4]), 1)[0]) > 99
    True
    """
    x = np.maximum(np.asarray(chi2, dtype=float), 0.0)
    a, y = dof / 2, x / 2
    p = gammaincc(a, y)
    z = np.empty_like(x)
    lower = p >= 0.5  # there the lower tail keeps the digits
    z[lower] = ndtri(np.maximum(gammainc(a, y[lower]), 1e-300))
    under = ~lower & (p < 1e-280)
    fine = ~lower & ~under
    z[fine] = -ndtri(p[fine])
    if np.any(under):
        yu = y[under]
        # log Q(a, y) = (a − 1) log y − y − log Γ(a) + log Σ_k (a−1)…(a−k) / y^k
        series, term = np.ones_like(yu), np.ones_like(yu)
        for k in range(1, 8):
            term = term * (a - k) / yu
            series = series + term
        z[under] = -ndtri_exp((a - 1) * np.log(yu) - yu - gammaln(a) + np.log(series))
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
