"""``mspca fit`` on AnnData sources: ``--layer``, ``--mask-obs`` and ``--mask-var``, in process."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

import mspca_dask
from mspca_dask.cli import EXIT_OK, EXIT_USAGE, main
from mspca_dask.testing import paper_setting

ad = pytest.importorskip("anndata")
sp = pytest.importorskip("scipy.sparse")

N, D, K = 300, 120, 3
#: Small and fast: the fit's own tuning is tested elsewhere.
TUNING = ["-k", str(K), "--knockoffs", "2", "--location", "none", "--seed", "0"]


@pytest.fixture(scope="module")
def adata() -> ad.AnnData:
    """The paper's mixture as cells: ``X`` is noise only, the layer ``"signal"`` the data;
    ``obs["keep"]`` drops a tenth of the cells, ``var["highly_variable"]`` a seventh of
    the genes."""
    X = paper_setting(pi1=0.1, n_samples=N, n_features=D, random_state=3).to_numpy()
    obs = pd.DataFrame(
        {"keep": np.arange(N) % 10 != 0, "batch": np.arange(N) % 2},
        index=[f"cell{i}" for i in range(N)],
    )
    var = pd.DataFrame(
        {"highly_variable": np.arange(D) % 7 != 0}, index=[f"gene{j}" for j in range(D)]
    )
    noise = np.random.default_rng(0).standard_normal((N, D))
    data = ad.AnnData(X=noise, obs=obs, var=var)
    data.layers["signal"] = sp.csr_matrix(X)
    return data


@pytest.fixture(scope="module")
def h5ad(adata: ad.AnnData, tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("cli-anndata") / "cells.h5ad"
    adata.write_h5ad(path)
    return str(path)


@pytest.fixture(scope="module")
def zarr_array(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A plain Zarr array (not AnnData)."""
    import zarr

    path = tmp_path_factory.mktemp("cli-zarr") / "plain.zarr"
    zarr.save_array(str(path), np.random.default_rng(1).standard_normal((40, 10)))
    return str(path)


def test_fit_cli__layer_and_masks_select_cells_and_genes(adata, h5ad, tmp_path, capsys):
    out = tmp_path / "result.zarr"
    argv = ["fit", h5ad, "--out", str(out), "--layer", "signal"]
    argv += ["--mask-obs", "keep", "--mask-var", "highly_variable", *TUNING]
    assert main(argv) == EXIT_OK
    assert "result written to" in capsys.readouterr().out

    res = mspca_dask.open_result(out)
    keep_obs, keep_var = adata.obs["keep"].to_numpy(), adata.var["highly_variable"].to_numpy()
    assert (res.n_samples, res.n_features) == (keep_obs.sum(), keep_var.sum())
    assert list(res.sample_coords) == list(adata.obs_names[keep_obs])
    assert list(res.feature_coords) == list(adata.var_names[keep_var])
    assert res.params["layer"] == "signal"
    # the same fit as the Python call with the same selection
    ref = mspca_dask.fit(
        adata,
        n_components=K,
        n_knockoffs=2,
        location=None,
        random_state=0,
        layer="signal",
        mask_obs="keep",
        mask_var="highly_variable",
    )
    np.testing.assert_allclose(res.eigenvalues, ref.eigenvalues, rtol=1e-10)
    np.testing.assert_array_equal(res.verdicts, ref.verdicts)
    assert res.candidate.any()  # the signal layer was read: X alone is noise, with no spike


def test_fit_cli__without_layer_reads_x(adata, h5ad, tmp_path):
    out = tmp_path / "result.zarr"
    assert main(["fit", h5ad, "--out", str(out), *TUNING]) == EXIT_OK
    res = mspca_dask.open_result(out)
    assert (res.n_samples, res.n_features) == (N, D)
    assert res.params.get("layer") is None


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (["--layer", "signal"], r"--layer only applies to AnnData sources .* leave it out"),
        (
            ["--mask-obs", "keep", "--mask-var", "highly_variable"],
            r"--mask-obs and --mask-var only apply to AnnData sources .*Zarr array; leave "
            r"them out",
        ),
    ],
)
def test_fit_cli__anndata_options_refused_for_other_sources(
    zarr_array, tmp_path, capsys, options, expected
):
    out = tmp_path / "result.zarr"
    assert main(["fit", zarr_array, "--out", str(out), *options, *TUNING]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("mspca: error: ")
    assert re.search(expected, err), err
    assert not out.exists()


def test_fit__anndata_options_for_an_array_raise_typed_error(zarr_array):
    with pytest.raises(mspca_dask.NotAnnDataError, match=r"mask_var= only applies") as info:
        mspca_dask.fit(zarr_array, mask_var="highly_variable")
    assert info.value.options == ("mask_var",)
    assert info.value.found == "Zarr array"
    assert isinstance(info.value, mspca_dask.InputError)


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (["--layer", "nope"], r"layer 'nope' is not a layer of .*'signal'"),
        (["--mask-obs", "nope"], r"mask_obs='nope' is not a column of obs"),
        (["--mask-obs", "batch"], r"mask_obs: obs column 'batch' must be a boolean mask"),
    ],
)
def test_fit_cli__bad_layer_or_mask_column_is_a_usage_error(
    h5ad, tmp_path, capsys, options, expected
):
    out = tmp_path / "result.zarr"
    assert main(["fit", h5ad, "--out", str(out), *options, *TUNING]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert re.search(expected, err), err
    assert not out.exists()


def test_fit_cli__help_lists_the_anndata_options(capsys):
    assert main(["fit", "--help"]) == EXIT_OK
    text = capsys.readouterr().out
    for flag in ("--layer NAME", "--mask-obs COLUMN", "--mask-var COLUMN", ".h5ad"):
        assert flag in text
