"""Tests of the scikit-learn estimator :class:`mspca_dask.MeanShiftPCA`."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.estimator_checks import parametrize_with_checks

import mspca_dask
from mspca_dask import MeanShiftPCA, NoSpikeWarning
from mspca_dask._params import PARAMETERS
from mspca_dask.testing import alignment, paper_setting

# ----------------------------------------------------------------------------- sklearn checks


# scikit-learn's checks fit on small random data (uniform noise, blobs): there is no spike
# above the Marchenko-Pastur edge, so the fit warns NoSpikeWarning (on purpose: the user is
# told) and keeps 0 components, a documented outcome.  The warning is ignored here only
# because our pytest configuration turns every warning into an error; nothing is marked as
# an expected failure.  Some checks fit 2-10 features with a spike above the edge: the fit
# then warns ModelFitWarning ("too small" for the random-matrix approximations), or, when
# that spike is judged a mean shift, NoStableComponentWarning (0 components kept): also on
# purpose, and ignored here for the same reason.
@pytest.mark.filterwarnings("ignore::mspca_dask.NoSpikeWarning")
@pytest.mark.filterwarnings("ignore::mspca_dask.ModelFitWarning")
@pytest.mark.filterwarnings("ignore::mspca_dask.NoStableComponentWarning")
@parametrize_with_checks(
    [
        MeanShiftPCA(n_components=2),
        MeanShiftPCA(n_components=1, location=None, solver="exact"),
        MeanShiftPCA(n_components=2, solver="randomized", knockoff_weight=0.5, n_knockoffs=2),
    ]
)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def paper():
    model = paper_setting(pi1=0.1, random_state=5)
    return model, model.to_numpy()


@pytest.fixture(scope="module")
def fitted(paper):
    """The estimator with its defaults, fitted on the paper's setting (1000 x 900)."""
    _, X = paper
    return MeanShiftPCA().fit(X)


@pytest.fixture(scope="module")
def small():
    """A smaller draw of the paper's mixture (300 x 50): spikes above the edge, quick fits."""
    return paper_setting(pi1=0.1, n_samples=300, n_features=50, random_state=5).to_numpy()


def _no_compute(*args, **kwargs):
    raise AssertionError("the Dask graph was computed")


# ----------------------------------------------------------------------------- the paper


def test_defaults_recover_clean_covariance_pc(paper, fitted):
    model, X = paper
    est = fitted
    truth = model.clean_top_eigenvectors(1)[:, 0]
    assert est.n_components_ >= 1
    assert alignment(est.components_[0], truth) > 0.95
    assert est.components_.shape == (est.n_components_, 900)
    assert est.explained_variance_.shape == (est.n_components_,)
    assert est.eigenvalues_.shape == (10,)
    assert est.stable_.dtype == bool and est.stable_.shape == (10,)
    assert int(est.stable_.sum()) == est.n_components_
    assert_array_equal(est.explained_variance_, est.eigenvalues_[est.stable_])
    assert_array_equal(est.components_, est.result_.components)
    assert_array_equal(est.mean_shift_components_, est.result_.mean_shift_components)
    # the mean-shift cluster is found and kept apart
    assert est.mean_shift_components_.shape[0] >= 1
    assert est.n_features_in_ == 900
    assert not hasattr(est, "feature_names_in_")
    assert est.mean_.shape == (900,)
    assert_array_equal(est.mean_, est.result_.location)
    assert est.noise_variance_ == pytest.approx(1.0, rel=0.1)


def test_transform_matches_result(paper, fitted):
    _, X = paper
    est = fitted
    Z = est.transform(X)
    assert isinstance(Z, np.ndarray)
    assert Z.shape == (1000, est.n_components_)
    assert_allclose(Z, est.result_.transform(X), rtol=1e-10, atol=1e-10)
    assert_allclose(Z, (X - est.mean_) @ est.components_.T, rtol=1e-10, atol=1e-10)


def test_fit_transform_equals_fit_then_transform(paper, fitted, small):
    _, X = paper
    # fit_transform returns the scores of the fit itself (no second pass)
    scores = np.asarray(fitted.result_.scores)[:, fitted.stable_]
    assert_allclose(scores, fitted.transform(X), rtol=1e-8, atol=1e-8)
    est = MeanShiftPCA(n_components=2, location=None)
    Z = est.fit_transform(small)
    assert Z.shape == (300, est.n_components_) and est.n_components_ >= 1
    assert_allclose(Z, est.transform(small), rtol=1e-8, atol=1e-8)


def test_feature_names_out(fitted):
    names = fitted.get_feature_names_out()
    assert names.tolist() == [f"meanshiftpca{i}" for i in range(fitted.n_components_)]


# ----------------------------------------------------------------------------- sklearn API


def test_pipeline_and_set_params_through_it(small):
    ref = MeanShiftPCA(n_components=2, location=None).fit(small)
    assert ref.n_components_ >= 1
    pipe = make_pipeline(MeanShiftPCA(n_components=4), StandardScaler())
    assert pipe.get_params()["meanshiftpca__n_components"] == 4
    pipe.set_params(meanshiftpca__n_components=2, meanshiftpca__location=None)
    Z = pipe.fit_transform(small)
    est = pipe.named_steps["meanshiftpca"]
    assert_allclose(est.components_, ref.components_)
    expected = StandardScaler().fit_transform(ref.transform(small))
    assert_allclose(Z, expected, rtol=1e-8, atol=1e-8)
    assert_allclose(pipe.transform(small[:7]), expected[:7], rtol=1e-8, atol=1e-8)
    assert pipe.get_feature_names_out().tolist() == [
        f"meanshiftpca{i}" for i in range(ref.n_components_)
    ]


def test_clone_is_unfitted_and_refits_identically(fitted, small):
    twin = clone(fitted)
    assert twin.get_params() == MeanShiftPCA().get_params()
    assert not hasattr(twin, "components_") and not hasattr(twin, "result_")
    with pytest.raises(NotFittedError, match="not fitted yet"):
        twin.transform(small)
    est = MeanShiftPCA(n_components=2, location=None).fit(small)
    twin = clone(est).fit(small)
    assert_array_equal(twin.components_, est.components_)
    assert_array_equal(twin.eigenvalues_, est.eigenvalues_)
    assert_array_equal(twin.stable_, est.stable_)


def test_get_params_set_params():
    est = MeanShiftPCA()
    assert est.get_params() == {
        "n_components": 10,
        "location": "auto",
        "solver": "auto",
        "n_knockoffs": 5,
        "knockoff_weight": 1.0,
        "knockoff_factor": 2.0,
        "threshold_scale": 3.0,
        "min_overlap": 0.5,
        "min_shift_share": 0.05,
        "edge_margin": 4.0,
        "tol": None,
        "max_passes": 40,
        "oversampling": 10,
        "random_state": 0,
        "scheduler": None,
    }
    assert est.set_params(n_components=3, location=None, solver="exact") is est
    assert (est.n_components, est.location, est.solver) == (3, None, "exact")
    with pytest.raises(ValueError, match="Invalid parameter 'bogus'"):
        est.set_params(bogus=1)


def test_every_tuning_parameter_reaches_fit(small, monkeypatch):
    calls = []
    real_fit = mspca_dask.api.fit

    def spy(X, **kwargs):
        calls.append(kwargs)
        return real_fit(X, **kwargs)

    monkeypatch.setattr(mspca_dask.api, "fit", spy)
    tuning = {"edge_margin": 2.5, "tol": 1e-3, "oversampling": 4, "max_passes": 30}
    est = MeanShiftPCA(n_components=2, solver="randomized", **tuning).fit(small)
    (kwargs,) = calls
    assert set(PARAMETERS) <= set(kwargs)
    assert {k: kwargs[k] for k in tuning} == tuning
    assert {k: est.result_.params[k] for k in tuning} == tuning


def test_mspca_dask_exposes_the_estimator():
    assert mspca_dask.MeanShiftPCA is MeanShiftPCA


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"n_components": 0}, "'n_components' parameter of MeanShiftPCA must be"),
        ({"solver": "lanczos"}, "'solver' parameter of MeanShiftPCA must be"),
        ({"location": "median"}, "'location' parameter of MeanShiftPCA must be"),
        ({"knockoff_weight": 1.5}, "'knockoff_weight' parameter of MeanShiftPCA must be"),
        ({"min_overlap": 0.0}, "'min_overlap' parameter of MeanShiftPCA must be"),
        ({"max_passes": 1}, "'max_passes' parameter of MeanShiftPCA must be"),
        ({"edge_margin": -0.5}, "'edge_margin' parameter of MeanShiftPCA must be"),
        ({"tol": 0.0}, "'tol' parameter of MeanShiftPCA must be"),
        ({"oversampling": -1}, "'oversampling' parameter of MeanShiftPCA must be"),
        ({"oversampling": 2.5}, "'oversampling' parameter of MeanShiftPCA must be"),
        ({"random_state": -1}, "'random_state' parameter of MeanShiftPCA must be"),
        ({"scheduler": 3}, "'scheduler' parameter of MeanShiftPCA must be"),
    ],
)
def test_invalid_parameters(params, match):
    X = np.random.default_rng(0).standard_normal((20, 4))
    with pytest.raises(InvalidParameterError, match=match):
        MeanShiftPCA(**params).fit(X)


# ----------------------------------------------------------------------------- dask input


def test_dask_input_is_not_materialised(small):
    ref = MeanShiftPCA(n_components=2, location=None).fit(small)
    Xd = da.from_array(small, chunks=(100, 25))
    est = MeanShiftPCA(n_components=2, location=None).fit(Xd)
    assert est.n_features_in_ == 50
    assert not hasattr(est, "feature_names_in_")
    assert_array_equal(est.stable_, ref.stable_)
    assert_allclose(est.components_, ref.components_, rtol=1e-8, atol=1e-8)
    with dask.config.set(scheduler=_no_compute):
        Z = est.transform(Xd)
    assert isinstance(Z, da.Array)
    assert Z.shape == (300, est.n_components_)
    assert Z.chunks[0] == Xd.chunks[0]
    assert_allclose(Z.compute(), ref.transform(small), rtol=1e-8, atol=1e-8)
    Zf = est.fit_transform(Xd)
    assert isinstance(Zf, da.Array) and Zf.chunks[0] == Xd.chunks[0]
    assert_allclose(Zf.compute(), ref.transform(small), rtol=1e-8, atol=1e-8)


def test_dask_input_is_checked_on_metadata():
    est = MeanShiftPCA(n_components=1, location=None)
    with pytest.raises(ValueError, match="Expected a 2D array"):
        est.fit(da.zeros(10, chunks=5))
    with pytest.raises(ValueError, match="unknown chunk sizes"):
        est.fit(da.ones((10, 3), chunks=5)[da.arange(10, chunks=5) > 3])
    with pytest.raises(ValueError, match="expected real numbers"):
        est.fit(da.from_array(np.array([["a", "b"]] * 4)))
    X = np.random.default_rng(1).standard_normal((30, 3))
    with pytest.warns(NoSpikeWarning, match="no eigenvalue is clearly above"):
        est.fit(X)
    with pytest.raises(ValueError, match="X has 4 features, but MeanShiftPCA is expecting 3"):
        est.transform(da.zeros((5, 4)))


# ----------------------------------------------------------------------------- edge cases


def test_no_spike_gives_zero_components():
    X = np.random.default_rng(2).standard_normal((200, 20))
    est = MeanShiftPCA(n_components=3)
    with pytest.warns(NoSpikeWarning, match="no stable components"):
        est.fit(X)
    assert est.n_components_ == 0
    assert est.components_.shape == (0, 20)
    assert est.explained_variance_.shape == (0,)
    assert est.transform(X).shape == (200, 0)
    assert est.get_feature_names_out().shape == (0,)
    Xd = da.from_array(X, chunks=(50, 20))
    with pytest.warns(NoSpikeWarning, match="no stable components"):
        Zd = est.fit_transform(Xd)
    assert isinstance(Zd, da.Array) and Zd.compute().shape == (200, 0)


def test_n_components_larger_than_data_is_an_error():
    X = np.random.default_rng(3).standard_normal((6, 4))
    with pytest.raises(
        ValueError, match=r"n_components=5 must be between 1 and min\(n_samples, n_features\)=4"
    ):
        MeanShiftPCA(n_components=5).fit(X)


def test_constant_feature_is_refused():
    X = np.random.default_rng(4).standard_normal((50, 4))
    X[:, 2] = 7.0
    with pytest.raises(ValueError, match=r"constant across samples \(indices 2\)"):
        MeanShiftPCA(n_components=2).fit(X)


def test_non_finite_and_sparse_are_refused():
    X = np.random.default_rng(5).standard_normal((50, 4))
    X[3, 1] = np.nan
    with pytest.raises(ValueError, match="Input X contains NaN"):
        MeanShiftPCA(n_components=2).fit(X)
    sp = pytest.importorskip("scipy.sparse")
    with pytest.raises(TypeError, match="Sparse data was passed"):
        MeanShiftPCA(n_components=2).fit(sp.random(50, 4, density=0.5, format="csr"))


def test_location_none_and_given(small):
    X = small
    est = MeanShiftPCA(n_components=2, location=None).fit(X)
    assert_array_equal(est.mean_, np.zeros(50))
    assert_allclose(est.transform(X), X @ est.components_.T)
    loc = np.full(50, 0.25)
    est = MeanShiftPCA(n_components=2, location=loc).fit(X)
    assert_array_equal(est.mean_, loc)
    assert_allclose(est.transform(X), (X - loc) @ est.components_.T)


def test_random_state_instance_and_feature_names(small):
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(small, columns=[f"f{i}" for i in range(50)])
    est = MeanShiftPCA(n_components=2, random_state=np.random.RandomState(0)).fit(df)
    assert est.feature_names_in_.tolist() == list(df.columns)
    assert est.transform(df).shape == (300, est.n_components_)
    with pytest.raises(ValueError, match="Feature names must be in the same order"):
        est.transform(df[df.columns[::-1]])


def test_mean_shift_pca__warns_when_every_spike_is_a_mean_shift():
    from mspca_dask import NoStableComponentWarning
    from mspca_dask.testing import make_spiked_mixture

    X = make_spiked_mixture(
        600, 300, covariance_spikes=(), mean_shift_weights=(0.1,), random_state=4
    ).to_numpy()
    est = MeanShiftPCA(n_components=3, random_state=0)
    with pytest.warns(NoStableComponentWarning, match="kept 0 components: all 1 spike"):
        est.fit(X)
    assert est.n_components_ == 0 and est.mean_shift_components_.shape == (1, 300)
