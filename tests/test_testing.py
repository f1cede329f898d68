"""Tests of the public simulators and assertions in :mod:`mspca_dask.testing`."""

from __future__ import annotations

import math

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
import zarr
from hypothesis import given, settings
from hypothesis import strategies as st

import mspca_dask
from mspca_dask.errors import ParameterError
from mspca_dask.testing import (
    ReadCounter,
    SpikedMixture,
    alignment,
    assert_alignment,
    make_spiked_mixture,
    paper_setting,
)
from mspca_dask.testing import strategies as mst


@pytest.fixture(scope="module")
def small() -> SpikedMixture:
    # Two clusters, two covariance spikes, and more than two noise blocks (1024 rows each).
    return make_spiked_mixture(
        2500,
        40,
        covariance_spikes=(3.0, 1.5),
        mean_shift_weights=(0.1, 0.05),
        mean_shift_strengths=(2.0, 1.0),
        random_state=7,
    )


@pytest.fixture(scope="module")
def small_X(small: SpikedMixture) -> np.ndarray:
    return small.to_numpy()


# ---------------------------------------------------------------------- shapes and parameters
def test_make_spiked_mixture__shapes(small: SpikedMixture, small_X: np.ndarray) -> None:
    assert small_X.shape == (2500, 40) == small.shape
    assert small_X.dtype == np.float64
    assert small.covariance_directions.shape == (40, 2)
    assert small.mean_shift_vectors.shape == (40, 2)
    assert small.membership.shape == (2500,)
    assert small.rows(10, 25).shape == (15, 40)
    assert small.clean_rows(0, 0).shape == (0, 40)
    assert small.clean_top_eigenvectors(3).shape == (40, 3)


def test_make_spiked_mixture__directions_orthonormal_and_norms(small: SpikedMixture) -> None:
    U = small.covariance_directions
    np.testing.assert_allclose(U.T @ U, np.eye(2), atol=1e-12)
    norms = np.linalg.norm(small.mean_shift_vectors, axis=0)
    expected = np.sqrt(np.array([2.0, 1.0]) / np.array([0.1, 0.05]))
    np.testing.assert_allclose(norms, expected, rtol=1e-12)


def test_paper_setting__defaults() -> None:
    model = paper_setting(0.15)
    c = 0.9
    assert model.shape == (1000, 900)
    assert model.covariance_spikes == pytest.approx((2 * math.sqrt(c),))
    assert model.mean_shift_strengths == pytest.approx((4 * math.sqrt(c),))
    assert model.mean_shift_weights == (0.15,)
    assert model.noise_variance == 1.0
    assert model.noise == "gaussian"
    # make_spiked_mixture's defaults are the same setting.
    default = make_spiked_mixture(mean_shift_weights=(0.15,))
    assert default.covariance_spikes == model.covariance_spikes
    assert default.mean_shift_strengths == model.mean_shift_strengths
    assert "SpikedMixture(n_samples=1000" in repr(model)


def test_membership__exact_counts_and_disjoint(small: SpikedMixture) -> None:
    counts = np.bincount(small.membership, minlength=3)
    assert counts.tolist() == [2500 - 250 - 125, 250, 125]
    # Members are spread over the rows, not a contiguous block.
    rows = np.flatnonzero(small.membership == 1)
    assert rows.min() < 500 and rows.max() > 2000


def test_membership__rounds_to_nearest() -> None:
    model = make_spiked_mixture(101, 10, mean_shift_weights=(0.055,), random_state=0)
    assert int((model.membership == 1).sum()) == 6  # round(5.555)


def test_model__is_immutable(small: SpikedMixture) -> None:
    with pytest.raises(ValueError, match="read-only"):
        small.membership[0] = 1
    with pytest.raises(AttributeError, match="cannot assign"):
        small.seed = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"mean_shift_weights": (0.6, 0.5)}, "sum to less than 1"),
        ({"mean_shift_weights": (1.0,)}, r"lie in \(0, 1\)"),
        ({"mean_shift_weights": (-0.1,)}, r"lie in \(0, 1\)"),
        ({"mean_shift_weights": (0.0001,)}, "0 members"),
        ({"covariance_spikes": (1.0, -2.0)}, "covariance_spikes must be positive"),
        ({"covariance_spikes": (0.0,)}, "covariance_spikes must be positive"),
        ({"covariance_spikes": (float("nan"),)}, "must be finite"),
        ({"mean_shift_strengths": (1.0, 2.0)}, "one value per weight"),
        ({"mean_shift_strengths": (-1.0,)}, "non-negative"),
        ({"noise": "laplace"}, r"noise must be one of \['gaussian', 'student-t'\]"),
        ({"noise": "student-t"}, "needs df"),
        ({"noise": "student-t", "df": 2}, "df must be finite and > 2"),
        ({"df": 5}, "only used with noise='student-t'"),
        ({"spike_distribution": "gamma"}, "spike_distribution must be one of"),
        ({"noise_variance": 0.0}, "noise_variance must be positive"),
        ({"random_state": -1}, "random_state must be non-negative"),
        ({"random_state": 1.5}, "random_state must be a non-negative integer"),
    ],
)
def test_make_spiked_mixture__raises_on_bad_parameter(kwargs: dict, match: str) -> None:
    with pytest.raises(ParameterError, match=match):
        make_spiked_mixture(100, 20, **kwargs)


@pytest.mark.parametrize(
    ("n_samples", "n_features", "match"),
    [(0, 10, "n_samples must be a positive integer"), (10, 2.5, "n_features must be")],
)
def test_make_spiked_mixture__raises_on_bad_shape(
    n_samples: int, n_features: int, match: str
) -> None:
    with pytest.raises(ParameterError, match=match):
        make_spiked_mixture(n_samples, n_features)


def test_make_spiked_mixture__raises_on_too_many_spikes() -> None:
    with pytest.raises(ParameterError, match="at most n_features=3 covariance spikes"):
        make_spiked_mixture(50, 3, covariance_spikes=(1.0,) * 4)


def test_make_spiked_mixture__no_spikes_no_clusters() -> None:
    model = make_spiked_mixture(30, 5, covariance_spikes=(), mean_shift_weights=())
    assert model.covariance_directions.shape == (5, 0)
    assert model.mean_shift_vectors.shape == (5, 0)
    assert not model.membership.any()
    np.testing.assert_array_equal(model.to_numpy(), model.clean_rows(0, 30))


def test_rows__raises_on_bad_range(small: SpikedMixture) -> None:
    with pytest.raises(ParameterError, match="0 <= start <= stop <= n_samples=2500"):
        small.rows(10, 2501)
    with pytest.raises(ParameterError, match="got start=5, stop=4"):
        small.clean_rows(5, 4)


# ---------------------------------------------------------------------- chunking independence
@pytest.mark.parametrize(
    "chunks",
    [
        (1024, -1),
        (500, -1),
        ((1, 1023, 1024, 452), (40,)),
        ((700, 1, 1799), (13, 27)),
        (-1, -1),
    ],
)
def test_to_dask__equals_to_numpy(
    small: SpikedMixture, small_X: np.ndarray, chunks: object
) -> None:
    arr = small.to_dask(chunks)
    assert arr.shape == small_X.shape
    np.testing.assert_array_equal(arr.compute(), small_X)


def test_to_dask__is_deterministic_and_casts(small: SpikedMixture, small_X: np.ndarray) -> None:
    a, b = small.to_dask((300, -1)), small.to_dask((300, -1))
    assert a.name == b.name
    f32 = small.to_dask((512, -1), dtype="float32")
    assert f32.dtype == np.float32
    np.testing.assert_array_equal(f32.compute(), small_X.astype(np.float32))


def test_rows__do_not_depend_on_request(small: SpikedMixture, small_X: np.ndarray) -> None:
    pieces = [small.rows(a, b) for a, b in [(0, 3), (3, 1030), (1030, 2047), (2047, 2500)]]
    np.testing.assert_array_equal(np.vstack(pieces), small_X)
    np.testing.assert_array_equal(small.rows(1023, 1025), small_X[1023:1025])


def test_clean_rows__differ_only_by_shift(small: SpikedMixture, small_X: np.ndarray) -> None:
    clean = small.clean_rows(0, small.n_samples)
    shifts = np.vstack([np.zeros(40), small.mean_shift_vectors.T])[small.membership]
    np.testing.assert_allclose(small_X - clean, shifts, atol=1e-12)
    inliers = small.membership == 0
    np.testing.assert_array_equal(small_X[inliers], clean[inliers])


def test_random_state__determines_the_data() -> None:
    a = make_spiked_mixture(200, 30, random_state=11)
    b = make_spiked_mixture(200, 30, random_state=11)
    c = make_spiked_mixture(200, 30, random_state=12)
    np.testing.assert_array_equal(a.to_numpy(), b.to_numpy())
    np.testing.assert_array_equal(a.membership, b.membership)
    assert not np.array_equal(a.to_numpy(), c.to_numpy())
    assert not np.array_equal(a.covariance_directions, c.covariance_directions)


def test_random_state__none_records_a_reproducible_seed() -> None:
    a = make_spiked_mixture(50, 10, random_state=None)
    b = make_spiked_mixture(50, 10, random_state=a.seed)
    np.testing.assert_array_equal(a.to_numpy(), b.to_numpy())


# ---------------------------------------------------------------------- xarray and zarr
def test_to_xarray__dims_coords_and_values(small: SpikedMixture, small_X: np.ndarray) -> None:
    da_ = small.to_xarray(sample_dim="cells", feature_dim="genes", name="expr")
    assert da_.dims == ("cells", "genes")
    assert da_.name == "expr"
    assert da_.chunks is not None
    assert da_["cells"].values[0] == "s0000" and da_["cells"].values[-1] == "s2499"
    np.testing.assert_array_equal(da_["membership"].values, small.membership)
    np.testing.assert_array_equal(da_.values, small_X)
    eager = small.to_xarray(chunks=None)
    assert eager.chunks is None and eager.dims == ("samples", "features")


def test_to_xarray__raises_on_same_dims(small: SpikedMixture) -> None:
    with pytest.raises(ParameterError, match="sample_dim and feature_dim must differ"):
        small.to_xarray(sample_dim="x", feature_dim="x")


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_write_zarr__bare_array_round_trip(
    small: SpikedMixture, small_X: np.ndarray, tmp_path, zarr_format: int
) -> None:
    path = small.write_zarr(tmp_path / "x.zarr", chunks=(300, 16), zarr_format=zarr_format)
    assert path == str(tmp_path / "x.zarr")
    arr = zarr.open_array(path, mode="r")
    assert arr.metadata.zarr_format == zarr_format
    assert arr.shape == small_X.shape and arr.chunks == (300, 16)
    # Read back chunk by chunk.
    for start in range(0, small.n_samples, 300):
        np.testing.assert_array_equal(arr[start : start + 300], small_X[start : start + 300])
    np.testing.assert_array_equal(arr[:], small_X)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_write_zarr__group_opens_in_xarray(
    small: SpikedMixture, small_X: np.ndarray, tmp_path, zarr_format: int
) -> None:
    path = small.write_zarr(tmp_path / "g.zarr", name="X", dtype="float32", zarr_format=zarr_format)
    group = zarr.open_group(path, mode="r")
    assert group["X"].dtype == np.float32 and group["X"].chunks == (1024, 40)
    np.testing.assert_array_equal(group["membership"][:], small.membership)
    ds = xr.open_zarr(path)
    assert ds["X"].dims == ("samples", "features")
    assert ds["membership"].dtype.kind == "i"  # no fill value decoded as NaN
    np.testing.assert_array_equal(ds["X"].values, small_X.astype(np.float32))


def test_write_zarr__refuses_to_overwrite_unless_asked(small: SpikedMixture, tmp_path) -> None:
    model = make_spiked_mixture(20, 5, random_state=1)
    path = model.write_zarr(tmp_path / "x.zarr", chunks=(7, None))
    with pytest.raises(zarr.errors.ContainsArrayError, match="An array exists"):
        model.write_zarr(path)
    model.write_zarr(path, chunks=(None, None), overwrite=True)
    np.testing.assert_array_equal(zarr.open_array(path)[:], model.to_numpy())


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"zarr_format": 4}, "zarr_format must be 2 or 3"),
        ({"chunks": (0, None)}, "chunk sizes must be positive"),
        ({"chunks": (10,)}, "chunks must have two entries"),
    ],
)
def test_write_zarr__raises_on_bad_parameter(tmp_path, kwargs: dict, match: str) -> None:
    model = make_spiked_mixture(20, 5, random_state=1)
    with pytest.raises(ParameterError, match=match):
        model.write_zarr(tmp_path / "x.zarr", **kwargs)


# ---------------------------------------------------------------------- statistics
def test_statistics__covariance_spikes_and_cluster_means() -> None:
    model = make_spiked_mixture(
        6000,
        30,
        covariance_spikes=(4.0, 1.0),
        mean_shift_weights=(0.2,),
        mean_shift_strengths=(4.0,),
        noise_variance=2.0,
        random_state=3,
    )
    X = model.to_numpy()
    clean = model.clean_rows(0, model.n_samples)
    U = model.covariance_directions
    # Population covariance σ²Σ: σ²(1 + ℓ_k) along u_k, σ² elsewhere.
    along = (clean @ U).var(axis=0)
    np.testing.assert_allclose(along, [2.0 * 5.0, 2.0 * 2.0], rtol=0.08)
    P = np.eye(30) - U @ U.T
    rest = np.trace(P @ (clean.T @ clean / model.n_samples) @ P) / 28
    assert rest == pytest.approx(2.0, rel=0.03)
    # Inliers have mean zero; cluster rows have mean m_1.
    members = model.membership == 1
    assert np.linalg.norm(X[~members].mean(axis=0)) < 0.2
    m1 = model.mean_shift_vectors[:, 0]
    assert np.linalg.norm(X[members].mean(axis=0) - m1) < 0.25 * np.linalg.norm(m1)
    assert_alignment(X[members].mean(axis=0), m1, at_least=0.95)


def test_statistics__student_t_has_unit_variance_and_heavy_tails() -> None:
    model = make_spiked_mixture(
        20000,
        20,
        covariance_spikes=(),
        mean_shift_weights=(),
        noise="student-t",
        df=5,
        random_state=5,
    )
    X = model.to_numpy()
    assert X.var() == pytest.approx(1.0, abs=0.03)
    kurtosis = float(np.mean(X**4) / np.mean(X**2) ** 2)
    assert kurtosis > 5.0  # 9 for t(5); 3 for a Gaussian
    assert model.df == 5.0


@pytest.mark.parametrize(("distribution", "skew"), [("exponential", 2.0), ("chi2", 2 * 2**0.5)])
def test_statistics__skewed_spikes_keep_the_covariance(distribution: str, skew: float) -> None:
    kw = {
        "covariance_spikes": (3.0,),
        "mean_shift_weights": (),
        "noise_variance": 2.0,
        "random_state": 4,
    }
    skewed = make_spiked_mixture(20000, 20, spike_distribution=distribution, **kw)
    gaussian = make_spiked_mixture(20000, 20, **kw)
    u = skewed.covariance_directions[:, 0]
    np.testing.assert_array_equal(u, gaussian.covariance_directions[:, 0])
    t = skewed.to_numpy() @ u
    # σ²(1 + ℓ) along the spike, mean 0, the factor's skewness; 0 when Gaussian
    assert t.var() == pytest.approx(2.0 * 4.0, rel=0.04)
    assert abs(t.mean()) < 0.1
    skewness = float(np.mean((t - t.mean()) ** 3) / t.var() ** 1.5)
    assert skewness == pytest.approx(skew, rel=0.15)
    g = gaussian.to_numpy() @ u
    assert abs(float(np.mean((g - g.mean()) ** 3) / g.var() ** 1.5)) < 0.1
    # off the spike both are the same noise draws
    P = np.eye(20) - np.outer(u, u)
    np.testing.assert_allclose(skewed.to_numpy() @ P, gaussian.to_numpy() @ P, atol=1e-12)
    assert f"spike_distribution='{distribution}'" in repr(skewed)
    assert "spike_distribution" not in repr(gaussian)


def test_clean_top_eigenvectors__beat_contaminated_pca_in_paper_setting() -> None:
    model = paper_setting(0.2, random_state=0)
    u = model.covariance_directions[:, 0]
    v = model.mean_shift_vectors[:, 0]
    clean_top = model.clean_top_eigenvectors(1)[:, 0]
    X = model.to_numpy()
    evals, evecs = np.linalg.eigh(X.T @ X / model.n_samples)
    contaminated_top = evecs[:, -1]
    # At π₁ = 20% the mean-shift spike is the top eigenvalue (g(θ²) ≈ 5.9 > g(ℓ) ≈ 4.3) ...
    assert alignment(contaminated_top, v) > 0.7
    assert alignment(contaminated_top, u) < 0.3
    # ... while the clean top eigenvector carries the covariance direction (RMT: about 0.71).
    assert alignment(clean_top, u) > 0.6
    assert alignment(clean_top, u) > alignment(contaminated_top, u) + 0.3
    # Unit norm, deterministic sign.
    assert np.linalg.norm(clean_top) == pytest.approx(1.0)
    assert clean_top[np.argmax(np.abs(clean_top))] > 0


def test_clean_top_eigenvectors__wide_data_matches_dense() -> None:
    model = make_spiked_mixture(60, 200, covariance_spikes=(20.0,), random_state=2)
    V = model.clean_top_eigenvectors(2)
    Y = model.clean_rows(0, 60)
    _, vecs = np.linalg.eigh(Y.T @ Y / 60)
    for j in range(2):
        assert alignment(V[:, j], vecs[:, -1 - j]) == pytest.approx(1.0, abs=1e-8)
    np.testing.assert_allclose(V.T @ V, np.eye(2), atol=1e-10)


def test_clean_top_eigenvectors__raises_on_bad_k(small: SpikedMixture) -> None:
    with pytest.raises(ParameterError, match=r"k must be in \[1, min"):
        small.clean_top_eigenvectors(0)


# ---------------------------------------------------------------------- assertions
def test_alignment__is_sign_and_scale_free() -> None:
    assert alignment([3.0, 4.0], [-6.0, -8.0]) == pytest.approx(1.0)
    assert alignment([1.0, 0.0], [0.0, 2.0]) == 0.0
    assert alignment(np.ones((3, 1)), np.ones(3)) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("u", "v", "match"),
    [
        ([1.0, 0.0], [1.0, 0.0, 0.0], "same length"),
        ([0.0, 0.0], [1.0, 0.0], "non-zero"),
        (np.ones((2, 2)), np.ones(4), "must be a vector"),
    ],
)
def test_alignment__raises_on_bad_vectors(u: object, v: object, match: str) -> None:
    with pytest.raises(ParameterError, match=match):
        alignment(u, v)


def test_assert_alignment__message_is_readable() -> None:
    assert_alignment([1.0, 0.01], [1.0, 0.0], at_least=0.99)
    with pytest.raises(AssertionError, match=r"= 0\.7071 is below the required 0\.9000"):
        assert_alignment([1.0, 1.0], [1.0, 0.0], at_least=0.9)


# ---------------------------------------------------------------------- pass counting
@pytest.mark.parametrize("scheduler", ["sync", "threads"])
def test_read_counter__counts_each_chunk_read_of_a_model(
    small: SpikedMixture, small_X: np.ndarray, scheduler: str
) -> None:
    counter = ReadCounter(small, chunks=((1000, 1000, 500), (25, 15)))
    assert (counter.n_chunks, counter.reads) == (6, 0)  # building the array reads nothing
    with dask.config.set(scheduler=scheduler):
        np.testing.assert_array_equal(counter.array.compute(), small_X)
        assert counter.passes == 1.0 and counter.uniform
        counter.array[:10].sum().compute()  # the first row chunk only, both column chunks
    assert counter.reads == 8 and not counter.uniform
    assert counter.counts.tolist() == [[2, 2], [1, 1], [1, 1]]
    counter.reset()
    assert counter.reads == 0


@pytest.mark.parametrize("wrap", ["numpy", "dask"])
def test_read_counter__wraps_arrays_and_keeps_values(small_X: np.ndarray, wrap: str) -> None:
    data = small_X if wrap == "numpy" else da.from_array(small_X, chunks=(700, 40))
    counter = ReadCounter(data, chunks=(500, 20))
    assert counter.array.chunks == ((500,) * 5, (20, 20))
    with dask.config.set(scheduler="threads"):
        np.testing.assert_array_equal(counter.array.compute(), small_X)
        da.compute(counter.array.sum(axis=0), counter.array.max())  # one compute: one read
    assert counter.passes == 2.0 and counter.uniform


def test_read_counter__counts_the_passes_of_fit(small: SpikedMixture) -> None:
    counter = ReadCounter(small, chunks=(500, -1))
    res = mspca_dask.fit(counter.array, n_components=3, solver="exact", location=None)
    assert counter.uniform and counter.passes == res.n_passes


def test_read_counter__raises_on_data_that_is_not_2d() -> None:
    with pytest.raises(ParameterError, match=r"data must be 2-D.*\(got shape \(4,\)\)"):
        ReadCounter(np.zeros(4))


# ---------------------------------------------------------------------- Hypothesis strategies
@settings(max_examples=25, deadline=None)
@given(mst.chunked_spiked_matrices(max_samples=60, max_features=12))
def test_strategies__chunked_matrices_equal_the_model_whatever_the_chunks(drawn) -> None:
    model, X = drawn
    assert X.shape == model.shape and X.dtype in mst.FLOAT_DTYPES
    assert sum(X.chunks[0]) == model.n_samples and min(X.chunks[0]) >= 1
    expected = model.to_numpy().astype(X.dtype)
    np.testing.assert_array_equal(X.compute(scheduler="sync"), expected)


@settings(max_examples=25, deadline=None)
@given(
    mst.spiked_mixtures(
        min_samples=20, max_samples=80, max_features=10, max_covariance_spikes=3, max_clusters=3
    )
)
def test_strategies__spiked_mixtures_are_valid_models(model: SpikedMixture) -> None:
    assert 20 <= model.n_samples <= 80 and 2 <= model.n_features <= 10
    assert len(model.covariance_spikes) <= 3 and model.n_clusters <= 3
    counts = np.bincount(model.membership, minlength=model.n_clusters + 1)
    assert np.all(counts[1:] >= 1) and counts[0] > model.n_samples / 2


@given(st.data())
def test_strategies__shapes_respect_bounds_and_refuse_empty_ranges(data) -> None:
    n, d = data.draw(mst.shapes(min_samples=3, max_samples=5, min_features=7, max_features=9))
    assert 3 <= n <= 5 and 7 <= d <= 9
    with pytest.raises(ValueError, match="need 2 <= min_samples <= max_samples"):
        mst.shapes(min_samples=5, max_samples=4)


# ---------------------------------------------------------------------- data families
def test_families__kinds_names_and_unknown_name() -> None:
    from mspca_dask.testing import FAMILIES, family, family_names

    assert set(family_names()) == set(FAMILIES)
    assert family_names("null")[0] == "N-iso" and "N-big" in family_names("null")
    assert {"P-paper-5", "P-ten", "P-45"} <= set(family_names("power"))
    assert family_names("real") == ["R-digits", "R-wine", "R-breast"]
    assert family("N-wide").shape == (300, 3000) and family("N-big").shape == (100_000, 200)
    with pytest.raises(ParameterError, match="family must be one of"):
        family("N-nothing")
    with pytest.raises(ParameterError, match="seed must be a non-negative integer"):
        family("R-wine").draw(-1)


@pytest.mark.parametrize("name", ["P-unequal", "N-ar03", "P-gamma", "R-wine"])
def test_families__draw_is_seeded_and_the_same_however_rows_are_read(name: str) -> None:
    from mspca_dask.testing import family

    draw = family(name).draw(3)
    X = draw.to_numpy()
    assert X.shape == draw.shape == family(name).shape
    np.testing.assert_array_equal(family(name).draw(3).to_numpy(), X)
    assert not np.array_equal(family(name).draw(4).to_numpy(), X)
    np.testing.assert_array_equal(np.vstack(list(draw.blocks(rows=37))), X)
    np.testing.assert_array_equal(draw.to_dask(chunks=(41, -1)).compute(scheduler="sync"), X)
    truth = draw.truth
    assert np.linalg.norm(truth.clean_top) == pytest.approx(1.0)
    np.testing.assert_allclose(np.linalg.norm(truth.shift_directions, axis=0), 1.0)
    assert truth.membership.shape == (X.shape[0],)
    assert set(np.unique(truth.membership)) == set(range(truth.n_groups + 1))


def test_families__group_sizes_angles_and_shift_strength() -> None:
    from mspca_dask.testing import family

    unequal = family("P-unequal").draw(0).truth
    assert np.bincount(unequal.membership).tolist() == [830, 20, 50, 100]
    for name, angle in (("P-angle45", 45.0), ("P-angle90", 90.0)):
        truth = family(name).draw(0).truth
        cos = float(truth.shift_directions[:, 0] @ truth.covariance_directions[:, 0])
        assert math.degrees(math.acos(cos)) == pytest.approx(angle)
    # theta^2 = pi |m|^2 = 4 sqrt(c): the shifted rows minus the clean rows
    draw = family("P-noisy2").draw(0)
    model = draw._model
    members = draw.truth.membership == 1
    shift = (model.rows(0, 1000) - model.clean_rows(0, 1000))[members]
    assert np.linalg.norm(shift, axis=1) ** 2 * 0.10 == pytest.approx(4 * math.sqrt(0.9))


def test_families__null_families_have_no_groups_and_real_ones_five_percent() -> None:
    from mspca_dask.testing import family

    assert family("N-skew").draw(0).truth.n_groups == 0
    truth = family("R-breast").draw(0).truth
    assert truth.n_groups == 1 and truth.covariance_directions.shape[1] == 0
    assert np.mean(truth.membership == 1) == pytest.approx(0.05, abs=0.003)
