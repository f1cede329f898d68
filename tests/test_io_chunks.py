"""Whole Zarr chunks decoded into a reused buffer (``mspca_dask.io.chunks.ChunkDecoder``).

Real Zarr stores on disk, written by zarr-python: what the decoder gives must be what zarr
reads, for every layout it accepts; every other layout is left to zarr.
"""

from __future__ import annotations

from pathlib import Path

import dask.array as da
import numpy as np
import pytest
import zarr
from numcodecs import Delta

from mspca_dask.errors import ChunkReadError
from mspca_dask.genomics import compact as _compact
from mspca_dask.io.chunks import ChunkDecoder


def _store(
    tmp_path: Path, data: np.ndarray, chunks: tuple[int, ...], zarr_format: int = 2, **kw: object
) -> zarr.Array:
    arr = zarr.create_array(
        str(tmp_path / "x.zarr"),
        shape=data.shape,
        chunks=chunks,
        dtype=data.dtype,
        zarr_format=zarr_format,  # type: ignore[arg-type]
        **kw,  # type: ignore[arg-type]
    )
    arr[...] = data
    return zarr.open_array(str(tmp_path / "x.zarr"), mode="r")


@pytest.mark.parametrize(
    ("shape", "chunks"),
    [
        ((23, 9, 2), (5, 9, 2)),  # chunks span every sample: decoded in place
        ((23, 9, 2), (5, 4, 2)),  # several chunks across, short edge chunks on both axes
        ((7, 6), (7, 6)),  # one chunk
    ],
)
@pytest.mark.parametrize("compressed", [True, False])
def test_read_row_block__equals_zarrs_read_for_every_row(
    tmp_path: Path, shape: tuple[int, ...], chunks: tuple[int, ...], compressed: bool
) -> None:
    rng = np.random.default_rng(0)
    data = rng.integers(-2, 3, size=shape).astype(np.int8)
    arr = _store(tmp_path, data, chunks, compressors=None if not compressed else "auto")
    dec = ChunkDecoder.of(arr, "test", "x")
    assert dec is not None
    buffer = np.empty(dec.row_block_nbytes, dtype=np.uint8)
    r0 = 0
    for i, rows in enumerate(dec.row_blocks):
        np.testing.assert_array_equal(dec.read_row_block(i, buffer), data[r0 : r0 + rows])
        r0 += rows
    assert r0 == shape[0]


def test_of__leaves_other_layouts_to_zarr(tmp_path: Path) -> None:
    data = np.zeros((4, 3), dtype=np.int8)
    assert ChunkDecoder.of(_store(tmp_path / "v3", data, (2, 3), zarr_format=3), "t", "x") is None
    f_order = _store(tmp_path / "f", data, (2, 3), order="F")
    assert ChunkDecoder.of(f_order, "t", "x") is None
    filtered = _store(tmp_path / "flt", data, (2, 3), filters=[Delta(dtype="i1")])
    assert ChunkDecoder.of(filtered, "t", "x") is None
    assert ChunkDecoder.of(_store(tmp_path / "ok", data, (2, 3)), "t", "x") is not None


def test_read_row_block__raises_on_a_corrupt_chunk_naming_it(tmp_path: Path) -> None:
    arr = _store(tmp_path, np.arange(40, dtype=np.int8).reshape(10, 4), (5, 4))
    (tmp_path / "x.zarr" / "1.0").write_bytes(b"not a blosc frame")
    dec = ChunkDecoder.of(arr, "store.zarr", "x")
    assert dec is not None
    buffer = np.empty(dec.row_block_nbytes, dtype=np.uint8)
    with pytest.raises(ChunkReadError, match=r"store.zarr variable 'x' chunk 1\.0"):
        dec.read_row_block(1, buffer)


def test_read_row_block__raises_on_a_chunk_gone_since_opening(tmp_path: Path) -> None:
    arr = _store(tmp_path, np.arange(40, dtype=np.int8).reshape(10, 4), (5, 4))
    (tmp_path / "x.zarr" / "0.0").unlink()
    dec = ChunkDecoder.of(arr, "store.zarr", "x")
    assert dec is not None
    with pytest.raises(ChunkReadError, match=r"chunk 0\.0 is missing"):
        dec.read_row_block(0, np.empty(dec.row_block_nbytes, dtype=np.uint8))


@pytest.mark.parametrize(
    ("sample_chunk", "memory_budget"),
    [
        (30, None),  # one chunk across: each row decoded whole
        (7, None),  # chunks across, each row of calls held while its chunks are read
        (7, 16 * 30),  # one row of calls fits a worker, not two: read twice, chunk by chunk
        (7, 0),
    ],
)
def test_statistics_from_chunks__equals_the_pass_through_zarr(
    tmp_path: Path, sample_chunk: int, memory_budget: int | None
) -> None:
    # The statistics pass on decoded chunks (reused buffers) gives the products and writes the
    # candidate rows of the pass that reads through zarr and dask, exactly, whatever the memory
    # budget makes it hold.
    rng = np.random.default_rng(3)
    gt = rng.choice(
        np.array([-1, 0, 1, 2], dtype=np.int8), size=(61, 30, 2), p=[0.02, 0.6, 0.35, 0.03]
    )
    gt[5:20] = rng.choice(np.array([0, 1], dtype=np.int8), size=(15, 30, 2))
    gt[20, 3, 1] = -2  # a lower-ploidy fill among complete biallelic rows
    gt[32:48] = 1  # a row of chunks without a candidate (all homozygous ALT)
    arr = _store(tmp_path, gt, (16, sample_chunk, 2))
    dec = ChunkDecoder.of(arr, "test", "call_genotype")
    assert dec is not None
    ref = rng.random(30) < 0.7
    filt = _compact.CandidateFilter(0.05, 0.1, 2, 30)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    try:
        budget = {} if memory_budget is None else {"memory_budget": memory_budget}
        got = da.compute(_compact.statistics_from_chunks(dec, ref, filt, tmp_path / "a", **budget))[
            0
        ]
    finally:
        _compact.release_scratch()
    calls = _compact.calls_from_genotypes(da.from_zarr(arr))
    want = da.compute(_compact.statistics_and_candidates(calls, ref, filt, tmp_path / "b"))[0]
    assert sorted(got) == sorted(want)
    for key in want:
        np.testing.assert_array_equal(got[key], want[key], err_msg=key)
    for i in range(len(dec.row_blocks)):
        part = f"part-{i:07d}"
        a = zarr.open_array(str(tmp_path / "a" / part), mode="r")[...]
        b = zarr.open_array(str(tmp_path / "b" / part), mode="r")[...]
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("compressed", [True, False])
def test_read_chunk__gives_each_chunk_of_a_row_cut_to_its_extent(
    tmp_path: Path, compressed: bool
) -> None:
    rng = np.random.default_rng(3)
    data = rng.integers(-2, 3, size=(23, 9, 2)).astype(np.int8)
    arr = _store(tmp_path, data, (5, 4, 2), compressors=None if not compressed else "auto")
    dec = ChunkDecoder.of(arr, "test", "x")
    assert dec is not None and dec.column_spans == ((0, 4), (4, 8), (8, 9))
    buffer = np.empty(dec.chunk_nbytes, dtype=np.uint8)
    r0 = 0
    for i, rows in enumerate(dec.row_blocks):
        for j, (c0, c1) in enumerate(dec.column_spans):
            got = dec.read_chunk(i, j, buffer)
            np.testing.assert_array_equal(got, data[r0 : r0 + rows, c0:c1])
            assert got.strides[-1] == 1 and got.base is not None  # a view of the buffer
        r0 += rows


@pytest.mark.parametrize(
    ("shape", "chunks"),
    [((23, 9, 2), (5, 9, 2)), ((23, 9, 2), (5, 4, 1)), ((7, 6), (7, 6))],
)
def test_read_chunk__refuses_layouts_without_whole_later_axes(
    tmp_path: Path, shape: tuple[int, ...], chunks: tuple[int, ...]
) -> None:
    # one chunk across (read the row whole), or the ploidy axis split: no column spans
    arr = _store(tmp_path, np.zeros(shape, dtype=np.int8), chunks)
    dec = ChunkDecoder.of(arr, "test", "x")
    assert dec is not None and dec.column_spans is None
    with pytest.raises(ValueError, match="one by one"):
        dec.read_chunk(0, 0, np.empty(dec.chunk_nbytes, dtype=np.uint8))


# ------------------------------------------------------------------------- string arrays


def _strings_v2(path: Path, values: np.ndarray, chunks: tuple[int, ...]) -> zarr.Array:
    """A Zarr format 2 array of variable-length strings as bio2zarr writes its alleles."""
    arr = zarr.create_array(str(path), shape=values.shape, chunks=chunks, dtype=str, zarr_format=2)
    arr[...] = values
    return arr


def test_read_strings__equal_zarrs_read_as_str_objects(tmp_path: Path) -> None:
    from mspca_dask.io.chunks import read_strings

    values = np.array([["A", "T"], ["GGA", ""], ["C", "ü"], ["", ""], ["T", "TTTT"]] * 7)
    arr = _strings_v2(tmp_path / "alleles", values, (6, 2))  # the last chunk is short
    got = read_strings(arr, "store", "variant_allele")
    assert got is not None and got.dtype == object and got.dtype.metadata == {"element_type": str}
    assert got.tolist() == values.tolist() == np.asarray(arr[...]).tolist()


def test_read_strings__none_for_layouts_zarr_must_read(tmp_path: Path) -> None:
    from mspca_dask.io.chunks import read_strings

    values = np.array([["A", "T"], ["G", "C"], ["T", "A"]])
    across = _strings_v2(tmp_path / "across", values, (2, 1))  # chunks split along axis 1
    assert read_strings(across, "store", "v") is None
    v3 = zarr.create_array(str(tmp_path / "v3"), shape=(3, 2), dtype=str, zarr_format=3)
    v3[...] = values
    assert read_strings(v3, "store", "v") is None
    gap = _strings_v2(tmp_path / "gap", values, (1, 2))
    (tmp_path / "gap" / "1.0").unlink()  # a missing chunk: zarr's fill value, not ours
    assert read_strings(gap, "store", "v") is None
    numbers = zarr.create_array(str(tmp_path / "n"), shape=(3,), dtype="i4", zarr_format=2)
    assert read_strings(numbers, "store", "v") is None


def test_read_strings__corrupt_chunk_is_a_chunk_read_error_naming_it(tmp_path: Path) -> None:
    from mspca_dask.io.chunks import read_strings

    arr = _strings_v2(tmp_path / "alleles", np.array([["A", "T"], ["G", "C"]]), (1, 2))
    (tmp_path / "alleles" / "1.0").write_bytes(b"not a compressed chunk")
    with pytest.raises(ChunkReadError, match=r"variable 'variant_allele' chunk 1\.0"):
        read_strings(arr, "cohort.vcz", "variant_allele")
