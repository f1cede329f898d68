"""The within-group covariance at the inliers' scale (:mod:`mspca_dask._engine.within`).

Its eigenpairs against a dense reference, by both solvers and in both orientations; its
invariance to a group's spread; and, on fits, that a batch with more noise than the rest
leaves the covariance components where the inliers' covariance puts them.
"""

from __future__ import annotations

import warnings

import dask.array as da
import numpy as np
import pytest
from simulations import spike_beside_oblique_shift

import mspca_dask
from mspca_dask._engine import run, spectra
from mspca_dask._engine.plan import Location, make_plan
from mspca_dask._engine.spectra import PassReader
from mspca_dask._engine.within import WithinGroups, WithinKrylov, group_scales, within_spectrum
from mspca_dask._execution import Executor
from mspca_dask._params import FitParams
from mspca_dask._passes import orient
from mspca_dask.testing import make_spiked_mixture
from mspca_dask.verdict.pairs import spread_z

K = 4


def _grouped(n: int, d: int, scales: tuple[float, ...], seed: int = 0):
    """Two spikes shared by every group, each group at its own scale and shifted."""
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(len(scales)), n // len(scales))
    U = np.linalg.qr(rng.standard_normal((d, 2)))[0]
    X = rng.standard_normal((n, d)) + rng.standard_normal((n, 2)) * [3.0, 2.0] @ U.T
    X *= np.asarray(scales)[labels][:, None]
    X += 4.0 * rng.standard_normal((len(scales), d))[labels] / np.sqrt(d)
    return X, labels


def _groups(X: np.ndarray, labels: np.ndarray) -> WithinGroups:
    """The groups at their own scales (weighted whether or not their spreads differ)."""
    members = np.eye(labels.max() + 1)[labels]
    sums, sumsq = X.T @ members, np.sum(X * X, axis=1)
    model = _model(X, labels)
    weights = 1.0 / group_scales(sumsq, members, sums)
    trace = float(weights @ (members.T @ sumsq - np.sum(sums**2, axis=0) / members.sum(0)))
    none_left_out = np.zeros(members.shape[1], dtype=bool)
    return WithinGroups(
        members, model.means, weights, trace / len(X), model.spread_z, none_left_out, len(X)
    )


def _model(X: np.ndarray, labels: np.ndarray, level: float = 0.05) -> WithinGroups:
    """As the fit builds it: weighted only when the groups' spreads differ at ``level``."""
    members = np.eye(labels.max() + 1)[labels]
    means = (X.T @ members) / members.sum(axis=0)
    distances = np.sum((X - means.T[labels]) ** 2, axis=1)
    return WithinGroups.of(
        members,
        X.T @ members,
        np.sum(X * X, axis=1),
        distances=distances,
        offsets=np.zeros(members.shape[1]),
        level=level,
    )


def _reference(X: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dense ``S_w``: every group re-centred and divided by its scale, then pooled."""
    Xw = X.copy()
    var = []
    for g in range(labels.max() + 1):
        rows = labels == g
        Xw[rows] -= Xw[rows].mean(axis=0)
        var.append(np.sum(Xw[rows] ** 2) / (rows.sum() - 1))
    Xw /= np.sqrt(np.asarray(var) / var[0])[labels][:, None]
    vals, vecs = np.linalg.eigh(Xw.T @ Xw / X.shape[0])
    return vals[::-1][:K], vecs[:, ::-1][:, :K]


def _assert_matches_reference(sol, X: np.ndarray, values: np.ndarray, vectors: np.ndarray):
    """Eigenvalues within their bounds of the dense reference's, its two spikes above the
    line with the reference's eigenvectors, and the components' images ``X v``."""
    assert np.all(np.abs(sol.values - values) <= sol.bounds + 1e-12)
    top = sol.values > sol.line
    assert top.sum() == 2
    cos = np.abs(np.sum(sol.components[:, top] * vectors[:, top], axis=0))
    assert np.all(cos > 1 - 1e-6)
    np.testing.assert_allclose(sol.X_components, X @ sol.components, atol=1e-8)


def _solve(X: np.ndarray, labels: np.ndarray, solver: str):
    n, d = X.shape
    dual = d > n
    data = orient(da.from_array(X, chunks=(n, 40) if dual else (60, d)), dual=dual)
    params = FitParams.from_kwargs(n_components=K, solver=solver)
    plan = make_plan(params, Location(None), n=n, d=d, dual=dual)
    read = PassReader(data, Executor("sync"))
    groups = _groups(X, labels)
    M = X.T if dual else X
    if solver == "exact":
        return within_spectrum(plan, read, groups, gram=M.T @ M, start=None)
    rng = np.random.default_rng(1)
    start = np.linalg.qr(rng.standard_normal((plan.p, plan.sketch_width)))[0]
    return within_spectrum(plan, read, groups, gram=None, start=start)


def test_group_scales__a_group_spread_by_a_has_scale_a_squared():
    X, labels = _grouped(300, 20, (1.0, 1.0, 1.0))
    members = np.eye(3)[labels]
    base = group_scales(np.sum(X * X, axis=1), members, X.T @ members)
    Y = X.copy()
    rows = labels == 2
    Y[rows] = Y[rows].mean(axis=0) + 3.0 * (Y[rows] - Y[rows].mean(axis=0))
    scaled = group_scales(np.sum(Y * Y, axis=1), members, Y.T @ members)
    assert scaled[0] == 1.0
    np.testing.assert_allclose(scaled, base * [1.0, 1.0, 9.0], rtol=1e-10)


@pytest.mark.parametrize("shape", [(360, 40), (150, 300)], ids=["primal", "dual"])
@pytest.mark.parametrize("solver", ["exact", "randomized"])
def test_within_spectrum__matches_the_dense_scaled_covariance(shape, solver):
    X, labels = _grouped(*shape, scales=(1.0, 2.0, 0.7))
    values, vectors = _reference(X, labels)
    sol = _solve(X, labels, solver)
    if solver == "exact":
        np.testing.assert_allclose(sol.values, values, rtol=1e-9)
    _assert_matches_reference(sol, X, values, vectors)


@pytest.mark.parametrize("solver", ["exact", "randomized"])
def test_within_spectrum__does_not_depend_on_a_groups_spread(solver):
    X, labels = _grouped(360, 40, scales=(1.0, 1.0, 1.0))
    Y = X.copy()
    rows = labels == 1
    Y[rows] = Y[rows].mean(axis=0) + 2.5 * (Y[rows] - Y[rows].mean(axis=0))
    a, b = _solve(X, labels, solver), _solve(Y, labels, solver)
    np.testing.assert_allclose(b.values, a.values, rtol=1e-6)
    assert b.line == pytest.approx(a.line, rel=1e-6)


def _two_groups_beside_weak_spikes():
    """4000 × 800: two spikes just past the detection threshold (2√c, 1.5√c) beside two 5 %
    groups shifted at the paper's strength."""
    n, d = 4000, 800
    c = d / n
    return make_spiked_mixture(
        n, d, covariance_spikes=(2 * np.sqrt(c), 1.5 * np.sqrt(c)), mean_shift_weights=(0.05, 0.05)
    )


def _spread_along_its_shift(n: int, d: int, seed: int = 0):
    """Three groups; group 2 shifted by ``m·s``, ``s ~ Exp(1)``, and its scores on the two
    spikes and the shifts (the candidates)."""
    X, labels = _grouped(n, d, (1.0, 1.0, 1.0), seed)
    rng = np.random.default_rng(seed + 1)
    rows = labels == 2
    m = rng.standard_normal(d)
    X[rows] += np.outer(8.0 * rng.exponential(size=rows.sum()), m / np.linalg.norm(m))
    V = np.linalg.svd(X - X.mean(axis=0), full_matrices=False)[2][:4]
    return X, labels, X @ V.T


@pytest.mark.parametrize("shape", [(360, 40), (150, 300)], ids=["primal", "dual"])
@pytest.mark.parametrize("solver", ["exact", "randomized"])
def test_a_group_spread_along_its_shift_is_left_out_of_s_w(shape, solver):
    X, labels, scores = _spread_along_its_shift(*shape)
    members = np.eye(3)[labels]
    means = (X.T @ members) / members.sum(axis=0)
    groups = WithinGroups.of(
        members,
        X.T @ members,
        np.sum(X * X, axis=1),
        distances=np.sum((X - means.T[labels]) ** 2, axis=1),
        offsets=np.zeros(3),
        level=0.05,
        scores=scores,
    )
    assert list(groups.own_spread) == [False, False, True]
    kept = labels != 2
    assert groups.n_rows == kept.sum()
    # S_w is then the covariance of the other groups alone, each about its own mean
    values, vectors = _reference(X[kept], labels[kept])
    n, d = X.shape
    dual = d > n
    data = orient(da.from_array(X, chunks=(n, 40) if dual else (60, d)), dual=dual)
    plan = make_plan(
        FitParams.from_kwargs(n_components=K, solver=solver), Location(None), n=n, d=d, dual=dual
    )
    read = PassReader(data, Executor("sync"))
    M = X.T if dual else X
    if solver == "exact":
        sol = within_spectrum(plan, read, groups, gram=M.T @ M, start=None)
    else:
        start = np.linalg.qr(np.random.default_rng(1).standard_normal((plan.p, plan.sketch_width)))
        sol = within_spectrum(plan, read, groups, gram=None, start=start[0])
    assert np.all(np.abs(sol.values - values) <= sol.bounds + 1e-9)
    cos = np.abs(np.sum(sol.components[:, :2] * vectors[:, :2], axis=0))
    assert np.all(cos > 1 - 1e-6)
    np.testing.assert_allclose(sol.X_components, X @ sol.components, atol=1e-8)


def test_groups_are_weighted_only_when_their_spreads_differ():
    equal = _grouped(600, 60, scales=(1.0, 1.0, 1.0), seed=3)
    assert not _model(*equal).scaled
    assert np.all(_model(*equal).weights == 1.0)
    differ = _grouped(600, 60, scales=(1.0, 1.5, 1.0), seed=3)
    model = _model(*differ)
    assert model.scaled and model.spread_z > 5
    np.testing.assert_allclose(model.weights, [1.0, 1 / 2.25, 1.0], rtol=0.1)


@pytest.mark.statistical
@pytest.mark.parametrize(
    ("sizes", "origin"),
    [
        ((900, 100), "own"),
        ((980, 10, 10), "own"),
        ((500, 300, 200), "own"),
        ((900, 100), "common"),
        ((500, 300, 200), "common"),
    ],
)
def test_spread_test_rejects_equal_spreads_at_most_at_its_level(sizes, origin):
    """Shifted groups of one spread (Gaussian noise, a spike): at most α of fits weighted.
    ``own``: distances to each group's mean (the dual orientation's); ``common``: to the
    overall mean, less the group mean's offset (the primal orientation's)."""
    rng = np.random.default_rng(7)
    rejected = 0
    for _ in range(200):
        labels = np.repeat(np.arange(len(sizes)), sizes)
        X = rng.standard_normal((sum(sizes), 80)) + 2.0 * rng.standard_normal((sum(sizes), 1))
        X += 3.0 * rng.standard_normal((len(sizes), 80))[labels] / np.sqrt(80)
        if origin == "own":
            z = _model(X, labels).spread_z
        else:
            o = X.mean(axis=0)
            means = np.array([X[labels == g].mean(axis=0) for g in range(len(sizes))])
            z = spread_z(np.sum((X - o) ** 2, axis=1), labels, np.sum((means - o) ** 2, axis=1))
        rejected += z >= 1.6448536
    # level 0.05: 10 expected; 17 or more has probability below 0.05 under the level
    assert rejected <= 16, f"{rejected} of 200"


@pytest.mark.statistical
@pytest.mark.parametrize("noise_sd", [2.0, 1.5])
def test_fit__a_noisier_batch_leaves_the_first_covariance_component_on_the_inliers(
    noise_sd, noisier_clusters
):
    """A shifted 10 % batch with ``noise_sd`` times the others' spread beside two spikes
    (n = 1000, d = 900), every default, ten seeds: the first covariance component aligns with
    the inliers' own top eigenvector (|cos| ≥ 0.5) in at least 9."""
    c, good = 0.9, 0
    for seed in range(10):
        model = make_spiked_mixture(
            1000,
            900,
            covariance_spikes=(2.0 * np.sqrt(c), 1.5 * np.sqrt(c)),
            mean_shift_weights=(0.1,),
            random_state=seed,
        )
        inliers = model.clean_rows(0, 1000)[np.asarray(model.membership) == 0]
        top = np.linalg.svd(inliers, full_matrices=False)[2][0]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = mspca_dask.fit(
                noisier_clusters(model, noise_sd).to_numpy(), n_components=10, random_state=seed
            )
        kept = np.flatnonzero(np.isin(res.verdicts, ("covariance", "mixed")))
        if kept.size:
            good += abs(res.eigenvectors[kept[0]] @ top) >= 0.5
    assert good >= 9


def test_fit__within_blocks_ride_on_the_main_passes_and_agree_with_the_exact_solver(
    noisier_clusters,
):
    """Dual, groups of different spreads found by the location step: the first blocks of the
    within-group iteration are computed in the main spectrum's passes, and the covariance
    components agree with the exact solver's within their bounds."""
    c = 3.0
    model = make_spiked_mixture(
        1000,
        3000,
        covariance_spikes=(3 * np.sqrt(c),),
        mean_shift_weights=(0.1,),
        mean_shift_strengths=(5 * np.sqrt(c),),
        random_state=3,
    )
    X = noisier_clusters(model, 1.5).to_numpy()
    K = 5
    res = mspca_dask.fit(X, n_components=K, solver="randomized")
    riding = [p["name"] for p in res.passes if p["name"].startswith("mspca-pass-")]
    assert any("within" in p["products"] for p in res.passes if p["name"] in riding)
    exact = mspca_dask.fit(X, n_components=K, solver="exact")
    assert res.verdicts.tolist() == exact.verdicts.tolist()
    kept = np.flatnonzero(res.stable)
    assert kept.size
    # the K pairs' eigenvalues are certified against the spectrum about its own location (the
    # exact solver's differs in the last digits: it comes from the preliminary eigenvectors,
    # exact there); a hidden spike after them is S_w's
    main = kept[kept < K]
    Xc = X - res.location
    own = np.linalg.eigvalsh(Xc @ Xc.T / X.shape[0])[::-1]
    err = np.abs(res.eigenvalues[main] - own[main])
    assert np.all(err <= res.eigenvalue_bounds[main] + 1e-9)
    cos = np.abs(np.sum(res.eigenvectors[kept] * exact.eigenvectors[kept], axis=1))
    assert np.all(cos > 0.999)


def test_fit__within_blocks_of_their_own_run_at_the_main_passes_float32(
    monkeypatch, noisier_clusters
):
    """Float32 chunks whose Krylov passes ran at float32: the within-group iteration's own
    blocks do too, their rounding in its bounds, and its eigenvalues agree with the exact
    solver's (float64) within the target accuracy."""
    seen: list[tuple[str, bool | None]] = []
    run_pass = Executor.run_pass

    def spy(self, data, name, *, single=False, **products):
        seen.append((name, products.get("within_single")))
        return run_pass(self, data, name, single=single, **products)

    monkeypatch.setattr(Executor, "run_pass", spy)
    # the groups 1.3 times as spread as the inliers: S_w weights them, is no low-rank update of
    # the main operator, and its iteration runs blocks of its own
    X = noisier_clusters(_two_groups_beside_weak_spikes(), 1.3).to_numpy().astype(np.float32)
    n = X.shape[0]
    res = mspca_dask.fit(da.from_array(X, chunks=(1000, -1)), n_components=6)
    assert res.params["precision"] == "float32" and res.n_groups == 3
    own = [single for name, single in seen if name.startswith("mspca-within-")]
    assert own and all(own)
    exact = mspca_dask.fit(X.astype(np.float64), n_components=6, solver="exact")
    assert res.verdicts.tolist() == exact.verdicts.tolist()
    kept = np.flatnonzero(res.stable)
    assert kept.size == 2
    err = np.abs(res.component_variances[kept] - exact.component_variances[kept])
    assert np.all(err <= 0.1 / np.sqrt(n))  # the default target at σ² = 1


def test_fit__the_groups_sums_join_the_main_basis_after_the_location_step(monkeypatch):
    """Primal, groups of one spread: ``S_w`` is the main operator less a term in the groups'
    sums, so Krylov passes after the location step take those sums into the basis (as the
    dual orientation takes the groups' indicators); ``S_w``'s Ritz pairs then have residuals
    outside the basis only where the main operator's do."""
    made: list[spectra.KrylovSpectra] = []
    centres: list[run.Centre] = []
    make, estimate = run.make_spectra, run._estimate_location

    def spy_make(plan, read):
        made.append(make(plan, read))
        return made[-1]

    def spy_estimate(*args, **kwargs):
        centres.append(estimate(*args, **kwargs))
        return centres[-1]

    monkeypatch.setattr(run, "make_spectra", spy_make)
    monkeypatch.setattr(run, "_estimate_location", spy_estimate)
    X = _two_groups_beside_weak_spikes().to_numpy()
    res = mspca_dask.fit(da.from_array(X, chunks=(1000, -1)), n_components=6)
    names = [p["name"] for p in res.passes]
    after = names[names.index("mspca-location-groups") + 1 :]
    assert res.n_groups == 3 and any(name.startswith("mspca-pass-") for name in after)
    Q, sums = made[0].Q, centres[0].group_images
    assert sums is not None and sums.shape == (X.shape[1], 2)
    outside = sums - Q @ (Q.T @ sums)
    assert np.all(np.linalg.norm(outside, axis=0) <= 1e-10 * np.linalg.norm(sums, axis=0))


def test_take_basis__the_dual_operator_on_the_main_basis_is_exact_without_a_pass(monkeypatch):
    """Dual: ``S_w``'s operator on ``W^{-1/2}`` times the main basis (which holds the groups'
    indicators) comes from the Gram operator there; a step per block end, then the rest."""
    X, labels = _grouped(150, 300, scales=(1.0, 2.0, 0.7))
    n, d = X.shape
    groups = _groups(X, labels)
    params = FitParams.from_kwargs(n_components=K, solver="randomized")
    plan = make_plan(params, Location(None), n=n, d=d, dual=True)
    rng = np.random.default_rng(2)
    Q = np.linalg.qr(np.column_stack([groups.members, rng.standard_normal((n, 40))]))[0]
    gram = X @ X.T
    it = WithinKrylov(plan, groups)
    it.take_basis(Q, [13, 23, 33], lambda a: gram @ a, lambda a: X.T @ a, rounding=0.0)
    assert (it.steps, it.reads, it.settled) == (3, 0, False)
    sw = np.sqrt(groups.row_weights)[:, None]
    R = np.eye(n) - groups.members @ (groups.members / groups.counts).T
    A = sw * (R @ gram @ R) * sw.T / n
    np.testing.assert_allclose(it.Q.T @ it.Q, np.eye(Q.shape[1]), atol=1e-10)
    np.testing.assert_allclose(it.AQ, A @ it.Q, atol=1e-10 * np.linalg.norm(A, 2))
    sol = it.solution(None)  # the images were taken too: no read
    np.testing.assert_allclose(sol.X_components, X @ sol.components, atol=1e-8)
    # over the driver budget for images, the components' data side takes one read instead
    monkeypatch.setattr(spectra, "BASIS_IMAGE_BUDGET", 0)
    again = WithinKrylov(plan, groups)
    again.take_basis(Q, [13, 23, 33], lambda a: gram @ a, lambda a: X.T @ a, rounding=0.0)
    read = PassReader(orient(da.from_array(X, chunks=(n, 40)), dual=True), Executor("sync"))
    other = again.solution(read)
    assert read.n_passes == 1
    np.testing.assert_array_equal(other.values, sol.values)
    np.testing.assert_allclose(other.components, sol.components, atol=1e-10)
    np.testing.assert_allclose(other.X_components, sol.X_components, atol=1e-8)


def test_take_basis__the_primal_operator_on_the_main_basis_is_exact_for_unweighted_groups():
    """Primal, groups of one spread (``W = I``): ``S_w`` is the main operator less the
    groups' mean term, so its products on the main basis need no pass; weighted groups
    would need ``XᵀWX``, which no main pass read."""
    X, labels = _grouped(400, 120, scales=(1.0, 1.0))
    n, d = X.shape
    groups = _model(X, labels)
    assert not groups.scaled
    params = FitParams.from_kwargs(n_components=K, solver="randomized")
    plan = make_plan(params, Location(None), n=n, d=d, dual=False)
    Q = np.linalg.qr(np.random.default_rng(2).standard_normal((d, 50)))[0]
    gram = X.T @ X
    it = WithinKrylov(plan, groups)
    it.take_basis(Q, [20, 35], lambda a: gram @ a, lambda a: X @ a, rounding=0.0)
    assert (it.steps, it.reads) == (3, 0)
    Xw = X - groups.means.T[labels]
    np.testing.assert_allclose(it.AQ, Xw.T @ Xw @ it.Q / n, atol=1e-10 * np.linalg.norm(gram, 2))
    sol = it.solution(None)  # the components' images from the main basis's: no read
    np.testing.assert_allclose(sol.X_components, X @ sol.components, atol=1e-8)
    # the main basis's images not kept (over the driver's budget): one read gives them
    again = WithinKrylov(plan, groups)
    again.take_basis(Q, [20, 35], lambda a: gram @ a, lambda a: None, rounding=0.0)
    read = PassReader(orient(da.from_array(X, chunks=(60, d)), dual=False), Executor("sync"))
    other = again.solution(read)
    assert read.n_passes == 1
    np.testing.assert_allclose(other.X_components, sol.X_components, atol=1e-8)
    weighted = _groups(*_grouped(400, 120, scales=(1.0, 2.0)))
    with pytest.raises(RuntimeError, match="unweighted"):
        WithinKrylov(plan, weighted).take_basis(Q, [], lambda a: a, lambda a: a, rounding=0.0)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_fit__a_spike_beside_a_shift_is_certified_within_the_groups(seed):
    """A tenth of the samples shifted at 45° to the top spike, spikes near the bulk edge:
    the main basis converged on the shifted spectrum holds the within-group spike only
    roughly.  The randomized solver still returns it certified, as the exact solver does:
    the same first covariance component and its variance within the groups."""
    X = spike_beside_oblique_shift(seed)
    res = mspca_dask.fit(X)
    exact = mspca_dask.fit(X, solver="exact")
    assert res.solver == "randomized"
    first, first_exact = res.component_index[0], exact.component_index[0]
    assert abs(res.components[0] @ exact.components[0]) > 0.99
    tol = 0.1 * res.noise_variance / np.sqrt(X.shape[0])
    assert abs(res.component_variances[first] - exact.component_variances[first_exact]) < 3 * tol


def test_take_basis__provisional_products_only_steer_one_float64_pass_certifies():
    """Dual, main products off by more than the target (provisional float32 passes): they
    only steer the iteration; one float64 pass over its top Ritz vectors gives eigenvalues
    within their bounds of the dense reference, the components and their images."""
    X, labels = _grouped(150, 300, scales=(1.0, 2.0, 0.7))
    values, vectors = _reference(X, labels)
    n, d = X.shape
    groups = _groups(X, labels)
    params = FitParams.from_kwargs(n_components=K, solver="randomized")
    plan = make_plan(params, Location(None), n=n, d=d, dual=True)
    read = PassReader(orient(da.from_array(X, chunks=(n, 40)), dual=True), Executor("sync"))
    rng = np.random.default_rng(2)
    Q = np.linalg.qr(np.column_stack([groups.members, rng.standard_normal((n, 60))]))[0]
    E = rng.standard_normal((n, n))
    rough = X @ X.T + 1e-3 * (E + E.T)  # the Gram operator with rounding-sized errors
    it = WithinKrylov(plan, groups)
    it.take_basis(Q, [], lambda a: rough @ a, lambda a: X.T @ a, rounding=0.0, provisional=True)
    sol = within_spectrum(plan, read, groups, gram=None, start=it)
    assert it.reads >= 1 and read.n_passes == it.reads + 1  # its blocks and the certificate
    _assert_matches_reference(sol, X, values, vectors)


def _populations(n: int, d: int, seed: int) -> np.ndarray:
    """Standardised genotypes of three populations of different diversity (Balding–Nichols,
    F_ST 0.005, 0.03, 0.08; 70, 20 and 10 % of the samples): shifted groups, no
    within-group spike."""
    rng = np.random.default_rng(seed)
    labels = np.repeat([0, 1, 2], [7 * n // 10, 2 * n // 10, n - 9 * n // 10])
    anc = rng.uniform(0.05, 0.95, d)
    freq = np.stack(
        [rng.beta(anc * (1 - f) / f, (1 - anc) * (1 - f) / f) for f in (0.005, 0.03, 0.08)]
    )
    p = freq[labels]
    g = (rng.random((n, d)) < p).astype(float) + (rng.random((n, d)) < p)
    s = g.std(axis=0)
    return (g[:, s > 0] - g[:, s > 0].mean(axis=0)) / s[s > 0]


@pytest.mark.parametrize(
    ("seed", "shape", "dtype"),
    [(4, (600, 3000), np.float64), (5, (600, 3000), np.float64), (4, (2000, 6000), np.float32)],
    ids=["f64-4", "f64-5", "f32-4"],
)
def test_fit__populations_of_different_diversity_take_one_within_pass_at_most(seed, shape, dtype):
    """Dual, populations whose spreads differ: the weighted ``S_w``'s iteration starts from
    the main basis with its products, so without a within-group spike at most one pass of
    its own settles it (float32: the main passes are provisional, a block rides on their
    certificate's pass and one float64 pass certifies ``S_w``'s eigenpairs); the verdicts
    are the exact solver's."""
    n, d = shape
    X = _populations(n, d, seed).astype(dtype)
    res = mspca_dask.fit(da.from_array(X, chunks=(n, d // 4)), n_components=6, solver="randomized")
    own = [p["name"] for p in res.passes if p["name"].startswith("mspca-within-")]
    assert len(own) <= 1
    if dtype == np.float32:  # the population axes' size makes float32 passes provisional
        assert own == ["mspca-within-certificate"]
    exact = mspca_dask.fit(X.astype(np.float64), n_components=6, solver="exact")
    assert res.verdicts.tolist() == exact.verdicts.tolist()
    assert res.verdicts.tolist()[:2] == ["mean shift", "mean shift"]
