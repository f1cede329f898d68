"""MeanShiftPCA: scikit-learn conformance and behaviour on the paper's mixture."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils.estimator_checks import parametrize_with_checks

import mspca_dask
from mspca_dask.estimator import MeanShiftPCA
from mspca_dask.testing import alignment, paper_setting


# scikit-learn's checks feed pure noise: no eigenvalue clears the Marchenko–Pastur edge, so
# "no stable component" (with its NoSpikeWarning) is the honest answer there.
@pytest.mark.filterwarnings("ignore::mspca_dask.NoSpikeWarning")
@parametrize_with_checks([MeanShiftPCA(n_components=2, solver="exact")])
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


@pytest.fixture(scope="module")
def paper():
    model = paper_setting(pi1=0.1, random_state=5)
    return model, model.to_numpy()


def test_meanshiftpca__recovers_the_clean_covariance_pc(paper):
    model, X = paper
    est = MeanShiftPCA(n_components=6).fit(X)
    assert est.n_components_ == 1
    assert alignment(est.components_[0], model.clean_top_eigenvectors(1)[:, 0]) > 0.95
    assert est.mean_shift_components_.shape == (1, X.shape[1])
    assert alignment(est.mean_shift_components_[0], model.mean_shift_vectors[:, 0]) > 0.8
    np.testing.assert_allclose(est.transform(X), est.result_.transform(X), atol=1e-10)
    np.testing.assert_allclose(est.fit_transform(X), est.transform(X), atol=1e-8)
    assert est.n_features_in_ == X.shape[1]
    assert est.explained_variance_.shape == (1,)


def test_meanshiftpca__dask_input_stays_lazy(paper):
    _, X = paper
    Xd = da.from_array(X, chunks=(250, -1))
    est = MeanShiftPCA(n_components=4, solver="exact").fit(Xd)
    out = est.transform(Xd)
    assert isinstance(out, da.Array)
    np.testing.assert_allclose(out.compute(), est.transform(X), atol=1e-10)


def test_meanshiftpca__pipeline_clone_and_params(paper):
    _, X = paper
    est = MeanShiftPCA(n_components=4, threshold_scale=2.5)
    assert clone(est).get_params()["threshold_scale"] == 2.5
    est.set_params(n_knockoffs=3)
    assert est.get_params()["n_knockoffs"] == 3
    pipe = make_pipeline(FunctionTransformer(lambda Z: 2 * Z), est).fit(X)
    assert pipe.transform(X[:7]).shape == (7, est.n_components_)


def test_meanshiftpca__rejects_too_many_components():
    X = np.random.default_rng(0).standard_normal((20, 5))
    with pytest.raises(
        ValueError, match=r"n_components=6 must be between 1 and min\(n_samples, n_features\)=5"
    ):
        MeanShiftPCA(n_components=6).fit(X)


def test_meanshiftpca__no_spike_gives_zero_components():
    X = np.random.default_rng(0).standard_normal((300, 50))
    with pytest.warns(mspca_dask.NoSpikeWarning, match="no eigenvalue"):
        est = MeanShiftPCA(n_components=3).fit(X)
    assert est.n_components_ == 0
    assert est.transform(X).shape == (300, 0)
