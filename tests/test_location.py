"""Robust inlier weights in score space (mspca_dask.location)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.covariance import MinCovDet

from mspca_dask.location import MCD_MAX_SAMPLES, robust_inlier_weights


def shifted_scores(n: int, k: int = 2, frac: float = 0.1, shift: float = 8.0, seed: int = 0):
    rng = np.random.default_rng(seed)
    T = rng.standard_normal((n, k))
    m = int(frac * n)
    T[:m, 0] += shift
    return T, m


@pytest.mark.parametrize("n", [300, 3 * MCD_MAX_SAMPLES])
def test_robust_inlier_weights__drop_the_shifted_cluster_keep_the_inliers(n):
    T, m = shifted_scores(n)
    w = robust_inlier_weights(T)
    assert set(np.unique(w)) <= {0.0, 1.0}
    assert w[:m].sum() == 0  # every shifted sample is out
    assert 0.95 < w[m:].mean() < 0.995  # about the 97.5 % chi-square quantile of the inliers


def test_robust_inlier_weights__large_n_fits_the_mcd_to_a_seeded_subsample(monkeypatch):
    seen: list[int] = []
    fit = MinCovDet.fit

    def recording_fit(self, X, y=None):
        seen.append(len(X))
        return fit(self, X, y)

    monkeypatch.setattr(MinCovDet, "fit", recording_fit)
    T, m = shifted_scores(5 * MCD_MAX_SAMPLES, k=3, seed=1)
    a = robust_inlier_weights(T)
    b = robust_inlier_weights(T)
    assert seen == [MCD_MAX_SAMPLES, MCD_MAX_SAMPLES]
    np.testing.assert_array_equal(a, b)  # reproducible
    assert a.shape == (len(T),) and a[:m].sum() == 0
    # the subsampled fit agrees with the full fit on nearly every sample
    monkeypatch.setattr("mspca_dask.location.MCD_MAX_SAMPLES", len(T))
    full = robust_inlier_weights(T)
    assert np.mean(a != full) < 0.01


def test_robust_inlier_weights__never_keep_fewer_than_half():
    rng = np.random.default_rng(3)
    T = rng.standard_normal((200, 2)) * np.r_[np.ones(100), 50 * np.ones(100)][:, None]
    w = robust_inlier_weights(T, quantile=0.5)
    assert w.sum() >= 100


def test_robust_inlier_weights__too_few_samples_are_all_inliers():
    np.testing.assert_array_equal(robust_inlier_weights(np.ones((3, 2))), np.ones(3))
