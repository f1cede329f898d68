"""The job's ``[ld]`` section: r² pruning (plink2 ``--indep-pairwise`` semantics) and
long-range-LD regions.

The pruning is checked against a dense NumPy reference of the same greedy rule on small
cohorts (every chunking, windows across chunk borders), and a whole job on a cohort with a
block in strong LD (``genotype_files.balding_nichols``) is checked to lose the block and
the PC the block made.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mspca_dask import genomics as gx
from mspca_dask.errors import InputError
from mspca_dask.genomics import ld_prune
from mspca_dask.genomics.ld_prune import (
    builtin_regions,
    prune_blocks,
    read_bed,
    region_mask,
)

REPO = Path(__file__).resolve().parents[1]


def _reference_prune(
    g: np.ndarray, contig: np.ndarray, position: np.ndarray, window_bp: int, r2: float
) -> np.ndarray:
    """The rule of :mod:`mspca_dask.genomics.ld_prune`, densely: all r² at once, then
    plain loops (``g``: ``(V, n)`` float, NaN missing, mean-imputed)."""
    filled = np.where(np.isnan(g), np.nanmean(g, axis=1, keepdims=True), g)
    r = np.corrcoef(filled)
    r = np.nan_to_num(r)
    called = ~np.isnan(g)
    p = np.where(called, g, 0).sum(axis=1) / called.sum(axis=1) / 2
    maf = np.minimum(p, 1 - p)
    keep = np.zeros(len(g), dtype=bool)
    for j in range(len(g)):
        alive = True
        for i in range(j):
            if not keep[i] or contig[i] != contig[j] or position[j] - position[i] >= window_bp:
                continue
            if r[i, j] ** 2 > r2:
                if maf[i] < maf[j]:
                    keep[i] = False
                else:
                    alive = False
                    break
        keep[j] = alive
    return keep


def _cohort(seed: int, missing: float = 0.0) -> dict[str, Any]:
    from genotype_files import balding_nichols

    a = balding_nichols(
        {"A": 40, "B": 20}, 160, fst=0.1, seed=seed, ld_block=40, contig_bp=4_000_000
    )
    if missing:
        rng = np.random.default_rng(seed)
        a["dosage"][rng.random(a["dosage"].shape) < missing] = np.nan
    return a


def _as_calls(g: np.ndarray) -> np.ndarray:
    return np.where(np.isnan(g), -1, g).astype(np.int8)


@pytest.mark.parametrize("chunks", [200, 7, (64, 1, 90, 45), (33, 33, 33, 33, 33, 35)])
@pytest.mark.parametrize("missing", [0.0, 0.03])
def test_prune_blocks__matches_a_dense_reference_for_every_chunking(
    chunks: int | tuple[int, ...], missing: float
) -> None:
    a = _cohort(seed=3, missing=missing)
    g, contig, pos = a["dosage"], a["contig"], a["position"]
    if isinstance(chunks, int):  # that many rows a chunk, the last one shorter
        chunks = (chunks,) * (len(g) // chunks) + ((len(g) % chunks,) if len(g) % chunks else ())
    assert sum(chunks) == len(g)
    # 400 kb: the block (40 variants in 400 kb) and its neighbours span many chunks.
    want = _reference_prune(g, contig, pos, 400_000, 0.2)
    calls = _as_calls(g)
    edges = np.cumsum((0, *chunks))
    blocks = [calls[edges[i] : edges[i + 1]] for i in range(len(chunks))]
    got = prune_blocks(blocks, contig, pos, window_bp=400_000, r2=0.2)
    np.testing.assert_array_equal(got, want)
    # The block in LD is pruned to a few of its 40 variants; float dosages give the same.
    offset = pos - 5_000_007  # the block: 40 variants every 10 kb from 1:5000007
    in_block = (contig == "1") & (offset >= 0) & (offset < 400_000) & (offset % 10_000 == 0)
    assert in_block.sum() == 40 and got[in_block].sum() <= 3, got[in_block].sum()
    floats = prune_blocks([g[:50], g[50:]], contig, pos, window_bp=400_000, r2=0.2)
    np.testing.assert_array_equal(floats, want)


@pytest.mark.parametrize("rows_per_product", [1, 7, 64, 256])
def test_prune_blocks__contigs_out_of_name_order_and_any_band_width_match_the_reference(
    rows_per_product: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # contigs named so that the store's order is not their sorted order, and r² computed in
    # bands of any height: the same variants as the dense reference
    a = _cohort(seed=5)
    g, pos = a["dosage"], a["position"]
    contig = np.array([str(100 - int(c)) for c in a["contig"]])
    assert len(set(contig)) > 1 and list(dict.fromkeys(contig)) != sorted(set(contig))
    monkeypatch.setattr(ld_prune, "_ROWS_PER_PRODUCT", rows_per_product)
    want = _reference_prune(g, contig, pos, 400_000, 0.2)
    calls = _as_calls(g)
    got = prune_blocks([calls[:70], calls[70:]], contig, pos, window_bp=400_000, r2=0.2)
    np.testing.assert_array_equal(got, want)


def test_prune_blocks__a_window_across_a_chunk_border_prunes_the_pair() -> None:
    rng = np.random.default_rng(0)
    x = rng.integers(0, 3, 50).astype(np.int8)
    y = rng.integers(0, 3, 50).astype(np.int8)
    g = np.stack([y, x, x, y])  # rows 1 and 2 identical, in two chunks
    contig, pos = np.full(4, "1"), np.array([1, 1000, 2000, 10_000_000])
    blocks = [g[:2], g[2:]]
    kept = prune_blocks(blocks, contig, pos, window_bp=5000, r2=0.5)
    assert kept.tolist() == [True, True, False, True]  # equal MAF: the later copy goes
    # Outside the window both copies stay; r2 = 1 never prunes.
    assert prune_blocks(blocks, contig, pos, window_bp=500, r2=0.5).all()
    assert prune_blocks(blocks, contig, pos, window_bp=10**9, r2=1.0).all()


def test_prune_dask__reads_its_blocks_without_importing_distributed() -> None:
    # a named local scheduler makes dask import distributed to look for a client
    code = (
        "import sys\n"
        "import dask.array as da\n"
        "import numpy as np\n"
        "from mspca_dask.genomics.ld_prune import prune_dask\n"
        "g = np.random.default_rng(0).integers(0, 3, (40, 30)).astype(np.int8)\n"
        "keep, _ = prune_dask(da.from_array(g, chunks=(10, 30)), np.zeros(40, np.int64),\n"
        "                     np.arange(40) * 100, window_bp=1000, r2=0.2)\n"
        "print(int(keep.sum()) > 0, 'distributed' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "False"]


def test_prune_blocks__unsorted_positions_are_refused() -> None:
    g = np.zeros((3, 4), np.int8)
    with pytest.raises(InputError, match="sorted by position"):
        prune_blocks([g], np.full(3, "1"), np.array([5, 3, 9]), window_bp=10, r2=0.2)
    with pytest.raises(InputError, match="more than one run"):
        prune_blocks([g], np.array(["1", "2", "1"]), np.array([1, 2, 3]), window_bp=10, r2=0.2)


def test_region_mask__bed_intervals_are_zero_based_half_open(tmp_path: Path) -> None:
    bed = tmp_path / "r.bed"
    bed.write_text("# comment\ntrack name=x\nchr1\t100\t200\tname\n2\t0\t10\n")
    regions = read_bed(bed)
    contig = np.array(["1", "1", "1", "1", "chr2", "2", "3"])
    pos = np.array([100, 101, 200, 201, 10, 11, 5])
    assert region_mask(contig, pos, regions).tolist() == [
        False,
        True,
        True,
        False,
        True,
        False,
        False,
    ]


@pytest.mark.parametrize("build", ["hg19", "hg38"])
def test_builtin_regions__ship_the_long_range_ld_regions(build: str) -> None:
    regions = builtin_regions(build)
    # The HLA (chr6 ~25.5-33.5 Mb) and the 8p23 inversion (chr8 ~8-12 Mb) are among them.
    assert any(r.contig == "chr6" and r.start < 29_000_000 < r.end for r in regions)
    assert any(r.contig == "chr8" and r.start < 10_000_000 < r.end for r in regions)
    assert all(0 <= r.start < r.end for r in regions)


# --------------------------------------------------------------------------------------
# Config
# --------------------------------------------------------------------------------------

_BASE = '[input]\nstore = "s"\n[output]\ndir = "o"\n'


def _load(tmp_path: Path, text: str) -> gx.JobConfig:
    path = tmp_path / "job.toml"
    path.write_text(_BASE + text)
    return gx.load_config(path)


def test_load_config__ld_defaults_and_off_switches(tmp_path: Path) -> None:
    assert _load(tmp_path, "").ld is None  # no section: no pruning, as before
    cfg = _load(tmp_path, "[ld]\n")
    assert cfg.ld is not None
    assert (cfg.ld.window_kb, cfg.ld.r2, cfg.ld.exclude_regions) == (500.0, 0.2, "none")
    assert cfg.ld.prunes and cfg.ld.window_bp == 500_000 and cfg.ld.regions == ()
    assert _load(tmp_path, "[ld]\nenabled = false\nr2 = 0.5\n").ld is None
    off = _load(tmp_path, '[ld]\nr2 = 1.0\nexclude_regions = "hg38"\n').ld
    assert off is not None and not off.prunes and len(off.regions) > 20
    # The fingerprint of a job without [ld] is as it was; with it, it changes.
    assert "ld" not in _load(tmp_path, "").fingerprint_params()
    assert cfg.fingerprint_params()["ld"]["r2"] == 0.2


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("[ld]\nr2 = 0\n", r"\[ld\] r2 must be a number in \(0, 1\]"),
        ("[ld]\nr2 = 1.5\n", r"\[ld\] r2 must be a number in \(0, 1\]"),
        ('[ld]\nr2 = "0.2"\n', r"\[ld\] r2 must be a number"),
        ("[ld]\nwindow_kb = 0\n", r"\[ld\] window_kb must be a number of kb > 0"),
        ('[ld]\nexclude_regions = "hg18"\n', r"\[ld\] exclude_regions must be one of"),
        ('[ld]\nexclude_regions = "missing.bed"\n', r"\[ld\] exclude_regions: no BED file at"),
        ("[ld]\nenabled = 1\n", r"\[ld\] enabled must be true or false"),
        ("[ld]\nwindow = 500\n", r"unknown key 'window' in \[ld\]; did you mean 'window_kb'"),
    ],
)
def test_load_config__bad_ld_keys_raise_naming_the_key(
    tmp_path: Path, text: str, match: str
) -> None:
    with pytest.raises(gx.ConfigError, match=match):
        _load(tmp_path, text)


def test_load_config__a_bad_bed_line_is_named(tmp_path: Path) -> None:
    (tmp_path / "bad.bed").write_text("chr1\t100\n")
    with pytest.raises(gx.ConfigError, match=r"\[ld\] exclude_regions: line 1 of .*bad.bed"):
        _load(tmp_path, '[ld]\nexclude_regions = "bad.bed"\n')


# --------------------------------------------------------------------------------------
# Whole jobs
# --------------------------------------------------------------------------------------


def _run(root: Path, name: str, a: dict[str, Any], ld: str) -> gx.JobOutcome:
    pytest.importorskip("bed_reader", reason="needs the genomics extra")
    from genotype_files import write_bed, write_job

    write_bed(root / name, a)
    ids = a["sample_id"][a["populations"] == "A"].tolist()
    path = write_job(
        root, name, f"{root / name}.bed", reference=f"samples = {json.dumps(ids)}", extra=ld
    )
    return gx.run_job(gx.load_config(path))


@pytest.fixture(scope="module")
def block_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from genotype_files import balding_nichols

    root = tmp_path_factory.mktemp("ldprune")
    a = balding_nichols({"A": 110, "B": 40}, 2000, fst=0.05, seed=1, ld_block=120)
    bed = root / "long_range.bed"
    bed.write_text("2\t1000000\t3000000\n")
    return {
        "a": a,
        "root": root,
        "plain": _run(root, "plain", a, ""),
        "pruned": _run(root, "pruned", a, "[ld]\nwindow_kb = 500\nr2 = 0.2\n"),
        "regions": _run(root, "excluded", a, f'[ld]\nr2 = 1.0\nexclude_regions = "{bed}"\n'),
        # The compact matrix over a budget of 0 bytes: read from the temporary store.
        "spilled": _run(root, "spilled", a, "[ld]\n[compute]\nmemory_budget = 0\n"),
    }


@pytest.mark.integration
def test_run_job__ld_pruning_removes_the_block_and_the_pc_it_made(
    block_runs: dict[str, Any],
) -> None:
    plain = gx.open_genomics_result(block_runs["plain"].output_dir)
    pruned = gx.open_genomics_result(block_runs["pruned"].output_dir)
    contig = np.asarray(pruned["variant_contig"].values).astype(str)
    pos = np.asarray(pruned["variant_position"].values)
    # The block: 120 variants every 3,333 bp from 1:5000007 (the unlinked ones between
    # them sit at 15 kb steps and stay).
    offset = pos - 5_000_007
    in_block = (contig == "1") & (offset >= 0) & (offset < 400_000) & (offset % 3333 == 0)
    between = (contig == "1") & (offset >= 0) & (offset < 400_000) & ~in_block
    assert in_block.sum() == 120 and plain["variant_included"].values[in_block].sum() >= 100
    assert pruned["variant_included"].values[in_block].sum() <= 3
    kept_between = pruned["variant_included"].values[between].sum()
    assert kept_between >= 0.8 * plain["variant_included"].values[between].sum()
    counts = json.loads(pruned.attrs["qc_counts"])
    assert counts["variants_ld_pruned"] >= 100
    assert counts["variants_analysed"] == int(pruned["variant_included"].values.sum())
    assert "variants_ld_pruned" not in json.loads(plain.attrs["qc_counts"])
    assert plain["ld_region_warning"].values.any()
    assert not pruned["ld_region_warning"].values.any()
    assert pruned["ld_top_share"].values.max() < 0.5 * plain["ld_top_share"].values.max()
    names = [p["name"] for p in block_runs["pruned"].passes]
    assert names.count("genomics-ld-prune") == 1
    spilled = gx.open_genomics_result(block_runs["spilled"].output_dir)
    np.testing.assert_array_equal(
        spilled["variant_included"].values, pruned["variant_included"].values
    )
    np.testing.assert_allclose(spilled["eigenvalue"].values, pruned["eigenvalue"].values, rtol=1e-6)


@pytest.mark.integration
def test_fit__ld_on_a_fileset_keeps_the_variants_the_job_keeps(
    block_runs: dict[str, Any],
) -> None:
    import mspca_dask

    job = gx.open_genomics_result(block_runs["pruned"].output_dir)
    a = block_runs["a"]
    res = mspca_dask.fit(
        str(block_runs["root"] / "pruned.bed"),
        n_components=3,
        reference_samples=a["sample_id"][a["populations"] == "A"].tolist(),
        ld={"window_kb": 500, "r2": 0.2},
    )
    kept = job["variant_included"].values
    expected = np.asarray(job["variant_id"].values).astype(str)[kept]  # the .bim's ids
    assert [str(v) for v in res.feature_coords] == expected.tolist()
    counts = res.params["genotype_qc"]
    assert counts["variants_ld_pruned"] == json.loads(job.attrs["qc_counts"])["variants_ld_pruned"]
    assert res.params["ld"] == {"window_kb": 500, "r2": 0.2}


def test_fit__ld_is_checked_and_refused_off_genotype_sources() -> None:
    import mspca_dask
    from mspca_dask.errors import ParameterError

    X = np.random.default_rng(0).standard_normal((50, 20))
    with pytest.raises(ParameterError, match="genotype sources only"):
        mspca_dask.fit(X, n_components=2, ld={"r2": 0.2})
    from mspca_dask.genomics.genotypes import _ld_section

    with pytest.raises(ParameterError, match=r"ld: r2 must be a number in \(0, 1\]"):
        _ld_section({"r2": 2})
    with pytest.raises(ParameterError, match="unknown key"):
        _ld_section({"window": 500})
    assert _ld_section({"enabled": False}) is None
    assert _ld_section({"exclude_regions": "hg19"}).regions


@pytest.mark.integration
def test_run_job__exclude_regions_removes_exactly_the_variants_inside(
    block_runs: dict[str, Any],
) -> None:
    plain = gx.open_genomics_result(block_runs["plain"].output_dir)
    ds = gx.open_genomics_result(block_runs["regions"].output_dir)
    contig = np.asarray(ds["variant_contig"].values).astype(str)
    pos = np.asarray(ds["variant_position"].values)
    inside = (contig == "2") & (pos > 1_000_000) & (pos <= 3_000_000)
    assert inside.sum() > 50
    np.testing.assert_array_equal(
        ds["variant_included"].values, plain["variant_included"].values & ~inside
    )
    counts = json.loads(ds.attrs["qc_counts"])
    assert counts["variants_ld_region"] == int(inside.sum())
    assert "variants_ld_pruned" not in counts  # r2 = 1.0: no pruning pass


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("plink2") is None, reason="plink2 is not on PATH")
def test_prune_blocks__agrees_with_plink2_indep_pairwise(tmp_path: Path) -> None:
    from genotype_files import write_bed

    a = _cohort(seed=5)
    write_bed(tmp_path / "c", a)
    subprocess.run(
        ["plink2", "--bfile", str(tmp_path / "c"), "--indep-pairwise", "400kb", "1", "0.2"]
        + ["--out", str(tmp_path / "c"), "--silent"],
        check=True,
    )
    kept_ids = set((tmp_path / "c.prune.in").read_text().split())
    plink = np.array([f"v{i}" in kept_ids for i in range(len(a["dosage"]))])
    ours = prune_blocks(
        [_as_calls(a["dosage"])], a["contig"], a["position"], window_bp=400_000, r2=0.2
    )
    # plink2's order of removal within a window differs from ours on a few variants.
    assert (plink == ours).mean() >= 0.95, (plink.sum(), ours.sum())


def test_demo_config__uses_the_ld_defaults() -> None:
    cfg = gx.load_config(REPO / "pipelines" / "demo.toml")
    assert cfg.ld is not None and (cfg.ld.window_kb, cfg.ld.r2) == (500.0, 0.2)


@pytest.mark.integration
def test_run_job__dosage_store_is_pruned_as_its_hard_calls(tmp_path: Path) -> None:
    # Without hard calls there is no compact matrix: the pruning reads the dosages.
    pytest.importorskip("bio2zarr", reason="needs the genomics extra")
    import zarr
    from bio2zarr import plink as b2p
    from genotype_files import balding_nichols, write_bed, write_job

    a = balding_nichols({"A": 60, "B": 20}, 400, fst=0.05, seed=2, ld_block=40)
    write_bed(tmp_path / "c", a)
    store = tmp_path / "c.vcz"
    b2p.convert(str(tmp_path / "c"), str(store), worker_processes=0, variants_chunk_size=100)
    group = zarr.open_group(str(store), mode="r+")
    gt = group["call_genotype"][:]
    dosage = (gt > 0).sum(axis=2).astype(np.float32)
    dosage[(gt < 0).any(axis=2)] = np.nan
    arr = group.create_array(
        "call_dosage",
        shape=dosage.shape,
        chunks=(100, dosage.shape[1]),
        dtype="float32",
        attributes={"_ARRAY_DIMENSIONS": ["variants", "samples"]},
    )
    arr[:] = dosage
    zarr.consolidate_metadata(str(store))
    ids = json.dumps(a["sample_id"][a["populations"] == "A"].tolist())
    results = {}
    for variable in ("call_genotype", "call_dosage"):
        path = write_job(tmp_path, variable, store, reference=f"samples = {ids}", extra="[ld]\n")
        text = path.read_text().replace("[input]\n", f'[input]\ngenotype_variable = "{variable}"\n')
        path.write_text(text)
        results[variable] = gx.open_genomics_result(gx.run_job(gx.load_config(path)).output_dir)
    calls, dosages = results["call_genotype"], results["call_dosage"]
    assert json.loads(dosages.attrs["qc_counts"])["variants_ld_pruned"] >= 30
    np.testing.assert_array_equal(
        calls["variant_included"].values, dosages["variant_included"].values
    )
    np.testing.assert_allclose(calls["eigenvalue"].values, dosages["eigenvalue"].values, rtol=1e-5)
