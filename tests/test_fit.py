"""mspca_dask.fit against a dense NumPy reference, across solvers, orientations and sources."""

from __future__ import annotations

import math
import re
import subprocess
import sys
import warnings

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
import zarr
from simulations import weaker_spike_lifted

import mspca_dask
from mspca_dask import rmt
from mspca_dask._engine import spectra
from mspca_dask._engine.linalg import flip_signs
from mspca_dask._engine.plan import KNOCKOFF_EXTRA
from mspca_dask.testing import alignment, make_spiked_mixture, paper_setting
from mspca_dask.verdict import GroupFit, fit_groups, shift_statistics


def reference_mspca(
    X,
    K,
    *,
    location,
    random_state,
    B=5,
    weight=1.0,
    factor=2.0,
    C=3.0,
    alpha=0.05,
    margin=4.0,
    auto=False,
):
    """Dense MS-PCA that materialises every knockoff matrix (no low-rank algebra).

    It computes what the engine feeds the verdict: the spectrum, the knockoff spectra, the
    scores, the groups (:func:`~mspca_dask.verdict.fit_groups`) and the shift statistics
    (:func:`~mspca_dask.verdict.shift_statistics`); the verdict's own model is tested in
    ``tests/test_verdict.py``.

    ``auto``: ``location`` came from ``location="auto"``; the groups that the group test finds
    on the mean-centred data's candidate scores are the verdict's groups.  Otherwise the group
    test runs on the candidates' scores about ``location``.  The knockoffs are the paper's:
    random directions over the random (or whole) membership, whatever the groups.
    """
    n, d = X.shape
    c = d / n
    seed = random_state % 2**32
    Xl = X - location[None, :] if location is not None else X.copy()
    _sketch, s_dir, s_memb = np.random.SeedSequence(random_state).spawn(3)
    dirs = np.random.default_rng(s_dir).standard_normal((d, B))
    dirs /= np.linalg.norm(dirs, axis=0)
    memb = np.ones((n, B))
    if weight < 1:
        rng = np.random.default_rng(s_memb)
        memb = np.zeros((n, B))
        k = max(1, round(weight * n))
        for b in range(B):
            memb[rng.choice(n, size=k, replace=False), b] = 1
    groups = None
    if auto:
        Xc = X - X.mean(axis=0)
        w0, V0 = np.linalg.eigh(Xc.T @ Xc / n)
        lam0, U0 = w0[::-1][:K], flip_signs(V0[:, ::-1][:, :K])
        s20 = rmt.estimate_noise_variance(float(np.sum(Xc**2)) / n, lam0, n, d)
        line0 = rmt.mp_edges(c, s20)[1] + margin * rmt.tracy_widom_scale(n, d, s20)
        k0 = int(np.count_nonzero(lam0 > line0))
        groups = (
            fit_groups(Xc @ U0[:, :k0], level=alpha, seed=seed) if k0 else GroupFit.none(n, alpha)
        )
    w, V = np.linalg.eigh(Xl.T @ Xl / n)
    lam, U = w[::-1][:K], flip_signs(V[:, ::-1][:, :K])
    s2 = rmt.estimate_noise_variance(float(np.sum(Xl**2)) / n, lam, n, d)
    eps = rmt.invariance_threshold(n, c, s2, C)
    t2 = rmt.knockoff_strength(lam[0], c, s2, factor)
    knock = []
    for b in range(B):
        Xk = Xl + np.outer(memb[:, b], math.sqrt(t2 / weight) * dirs[:, b])
        # K + 2 knockoff pairs: the knockoff's own spike may push an invariant pair below K
        knock.append(np.linalg.eigvalsh(Xk.T @ Xk / n)[::-1][: K + KNOCKOFF_EXTRA])
    edge = rmt.mp_edges(c, s2)[1]
    candidate = lam > edge + margin * rmt.tracy_widom_scale(n, d, s2)
    scores = Xl @ U
    if groups is None:
        groups = fit_groups(scores[:, candidate], level=alpha, seed=seed)
    return {
        "eigenvalues": lam,
        "knockoff": np.array(knock),
        "candidate": candidate,
        "groups": groups.labels,
        "vectors": U,
        "scores": scores,
        "shift_z": shift_statistics(scores, groups.labels),
        "s2": s2,
        "eps": eps,
        "t2": t2,
    }


def _align_signs(A, B):
    """Flip columns of B (K columns) to agree with A."""
    s = np.sign(np.sum(A * B, axis=0))
    s[s == 0] = 1
    return B * s


@pytest.fixture(scope="module")
def small():
    """A covariance spike and a 10 % cluster 7.5 noise sd off the inliers (n = 400, d = 200).

    The group test finds the cluster, so every fit of it runs the verdict's group path (the
    groups' images, the within-group covariance); the paper's own strength at this size
    (5.3 sd) is missed in some seeds.
    """
    c = 0.5
    return make_spiked_mixture(
        400,
        200,
        covariance_spikes=(2 * math.sqrt(c),),
        mean_shift_weights=(0.1,),
        mean_shift_strengths=(8 * math.sqrt(c),),
        random_state=3,
    )


@pytest.fixture(scope="module")
def small_noisy(small, noisier_clusters):
    """``small`` with its cluster at twice the others' spread: the groups are weighted."""
    return noisier_clusters(small, 2.0)


@pytest.fixture(scope="module")
def no_cluster():
    """``small`` without its cluster: the group test finds no displaced group."""
    c = 0.5
    return make_spiked_mixture(
        400, 200, covariance_spikes=(2 * math.sqrt(c),), mean_shift_weights=(), random_state=3
    )


def _location(small, location):
    X = small.to_numpy()
    return {"none": None, "given": X[small.membership == 0].mean(axis=0), "auto": "auto"}[location]


@pytest.fixture(scope="module")
def exact_primal_fit(small):
    """The exact solver's primal fit of ``small`` for each location, computed once."""
    fits = {}

    def get(location):
        if location not in fits:
            fits[location] = mspca_dask.fit(
                da.from_array(small.to_numpy(), chunks=(100, -1)),
                n_components=6,
                location=_location(small, location),
                solver="exact",
                random_state=11,
            )
        return fits[location]

    return get


@pytest.mark.parametrize("solver", ["exact", "randomized"])
@pytest.mark.parametrize("orientation", ["primal", "dual"])
@pytest.mark.parametrize("location", ["none", "given", "auto"])
def test_fit__matches_dense_reference(small, exact_primal_fit, solver, orientation, location):
    X = small.to_numpy()
    # Row chunks spanning all features -> primal; column chunks spanning all samples -> dual.
    chunks = (100, -1) if orientation == "primal" else (-1, 50)
    loc = _location(small, location)
    res = mspca_dask.fit(
        da.from_array(X, chunks=chunks),
        n_components=6,
        location=loc,
        solver=solver,
        random_state=11,
    )
    ref_loc = None if location == "none" else (loc if location == "given" else res.location)
    ref = reference_mspca(X, 6, location=ref_loc, random_state=11, auto=location == "auto")
    spikes = ref["eigenvalues"] > rmt.mp_edges(X.shape[1] / X.shape[0], ref["s2"])[1]
    assert spikes.sum() >= 2
    np.testing.assert_array_equal(res.candidate, ref["candidate"])
    np.testing.assert_array_equal(res.groups, ref["groups"])
    # a stable pair with displaced groups is reported with the groups' shift removed; every
    # other pair is the eigenpair itself
    raw = spikes & ~(res.stable & res.displaced.any())
    np.testing.assert_array_equal(res.eigenvectors[raw], res.pca_eigenvectors[raw])
    V = res.eigenvectors.T[:, raw]
    # plain PCA's axes are kept for every pair: the covariance's own eigenvectors
    V_pca = res.pca_eigenvectors.T[:, spikes]
    if solver == "exact":
        np.testing.assert_allclose(res.eigenvalues[spikes], ref["eigenvalues"][spikes], rtol=1e-8)
        np.testing.assert_allclose(res.knockoff_eigenvalues_all, ref["knockoff"], rtol=1e-8)
        np.testing.assert_allclose(V, _align_signs(V, ref["vectors"][:, raw]), atol=1e-6)
        np.testing.assert_allclose(V_pca, _align_signs(V_pca, ref["vectors"][:, spikes]), atol=1e-6)
        np.testing.assert_allclose(
            res.scores[:, raw],
            _align_signs(res.scores[:, raw], ref["scores"][:, raw]),
            atol=1e-6,
        )
        np.testing.assert_allclose(
            res.shift_z[spikes], ref["shift_z"][spikes], rtol=1e-6, atol=1e-6
        )
    else:
        # The certificate is the contract: the true error is within the reported bound, and
        # the bound within the default tolerance, 0.1 σ² n^-1/2 (at c = 0.5 half the
        # knockoff's own tenth of ε)
        err = np.abs(res.eigenvalues[spikes] - ref["eigenvalues"][spikes])
        assert np.all(err <= res.eigenvalue_bounds[spikes] + 1e-12)
        tol = rmt.eigenvalue_tolerance(X.shape[0], res.noise_variance)
        assert tol < res.threshold / 10
        assert np.all(res.eigenvalue_bounds[spikes] <= tol)
        top = res.knockoff_eigenvalues_all[:, :6][:, spikes]
        np.testing.assert_allclose(top, ref["knockoff"][:, :6][:, spikes], atol=res.threshold / 10)
        cos = np.abs(np.sum(V * ref["vectors"][:, raw], axis=0))
        assert np.all(cos > 1 - 1e-4)
        assert np.all(np.abs(np.sum(V_pca * ref["vectors"][:, spikes], axis=0)) > 1 - 1e-4)
        # eigenvectors to |cos| 1 - 1e-4 move the scores by about 1 % of their noise: the
        # shift statistics, N(0, 1) deviates, agree to a few hundredths
        np.testing.assert_allclose(
            res.shift_z[spikes], ref["shift_z"][spikes], rtol=1e-3, atol=0.02
        )
    assert res.noise_variance == pytest.approx(ref["s2"], rel=1e-5)
    if location == "none":
        assert res.location is None
    else:
        assert res.location.shape == (X.shape[1],)
    # the verdicts and the components they keep, whatever the solver and the orientation
    base = exact_primal_fit(location)
    np.testing.assert_array_equal(res.verdicts, base.verdicts)
    assert res.components.shape == base.components.shape
    assert np.all(np.abs(np.sum(res.components * base.components, axis=1)) > 1 - 1e-4)


@pytest.mark.parametrize(
    ("n", "d", "chunks"), [(4000, 400, (1000, -1)), (1500, 3000, (-1, 750))], ids=["primal", "dual"]
)
def test_fit__auto_location_costs_at_most_one_pass_more_than_none(n, d, chunks):
    # The location step changes the operator by a low-rank term, not its Krylov basis: the
    # stopping rules go on from the earlier blocks' Ritz values instead of starting again.
    c = d / n
    X = make_spiked_mixture(
        n,
        d,
        covariance_spikes=(3 * max(1.0, math.sqrt(c)),),
        mean_shift_weights=(0.1,),
        mean_shift_strengths=(5 * max(1.0, math.sqrt(c)),),
        random_state=0,
    ).to_numpy()
    A = da.from_array(X.astype(np.float32), chunks=chunks)
    auto = mspca_dask.fit(A, n_components=10, solver="randomized", random_state=0)
    none = mspca_dask.fit(A, n_components=10, solver="randomized", location=None, random_state=0)
    assert auto.groups.max() == 1  # the location step found the cluster and moved the centre
    assert auto.n_passes <= none.n_passes + 1


def test_fit__auto_location_without_groups_keeps_the_spike_and_measures_no_shift():
    # No second group anywhere: the group test does not reject, the location is the sample
    # mean, every candidate is a covariance pair, and there is no shift to measure (NaN, not
    # a z near 0 that would read as "measured and not shifted").
    clean = make_spiked_mixture(
        400, 150, covariance_spikes=(3.0,), mean_shift_weights=(), random_state=4
    )
    res = mspca_dask.fit(clean.to_numpy(), n_components=3, random_state=0)
    assert res.n_groups == 1 and not res.displaced.any()
    assert res.group_p_value > res.params["alpha"]
    np.testing.assert_allclose(res.location, clean.to_numpy().mean(axis=0), atol=1e-10)
    assert res.verdicts[0] == "covariance" and res.stable[0]
    assert np.isnan(res.shift_z).all()
    assert "no displaced group" in res.reasons[0]
    assert all(r.startswith("bulk") for r in res.reasons[~res.candidate])


def test_fit__paper_setting_defaults_return_the_clean_covariance_pc():
    model = paper_setting(pi1=0.1, random_state=5)
    res = mspca_dask.fit(model.to_numpy(), n_components=10, random_state=0)
    truth = model.clean_top_eigenvectors(1)[:, 0]
    assert res.components.shape[1] == model.n_features
    assert alignment(res.components[0], truth) > 0.95
    # The contamination is recognised as a mean-shift component aligned with its direction.
    assert len(res.mean_shift_components) >= 1
    # the cluster is found as a displaced group, and its shift is measured along every pair
    assert res.n_groups >= 2 and res.group_p_value <= res.params["alpha"]
    assert not np.isnan(res.shift_z[res.candidate]).any()
    shift = model.mean_shift_vectors[:, 0]
    assert alignment(res.mean_shift_components[0], shift) > 0.8
    # the displaced samples are the contaminated ones
    assert np.mean(res.displaced == (model.membership != 0)) > 0.95
    # Plain PCA's first component is the mean shift, not the covariance PC.
    assert np.argmax(res.eigenvalues) == 0 and res.verdicts[0] == "mean shift"
    assert res.scores.shape == (model.n_samples, 10)
    assert all(isinstance(r, str) and r for r in res.reasons)


@pytest.mark.parametrize("solver", ["exact", "randomized"])
def test_fit__does_not_depend_on_chunking(small, solver):
    X = small.to_numpy()
    a = mspca_dask.fit(da.from_array(X, chunks=(100, -1)), n_components=5, solver=solver)
    b = mspca_dask.fit(
        da.from_array(X, chunks=((37, 163, 200), (120, 80))), n_components=5, solver=solver
    )
    np.testing.assert_allclose(a.eigenvalues, b.eigenvalues, rtol=1e-10)
    np.testing.assert_allclose(a.knockoff_eigenvalues_all, b.knockoff_eigenvalues_all, rtol=1e-10)
    np.testing.assert_array_equal(a.verdicts, b.verdicts)
    np.testing.assert_array_equal(a.groups, b.groups)
    np.testing.assert_allclose(a.shift_z, b.shift_z, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(a.eigenvectors, b.eigenvectors, atol=1e-8)


def test_fit__same_seed_same_result_and_scaled_data_scale_eigenvalues(small):
    X = small.to_numpy()
    a = mspca_dask.fit(X, n_components=5, random_state=4)
    b = mspca_dask.fit(X, n_components=5, random_state=4)
    np.testing.assert_array_equal(a.eigenvalues, b.eigenvalues)
    np.testing.assert_array_equal(a.knockoff_eigenvalues_all, b.knockoff_eigenvalues_all)
    # Real data do not have unit noise: everything is read on the λ/σ² scale.
    c = mspca_dask.fit(3.0 * X, n_components=5, random_state=4)
    np.testing.assert_allclose(c.eigenvalues, 9 * a.eigenvalues, rtol=1e-8)
    assert c.noise_variance == pytest.approx(9 * a.noise_variance, rel=1e-8)
    # the verdict is scale-free: the same groups, verdicts and shift statistics
    np.testing.assert_array_equal(c.verdicts, a.verdicts)
    np.testing.assert_array_equal(c.groups, a.groups)
    np.testing.assert_allclose(c.shift_z, a.shift_z, rtol=1e-6, atol=1e-8)


def test_fit__row_order_permutes_the_groups_and_changes_no_verdict(small):
    X = small.to_numpy()
    order = np.random.default_rng(0).permutation(X.shape[0])
    a = mspca_dask.fit(X, n_components=5, random_state=4)
    b = mspca_dask.fit(X[order], n_components=5, random_state=4)
    np.testing.assert_allclose(b.eigenvalues, a.eigenvalues, rtol=1e-10)
    np.testing.assert_allclose(b.location, a.location, rtol=1e-8, atol=1e-10)
    np.testing.assert_array_equal(b.verdicts, a.verdicts)
    np.testing.assert_array_equal(b.groups, a.groups[order])
    np.testing.assert_allclose(b.shift_z, a.shift_z, rtol=1e-6, atol=1e-8)


class CountingReads:
    """Counts how often each chunk of a generated array is produced (= read)."""

    def __init__(self, model, chunks):
        self.model = model
        self.reads = 0
        self.array = da.map_blocks(self._block, dtype=float, chunks=chunks, meta=np.empty((0, 0)))
        self.n_chunks = int(np.prod(self.array.numblocks))

    def _block(self, block_info=None):
        (r0, r1), (c0, c1) = block_info[None]["array-location"]
        self.reads += 1
        return self.model.rows(r0, r1)[:, c0:c1]


_STATS, _OUT = "mspca-stats", "mspca-output"
_LOC_SCORES, _LOC_GROUPS, _LOC_MEAN = (
    "mspca-location-scores",
    "mspca-location-groups",
    "mspca-location-mean",
)
_W_GROUPS, _W_GRAM, _W_SCORES = "mspca-within-groups", "mspca-within-gram", "mspca-within-scores"


@pytest.mark.parametrize(
    ("data", "location", "chunks", "names"),
    [
        # statistics + Gram, scores
        ("no_cluster", None, (100, -1), [_STATS, _OUT]),
        # + the location step's scores (no group: the location is the mean, no more reads)
        ("no_cluster", "auto", (100, -1), [_STATS, _LOC_SCORES, _OUT]),
        # dual: the location step's scores are free; the location's own read
        ("no_cluster", "auto", (-1, 50), [_STATS, _LOC_MEAN, _OUT]),
        # groups found on the scores: their sums, then the scores on the within-group spikes
        ("small", None, (100, -1), [_STATS, _OUT, _W_GROUPS, _W_SCORES]),
        # the location step's groups give their sums, and the scores on the within-group
        # spikes ride on the output pass
        ("small", "auto", (100, -1), [_STATS, _LOC_SCORES, _LOC_GROUPS, _OUT]),
        # dual: the location's read also takes every group's sum and puts its indicator in
        # the basis
        ("small", "auto", (-1, 50), [_STATS, _LOC_MEAN, _OUT]),
        # groups of different spreads: the within-group covariance with the rows weighted by
        # their groups' scales takes one read more (primal; dual, it comes from the Gram)
        ("small_noisy", None, (100, -1), [_STATS, _OUT, _W_GROUPS, _W_GRAM, _W_SCORES]),
        ("small_noisy", "auto", (100, -1), [_STATS, _LOC_SCORES, _LOC_GROUPS, _W_GRAM, _OUT]),
        ("small_noisy", "auto", (-1, 50), [_STATS, _LOC_MEAN, _OUT]),
    ],
)
def test_fit__exact_reads_the_data_once_per_planned_pass(request, data, location, chunks, names):
    model = request.getfixturevalue(data)
    src = CountingReads(
        model, chunks=((100,) * 4, (200,)) if chunks[1] == -1 else ((400,), (50,) * 4)
    )
    res = mspca_dask.fit(src.array, n_components=5, solver="exact", location=location)
    assert res.displaced.any() == (data != "no_cluster")
    assert [p["name"] for p in res.passes] == names
    assert res.n_passes == len(names)
    assert src.reads == len(names) * src.n_chunks
    assert "gram" in res.passes[0]["products"]


@pytest.mark.parametrize("data", ["small", "small_noisy"])
def test_fit__randomized_reads_once_per_reported_pass_and_certifies(request, data):
    src = CountingReads(request.getfixturevalue(data), chunks=((100,) * 4, (200,)))
    res = mspca_dask.fit(src.array, n_components=5, solver="randomized", location=None)
    assert src.reads == res.n_passes * src.n_chunks == len(res.passes) * src.n_chunks
    # the scores come from the kept images of the Krylov basis: no output pass; the groups
    # found on them take one read for their sums; with different spreads, the within-group
    # covariance then has Krylov passes of its own (whose images give its scores)
    names = [p["name"] for p in res.passes]
    assert res.displaced.any()
    first_within = names.index(_W_GROUPS)
    assert all(name.startswith("mspca-pass-") for name in names[1:first_within])
    own = [f"mspca-within-{k}" for k in range(1, len(names) - first_within)]
    assert names[first_within + 1 :] == (own if data == "small_noisy" else [])
    if data == "small_noisy":
        assert len(own) >= 2
    spikes = res.eigenvalues > res.mp_edge
    tol = rmt.eigenvalue_tolerance(res.n_samples, res.noise_variance)
    assert np.all(res.eigenvalue_bounds[spikes] <= tol)


@pytest.mark.parametrize(
    "chunks", [((100,) * 4, (200,)), ((400,), (50,) * 4)], ids=["primal", "dual"]
)
def test_fit__randomized_takes_scores_from_the_basis_without_an_output_pass(
    small, chunks, monkeypatch
):
    src = CountingReads(small, chunks=chunks)
    res = mspca_dask.fit(src.array, n_components=5, solver="randomized", location=None)
    assert src.reads == res.n_passes * src.n_chunks == len(res.passes) * src.n_chunks
    # the scores come from the kept images of the Krylov basis: no output pass, and none for
    # the scores on the within-group spikes either
    names = [p["name"] for p in res.passes]
    assert _OUT not in names and _W_SCORES not in names
    exact = mspca_dask.fit(small.to_numpy(), n_components=5, solver="exact", location=None)
    np.testing.assert_array_equal(res.verdicts, exact.verdicts)
    spikes = res.eigenvalues > res.mp_edge
    err = np.abs(res.eigenvalues - exact.eigenvalues)[spikes]
    assert np.all(err <= res.eigenvalue_bounds[spikes])
    if chunks[1] == (200,):  # primal: the scores are the data times the components
        X = small.to_numpy()
        np.testing.assert_allclose(res.scores, X @ res.eigenvectors.T, rtol=1e-9, atol=1e-9)
    # Over the driver budget for the basis's images, the scores take one more read of the
    # data and come out the same.
    monkeypatch.setattr(spectra, "BASIS_IMAGE_BUDGET", 0)
    src2 = CountingReads(small, chunks=chunks)
    again = mspca_dask.fit(src2.array, n_components=5, solver="randomized", location=None)
    # one read for the scores, one for the scores on the within-group spikes
    again_names = [p["name"] for p in again.passes]
    assert sorted(again_names) == sorted(names + [_OUT, _W_SCORES])
    assert src2.reads == again.n_passes * src2.n_chunks
    np.testing.assert_allclose(again.scores, res.scores, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(again.eigenvalues, res.eigenvalues)


def test_fit__randomized_warns_when_pass_budget_is_too_small(small):
    with pytest.warns(mspca_dask.ConvergenceWarning, match="pass budget"):
        mspca_dask.fit(
            small.to_numpy(), n_components=5, solver="randomized", location=None, max_passes=3
        )


def test_fit__threaded_with_groups_imports_neither_scipy_stats_nor_distributed():
    # start-up: importing either costs more than most verdicts (the rank test is the
    # package's own; merging column chunks names its rechunk method, which dask would
    # otherwise import distributed to choose)
    code = (
        "import sys\n"
        "import dask.array as da\n"
        "import numpy as np\n"
        "import mspca_dask\n"
        "rng = np.random.default_rng(0)\n"
        "X = rng.standard_normal((1000, 200))\n"
        "X[:100, 0] += 6.0\n"
        "X[:, 1] *= 3.0\n"
        "res = mspca_dask.fit(da.from_array(X, chunks=(250, 100)), scheduler='threads')\n"
        "print(res.n_groups, 'scipy.stats' in sys.modules, 'distributed' in sys.modules)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["2", "False", "False"]


def test_fit__opening_a_source_computes_nothing(small):
    src = CountingReads(small, chunks=((100,) * 4, (200,)))
    with dask.config.set(scheduler="sync"):
        mspca_dask.io.open_source(src.array)
    assert src.reads == 0


def test_fit__no_spike_warns_and_returns_empty_components():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 100))
    with pytest.warns(mspca_dask.NoSpikeWarning, match="no eigenvalue is clearly above"):
        res = mspca_dask.fit(X, n_components=3)
    assert res.components.shape == (0, 100)
    assert not res.stable.any()
    assert all(r.startswith("bulk") for r in res.reasons)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_fit__zarr_store_path_gives_the_numpy_result(small, tmp_path, zarr_format):
    path = small.write_zarr(
        str(tmp_path / "x.zarr"), chunks=(128, None), zarr_format=zarr_format, name="X"
    )
    a = mspca_dask.fit(path, n_components=4, variable="X")
    b = mspca_dask.fit(small.to_numpy(), n_components=4)
    np.testing.assert_allclose(a.eigenvalues, b.eigenvalues, rtol=1e-10)
    np.testing.assert_array_equal(a.verdicts, b.verdicts)


def test_fit__xarray_dataset_with_transposed_dims(small):
    da_ = small.to_xarray().transpose("features", "samples")
    ds = xr.Dataset({"X": da_})
    a = mspca_dask.fit(ds, n_components=4, variable="X", sample_dim="samples")
    b = mspca_dask.fit(small.to_numpy(), n_components=4)
    np.testing.assert_allclose(a.eigenvalues, b.eigenvalues, rtol=1e-10)
    assert a.sample_coords is not None and len(a.sample_coords) == small.n_samples


def test_fit__result_round_trips_through_zarr(small, tmp_path):
    res = mspca_dask.fit(small.to_numpy(), n_components=4)
    path = res.to_zarr(str(tmp_path / "res.zarr"))
    back = mspca_dask.open_result(path)
    np.testing.assert_array_equal(back.eigenvalues, res.eigenvalues)
    np.testing.assert_array_equal(back.stable, res.stable)
    np.testing.assert_array_equal(back.verdicts, res.verdicts)
    np.testing.assert_array_equal(back.scores, res.scores)
    assert list(back.reasons) == list(res.reasons)


# ----------------------------------------------------------------------------- bad input


def test_fit__raises_on_nan_with_position():
    X = np.random.default_rng(0).standard_normal((50, 10))
    X[17, 4] = np.nan
    X[30, 4] = np.inf
    with pytest.raises(
        mspca_dask.NonFiniteError,
        match=r"2 NaN or infinite.*sample is index 17.*feature is index 4",
    ):
        mspca_dask.fit(da.from_array(X, chunks=(20, 5)), n_components=2)


def test_fit__nan_error_is_a_value_error():
    X = np.ones((5, 3)) + np.arange(15).reshape(5, 3) ** 2
    X[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN or infinite"):
        mspca_dask.fit(X, n_components=1)


def test_fit__raises_on_constant_feature():
    X = np.random.default_rng(0).standard_normal((50, 10))
    X[:, 3] = 2.5
    with pytest.raises(mspca_dask.InputError, match=r"constant across samples \(indices 3\)"):
        mspca_dask.fit(X, n_components=2)


@pytest.mark.parametrize(
    ("X", "exc", "match"),
    [
        (np.zeros((4, 3, 2)), mspca_dask.ShapeError, "2"),
        (np.array([["a", "b"], ["c", "d"]]), mspca_dask.DTypeError, "numeric"),
        (np.ones((1, 5)), mspca_dask.ShapeError, "at least 2 samples|fewer than 2"),
    ],
)
def test_fit__raises_on_bad_array(X, exc, match):
    with pytest.raises(exc, match=match):
        mspca_dask.fit(X, n_components=1)


@pytest.mark.parametrize("k", [0, 11, -1, 2.5])
def test_fit__raises_on_n_components_out_of_range(k):
    X = np.random.default_rng(0).standard_normal((30, 10))
    with pytest.raises(mspca_dask.ParameterError, match="n_components"):
        mspca_dask.fit(X, n_components=k)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"solver": "lanczos"}, r"solver must be one of \['auto', 'exact', 'randomized'\]"),
        ({"location": "median"}, "location must be 'auto'"),
        ({"location": np.zeros(3)}, r"location must have shape \(10,\)"),
        ({"knockoff_weight": 0.0}, "knockoff_weight"),
        ({"n_knockoffs": 0}, "n_knockoffs"),
        ({"alpha": 0.0}, "alpha"),
        ({"alpha": 0.5}, "alpha"),
        ({"random_state": -3}, "random_state"),
    ],
)
def test_fit__raises_on_bad_parameters(kw, match):
    X = np.random.default_rng(0).standard_normal((30, 10))
    with pytest.raises(mspca_dask.ParameterError, match=match):
        mspca_dask.fit(X, n_components=2, **kw)


def test_fit__raises_on_unknown_chunk_sizes():
    x = da.from_array(np.random.default_rng(0).standard_normal((40, 5)), chunks=(10, 5))
    x = x[x[:, 0] > -10]  # boolean indexing -> unknown chunk sizes
    with pytest.raises(mspca_dask.ShapeError, match="compute_chunk_sizes"):
        mspca_dask.fit(x, n_components=2)


def test_fit__raises_on_missing_path_and_variable(tmp_path, small):
    with pytest.raises(mspca_dask.SourceNotFoundError, match="nope.zarr"):
        mspca_dask.fit(str(tmp_path / "nope.zarr"), n_components=2)
    path = small.write_zarr(str(tmp_path / "g.zarr"), name="X")
    with pytest.raises(mspca_dask.VariableNotFoundError, match="'Y'"):
        mspca_dask.fit(path, n_components=2, variable="Y")


def test_fit__raises_on_corrupt_chunk(tmp_path, small):
    path = tmp_path / "c.zarr"
    z = zarr.create_array(str(path), shape=(400, 200), chunks=(100, 200), dtype="f8")
    z[:] = small.to_numpy()
    chunk = next(
        p for p in path.rglob("*") if p.is_file() and p.parent.name == "0" and p.name == "0"
    )
    chunk.write_bytes(b"\x00garbage" * 7)
    with pytest.raises(mspca_dask.ChunkReadError, match="c.zarr"):
        mspca_dask.fit(str(path), n_components=2)


def test_fit__float32_store_is_read_and_accumulated_in_float64(small):
    # the exact path: its Gram matrix is accumulated in float64 from float32 chunks
    X = small.to_numpy()
    a = mspca_dask.fit(
        da.from_array(X.astype(np.float32), chunks=(100, -1)), n_components=4, solver="exact"
    )
    b = mspca_dask.fit(X.astype(np.float32).astype(np.float64), n_components=4, solver="exact")
    np.testing.assert_allclose(a.eigenvalues, b.eigenvalues, rtol=1e-10)


@pytest.mark.parametrize("chunks", [(100, -1), (-1, 50)], ids=["primal", "dual"])
def test_fit__randomized_on_float32_runs_single_precision_products_within_its_bounds(small, chunks):
    X32 = small.to_numpy().astype(np.float32)
    exact = mspca_dask.fit(X32.astype(np.float64), n_components=4, solver="exact", location=None)
    res = mspca_dask.fit(
        da.from_array(X32, chunks=chunks), n_components=4, solver="randomized", location=None
    )
    assert res.params["precision"] == "float32"
    assert "float32 products" in res.summary()
    spikes = res.eigenvalues > res.mp_edge
    assert spikes.any()
    # the bounds carry the estimated float32 rounding and still hold against float64 truth
    assert np.all(res.eigenvalue_bounds > 1e-8)
    assert np.all(
        np.abs(res.eigenvalues - exact.eigenvalues)[spikes] <= res.eigenvalue_bounds[spikes]
    )
    np.testing.assert_array_equal(res.verdicts, exact.verdicts)


def test_fit__float32_data_far_from_zero_fall_back_to_float64_products(small):
    # A mean 1000 times the spread: float32 products would lose the spectrum to cancellation.
    X32 = (small.to_numpy() + 1000.0).astype(np.float32)
    res = mspca_dask.fit(
        da.from_array(X32, chunks=(100, -1)), n_components=4, solver="randomized", location=None
    )
    assert res.params["precision"] == "float64"
    exact = mspca_dask.fit(X32.astype(np.float64), n_components=4, solver="exact", location=None)
    spikes = res.eigenvalues > res.mp_edge
    assert np.all(
        np.abs(res.eigenvalues - exact.eigenvalues)[spikes] <= res.eigenvalue_bounds[spikes]
    )


@pytest.fixture
def pass_precisions(monkeypatch):
    """Records ``(pass name, single precision asked, Krylov block width)`` of every pass."""
    from mspca_dask._execution import Executor

    seen: list[tuple[str, bool, int | None]] = []
    run_pass = Executor.run_pass

    def spy(self, data, name, *, single=False, **products):
        block = products.get("krylov")
        seen.append((name, single, None if block is None else block.shape[1]))
        return run_pass(self, data, name, single=single, **products)

    monkeypatch.setattr(Executor, "run_pass", spy)
    return seen


@pytest.mark.parametrize("chunks", [(100, -1), (-1, 50)], ids=["primal", "dual"])
def test_fit__float32_store_computes_its_first_krylov_block_in_float32(
    small, chunks, pass_precisions
):
    X32 = small.to_numpy().astype(np.float32)
    res = mspca_dask.fit(
        da.from_array(X32, chunks=chunks), n_components=4, solver="randomized", location=None
    )
    assert res.params["precision"] == "float32"
    assert pass_precisions[0][:2] == ("mspca-stats", True)
    # the spectrum's passes; the within-group covariance's own Krylov passes run in float64
    spectrum = [p for p in pass_precisions if not re.fullmatch(r"mspca-within-\d+", p[0])]
    assert all(single for _name, single, _width in spectrum)
    assert len(pass_precisions) == res.n_passes


@pytest.mark.parametrize("chunks", [(100, -1), (-1, 50)], ids=["primal", "dual"])
def test_fit__float32_data_far_from_zero_recompute_the_first_block_with_the_next_in_float64(
    small, chunks, pass_precisions
):
    # float32 is refused once the statistics show a mean 1000 times the spread: the second pass
    # recomputes the first block in float64 together with the next one, and no pass is added
    X32 = (small.to_numpy() + 1000.0).astype(np.float32)
    res = mspca_dask.fit(
        da.from_array(X32, chunks=chunks), n_components=4, solver="randomized", location=None
    )
    first, redo = pass_precisions[0], pass_precisions[1]
    assert first[:2] == ("mspca-stats", True)
    assert redo[:2] == ("mspca-pass-2", False)
    assert not any(single for _name, single, _width in pass_precisions[1:])
    assert res.params["precision"] == "float64"
    n_float32 = len(pass_precisions)
    X64 = X32.astype(np.float64)
    res64 = mspca_dask.fit(
        da.from_array(X64, chunks=chunks), n_components=4, solver="randomized", location=None
    )
    start64, second64 = pass_precisions[n_float32], pass_precisions[n_float32 + 1]
    assert start64[:2] == ("mspca-stats", False)
    # the redo's block is the float64 start's first two blocks (the second with the low-rank
    # directions known after the first pass), so the basis and the pass count are the same
    assert redo[2] == start64[2] + second64[2]
    assert res.n_passes == res64.n_passes
    exact = mspca_dask.fit(X64, n_components=4, solver="exact", location=None)
    spikes = res.eigenvalues > res.mp_edge
    assert np.all(
        np.abs(res.eigenvalues - exact.eigenvalues)[spikes] <= res.eigenvalue_bounds[spikes]
    )
    np.testing.assert_array_equal(res.verdicts, exact.verdicts)


def test_fit__float32_products_that_overflow_are_recomputed_in_float64(pass_precisions):
    # 3e37 is finite in float32 but its square is not: the speculative float32 block overflows,
    # is no error, and is recomputed alone (no next block can come from an infinite product)
    X = np.random.default_rng(4).standard_normal((400, 60)).astype(np.float32)
    X[:20] *= np.float32(3e37)
    with pytest.warns(mspca_dask.ConvergenceWarning, match="Krylov space exhausted"):
        res = mspca_dask.fit(
            da.from_array(X, chunks=(20, -1)), 3, solver="randomized", location=None
        )
    first, redo = pass_precisions[0], pass_precisions[1]
    assert first[:2] == ("mspca-stats", True)
    assert redo == ("mspca-pass-2", False, first[2])
    assert res.params["precision"] == "float64"
    # as many passes as the same values stored in float64 (which overflow nothing)
    with pytest.warns(mspca_dask.ConvergenceWarning, match="Krylov space exhausted"):
        res64 = mspca_dask.fit(
            da.from_array(X.astype(np.float64), chunks=(20, -1)),
            3,
            solver="randomized",
            location=None,
        )
    assert res.n_passes <= res64.n_passes + 1


@pytest.fixture(scope="module")
def dominant_spike_float32() -> np.ndarray:
    """Centred float32 data whose top eigenvalue (~2 × 10⁴) is ~3 × 10⁵ times the threshold.

    Float32 finds its spectrum (its rounding is far below the noise) but cannot certify it
    to a tenth of ε: the genotype case (population structure far above everything else).
    """
    n, d = 4000, 300
    X = paper_setting(pi1=0.1, n_samples=n, n_features=d, random_state=3).to_numpy()
    rng = np.random.default_rng(0)
    u = rng.standard_normal(d)
    u /= np.linalg.norm(u)
    return (X + 150.0 * np.outer(rng.standard_normal(n), u)).astype(np.float32)


@pytest.mark.parametrize("chunks", [(1000, -1), (-1, 75)], ids=["primal", "dual"])
def test_fit__float32_passes_beyond_their_rounding_target_are_certified_by_one_float64_pass(
    dominant_spike_float32, chunks, pass_precisions
):
    X32 = dominant_spike_float32
    with warnings.catch_warnings():  # the spike spreads the feature variances (heteroscedastic)
        warnings.simplefilter("ignore", mspca_dask.errors.ModelFitWarning)
        res = mspca_dask.fit(
            da.from_array(X32, chunks=chunks), n_components=4, solver="randomized", location=None
        )
        ours = list(pass_precisions)
        exact = mspca_dask.fit(
            X32.astype(np.float64), n_components=4, solver="exact", location=None
        )
    assert res.params["precision"] == "float32-certified"
    assert "certified in float64" in res.summary()
    # the certificate: one float64 pass over the top K + 2 Ritz vectors, the last of the
    # spectrum's (the within-group step, when groups are found, comes after it)
    spectrum = [p for p in ours if not p[0].startswith("mspca-within")]
    *krylov, last = spectrum
    assert all(single for _name, single, _width in krylov)
    assert last == (f"mspca-pass-{len(spectrum)}", False, 4 + 2)
    assert len(ours) == res.n_passes
    spikes = res.candidate
    assert spikes.sum() >= 2
    err = np.abs(res.eigenvalues - exact.eigenvalues)[spikes]
    # float64 bounds, no float32 rounding estimate in them (that was ~0.1 here), and they hold
    assert np.all(res.eigenvalue_bounds[spikes] < 1e-3 * res.threshold)
    assert np.all(err <= res.eigenvalue_bounds[spikes])
    np.testing.assert_array_equal(res.verdicts, exact.verdicts)
    # the scores come from the certificate's own float64 image of the Ritz vectors (a stable
    # pair with displaced groups is reported on its within-group spike instead)
    for k in np.flatnonzero(spikes & ~(res.stable & res.displaced.any())):
        assert alignment(res.scores[:, k], exact.scores[:, k]) > 0.999
        np.testing.assert_allclose(
            np.linalg.norm(res.scores[:, k]) ** 2 / X32.shape[0], res.eigenvalues[k], rtol=1e-9
        )
    # displacements compare Ritz values of the same float32 products: their rounding cancels
    np.testing.assert_allclose(
        res.displacement[spikes], exact.displacement[spikes], atol=1e-3 * res.threshold
    )


@pytest.mark.parametrize("chunks", [(1000, -1), (-1, 75)], ids=["primal", "dual"])
def test_fit__float32_passes_with_an_estimated_location_are_certified_about_that_location(
    dominant_spike_float32, chunks, pass_precisions
):
    # location="auto": the certificate holds for the covariance about the location the fit
    # reports (the dual one's mean and image recomputed in the certificate's float64 pass)
    X32 = dominant_spike_float32
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mspca_dask.errors.MSPCAWarning)
        res = mspca_dask.fit(da.from_array(X32, chunks=chunks), n_components=4, solver="randomized")
    assert res.params["precision"] == "float32-certified"
    spectrum = [p for p in pass_precisions if not p[0].startswith("mspca-within")]
    assert not spectrum[-1][1]  # the certificate's pass is float64
    Xc = X32.astype(np.float64) - np.asarray(res.location)[None, :]
    exact = np.linalg.eigvalsh(Xc.T @ Xc / Xc.shape[0])[::-1][:4]
    spikes = res.candidate  # the dominant spike (the shifted group is centred away)
    assert spikes.any()
    err = np.abs(res.eigenvalues - exact)[spikes]
    assert np.all(err <= res.eigenvalue_bounds[spikes] + 1e-12 * exact[0])
    assert np.all(res.eigenvalue_bounds[spikes] < 1e-3 * res.threshold)


def test_fit__float64_store_computes_every_pass_in_float64(small, pass_precisions):
    res = mspca_dask.fit(
        da.from_array(small.to_numpy(), chunks=(100, -1)),
        n_components=4,
        solver="randomized",
        location=None,
    )
    assert res.params["precision"] == "float64"
    assert not any(single for _name, single, _width in pass_precisions)


def test_fit__exact_solver_keeps_float64_products_on_float32_data(small):
    X32 = small.to_numpy().astype(np.float32)
    res = mspca_dask.fit(
        da.from_array(X32, chunks=(100, -1)), n_components=4, solver="exact", location=None
    )
    assert res.params["precision"] == "float64"


@pytest.mark.statistical
@pytest.mark.parametrize("seed", [2, 3])
def test_fit__randomized_stops_on_certified_spikes_and_still_finds_a_weak_one(seed):
    # Spikes 2.4, 2.2 and a weak one at about 1.80, 0.07 above the edge 1.73 and just above
    # the candidate line (edge + 4 Tracy-Widom units, 0.034): the iteration stops without
    # certifying the bulk Ritz values, and not before the weak spike has climbed above the line.
    model = make_spiked_mixture(
        4000,
        400,
        covariance_spikes=(0.5, 1.2),
        mean_shift_weights=(0.1,),
        mean_shift_strengths=(1.0,),
        random_state=seed,
    )
    X = model.to_numpy()
    exact = mspca_dask.fit(X, n_components=6, solver="exact", location=None)
    res = mspca_dask.fit(X, n_components=6, solver="randomized", location=None)
    assert exact.candidate.sum() == 3
    np.testing.assert_array_equal(res.candidate, exact.candidate)
    np.testing.assert_array_equal(res.verdicts, exact.verdicts)
    spikes = res.eigenvalues > res.mp_edge
    tol = rmt.eigenvalue_tolerance(res.n_samples, res.noise_variance)
    assert np.all(res.eigenvalue_bounds[spikes] <= tol)
    assert np.all(
        np.abs(res.eigenvalues - exact.eigenvalues)[spikes] <= res.eigenvalue_bounds[spikes]
    )
    assert res.eigenvalue_bounds[~spikes].max() > tol  # the bulk was not waited for


@pytest.mark.statistical
@pytest.mark.xfail(
    strict=True,
    reason="the 15 % cluster, 2.8 noise SDs out, makes a shoulder, not a mode, along its "
    "shift; the count's step holds a group of one mode of any shape, so the cluster stays "
    "among the inliers, its shift a mixed pair and the second covariance component off its "
    "spike (measured: 8 of the 10 fits fail)",
    raises=AssertionError,
)
def test_fit__two_clusters_beside_two_spikes_leave_both_spikes_as_components():
    # clusters of 10 % and 15 % beside two spikes: both clusters are mean shifts and the two
    # spikes the two covariance components; the power target (at most 5 % failures) allows
    # no failure in 10 fits
    c = 0.5
    failed = []
    for seed in range(10):
        model = make_spiked_mixture(
            800,
            400,
            covariance_spikes=(3 * np.sqrt(c), 2 * np.sqrt(c)),
            mean_shift_weights=(0.1, 0.15),
            mean_shift_strengths=(5 * np.sqrt(c), 4 * np.sqrt(c)),
            random_state=seed,
        )
        res = mspca_dask.fit(model.to_numpy(), n_components=8)
        clean = model.clean_top_eigenvectors(2)
        if res.stable.sum() != 2 or any(
            max(alignment(res.components[i], clean[:, j]) for i in range(2)) <= 0.9
            for j in range(2)
        ):
            failed.append(seed)
    assert not failed, failed


def _paper_setting_found(pi1: float, seed: int) -> bool:
    """Whether the fit flags the cluster's eigenpair as a mean shift and keeps the clean PC."""
    model = paper_setting(pi1=pi1, random_state=seed)
    res = mspca_dask.fit(model.to_numpy(), n_components=10, random_state=0)
    shift = model.mean_shift_vectors[:, 0]
    along = int(np.argmax([alignment(v, shift) for v in res.eigenvectors]))
    truth = model.clean_top_eigenvectors(1)[:, 0]
    return (
        res.verdicts[along] == "mean shift"
        and res.n_stable >= 1
        and alignment(res.components[0], truth) > 0.95
    )


@pytest.mark.statistical
@pytest.mark.parametrize("pi1", [0.05, 0.10, 0.15])
def test_fit__paper_setting_flags_the_mean_shift_and_keeps_the_covariance_pc(pi1):
    # power in the paper's experiment (n = 1000, d = 900, weights up to 15 %): the cluster's
    # eigenpair is a mean shift and the first stable component is the clean PC, every time
    assert all(_paper_setting_found(pi1, seed) for seed in range(4))


@pytest.mark.statistical
def test_fit__paper_setting_at_twenty_percent_is_found_in_at_least_half_the_fits():
    # At π₁ = 20 % the cluster's score-space marginal is close to one skewed mode (about 3.6
    # within-group SDs from the rest), which a unimodal twin of the data's own kind can match:
    # the group test's power there is below one, and this pins it at one half or more.
    found = sum(_paper_setting_found(0.20, seed) for seed in range(8))
    assert found >= 4, f"{found} of 8"


@pytest.mark.statistical
def test_fit__the_verdict_does_not_rest_on_the_knockoffs_a_sample_mean_location_blinds():
    # Centring by the sample mean makes the mean-shift membership orthogonal to the
    # knockoff's, so the mean-shift eigenvalue no longer moves (the documented failure of
    # the knockoff displacement under mean centring).  The verdict tests the groups found in
    # score space, which any centre leaves displaced: the pair is flagged either way.
    model = paper_setting(pi1=0.05, random_state=0)
    X = model.to_numpy()
    shift = model.mean_shift_vectors[:, 0]
    centred = mspca_dask.fit(X, n_components=5, location=X.mean(axis=0), solver="exact")
    top = int(np.argmax([alignment(v, shift) for v in centred.eigenvectors]))
    assert centred.displacement[top] < centred.threshold
    assert centred.verdicts[top] == "mean shift"
    auto = mspca_dask.fit(X, n_components=5, solver="exact")
    top = int(np.argmax([alignment(v, shift) for v in auto.eigenvectors]))
    assert auto.verdicts[top] == "mean shift"
    assert auto.displacement[top] > 2 * auto.threshold
    # the same samples are displaced whichever centre the scores were taken about
    np.testing.assert_array_equal(centred.displaced, auto.displaced)


@pytest.mark.statistical
def test_fit__verdict_of_the_last_pair_does_not_depend_on_n_components():
    """Each knockoff adds a spike of its own that pushes an invariant K-th pair to place K+1.

    Matched against only the top K of the knockoff spectrum, the K-th covariance spike
    (ℓ = 3, eigenvalue ≈ 4.5) found no partner and was called a mean shift at K = 3 but
    stable at K = 5; with K + 2 knockoff pairs the match agrees, and the verdict, which
    tests the groups in the candidates' score space, agrees whatever K.
    """
    m = make_spiked_mixture(
        600,
        300,
        covariance_spikes=(6.0, 3.0),
        mean_shift_weights=(0.1,),
        mean_shift_strengths=(8.0,),
        random_state=2,
    )
    X = m.to_numpy()
    three = mspca_dask.fit(X, n_components=3, random_state=2)
    five = mspca_dask.fit(X, n_components=5, random_state=2)
    assert three.verdicts.tolist() == five.verdicts[:3].tolist()
    assert three.stable.tolist() == [False, True, True]
    assert three.knockoff_eigenvalues_all.shape == (5, 5)
    # the partner of the third pair sits below the knockoff's third place in some knockoff
    assert np.any(three.knockoff_match[:, 2] >= 3)
    # and it is the second covariance direction
    assert alignment(three.eigenvectors[2], m.clean_top_eigenvectors(2)[:, 1]) > 0.9


@pytest.mark.statistical
def test_fit__real_data_without_contamination_and_no_bulk_flag_nothing() -> None:
    # scikit-learn's digits, class 0: no contamination, and every computed eigenvalue above
    # the edge (real data off the spiked model, no bulk among the top ten).  The group test
    # finds no displaced group, and every pair is a covariance pair.
    from sklearn.datasets import load_digits

    digits = load_digits()
    X = digits.data[digits.target == 0]
    X = X[:, X.std(axis=0) > 0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mspca_dask.errors.MSPCAWarning)
        res = mspca_dask.fit(X, n_components=10, random_state=0)
    assert res.candidate.all()
    assert res.n_groups == 1
    assert (res.verdicts == "covariance").all(), res.reasons[res.verdicts != "covariance"]


@pytest.mark.statistical
def test_fit__an_admixed_cline_between_two_shifted_sources_is_a_mean_shift_not_a_mixed_spike():
    # 600 inliers with a covariance spike, two sources 30 units away (60 each) and 120 samples
    # admixed between them at random proportions, as in an admixed American cohort without
    # a reference.  Along the axis between the sources the admixed samples spread along the
    # cline, which pooled over the groups would read as a spike; a group spread along its own
    # shift is left out of the within-group covariance, the inliers' own variance along the
    # axis is the noise's, so the axis is a mean shift, not "mixed".
    rng = np.random.default_rng(0)
    n_inliers, n_source, n_admixed, d = 600, 60, 120, 300
    X = rng.standard_normal((n_inliers + 2 * n_source + n_admixed, d))
    X[:, 0] += math.sqrt(6.0) * rng.standard_normal(X.shape[0])  # the covariance spike
    source_a, source_b = np.zeros(d), np.zeros(d)
    source_a[[1, 2]] = 30 / math.sqrt(2), 30 / math.sqrt(2)
    source_b[[1, 2]] = 30 / math.sqrt(2), -30 / math.sqrt(2)
    proportion = rng.uniform(0.1, 0.9, (n_admixed, 1))
    X[n_inliers : n_inliers + n_source] += source_a
    X[n_inliers + n_source : n_inliers + 2 * n_source] += source_b
    X[n_inliers + 2 * n_source :] += proportion * source_a + (1 - proportion) * source_b
    res = mspca_dask.fit(X, n_components=5, random_state=0)
    between_sources = np.abs(res.eigenvectors[:, 2])  # |cos| with the axis between them
    covariance = np.abs(res.eigenvectors[:, 0])
    axis, spike = int(np.argmax(between_sources)), int(np.argmax(covariance))
    assert between_sources[axis] > 0.99 and covariance[spike] > 0.9
    assert res.verdicts[axis] == "mean shift", res.reasons[axis]
    assert res.verdicts[spike] == "covariance", res.reasons[spike]
    assert res.stable.tolist().count(True) == 1


@pytest.mark.statistical
@pytest.mark.xfail(
    strict=True,
    reason="the twin null assumes the statistic sees no structure finer than the twins' "
    "smoothing (the critical bandwidth, at least a quarter of Silverman's rule); the pole of a "
    "χ²₁ factor scored almost without noise is finer, the mixture fits it with narrow "
    "components in the data and not in its twins, so the factor is split into groups",
)
def test_fit__a_strong_skewed_covariance_factor_is_not_split_into_groups():
    # one χ²₁ factor of variance 1000 σ²: its scores are the factor's own skewed distribution
    # with a noise of 3 % of its SD; a unimodal factor, so one group and a covariance verdict
    rng = np.random.default_rng(11)
    n, d = 4000, 200
    factor = (rng.standard_normal(n) ** 2 - 1.0) / math.sqrt(2.0)
    X = rng.standard_normal((n, d))
    X[:, 0] += math.sqrt(1000.0) * factor
    res = mspca_dask.fit(X, n_components=5, random_state=0)
    assert res.n_groups == 1, res.group_p_value
    assert res.verdicts[0] == "covariance", res.reasons[0]


@pytest.mark.statistical
def test_fit__a_skewed_covariance_spike_beside_clusters_stays_a_covariance_component():
    # an exponential factor of strength 2 beside clusters of 8 % and 5 %: the clusters are
    # mean shifts, the factor the one covariance component; the power target (at most 5 %
    # failures) allows no failure in 6 fits
    n, d = 1500, 500
    failed = []
    for seed in range(6):
        m = make_spiked_mixture(
            n,
            d,
            covariance_spikes=(2.0,),
            mean_shift_weights=(0.08, 0.05),
            spike_distribution="exponential",
            random_state=seed,
        )
        res = mspca_dask.fit(m.to_numpy(), random_state=0)
        u = np.asarray(m.clean_top_eigenvectors(1))[:, 0]
        if not res.stable.any() or abs(res.components[0] @ u) < 0.5:
            failed.append(seed)
    assert not failed, failed


@pytest.mark.statistical
def test_fit__reference_a_slight_real_shift_along_a_covariance_pc_is_mixed_and_kept():
    # 20 % of the samples sit 0.6 noise sd off the reference along a covariance spike
    # (variance 4; 1.4 % of it between reference and rest, yet significant at this n) and
    # 6 sd off it along another direction: the first is the reference's own spike with a
    # shift ("mixed", kept), the second a mean shift
    rng = np.random.default_rng(7)
    n, d = 20_000, 100
    u, v = np.eye(d)[0], np.eye(d)[1]
    X = rng.standard_normal((n, d))
    X[:, 0] *= 2.0
    rest = np.arange(n) >= int(0.8 * n)
    X[rest] += 0.6 * u + 6.0 * v
    ref = ~rest
    res = mspca_dask.fit(
        X, n_components=3, location=X[ref].mean(axis=0), reference_samples=ref, solver="exact"
    )
    along = np.abs(res.eigenvectors @ np.c_[u, v])  # (K, 2)
    spike, shifted = int(np.argmax(along[:, 0])), int(np.argmax(along[:, 1]))
    assert res.verdicts[shifted] == "mean shift", res.reasons[shifted]
    assert res.verdicts[spike] == "mixed", res.reasons[spike]
    assert res.shift_z[spike] > 5 and res.stable[spike]
    # the reference rows are the inliers, and the kept component is the spike without the shift
    assert not res.displaced[ref].any()
    assert alignment(res.components[0], u) > 0.99


@pytest.mark.statistical
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_fit__reference_with_more_features_than_samples_flags_nothing_without_contamination(
    seed,
):
    # c = 3, every other sample the reference, no contamination: the rest's offset from the
    # reference's mean (the sampling error of the two means, squared norm ~ tr(S)(1/200 +
    # 1/200) = 12) forms an eigenvector of its own, which a test of a fixed direction would
    # read as a shift.  The reference rows are pinned in the group test's data and twins.
    model = make_spiked_mixture(
        400,
        1200,
        covariance_spikes=(3 * np.sqrt(3), 2 * np.sqrt(3)),
        mean_shift_weights=(),
        random_state=seed,
    )
    X = model.to_numpy()
    ref = np.zeros(model.n_samples, dtype=bool)
    ref[::2] = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mspca_dask.errors.MSPCAWarning)
        res = mspca_dask.fit(
            X,
            n_components=10,
            random_state=seed,
            scheduler="sync",
            reference_samples=ref,
            location=X[ref].mean(axis=0),
        )
    assert not np.any(res.candidate & ~res.stable), res.reasons[res.candidate]
    # both covariance spikes lie in the span of the stable components
    spikes = model.clean_top_eigenvectors(2)
    assert np.all(np.linalg.norm(res.components @ spikes, axis=0) > 0.9)


@pytest.mark.parametrize("seed", [0, 1])
def test_fit__a_spike_lifted_by_a_shift_does_not_lead_the_components(seed):
    # u₂'s spike (variance 3) is weaker than u₁'s (4), but a 10 % group shifted along u₂
    # lifts that eigenvalue above u₁'s: the components follow the variance within the
    # groups, so u₁ comes first, and the stored variances say why
    X, U = weaker_spike_lifted(seed)
    res = mspca_dask.fit(X, random_state=0)
    assert res.verdicts[0] == "mixed" and abs(res.eigenvectors[0] @ U[:, 1]) > 0.9
    assert res.components.shape[0] == 2
    assert abs(res.components[0] @ U[:, 0]) > 0.9 and abs(res.components[1] @ U[:, 1]) > 0.9
    variances = np.asarray(res.component_variances)
    stable = np.asarray(res.stable)
    assert np.all(np.isnan(variances[~stable])) and np.all(np.isfinite(variances[stable]))
    assert np.all(np.diff(variances[res.component_index]) <= 0)
    assert 3.5 < variances[res.component_index[0]] < 4.5


@pytest.mark.statistical
def test_fit__reference_populations_on_both_sides_along_one_axis_only_are_a_mean_shift():
    # Populations around a European reference, in miniature: along e1 two populations sit on
    # opposite sides of the reference (400 at +5, 200 at -10 noise sd), so the outsiders'
    # mean along it is 0, and no other direction separates them.  The covariance spike along
    # e0 (variance 9) is shared by everyone and stays stable.
    rng = np.random.default_rng(17)
    n, d = 2000, 200
    X = rng.standard_normal((n, d))
    X[:, 0] *= 3.0
    X[1400:1800, 1] += 5.0
    X[1800:, 1] -= 10.0
    ref = np.arange(n) < 1400
    res = mspca_dask.fit(
        X,
        n_components=3,
        location=X[ref].mean(axis=0),
        reference_samples=ref,
        solver="exact",
        scheduler="sync",
    )
    along = np.abs(res.eigenvectors[:, :2])  # |cos| with e0, e1 per pair
    axis, spike = int(np.argmax(along[:, 1])), int(np.argmax(along[:, 0]))
    assert res.verdicts[axis] == "mean shift" and res.shift_z[axis] > 30, res.reasons[axis]
    assert res.verdicts[spike] == "covariance", res.reasons[spike]
    # the two populations are groups of their own, and no reference row is displaced
    assert res.n_groups >= 3 and not res.displaced[ref].any()
