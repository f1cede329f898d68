"""Tests of mspca_dask.io: opening sources lazily and the atomic result store."""

from __future__ import annotations

import os
import pickle
import re
import uuid

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
import zarr
from dask.callbacks import Callback

from mspca_dask import io
from mspca_dask.errors import (
    ChunkReadError,
    DTypeError,
    ForeignOutputError,
    InputError,
    MSPCAError,
    ResultExistsError,
    ShapeError,
    SourceNotFoundError,
    VariableNotFoundError,
)
from mspca_dask.io import writing

N, D = 12, 5


@pytest.fixture
def X() -> np.ndarray:
    return np.arange(N * D, dtype=np.float64).reshape(N, D) / 7.0


@pytest.fixture
def sample_labels() -> np.ndarray:
    return np.array([f"s{i}" for i in range(N)])


@pytest.fixture
def feature_labels() -> np.ndarray:
    return np.arange(D) * 10


class _CountTasks(Callback):
    """Counts the tasks dask runs (any scheduler that honours local callbacks)."""

    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def _pretask(self, key, dsk, state):  # noqa: ANN001
        self.n += 1


def _exploding_dask(shape=(N, D), chunks=(4, D), dtype=np.float64) -> da.Array:
    """A Dask array whose every chunk raises if it is ever computed."""

    def boom(block_info=None):  # noqa: ANN001
        raise AssertionError("a chunk was computed")

    return da.map_blocks(
        boom,
        dtype=dtype,
        chunks=tuple(da.core.normalize_chunks(chunks, shape)),
        meta=np.empty((0, 0), dtype),
    )


def _write_zarr_array(path, data, *, zarr_format=3, chunks=(5, 3), dims=None):
    kwargs = {}
    if dims is not None and zarr_format == 3:
        kwargs["dimension_names"] = dims
    arr = zarr.create_array(
        path,
        shape=data.shape,
        chunks=chunks,
        dtype=data.dtype,
        zarr_format=zarr_format,
        **kwargs,
    )
    arr[...] = data
    if dims is not None and zarr_format == 2:
        arr.attrs["_ARRAY_DIMENSIONS"] = list(dims)
    return arr


def _dataset(X, sample_labels, feature_labels) -> xr.Dataset:
    return xr.Dataset(
        {
            "X": (("samples", "features"), X, {"units": "m"}),
            "y": (("samples",), np.arange(N, dtype=float)),
        },
        coords={"samples": sample_labels.astype(object), "features": feature_labels},
    )


# --------------------------------------------------------------------------------------
# Round trips of every kind of source
# --------------------------------------------------------------------------------------


def test_open_source__numpy_round_trip(X):
    src = io.open_source(X)
    assert src.kind == "numpy"
    assert (src.sample_dim, src.feature_dim) == ("samples", "features")
    assert src.sample_coords is None and src.feature_coords is None
    np.testing.assert_array_equal(src.data.compute(), X)
    assert src.n_samples == N and src.n_features == D
    assert "numpy" in repr(src)


@pytest.mark.parametrize("chunks", [((3, 4, 5), (2, 3)), ((12,), (5,)), ((1, 11), (1, 1, 3))])
def test_open_source__dask_irregular_chunks_round_trip(X, chunks):
    src = io.open_source(da.from_array(X, chunks=chunks))
    assert src.kind == "dask"
    assert src.data.chunks == chunks
    np.testing.assert_array_equal(src.data.compute(), X)


def test_open_source__dataarray_transposed_dims_are_reoriented(X, sample_labels, feature_labels):
    arr = xr.DataArray(
        X.T,
        dims=("genes", "cells"),
        coords={"cells": sample_labels, "genes": feature_labels},
        attrs={"origin": "lab"},
    )
    src = io.open_source(arr, sample_dim="cells")
    assert src.kind == "xarray"
    assert (src.sample_dim, src.feature_dim) == ("cells", "genes")
    np.testing.assert_array_equal(src.data.compute(), X)
    np.testing.assert_array_equal(src.sample_coords, sample_labels)
    np.testing.assert_array_equal(src.feature_coords, feature_labels)
    assert src.attrs == {"origin": "lab"}


def test_open_source__dataarray_without_coords(X):
    src = io.open_source(xr.DataArray(X, dims=("samples", "f")))
    assert src.feature_dim == "f"
    assert src.sample_coords is None and src.feature_coords is None
    np.testing.assert_array_equal(src.data.compute(), X)


def test_open_source__dataset_with_variable(X, sample_labels, feature_labels):
    ds = _dataset(X, sample_labels, feature_labels).chunk({"samples": 5})
    src = io.open_source(ds, variable="X")
    assert src.kind == "xarray"
    assert "'X'" in src.description
    np.testing.assert_array_equal(src.data.compute(), X)
    np.testing.assert_array_equal(src.sample_coords, sample_labels)
    np.testing.assert_array_equal(src.feature_coords, feature_labels)
    assert src.attrs == {"units": "m"}


def test_open_source__dataset_single_variable_needs_no_name(X):
    ds = xr.Dataset({"only": (("samples", "features"), X)})
    np.testing.assert_array_equal(io.open_source(ds).data.compute(), X)


def test_open_source__zarr_v3_root_array(tmp_path, X):
    path = tmp_path / "a.zarr"
    _write_zarr_array(path, X)
    src = io.open_source(path)
    assert src.kind == "zarr"
    assert src.data.chunks == ((5, 5, 2), (3, 2))
    assert str(path) in src.description
    np.testing.assert_array_equal(src.data.compute(), X)
    # The graph name depends on the store and variable only: reopening gives the same graph.
    assert io.open_source(str(path)).data.name == src.data.name


def test_open_source__zarr_v3_group_and_variable(tmp_path, X, sample_labels, feature_labels):
    path = tmp_path / "g.zarr"
    _dataset(X, sample_labels, feature_labels).to_zarr(path, zarr_format=3, consolidated=False)
    src = io.open_source(path, variable="X")
    assert src.description == f"zarr store {path} variable 'X'"
    np.testing.assert_array_equal(src.data.compute(), X)
    assert src.sample_coords.tolist() == sample_labels.tolist()
    np.testing.assert_array_equal(src.feature_coords, feature_labels)
    assert src.attrs["units"] == "m"
    # the group holds exactly one 2-D array, so variable= may be left out
    np.testing.assert_array_equal(io.open_source(path).data.compute(), X)


def test_open_source__zarr_v3_dimension_names_orient(tmp_path, X):
    path = tmp_path / "t.zarr"
    _write_zarr_array(path, X.T.copy(), dims=("features", "samples"))
    src = io.open_source(path)
    assert (src.sample_dim, src.feature_dim) == ("samples", "features")
    np.testing.assert_array_equal(src.data.compute(), X)


def test_open_source__zarr_v2_with_array_dimensions(tmp_path, X):
    path = tmp_path / "v2.zarr"
    group = zarr.open_group(path, mode="w", zarr_format=2)
    arr = group.create_array("M", shape=(D, N), chunks=(2, 5), dtype="f8")
    arr[...] = X.T
    arr.attrs["_ARRAY_DIMENSIONS"] = ["genes", "cells"]
    coord = group.create_array("cells", shape=(N,), dtype="i8")
    coord[...] = np.arange(N) + 100
    coord.attrs["_ARRAY_DIMENSIONS"] = ["cells"]
    src = io.open_source(str(path), variable="M", sample_dim="cells")
    assert (src.sample_dim, src.feature_dim) == ("cells", "genes")
    np.testing.assert_array_equal(src.data.compute(), X)
    np.testing.assert_array_equal(src.sample_coords, np.arange(N) + 100)
    assert src.feature_coords is None
    assert "_ARRAY_DIMENSIONS" not in src.attrs


def test_open_source__zarr_v2_root_array(tmp_path, X):
    path = tmp_path / "v2a.zarr"
    _write_zarr_array(path, X, zarr_format=2)
    np.testing.assert_array_equal(io.open_source(path).data.compute(), X)


def test_open_source__file_url(tmp_path, X):
    path = tmp_path / "u.zarr"
    _write_zarr_array(path, X)
    src = io.open_source(f"file://{path}")
    np.testing.assert_array_equal(src.data.compute(), X)


def test_open_source__memory_url(X):
    url = f"memory://mspca-test-{uuid.uuid4().hex}/m.zarr"
    _write_zarr_array(url, X)
    src = io.open_source(url)
    assert url in src.description
    np.testing.assert_array_equal(src.data.compute(), X)


def test_open_source__zarr_objects_are_read_lazily(tmp_path, X):
    path = tmp_path / "obj.zarr"
    group = zarr.open_group(path, mode="w")
    group.create_array("X", shape=X.shape, chunks=(4, 5), dtype="f8")[...] = X
    from_group = io.open_source(zarr.open_group(path, mode="r"), variable="X")
    from_array = io.open_source(zarr.open_array(path / "X", mode="r"))
    for src in (from_group, from_array):
        assert src.kind == "zarr"
        assert src.data.chunks == ((4, 4, 4), (5,))
        np.testing.assert_array_equal(src.data.compute(), X)


def test_open_source__zarr_graph_pickles(tmp_path, X):
    """Distributed workers receive the graph pickled: the chunk reader must survive it."""
    _write_zarr_array(tmp_path / "p.zarr", X)
    data = io.open_source(tmp_path / "p.zarr").data
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(data)).compute(), X)
    err = pickle.loads(pickle.dumps(ChunkReadError("chunk [0:5] of x")))
    assert isinstance(err, ChunkReadError) and str(err) == "chunk [0:5] of x"


# --------------------------------------------------------------------------------------
# Dtypes
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.int8, np.int64, np.uint16, np.bool_])
def test_open_source__int_and_bool_become_float64(dtype):
    x = (np.arange(N * D).reshape(N, D) % 2).astype(dtype)
    src = io.open_source(x)
    assert src.data.dtype == np.float64
    np.testing.assert_array_equal(src.data.compute(), x.astype(np.float64))


def test_open_source__int_zarr_becomes_float64(tmp_path):
    x = np.arange(N * D, dtype=np.int32).reshape(N, D)
    _write_zarr_array(tmp_path / "i.zarr", x)
    src = io.open_source(tmp_path / "i.zarr")
    assert src.data.dtype == np.float64
    np.testing.assert_array_equal(src.data.compute(), x)


@pytest.mark.parametrize("kind", ["numpy", "dask", "zarr"])
def test_open_source__float32_stays_float32(tmp_path, X, kind):
    x = X.astype(np.float32)
    if kind == "dask":
        source = da.from_array(x, chunks=4)
    elif kind == "zarr":
        source = tmp_path / "f.zarr"
        _write_zarr_array(source, x)
    else:
        source = x
    src = io.open_source(source)
    assert src.data.dtype == np.float32
    np.testing.assert_array_equal(src.data.compute(), x)


def test_open_source__float16_becomes_float32(X):
    assert io.open_source(X.astype(np.float16)).data.dtype == np.float32


# --------------------------------------------------------------------------------------
# Laziness
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("wrap", ["dask", "dataarray", "dataset", "int"])
def test_open_source__computes_nothing(wrap):
    data = _exploding_dask(dtype=np.int64 if wrap == "int" else np.float64)
    source = {
        "dask": data,
        "int": data,
        "dataarray": xr.DataArray(data, dims=("features", "samples")),  # transposed too
        "dataset": xr.Dataset({"X": (("samples", "features"), data)}),
    }[wrap]
    counter = _CountTasks()
    with counter, dask.config.set(scheduler="sync"):
        src = io.open_source(source, variable="X" if wrap == "dataset" else None)
    assert counter.n == 0
    with pytest.raises(AssertionError, match="a chunk was computed"):
        src.data.compute()


def test_open_source__zarr_reads_no_chunk(tmp_path, X):
    path = tmp_path / "lazy.zarr"
    _write_zarr_array(path, X)
    for chunk in (path / "c").rglob("*"):
        if chunk.is_file():
            chunk.write_bytes(b"not a zstd frame")
    src = io.open_source(path)  # opening reads metadata only, so corrupt chunks don't matter
    assert src.data.shape == (N, D)
    with pytest.raises(ChunkReadError, match="could not read or decode"):
        src.data.compute()


def test_open_source__xarray_lazy_backend_is_not_loaded(tmp_path, X):
    path = tmp_path / "backend.zarr"
    xr.Dataset({"X": (("samples", "features"), X)}).to_zarr(path, zarr_format=3, consolidated=False)
    with xr.open_dataset(path, engine="zarr", chunks=None, consolidated=False) as ds:
        src = io.open_source(ds, variable="X")
        assert not ds["X"].variable._in_memory
        np.testing.assert_array_equal(src.data.compute(), X)


# --------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("parent", [ShapeError, InputError, ValueError, MSPCAError])
@pytest.mark.parametrize("shape", [(N,), (2, 3, 4)])
def test_open_source__raises_on_wrong_ndim(parent, shape):
    with pytest.raises(parent, match=r"must be 2-D.*dimension\(s\)"):
        io.open_source(np.zeros(shape))


def test_open_source__raises_on_3d_dataarray_and_zarr(tmp_path):
    with pytest.raises(ShapeError, match="must be 2-D"):
        io.open_source(xr.DataArray(np.zeros((2, 3, 4)), dims=("samples", "a", "b")))
    _write_zarr_array(tmp_path / "3d.zarr", np.zeros((2, 3, 4)), chunks=(1, 3, 4))
    with pytest.raises(ValueError, match="must be 2-D"):
        io.open_source(tmp_path / "3d.zarr")


@pytest.mark.parametrize("parent", [DTypeError, TypeError])
@pytest.mark.parametrize(
    ("values", "what"),
    [
        (np.array([["a", "b"], ["c", "d"]]), "strings"),
        (np.array([[1, None], [2, 3]], dtype=object), "object"),
        (np.ones((3, 2), dtype=complex), "complex"),
        (np.zeros((3, 2), dtype="datetime64[s]"), "dates"),
        (np.zeros((3, 2), dtype="timedelta64[s]"), "time differences"),
    ],
)
def test_open_source__raises_on_non_numeric_dtype(parent, values, what):
    with pytest.raises(parent, match=f"real numeric dtype.*{what}"):
        io.open_source(values)


def test_open_source__raises_on_string_dataarray():
    arr = xr.DataArray(np.full((3, 2), "x"), dims=("samples", "f"))
    with pytest.raises(DTypeError, match="strings are not numeric"):
        io.open_source(arr)


def test_open_source__raises_on_unsupported_source_type():
    with pytest.raises(TypeError, match="source must be a NumPy or Dask array"):
        io.open_source(object())


@pytest.mark.parametrize("parent", [ShapeError, ValueError])
def test_open_source__raises_on_single_sample(parent):
    with pytest.raises(parent, match="1 sample.*at least 2 samples"):
        io.open_source(np.zeros((1, 4)))


def test_open_source__raises_on_no_feature():
    with pytest.raises(ShapeError, match="no feature.*at least 1"):
        io.open_source(np.zeros((4, 0)))


def test_open_source__raises_on_unknown_chunks():
    x = da.from_array(np.arange(20.0).reshape(10, 2), chunks=5)
    x = x[x[:, 0] > 3]
    with pytest.raises(ShapeError, match=r"unknown \(NaN\) chunk sizes.*compute_chunk_sizes"):
        io.open_source(x)


@pytest.mark.parametrize("parent", [ShapeError, ValueError])
def test_open_source__raises_when_sample_dim_missing(parent, X):
    arr = xr.DataArray(X, dims=("cells", "genes"))
    with pytest.raises(parent, match=r"\('cells', 'genes'\).*'samples'.*pass sample_dim="):
        io.open_source(arr)


def test_open_source__raises_when_feature_dim_contradicts(X):
    arr = xr.DataArray(X, dims=("samples", "genes"))
    with pytest.raises(ShapeError, match="feature dimension is 'genes'.*feature_dim='genes'"):
        io.open_source(arr, feature_dim="snps")


def test_open_source__raises_when_zarr_dims_lack_sample_dim(tmp_path, X):
    _write_zarr_array(tmp_path / "d.zarr", X, dims=("cells", "genes"))
    with pytest.raises(ShapeError, match="pass sample_dim="):
        io.open_source(tmp_path / "d.zarr")


@pytest.mark.parametrize("parent", [SourceNotFoundError, FileNotFoundError, OSError])
def test_open_source__raises_on_missing_path(tmp_path, parent):
    missing = tmp_path / "nowhere.zarr"
    with pytest.raises(parent, match=f"no file or directory at {missing}"):
        io.open_source(missing)


def test_open_source__raises_on_missing_url():
    url = f"memory://mspca-test-{uuid.uuid4().hex}/none.zarr"
    with pytest.raises(FileNotFoundError, match="does not hold a Zarr array or group"):
        io.open_source(url)


def test_open_source__raises_on_directory_without_zarr(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceNotFoundError, match="does not hold a Zarr array or group"):
        io.open_source(tmp_path / "empty")


@pytest.mark.parametrize("parent", [VariableNotFoundError, KeyError])
def test_open_source__raises_on_missing_dataset_variable(parent, X, sample_labels, feature_labels):
    ds = _dataset(X, sample_labels, feature_labels)
    with pytest.raises(parent, match=r"'Z' is not a data variable.*\['X', 'y'\]"):
        io.open_source(ds, variable="Z")
    with pytest.raises(parent, match=r"2 data variables \['X', 'y'\].*pass variable="):
        io.open_source(ds)


@pytest.mark.parametrize("parent", [VariableNotFoundError, KeyError])
def test_open_source__raises_on_missing_zarr_variable(tmp_path, parent, X):
    path = tmp_path / "g.zarr"
    group = zarr.open_group(path, mode="w")
    for name in ("A", "B"):
        group.create_array(name, shape=(N, D), dtype="f8")[...] = X
    with pytest.raises(parent, match=r"'Z' is not in it.*\['A', 'B'\]"):
        io.open_source(path, variable="Z")
    with pytest.raises(parent, match=r"2 2-D arrays \['A', 'B'\].*pass variable="):
        io.open_source(path)


def test_open_source__raises_on_variable_for_root_array(tmp_path, X):
    _write_zarr_array(tmp_path / "a.zarr", X)
    with pytest.raises(KeyError, match="is a Zarr array, not a group.*leave variable= out"):
        io.open_source(tmp_path / "a.zarr", variable="X")


def test_open_source__raises_on_variable_for_plain_array(X):
    with pytest.raises(InputError, match="has no variables"):
        io.open_source(X, variable="X")


@pytest.mark.parametrize("parent", [ChunkReadError, OSError, MSPCAError])
def test_open_source__corrupt_chunk_raises_chunk_read_error(tmp_path, X, parent):
    path = tmp_path / "corrupt.zarr"
    group = zarr.open_group(path, mode="w", zarr_format=3)
    arr = group.create_array(
        "X",
        shape=X.shape,
        chunks=(5, 3),
        dtype=X.dtype,
        compressors=zarr.codecs.ZstdCodec(level=3),
    )
    arr[...] = X
    chunk_file = path / "X" / "c" / "1" / "0"
    assert chunk_file.is_file()
    chunk_file.write_bytes(os.urandom(64))

    src = io.open_source(path, variable="X")
    # Chunks that are intact still read.
    np.testing.assert_array_equal(src.data[:5].compute(), X[:5])
    with pytest.raises(parent, match=rf"{re.escape(str(path))}.*'X'.*\[5:10, 0:3\]") as info:
        src.data.compute()
    assert isinstance(info.value.__cause__, Exception)


# --------------------------------------------------------------------------------------
# Atomic result store
# --------------------------------------------------------------------------------------


@pytest.fixture
def result() -> xr.Dataset:
    return xr.Dataset(
        {
            "eigenvalues": (("component",), np.array([5.0, 3.0, 1.5])),
            "stable": (("component",), np.array([True, False, True])),
            "components": (("component", "feature"), np.arange(12.0).reshape(3, 4)),
        },
        coords={"feature": np.array(["a", "bb", "c", "d"]), "component": [0, 1, 2]},
        attrs={"noise_variance": 1.25, "source": "test"},
    )


def _hidden_leftovers(parent) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


@pytest.mark.parametrize("zarr_format", [3, 2])
def test_write_dataset_atomic__round_trip_and_complete_flag(tmp_path, result, zarr_format):
    path = tmp_path / "res.zarr"
    assert not io.is_complete(path)
    out = io.write_dataset_atomic(result, path, zarr_format=zarr_format)
    assert out == str(path)
    assert io.is_complete(path)
    assert _hidden_leftovers(tmp_path) == []
    back = io.open_dataset_checked(path)
    assert back.attrs["mspca_complete"] is True
    assert back.attrs["noise_variance"] == 1.25
    np.testing.assert_array_equal(back["eigenvalues"], result["eigenvalues"])
    np.testing.assert_array_equal(back["stable"], result["stable"])
    np.testing.assert_array_equal(back["components"], result["components"])
    assert back["feature"].values.tolist() == ["a", "bb", "c", "d"]
    # fully loaded: nothing lazy is left
    assert all(v._in_memory for v in back.variables.values())


@pytest.mark.parametrize("zarr_format", [3, 2])
def test_write_dataset_atomic__strings_in_whole_chunks_without_a_scan_per_string(
    tmp_path, zarr_format, monkeypatch
):
    """Strings from ``str_objects`` are written as they are, each in as few chunks as allowed.

    xarray scans a plain object array element by element (``_infer_dtype``) before writing
    it; an array with the string dtype ``str_objects`` gives is known to hold ``str``.
    """
    import xarray.backends.common as xr_common

    alleles = writing.str_objects(np.array([["A", "T"], ["GG", ""], ["C", "A"]] * 100))
    assert alleles.dtype == object and alleles.dtype.metadata == {"element_type": str}
    ds = xr.Dataset(
        {
            "allele": (("variant", "allele_index"), alleles),
            "contig": (("variant",), writing.str_objects(np.array(["chr1", "chr2"] * 150))),
        }
    )

    def no_scan(*args, **kwargs):
        raise AssertionError("xarray scanned a string array element by element")

    monkeypatch.setattr(xr_common, "_infer_dtype", no_scan)
    monkeypatch.setattr(writing, "STRING_CHUNK_ROWS", 128)
    path = tmp_path / "strings.zarr"
    io.write_dataset_atomic(ds, path, zarr_format=zarr_format)
    group = zarr.open_group(str(path), mode="r")
    assert group["allele"].chunks == (128, 2) and group["contig"].chunks == (128,)
    back = io.open_dataset_checked(path)
    assert back["allele"].values.tolist() == alleles.tolist()
    assert back["contig"].values.tolist() == ["chr1", "chr2"] * 150


def test_write_dataset_atomic__file_url(tmp_path, result):
    out = io.write_dataset_atomic(result, f"file://{tmp_path}/r.zarr")
    assert out == str(tmp_path / "r.zarr")
    assert io.is_complete(f"file://{tmp_path}/r.zarr")
    back = io.open_dataset_checked(f"file://{tmp_path}/r.zarr")
    np.testing.assert_array_equal(back["eigenvalues"], result["eigenvalues"])


@pytest.mark.parametrize("parent", [ResultExistsError, FileExistsError, OSError])
def test_write_dataset_atomic__refuses_existing_result(tmp_path, result, parent):
    path = tmp_path / "res.zarr"
    io.write_dataset_atomic(result, path)
    with pytest.raises(parent, match="complete result already exists.*overwrite=True"):
        io.write_dataset_atomic(result, path)
    assert io.is_complete(path)


def test_write_dataset_atomic__refuses_other_existing_data(tmp_path, result):
    path = tmp_path / "precious"
    path.mkdir()
    (path / "keep.txt").write_text("mine")
    with pytest.raises(ResultExistsError, match="not a complete result.*overwrite=True"):
        io.write_dataset_atomic(result, path)
    assert (path / "keep.txt").read_text() == "mine"


def test_write_dataset_atomic__overwrite_replaces(tmp_path, result):
    path = tmp_path / "res.zarr"
    io.write_dataset_atomic(result, path)
    new = result.assign(eigenvalues=result["eigenvalues"] * 2)
    new.attrs["mspca_complete"] = True  # e.g. a result that was read back: flag is rewritten
    io.write_dataset_atomic(new, path, overwrite=True)
    back = io.open_dataset_checked(path)
    np.testing.assert_array_equal(back["eigenvalues"], [10.0, 6.0, 3.0])
    assert _hidden_leftovers(tmp_path) == []


def test_write_dataset_atomic__crash_before_rename_leaves_no_result(tmp_path, result, monkeypatch):
    path = tmp_path / "res.zarr"

    def crash(src, dst):
        raise OSError("simulated crash")

    monkeypatch.setattr(writing.os, "replace", crash)
    with pytest.raises(OSError, match="simulated crash"):
        io.write_dataset_atomic(result, path)
    monkeypatch.undo()
    assert not path.exists()
    assert not io.is_complete(path)
    assert _hidden_leftovers(tmp_path) == []  # the temporary store was cleaned up


def test_write_dataset_atomic__hard_crash_leaves_only_hidden_temp(tmp_path, result, monkeypatch):
    """A crash the process cannot clean up after (no ``except`` runs) leaves a hidden dir."""
    path = tmp_path / "res.zarr"

    class HardCrash(BaseException):
        pass

    def crash(*args, **kwargs):
        raise HardCrash("the process died while committing the store")

    monkeypatch.setattr(writing, "commit_directory", crash)
    monkeypatch.setattr(writing, "_remove", lambda p: None)  # as if the process died here
    with pytest.raises(HardCrash, match="^the process died while committing the store$"):
        io.write_dataset_atomic(result, path)
    monkeypatch.undo()
    assert not path.exists()
    (leftover,) = _hidden_leftovers(tmp_path)
    assert leftover.startswith(".res.zarr.tmp-")
    assert io.is_complete(tmp_path / leftover)  # complete, but hidden and never renamed
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith(".")] == []


def test_write_dataset_atomic__crash_during_overwrite_keeps_old_result(
    tmp_path, result, monkeypatch
):
    path = tmp_path / "res.zarr"
    io.write_dataset_atomic(result, path)
    real_replace = os.replace

    def replace(src, dst):
        if ".tmp-" in os.fspath(src):
            raise OSError("simulated crash")
        real_replace(src, dst)

    monkeypatch.setattr(writing.os, "replace", replace)
    with pytest.raises(OSError, match="simulated crash"):
        io.write_dataset_atomic(result * 2, path, overwrite=True)
    monkeypatch.undo()
    back = io.open_dataset_checked(path)
    np.testing.assert_array_equal(back["eigenvalues"], result["eigenvalues"])
    assert _hidden_leftovers(tmp_path) == []


def test_write_dataset_atomic__crash_while_writing_leaves_no_result(tmp_path, result, monkeypatch):
    def crash(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(xr.Dataset, "to_zarr", crash)
    with pytest.raises(RuntimeError, match="disk full"):
        io.write_dataset_atomic(result, tmp_path / "res.zarr")
    assert list(tmp_path.iterdir()) == []


def test_write_dataset_atomic__memory_url_writes_flag_last(result):
    url = f"memory://mspca-test-{uuid.uuid4().hex}/res.zarr"
    assert io.write_dataset_atomic(result, url) == url
    assert io.is_complete(url)
    np.testing.assert_array_equal(io.open_dataset_checked(url)["stable"], result["stable"])
    with pytest.raises(ResultExistsError, match="complete result already exists"):
        io.write_dataset_atomic(result, url)
    io.write_dataset_atomic(result * 3, url, overwrite=True)
    np.testing.assert_array_equal(
        io.open_dataset_checked(url)["eigenvalues"], result["eigenvalues"] * 3
    )


@pytest.mark.parametrize("parent", [InputError, ValueError])
def test_open_dataset_checked__raises_on_incomplete_store(tmp_path, result, parent):
    path = tmp_path / "partial.zarr"
    # written without the completion flag (and without the fixed-width string coordinate,
    # which zarr-python warns about in format 3)
    result.drop_vars("feature").to_zarr(path, zarr_format=3, consolidated=False)
    assert not io.is_complete(path)
    with pytest.raises(parent, match=r"is incomplete \(a crashed or interrupted write\?\)"):
        io.open_dataset_checked(path)


@pytest.mark.parametrize("parent", [SourceNotFoundError, FileNotFoundError])
def test_open_dataset_checked__raises_on_missing_store(tmp_path, parent):
    with pytest.raises(parent, match="no result store at"):
        io.open_dataset_checked(tmp_path / "nothing.zarr")


def test_open_dataset_checked__raises_on_empty_directory(tmp_path):
    (tmp_path / "empty.zarr").mkdir()
    with pytest.raises(SourceNotFoundError, match="no Zarr group found"):
        io.open_dataset_checked(tmp_path / "empty.zarr")


def test_is_complete__false_for_array_and_plain_file(tmp_path, X):
    _write_zarr_array(tmp_path / "a.zarr", X)
    assert not io.is_complete(tmp_path / "a.zarr")
    (tmp_path / "f.txt").write_text("x")
    assert not io.is_complete(tmp_path / "f.txt")


# --------------------------------------------------------------------------------------
# commit_directory: the one atomic commit (result stores and the genomics output directory)
# --------------------------------------------------------------------------------------


def _finished(path, name="result.zarr", result=None):
    """A finished output directory holding a complete result store ``name``."""
    path.mkdir()
    ds = xr.Dataset({"v": (("i",), np.arange(3.0))})
    io.write_dataset_atomic(ds if result is None else result, path / name)
    return path


def test_commit_directory__replaces_our_directory_and_removes_the_old_one(tmp_path):
    target = _finished(tmp_path / "out")
    (target / "old.txt").write_text("old")
    tmp = _finished(tmp_path / ".out.tmp-1")
    io.commit_directory(tmp, target, True, result_name="result.zarr")
    assert not (target / "old.txt").exists() and io.is_complete(target / "result.zarr")
    assert _hidden_leftovers(tmp_path) == []


def test_commit_directory__refuses_existing_target_without_overwrite(tmp_path):
    target = _finished(tmp_path / "out")
    tmp = _finished(tmp_path / ".out.tmp-1")
    with pytest.raises(ResultExistsError, match="out already exists"):
        io.commit_directory(tmp, target, False, result_name="result.zarr")
    assert tmp.is_dir()  # the caller decides what to do with its finished output


def test_commit_directory__never_replaces_foreign_data(tmp_path):
    target = tmp_path / "out"
    target.mkdir()
    (target / "notes.txt").write_text("keep me")
    tmp = _finished(tmp_path / ".out.tmp-1")
    with pytest.raises(ForeignOutputError, match="mspca_dask did not write"):
        io.commit_directory(tmp, target, True, result_name="result.zarr")
    assert (target / "notes.txt").read_text() == "keep me"


def test_commit_directory__puts_the_old_directory_back_when_the_rename_fails(tmp_path, monkeypatch):
    target = _finished(tmp_path / "out")
    tmp = _finished(tmp_path / ".out.tmp-1")
    real_replace = os.replace

    def replace(src, dst):
        if ".tmp-" in os.fspath(src):
            raise OSError("simulated rename failure")
        real_replace(src, dst)

    monkeypatch.setattr(writing.os, "replace", replace)
    with pytest.raises(OSError, match="simulated rename failure"):
        io.commit_directory(tmp, target, True, "tok", result_name="result.zarr")
    monkeypatch.undo()
    assert io.is_complete(target / "result.zarr")
    assert not (tmp_path / ".out.old-tok").exists()


# --------------------------------------------------------------------------------------
# URLs: one rule
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "url"),
    [
        ("data.zarr", False),
        ("/abs/data.zarr", False),
        ("file:///tmp/data.zarr", False),
        ("local:///tmp/data.zarr", False),
        ("s3://bucket/data.zarr", True),
        ("memory://x/data.zarr", True),
        ("simplecache::s3://bucket/data.zarr", True),
    ],
)
def test_is_url__only_non_local_protocols(path, url):
    assert io.is_url(path) is url
    assert (io.local_path(path) is None) is url


def test_local_path__expands_user_and_resolves_relative_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert io.local_path("d.zarr") == str(tmp_path / "d.zarr")
    assert io.local_path("~/d.zarr") == str(tmp_path / "home" / "d.zarr")
    assert io.local_path(f"file://{tmp_path}/d.zarr") == str(tmp_path / "d.zarr")


# --------------------------------------------------------------------------------------
# Genotype sources: recognised without importing genomics
# --------------------------------------------------------------------------------------


def _vcf_zarr_like(path, genotype="call_genotype"):
    group = zarr.open_group(path, mode="w")
    group.create_array("sample_id", shape=(3,), dtype="int32")
    group.create_array(genotype, shape=(4, 3, 2), dtype="int8")
    return path


@pytest.mark.parametrize("genotype", ["call_genotype", "call_dosage", "call_DS"])
def test_is_genotype_source__vcf_zarr_store(tmp_path, genotype):
    store = _vcf_zarr_like(tmp_path / "cohort.vcz", genotype)
    assert io.is_genotype_source(store) and io.is_genotype_source(str(store))
    assert io.is_genotype_source(f"file://{store}")
    assert io.is_genotype_source(store, variable=genotype)
    assert not io.is_genotype_source(store, variable="sample_id")  # another array: plain data


def test_is_genotype_source__plink_filesets_by_name(tmp_path):
    for ext in (".bed", ".bim", ".fam"):
        (tmp_path / f"cohort{ext}").write_bytes(b"")
    (tmp_path / "other.pgen").write_bytes(b"")
    assert io.plink_fileset(tmp_path / "cohort") == (tmp_path / "cohort", "bed")
    assert io.plink_fileset(str(tmp_path / "cohort.FAM")) == (tmp_path / "cohort", "bed")
    assert io.plink_fileset(tmp_path / "other") == (tmp_path / "other", "pgen")
    assert io.plink_fileset(tmp_path / "cohort.bed.zarr") is None
    assert io.is_genotype_source(tmp_path / "cohort", variable="anything")


def test_is_genotype_source__false_for_plain_data(tmp_path, X):
    _write_zarr_array(tmp_path / "a.zarr", X)
    group = zarr.open_group(tmp_path / "g.zarr", mode="w")
    group.create_array("call_genotype", shape=(4, 3, 2), dtype="int8")  # no sample_id
    for source in (X, tmp_path / "a.zarr", tmp_path / "g.zarr", tmp_path / "missing.zarr"):
        assert not io.is_genotype_source(source)
    assert not io.is_genotype_source(f"memory://mspca-{uuid.uuid4().hex}/none.zarr")
