"""The one-sided Mann–Whitney rank test, NumPy and ``scipy.special`` only.

The same test as ``scipy.stats.mannwhitneyu(x, y, alternative="greater")`` with its default
``method="auto"``: the exact null distribution of ``U`` when either sample has at most eight
values and there are no ties, else the normal approximation with the tie and continuity
corrections.  Kept here because importing ``scipy.stats`` takes longer than most fits'
verdicts.
"""

from __future__ import annotations

import numpy as np
from scipy.special import binom, ndtr

__all__ = ["mann_whitney_greater", "u_distribution"]

#: Largest sample, on either side, for which the exact distribution of ``U`` is used (when
#: there are no ties): as ``scipy.stats.mannwhitneyu``'s ``method="auto"``.
EXACT_MAX = 8


def u_distribution(m: int, n: int) -> np.ndarray:
    """Null probabilities of ``U = 0, 1, …, m n`` for samples of ``m`` and ``n`` values.

    The counts are the coefficients of the Gaussian binomial ``[m + n choose m]_q =
    ∏_{i ≤ m} (1 − q^{n+i}) / (1 − q^i)``, built one factor at a time (every partial product
    is a polynomial with non-negative coefficients).

    Returns
    -------
    (m n + 1,) ndarray

    Examples
    --------
    >>> (u_distribution(2, 2) * 6).round().astype(int).tolist()
    [1, 1, 2, 1, 1]
    """
    m, n = min(m, n), max(m, n)
    counts = np.zeros(m * n + 1)
    counts[0] = 1.0
    top = 0  # degree of the partial product
    for i in range(1, m + 1):
        grown = top + n
        counts[n + i : grown + 1] -= counts[: grown + 1 - n - i]  # × (1 − q^{n+i})
        for r in range(i):  # ÷ (1 − q^i): running sums along each residue class mod i
            np.cumsum(counts[r : grown + 1 : i], out=counts[r : grown + 1 : i])
        top = grown
    return counts / binom(m + n, m)


def mann_whitney_greater(x: np.ndarray, y: np.ndarray) -> float:
    """p-value of the one-sided rank test that ``x`` tends to be larger than ``y``.

    Parameters
    ----------
    x : (m,) ndarray
    y : (n,) ndarray
        Finite values.

    Returns
    -------
    float

    Examples
    --------
    >>> round(mann_whitney_greater(np.array([3.0, 4.0, 5.0]), np.array([0.0, 1.0, 2.0])), 4)
    0.05
    """
    x, y = np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()
    m, n = x.size, y.size
    both = np.concatenate([x, y])
    _values, inverse, ties = np.unique(both, return_inverse=True, return_counts=True)
    average = np.cumsum(ties) - (ties - 1) / 2.0  # each distinct value's mean rank
    U = float(average[inverse[:m]].sum()) - m * (m + 1) / 2.0
    if min(m, n) <= EXACT_MAX and not np.any(ties > 1):
        pmf = u_distribution(m, n)
        return float(np.clip(pmf[int(round(U)) :].sum(), 0.0, 1.0))
    N = m + n
    t = ties.astype(float)
    spread = np.sqrt(m * n / 12.0 * ((N + 1) - float(np.sum(t**3 - t)) / (N * (N - 1))))
    if spread == 0.0:
        return 1.0
    return float(np.clip(ndtr(-(U - m * n / 2.0 - 0.5) / spread), 0.0, 1.0))
