"""Robust inlier location in the space of the leading scores (pure NumPy/scikit-learn).

Why not the sample mean: the knockoff moves a mean-shift eigenvalue only through the overlap
of its membership ``γ'`` with the contamination's membership ``γ``.  Subtracting the sample
mean turns ``γ`` into ``γ − π₁1``, orthogonal to ``1`` and to any random ``γ'``, and the
mean-shift eigenvalue no longer moves (in the paper's mixture it went 5.964 → 5.964 after
the knockoff, judged stable — wrong — against 6.148 → 5.835 uncentred).  The inliers' own mean
keeps ``γ`` intact.  A shifted minority is, by construction, displaced along the leading
eigenvectors, so robust distances in the low-dimensional score space find it cheaply.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

__all__ = [
    "robust_inlier_weights",
    "MCD_MAX_SAMPLES",
    "CandidateLocation",
    "candidate_location",
    "residual_groups",
    "groups_outside",
    "split_groups",
    "density_groups",
    "mixture_evidence",
    "two_gaussians",
    "gaussian_mixture",
]

#: Largest number of samples the MCD is fitted to; larger score matrices are subsampled (rows
#: drawn at random, seeded) for the fit, and every sample's distance is then taken to that
#: fit.  scikit-learn's ``MinCovDet`` costs about 0.5 ms per sample (measured: 5 s at
#: n = 10 000, 77 s at n = 100 000, k = 2), so fitting it to all samples made the default
#: ``location="auto"`` the slowest step of an out-of-core fit; the location and scatter of
#: the majority of k ≤ K scores are estimated well from a few thousand of them.
MCD_MAX_SAMPLES = 4000


def _score_columns(scores: np.ndarray) -> np.ndarray:
    """``scores`` as a float ``(n_samples, k)`` array (one direction: ``(n_samples, 1)``)."""
    T = np.asarray(scores, dtype=float)
    return T[:, None] if T.ndim == 1 else T


def _with_columns(groups: np.ndarray, new: list[np.ndarray]) -> np.ndarray:
    """``groups`` followed by the indicator columns ``new`` (``groups`` itself when none)."""
    return np.column_stack([groups, *new]).astype(float) if new else groups


def robust_inlier_weights(
    scores: np.ndarray, *, quantile: float = 0.975, random_state: int = 0
) -> np.ndarray:
    """Weights (0 or 1) marking the samples that are inliers in score space.

    The Minimum Covariance Determinant estimator (Rousseeuw & Van Driessen 1999, as in
    scikit-learn's ``MinCovDet``) gives a location and scatter of the majority that a
    minority of up to half the samples cannot drag; samples whose squared robust Mahalanobis
    distance exceeds the ``quantile`` of ``χ²_k`` are outliers.

    Parameters
    ----------
    scores : (n_samples, k) ndarray
        Sample scores on the ``k`` leading eigenvectors of the mean-centred data.
    quantile : float
        Cut-off quantile of the χ² distribution.
    random_state : int
        Seed of MCD's random subsets and of the subsample of rows it is fitted to when there
        are more than :data:`MCD_MAX_SAMPLES` (fixed: the location must be reproducible).

    Returns
    -------
    weights : (n_samples,) ndarray of float
        1.0 for inliers, 0.0 for outliers.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> t = rng.standard_normal((200, 2)); t[:20, 0] += 8
    >>> w = robust_inlier_weights(t)
    >>> bool(w[:20].sum() == 0), bool(w[20:].mean() > 0.9)
    (True, True)
    """
    from sklearn.covariance import MinCovDet

    T = _score_columns(scores)
    n, k = T.shape
    if n <= k + 1 or k == 0:
        return np.ones(n)
    with warnings.catch_warnings():
        # MCD warns when the support's covariance is near singular; the distances are still
        # the best available ranking and the fallback below covers total failure.
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", UserWarning)
        try:
            fit_rows = T
            if n > MCD_MAX_SAMPLES:
                rng = np.random.default_rng(random_state)
                fit_rows = T[np.sort(rng.choice(n, size=MCD_MAX_SAMPLES, replace=False))]
            mcd = MinCovDet(random_state=random_state).fit(fit_rows)
            d2 = mcd.mahalanobis(T)
        except (ValueError, np.linalg.LinAlgError):
            med = np.median(T, axis=0)
            mad = 1.4826 * np.median(np.abs(T - med), axis=0)
            mad[mad == 0] = 1.0
            d2 = np.sum(((T - med) / mad) ** 2, axis=1)
    from scipy import stats  # here: scipy.stats takes 0.3 s to import, and few fits get here

    cut = stats.chi2.ppf(quantile, df=k)
    w = (d2 <= cut).astype(float)
    if w.sum() < max(2, n // 2):  # never keep fewer than half: MCD's breakdown point
        order = np.argsort(d2)
        w = np.zeros(n)
        w[order[: max(2, (n + 1) // 2)]] = 1.0
    return w


# ---------------------------------------------------------------------------------------------
# Per-candidate location (the default of ``fit(location="auto")``)
# ---------------------------------------------------------------------------------------------
#
# Why per candidate: with a global knockoff a pair moves only through its eigenvector's overlap
# with ``x̄ − μ``, so *where μ sits along each candidate eigenvector* decides the verdict.  Along
# one eigenvector the n scores are a 1-D sample: a mixture there (a density gap, or a
# two-component fit clearly better than any unimodal shape) means the inliers are its main
# group; a unimodal sample means no shift along it, and the sample mean is the right centre
# (it leaves that pair exactly where it is).  MCD in the joint score space instead trims the
# tails of skewed covariance PCs, cannot separate a cluster that overlaps the inliers sample by
# sample at large n, and breaks down past ~25 % contamination.

#: Largest number of scores the 1-D density and mixture tests are fitted to (rows drawn at
#: random, seeded); group means are then taken over every sample.  BIC on all of a very large
#: sample rejects any slightly misspecified unimodal shape, and the fits stay cheap.
TEST_MAX_SAMPLES = 4000
#: BIC margin by which a two-component mixture must beat a Gaussian and a Johnson SU (and, when
#: a group is confirmed along its own displacement, an exponentially modified Gaussian).
BIC_MARGIN = 2.0
#: Smallest weight of the minor mixture component (and smallest mass of a density group).
MIN_GROUP_WEIGHT = 0.05
#: Smallest mass of a separated density group (a clear gap needs less mass than a mixture fit).
MIN_DENSITY_WEIGHT = 0.02
#: Smallest persistence of a density mode, relative to the highest mode.
MIN_PERSISTENCE = 0.01
#: How many standard errors of the density estimate a dip between two modes must exceed.
NOISE_SE = 2.0
#: Bins of the histogram on which a direction's fits are carried on to all ``n`` scores when
#: ``n`` exceeds the test subsample.  A 10 % cluster 1.7 noise sd from the inliers (the paper's
#: scaling at n = 100 000, d = 500) wins over every unimodal shape by a BIC margin of 16 to 200
#: on 100 000 scores but by -1 to 5 on 4 000: the subsample alone misses half such clusters.
#: Binned, the refits cost the same at any ``n``; a bin is about 1/400 of a standard deviation,
#: which moves a log-likelihood by ~1e-7 per score, alike for every model.
REFIT_BINS = 4096
#: Subsample evidence above which a direction is refitted on the larger sample.  A Gaussian
#: direction's evidence on 4 000 scores sits near -2 log 4000 = -16.6 (the mixture's two extra
#: parameters, no gain); a cluster that all the scores would resolve sits near 0.
REFIT_FROM = -8.0


@dataclass(frozen=True)
class CandidateLocation:
    """Inlier offsets along the candidate eigenvectors, and the groups found.

    Attributes
    ----------
    offsets : (k,) ndarray
        Inlier location minus the sample mean, in score units, along each of the ``k``
        directions: the main group's mean where groups were found along it, else the mean of
        the samples outside every group (0 when there is no group).
    methods : (k,) object ndarray of str
        How each direction's groups were found: ``"modes"`` (density groups), ``"mixture"``
        (two- or three-component fit by BIC), ``"projection"`` (a kurtosis-minimising
        projection), ``"inliers"`` (none along it, but groups along other directions: the
        offset is the remaining inliers' mean) or ``"mean"`` (no group anywhere).
    evidence : (k,) ndarray
        BIC of the best unimodal fit minus that of the two-component mixture along each
        direction (positive: a mixture is more likely); ``inf`` for separated density groups.
    groups : (n, g) ndarray of float
        Indicator columns of the non-main groups found (one per group), for cluster-aware
        knockoff memberships.
    """

    offsets: np.ndarray
    methods: np.ndarray
    evidence: np.ndarray
    groups: np.ndarray


def _subsample(t: np.ndarray, cap: int, rng: np.random.Generator) -> np.ndarray:
    return t if t.size <= cap else t[rng.choice(t.size, size=cap, replace=False)]


def density_groups(t: np.ndarray, *, min_weight: float = MIN_DENSITY_WEIGHT) -> np.ndarray | None:
    """Cut points between the separated groups of a 1-D sample, or None if unimodal.

    A Gaussian kernel density (Silverman's bandwidth) on a grid; its modes are merged by
    0-dimensional persistence (a mode whose height above the saddle to a higher mode is below
    :data:`MIN_PERSISTENCE` of the highest mode is noise), and a saddle is kept only when both
    sides hold at least ``min_weight`` of the sample.

    Parameters
    ----------
    t : (m,) ndarray
        The sample.
    min_weight : float
        Smallest share of the sample on each side of a kept cut.

    Returns
    -------
    cuts : (g - 1,) ndarray or None
        Increasing cut points between the ``g >= 2`` groups.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> t = np.r_[rng.standard_normal(900), 8 + rng.standard_normal(100)]
    >>> cuts = density_groups(t)
    >>> bool(cuts is not None and len(cuts) == 1 and 2 < cuts[0] < 6)
    True
    >>> density_groups(rng.standard_normal(1000)) is None
    True
    """
    t = np.asarray(t, dtype=float)
    m = t.size
    if m < 20:
        return None
    h = _bandwidth(t)
    if not h > 0:
        return None
    grid = np.linspace(t.min() - 3 * h, t.max() + 3 * h, 512)
    # binned KDE: histogram on the grid convolved with the kernel (O(grid²), independent of m)
    step = grid[1] - grid[0]
    counts = np.histogram(t, bins=np.r_[grid - step / 2, grid[-1] + step / 2])[0].astype(float)
    lags = np.arange(-len(grid) + 1, len(grid)) * step
    kern = np.exp(-0.5 * (lags / h) ** 2)
    f = np.convolve(counts, kern)[len(grid) - 1 : 2 * len(grid) - 1] / (m * h * np.sqrt(2 * np.pi))
    # standard error of a kernel density estimate at density f: sqrt(f R(K) / (m h)), with
    # R(K) = 1 / (2√π) for the Gaussian kernel
    se = np.sqrt(np.maximum(f, 0.0) / (2 * np.sqrt(np.pi) * m * h))
    peaks = np.flatnonzero((f[1:-1] > f[:-2]) & (f[1:-1] >= f[2:])) + 1
    if peaks.size < 2:
        return None
    top = float(f.max())
    # persistence merging, left to right: keep a stack of (peak index, height); between two
    # consecutive kept peaks the saddle is the minimum of f.
    kept: list[int] = [int(peaks[0])]
    for p in peaks[1:]:
        p = int(p)
        q = kept[-1]
        at = q + int(np.argmin(f[q : p + 1]))
        saddle = float(f[at])
        lower = min(f[q], f[p])
        # noise: a dip must exceed the estimate's own sampling error at the saddle and at the
        # lower peak by a wide margin, or it is a wiggle of the kernel estimate
        noise = NOISE_SE * float(np.hypot(se[at], se[q if f[q] < f[p] else p]))
        if lower - saddle < max(MIN_PERSISTENCE * top, noise):
            if f[p] > f[q]:
                kept[-1] = p
            continue
        kept.append(p)
    if len(kept) < 2:
        return None
    cuts = []
    for q, p in zip(kept[:-1], kept[1:], strict=True):
        cuts.append(float(grid[q + int(np.argmin(f[q : p + 1]))]))
    # drop cuts that leave a side too small, greedily from the weakest
    cuts_arr = np.array(cuts)
    while cuts_arr.size:
        edges = np.r_[-np.inf, cuts_arr, np.inf]
        mass = np.histogram(t, bins=edges)[0] / m
        small = int(np.argmin(mass))
        if mass[small] >= min_weight:
            break
        # remove the cut next to the smallest group (towards its larger neighbour)
        if small == 0:
            drop = 0
        elif small == len(mass) - 1:
            drop = cuts_arr.size - 1
        else:
            drop = small - 1 if mass[small - 1] >= mass[small + 1] else small
        cuts_arr = np.delete(cuts_arr, drop)
    return cuts_arr if cuts_arr.size else None


def _bandwidth(t: np.ndarray) -> float:
    """Silverman's bandwidth of :func:`density_groups`: ``0.9 min(sd, IQR / 1.349) m^(-1/5)``."""
    sd = float(np.std(t))
    iqr = float(np.subtract(*np.percentile(t, [75, 25])))
    spread = min(sd, iqr / 1.349) if iqr > 0 else sd
    return 0.9 * spread * t.size ** (-0.2)


#: Level of the test that a density gap is no chance dip of a skewed unimodal shape.
GAP_ALPHA = 1e-3
#: Half-width of the window around a cut that test counts, in kernel bandwidths.
GAP_WINDOW = 2.0


def _chance_gaps(t: np.ndarray, cuts: np.ndarray) -> np.ndarray:
    """Which ``cuts`` of :func:`density_groups` a skewed unimodal shape explains.

    In the sparse tail of a skewed sample a kernel estimate dips and rises by chance, and
    the dip passes the persistence test, which weighs it against the estimate's own error
    at the saddle, not against the shape of a tail (measured, ``accuracy.py`` S6 trial 32,
    no contamination: 41 samples beyond a dip in a chi-square(1) spike's tail became a
    group, and the spike was flagged with 31.9 % of its variance between the groups).  A
    cut is chance when the samples within :data:`GAP_WINDOW` bandwidths of it are not
    fewer than a maximum-likelihood Johnson SU of ``t`` puts there, at level
    :data:`GAP_ALPHA` (Poisson).  There the tail's dip read 19 samples against 25.2
    (p = 0.12); the gaps before clusters of 4-8 % read 0-28 against 15-72 (p <= 4e-7).

    Parameters
    ----------
    t : (m,) ndarray
    cuts : (g - 1,) ndarray

    Returns
    -------
    chance : (g - 1,) bool ndarray
        All False when the Johnson SU cannot be fitted.
    """
    from scipy import stats

    cuts = np.asarray(cuts, dtype=float)
    _, params = _johnson_su_fit(t)
    if params is None:
        return np.zeros(cuts.shape, dtype=bool)
    w = GAP_WINDOW * _bandwidth(t)
    observed = np.array([np.count_nonzero(np.abs(t - c) <= w) for c in cuts])
    expected = t.size * (
        stats.johnsonsu.cdf(cuts + w, *params) - stats.johnsonsu.cdf(cuts - w, *params)
    )
    return np.asarray(stats.poisson.cdf(observed, expected) > GAP_ALPHA)


def _variance(t: np.ndarray, counts: np.ndarray | None = None) -> float:
    """Variance of ``t``, or of the values ``t`` seen ``counts`` times (a histogram's centres)."""
    if counts is None:
        return float(np.var(t))
    m = counts.sum()
    return float(counts @ (t - (counts @ t) / m) ** 2 / m)


def _normal_loglik(t: np.ndarray, counts: np.ndarray | None = None) -> float:
    var = max(_variance(t, counts), 1e-300)
    m = t.size if counts is None else float(counts.sum())
    return float(-0.5 * m * (np.log(2 * np.pi * var) + 1))


def two_gaussians(t: np.ndarray, *, n_iter: int = 200) -> tuple[float, np.ndarray, float, float]:
    """Two-component equal-variance mixture: ``(loglik, means, weight of the first, var)``.

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> t = np.r_[rng.standard_normal(800), 5 + rng.standard_normal(200)]
    >>> ll, means, w, var = two_gaussians(t)
    >>> bool(abs(min(means)) < 0.2 and abs(max(means) - 5) < 0.2)
    True
    """
    ll, means, w, var = gaussian_mixture(t, 2, n_iter=n_iter)
    return ll, means, float(w[0]), var


def _johnson_su_fit(t: np.ndarray) -> tuple[float, tuple[float, ...] | None]:
    """Maximum-likelihood Johnson SU: ``(loglik, (a, b, loc, scale))``; ``(-inf, None)`` if none."""
    from scipy import stats

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            params = tuple(float(v) for v in stats.johnsonsu.fit(t))
            ll = float(np.sum(stats.johnsonsu.logpdf(t, *params)))
        except (ValueError, RuntimeError, FloatingPointError):
            return -np.inf, None
    return (ll, params) if np.isfinite(ll) else (-np.inf, None)


def _johnson_su_refit(x: np.ndarray, counts: np.ndarray, start: tuple[float, ...]) -> float:
    """Johnson SU log-likelihood of ``counts`` scores at ``x``, maximised from ``start``.

    L-BFGS with the analytic gradient.
    Parametrised as ``(a, log b, loc, log scale)``; with ``u = (x − loc)/scale`` and
    ``y = a + b asinh u`` the log density is ``log b − log scale − ½ log 2π − ½ log(1 + u²)
    − ½ y²``.  Never below the start's own log-likelihood.
    """
    from scipy import optimize

    x = np.asarray(x, dtype=float)
    c = np.asarray(counts, dtype=float)
    m = c.sum()
    half_log_2pi = 0.5 * np.log(2 * np.pi)

    def negative_loglik(q: np.ndarray) -> tuple[float, np.ndarray]:
        a, log_b, loc, log_s = q
        b, s = np.exp(log_b), np.exp(log_s)
        u = (x - loc) / s
        one_u2 = 1.0 + u * u
        asinh_u = np.arcsinh(u)
        y = a + b * asinh_u
        cy = c * y
        ll = m * (log_b - log_s - half_log_2pi) - 0.5 * (c @ np.log(one_u2)) - 0.5 * (cy @ y)
        c_dl_du = c * (-u / one_u2 - y * b / np.sqrt(one_u2))
        grad = np.array(
            [
                -np.sum(cy),
                m - b * (cy @ asinh_u),
                -np.sum(c_dl_du) / s,
                -m - c_dl_du @ u,
            ]
        )
        if not np.isfinite(ll) or not np.all(np.isfinite(grad)):
            return 1e300, np.zeros(4)
        return -float(ll), -grad

    a, b, loc, s = start
    q0 = np.array([a, np.log(b), loc, np.log(s)])
    f0 = negative_loglik(q0)[0]
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        res = optimize.minimize(negative_loglik, q0, jac=True, method="L-BFGS-B")
    best = min(f0, float(res.fun))
    return -best if best < 1e299 else -np.inf


def _ex_gaussian_fit(
    x: np.ndarray,
    counts: np.ndarray | None = None,
    start: tuple[float, ...] | None = None,
) -> tuple[float, tuple[float, ...] | None]:
    """Maximum-likelihood exponentially modified Gaussian: ``(loglik, (sign, mu, log sigma,
    log tau))``; ``(-inf, None)`` if none.

    A Gaussian ``N(mu, sigma²)`` plus an independent exponential of mean ``tau``, reflected
    (``sign = -1``) when the sample is skewed to the left: a skewed factor seen through
    Gaussian noise, as a covariance PC with skewed scores is.  Its skewness (0 to 2) and
    kurtosis lie between the Gaussian and the gamma line, below the lognormal line that bounds
    the Johnson SU family, which cannot take them.  Started from the moments (or ``start``),
    L-BFGS on ``(mu, log sigma, log tau)``; with ``counts``, ``x`` holds values seen ``counts``
    times.  Never below the start's own log-likelihood.
    """
    from scipy import optimize, stats

    x = np.asarray(x, dtype=float)
    c = np.ones(x.size) if counts is None else np.asarray(counts, dtype=float)
    m = c.sum()
    if start is None:
        mean = float(c @ x / m)
        var = float(c @ (x - mean) ** 2 / m)
        if not var > 0:
            return -np.inf, None
        skew = float(c @ (x - mean) ** 3 / m) / var**1.5
        sign = 1.0 if skew >= 0 else -1.0
        # moments: var = sigma² + tau², skewness = 2 tau³ / var^1.5
        tau = np.sqrt(var) * (min(max(abs(skew), 0.05), 1.9) / 2) ** (1 / 3)
        sigma = np.sqrt(max(var - tau**2, 0.05 * var))
        q0 = np.array([sign * mean - tau, np.log(sigma), np.log(tau)])
    else:
        sign, q0 = start[0], np.asarray(start[1:], dtype=float)
    y = sign * x

    def negative_loglik(q: np.ndarray) -> float:
        mu, log_sigma, log_tau = q
        sigma = np.exp(log_sigma)
        with np.errstate(all="ignore"):
            ll = float(c @ stats.exponnorm.logpdf(y, np.exp(log_tau) / sigma, mu, sigma))
        return -ll if np.isfinite(ll) else 1e300

    f0 = negative_loglik(q0)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        res = optimize.minimize(negative_loglik, q0, method="L-BFGS-B")
    f, q = (float(res.fun), res.x) if res.fun < f0 else (f0, q0)
    if f >= 1e299:
        return -np.inf, None
    return -f, (sign, *(float(v) for v in q))


def gaussian_mixture(
    t: np.ndarray, k: int, *, n_iter: int = 200
) -> tuple[float, np.ndarray, np.ndarray, float]:
    """Maximum-likelihood ``k``-component Gaussian mixture with a common variance (EM).

    Starts: the means of the quantile slices of several splits (even, and with small outer
    slices, so that a small outlying group gets a component); the best likelihood wins.

    Parameters
    ----------
    t : (m,) ndarray
    k : int
        Number of components (2 or 3).
    n_iter : int

    Returns
    -------
    loglik : float
    means : (k,) ndarray
    weights : (k,) ndarray
    var : float

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> z = rng.standard_normal(1000)
    >>> t = np.r_[z[:800], 6 + z[800:900], -6 + z[900:]]
    >>> ll, means, w, var = gaussian_mixture(t, 3)
    >>> np.round(np.sort(means)).astype(int).tolist(), bool(abs(var - 1) < 0.2)
    ([-6, 0, 6], True)
    """
    if k == 2:
        splits = [[10], [50], [90]]
    else:
        splits = [[33, 67], [10, 90], [5, 95], [10, 50], [50, 90]]
    t = np.asarray(t, dtype=float)
    best: tuple[float, np.ndarray, np.ndarray, float] | None = None
    for qs in splits:
        label = np.searchsorted(np.percentile(t, qs), t)
        if np.bincount(label, minlength=k).min() == 0:
            continue
        mu = np.array([t[label == j].mean() for j in range(k)])
        w = np.bincount(label, minlength=k) / t.size
        var = float(np.mean((t - mu[label]) ** 2))
        fit = _mixture_em(t, mu, w, var, n_iter=n_iter)
        if best is None or fit[0] > best[0]:
            best = fit
    if best is None:
        return _normal_loglik(t), np.full(k, t.mean()), np.full(k, 1.0 / k), float(np.var(t))
    return best


def _mixture_em(
    t: np.ndarray,
    mu: np.ndarray,
    w: np.ndarray,
    var: float,
    *,
    counts: np.ndarray | None = None,
    n_iter: int = 200,
) -> tuple[float, np.ndarray, np.ndarray, float]:
    """EM for a common-variance Gaussian mixture from ``(mu, w, var)``: ``(loglik, mu, w, var)``.

    With ``counts``, ``t`` holds distinct values seen ``counts`` times (a histogram's centres).
    """
    floor = 1e-12 * max(_variance(t, counts), 1e-300)
    c = np.ones(t.size) if counts is None else np.asarray(counts, dtype=float)
    m = c.sum()
    mu, w, var = np.array(mu, dtype=float), np.array(w, dtype=float), max(float(var), floor)
    ll_old = -np.inf
    ll = -np.inf
    for _ in range(n_iter):
        logp = np.log(np.maximum(w, 1e-300))[None, :] - 0.5 * (t[:, None] - mu[None, :]) ** 2 / var
        mx = logp.max(axis=1, keepdims=True)
        lse = mx[:, 0] + np.log(np.exp(logp - mx).sum(axis=1))
        ll = float(c @ lse - 0.5 * m * np.log(2 * np.pi * var))
        r = np.exp(logp - lse[:, None]) * c[:, None]
        sw = r.sum(axis=0)
        if sw.min() < 1e-9:
            break
        w = sw / m
        mu = (r * t[:, None]).sum(axis=0) / sw
        var = max(float((r * (t[:, None] - mu[None, :]) ** 2).sum() / m), floor)
        if ll - ll_old < 1e-8 * abs(ll):
            break
        ll_old = ll
    return ll, mu, w, var


def _best_mixture(
    t: np.ndarray, *, refit_on: np.ndarray | None = None, skewed: bool = False
) -> tuple[float, np.ndarray, np.ndarray, float]:
    """(evidence, means, weights, var) of the 2- or 3-component mixture with the lower BIC.

    The unimodal shapes it must beat are a Gaussian and a Johnson SU, and with ``skewed`` an
    exponentially modified Gaussian too.  Every model is fitted to ``t``.  With ``refit_on``
    (a larger sample that holds ``t``), each fit is then carried on to it from where it
    stopped on ``t`` (Johnson SU and the exponentially modified Gaussian by L-BFGS, the
    mixtures by EM), on its :data:`REFIT_BINS`-bin histogram, and the BICs are those of
    ``refit_on``.
    """
    fits = {k: gaussian_mixture(t, k) for k in (2, 3)}
    ll_jsu, jsu = _johnson_su_fit(t)
    ll_exg, exg = _ex_gaussian_fit(t) if skewed else (-np.inf, None)
    ll_gauss = _normal_loglik(t)
    m = t.size
    if refit_on is not None:
        counts, edges = np.histogram(np.asarray(refit_on, dtype=float), bins=REFIT_BINS)
        keep = counts > 0
        x, c = (0.5 * (edges[:-1] + edges[1:]))[keep], counts[keep].astype(float)
        m = int(c.sum())
        fits = {k: _mixture_em(x, mu, w, var, counts=c) for k, (_, mu, w, var) in fits.items()}
        ll_jsu = _johnson_su_refit(x, c, jsu) if jsu is not None else -np.inf
        ll_exg = _ex_gaussian_fit(x, c, start=exg)[0] if exg is not None else -np.inf
        ll_gauss = _normal_loglik(x, c)
    bic_gauss = -2 * ll_gauss + 2 * np.log(m)
    bic_jsu = -2 * ll_jsu + 4 * np.log(m)
    bic_exg = -2 * ll_exg + 3 * np.log(m)
    unimodal = min(bic_gauss, bic_jsu, bic_exg)
    best: tuple[float, np.ndarray, np.ndarray, float] | None = None
    for k, (ll, means, w, var) in fits.items():
        bic = -2 * ll + (2 * k) * np.log(m)  # k means, k - 1 weights, one variance
        if best is None or unimodal - bic > best[0]:
            best = (float(unimodal - bic), means, w, var)
    assert best is not None
    return best


def mixture_evidence(t: np.ndarray) -> tuple[float, float, float]:
    """BIC evidence for a mixture of two or three groups in a 1-D sample.

    Parameters
    ----------
    t : (m,) ndarray

    Returns
    -------
    evidence : float
        ``min(BIC_gauss, BIC_johnson_su) − min(BIC_mix2, BIC_mix3)`` (BIC = −2 log L +
        parameters · log m; equal-variance mixtures).
    main_mean : float
        Mean of the heaviest component of the better mixture.
    minor_weight : float
        Weight of its lightest component.

    Examples
    --------
    >>> rng = np.random.default_rng(2)
    >>> t = np.r_[rng.standard_normal(900), 4 + rng.standard_normal(100)]
    >>> ev, main, w = mixture_evidence(t)
    >>> bool(ev > 6 and abs(main) < 0.3 and 0.05 < w < 0.2)
    True
    >>> bool(mixture_evidence(rng.standard_normal(1000))[0] < 2)
    True
    """
    ev, means, w, _ = _best_mixture(np.asarray(t, dtype=float))
    return ev, float(means[int(np.argmax(w))]), float(w.min())


def _groups_1d(
    t: np.ndarray,
    sub: np.ndarray,
    *,
    skewed: bool = False,
    refit_from: float = REFIT_FROM,
    min_weight: float = MIN_GROUP_WEIGHT,
) -> tuple[tuple[str, float, list[np.ndarray]] | None, float]:
    """Test one direction: ``((method, offset, non-main group masks) or None, evidence)``.

    ``sub`` is the test subsample of ``t``; ``skewed``: a density gap must not be a chance
    dip of a skewed unimodal shape (:func:`_chance_gaps`), and the mixture must beat an
    exponentially modified Gaussian too (:func:`_best_mixture`).  When ``t`` is larger and
    the subsample's mixture evidence is above ``refit_from`` (:data:`REFIT_FROM`), the fits
    are carried on to all of ``t`` and decided there.  ``min_weight``: the lightest mixture
    component's smallest weight.
    """
    cuts = density_groups(sub)
    if cuts is not None and skewed:
        # a gap in a skewed sample's sparse tail may be a chance dip of its shape
        cuts = cuts[~_chance_gaps(sub, cuts)]
        cuts = cuts if cuts.size else None
    if cuts is not None:
        label = np.searchsorted(cuts, t)
        counts = np.bincount(label, minlength=cuts.size + 1)
        main = int(np.argmax(counts))
        groups = [label == g for g in range(cuts.size + 1) if g != main and counts[g]]
        return ("modes", float(t[label == main].mean()), groups), float("inf")
    if sub.size < 20:
        return None, -np.inf
    ev, means, w, var = _best_mixture(sub, skewed=skewed)
    if t.size > sub.size and ev > refit_from:
        # decided on every score: the subsample's verdict is noisy near the margin, and the
        # main component's mean (the offset) is better estimated from all of them
        ev, means, w, var = _best_mixture(sub, refit_on=t, skewed=skewed)
    if ev > BIC_MARGIN and w.min() >= min_weight:
        main = int(np.argmax(w))
        # each sample joins the component its posterior favours; the non-main ones are groups
        logp = np.log(w)[None, :] - 0.5 * (t[:, None] - means[None, :]) ** 2 / var
        label = np.argmax(logp, axis=1)
        groups = [label == j for j in range(len(w)) if j != main and np.any(label == j)]
        return ("mixture", float(means[main]), groups), ev
    return None, ev


def _min_kurtosis_directions(T: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Unit directions (columns, in the input's coordinates) of locally minimal kurtosis.

    Peña & Prieto (2001): a projection on which a cluster and the bulk separate has low
    kurtosis (a balanced mixture) or high kurtosis (a small outlying group); the low one is
    what the 1-D tests then need.  Gradient descent on the sphere of the whitened scores from
    each axis and a few random starts.
    """
    n, k = T.shape
    C = np.cov(T, rowvar=False)
    evals, evecs = np.linalg.eigh(C)
    evals = np.maximum(evals, 1e-12 * evals.max())
    W = evecs / np.sqrt(evals)  # whitening: Y = T W
    Y = (T - T.mean(axis=0)) @ W
    starts = np.column_stack([np.eye(k), rng.standard_normal((k, k))])
    found = []
    for j in range(starts.shape[1]):
        w = starts[:, j] / np.linalg.norm(starts[:, j])
        for _ in range(100):
            z = Y @ w
            grad = 4 * (Y * (z**3)[:, None]).mean(axis=0)
            grad -= (grad @ w) * w
            w_new = w - 0.05 * grad
            w_new /= np.linalg.norm(w_new)
            if np.linalg.norm(w_new - w) < 1e-6:
                w = w_new
                break
            w = w_new
        found.append(W @ w)
    D = np.column_stack(found)
    return D / np.linalg.norm(D, axis=0)


#: Fewest members of each part when a group is split (:func:`_split_groups`).
MIN_SPLIT = 20


def _split_groups(T: np.ndarray, groups: list[np.ndarray]) -> list[np.ndarray]:
    """Split each group whose members form separated density groups along some direction.

    Two clusters that overlap along the direction where they were found come out as one
    group (measured: three equal 5 % clusters, 40 + 60 samples of two clusters 12 score units
    apart along the third direction in one group); that group's mean along the direction
    separating them is near the inliers', so the knockoffs' memberships cannot move that
    eigenvector and it is called stable.  Only a clear density gap splits a group (no mixture
    fit: a split along a covariance direction would displace the parts along it by
    construction), and each part keeps at least :data:`MIN_SPLIT` members.
    """
    out = list(groups)
    queue = list(range(len(out)))
    while queue:
        gi = queue.pop()
        idx = np.flatnonzero(out[gi])
        if idx.size < 2 * MIN_SPLIT:
            continue
        for j in range(T.shape[1]):
            t = T[idx, j]
            cuts = density_groups(t, min_weight=max(MIN_DENSITY_WEIGHT, MIN_SPLIT / idx.size))
            if cuts is None:
                continue
            label = np.searchsorted(cuts, t)
            parts = []
            for part in range(cuts.size + 1):
                mask = np.zeros(T.shape[0], dtype=bool)
                mask[idx[label == part]] = True
                parts.append(mask)
            out[gi] = parts[0]
            queue.append(gi)
            for mask in parts[1:]:
                out.append(mask)
                queue.append(len(out) - 1)
            break
    return out


def _confirm_groups(
    T: np.ndarray,
    groups: list[np.ndarray],
    inliers: np.ndarray,
    in_test: np.ndarray,
    separated: list[bool] | None = None,
) -> list[bool]:
    """Whether each group is a mixture with the inliers along its own displacement.

    A mixture fit along one direction can give a component to the long tail of a skewed
    covariance PC that the direction carries (measured, skewed spikes among two clusters:
    a three-component fit along a cluster's direction took the cluster and 48-64 inliers
    whose factor on the spike averaged 2.6-2.8 of its standard deviations; the pair then
    read 26-39 % of its variance between the groups, shift z 21-34).  Such a group's
    displacement points along the skewed PC, and there the inliers with it are one skewed
    shape, which the unimodal fits take; a cluster's are still a mixture.  So each group is
    tested again (:func:`_groups_1d`) on the inliers and its own samples, projected on the
    difference of their means; a group that is not a mixture there is returned to
    ``inliers`` (in place, in turn).  ``in_test`` marks the rows the fits may use.

    A group found by a density gap (``separated``) is tested the same way, whatever its
    weight: a kernel estimate with the bandwidth a skewed sample's interquartile range gives
    shows "modes" in its sparse tail (measured, chi-square(1) spikes among two clusters:
    groups of 20 and 40 inliers from a spike's tail, which the Johnson SU fits better than
    any mixture by 320 and 360 in BIC, and no gap along their own displacement; the spike
    then read 42 % of its variance between the groups).  A separated cluster keeps its gap
    there, or is a mixture by a wide margin; a spread group (samples admixed along a cline
    between two sources) keeps its gap but is no equal-variance mixture.
    """
    kept = []
    separated = [False] * len(groups) if separated is None else separated
    for group, gap in zip(groups, separated, strict=True):
        delta = T[group].mean(axis=0) - T[inliers].mean(axis=0)
        norm = float(np.linalg.norm(delta))
        idx = np.flatnonzero(inliers | group)
        if not norm > 0 or idx.size < 20:
            kept.append(True)
            continue
        z = T[idx] @ (delta / norm)
        # decided on every score: a group was found, and a subsample is the weaker test
        found, _ = _groups_1d(
            z,
            z[in_test[idx]],
            skewed=True,
            refit_from=-np.inf,
            min_weight=0.0 if gap else MIN_GROUP_WEIGHT,
        )
        kept.append(found is not None)
        if found is None:
            inliers |= group
    return kept


#: Most rounds of :func:`_refine_memberships`.
REFINE_ROUNDS = 10
#: Smallest share of its members a group may keep when reassigned, else the groups stand.
REFINE_KEEP = 0.5


def _refine_memberships(
    T: np.ndarray, groups: list[np.ndarray], *, rounds: int = REFINE_ROUNDS
) -> list[np.ndarray]:
    """The groups' memberships reassigned in all ``k`` score columns (linear discriminant).

    A group's members were taken by a 1-D fit along one direction, and along a direction that
    carries a covariance PC too the inliers far out on that PC fall on the group's side
    (measured, chi-square(1) spikes among 8 and 5 % clusters, ``accuracy.py`` S8 trials 8
    and 14: 50 inliers among a 166-sample group of the 8 % cluster, 10 among the 5 %
    cluster's 88; the spike then read 46 and 25 % of its variance between the groups and was
    flagged).  In the ``k`` columns the PC's spread is whitened away: each sample goes to the
    class (the inliers or a group) with the largest linear discriminant, from the classes'
    means, the pooled within-class covariance and the classes' shares, repeated until no
    label changes (at most ``rounds`` times).  The same trials' groups come out with 0 and 1
    inliers and every cluster member.  If a group would keep less than :data:`REFINE_KEEP`
    of its members, the groups are returned as they came.

    Parameters
    ----------
    T : (n, k) ndarray
        Scores.
    groups : list of (n,) bool ndarray
        Disjoint group masks; the samples in none are the inliers.

    Returns
    -------
    list of (n,) bool ndarray
        The reassigned groups, in order, or ``groups`` unchanged.  A group most of whose
        members went to another one is merged into it first (one fewer group).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> T = rng.standard_normal((1000, 2)) * [4.0, 1.0]; T[:100, 1] += 5
    >>> rough = (T[:, 1] + 0.5 * T[:, 0]) > 4  # a group cut along a mixed direction
    >>> fine = _refine_memberships(T, [rough])[0]
    >>> [int(rough[:100].sum()), int(rough[100:].sum())]  # group members, inliers
    [64, 23]
    >>> [int(fine[:100].sum()), int(fine[100:].sum())]
    [98, 1]
    """
    n, k = T.shape
    labels = np.zeros(n, dtype=np.intp)
    for g, mask in enumerate(groups):
        labels[mask] = g + 1
    c = len(groups) + 1
    for _ in range(rounds):
        counts = np.bincount(labels, minlength=c)
        present = counts > 0
        means = np.zeros((c, k))
        np.add.at(means, labels, T)
        means[present] /= counts[present, None]
        R = T - means[labels]
        pooled = R.T @ R / max(n - int(present.sum()), 1)
        A = means @ np.linalg.pinv(pooled)
        with np.errstate(divide="ignore"):
            discriminant = T @ A.T - 0.5 * np.sum(A * means, axis=1) + np.log(counts / n)
        new = np.argmax(discriminant, axis=1)
        if np.array_equal(new, labels):
            break
        labels = new
    out = [labels == g for g in range(1, c)]
    for g, before in enumerate(groups):
        # a group whose members mostly went to another one was a part of the same cluster
        # (found along another direction): with two classes for one cluster, one takes the
        # cluster and the other a skewed PC's tail next to it (accuracy.py S14 trial 11: the
        # 5 % cluster found as groups of 42 and 55; the 42 became 31 inliers and 2 members,
        # and the PC read 32.7 % of its variance between the groups).  Merged, and refined again
        destination = np.bincount(labels[before], minlength=c)
        destination[g + 1] = 0
        h = int(np.argmax(destination)) - 1
        if h >= 0 and destination[h + 1] > REFINE_KEEP * before.sum():
            merged = [m for i, m in enumerate(groups) if i != g]
            merged[h if h < g else h - 1] = groups[h] | before
            return _refine_memberships(T, merged, rounds=rounds)
    if any(
        after.sum() < REFINE_KEEP * before.sum() for after, before in zip(out, groups, strict=True)
    ):
        # a group overlapping the inliers sample by sample (a 10 % cluster 1.7 noise sd
        # away at n = 100 000) shrinks round by round under hard labels, to nothing: the
        # 1-D fit's groups stand
        return list(groups)
    return out


def _peel(inliers: np.ndarray, idx: np.ndarray, parts: list[np.ndarray]) -> list[np.ndarray]:
    """The groups ``parts`` (masks over the inliers ``idx``) as masks over all samples,
    removed from ``inliers`` (in place)."""
    lifted = []
    for part in parts:
        full = np.zeros(inliers.size, dtype=bool)
        full[idx[part]] = True
        inliers &= ~full
        lifted.append(full)
    return lifted


def candidate_location(
    scores: np.ndarray,
    *,
    max_samples: int = TEST_MAX_SAMPLES,
    random_state: int = 0,
    max_sweeps: int = 2,
) -> CandidateLocation:
    """Inlier location along each candidate eigenvector, from the centred sample scores.

    The groups are peeled off one direction at a time.  For each column of ``scores`` in turn
    (the samples' scores on one candidate eigenvector), the scores of the samples *still
    counted as inliers* are tested: (a) separated density groups (:func:`density_groups`),
    (b) else a two- or three-component equal-variance mixture that beats a Gaussian and a
    Johnson SU by :data:`BIC_MARGIN` (minor weight at least :data:`MIN_GROUP_WEIGHT`).  The
    non-main groups found are removed from the inliers before the next direction is tested,
    and the sweep over the directions without groups is repeated until it finds nothing new
    (at most ``max_sweeps`` times); a group that holds separated clusters is split
    (:func:`_split_groups`), and a group a mixture fit found is kept only if it is a mixture
    with the inliers along its own displacement too, against a skewed unimodal shape as well
    (:func:`_confirm_groups`: a skewed covariance PC's tail is not a group); the groups kept
    are then reassigned in all ``k`` columns (:func:`_refine_memberships`).  The offset along
    a direction where groups were found is the main group's mean there (the main mixture
    component's mean, or the main density group's); along the others it is the mean of the
    remaining inliers (0 everywhere, the sample mean, when no group was found).  If nothing
    was found and ``k >= 2``, kurtosis-minimising projections of the scores (Peña & Prieto
    2001) get the same tests and confirmation.  The fits use at most ``max_samples`` seeded
    rows.

    Why peel: testing every direction on all samples lets a direction that only *carries* a
    cluster found along another one (a covariance eigenvector mixed with a mean shift at
    finite n, the clusters displaced along it by a fraction of its spread) fit a mixture of
    its own; that mixture cuts the covariance spike's scores, so the group is displaced along
    it by construction (its shift evidence is large whatever the truth) and its within-group
    variance drops below the edge (measured: two equal 10 % clusters + two covariance spikes,
    groups of 20/57/51 and 35/50/47 inliers/cluster 1/cluster 2, shift z 9.8 on the top
    covariance spike).  Once the clusters found along the strong directions are removed, the
    remaining inliers are unimodal along such a direction and it gets no group; one inlier
    set also gives one location, consistent across the directions.

    Parameters
    ----------
    scores : (n_samples, k) ndarray
        Sample scores on the ``k`` candidate eigenvectors, centred (column means 0).
    max_samples : int
        Cap on the rows the 1-D fits use.
    random_state : int
        Seed of the subsample and of the projection starts.
    max_sweeps : int
        Most sweeps over the directions.

    Returns
    -------
    CandidateLocation

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> T = rng.standard_normal((1000, 2)); T[:300, 0] += 6; T -= T.mean(axis=0)
    >>> loc = candidate_location(T)
    >>> bool(abs(loc.offsets[0] + 1.8) < 0.2 and abs(loc.offsets[1]) < 0.15)
    True
    """
    T = _score_columns(scores)
    n, k = T.shape
    rng = np.random.default_rng(random_state)
    in_test = np.zeros(n, dtype=bool)
    in_test[np.arange(n) if n <= max_samples else rng.choice(n, max_samples, replace=False)] = True
    offsets = np.zeros(k)
    methods = np.array(["mean"] * k, dtype=object)
    evidence = np.full(k, -np.inf)
    groups: list[np.ndarray] = []
    origin: list[int] = []  # the direction each group was found along
    inliers = np.ones(n, dtype=bool)
    found_offset = np.full(k, np.nan)
    for _ in range(max(1, max_sweeps)):
        new = False
        for j in range(k):
            if methods[j] != "mean":
                # never retest a direction on the tail its own groups left: a truncated
                # sample is skewed and a fit to it peels the inliers' own tail
                continue
            idx = np.flatnonzero(inliers)
            if idx.size < 20:
                break
            t = T[idx, j]
            found, evidence[j] = _groups_1d(t, t[in_test[idx]])
            if found is None:
                continue
            methods[j], found_offset[j], gs = found
            peeled = _peel(inliers, idx, gs)
            groups += peeled
            origin += [j] * len(peeled)
            new = True
        if not new:
            break
    if groups:
        # groups holding separated clusters are split; then, as a mixture component may be a
        # skewed PC's tail, the parts are kept if they are a mixture along their own
        # displacement (density groups are separated: kept as found)
        parts = [_split_groups(T, [g]) for g in groups]
        groups = [part for split in parts for part in split]
        origin = [j for j, split in zip(origin, parts, strict=True) for _ in split]
        separated = [methods[j] == "modes" for j in origin]
        keep = _confirm_groups(T, groups, inliers, in_test, separated)
        for j in set(origin):
            if not any(kp for kp, o in zip(keep, origin, strict=True) if o == j):
                methods[j], found_offset[j] = "mean", np.nan
        groups = [g for g, kp in zip(groups, keep, strict=True) if kp]
    if groups:
        groups = _refine_memberships(T, groups)
        inliers = ~np.any(np.column_stack(groups), axis=1)
        # along a direction where a fit found groups its main component's mean (consistent
        # when the groups overlap: the hard labels' mean is biased by the misassigned tails,
        # measured 0.41 sd at 45 % displaced by 3 sd); elsewhere the remaining inliers' mean
        offsets = np.where(np.isnan(found_offset), T[inliers].mean(axis=0), found_offset)
        methods[methods == "mean"] = "inliers"
    elif k >= 2 and n > 4 * k:
        rows = np.flatnonzero(in_test)
        D = _min_kurtosis_directions(T[rows], rng)
        for j in range(D.shape[1]):
            z = T @ D[:, j]
            found, ev = _groups_1d(z, z[rows])
            if found is None:
                continue
            main = ~np.any(np.column_stack(found[2]), axis=1)
            gs = [
                g
                for g, kp in zip(
                    found[2],
                    _confirm_groups(
                        T, found[2], main, in_test, [found[0] == "modes"] * len(found[2])
                    ),
                    strict=True,
                )
                if kp
            ]
            if not gs:
                continue
            gs = _refine_memberships(T, gs)
            main = ~np.any(np.column_stack(gs), axis=1)
            offsets = T[main].mean(axis=0)
            methods[:] = "projection"
            evidence[:] = ev
            groups = gs
            break
    G = np.column_stack(groups).astype(float) if groups else np.zeros((n, 0))
    return CandidateLocation(offsets=offsets, methods=methods, evidence=evidence, groups=G)


def split_groups(
    scores: np.ndarray,
    groups: np.ndarray,
    *,
    max_samples: int = TEST_MAX_SAMPLES,
    random_state: int = 0,
) -> np.ndarray:
    """Groups found *within* each group, along each column of ``scores``.

    The location step finds groups along the preliminary directions; two clusters that lie
    together there but on opposite sides of the inliers along a final eigenvector form one
    group whose mean cancels along it, so the share of that pair's variance between the
    groups reads small and the pair is kept stable as "slight" (``accuracy.py`` H2 trial 10:
    a group of 68 + 40 samples of two clusters, 2.2 % between the groups along the second
    cluster pair).  This runs :func:`residual_groups` on each group's own scores.

    Parameters
    ----------
    scores : (n_samples, k) ndarray
        Scores on the directions to test.
    groups : (n_samples, g) ndarray
        Indicator columns of the groups found so far.
    max_samples : int
        Cap on the rows each 1-D fit uses.
    random_state : int
        Seed of those subsamples.

    Returns
    -------
    groups : (n_samples, g') ndarray of float
        ``groups`` followed by the groups found within them (each a subset of one group;
        ``g' >= g``).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> T = rng.standard_normal((1000, 1)); T[900:950, 0] += 10; T[950:, 0] -= 10
    >>> G = np.r_[np.zeros(900), np.ones(100)][:, None]
    >>> split_groups(T, G).shape[1]
    2
    """
    T = _score_columns(scores)
    n = T.shape[0]
    G = np.asarray(groups, dtype=float).reshape(n, -1)
    new: list[np.ndarray] = []
    for c in range(G.shape[1]):
        rows = np.flatnonzero(G[:, c] > 0)
        if rows.size < 20:
            continue
        within = residual_groups(
            T[rows], np.zeros((rows.size, 0)), max_samples=max_samples, random_state=random_state
        )
        for j in range(within.shape[1]):
            column = np.zeros(n)
            column[rows] = within[:, j]
            new.append(column)
    return _with_columns(G, new)


def groups_outside(groups: np.ndarray, before: np.ndarray) -> np.ndarray:
    """Which columns of ``groups`` hold mostly samples that were in no column of ``before``.

    :func:`residual_groups` with ``refine_on`` reassigns every group and merges one most of
    whose members went to another (:func:`_refine_memberships`), so its columns are not
    always ``before``'s followed by the new ones: a merge of two earlier groups leaves as many
    columns as before even when a new group was found.  A column is new when more than half
    of its members were outside every earlier group.

    Parameters
    ----------
    groups : (n_samples, g') ndarray
        Indicator columns (``> 0`` is membership).
    before : (n_samples, g) ndarray
        The earlier groups' indicator columns.

    Returns
    -------
    (g',) bool ndarray

    Examples
    --------
    >>> before = np.array([[1, 0], [1, 0], [0, 1], [0, 1], [0, 0], [0, 0]])
    >>> merged_and_new = np.array([[1, 0], [1, 0], [1, 0], [1, 0], [0, 1], [0, 1]])
    >>> groups_outside(merged_and_new, before).tolist()
    [False, True]
    """
    G = np.asarray(groups) > 0
    earlier = np.any(np.asarray(before) > 0, axis=1)
    members = G.sum(axis=0)
    outside = (G & ~earlier[:, None]).sum(axis=0)
    return np.asarray(2 * outside > members)


def residual_groups(
    scores: np.ndarray,
    groups: np.ndarray,
    *,
    max_samples: int = TEST_MAX_SAMPLES,
    random_state: int = 0,
    refine_on: np.ndarray | None = None,
) -> np.ndarray:
    """Groups left among the samples outside every group, along each column of ``scores``.

    The within-group rule of :func:`~mspca_dask.matching.check_invariance` keeps a pair
    stable when its variance *within* the groups is still a spike.  That reads a missed
    cluster as a covariance spike: a cluster that no single preliminary direction separated
    (measured: four unequal clusters 4/6/8/10 %, the 10 % one displaced 1.5 to 4.3 score
    units along each of four preliminary directions, never found) stays among the inliers,
    and its displacement along the final eigenvector it loads on (5.6 units, 4 standard
    deviations) counts as within-group variance.  This tests the inliers' scores along each
    column (:func:`density_groups`, else a mixture as in :func:`candidate_location`, the
    groups confirmed along their own displacement when there are several columns); a
    covariance spike's inlier scores are one unimodal shape and get no group.

    Parameters
    ----------
    scores : (n_samples, k) ndarray
        Scores on the directions to test (the final eigenvectors the rule would call mixed).
    groups : (n_samples, g) ndarray
        Indicator columns of the groups found so far.
    max_samples : int
        Cap on the rows the 1-D fits use.
    random_state : int
        Seed of that subsample.
    refine_on : (n_samples, k') ndarray or None
        When new groups are found, all the groups (``groups``, disjoint, and the new ones) are
        reassigned by linear discriminant in these columns, as the location step's are
        (:func:`_refine_memberships`): a group found along a direction that carries a skewed
        covariance PC takes inliers from its tail (``accuracy.py`` S8 trial 23: a missed 8 %
        cluster found along a within-group spike mixing it with a chi-square(1) PC, with 51
        inliers).  None: the groups as found.

    Returns
    -------
    groups : (n_samples, g') ndarray of float
        ``groups`` followed by the groups found among the remaining inliers (``g' >= g``).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> T = rng.standard_normal((1000, 1)); T[:100, 0] += 8
    >>> G = residual_groups(T, np.zeros((1000, 0)))
    >>> G.shape[1], bool(G[:100, 0].all() and not G[100:, 0].any())
    (1, True)
    >>> residual_groups(rng.standard_normal((1000, 1)), np.zeros((1000, 0))).shape
    (1000, 0)
    """
    T = _score_columns(scores)
    n, k = T.shape
    G = np.asarray(groups, dtype=float).reshape(n, -1)
    rng = np.random.default_rng(random_state)
    inliers = ~np.any(G > 0, axis=1)
    in_test = np.zeros(n, dtype=bool)
    in_test[np.arange(n) if n <= max_samples else rng.choice(n, max_samples, replace=False)] = True
    new: list[np.ndarray] = []
    separated: list[bool] = []
    for j in range(k):
        idx = np.flatnonzero(inliers)
        if idx.size < 20:
            break
        t = T[idx, j]
        found, _ = _groups_1d(t, t[in_test[idx]])
        if found is not None:
            peeled = _peel(inliers, idx, found[2])
            new += peeled
            separated += [found[0] == "modes"] * len(peeled)
    if k > 1 and new:
        # as in candidate_location: a component may be a skewed PC's tail
        keep = _confirm_groups(T, new, inliers, in_test, separated)
        new = [g for g, kp in zip(new, keep, strict=True) if kp]
    if refine_on is not None and new:
        every = _refine_memberships(_score_columns(refine_on), [*(G > 0).T, *new])
        return np.stack(every, axis=1).astype(float)
    return _with_columns(G, new)
