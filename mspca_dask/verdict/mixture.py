"""Gaussian mixtures in score space, fitted by EM (NumPy only).

Each group has its own mean and full covariance (batches and populations differ in spread).
Rows may be *pinned* to group 0 (a reference known to be inliers): their responsibilities are
fixed, so group 0 is the inliers' group by construction.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Mixture", "fit_mixture", "select_mixture"]

#: EM stops when the mean log-likelihood per row improves by less than this.
_TOL = 1e-5
_MAX_ITER = 200
#: Covariance floor, as a share of the data's variance per column (keeps EM off singular fits).
_FLOOR = 1e-4


@dataclass(frozen=True)
class Mixture:
    """A fitted mixture: ``G`` groups in ``k`` dimensions over ``n`` rows."""

    weights: np.ndarray  # (G,)
    means: np.ndarray  # (G, k)
    covariances: np.ndarray  # (G, k, k)
    responsibilities: np.ndarray  # (n, G)
    loglik: float  # total log-likelihood
    tied: bool = False  # one covariance for every group

    @property
    def n_groups(self) -> int:
        return int(self.weights.size)

    @property
    def n_parameters(self) -> int:
        G, k = self.means.shape
        return G * k + (1 if self.tied else G) * k * (k + 1) // 2 + G - 1

    def bic(self, n: int) -> float:
        return -2.0 * self.loglik + self.n_parameters * np.log(n)

    @property
    def labels(self) -> np.ndarray:
        """(n,) the most likely group of each fitted row."""
        return np.argmax(self.responsibilities, axis=1)

    def predict(self, T: np.ndarray) -> np.ndarray:
        """(m,) the most likely group of each row of ``T`` (m, k)."""
        logp = _log_densities(T, self.means, self.covariances)
        return np.argmax(logp + np.log(np.maximum(self.weights, 1e-300)), axis=1)


def _log_densities(T: np.ndarray, means: np.ndarray, covs: np.ndarray) -> np.ndarray:
    """(n, G) log-density of every row under every group."""
    k = T.shape[1]
    L = np.linalg.cholesky(covs)  # (G, k, k)
    Linv = np.linalg.inv(L)
    D = T[None, :, :] - means[:, None, :]  # (G, n, k)
    z = D @ np.swapaxes(Linv, 1, 2)
    logdet = np.sum(np.log(np.diagonal(L, axis1=1, axis2=2)), axis=1)  # (G,)
    return (-0.5 * np.sum(z * z, axis=2) - logdet[:, None] - 0.5 * k * np.log(2 * np.pi)).T


def _kmeans_pp(T: np.ndarray, G: int, rng: np.random.Generator) -> np.ndarray:
    """k-means++ seeds followed by ten Lloyd steps: (n,) initial labels."""
    n = T.shape[0]
    centres = [T[rng.integers(n)]]
    d2 = np.sum((T - centres[0]) ** 2, axis=1)
    for _ in range(1, G):
        p = d2 / d2.sum() if d2.sum() > 0 else np.full(n, 1.0 / n)
        centres.append(T[rng.choice(n, p=p)])
        d2 = np.minimum(d2, np.sum((T - centres[-1]) ** 2, axis=1))
    C = np.array(centres)
    labels = np.zeros(n, dtype=np.intp)
    for _ in range(10):
        labels = np.argmin(((T[:, None, :] - C[None]) ** 2).sum(axis=2), axis=1)
        C = np.array(
            [T[labels == g].mean(axis=0) if np.any(labels == g) else C[g] for g in range(G)]
        )
    return labels


def fit_mixture(
    T: np.ndarray,
    n_groups: int,
    *,
    pinned: np.ndarray | None = None,
    seed: int = 0,
    tied: bool = False,
) -> Mixture:
    """Fit a ``n_groups``-group Gaussian mixture to the rows of ``T`` by EM.

    Parameters
    ----------
    T : (n, k) ndarray
        Scores (rows are samples).
    n_groups : int
        ``G``.
    pinned : (n,) bool ndarray or None
        Rows held in group 0 throughout.
    seed : int
        Seeds the k-means++ start.
    tied : bool
        One covariance shared by every group (groups that differ by their means only).
    """
    n, k = T.shape
    floor = _FLOOR * np.diag(np.atleast_2d(np.cov(T, rowvar=False))).mean() * np.eye(k)
    rng = np.random.default_rng(seed)
    if n_groups == 1:
        R = np.ones((n, 1))
    else:
        labels = _kmeans_pp(T, n_groups, rng)
        if pinned is not None and np.any(pinned):
            # the pinned rows' k-means cell becomes group 0
            g0 = np.bincount(labels[pinned], minlength=n_groups).argmax()
            labels = np.where(labels == g0, 0, np.where(labels == 0, g0, labels))
            labels[pinned] = 0
        R = np.eye(n_groups)[labels]
    previous = -np.inf
    loglik = -np.inf
    for _ in range(_MAX_ITER if n_groups > 1 else 1):
        nk = R.sum(axis=0) + 1e-12
        weights = nk / n
        means = (R.T @ T) / nk[:, None]
        D = T[None, :, :] - means[:, None, :]
        covs = np.swapaxes(D * R.T[:, :, None], 1, 2) @ D / nk[:, None, None] + floor
        if tied:
            covs[:] = np.tensordot(weights, covs, axes=1)
        logp = _log_densities(T, means, covs) + np.log(np.maximum(weights, 1e-300))
        top = logp.max(axis=1, keepdims=True)
        norm = top[:, 0] + np.log(np.exp(logp - top).sum(axis=1))
        loglik = float(norm.sum())
        R = np.exp(logp - norm[:, None])
        if pinned is not None and np.any(pinned):
            R[pinned] = 0.0
            R[pinned, 0] = 1.0
        if loglik - previous < _TOL * n:
            break
        previous = loglik
    return Mixture(weights, means, covs, R, loglik, tied)


def select_mixture(
    T: np.ndarray, max_groups: int, *, pinned: np.ndarray | None = None, seed: int = 0
) -> Mixture:
    """The mixture of 1, 2, ... groups that BIC prefers, adding groups while BIC falls.

    At each number of groups both forms are fitted, groups with their own covariances and
    groups sharing one (they differ by their means only, the sparser model a mean shift
    is), and the better by BIC is kept.  Stopping at the first rise makes the statistic cheap
    on data with no group and is applied to the data and to its twins alike.
    """
    n = T.shape[0]
    best = fit_mixture(T, 1, pinned=pinned, seed=seed)
    for G in range(2, max_groups + 1):
        cand = min(
            (fit_mixture(T, G, pinned=pinned, seed=seed, tied=tied) for tied in (True, False)),
            key=lambda m: m.bic(n),
        )
        if cand.bic(n) >= best.bic(n):
            break
        best = cand
    return best
