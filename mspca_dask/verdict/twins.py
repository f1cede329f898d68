"""Unimodal twins of a sample: its own distribution, smoothed until it has one mode (NumPy).

A twin column is drawn by Silverman's smoothed bootstrap at the *critical bandwidth*: the
smallest Gaussian-kernel bandwidth at which the column's kernel density has a single mode
(modes lower than :data:`~mspca_dask.verdict.levels.MODE_HEIGHT` of the highest, a few
samples in a long tail, are not counted), rescaled to the column's variance.  A Gaussian, a
skewed, a heavy-tailed or a flat column is already unimodal at a small bandwidth and keeps its
shape; separated groups need a bandwidth about as wide as their distance, and their twin is
one smooth skewed cloud (Silverman 1981, "Using kernel density estimates to investigate
multimodality", JRSS B 43:97-99).
"""

from __future__ import annotations

import numpy as np

from .levels import MODE_HEIGHT

__all__ = ["critical_bandwidth", "unimodal_twins"]

_GRID = 256
_STEPS = 16
#: Rows used to find a column's critical bandwidth (a bandwidth, not a statistic).
_ROWS = 2000


def _modes(x: np.ndarray, h: float, grid: np.ndarray) -> int:
    f = np.exp(-0.5 * ((grid[:, None] - x[None, :]) / h) ** 2).sum(axis=1)
    rises = np.diff(f) > 0
    peaks = np.flatnonzero(rises[:-1] & ~rises[1:]) + 1
    return int(np.count_nonzero(f[peaks] >= MODE_HEIGHT * f.max()))


def critical_bandwidth(x: np.ndarray) -> float:
    """The smallest bandwidth at which ``x``'s Gaussian kernel density has one mode.

    Parameters
    ----------
    x : (n,) ndarray

    Returns
    -------
    float
        Found by bisection on a log scale between 0.001 and 2 standard deviations.
    """
    x = np.asarray(x, dtype=float)
    if x.size > _ROWS:
        x = np.sort(x)[np.linspace(0, x.size - 1, _ROWS).astype(int)]  # its quantiles
    s = float(x.std())
    if s == 0:
        return 0.0
    grid = np.linspace(x.min(), x.max(), _GRID)
    lo, hi = 1e-3 * s, 2.0 * s
    for _ in range(_STEPS):
        mid = float(np.sqrt(lo * hi))
        if _modes(x, mid, grid) > 1:
            lo = mid
        else:
            hi = mid
    return hi


def unimodal_twins(
    T: np.ndarray, rng: np.random.Generator, bandwidths: np.ndarray | None = None
) -> np.ndarray:
    """One twin of the rows of ``T``: independent columns, each its own unimodal smoothing.

    Parameters
    ----------
    T : (n, k) ndarray
        Scores on uncorrelated axes (principal components).
    rng : numpy.random.Generator
    bandwidths : (k,) ndarray or None
        Each column's critical bandwidth (:func:`critical_bandwidth`; computed if None).

    Returns
    -------
    (n, k) ndarray
        Same mean and variance per column as ``T``.
    """
    n, k = T.shape
    if bandwidths is None:
        bandwidths = np.array([critical_bandwidth(T[:, j]) for j in range(k)])
    out = np.empty((n, k))
    for j in range(k):
        x, h = T[:, j], float(bandwidths[j])
        m, s = x.mean(), x.std()
        y = x[rng.integers(0, n, n)] + h * rng.standard_normal(n)
        out[:, j] = m + (y - m) / np.sqrt(1.0 + (h / s) ** 2 if s > 0 else 1.0)
    return out
