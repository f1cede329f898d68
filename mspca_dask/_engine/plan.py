"""The plan of a fit: which solver, which location, which passes (NumPy only, no data read).

:func:`choose_solver` resolves ``solver="auto"`` by a cost model fitted to measured timings;
:func:`make_plan` gathers that choice, the location and the tuning parameters into a
:class:`FitPlan` whose repr lists the passes the fit will make, before any is made.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from .._params import FitParams, check_location
from ..errors import ParameterError

__all__ = [
    "EXACT_MAX_DIM",
    "KNOCKOFF_EXTRA",
    "READ_SECONDS_PER_BYTE",
    "FitPlan",
    "Location",
    "choose_solver",
    "make_plan",
]

#: Largest operator dimension for which the exact solver keeps a dense Gram matrix on the
#: driver (8192² float64 = 512 MiB).
EXACT_MAX_DIM = 8192
#: Extra eigenpairs computed per knockoff spectrum (see :attr:`FitPlan.k_knockoff`).
KNOCKOFF_EXTRA = 2

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
#: Passes of the exact path: the statistics with the Gram matrix, then the scores.
EXACT_PASSES = 2
#: Seconds per byte of the array (as read, decompressed) of one read of a source, by its kind:
#: the plain chunk-by-chunk read of zstd float32 Zarr stores delivered 0.76-0.82 GB/s of data
#: on the 2-core benchmark machine (``benchmarks/results/scale.md``, "read" column).  In-memory
#: data cost nothing to read beyond the products the constants above already time.
READ_SECONDS_PER_BYTE = {"zarr": 1 / 0.8e9}

Solver = Literal["exact", "randomized"]


def choose_solver(
    solver: str,
    m: int,
    p: int,
    K: int,
    B: int,
    oversampling: int,
    read_seconds: float = 0.0,
) -> Solver:
    """The cheaper of the two paths by a cost model fitted to measured timings.

    exact:      ``COST_GRAM·m p² + COST_EIGH·(B + 1) p³ + COST_EXACT_FIXED
                + EXACT_PASSES · read_seconds``;
    randomized: ``TYPICAL_PASSES · (COST_KRYLOV·m p ℓ + COST_PASS + read_seconds)`` with
                ``ℓ = K + 2 + oversampling + B + 3`` columns per block.

    ``read_seconds`` is what one read of the data costs beyond its products (a store's
    decompression, see :data:`READ_SECONDS_PER_BYTE`): out of core, every pass pays it, which
    favours the path with fewer passes.

    The randomized path is taken only when its prediction is below
    :data:`RANDOMIZED_MARGIN` (0.8) of the exact one: near a tie, exact eigenvalues win.
    The exact path wins for large ``m`` while ``p`` is below about 1300 (measured); the
    randomized one for larger ``p``, and always above :data:`EXACT_MAX_DIM`.  The grid was
    in-memory float64; out of core each randomized pass also reads the store again (which
    favours the exact path) while float32 chunks make its products cheaper (which favours the
    randomized one): on a float32 Zarr store at ``m = 40 000, p = 2000`` the randomized path
    took 4.8 s and the exact one 5.0 s (``benchmarks/results/peers.md`` of 2026-11-22 00:04,
    before the output pass was dropped), as predicted.

    Parameters
    ----------
    solver : {"auto", "exact", "randomized"}
    m, p : int
        The big side and the operator side of the oriented data (``p ≤ m`` usually).
    K, B, oversampling : int
        ``n_components``, ``n_knockoffs`` and ``oversampling`` of the fit.
    read_seconds : float
        Estimated seconds of one read of the data (0 for data in memory).

    Examples
    --------
    >>> choose_solver("auto", 2000, 100, 10, 5, 10), choose_solver("auto", 40000, 9000, 10, 5, 10)
    ('exact', 'randomized')

    Near the boundary a costly read tips the choice to the two-pass exact path:

    >>> choose_solver("auto", 40000, 1500, 10, 5, 10, read_seconds=0.0)
    'randomized'
    >>> choose_solver("auto", 40000, 1500, 10, 5, 10, read_seconds=0.6)
    'exact'
    """
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
    exact_cost = (
        COST_GRAM * m * p**2
        + COST_EIGH * (B + 1) * p**3
        + COST_EXACT_FIXED
        + EXACT_PASSES * read_seconds
    )
    krylov_cost = TYPICAL_PASSES * (COST_KRYLOV * m * p * ell + COST_PASS + read_seconds)
    # The exact path's eigenvalues are exact: it is kept unless the randomized one is predicted
    # clearly faster (the model's median error is about 25 %).
    faster = krylov_cost < RANDOMIZED_MARGIN * exact_cost
    return "exact" if (p <= EXACT_MAX_DIM and not faster) else "randomized"


@dataclass(frozen=True)
class Location:
    """The location subtracted from every sample, resolved once.

    Attributes
    ----------
    mode : {"auto", "none", "given"}
        ``"auto"``: the inliers' mean, estimated by the fit; ``"none"``: nothing;
        ``"given"``: :attr:`vector`.
    vector : (d,) ndarray or None
        The given location (``mode="given"`` only).
    reference : (n,) bool ndarray or None
        Samples known to be inliers, whose centre the location is (``"none"`` or
        ``"given"`` only): the verdict's group test holds them in the inliers' group, in the
        data and in its twins (:func:`mspca_dask.verdict.fit_groups`).
    """

    mode: Literal["auto", "none", "given"]
    vector: np.ndarray | None = None
    reference: np.ndarray | None = None

    @classmethod
    def resolve(
        cls, location: Any, n_features: int, reference: np.ndarray | None = None
    ) -> Location:
        """Check the user's ``location`` (see :func:`mspca_dask._params.check_location`)."""
        mode, vector = check_location(location, n_features)
        if reference is not None and mode == "auto":
            raise ParameterError(
                "reference_samples marks samples known to be inliers; give their centre as "
                "location= as well (a vector, or None when the data are already centred on it)"
            )
        return cls(mode, vector, reference)  # type: ignore[arg-type]

    def __repr__(self) -> str:
        if self.vector is None:
            return f"Location({self.mode!r})"
        return f"Location('given', vector of {self.vector.shape[0]})"


@dataclass(frozen=True, repr=False)
class FitPlan:
    """What a fit will do, decided before any pass.

    Attributes
    ----------
    params : FitParams
        The validated tuning parameters, ``solver`` resolved to ``"exact"`` or
        ``"randomized"``.
    location : Location
    n_samples, n_features : int
    dual : bool
        Whether the operator space is the samples' (``M = Xᵀ``).
    m, p : int
        Big side and operator side of the oriented data.

    Examples
    --------
    >>> plan = make_plan(FitParams.from_kwargs(n_components=3), Location("auto"), n=500, d=40,
    ...                  dual=False)
    >>> print(plan)  # doctest: +NORMALIZE_WHITESPACE
    FitPlan: exact solver, 500 samples x 40 features (primal, operator 40 x 40),
      K = 3 (+2 per knockoff), B = 5 knockoffs, location 'auto'
      passes (3 to 6):
        1. mspca-stats: column/row statistics + the 40 x 40 Gram matrix + knockoff images
        2. mspca-location-scores: scores on the mean-centred spectrum
        3. mspca-location-groups: images of the groups found (only if any)
        4. mspca-output: sample scores of the K components
        5. mspca-within-gram: the within-group covariance, rows weighted (only if groups are
           found)
        6. mspca-within-scores: scores on the within-group spikes (only if groups are found)
    """

    params: FitParams
    location: Location
    n_samples: int
    n_features: int
    dual: bool

    @property
    def solver(self) -> Solver:
        return self.params.solver  # type: ignore[return-value]

    @property
    def m(self) -> int:
        return self.n_features if self.dual else self.n_samples

    @property
    def p(self) -> int:
        return self.n_samples if self.dual else self.n_features

    @property
    def k_knockoff(self) -> int:
        """Eigenpairs computed per knockoff spectrum: ``K + KNOCKOFF_EXTRA`` (at most ``p``).

        A knockoff adds a rank-one term to the data, so a rank-two term to the operator, and
        its own spike can push the K-th eigenpair down by up to two places; matching ``K``
        pairs against only the top ``K`` of a knockoff then finds no partner for it and
        calls a covariance spike "moved".
        """
        return min(self.params.n_components + KNOCKOFF_EXTRA, self.p)

    @property
    def sketch_width(self) -> int:
        """``ℓ``, the columns of the randomized sketch ``Ω``."""
        return min(self.p, self.params.n_components + KNOCKOFF_EXTRA + self.params.oversampling)

    def passes(self) -> list[tuple[str, str]]:
        """The planned passes as ``(name, what it computes)``, in order.

        The randomized solver's Krylov passes repeat until its eigenvalues are certified (at
        most ``max_passes`` passes in all); its output usually comes from the basis's
        images, without the output pass.
        """
        exact = self.solver == "exact"
        p = self.p
        first = "column/row statistics + " + (
            f"the {p} x {p} Gram matrix" if exact else "the first block-Krylov product"
        )
        out: list[tuple[str, str]] = [("mspca-stats", first + " + knockoff images")]
        krylov = "" if exact else " (with a Krylov block)"
        if self.location.mode == "auto":
            if not exact:
                out.append(
                    ("mspca-pass-k", "Krylov passes until the mean-centred spectrum settles")
                )
            if self.dual:
                out.append(
                    ("mspca-location-mean", "the inlier location and its groups' sums" + krylov)
                )
            else:
                kept = "" if exact else " (only if the basis's images were not kept)"
                out.append(("mspca-location-scores", "scores on the mean-centred spectrum" + kept))
                out.append(("mspca-location-groups", "images of the groups found (only if any)"))
        if not exact:
            out.append(
                (
                    "mspca-pass-k",
                    "Krylov passes until the spectrum is certified "
                    f"(at most {self.params.max_passes} passes in all)",
                )
            )
        scores = "feature loadings" if self.dual else "sample scores"
        when = "" if exact else " (only if the basis's images were not kept)"
        out.append(("mspca-output", f"{scores} of the K components{when}"))
        groups = " (only if groups are found)"
        if not exact:
            out.append(
                (
                    "mspca-within-k",
                    "Krylov passes on the within-group covariance at the inliers' scale until "
                    "certified (only if groups of different spreads are found)",
                )
            )
            if self.dual:
                out.append(
                    (
                        "mspca-within-certificate",
                        "the within-group spikes from float64 products (only if the Krylov "
                        "passes ran provisionally in float32)",
                    )
                )
        elif self.dual:
            out.append(("mspca-within-scores", "loadings of the within-group spikes" + groups))
        else:
            out.append(("mspca-within-gram", "the within-group covariance, rows weighted" + groups))
            out.append(("mspca-within-scores", "scores on the within-group spikes" + groups))
        return out

    def __repr__(self) -> str:
        prm = self.params
        p = self.p
        side = "dual" if self.dual else "primal"
        steps = self.passes()
        optional = sum("only if" in what for _, what in steps)
        if self.solver == "exact":
            count = f"{len(steps) - optional}" + (f" to {len(steps)}" if optional else "")
        else:
            count = f"at most {prm.max_passes}"
        lines = [
            f"FitPlan: {self.solver} solver, {self.n_samples} samples x {self.n_features} "
            f"features ({side}, operator {p} x {p}),",
            f"  K = {prm.n_components} (+{self.k_knockoff - prm.n_components} per knockoff), "
            f"B = {prm.n_knockoffs} knockoffs, location {self.location.mode!r}",
            f"  passes ({count}):",
        ]
        lines += [f"    {i}. {name}: {what}" for i, (name, what) in enumerate(steps, 1)]
        return "\n".join(lines)


def make_plan(
    params: FitParams,
    location: Location,
    *,
    n: int,
    d: int,
    dual: bool,
    read_seconds: float = 0.0,
) -> FitPlan:
    """Resolve the solver of ``params`` for data of ``n`` samples and ``d`` features.

    ``read_seconds``: what one read of the data costs beyond its products (see
    :func:`choose_solver`).
    """
    m, p = (d, n) if dual else (n, d)
    solver = choose_solver(
        params.solver,
        m,
        p,
        params.n_components,
        params.n_knockoffs,
        params.oversampling,
        read_seconds,
    )
    return FitPlan(dataclasses.replace(params, solver=solver), location, n, d, dual)
