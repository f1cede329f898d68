from __future__ import annotations

import os

import matplotlib
import numpy as np
import pytest
from hypothesis import settings

matplotlib.use("Agg")
os.environ.setdefault("OMP_NUM_THREADS", "1")

# No test may depend on wall-clock time: Hypothesis's default 200 ms deadline per example failed
# test_spike_inverse__inverts_forward_above_threshold on a loaded 2-core machine (423 ms, then
# "Flaky").  Every property test runs without a deadline.
settings.register_profile("mspca", deadline=None)
settings.load_profile("mspca")


@pytest.fixture(scope="session")
def paper_model():
    from mspca_dask.testing import paper_setting

    return paper_setting(pi1=0.1, n_samples=600, n_features=300, random_state=7)


class _NoisierClusters:
    """A mixture whose shifted samples have ``factor`` times the others' spread (their clean
    rows scaled, their shifts as they are)."""

    def __init__(self, model, factor):
        self.model, self.factor = model, factor
        self.membership = np.asarray(model.membership)

    def rows(self, start, stop):
        clean = self.model.clean_rows(start, stop)
        shift = self.model.rows(start, stop) - clean
        scale = np.where(self.membership[start:stop] > 0, self.factor, 1.0)[:, None]
        return clean * scale + shift

    def to_numpy(self):
        return self.rows(0, len(self.membership))


@pytest.fixture(scope="session")
def noisier_clusters():
    """``noisier_clusters(model, factor)``: ``model`` with its clusters ``factor`` times as
    spread as its inliers (``rows``, ``to_numpy`` and ``membership``, as a model has)."""
    return _NoisierClusters
