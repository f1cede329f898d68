"""Tests of the driver-side engine: the plan, the random draws and the spectra's stopping rule."""

from __future__ import annotations

import copy

import dask.array as da
import numpy as np
import pytest

import mspca_dask
from mspca_dask._engine.draws import STREAMS, Draws
from mspca_dask._engine.linalg import LowRank
from mspca_dask._engine.plan import EXACT_MAX_DIM, Location, choose_solver, make_plan
from mspca_dask._engine.run import Moments
from mspca_dask._engine.spectra import ExactSpectra, KrylovSpectra, PassReader, make_spectra
from mspca_dask._execution import Executor
from mspca_dask._params import FitParams
from mspca_dask._passes import orient
from mspca_dask.errors import ParameterError
from mspca_dask.testing import paper_setting

DRAW_KW = {"n": 30, "d": 8, "p": 8, "n_knockoffs": 3, "knockoff_weight": 1.0, "width": 5}


# ---------------------------------------------------------------------------- plan


def test_choose_solver__exact_refuses_an_operator_above_the_dense_limit() -> None:
    with pytest.raises(ParameterError, match=r"solver='exact' needs a dense .* Gram matrix"):
        choose_solver("exact", 10**5, EXACT_MAX_DIM + 1, 10, 5, 10)
    assert choose_solver("auto", 10**5, EXACT_MAX_DIM + 1, 10, 5, 10) == "randomized"
    assert choose_solver("randomized", 100, 10, 3, 5, 10) == "randomized"


@pytest.mark.parametrize("p", [1200, 1500, 1800])
def test_choose_solver__a_costlier_read_never_favours_the_path_with_more_passes(p: int) -> None:
    # Reading the data again costs the randomized path (about 5 passes) more than the exact
    # one (2 passes): raising the read cost can only move the choice to the exact path.
    choices = [choose_solver("auto", 40_000, p, 10, 5, 10, read_seconds=r) for r in (0, 0.3, 3)]
    assert choices == sorted(choices, key=["randomized", "exact"].index)
    assert choices[-1] == "exact"


def test_make_plan__passes_the_read_cost_to_the_solver_choice() -> None:
    params = FitParams.from_kwargs(n_components=10)
    in_memory = make_plan(params, Location("none"), n=40_000, d=1500, dual=False)
    from_store = make_plan(params, Location("none"), n=40_000, d=1500, dual=False, read_seconds=0.6)
    assert (in_memory.solver, from_store.solver) == ("randomized", "exact")


def test_make_plan__resolves_the_solver_once_and_keeps_the_other_params() -> None:
    params = FitParams.from_kwargs(n_components=3, n_knockoffs=4)
    plan = make_plan(params, Location("none"), n=500, d=40, dual=False)
    assert plan.solver == plan.params.solver == "exact"
    assert params.solver == "auto"  # the caller's params are not changed
    assert plan.params.n_knockoffs == 4
    assert (plan.m, plan.p, plan.k_knockoff, plan.sketch_width) == (500, 40, 5, 15)
    assert "exact solver, 500 samples x 40 features (primal" in repr(plan)


@pytest.mark.parametrize("location", ["auto", None])
@pytest.mark.parametrize("transpose", [False, True], ids=["primal", "dual"])
def test_plan__lists_the_passes_the_exact_fit_makes(location, transpose) -> None:
    X = paper_setting(pi1=0.1, n_samples=300, n_features=60, random_state=3).to_numpy()
    X = X.T.copy() if transpose else X
    res = mspca_dask.fit(X, n_components=3, solver="exact", location=location)
    data = orient(da.from_array(X))
    plan = make_plan(
        FitParams.from_kwargs(n_components=3, solver="exact"),
        Location.resolve(location, X.shape[1]),
        n=X.shape[0],
        d=X.shape[1],
        dual=data.dual,
    )
    made = [p["name"] for p in res.passes]
    planned = [name for name, what in plan.passes()]
    optional = {name for name, what in plan.passes() if "only if" in what}
    assert made == [name for name in planned if name in made or name not in optional]
    assert len(made) == res.n_passes
    for name, _what in plan.passes():
        assert name in repr(plan)


# ---------------------------------------------------------------------------- draws


def test_draws__are_determined_by_the_seed() -> None:
    a, b = Draws.from_seed(5, **DRAW_KW), Draws.from_seed(5, **DRAW_KW)
    c = Draws.from_seed(6, **DRAW_KW)
    for name in ("knock_dirs", "memberships", "omega"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert not np.array_equal(a.knock_dirs, c.knock_dirs)
    assert not np.array_equal(a.omega, c.omega)
    np.testing.assert_allclose(np.linalg.norm(a.knock_dirs, axis=0), 1.0)


def test_draws__streams_do_not_depend_on_each_other() -> None:
    base = Draws.from_seed(5, **DRAW_KW)
    wider = Draws.from_seed(5, **{**DRAW_KW, "width": 7})
    partial = Draws.from_seed(5, **{**DRAW_KW, "knockoff_weight": 0.5})
    np.testing.assert_array_equal(base.knock_dirs, wider.knock_dirs)
    np.testing.assert_array_equal(base.omega, partial.omega)
    np.testing.assert_array_equal(base.knock_dirs, partial.knock_dirs)
    assert np.all(partial.memberships.sum(axis=0) == 15)


def test_draws__follow_the_documented_seed_sequence_layout() -> None:
    """Stream i of ``SeedSequence(seed).spawn(3)`` is ``STREAMS[i]`` (results depend on it)."""
    seeds = np.random.SeedSequence(5).spawn(len(STREAMS))
    draws = Draws.from_seed(5, **DRAW_KW)
    omega = np.random.default_rng(seeds[STREAMS.index("sketch")]).standard_normal((8, 5))
    dirs = np.random.default_rng(seeds[STREAMS.index("directions")]).standard_normal((8, 3))
    np.testing.assert_array_equal(draws.omega, omega)
    np.testing.assert_array_equal(draws.knock_dirs, dirs / np.linalg.norm(dirs, axis=0))


# ---------------------------------------------------------------------------- spectra


def _krylov_after(n_extend: int):
    """A randomized solver's spectra after the first pass and ``n_extend`` Krylov passes."""
    X = paper_setting(pi1=0.1, n_samples=200, n_features=80, random_state=2).to_numpy()
    data = orient(da.from_array(X, chunks=(50, 80)))
    plan = make_plan(
        FitParams.from_kwargs(n_components=3, solver="randomized", oversampling=2),
        Location("none"),
        n=200,
        d=80,
        dual=data.dual,
    )
    read = PassReader(data, Executor("sync"))
    spectra = make_spectra(plan, read)
    assert isinstance(spectra, KrylovSpectra)
    products = spectra.first_products([], np.random.default_rng(0).normal(size=(80, 5)))
    out = read("mspca-stats", stats=True, **products)
    n = 200
    moments = Moments(
        out["col_sum"], float(out["col_sumsq"].sum()), out["col_sumsq"] / n, out["row_sumsq"]
    )
    spectra.absorb_first(products, out, moments)
    for i in range(n_extend):
        assert spectra.extend(f"mspca-pass-{i + 2}", [])
    return spectra, plan


def _state(spectra) -> dict:
    return copy.deepcopy({k: v for k, v in vars(spectra).items() if k not in ("plan", "read")})


def _assert_same_state(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        x, y = a[key], b[key]
        if isinstance(x, list):  # the kept images, block by block
            assert isinstance(y, list) and len(x) == len(y), key
            for u, v in zip(x, y, strict=True):
                np.testing.assert_array_equal(u, v, err_msg=key)
        elif isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, y, err_msg=key)
        else:
            assert x == y, key


def test_krylov_settled__returns_a_decision_and_a_bound_and_changes_nothing() -> None:
    spectra, plan = _krylov_after(3)
    n_passes = spectra.read.n_passes
    spec = spectra.spectrum(LowRank.empty(plan.p))
    history = [spec.values - 1e-3, spec.values - 1e-6]
    before = _state(spectra)
    first = spectra.settled(spec, history, 1.0, tol=1e-2)
    second = spectra.settled(spec, history, 1.0, tol=1e-2)
    assert first == second
    ok, bound = first
    assert isinstance(ok, bool) and bound >= 0.0
    _assert_same_state(before, _state(spectra))
    assert spectra.read.n_passes == n_passes
    # a bound above the tolerance can never be settled
    assert spectra.settled(spec, history, 1.0, tol=bound / 2)[0] is (bound == 0.0)


def test_krylov_settled__needs_three_blocks_and_a_history() -> None:
    spectra, plan = _krylov_after(1)
    spec = spectra.spectrum(LowRank.empty(plan.p))
    ok, bound = spectra.settled(spec, [spec.values], 1.0, tol=1e9)
    assert not ok and np.isfinite(bound)


def test_krylov_earlier_history__is_what_the_earlier_bases_gave_the_same_operator() -> None:
    # the Ritz values after each earlier pass, recomputed from the basis without a pass
    recorded = []
    for i in range(1, 4):
        spectra, plan = _krylov_after(i)
        recorded.append(spectra.spectrum(LowRank.empty(plan.p)).values)
    n_passes = spectra.read.n_passes
    history = spectra.earlier_history(LowRank.empty(plan.p))
    assert len(history) == 2
    np.testing.assert_allclose(history[0], recorded[0], rtol=1e-10)
    np.testing.assert_allclose(history[1], recorded[1], rtol=1e-10)
    assert spectra.read.n_passes == n_passes
    # wider spectra (a knockoff's K + 2) from the same bases
    assert [h.size for h in spectra.earlier_history(LowRank.empty(plan.p), 5)] == [5, 5]


def test_krylov_projected_gram__grows_with_the_basis_block_by_block() -> None:
    # every spectrum of a basis starts from QᵀMᵀMQ, kept up to date as blocks are added
    spectra, _plan = _krylov_after(3)
    assert spectra._QtZ.shape == (spectra.Q.shape[1],) * 2
    np.testing.assert_allclose(spectra._QtZ, spectra.Q.T @ spectra.Z, rtol=1e-12, atol=1e-9)


def test_krylov_knockoffs_settled__waits_for_values_still_rising() -> None:
    spectra, plan = _krylov_after(3)
    spec = spectra.spectrum(LowRank.empty(plan.p))
    top = spec.values[0]
    assert top > 4.0  # above the edge at σ² = 1, where the rule watches
    # no history yet: not settled
    assert not spectra.knockoffs_settled([spec], [[]], 1.0, tol=1e9)
    # the last rise within tol, and slowing fast: settled
    slowing = [spec.values - 1e-2, spec.values - 1e-5]
    assert spectra.knockoffs_settled([spec], [slowing], 1.0, tol=1e-4)
    # a last rise within tol, slowing little (ratio 0.9: nine times as much still to come)
    steady = [spec.values - 5e-5 / 0.9 - 5e-5, spec.values - 5e-5]
    assert not spectra.knockoffs_settled([spec], [steady], 1.0, tol=1e-4)
    assert spectra.knockoffs_settled([spec], [steady], 1.0, tol=1e-3)
    # one knockoff not settled holds them all
    assert not spectra.knockoffs_settled([spec, spec], [slowing, [spec.values - 1.0]], 1.0, 1e-4)


def test_exact_settled__is_always_true_with_a_zero_bound() -> None:
    X = np.random.default_rng(0).normal(size=(40, 6))
    data = orient(da.from_array(X))
    plan = make_plan(FitParams.from_kwargs(n_components=2), Location("none"), n=40, d=6, dual=False)
    spectra = make_spectra(plan, PassReader(data, Executor("sync")))
    assert isinstance(spectra, ExactSpectra)
    assert spectra.settled(None, [], 1.0, 0.0) == (True, 0.0)  # type: ignore[arg-type]
