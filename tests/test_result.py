"""Tests of mspca_dask.result: MSPCAResult, its Dataset schema, storage, display and plot."""

from __future__ import annotations

import dataclasses
import json
import os

import dask.array as da
import numpy as np
import pytest
import xarray as xr
from numpy.testing import assert_allclose, assert_array_equal

from mspca_dask.errors import (
    DTypeError,
    InputError,
    ParameterError,
    ResultExistsError,
    ShapeError,
)
from mspca_dask.result import (
    RESULT_ATTRS,
    RESULT_VARIABLES,
    SCHEMA_VERSION,
    MSPCAResult,
    open_result,
    validate_result_dataset,
)

K, B, N, D = 4, 3, 20, 6
STABLE = np.array([True, False, True, False])
CANDIDATE = np.array([True, True, True, False])
VERDICTS = ["covariance", "mean shift", "mixed", "bulk"]
REASONS = [
    "covariance: not shifted between the groups; shift z 0.4",
    "mean shift: groups shifted along it, only noise within the inliers; shift z 12",
    "mixed: groups shifted along it and a spike within the inliers; shift z 4.1 <&>",
    "bulk: not above the bulk edge",
]
#: Two displaced groups: samples 0, 5, 10, 15 in group 1 and 3, 13 in group 2.
GROUPS = np.where(np.arange(N) % 5 == 0, 1, np.where(np.arange(N) % 10 == 3, 2, 0))
#: The fields a result written before the verdict, its groups and their test were stored lacks.
OLD_STYLE = {
    "pair_verdicts": None,
    "groups": None,
    "group_p_value": None,
    "group_centre": None,
    "within_samples": None,
    "pca_eigenvectors": None,
    "component_variances": None,
}


def make_result(
    *,
    has_location: bool = True,
    random_state: int | None = 7,
    coords: bool = True,
    sample_dim: str = "samples",
    feature_dim: str = "features",
    **overrides: object,
) -> MSPCAResult:
    """A consistent fake result: orthonormal eigenvectors, scores = (X - loc) @ V.T."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, D)) + 2.0
    loc = np.full(D, 2.0) + 0.1 * np.arange(D) if has_location else None
    V = np.linalg.qr(rng.normal(size=(D, K)))[0].T  # (K, D), orthonormal rows
    eig = np.array([9.5, 6.25, 4.125, 2.9])
    knock = eig + np.array([[0.001, -1.2, 0.02, 0.05]]) * np.arange(1, B + 1)[:, None]
    fields: dict[str, object] = {
        "eigenvalues": eig,
        "knockoff_eigenvalues_all": knock,
        "stable": STABLE.copy(),
        "candidate": CANDIDATE.copy(),
        "reasons": np.array(REASONS, dtype=object),
        "displacement": np.abs(knock - eig).mean(axis=0),
        "eigenvector_overlap": np.array([0.999, 0.41, 0.97, 0.6]),
        "eigenvalue_bounds": np.array([0.0, 1e-4, 2e-5, 0.0]),
        "eigenvectors": V,
        "pca_eigenvectors": V[::-1].copy(),
        "component_variances": np.array([8.5, np.nan, 3.75, np.nan]),
        "scores": (X - (0 if loc is None else loc)) @ V.T,
        "location": loc,
        "noise_variance": 1.0625,
        "threshold": 0.1,
        "knockoff_strength": 7.625,
        "mp_edge": 3.0,
        "n_samples": N,
        "n_features": D,
        "solver": "exact",
        "n_passes": 2,
        "random_state": random_state,
        "params": {"n_components": K, "solver": "auto", "tol": None, "threshold_scale": 3.0},
        "sample_coords": np.array([f"s{i}" for i in range(N)]) if coords else None,
        "feature_coords": np.arange(D) * 10 if coords else None,
        "sample_dim": sample_dim,
        "feature_dim": feature_dim,
        "knockoff_match": np.tile(np.arange(K), (B, 1)),
        "shift_z": np.array([0.4, 12.0, 4.1, 0.2]),
        "diagnostics": "too small: min(n, d) = 4 < 40",
        "total_variance": 24.75,
        "pair_verdicts": np.array(VERDICTS, dtype=object),
        "groups": GROUPS.copy(),
        "group_p_value": 0.0125,
        "group_centre": "origin",
        "within_samples": N - 2,
    }
    if "stable" in overrides and "pair_verdicts" not in overrides:
        # verdicts that agree with the stable flags given (the result checks they agree)
        stable = np.asarray(overrides["stable"]).astype(bool)
        fields["pair_verdicts"] = np.where(
            stable, "covariance", np.where(CANDIDATE, "mean shift", "bulk")
        ).astype(object)
    fields.update(overrides)
    return MSPCAResult(**fields)  # type: ignore[arg-type]


@pytest.fixture
def res() -> MSPCAResult:
    return make_result()


@pytest.fixture
def X_new() -> np.ndarray:
    return np.random.default_rng(1).normal(size=(9, D)) + 2.0


def assert_results_equal(a: MSPCAResult, b: MSPCAResult) -> None:
    for f in dataclasses.fields(MSPCAResult):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            assert isinstance(x, np.ndarray) and isinstance(y, np.ndarray), f.name
            assert x.shape == y.shape, f.name
            if x.dtype.kind not in "OUT":
                assert x.dtype == y.dtype, f.name
            assert_array_equal(x, y, err_msg=f.name)
        else:
            assert x == y, f.name
            assert type(x) is type(y), f.name


# ------------------------------------------------------------------------------ properties


def test_properties__select_by_verdict(res: MSPCAResult) -> None:
    assert res.n_components == K
    assert res.n_knockoffs == B
    assert res.n_stable == 2
    assert_array_equal(res.knockoff_eigenvalues, res.matched_knockoff_eigenvalues[0])
    assert res.knockoff_eigenvalues.shape == (K,)
    assert_array_equal(res.components, res.eigenvectors[[0, 2]])
    assert res.components.shape == (2, D)
    assert_array_equal(res.mean_shift_components, res.eigenvectors[[1]])
    assert res.explained_variance is res.eigenvalues
    assert res.verdicts.tolist() == VERDICTS


def test_components__ordered_by_their_variance_within_the_groups(X_new: np.ndarray) -> None:
    # a spike's extra eigenvalue from a group's shift or spread does not set its order: the
    # variance within the groups does, in components, transform and the stored result
    res = make_result(component_variances=np.array([3.5, np.nan, 4.0, np.nan]))
    assert res.component_index.tolist() == [2, 0]
    assert_array_equal(res.components, res.eigenvectors[[2, 0]])
    scores = res.transform(xr.DataArray(X_new, dims=("samples", "features")))
    assert scores["component"].values.tolist() == [2, 0]
    assert_allclose(scores.values, (X_new - res.location) @ res.eigenvectors[[2, 0]].T)
    again = MSPCAResult.from_dataset(res.to_dataset())
    assert again.component_index.tolist() == [2, 0]
    assert "components (by variance within the groups): #2 (4), #0 (3.5)" in res.summary()
    assert "components (by variance" not in make_result().summary()
    # results written before the variances were stored keep the eigenvalue order
    assert make_result(component_variances=None).component_index.tolist() == [0, 2]


def test_verdicts__derived_from_stable_and_candidate_for_an_older_result() -> None:
    old = make_result(**OLD_STYLE)
    assert old.verdicts.tolist() == ["covariance", "mean shift", "covariance", "bulk"]
    assert_array_equal(old.components, old.eigenvectors[[0, 2]])
    assert_array_equal(old.mean_shift_components, old.eigenvectors[[1]])


def test_mean_shift_components__are_the_mean_shift_verdicts_only() -> None:
    res = make_result(
        pair_verdicts=np.array(["covariance", "undetermined", "mean shift", "bulk"]),
        stable=np.array([True, False, False, False]),
    )
    assert_array_equal(res.mean_shift_components, res.eigenvectors[[2]])
    assert_array_equal(res.components, res.eigenvectors[[0]])


def test_displaced__are_the_samples_outside_the_inliers_group(res: MSPCAResult) -> None:
    assert res.displaced.dtype == bool
    assert np.flatnonzero(res.displaced).tolist() == [0, 3, 5, 10, 13, 15]
    assert res.n_groups == 3
    one = make_result(groups=np.zeros(N, dtype=np.int64))
    assert not one.displaced.any() and one.n_groups == 1
    old = make_result(**OLD_STYLE)
    assert old.displaced.shape == (N,) and not old.displaced.any()
    assert old.n_groups == 1


def test_properties__no_knockoff_gives_nan_knockoff_eigenvalues() -> None:
    res = make_result(knockoff_eigenvalues_all=np.empty((0, K)), knockoff_match=None)
    assert res.n_knockoffs == 0
    assert np.isnan(res.knockoff_eigenvalues).all()
    assert "B = 0 knockoffs" in res.summary()


def test_result__is_frozen(res: MSPCAResult) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign"):
        res.threshold = 1.0  # type: ignore[misc]


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("scores", np.zeros((N, K + 1)), r"scores must have shape \(20, 4\)"),
        ("eigenvectors", np.zeros((K, D - 1)), r"eigenvectors must have shape \(4, 6\)"),
        ("location", np.zeros(D + 1), r"location must have shape \(6,\)"),
        ("knockoff_eigenvalues_all", np.zeros(K), r"must be 2-D, shaped \(B, K'\)"),
        ("knockoff_eigenvalues_all", np.zeros((B, K - 1)), r"knockoff_eigenvalues_all must"),
        ("sample_coords", np.arange(N - 1), r"sample_coords must have shape \(20,\)"),
        ("pair_verdicts", np.array(VERDICTS[:-1]), r"pair_verdicts must have shape \(4,\)"),
        ("groups", np.zeros(N + 1, dtype=int), r"groups must have shape \(20,\)"),
        ("eigenvalues", np.zeros((K, 1)), r"eigenvalues must be 1-D"),
    ],
)
def test_result__raises_on_inconsistent_shapes(field: str, value: np.ndarray, match: str) -> None:
    with pytest.raises(ShapeError, match=match):
        make_result(**{field: value})


def test_result__raises_on_non_boolean_stable() -> None:
    with pytest.raises(DTypeError, match="stable must be a boolean array"):
        make_result(stable=STABLE.astype(int))


def test_result__raises_on_unknown_verdict() -> None:
    # the verdict that was called "stable" before is "covariance" now
    with pytest.raises(InputError, match=r"pair_verdicts must be among .*\['stable'\]"):
        make_result(pair_verdicts=np.array(["stable", "mean shift", "mixed", "bulk"]))


def test_result__raises_when_stable_disagrees_with_the_verdicts() -> None:
    with pytest.raises(InputError, match="stable must be True exactly where"):
        make_result(stable=np.array([True, True, True, False]), pair_verdicts=np.array(VERDICTS))


@pytest.mark.parametrize("groups", [GROUPS - 1, GROUPS.astype(float)])
def test_result__raises_on_groups_that_are_not_non_negative_integers(groups) -> None:
    with pytest.raises(DTypeError, match="groups must hold non-negative integers"):
        make_result(groups=groups)


@pytest.mark.parametrize("dims", [("x", "x"), ("component", "features"), ("samples", "knockoff")])
def test_result__raises_on_bad_dim_names(dims: tuple[str, str]) -> None:
    with pytest.raises(InputError, match="sample_dim and feature_dim must be two different"):
        make_result(sample_dim=dims[0], feature_dim=dims[1])


# ------------------------------------------------------------------------------- transform


def _manual(res: MSPCAResult, X: np.ndarray) -> np.ndarray:
    loc = 0.0 if res.location is None else res.location
    return (X - loc) @ res.eigenvectors[res.stable].T


@pytest.mark.parametrize("location", [True, False])
def test_transform__numpy_matches_manual(location: bool, X_new: np.ndarray) -> None:
    res = make_result(has_location=location)
    out = res.transform(X_new)
    assert isinstance(out, np.ndarray)
    assert out.shape == (9, 2)
    assert_allclose(out, _manual(res, X_new), rtol=1e-12, atol=1e-12)


def test_transform__training_data_reproduce_stable_scores(res: MSPCAResult) -> None:
    X = np.random.default_rng(0).normal(size=(N, D)) + 2.0  # as in make_result
    assert_allclose(res.transform(X), res.scores[:, res.stable], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("chunks", [(9, D), (4, 3), ((2, 7), (1, 5))])
def test_transform__dask_is_lazy_and_matches(
    res: MSPCAResult, X_new: np.ndarray, chunks: object
) -> None:
    X = da.from_array(X_new, chunks=chunks)
    out = res.transform(X)
    assert isinstance(out, da.Array)
    assert out.shape == (9, 2)
    assert_allclose(out.compute(), _manual(res, X_new), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("lazy", [False, True])
def test_transform__dataarray_keeps_sample_labels(
    res: MSPCAResult, X_new: np.ndarray, lazy: bool
) -> None:
    labels = [f"new{i}" for i in range(9)]
    arr = xr.DataArray(
        X_new.T,  # features first: transform must orient it by sample_dim
        dims=("genes", "cells"),
        coords={"cells": labels},
    )
    if lazy:
        arr = arr.chunk({"cells": 4})
    out = res.transform(arr, sample_dim="cells")
    assert isinstance(out, xr.DataArray)
    assert out.dims == ("cells", "component")
    assert isinstance(out.data, da.Array) is lazy
    assert out["cells"].values.tolist() == labels
    assert out["component"].values.tolist() == [0, 2]
    assert_allclose(out.values, _manual(res, X_new), rtol=1e-12, atol=1e-12)


def test_transform__dataset_variable(res: MSPCAResult, X_new: np.ndarray) -> None:
    ds = xr.Dataset({"X": (("samples", "features"), X_new), "y": ("samples", np.zeros(9))})
    out = res.transform(ds, variable="X")
    assert isinstance(out, xr.DataArray)
    assert_allclose(out.values, _manual(res, X_new), rtol=1e-12, atol=1e-12)


def test_transform__zarr_path_gives_numpy(res: MSPCAResult, X_new: np.ndarray, tmp_path) -> None:
    path = str(tmp_path / "x.zarr")
    ds = xr.Dataset({"X": (("samples", "features"), X_new)})
    ds.to_zarr(path, zarr_format=3, consolidated=False)
    out = res.transform(path, variable="X")
    assert isinstance(out, np.ndarray)
    assert_allclose(out, _manual(res, X_new), rtol=1e-12, atol=1e-12)


def test_transform__no_stable_component_gives_empty_scores(X_new: np.ndarray) -> None:
    res = make_result(stable=np.zeros(K, dtype=bool))
    assert res.transform(X_new).shape == (9, 0)
    assert res.transform(da.from_array(X_new, chunks=4)).compute().shape == (9, 0)


@pytest.mark.parametrize("wrap", ["numpy", "dask", "xarray"])
def test_transform__raises_on_feature_count(res: MSPCAResult, wrap: str) -> None:
    X = np.ones((5, D + 2))
    src = {
        "numpy": lambda: X,
        "dask": lambda: da.from_array(X),
        "xarray": lambda: xr.DataArray(X, dims=("samples", "features")),
    }[wrap]()
    with pytest.raises(ShapeError, match=r"has 8 features but the result was fitted on 6"):
        res.transform(src)


def test_transform__raises_on_reordered_feature_labels(res: MSPCAResult, X_new) -> None:
    arr = xr.DataArray(
        X_new, dims=("samples", "features"), coords={"features": np.arange(D)[::-1] * 10}
    )
    with pytest.raises(InputError, match="feature labels of the source .* differ"):
        res.transform(arr)


def test_transform__raises_on_1d_input(res: MSPCAResult) -> None:
    with pytest.raises(ShapeError, match="must be 2-D"):
        res.transform(np.ones(D))


# ------------------------------------------------------------------------------- dataset


def test_to_dataset__follows_schema(res: MSPCAResult) -> None:
    ds = res.to_dataset()
    assert dict(ds.sizes) == {
        "component": K,
        "knockoff": B,
        "knockoff_component": K,
        "samples": N,
        "features": D,
    }
    for name, spec in RESULT_VARIABLES.items():
        dims = tuple(
            {"{sample_dim}": "samples", "{feature_dim}": "features"}.get(d, d) for d in spec.dims
        )
        assert ds[name].dims == dims, name
        assert ds[name].dtype.kind in spec.kind, name
    assert_array_equal(ds["eigenvalue"], res.eigenvalues)
    assert_array_equal(ds["knockoff_eigenvalue"], res.knockoff_eigenvalues_all)
    assert_array_equal(ds["score"], res.scores)
    assert ds["reason"].values.tolist() == REASONS
    assert ds["samples"].values.tolist() == [f"s{i}" for i in range(N)]
    assert ds["component"].values.tolist() == list(range(K))
    for name in RESULT_ATTRS:
        assert name in ds.attrs, name
    assert ds.attrs["noise_variance"] == 1.0625
    assert ds.attrs["random_state"] == 7
    assert ds.attrs["mspca_schema_version"] == SCHEMA_VERSION
    assert isinstance(ds.attrs["mspca_dask_version"], str)
    assert json.loads(ds.attrs["params"]) == res.params


def test_matched_knockoff_eigenvalues__follow_the_match() -> None:
    match = np.tile(np.array([1, 0, 2, 3]), (B, 1))
    r = make_result(knockoff_match=match)
    knock = np.asarray(r.knockoff_eigenvalues_all)
    assert_array_equal(r.matched_knockoff_eigenvalues[:, 0], knock[:, 1])
    assert_array_equal(r.matched_knockoff_eigenvalues[:, 1], knock[:, 0])
    back = MSPCAResult.from_dataset(r.to_dataset())
    assert_array_equal(back.knockoff_match, match)
    # Without stored matches the same-index eigenvalues are shown.
    assert_array_equal(make_result(knockoff_match=None).matched_knockoff_eigenvalues, knock)


def test_knockoff_eigenvalues__are_the_first_knockoffs_matched_K_values() -> None:
    """The documented (K,) "same eigenvalues after the knockoff", not the raw (K',) spectrum."""
    eig = np.array([9.5, 6.25, 4.125, 2.9])
    # the knockoff's own spike on top pushes every eigenpair down one place
    knock = np.tile(np.array([20.0, 9.5, 6.25, 4.125, 2.9, 1.0]), (B, 1))
    match = np.tile(np.array([1, 2, 3, 4]), (B, 1))
    r = make_result(knockoff_eigenvalues_all=knock, knockoff_match=match)
    assert r.knockoff_eigenvalues.shape == (K,)
    assert_array_equal(r.knockoff_eigenvalues, eig)
    assert r.knockoff_eigenvalues_all[0].shape == (K + 2,)


def test_passes__come_from_params_and_survive_the_store(tmp_path) -> None:
    record = [
        {"name": "mspca-stats", "products": ["stats", "gram"], "seconds": 0.5},
        {"name": "mspca-output", "products": ["keep"], "seconds": 0.25},
    ]
    r = make_result(params={"n_components": K, "passes": record})
    assert r.passes == record
    assert make_result().passes == []  # a result built by hand has no record
    back = open_result(r.to_zarr(str(tmp_path / "r.zarr")))
    assert back.passes == record


def test_to_dataset__omits_none(res: MSPCAResult) -> None:
    ds = make_result(has_location=False, random_state=None, coords=False).to_dataset()
    assert "location" not in ds
    assert "random_state" not in ds.attrs
    assert "samples" not in ds.coords and "features" not in ds.coords


def test_to_zarr__round_trips_the_verdicts_and_groups(res: MSPCAResult, tmp_path) -> None:
    ds = res.to_dataset()
    assert ds["verdict"].dims == ("component",) and ds["group"].dims == ("samples",)
    assert ds.attrs["group_p_value"] == 0.0125
    back = open_result(res.to_zarr(tmp_path / "r.zarr"))
    assert back.verdicts.tolist() == VERDICTS
    assert all(type(v) is str for v in back.pair_verdicts)
    assert_array_equal(back.groups, GROUPS)
    assert back.groups.dtype.kind in "iu"
    assert back.group_p_value == 0.0125
    assert back.group_centre == "origin"
    assert "about the origin" in back.summary()
    assert back.within_samples == N - 2
    assert f"within the groups read from {N - 2} samples" in back.summary()
    assert_array_equal(back.displaced, res.displaced)


def test_to_zarr__round_trips_nan_shift_z_with_no_displaced_group(tmp_path) -> None:
    # one group: nothing to measure a shift with, every candidate a covariance pair
    res = make_result(
        shift_z=np.array([np.nan, np.nan, np.nan, np.nan]),
        pair_verdicts=np.array(["covariance", "covariance", "covariance", "bulk"]),
        stable=np.array([True, True, True, False]),
        groups=np.zeros(N, dtype=np.int64),
        group_p_value=0.5,
    )
    back = open_result(res.to_zarr(tmp_path / "r.zarr"))
    assert np.isnan(back.shift_z).all()
    assert back.n_groups == 1 and back.group_p_value == 0.5
    assert "nan" in back.summary()


def test_open_result__reads_a_store_written_before_verdicts_and_groups(
    res: MSPCAResult, tmp_path
) -> None:
    from mspca_dask.io import write_dataset_atomic

    ds = res.to_dataset().drop_vars(["verdict", "group"])
    del ds.attrs["group_p_value"]
    back = open_result(write_dataset_atomic(ds, tmp_path / "old.zarr"))
    assert back.pair_verdicts is None and back.groups is None and back.group_p_value is None
    assert back.verdicts.tolist() == ["covariance", "mean shift", "covariance", "bulk"]
    assert not back.displaced.any()
    assert "groups =" not in back.summary()
    # and it is written back as it was read: without them
    again = back.to_dataset()
    assert "verdict" not in again and "group" not in again
    assert "group_p_value" not in again.attrs


def test_to_dataset__omits_total_variance_of_an_older_result(tmp_path) -> None:
    res = make_result(total_variance=None)  # as read from a store written before it
    assert "total_variance" not in res.to_dataset().attrs
    assert open_result(res.to_zarr(tmp_path / "old.zarr")).total_variance is None
    assert make_result().to_dataset().attrs["total_variance"] == 24.75


def test_to_dataset__custom_dim_names() -> None:
    ds = make_result(sample_dim="cells", feature_dim="genes").to_dataset()
    assert ds["score"].dims == ("cells", "component")
    assert ds["eigenvector"].dims == ("component", "genes")
    assert ds["location"].dims == ("genes",)


def test_to_dataset__numpy_params_are_encoded() -> None:
    res = make_result(params={"k": np.int64(3), "w": np.float32(0.5), "v": np.arange(2)})
    assert json.loads(res.to_dataset().attrs["params"]) == {"k": 3, "w": 0.5, "v": [0, 1]}


def test_to_dataset__raises_on_unserialisable_params() -> None:
    with pytest.raises(InputError, match="params must be JSON-serialisable"):
        make_result(params={"f": object()}).to_dataset()


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"has_location": False},
        {"random_state": None},
        {"coords": False},
        {"has_location": False, "random_state": None, "coords": False},
        {"sample_dim": "cells", "feature_dim": "genes"},
        {"random_state": 0},
        OLD_STYLE,
    ],
)
def test_from_dataset__round_trip_is_exact(kwargs: dict) -> None:
    res = make_result(**kwargs)
    back = MSPCAResult.from_dataset(res.to_dataset())
    assert_results_equal(res, back)
    assert back.reasons.dtype == object


def test_from_dataset__float32_round_trip_keeps_dtype() -> None:
    res = make_result(
        eigenvectors=make_result().eigenvectors.astype(np.float32),
        scores=make_result().scores.astype(np.float32),
    )
    back = MSPCAResult.from_dataset(res.to_dataset())
    assert back.eigenvectors.dtype == np.float32
    assert_results_equal(res, back)


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda ds: ds.drop_vars("eigenvalue"), "lacks the variable 'eigenvalue'"),
        (lambda ds: ds.drop_vars("reason"), "lacks the variable 'reason'"),
        (
            lambda ds: ds.assign(stable=ds["stable"].astype(float)),
            "variable 'stable' must have a dtype of kind 'b'",
        ),
        (
            lambda ds: ds.assign(score=ds["score"].transpose()),
            r"variable 'score' must have dims \('samples', 'component'\)",
        ),
        (
            lambda ds: ds.assign(location=("samples", np.zeros(N))),
            "variable 'location' must have dims",
        ),
        (lambda ds: ds.drop_attrs(), "lacks the attribute 'noise_variance'"),
        (
            lambda ds: ds.assign_attrs(n_passes="2"),
            "attribute 'n_passes' must be a int",
        ),
        (
            lambda ds: ds.assign_attrs(threshold=True),
            "attribute 'threshold' must be a float",
        ),
        (
            lambda ds: ds.assign_attrs(n_samples=N + 1),
            "'n_samples' = 21 does not match the size of its dimension 'samples'",
        ),
        (
            lambda ds: ds.assign_attrs(mspca_schema_version=SCHEMA_VERSION + 1),
            "newer than this mspca_dask understands",
        ),
        (
            lambda ds: ds.assign(group=("component", np.zeros(K, dtype=int))),
            r"variable 'group' must have dims \('samples',\)",
        ),
        (
            lambda ds: ds.assign(verdict=("component", np.ones(K))),
            "variable 'verdict' must have a dtype of kind",
        ),
        (
            lambda ds: ds.assign_attrs(group_p_value="0.01"),
            "attribute 'group_p_value' must be a float",
        ),
        (lambda ds: ds.assign_attrs(params="[1, 2]"), "'params' must be a JSON object"),
        (lambda ds: ds.assign_attrs(params="{oops"), "'params' is not valid JSON"),
    ],
)
def test_from_dataset__raises_naming_the_bad_variable(res: MSPCAResult, mutate, match) -> None:
    ds = mutate(res.to_dataset())
    with pytest.raises(InputError, match=match):
        MSPCAResult.from_dataset(ds)


def test_validate_result_dataset__raises_on_non_dataset(res: MSPCAResult) -> None:
    with pytest.raises(DTypeError, match="expected an xarray.Dataset"):
        validate_result_dataset(res.to_dataset()["score"])  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------- zarr


@pytest.mark.parametrize(
    "kwargs", [{}, {"has_location": False, "random_state": None, "coords": False}, OLD_STYLE]
)
def test_to_zarr__open_result_round_trip(kwargs: dict, tmp_path) -> None:
    res = make_result(**kwargs)
    path = tmp_path / "res.zarr"
    written = res.to_zarr(path)
    assert os.path.isdir(written)
    back = open_result(written)
    assert_results_equal(res, back)
    assert back.reasons.dtype == object
    assert all(type(r) is str for r in back.reasons)
    if res.sample_coords is not None:
        assert back.sample_coords.tolist() == res.sample_coords.tolist()


def test_to_zarr__refuses_to_overwrite_unless_asked(res: MSPCAResult, tmp_path) -> None:
    path = str(tmp_path / "res.zarr")
    res.to_zarr(path)
    other = make_result(threshold=0.25)
    with pytest.raises(ResultExistsError, match="already exists"):
        other.to_zarr(path)
    assert open_result(path).threshold == 0.1
    other.to_zarr(path, overwrite=True)
    assert open_result(path).threshold == 0.25


def test_open_result__raises_on_missing_store(tmp_path) -> None:
    from mspca_dask.errors import SourceNotFoundError

    with pytest.raises(SourceNotFoundError, match="no result store"):
        open_result(tmp_path / "nothing.zarr")


# ------------------------------------------------------------------------------- display


def test_summary__lists_every_eigenpair(res: MSPCAResult) -> None:
    text = res.summary()
    for reason in REASONS:
        assert reason in text
    for verdict in set(VERDICTS):
        assert verdict in text
    for needle in (
        "n = 20",
        "d = 6",
        "1.0625",
        "Marchenko–Pastur edge = 3",
        "ε = 0.1",
        "θ'² = 7.625",
        "solver = exact",
        "passes = 2",
    ):
        assert needle in text, needle
    rows = [line for line in text.splitlines() if line[:1].isdigit()]
    assert len(rows) == K
    assert rows[1].split()[1] == "6.25"
    # every column is explained under the table
    footer = text.splitlines()[-1]
    for column in ("knockoff", "displacement", "overlap", "bound", "shift z", "verdict"):
        assert f"{column} =" in footer or f"{column}," in footer, column
    # what each verdict means, and what a NaN shift z is
    for verdict in ("covariance (", "mean shift (", "mixed (", "undetermined (", "bulk ("):
        assert verdict in footer, verdict
    assert "nan: no displaced group" in footer


def test_summary__header_counts_verdicts_and_groups(res: MSPCAResult) -> None:
    text = res.summary()
    assert "K = 4 eigenpairs (1 covariance, 1 mean shift, 1 mixed)" in text
    assert "groups = 3 (6 displaced samples, group test p = 0.0125, about the origin" in text
    assert "about the origin" not in make_result(group_centre=None).summary()
    assert "within the groups read from" not in make_result(within_samples=N).summary()
    old = make_result(**OLD_STYLE).summary()
    assert "(2 covariance, 1 mean shift)" in old
    assert "groups =" not in old


def test_repr__is_short(res: MSPCAResult) -> None:
    assert repr(res) == "MSPCAResult(n_samples=20, n_features=6, n_components=4, n_stable=2)"


def test_repr_html__is_an_escaped_table(res: MSPCAResult) -> None:
    out = res._repr_html_()
    assert isinstance(out, str)
    assert "<table>" in out and out.count("<tr>") == K + 1
    assert "&lt;&amp;&gt;" in out and "<&>" not in out
    assert "mean shift" in out


# ---------------------------------------------------------------------------------- plot


@pytest.fixture
def mpl():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    return matplotlib


def test_plot__draws_edge_and_saves_png(res: MSPCAResult, mpl, tmp_path) -> None:
    from matplotlib.figure import Figure

    fig = res.plot()
    assert isinstance(fig, Figure)
    (ax,) = fig.axes
    edges = [
        line
        for line in ax.get_lines()
        if list(line.get_ydata()) == [res.mp_edge, res.mp_edge] and line.get_linestyle() == "--"
    ]
    assert len(edges) == 1
    assert edges[0].get_label() == "Marchenko–Pastur edge"
    labels = ax.get_legend_handles_labels()[1]
    for needle in ("covariance", "mean shift", "mixed", "bulk", "knockoff eigenvalues"):
        assert needle in labels
    out = tmp_path / "plot.png"
    fig.savefig(out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot__spectrum_is_on_a_log_axis(res: MSPCAResult, mpl) -> None:
    (ax,) = res.plot().axes
    assert ax.get_yscale() == "log"


def test_plot__scores_of_two_pairs_coloured_by_labels_or_values(res: MSPCAResult, mpl) -> None:
    n = res.scores.shape[0]
    labels = np.where(np.arange(n) % 3 == 0, "batch A", "batch B")
    (ax,) = res.plot(kind="scores", pairs=(0, 2), color=labels).axes
    assert ax.get_xlabel() == f"eigenpair 0 ({res.verdicts[0]})"
    assert ax.get_ylabel() == f"eigenpair 2 ({res.verdicts[2]})"
    assert ax.get_legend_handles_labels()[1] == ["batch A", "batch B"]
    plotted = np.vstack([c.get_offsets() for c in ax.collections])
    assert sorted(map(tuple, plotted)) == sorted(map(tuple, res.scores[:, [0, 2]]))
    fig = res.plot(kind="scores", color=np.arange(n, dtype=float))
    assert len(fig.axes) == 2  # the scores and their colour bar


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"kind": "pie"}, "kind must be"),
        ({"kind": "scores", "pairs": (0, 0)}, "two different indices"),
        ({"kind": "scores", "pairs": (0, K)}, "two different indices"),
        ({"kind": "scores", "color": np.zeros(3)}, "one value per sample"),
    ],
)
def test_plot__refuses_bad_arguments(res: MSPCAResult, mpl, kw, match) -> None:
    with pytest.raises(ParameterError, match=match):
        res.plot(**kw)


def test_plot__uses_given_axes(res: MSPCAResult, mpl) -> None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    try:
        assert res.plot(ax=ax) is fig
        assert any("Marchenko" in t for t in ax.get_legend_handles_labels()[1])
    finally:
        plt.close(fig)


def test_plot__without_stable_or_knockoffs(mpl) -> None:
    res = make_result(
        stable=np.zeros(K, dtype=bool),
        pair_verdicts=np.array(["undetermined", "mean shift", "mean shift", "bulk"]),
        knockoff_eigenvalues_all=np.empty((0, K)),
        knockoff_match=None,
    )
    labels = res.plot().axes[0].get_legend_handles_labels()[1]
    assert "covariance" not in labels and "±ε around stable eigenvalues" not in labels
    assert "undetermined" in labels
