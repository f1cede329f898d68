"""The covariance within the groups, at the inliers' scale: its top eigenpairs, certified.

The verdict's model lets the groups share one covariance shape at their own scales (a batch
with more noise, a population of another diversity).  Its covariance components are the
spikes of

    S_w = X_wᵀ W X_w / n,   X_w = X − Σ_g 1_g μ_gᵀ,   W = diag(1 / τ_g(i)),

every row less its group's mean and weighted by its group's inverse scale ``τ_g``: the
group's mean within-group variance over the inliers' (group 0's), from the first pass's
per-sample sums of squares and the groups' sums (:func:`group_scales`).  Pooled rows of
different scales would let a noisier group's own noise make spikes.

``W`` is no low-rank update of the operator the passes built, so ``S_w`` has passes of its
own: the exact solver reads ``XᵀWX`` once (primal; dual, ``W^{1/2}(I − P)XXᵀ(I − P)W^{1/2}``
comes from the Gram matrix it holds); the randomized solver runs a block-Krylov iteration on
``S_w`` from the pooled within-group spectrum's Ritz vectors until its eigenvalues above the
edge are certified to ``tol``, as the main spectrum's are.  ``P`` projects on the groups'
indicators (re-centring each group at its mean).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import scipy.linalg as sla

from .. import rmt
from ..errors import ConvergenceWarning
from . import spectra
from .linalg import flip_signs, orthonormalize, rayleigh_ritz, top_eigh
from .spectra import rise_and_ratio

if TYPE_CHECKING:
    from .plan import FitPlan
    from .spectra import PassReader

__all__ = ["WithinGroups", "WithinSolution", "group_scales", "ritz_start", "within_spectrum"]


def group_scales(sample_sumsq: np.ndarray, members: np.ndarray, sums: np.ndarray) -> np.ndarray:
    """Each group's scale ``τ_g``: its mean within-group variance over the inliers'.

    Parameters
    ----------
    sample_sumsq : (n,) ndarray
        ``‖x_i‖²`` of every sample.
    members : (n, G) ndarray
        The groups' 0/1 indicators (group 0 the inliers), every sample in one.
    sums : (d, G) ndarray
        ``Xᵀ1_g``.

    Returns
    -------
    (G,) ndarray
        ``τ_0 = 1``; a group of fewer than two samples, or without spread, keeps 1.
    """
    counts = members.sum(axis=0)
    within = members.T @ sample_sumsq - np.sum(sums * sums, axis=0) / np.maximum(counts, 1)
    var = within / np.maximum(counts - 1, 1)
    ok = (counts >= 2) & (var > 0)
    if not ok[0]:
        return np.ones(members.shape[1])
    return np.where(ok, var / var[0], 1.0)


@dataclass(frozen=True)
class WithinGroups:
    """The groups as ``S_w`` sees them.

    Attributes
    ----------
    members : (n, G) ndarray
        0/1 indicators, group 0 the inliers.
    means : (d, G) ndarray
        ``μ_g``.
    weights : (G,) ndarray
        ``1 / τ_g``.
    trace : float
        ``tr(S_w)``.
    """

    members: np.ndarray
    means: np.ndarray
    weights: np.ndarray
    trace: float

    @classmethod
    def of(cls, members: np.ndarray, sums: np.ndarray, sample_sumsq: np.ndarray) -> WithinGroups:
        """From the groups' indicators ``(n, G)``, sums ``Xᵀ1_g (d, G)`` and ``‖x_i‖² (n,)``."""
        counts = members.sum(axis=0)
        weights = 1.0 / group_scales(sample_sumsq, members, sums)
        within = members.T @ sample_sumsq - np.sum(sums * sums, axis=0) / counts
        trace = float(weights @ within) / members.shape[0]
        return cls(members, sums / counts, weights, trace)

    @property
    def counts(self) -> np.ndarray:
        return self.members.sum(axis=0)

    @property
    def row_weights(self) -> np.ndarray:
        """(n,) ``w_i = 1 / τ_g(i)``."""
        return self.members @ self.weights

    def recentre(self, y: np.ndarray) -> np.ndarray:
        """``(I − P) y`` for sample-side ``y`` (n, k): each group's entries less their mean."""
        return y - self.members @ ((self.members.T @ y) / self.counts[:, None])

    def mean_term(self, V: np.ndarray) -> np.ndarray:
        """``Σ_g w_g n_g μ_g μ_gᵀ V`` (d, k): ``X_wᵀWX_w = XᵀWX −`` this."""
        return self.means @ ((self.weights * self.counts)[:, None] * (self.means.T @ V))


@dataclass(frozen=True)
class WithinSolution:
    """Top eigenpairs of ``S_w`` in feature space, with the samples' products."""

    values: np.ndarray  # (k,)
    bounds: np.ndarray  # (k,) certified error bounds (0: exact)
    components: np.ndarray  # (d, k) unit columns, signs fixed by flip_signs
    X_components: np.ndarray  # (n, k) X v for each component v
    line: float  # the candidate line at S_w's own noise level


def ritz_start(
    groups: WithinGroups,
    Q: np.ndarray,
    n: int,
    width: int,
    *,
    gram: Callable[[np.ndarray], np.ndarray],
) -> np.ndarray:
    """Rayleigh–Ritz of ``S_w``'s dual operator on the main Krylov basis, without a pass.

    ``gram`` applies ``XXᵀ`` to vectors in ``span(Q)``, which holds the groups' indicators, so
    ``(I − P)q`` stays there: on ``span(W^{-1/2} Q)`` the operator
    ``W^{1/2}(I − P)XXᵀ(I − P)W^{1/2}`` reads ``qᵀ(I − P)XXᵀ(I − P)q'`` over the Gram
    ``qᵀW⁻¹q'``, a generalized eigenproblem.

    Returns
    -------
    (p, width) ndarray
        The top Ritz vectors (operator side, orthonormal): the first block of :func:`_krylov`.
    """
    RQ = groups.recentre(Q)
    H = RQ.T @ gram(RQ) / n
    B = Q.T @ (Q / groups.row_weights[:, None])
    C = sla.eigh((H + H.T) / 2, (B + B.T) / 2)[1]
    return orthonormalize((Q / np.sqrt(groups.row_weights)[:, None]) @ C[:, ::-1][:, :width])


Read = Callable[..., dict[str, np.ndarray]]


def within_spectrum(
    plan: FitPlan,
    read: PassReader,
    groups: WithinGroups,
    *,
    gram: np.ndarray | None,
    start: np.ndarray | None,
) -> WithinSolution:
    """Top-K eigenpairs of ``S_w`` (module docstring), by the fit's solver.

    Parameters
    ----------
    plan : FitPlan
    read : PassReader
    groups : WithinGroups
    gram : (p, p) ndarray or None
        The exact solver's Gram matrix ``MᵀM``; None for the randomized solver.
    start : (p, b) ndarray or None
        The randomized solver's first block (operator side): :func:`ritz_start`'s vectors
        (dual), or the pooled within-group spectrum's Ritz vectors.
    """
    if gram is not None:
        return _exact(plan, read, groups, gram)
    if start is None:
        raise RuntimeError("the randomized within-group solve needs a first block")
    return _krylov(plan, read, groups, start)


def _line(plan: FitPlan, trace: float, values: np.ndarray) -> tuple[float, float, float]:
    """``(σ², edge, candidate line)`` of ``S_w`` from its trace and top values."""
    n, d = plan.n_samples, plan.n_features
    s2 = rmt.estimate_noise_variance(trace, values, n, d)
    edge = rmt.mp_edges(d / n, s2)[1]
    return s2, edge, edge + plan.params.edge_margin * rmt.tracy_widom_scale(n, d, s2)


def _unit(raw: np.ndarray, X_raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unit feature-space columns of ``raw`` (d, k) and ``X`` applied to them."""
    norm = np.maximum(np.linalg.norm(raw, axis=0), 1e-300)
    V, XV = raw / norm, X_raw / norm
    Vf = flip_signs(V)
    signs = np.where(np.sum(Vf * V, axis=0) < 0, -1.0, 1.0)
    return Vf, XV * signs


def _exact(
    plan: FitPlan, read: PassReader, groups: WithinGroups, gram: np.ndarray
) -> WithinSolution:
    n, K = plan.n_samples, plan.params.n_components
    if plan.dual:
        # W^{1/2}(I − P) XXᵀ (I − P) W^{1/2} / n from the Gram matrix: no pass for the values
        R = np.eye(n) - groups.members @ (groups.members / groups.counts).T
        DR = np.sqrt(groups.row_weights)[:, None] * R
        values, U = top_eigh(DR @ gram @ DR.T / n, K)
        Y = DR.T @ U  # (I − P) W^{1/2} u
        raw = read("mspca-within-scores", keep=Y)["keep"]  # X_wᵀW^{1/2}u (d, k)
        V, XV = _unit(raw, gram @ Y)
    else:
        out = read("mspca-within-gram", gram=True, row_weights=groups.row_weights)
        d = plan.n_features
        A = (out["gram"] - groups.mean_term(np.eye(d))) / n
        values, V0 = top_eigh((A + A.T) / 2, K)
        XV0 = read("mspca-within-scores", keep=V0)["keep"]
        V, XV = _unit(V0, XV0)
    _, _, line = _line(plan, groups.trace, values)
    return WithinSolution(values, np.zeros(len(values)), V, XV, line)


def _krylov(
    plan: FitPlan,
    read: PassReader,
    groups: WithinGroups,
    start: np.ndarray,
) -> WithinSolution:
    """Block Krylov on ``S_w`` (operator side) from ``start``, one pass per block.

    Primal, the operator is ``S_w`` itself, read by Krylov products with the rows weighted;
    dual, it is ``W^{1/2}(I − P) XXᵀ (I − P) W^{1/2} / n`` (same nonzero spectrum), read by
    plain Krylov products of ``(I − P) W^{1/2} V``.  Stops as the main spectrum does
    (:meth:`~mspca_dask._engine.spectra.KrylovSpectra.settled`), on ``S_w``'s own edge and
    line: after two passes at least (the start's own Ritz values are no earlier estimate:
    the first pass reproduces them on its block, so only a second can show them still
    moving), every Ritz value above the edge has a bound within ``tol`` and moved by less
    than ``tol`` in the last pass, as many are above the edge as after the previous one, and
    the largest one below it, extrapolated, stays below the line; or at the pass budget
    (``max_passes``, at least two passes), with a
    :class:`~mspca_dask.errors.ConvergenceWarning`.
    """
    prm, n, K = plan.params, plan.n_samples, plan.params.n_components
    sqrt_w = np.sqrt(groups.row_weights)
    Q = np.zeros((plan.p, 0))
    AQ = np.zeros((plan.p, 0))
    feats: list[np.ndarray] | None = []  # primal: X Q (n, ·); dual: Xᵀ(I − P)W^{1/2}Q (d, ·)
    samples: list[np.ndarray] = []  # dual: XXᵀ(I − P)W^{1/2}Q (n, ·)
    V = orthonormalize(start)
    history: list[np.ndarray] = []
    budget = max(prm.max_passes - read.n_passes, 2)
    settled, bound, tol = False, np.inf, 0.0
    values = coef = bounds = np.zeros(0)
    for step in range(budget):
        keep = feats is not None and (
            sum(f.nbytes for f in feats) + 8 * plan.m * V.shape[1] <= spectra.BASIS_IMAGE_BUDGET
        )
        if not keep:
            feats = None
        name = f"mspca-within-{step + 1}"
        if plan.dual:
            Y = groups.recentre(sqrt_w[:, None] * V)
            out = read(name, krylov=Y, krylov_images=keep)
            samples.append(out["krylov"])
            AV = sqrt_w[:, None] * groups.recentre(out["krylov"]) / n
        else:
            out = read(name, krylov=V, krylov_images=keep, row_weights=groups.row_weights)
            AV = (out["krylov"] - groups.mean_term(V)) / n
        if feats is not None:
            feats.append(out["krylov_image"])
        Q, AQ = np.column_stack([Q, V]), np.column_stack([AQ, AV])
        values, coef, _, bounds = rayleigh_ritz(Q, AQ, K)
        s2, edge, line = _line(plan, groups.trace, values)
        tol = prm.tol if prm.tol is not None else rmt.eigenvalue_tolerance(n, s2)
        above = values > edge
        bound = float(np.max(bounds[above], initial=0.0))
        if history and len(history[-1]) == len(values):
            rise, ratio = rise_and_ratio(values, history)
            was_above = history[-1] > edge
            moved = float(np.max(np.abs(rise[above | was_above]), initial=0.0))
            projected = values + np.maximum(rise, 0.0) * ratio / (1.0 - ratio)
            below = np.flatnonzero(~above)
            climbing = bool(below.size) and bool(projected[below[0]] >= line)
            settled = (
                bound <= tol
                and moved <= tol
                and int(above.sum()) == int(was_above.sum())
                and not climbing
            )
        history.append(values)
        V = orthonormalize(AV, against=Q)
        if settled or V.shape[1] == 0 or Q.shape[1] >= plan.p:
            settled = settled or Q.shape[1] >= plan.p
            break
    if not settled:
        warnings.warn(
            f"the within-group covariance's solver stopped at its pass budget "
            f"({prm.max_passes}) with an eigenvalue error bound of {bound:.3g}, above the "
            f"target {tol:.3g}; its covariance components may be unreliable. Raise "
            f"max_passes or use solver='exact'.",
            ConvergenceWarning,
            stacklevel=5,
        )
    U = Q @ coef  # operator-side Ritz vectors
    if plan.dual:
        Y = groups.recentre(sqrt_w[:, None] * U)
        X_raw = np.column_stack(samples) @ coef  # XXᵀ(I − P)W^{1/2}u
        raw = (
            np.column_stack(feats) @ coef
            if feats is not None
            else read("mspca-within-scores", keep=Y)["keep"]
        )
        V, XV = _unit(raw, X_raw)
    else:
        XU = (
            np.column_stack(feats) @ coef
            if feats is not None
            else read("mspca-within-scores", keep=U)["keep"]
        )
        V, XV = _unit(U, XU)
    _, _, line = _line(plan, groups.trace, values)
    return WithinSolution(values, bounds, V, XV, line)
