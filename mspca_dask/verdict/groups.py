"""The group test: are some samples displaced from the rest in candidate score space?

One statistic, one calibration:

* the statistic is the BIC gain of the best Gaussian mixture (groups added while BIC falls,
  for each covariance form: :func:`~.mixture.select_mixture`) over one Gaussian, on the
  candidates' scores standardised per column;
* its null distribution comes from *twins*: the scores are whitened and turned to their
  most independent axes (:func:`independent_axes`, FastICA), and each axis is made unimodal
  and drawn independently of the others (:mod:`~mspca_dask.verdict.twins`).  The null is
  a factor model: independent unimodal factors of any shape (Gaussian, skewed, heavy-tailed,
  flat) mixed linearly, as the eigenvectors of close spikes mix them; a skewed factor, a
  heavy-tailed one or a flat covariate is compared with its own kind, and the search over
  groups and directions is paid for by running it on every twin too;
* it is a Monte Carlo test at level ``α``: groups are declared when the data's gain exceeds
  that of all ``⌈1/α⌉ − 1`` twins (drawing stops at the first twin that reaches it).

When the test rejects, the groups are those of the data's mixture; group 0, the inliers, is
the group holding the pinned (reference) rows, else the largest.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .levels import MAX_GROUPS, MAX_TEST_ROWS, MIN_GROUP_ROWS
from .mixture import TOL_GROUPS, fit_mixture, select_mixture
from .twins import critical_bandwidth, unimodal_twins

__all__ = ["GroupFit", "fit_groups", "independent_axes"]


@dataclass(frozen=True)
class GroupFit:
    """The outcome of the group test on ``n`` rows.

    Attributes
    ----------
    labels : (n,) int ndarray
        Each row's group; 0 is the inliers' (every row when no groups were found).
    statistic : float
        BIC gain of the data's mixture over one Gaussian (0: one group is best).
    p_value : float
        Monte Carlo p-value against the twins (1 when the statistic is 0; a lower bound when
        drawing stopped early).
    n_twins : int
        Twins drawn.
    level : float
        The test's level ``α``.
    """

    labels: np.ndarray
    statistic: float
    p_value: float
    n_twins: int
    level: float

    @classmethod
    def none(cls, n: int, level: float) -> GroupFit:
        """No test run (no candidate): one group."""
        return cls(np.zeros(n, dtype=np.intp), 0.0, 1.0, 0, level)

    @property
    def n_groups(self) -> int:
        return int(self.labels.max()) + 1 if self.labels.size else 1

    @property
    def found(self) -> bool:
        """Whether displaced groups were declared."""
        return self.n_groups > 1

    def indicators(self, inliers: bool = False) -> np.ndarray:
        """(n, G − 1) float ndarray: membership of each displaced group; with ``inliers``,
        (n, G) with the inliers' column first."""
        first = 0 if inliers else 1
        return (self.labels[:, None] == np.arange(first, self.n_groups)[None, :]).astype(float)


def _gain(T: np.ndarray, pinned: np.ndarray | None) -> float:
    best = select_mixture(T, MAX_GROUPS, pinned=pinned)
    if best.n_groups == 1:
        return 0.0
    one = fit_mixture(T, 1, pinned=pinned)
    n = T.shape[0]
    return max(0.0, one.bic(n) - best.bic(n))


def _twin_gain(
    Ts: np.ndarray, pin: np.ndarray | None, bandwidths: np.ndarray, seed: int, i: int
) -> float:
    # twin i has its own stream: the outcome is the same however many are drawn at once
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(i,)))
    return _gain(unimodal_twins(Ts, rng, bandwidths), pin)


def _first_twin_reaching(
    Ts: np.ndarray,
    pin: np.ndarray | None,
    bandwidths: np.ndarray,
    statistic: float,
    n_twins: int,
    seed: int,
) -> int:
    """The number (from 1) of the first twin whose gain reaches ``statistic``; 0 if none.

    Twins are drawn one after another and drawing stops at the first that reaches the data.
    (Threads drawing twins side by side gained nothing: an EM step is many small NumPy
    calls, bound by the interpreter, and its products are too small for BLAS threads.)
    """
    for i in range(1, n_twins + 1):
        if _twin_gain(Ts, pin, bandwidths, seed, i) >= statistic:
            return i
    return 0


def independent_axes(T: np.ndarray, max_iter: int = 200, tol: float = 1e-6) -> np.ndarray:
    """(k, k) ``R``: the columns of ``T R`` are uncorrelated, of unit variance and as
    independent as FastICA makes them.

    Symmetric whitening ``C^{-1/2}`` (the axes stay where they are when the columns are
    already uncorrelated), then symmetric FastICA with the log-cosh contrast (Hyvärinen 1999)
    from the identity: independent non-Gaussian factors that the eigenvectors have mixed are
    turned back to their own axes; Gaussian columns stay as they are.

    Parameters
    ----------
    T : (n, k) ndarray
        Centred scores.
    """
    n, k = T.shape
    w, V = np.linalg.eigh(np.atleast_2d(np.cov(T, rowvar=False)))
    A = (V / np.sqrt(np.maximum(w, 1e-12 * max(float(w.max()), 1e-300)))) @ V.T
    Z = T @ A
    Q = np.eye(k)
    for _ in range(max_iter):
        g = np.tanh(Z @ Q)
        step = Z.T @ g / n - Q * (1.0 - g * g).mean(axis=0)
        u, _s, vt = np.linalg.svd(step)
        new = u @ vt  # symmetric decorrelation: the nearest orthogonal matrix
        done = float(np.max(np.abs(np.abs(np.sum(new * Q, axis=0)) - 1.0))) < tol
        Q = new
        if done:
            break
    return A @ Q


def fit_groups(
    scores: np.ndarray,
    *,
    pinned: np.ndarray | None = None,
    level: float = 0.05,
    seed: int = 0,
) -> GroupFit:
    """Test for displaced groups among the rows of ``scores`` and return them.

    Parameters
    ----------
    scores : (n, k) ndarray
        Sample scores on the ``k`` candidate eigenvectors.
    pinned : (n,) bool ndarray or None
        Rows known to be inliers (a reference): held in group 0 in the data and in the twins.
    level : float
        ``α``; ``⌈1/α⌉ − 1`` twins are drawn.
    seed : int
        Seeds the subsample and the twins.

    Returns
    -------
    GroupFit
    """
    T = np.asarray(scores, dtype=float)
    n, k = T.shape
    if n == 0 or k == 0:
        return GroupFit.none(n, level)
    # rows in a canonical order (by their first score): the outcome does not depend on the
    # order the samples came in
    order = np.argsort(T[:, 0], kind="stable")
    fitted = _fit_sorted(
        T[order], None if pinned is None else np.asarray(pinned, bool)[order], level, seed
    )
    labels = np.empty(n, dtype=np.intp)
    labels[order] = fitted.labels
    return GroupFit(labels, fitted.statistic, fitted.p_value, fitted.n_twins, level)


def _fit_sorted(T: np.ndarray, pinned: np.ndarray | None, level: float, seed: int) -> GroupFit:
    n, k = T.shape
    sd = T.std(axis=0)
    S = (T - T.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
    rng = np.random.default_rng(seed)
    rows = np.arange(n)
    if n > MAX_TEST_ROWS:
        rows = np.sort(rng.choice(n, MAX_TEST_ROWS, replace=False))
    # the test, the twins and the groups live on the independent axes (a linear map: the
    # mixture's fit is the same up to its starts)
    S = S @ independent_axes(S[rows])
    Ts = S[rows]
    has_pins = pinned is not None and bool(np.any(pinned))
    pin = pinned[rows] if has_pins and pinned is not None else None
    n_twins = max(1, math.ceil(1.0 / level - 1e-9) - 1)
    none = GroupFit.none(n, level)
    if Ts.shape[0] < 2 * MIN_GROUP_ROWS:
        return none
    statistic = _gain(Ts, pin)
    if statistic <= 0:
        return none
    bandwidths = np.array([critical_bandwidth(Ts[:, j]) for j in range(k)])
    reached = _first_twin_reaching(Ts, pin, bandwidths, statistic, n_twins, seed)
    if reached:
        # at least one twin of ``reached`` reached the data: p >= 2 / (reached + 1) > α
        return GroupFit(none.labels, statistic, 2.0 / (reached + 1), reached, level)
    # the test's statistic is computed as the twins' is; the groups come from a mixture
    # fitted to convergence (a stop short of it can merge two groups)
    mix = select_mixture(Ts, MAX_GROUPS, pinned=pin, tol=TOL_GROUPS)
    labels = mix.predict(S)
    if has_pins and pinned is not None:
        labels[pinned] = 0
        inliers = 0  # the mixture holds the pinned rows in group 0
    else:
        inliers = int(np.argmax(np.bincount(labels, minlength=mix.n_groups)))
    # group 0 = the inliers, then the others by size; a group too small to have a mean and a
    # variance of its own joins the inliers
    counts = np.bincount(labels, minlength=mix.n_groups)
    others = [g for g in np.argsort(-counts, kind="stable") if g != inliers]
    new = np.zeros(n, dtype=np.intp)
    for i, g in enumerate((g for g in others if counts[g] >= MIN_GROUP_ROWS), start=1):
        new[labels == g] = i
    return GroupFit(new, statistic, 1.0 / (n_twins + 1), n_twins, level)
