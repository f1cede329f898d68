"""Sparse input: scipy.sparse matrices and Dask arrays of sparse chunks fit as their dense twin.

The passes densify a sparse chunk inside the task that multiplies it, so the products are the
dense ones bit for bit: every comparison here is exact, not approximate.
"""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp

import mspca_dask
from mspca_dask import _passes
from mspca_dask.errors import DTypeError, InputError, NonFiniteError
from mspca_dask.io import open_source
from mspca_dask.testing import make_spiked_mixture

N, D, K = 300, 200, 4


@pytest.fixture(scope="module")
def X() -> np.ndarray:
    """One covariance spike and one 10 % mean-shift cluster 8 noise sd off the rest (two
    spikes above the bulk; the group test finds the cluster)."""
    c = D / N
    return make_spiked_mixture(
        N,
        D,
        covariance_spikes=(2 * c**0.5,),
        mean_shift_weights=(0.1,),
        mean_shift_strengths=(8 * c**0.5,),
        random_state=1,
    ).to_numpy()


def _fit(source, **kwargs):  # noqa: ANN001, ANN202
    """The fit compared: ``location=None`` (the paper's setting) skips the two passes of the
    inlier location, which read the data as the others do; one test keeps ``"auto"``."""
    kwargs.setdefault("location", None)
    return mspca_dask.fit(source, n_components=K, random_state=0, **kwargs)


@pytest.fixture(scope="module")
def dense_fit(X: np.ndarray) -> mspca_dask.MSPCAResult:
    return _fit(X)


def assert_same_fit(res: mspca_dask.MSPCAResult, ref: mspca_dask.MSPCAResult) -> None:
    """Same eigenvalues, verdicts and eigenvectors (up to sign) as the reference fit."""
    np.testing.assert_array_equal(res.eigenvalues, ref.eigenvalues)
    np.testing.assert_array_equal(res.stable, ref.stable)
    np.testing.assert_array_equal(res.verdicts, ref.verdicts)
    signs = np.sign(np.sum(res.eigenvectors * ref.eigenvectors, axis=1))
    np.testing.assert_allclose(res.eigenvectors * signs[:, None], ref.eigenvectors, atol=1e-12)


def _sparse_dask(X: np.ndarray, chunks: tuple[tuple[int, ...], ...], fmt: str) -> da.Array:
    matrix = sp.csr_matrix(X) if fmt == "csr" else sp.csc_matrix(X)
    return da.from_array(matrix, chunks=chunks, asarray=False)


# ------------------------------------------------------------------------ same answer


def test_dense_fit__finds_one_stable_and_one_mean_shift_pair(dense_fit):
    # the comparisons below are only worth something if the dense fit has both verdicts
    assert list(dense_fit.verdicts[:2]) == ["mean shift", "covariance"]


@pytest.mark.parametrize("kind", [sp.csr_matrix, sp.csc_matrix, sp.csr_array, sp.csc_array])
def test_fit__scipy_sparse_matches_dense(X, dense_fit, kind):
    assert_same_fit(_fit(kind(X)), dense_fit)


def test_fit__scipy_sparse_with_auto_location_matches_dense(X):
    ref = _fit(X, location="auto")
    assert list(ref.verdicts[:2]) == ["mean shift", "covariance"]
    assert_same_fit(_fit(sp.csr_matrix(X), location="auto"), ref)


@pytest.mark.parametrize(
    ("chunks", "fmt"),
    [
        (((70, 80, 150), (D,)), "csr"),  # irregular rows
        (((N,), (50, 30, 120)), "csc"),  # irregular columns: the dual orientation
        (((100, 200), (120, 80)), "csr"),  # a grid: orient merges sparse chunks
    ],
    ids=["rows", "columns", "grid"],
)
def test_fit__dask_array_of_sparse_chunks_matches_dense_chunks(X, chunks, fmt):
    assert_same_fit(_fit(_sparse_dask(X, chunks, fmt)), _fit(da.from_array(X, chunks=chunks)))


def test_fit__dask_array_of_pydata_sparse_chunks_matches_dense(X):
    sparse = pytest.importorskip("sparse")
    chunks = ((100, 100, 100), (D,))
    coo = da.from_array(sparse.COO.from_numpy(X), chunks=chunks, asarray=False)
    assert_same_fit(_fit(coo), _fit(da.from_array(X, chunks=chunks)))


def test_fit__randomized_solver_on_sparse_float32_matches_dense(X):
    X32 = X.astype(np.float32)
    chunks = ((100, 100, 100), (D,))
    dense = _fit(da.from_array(X32, chunks=chunks), solver="randomized")
    res = _fit(_sparse_dask(X32, chunks, "csr"), solver="randomized")
    assert res.params["precision"] == dense.params["precision"]
    assert_same_fit(res, dense)


def test_fit__sparse_integer_counts_become_float64(X):
    counts = np.rint(np.abs(X) * 3).astype(np.int32)
    dense = mspca_dask.fit(counts, n_components=2, location=None, random_state=0)
    res = mspca_dask.fit(sp.csr_matrix(counts), n_components=2, location=None, random_state=0)
    np.testing.assert_array_equal(res.eigenvalues, dense.eigenvalues)


# --------------------------------------------------------------- one chunk at a time


def test_fit__densifies_only_one_chunk_at_a_time(X, monkeypatch):
    seen: list[tuple[int, int]] = []
    dense = _passes._dense

    def recording(block):  # noqa: ANN001, ANN202
        if sp.issparse(block):
            seen.append(block.shape)
        return dense(block)

    monkeypatch.setattr(_passes, "_dense", recording)
    chunks = ((60,) * 5, (D,))
    _fit(_sparse_dask(X, chunks, "csr"), location="auto", scheduler="threads")
    assert seen, "no sparse chunk reached the passes"
    assert set(seen) == {(60, D)}


def test_open_source__sparse_is_lazy_with_sparse_chunks():
    src = open_source(sp.random(50, 8, density=0.3, format="csr", random_state=0))
    assert src.kind == "sparse" and src.data.shape == (50, 8)
    assert isinstance(src.data._meta, sp.csr_matrix)
    assert "scipy.sparse CSR matrix of shape (50, 8)" in src.description


@pytest.mark.parametrize(("fmt", "whole_axis"), [("csr", 1), ("csc", 0)])
def test_open_source__sparse_chunks_span_the_cheap_axis_and_bound_the_dense_size(fmt, whole_axis):
    matrix = sp.random(4000, 3000, density=0.001, format=fmt, random_state=0)
    with dask.config.set({"array.chunk-size": "1MiB"}):
        src = open_source(matrix)
    assert src.data.numblocks[whole_axis] == 1
    assert src.data.numblocks[1 - whole_axis] > 1
    rows, cols = (max(c) for c in src.data.chunks)
    assert rows * cols * 8 <= 2**20


# ------------------------------------------------------------------------ bad input


def test_open_source__raises_on_sparse_format_without_cheap_slices():
    with pytest.raises(DTypeError, match=r"COO matrix cannot be cut.*\.tocsr\(\)"):
        open_source(sp.coo_matrix(np.eye(4)))


def test_open_source__raises_on_complex_sparse():
    with pytest.raises(DTypeError, match="complex numbers are not supported"):
        open_source(sp.csr_matrix(np.eye(4, dtype=complex)))


def test_fit__raises_on_nan_in_sparse_chunk_with_position(X):
    Xn = X.copy()
    Xn[17, 4] = np.nan
    with pytest.raises(NonFiniteError, match=r"sample is index 17.*feature is index 4"):
        mspca_dask.fit(sp.csr_matrix(Xn), n_components=2)


@pytest.mark.parametrize("argument", ["layer", "mask_obs", "mask_var"])
def test_open_source__anndata_arguments_refused_for_arrays(argument):
    with pytest.raises(InputError, match=rf"{argument}= only applies to AnnData sources"):
        open_source(sp.csr_matrix(np.eye(4)), **{argument: "x"})
