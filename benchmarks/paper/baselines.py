"""Baselines of the paper's comparison, each from its own paper or from a kept library.

Every estimator takes the data as ``X : (n_samples, n_features)`` (rows are samples, as in
``mspca_dask``) and returns ``(k, n_features)`` unit rows: its estimate of the top-k principal
components, leading first.  Which implementation, and why:

==================  =========================================================================
method              implementation
==================  =========================================================================
RPCA-AAP            :func:`accaltproj`, written here from Cai, Cai & Wei (2019), Algorithm 1
                    and the authors' MATLAB defaults (β = 1/(2(mn)^{1/4}), β_init = 4β,
                    γ = 0.5, tol = 1e-5, 100 iterations, no trimming).  No kept library has it:
                    scikit-learn, SciPy and pyRiemann do not; the PyPI port ``rpca`` 0.1.6
                    (one release, 2024, Python < 3.13) subtracts the column mean before the
                    decomposition — a step that is not part of the algorithm — and prints on
                    every call.  The decomposition ``D = L + S`` runs on the raw data matrix;
                    the PC estimate is the leading right singular vector of ``L``.
Tyler               :func:`pyriemann.geometry.covariance.covariance_mest` (``"tyl"``), pyRiemann
                    ≥ 0.12 (maintained; its fixed point is Tyler's, weights ``p / t``).  Run
                    about the inliers' known centre (``assume_centered=True``: Tyler 1987 is an
                    estimator of scatter about a known centre) to convergence (``tol = 1e-6``
                    instead of pyRiemann's loose default ``1e-2``, see :data:`TYLER_TOL`).
Huber               :func:`huber_scatter`, written here.  pyRiemann's ``"hub"`` uses the
                    constants of the *complex* Huber estimator (Ollila et al. 2012, Example 1)
                    with ``p`` degrees of freedom in place of ``2p``: on real data its cut-off
                    ``c² = χ²_p(q)/2`` lies below almost every squared distance (≈ p), so all
                    samples are down-weighted and it behaves like Tyler's estimator (and is not
                    consistent at the Gaussian).  Ours is the real-valued Huber M-estimator of
                    scatter (Maronna 1976; Ollila & Koivunen): ``u(t) = min(1, c²/t)/b``,
                    ``c² = χ²_p(q)``, ``b = F_{χ²_{p+2}}(c²) + c²(1 − q)/p`` (Fisher
                    consistent at the Gaussian), ``q = 0.9`` as pyRiemann, known centre.
ℓ1-PCA              :func:`l1_pca`, Kwak (2008) PCA-L1: greedy ℓ1-norm maximisation with the
                    polarity fixed-point iteration and deflation.  No kept library has it.
winsorized PCA      :func:`scipy.stats.mstats.winsorize` *with* limits (5 % each tail, per
                    feature), then PCA of the winsorized covariance.
centred PCA         top eigenvectors of the sample covariance.
vanilla PCA         top eigenvectors of ``XᵀX/n`` (no centring; the inliers' mean is 0).
==================  =========================================================================

The ``paper_*`` functions re-run the paper's own protocol (see RESULTS.md): the PyPI ``rpca``
package's arithmetic on the ``d × n`` matrix, pyRiemann's defaults, and ``winsorize`` without
limits.  They exist to explain the paper's numbers, not as baselines.

References
----------
Cai, H., Cai, J.-F. & Wei, K. (2019). Accelerated alternating projections for robust principal
component analysis. JMLR 20(20).
Tyler, D. E. (1987). A distribution-free M-estimator of multivariate scatter. Ann. Statist. 15.
Maronna, R. A. (1976). Robust M-estimators of multivariate location and scatter. Ann. Statist. 4.
Ollila, E., Tyler, D. E., Koivunen, V. & Poor, H. V. (2012). Complex elliptically symmetric
distributions: survey, new results and applications. IEEE Trans. Signal Process. 60(11).
Kwak, N. (2008). Principal component analysis based on L1-norm maximization. IEEE TPAMI 30(9).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.linalg as sla
from scipy.sparse.linalg import eigsh, svds
from scipy.stats import chi2
from scipy.stats.mstats import winsorize

import mspca_dask
from mspca_dask import rmt

#: Relative Frobenius change at which the M-estimators stop.  pyRiemann's default (1e-2) stops
#: Tyler's fixed point after about two iterations when n ≈ p (n/p = 1.11 here), far from the
#: fixed point; 1e-6 takes about 90 iterations at d = 900, n = 1000.
TYLER_TOL = 1e-6
MEST_MAX_ITER = 500
#: Winsorizing limits (each tail, per feature).
WINSOR_LIMITS = (0.05, 0.05)


# ---------------------------------------------------------------------------- helpers
def _unit_rows(V: np.ndarray) -> np.ndarray:
    """Columns ``V`` (d, k) → unit rows (k, d), sign fixed so the largest entry is positive."""
    V = np.asarray(V, dtype=float).T.copy()
    V /= np.linalg.norm(V, axis=1, keepdims=True)
    idx = np.argmax(np.abs(V), axis=1)
    V *= np.sign(V[np.arange(len(V)), idx])[:, None]
    return V


def top_eigvecs(S: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-k eigenpairs of a symmetric ``S``: ``(values (k,), rows (k, d))``, descending.

    LAPACK ``eigh`` for small matrices; ARPACK (``eigsh``, deterministic start, tolerance
    1e-12) above 300 rows, where it is ~10× cheaper for the few leading pairs needed here.
    """
    p = S.shape[0]
    if p <= 300 or k >= p // 4:
        w, V = sla.eigh(S, subset_by_index=[p - k, p - 1])
    else:
        w, V = eigsh(S, k=k, which="LA", v0=np.ones(p), tol=1e-12)
        order = np.argsort(w)
        w, V = w[order], V[:, order]
    return w[::-1], _unit_rows(V[:, ::-1])


# ---------------------------------------------------------------------------- plain PCA
def vanilla_pca(X: np.ndarray, k: int = 1) -> np.ndarray:
    """Top-k eigenvectors of ``XᵀX/n`` (no centring)."""
    return top_eigvecs(X.T @ X / len(X), k)[1]


def centred_pca(X: np.ndarray, k: int = 1) -> np.ndarray:
    """Top-k eigenvectors of the sample covariance (centred by the sample mean)."""
    Xc = X - X.mean(axis=0)
    return top_eigvecs(Xc.T @ Xc / len(X), k)[1]


def winsorize_columns(
    X: np.ndarray, limits: tuple[float, float] | None = WINSOR_LIMITS
) -> np.ndarray:
    """Winsorize every feature (column) as :func:`scipy.stats.mstats.winsorize` does.

    SciPy's rule (``inclusive=(True, True)``): in each column the ``int(lo·n)`` smallest values
    are set to the next one and the ``int(hi·n)`` largest to the previous one — a clip at two
    order statistics.  SciPy does it column by column on masked arrays (0.5 s at 1000 × 900);
    this is the same clip, vectorised, and the tests check it equals SciPy's output exactly.
    ``limits=None`` is what the paper's code passed: SciPy then returns the data unchanged.
    """
    X = np.asarray(X, dtype=float)
    if limits is None:
        return X.copy()
    n = len(X)
    lo, hi = limits
    low_idx = int(lo * n)
    up_idx = n - int(n * hi)
    S = np.sort(X, axis=0)
    return np.clip(X, S[low_idx], S[up_idx - 1])


def winsorize_columns_scipy(
    X: np.ndarray, limits: tuple[float, float] | None = WINSOR_LIMITS
) -> np.ndarray:
    """:func:`scipy.stats.mstats.winsorize` per feature (the reference for the fast version)."""
    return np.asarray(winsorize(X, limits=limits, axis=0, inplace=False), dtype=float)


def winsorized_pca(
    X: np.ndarray, k: int = 1, limits: tuple[float, float] = WINSOR_LIMITS
) -> np.ndarray:
    """Top-k eigenvectors of the covariance of the feature-wise winsorized data."""
    return centred_pca(winsorize_columns(X, limits), k)


# ---------------------------------------------------------------------------- RPCA-AAP
def hard_threshold(A: np.ndarray, zeta: float) -> np.ndarray:
    """MATLAB's ``wthresh(A, 'h', ζ)``: keep the entries with ``|a| > ζ``, zero the rest."""
    return np.where(np.abs(A) > zeta, A, 0.0)


def accaltproj(
    D: np.ndarray,
    r: int,
    *,
    max_iter: int = 100,
    tol: float = 1e-5,
    beta: float | None = None,
    beta_init: float | None = None,
    gamma: float = 0.5,
    random_state: int = 0,
) -> dict[str, Any]:
    """Robust PCA by Accelerated Alternating Projections (AccAltProj), without trimming.

    Decomposes ``D = L + S`` with ``rank(L) = r`` and ``S`` sparse (Cai, Cai & Wei 2019,
    Algorithm 1; the defaults are those of the authors' MATLAB code).

    Parameters
    ----------
    D : (m, n) array
    r : int
        Rank of ``L``.
    max_iter, tol : int, float
        Stop after ``max_iter`` iterations or when ``‖D − L − S‖_F / ‖D‖_F < tol``.
    beta, beta_init, gamma : float
        Thresholding parameters: ``β = 1/(2 (mn)^{1/4})``, ``β_init = 4β``, ``γ = 0.5``.
    random_state : int
        Seed of ARPACK's start vectors (the result does not depend on it beyond round-off).

    Returns
    -------
    dict
        ``L``, ``S``, ``U`` (m, r), ``sigma`` (r,), ``V`` (n, r) with ``L = U diag(σ) Vᵀ``,
        ``n_iter`` and ``errors`` (relative residual per iteration).

    Notes
    -----
    Each iteration projects ``Z = D − S`` onto the tangent space of the rank-r manifold at
    ``L`` (two thin QRs and an SVD of a ``2r × 2r`` matrix), truncates to rank r, and
    hard-thresholds ``D − L`` at ``ζ = β (σ_{r+1} + γ^t σ_1)``.
    """
    D = np.asarray(D, dtype=float)
    m, n = D.shape
    if not 1 <= r < min(m, n):
        raise ValueError(f"r must be between 1 and min(m, n) - 1 = {min(m, n) - 1} (not {r})")
    rng = np.random.default_rng(random_state)
    beta = 1.0 / (2.0 * (m * n) ** 0.25) if beta is None else beta
    beta_init = 4.0 * beta if beta_init is None else beta_init
    norm_D = np.linalg.norm(D)

    def top_svd(A: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        U, s, Vt = svds(A, k=k, v0=rng.standard_normal(min(A.shape)))
        order = np.argsort(s)[::-1]
        return U[:, order], s[order], Vt[order].T

    # Initialisation by thresholding, rank-r truncation, thresholding again.
    S = hard_threshold(D, beta_init * top_svd(D, 1)[1][0])
    U, sigma, V = top_svd(D - S, r)
    L = (U * sigma) @ V.T
    S = hard_threshold(D - L, beta * sigma[0])
    errors = [float(np.linalg.norm(D - L - S) / norm_D)]
    t = 0
    for t in range(1, max_iter + 1):
        Z = D - S
        ZV = Z @ V
        ZtU = Z.T @ U
        UtZV = U.T @ ZV
        Q1, R1 = np.linalg.qr(ZtU - V @ (ZV.T @ U))  # (n, r): Zᵀ U orthogonal to V
        Q2, R2 = np.linalg.qr(ZV - U @ UtZV)  # (m, r): Z V orthogonal to U
        M = np.block([[UtZV, R1.T], [R2, np.zeros_like(R2)]])
        Um, sig_all, Vmt = np.linalg.svd(M)
        U = np.hstack([U, Q2]) @ Um[:, :r]
        V = np.hstack([V, Q1]) @ Vmt.T[:, :r]
        sigma = sig_all[:r]
        L = (U * sigma) @ V.T
        E = D - L
        S = hard_threshold(E, beta * (sig_all[r] + gamma**t * sig_all[0]))
        errors.append(float(np.linalg.norm(E - S) / norm_D))
        if errors[-1] < tol:
            break
    return {"L": L, "S": S, "U": U, "sigma": sigma, "V": V, "n_iter": t, "errors": errors}


def rpca_aap(X: np.ndarray, k: int = 1, **kwargs: Any) -> np.ndarray:
    """RPCA-AAP PCs: leading right singular vectors of the rank-k part ``L`` of ``X = L + S``."""
    return _unit_rows(accaltproj(X, k, **kwargs)["V"])


def paper_rpca_aap(X: np.ndarray, k: int = 1) -> np.ndarray:
    """The paper's RPCA-AAP: the ``rpca`` package's arithmetic on the ``d × n`` matrix.

    ``rpca.RobustPCA.fit`` subtracts ``mean(axis=0)``; fed ``Xᵀ`` (d × n) that is each
    sample's mean over its coordinates.  The PC is then the left factor ``U`` (d-dimensional).
    """
    D = X.T - X.T.mean(axis=0)
    return _unit_rows(accaltproj(D, k)["U"])


# ---------------------------------------------------------------------------- M-estimators
def _have_pyriemann() -> bool:
    try:
        import pyriemann  # noqa: F401
    except ImportError:
        return False
    return True


HAVE_PYRIEMANN = _have_pyriemann()


def tyler_scatter(
    X: np.ndarray,
    *,
    assume_centered: bool = True,
    tol: float = TYLER_TOL,
    n_iter_max: int = MEST_MAX_ITER,
) -> np.ndarray:
    """Tyler's M-estimator of scatter by pyRiemann (trace normalised to ``p``), ``(p, p)``."""
    from pyriemann.geometry.covariance import covariance_mest

    return covariance_mest(
        np.ascontiguousarray(X.T),
        "tyl",
        assume_centered=assume_centered,
        tol=tol,
        n_iter_max=n_iter_max,
    )


def tyler_pca(X: np.ndarray, k: int = 1) -> np.ndarray:
    """Top-k eigenvectors of Tyler's scatter about the known centre 0."""
    with warnings.catch_warnings():
        warnings.filterwarnings("error", "Convergence not reached")
        return top_eigvecs(tyler_scatter(X), k)[1]


def huber_constants(p: int, q: float = 0.9) -> tuple[float, float]:
    """Cut-off ``c²`` and consistency factor ``b`` of the real Huber M-estimator of scatter.

    ``c² = F⁻¹_{χ²_p}(q)``, ``b = F_{χ²_{p+2}}(c²) + c²(1 − q)/p``, so that at the Gaussian
    ``E[u(t) t] = p`` with ``t ~ χ²_p``: the fixed point is the covariance itself.
    """
    if not 0 < q <= 1:
        raise ValueError(f"q must lie in (0, 1] (not {q})")
    c2 = float(chi2.ppf(q, p)) if q < 1 else np.inf
    b = float(chi2.cdf(c2, p + 2) + (c2 * (1 - q) / p if q < 1 else 0.0))
    return c2, b


def huber_scatter(
    X: np.ndarray,
    q: float = 0.9,
    *,
    tol: float = TYLER_TOL,
    max_iter: int = MEST_MAX_ITER,
    return_info: bool = False,
) -> np.ndarray | tuple[np.ndarray, dict[str, Any]]:
    """Huber's M-estimator of scatter about the known centre 0 (real data), ``(p, p)``.

    Fixed point ``C = (1/n) Σ u(xᵢᵀC⁻¹xᵢ) xᵢxᵢᵀ`` with ``u(t) = min(1, c²/t)/b``
    (:func:`huber_constants`), started at ``XᵀX/n`` and stopped when the relative Frobenius
    change falls below ``tol``.  ``q`` is the share of samples treated as Gaussian inliers.
    """
    X = np.asarray(X, dtype=float)
    n, p = X.shape
    if n <= p:
        raise ValueError(f"Huber's scatter needs n_samples > n_features (got {n} <= {p})")
    c2, b = huber_constants(p, q)
    C = X.T @ X / n
    info: dict[str, Any] = {"converged": False}
    for it in range(1, max_iter + 1):
        cho = sla.cho_factor(C, lower=True)
        Y = sla.solve_triangular(cho[0], X.T, lower=True, check_finite=False)
        t = np.einsum("ij,ij->j", Y, Y)
        w = np.minimum(1.0, c2 / t) / b
        C_new = (X * w[:, None]).T @ X / n
        delta = np.linalg.norm(C_new - C) / np.linalg.norm(C)
        C = C_new
        if delta <= tol:
            info = {"converged": True, "n_iter": it, "weights": w}
            break
    else:
        info = {"converged": False, "n_iter": max_iter, "weights": w}
        warnings.warn(
            f"Huber scatter: not converged after {max_iter} iterations",
            RuntimeWarning,
            stacklevel=2,
        )
    return (C, info) if return_info else C


def huber_pca(X: np.ndarray, k: int = 1) -> np.ndarray:
    """Top-k eigenvectors of Huber's scatter (real constants, q = 0.9) about the centre 0."""
    return top_eigvecs(huber_scatter(X), k)[1]


def paper_mest_pca(X: np.ndarray, k: int, estimator: str) -> np.ndarray:
    """The paper's Tyler / Huber: pyRiemann's ``covariance_mest`` with its defaults.

    Defaults: centred by the sample mean, ``tol = 1e-2``, at most 50 iterations, and for
    ``"hub"`` pyRiemann's constants.  (The first releases with ``covariance_mest`` centred with
    ``X -= mean``, i.e. in the caller's array; 0.12 no longer does.)
    """
    from pyriemann.geometry.covariance import covariance_mest

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Convergence not reached")
        C = covariance_mest(np.ascontiguousarray(X.T), estimator)
    return top_eigvecs(C, k)[1]


# ---------------------------------------------------------------------------- ℓ1-PCA
def _kwak_component(
    R: np.ndarray, w: np.ndarray, rng: np.random.Generator, max_iter: int
) -> tuple[np.ndarray, int, bool]:
    """Kwak's fixed-point iteration for one component from the start ``w``."""
    w = w / np.linalg.norm(w)
    polarity = np.where(R @ w < 0, -1.0, 1.0)
    for it in range(1, max_iter + 1):
        w = R.T @ polarity
        w /= np.linalg.norm(w)
        proj = R @ w
        new = np.where(proj < 0, -1.0, 1.0)
        if np.array_equal(new, polarity):
            if not np.any(proj == 0):
                return w, it, True
            # A sample orthogonal to w: w is not a strict local maximum; nudge it (Kwak, step 4b).
            w = w + 1e-6 * rng.standard_normal(w.shape)
            w /= np.linalg.norm(w)
            new = np.where(R @ w < 0, -1.0, 1.0)
        polarity = new
    return w, max_iter, False


def l1_pca(
    X: np.ndarray,
    k: int = 1,
    *,
    max_iter: int = 1000,
    random_state: int = 0,
    return_info: bool = False,
) -> np.ndarray | tuple[np.ndarray, dict[str, Any]]:
    """PCA-L1 (Kwak 2008): greedy maximisation of ``Σᵢ |wᵀxᵢ|`` over unit ``w``, with deflation.

    Per component, Kwak's algorithm: polarity ``pᵢ = sign(wᵀxᵢ)`` (``+1`` at 0), flip and
    maximise ``w ← Σ pᵢxᵢ / ‖·‖``, until the polarities stop changing; if some ``wᵀxᵢ = 0`` at
    the fixed point, perturb ``w`` and continue.  The objective never decreases (Kwak's
    Theorem), but the fixed point is only a *local* maximum and Kwak leaves ``w(0)`` free: we
    run it from the two usual starts — the sample of largest norm and the ℓ2 principal
    direction — and keep the larger objective.  Next component: deflate ``xᵢ ← xᵢ − w(wᵀxᵢ)``.
    The data are used as given (Kwak assumes zero-mean data; here the inliers' mean is 0).
    """
    rng = np.random.default_rng(random_state)
    R = np.array(X, dtype=float)
    W = np.empty((k, R.shape[1]))
    info: dict[str, Any] = {"n_iter": [], "start": [], "objectives": []}
    for j in range(k):
        starts = {
            "largest sample": R[np.argmax(np.einsum("ij,ij->i", R, R))].copy(),
            "l2 PC": top_eigvecs(R.T @ R, 1)[1][0]
            if R.shape[1] <= R.shape[0]
            else R.T @ top_eigvecs(R @ R.T, 1)[1][0],
        }
        best = None
        objectives = {}
        for label, w0 in starts.items():
            w, it, ok = _kwak_component(R, w0, rng, max_iter)
            if not ok:
                warnings.warn(
                    f"l1_pca: component {j} from the {label} not converged in {max_iter} "
                    "iterations",
                    RuntimeWarning,
                    stacklevel=2,
                )
            objectives[label] = l1_objective(R, w)
            if best is None or objectives[label] > best[0]:
                best = (objectives[label], w, it, label)
        assert best is not None
        info["n_iter"].append(best[2])
        info["start"].append(best[3])
        info["objectives"].append(objectives)
        W[j] = best[1]
        R -= np.outer(R @ best[1], best[1])
    W = _unit_rows(W.T)
    return (W, info) if return_info else W


def l1_objective(X: np.ndarray, w: np.ndarray) -> float:
    """``Σᵢ |wᵀxᵢ| / ‖w‖``."""
    return float(np.abs(X @ w).sum() / np.linalg.norm(w))


# ---------------------------------------------------------------------------- MS-PCA
def ms_pca(
    X: np.ndarray, k: int = 1, *, n_components: int = 10, seed: int = 0, **kwargs: Any
) -> np.ndarray:
    """mspca_dask.fit defaults (location="auto"): the first k stable components (maybe fewer)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mspca_dask.NoSpikeWarning)
        res = mspca_dask.fit(
            X,
            n_components=n_components,
            random_state=seed,
            scheduler="sync",
            **{"solver": "exact", **kwargs},
        )
    return np.asarray(res.components)[:k]


def paper_rule(X: np.ndarray, k: int = 1, *, n_components: int = 10, seed: int = 0) -> np.ndarray:
    """The paper's Algorithm 1 as written: one knockoff (π' = 1, θ'² = 2g⁻¹(λ̃₁)), unit noise,
    ``ε = C n^{-1/2}`` with ``C = 1/c`` for ``c < 1``, keep eigenpairs with *any* knockoff
    eigenvalue within ε.  Exact eigenvalues; the knockoff spectrum by the rank-2 update
    ``S + m'x̄ᵀ + x̄m'ᵀ + m'm'ᵀ``.  Same as ``benchmarks/accuracy.py``'s ``paper-rule``."""
    rng = np.random.default_rng(seed)
    n, d = X.shape
    c = d / n
    S = X.T @ X / n
    lam, U = top_eigvecs(S, n_components)
    t2 = 2 * float(rmt.spike_inverse(lam[0], c))
    m = rng.standard_normal(d)
    m *= np.sqrt(t2) / np.linalg.norm(m)
    xbar = X.mean(axis=0)
    lk, _ = top_eigvecs(S + np.outer(m, xbar) + np.outer(xbar, m) + np.outer(m, m), n_components)
    eps = rmt.invariance_threshold(n, c, 1.0)
    keep = [i for i in range(n_components) if np.min(np.abs(lam[i] - lk)) < eps]
    return U[keep][:k]


#: name → estimator(X, k) for the comparison tables, in the paper's column order.
METHODS: dict[str, Callable[..., np.ndarray]] = {
    "MS-PCA": ms_pca,
    "RPCA-AAP": rpca_aap,
    "Tyler": tyler_pca,
    "Huber": huber_pca,
    "l1-PCA": l1_pca,
    "winsorized-PCA": winsorized_pca,
    "centred-PCA": centred_pca,
    "vanilla-PCA": vanilla_pca,
    "paper-rule": paper_rule,
}
