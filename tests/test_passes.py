"""Tests of the per-chunk kernels of one pass (mspca_dask._passes)."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest

from mspca_dask._passes import (
    STATS_SLAB,
    _side_kernel,
    _stats_kernel,
    merged_columns,
    orient,
    pass_graph,
)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_stats_kernel__sums_both_sides_in_float64_from_one_finiteness_check(dtype, order) -> None:
    # more rows and columns than a slab holds, and not a multiple of it
    shape = (2 * STATS_SLAB + 37, STATS_SLAB + 5)
    block = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    block = np.array(block + 3.0, order=order)
    cols, rows = _stats_kernel(block)
    assert cols.shape == (1, 3, shape[1]) and rows.shape == (shape[0], 3)
    exact = block.astype(np.float64)
    np.testing.assert_allclose(cols[0, 0], exact.sum(axis=0), rtol=1e-13)
    np.testing.assert_allclose(cols[0, 1], (exact**2).sum(axis=0), rtol=1e-13)
    np.testing.assert_allclose(rows[:, 0], exact.sum(axis=1), rtol=1e-13)
    np.testing.assert_allclose(rows[:, 1], (exact**2).sum(axis=1), rtol=1e-13)
    assert not cols[0, 2].any() and not rows[:, 2].any()
    # a copy of the chunk gives the same bits
    again = _stats_kernel(np.array(block, order=order, copy=True))
    np.testing.assert_array_equal(again[0], cols)
    np.testing.assert_array_equal(again[1], rows)


def test_stats_kernel__counts_non_finite_values_and_leaves_them_out_of_the_sums() -> None:
    block = np.ones((4, 3), dtype=np.float32)
    block[1, 2], block[3, 2], block[0, 0] = np.nan, np.inf, -np.inf
    cols, rows = _stats_kernel(block)
    np.testing.assert_array_equal(cols[0, 2], [1, 0, 2])
    np.testing.assert_array_equal(rows[:, 2], [1, 1, 0, 1])
    np.testing.assert_array_equal(cols[0, 0], [3, 4, 2])
    np.testing.assert_array_equal(rows[:, 1], [2, 2, 3, 2])


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8])
def test_side_kernel__indicator_columns_sum_their_rows_in_float64(dtype, order) -> None:
    rng = np.random.default_rng(4)
    block = np.asarray(rng.integers(-3, 4, (60, 9)) * rng.random((60, 9)) ** (dtype != np.int8))
    block = np.array(block.astype(dtype), order=order)
    members = (rng.random((60, 3)) < 0.3).astype(float)
    members[:, 2] = 0  # a group with no row in this chunk
    side = _side_kernel(block, members)
    assert side.shape == (1, 9, 3) and side.dtype == np.float64
    np.testing.assert_allclose(side[0], block.astype(np.float64).T @ members, rtol=1e-12)
    # any other operand: the float64 product itself
    weights = members + 0.5
    np.testing.assert_array_equal(
        _side_kernel(block, weights)[0], block.astype(np.float64).T @ weights
    )


@pytest.mark.parametrize("method", ["tasks", "p2p"])
def test_merged_columns__spans_every_column_by_the_configured_rechunk_method(method) -> None:
    X = np.arange(48.0).reshape(8, 6)
    with dask.config.set({"array.rechunk.method": method}):
        M = merged_columns(da.from_array(X, chunks=(4, 3)))
    assert M.chunks == ((4, 4), (6,))
    p2p = any(str(name).startswith("rechunk-p2p") for name in M.dask.layers)
    assert p2p == (method == "p2p")
    if method == "tasks":
        np.testing.assert_array_equal(M.compute(scheduler="sync"), X)


def test_pass_graph__statistics_of_irregular_chunks_match_numpy() -> None:
    X = np.random.default_rng(1).standard_normal((50, 6)).astype(np.float32)
    data = orient(da.from_array(X, chunks=((7, 20, 23), (4, 2))), dual=False)
    out = da.compute(pass_graph(data, stats=True))[0]
    X64 = X.astype(np.float64)
    np.testing.assert_allclose(out["col_sum"], X64.sum(axis=0), rtol=1e-12)
    np.testing.assert_allclose(out["col_sumsq"], (X64**2).sum(axis=0), rtol=1e-12)
    np.testing.assert_allclose(out["row_sum"], X64.sum(axis=1), rtol=1e-12)
    np.testing.assert_allclose(out["row_sumsq"], (X64**2).sum(axis=1), rtol=1e-12)
    assert out["row_nonfinite"].dtype == np.int64 and not out["col_nonfinite"].any()


@pytest.mark.parametrize(
    ("single", "within_single"), [(False, False), (True, False), (False, True)]
)
def test_pass_graph__a_within_block_rides_on_a_krylov_pass_at_its_own_precision_with_row_weights(
    single, within_single
) -> None:
    rng = np.random.default_rng(2)
    X = rng.standard_normal((50, 6)).astype(np.float32)
    w, V, W = rng.uniform(0.2, 3.0, 50), rng.standard_normal((6, 2)), rng.standard_normal((6, 3))
    data = orient(da.from_array(X, chunks=((7, 20, 23), (6,))), dual=False)
    graph = pass_graph(
        data,
        gram=True,
        krylov=V,
        krylov_images=True,
        within=W,
        within_images=True,
        row_weights=w,
        single=single,
        within_single=within_single,
    )
    out = da.compute(graph)[0]
    X64, rtol = X.astype(np.float64), 1e-5 if single else 1e-12
    wtol = 1e-5 if within_single else 1e-12
    # the weights apply to the Gram and the within product, not to the main Krylov block
    np.testing.assert_allclose(out["gram"], X64.T @ (w[:, None] * X64), rtol=1e-12)
    np.testing.assert_allclose(out["krylov"], X64.T @ (X64 @ V), rtol=rtol)
    np.testing.assert_allclose(out["krylov_image"], X64 @ V, rtol=rtol)
    np.testing.assert_allclose(out["within"], X64.T @ (w[:, None] * (X64 @ W)), rtol=wtol)
    np.testing.assert_allclose(out["within_image"], X64 @ W, rtol=wtol)
    assert out["within_image"].dtype == (np.float32 if within_single else np.float64)


def test_pass_graph__kernels_read_each_chunk_itself_not_a_copy(monkeypatch) -> None:
    """Dask's ``concatenate=True`` copied every chunk of ``M`` once per pass and product."""
    import mspca_dask._passes as passes

    X = np.random.default_rng(2).standard_normal((40, 5))
    chunks = [X[:15], X[15:]]
    # chunks handed to the graph as they are (from_array may copy its input)
    graph = {("chunks-of-x", i, 0): c for i, c in enumerate(chunks)}
    M = da.Array(graph, "chunks-of-x", chunks=((15, 25), (5,)), dtype=X.dtype)
    data = orient(M, dual=False)
    seen: list[bool] = []
    joined = passes._joined

    def spy(part):
        out = joined(part)
        if out.shape[1] == X.shape[1]:  # a chunk of M (not the thin operand)
            seen.append(any(np.shares_memory(out, c) for c in chunks))
        return out

    monkeypatch.setattr(passes, "_joined", spy)
    V = np.random.default_rng(3).standard_normal((5, 2))
    graph = pass_graph(data, krylov=V, krylov_images=True, keep=V, stats=True)
    out = dict(zip(graph, da.compute(*graph.values(), scheduler="sync"), strict=True))
    assert seen and all(seen) and len(seen) == len(chunks)  # one read per chunk and pass
    np.testing.assert_allclose(out["krylov"], X.T @ (X @ V), rtol=1e-12)
    np.testing.assert_allclose(out["krylov_image"], X @ V, rtol=1e-12)
    np.testing.assert_allclose(out["keep"], X @ V, rtol=1e-12)
    np.testing.assert_allclose(out["col_sum"], X.sum(axis=0), rtol=1e-12)


@pytest.mark.parametrize("order", ["C", "F"])
def test_as_aligned__keeps_a_contiguous_chunk_and_its_bits_through_a_transfer(order) -> None:
    """An F-ordered chunk (the transpose of a C-ordered one) is multiplied in place; after a
    transfer between workers (which keeps the order) or with misaligned bytes, the kernel's
    results are the same to the bit."""
    from distributed.protocol import deserialize, serialize

    from mspca_dask._passes import _as_aligned, _krylov_kernel

    rng = np.random.default_rng(4)
    block = np.asarray(rng.standard_normal((300, 40)).astype(np.float32), order=order)
    assert _as_aligned(block, np.float32) is block
    travelled = deserialize(*serialize(block))
    assert travelled.flags.f_contiguous == (order == "F")
    # the same bytes one past an aligned start, as a frame inside a message can land
    raw = np.empty(block.nbytes + 1, dtype=np.uint8)[1:]
    misaligned = np.ndarray(block.shape, block.dtype, buffer=raw.data, strides=block.strides)
    misaligned[...] = block
    assert not misaligned.flags.aligned
    V = rng.standard_normal((40, 6))
    for single in (True, False):
        here = _krylov_kernel(block, V, single)
        for other in (travelled, misaligned):
            for a, b in zip(here, _krylov_kernel(other, V, single), strict=True):
                np.testing.assert_array_equal(a, b)


def test_pass_graph__one_task_reads_each_chunk_for_every_product() -> None:
    # a chunk read by one task per product stayed in memory until the last of them ran, and
    # a cluster's scheduler ran them far apart: every chunk of a pass was held at once
    X = np.random.default_rng(4).standard_normal((40, 5))
    M = da.from_array(X, chunks=(10, 5))
    V = np.random.default_rng(5).standard_normal((5, 2))
    side = np.random.default_rng(6).standard_normal((40, 3))
    graph = pass_graph(
        orient(M, dual=False), krylov=V, krylov_images=True, keep=V, side=side, stats=True
    )
    dsk: dict = {}
    for arr in graph.values():
        dsk.update(dict(arr.__dask_graph__()))
    chunk_keys = [k for k in dsk if isinstance(k, tuple) and k[0] == M.name]
    assert len(chunk_keys) == 4
    for key in chunk_keys:
        readers = [k for k, task in dsk.items() if key in getattr(task, "dependencies", ())]
        assert len(readers) == 1, readers
    out = dict(zip(graph, da.compute(*graph.values(), scheduler="sync"), strict=True))
    np.testing.assert_allclose(out["side"], X.T @ side, rtol=1e-12)
    np.testing.assert_allclose(out["row_sumsq"], (X * X).sum(axis=1), rtol=1e-12)


def test_joined__unpacks_one_chunk_and_refuses_several() -> None:
    from mspca_dask._passes import _joined

    a = np.ones((2, 2))
    assert _joined([a]) is a and _joined([[a]]) is a and _joined(a) is a
    with pytest.raises(ValueError, match="one chunk"):
        _joined([a, a])


class _DeviceArray:
    """What a device array shows a kernel: ``__cuda_array_interface__`` and ``get()``."""

    __cuda_array_interface__: dict[str, object] = {}

    def __init__(self, values: np.ndarray) -> None:
        self.values = values

    def get(self) -> np.ndarray:
        return self.values


def test_kernel_results_leave_the_task_in_host_memory():
    from mspca_dask._passes import _host, _like

    values = np.arange(6.0).reshape(2, 3)
    assert _host(values) is values  # NumPy partials are not copied
    assert _host(_DeviceArray(values)) is values  # device partials come back as NumPy
    assert _like(values, np.empty((4, 2))) is values  # NumPy chunks take the operand as it is


def _tasks(graph: dict) -> dict:
    """The tasks of a pass's products by layer name (the key's name less its token)."""
    out: dict = {}
    for arr in graph.values():
        for key, node in arr.__dask_graph__().items():
            name = key[0] if isinstance(key, tuple) else key
            out.setdefault(name.rsplit("-", 1)[0], {})[key] = node
    return out


def _stored(tmp_path, X: np.ndarray, chunks: tuple[int, int]) -> da.Array:
    import zarr

    z = zarr.create_array(str(tmp_path / "x.zarr"), shape=X.shape, chunks=chunks, dtype=X.dtype)
    z[...] = X
    return da.from_zarr(str(tmp_path / "x.zarr"))


@pytest.mark.parametrize("transform", [False, True])
def test_pass_graph__a_chunk_is_read_and_transformed_inside_its_kernel_task(
    tmp_path, transform
) -> None:
    X = np.random.default_rng(2).standard_normal((40, 6)).astype(np.float32)
    stored = _stored(tmp_path, X, (10, 6))
    data = orient(stored * 2.0 - 1.0 if transform else stored, dual=False)
    V = np.ones((6, 2))
    graph = pass_graph(data, name="mspca-pass-2", krylov=V, krylov_images=True, stats=True)
    layers = _tasks(graph)
    # the chunk's read (and transform) ran inside the kernel's task: no task of their own
    own = {f"mspca-pass-2-{op}" for op in ("from-zarr", "mul", "sub", "mul-sub", "from-zarr-mul")}
    assert not own & set(layers), sorted(layers)
    assert len(layers["mspca-pass-2-pass_kernel"]) == 4
    out = da.compute(graph)[0]
    M = (X * 2.0 - 1.0 if transform else X).astype(np.float64)
    np.testing.assert_allclose(out["krylov"], M.T @ (M @ V), rtol=1e-5)
    np.testing.assert_allclose(out["col_sum"], M.sum(axis=0), rtol=1e-5, atol=1e-5)


def test_pass_graph__a_chunk_merged_from_blocks_stays_a_task_of_its_own(tmp_path) -> None:
    X = np.random.default_rng(3).standard_normal((40, 6)).astype(np.float32)
    data = orient(_stored(tmp_path, X, (10, 3)), dual=False)  # two blocks per row block
    V = np.ones((6, 2))
    graph = pass_graph(data, name="mspca-pass-2", krylov=V, krylov_images=True)
    assert len(_tasks(graph)["mspca-pass-2-rechunk-merge"]) == 4
    out = da.compute(graph)[0]
    np.testing.assert_allclose(out["krylov"], X.T.astype(float) @ (X @ V), rtol=1e-5)
