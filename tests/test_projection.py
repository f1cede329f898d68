"""Projection of new samples onto a genomics result (``mspca genomics project``).

A stdpopsim Out-of-Africa cohort (CEU + a YRI minority, bio2zarr's tskit2zarr) is written as
PLINK filesets by bed-reader: a training part, the held-out rest, and the whole cohort.
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
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("stdpopsim", reason="needs the genomics extra")
pytest.importorskip("bed_reader", reason="needs the genomics extra")

from genotype_files import fileset_arrays, simulate, write_bed, write_job  # noqa: E402

from mspca_dask import genomics as gx  # noqa: E402
from mspca_dask.errors import ResultExistsError  # noqa: E402
from mspca_dask.genomics.plink_out import _negated, _numbers  # noqa: E402
from mspca_dask.genomics.projection import match_variants, project  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def _run(tmp: Path, store: Path, ceu_ids: list[str], name: str) -> gx.JobOutcome:
    reference = f"samples = {json.dumps(ceu_ids)}"
    return gx.run_job(gx.load_config(write_job(tmp, name, f"{store}.bed", reference=reference)))


@pytest.fixture(scope="module")
def split(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("projection")
    sim = simulate(
        root,
        "sim",
        metadata=False,
        populations={"CEU": 150, "YRI": 24},
        length=2_000_000,
        seed=11,
        variants_chunk_size=800,
    )
    a = fileset_arrays(sim["store"])
    pops = np.asarray(sim["populations"])
    rng = np.random.default_rng(0)
    held = np.zeros(pops.size, bool)
    for p, k in (("CEU", 40), ("YRI", 8)):
        held[rng.choice(np.flatnonzero(pops == p), k, replace=False)] = True
    train, new = np.flatnonzero(~held), np.flatnonzero(held)
    write_bed(root / "train", a, samples=train, family_prefix="fam-")
    write_bed(root / "new", a, samples=new, family_prefix="fam-")
    write_bed(root / "all", a)
    ids = a["sample_id"]
    fit_train = _run(root, root / "train", ids[train][pops[train] == "CEU"].tolist(), "train")
    fit_all = _run(root, root / "all", ids[pops == "CEU"].tolist(), "all")
    return {
        "root": root,
        "arrays": a,
        "pops": pops,
        "train": train,
        "new": new,
        "fit_train": fit_train.output_dir,
        "fit_all": fit_all.output_dir,
    }


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=12))
def test_weight_text__negated_reads_back_as_every_number_negated(row: list[float]) -> None:
    text = _numbers(row)
    assert [float(t) for t in text.split("\t")] == row  # round trip, bit for bit
    assert [float(t) for t in _negated(text).split("\t")] == [-x for x in row]


@pytest.mark.integration
def test_project__fitted_samples_get_their_own_scores(split: dict[str, Any]) -> None:
    ds = gx.open_genomics_result(split["fit_train"])
    proj = project(ds, split["root"] / "train.bed", method="plain")
    assert json.loads(proj.attrs["match_counts"])["missing"] == 0
    # The job's passes standardise the int8 calls in float32 (partials summed in float64);
    # projection works in float64: they agree to float32 rounding of the score scale.
    fitted = ds["sample_score"].values
    np.testing.assert_allclose(
        proj["sample_score"].values, fitted, rtol=0, atol=1e-6 * np.abs(fitted).max()
    )


@pytest.mark.integration
def test_project__held_out_samples_land_with_their_population_and_match_a_joint_fit(
    split: dict[str, Any],
) -> None:
    train_ds = gx.open_genomics_result(split["fit_train"])
    all_ds = gx.open_genomics_result(split["fit_all"])
    proj = project(train_ds, split["root"] / "new")
    pops, new, train = split["pops"], split["new"], split["train"]
    yri_new, yri_train = pops[new] == "YRI", pops[train] == "YRI"
    fitted = train_ds["sample_score"].values
    sep = [
        abs(fitted[yri_train, k].mean() - fitted[~yri_train, k].mean())
        / fitted[~yri_train, k].std()
        for k in range(4)
    ]
    k = int(np.argmax(sep))
    assert train_ds["verdict"].values[k] == "mean shift"
    p = proj["sample_score"].values[:, k]
    sign = np.sign(fitted[yri_train, k].mean() - fitted[~yri_train, k].mean())
    # The held-out YRI lie beyond every held-out CEU, inside the range of the fitted YRI.
    assert (sign * p[yri_new]).min() > (sign * p[~yri_new]).max()
    assert (sign * p[yri_new]).min() > (sign * fitted[~yri_train, k]).max()
    # The same samples' scores in a fit that included them: the YRI component's correlation
    # (measured 0.998; the three bulk-level stable components, which no two fits share
    # exactly, correlate 0.72, 0.73 and 0.31).
    joint = all_ds["sample_score"].values[new]
    corr = abs(np.corrcoef(p, joint[:, k])[0, 1])
    assert corr > 0.99, corr


@pytest.mark.integration
def test_project__allele_swaps_and_strand_flips_give_the_same_scores(
    split: dict[str, Any],
) -> None:
    a, new, root = split["arrays"], split["new"], split["root"]
    V = a["dosage"].shape[0]
    rng = np.random.default_rng(1)
    keep = np.sort(rng.choice(V, V - 50, replace=False))  # 50 variants absent
    swap = rng.random(keep.size) < 0.3
    ambiguous = np.array(
        [
            {r, x} in ({"A", "T"}, {"C", "G"})
            for r, x in zip(a["ref"][keep], a["alt"][keep], strict=True)
        ]
    )
    strand = (rng.random(keep.size) < 0.3) & ~ambiguous
    write_bed(root / "flipped", a, samples=new, variants=keep, swap=swap, strand=strand)
    write_bed(root / "subset", a, samples=new, variants=keep)
    train_ds = gx.open_genomics_result(split["fit_train"])
    plain = project(train_ds, root / "subset")
    flipped = project(train_ds, root / "flipped")
    np.testing.assert_allclose(
        flipped["sample_score"].values, plain["sample_score"].values, rtol=1e-9, atol=1e-9
    )
    c = json.loads(flipped.attrs["match_counts"])
    inc = train_ds["variant_included"].values
    pos_inc = set(train_ds["variant_position"].values[inc].tolist())
    absent = pos_inc - set(a["position"][keep].tolist())
    assert c["missing"] == len(absent) > 0
    assert c["allele_swapped"] > 0 and c["strand_flipped"] > 0 and c["allele_mismatch"] == 0
    # Dropping the strand-ambiguous SNPs treats them as missing.
    dropped = project(train_ds, root / "flipped", ambiguous="drop")
    cd = json.loads(dropped.attrs["match_counts"])
    assert cd["allele_mismatch"] == c["strand_ambiguous"] > 0


def test_match_variants__other_alleles_and_duplicates_are_not_matched() -> None:
    m = match_variants(
        np.array(["1", "1", "1", "1"]),
        np.array([10, 20, 30, 40]),
        np.array([["A", "G"], ["A", "T"], ["C", "T"], ["G", "C"]]),
        np.array(["1", "1", "1", "1", "1"]),
        np.array([10, 20, 30, 30, 40]),
        np.array([["A", "C"], ["T", "A"], ["C", "T"], ["C", "T"], ["G", "C"]]),
    )
    # 10: other ALT; 20: A/T swapped, read as a swap (ambiguous); 30: duplicated; 40: as is.
    assert m.counts["allele_mismatch"] == 2 and m.counts["matched"] == 2
    assert m.result_index.tolist() == [1, 3] and m.flip.tolist() == [True, False]
    assert m.counts["strand_ambiguous"] == 2
    # Position 0 (PLINK's "unknown", e.g. gemma's HLC fileset) matches by variant id.
    z = match_variants(
        np.array(["0", "0"]),
        np.array([0, 0]),
        np.array([["A", "G"], ["C", "T"]]),
        np.array(["0", "0"]),
        np.array([0, 0]),
        np.array([["A", "G"], ["T", "C"]]),
        result_id=np.array(["rs1", "rs2"]),
        new_id=np.array(["rs2", "rs1"]),
    )
    assert z.new_index.tolist() == [0, 1] and z.result_index.tolist() == [1, 0]
    assert z.flip.tolist() == [True, False] and z.counts["allele_mismatch"] == 0


@pytest.mark.integration
def test_cli_project__writes_a_flashpca_style_tsv_and_never_overwrites(
    split: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "scores.tsv"
    cmd = [
        sys.executable,
        "-m",
        "mspca_dask",
        "genomics",
        "project",
        str(split["fit_train"]),
        str(split["root"] / "new.bed"),
        "--out",
        str(out),
        "-q",
    ]
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    comment, *lines = out.read_text().splitlines()
    assert comment.startswith("# mspca genomics project: method=corrected; shrinkage factors")
    K = gx.open_genomics_result(split["fit_train"]).sizes["component"]
    assert lines[0].split("\t") == ["FID", "IID", *(f"PC{k}" for k in range(1, K + 1))]
    assert len(lines) == 1 + split["new"].size
    ids = split["arrays"]["sample_id"][split["new"]]
    assert [ln.split("\t")[1] for ln in lines[1:]] == ids.tolist()
    assert [ln.split("\t")[0] for ln in lines[1:]] == [f"fam-{i}" for i in ids]  # .fam FID
    before = out.read_bytes()
    again = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert again.returncode == gx.EXIT_EXISTS and "exists" in again.stderr
    assert out.read_bytes() == before
    with pytest.raises(ResultExistsError, match="pass overwrite=True"):
        project(split["fit_train"], split["root"] / "new", out=out)
    z = project(split["fit_train"], split["root"] / "new", out=tmp_path / "s.zarr")
    assert (tmp_path / "s.zarr").is_dir() and z.sizes["samples"] == split["new"].size


# ------------------------------------------------------------------- PLINK 2 files of a job


def _table(path: Path) -> tuple[list[str], list[list[str]]]:
    header, *rows = (line.split("\t") for line in path.read_text().splitlines())
    return header, rows


def _plink2_standardized_scores(
    dosage: np.ndarray, alleles: list[list[str]], freq: dict[str, float], pcs: int
) -> np.ndarray:
    """What ``plink2 --score ... variance-standardize`` sums (no-mean-imputation), per its
    documentation: per line, the A1 dosage minus twice the A1 frequency, over
    sqrt(2 f (1 - f)), times the weight; a missing call adds nothing."""
    out = np.zeros((dosage.shape[1], pcs))
    for v, row in enumerate(alleles):
        vid, ref, alt, a1, weights = row[1], row[2], row[3], row[4], row[5:]
        f_alt = freq[vid]
        g_alt = dosage[v // 2]
        g, f = (g_alt, f_alt) if a1 == alt else (2 - g_alt, 1 - f_alt)
        assert a1 in (ref, alt)
        z = np.nan_to_num((g - 2 * f) / np.sqrt(2 * f * (1 - f)), nan=0.0)
        out += z[:, None] * np.asarray(weights, float)[None, :]
    return out


@pytest.mark.integration
def test_run_job__writes_plink2_eigenvec_eigenval_and_allele_weights(
    split: dict[str, Any],
) -> None:
    out = split["fit_train"]
    ds = gx.open_genomics_result(out)
    inc = ds["sample_included"].values
    header, rows = _table(out / "pca.eigenvec")
    K = ds.sizes["component"]
    pcs = [f"PC{k}" for k in range(1, K + 1)]
    assert header == ["#FID", "IID", *pcs]
    iids = ds["sample_id"].values.astype(str)[inc]
    assert [r[1] for r in rows] == iids.tolist()
    assert [r[0] for r in rows] == [f"fam-{i}" for i in iids]  # the .fam's FID, kept
    scores = ds["sample_score"].values[inc]
    np.testing.assert_array_equal(np.asarray([r[2:] for r in rows], float), scores)
    eigenval = np.loadtxt(out / "pca.eigenval")
    np.testing.assert_array_equal(eigenval, ds["eigenvalue"].values)

    header, rows = _table(out / "pca.eigenvec.allele")
    assert header == ["#CHROM", "ID", "REF", "ALT", "A1", *pcs]
    d = ds.attrs["n_variants_analysed"]
    assert len(rows) == 2 * d and [r[4] for r in rows[:2]] == rows[0][2:4]  # REF, then ALT
    fh, frows = _table(out / "pca.afreq")
    assert fh == ["#CHROM", "ID", "REF", "ALT", "ALT_FREQS"] and len(frows) == d
    freq = {r[1]: float(r[4]) for r in frows}
    a = split["arrays"]
    vi = ds["variant_included"].values
    dosage = a["dosage"][np.ix_(vi, split["train"])]
    # The weights give back the job's scores under plink2's standardisation.
    got = _plink2_standardized_scores(dosage, rows, freq, K)
    np.testing.assert_allclose(got, scores, rtol=0, atol=1e-6 * np.abs(scores).max())


@pytest.mark.skipif(shutil.which("plink2") is None, reason="plink2 is not on PATH")
def test_plink2_score__reproduces_the_job_scores_from_its_allele_weights(
    split: dict[str, Any], tmp_path: Path
) -> None:
    out = split["fit_train"]
    ds = gx.open_genomics_result(out)
    K = int(ds.sizes["component"])
    cmd = [
        "plink2",
        "--bfile",
        str(split["root"] / "train"),
        "--read-freq",
        str(out / "pca.afreq"),
        "--score",
        str(out / "pca.eigenvec.allele"),
        "2",
        "5",
        "header-read",
        "no-mean-imputation",
        "variance-standardize",
        "cols=+scoresums",
        "--score-col-nums",
        f"6-{5 + K}",
        "--out",
        str(tmp_path / "scored"),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    header, *rows = (ln.split() for ln in (tmp_path / "scored.sscore").read_text().splitlines())
    cols = [header.index(f"PC{k}_SUM") for k in range(1, K + 1)]
    iid = header.index("IID")
    by_id = {r[iid]: [float(r[c]) for c in cols] for r in rows}
    inc = ds["sample_included"].values
    scores = ds["sample_score"].values[inc]
    got = np.asarray([by_id[i] for i in ds["sample_id"].values.astype(str)[inc]])
    np.testing.assert_allclose(got, scores, rtol=0, atol=1e-5 * np.abs(scores).max())


@pytest.mark.integration
def test_run_job__variance_explained_is_each_eigenvalue_over_the_dense_trace(
    split: dict[str, Any],
) -> None:
    ds = gx.open_genomics_result(split["fit_train"])
    vi, si = ds["variant_included"].values, ds["sample_included"].values
    c = ds["variant_reference_frequency"].values[vi]
    s = ds["variant_scale"].values[vi]
    g = split["arrays"]["dosage"][np.ix_(vi, split["train"])][:, si]
    Z = np.nan_to_num((g - 2 * c[:, None]) / s[:, None], nan=0.0).T  # missing at the centre
    n = Z.shape[0]
    total = float((Z**2).sum() / n)
    np.testing.assert_allclose(ds.attrs["total_variance"], total, rtol=1e-6)
    # the n_components asked for are the data's top eigenvalues; any PC after them is a
    # within-group spike the mean shifts pushed out, with that covariance's eigenvalue
    K = json.loads(ds.attrs["params"])["n_components"]
    top = np.linalg.eigvalsh(Z @ Z.T / n)[::-1][:K]
    np.testing.assert_allclose(ds["eigenvalue"].values[:K], top, rtol=1e-5)
    lam = ds["eigenvalue"].values
    np.testing.assert_allclose(ds["variance_explained"].values, lam / total, rtol=1e-5)
    assert ds["component"].values.tolist() == list(range(1, lam.size + 1))  # PC numbers


@pytest.mark.parametrize("moved", [False, True], ids=["reference-centre", "robust-location"])
def test_total_variance__statistics_give_the_dense_trace_with_missing_calls(moved: bool) -> None:
    import dask.array as da

    from mspca_dask.genomics.analysis import total_variance
    from mspca_dask.genomics.preprocess import GenotypeStats, genotype_statistics

    rng = np.random.default_rng(3)
    g = rng.binomial(2, 0.3, size=(40, 25)).astype(np.float32)
    g[rng.random(g.shape) < 0.1] = np.nan
    out = {k: v.compute() for k, v in genotype_statistics(da.from_array(g, chunks=7)).items()}
    stats = GenotypeStats.from_pass(out, n_samples=25)
    keep = np.ones(40, bool)
    keep[[3, 17]] = False
    standardised_at = rng.uniform(0.2, 0.4, 38)  # where a missing call is imputed
    centre = standardised_at + (rng.normal(0, 0.02, 38) if moved else 0.0)
    scale = rng.uniform(0.5, 0.8, 38)
    filled = np.where(np.isnan(g[keep]), 2 * standardised_at[:, None], g[keep])
    Z = (filled - 2 * centre[:, None]) / scale[:, None]
    dense = float((Z**2).sum() / 25)
    got = total_variance(stats, keep, centre, standardised_at, scale)
    np.testing.assert_allclose(got, dense, rtol=1e-12)
