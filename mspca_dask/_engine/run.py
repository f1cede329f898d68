"""One fit, pass by pass: :func:`run_fit` (driver side, NumPy only).

The flow, each numbered pass being one read of the data:

1. **Statistics + spectrum pass** — column/row sums and squares, non-finite counts, the
   images of the knockoff memberships/directions, and either the whole Gram matrix (exact
   solver) or the first block-Krylov product (randomized solver).
2. **Location passes** (``location="auto"`` only) — scores on a preliminary spectrum (free in
   the dual orientation); the inlier offset along each candidate eigenvector is found in that
   score space (:func:`~mspca_dask.location.candidate_location`), and one more pass computes
   the location (dual) or the images of the groups found there (primal, only when there are
   any: they give the knockoffs cluster-aware memberships).
3. **Further Krylov passes** (randomized solver) until every eigenvalue above the bulk edge,
   of the original *and* of every knockoff spectrum, is certified to within ``ε/10``.  The
   knockoffs are rank-one terms ``γ' m'ᵀ`` applied algebraically: no pass is added for them.
4. **Output pass** — sample scores (or, in the dual orientation, feature loadings); the
   randomized solver takes them from the images of its Krylov basis kept by the passes
   and then skips this pass.

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
from ..location import (
    CandidateLocation,
    candidate_location,
    density_groups,
    groups_outside,
    residual_groups,
    split_groups,
)
from ..matching import (
    MIN_BULK_CHECK,
    REFERENCE_MIXED_SHARE,
    SAME_PARTITION,
    SPREAD_COSINE,
    WithinSpikes,
    between_group_share,
    check_invariance,
    edge_evidence,
    group_cells,
    group_shift_evidence,
    groups_apart_from_reference,
    groups_spread_like_reference,
    mixed_pairs,
    model_fit_diagnostics,
    partition_association,
    reference_group_evidence,
    reference_offset,
    shift_evidence,
    shift_z_threshold,
    variance_standard_error,
    within_line,
    within_spikes,
    within_variance,
)
from .draws import Draws
from .linalg import LowRank, flip_signs
from .plan import FitPlan
from .spectra import PassReader, PassRunner, Spectra, Spectrum, check_overflow, make_spectra

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
    stable: np.ndarray  # (K,) bool
    candidate: np.ndarray  # (K,) bool
    reasons: np.ndarray  # (K,) str
    displacement: np.ndarray  # (K,)
    eigenvector_overlap: np.ndarray  # (K,)
    shift_z: np.ndarray  # (K,)
    diagnostics: str | None
    eigenvalue_bounds: np.ndarray  # (K,)
    eigenvectors: np.ndarray  # (K, d)
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
    fit: CandidateLocation | None = None  # location="auto"


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
    if plan.location.mode == "auto":
        centre, knock = _estimate_location(fit, moments, knock, draws)
    base_terms = fit.location_terms(centre.mu, centre.image, moments)
    spec, knock_specs, strength, s2, eps = _converge(fit, moments, knock, centre, base_terms)
    certified = fit.spectra.certify(spec, fit.lowrank(base_terms))
    return _finish(
        fit, moments, knock, centre, spec, knock_specs, strength, s2, eps, certified=certified
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
        fsum, fsq = out["row_sum"], out["row_sumsq"]
        images = out["side"][:, :B]
        if given is not None:
            centre = replace(centre, image=out["side"][:, B])
    else:
        fsum, fsq = out["col_sum"], out["col_sumsq"]
        images = out["side"] if side is not None else np.repeat(fsum[:, None], B, axis=1)
    n = fit.n
    moments = Moments(fsum, float(out["col_sumsq"].sum()), fsq / n - (fsum / n) ** 2)
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


def _estimate_location(
    fit: _Run, m: Moments, knock: Knockoffs, draws: Draws
) -> tuple[Centre, Knockoffs]:
    """The inlier location ``μ = x̄ + V_k·offsets`` from the candidates' score columns."""
    prm, n, spectra = fit.plan.params, fit.n, fit.spectra
    xbar = m.feature_sum / n
    spec, terms = _preliminary_spectrum(fit, m, knock, xbar)
    s2 = fit.noise(spec.values, terms, m)
    edge = rmt.mp_edges(fit.c, s2)[1]
    k = int(np.clip(np.count_nonzero(spec.values > edge), 1, prm.n_components))
    V0 = spec.vectors[:, :k]
    known = fit.known_vectors(knock, Centre(), m)
    if fit.dual:
        sing = np.sqrt(np.maximum(spec.values[:k], 0) * n)
        scores = V0 * sing
    else:
        out = spectra.read_with("mspca-location-scores", known, keep=V0)
        scores = out["keep"] - (xbar @ V0)[None, :]
    loc = candidate_location(scores, random_state=fit.location_seed)
    groups = loc.groups
    if fit.dual:
        # μ = x̄ + X̃ᵀU₀(offsets/sing) = Xᵀa, a big-side product; X μ = X Xᵀ a is the Gram
        # operator applied to a.
        beta = V0 @ (loc.offsets / np.where(sing > 0, sing, 1.0))
        a = beta + (1.0 - float(beta.sum())) / n
        out = spectra.read_with("mspca-location-mean", known, extra=[a[:, None]], keep=a[:, None])
        centre = Centre(out["keep"][:, 0], spectra.apply(a), loc)
        return centre, _with_groups(knock, groups, None, draws, fit.dual)
    centre = Centre(xbar + V0 @ loc.offsets, None, loc)
    if not groups.shape[1]:
        return centre, knock
    known = fit.known_vectors(knock, centre, m)
    out = spectra.read_with("mspca-location-groups", known, side=groups)
    return centre, _with_groups(knock, groups, out["side"], draws, fit.dual)


def _preliminary_spectrum(
    fit: _Run, m: Moments, knock: Knockoffs, xbar: np.ndarray
) -> tuple[Spectrum, list[Term]]:
    """Spectrum of the mean-centred data, converged loosely (it only ranks samples)."""
    X_xbar = fit.spectra.apply(np.ones((fit.n, 1)))[:, 0] / fit.n if fit.dual else None
    terms = fit.location_terms(xbar, X_xbar, m)
    lr = fit.lowrank(terms)
    history: list[np.ndarray] = []
    while True:
        spec = fit.spectra.spectrum(lr)
        s2 = fit.noise(spec.values, terms, m)
        # Loose accuracy is enough: this spectrum only ranks samples in score space.
        settled, _bound = fit.spectra.settled(spec, [], history, s2, tol=0.05 * s2)
        if settled or fit.read.n_passes >= fit.plan.params.max_passes // 2:
            return spec, terms
        history.append(spec.values)
        fit.spectra.read_with(
            f"mspca-pass-{fit.read.n_passes + 1}",
            fit.known_vectors(knock, Centre(), m),
            extra=None if fit.dual else [xbar[:, None]],
        )


def _with_groups(
    knock: Knockoffs, groups: np.ndarray, Xt_groups: np.ndarray | None, draws: Draws, dual: bool
) -> Knockoffs:
    """Add the groups found in score space to every knockoff's membership.

    A global membership moves a pair only through its eigenvector's overlap with the
    mean ``x̄ − μ``: with several clusters that is one direction, and a mean-shift
    eigenvector orthogonal to it never moves (equal clusters make that the rule).  Each
    knockoff ``b`` adds ``Σ_g r_bg 1_{G_g}`` (``r_bg`` independent N(0, 9): the groups, not
    the global membership, then carry most of its weight) so that a group
    displaced along an eigenvector moves it whatever the other groups do; a covariance
    eigenvector's scores average out over a group.
    """
    if groups.shape[1] == 0:
        return knock
    r = draws.group_weights(groups.shape[1])
    memberships = knock.memberships + groups @ r
    if dual:
        return replace(knock, memberships=memberships)
    if Xt_groups is None or knock.images is None:
        raise RuntimeError("the primal groups need their images Xᵀ1_G")
    return replace(knock, memberships=memberships, images=knock.images + Xt_groups @ r)


# ---------------------------------------------------------------------------- the spectra


def _knockoff_spectra(
    fit: _Run, knock: Knockoffs, base: LowRank, base_terms: list[Term], strength: float
) -> list[Spectrum]:
    """The top ``K + KNOCKOFF_EXTRA`` eigenpairs of each of the B knockoff operators."""
    return [
        fit.spectra.spectrum(
            fit.lowrank(base_terms + [knock.term(b, strength, fit.dual)]),
            base=base,
            k=fit.plan.k_knockoff,
        )
        for b in range(fit.plan.params.n_knockoffs)
    ]


def _converge(
    fit: _Run, m: Moments, knock: Knockoffs, centre: Centre, base_terms: list[Term]
) -> tuple[Spectrum, list[Spectrum], float, float, float]:
    """The original and the knockoff spectra, certified (randomized solver: pass by pass)."""
    prm, spectra, read = fit.plan.params, fit.spectra, fit.read
    base = fit.lowrank(base_terms)
    budget = prm.max_passes
    history: list[np.ndarray] = spectra.earlier_history(base)
    while True:
        spec = spectra.spectrum(base)
        s2 = fit.noise(spec.values, base_terms, m)
        eps = rmt.invariance_threshold(fit.n, fit.c, s2, prm.threshold_scale)
        strength = rmt.knockoff_strength(spec.values[0], fit.c, s2, prm.knockoff_factor)
        tol = prm.tol if prm.tol is not None else eps / 10
        # The knockoff spectra are only needed once the original one has settled: the
        # stopping rule asks both, and skipping B Rayleigh–Ritz solves per pass until then
        # changes no decision (the passes and the result are the same).
        knock_specs: list[Spectrum] | None = None
        if spectra.settled(spec, [], history, s2, tol)[0]:
            knock_specs = _knockoff_spectra(fit, knock, base, base_terms, strength)
            if spectra.settled(spec, knock_specs, history, s2, tol)[0]:
                return spec, knock_specs, strength, s2, eps
        if read.n_passes >= budget - 1:
            if knock_specs is None:
                knock_specs = _knockoff_spectra(fit, knock, base, base_terms, strength)
            bound = spectra.settled(spec, knock_specs, history, s2, tol)[1]
            warnings.warn(
                "the randomized solver stopped "
                + (
                    "with its Krylov space exhausted"
                    if spectra.exhausted
                    else f"at its pass budget ({prm.max_passes})"
                )
                + " with "
                f"an eigenvalue error bound of {bound:.3g}, above the target "
                f"{tol:.3g}; the invariance check may be unreliable. Raise max_passes or use "
                f"solver='exact'.",
                ConvergenceWarning,
                stacklevel=4,
            )
            return spec, knock_specs, strength, s2, eps
        history.append(spec.values)
        if not spectra.extend(
            f"mspca-pass-{read.n_passes + 1}", fit.known_vectors(knock, centre, m)
        ):
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
    certified: tuple[Spectrum, np.ndarray | None] | None = None,
) -> FitOutput:
    """The output pass, the invariance check and its verdicts.

    ``certified``: the original spectrum recomputed from float64 products and the image of
    its vectors (:meth:`~mspca_dask._engine.spectra.KrylovSpectra.certify`) after float32
    passes; it gives the reported eigenpairs, bounds and scores, while the displacements and
    overlaps compare ``spec`` with the knockoff spectra of the same float32 products.
    """
    n, d, K = fit.n, fit.d, fit.plan.params.n_components
    reported, image = certified if certified is not None else (spec, None)
    edge = rmt.mp_edges(fit.c, s2)[1]
    tw_scale = rmt.tracy_widom_scale(n, d, s2)
    margin = fit.plan.params.edge_margin * tw_scale
    overlaps = np.stack(
        [
            _feature_overlaps(fit, knock, centre, spec, sp, b, strength)
            for b, sp in enumerate(knock_specs)
        ]
    )
    # only verdicts can be wrong: with no candidate NoSpikeWarning already says it all
    diagnostics = (
        model_fit_diagnostics(reported.values, edge, margin, m.feature_var, n, d)
        if np.any(reported.values > edge + margin)
        else []
    )
    for line in diagnostics:
        warnings.warn(line, ModelFitWarning, stacklevel=3)
    components, scores = _output(fit, centre, reported, image)
    inliers = within = None
    # (n, g) the groups found in score space; None when location="auto" found none (blind)
    # or the location was given
    groups = centre.fit.groups if centre.fit is not None and centre.fit.groups.shape[1] else None
    blind = centre.fit is not None and groups is None
    if groups is not None:
        inliers = ~np.any(groups > 0, axis=1)
    # The evidence counts the leak of a displaced group into a covariance spike's sample
    # eigenvector (shift_evidence, Notes).  With groups found in score space it is the
    # between-group χ² of the scores, the supremum of the per-knockoff z over every
    # membership the random group weights could draw: the median over five draws let two
    # groups on opposite sides of the inliers cancel and hid clear mean shifts (4 unequal
    # clusters trial 37, 3 equal clusters trial 11), and a supremum counts the leak whole,
    # so its covariance counts it too.
    # the candidates: above the line, or between the edge and it with skewed scores
    near_edge = edge_evidence(
        reported.values,
        scores,
        edge=edge,
        tw_scale=tw_scale,
        margin_units=fit.plan.params.edge_margin,
    )
    spikes = near_edge.candidate
    if groups is None:
        shift_z = shift_evidence(
            scores, knock.memberships, inliers, spikes=spikes, reference=fit.plan.location.reference
        )
    else:
        shift_z = group_shift_evidence(scores, groups, inliers, spikes=spikes)
    z_threshold = shift_z_threshold(K)
    carried = None
    # |cos| of each pair with the within-group spike it carries (1: its own)
    carried_cosine: np.ndarray | None = None
    if groups is not None:
        groups, carried, shift_z = _missed_clusters(
            scores,
            groups,
            spikes,
            shift_z,
            z_threshold,
            reported.values,
            edge=edge,
            margin=margin,
            random_state=fit.location_seed,
        )
        found = groups
        inliers = ~np.any(groups > 0, axis=1)
        within = carried.variance
        carried_cosine = carried.cosine
    # the share of each pair's variance between the groups: those found in score space, or
    # the reference and the rest; none with a given centre (no groups to compare)
    share = None
    mixed_max_share: float | np.ndarray = 1.0
    within_of_reference = False
    within_se = None
    offset = centring = None
    offset_bound = math.inf
    reference = fit.plan.location.reference
    if groups is not None and inliers is not None:
        share = between_group_share(scores, np.where(inliers, 0, 1 + np.argmax(groups > 0, axis=1)))
        # a pair shifted by the evidence but short of the share may cross a group that holds
        # clusters on both of its sides: split the groups along it and take the larger share
        slight = spikes & (shift_z >= z_threshold) & (share < fit.plan.params.min_shift_share)
        if np.any(slight):
            finer = split_groups(scores[:, slight], found, random_state=fit.location_seed)
            if finer.shape[1] > found.shape[1]:
                finer_share = between_group_share(scores, group_cells(finer))
                share = np.where(slight, np.maximum(share, finer_share), share)
    elif reference is not None:
        ref = np.asarray(reference, dtype=bool)
        share = between_group_share(scores, (~ref).astype(np.intp))
        two_sets_share = share
        shift_z, share = _reference_groups(
            scores,
            ref,
            spikes,
            shift_z,
            share,
            z_threshold,
            fit.plan.params.min_shift_share,
            lend_below=REFERENCE_MIXED_SHARE,
        )
        # the reference carries the covariance spikes: a pair along which it still spreads as
        # a spike, with little of its variance between the groups (over the groups along the
        # other pairs too, lend_below above), is a covariance spike leaning towards them
        # (REFERENCE_MIXED_SHARE)
        within = scores[ref].var(axis=0)
        within_of_reference = True
        # the reference's variance is an estimate: R8 trial 34 flagged the half of a split
        # covariance spike along which it read 2.734 against the line 2.740, 0.04 of its
        # standard errors below; a spike is only ruled out with the evidence a shift needs
        within_se = variance_standard_error(scores[ref])
        mixed_max_share = REFERENCE_MIXED_SHARE
        if not _bulk_above(reported.values, edge, margin):
            # a covariance spike spread over the pairs about to be flagged
            per_pair = mixed_pairs(
                reported.values,
                shift_z,
                z_threshold,
                within,
                edge=edge,
                margin=margin,
                share=share,
                max_share=REFERENCE_MIXED_SHARE,
                within_se=within_se,
            )
            unshifted = (shift_z < z_threshold) | (share < fit.plan.params.min_shift_share)
            lift, of_reference = _spread_reference_spikes(
                scores, ref, spikes, spikes & (unshifted | per_pair), reported.values, edge, margin
            )
            along = variance_standard_error(scores[ref] @ of_reference.directions)
            within = np.where(lift, of_reference.variance, within)
            within_se = np.where(lift, along, within_se)
            mixed_max_share = np.where(lift, 1.0, REFERENCE_MIXED_SHARE)
            carried_cosine = np.where(lift, of_reference.cosine, 1.0)
        # the rest's offset from the reference is the sampling error of both means, and with
        # more features than samples that error forms its own eigenvector (R11: flagged in
        # every trial with no contamination).  A pair whose shift rests on the offset alone,
        # within what that error puts along one direction, with the rest spreading like the
        # reference (a displaced group is a part of the rest and widens it), stays stable
        offset, offset_bound, centring = reference_offset(
            scores, ref, total_variance=float(np.sum(m.feature_var)), n_features=d, z=z_threshold
        )
        centring &= share - two_sets_share < fit.plan.params.min_shift_share
    check = check_invariance(
        spec.values,
        np.stack([sp.values for sp in knock_specs]),
        overlaps,
        threshold=eps,
        edge=edge,
        margin=margin,
        min_overlap=fit.plan.params.min_overlap,
        shift_z=shift_z,
        z_threshold=z_threshold,
        within=within,
        # location="auto" found no second group along any candidate: the location is the
        # sample mean along every pair, where no membership can displace the scores
        blind=np.ones(K, dtype=bool) if blind else None,
        share=share,
        min_share=fit.plan.params.min_shift_share,
        mixed_max_share=mixed_max_share,
        within_of_reference=within_of_reference,
        within_se=within_se,
        centring=centring,
        offset=offset,
        offset_bound=offset_bound,
        carries=None if carried is None else carried.carries,
        carried_cosine=carried_cosine,
        edge_evidence=near_edge,
    )
    if not np.any(check.candidate):
        warnings.warn(
            f"no eigenvalue is clearly above the Marchenko-Pastur edge {edge:.4g} (largest "
            f"{reported.values[0]:.4g}, noise variance {s2:.4g}): there is no spike to keep or "
            f"remove, and the result has no stable components.",
            NoSpikeWarning,
            stacklevel=3,
        )
    return FitOutput(
        eigenvalues=reported.values,
        knockoff_eigenvalues_all=np.stack([sp.values for sp in knock_specs]),
        knockoff_match=check.matched,
        stable=check.stable,
        candidate=check.candidate,
        reasons=check.reasons,
        displacement=check.displacement,
        eigenvector_overlap=check.overlap,
        shift_z=shift_z,
        diagnostics="\n".join(diagnostics) or None,
        eigenvalue_bounds=reported.bounds,
        eigenvectors=components,
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


#: Most rounds of the search for clusters the location step missed (:func:`_missed_clusters`).
MISSED_CLUSTER_ROUNDS = 3


def _missed_clusters(
    scores: np.ndarray,
    groups: np.ndarray,
    spikes: np.ndarray,
    shift_z: np.ndarray,
    z_threshold: float,
    eigenvalues: np.ndarray,
    *,
    edge: float,
    margin: float,
    random_state: int,
) -> tuple[np.ndarray, WithinSpikes, np.ndarray]:
    """The groups, the within-group spikes and the evidence, with the clusters a mixed verdict
    would hide.

    A covariance spike close to a mean-shift one in size mixes with it and may spread over
    several pairs: the spikes of the within-group covariance of the candidates' scores, one to
    each pair that carries most of one (:func:`~mspca_dask.matching.within_spikes`), decide
    which pairs can be kept stable as mixed.  Such a spike may also be a cluster the location
    step missed (no preliminary direction separated it), still among the inliers: before the
    verdicts, groups are looked for among them along every within-group spike (S8 trial 30:
    the missed 8 % cluster was the top within-group spike, spread over two pairs, and kept
    the more mixed one stable; S11 trial 15: the pair carrying a missed cluster read no
    evidence at all, and it is not only the pairs about to be called mixed that hide one;
    a covariance spike's scores are one unimodal shape, and the 1-D tests with their
    confirmation give it no group), reassigned with the others in all the
    candidates' columns (S8 trial 23: found along a direction that mixes it with a
    chi-square(1) PC, the cluster's group took 51 inliers from the PC's tail), and split
    along the candidates (two clusters on opposite sides of the inliers along one pair may
    lie together along the direction that found them).  The evidence then counts them (S9
    trial 12: the 7 % and 4 % clusters, both missed, formed one group of 176, and the pair
    carrying them, |cos| 0.51 and 0.66, read z 2.5 over the location step's one group).
    Repeated while a round finds groups, at most :data:`MISSED_CLUSTER_ROUNDS` times (S9
    trial 19: the second missed cluster was the within-group spike left by the first).

    Returns
    -------
    groups : (n_samples, g') ndarray
        ``groups`` followed by the missed clusters and their parts (the parts overlap them).
    carried : WithinSpikes
        Over the returned groups.
    shift_z : (K,) ndarray
        Over the returned groups (``shift_z`` itself when none were found).
    """
    disjoint = evidence_groups = groups

    # with six or more pairs all above the candidate line the bulk itself is above the edge
    # (correlated noise, real data off the model): nearly every direction of the span is
    # then a within-group spike, and assigning them to pairs says nothing (scikit-learn
    # digits, class 0, no contamination: 9 such spikes among 10 pairs, and the pair left
    # without one, 27.4 within its groups against the line 9.25, was flagged).  Each pair's
    # own within-group variance decides there, as it did before within-group spikes.
    bulk_above = _bulk_above(eigenvalues, edge, margin)

    def spikes_over(G: np.ndarray) -> WithinSpikes:
        own = within_variance(scores, G)
        line = within_line(eigenvalues, own, edge=edge, margin=margin)
        if bulk_above:
            K = own.size
            return WithinSpikes(spikes & (own > line), own, np.ones(K), np.eye(K))
        return within_spikes(scores, G, spikes, line)

    carried = spikes_over(groups)
    for _ in range(MISSED_CLUSTER_ROUNDS):
        # with the bulk above the edge nearly every pair carries its own "spike": look along
        # those the evidence shifts only (the pairs the per-pair rule would call mixed), as
        # before; along all ten, the genotype cohorts' fits without a reference took 35 %
        # longer (1000 samples: 10.9 -> 14.7 s) for the same verdicts
        look = carried.carries & (shift_z >= z_threshold) if bulk_above else carried.carries
        if not np.any(look):
            break
        more = residual_groups(
            scores @ carried.directions[:, look],
            disjoint,
            random_state=random_state,
            refine_on=scores[:, spikes],
        )
        # a round may merge groups as it reassigns them, so the count of columns does not
        # say whether it found one: a column is new when most of its members were inliers
        if not np.any(groups_outside(more, disjoint)):
            break  # none new (or each merged into a group)
        disjoint = more
        missed = groups_outside(disjoint, groups)
        evidence_groups = np.c_[
            disjoint[:, ~missed], split_groups(scores[:, spikes], disjoint[:, missed])
        ]
        carried = spikes_over(evidence_groups)
        inliers = ~np.any(evidence_groups > 0, axis=1)
        shift_z = group_shift_evidence(scores, evidence_groups, inliers, spikes=spikes)
    return evidence_groups, carried, shift_z


def _bulk_above(eigenvalues: np.ndarray, edge: float, margin: float) -> bool:
    """Whether six or more pairs were computed and all are above the candidate line: the
    bulk itself is then above the edge (correlated noise, real data off the model)."""
    return bool(eigenvalues.size >= MIN_BULK_CHECK and eigenvalues[-1] > edge + margin)


def _spread_reference_spikes(
    scores: np.ndarray,
    reference: np.ndarray,
    spikes: np.ndarray,
    kept: np.ndarray,
    eigenvalues: np.ndarray,
    edge: float,
    margin: float,
) -> tuple[np.ndarray, WithinSpikes]:
    """The pairs to keep as covariance spikes spread over pairs about to be flagged.

    A spike as strong as the clusters' mixes with them and spreads over several pairs
    (``benchmarks/accuracy.py`` R16 trial 9: the top covariance PC at ``|cos|`` 0.54, 0.67
    and 0.51 with the three top pairs, each also 0.49 to 0.61 with a cluster): along none of
    them does the reference spread above the line (2.83 to 3.01 against 3.88), and all three
    were flagged, while along a direction of their span it spreads 4.70 (``|cos|`` 0.63 with
    the pair that carries most of it).

    Under the model the reference spreads as a spike along the covariance spikes alone, so
    the candidates hold as many covariance spikes as the reference has spikes in their span
    (:func:`~mspca_dask.matching.within_spikes`, the reference as the inliers and the rest
    as one group).  When fewer candidates than that are ``kept`` stable
    (unshifted, or by the per-pair rule), the spikes missing are among the pairs about to be
    flagged: in their span, the reference's spikes spread over several of them (``|cos|``
    below :data:`~mspca_dask.matching.SPREAD_COSINE` with the pair carrying each), the
    largest first, keep their carrier, as many as are missing.  Searched among every
    candidate instead, near-equal spikes of the reference rotate into each other (R16 trial
    9: the direction also ``|cos|`` 0.51 with the second PC's own stable pair), and a spike
    lying evenly on a flagged pair and a kept one (R16 trial 33: ``|cos|`` 0.65 and 0.63,
    31.2 and 8.7 % between the groups) went to the flagged one (alignment with the clean top
    PC 0.77 -> 0.61).

    Counting matters: ``accuracy.py`` R20 trial 7 (held out) had the top PC spread over three
    pairs, one kept by the per-pair rule, and the two others still held a spike of the
    reference (3.46 against the line 3.29); keeping its carrier too made two stable pairs of
    one PC and hid a cluster (``|cos|`` 0.63 with it).  The reference has two spikes there
    and two pairs were kept already.

    Returns
    -------
    lift : (K,) bool ndarray
        The pairs to keep whatever their share between the groups.
    spread : WithinSpikes
        The reference's spikes in the span of the pairs about to be flagged.
    """
    rest = (~reference).astype(float)[:, None]
    line = within_line(eigenvalues, within_variance(scores, rest), edge=edge, margin=margin)
    every = within_spikes(scores, rest, spikes, line)
    missing = int(np.count_nonzero(every.carries)) - int(np.count_nonzero(kept))
    spread = within_spikes(scores, rest, spikes & ~kept, line)
    lift = np.zeros(spikes.shape, dtype=bool)
    if missing > 0:
        carriers = np.flatnonzero(spread.carries & (spread.cosine < SPREAD_COSINE))
        largest = carriers[np.argsort(-spread.variance[carriers], kind="stable")]
        lift[largest[:missing]] = True
    return lift, spread


#: Outsiders spreading more than this many times the reference along a pair, with no separated
#: modes, are not expected to leave a rest that spreads like it (:func:`_reference_groups`).
WIDE_OUTSIDERS = 5.0


def _reference_groups(
    scores: np.ndarray,
    reference: np.ndarray,
    spikes: np.ndarray,
    shift_z: np.ndarray,
    share: np.ndarray,
    z_threshold: float,
    min_share: float,
    lend_below: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Evidence and shares of a reference fit, over the groups the other samples form.

    With a reference the evidence sums every other sample's scores along a pair and the
    share is taken over the reference and the rest, so populations on both sides of the
    reference cancel.  The non-reference samples' scores along each candidate pair get the
    location step's 1-D tests (:func:`~mspca_dask.location.residual_groups`), and:

    * a pair shifted by the evidence but short of ``min_share`` (or of ``lend_below``, the
      bound of the reference's mixed rule, :data:`~mspca_dask.matching.REFERENCE_MIXED_SHARE`)
      takes its share over the reference and the groups found along the *other* pairs, if
      larger (along itself groups are displaced by construction).  1000 Genomes Europeans
      with a CEU reference: the TSI axis held 2 % of its variance between CEU and the rest,
      about 60 % between the labelled populations; AmericanAdmixture_4B18 seed 5 with the
      EUR reference: PC2 (AFR at −101, EUR at 0, the admixed at +60, ASIA at +141) held 7.3 %
      between EUR and the rest;
    * a pair below ``z_threshold`` is compared with the groups found along the pairs now
      shifted (the populations the evidence found), each group by its own variance
      (:func:`~mspca_dask.matching.reference_group_evidence`), and keeps the larger
      evidence, with its share over those groups.  OutOfAfrica_4J17 with a CEU reference:
      the axis with YRI on one side and CHB and JPT on the other read z 2.27 in seed 2, and
      reads 23.5 now that another shifted axis separates them.  A pair the next rule shifts
      by its own groups lends them in turn to the pairs still below, until no pair joins.
      With three clusters over three pairs (``benchmarks/accuracy.py`` R5 trials 17 and
      37), the first pair put every cluster in one group, only the second pair's own groups
      shifted it, and its groups are what separates the two clusters on opposite sides of
      the reference along the third (z 0.12 with the first pair's groups, 15.0 with both).
      A pair shifted by this rule lends nothing: it is shifted by borrowed groups, and
      lending its own chained the borrowing onto R5 trial 31's top covariance spike (16 % of
      its variance between the groups then, flagged at the former 10 % mixed bound).  Groups
      along covariance pairs are not used here: discrete haplotype groups (0, 1 or 2 copies)
      along one covariance PC are displaced along its neighbours too, and read as populations
      (8 of 10 PCs of the genomics benchmark's cohort flagged so);
    * a pair not yet shifted with its share is compared with its *own* groups that the
      reference does not reach (:func:`~mspca_dask.matching.groups_apart_from_reference`):
      every group of outsiders that lies where the reference has almost no sample, provided
      the outsiders left with the reference spread like it.  OutOfAfrica_4J17 seeds 1 and 3: only
      this axis separates YRI (−160) from CHB and JPT (+80, +92), the reference sits at 0
      with a standard deviation of 4 to 5, and the pair read z 0.01 and 1.05.  A haplotype
      group along a linkage PC is not taken: the reference holds its share of it, or the
      outsiders spread 2.6 to 35 times wider than the reference along that PC (its rare
      variants, scaled by the reference's frequencies).  Nor are a pair's groups taken, as
      its evidence or lent to others, when every one spreads more than
      :data:`~mspca_dask.matching.WIDE_GROUPS` times the reference and they cut across the
      groups of the other pairs that spread like it (Cramér's V below
      :data:`~mspca_dask.matching.SAME_PARTITION`): OutOfAfrica_4J17 seed 5, PC3's three
      haplotype groups of Yoruba and East Asians at 9 to 12 times, V 0.13 against the
      populations along PC2, had shifted PC3 (z 31.6) and, lent, PC4.  The pair keeps the larger
      evidence, and takes those groups' share when they shift it by themselves: with three
      clusters mixed over three pairs (``benchmarks/accuracy.py`` R4), a cluster pair's
      evidence passed but over the reference and the rest, half of it inliers, 1 to 4 % of
      its variance lay between them (7 of 40 trials failed; none now).

    Nothing is fitted when every candidate pair is already shifted with its share, and a
    pair's own 1-D tests are skipped where no rest could spread like the reference
    (:data:`WIDE_OUTSIDERS`).
    """
    rest = ~reference
    todo = spikes & ((shift_z < z_threshold) | (share < max(min_share, lend_below)))
    if np.count_nonzero(rest) < 20 or not np.any(todo):
        return shift_z, share
    shift_z, share = shift_z.copy(), share.copy()
    pairs = np.flatnonzero(spikes)
    T = scores[rest]
    none = np.zeros((T.shape[0], 0))
    fitted: dict[int, np.ndarray] = {}
    kept: dict[int, np.ndarray] = {}

    def fitted_along(j: Any) -> np.ndarray:
        """Pair ``j``'s groups among the non-reference samples as the 1-D tests find them
        (fitted once, when needed: 0.1 s a pair on the benchmark cohort's 1000)."""
        if j not in fitted:
            fitted[j] = residual_groups(T[:, [j]], none)
        return fitted[j]

    def spread_like(j: Any) -> bool:
        groups = fitted_along(j)
        return not groups.shape[1] or groups_spread_like_reference(
            scores[reference, j], T[:, j], group_cells(groups)
        )

    def along(j: Any) -> np.ndarray:
        """Pair ``j``'s groups; none where every group spreads far wider than the reference
        (:func:`~mspca_dask.matching.groups_spread_like_reference`: haplotype groups along a
        linkage PC) unless they split the samples as the groups along another pair that
        spread like it do (:func:`~mspca_dask.matching.partition_association`: populations
        more diverse than the reference)."""
        if j not in kept:
            groups = fitted_along(j)
            if groups.shape[1] and not spread_like(j):
                found = [
                    fitted_along(k)
                    for k in pairs
                    if k != j and worth_testing(k) and fitted_along(k).shape[1] and spread_like(k)
                ]
                if found and (
                    partition_association(group_cells(groups), group_cells(np.column_stack(found)))
                    < SAME_PARTITION
                ):
                    groups = none
            kept[j] = groups
        return kept[j]

    def worth_testing(j: Any) -> bool:
        """Whether pair ``j``'s own groups could lie apart from the reference with the rest
        spreading like it, before the 1-D tests (0.1 to 1.3 s a pair) decide.

        Unless they are fitted already or the density has separated modes, groups can only
        be overlapping mixture components; a unimodal mixture's main component keeps about
        half the scores' standard deviation or more, so the rest, which holds it, is not
        expected to spread within ``max_spread`` (2) times the reference's when the scores
        spread more than :data:`WIDE_OUTSIDERS` times (a screen, not a proof).  That skips
        the linkage PCs of genotypes scaled by a reference's frequencies (7 to 47 times on
        the genomics benchmark's cohort).
        """
        if j in fitted or density_groups(T[:, j]) is not None:
            return True
        return bool(T[:, j].std() <= WIDE_OUTSIDERS * scores[reference, j].std())

    def labels_from(columns: list[np.ndarray]) -> np.ndarray:
        labels = np.zeros(scores.shape[0], dtype=np.intp)
        labels[rest] = 1 + group_cells(np.column_stack(columns))
        return labels

    for i in np.flatnonzero(todo & (shift_z >= z_threshold)):
        others = [along(j) for j in pairs if j != i and along(j).shape[1]]
        if others:
            labels = labels_from(others)
            share[i] = max(share[i], float(between_group_share(scores[:, [i]], labels)[0]))
    weak = todo & (shift_z < z_threshold)
    own_tested: set[int] = set()
    # the pairs whose groups the weak pairs are compared with: those shifted by the evidence
    # and, as they join, those shifted by their own groups apart from the reference
    lenders = spikes & (shift_z >= z_threshold) & (share >= min_share)
    while True:
        for i in np.flatnonzero(weak & ~lenders):
            found = [along(j) for j in np.flatnonzero(lenders) if j != i and along(j).shape[1]]
            if not found:
                continue
            labels = labels_from(found)
            z = float(reference_group_evidence(scores[:, [i]], labels)[0])
            if z > shift_z[i]:
                shift_z[i] = z
                share[i] = max(share[i], float(between_group_share(scores[:, [i]], labels)[0]))
        shifted = spikes & (shift_z >= z_threshold) & (share >= min_share)
        joined = np.zeros_like(spikes)
        for i in np.flatnonzero(todo & ~shifted):
            if i in own_tested:
                continue  # its own groups do not depend on the other pairs
            own_tested.add(int(i))
            if not worth_testing(i) or not along(i).shape[1]:
                continue
            cells = labels_from([along(i)])[rest]
            apart = groups_apart_from_reference(scores[reference, i], T[:, i], cells)
            if not np.any(apart > 0):
                continue
            labels = np.zeros(scores.shape[0], dtype=np.intp)
            labels[rest] = apart  # -1: outsiders with the reference, left out of the evidence
            z = float(reference_group_evidence(scores[:, [i]], labels)[0])
            # the share counts the outsiders left with the reference as the reference
            own = float(between_group_share(scores[:, [i]], np.maximum(labels, 0))[0])
            if z > shift_z[i] or (z >= z_threshold and own >= min_share):
                shift_z[i] = max(shift_z[i], z)
                share[i] = max(share[i], own)
                joined[i] = shift_z[i] >= z_threshold and share[i] >= min_share
        # a pair shifted by its own groups lends them to the weak pairs not yet shifted
        # (R5 trial 17: clusters at -6.2 and +5.7 along a third pair were one group along
        # the first, and only the second pair's own groups separate them; z 0.12 -> 15)
        if not np.any(joined):  # a joined pair was not shifted, so never a lender before
            break
        lenders |= joined
    return shift_z, share


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
    fit: _Run, centre: Centre, spec: Spectrum, image: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Components (K, d) and scores (n, K), from ``image`` (``M U``, when the spectrum's
    certificate computed it), the basis's images, or by the output pass."""
    n, U, mu = fit.n, spec.vectors, centre.mu
    if image is None:
        image = fit.spectra.basis_image(U)
    if image is None:  # ``M U`` by the output pass
        image = fit.read("mspca-output", single=fit.spectra.use_single(), keep=U)["keep"]
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
    return Vf.T.copy(), scores * signs
