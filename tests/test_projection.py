"""Projection of new samples onto a genomics result (``mspca genomics project``).

A stdpopsim Out-of-Africa cohort (CEU + a YRI minority, bio2zarr's tskit2zarr) is written as
PLINK filesets by bed-reader: a training part, the held-out rest, and the whole cohort.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("stdpopsim", reason="needs the genomics extra")
pytest.importorskip("bed_reader", reason="needs the genomics extra")

from genotype_files import fileset_arrays, simulate, write_bed, write_job  # noqa: E402

from mspca_dask import genomics as gx  # noqa: E402
from mspca_dask.errors import ResultExistsError  # noqa: E402
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
    write_bed(root / "train", a, samples=train)
    write_bed(root / "new", a, samples=new)
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


def test_project__fitted_samples_get_their_own_scores(split: dict[str, Any]) -> None:
    ds = gx.open_genomics_result(split["fit_train"])
    proj = project(ds, split["root"] / "train.bed")
    assert json.loads(proj.attrs["match_counts"])["missing"] == 0
    # The job's passes standardise the int8 calls in float32 (partials summed in float64);
    # projection works in float64: they agree to float32 rounding of the score scale.
    fitted = ds["sample_score"].values
    np.testing.assert_allclose(
        proj["sample_score"].values, fitted, rtol=0, atol=1e-6 * np.abs(fitted).max()
    )


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
    # (measured 0.998; the three bulk-level 'stable' components, which no two fits share
    # exactly, correlate 0.72, 0.73 and 0.31).
    joint = all_ds["sample_score"].values[new]
    corr = abs(np.corrcoef(p, joint[:, k])[0, 1])
    assert corr > 0.99, corr


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
    lines = out.read_text().splitlines()
    assert lines[0].split("\t") == ["FID", "IID", "PC1", "PC2", "PC3", "PC4"]
    assert len(lines) == 1 + split["new"].size
    ids = split["arrays"]["sample_id"][split["new"]]
    assert [ln.split("\t")[1] for ln in lines[1:]] == ids.tolist()
    before = out.read_bytes()
    again = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert again.returncode == gx.EXIT_EXISTS and "exists" in again.stderr
    assert out.read_bytes() == before
    with pytest.raises(ResultExistsError, match="pass overwrite=True"):
        project(split["fit_train"], split["root"] / "new", out=out)
    z = project(split["fit_train"], split["root"] / "new", out=tmp_path / "s.zarr")
    assert (tmp_path / "s.zarr").is_dir() and z.sizes["samples"] == split["new"].size
