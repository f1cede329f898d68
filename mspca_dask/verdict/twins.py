"""Unimodal twins of a sample: its own distribution, smoothed until it has one mode (NumPy).

A twin column is drawn by Silverman's smoothed bootstrap at the *critical bandwidth*: the
smallest Gaussian-kernel bandwidth at which the column's kernel density has a single mode
(a bump within the estimate's own sampling error, :data:`~mspca_dask.verdict.levels.MODE_Z`,
or holding fewer rows than the smallest group, :data:`~mspca_dask.verdict.levels.MIN_GROUP_ROWS`,
is not a mode: a few samples in a long tail, the ripples of a flat top), rescaled to the
column's variance.  A Gaussian, a skewed, a heavy-tailed or a flat column is already
unimodal at a small bandwidth and keeps its shape; separated groups need a bandwidth about as
wide as their distance, and their twin is one smooth skewed cloud (Silverman 1981, "Using
kernel density estimates to investigate multimodality", JRSS B 43:97-99).

Twin *rows* (:func:`unimodal_rows`) are the same smoothed bootstrap drawn on whole rows: the
rows keep their joint shape, and the kernel is as wide as it must be along the directions a
test looks (:func:`axis_kernel`, :func:`cut_width`, :func:`row_kernel`).
"""

from __future__ import annotations

import numpy as np

from .levels import MIN_GROUP_ROWS, MODE_Z

__all__ = [
    "axis_kernel",
    "critical_bandwidth",
    "cut_width",
    "inverse_sqrt",
    "row_kernel",
    "unimodal_rows",
    "unimodal_twins",
]

#: Points of the density's grid (linear binning: its error is far below the floor bandwidth).
_GRID = 4096
_STEPS = 24
#: Rows used to find a column's critical bandwidth (a bandwidth, not a statistic).
_ROWS = 2000


def _binned(x: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """(grid.size,) linear-binning weights of ``x`` on an even ``grid`` (they sum to ``x.size``)."""
    step = grid[1] - grid[0]
    pos = (x - grid[0]) / step
    left = np.clip(np.floor(pos).astype(np.intp), 0, grid.size - 2)
    frac = pos - left
    return np.bincount(left, 1.0 - frac, grid.size) + np.bincount(left + 1, frac, grid.size)


def _convolve_same(a: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """``np.convolve(a, kernel, mode="same")`` by FFT: a wide kernel on the whole grid costs
    O(grid · kernel) directly (NumPy's FFT: ``scipy.signal`` takes longer to import than a
    small fit takes)."""
    full = a.size + kernel.size - 1
    size = 1 << (full - 1).bit_length()
    out = np.fft.irfft(np.fft.rfft(a, size) * np.fft.rfft(kernel, size), size)
    start = (kernel.size - 1) // 2
    return out[start : start + a.size]


def _modes(counts: np.ndarray, n: int, h: float, grid: np.ndarray) -> int:
    """Modes of the Gaussian kernel density at bandwidth ``h`` of ``n`` points binned into
    ``counts`` on ``grid`` that stand out of its sampling error: a bump counts when it rises
    above the higher of its two neighbouring valleys (a grid end when there is none) by more
    than ``MODE_Z`` standard errors of the difference (the estimate's variance is
    ``f R(K) / (n h)``, ``R(K) = 1/(2√π)``)."""
    step = grid[1] - grid[0]
    reach = min(grid.size - 1, int(np.ceil(5.0 * h / step)))
    u = np.arange(-reach, reach + 1) * step / h
    f = _convolve_same(counts, np.exp(-0.5 * u * u)) / (n * h * np.sqrt(2 * np.pi))
    # FFT rounding leaves ripples of ~1e-16 where there are no rows: they are no bumps
    f[f < 1e-12 * float(f.max())] = 0.0
    var = f / (n * h * 2 * np.sqrt(np.pi))
    rises = np.diff(f) > 0
    peaks = np.flatnonzero(rises[:-1] & ~rises[1:]) + 1
    if peaks.size <= 1:
        return int(peaks.size) or 1
    valleys = np.flatnonzero(~rises[:-1] & rises[1:]) + 1
    count = 0
    for p in peaks:
        left = valleys[valleys < p]
        right = valleys[valleys > p]
        lv = left[-1] if left.size else 0
        rv = right[0] if right.size else f.size - 1
        v = lv if f[lv] >= f[rv] else rv
        # a bump holding fewer rows than the smallest group is no group's mode
        rows = float(f[lv : rv + 1].sum()) * step * n
        if f[p] - f[v] > MODE_Z * np.sqrt(var[p] + var[v]) and rows >= MIN_GROUP_ROWS:
            count += 1
    return max(count, 1)


def critical_bandwidth(x: np.ndarray) -> float:
    """The smallest bandwidth above which ``x``'s Gaussian kernel density has one mode.

    Parameters
    ----------
    x : (n,) ndarray

    Returns
    -------
    float
        Searched downwards on a log grid from 2 standard deviations to a quarter of
        Silverman's rule-of-thumb bandwidth (below it the estimate is too noisy for any bump
        to count): the last bandwidth before the first multimodal one.
    """
    x = np.asarray(x, dtype=float)
    if x.size > _ROWS:
        x = np.sort(x)[np.linspace(0, x.size - 1, _ROWS).astype(int)]  # its quantiles
    s = float(x.std())
    if not s > 1e-12 * float(np.max(np.abs(x))):  # no spread beyond rounding (or not finite)
        return 0.0
    iqr = float(np.subtract(*np.percentile(x, [75, 25])))
    floor = 0.25 * 0.9 * min(s, iqr / 1.34 if iqr > 0 else s) * x.size**-0.2
    hs = np.geomspace(2.0 * s, floor, _STEPS)
    # past both ends by three of the largest bandwidths: a grid end is no valley
    grid = np.linspace(x.min() - 6 * s, x.max() + 6 * s, _GRID)
    counts = _binned(x, grid)
    previous = hs[0]
    for h in hs:
        if _modes(counts, x.size, float(h), grid) > 1:
            return float(previous)
        previous = h
    return float(floor)


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


def axis_kernel(D: np.ndarray, axes: np.ndarray) -> np.ndarray:
    """(k, m) a kernel's square root that makes the rows of ``D`` unimodal along each axis.

    Along each axis (a column of ``axes``, any length) the kernel is as wide as the critical
    bandwidth of the rows' projection on it (:func:`critical_bandwidth`), and nothing across
    it: a skewed or curved shape keeps its edges.
    """
    columns = np.zeros(axes.shape)
    for j in range(axes.shape[1]):
        norm = float(np.linalg.norm(axes[:, j]))
        if norm > 0:
            columns[:, j] = critical_bandwidth(D @ (axes[:, j] / norm)) * axes[:, j] / norm
    return columns


def cut_width(D: np.ndarray, cuts: np.ndarray) -> float:
    """The widest critical bandwidth of the rows of ``D`` along ``cuts`` (columns), each in
    units of the rows' spread along it (0 without a cut)."""
    C = np.atleast_2d(np.cov(D, rowvar=False, bias=True))
    width = 0.0
    for c in cuts.T:
        spread = float(c @ C @ c)
        if spread > 0:
            width = max(width, critical_bandwidth(D @ (c / np.sqrt(spread))))
    return width


def row_kernel(D: np.ndarray, columns: np.ndarray, cut: float) -> tuple[np.ndarray, np.ndarray]:
    """The smoothing kernel of a smoothed bootstrap of the rows of ``D``, and the map that
    restores their covariance.

    Parameters
    ----------
    D : (n, k) ndarray
        Rows about their mean.
    columns : (k, m) ndarray
        Per-axis part of the kernel (:func:`axis_kernel`).
    cut : float
        Width of its isotropic part, a multiple ``cut²`` of the rows' covariance
        (:func:`cut_width`): every cluster the rows hold is blurred as much as the one a cut
        sets apart.

    Returns
    -------
    root : (k, m + k) ndarray
        The kernel's covariance is ``root rootᵀ``.
    back : (k, k) ndarray
        ``(D's covariance)^{1/2} (D's covariance + kernel)^{-1/2}``: rows smoothed by the
        kernel, times ``back``, have ``D``'s covariance.
    """
    C = np.atleast_2d(np.cov(D, rowvar=False, bias=True))
    half = _sqrt(C)
    root = np.column_stack([columns, cut * half])
    return root, half @ inverse_sqrt(C + root @ root.T)


def _sqrt(A: np.ndarray) -> np.ndarray:
    w, V = np.linalg.eigh(A)
    return (V * np.sqrt(np.maximum(w, 0.0))) @ V.T


def inverse_sqrt(A: np.ndarray) -> np.ndarray:
    """``A^{-1/2}`` of a symmetric positive semi-definite ``(k, k)`` matrix, its eigenvalues
    floored at ``1e-12`` of the largest (a direction without spread is not blown up)."""
    w, V = np.linalg.eigh(A)
    floor = 1e-12 * max(float(w.max()), 1e-300)
    return (V / np.sqrt(np.maximum(w, floor))) @ V.T


def unimodal_rows(
    D: np.ndarray, rng: np.random.Generator, root: np.ndarray, back: np.ndarray
) -> np.ndarray:
    """One twin of the rows of ``D``: Silverman's smoothed bootstrap of whole rows.

    Each row is a row of ``D`` drawn with replacement plus a Gaussian step of covariance
    ``root rootᵀ``, mapped by ``back`` to ``D``'s covariance (:func:`row_kernel`).  The rows
    keep their joint shape (skewed, curved, correlated); they are unimodal along the
    kernel's directions.

    Parameters
    ----------
    D : (n, k) ndarray
        Rows about their mean.
    rng : numpy.random.Generator
    root, back : ndarray
        From :func:`row_kernel`.

    Returns
    -------
    (n, k) ndarray
    """
    n = D.shape[0]
    steps = rng.standard_normal((n, root.shape[1])) @ root.T
    return (D[rng.integers(0, n, n)] + steps) @ back.T
