"""One fit, pass by pass: :func:`run_fit` (driver side, NumPy only).

The flow, each numbered pass being one read of the data:

1. **Statistics + spectrum pass** — column/row sums and squares, non-finite counts, the
   images of the knockoff memberships/directions, and either the whole Gram matrix (exact
   solver) or the first block-Krylov product (randomized solver).
2. **Location passes** (``location="auto"`` only) — scores on a preliminary spectrum (free in
   the dual orientation); the verdict's group test runs on them
   (:func:`~mspca_dask.verdict.fit_groups`), the location is the inliers' group mean, and one
   more pass computes the location (dual) or the images of the groups found (primal, only
   when there are any: the within-group covariance needs them).
3. **Further Krylov passes** (randomized solver) until every eigenvalue of the original
   spectrum above the bulk edge is certified to within ``tol`` (by default ``0.1 σ² n^{-1/2}``,
   :func:`~mspca_dask.rmt.eigenvalue_tolerance`) and the knockoff spectra have settled to
   ``ε/10``.  The knockoffs are rank-one terms ``γ' m'ᵀ`` applied algebraically: their
   directions ride in every block, and no pass is added for them.
4. **Output pass** — sample scores (or, in the dual orientation, feature loadings); the
   randomized solver takes them from the images of its Krylov basis kept by the passes
   and then skips this pass.
5. **Within-group passes** (only when groups were found) — the covariance within the groups
   at the inliers' scale has passes of its own (:mod:`~mspca_dask._engine.within`): Krylov
   passes until certified (randomized), or its weighted Gram (exact, when the groups differ
   in spread).  The scores on its spikes ride on the output pass when the location step
   found the groups before it; else they take one more.  The verdict
   (:func:`~mspca_dask.verdict.decide`) then runs on the driver, on the scores: no pass.

Every spectrum is that of ``X̃ = X + Σ a fᵀ`` (the location ``−1μᵀ`` and each knockoff
``γ' m'ᵀ``): a *term* is ``(a (n,), f (d,), image)`` with ``image`` the data applied to the
big-side factor, ``Xᵀa`` (primal) or ``X f`` (dual).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import rmt
from ..errors import ConvergenceWarning, InputError, ModelFitWarning, NonFiniteError, NoSpikeWarning
from ..verdict import (
    GroupFit,
    HiddenSpikes,
    WithinSpikes,
    decide,
    fit_groups,
    origin_is_centre,
)
from ..verdict.diagnostics import model_fit_diagnostics
from .draws import Draws
from .linalg import LowRank, flip_signs
from .plan import FitPlan
from .spectra import (
    Certified,
    ExactSpectra,
    KrylovSpectra,
    PassReader,
    PassRunner,
    Relocation,
    Spectra,
    Spectrum,
    check_overflow,
    make_spectra,
)
from .within import (
    PendingWithin,
    WithinGroups,
    WithinKrylov,
    WithinSolution,
    candidate_line,
    certified,
    exact_within,
    unit_components,
    within_spectrum,
)

if TYPE_CHECKING:
    from .._passes import Oriented

__all__ = ["FitOutput", "run_fit"]

Term = tuple[np.ndarray, np.ndarray, np.ndarray]


@dataclass(frozen=True)
class FitOutput:
    """What :func:`run_fit` found (the arrays of :class:`~mspca_dask.result.MSPCAResult`).

    Shapes: ``K`` eigenpairs, ``K'`` = ``K + 2`` per knockoff, ``B`` knockoffs.
    """

    eigenvalues: np.ndarray  # (K,)
    knockoff_eigenvalues_all: np.ndarray  # (B, K')
    knockoff_match: np.ndarray  # (B, K)
    stable: np.ndarray  # (K,) bool: verdict "covariance" or "mixed"
    candidate: np.ndarray  # (K,) bool
    reasons: np.ndarray  # (K,) str
    verdicts: np.ndarray  # (K,) str, one of mspca_dask.verdict.VERDICTS
    groups: np.ndarray  # (n,) int: each sample's group, 0 the inliers
    group_p_value: float  # the group test's p-value
    group_centre: str | None  # "origin": the group test's null was one group about it
    within_samples: int | None  # the samples S_w is the covariance of (None: no groups)
    displacement: np.ndarray  # (K,)
    eigenvector_overlap: np.ndarray  # (K,)
    shift_z: np.ndarray  # (K,)
    diagnostics: str | None
    eigenvalue_bounds: np.ndarray  # (K,)
    eigenvectors: np.ndarray  # (K, d): a stable pair's within-group spike where one was found
    pca_eigenvectors: np.ndarray  # (K, d): the covariance's own top-K eigenvectors
    component_variances: np.ndarray  # (K,): a stable pair's variance within the groups, NaN
    scores: np.ndarray  # (n, K)
    location: np.ndarray | None  # (d,)
    noise_variance: float
    total_variance: float  # tr((X - 1μᵀ)ᵀ(X - 1μᵀ)) / n, the denominator of explained shares
    threshold: float
    knockoff_strength: float
    mp_edge: float
    n_samples: int
    n_features: int
    #: "float32" when some thin products the result uses ran in float32 BLAS (summed in
    #: float64; their estimated rounding is part of ``eigenvalue_bounds``); "float32-certified"
    #: when the Krylov passes ran in float32 and one float64 pass recomputed the eigenpairs,
    #: their bounds and scores (the knockoff spectra keep float32 rounding; see
    #: :meth:`~mspca_dask._engine.spectra.KrylovSpectra.certify`); else "float64" (a
    #: speculative float32 first block that was recomputed in float64 does not count)
    precision: str


@dataclass(frozen=True)
class Moments:
    """Per-feature statistics of the first pass."""

    feature_sum: np.ndarray  # (d,) Xᵀ1
    total_sumsq: float  # Σ x²
    feature_var: np.ndarray  # (d,)
    sample_sumsq: np.ndarray  # (n,) ‖x_i‖²


@dataclass(frozen=True)
class Knockoffs:
    """The B knockoffs ``X̃' = X̃ + γ' m'ᵀ`` (directions unit; scaled by the strength later)."""

    dirs: np.ndarray  # (d, B) unit m̂'
    memberships: np.ndarray  # (n, B) γ'
    #: primal Xᵀγ' (d, B); dual X m̂' (n, B); None before the first pass
    images: np.ndarray | None
    weight: float  # π'

    def term(self, b: int, strength: float, dual: bool) -> Term:
        if self.images is None:
            raise RuntimeError("the knockoff images come from the statistics pass")
        scale = math.sqrt(strength / self.weight)  # θ'² = π' ‖m'‖²
        image = scale * self.images[:, b] if dual else self.images[:, b]
        return (self.memberships[:, b], scale * self.dirs[:, b], image)


@dataclass(frozen=True)
class Centre:
    """The location ``μ`` subtracted from every sample."""

    mu: np.ndarray | None = None  # (d,)
    image: np.ndarray | None = None  # dual: X μ (n,)
    groups: GroupFit | None = None  # location="auto": the groups its location comes from
    group_images: np.ndarray | None = None  # primal Xᵀ1_g (d, G − 1) of those groups
    coef: np.ndarray | None = None  # dual location="auto": μ = Xᵀa, this is a (n,)
    group_sums: np.ndarray | None = None  # dual: Xᵀ1_g (d, G) of every group, 1_g in the basis
    mu_image: np.ndarray | None = None  # primal location="auto": X μ (n,), for the spreads


@dataclass(frozen=True)
class _Run:
    """What every step reads: the plan, the data's reader and the spectra of the solver."""

    plan: FitPlan
    read: PassReader
    spectra: Spectra

    @property
    def dual(self) -> bool:
        return self.plan.dual

    @property
    def n(self) -> int:
        return self.plan.n_samples

    @property
    def d(self) -> int:
        return self.plan.n_features

    @property
    def c(self) -> float:
        return self.d / self.n

    @property
    def location_seed(self) -> int:
        """Seed of the score-space group tests (fixed: the location must be reproducible)."""
        seed = self.plan.params.random_state
        return 0 if seed is None else int(seed) % 2**32

    def lowrank(self, terms: list[Term]) -> LowRank:
        """Low-rank part of ``X̃ᵀX̃`` (operator space) for ``X̃ = X + Σ a fᵀ``."""
        if not terms:
            return LowRank.empty(self.plan.p)
        a = np.column_stack([t[0] for t in terms])
        f = np.column_stack([t[1] for t in terms])
        img = np.column_stack([t[2] for t in terms])
        if self.dual:
            return LowRank(P=a, MtO=img, OtO=f.T @ f)
        return LowRank(P=f, MtO=img, OtO=a.T @ a)

    def location_terms(
        self, mu: np.ndarray | None, X_mu: np.ndarray | None, m: Moments
    ) -> list[Term]:
        if mu is None:
            return []
        ones = np.ones(self.n)
        if self.dual:
            if X_mu is None:
                raise RuntimeError("the dual location needs its image X μ")
            return [(-ones, mu, X_mu)]
        return [(-ones, mu, -m.feature_sum)]  # image Xᵀa = −Xᵀ1

    def known_vectors(
        self, knock: Knockoffs, centre: Centre, m: Moments | None = None
    ) -> list[np.ndarray]:
        """Operator-side vectors of every low-rank term known now (to seed the Krylov space)."""
        if self.dual:
            vecs = [np.ones((self.n, 1)), knock.memberships]
            if knock.images is not None:
                vecs.append(knock.images)
            if centre.image is not None:
                vecs.append(centre.image[:, None])
            return vecs
        vecs = [knock.dirs]
        if centre.mu is not None:
            vecs.append(centre.mu[:, None])
        if centre.group_images is not None:
            # S_w is the operator less a term in the groups' sums: with them in the basis its
            # Ritz pairs converge with the main ones (pooled: often no pass of its own)
            vecs.append(centre.group_images)
        if knock.images is not None and m is not None:
            vecs += [knock.images, m.feature_sum[:, None]]
        return vecs

    def noise(self, values: np.ndarray, terms: list[Term], m: Moments) -> float:
        """The noise variance from ``tr(X̃ᵀX̃)/n`` (``X̃ = X − 1μᵀ``) and the top eigenvalues."""
        trace = self.total_variance(terms[0][1] if terms else None, m)
        return rmt.estimate_noise_variance(trace, values, self.n, self.d)

    def total_variance(self, mu: np.ndarray | None, m: Moments) -> float:
        """``tr(X̃ᵀX̃)/n`` for ``X̃ = X − 1μᵀ``, from the first pass's moments (no pass)."""
        tr = m.total_sumsq
        if mu is not None:
            tr += -2 * float(mu @ m.feature_sum) + self.n * float(mu @ mu)
        return tr / self.n


def run_fit(data: Oriented, plan: FitPlan, runner: PassRunner) -> FitOutput:
    """Fit MS-PCA to ``data`` as ``plan`` says, reading it through ``runner``.

    Parameters
    ----------
    data : Oriented
        The data arranged for passes (:func:`mspca_dask._passes.orient`).
    plan : FitPlan
        The solver, the location and the tuning parameters.
    runner : PassRunner
        Runs the passes (:class:`mspca_dask._execution.Executor`).
    """
    prm = plan.params
    draws = Draws.from_seed(
        prm.random_state,
        n=plan.n_samples,
        d=plan.n_features,
        p=plan.p,
        n_knockoffs=prm.n_knockoffs,
        knockoff_weight=prm.knockoff_weight,
        width=plan.sketch_width,
    )
    read = PassReader(data, runner)
    fit = _Run(plan, read, make_spectra(plan, read))
    knock = Knockoffs(draws.knock_dirs, draws.memberships, None, prm.knockoff_weight)
    centre = Centre(mu=plan.location.vector)
    moments, knock, centre = _first_pass(fit, knock, centre, draws.omega)
    riding = None
    if plan.location.mode == "auto":
        centre = _estimate_location(fit, moments, knock)
        riding = _riding_within(fit, moments, knock, centre)
    base_terms = fit.location_terms(centre.mu, centre.image, moments)
    spec, knock_specs, strength, s2, eps = _converge(
        fit, moments, knock, centre, base_terms, riding
    )
    relocation = None
    if centre.coef is not None:

        def rebuild(mu: np.ndarray, X_mu: np.ndarray) -> LowRank:
            return fit.lowrank(fit.location_terms(mu, X_mu, moments))

        relocation = Relocation(centre.coef, rebuild)
    # a block of the within-group iteration rides on the certificate's pass too
    ride = riding.request() if riding is not None and not riding.done else {}
    certified = fit.spectra.certify(spec, fit.lowrank(base_terms), relocation, ride=ride)
    if riding is not None and ride and certified is not None and certified.outputs is not None:
        riding.absorb(certified.outputs)
    if certified is not None and certified.location is not None:
        centre = replace(centre, mu=certified.location[0], image=certified.location[1])
    return _finish(
        fit,
        moments,
        knock,
        centre,
        spec,
        knock_specs,
        strength,
        s2,
        eps,
        certified=certified,
        riding=riding,
    )


# ---------------------------------------------------------------------------- the first pass


def _first_pass(
    fit: _Run, knock: Knockoffs, centre: Centre, omega: np.ndarray
) -> tuple[Moments, Knockoffs, Centre]:
    """Statistics, the knockoffs' images and the solver's first product, in one read."""
    plan, B = fit.plan, fit.plan.params.n_knockoffs
    given = plan.location.vector
    side = None
    if fit.dual:
        side = np.column_stack([knock.dirs, *([given[:, None]] if given is not None else [])])
    elif knock.weight < 1:
        side = knock.memberships
    products: dict[str, Any] = {"stats": True, "side": side}
    products.update(fit.spectra.first_products(fit.known_vectors(knock, centre), omega))
    out = fit.read("mspca-stats", **products)
    # A product computed speculatively in float32 may overflow where float64 would not: the
    # solver checks it and recomputes it in float64 (``absorb_first``), so it is no error here.
    speculative = ("krylov", "krylov_image") if products.get("single") else ()
    _check_stats(fit, {k: v for k, v in out.items() if k not in speculative})
    if fit.dual:
        fsum, fsq, ssq = out["row_sum"], out["row_sumsq"], out["col_sumsq"]
        images = out["side"][:, :B]
        if given is not None:
            centre = replace(centre, image=out["side"][:, B])
    else:
        fsum, fsq, ssq = out["col_sum"], out["col_sumsq"], out["row_sumsq"]
        images = out["side"] if side is not None else np.repeat(fsum[:, None], B, axis=1)
    n = fit.n
    moments = Moments(fsum, float(out["col_sumsq"].sum()), fsq / n - (fsum / n) ** 2, ssq)
    knock = replace(knock, images=images)
    fit.spectra.absorb_first(products, out, moments, fit.known_vectors(knock, centre, moments))
    return moments, knock, centre


def _check_stats(fit: _Run, out: dict[str, np.ndarray]) -> None:
    """Refuse non-finite values, overflowing squares and constant features."""
    row_bad, col_bad = out["row_nonfinite"], out["col_nonfinite"]
    total = int(col_bad.sum())
    if total:
        sample_bad, feature_bad = (col_bad, row_bad) if fit.dual else (row_bad, col_bad)
        s = int(np.flatnonzero(sample_bad)[0])
        f = int(np.flatnonzero(feature_bad)[0])
        raise NonFiniteError(
            f"the data contain {total} NaN or infinite value(s) in "
            f"{int(np.count_nonzero(sample_bad))} sample(s) and "
            f"{int(np.count_nonzero(feature_bad))} feature(s); the first bad sample is "
            f"index {s} and the first bad feature is index {f}. Remove or impute them "
            f"(e.g. xarray's .fillna, or mspca_dask.genomics.preprocess for genotypes)."
        )
    check_overflow(out, "mspca-stats")
    if fit.dual:
        fsum, fsq = out["row_sum"], out["row_sumsq"]
    else:
        fsum, fsq = out["col_sum"], out["col_sumsq"]
    n = fit.n
    var = fsq / n - (fsum / n) ** 2
    scale = np.maximum(fsq / n, np.finfo(float).tiny)
    const = np.flatnonzero(var <= 1e-12 * scale)
    if const.size:
        shown = ", ".join(str(int(i)) for i in const[:10]) + (" ..." if const.size > 10 else "")
        raise InputError(
            f"{const.size} feature(s) are constant across samples (indices {shown}); a "
            f"constant feature carries no variance for PCA. Drop them before fitting."
        )


# ---------------------------------------------------------------------------- the location


def _estimate_location(fit: _Run, m: Moments, knock: Knockoffs) -> Centre:
    """The inliers' mean ``μ = x̄ + V_k·m₀``, ``m₀`` their group's mean in the candidates' scores.

    The groups are the verdict's (:func:`~mspca_dask.verdict.fit_groups`, one calibrated test
    on the preliminary candidates' scores); with none, ``μ = x̄``.
    """
    prm, n, spectra = fit.plan.params, fit.n, fit.spectra
    xbar = m.feature_sum / n
    spec, terms, X_xbar = _preliminary_spectrum(fit, m, knock, xbar)
    s2 = fit.noise(spec.values, terms, m)
    line = rmt.mp_edges(fit.c, s2)[1] + prm.edge_margin * rmt.tracy_widom_scale(n, fit.d, s2)
    n_cand = int(np.count_nonzero(spec.values[: prm.n_components] > line))
    k = max(n_cand, 1)
    V0 = spec.vectors[:, :k]
    known = fit.known_vectors(knock, Centre(), m)
    if fit.dual:
        sing = np.sqrt(np.maximum(spec.values[:k], 0) * n)
        scores = V0 * sing
        # x̄ · v_j with v_j = X̃ᵀu_j / s_j, X̃ = X − 1x̄ᵀ
        on_candidates = (X_xbar @ V0 - float(xbar @ xbar) * V0.sum(axis=0)) / np.where(
            sing > 0, sing, 1.0
        )
    else:
        image = spectra.basis_image(V0)  # the kept images of the basis: no pass
        if image is None:
            image = spectra.read_with("mspca-location-scores", known, keep=V0)["keep"]
        on_candidates = xbar @ V0
        scores = image - on_candidates[None, :]
    centred_on_origin = n_cand > 0 and origin_is_centre(
        n,
        float(xbar @ xbar),
        on_candidates[:n_cand],
        m.total_sumsq / n - float(xbar @ xbar),
        spec.values[:n_cand],
        rmt.eigenvector_alignment(rmt.spike_inverse(spec.values[:n_cand], fit.c, s2), fit.c),
        float(spec.values[min(n_cand, spec.values.size - 1)]),
        prm.alpha,
    )
    groups = (
        fit_groups(
            scores,
            # the origin's place in these scores, when the data are centred on their inliers
            centre=-on_candidates if centred_on_origin else None,
            level=prm.alpha,
            seed=fit.location_seed,
        )
        if n_cand
        else GroupFit.none(n, prm.alpha)
    )
    offsets = scores[groups.labels == 0].mean(axis=0) - scores.mean(axis=0)
    members = groups.indicators()
    if fit.dual:
        # μ = x̄ + X̃ᵀU₀(offsets/sing) = Xᵀa, a big-side product; X μ = X Xᵀ a is the Gram
        # operator applied to a.
        beta = V0 @ (offsets / np.where(sing > 0, sing, 1.0))
        a = beta + (1.0 - float(beta.sum())) / n
        # the within-group covariance needs every group's sum and indicator in the basis
        # (:func:`_within`): they ride on this pass
        every = groups.indicators(inliers=True) if groups.found else np.zeros((n, 0))
        out = spectra.read_with(
            "mspca-location-mean", known, extra=[a[:, None], every], keep=np.c_[a, every]
        )
        sums = out["keep"][:, 1:] if groups.found else None
        return Centre(out["keep"][:, 0], spectra.apply(a), groups, coef=a, group_sums=sums)
    centre = Centre(xbar + V0 @ offsets, None, groups)
    if not members.shape[1]:
        return centre
    # the groups' images Xᵀ1_g and X μ, which the within-group covariance needs (its groups'
    # sums and spreads), ride on this pass
    known = fit.known_vectors(knock, centre, m)
    mu = np.asarray(centre.mu)
    out = spectra.read_with("mspca-location-groups", known, side=members, keep=mu[:, None])
    return replace(centre, group_images=out["side"], mu_image=out["keep"][:, 0])


def _preliminary_spectrum(
    fit: _Run, m: Moments, knock: Knockoffs, xbar: np.ndarray
) -> tuple[Spectrum, list[Term], np.ndarray | None]:
    """Spectrum of the mean-centred data, converged loosely (it only ranks samples), its
    terms and (dual) ``X x̄``."""
    X_xbar = fit.spectra.apply(np.ones((fit.n, 1)))[:, 0] / fit.n if fit.dual else None
    terms = fit.location_terms(xbar, X_xbar, m)
    lr = fit.lowrank(terms)
    history: list[np.ndarray] = []
    while True:
        spec = fit.spectra.spectrum(lr)
        s2 = fit.noise(spec.values, terms, m)
        # Loose accuracy is enough: this spectrum only ranks samples in score space.
        settled, _bound = fit.spectra.settled(spec, history, s2, tol=0.05 * s2)
        if settled or fit.read.n_passes >= fit.plan.params.max_passes // 2:
            return spec, terms, X_xbar
        history.append(spec.values)
        fit.spectra.read_with(
            f"mspca-pass-{fit.read.n_passes + 1}",
            fit.known_vectors(knock, Centre(), m),
            extra=None if fit.dual else [xbar[:, None]],
        )


# ---------------------------------------------------------------------------- the spectra


def _knockoff_operators(
    fit: _Run, knock: Knockoffs, base_terms: list[Term], strength: float
) -> list[LowRank]:
    """The low-rank parts of the B knockoff operators."""
    return [
        fit.lowrank(base_terms + [knock.term(b, strength, fit.dual)])
        for b in range(fit.plan.params.n_knockoffs)
    ]


def _converge(
    fit: _Run,
    m: Moments,
    knock: Knockoffs,
    centre: Centre,
    base_terms: list[Term],
    riding: WithinKrylov | None = None,
) -> tuple[Spectrum, list[Spectrum], float, float, float]:
    """The original spectrum, certified (randomized solver: pass by pass), and the knockoff
    spectra, settled to a tenth of the threshold ε, of the same basis.  ``riding``: the
    within-group covariance's iteration, whose blocks ride on these passes until it is
    done."""
    prm, spectra, read, k_knock = fit.plan.params, fit.spectra, fit.read, fit.plan.k_knockoff
    base = fit.lowrank(base_terms)
    budget = prm.max_passes
    # the history of the operators as they are now, on the basis's earlier blocks: after the
    # location step the stopping rules go on where they were
    history: list[np.ndarray] = spectra.earlier_history(base)
    while True:
        spec = spectra.spectrum(base)
        s2 = fit.noise(spec.values, base_terms, m)
        eps = rmt.invariance_threshold(fit.n, fit.c, s2, prm.threshold_scale)
        strength = rmt.knockoff_strength(spec.values[0], fit.c, s2, prm.knockoff_factor)
        tol = prm.tol if prm.tol is not None else rmt.eigenvalue_tolerance(fit.n, s2)
        # The verdict reads the original spectrum, which carries certified bounds; the
        # knockoff spectra decide nothing, and the displacements they report are held to a
        # tenth of ε by their own rule, checked once the original has settled (their
        # history is their values on the basis's earlier blocks: no pass, nothing kept).
        settled, bound = spectra.settled(spec, history, s2, tol)
        last = read.n_passes >= budget - 1
        knock_settled = False
        if settled or last:
            operators = _knockoff_operators(fit, knock, base_terms, strength)
            knock_specs = [spectra.spectrum(op, base=base, k=k_knock) for op in operators]
            knock_history = [spectra.earlier_history(op, k_knock) for op in operators]
            knock_settled = spectra.knockoffs_settled(knock_specs, knock_history, s2, eps / 10)
        if (settled and knock_settled) or last:
            stopped = (
                "with its Krylov space exhausted"
                if spectra.exhausted
                else f"at its pass budget ({prm.max_passes})"
            )
            if settled and not knock_settled:
                warnings.warn(
                    f"the randomized solver stopped {stopped} before the knockoff spectra "
                    f"settled to a tenth of the threshold ({eps / 10:.3g}): the displacements "
                    f"reported may be off by more; the verdicts do not use them. Raise "
                    f"max_passes or use solver='exact'.",
                    ConvergenceWarning,
                    stacklevel=4,
                )
            if not settled:
                warnings.warn(
                    f"the randomized solver stopped {stopped} with "
                    f"an eigenvalue error bound of {bound:.3g}, above the target "
                    f"{tol:.3g}; the verdicts may be unreliable. Raise max_passes or use "
                    f"solver='exact'.",
                    ConvergenceWarning,
                    stacklevel=4,
                )
            return spec, knock_specs, strength, s2, eps
        history.append(spec.values)
        products = riding.request() if riding is not None and not riding.done else {}
        out = spectra.extend(
            f"mspca-pass-{read.n_passes + 1}", fit.known_vectors(knock, centre, m), **products
        )
        if products:
            riding.absorb(out)  # type: ignore[union-attr]
        if "krylov" not in out:
            # No new direction: the Krylov space is exhausted and no pass can tighten the
            # bounds (e.g. rounding of huge values dominates); stop with the warning above
            # instead of looping without passes.
            budget = min(budget, read.n_passes + 1)


# ---------------------------------------------------------------------------- the verdicts


def _finish(
    fit: _Run,
    m: Moments,
    knock: Knockoffs,
    centre: Centre,
    spec: Spectrum,
    knock_specs: list[Spectrum],
    strength: float,
    s2: float,
    eps: float,
    certified: Certified | None = None,
    riding: WithinKrylov | None = None,
) -> FitOutput:
    """The output pass and the verdict (:mod:`mspca_dask.verdict`).

    ``certified``: the original spectrum recomputed from float64 products and the image of
    its vectors (:meth:`~mspca_dask._engine.spectra.KrylovSpectra.certify`) after float32
    passes; it gives the reported eigenpairs, bounds and scores, while the displacements and
    overlaps compare ``spec`` with the knockoff spectra of the same float32 products.
    """
    n, d = fit.n, fit.d
    prm = fit.plan.params
    reported, image = (certified.spectrum, certified.image) if certified else (spec, None)
    edge = rmt.mp_edges(fit.c, s2)[1]
    margin = prm.edge_margin * rmt.tracy_widom_scale(n, d, s2)
    overlaps = np.stack(
        [
            _feature_overlaps(fit, knock, centre, spec, sp, b, strength)
            for b, sp in enumerate(knock_specs)
        ]
    )
    candidate = reported.values > edge + margin
    # only verdicts can be wrong: with no candidate NoSpikeWarning already says it all
    diagnostics = (
        model_fit_diagnostics(reported.values, edge, margin, m.feature_var, n, d)
        if np.any(candidate)
        else []
    )
    for line in diagnostics:
        warnings.warn(line, ModelFitWarning, stacklevel=3)
    groups = centre.groups
    # groups known before the output pass: S_w's data side rides on it
    early = (
        _within_solution(fit, m, knock, centre, groups, riding)
        if groups is not None and groups.found
        else None
    )
    riders = early.keep if isinstance(early, PendingWithin) else None
    components, scores, ridden = _output(fit, centre, reported, image, riders)
    if isinstance(early, PendingWithin) and ridden is not None:
        early = early.complete(ridden)
    if groups is None:
        groups = (
            fit_groups(
                scores[:, candidate],
                pinned=fit.plan.location.reference,
                level=prm.alpha,
                seed=fit.location_seed,
            )
            if np.any(candidate)
            else GroupFit.none(n, prm.alpha)
        )
    within = None
    if groups.found:
        solution = _within_solution(fit, m, knock, centre, groups) if early is None else early
        within = _within_spikes(fit, centre, solution)
    verdict = decide(
        scores,
        # the knockoff report compares Ritz values of the same products (after float32
        # passes, their rounding cancels in the displacements): ``spec``'s, not the certified
        spec.values,
        candidate,
        components,
        groups,
        level=prm.alpha,
        within=within,
        knockoff_eigenvalues=np.stack([sp.values for sp in knock_specs]),
        overlaps=overlaps,
    )
    stable = verdict.pairs.stable
    pca_components = components
    # the components are ordered by their variance with the shift removed, not by the
    # eigenvalue the groups' shifts and spreads add to
    variances = np.where(stable, reported.values, np.nan)
    if within is not None:
        # a stable pair's component is the within-group spike it carries: the shift removed
        slots = np.flatnonzero(verdict.pairs.carried >= 0)
        spikes = verdict.pairs.carried[slots]
        components, scores = components.copy(), scores.copy()
        components[slots] = within.components[spikes]
        scores[:, slots] = within.scores[:, spikes]
        variances[slots] = within.values[spikes]
    if not np.any(candidate):
        warnings.warn(
            f"no eigenvalue is clearly above the Marchenko-Pastur edge {edge:.4g} (largest "
            f"{reported.values[0]:.4g}, noise variance {s2:.4g}): there is no spike to keep or "
            f"remove, and the result has no stable components.",
            NoSpikeWarning,
            stacklevel=3,
        )
    output = FitOutput(
        eigenvalues=reported.values,
        knockoff_eigenvalues_all=np.stack([sp.values for sp in knock_specs]),
        knockoff_match=verdict.knockoff.matched,
        stable=stable,
        candidate=candidate,
        reasons=verdict.pairs.reasons,
        verdicts=verdict.pairs.verdicts,
        groups=verdict.groups.labels,
        group_p_value=verdict.groups.p_value,
        group_centre="origin" if verdict.groups.centred else None,
        within_samples=None if within is None else within.samples,
        displacement=verdict.knockoff.displacement,
        eigenvector_overlap=verdict.knockoff.overlap,
        shift_z=verdict.pairs.shift_z,
        diagnostics="\n".join(diagnostics) or None,
        eigenvalue_bounds=reported.bounds,
        eigenvectors=components,
        pca_eigenvectors=pca_components,
        component_variances=variances,
        scores=scores,
        location=centre.mu,
        noise_variance=s2,
        total_variance=fit.total_variance(centre.mu, m),
        threshold=eps,
        knockoff_strength=strength,
        mp_edge=edge,
        n_samples=n,
        n_features=d,
        precision=(
            "float32-certified"
            if certified is not None
            else "float32"
            if fit.read.single_used
            else "float64"
        ),
    )
    if within is not None and verdict.hidden.index.size:
        output = _with_hidden(output, within, verdict.hidden)
    return output


def _with_hidden(output: FitOutput, within: WithinSpikes, hidden: HiddenSpikes) -> FitOutput:
    """``output`` with the hidden spikes of ``S_w`` (:class:`HiddenSpikes`) after its ``K``
    pairs: their eigenvalues, bounds, vectors and scores are ``S_w``'s; no knockoff pair is
    theirs (``knockoff_match`` −1, NaN displacement and overlap)."""
    j = hidden.index
    h = j.size
    nan = np.full(h, np.nan)
    B = output.knockoff_match.shape[0]
    return replace(
        output,
        eigenvalues=np.concatenate([output.eigenvalues, within.values[j]]),
        eigenvalue_bounds=np.concatenate([output.eigenvalue_bounds, within.bounds[j]]),
        candidate=np.concatenate([output.candidate, np.ones(h, bool)]),
        stable=np.concatenate([output.stable, np.ones(h, bool)]),
        verdicts=np.concatenate([output.verdicts, hidden.verdicts]),
        reasons=np.concatenate([output.reasons, hidden.reasons]),
        shift_z=np.concatenate([output.shift_z, hidden.shift_z]),
        knockoff_match=np.hstack([output.knockoff_match, np.full((B, h), -1, np.intp)]),
        displacement=np.concatenate([output.displacement, nan]),
        eigenvector_overlap=np.concatenate([output.eigenvector_overlap, nan]),
        eigenvectors=np.vstack([output.eigenvectors, within.components[j]]),
        pca_eigenvectors=np.vstack([output.pca_eigenvectors, within.components[j]]),
        component_variances=np.concatenate([output.component_variances, within.values[j]]),
        scores=np.hstack([output.scores, within.scores[:, j]]),
    )


def _within_groups(
    fit: _Run, m: Moments, knock: Knockoffs, centre: Centre, groups: GroupFit
) -> tuple[WithinGroups, LowRank]:
    """The groups as ``S_w`` sees them, and the low-rank terms of the *pooled* within-group
    covariance on the main operator (``S_w`` itself when the groups' spreads do not differ;
    else its spectrum starts the primal iteration).

    The groups' sums and the samples' distances for their spreads come from the location
    step's pass, or from one read when it took none."""
    spectra, n = fit.spectra, fit.n
    members = groups.indicators(inliers=True)  # (n, G)
    counts = members.sum(axis=0)
    labels = members.argmax(axis=1)
    known = fit.known_vectors(knock, centre, m)
    if fit.dual:
        if centre.group_sums is not None and centre.groups is groups:
            sums = centre.group_sums  # the location's pass put the indicators in the basis
        else:
            out = spectra.read_with("mspca-within-groups", known, extra=[members], keep=members)
            sums = out["keep"]  # (d, G) Xᵀ1_g
        gram_members = spectra.apply(members)  # (n, G) X Xᵀ 1_g
        pooled = LowRank(
            P=-members,
            MtO=gram_members / counts,
            OtO=(members.T @ gram_members) / np.outer(counts, counts),
        )
        # every sample's squared distance to its own group's mean, X μ_g = XXᵀ1_g / n_g
        means_sq = np.sum(sums * sums, axis=0) / counts**2
        to_own = gram_members[np.arange(n), labels] / counts[labels]
        distances = m.sample_sumsq - 2.0 * to_own + means_sq[labels]
        offsets = np.zeros(len(counts))
    else:
        if centre.group_images is not None and centre.groups is groups:
            displaced, origin, X_origin = centre.group_images, centre.mu, centre.mu_image
        else:
            origin = m.feature_sum / n
            out = spectra.read_with(
                "mspca-within-groups", known, side=members[:, 1:], keep=origin[:, None]
            )
            displaced, X_origin = out["side"], out["keep"][:, 0]
        if origin is None or X_origin is None:
            raise RuntimeError("the groups' spreads need the origin and its image")
        sums = np.column_stack([m.feature_sum - displaced.sum(axis=1), displaced])
        pooled = LowRank(P=sums / counts, MtO=-sums, OtO=np.diag(counts))
        distances = m.sample_sumsq - 2.0 * X_origin + float(origin @ origin)
        offsets = np.sum((sums / counts - origin[:, None]) ** 2, axis=0)
    model = WithinGroups.of(
        members,
        sums,
        m.sample_sumsq,
        distances=distances,
        offsets=offsets,
        level=fit.plan.params.alpha,
        scores=groups.scores,
    )
    return model, pooled


def _pooled_within(
    fit: _Run, model: WithinGroups, pooled: LowRank
) -> WithinSolution | PendingWithin | None:
    """``S_w`` when the groups share one scale: a low-rank update of the operator the passes
    built (no pass for its values; the components' data side from the basis's images, or
    pending a read when the solver kept none).  None when the basis does not certify it
    (:func:`~mspca_dask._engine.within.certified`): its own iteration then finishes it."""
    spectra = fit.spectra
    spec = spectra.spectrum(pooled, k=fit.plan.params.n_components)
    if not certified(fit.plan, model.trace, spec.values, spec.bounds):
        return None
    line = candidate_line(fit.plan, model.trace, spec.values)
    U, members = spec.vectors, model.members

    def complete(image: np.ndarray) -> WithinSolution:
        if fit.dual:
            images = pooled.MtO  # X μ_g = XXᵀ1_g / n_g, already applied for the pooled terms
            raw = image - model.means @ (members.T @ U)  # X_wᵀ U
            X_raw = spectra.apply(U) - images @ (members.T @ U)  # X X_wᵀ U
            components, X_components = unit_components(raw, X_raw)
        else:
            components, X_components = unit_components(U, image)
        return WithinSolution(
            spec.values, spec.bounds, components, X_components, line, model.n_rows
        )

    image = spectra.basis_image(U)
    return PendingWithin(U, complete) if image is None else complete(image)


def _within_iteration(fit: _Run, model: WithinGroups, pooled: LowRank) -> WithinKrylov:
    """``S_w``'s iteration, started from the main basis as it is (no pass).

    Dual, ``S_w``'s operator applied to directions of the main basis is the Gram operator
    there, known: the iteration takes the whole basis with its products
    (:meth:`~mspca_dask._engine.within.WithinKrylov.take_basis`; after provisional float32
    passes they only steer it, and one float64 pass certifies the result).  Primal, so too
    when the groups are unweighted and the passes were float64: ``S_w`` is then the main
    operator less a known low-rank term, exact on the basis.  Weighted, those products
    would need the basis's images, which a smaller driver budget drops, and the result must
    not depend on that: the pooled within-group spectrum's vectors are the first block.  So
    too dual when a group is left out of ``S_w``: its rows' zero weights take the operator
    off the basis's span."""
    spectra, width = fit.spectra, fit.plan.sketch_width
    if not isinstance(spectra, KrylovSpectra):
        raise RuntimeError("only the randomized solver iterates on S_w")
    exact_on_basis = fit.dual or (not model.scaled and not spectra.ever_provisional)
    if exact_on_basis and not np.any(model.own_spread):
        it = WithinKrylov(fit.plan, model)
        _take_main_basis(fit, it)
    else:
        it = WithinKrylov(fit.plan, model, spectra.spectrum(pooled, k=width).vectors)
    # its blocks at the main passes' precision: float32 where that met the target there
    rounding = spectra.float32_rounding(float(np.max(model.weights)))
    if rounding is not None:
        it.run_single(rounding)
    return it


def _take_main_basis(fit: _Run, it: WithinKrylov) -> None:
    """The main basis's directions ``S_w``'s iteration does not hold yet, with their
    products (no pass; :func:`_within_iteration` says when they are known): after
    provisional float32 main passes, as products that only steer it (its eigenpairs are
    then certified by a float64 pass of their own)."""
    spectra = fit.spectra
    if not isinstance(spectra, KrylovSpectra):
        raise RuntimeError("only the randomized solver has a main basis")
    provisional = spectra.ever_provisional
    rounding = spectra.rounding_at(np.float64) if provisional else spectra.rounding_bound()
    it.take_basis(
        spectra.Q, spectra.block_ends, spectra.apply, spectra.basis_image, rounding, provisional
    )


def _riding_within(fit: _Run, m: Moments, knock: Knockoffs, centre: Centre) -> WithinKrylov | None:
    """``S_w``'s iteration when the location step found groups (randomized solver): its
    blocks ride on the main spectrum's passes (:func:`_converge`)."""
    groups = centre.groups
    if groups is None or not groups.found or isinstance(fit.spectra, ExactSpectra):
        return None
    model, pooled = _within_groups(fit, m, knock, centre, groups)
    if not model.scaled:
        return None
    return _within_iteration(fit, model, pooled)


def _within_solution(
    fit: _Run,
    m: Moments,
    knock: Knockoffs,
    centre: Centre,
    groups: GroupFit,
    riding: WithinKrylov | None = None,
) -> WithinSolution | PendingWithin:
    """Top-K eigenpairs of the within-group covariance at the inliers' scale, ``S_w``
    (:mod:`~mspca_dask._engine.within`), or all of them but their data side, which then rides
    on the output pass when it can (:class:`PendingWithin`).

    ``riding``: the iteration whose blocks rode on the main spectrum's passes (finished here
    with passes of its own when it needs more)."""
    spectra = fit.spectra
    if riding is not None:
        if riding.takes_basis:
            _take_main_basis(fit, riding)  # the blocks the main passes added since
        return within_spectrum(fit.plan, fit.read, riding.groups, gram=None, start=riding)
    model, pooled = _within_groups(fit, m, knock, centre, groups)
    if not model.scaled:
        solution = _pooled_within(fit, model, pooled)
        if solution is not None:
            return solution
    if isinstance(spectra, ExactSpectra) and spectra.gram is not None:
        return exact_within(fit.plan, fit.read, model, spectra.gram)
    start = _within_iteration(fit, model, pooled)
    return within_spectrum(fit.plan, fit.read, model, gram=None, start=start)


def _within_spikes(
    fit: _Run, centre: Centre, solution: WithinSolution | PendingWithin
) -> WithinSpikes:
    """``S_w``'s eigenpairs with the samples' scores on them about the location (the data side
    read now if it is still pending)."""
    if isinstance(solution, PendingWithin):
        solution = solution.read(fit.read)
    mu = centre.mu if centre.mu is not None else np.zeros(fit.d)
    scores = solution.X_components - (mu @ solution.components)[None, :]
    return WithinSpikes(
        solution.values,
        solution.components.T.copy(),
        solution.line,
        scores,
        solution.bounds,
        solution.samples,
    )


def _feature_overlaps(
    fit: _Run,
    knock: Knockoffs,
    centre: Centre,
    spec: Spectrum,
    ko: Spectrum,
    b: int,
    strength: float,
) -> np.ndarray:
    """``|⟨ṽᵢ, v'ⱼ⟩|`` (K, K') between *feature-space* unit eigenvectors of both spectra.

    Primal: the operator-space vectors are the feature-space ones.  Dual: with
    ``ṽ = X̃ᵀũ/√(nλ̃)`` and ``v' = X̃'ᵀu'/√(nλ')``,
    ``⟨ṽ, v'⟩ = (ũᵀ (n S̃) u' + (ũᵀ X̃m')(γ'ᵀu')) / (n √(λ̃λ'))`` where ``S̃ = X̃X̃ᵀ/n`` is the
    base operator.
    """
    if not fit.dual:
        return np.abs(spec.vectors.T @ ko.vectors)
    if ko.op_vectors is None or knock.images is None:
        raise RuntimeError("dual overlaps need the base operator's images")
    n = fit.n
    scale = math.sqrt(strength / knock.weight)
    Xm = scale * knock.images[:, b]
    if centre.mu is not None:
        Xm = Xm - scale * float(centre.mu @ knock.dirs[:, b])
    gamma = knock.memberships[:, b]
    inner = n * (spec.vectors.T @ ko.op_vectors) + np.outer(spec.vectors.T @ Xm, gamma @ ko.vectors)
    norm = n * np.sqrt(np.outer(np.maximum(spec.values, 1e-300), np.maximum(ko.values, 1e-300)))
    return np.clip(np.abs(inner / norm), 0.0, 1.0)


def _output(
    fit: _Run,
    centre: Centre,
    spec: Spectrum,
    image: np.ndarray | None = None,
    riders: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Components (K, d) and scores (n, K), from ``image`` (``M U``, when the spectrum's
    certificate computed it), the basis's images, or by the output pass; and the image of
    ``riders`` (p, k) when that pass read it with them (else None)."""
    n, U, mu = fit.n, spec.vectors, centre.mu
    ridden = None
    if image is None:
        image = fit.spectra.basis_image(U)
    if image is None:  # ``M U`` by the output pass
        keep = U if riders is None else np.hstack([U, riders])
        both = fit.read("mspca-output", single=fit.spectra.use_single(), keep=keep)["keep"]
        image = both[:, : U.shape[1]]
        ridden = None if riders is None else both[:, U.shape[1] :]
    if fit.dual:
        XtU = image if mu is None else image - np.outer(mu, U.sum(axis=0))  # (d, K)
        sing = np.sqrt(np.maximum(spec.values, 0) * n)
        V = XtU / np.where(sing > 0, sing, 1.0)
        V = V / np.maximum(np.linalg.norm(V, axis=0), 1e-300)
        scores = U * sing
    else:
        V = U
        scores = image if mu is None else image - (mu @ V)[None, :]
    Vf = flip_signs(V)
    signs = np.sign(np.sum(Vf * V, axis=0))
    signs[signs == 0] = 1
    return Vf.T.copy(), scores * signs, ridden
