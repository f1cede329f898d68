"""The covariance within the groups, at the inliers' scale: its top eigenpairs, certified.

The verdict's model lets the groups share one covariance shape at their own scales (a batch
with more noise, a population of another diversity).  Its covariance components are the
spikes of

    S_w = X_wᵀ W X_w / n,   X_w = X − Σ_g 1_g μ_gᵀ,   W = diag(1 / τ_g(i)),

every row less its group's mean and weighted by its group's inverse scale ``τ_g``: the
group's mean within-group variance over the inliers' (group 0's), from the first pass's
per-sample sums of squares and the groups' sums (:func:`group_scales`).  Pooled rows of
different scales would let a noisier group's own noise make spikes.  The groups are weighted
only when their spreads differ at the fit's level ``α``
(:func:`~mspca_dask.verdict.pairs.spread_z`); otherwise ``W = I`` and ``S_w`` is the pooled
within-group covariance, a low-rank update of the main operator that needs no pass when the
main basis certifies its eigenvalues above the edge to ``tol`` (:func:`certified`); a spike
the shift hid from the main spectrum may lie in that basis only roughly, and the iteration
below then finishes it from the basis.

A weighted ``W`` is no low-rank update of the operator the passes built, so ``S_w`` then has
passes of its own: the exact solver reads ``XᵀWX`` once (primal; dual,
``W^{1/2}(I − P)XXᵀ(I − P)W^{1/2}`` comes from the Gram matrix it holds); the randomized
solver runs a block-Krylov iteration on ``S_w`` (:class:`WithinKrylov`) until its eigenvalues
above the edge are certified to ``tol``, as the main spectrum's are, its blocks riding on the
main spectrum's passes while there are any; in the dual orientation it starts from the main
Krylov basis, on which its operator is known without a pass.  ``P`` projects on the groups'
indicators (re-centring each group at its mean).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy.special import ndtri

from .. import rmt
from ..errors import ConvergenceWarning
from ..verdict.pairs import own_spread_p, spread_z
from . import spectra
from .linalg import flip_signs, orthonormalize, rayleigh_ritz, ritz_bounds, ritz_pairs, top_eigh
from .spectra import rise_and_ratio

if TYPE_CHECKING:
    from .plan import FitPlan
    from .spectra import PassReader

__all__ = [
    "PendingWithin",
    "WithinGroups",
    "WithinKrylov",
    "WithinSolution",
    "candidate_line",
    "certified",
    "group_scales",
    "unit_components",
    "within_spectrum",
]


def _within_sumsq(sample_sumsq: np.ndarray, members: np.ndarray, sums: np.ndarray) -> np.ndarray:
    """(G,) each group's sum of squared distances to its mean, ``Σ_g ‖x_i‖² − ‖Xᵀ1_g‖²/n_g``."""
    counts = members.sum(axis=0)
    return members.T @ sample_sumsq - np.sum(sums * sums, axis=0) / np.maximum(counts, 1)


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
    var = _within_sumsq(sample_sumsq, members, sums) / np.maximum(counts - 1, 1)
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
        ``1 / τ_g`` when the groups differ in spread, else ones (``S_w`` is then the pooled
        within-group covariance, a low-rank update of the main operator); 0 for a group with
        a spread of its own along its shift, the others' then times ``n / n_rows``.
    trace : float
        ``tr(S_w)``.
    spread_z : float
        :func:`~mspca_dask.verdict.pairs.spread_z` of the groups (NaN: not measurable).
    own_spread : (G,) bool ndarray
        The groups left out of ``S_w``: their spread along their own shift is larger than the
        inliers' at their scale (:func:`~mspca_dask.verdict.pairs.own_spread_p`, level ``α``
        Bonferroni over the displaced groups).
    n_rows : int
        Samples in ``S_w`` (all but those of the groups left out).
    """

    members: np.ndarray
    means: np.ndarray
    weights: np.ndarray
    trace: float
    spread_z: float
    own_spread: np.ndarray
    n_rows: int

    @classmethod
    def of(
        cls,
        members: np.ndarray,
        sums: np.ndarray,
        sample_sumsq: np.ndarray,
        *,
        distances: np.ndarray,
        offsets: np.ndarray,
        level: float,
        scores: np.ndarray | None = None,
    ) -> WithinGroups:
        """From the groups' indicators ``(n, G)``, sums ``Xᵀ1_g (d, G)`` and ``‖x_i‖² (n,)``.

        The groups are brought to the inliers' scale when their spreads differ at level
        ``level`` (:func:`~mspca_dask.verdict.pairs.spread_z` on ``distances`` (n,), each
        sample's squared distance to an origin, and ``offsets`` (G,), each group mean's;
        one-sided); otherwise their scales are taken as equal, the model's estimate under
        that hypothesis.  With ``scores`` (n, k), the scores the groups were found on, a
        group whose spread along its own shift is larger than the inliers' at its scale
        (level ``level`` over the displaced groups) shares no covariance the model can read
        from it and is left out.
        """
        n, G = members.shape
        counts = members.sum(axis=0)
        means = sums / counts
        labels = members.argmax(axis=1)
        z = spread_z(distances, labels, offsets)
        differ = bool(np.isfinite(z)) and z >= float(ndtri(1.0 - level))
        scales = group_scales(sample_sumsq, members, sums) if differ else np.ones(G)
        own = np.zeros(G, dtype=bool)
        if scores is not None and G > 1:
            own = own_spread_p(scores, labels, scales) < level / (G - 1)
        n_rows = int(round(float(counts[~own].sum())))
        weights = np.where(own, 0.0, n / n_rows / scales)
        within = _within_sumsq(sample_sumsq, members, sums)
        trace = float(within @ weights) / n
        return cls(members, means, weights, trace, z, own, n_rows)

    @property
    def scaled(self) -> bool:
        """Whether the groups are weighted (their spreads differ)."""
        return bool(np.any(self.weights != 1.0))

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
    samples: int  # the samples S_w is the covariance of (those of groups left out are not)


@dataclass(frozen=True)
class PendingWithin:
    """``S_w``'s eigenpairs, known but for their data side: the image ``M Y`` of ``keep``,
    which can ride on another pass (the output pass) or have one of its own (:meth:`read`)."""

    keep: np.ndarray  # (p, k) operator-side columns Y
    complete: Callable[[np.ndarray], WithinSolution]  # from M Y (m, k)

    def read(self, read: PassReader) -> WithinSolution:
        return self.complete(read("mspca-within-scores", keep=self.keep)["keep"])


def within_spectrum(
    plan: FitPlan,
    read: PassReader,
    groups: WithinGroups,
    *,
    gram: np.ndarray | None,
    start: np.ndarray | WithinKrylov | None,
) -> WithinSolution:
    """Top-K eigenpairs of ``S_w`` (module docstring), by the fit's solver.

    Parameters
    ----------
    plan : FitPlan
    read : PassReader
    groups : WithinGroups
    gram : (p, p) ndarray or None
        The exact solver's Gram matrix ``MᵀM``; None for the randomized solver.
    start : (p, b) ndarray, WithinKrylov or None
        The randomized solver's first block (operator side), e.g. the pooled within-group
        spectrum's Ritz vectors; or an iteration already under way (grown from the main
        basis, or riding on the main spectrum's passes), to finish.
    """
    if gram is not None:
        return exact_within(plan, read, groups, gram).read(read)
    if start is None:
        raise RuntimeError("the randomized within-group solve needs a first block")
    return _krylov(plan, read, groups, start)


def _line(
    plan: FitPlan, trace: float, values: np.ndarray, n_rows: int | None = None
) -> tuple[float, float, float]:
    """``(σ², edge, candidate line)`` of ``S_w`` from its trace and top values, on
    ``n_rows`` samples (default all)."""
    n, d = n_rows or plan.n_samples, plan.n_features
    s2 = rmt.estimate_noise_variance(trace, values, n, d)
    edge = rmt.mp_edges(d / n, s2)[1]
    return s2, edge, edge + plan.params.edge_margin * rmt.tracy_widom_scale(n, d, s2)


def candidate_line(plan: FitPlan, trace: float, values: np.ndarray) -> float:
    """``S_w``'s candidate line: the edge at its own noise level plus ``edge_margin`` TW."""
    return _line(plan, trace, values)[2]


def certified(plan: FitPlan, trace: float, values: np.ndarray, bounds: np.ndarray) -> bool:
    """Whether Ritz pairs of ``S_w`` meet the iteration's certificate: every value above its
    own edge with a bound within ``tol`` (as :class:`WithinKrylov` stops).

    The pooled ``S_w`` comes from the main spectrum's basis, which converged on the main
    operator's top pairs; a spike that a shift lifted or mixed there (a shift at an angle to
    it) may lie in it only roughly, and its bound then says so.
    """
    s2, edge, _ = _line(plan, trace, values)
    return float(np.max(bounds[values > edge], initial=0.0)) <= _tolerance(plan, s2)


def _tolerance(plan: FitPlan, s2: float) -> float:
    """The eigenvalues' target accuracy: ``tol``, by default at ``S_w``'s noise level."""
    tol = plan.params.tol
    return tol if tol is not None else rmt.eigenvalue_tolerance(plan.n_samples, s2)


def unit_components(raw: np.ndarray, X_raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unit feature-space columns of ``raw`` (d, k) and ``X`` applied to them."""
    norm = np.maximum(np.linalg.norm(raw, axis=0), 1e-300)
    V, XV = raw / norm, X_raw / norm
    Vf = flip_signs(V)
    signs = np.where(np.sum(Vf * V, axis=0) < 0, -1.0, 1.0)
    return Vf, XV * signs


def exact_within(
    plan: FitPlan, read: PassReader, groups: WithinGroups, gram: np.ndarray
) -> PendingWithin:
    """The exact solver's ``S_w``: its values from the Gram matrix (dual) or from one read of
    ``XᵀWX`` (primal); the data side of its vectors pending (:class:`PendingWithin`)."""
    n, K = plan.n_samples, plan.params.n_components
    if plan.dual:
        # W^{1/2}(I − P) XXᵀ (I − P) W^{1/2} / n from the Gram matrix: no pass for the values
        R = np.eye(n) - groups.members @ (groups.members / groups.counts).T
        DR = np.sqrt(groups.row_weights)[:, None] * R
        values, U = top_eigh(DR @ gram @ DR.T / n, K)
        Y = DR.T @ U  # (I − P) W^{1/2} u; its image is X_wᵀW^{1/2}u (d, k)
        X_side = gram @ Y  # X X_wᵀW^{1/2}u (n, k)
    else:
        out = read("mspca-within-gram", gram=True, row_weights=groups.row_weights)
        d = plan.n_features
        A = (out["gram"] - groups.mean_term(np.eye(d))) / n
        values, Y = top_eigh((A + A.T) / 2, K)
        X_side = None  # X v: the image itself
    _, _, line = _line(plan, groups.trace, values, groups.n_rows)
    bounds = np.zeros(len(values))

    def complete(image: np.ndarray) -> WithinSolution:
        raw, X_raw = (image, X_side) if X_side is not None else (Y, image)
        return WithinSolution(values, bounds, *unit_components(raw, X_raw), line, groups.n_rows)

    return PendingWithin(Y, complete)


class WithinKrylov:
    """Block Krylov on ``S_w`` (operator side), one block per pass.

    Primal, the operator is ``S_w`` itself, read by Krylov products with the rows weighted;
    dual, it is ``W^{1/2}(I − P) XXᵀ (I − P) W^{1/2} / n`` (same nonzero spectrum), read by
    plain Krylov products of ``(I − P) W^{1/2} V``.  Its products are a pass's ``within``
    entry (:func:`~mspca_dask._passes.pass_graph`), so a block can ride on a pass of the main
    spectrum (:meth:`request`, :meth:`absorb`) or have a pass of its own (:meth:`step`).
    Dual, and primal with the groups unweighted, the main Krylov basis gives directions
    whose products are known without a pass (:meth:`take_basis`).  Each block is the
    operator applied to the top ``sketch_width`` Ritz vectors, off the basis: block Krylov,
    whatever the basis grew from.

    It stops as the main spectrum does
    (:meth:`~mspca_dask._engine.spectra.KrylovSpectra.settled`), on ``S_w``'s own edge and
    line: after two Rayleigh–Ritz steps at least (a start block's own Ritz values are no
    earlier estimate: its first product reproduces them, so only a second can show them
    still moving; a basis taken with its products is one step), every Ritz value above the
    edge has a bound within ``tol`` and moved by less than ``tol`` in the last step, as many
    are above the edge as after the previous one, and the largest one below it,
    extrapolated, stays below the line.

    Parameters
    ----------
    plan : FitPlan
    groups : WithinGroups
    start : (p, b) ndarray or None
        The first block to read; None when the iteration starts from :meth:`take_basis`.
    """

    def __init__(
        self, plan: FitPlan, groups: WithinGroups, start: np.ndarray | None = None
    ) -> None:
        self.plan, self.groups = plan, groups
        self._sqrt_w = np.sqrt(groups.row_weights)
        self.Q = np.zeros((plan.p, 0))
        self.AQ = np.zeros((plan.p, 0))
        self._H = np.zeros((0, 0))  # QᵀAQ
        #: primal X Q (n, ·); dual Xᵀ(I − P)W^{1/2}Q (d, ·): the components' data side
        self._images: list[np.ndarray] | None = []
        self._gram_images: list[np.ndarray] = []  # dual: XXᵀ(I − P)W^{1/2}Q (n, ·)
        #: primal: the leading columns of Q taken from the main basis, whose images X q the
        #: main basis's kept images give on demand (:meth:`solution`), not held here
        self._lazy = 0
        self._lazy_image: Callable[[np.ndarray], np.ndarray | None] | None = None
        self._next = orthonormalize(start) if start is not None else np.zeros((plan.p, 0))
        self._history: list[np.ndarray] = []
        self.reads = 0  # blocks read by passes (riding or own)
        #: rounding of the products taken from the main basis, added to every bound
        self.rounding = 0.0
        self._taken = 0  # the main basis's columns taken (:meth:`take_basis`)
        #: some products came from provisional float32 passes: certified at the end
        self.provisional = False
        #: its own blocks run at float32 on float32 chunks, their rounding in every bound
        #: (:meth:`run_single`)
        self.single = False
        self.settled = False
        self.exhausted = False
        self.bound, self.tol = np.inf, 0.0
        self.values = self.bounds = np.zeros(0)
        self._coef = self._wide = np.zeros((0, 0))

    @property
    def done(self) -> bool:
        return self.settled or self.exhausted

    @property
    def takes_basis(self) -> bool:
        """Grown from the main basis (:meth:`take_basis`)."""
        return self._taken > 0

    @property
    def steps(self) -> int:
        """Rayleigh–Ritz steps so far: blocks read and bases taken."""
        return len(self._history)

    def request(self) -> dict[str, Any]:
        """The products a pass computes for the next block."""
        V = self._next
        keep = self._images_fit(V.shape[1])
        if not keep:
            self._images = None
        # provisional: float32 products on float32 chunks steer it, the certificate is float64
        single = {"within_single": True} if self.provisional or self.single else {}
        if self.plan.dual:
            return {
                "within": self._dual_operand(V),
                "within_images": keep,
                **single,
            }
        return {
            "within": V,
            "within_images": keep,
            "row_weights": self.groups.row_weights,
            **single,
        }

    def run_single(self, rounding: float) -> None:
        """Read its own blocks at float32 on float32 chunks, as the main passes were read;
        ``rounding`` (:meth:`~mspca_dask._engine.spectra.KrylovSpectra.float32_rounding`,
        on this operator's scale) is added to every bound.  Before any block is read."""
        if self.reads:
            raise RuntimeError("the blocks' precision is set before the first is read")
        if not self.provisional:
            self.single = True
            self.rounding = max(self.rounding, rounding)

    def absorb(self, out: dict[str, np.ndarray]) -> None:
        """Take a pass's ``within`` products for the block :meth:`request` asked for."""
        plan, groups, n = self.plan, self.groups, self.plan.n_samples
        V = self._next
        if plan.dual:
            gram_image = out["within"]
            AV = self._dual_product(gram_image)
        else:
            gram_image = None
            AV = (out["within"] - groups.mean_term(V)) / n
        self.reads += 1
        self._grow(V, AV, gram_image, out.get("within_image"))

    def take_basis(
        self,
        basis: np.ndarray,
        ends: list[int],
        gram: Callable[[np.ndarray], np.ndarray],
        image: Callable[[np.ndarray], np.ndarray | None],
        rounding: float,
        provisional: bool = False,
    ) -> None:
        """Add ``span(W^{-1/2} basis)`` with its products, without a pass.

        Dual, ``basis`` (n, L) is the main Krylov basis, which holds the groups' indicators,
        so ``(I − P) W^{1/2} y`` stays in its span, where ``gram`` applies ``XXᵀ`` exactly and
        ``image`` gives ``Xᵀ`` (None when the main basis's images were not kept).  Primal,
        with the groups unweighted (``W = I``), ``basis`` (d, L) is the main basis, where
        ``gram`` applies ``XᵀX`` exactly, so ``S_w y = (XᵀX y − Σ_g n_g μ_g μ_gᵀ y) / n``, and
        ``image`` gives ``X``; weighted rows would need ``XᵀWX``, which no main pass read.  Its
        columns past those taken before are added up to each of its last two block ``ends``
        and then whole, a Rayleigh–Ritz step each: the stopping rules' history on the basis's
        earlier blocks, as the main spectrum's after the location step.  ``rounding`` bounds
        the error of those products (the main passes'), on the main operator's scale; with
        ``provisional`` (provisional float32 passes, whose rounding is not bounded) it is that
        of float64 products instead: the products only steer the iteration, and
        :meth:`solution` certifies its eigenpairs by one float64 pass.
        """
        if not self.plan.dual and (self.groups.scaled or provisional):
            raise RuntimeError(
                "primal, the main basis's products are S_w's only with unweighted groups "
                "and float64 passes (no certificate pass)"
            )
        self.provisional |= provisional
        self.rounding = max(self.rounding, float(np.max(self.groups.weights)) * rounding)
        width = basis.shape[1]
        stops = [e for e in ends if self._taken < e < width][-2:] + [width]
        for stop in stops:
            if stop > self._taken:
                self._take(basis[:, self._taken : stop], gram, image)
                self._taken = stop

    def _take(
        self,
        basis: np.ndarray,
        gram: Callable[[np.ndarray], np.ndarray],
        image: Callable[[np.ndarray], np.ndarray | None],
    ) -> None:
        """:meth:`take_basis` for some of the main basis's columns (n, l): one step."""
        Y = basis / self._sqrt_w[:, None] if self.plan.dual else basis
        coef = self.Q.T @ Y
        R = Y - self.Q @ coef
        again = self.Q.T @ R
        R, coef = R - self.Q @ again, coef + again
        U, s, Vt = np.linalg.svd(R, full_matrices=False)
        # directions already in the basis (or nearly: their products would be amplified by
        # 1/s) are left out
        new = s > 1e-6 * max(float(np.max(np.linalg.norm(Y, axis=0), initial=0.0)), 1e-300)
        if not new.any():
            return
        C = Vt[new].T / s[new]  # U[:, new] = R C

        def on_new(on_basis: np.ndarray, on_q: np.ndarray) -> np.ndarray:
            return (on_basis - on_q @ coef) @ C

        if self.plan.dual:
            centred = self.groups.recentre(basis)  # (I − P) W^{1/2} Y
            gram_image = gram(centred)
            AY = self._dual_product(gram_image)
            kept = image(centred) if self._images_fit(int(new.sum())) else None
        else:  # W = I: Y is the basis itself; its images are asked for at the end, if kept
            if self._lazy != self.Q.shape[1]:
                raise RuntimeError("primal, the main basis is taken before any block is read")
            AY = (gram(basis) - self.groups.mean_term(basis)) / self.plan.n_samples
            self._lazy += int(new.sum())
            self._lazy_image = image
            self._grow(U[:, new], on_new(AY, self.AQ), None, None, lazy=True)
            return
        img = None if kept is None else on_new(kept, self._stacked(self._images or [], self.plan.m))
        self._grow(
            U[:, new],
            on_new(AY, self.AQ),
            on_new(gram_image, self._stacked(self._gram_images, self.plan.n_samples)),
            img,
        )

    def _dual_operand(self, V: np.ndarray) -> np.ndarray:
        """Dual: ``(I − P) W^{1/2} V`` (n, k), what a pass's Gram product takes."""
        return self.groups.recentre(self._sqrt_w[:, None] * V)

    def _dual_product(self, gram_image: np.ndarray) -> np.ndarray:
        """Dual: the operator on ``V`` from ``XXᵀ(I − P)W^{1/2}V`` (n, k)."""
        return self._sqrt_w[:, None] * self.groups.recentre(gram_image) / self.plan.n_samples

    def _images_fit(self, columns: int) -> bool:
        """Whether ``columns`` more images stay within the driver's image budget (False
        once they were dropped)."""
        if self._images is None:
            return False
        held = sum(im.nbytes for im in self._images)
        return held + 8 * self.plan.m * columns <= spectra.BASIS_IMAGE_BUDGET

    def _stacked(self, images: list[np.ndarray], rows: int) -> np.ndarray:
        """The basis's images, one column per basis vector (rows, ·)."""
        return np.column_stack(images) if images else np.zeros((rows, 0))

    def _grow(
        self,
        V: np.ndarray,
        AV: np.ndarray,
        gram_image: np.ndarray | None,
        image: np.ndarray | None,
        lazy: bool = False,
    ) -> None:
        """Append ``V`` (orthonormal, off the basis) and its products; one Rayleigh–Ritz step.
        ``lazy``: primal columns from the main basis, whose images come at the end."""
        plan = self.plan
        if gram_image is not None:
            self._gram_images.append(gram_image)
        if self._images is not None and not lazy:
            if image is None:
                self._images = None
            else:
                self._images.append(image)
        # the projected operator QᵀAQ grows by the new columns only (not n L² per step)
        QtAV = self.Q.T @ AV
        self._H = np.block([[self._H, QtAV], [QtAV.T, V.T @ AV]])
        self.Q, self.AQ = np.column_stack([self.Q, V]), np.column_stack([self.AQ, AV])
        K = plan.params.n_components
        width = min(max(K, plan.sketch_width), self.Q.shape[1])
        w, coef = ritz_pairs(self._H, width)
        values, coef = w[:width], coef[:, :width]
        _, bounds = ritz_bounds(w, self.AQ @ coef - self.Q @ (coef * values))
        values, bounds = values[:K], bounds[:K] + (0.0 if self.provisional else self.rounding)
        s2, edge, line = _line(plan, self.groups.trace, values, self.groups.n_rows)
        self.tol = _tolerance(plan, s2)
        above = values > edge
        self.bound = float(np.max(bounds[above], initial=0.0))
        if self._history and len(self._history[-1]) == len(values):
            rise, ratio = rise_and_ratio(values, self._history)
            was_above = self._history[-1] > edge
            moved = float(np.max(np.abs(rise[above | was_above]), initial=0.0))
            projected = values + np.maximum(rise, 0.0) * ratio / (1.0 - ratio)
            below = np.flatnonzero(~above)
            climbing = bool(below.size) and bool(projected[below[0]] >= line)
            self.settled = (
                self.reads >= 1
                and self.bound <= self.tol
                and moved <= self.tol
                and int(above.sum()) == int(was_above.sum())
                and not climbing
            )
        self._history.append(values)
        self.values, self.bounds, self._coef = values, bounds, coef[:, :K]
        self._wide = coef[:, : K + 2]  # the certificate's vectors (:meth:`_certificate`)
        # the operator on the top Ritz vectors, off the basis: the next Krylov block
        self._next = orthonormalize(self.AQ @ coef, against=self.Q)
        if self.Q.shape[1] >= plan.p:
            self.settled = True  # the basis spans the whole space: Rayleigh–Ritz is exact
        elif self._next.shape[1] == 0:
            self.exhausted = True

    def _certificate(self, read: PassReader) -> WithinSolution:
        """The top K eigenpairs from one float64 pass over the top ``K + 2`` Ritz vectors
        (orthonormal), as :meth:`~mspca_dask._engine.spectra.KrylovSpectra.certify` does for
        the main spectrum: Rayleigh–Ritz on their span with exact residuals, plus the
        rounding of float64 products; the pass gives their images for the scores too."""
        plan, groups = self.plan, self.groups
        if not plan.dual:  # only a basis taken from provisional main passes needs it
            raise RuntimeError("the within-group certificate is for the dual orientation")
        K = plan.params.n_components
        U = orthonormalize(self.Q @ self._wide)
        out = read("mspca-within-certificate", within=self._dual_operand(U), within_images=True)
        AU = self._dual_product(out["within"])
        values, coef, _, bounds = rayleigh_ritz(U, AU, min(K, U.shape[1]))
        bounds = bounds + self.rounding
        V, XV = unit_components(out["within_image"] @ coef, out["within"] @ coef)
        _, _, line = _line(plan, groups.trace, values, groups.n_rows)
        return WithinSolution(values, bounds, V, XV, line, groups.n_rows)

    def step(self, read: PassReader) -> None:
        """One pass of its own."""
        self.absorb(read(f"mspca-within-{self.reads + 1}", **self.request()))

    def solution(self, read: PassReader) -> WithinSolution:
        """The certified eigenpairs: components and their images from the kept images (or
        one more read when they were over the budget); after provisional products, from
        :meth:`_certificate`'s float64 pass."""
        if not self.steps:
            raise RuntimeError("no block has been read")
        if self.provisional:
            return self._certificate(read)
        coef = self._coef
        U = self.Q @ coef  # operator-side Ritz vectors
        if self.plan.dual:
            Y = self._dual_operand(U)
            X_raw = np.column_stack(self._gram_images) @ coef  # XXᵀ(I − P)W^{1/2}u
            raw = (
                np.column_stack(self._images) @ coef
                if self._images is not None
                else read("mspca-within-scores", keep=Y)["keep"]
            )
            V, XV = unit_components(raw, X_raw)
        else:
            XU = self._primal_images(coef)
            if XU is None:
                XU = read("mspca-within-scores", keep=U)["keep"]
            V, XV = unit_components(U, XU)
        _, _, line = _line(self.plan, self.groups.trace, self.values, self.groups.n_rows)
        return WithinSolution(self.values, self.bounds, V, XV, line, self.groups.n_rows)

    def _primal_images(self, coef: np.ndarray) -> np.ndarray | None:
        """Primal ``X Q coef`` (n, k): the lazy columns' from the main basis's images, the
        read blocks' from their own; None when either was not kept."""
        if self._images is None:
            return None
        lazy, k = self._lazy, coef.shape[1]
        out = np.zeros((self.plan.n_samples, k))
        if lazy:
            assert self._lazy_image is not None
            taken = self._lazy_image(self.Q[:, :lazy] @ coef[:lazy])
            if taken is None:
                return None
            out += taken
        if self._images:
            out += np.column_stack(self._images) @ coef[lazy:]
        return out


def _krylov(
    plan: FitPlan,
    read: PassReader,
    groups: WithinGroups,
    start: np.ndarray | WithinKrylov,
) -> WithinSolution:
    """Run :class:`WithinKrylov` (a new one from ``start``, or one that blocks of the main
    spectrum's passes have advanced) to the end with passes of its own: until settled, or
    at the pass budget (``max_passes``; at least one block read, two from a start block),
    with a :class:`~mspca_dask.errors.ConvergenceWarning`."""
    it = start if isinstance(start, WithinKrylov) else WithinKrylov(plan, groups, start)
    prm = plan.params
    least = 1 - it.reads if it.takes_basis else 2 - it.steps
    budget = max(prm.max_passes - read.n_passes, least)
    for _ in range(budget):
        if it.done:
            break
        it.step(read)
    if not it.settled and not it.exhausted:
        warnings.warn(
            f"the within-group covariance's solver stopped at its pass budget "
            f"({prm.max_passes}) with an eigenvalue error bound of {it.bound:.3g}, above the "
            f"target {it.tol:.3g}; its covariance components may be unreliable. Raise "
            f"max_passes or use solver='exact'.",
            ConvergenceWarning,
            stacklevel=5,
        )
    return it.solution(read)
