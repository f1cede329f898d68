"""The genomics job's compact working matrix: int8 calls of the kept variants, read once.

Unit tests on small hand-made arrays (exact values against the float64 path of
``preprocess``), then the job end to end on a small stdpopsim cohort written by bio2zarr's
tskit2zarr: how many times each raw chunk is read, in memory vs a temporary Zarr store, and
the same result as the old path that standardised the raw store in every pass.
"""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import dask.array as da
import numpy as np
import pytest

from mspca_dask._execution import Executor
from mspca_dask._passes import orient
from mspca_dask.errors import ParameterError
from mspca_dask.genomics import compact as _compact
from mspca_dask.genomics import preprocess
from mspca_dask.io.chunks import ChunkDecoder

# ------------------------------------------------------------------------------ unit level


def _random_genotypes(rng: np.random.Generator, v: int, s: int) -> np.ndarray:
    gt = rng.choice(np.array([0, 1, 2], dtype=np.int8), size=(v, s, 2), p=[0.6, 0.35, 0.05])
    gt[rng.random((v, s)) < 0.05, 0] = -1  # missing
    gt[rng.random((v, s)) < 0.02, 1] = -2  # fill of a lower ploidy
    return gt


@pytest.mark.parametrize("ploidy", [2, 3])
def test_calls_from_genotypes__equal_the_float_dosages_with_minus_one_for_missing(
    ploidy: int,
) -> None:
    rng = np.random.default_rng(0)
    gt = rng.choice(np.array([-2, -1, 0, 1, 2], dtype=np.int8), size=(37, 23, ploidy))
    lazy = da.from_array(gt, chunks=(10, 7, ploidy))
    calls = _compact.calls_from_genotypes(lazy).compute()
    ref = preprocess.dosage_from_genotypes(lazy).compute()
    assert calls.dtype == np.int8
    np.testing.assert_array_equal(calls == -1, np.isnan(ref))
    np.testing.assert_array_equal(calls[calls >= 0], ref[~np.isnan(ref)])


@pytest.mark.parametrize(
    ("values", "n_samples"),
    [
        ((-1, 0, 1, 2), 16_383),  # the largest int16 sum of the squares' two-bits
        ((0, 1, 2), 16_384),  # one more sample: int32 sums
        ((-1, 0, 1, 2), 70_000),
        ((0, 1), 33),
        ((-1, 0, 1, 2, 3, 4), 8_191),  # tetraploid: squared, int16 up to 2¹⁵ / 16
        ((0, 1, 2, 3, 4), 8_192),
        ((2,), 16_383),  # every call at the largest value
    ],
)
def test_variant_statistics__exact_in_every_accumulator_and_call_range(
    values: tuple[int, ...], n_samples: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(n_samples)
    calls = rng.choice(np.array(values, dtype=np.int8), size=(7, n_samples))
    calls[0] = max(values)  # the largest sums the accumulator must hold
    ref = rng.random(n_samples) < 0.7
    wide = calls.astype(np.int64)
    called = wide >= 0
    for slice_bytes in (_compact._SUM_BYTES, 3 * n_samples):  # one slice, then 3 rows each
        monkeypatch.setattr(_compact, "_SUM_BYTES", slice_bytes)
        for reference in (None, ref, ~ref):
            got = _compact._variant_stats_block(calls, reference)[:, 0, :]
            expected = [(wide * called).sum(1), called.sum(1), (wide**2 * called).sum(1)]
            if reference is not None:
                expected += [(wide * called)[:, reference].sum(1), called[:, reference].sum(1)]
            np.testing.assert_array_equal(got, np.stack(expected, axis=1))
        np.testing.assert_array_equal(_compact._sample_stats_block(calls), called.sum(0)[None])


@pytest.mark.parametrize("with_reference", [False, True])
def test_call_statistics__equal_the_float_statistics_pass(with_reference: bool) -> None:
    rng = np.random.default_rng(1)
    gt = da.from_array(_random_genotypes(rng, 41, 29), chunks=(9, 11, 2))
    reference = rng.random(29) < 0.6 if with_reference else None
    got = da.compute(_compact.call_statistics(_compact.calls_from_genotypes(gt), reference))[0]
    want = da.compute(
        preprocess.genotype_statistics(preprocess.dosage_from_genotypes(gt), reference)
    )[0]
    assert sorted(got) == sorted(want)
    for key in want:
        np.testing.assert_array_equal(got[key], want[key], err_msg=key)
        assert got[key].dtype == want[key].dtype, key


def _with_odd_rows(rng: np.random.Generator, gt: np.ndarray) -> np.ndarray:
    rows = rng.choice(gt.shape[0], 6, replace=False)
    for row, value in zip(rows, [-1, -2, 2, -1, 3, -2], strict=True):
        gt[row, rng.choice(gt.shape[1], 3), rng.integers(0, 2)] = value
    return gt


_GENOTYPE_KINDS = {
    # biallelic, no missing call: the calls are the sum of the two alleles everywhere
    "biallelic": lambda rng, shape: rng.choice(np.array([0, 1], dtype=np.int8), size=shape),
    # biallelic with missing alleles: the sum, the table on the variants with a missing call
    "biallelic_missing": lambda rng, shape: rng.choice(
        np.array([-1, 0, 1], dtype=np.int8), size=shape, p=[0.05, 0.6, 0.35]
    ),
    # mostly complete biallelic variants, a few with a missing, fill or second ALT allele:
    # the sum on most rows, the table on those few
    "mixed": lambda rng, shape: _with_odd_rows(
        rng, rng.choice(np.array([0, 1], dtype=np.int8), size=shape)
    ),
    # multi-allelic and lower-ploidy fills: the table on most variants
    "general": lambda rng, shape: rng.choice(
        np.array([-2, -1, 0, 1, 2], dtype=np.int8), size=shape, p=[0.02, 0.05, 0.5, 0.33, 0.1]
    ),
}


@pytest.mark.parametrize("kind", sorted(_GENOTYPE_KINDS))
@pytest.mark.parametrize("reference_fraction", [None, 0.2, 0.8, 1.0])
def test_call_statistics__every_chunk_path_equals_the_float_statistics_pass(
    kind: str, reference_fraction: float | None
) -> None:
    # Each raw chunk takes the paths of its kind (the allele sum, the lookup table for the
    # variants with a missing, fill or second ALT allele; no missing-call counting when none
    # is missing; the reference sums read from the smaller side): all must give the float64
    # pass's statistics exactly.
    rng = np.random.default_rng(7)
    gt = da.from_array(_GENOTYPE_KINDS[kind](rng, (45, 30, 2)), chunks=(15, 30, 2))
    reference = None
    if reference_fraction is not None:
        reference = np.zeros(30, dtype=bool)
        reference[rng.permutation(30)[: round(30 * reference_fraction)]] = True
    calls = _compact.calls_from_genotypes(gt)
    got = da.compute(_compact.call_statistics(calls, reference))[0]
    want = da.compute(
        preprocess.genotype_statistics(preprocess.dosage_from_genotypes(gt), reference)
    )[0]
    for key in want:
        np.testing.assert_array_equal(got[key], want[key], err_msg=key)
    dosage = preprocess.dosage_from_genotypes(gt).compute()
    np.testing.assert_array_equal(calls.compute() == -1, np.isnan(dosage))
    np.testing.assert_array_equal(calls.compute()[~np.isnan(dosage)], dosage[~np.isnan(dosage)])


def test_standardized__equals_the_float64_path_to_float32_rounding() -> None:
    rng = np.random.default_rng(2)
    gt = da.from_array(_random_genotypes(rng, 50, 31), chunks=(20, 31, 2))
    calls = _compact.calls_from_genotypes(gt)
    centre = rng.uniform(0.2, 1.8, 50)
    scale = rng.uniform(0.3, 1.0, 50)
    compact = _compact.CompactCalls(calls.rechunk((13, 31)), "memory", None, True, 50 * 31)
    got = _compact.standardized(compact, centre, scale)
    want = preprocess.standardize(preprocess.dosage_from_genotypes(gt), centre, scale).compute()
    assert got.dtype == np.float32 and got.shape == (31, 50)
    np.testing.assert_allclose(got.compute(), want, rtol=2e-6, atol=2e-6)
    assert np.all(got.compute()[want == 0] == 0)  # missing calls sit exactly at the centre


@pytest.mark.parametrize("has_missing", [False, True])
def test_standardized__a_held_matrix_with_more_samples_than_variants_spans_the_variants(
    has_missing: bool,
) -> None:
    rng = np.random.default_rng(5)
    arr = rng.integers(-1 if has_missing else 0, 3, size=(40, 9000)).astype(np.int8)
    centre, scale = rng.uniform(0.2, 1.8, 40), rng.uniform(0.3, 1.0, 40)
    by_rows = _compact._blocks_of(arr, 13, "by-rows")
    held = _compact.CompactCalls(by_rows, "memory", None, has_missing, arr.nbytes, arr)
    not_held = _compact.CompactCalls(by_rows, "memory", None, has_missing, arr.nbytes)
    got = _compact.standardized(held, centre, scale)
    assert got.numblocks[1] == 1 and got.numblocks[0] > 1  # chunks span all variants
    assert orient(got).dual is False  # the fit's operator: the variants' side
    want = _compact.standardized(not_held, centre, scale)
    assert want.numblocks[0] == 1 and orient(want).dual is True
    np.testing.assert_array_equal(got.compute(), want.compute())


def test_standardized__raises_on_a_non_positive_scale() -> None:
    calls = da.zeros((3, 4), dtype=np.int8, chunks=(3, 4))
    compact = _compact.CompactCalls(calls, "memory", None, False, 12)
    with pytest.raises(ParameterError, match="scale must be finite and > 0"):
        _compact.standardized(compact, np.ones(3), np.array([1.0, 0.0, 1.0]))


def _compact_of(
    gt: np.ndarray, keep_v: np.ndarray, keep_s: np.ndarray, scheduler: str = "sync", **kw: Any
) -> Any:
    calls = _compact.calls_from_genotypes(da.from_array(gt, chunks=(16, 9, 2)))
    executor = Executor(scheduler)
    return _compact.compact_calls(calls, keep_v, keep_s, executor, has_missing=True, **kw)


def test_compact_calls__in_memory_under_the_budget_in_a_removed_store_over_it(
    tmp_path: Path,
) -> None:
    rng = np.random.default_rng(3)
    gt = _random_genotypes(rng, 70, 20)
    keep_v, keep_s = rng.random(70) < 0.5, rng.random(20) < 0.8
    want = _compact.calls_from_genotypes(da.from_array(gt)).compute()[keep_v][:, keep_s]
    with _compact_of(gt, keep_v, keep_s, memory_budget=10**6) as mem:
        assert mem.where == "memory" and mem.path is None
        np.testing.assert_array_equal(mem.calls.compute(), want)
    with _compact_of(gt, keep_v, keep_s, memory_budget=100, spill_dir=tmp_path) as disk:
        assert disk.where == "zarr" and disk.path is not None
        assert disk.path.parent == tmp_path and disk.path.is_dir()
        assert disk.calls.chunks[1] == (int(keep_s.sum()),)  # chunks span all samples
        np.testing.assert_array_equal(disk.calls.compute(), want)
    assert list(tmp_path.iterdir()) == []
    # passes in other processes: within the budget, yet in the store the workers read
    with _compact_of(gt, keep_v, keep_s, "processes", memory_budget=10**6, spill_dir=tmp_path) as p:
        assert p.where == "zarr" and p.path is not None and p.path.parent == tmp_path
        np.testing.assert_array_equal(p.calls.compute(), want)
    assert list(tmp_path.iterdir()) == []


def test_compact_calls__removes_the_temporary_store_when_the_fit_fails(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    gt = _random_genotypes(rng, 30, 10)
    keep = np.ones(30, dtype=bool)

    def fit_that_fails() -> None:
        with _compact_of(gt, keep, np.ones(10, dtype=bool), memory_budget=0, spill_dir=tmp_path):
            assert len(list(tmp_path.iterdir())) == 1
            raise RuntimeError("the fit failed")

    with pytest.raises(RuntimeError, match="the fit failed"):
        fit_that_fails()
    assert list(tmp_path.iterdir()) == []


def test_statistics_and_candidates__writes_the_rows_that_pass_the_filters(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    gt = _random_genotypes(rng, 60, 25)
    gt[:5] = 0  # monomorphic
    calls = _compact.calls_from_genotypes(da.from_array(gt, chunks=(16, 10, 2)))
    filt = _compact.CandidateFilter(min_maf=0.1, max_missing=0.08, ploidy=2, n_samples=25)
    ref = rng.random(25) < 0.5
    out = da.compute(_compact.statistics_and_candidates(calls, ref, filt, tmp_path))[0]
    want = da.compute(_compact.call_statistics(calls, ref))[0]
    for key in want:
        np.testing.assert_array_equal(out[key], want[key], err_msg=key)
    stats = preprocess.GenotypeStats.from_pass(want, 25)
    maf, miss = stats.minor_allele_frequency, stats.missing_rate
    expected = (maf > 0) & (maf >= 0.1) & (miss <= 0.08)
    np.testing.assert_array_equal(out["candidate"], expected)
    assert 0 < expected.sum() < 60
    cand = _compact.Candidates(tmp_path, out["candidate"], calls.chunks[0], 25)
    keep = expected & (rng.random(60) < 0.7)
    compact = _compact.compact_from_parts(
        cand, keep, Executor("sync"), has_missing=True, memory_budget=10**6
    )
    assert compact is not None and compact.where == "memory"
    np.testing.assert_array_equal(compact.calls.compute(), calls.compute()[keep])
    spilled = _compact.compact_from_parts(
        cand, keep, Executor("sync"), has_missing=True, memory_budget=0
    )
    assert spilled is not None and spilled.where == "zarr"
    np.testing.assert_array_equal(spilled.calls.compute(), calls.compute()[keep])
    # passes in other processes (a cluster's workers): within the budget, yet left on disk,
    # where each task reads its own rows, rather than sent with every pass
    elsewhere = _compact.compact_from_parts(
        cand, keep, Executor("processes"), has_missing=True, memory_budget=10**6
    )
    assert elsewhere is not None and elsewhere.where == "zarr"
    np.testing.assert_array_equal(elsewhere.calls.compute(), calls.compute()[keep])
    # a kept variant that is not a candidate: the raw store must be read again
    assert _compact.compact_from_parts(cand, ~expected, Executor("sync"), has_missing=True) is None


@pytest.mark.parametrize("memory_budget", [10**6, 0])
def test_statistics_and_candidates__holds_parts_while_they_project_within_the_budget(
    tmp_path: Path, memory_budget: int
) -> None:
    rng = np.random.default_rng(6)
    gt = _random_genotypes(rng, 64, 25)
    calls = _compact.calls_from_genotypes(da.from_array(gt, chunks=(16, 25, 2)))
    filt = _compact.CandidateFilter(min_maf=0.1, max_missing=0.08, ploidy=2, n_samples=25)
    full = calls.compute()
    # every part held when the projection fits; none once it does not (the first part over)
    held_all = _compact.HeldParts(10**6, n_parts=4)
    whole = _compact.statistics_and_candidates(calls, None, filt, tmp_path / "a", held_all)
    candidate = whole["candidate"].compute(scheduler="sync")
    assert held_all.nbytes == int(candidate.sum()) * 25 and not (tmp_path / "a").exists()
    none = _compact.HeldParts(int(candidate.sum()) * 25 // 2, n_parts=4)  # projects over
    _compact.statistics_and_candidates(calls, None, filt, tmp_path / "b", none)[
        "candidate"
    ].compute(scheduler="sync")
    assert none.nbytes == 0 and len(list((tmp_path / "b").iterdir())) == 4
    # parts 1 and 3 held, 0 and 2 on disk: the compact matrix takes each from where it is
    held = _compact.HeldParts(10**6, n_parts=4)
    for i in (1, 3):
        assert held.put(i, _compact._read_part(_compact._part_path(str(tmp_path / "b"), i), None))
        shutil.rmtree(_compact._part_path(str(tmp_path / "b"), i))
    tmp_path = tmp_path / "b"
    cand = _compact.Candidates(tmp_path, candidate, calls.chunks[0], 25, held)
    keep = candidate & (rng.random(64) < 0.7)
    compact = _compact.compact_from_parts(
        cand, keep, Executor("sync"), has_missing=True, memory_budget=memory_budget
    )
    assert compact is not None and compact.where == ("memory" if memory_budget else "zarr")
    assert held.nbytes == 0  # emptied: the matrix holds the rows now, or the disk does
    np.testing.assert_array_equal(compact.calls.compute(), full[keep])
    if not memory_budget:  # over the budget every part is read from disk, held ones written
        assert len(list(tmp_path.iterdir())) == 4


def test_held_parts__hold_while_the_projection_fits_and_replace_a_retried_part() -> None:
    held = _compact.HeldParts(100, n_parts=2)
    assert held.put(0, np.zeros((2, 20), dtype=np.int8))  # 40, projected 80
    assert held.put(0, np.ones((2, 20), dtype=np.int8))  # a retry replaces, not adds
    assert held.nbytes == 40
    np.testing.assert_array_equal(held.get(0), 1)
    assert not held.put(1, np.zeros((2, 31), dtype=np.int8))  # 40 + 62 > 100
    assert not held.put(2, np.zeros((0, 20), dtype=np.int8))  # refused once: always
    assert held.nbytes == 40 and held.get(1) is None
    over = _compact.HeldParts(100, n_parts=10)
    assert not over.put(0, np.zeros((2, 20), dtype=np.int8))  # 40 projects to 400
    assert held.pop(0) is not None and held.nbytes == 0 and held.get(0) is None
    held.put(3, np.zeros(5, dtype=np.int8))
    held.clear()


def test_compact_calls__raises_over_the_budget_without_a_directory() -> None:
    gt = np.zeros((10, 4, 2), dtype=np.int8)
    with pytest.raises(ParameterError, match="over the memory budget"):
        with _compact_of(gt, np.ones(10, dtype=bool), np.ones(4, dtype=bool), memory_budget=1):
            pass


@pytest.mark.parametrize(("p", "serial"), [(300, True), (1500, False)])
def test_top_eigh__small_dense_eigensolves_run_on_one_blas_thread(
    p: int, serial: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threadpoolctl

    from mspca_dask._engine import linalg as _solver

    seen: list[int] = []
    eigh = _solver.sla.eigh

    def spy(*args: Any, **kw: Any) -> Any:
        seen.append(max(i["num_threads"] for i in threadpoolctl.threadpool_info()))
        return eigh(*args, **kw)

    monkeypatch.setattr(_solver.sla, "eigh", spy)
    A = np.diag(np.arange(p, dtype=float))
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        vals, _ = _solver.top_eigh(A, 3)
    np.testing.assert_array_equal(vals, [p - 1, p - 2, p - 3])
    assert seen == ([1] if serial else [2])


# ------------------------------------------------------------------------------ the job

pytest.importorskip("stdpopsim", reason="needs the genomics extra")
pytest.importorskip("bio2zarr", reason="needs the genomics extra")

from genotype_files import simulate, write_job  # noqa: E402

from mspca_dask import genomics as gx  # noqa: E402
from mspca_dask import io as io_mod  # noqa: E402


@pytest.fixture(scope="module")
def cohort(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("compact-cohort")
    return simulate(
        root, populations={"CEU": 90, "YRI": 12}, length=1_500_000, seed=3, variants_chunk_size=700
    )


def _job(tmp_path: Path, cohort: dict[str, Any], name: str, compute: str = "") -> gx.JobConfig:
    extra = f"[compute]\n{compute}"
    return gx.load_config(
        write_job(tmp_path, name, cohort["store"], metadata=cohort["metadata"], extra=extra)
    )


@pytest.mark.integration
def test_run_job__reads_each_raw_chunk_once_and_fits_on_the_compact_matrix(
    tmp_path: Path, cohort: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: Counter[tuple[str | None, str]] = Counter()
    original = io_mod.ZarrChunkReader.__getitem__

    def counting(self: Any, key: Any) -> np.ndarray:
        block = original(self, key)
        if block.size:  # not dask's zero-size probe of the dtype
            reads[(self.variable, repr(key))] += 1
        return block

    decoded = ChunkDecoder._decode_chunk

    def counting_decoder(self: Any, coords: tuple[int, ...], out: np.ndarray) -> np.ndarray:
        reads[(self.variable, repr(coords))] += 1
        return decoded(self, coords, out)

    monkeypatch.setattr(io_mod.ZarrChunkReader, "__getitem__", counting)
    monkeypatch.setattr(ChunkDecoder, "_decode_chunk", counting_decoder)
    out = gx.run_job(_job(tmp_path, cohort, "counted"))
    raw = {k: v for k, v in reads.items() if k[0] == "call_genotype"}
    n_chunks = len(da.from_zarr(cohort["store"], component="call_genotype").chunks[0])
    # the statistics pass writes the candidate rows; the fit's passes never touch the raw store.
    # bio2zarr writes Zarr format 2: the pass decodes each chunk into a reused buffer.
    assert len(raw) == n_chunks and set(raw.values()) == {1}
    assert all(key.startswith("(") and key.endswith(", 0, 0)") for _, key in raw)
    assert out.dataset is not None
    assert int(out.dataset.attrs["n_passes"]) >= 2  # statistics + at least one fit pass
    assert not list((tmp_path / "out").glob(f"{_compact.TEMP_PREFIX}*"))


@pytest.mark.integration
def test_run_job__same_result_in_memory_spilled_and_on_the_old_path(
    tmp_path: Path, cohort: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    mem = gx.run_job(_job(tmp_path, cohort, "memory")).dataset
    disk = gx.run_job(_job(tmp_path, cohort, "disk", 'memory_budget = "0 B"')).dataset
    assert not list((tmp_path / "out").glob(f"{_compact.TEMP_PREFIX}*"))
    monkeypatch.setattr(_compact, "calls_from_genotypes", lambda gt: None)
    old = gx.run_job(_job(tmp_path, cohort, "old")).dataset
    assert mem is not None and disk is not None and old is not None
    for var in ("eigenvalue", "knockoff_eigenvalue", "stable", "sample_score"):
        np.testing.assert_array_equal(mem[var].values, disk[var].values, err_msg=var)
    np.testing.assert_allclose(mem["eigenvalue"].values, old["eigenvalue"].values, rtol=1e-5)
    np.testing.assert_array_equal(mem["stable"].values, old["stable"].values)
    for k in range(mem.sizes["component"]):
        a, b = mem["sample_score"].values[:, k], old["sample_score"].values[:, k]
        r = np.corrcoef(a, b)[0, 1]
        assert abs(r) > 0.9999, (k, r)


@pytest.mark.parametrize(
    ("value", "expected"), [(123, 123), ("512 MiB", 512 * 2**20), ("2GB", 2 * 10**9)]
)
def test_load_config__memory_budget_takes_bytes_or_units(
    tmp_path: Path, cohort: dict[str, Any], value: Any, expected: int
) -> None:
    text = f"memory_budget = {value!r}" if isinstance(value, str) else f"memory_budget = {value}"
    assert _job(tmp_path, cohort, "budget", text).memory_budget == expected


def test_load_config__memory_budget_raises_on_a_bad_size(
    tmp_path: Path, cohort: dict[str, Any]
) -> None:
    with pytest.raises(gx.ConfigError, match="memory_budget must be a size in bytes"):
        _job(tmp_path, cohort, "bad", 'memory_budget = "lots"')


def test_usable_memory__is_the_lowest_of_the_machine_and_its_container_limits(tmp_path):
    total = _compact.usable_memory(cgroup_files=())
    unlimited, limited = tmp_path / "memory.max", tmp_path / "limit_in_bytes"
    unlimited.write_text("max\n")
    limited.write_text(f"{total // 8}\n")
    assert _compact.usable_memory(cgroup_files=(str(unlimited), str(tmp_path / "none"))) == total
    assert _compact.usable_memory(cgroup_files=(str(unlimited), str(limited))) == total // 8
    assert _compact.DEFAULT_MEMORY_BUDGET >= 2 * 1024**3
    assert _compact.DEFAULT_MEMORY_BUDGET <= max(2 * 1024**3, _compact.usable_memory() // 4)
