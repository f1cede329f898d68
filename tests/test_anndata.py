"""AnnData input (objects, .h5ad files, AnnData Zarr stores) and results stored back in it.

Every fit of an AnnData is compared with the dense fit of the same matrix: the passes see the
same dense chunks, so eigenvalues and verdicts are equal exactly and eigenvectors up to sign.
"""

from __future__ import annotations

import sys
import warnings

import dask.array as da
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from dask.callbacks import Callback
from simulations import weaker_spike_lifted

import mspca_dask
from mspca_dask.errors import (
    DTypeError,
    InputError,
    MissingDependencyError,
    ResultExistsError,
    ShapeError,
    SourceNotFoundError,
    VariableNotFoundError,
)
from mspca_dask.io import open_source
from mspca_dask.testing import make_spiked_mixture, paper_setting

ad = pytest.importorskip("anndata")

N, D, K = 300, 200, 4
ZARR_NOTICES = (
    "Writing zarr v2 data will no longer be the default",
    "zarr v3 autosharding will be the default",
    "Automatic shard shape inference is experimental",
    "Consolidated metadata is currently not part in the Zarr format 3 specification",
)


class _CountTasks(Callback):
    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def _pretask(self, key, dsk, state):  # noqa: ANN001
        self.n += 1


@pytest.fixture(scope="module")
def X() -> np.ndarray:
    """One covariance spike and one 10 % mean-shift cluster, float32 as single-cell data."""
    model = paper_setting(pi1=0.1, n_samples=N, n_features=D, random_state=1)
    return model.to_numpy().astype(np.float32)


@pytest.fixture(scope="module")
def keep() -> tuple[np.ndarray, np.ndarray]:
    return np.arange(N) % 10 != 0, np.arange(D) % 7 != 0


def _fit(source, **kwargs):  # noqa: ANN001, ANN202
    """The fit compared: ``location=None`` (the paper's setting) skips the two passes of the
    inlier location, which read the data as the others do; one test keeps ``"auto"``."""
    kwargs.setdefault("location", None)
    return mspca_dask.fit(source, n_components=K, random_state=0, **kwargs)


@pytest.fixture(scope="module")
def dense_fit(X):  # noqa: ANN001, ANN201
    return _fit(X)


def _adata(X: np.ndarray, keep: tuple[np.ndarray, np.ndarray]) -> ad.AnnData:
    obs = pd.DataFrame(
        {"keep": keep[0], "group": pd.Categorical(np.array(["a", "b", "c"])[np.arange(N) % 3])},
        index=[f"cell{i}" for i in range(N)],
    )
    var = pd.DataFrame({"highly_variable": keep[1]}, index=[f"gene{j}" for j in range(D)])
    adata = ad.AnnData(X=sp.csr_matrix(X), obs=obs, var=var)
    adata.layers["csc"] = sp.csc_matrix(X)
    adata.layers["dense"] = X.copy()
    adata.layers["counts"] = sp.csr_matrix(np.rint(np.abs(X) * 3).astype(np.int32))
    return adata


@pytest.fixture
def adata(X, keep) -> ad.AnnData:  # noqa: ANN001
    return _adata(X, keep)


@pytest.fixture(scope="module")
def stores(X, keep, tmp_path_factory) -> dict[str, str]:  # noqa: ANN001
    """The same AnnData as an .h5ad file and as Zarr stores of format 3 and 2."""
    base = tmp_path_factory.mktemp("anndata")
    adata = _adata(X, keep)
    paths = {"h5ad": str(base / "cells.h5ad")}
    adata.write_h5ad(paths["h5ad"])
    for fmt in (3, 2):
        paths[f"zarr{fmt}"] = str(base / f"cells-v{fmt}.zarr")
        _write_zarr(adata, paths[f"zarr{fmt}"], fmt)
    return paths


def _write_zarr(adata: ad.AnnData, path: object, fmt: int) -> None:
    """``adata.write_zarr`` in format ``fmt`` (v3 sharded, anndata's next default).

    Ignored: anndata's and zarr's notices about their defaults to come (v2 no longer the
    default, sharding to become it and its shard shapes, consolidated metadata outside the
    v3 specification); the format is chosen here on purpose.
    """
    settings: dict[str, object] = {}
    if hasattr(ad.settings, "auto_shard_zarr_v3"):  # first: v2 refuses sharding on
        settings["auto_shard_zarr_v3"] = fmt == 3
    settings["zarr_write_format"] = fmt
    with ad.settings.override(**settings), warnings.catch_warnings():
        for notice in ZARR_NOTICES:
            warnings.filterwarnings("ignore", notice, UserWarning)
        adata.write_zarr(path)


def assert_same_fit(res, ref, rtol: float = 0.0) -> None:  # noqa: ANN001
    np.testing.assert_allclose(res.eigenvalues, ref.eigenvalues, rtol=rtol, atol=0)
    np.testing.assert_array_equal(res.stable, ref.stable)
    np.testing.assert_array_equal(res.verdicts, ref.verdicts)
    signs = np.sign(np.sum(res.eigenvectors * ref.eigenvectors, axis=1))
    np.testing.assert_allclose(res.eigenvectors * signs[:, None], ref.eigenvectors, atol=1e-12)


# ------------------------------------------------------------------ same answer as dense


def test_fit__anndata_with_auto_location_matches_dense():
    # a shift far above the detection limit, so that the groups and the location are in play
    model = make_spiked_mixture(
        N, D, covariance_spikes=(6.0,), mean_shift_weights=(0.1,),
        mean_shift_strengths=(8.0,), random_state=1,
    )  # fmt: skip
    X = model.to_numpy().astype(np.float32)
    ref = _fit(X, location="auto")
    assert ref.verdicts[0] == "mean shift" and ref.n_groups == 2
    assert_same_fit(_fit(ad.AnnData(sp.csr_matrix(X)), location="auto"), ref)


@pytest.mark.parametrize("layer", [None, "csc", "dense"])
def test_fit__anndata_matches_dense(adata, dense_fit, layer):
    res = _fit(adata, layer=layer)
    assert_same_fit(res, dense_fit)
    assert res.sample_coords[0] == "cell0" and res.feature_coords[-1] == f"gene{D - 1}"
    assert res.params["layer"] == layer


@pytest.mark.parametrize("store", ["h5ad", "zarr3", "zarr2"])
@pytest.mark.parametrize("layer", [None, "csc", "dense"])
def test_fit__anndata_file_or_store_matches_dense(stores, dense_fit, store, layer):
    res = _fit(stores[store], layer=layer)
    # a dense array on disk is read in the chunks its writer chose (anndata's defaults differ
    # across releases), so the passes may sum in another order than the in-memory reference:
    # equal to rounding, not always bit for bit
    assert_same_fit(res, dense_fit, rtol=1e-12)
    assert list(res.sample_coords[:2]) == ["cell0", "cell1"]


def test_fit__anndata_integer_counts_layer_matches_dense(adata, stores):
    counts = adata.layers["counts"].toarray()
    ref = mspca_dask.fit(counts, n_components=2, location=None, random_state=0)
    for source in (adata, stores["h5ad"], stores["zarr3"]):
        res = mspca_dask.fit(source, n_components=2, location=None, layer="counts")
        np.testing.assert_array_equal(res.eigenvalues, ref.eigenvalues)


@pytest.mark.parametrize("source", ["object", "h5ad", "zarr3"])
@pytest.mark.parametrize("by", ["column", "array"])
def test_fit__masks_match_dense_fit_of_the_subset(adata, stores, X, keep, source, by):
    ref = _fit(X[keep[0]][:, keep[1]])
    masks = (
        {"mask_obs": "keep", "mask_var": "highly_variable"}
        if by == "column"
        else {"mask_obs": keep[0], "mask_var": keep[1]}
    )
    res = _fit(adata if source == "object" else stores[source], **masks)
    assert_same_fit(res, ref)
    np.testing.assert_array_equal(res.sample_coords, adata.obs_names[keep[0]])
    np.testing.assert_array_equal(res.feature_coords, adata.var_names[keep[1]])
    assert "270 of 300 observations and 171 of 200 variables" in res.params["source"]


def test_fit__dask_and_backed_anndata_match_dense(adata, stores, dense_fit, X):
    adata.X = da.from_array(adata.X, chunks=(70, D), asarray=False)
    assert_same_fit(_fit(adata), _fit(da.from_array(X, chunks=(70, D))))
    backed = ad.read_h5ad(stores["h5ad"], backed="r")
    try:
        assert_same_fit(_fit(backed), dense_fit)
    finally:
        backed.file.close()


# ------------------------------------------------------------------------------ laziness


@pytest.mark.parametrize("store", ["h5ad", "zarr3"])
@pytest.mark.parametrize("layer", [None, "dense"])
def test_open_source__anndata_store_computes_nothing(stores, store, layer):
    with _CountTasks() as counter:
        src = open_source(stores[store], layer=layer, mask_obs="keep")
    assert counter.n == 0
    assert src.data.shape == (270, D)


def test_open_source__sparse_store_chunks_are_sparse_rows_of_bounded_dense_size(stores):
    import dask

    with dask.config.set({"array.chunk-size": "64KiB"}):
        src = open_source(stores["zarr3"])
    assert src.kind == "anndata"
    assert isinstance(src.data._meta, sp.csr_matrix)
    assert src.data.numblocks == (len(src.data.chunks[0]), 1) and src.data.numblocks[0] > 1
    assert max(src.data.chunks[0]) * D * 4 <= 64 * 1024


def test_open_source__dense_zarr_layer_uses_the_package_reader(stores):
    src = open_source(stores["zarr3"], layer="dense")
    assert src.kind == "zarr"
    assert src.description.startswith("layer 'dense' of the AnnData Zarr store")


# --------------------------------------------------------------------------- bad input


def test_open_source__raises_on_unknown_layer(adata, stores):
    for source in (adata, stores["h5ad"], stores["zarr3"]):
        with pytest.raises(VariableNotFoundError, match=r"layer 'raw' is not a layer of .*'csc'"):
            open_source(source, layer="raw")


def test_open_source__raises_on_variable_for_anndata(adata, stores):
    for source in (adata, stores["zarr3"]):
        with pytest.raises(InputError, match=r"variable='X' was given .* chosen with layer="):
            open_source(source, variable="X")


def test_open_source__raises_without_x(adata):
    adata.X = None
    with pytest.raises(VariableNotFoundError, match=r"the AnnData has no X; pass layer="):
        open_source(adata)


@pytest.mark.parametrize(
    ("masks", "error", "message"),
    [
        ({"mask_obs": "nope"}, VariableNotFoundError, r"mask_obs='nope' is not a column of obs"),
        ({"mask_var": "keep"}, VariableNotFoundError, r"mask_var='keep' is not a column of var"),
        ({"mask_obs": "group"}, DTypeError, r"mask_obs: obs column 'group' must be boolean"),
        ({"mask_obs": np.arange(N)}, DTypeError, r"mask_obs must be a boolean mask"),
        ({"mask_var": np.ones(D - 1, bool)}, ShapeError, r"one entry per var \(200\)"),
        ({"mask_obs": np.arange(N) == 3}, ShapeError, r"at least 2 samples are needed"),
    ],
)
def test_open_source__raises_on_bad_mask(adata, stores, masks, error, message):
    for source in (adata, stores["h5ad"]):
        with pytest.raises(error, match=message):
            open_source(source, **masks)


def test_open_source__raises_on_missing_or_foreign_h5ad(tmp_path):
    with pytest.raises(SourceNotFoundError, match="no file at"):
        open_source(tmp_path / "absent.h5ad")
    (tmp_path / "text.h5ad").write_text("not HDF5")
    with pytest.raises(SourceNotFoundError, match=r"is not an HDF5 \(.h5ad\) file"):
        open_source(tmp_path / "text.h5ad")


def test_open_source__raises_missing_dependency_without_anndata(stores, monkeypatch):
    monkeypatch.setitem(sys.modules, "anndata", None)  # `import anndata` now fails
    for store in ("h5ad", "zarr3"):
        with pytest.raises(
            MissingDependencyError, match=r"needs the optional dependency anndata.*\[anndata\]"
        ):
            open_source(stores[store])
    with pytest.raises(ImportError, match="anndata"):  # and it is an ImportError
        mspca_dask.fit(stores["h5ad"])


# -------------------------------------------------------------------- results stored back


def test_add_to_anndata__stores_scores_loadings_and_verdicts(adata):
    res = _fit(adata)
    mspca_dask.add_to_anndata(res, adata)
    stable = res.stable
    np.testing.assert_array_equal(adata.obsm["X_mspca"], res.scores[:, stable])
    np.testing.assert_array_equal(adata.varm["MSPCA"], res.components.T)
    uns = adata.uns["mspca"]
    np.testing.assert_array_equal(uns["eigenvalues"], res.eigenvalues)
    np.testing.assert_array_equal(uns["stable"], stable)
    assert list(uns["verdicts"]) == list(res.verdicts)
    assert list(uns["stable_components"]) == list(np.flatnonzero(stable))
    np.testing.assert_array_equal(uns["shift_z"], res.shift_z)
    np.testing.assert_array_equal(uns["groups"], res.groups)
    assert uns["group_p_value"] == res.group_p_value
    assert uns["params"]["n_components"] == K and "variable" not in uns["params"]  # None


def test_add_to_anndata__stores_the_components_in_their_order_within_the_groups():
    # a 10 % group shifted along the weaker of two spikes makes that pair mixed and lifts it
    # first by eigenvalue; the columns follow res.components, stronger spike first
    X, U = weaker_spike_lifted(0)
    res = mspca_dask.fit(X, random_state=0)
    adata = ad.AnnData(X.astype(np.float32))
    mspca_dask.add_to_anndata(res, adata)
    order = res.component_index
    assert order.tolist() != np.flatnonzero(res.stable).tolist()
    assert list(adata.uns["mspca"]["stable_components"]) == order.tolist()
    np.testing.assert_array_equal(adata.obsm["X_mspca"], res.scores[:, order])
    np.testing.assert_array_equal(adata.varm["MSPCA"], res.components.T)
    assert abs(adata.varm["MSPCA"][:, 0] @ U[:, 0]) > 0.9


def test_add_to_anndata__round_trips_through_h5ad_and_zarr(adata, tmp_path):
    mspca_dask.add_to_anndata(_fit(adata), adata)
    adata.write_h5ad(tmp_path / "out.h5ad")
    _write_zarr(adata, tmp_path / "out.zarr", 3)
    for back in (ad.read_h5ad(tmp_path / "out.h5ad"), ad.read_zarr(tmp_path / "out.zarr")):
        np.testing.assert_array_equal(back.obsm["X_mspca"], adata.obsm["X_mspca"])
        assert list(back.uns["mspca"]["verdicts"]) == list(adata.uns["mspca"]["verdicts"])
        np.testing.assert_array_equal(back.uns["mspca"]["groups"], adata.uns["mspca"]["groups"])


def test_add_to_anndata__masked_fit_leaves_nan_scores_and_zero_loadings(adata, keep):
    res = _fit(adata, mask_obs="keep", mask_var="highly_variable")
    mspca_dask.add_to_anndata(res, adata)
    scores, loadings = adata.obsm["X_mspca"], adata.varm["MSPCA"]
    assert np.isnan(scores[~keep[0]]).all() and not np.isnan(scores[keep[0]]).any()
    np.testing.assert_array_equal(scores[keep[0]], res.scores[:, res.stable])
    groups = adata.uns["mspca"]["groups"]  # -1: left out of the fit
    assert (groups[~keep[0]] == -1).all()
    np.testing.assert_array_equal(groups[keep[0]], res.groups)
    assert (loadings[~keep[1]] == 0).all()
    np.testing.assert_array_equal(loadings[keep[1]], res.components.T)


def test_add_to_anndata__matches_rows_of_a_reopened_result_by_name(adata, tmp_path):
    res = _fit(adata, mask_obs="keep")
    res.to_zarr(tmp_path / "res.zarr")
    mspca_dask.add_to_anndata(mspca_dask.open_result(tmp_path / "res.zarr"), adata)
    kept = adata.obs["keep"].to_numpy()
    np.testing.assert_array_equal(adata.obsm["X_mspca"][kept], res.scores[:, res.stable])


def test_add_to_anndata__an_older_result_has_no_groups(adata, tmp_path):
    from mspca_dask.io import write_dataset_atomic

    ds = _fit(adata).to_dataset().drop_vars(["verdict", "group"])
    del ds.attrs["group_p_value"]
    old = mspca_dask.open_result(write_dataset_atomic(ds, tmp_path / "old.zarr"))
    mspca_dask.add_to_anndata(old, adata)
    uns = adata.uns["mspca"]
    assert "groups" not in uns and "group_p_value" not in uns
    assert set(uns["verdicts"]) <= {"covariance", "mean shift", "bulk"}


def test_add_to_anndata__refuses_existing_keys_and_writes_nothing(adata):
    res = _fit(adata)
    adata.obsm["X_mspca"] = np.zeros((N, 1))
    with pytest.raises(ResultExistsError, match=r"adata.obsm\['X_mspca'\] already exists"):
        mspca_dask.add_to_anndata(res, adata)
    assert "MSPCA" not in adata.varm and "mspca" not in adata.uns
    mspca_dask.add_to_anndata(res, adata, overwrite=True)
    np.testing.assert_array_equal(adata.obsm["X_mspca"], res.scores[:, res.stable])


def test_add_to_anndata__key_added_names_all_three_as_scanpy(adata):
    mspca_dask.add_to_anndata(_fit(adata), adata, key_added="mspca_hvg")
    assert "mspca_hvg" in adata.obsm and "mspca_hvg" in adata.varm and "mspca_hvg" in adata.uns
    assert "X_mspca" not in adata.obsm


def test_add_to_anndata__raises_on_other_data_and_views(adata, X):
    labelled = _fit(adata)
    other = adata.copy()
    other.obs_names = [f"other{i}" for i in range(N)]
    with pytest.raises(InputError, match=r"300 of the result's 300 labels are not obs_names"):
        mspca_dask.add_to_anndata(labelled, other)
    unlabelled = mspca_dask.fit(X[:100], n_components=2, random_state=0)
    with pytest.raises(ShapeError, match=r"the result has 100 samples and no labels"):
        mspca_dask.add_to_anndata(unlabelled, adata)
    with pytest.raises(InputError, match=r"adata is a view"):
        mspca_dask.add_to_anndata(labelled, adata[:10])
    with pytest.raises(InputError, match=r"adata must be an anndata.AnnData"):
        mspca_dask.add_to_anndata(labelled, X)
    assert "X_mspca" not in other.obsm and "X_mspca" not in adata.obsm


# ------------------------------------------------------------------ scanpy's shipped data


@pytest.mark.filterwarnings("ignore::mspca_dask.MSPCAWarning")  # real cells, not the model
def test_fit__pbmc68k_reduced_file_and_sparse_match_dense():
    sc = pytest.importorskip("scanpy")
    from pathlib import Path

    path = Path(sc.datasets.__file__).parent / "10x_pbmc68k_reduced.h5ad"
    if not path.is_file():
        pytest.skip("this scanpy does not ship pbmc68k_reduced")
    adata = sc.datasets.pbmc68k_reduced()  # an old .h5ad: X has no encoding metadata
    dense = np.asarray(adata.X)
    ref = mspca_dask.fit(dense, n_components=8, location=None, random_state=0)
    from_file = mspca_dask.fit(str(path), n_components=8, location=None, random_state=0)
    assert_same_fit(from_file, ref)
    np.testing.assert_array_equal(from_file.sample_coords, adata.obs_names)
    adata.X = sp.csr_matrix(dense)
    assert_same_fit(mspca_dask.fit(adata, n_components=8, location=None, random_state=0), ref)
