"""The public entry point: :func:`fit` (Mean-Shift PCA by Knockoff Mean) and :func:`open_result`.

The flow of one fit, each numbered pass being one read of the data:

1. **Statistics + spectrum pass** — column/row sums and squares, non-finite counts, the
   images of the knockoff memberships/directions, and either the whole Gram matrix (exact
   solver) or the first block-Krylov product (randomized solver).
2. **Further Krylov passes** (randomized solver) until every eigenvalue above the bulk edge,
   of the original *and* of every knockoff spectrum, is certified to within ``ε/10``.  The
   knockoffs are rank-one terms ``γ' m'ᵀ`` applied algebraically: no pass is added for them.
3. **Location passes** (``location="auto"`` only) — scores on a preliminary spectrum (free in
   the dual orientation); the inlier offset along each candidate eigenvector is found in that
   score space (:func:`~mspca_dask.location.candidate_location`), and one more pass computes
   the location (dual) or the images of the groups found there (primal, only when there are
   any: they give the knockoffs cluster-aware memberships).
4. **Output pass** — sample scores (or, in the dual orientation, feature loadings); the
   randomized solver takes them from the images of its Krylov basis kept by the passes
   (within ``BASIS_IMAGE_BUDGET``) and skips this pass.

Only small NumPy arrays — sketches of size ``(n + d) × ℓ`` at most and ``K × K`` results — come
back to the driver.
"""

from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import rmt
from ._execution import Executor
from ._params import FitParams, check_location
from ._safety import check_output_path
from ._engine.linalg import (
    LowRank,
    apply_operator,
    dense_operator,
    flip_signs,
    orthonormalize,
    rayleigh_ritz,
    top_eigh,
)
from .errors import (
    ConvergenceWarning,
    InputError,
    ModelFitWarning,
    NonFiniteError,
    NoSpikeWarning,
    ParameterError,
)
from .genotypes import genotype_input
from .io import open_source
from .location import candidate_location
from .matching import (
    check_invariance,
    model_fit_diagnostics,
    shift_evidence,
    shift_z_threshold,
    within_group_variance,
)
from .result import MSPCAResult, open_result
from ._passes import Oriented, orient, pass_graph

__all__ = ["fit", "open_result"]

#: Largest operator dimension for which the exact solver keeps a dense Gram matrix on the
#: driver (8192² float64 = 512 MiB).
EXACT_MAX_DIM = 8192
#: Extra eigenpairs computed per knockoff spectrum (see ``_Fit.K_knockoff``).
KNOCKOFF_EXTRA = 2
#: Driver memory (bytes) the randomized solver may spend keeping the Krylov basis's images
#: ``M Q`` (m × basis columns), from which the scores come without an output pass.
BASIS_IMAGE_BUDGET = 512 * 2**20


def fit(
    source: Any,
    n_components: int = 10,
    *,
    variable: str | None = None,
    sample_dim: str = "samples",
    location: str | np.ndarray | None = "auto",
    solver: str = "auto",
    n_knockoffs: int = 5,
    knockoff_weight: float = 1.0,
    knockoff_factor: float = 2.0,
    threshold_scale: float = 3.0,
    min_overlap: float = 0.5,
    edge_margin: float = 4.0,
    tol: float | None = None,
    max_passes: int = 40,
    oversampling: int = 10,
    random_state: int | None = 0,
    scheduler: Any = None,
    progress: bool = False,
    allow_missing_chunks: bool = False,
    out: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
    reference_samples: Any = None,
) -> MSPCAResult:
    """Mean-Shift PCA: the top principal components, split into covariance and mean-shift ones.

    Parameters
    ----------
    source : array_like, dask array, xarray DataArray/Dataset, or str
        ``(n_samples, n_features)`` data: a NumPy or Dask array, an xarray object (samples
        along ``sample_dim``), or the path / fsspec URL of a Zarr store (v3 or v2; an array,
        or a group with ``variable``).  Samples are the observations of the PCA.
    n_components : int
        ``K``, the number of leading eigenpairs examined (1 ≤ K ≤ min(n_samples, n_features)).
    variable : str, optional
        Variable of a Zarr group or xarray Dataset.
    sample_dim : str
        Sample dimension of xarray or labelled Zarr input.
    location : {"auto"}, (n_features,) array_like or None
        What is subtracted from every sample before the analysis.  ``"auto"`` (default): the
        mean of the *inliers*, found by robust distances in the space of the leading scores,
        so that a shifted minority cannot drag it (centring by the plain sample mean hides
        every mean shift from the knockoff; see Notes).  ``None``: the data as they are (the
        paper's setting: inliers already centred).  A vector: that location (e.g. reference
        allele frequencies).
    solver : {"auto", "exact", "randomized"}
        ``"exact"`` accumulates the smaller Gram matrix in one pass and diagonalises it on the
        driver; ``"randomized"`` runs a block-Krylov iteration whose eigenvalues are certified
        by residual bounds; ``"auto"`` picks the one that a cost model fitted to measured
        timings predicts faster (``benchmarks/results/runtime.md``).
    n_knockoffs : int
        ``B``, the number of independent knockoffs; each statistic is their median.
    knockoff_weight : float
        ``π'`` in ``(0, 1]``: fraction of samples that receive the knockoff shift (paper: 1).
    knockoff_factor : float
        ``θ'² = knockoff_factor · σ² g⁻¹(λ̃₁/σ²)`` (paper: 2).
    threshold_scale : float
        ``C`` in ``ε = C σ² n^{-1/2}``.  The default 3 was calibrated on the paper's mixtures
        (``benchmarks/paper/RESULTS.md``); the paper's own choice ``1/c`` is too tight: with
        it a covariance spike drifts beyond ``ε`` more often at π₁ = 15–20 % (the
        ``paper-rule`` column there).
    min_overlap : float
        Smallest median overlap ``|⟨ũᵢ, u'ⱼ⟩|`` of a stable eigenvector with its match.
    edge_margin : float
        A candidate spike must exceed the bulk edge by this many Tracy–Widom units.
    tol : float, optional
        Eigenvalue accuracy the randomized solver certifies (default ``ε/10``).
    max_passes : int
        Pass budget of the randomized solver; reaching it warns with the bound reached.
    oversampling : int
        Extra columns of the randomized sketch.
    random_state : int or None
        Seed of every random draw (sketch, knockoff directions, memberships).  Results do not
        depend on chunking or on the number of workers.
    scheduler : str, distributed.Client or None
        Where passes run; ``None`` uses the active ``distributed.Client`` if any, else threads.
    progress : bool
        Progress bar per pass (on stderr).
    allow_missing_chunks : bool
        For a Zarr store: read chunks absent from the store as Zarr's fill value.  By
        default a missing chunk (a chunk file deleted or never copied) is a
        :class:`~mspca_dask.errors.ChunkReadError` naming the array and the chunk index,
        found from the store's listing before any pass.  The result records the choice and
        the number of absent chunks (``params["allow_missing_chunks"]``,
        ``params["missing_chunks"]``).
    out : str or os.PathLike, optional
        Also write the result atomically to this Zarr store (local path or fsspec URL).  The
        path is checked *before* the fit: it must not be, lie inside or contain the input
        store, must not exist (unless ``overwrite`` and it holds an mspca result) and its
        directory must be writable.
    overwrite : bool
        With ``out``: replace an existing mspca result there (never other data).
    reference_samples : sequence of str or (n_samples,) bool array, optional
        For a genotype ``source`` (the path of a VCF Zarr store, or of a PLINK fileset
        ``x.bed`` / ``x.pgen`` / prefix ``x``): the sample ids, or a mask, of the reference
        set whose allele frequencies centre and scale the dosages (then ``location`` must
        stay ``"auto"``; it becomes None).  Genotype sources are QC'd and standardised as by
        the genomics job (:mod:`mspca_dask.genotypes`; ``params["genotype_qc"]`` holds the
        counts): samples are the observations, variants the features.

    Returns
    -------
    MSPCAResult
        ``eigenvalues``, ``knockoff_eigenvalues``, ``stable``, ``components`` (the covariance
        PCs), ``mean_shift_components``, ``scores`` and the reason behind every verdict.

    Notes
    -----
    Paper, Algorithm 1: with ``X̃`` the data and a knockoff ``X̃' = X̃ + γ'm'ᵀ`` with
    ``θ'² = π'‖m'‖² = 2 g⁻¹(λ̃₁)``, an eigenpair ``(λ̃ᵢ, ũᵢ)`` of ``X̃ᵀX̃/n`` is a covariance
    eigenpair when a knockoff eigenvalue stays within ``ε = C n^{-1/2}``.  With ``π' = 1``
    the knockoff adds ``m'x̄ᵀ + x̄m'ᵀ + m'm'ᵀ`` to ``X̃ᵀX̃/n`` (``x̄`` the mean of the analysed
    data), so a spike moves only if its eigenvector overlaps ``x̄``.  Centring by the sample
    mean makes ``x̄ = 0`` and nothing moves — hence ``location="auto"``.

    Examples
    --------
    >>> from mspca_dask.testing import paper_setting
    >>> model = paper_setting(pi1=0.1, random_state=1)
    >>> res = fit(model.to_numpy(), n_components=4, random_state=0)
    >>> int(res.stable.sum()), int((~res.stable & res.candidate).sum())
    (1, 1)
    """
    params = FitParams.from_kwargs(
        n_components=n_components,
        solver=solver,
        n_knockoffs=n_knockoffs,
        knockoff_weight=knockoff_weight,
        knockoff_factor=knockoff_factor,
        threshold_scale=threshold_scale,
        min_overlap=min_overlap,
        edge_margin=edge_margin,
        tol=tol,
        max_passes=max_passes,
        oversampling=oversampling,
        random_state=random_state,
    ).as_dict()
    if out is not None:
        check_output_path(out, overwrite=overwrite, inputs=[source], what="out")
    gin = genotype_input(
        source,
        reference_samples=reference_samples,
        location=location,
        variable=variable,
        scheduler=scheduler,
        allow_missing_chunks=allow_missing_chunks,
    )
    if gin is not None:
        source, location, variable, sample_dim = gin.data, gin.location, None, "samples"
    src = open_source(
        source,
        variable=variable,
        sample_dim=sample_dim,
        allow_missing_chunks=allow_missing_chunks,
    )
    X = src.data
    n, d = (int(s) for s in X.shape)
    if n_components > min(n, d):
        raise ParameterError(
            f"n_components must be between 1 and min(n_samples, n_features) = {min(n, d)} "
            f"(not {n_components})"
        )
    loc_mode, loc_vec = check_location(location, d)
    data = orient(X)
    chosen = _choose_solver(solver, data, n_components, n_knockoffs, oversampling)
    # A client connected here (scheduler="tcp://...") is closed after the fit; an active or
    # handed-in Client is left open.
    with Executor(scheduler=scheduler, progress=progress) as executor:
        run = _Fit(
            data=data,
            executor=executor,
            loc_mode=loc_mode,
            loc_vec=loc_vec,
            **{**params, "solver": chosen},
        )
        fitted = run.run()
        where, n_passes = executor.description, executor.n_passes
    params.update(
        variable=variable,
        sample_dim=sample_dim,
        location="auto" if loc_mode == "auto" else ("none" if loc_mode == "none" else "given"),
        solver=chosen,
        source=src.description,
        scheduler=where,
        # float32: the thin products ran in float32 BLAS on float32 chunks, summed in float64
        # (their estimated rounding is part of eigenvalue_bounds)
        precision="float32" if run._single_used else "float64",
        allow_missing_chunks=bool(allow_missing_chunks),
        missing_chunks=src.missing_chunks,
    )
    if gin is not None:  # a genotype store: what its QC kept and dropped
        params["genotype_qc"] = gin.qc_counts
    result = MSPCAResult(
        **fitted,
        solver=chosen,
        n_passes=n_passes,
        random_state=random_state,
        params=params,
        sample_coords=src.sample_coords,
        feature_coords=src.feature_coords,
        sample_dim=src.sample_dim,
        feature_dim=src.feature_dim,
    )
    if out is not None:
        result.to_zarr(out, overwrite=overwrite)
    return result


#: Largest total sum of squares accepted: eigenvalues are at most this over n, and the solvers
#: square eigenvalue-sized numbers (norms, Rayleigh quotients), so it stays well below the
#: square root of float64's range.
_MAX_SUMSQ = float(np.sqrt(np.finfo(np.float64).max)) * 1e-4


def _check_overflow(out: dict[str, np.ndarray], name: str) -> None:
    """Refuse a pass whose sums overflowed (finite data whose squares exceed float64's range).

    The data were checked finite in the statistics pass, so an infinite or NaN product means
    values whose squares overflow; a total sum of squares above :data:`_MAX_SUMSQ` (about
    1e150) would overflow later, when the solvers square eigenvalue-sized numbers.  Either
    way nothing downstream would be meaningful (``eigh`` would fail on infinities).
    """
    bad = [k for k, v in out.items() if v.dtype.kind == "f" and not np.isfinite(v).all()]
    if not bad and "col_sumsq" in out and float(out["col_sumsq"].sum()) > _MAX_SUMSQ:
        bad = ["col_sumsq"]  # finite, but the spectrum's own squares would overflow
    if bad:
        raise InputError(
            f"the data's values are too large for the arithmetic: their squares overflow "
            f"float64 in pass {name!r} (products {', '.join(sorted(bad))} are infinite, NaN or "
            f"above {_MAX_SUMSQ:.0e}, beyond which the solvers' own squares overflow). "
            "Rescale the data (e.g. divide by their largest absolute value) and fit again."
        )


#: Seconds per unit of work, fitted by non-negative least squares to the timings of
#: ``benchmarks/runtime.py`` (``benchmarks/results/runtime.md``: 9 grid points, n = 2000 to
#: 32 000, d = 100 to 1600, K = 10, in memory, 2-core machine).  Only their ratios matter.
# Fitted by `benchmarks/runtime.py --grid-only` (2026-11-21 22:39, 1-min load 1.5).  The rerun
# in runtime.md (22:45) refitted them within 10 % and found that these constants, with
# RANDOMIZED_MARGIN, pick the faster solver at all 9 grid points.
COST_GRAM = 3.214e-11  # per m p² multiply-add of the one-pass Gram matrix
COST_EIGH = 4.148e-11  # per p³ of a dense top-K eigensolve (B + 1 of them)
COST_EXACT_FIXED = 0.076  # seconds of fixed cost of the exact path
COST_KRYLOV = 2.904e-10  # per m p ℓ of one block-Krylov pass (two thin products)
COST_PASS = 0.013  # seconds of fixed cost per pass (driver work, scheduling)
#: Passes the randomized solver typically needs, as the constants above were fitted: 4 to 9 on
#: the grid, median 5.  Since its scores come from the Krylov basis (no output pass) and its
#: stopping rule watches only the largest Ritz value below the edge, the same grid takes 3 to 6
#: (median 4, counted); the constants were not refitted (the machine was loaded), and 4 with
#: them would flip tiny fits (400 × 120), where fixed costs dominate, to the randomized path
#: untested, so the model keeps 5 (it slightly favours the exact path).
TYPICAL_PASSES = 5
#: ``solver="auto"`` takes the randomized path only when it is predicted below this fraction of
#: the exact path's time.
RANDOMIZED_MARGIN = 0.8


def _choose_solver(solver: str, data: Oriented, K: int, B: int, oversampling: int) -> str:
    """The cheaper of the two paths by a cost model fitted to measured timings.

    exact:      ``COST_GRAM·m p² + COST_EIGH·(B + 1) p³ + COST_EXACT_FIXED``;
    randomized: ``TYPICAL_PASSES · (COST_KRYLOV·m p ℓ + COST_PASS)`` with
                ``ℓ = K + 2 + oversampling + B + 3`` columns per block.

    The randomized path is taken only when its prediction is below
    :data:`RANDOMIZED_MARGIN` (0.8) of the exact one: near a tie, exact eigenvalues win.
    The exact path wins for large ``m`` while ``p`` is below about 1300 (measured); the
    randomized one for larger ``p``, and always above :data:`EXACT_MAX_DIM`.  The grid was
    in-memory float64; out of core each randomized pass also reads the store again (which
    favours the exact path) while float32 chunks make its products cheaper (which favours the
    randomized one): on a float32 Zarr store at ``m = 40 000, p = 2000`` the randomized path
    took 4.8 s and the exact one 5.0 s (``benchmarks/results/peers.md`` of 2026-11-22 00:04,
    before the output pass was dropped), as predicted.
    """
    m, p = data.m, data.p
    if solver == "exact":
        if p > EXACT_MAX_DIM:
            raise ParameterError(
                f"solver='exact' needs a dense {p} x {p} Gram matrix on the driver; the limit is "
                f"{EXACT_MAX_DIM}. Use solver='randomized'."
            )
        return "exact"
    if solver == "randomized":
        return "randomized"
    ell = K + KNOCKOFF_EXTRA + oversampling + B + 3
    exact_cost = COST_GRAM * m * p**2 + COST_EIGH * (B + 1) * p**3 + COST_EXACT_FIXED
    krylov_cost = TYPICAL_PASSES * (COST_KRYLOV * m * p * ell + COST_PASS)
    # The exact path's eigenvalues are exact: it is kept unless the randomized one is predicted
    # clearly faster (the model's median error is about 25 %).
    faster = krylov_cost < RANDOMIZED_MARGIN * exact_cost
    return "exact" if (p <= EXACT_MAX_DIM and not faster) else "randomized"


# ---------------------------------------------------------------------------- the fit


@dataclass
class _Spectrum:
    """Top-K eigenpairs of one operator, in operator space."""

    values: np.ndarray  # (K,)
    vectors: np.ndarray  # (p, K)
    bounds: np.ndarray  # (K,)
    op_vectors: np.ndarray | None = None  # the *base* operator applied to `vectors` (dual overlaps)


@dataclass
class _Fit:
    data: Oriented
    executor: Executor
    n_components: int
    n_knockoffs: int
    knockoff_weight: float
    knockoff_factor: float
    threshold_scale: float
    min_overlap: float
    edge_margin: float
    tol: float | None
    max_passes: int
    oversampling: int
    random_state: int | None
    loc_mode: str
    loc_vec: np.ndarray | None
    solver: str
    # state
    knock_dirs: np.ndarray = field(init=False)  # (d, B) unit knockoff directions m̂'
    memberships: np.ndarray = field(init=False)  # (n, B) knockoff memberships γ'
    omega: np.ndarray = field(init=False)  # (p, ℓ) sketch
    Xt_memb: np.ndarray | None = field(init=False, default=None)  # primal: Xᵀγ' (d, B)
    X_dirs: np.ndarray | None = field(init=False, default=None)  # dual: X m̂' (n, B)
    feature_sum: np.ndarray = field(init=False)  # Xᵀ1 (d,)
    total_sumsq: float = field(init=False)
    gram: np.ndarray | None = field(init=False, default=None)
    # Krylov basis
    Q: np.ndarray | None = field(init=False, default=None)
    Z: np.ndarray | None = field(init=False, default=None)
    # location
    mu: np.ndarray | None = field(init=False, default=None)  # (d,)
    X_mu: np.ndarray | None = field(init=False, default=None)  # dual: X μ (n,)
    loc_fit: Any = field(init=False, default=None)  # CandidateLocation (location="auto")

    # ------------------------------------------------------------------ setup
    def __post_init__(self) -> None:
        n, d, B = self.data.n_samples, self.data.n_features, self.B
        seeds = np.random.SeedSequence(self.random_state).spawn(4)
        rng_sketch, rng_dir, rng_memb = (np.random.default_rng(s) for s in seeds[:3])
        self._rng_groups = np.random.default_rng(seeds[3])
        dirs = rng_dir.standard_normal((d, B))
        self.knock_dirs = dirs / np.linalg.norm(dirs, axis=0)
        if self.knockoff_weight >= 1:
            self.memberships = np.ones((n, B))
        else:
            k = max(1, int(round(self.knockoff_weight * n)))
            memb = np.zeros((n, B))
            for b in range(B):
                memb[rng_memb.choice(n, size=k, replace=False), b] = 1.0
            self.memberships = memb
        ell = min(self.data.p, self.K + KNOCKOFF_EXTRA + self.oversampling)
        self.omega = rng_sketch.standard_normal((self.data.p, ell))
        if self.loc_mode == "given":
            self.mu = self.loc_vec
        self._images = []

    @property
    def K(self) -> int:
        return self.n_components

    @property
    def B(self) -> int:
        return self.n_knockoffs

    @property
    def n(self) -> int:
        return self.data.n_samples

    @property
    def d(self) -> int:
        return self.data.n_features

    @property
    def c(self) -> float:
        return self.d / self.n

    # ------------------------------------------------------------------ products in operator space
    def _lowrank(self, terms: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> LowRank:
        """Low-rank part for ``X̃ = X + Σ a fᵀ``; each term is (a (n,), f (d,), image).

        The image is ``Xᵀa`` (primal) or ``X f`` (dual): the data applied to the big-side
        factor.
        """
        if not terms:
            return LowRank.empty(self.data.p)
        a = np.column_stack([t[0] for t in terms])
        f = np.column_stack([t[1] for t in terms])
        img = np.column_stack([t[2] for t in terms])
        if self.data.dual:
            return LowRank(P=a, MtO=img, OtO=f.T @ f)
        return LowRank(P=f, MtO=img, OtO=a.T @ a)

    def _location_term(
        self, mu: np.ndarray | None, X_mu: np.ndarray | None
    ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        if mu is None:
            return []
        ones = np.ones(self.n)
        if self.data.dual:
            assert X_mu is not None
            return [(-ones, mu, X_mu)]
        return [(-ones, mu, -self.feature_sum)]  # image Xᵀa = −Xᵀ1

    def _knockoff_term(self, b: int, strength: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        scale = math.sqrt(strength / self.knockoff_weight)  # θ'² = π' ‖m'‖²
        f = scale * self.knock_dirs[:, b]
        a = self.memberships[:, b]
        if self.data.dual:
            assert self.X_dirs is not None
            return (a, f, scale * self.X_dirs[:, b])
        assert self.Xt_memb is not None
        return (a, f, self.Xt_memb[:, b])

    @property
    def K_knockoff(self) -> int:
        """Eigenpairs computed per knockoff spectrum: ``K + KNOCKOFF_EXTRA`` (at most ``p``).

        A knockoff adds a rank-one term to the data, so a rank-two term to the operator, and
        its own spike can push the K-th eigenpair down by up to two places; matching ``K``
        pairs against only the top ``K`` of a knockoff then finds no partner for it and
        calls a covariance spike "moved".
        """
        return min(self.K + KNOCKOFF_EXTRA, self.data.p)

    def _spectrum(
        self, lowrank: LowRank, base: LowRank | None = None, k: int | None = None
    ) -> _Spectrum:
        """Top-``k`` (default K) eigenpairs of ``(MᵀM + low rank)/n`` by the chosen solver."""
        n = self.n
        k = self.K if k is None else k
        if self.solver == "exact":
            assert self.gram is not None
            A = dense_operator(self.gram, lowrank, n)
            vals, vecs = top_eigh(A, k)
            op_vecs = None
            if base is not None and self.data.dual:
                if self._base_dense is None or self._base_dense[0] is not base:
                    self._base_dense = (base, dense_operator(self.gram, base, n))
                op_vecs = self._base_dense[1] @ vecs
            return _Spectrum(vals, vecs, np.zeros(len(vals)), op_vecs)
        assert self.Q is not None and self.Z is not None
        OpQ = apply_operator(self.Z, self.Q, lowrank, n)
        vals, coef, _res, bounds = rayleigh_ritz(self.Q, OpQ, k)
        bounds = bounds + self._rounding_bound()
        vecs = self.Q @ coef
        op_vecs = None
        if base is not None and self.data.dual:
            op_vecs = apply_operator(self.Z, self.Q, base, n) @ coef
        return _Spectrum(vals, vecs, bounds, op_vecs)

    # ------------------------------------------------------------------ passes
    def _pass(self, name: str, single: bool = False, **products: Any) -> dict[str, np.ndarray]:
        self._single_used |= single
        out = self.executor.run(name, pass_graph(self.data, single=single, **products))
        if not products.get("stats"):  # the statistics pass is checked by _check_stats
            _check_overflow(out, name)
        return out

    # ------------------------------------------------------------------ precision
    def _rounding(self, unit: float) -> float:
        """Estimated norm of the rounding error of the passes' operator products.

        A chunk's product ``bᵀ(b V)`` sums ``p`` and then ``rows`` terms; with blocked BLAS
        accumulation the error of each is about ``unit · √length`` relative to the norm of
        the result (the probabilistic model of Higham & Mary 2019), so the operator applied
        to a unit vector is off by about ``unit (√rows + √p) ‖MᵀM/n‖``.  The norm is
        estimated from below by the largest image of a basis vector (kept up to date as the
        basis grows, :meth:`_add_images`) and by ``‖x̄‖²`` (the mean direction's Rayleigh
        quotient), which dominates for uncentred data.  Measured float32 errors were about 50
        times smaller than this estimate.
        """
        rows = max(self.data.M.chunks[0])
        scale = max(float(self.feature_sum @ self.feature_sum) / self.n**2, self._image_norm)
        return unit * (math.sqrt(rows) + math.sqrt(self.data.p)) * scale

    def _add_images(self, images: np.ndarray) -> None:
        """Record the largest ``‖MᵀM v‖/n`` of a new block of basis images (for the rounding)."""
        if images.shape[1]:
            top = float(np.max(np.linalg.norm(images, axis=0))) / self.n
            self._image_norm = max(self._image_norm, top)

    def _use_single(self) -> bool:
        """Whether the next thin products may run at float32 on float32 chunks.

        Only for the randomized solver, and only while the estimated float32 rounding stays
        below a tenth of the accuracy the fit aims at (``tol``, by default a tenth of the
        threshold ε), with ε evaluated at the average feature variance: an upper estimate of
        the noise variance known from the first pass, before any spectrum, which does not
        depend on the location (the mean cancels in the products only in exact arithmetic).
        Otherwise — e.g. data whose mean is far larger than their spread — the chunks are
        up-cast to float64.
        """
        if self.solver == "exact" or self.data.M.dtype != np.float32:
            return False
        if not self.total_sumsq < float(np.finfo(np.float32).max) / 16:
            return False  # float32 products of such large values could overflow
        if self.tol is not None:
            target = self.tol
        else:
            xbar = self.feature_sum / self.n
            spread = max(self.total_sumsq / self.n - float(xbar @ xbar), 0.0) / self.d
            target = rmt.invariance_threshold(self.n, self.c, spread, self.threshold_scale) / 10
        return self._rounding(float(np.finfo(np.float32).eps) / 2) <= target / 10

    def _rounding_bound(self) -> float:
        """The rounding term added to every certified error bound."""
        dtype = np.float32 if self._single_used else np.float64
        return self._rounding(float(np.finfo(dtype).eps) / 2)

    def _first_pass(self) -> None:
        side = None
        if self.data.dual:
            side_vecs = [self.knock_dirs]
            if self.loc_mode == "given":
                side_vecs.append(self.loc_vec[:, None])  # type: ignore[index]
            side = np.column_stack(side_vecs)
        elif self.knockoff_weight < 1:
            side = self.memberships
        kwargs: dict[str, Any] = {"stats": True, "side": side}
        if self.solver == "exact":
            kwargs["gram"] = True
        else:
            V0 = orthonormalize(np.column_stack([self.omega, *self._known_operator_vectors()]))
            kwargs["krylov"] = V0
            kwargs["krylov_images"] = self._keep_images(V0.shape[1])
        out = self._pass("mspca-stats", **kwargs)
        self._check_stats(out)
        if self.data.dual:
            self.feature_sum = out["row_sum"]
            self.X_dirs = out["side"][:, : self.B]
            if self.loc_mode == "given":
                self.X_mu = out["side"][:, self.B]
        else:
            self.feature_sum = out["col_sum"]
            self.Xt_memb = (
                out["side"]
                if side is not None
                else np.repeat(out["col_sum"][:, None], self.B, axis=1)
            )
        self.total_sumsq = float(out["col_sumsq"].sum())
        if self.data.dual:
            fsum, fsq = out["row_sum"], out["row_sumsq"]
        else:
            fsum, fsq = out["col_sum"], out["col_sumsq"]
        self.feature_var = fsq / self.n - (fsum / self.n) ** 2
        if self.solver == "exact":
            self.gram = out["gram"]
        else:
            self.Q = kwargs["krylov"]
            self.Z = out["krylov"]
            self._add_images(self.Z)
            if kwargs["krylov_images"] and self._images is not None:
                self._images.append(out["krylov_image"])
            self._last_block = self.Q.shape[1]
            self._n_blocks = 1

    def _known_operator_vectors(self) -> list[np.ndarray]:
        """Operator-side vectors of every low-rank term known now (to seed the Krylov space)."""
        vecs: list[np.ndarray] = []
        if self.data.dual:
            vecs += [np.ones((self.n, 1)), self.memberships]
            if self.X_dirs is not None:
                vecs.append(self.X_dirs)
            if self.X_mu is not None:
                vecs.append(self.X_mu[:, None])
        else:
            vecs.append(self.knock_dirs)
            if self.mu is not None:
                vecs.append(self.mu[:, None])
            if self.Xt_memb is not None:
                vecs.append(self.Xt_memb)
                vecs.append(self.feature_sum[:, None])
        return vecs

    def _krylov_pass(
        self, name: str, extra: list[np.ndarray] | None = None, **products: Any
    ) -> dict[str, np.ndarray]:
        """Extend the Krylov basis by one block (the operator's image of the last block plus
        any new low-rank directions) and compute its product in the same read as ``products``.
        """
        assert self.Q is not None and self.Z is not None
        last = (
            self.Z[:, -self._last_block :] / self.n
            if self._last_block
            else np.zeros((self.data.p, 0))
        )
        cand = np.column_stack([last, *self._known_operator_vectors(), *(extra or [])])
        V = orthonormalize(cand, against=self.Q)
        if V.shape[1] == 0 and not products:
            return {}
        kw: dict[str, Any] = dict(products)
        if V.shape[1]:
            kw["krylov"] = V
            kw["krylov_images"] = self._keep_images(V.shape[1])
        out = self._pass(name, single=self._use_single(), **kw)
        if V.shape[1]:
            if kw["krylov_images"] and self._images is not None:
                self._images.append(out["krylov_image"])
            self.Q = np.column_stack([self.Q, V])
            self.Z = np.column_stack([self.Z, out["krylov"]])
            self._add_images(out["krylov"])
            self._last_block = V.shape[1]
            self._n_blocks += 1
        return out

    def _keep_images(self, width: int) -> bool:
        """Whether the next Krylov block's image ``M V`` (m, width) is kept on the driver.

        While all of the basis's images fit in :data:`BASIS_IMAGE_BUDGET`, they are; past it
        they are all dropped and the output pass reads the data once more.
        """
        if self._images is None:
            return False
        held = sum(im.nbytes for im in self._images)
        if held + 8 * self.data.m * width <= BASIS_IMAGE_BUDGET:
            return True
        self._images = None
        return False

    def _basis_image(self, U: np.ndarray) -> np.ndarray | None:
        """``M U`` (m, k) for ``U`` in the span of the basis, from the kept images (no pass).

        ``U = Q (QᵀU)``, so ``M U = Σ_blocks (M Q_b)(Q_bᵀ U)``.  None when the images were not
        kept (over budget, or the exact solver).
        """
        if self.solver == "exact" or not self._images or self.Q is None:
            return None
        out = np.zeros((self.data.m, U.shape[1]))
        col = 0
        for im in self._images:
            w = im.shape[1]
            out += im @ (self.Q[:, col : col + w].T @ U).astype(im.dtype)
            col += w
        assert col == self.Q.shape[1]
        return out

    _images: list[np.ndarray] | None = None  # the basis's images M Q, block by block
    _last_block: int = 0
    _n_blocks: int = 0
    _single_used: bool = False  # some products were computed at single precision
    _exhausted: bool = False  # a Krylov pass found no new direction
    _image_norm: float = 0.0  # largest ‖MᵀM v‖/n over the basis vectors v (see _rounding)
    _worst_bound: float = float("inf")
    _base_dense: tuple[LowRank, np.ndarray] | None = None
    feature_var: np.ndarray | None = None  # (d,) variance of each feature (statistics pass)

    # ------------------------------------------------------------------ validation
    def _check_stats(self, out: dict[str, np.ndarray]) -> None:
        row_bad, col_bad = out["row_nonfinite"], out["col_nonfinite"]
        total = int(col_bad.sum())
        if total:
            sample_bad, feature_bad = (col_bad, row_bad) if self.data.dual else (row_bad, col_bad)
            s = int(np.flatnonzero(sample_bad)[0])
            f = int(np.flatnonzero(feature_bad)[0])
            raise NonFiniteError(
                f"the data contain {total} NaN or infinite value(s) in "
                f"{int(np.count_nonzero(sample_bad))} sample(s) and "
                f"{int(np.count_nonzero(feature_bad))} feature(s); the first bad sample is "
                f"index {s} and the first bad feature is index {f}. Remove or impute them "
                f"(e.g. xarray's .fillna, or mspca_dask.preprocess for genotypes)."
            )
        _check_overflow(out, "mspca-stats")
        if self.data.dual:
            fsum, fsq = out["row_sum"], out["row_sumsq"]
        else:
            fsum, fsq = out["col_sum"], out["col_sumsq"]
        n = self.n
        mean = fsum / n
        var = fsq / n - mean**2
        scale = np.maximum(fsq / n, np.finfo(float).tiny)
        const = np.flatnonzero(var <= 1e-12 * scale)
        if const.size:
            shown = ", ".join(str(int(i)) for i in const[:10]) + (" ..." if const.size > 10 else "")
            raise InputError(
                f"{const.size} feature(s) are constant across samples (indices {shown}); a "
                f"constant feature carries no variance for PCA. Drop them before fitting."
            )

    # ------------------------------------------------------------------ main flow
    def run(self) -> dict[str, Any]:
        self._first_pass()
        n = self.n
        xbar = self.feature_sum / n
        if self.loc_mode == "auto":
            self._estimate_location(xbar)
        base_terms = self._location_term(self.mu, self.X_mu)
        base = self._lowrank(base_terms)
        spec, knock, strength, s2, eps = self._converge(base, base_terms)
        return self._finish(spec, knock, base, base_terms, strength, s2, eps)

    def _preliminary_spectrum(
        self, xbar: np.ndarray
    ) -> tuple[_Spectrum, list[tuple[np.ndarray, np.ndarray, np.ndarray]]]:
        """Spectrum of the mean-centred data, converged loosely (it only ranks samples)."""
        X_xbar = None
        if self.data.dual:
            X_xbar = self._dual_image_of_mean()
        terms = self._location_term(xbar, X_xbar)
        lr = self._lowrank(terms)
        if self.solver == "exact":
            return self._spectrum(lr), terms
        history: list[np.ndarray] = []
        while True:
            spec = self._spectrum(lr)
            s2 = self._noise(spec.values, terms)
            # Loose accuracy is enough: this spectrum only ranks samples in score space.
            if (
                self._krylov_settled(spec, [], history, s2, tol=0.05 * s2)
                or self.executor.n_passes >= self.max_passes // 2
            ):
                return spec, terms
            history.append(spec.values)
            self._krylov_pass(
                f"mspca-pass-{self.executor.n_passes + 1}",
                extra=None if self.data.dual else [xbar[:, None]],
            )

    def _krylov_settled(
        self,
        spec: _Spectrum,
        knock: list[_Spectrum],
        history: list[np.ndarray],
        s2: float,
        tol: float,
    ) -> bool:
        """Whether the block-Krylov iteration may stop.

        ``history`` holds the top-K Ritz values of the original spectrum after each earlier
        pass, oldest first.  The iteration stops when

        1. every Ritz value above the Marchenko–Pastur edge, of the original and of every
           knockoff spectrum, carries an error bound below ``tol``;
        2. those values (above the edge now or after the previous pass) moved by less than
           ``tol`` in the last pass, and as many are above the edge as after it;
        3. the largest Ritz value below the edge is not climbing fast enough to become a
           candidate: its last rise, extrapolated geometrically at the ratio of its last two
           rises (at most 0.9), stays below the candidate line ``edge + edge_margin · TW
           scale`` of :func:`~mspca_dask.matching.check_invariance`.  Only that one is
           watched: Ritz values lie below the eigenvalues of the same rank (Cauchy
           interlacing), and a missing eigenvalue above the line would be the largest one
           below the edge, which that Ritz value converges to (the deeper ones, converging
           to smaller eigenvalues, climbed as fast and held the iteration up to two passes
           longer at d = 4000, n = 40 000); and
        4. the basis holds at least three blocks.

        Bulk Ritz values converge slowly towards the edge, and they decide nothing: below the
        candidate line a value is neither kept nor flagged.  A Krylov space cannot prove that
        no eigenvalue is missing; a spike not yet found shows up as a Ritz value still
        climbing, which rule 3 watches.
        """
        assert self.Q is not None
        if self.Q.shape[1] >= self.data.p:
            return True  # the basis spans the whole space: Rayleigh–Ritz is exact
        if self._n_blocks < 3 or not history:
            return False
        edge = rmt.mp_edges(self.c, s2)[1]
        worst = max(
            float(np.max(sp.bounds[sp.values > edge], initial=0.0)) for sp in [spec, *knock]
        )
        self._worst_bound = worst
        values, prev = spec.values, history[-1]
        rise = values - prev
        above, above_prev = values > edge, prev > edge
        moved = float(np.max(np.abs(rise[above | above_prev]), initial=0.0))
        line = edge + self.edge_margin * rmt.tracy_widom_scale(self.n, self.d, s2)
        ratio = np.full(values.shape, 0.9)
        if len(history) >= 2:
            earlier = prev - history[-2]
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.clip(np.where(earlier > 0, rise / earlier, 0.9), 0.0, 0.9)
        projected = values + np.maximum(rise, 0.0) * ratio / (1.0 - ratio)
        below = np.flatnonzero(~above)
        climbing = bool(below.size) and bool(projected[below[0]] >= line)
        return (
            worst <= tol
            and moved <= tol
            and int(above.sum()) == int(above_prev.sum())
            and not climbing
        )

    def _dual_image_of_mean(self) -> np.ndarray:
        """``X x̄ = X Xᵀ 1 / n`` in the dual: the Gram operator applied to the ones vector."""
        ones = np.ones((self.n, 1))
        if self.solver == "exact":
            assert self.gram is not None
            return (self.gram @ ones)[:, 0] / self.n
        assert self.Q is not None and self.Z is not None
        # 1 is in the Krylov basis from the first pass (it is a low-rank factor), so
        # MᵀM 1 = Z Qᵀ 1 exactly.
        return (self.Z @ (self.Q.T @ ones))[:, 0] / self.n

    def _noise(
        self, values: np.ndarray, terms: list[tuple[np.ndarray, np.ndarray, np.ndarray]]
    ) -> float:
        return rmt.estimate_noise_variance(self._trace(terms), values, self.n, self.d)

    def _trace(self, terms: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> float:
        """``tr(X̃ᵀX̃)/n`` for ``X̃ = X − 1μᵀ`` (the only term a trace is taken of)."""
        tr = self.total_sumsq
        if terms:
            mu = terms[0][1]
            tr += -2 * float(mu @ self.feature_sum) + self.n * float(mu @ mu)
        return tr / self.n

    def _estimate_location(self, xbar: np.ndarray) -> None:
        """The inlier location ``μ = x̄ + V_k·offsets`` from the candidates' score columns."""
        spec, terms = self._preliminary_spectrum(xbar)
        s2 = self._noise(spec.values, terms)
        edge = rmt.mp_edges(self.c, s2)[1]
        k = int(np.clip(np.count_nonzero(spec.values > edge), 1, self.K))
        V0 = spec.vectors[:, :k]
        if self.data.dual:
            sing = np.sqrt(np.maximum(spec.values[:k], 0) * self.n)
            scores = V0 * sing
        else:
            out = self._side_or_krylov_pass("mspca-location-scores", keep=V0)
            scores = out["keep"] - (xbar @ V0)[None, :]
        seed = 0 if self.random_state is None else int(self.random_state) % 2**32
        self.loc_fit = loc = candidate_location(scores, random_state=seed)
        groups = loc.groups
        if self.data.dual:
            # μ = x̄ + X̃ᵀU₀(offsets/sing) = Xᵀa, a big-side product; X μ = X Xᵀ a is the Gram
            # operator applied to a.
            beta = V0 @ (loc.offsets / np.where(sing > 0, sing, 1.0))
            a = beta + (1.0 - float(beta.sum())) / self.n
            if self.solver == "exact":
                assert self.gram is not None
                out = self._pass("mspca-location-mean", keep=a[:, None])
                self.X_mu = self.gram @ a
            else:
                out = self._krylov_pass("mspca-location-mean", extra=[a[:, None]], keep=a[:, None])
                assert self.Q is not None and self.Z is not None
                self.X_mu = self.Z @ (self.Q.T @ a)
            self.mu = out["keep"][:, 0]
            self._cluster_memberships(groups, None)
        else:
            self.mu = xbar + V0 @ loc.offsets
            if groups.shape[1]:
                out = self._side_or_krylov_pass("mspca-location-groups", side=groups)
                self._cluster_memberships(groups, out["side"])

    def _cluster_memberships(self, groups: np.ndarray, Xt_groups: np.ndarray | None) -> None:
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
            return
        r = 3.0 * self._rng_groups.standard_normal((groups.shape[1], self.B))
        self.memberships = self.memberships + groups @ r
        if not self.data.dual:
            assert Xt_groups is not None and self.Xt_memb is not None
            self.Xt_memb = self.Xt_memb + Xt_groups @ r

    def _side_or_krylov_pass(self, name: str, **products: Any) -> dict[str, np.ndarray]:
        if self.solver == "exact":
            return self._pass(name, **products)
        return self._krylov_pass(name, **products)

    def _knockoff_spectra(
        self,
        base: LowRank,
        base_terms: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
        strength: float,
    ) -> list[_Spectrum]:
        """The top ``K + KNOCKOFF_EXTRA`` eigenpairs of each of the B knockoff operators."""
        return [
            self._spectrum(
                self._lowrank(base_terms + [self._knockoff_term(b, strength)]),
                base=base,
                k=self.K_knockoff,
            )
            for b in range(self.B)
        ]

    def _converge(
        self, base: LowRank, base_terms: list[tuple[np.ndarray, np.ndarray, np.ndarray]]
    ) -> tuple[_Spectrum, list[_Spectrum], float, float, float]:
        history: list[np.ndarray] = []
        while True:
            spec = self._spectrum(base)
            s2 = self._noise(spec.values, base_terms)
            eps = rmt.invariance_threshold(self.n, self.c, s2, self.threshold_scale)
            strength = rmt.knockoff_strength(spec.values[0], self.c, s2, self.knockoff_factor)
            if self.solver == "exact":
                return (
                    spec,
                    self._knockoff_spectra(base, base_terms, strength),
                    strength,
                    s2,
                    eps,
                )
            tol = self.tol if self.tol is not None else eps / 10
            # The knockoff spectra are only needed once the original one has settled: the
            # stopping rule asks both, and skipping B Rayleigh–Ritz solves per pass until then
            # changes no decision (the passes and the result are the same).
            knock: list[_Spectrum] | None = None
            if self._krylov_settled(spec, [], history, s2, tol):
                knock = self._knockoff_spectra(base, base_terms, strength)
                if self._krylov_settled(spec, knock, history, s2, tol):
                    return spec, knock, strength, s2, eps
            if self.executor.n_passes >= self.max_passes - 1:
                if knock is None:
                    knock = self._knockoff_spectra(base, base_terms, strength)
                    # the bound, for the warning
                    self._krylov_settled(spec, knock, history, s2, tol)
                warnings.warn(
                    "the randomized solver stopped "
                    + (
                        "with its Krylov space exhausted"
                        if self._exhausted
                        else f"at its pass budget ({self.max_passes})"
                    )
                    + " with "
                    f"an eigenvalue error bound of {self._worst_bound:.3g}, above the target "
                    f"{tol:.3g}; the invariance check may be unreliable. Raise max_passes or use "
                    f"solver='exact'.",
                    ConvergenceWarning,
                    stacklevel=4,
                )
                return spec, knock, strength, s2, eps
            history.append(spec.values)
            if not self._krylov_pass(f"mspca-pass-{self.executor.n_passes + 1}"):
                # No new direction: the Krylov space is exhausted and no pass can tighten the
                # bounds (e.g. rounding of huge values dominates); stop with the warning
                # below instead of looping without passes.
                self.max_passes = min(self.max_passes, self.executor.n_passes + 1)
                self._exhausted = True

    def _finish(
        self,
        spec: _Spectrum,
        knock: list[_Spectrum],
        base: LowRank,
        base_terms: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
        strength: float,
        s2: float,
        eps: float,
    ) -> dict[str, Any]:
        n = self.n
        edge = rmt.mp_edges(self.c, s2)[1]
        margin = self.edge_margin * rmt.tracy_widom_scale(n, self.d, s2)
        overlaps = np.stack(
            [self._feature_overlaps(spec, sp, b, strength) for b, sp in enumerate(knock)]
        )
        # only verdicts can be wrong: with no candidate NoSpikeWarning already says it all
        diagnostics = (
            model_fit_diagnostics(spec.values, edge, margin, self.feature_var, self.n, self.d)
            if np.any(spec.values > edge + margin)
            else []
        )
        for line in diagnostics:
            warnings.warn(line, ModelFitWarning, stacklevel=3)
        components, scores = self._output_pass(spec)
        inliers = within = None
        if self.loc_fit is not None and self.loc_fit.groups.shape[1]:
            inliers = ~np.any(self.loc_fit.groups > 0, axis=1)
            within = within_group_variance(scores, self.loc_fit.groups)
        shift_z = shift_evidence(scores, self.memberships, inliers)
        check = check_invariance(
            spec.values,
            np.stack([sp.values for sp in knock]),
            overlaps,
            threshold=eps,
            edge=edge,
            margin=margin,
            min_overlap=self.min_overlap,
            shift_z=shift_z,
            z_threshold=shift_z_threshold(self.K),
            within=within,
        )
        if not np.any(check.candidate):
            warnings.warn(
                f"no eigenvalue is clearly above the Marchenko-Pastur edge {edge:.4g} (largest "
                f"{spec.values[0]:.4g}, noise variance {s2:.4g}): there is no spike to keep or "
                f"remove, and the result has no stable components.",
                NoSpikeWarning,
                stacklevel=3,
            )
        return dict(
            eigenvalues=spec.values,
            knockoff_eigenvalues_all=np.stack([sp.values for sp in knock]),
            knockoff_match=check.matched,
            stable=check.stable,
            candidate=check.candidate,
            reasons=check.reasons,
            displacement=check.displacement,
            eigenvector_overlap=check.overlap,
            shift_z=shift_z,
            diagnostics="\n".join(diagnostics) or None,
            eigenvalue_bounds=spec.bounds,
            eigenvectors=components,
            scores=scores,
            location=self.mu,
            noise_variance=s2,
            threshold=eps,
            knockoff_strength=strength,
            mp_edge=edge,
            n_samples=n,
            n_features=self.d,
        )

    def _feature_overlaps(
        self, spec: _Spectrum, ko: _Spectrum, b: int, strength: float
    ) -> np.ndarray:
        """``|⟨ṽᵢ, v'ⱼ⟩|`` (K, K') between *feature-space* unit eigenvectors of both spectra.

        Primal: the operator-space vectors are the feature-space ones.  Dual: with
        ``ṽ = X̃ᵀũ/√(nλ̃)`` and ``v' = X̃'ᵀu'/√(nλ')``,
        ``⟨ṽ, v'⟩ = (ũᵀ (n S̃) u' + (ũᵀ X̃m')(γ'ᵀu')) / (n √(λ̃λ'))`` where ``S̃ = X̃X̃ᵀ/n`` is the
        base operator.
        """
        if not self.data.dual:
            return np.abs(spec.vectors.T @ ko.vectors)
        assert ko.op_vectors is not None and self.X_dirs is not None
        scale = math.sqrt(strength / self.knockoff_weight)
        Xm = scale * self.X_dirs[:, b]
        if self.mu is not None:
            Xm = Xm - scale * float(self.mu @ self.knock_dirs[:, b])
        gamma = self.memberships[:, b]
        inner = self.n * (spec.vectors.T @ ko.op_vectors) + np.outer(
            spec.vectors.T @ Xm, gamma @ ko.vectors
        )
        norm = self.n * np.sqrt(
            np.outer(np.maximum(spec.values, 1e-300), np.maximum(ko.values, 1e-300))
        )
        return np.clip(np.abs(inner / norm), 0.0, 1.0)

    def _output_pass(self, spec: _Spectrum) -> tuple[np.ndarray, np.ndarray]:
        """Big-side images of the final eigenvectors: sample scores (primal) or loadings (dual)."""
        n = self.n
        U = spec.vectors
        image = self._basis_image(U)
        if self.data.dual:
            XtU = image if image is not None else self._output_read(U)  # (d, K)
            if self.mu is not None:
                XtU = XtU - np.outer(self.mu, U.sum(axis=0))
            sing = np.sqrt(np.maximum(spec.values, 0) * n)
            safe = np.where(sing > 0, sing, 1.0)
            V = XtU / safe
            V = V / np.maximum(np.linalg.norm(V, axis=0), 1e-300)
            scores = U * sing
        else:
            V = U
            scores = image if image is not None else self._output_read(V)
            if self.mu is not None:
                scores = scores - (self.mu @ V)[None, :]
        Vf = flip_signs(V)
        signs = np.sign(np.sum(Vf * V, axis=0))
        signs[signs == 0] = 1
        return Vf.T.copy(), scores * signs

    def _output_read(self, W: np.ndarray) -> np.ndarray:
        """``M W`` by the output pass (when the basis's images are not at hand)."""
        return self._pass("mspca-output", single=self._use_single(), keep=W)["keep"]
