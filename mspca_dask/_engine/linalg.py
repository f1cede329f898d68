"""Driver-side linear algebra of the spectra (pure NumPy/SciPy, no Dask, no I/O).

Every spectrum MS-PCA needs is that of a *low-rank modification* of the data,
``X̃ = X + Σ_r a_r f_rᵀ`` with sample-side vectors ``a_r`` (n,) and feature-side vectors
``f_r`` (d,): the location ``−1 μᵀ`` and each knockoff ``γ' m'ᵀ``.  In the operator space of
:mod:`mspca_dask._passes` (``M = X`` or ``Xᵀ``, size ``p``) this reads
``M̃ = M + O Pᵀ`` with ``O`` on the big side and ``P`` on the operator side, so

    M̃ᵀM̃ / n = (MᵀM + (MᵀO) Pᵀ + P (MᵀO)ᵀ + P (OᵀO) Pᵀ) / n.

Only ``MᵀM`` touches the data (a pass); ``MᵀO`` is a side product of a pass and ``P``, ``OᵀO``
are small.  So the original and every knockoff spectrum come from the *same* passes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import scipy.linalg as sla

_F = TypeVar("_F", bound=Callable[..., Any])

#: Driver-side products with at most this many elements in their largest operand run on one
#: BLAS thread (see :func:`_one_blas_thread`).
ONE_THREAD_MAX_SIZE = 2**24

#: Dense symmetric eigensolves up to this size run on one BLAS thread.  Their tridiagonal
#: reduction is a sequence of small level-2 steps that threads only synchronise: a 500 x 500
#: top-11 ``eigh`` took 0.06 s on one thread and 3.5 s on two on a loaded 2-core machine
#: (1-minute load 10), which made it 13 of the 19 s of a 500-sample genomics fit.
SERIAL_EIGH_MAX = 1024
_controller: Any = None


def _one_blas_thread(func: _F, max_size: int = ONE_THREAD_MAX_SIZE) -> _F:
    """Run ``func`` with BLAS limited to one thread when its array arguments are small.

    The randomized solver's driver work is tall-skinny products, QR and small ``eigh`` on a
    ``(p, L)`` basis (L a few hundred).  On a loaded machine OpenBLAS's thread hand-offs made
    them 5 to 30 times slower with 2 threads than with 1 (measured on the 2-core benchmark
    machine at load 10: Rayleigh–Ritz on 4000 × 300 in 0.52 s against 0.12 s, orthonormalising
    40 columns against it in 2.4–3.5 s against 0.12 s); on a quiet machine one thread costs
    little at these sizes.  Larger operands (more than ``max_size`` elements) keep every
    thread.
    """

    @functools.wraps(func)
    def run(*args: Any, **kwargs: Any) -> Any:
        global _controller
        size = max((a.size for a in args if isinstance(a, np.ndarray)), default=0)
        if size > max_size:
            return func(*args, **kwargs)
        if _controller is None:
            from threadpoolctl import ThreadpoolController

            _controller = ThreadpoolController()
        with _controller.limit(limits=1, user_api="blas"):
            return func(*args, **kwargs)

    return run  # type: ignore[return-value]


__all__ = [
    "LowRank",
    "apply_operator",
    "dense_operator",
    "top_eigh",
    "rayleigh_ritz",
    "project_lowrank",
    "projected_ritz",
    "ritz_pairs",
    "ritz_bounds",
    "orthonormalize",
    "flip_signs",
]


@dataclass(frozen=True)
class LowRank:
    """The low-rank part of ``M̃ᵀM̃`` in operator space.

    Attributes
    ----------
    P : (p, r) ndarray
        Operator-side factors.
    MtO : (p, r) ndarray
        ``MᵀO``: the data applied to the big-side factors.
    OtO : (r, r) ndarray
        Gram matrix of the big-side factors.
    """

    P: np.ndarray
    MtO: np.ndarray
    OtO: np.ndarray

    @classmethod
    def empty(cls, p: int) -> LowRank:
        z = np.zeros((p, 0))
        return cls(P=z, MtO=z, OtO=np.zeros((0, 0)))

    @property
    def rank(self) -> int:
        return int(self.P.shape[1])


@_one_blas_thread
def apply_operator(MtMV: np.ndarray, V: np.ndarray, lowrank: LowRank, n: int) -> np.ndarray:
    """``M̃ᵀM̃ V / n`` given ``MᵀM V`` (from a pass) and ``V``, both ``(p, a)``."""
    out = np.array(MtMV, dtype=float, copy=True)
    if lowrank.rank:
        PtV = lowrank.P.T @ V
        out += lowrank.MtO @ PtV
        out += lowrank.P @ (lowrank.MtO.T @ V)
        out += lowrank.P @ (lowrank.OtO @ PtV)
    return out / n


def dense_operator(MtM: np.ndarray, lowrank: LowRank, n: int) -> np.ndarray:
    """Dense ``M̃ᵀM̃ / n`` (p, p) from the Gram matrix ``MᵀM``."""
    A = np.array(MtM, dtype=float, copy=True)
    if lowrank.rank:
        B = lowrank.MtO @ lowrank.P.T
        A += B + B.T
        A += lowrank.P @ lowrank.OtO @ lowrank.P.T
    A = (A + A.T) / 2  # exact symmetry for eigh
    return A / n


@functools.partial(_one_blas_thread, max_size=SERIAL_EIGH_MAX**2)
def top_eigh(A: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` eigenpairs of a dense symmetric matrix, eigenvalues descending.

    Returns
    -------
    values : (k,) ndarray
    vectors : (p, k) ndarray
    """
    p = A.shape[0]
    k = min(k, p)
    w, V = sla.eigh(A, subset_by_index=[p - k, p - 1])
    return w[::-1].copy(), V[:, ::-1].copy()


@_one_blas_thread
def orthonormalize(
    V: np.ndarray, against: np.ndarray | None = None, tol: float = 1e-10
) -> np.ndarray:
    """Orthonormal basis of ``V`` projected off ``against`` (both passes twice, "twice is enough").

    Columns that fall below ``tol`` of their original norm after projection are dropped.
    """
    V = np.array(V, dtype=float, copy=True)
    norms0 = np.linalg.norm(V, axis=0)
    norms0[norms0 == 0] = 1.0
    for _ in range(2):
        if against is not None and against.shape[1]:
            V -= against @ (against.T @ V)
    keep = np.linalg.norm(V, axis=0) > tol * norms0
    V = V[:, keep]
    if V.shape[1] == 0:
        return V
    Q, R = np.linalg.qr(V)
    good = np.abs(np.diag(R)) > tol * np.max(np.abs(np.diag(R)))
    Q = Q[:, good]
    if against is not None and against.shape[1]:
        Q -= against @ (against.T @ Q)
        Q, _ = np.linalg.qr(Q)
    return Q


def project_lowrank(QtP: np.ndarray, QtMtO: np.ndarray, lowrank: LowRank) -> np.ndarray:
    """``Qᵀ L Q`` (L, L) for the low-rank part ``L`` of :class:`LowRank`, from ``QᵀP`` and
    ``QᵀMᵀO`` (both (L, r)): ``L V = MᵀO (PᵀV) + P (OᵀM V) + P OᵀO (PᵀV)``."""
    if not lowrank.rank:
        return np.zeros((QtP.shape[0], QtP.shape[0]))
    B = QtMtO @ QtP.T
    return B + B.T + QtP @ lowrank.OtO @ QtP.T


@_one_blas_thread
def ritz_pairs(H: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The top ``min(k + 1, L)`` eigenpairs of the projected operator ``H`` (L, L), descending.

    ``H`` is symmetrised first.  Only the top k + 1 are computed (the (k+1)-th for the gap of
    the k-th): a partial eigensolver, since the basis grows to hundreds of columns and this
    runs for every spectrum after every pass (a full eigh was a third of a fit's time).
    """
    H = (H + H.T) / 2
    L = H.shape[0]
    top = min(min(k, L) + 1, L)
    w, Y = sla.eigh(H, subset_by_index=[L - top, L - 1], driver="evr")
    return w[::-1].copy(), Y[:, ::-1].copy()


def ritz_bounds(w: np.ndarray, R: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Residual norms and quadratic (Kato–Temple) bounds of the first ``R.shape[1]`` Ritz pairs.

    Each pair's bound is the smallest ``‖R_B‖² / (δ_B − ‖R_B‖)`` over the runs ``B`` of
    consecutive Ritz pairs that hold it, with ``R_B`` the block of their residuals (its
    spectral norm, bounded above by the Frobenius norm of ``R_Bᵀ R_B``) and ``δ_B`` the
    distance from their Ritz values to the nearest Ritz value outside the run; the residual
    itself where no run has a positive gap.  A run of one pair is the
    Kato–Temple bound; a longer one is its block form (the quadratic residual bound for a
    Hermitian matrix split into the run's Ritz space and the rest: R.-C. Li and C.-K. Li,
    2005), which stays quadratic for eigenvalues too close together for their own gaps to
    separate them, as long as the cluster is apart from the rest.

    Parameters
    ----------
    w : (t,) ndarray
        Ritz values, descending (at least one more than the pairs bounded, when available).
    R : (p, kk) ndarray
        Residuals ``Op x − θ x`` of the first ``kk`` Ritz pairs.

    Returns
    -------
    residuals, bounds : (kk,) ndarrays
        See :func:`rayleigh_ritz`.
    """
    res = np.linalg.norm(R, axis=0)
    kk = R.shape[1]
    if kk == 0:
        return res, res.copy()
    # ‖R_B‖² = λ_max(R_Bᵀ R_B) ≤ its Frobenius norm, for every run at once from prefix sums
    sq = np.zeros((kk + 1, kk + 1))
    sq[1:, 1:] = np.cumsum(np.cumsum((R.T @ R) ** 2, axis=0), axis=1)
    a, b = np.triu_indices(kk)  # every run a..b
    e2 = np.sqrt(np.maximum(sq[b + 1, b + 1] - sq[a, b + 1] - sq[b + 1, a] + sq[a, a], 0.0))
    above = np.where(a > 0, w[np.maximum(a - 1, 0)] - w[a], np.inf)
    below = np.where(b + 1 < w.size, w[b] - w[np.minimum(b + 1, w.size - 1)], np.inf)
    gap = np.minimum(above, below) - np.sqrt(e2)
    runs = np.full((kk, kk), np.inf)  # [a, b]: the bound of run a..b
    runs[a, b] = np.where(np.isfinite(gap) & (gap > 0), e2 / np.where(gap > 0, gap, 1.0), np.inf)
    # each pair i takes the best run a..b that holds it: the least over b >= i, then a <= i
    ending_later = np.minimum.accumulate(runs[:, ::-1], axis=1)[:, ::-1]
    held = np.where(np.arange(kk)[:, None] <= np.arange(kk)[None, :], ending_later, np.inf)
    return res, np.minimum(res, held.min(axis=0))


@_one_blas_thread
def rayleigh_ritz(
    Q: np.ndarray, OpQ: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Top-``k`` Ritz pairs of a symmetric operator on ``span(Q)`` with exact residuals.

    Parameters
    ----------
    Q : (p, L) ndarray
        Orthonormal basis.
    OpQ : (p, L) ndarray
        The operator applied to ``Q`` (exact, from the passes).
    k : int

    Returns
    -------
    values : (k,) ndarray, descending
    coef : (L, k) ndarray
        Ritz vectors are ``Q @ coef``; the operator applied to them is ``OpQ @ coef``.
    residuals : (k,) ndarray
        ``‖Op x − θ x‖``: by the Bauer–Fike theorem for symmetric matrices an eigenvalue lies
        within this distance of ``θ``.
    bounds : (k,) ndarray
        The quadratic bounds of :func:`ritz_bounds`: ``min(r, r² / (δ − r))`` with ``δ`` the
        distance from ``θ`` to the nearest *other* Ritz value (Kato–Temple), or the same for a
        run of Ritz values close together and apart from the rest (its block form); ``r``
        where no positive gap is available.

    Notes
    -----
    Kato–Temple needs the gap to the rest of the *true* spectrum; the Ritz values stand in
    for it.  So ``bounds`` is a certificate on the condition that ``span(Q)`` has not
    missed an eigenvalue nearer to ``θ`` than the Ritz gap (a block Krylov space grown from a
    random block misses one with negligible probability); ``residuals`` hold unconditionally.
    """
    w, Y = ritz_pairs(Q.T @ OpQ, k)
    kk = min(k, Q.shape[1])
    res, bounds = ritz_bounds(w, OpQ @ Y[:, :kk] - Q @ (Y[:, :kk] * w[:kk]))
    return w[:kk], Y[:, :kk], res, bounds


@_one_blas_thread
def projected_ritz(
    Q: np.ndarray,
    Z: np.ndarray,
    QtZ: np.ndarray,
    lowrank: LowRank,
    n: int,
    k: int,
    base: LowRank | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """:func:`rayleigh_ritz` of ``(MᵀM + L)/n`` on ``span(Q)``, from ``QᵀZ`` (``Z = MᵀM Q``).

    The projected operator is ``(QᵀZ + Qᵀ L Q)/n`` (:func:`project_lowrank`) and the operator
    is applied to the ``k`` Ritz vectors only: every spectrum of one basis (the original, each
    knockoff, the earlier blocks') shares ``QᵀZ``, and none costs the ``p L²`` product of
    ``Q`` with the operator's image of the whole basis.

    Parameters
    ----------
    Q, Z : (p, L) ndarrays
        Orthonormal basis and ``MᵀM Q``.
    QtZ : (L, L) ndarray
        ``QᵀZ``.
    lowrank : LowRank
    n : int
        The operator's divisor.
    k : int
    base : LowRank, optional
        Also return the operator with this low-rank part applied to the Ritz vectors.

    Returns
    -------
    values : (kk,) ndarray, descending
    vectors : (p, kk) ndarray
    bounds : (kk,) ndarray
        As :func:`rayleigh_ritz`'s (no rounding term).
    op_vectors : (p, kk) ndarray or None
        ``(MᵀM + base)/n`` applied to ``vectors`` when ``base`` is given.
    """
    projected = project_lowrank(Q.T @ lowrank.P, Q.T @ lowrank.MtO, lowrank)
    w, Y = ritz_pairs((QtZ + projected) / n, k)
    kk = min(k, Q.shape[1])
    coef = Y[:, :kk]
    V, ZY = Q @ coef, Z @ coef
    _res, bounds = ritz_bounds(w, apply_operator(ZY, V, lowrank, n) - V * w[:kk])
    op_vectors = None if base is None else apply_operator(ZY, V, base, n)
    return w[:kk], V, bounds, op_vectors


def flip_signs(vectors: np.ndarray) -> np.ndarray:
    """Deterministic signs: the largest-magnitude entry of each column is positive.

    The same convention as scikit-learn's ``svd_flip`` (``u_based_decision=False``) applied to
    components stored as columns.
    """
    V = np.array(vectors, dtype=float, copy=True)
    if V.size == 0:
        return V
    idx = np.argmax(np.abs(V), axis=0)
    signs = np.sign(V[idx, np.arange(V.shape[1])])
    signs[signs == 0] = 1.0
    return V * signs
