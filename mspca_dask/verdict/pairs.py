"""Per eigenpair: the shift between groups, the inliers' variance, and the verdict (NumPy/SciPy).

For each candidate pair ``j`` (scores ``t_j``, groups from :mod:`~mspca_dask.verdict.groups`):

* ``shift_z`` — the between-group shift along ``j``: Welch's χ² of the group means with
  ``G − 1`` degrees of freedom, as the normal deviate of its p-value: ``N(0, 1)`` under "no
  shift along ``j``", so ``E z² ≈ 1`` on covariance pairs (NaN with no displaced group).
* ``within_z`` — the inliers' variance along ``j`` against the bulk level ``b``:
  ``(w₀ − b) / SE(w₀)``.  A covariance spike of the inliers has ``w₀`` above ``b``; a pure
  mean shift leaves only noise within the inliers, below it.

With ``z* = Φ⁻¹(1 − α/k)`` (one-sided, Bonferroni over the ``k`` candidates):

=================  ======================  ==========================  ==================
                   ``within_z ≥ z*``       ``|within_z| < z*``         ``within_z ≤ −z*``
=================  ======================  ==========================  ==================
``shift_z ≥ z*``   mixed                   undetermined                mean shift
``shift_z < z*``   covariance              covariance                  undetermined
=================  ======================  ==========================  ==================

The last cell is a spike of the displaced groups' own spread (a noisier batch, a more diverse
population): not the inliers' covariance, not a shift of their means.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import gammainc, gammaincc, gammaln, ndtri, ndtri_exp

__all__ = [
    "VERDICTS",
    "PairVerdicts",
    "between_group_share",
    "chi2_deviate",
    "judge_pairs",
    "shift_statistics",
]

#: The verdicts of an eigenpair.
VERDICTS = ("covariance", "mean shift", "mixed", "undetermined", "bulk")


@dataclass(frozen=True)
class PairVerdicts:
    """The verdict of each of ``K`` eigenpairs and the statistics behind it."""

    verdicts: np.ndarray  # (K,) str, one of VERDICTS
    shift_z: np.ndarray  # (K,)
    within: np.ndarray  # (K,) the inliers' score variance
    within_z: np.ndarray  # (K,)
    share: np.ndarray  # (K,) share of the pair's variance between the groups (η²)
    reasons: np.ndarray  # (K,) str
    z_critical: float

    @property
    def stable(self) -> np.ndarray:
        """Covariance structure of the inliers: "covariance" or "mixed"."""
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


def judge_pairs(
    scores: np.ndarray,
    candidate: np.ndarray,
    labels: np.ndarray,
    *,
    bulk: float,
    level: float,
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
    bulk : float
        The bulk level ``b``: the variance a direction fitted to the noise reaches.
    level : float
        ``α``.
    """
    T = np.asarray(scores, dtype=float)
    K = T.shape[1]
    cand = np.asarray(candidate, dtype=bool)
    k = max(1, int(np.count_nonzero(cand)))
    zc = float(ndtri(1.0 - level / k))
    shift_z = shift_statistics(T, labels)
    grouped = labels.max(initial=0) > 0
    inl = T[labels == 0]
    w0 = inl.var(axis=0)
    m4 = ((inl - inl.mean(axis=0)) ** 4).mean(axis=0)
    se = np.sqrt(np.maximum(m4 - w0**2, 1e-300) / max(inl.shape[0], 1))
    within_z = (w0 - bulk) / se
    share = between_group_share(T, labels)
    verdicts = np.full(K, "bulk", dtype=object)
    reasons = np.full(K, "", dtype=object)
    for j in range(K):
        stats = (
            f"shift z {shift_z[j]:.2f}, inliers' variance {w0[j]:.4g} against the bulk "
            f"level {bulk:.4g} (z {within_z[j]:.2f}), {100 * share[j]:.0f} % between groups; "
            f"critical z {zc:.2f}"
        )
        if not cand[j]:
            verdicts[j] = "bulk"
            reasons[j] = "bulk: not above the bulk edge"
            continue
        if not grouped:
            verdicts[j] = "covariance"
            reasons[j] = "covariance: no displaced group (the group test did not reject)"
        elif shift_z[j] >= zc:
            if within_z[j] >= zc:
                verdicts[j] = "mixed"
                reasons[j] = "mixed: groups shifted along it and a spike within the inliers; "
            elif within_z[j] <= -zc:
                verdicts[j] = "mean shift"
                reasons[j] = "mean shift: groups shifted along it, only noise within the inliers; "
            else:
                verdicts[j] = "undetermined"
                reasons[j] = (
                    "undetermined: groups shifted along it; whether a spike remains within the "
                    "inliers cannot be told from the bulk; "
                )
            reasons[j] += stats
        elif within_z[j] <= -zc:
            verdicts[j] = "undetermined"
            reasons[j] = (
                "undetermined: not shifted, and no spike within the inliers (the displaced "
                "groups' own spread); " + stats
            )
        else:
            verdicts[j] = "covariance"
            reasons[j] = "covariance: not shifted between the groups; " + stats
    return PairVerdicts(verdicts, shift_z, w0, within_z, share, reasons, zc)
