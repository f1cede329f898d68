from __future__ import annotations

import os

import matplotlib
import pytest

matplotlib.use("Agg")
os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def paper_model():
    from mspca_dask.testing import paper_setting

    return paper_setting(pi1=0.1, n_samples=600, n_features=300, random_state=7)
