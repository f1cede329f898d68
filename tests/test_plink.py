"""PLINK 1 input, ``fit()`` on genotype stores, and QC that real data survive.

Filesets are written by bed-reader's ``to_bed`` from a stdpopsim cohort (CEU + a YRI minority)
that bio2zarr's tskit2zarr converted; the same fileset is converted back by bio2zarr's
``plink2zarr``, so the direct reader and the VCF Zarr route can be compared on one input.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("stdpopsim", reason="needs the genomics extra")
pytest.importorskip("bio2zarr", reason="needs the genomics extra")
pytest.importorskip("bed_reader", reason="needs the genomics extra")

from genotype_files import (
    add_qc_cases,
    fileset_arrays,
    simulate,
    write_bed,
    write_job,
    write_pgen,
)  # noqa: E402

import mspca_dask  # noqa: E402
from mspca_dask import genomics as gx  # noqa: E402
from mspca_dask.errors import InputError, SourceNotFoundError  # noqa: E402
from mspca_dask.genomics import plink  # noqa: E402
from mspca_dask.genomics.qc import site_filters  # noqa: E402


@pytest.fixture(scope="module")
def cohort(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("plink-cohort")
    sim = simulate(
        root,
        "sim",
        populations={"CEU": 100, "YRI": 12},
        length=1_500_000,
        seed=7,
        variants_chunk_size=700,
    )
    prefix = root / "cohort"
    truth = add_qc_cases(fileset_arrays(sim["store"]))
    write_bed(prefix, truth)
    from bio2zarr import plink as b2p

    b2p.convert(
        str(prefix), str(root / "converted.vcz"), worker_processes=0, variants_chunk_size=600
    )
    return {
        **sim,
        "root": root,
        "prefix": prefix,
        "converted": str(root / "converted.vcz"),
        "truth": truth,
    }


def _job(tmp: Path, cohort: dict[str, Any], store: str, name: str) -> gx.JobOutcome:
    return gx.run_job(gx.load_config(write_job(tmp, name, store, metadata=cohort["metadata"])))


def test_open_plink__reads_the_a1_count_with_missing_as_nan_like_plink2zarr(
    cohort: dict[str, Any],
) -> None:
    direct = plink.open_plink(str(cohort["prefix"]) + ".bed", variants_chunk_size=333)
    via = gx.open_vcf_zarr(cohort["converted"])
    t = cohort["truth"]
    d = direct.dosage.compute()
    np.testing.assert_array_equal(d, t["dosage"])  # NaN positions included
    np.testing.assert_array_equal(d, via.dosage.compute())
    assert direct.dosage.chunks[0][0] == 333
    np.testing.assert_array_equal(direct.sample_id, via.sample_id)
    np.testing.assert_array_equal(direct.variant_position, via.variant_position)
    np.testing.assert_array_equal(direct.variant_contig, via.variant_contig)
    np.testing.assert_array_equal(direct.variant_allele, via.variant_allele[:, :2])
    assert direct.variant_allele[:, 1].tolist() == t["alt"].tolist()
    # The prefix names the same fileset.
    assert plink.open_plink(cohort["prefix"]).n_variants == direct.n_variants


@pytest.mark.integration
def test_run_job__plink_fileset_and_its_plink2zarr_conversion_agree(
    cohort: dict[str, Any], tmp_path: Path
) -> None:
    a = _job(tmp_path, cohort, str(cohort["prefix"]) + ".bed", "bed")
    b = _job(tmp_path, cohort, cohort["converted"], "vcz")
    da_, db = a.dataset, b.dataset
    assert da_ is not None and db is not None
    qa, qb = json.loads(da_.attrs["qc_counts"]), json.loads(db.attrs["qc_counts"])
    assert qa == qb
    # The four QC cases written into the fileset are each caught once.
    assert qa["variants_zero_variance"] == 2  # all-het, one call
    assert qa["variants_non_acgt"] == 1 and qa["variants_duplicate_position"] == 2
    np.testing.assert_allclose(da_["eigenvalue"].values, db["eigenvalue"].values, rtol=1e-9)
    assert da_["verdict"].values.tolist() == db["verdict"].values.tolist()
    np.testing.assert_allclose(
        np.abs(da_["sample_score"].values), np.abs(db["sample_score"].values), atol=1e-8
    )
    assert da_.attrs["input_variable"] == "bed"
    # The YRI minority is flagged through the fileset.
    yri = np.asarray(cohort["populations"]) == "YRI"
    s = da_["sample_score"].values
    sep = [abs(s[yri, k].mean() - s[~yri, k].mean()) / s[~yri, k].std() for k in range(4)]
    assert da_["verdict"].values[int(np.argmax(sep))] == "mean shift"


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 13),
    v=st.integers(1, 12),
    seed=st.integers(0, 2**16),
    bounds=st.tuples(st.integers(0, 12), st.integers(0, 12)),
)
def test_read_bed_calls__equals_bed_reader_for_any_sample_count_and_rows(
    tmp_path_factory: pytest.TempPathFactory, n: int, v: int, seed: int, bounds: tuple[int, int]
) -> None:
    # the byte table decodes every call as bed-reader does, with the last byte's padding
    # (n not a multiple of 4) dropped, for any run of rows
    from bed_reader import open_bed, to_bed

    from mspca_dask.genomics.plink import read_bed_calls

    rng = np.random.default_rng(seed)
    values = rng.choice([0.0, 1.0, 2.0, np.nan], size=(n, v), p=[0.4, 0.3, 0.2, 0.1])
    path = tmp_path_factory.mktemp("bed") / "x.bed"
    to_bed(path, values.astype(np.float32), count_A1=True)
    with open_bed(path, count_A1=True) as bed:
        expected = bed.read(dtype="int8").T
    expected[expected < 0] = -1
    start, stop = sorted(min(b, v) for b in bounds)
    got = read_bed_calls(path, n, start, stop)
    assert got.dtype == np.int8 and got.flags.c_contiguous
    np.testing.assert_array_equal(got, expected[start:stop])


@settings(max_examples=60, deadline=None)
@given(
    lines=st.lists(
        st.lists(st.text("ACGT1:._-\"'#", min_size=1, max_size=4), min_size=5, max_size=8),
        max_size=12,
    ),
    gaps=st.sampled_from([" ", "\t", "  ", " \t "]),
    blank=st.booleans(),
)
def test_read_table__any_fields_and_whitespace_read_as_str_split_does(
    tmp_path_factory: pytest.TempPathFactory, lines: list[list[str]], gaps: str, blank: bool
) -> None:
    # the fast tokenizer and the line-by-line reader agree: quotes and '#' are plain
    # characters, longer lines keep their first six fields, a short line is named
    text = "".join(gaps + gaps.join(f) + gaps + "\n" + ("\n" if blank else "") for f in lines)
    path = tmp_path_factory.mktemp("table") / "x.bim"
    path.write_text(text, encoding="utf-8")
    short = [i for i, f in enumerate(lines) if len(f) < 6]
    if short:
        with pytest.raises(InputError, match="fields; a .bim line has 6"):
            plink._read_table(path, 6, ".bim")
        return
    got = plink._read_table(path, 6, ".bim")
    assert got.shape == (len(lines), 6)
    assert got.tolist() == [f[:6] for f in lines]


def test_open_plink__refuses_a_truncated_bed_with_the_sizes(
    cohort: dict[str, Any], tmp_path: Path
) -> None:
    for ext in (".bim", ".fam"):
        (tmp_path / f"c{ext}").write_bytes(Path(str(cohort["prefix"]) + ext).read_bytes())
    data = Path(str(cohort["prefix"]) + ".bed").read_bytes()
    (tmp_path / "c.bed").write_bytes(data[:-5])
    with pytest.raises(InputError, match="truncated or its files do not belong together"):
        plink.open_plink(tmp_path / "c.bed")
    (tmp_path / "c.fam").unlink()
    with pytest.raises(SourceNotFoundError, match=r"lacks c\.fam"):
        plink.open_plink(tmp_path / "c")


def test_fit__vcf_zarr_store_with_reference_samples_flags_the_minority(
    cohort: dict[str, Any],
) -> None:
    pops = np.asarray(cohort["populations"])
    res = mspca_dask.fit(
        cohort["store"], n_components=4, reference_samples=pops == "CEU", random_state=0
    )
    assert res.n_samples == pops.size  # samples are the observations
    yri = pops == "YRI"
    s = res.scores
    sep = [abs(s[yri, k].mean() - s[~yri, k].mean()) / s[~yri, k].std() for k in range(4)]
    k = int(np.argmax(sep))
    assert sep[k] > 5 and not res.stable[k]
    # The same fit from the PLINK fileset, with the reference given as sample ids.
    ceu_ids = [s for s, p in zip(cohort["truth"]["sample_id"], pops, strict=True) if p == "CEU"]
    res_bed = mspca_dask.fit(
        str(cohort["prefix"]), n_components=4, reference_samples=ceu_ids, random_state=0
    )
    assert not res_bed.stable[k] and res_bed.n_samples == pops.size


def test_fit__genotype_store_without_reference_uses_the_default_location(
    cohort: dict[str, Any], tmp_path: Path
) -> None:
    res = mspca_dask.fit(cohort["converted"], n_components=3, random_state=0)
    assert res.params["location"] == "auto" and res.n_samples == len(cohort["populations"])
    # The job's QC ran: the fileset's all-het and one-call variants were dropped, and the
    # counts travel with the result.
    qc = res.params["genotype_qc"]
    assert qc["variants_zero_variance"] == 2 and qc["variants_duplicate_position"] == 2
    assert res.n_features == qc["variants_analysed"]
    res.to_zarr(tmp_path / "r.zarr")
    assert mspca_dask.open_result(tmp_path / "r.zarr").params["genotype_qc"] == qc


def test_fit__reference_samples_on_a_plain_array_needs_their_centre_as_location() -> None:
    with pytest.raises(mspca_dask.ParameterError, match="give their centre as location"):
        mspca_dask.fit(np.ones((10, 4)), n_components=2, reference_samples=[True] * 8 + [False] * 2)
    with pytest.raises(mspca_dask.ParameterError, match="sample ids name samples of a genotype"):
        mspca_dask.fit(np.ones((10, 4)), n_components=2, location=None, reference_samples=["a"])
    with pytest.raises(mspca_dask.ParameterError, match="one entry per sample"):
        mspca_dask.fit(np.ones((10, 4)), n_components=2, location=None, reference_samples=[True])


def test_site_filters__multiallelic_non_acgt_and_duplicate_sites_are_counted_once(
    cohort: dict[str, Any],
) -> None:
    vz = gx.open_vcf_zarr(cohort["store"])  # tskit2zarr: up to 3 alleles per site
    assert vz.variant_allele is not None
    flags = site_filters(vz)
    expected = (vz.variant_allele[:, 2:] != "").any(axis=1)
    assert expected.sum() > 0
    np.testing.assert_array_equal(flags["variants_multiallelic"], expected)
    # Hand-made metadata: symbolic and 'N' alleles, a PLINK '0' ALT (monomorphic, not
    # non-ACGT), a duplicated position, and position 0 (PLINK's "unknown") twice.
    small = gx.VcfZarr(
        dosage=vz.dosage[:6],
        sample_id=vz.sample_id,
        variant_position=np.array([10, 20, 30, 30, 0, 0]),
        variant_contig=np.array(["1"] * 6, dtype=object),
        ploidy=2,
        variable="call_genotype",
        group=None,
        attrs={},
        where="test",
        variant_allele=np.array(
            [["A", "<DEL>"], ["N", "C"], ["G", "0"], ["A", "C"], ["A", "C"], ["G", "T"]],
            dtype=object,
        ),
    )
    f = site_filters(small)
    assert f["variants_non_acgt"].tolist() == [True, True, False, False, False, False]
    assert f["variants_duplicate_position"].tolist() == [False, False, True, True, False, False]


@pytest.mark.integration
def test_main__a_fileset_with_an_all_het_variant_exits_0_not_2(
    cohort: dict[str, Any], tmp_path: Path
) -> None:
    # The 1000 Genomes case: an all-het variant (MAF 0.5, zero variance) made the job exit 2.
    _job_config = tmp_path / "het.toml"
    _job_config.write_text(
        textwrap.dedent(
            f"""
            [input]
            store = "{cohort["prefix"]}"
            [pca]
            n_components = 3
            [output]
            dir = "out"
            [report]
            enabled = false
            """
        )
    )
    assert gx.main(["run", str(_job_config), "-q"]) == gx.EXIT_OK
    # The fileset is fingerprinted like a store: the result is up to date until it changes.
    assert gx.main(["check", str(_job_config), "-q"]) == gx.EXIT_OK
    fam = Path(str(cohort["prefix"]) + ".fam")
    fp = gx.input_fingerprint(str(cohort["prefix"]) + ".bed")
    assert fp == gx.input_fingerprint(str(cohort["prefix"]))
    copy = tmp_path / "copy"
    for ext in (".bed", ".bim"):
        Path(str(copy) + ext).write_bytes(Path(str(cohort["prefix"]) + ext).read_bytes())
    Path(str(copy) + ".fam").write_text(fam.read_text().replace("CEU_0001", "CEU_9999", 1))
    assert gx.input_fingerprint(str(copy)) != fp
    ds = gx.open_genomics_result(tmp_path / "out")
    assert json.loads(ds.attrs["qc_counts"])["variants_zero_variance"] == 2


def test_open_plink__a_pgen_fileset_reads_as_its_bed_twin(
    cohort: dict[str, Any], tmp_path: Path
) -> None:
    pytest.importorskip("pgenlib", reason="PLINK 2 input needs pgenlib")
    write_pgen(tmp_path / "twin", cohort["truth"])
    pg = plink.open_plink(tmp_path / "twin.pgen", variants_chunk_size=500)
    bed = plink.open_plink(cohort["prefix"])
    np.testing.assert_array_equal(pg.dosage.compute(), bed.dosage.compute())
    np.testing.assert_array_equal(pg.sample_id, bed.sample_id)
    np.testing.assert_array_equal(pg.variant_allele, bed.variant_allele)
    np.testing.assert_array_equal(pg.variant_position, bed.variant_position)
    res = mspca_dask.fit(str(tmp_path / "twin"), n_components=3, random_state=0)
    ref = mspca_dask.fit(str(cohort["prefix"]) + ".bed", n_components=3, random_state=0)
    np.testing.assert_allclose(res.eigenvalues, ref.eigenvalues, rtol=1e-9)


@pytest.mark.statistical
@pytest.mark.filterwarnings("ignore::mspca_dask.ModelFitWarning")  # linkage: many spikes
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_fit__with_a_reference_the_covariance_pcs_are_not_the_minorities_diversity(
    seed: int, tmp_path: Path
) -> None:
    # 150 CEU (the reference) and 30 YRI and 30 CHB, more diverse than CEU.  Scaled by the
    # reference's frequencies, variants rare in CEU would weigh up to 1/sqrt(2p(1-p)) at the
    # pseudocount and the minorities' own diversity would become the leading covariance PCs
    # (a between-population share of 0.2-0.7 on them); scaled by all samples', each variant
    # has one noise level over the samples, as the verdict's model assumes.
    from mspca_dask.verdict import between_group_share

    sim = simulate(
        tmp_path,
        "sim",
        populations={"CEU": 150, "YRI": 30, "CHB": 30},
        length=5_000_000,
        seed=seed,
        variants_chunk_size=2_000,
    )
    pops = np.asarray(sim["populations"])
    res = mspca_dask.fit(
        sim["store"], n_components=6, reference_samples=pops == "CEU", random_state=0
    )
    eta = between_group_share(res.scores, np.unique(pops, return_inverse=True)[1].ravel())
    axes = eta >= 0.5
    assert axes.sum() == 2 and not res.stable[axes].any()
    assert res.stable[~axes].all() and eta[~axes].max() < 0.2


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_fit__a_small_far_minority_is_flagged_with_or_without_reference_samples(
    seed: int,
) -> None:
    # 12 of 400 samples 12 noise SDs off along one axis, a covariance spike along another,
    # the data centred on the other 388 (location=None).  The group test finds the minority
    # in score space; the reference only pins which group the inliers are.
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((400, 100))
    X[:12, 0] += 12.0
    X[:, 1] += 3.0 * rng.standard_normal(400)
    ref = np.arange(400) >= 12
    plain = mspca_dask.fit(X, n_components=4, location=None, random_state=0)
    with_ref = mspca_dask.fit(
        X, n_components=4, location=None, reference_samples=ref, random_state=0
    )
    for res in (plain, with_ref):
        assert res.stable.tolist() == [True, False, False, False]  # the spike, the minority
        assert res.verdicts[1] == "mean shift"
        assert np.all(res.groups[:12] > 0) and np.all(res.groups[12:] == 0)
    assert np.all(with_ref.groups[ref] == 0)
