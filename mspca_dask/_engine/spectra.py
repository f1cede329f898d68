"""The spectra of a fit by the solver chosen once: :class:`ExactSpectra` or :class:`KrylovSpectra`.

Both answer the same questions — the top eigenpairs of ``(MᵀM + low rank)/n``, the Gram
operator applied to a vector, a pass that also reads some products, whether the iteration may
stop — so the fit (:mod:`mspca_dask._engine.run`) never asks which solver it runs.  Both read
the data only through a :class:`PassReader`, which runs one pass on a :class:`PassRunner` and
refuses products that overflowed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from .. import rmt
from ..errors import InputError
from .linalg import (
    LowRank,
    apply_operator,
    dense_operator,
    orthonormalize,
    project_lowrank,
    projected_ritz,
    rayleigh_ritz,
    ritz_pairs,
    top_eigh,
)
from .plan import FitPlan

if TYPE_CHECKING:
    from .._passes import Oriented

__all__ = [
    "BASIS_IMAGE_BUDGET",
    "Certified",
    "ExactSpectra",
    "KrylovSpectra",
    "PassReader",
    "PassRunner",
    "Relocation",
    "Spectrum",
    "make_spectra",
    "rise_and_ratio",
]

#: Driver memory (bytes) the randomized solver may spend keeping the Krylov basis's images
#: ``M Q`` (m × basis columns), from which the scores come without an output pass.
BASIS_IMAGE_BUDGET = 512 * 2**20

#: Largest total sum of squares accepted: eigenvalues are at most this over n, and the solvers
#: square eigenvalue-sized numbers (norms, Rayleigh quotients), so it stays well below the
#: square root of float64's range.
MAX_SUMSQ = float(np.sqrt(np.finfo(np.float64).max)) * 1e-4


class PassRunner(Protocol):
    """What the engine needs from an executor: run one pass, count the passes run."""

    @property
    def n_passes(self) -> int: ...

    def run_pass(
        self, data: Oriented, name: str, *, single: bool = False, **products: Any
    ) -> dict[str, np.ndarray]:
        """Compute the products of :func:`mspca_dask._passes.pass_graph` in one read."""
        ...


def check_overflow(out: dict[str, np.ndarray], name: str) -> None:
    """Refuse a pass whose sums overflowed (finite data whose squares exceed float64's range).

    The data were checked finite in the statistics pass, so an infinite or NaN product means
    values whose squares overflow; a total sum of squares above :data:`MAX_SUMSQ` (about
    1e150) would overflow later, when the solvers square eigenvalue-sized numbers.  Either
    way nothing downstream would be meaningful (``eigh`` would fail on infinities).
    """
    bad = [k for k, v in out.items() if v.dtype.kind == "f" and not np.isfinite(v).all()]
    if not bad and "col_sumsq" in out and float(out["col_sumsq"].sum()) > MAX_SUMSQ:
        bad = ["col_sumsq"]  # finite, but the spectrum's own squares would overflow
    if bad:
        raise InputError(
            f"the data's values are too large for the arithmetic: their squares overflow "
            f"float64 in pass {name!r} (products {', '.join(sorted(bad))} are infinite, NaN or "
            f"above {MAX_SUMSQ:.0e}, beyond which the solvers' own squares overflow). "
            "Rescale the data (e.g. divide by their largest absolute value) and fit again."
        )


@dataclass
class PassReader:
    """Reads the data through ``runner``: one call, one pass; remembers float32 use."""

    data: Oriented
    runner: PassRunner
    #: some thin products the fit uses were computed at single precision (the randomized
    #: solver clears it when it recomputes its speculative float32 first block in float64)
    single_used: bool = False

    @property
    def n_passes(self) -> int:
        return self.runner.n_passes

    def __call__(self, name: str, single: bool = False, **products: Any) -> dict[str, np.ndarray]:
        self.single_used |= single
        out = self.runner.run_pass(self.data, name, single=single, **products)
        if not products.get("stats"):  # the statistics pass is checked by the fit
            check_overflow(out, name)
        return out


@dataclass(frozen=True)
class Spectrum:
    """Top eigenpairs of one operator, in operator space.

    Attributes
    ----------
    values : (k,) ndarray, descending
    vectors : (p, k) ndarray
    bounds : (k,) ndarray
        Certified error bounds of ``values`` (zeros for the exact solver).
    op_vectors : (p, k) ndarray or None
        The *base* operator applied to ``vectors`` (dual orientation, knockoff overlaps).
    """

    values: np.ndarray
    vectors: np.ndarray
    bounds: np.ndarray
    op_vectors: np.ndarray | None = None


@dataclass(frozen=True)
class Relocation:
    """A dual estimated location ``μ = M a`` to recompute with a certificate.

    In the dual orientation the location term needs ``μ = M a`` and its image ``MᵀM a``
    (``a`` operator-side, (p,)); after float32 passes both carry float32 rounding, and a
    ``μ`` inconsistent with its image is no centring at all.  The certificate's float64
    pass recomputes them, and ``base`` rebuilds the operator's low-rank terms from them.
    """

    coef: np.ndarray  # (p,) a
    base: Callable[[np.ndarray, np.ndarray], LowRank]  # (μ, MᵀM a) -> the low-rank terms


@dataclass(frozen=True)
class Certified:
    """The original spectrum from float64 products (:meth:`KrylovSpectra.certify`)."""

    spectrum: Spectrum
    image: np.ndarray | None  # M applied to its vectors (m, K), None over the image budget
    location: tuple[np.ndarray, np.ndarray] | None = None  # recomputed (μ, MᵀM a), dual
    outputs: dict[str, np.ndarray] | None = None  # the pass's outputs, those that rode on it too


class ExactSpectra:
    """The exact solver: the Gram matrix ``MᵀM`` from the first pass, dense ``eigh``."""

    exhausted = False

    def __init__(self, plan: FitPlan, read: PassReader) -> None:
        self.plan, self.read = plan, read
        self.gram: np.ndarray | None = None
        self._base_dense: tuple[LowRank, np.ndarray] | None = None

    def first_products(self, known: list[np.ndarray], omega: np.ndarray) -> dict[str, Any]:
        """What the statistics pass computes for this solver: the Gram matrix."""
        return {"gram": True}

    def absorb_first(
        self,
        products: dict[str, Any],
        out: dict[str, np.ndarray],
        moments: Any,
        known: list[np.ndarray] | None = None,
    ) -> None:
        self.gram = out["gram"]

    def _gram(self) -> np.ndarray:
        if self.gram is None:
            raise RuntimeError("the statistics pass has not run")
        return self.gram

    def spectrum(self, lowrank: LowRank, base: LowRank | None = None, k: int = 0) -> Spectrum:
        """Top-``k`` eigenpairs of ``(MᵀM + low rank)/n``."""
        n = self.plan.n_samples
        A = dense_operator(self._gram(), lowrank, n)
        vals, vecs = top_eigh(A, k or self.plan.params.n_components)
        op_vecs = None
        if base is not None and self.plan.dual:
            if self._base_dense is None or self._base_dense[0] is not base:
                self._base_dense = (base, dense_operator(self._gram(), base, n))
            op_vecs = self._base_dense[1] @ vecs
        return Spectrum(vals, vecs, np.zeros(len(vals)), op_vecs)

    def apply(self, a: np.ndarray) -> np.ndarray:
        """``MᵀM a`` for operator-side ``a`` (p,) or (p, k)."""
        return self._gram() @ a

    def read_with(
        self,
        name: str,
        known: list[np.ndarray],
        extra: list[np.ndarray] | None = None,
        **products: Any,
    ) -> dict[str, np.ndarray]:
        """A pass computing ``products`` (the exact solver adds nothing to it)."""
        return self.read(name, **products)

    def extend(
        self, name: str, known: list[np.ndarray], extra: Any = None, **products: Any
    ) -> dict[str, np.ndarray]:
        raise RuntimeError("the exact solver makes no Krylov pass")

    def settled(
        self, spec: Spectrum, history: list[np.ndarray], s2: float, tol: float
    ) -> tuple[bool, float]:
        """Exact eigenvalues: always settled, with a zero bound."""
        return True, 0.0

    def basis_image(self, U: np.ndarray) -> np.ndarray | None:
        return None

    def use_single(self) -> bool:
        return False

    def earlier_history(self, lowrank: LowRank, k: int = 0) -> list[np.ndarray]:
        """No pass before the spectrum is exact: nothing to add to the stopping history."""
        return []

    def knockoffs_settled(
        self, specs: list[Spectrum], history: list[list[np.ndarray]], s2: float, tol: float
    ) -> bool:
        """Exact eigenvalues: always settled."""
        return True

    def certify(
        self,
        spec: Spectrum,
        base: LowRank,
        relocation: Relocation | None = None,
        ride: dict[str, Any] | None = None,
    ) -> Certified | None:
        """Exact eigenvalues need no certificate."""
        return None


class KrylovSpectra:
    """The randomized solver: a block-Krylov basis ``Q`` with ``Z = MᵀM Q`` from the passes.

    Eigenvalues come from Rayleigh–Ritz on ``span(Q)`` with certified residual bounds plus an
    estimate of the passes' rounding (:meth:`_rounding`).  Each pass extends the basis by the
    operator's image of the last block and any new low-rank direction; while they fit in
    :data:`BASIS_IMAGE_BUDGET`, the images ``M Q`` are kept so the scores need no output pass.
    """

    def __init__(self, plan: FitPlan, read: PassReader) -> None:
        self.plan, self.read = plan, read
        self.Q = np.zeros((plan.p, 0))
        self.Z = np.zeros((plan.p, 0))
        self._QtZ = np.zeros((0, 0))  # QᵀZ, grown block by block: every spectrum shares it
        self.images: list[np.ndarray] | None = []  # the basis's images M Q, block by block
        self.exhausted = False  # a Krylov pass found no new direction
        #: the basis's width at the end of each Krylov block
        self._block_ends: list[int] = []
        self._image_norm = 0.0  # largest ‖MᵀM v‖/n over the basis vectors v
        #: the Krylov passes run in float32 although its rounding estimate alone would not
        #: meet the target; the original spectrum is then certified by one float64 pass
        #: (:meth:`certify`), and the bounds while iterating leave the rounding out
        self.provisional = False
        #: some of the basis's products came from provisional passes: their rounding is not
        #: bounded by :meth:`rounding_bound`, even after the certificate
        self.ever_provisional = False
        self._feature_sum = np.zeros(plan.n_features)
        self._total_sumsq = 0.0

    # ---------------------------------------------------------------- the passes
    def first_products(self, known: list[np.ndarray], omega: np.ndarray) -> dict[str, Any]:
        """The first block ``[Ω, known low-rank directions]`` for the statistics pass.

        On float32 chunks the block's product runs at single precision *speculatively*:
        whether float32 is accurate enough (:meth:`use_single`) depends on the statistics of
        the same pass, and it is for centred data, where this saves most of the pass's
        arithmetic (the float64 product up-casts every chunk).  :meth:`absorb_first` checks
        and recomputes the block in float64 when it was not.  A first block that spans the
        whole operator space is computed in float64 (no later pass would correct it).
        """
        V0 = orthonormalize(np.column_stack([omega, *known]))
        single = self.read.data.M.dtype == np.float32 and V0.shape[1] < self.plan.p
        return {
            "krylov": V0,
            "krylov_images": self._keep_images(V0.shape[1]),
            "single": single,
        }

    def absorb_first(
        self,
        products: dict[str, Any],
        out: dict[str, np.ndarray],
        moments: Any,
        known: list[np.ndarray] | None = None,
    ) -> None:
        """Take the first block's products, recomputed in float64 if float32 was not enough.

        A speculative float32 product that :meth:`use_single` refuses (data far from zero,
        or too large for float32) is recomputed at once in one more pass, in float64,
        together with the next Krylov block ``MᵀM V₀`` taken from the float32 product when
        that is finite (any block is a valid basis direction; its products are exact to
        float64) and ``known`` (the low-rank directions known after the first pass, which the
        second pass of a float64 start adds too; an overflowing float32 product gives no next
        block, and the first is then recomputed alone): the pass replaces the second Krylov pass,
        so the fit makes as many passes as if the first block had been computed in float64
        (without ``known`` a genotype fit lacked its 5 knockoff images in the basis and took
        one pass more).  Nothing computed in float32 stays in the basis then, and the fit
        reports float64 precision.
        """
        self._feature_sum, self._total_sumsq = moments.feature_sum, moments.total_sumsq
        if not products.get("single") or self._single_holds(out["krylov"]):
            self._absorb(products, out)
            return
        Z0 = out["krylov"]
        if np.isfinite(Z0).all() and self._provisional_allowed(self._image_norm_with(Z0)):
            self.provisional = self.ever_provisional = True
            self._absorb(products, out)
            return
        self.read.single_used = False  # the float32 block is dropped: nothing else ran in it
        V0 = products["krylov"]
        blocks = [V0]
        if np.isfinite(Z0).all():  # else no next block: the first is recomputed alone
            V1 = orthonormalize(
                np.column_stack([Z0 / self.plan.n_samples, *(known or [])]), against=V0
            )
            if V1.shape[1]:
                blocks.append(V1)
        V = np.column_stack(blocks)
        redo: dict[str, Any] = {"krylov": V, "krylov_images": self._keep_images(V.shape[1])}
        again = self.read(f"mspca-pass-{self.read.n_passes + 1}", **redo)
        self._absorb(redo, again, first=V0.shape[1] if len(blocks) > 1 else None)

    def earlier_history(self, lowrank: LowRank, k: int = 0) -> list[np.ndarray]:
        """The top-``k`` (default K) Ritz values of ``lowrank``'s operator on the basis as it
        was after each of its last two blocks but one: the stopping rules' history, computed
        without a pass.

        The basis's products ``Z = MᵀM Q`` hold for any low-rank part, so the values an
        iteration on ``base`` would have seen on the earlier (nested) bases are Rayleigh–Ritz
        on their columns.  After the location step (a new low-rank part) the rule then goes on
        where it was instead of starting again (on a 100 000 × 10 000 store: 4 passes fewer);
        after a first block recomputed together with the second (:meth:`absorb_first`) it has
        the values a float64 start would have left.
        """
        n, k = self.plan.n_samples, k or self.plan.params.n_components
        ends = [end for end in self._block_ends[:-1][-2:] if end >= k]
        if not ends:
            return []
        QtP, QtMtO = self.Q.T @ lowrank.P, self.Q.T @ lowrank.MtO
        history = []
        for end in ends:
            projected = project_lowrank(QtP[:end], QtMtO[:end], lowrank)
            history.append(ritz_pairs((self._QtZ[:end, :end] + projected) / n, k)[0][:k])
        return history

    def _single_holds(self, Z0: np.ndarray) -> bool:
        """Whether a first block computed in float32 (``Z0 = MᵀM V₀``) may stay.

        The same decision :meth:`use_single` makes before every later pass, with the norm
        estimate taken from ``Z0`` as the float64 product would have given it (to float32
        accuracy, ample for an estimate).  Changes nothing.
        """
        if not np.isfinite(Z0).all():
            return False
        return self.use_single(image_norm=self._image_norm_with(Z0))

    def _image_norm_with(self, Z: np.ndarray) -> float:
        """The largest ``‖MᵀM v‖/n`` over the basis and the vectors whose images are ``Z``."""
        if not Z.shape[1]:
            return self._image_norm
        top = float(np.max(np.linalg.norm(Z, axis=0))) / self.plan.n_samples
        return max(self._image_norm, top)

    def _absorb(
        self, products: dict[str, Any], out: dict[str, np.ndarray], first: int | None = None
    ) -> None:
        """Add the pass's Krylov block; ``first``: the width of a block before it that the
        same pass computed (:meth:`absorb_first`)."""
        V, Z_new = products["krylov"], out["krylov"]
        if products["krylov_images"] and self.images is not None:
            self.images.append(out["krylov_image"])
        if first is not None:
            self._block_ends.append(self.Q.shape[1] + first)
        self._block_ends.append(self.Q.shape[1] + V.shape[1])
        self._QtZ = np.block([[self._QtZ, self.Q.T @ Z_new], [V.T @ self.Z, V.T @ Z_new]])
        self.Q = np.column_stack([self.Q, V])
        self.Z = np.column_stack([self.Z, Z_new])
        self._image_norm = self._image_norm_with(Z_new)

    @property
    def _last_block(self) -> int:
        """Columns of the basis's last Krylov block."""
        ends = [0, *self._block_ends]
        return ends[-1] - ends[-2]

    def read_with(
        self,
        name: str,
        known: list[np.ndarray],
        extra: list[np.ndarray] | None = None,
        **products: Any,
    ) -> dict[str, np.ndarray]:
        """Extend the basis by one block and compute ``products`` in the same read.

        The block is the operator's image of the last block plus ``known`` (the low-rank
        directions known now) and ``extra``, orthonormalised against the basis.  Returns {}
        (and makes no pass) when that leaves nothing and no product is asked for.
        """
        n = self.plan.n_samples
        last = (
            self.Z[:, -self._last_block :] / n if self._last_block else np.zeros((self.plan.p, 0))
        )
        V = orthonormalize(np.column_stack([last, *known, *(extra or [])]), against=self.Q)
        if V.shape[1] == 0 and not products:
            return {}
        kw: dict[str, Any] = dict(products)
        if V.shape[1]:
            kw["krylov"] = V
            kw["krylov_images"] = self._keep_images(V.shape[1])
        out = self.read(name, single=self._next_single(), **kw)
        if V.shape[1]:
            self._absorb(kw, out)
        return out

    def _next_single(self) -> bool:
        """Whether the next Krylov pass runs in float32; may make the passes provisional.

        The rounding estimate grows with the basis's image norm: a dominant spike found after
        the first passes can turn :meth:`use_single` down once float32 products are already
        in the basis, whose estimated rounding then stays in every bound, above the target
        (measured: 14 passes, to the whole space, where 6 sufficed).  Such passes go on in
        float32 as provisional ones, certified at the end (:meth:`certify`), when
        :meth:`_provisional_allowed`.
        """
        if self.use_single():
            return True
        if self.read.single_used and self._provisional_allowed(self._image_norm):
            self.provisional = self.ever_provisional = True
            return True
        return False

    def extend(
        self,
        name: str,
        known: list[np.ndarray],
        extra: list[np.ndarray] | None = None,
        **products: Any,
    ) -> dict[str, np.ndarray]:
        """One Krylov pass that computes ``products`` too (:meth:`read_with`), and its
        products; :attr:`exhausted` when it found no new direction (then no ``"krylov"``
        entry, and no pass at all unless ``products`` asked for one)."""
        out = self.read_with(name, known, extra, **products)
        if "krylov" not in out:
            self.exhausted = True
        return out

    def _keep_images(self, width: int) -> bool:
        """Whether the next block's image ``M V`` (m, width) is kept on the driver.

        While all of the basis's images fit in :data:`BASIS_IMAGE_BUDGET`, they are; past it
        they are all dropped and the output pass reads the data once more.
        """
        if self.images is None:
            return False
        held = sum(im.nbytes for im in self.images)
        if held + 8 * self.plan.m * width <= BASIS_IMAGE_BUDGET:
            return True
        self.images = None
        return False

    # ---------------------------------------------------------------- the spectra
    def spectrum(self, lowrank: LowRank, base: LowRank | None = None, k: int = 0) -> Spectrum:
        """Top-``k`` Ritz pairs of ``(MᵀM + low rank)/n`` with their certified bounds."""
        vals, vecs, bounds, op_vecs = projected_ritz(
            self.Q,
            self.Z,
            self._QtZ,
            lowrank,
            self.plan.n_samples,
            k or self.plan.params.n_components,
            base if self.plan.dual else None,
        )
        return Spectrum(vals, vecs, bounds + self.rounding_bound(), op_vecs)

    @property
    def block_ends(self) -> list[int]:
        """The basis's width at the end of each Krylov block."""
        return list(self._block_ends)

    def apply(self, a: np.ndarray) -> np.ndarray:
        """``MᵀM a`` for ``a`` in the span of the basis: ``Z Qᵀ a`` (exact there)."""
        return self.Z @ (self.Q.T @ a)

    def basis_image(self, U: np.ndarray) -> np.ndarray | None:
        """``M U`` (m, k) for ``U`` in the span of the basis, from the kept images (no pass).

        ``U = Q (QᵀU)``, so ``M U = Σ_blocks (M Q_b)(Q_bᵀ U)``.  None when the images were not
        kept (over budget).
        """
        if not self.images:
            return None
        out = np.zeros((self.plan.m, U.shape[1]))
        col = 0
        for im in self.images:
            w = im.shape[1]
            out += im @ (self.Q[:, col : col + w].T @ U).astype(im.dtype)
            col += w
        if col != self.Q.shape[1]:
            raise RuntimeError("the kept images do not cover the Krylov basis")
        return out

    def settled(
        self, spec: Spectrum, history: list[np.ndarray], s2: float, tol: float
    ) -> tuple[bool, float]:
        """Whether the block-Krylov iteration may stop, and the largest bound it watched.

        ``history`` holds the top-K Ritz values of the original spectrum after each earlier
        pass, oldest first.  The iteration stops when

        1. every Ritz value of ``spec`` above the Marchenko–Pastur edge carries an error bound
           below ``tol`` (the returned bound is the largest of these; the knockoff spectra,
           which decide no verdict, have a rule of their own: :meth:`knockoffs_settled`);
        2. those values (above the edge now or after the previous pass) moved by less than
           ``tol`` in the last pass, and as many are above the edge as after it;
        3. the largest Ritz value below the edge is not climbing fast enough to become a
           candidate: its last rise, extrapolated geometrically at the ratio of its last two
           rises (at most 0.9), stays below the candidate line ``edge + edge_margin · TW
           scale`` (the fit's candidates, :mod:`mspca_dask.verdict`).  Only that one is
           watched: Ritz values lie below the eigenvalues of the same rank (Cauchy
           interlacing), and a missing eigenvalue above the line would be the largest one
           below the edge, which that Ritz value converges to (the deeper ones, converging
           to smaller eigenvalues, climbed as fast and held the iteration up to two passes
           longer at d = 4000, n = 40 000); and
        4. the basis holds at least three blocks.

        When the basis spans the whole space, Rayleigh–Ritz is exact and the iteration stops.
        Bulk Ritz values converge slowly towards the edge, and they decide nothing: below the
        candidate line a value is neither kept nor flagged.  A Krylov space cannot prove that
        no eigenvalue is missing; a spike not yet found shows up as a Ritz value still
        climbing, which rule 3 watches.  Nothing is changed by the call.
        """
        plan = self.plan
        n, d = plan.n_samples, plan.n_features
        edge = rmt.mp_edges(d / n, s2)[1]
        worst = float(np.max(spec.bounds[spec.values > edge], initial=0.0))
        if self.Q.shape[1] >= plan.p:
            return True, worst  # the basis spans the whole space: Rayleigh–Ritz is exact
        if len(self._block_ends) < 3 or not history:
            return False, worst
        values, prev = spec.values, history[-1]
        rise, ratio = rise_and_ratio(values, history)
        above, above_prev = values > edge, prev > edge
        moved = float(np.max(np.abs(rise[above | above_prev]), initial=0.0))
        line = edge + plan.params.edge_margin * rmt.tracy_widom_scale(n, d, s2)
        projected = values + np.maximum(rise, 0.0) * ratio / (1.0 - ratio)
        below = np.flatnonzero(~above)
        climbing = bool(below.size) and bool(projected[below[0]] >= line)
        ok = (
            worst <= tol
            and moved <= tol
            and int(above.sum()) == int(above_prev.sum())
            and not climbing
        )
        return ok, worst

    def knockoffs_settled(
        self, specs: list[Spectrum], history: list[list[np.ndarray]], s2: float, tol: float
    ) -> bool:
        """Whether the knockoff spectra may stop: each Ritz value above the Marchenko–Pastur
        edge (now or after the previous pass) is within ``tol`` of where it converges.

        ``history[b]`` holds knockoff ``b``'s Ritz values on the basis after each earlier
        block, oldest first (:meth:`earlier_history`).  A Ritz value rises monotonically to
        its eigenvalue, about geometrically once it converges: its last rise, and what is
        left of it (the last rise continued at the ratio of its last two, at most 0.9, the
        ratio taken when there is one rise only), must both be within ``tol``.  Residual
        bounds would certify it, but a knockoff's spike sits between close eigenvalues whose
        gaps leave its bound far above its error for many passes.
        """
        if self.Q.shape[1] >= self.plan.p:
            return True
        n, d = self.plan.n_samples, self.plan.n_features
        edge = rmt.mp_edges(d / n, s2)[1]
        for spec, past in zip(specs, history, strict=True):
            if not past:
                return False
            values, prev = spec.values, past[-1]
            rise, ratio = rise_and_ratio(values, past)
            left = np.abs(rise) * np.maximum(1.0, ratio / (1.0 - ratio))
            watched = (values > edge) | (prev > edge)
            if float(np.max(left[watched], initial=0.0)) > tol:
                return False
        return True

    # ---------------------------------------------------------------- precision
    def _rounding(self, unit: float, image_norm: float | None = None) -> float:
        """Estimated norm of the rounding error of the passes' operator products.

        A chunk's product ``bᵀ(b V)`` sums ``p`` and then ``rows`` terms; with blocked BLAS
        accumulation the error of each is about ``unit · √length`` relative to the norm of
        the result (the probabilistic model of Higham & Mary 2019), so the operator applied
        to a unit vector is off by about ``unit (√rows + √p) ‖MᵀM/n‖``.  The norm is
        estimated from below by the largest image of a basis vector (kept up to date as the
        basis grows) and by ``‖x̄‖²`` (the mean direction's Rayleigh quotient), which
        dominates for uncentred data.  Measured float32 errors were about 50 times smaller
        than this estimate.  ``image_norm`` replaces the basis's (:meth:`_image_norm_with`).
        """
        n = self.plan.n_samples
        rows = self.read.data.chunk_rows
        fs = self._feature_sum
        norm = self._image_norm if image_norm is None else image_norm
        scale = max(float(fs @ fs) / n**2, norm)
        return unit * (math.sqrt(rows) + math.sqrt(self.plan.p)) * scale

    def use_single(self, image_norm: float | None = None) -> bool:
        """Whether the next thin products may run at float32 on float32 chunks.

        Only while the estimated float32 rounding stays below a tenth of the accuracy the
        fit aims at (``tol``, by default :func:`~mspca_dask.rmt.eigenvalue_tolerance`),
        evaluated at the average feature variance: an upper estimate of the noise variance
        known from the first pass, before any spectrum, which does not depend on the location
        (the mean cancels in the products only in exact arithmetic).  Otherwise — e.g. data
        whose mean is far larger than their spread — the chunks are up-cast to float64.
        ``image_norm``: see :meth:`_rounding`.
        """
        if not self._float32_possible():
            return False
        if self.provisional:
            return True
        unit = float(np.finfo(np.float32).eps) / 2
        return self._rounding(unit, image_norm) <= self._target() / 10

    def _target(self) -> float:
        """The accuracy the fit aims at: ``tol``, by default at the average feature variance
        (:meth:`use_single`)."""
        plan = self.plan
        if plan.params.tol is not None:
            return float(plan.params.tol)
        return rmt.eigenvalue_tolerance(plan.n_samples, self._spread())

    def float32_rounding(self, weight: float = 1.0) -> float | None:
        """The rounding estimate of float32 products of an operator at most ``weight``
        times this one (another iteration's, e.g. the within-group covariance's with its
        rows weighted), when the Krylov passes ran at float32 and that estimate stays
        within the limit :meth:`use_single` sets; None otherwise (its products then run in
        float64).  The iteration adds it to its bounds, as :meth:`rounding_bound` does."""
        if self.provisional or not self.read.single_used or not self._float32_possible():
            return None
        rounding = weight * self.rounding_at(np.float32)
        return rounding if rounding <= self._target() / 10 else None

    def _float32_possible(self) -> bool:
        """Float32 chunks whose products cannot overflow float32 (the data's sum of squares)."""
        return (
            self.read.data.M.dtype == np.float32
            and self._total_sumsq < float(np.finfo(np.float32).max) / 16
        )

    def _spread(self) -> float:
        """The average feature variance, from the first pass (an upper estimate of σ²)."""
        n, d = self.plan.n_samples, self.plan.n_features
        xbar = self._feature_sum / n
        return max(self._total_sumsq / n - float(xbar @ xbar), 0.0) / d

    def _provisional_allowed(self, image_norm: float) -> bool:
        """Whether the Krylov passes may run in float32 with a float64 certificate at the end.

        When :meth:`use_single` refuses float32 only because its rounding, though below the
        noise level, is above a hundredth of the threshold ε (a spectrum whose top eigenvalue
        is far above ε, e.g. genotypes with population structure: about 4 × 10⁵ times it),
        float32 still finds the subspace: its errors are below the average feature
        variance, the scale of the gaps between spikes and the bulk.  The basis is then
        built in float32 and the original spectrum recomputed from one float64 pass over its
        Ritz vectors (:meth:`certify`), so the reported eigenvalues, bounds and scores
        carry no float32 rounding.  With ``location="auto"`` the location is whatever vector
        the (float32) location step found: the primal centring term is exact for any ``μ``,
        and the dual one's ``μ`` and image are recomputed by the certificate's pass
        (:class:`Relocation`).  Not for data whose float32 rounding is above the noise (far
        from zero: the passes would not converge).
        """
        if not self._float32_possible():
            return False
        unit = float(np.finfo(np.float32).eps) / 2
        return self._rounding(unit, image_norm) <= self._spread()

    def certify(
        self,
        spec: Spectrum,
        base: LowRank,
        relocation: Relocation | None = None,
        ride: dict[str, Any] | None = None,
    ) -> Certified | None:
        """The original spectrum from one float64 pass over its Ritz vectors, and their image.

        Only after provisional float32 passes (:meth:`_provisional_allowed`); None otherwise.
        ``U`` = the basis's top ``K + 2`` Ritz vectors (orthonormal); the pass computes
        ``MᵀM U`` and ``M U`` in float64, and Rayleigh–Ritz on ``span(U)`` gives the top K
        eigenpairs with residual bounds of float64 products (plus float64 rounding).  ``U``
        holds the converged Ritz vectors, so the values are those of the float32 basis less
        its rounding; the two beyond K keep the Ritz value below the K-th in view, so that
        the refined bound of the K-th takes the same gap as on the whole basis (with K
        vectors only it would take the gap to the one above, and could understate its
        error: :func:`~mspca_dask._engine.linalg.rayleigh_ritz`).  A dual estimated location
        (``relocation``, required then) is recomputed in the same pass and ``base`` rebuilt
        from it.  The knockoff spectra stay those of the float32 basis: a displacement
        compares two Ritz values of the same products, whose rounding is common to both.
        ``ride``: more products for the same pass (another iteration's block), returned in
        :attr:`Certified.outputs`.
        """
        if not self.provisional:
            return None
        plan = self.plan
        if plan.dual and plan.location.mode == "auto" and relocation is None:
            raise RuntimeError("a dual estimated location must be recomputed with the spectrum")
        n, k = plan.n_samples, spec.values.size
        U = orthonormalize(self.spectrum(base, k=min(k + 2, self.Q.shape[1])).vectors)
        keep = 8 * plan.m * U.shape[1] <= BASIS_IMAGE_BUDGET
        products: dict[str, Any] = {"krylov": U, "krylov_images": keep}
        location = None
        if relocation is not None:
            a = relocation.coef[:, None]
            products.update(krylov=np.column_stack([U, a]), keep=a)
        out = self.read(f"mspca-pass-{self.read.n_passes + 1}", **products, **(ride or {}))
        MtMU = out["krylov"][:, : U.shape[1]]
        if relocation is not None:
            location = (out["keep"][:, 0], out["krylov"][:, -1])
            base = relocation.base(*location)
        op = apply_operator(MtMU, U, base, n)
        vals, coef, _res, bounds = rayleigh_ritz(U, op, k)
        bounds = bounds + self.rounding_at(np.float64)
        op_vecs = op @ coef if plan.dual else None
        image = out["krylov_image"][:, : U.shape[1]] @ coef if keep else None
        self.provisional = False  # an output pass after this one runs in float64
        return Certified(Spectrum(vals, U @ coef, bounds, op_vecs), image, location, out)

    def rounding_at(self, dtype: Any) -> float:
        """The rounding estimate (:meth:`_rounding`) of products computed in ``dtype``."""
        return self._rounding(float(np.finfo(dtype).eps) / 2)

    def rounding_bound(self) -> float:
        """The rounding term added to every certified error bound.

        Zero while the passes are provisional: those bounds only steer the iteration, and
        :meth:`certify` computes the reported ones from float64 products.
        """
        if self.provisional:
            return 0.0
        return self.rounding_at(np.float32 if self.read.single_used else np.float64)


Spectra = ExactSpectra | KrylovSpectra


def rise_and_ratio(values: np.ndarray, history: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Each Ritz value's last rise, and the ratio of its last two (in [0, 0.9]; 0.9 where
    there is one rise only or the earlier one was not positive), ``history`` oldest first."""
    rise = values - history[-1]
    ratio = np.full(values.shape, 0.9)
    if len(history) >= 2:
        earlier = history[-1] - history[-2]
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.clip(np.where(earlier > 0, rise / earlier, 0.9), 0.0, 0.9)
    return rise, ratio


def make_spectra(plan: FitPlan, read: PassReader) -> Spectra:
    """The solver of ``plan``, resolved here once."""
    return ExactSpectra(plan, read) if plan.solver == "exact" else KrylovSpectra(plan, read)
