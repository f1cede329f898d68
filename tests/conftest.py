from __future__ import annotations

import os

import matplotlib
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
