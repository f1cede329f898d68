"""The scheduled genomics pipeline end to end, on stores written by bio2zarr's own writers.

Two cohorts are simulated once per session with stdpopsim (Out-of-Africa, CEU + a YRI
minority): one converted by bio2zarr's tskit2zarr, one written as a VCF by tskit, given missing
calls by cyvcf2 and converted by bio2zarr's vcf2zarr.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr

pytest.importorskip("stdpopsim", reason="needs the genomics extra")
pytest.importorskip("bio2zarr", reason="needs the genomics extra")
pytest.importorskip("cyvcf2", reason="needs the genomics extra")

from genotype_files import simulate  # noqa: E402

from mspca_dask import genomics as gx  # noqa: E402
from mspca_dask.errors import (  # noqa: E402
    ChunkReadError,
    ForeignOutputError,
    InputError,
    OutputOverlapsInputError,
    ResultCorruptError,
    ResultExistsError,
    SchedulerError,
    SourceNotFoundError,
)
from mspca_dask.genomics.cli import _sigterm_raises, _Terminated  # noqa: E402
from mspca_dask.genomics.job import OUTPUTS, _job_lock  # noqa: E402
from mspca_dask.io import is_complete  # noqa: E402

# whole genomics jobs: the integration set (`pytest -m integration`)
pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="session")
def tskit_cohort(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("tskit-cohort")
    return simulate(
        root,
        populations={"CEU": 180, "YRI": 20},
        length=3_000_000,
        seed=2,
        writer="tskit2zarr",
        variants_chunk_size=1000,
    )


@pytest.fixture(scope="session")
def vcf_cohort(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("vcf-cohort")
    return simulate(
        root,
        populations={"CEU": 120, "YRI": 15},
        length=2_500_000,
        seed=5,
        writer="vcf2zarr",
        missing_rate=0.02,
        variants_chunk_size=1000,
    )


def _config(
    tmp_path: Path,
    cohort: dict[str, Any],
    *,
    name: str = "job",
    extra: str = "",
    reference: str | None = None,
) -> Path:
    if reference is None:
        reference = 'metadata_column = "population"\nmetadata_values = ["CEU"]'
    text = (
        textwrap.dedent(
            f"""
        [job]
        name = "{name}"
        [input]
        store = "{cohort["store"]}"
        sample_metadata = "{cohort["metadata"]}"
        color_by = "population"
        [reference]
        {{reference}}
        [pca]
        n_components = 5
        [output]
        dir = "out/{name}"
        """
        ).replace("{reference}", reference)
        + extra
    )
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


@pytest.fixture(scope="session")
def tskit_run(
    tskit_cohort: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, gx.JobOutcome]:
    tmp = tmp_path_factory.mktemp("tskit-run")
    cfg = _config(tmp, tskit_cohort, extra="[report]\ncompare_all_sample_centring = true\n")
    return cfg, gx.run_job(gx.load_config(cfg))


def _shift_component(ds: Any, shifted: np.ndarray) -> tuple[int, float]:
    """The component whose scores separate the shifted samples best, and by how much."""
    inc = ds["sample_included"].values
    scores = ds["sample_score"].values[inc]
    s = shifted[inc]
    sep = [
        abs(scores[s, k].mean() - scores[~s, k].mean()) / scores[~s, k].std()
        for k in range(scores.shape[1])
    ]
    k = int(np.argmax(sep))
    return k, float(sep[k])


# ------------------------------------------------------------------------------ end to end


def test_run_job__flags_the_yri_minority_as_a_mean_shift(
    tskit_run: tuple[Path, gx.JobOutcome], tskit_cohort: dict[str, Any]
) -> None:
    _, outcome = tskit_run
    assert outcome.status == "computed"
    ds = gx.open_genomics_result(outcome.output_dir)  # validates the schema
    yri = np.asarray(tskit_cohort["populations"]) == "YRI"
    assert ds["sample_id"].values.tolist()[:1] and ds.sizes["samples"] == yri.size
    k, sep = _shift_component(ds, yri)
    assert ds["verdict"].values[k] == "mean shift"
    assert sep > 5
    # Every YRI sample lies beyond every CEU sample on that component.
    scores = ds["sample_score"].values[:, k]
    sign = np.sign(scores[yri].mean() - scores[~yri].mean())
    assert (sign * scores[yri]).min() > (sign * scores[~yri]).max()
    assert ds["knockoff_eigenvalue"].values[:, k].max() < ds["eigenvalue"].values[k]
    # The reference is recorded.
    assert ds.attrs["reference_mode"] == "metadata"
    assert ds.attrs["n_reference_samples"] == int((~yri).sum())
    np.testing.assert_array_equal(ds["sample_is_reference"].values, ~yri)
    # All-sample centring (the comparison fit) hides the same spike from the knockoff: it
    # moves by a few ε at most (here 0.32 against 146 with reference centring).
    comp = json.loads(ds.attrs["centring_comparison"])
    assert comp["displacement"][0] < 0.01 * float(ds["displacement"].values[k])
    assert comp["displacement"][0] < 3 * comp["threshold"]


def test_run_job__writes_outputs_that_validate_against_the_schema(
    tskit_run: tuple[Path, gx.JobOutcome],
) -> None:
    _, outcome = tskit_run
    out = outcome.output_dir
    assert is_complete(str(out / gx.RESULT_NAME))
    ds = gx.open_genomics_result(out / gx.RESULT_NAME)
    for name, spec in gx.GENOMICS_VARIABLES.items():
        if spec.required:
            assert ds[name].dims == spec.dims
    d = ds.attrs["n_variants_analysed"]
    loadings = ds["variant_loading"].values[ds["variant_included"].values]
    assert loadings.shape == (d, ds.sizes["component"])
    np.testing.assert_allclose(np.linalg.norm(loadings, axis=0), 1.0, rtol=1e-8)
    assert np.isnan(ds["variant_loading"].values[~ds["variant_included"].values]).all()
    assert set(json.loads(ds.attrs["timings"])) >= {"statistics", "fit", "fingerprint"}
    assert json.loads(ds.attrs["versions"])["input_source"].startswith("bio2zarr")
    assert ds.attrs["random_state"] == 0 and len(ds.attrs["input_fingerprint"]) == 64
    # A broken layout is refused with the variable named.
    with pytest.raises(InputError, match="lacks the variable 'sample_score'"):
        gx.validate_genomics_dataset(ds.drop_vars("sample_score"))
    # The report is one self-contained page: every image is inlined.
    page = (out / "report.html").read_text()
    figures = {p.name for p in (out / "figures").iterdir()}
    assert page.count('src="data:image/png;base64,') == len(figures)
    assert 'src="http' not in page and "reference set of samples" in page
    always = {"spectrum.png", "scores.png", "variance.png", "loadings.png", "qc.png"}
    # a mean-shift PC beyond PC4 gets its own scatter; PC1-PC4 are in scores.png
    assert always <= figures <= always | {"scores_mean_shift.png"}


def test_run_job__vcf2zarr_store_with_missing_calls_is_imputed(
    vcf_cohort: dict[str, Any], tmp_path: Path
) -> None:
    assert vcf_cohort["n_missing"] > 0
    outcome = gx.run_job(gx.load_config(_config(tmp_path, vcf_cohort)))
    ds = outcome.dataset
    assert ds is not None
    # Count the missing calls of the analysed variants and samples straight from the store.
    gt = zarr.open_group(vcf_cohort["store"], mode="r")["call_genotype"][:]
    missing = (gt == -1).any(axis=-1)
    inc_v, inc_s = ds["variant_included"].values, ds["sample_included"].values
    expected = int(missing[np.ix_(inc_v, inc_s)].sum())
    assert expected > 0 and ds.attrs["n_imputed_calls"] == expected
    assert ds["variant_missing_rate"].values.max() > 0
    assert np.isfinite(ds["sample_score"].values[inc_s]).all()
    yri = np.asarray(vcf_cohort["populations"]) == "YRI"
    k, sep = _shift_component(ds, yri)
    assert ds["verdict"].values[k] == "mean shift" and sep > 5


def test_run_job__rerun_with_same_input_and_parameters_is_a_no_op(
    tskit_run: tuple[Path, gx.JobOutcome],
) -> None:
    cfg_path, first = tskit_run
    store = first.output_dir / gx.RESULT_NAME
    before = sorted((p.relative_to(store), p.stat().st_mtime_ns) for p in store.rglob("*"))
    again = gx.run_job(gx.load_config(cfg_path))
    assert again.status == "up to date" and again.job_fingerprint == first.job_fingerprint
    after = sorted((p.relative_to(store), p.stat().st_mtime_ns) for p in store.rglob("*"))
    assert after == before


def test_run_job__refuses_a_result_of_other_parameters_unless_asked(
    tskit_cohort: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = _config(tmp_path, tskit_cohort, extra="[report]\nenabled = false\n")
    gx.run_job(gx.load_config(cfg))
    changed = cfg.read_text().replace("n_components = 5", "n_components = 4")
    cfg.write_text(changed)
    with pytest.raises(ResultExistsError, match="overwrite = true"):
        gx.run_job(gx.load_config(cfg))
    assert gx.main(["run", str(cfg)]) == gx.EXIT_EXISTS
    assert "overwrite" in capsys.readouterr().err
    assert gx.main(["run", str(cfg), "--overwrite", "--quiet"]) == gx.EXIT_OK
    redone = gx.open_genomics_result(tmp_path / "out" / "job")
    assert json.loads(redone.attrs["params"])["n_components"] == 4


def test_run_job__crash_mid_write_leaves_no_complete_looking_result(
    tskit_cohort: dict[str, Any], tmp_path: Path
) -> None:
    cfg = _config(tmp_path, tskit_cohort, extra="[report]\nenabled = true\n")
    out = tmp_path / "out" / "job"
    # The process dies (no cleanup, no finally) while the report is being written.
    crash = textwrap.dedent(
        f"""
        import os, sys
        import mspca_dask.genomics as gx
        import mspca_dask.genomics.job as job
        def die(*args, **kwargs):
            os._exit(17)
        job.write_report = die
        sys.exit(gx.main(["run", {str(cfg)!r}]))
        """
    )
    proc = subprocess.run([sys.executable, "-c", crash], capture_output=True, text=True)
    assert proc.returncode == 17, proc.stderr
    assert not out.exists() and not is_complete(str(out / gx.RESULT_NAME))
    with pytest.raises(
        SourceNotFoundError,
        match="^no result store at " + re.escape(str(out)) + "; check the path$",
    ):
        gx.open_genomics_result(out)
    leftovers = list(out.parent.glob(".job.tmp-*"))
    assert leftovers  # hidden, and never taken for a result
    # The next run removes the leftovers and completes.
    assert gx.main(["run", str(cfg), "--quiet"]) == gx.EXIT_OK
    assert is_complete(str(out / gx.RESULT_NAME))
    assert not list(out.parent.glob(".job.tmp-*"))
    # A crash while replacing that result (new parameters, overwrite) keeps the old one.
    old_fp = gx.open_genomics_result(out).attrs["job_fingerprint"]
    text = cfg.read_text().replace("n_components = 5", "n_components = 4")
    cfg.write_text(text.replace('dir = "out/job"', 'dir = "out/job"\noverwrite = true'))
    proc = subprocess.run([sys.executable, "-c", crash], capture_output=True, text=True)
    assert proc.returncode == 17, proc.stderr
    kept = gx.open_genomics_result(out)
    assert kept.attrs["job_fingerprint"] == old_fp
    assert json.loads(kept.attrs["params"])["n_components"] == 5


def test_main__exit_codes_for_bad_config_and_a_held_lock(
    tskit_cohort: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[input]\nstore = "x.vcz"\n[pca]\nn_component = 3\n[output]\ndir = "o"\n')
    assert gx.main(["run", str(bad)]) == gx.EXIT_USAGE
    assert "unknown key 'n_component' in [pca]; did you mean 'n_components'?" in (
        capsys.readouterr().err
    )
    assert gx.main(["run", str(tmp_path / "missing.toml")]) == gx.EXIT_USAGE
    cfg = _config(tmp_path, tskit_cohort)
    with _job_lock(tmp_path / "out" / "job"):
        assert gx.main(["run", str(cfg)]) == gx.EXIT_LOCKED
    assert "another run of this job" in capsys.readouterr().err


@pytest.mark.parametrize("mode", ["samples", "file", "variable"])
def test_run_job__every_way_of_giving_the_reference_gives_the_same_result(
    mode: str,
    tskit_run: tuple[Path, gx.JobOutcome],
    tskit_cohort: dict[str, Any],
    tmp_path: Path,
) -> None:
    is_ceu = np.asarray(tskit_cohort["populations"]) == "CEU"
    ids = gx.open_vcf_zarr(tskit_cohort["store"]).sample_id[is_ceu].tolist()
    cohort = dict(tskit_cohort)
    if mode == "samples":
        reference = "samples = [" + ", ".join(f'"{s}"' for s in ids) + "]"
    elif mode == "file":
        (tmp_path / "ref.txt").write_text("# CEU\n" + "\n".join(ids) + "\n")
        reference = f'samples_file = "{tmp_path}/ref.txt"'
    else:  # a boolean sample variable added to a copy of the store
        store = tmp_path / "cohort.vcz"
        shutil.copytree(tskit_cohort["store"], store)
        group = zarr.open_group(str(store), mode="r+")
        arr = group.create_array("sample_is_ceu", shape=is_ceu.shape, dtype=bool)
        arr[:] = is_ceu
        cohort["store"] = str(store)
        reference = 'variable = "sample_is_ceu"'
    cfg = _config(
        tmp_path, cohort, name=mode, reference=reference, extra="[report]\nenabled = false\n"
    )
    ds = gx.run_job(gx.load_config(cfg)).dataset
    assert ds is not None and ds.attrs["reference_mode"] == mode
    np.testing.assert_array_equal(ds["sample_is_reference"].values, is_ceu)
    ref = gx.open_genomics_result(tskit_run[1].output_dir)
    np.testing.assert_allclose(ds["eigenvalue"].values, ref["eigenvalue"].values, rtol=1e-10)
    np.testing.assert_array_equal(ds["verdict"].values, ref["verdict"].values)


def test_run_job__unknown_reference_ids_are_named(
    tskit_cohort: dict[str, Any], tmp_path: Path
) -> None:
    cfg = _config(tmp_path, tskit_cohort, reference='samples = ["CEU_0001", "nobody"]')
    with pytest.raises(InputError, match="1 reference sample id.*not in the store: 'nobody'"):
        gx.run_job(gx.load_config(cfg))
    assert not (tmp_path / "out" / "job").exists()


def test_run_job__auto_reference_flags_the_yri_minority(
    tskit_cohort: dict[str, Any], tmp_path: Path
) -> None:
    cfg = _config(
        tmp_path, tskit_cohort, name="auto", reference="", extra="[report]\nenabled = false\n"
    )
    ds = gx.run_job(gx.load_config(cfg)).dataset
    assert ds is not None and ds.attrs["reference_mode"] == "auto"
    assert ds.attrs["scale_from"] == "all" and not ds["sample_is_reference"].values.any()
    yri = np.asarray(tskit_cohort["populations"]) == "YRI"
    k, sep = _shift_component(ds, yri)
    assert ds["verdict"].values[k] == "mean shift" and sep > 5
    # The robust centre lies near the CEU frequencies, not the all-sample ones.
    inc = ds["variant_included"].values
    centre = ds["variant_reference_frequency"].values[inc]
    p_all = ds["variant_allele_frequency"].values[inc]
    gt = zarr.open_group(tskit_cohort["store"], mode="r")["call_genotype"][:][inc]
    p_ceu = gt[:, ~yri].sum(axis=(1, 2)) / (2 * (~yri).sum())
    assert np.abs(centre - p_ceu).mean() < 0.5 * np.abs(p_all - p_ceu).mean()


# ------------------------------------------------------------------------------ config


def test_load_config__demo_config_is_valid() -> None:
    cfg = gx.load_config(REPO / "pipelines" / "demo.toml")
    assert cfg.simulate is not None and cfg.reference_mode == "metadata"
    assert cfg.output_dir == (REPO / "mspca-demo-genomics" / "result").resolve()


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("[inptu]\n", r"unknown section \[inptu\]; did you mean 'input'\?"),
        ('[output]\ndir = "o"\n', r"\[input\] store is required"),
        ('[input]\nstore = "s"\n', r"\[output\] dir is required"),
        (
            '[input]\nstore = "s"\n[output]\ndir = "o"\n[reference]\nsamples = ["a"]\n'
            'variable = "v"\n',
            "only one of samples, samples_file, variable, metadata_column",
        ),
        (
            '[input]\nstore = "s"\n[output]\ndir = "o"\n[qc]\nmin_maf = 0.7\n',
            r"\[qc\] min_maf must be a number in \[0, 0.5\]",
        ),
        (
            '[input]\nstore = "s"\n[output]\ndir = "o"\n[reference]\nscale = "reference"\n',
            "needs a reference set",
        ),
        (
            '[input]\nstore = "s"\n[output]\ndir = "s3://bucket/o"\n',
            "must be a local directory",
        ),
    ],
)
def test_load_config__raises_with_a_fix(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / "job.toml"
    path.write_text(text)
    with pytest.raises(gx.ConfigError, match=match):
        gx.load_config(path)


def test_pipelines_module__runs_as_a_script(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-m", "pipelines.genomics", "--help"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    assert proc.returncode == 0 and "Exit status: 0 done or up to date" in proc.stdout


def test_check__says_whether_the_result_is_up_to_date(
    tskit_run: tuple[Path, gx.JobOutcome],
    tmp_path: Path,
    tskit_cohort: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert gx.main(["check", str(tskit_run[0])]) == gx.EXIT_OK
    assert "up to date" in capsys.readouterr().out
    assert gx.main(["check", str(_config(tmp_path, tskit_cohort))]) == 1
    assert "would compute" in capsys.readouterr().out


def test_sigterm__becomes_an_exception_that_runs_cleanup() -> None:
    before = signal.getsignal(signal.SIGTERM)
    cleaned = []

    def terminate_self() -> None:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises long before this ends
        finally:
            cleaned.append(True)

    # _Terminated carries no message: the handler raises it bare
    with pytest.raises(_Terminated, match="^$"), _sigterm_raises():
        terminate_self()
    assert cleaned == [True]
    assert signal.getsignal(signal.SIGTERM) == before


def test_register_cli__adds_the_genomics_subcommand_to_a_parser(
    tskit_run: tuple[Path, gx.JobOutcome], capsys: pytest.CaptureFixture[str]
) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="mspca")
    gx.register_cli(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["genomics", "run", str(tskit_run[0]), "--quiet"])
    assert args.handler(args) == gx.EXIT_OK
    assert capsys.readouterr().out.startswith("up to date:")


# ------------------------------------------------------------------ data safety (issue 14)


def _own_copy(cohort: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    """A private copy of a session cohort, so a test may damage it."""
    store = tmp_path / "cohort.vcz"
    shutil.copytree(cohort["store"], store)
    return {**cohort, "store": str(store)}


def _tree(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


@pytest.mark.parametrize("where", ["same", "inside", "parent"])
def test_run_job__refuses_output_dir_overlapping_input(
    tskit_cohort: dict[str, Any], tmp_path: Path, where: str
) -> None:
    cohort = _own_copy(tskit_cohort, tmp_path)
    store = Path(cohort["store"])
    before = _tree(store)
    out = {"same": store, "inside": store / "out", "parent": tmp_path}[where]
    cfg = _config(tmp_path, cohort, extra="[report]\nenabled = false\n")
    cfg.write_text(cfg.read_text().replace('dir = "out/job"', f'dir = "{out}"\noverwrite = true'))
    with pytest.raises(OutputOverlapsInputError, match="input store.*refused even with overwrite"):
        gx.run_job(gx.load_config(cfg))
    assert gx.main(["run", str(cfg), "--quiet"]) == gx.EXIT_USAGE
    assert _tree(store) == before


def test_run_job__overwrite_refuses_foreign_output_dir(
    tskit_cohort: dict[str, Any], tmp_path: Path
) -> None:
    cfg = _config(tmp_path, tskit_cohort, extra="[report]\nenabled = false\n")
    out = tmp_path / "out" / "job"
    out.mkdir(parents=True)
    (out / "notes.txt").write_text("keep me")
    with pytest.raises(ForeignOutputError, match=r"\[output\] dir .*did not write"):
        gx.run_job(gx.load_config(cfg), overwrite=True)
    assert (out / "notes.txt").read_text() == "keep me"
    assert _tree(out) == ["notes.txt"]


def test_run_job__missing_genotype_chunk_fails_unless_allowed(
    tskit_cohort: dict[str, Any], tmp_path: Path
) -> None:
    cohort = _own_copy(tskit_cohort, tmp_path)
    (Path(cohort["store"]) / "call_genotype" / "3.0.0").unlink()
    cfg = _config(tmp_path, cohort, extra="[report]\nenabled = false\n")
    with pytest.raises(ChunkReadError, match=r"'call_genotype'.*chunk index \[3, 0, 0\]"):
        gx.run_job(gx.load_config(cfg))
    assert not (tmp_path / "out" / "job").exists()
    cfg.write_text(cfg.read_text().replace("[input]\n", "[input]\nallow_missing_chunks = true\n"))
    outcome = gx.run_job(gx.load_config(cfg))
    params = json.loads(gx.open_genomics_result(outcome.output_dir).attrs["params"])
    assert params["allow_missing_chunks"] is True
    assert (
        "allow_missing_chunks"
        not in gx.load_config(_config(tmp_path, cohort, name="b")).fingerprint_params()
    )  # not used: not recorded, and fingerprints of old results hold


def test_run_job__summary_and_report_quote_this_run(
    tskit_run: tuple[Path, gx.JobOutcome],
) -> None:
    out = tskit_run[1].output_dir
    ds = gx.open_genomics_result(out)
    total, detail = ds.attrs["n_passes"], ds.attrs["n_passes_detail"]
    summary = (out / "summary.txt").read_text()
    page = (out / "report.html").read_text()
    assert f"passes over the genotypes: {total} ({detail})" in summary
    assert f"<td>passes over the genotypes</td><td>{total} ({detail})</td>" in page
    parts = [int(w) for w in detail.replace("+", " ").split() if w.isdigit()]
    assert sum(parts) == total and len(parts) == 3  # QC, fit, all-sample comparison
    comparison = json.loads(ds.attrs["centring_comparison"])
    this_run = f"went from {comparison['eigenvalue'][0]:.6g} to"
    assert this_run in summary and this_run in page
    assert "3509.12" not in summary + page and "2826.7" not in summary + page
    # PCs are numbered from 1 with their share of the variance, in both.
    assert "PC1 of this run went from" in summary and "PC1 of this run" in page
    share = ds["variance_explained"].values
    for k in range(ds.sizes["component"]):
        row = f"<td>PC{k + 1}</td><td>{float(ds['eigenvalue'].values[k]):.6g}</td>"
        assert f"{row}<td>{100 * share[k]:.2f}%</td>" in page
        assert re.search(rf"^PC{k + 1} .* {100 * share[k]:.2f}% ", summary, re.MULTILINE)
    assert "<td>PC0</td>" not in page and not re.search(r"^PC0 ", summary, re.MULTILINE)


def test_run_job__log_numbers_pcs_from_1_with_their_variance(
    tskit_cohort: dict[str, Any], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = _config(tmp_path, tskit_cohort, extra="[report]\nenabled = false\n")
    with caplog.at_level("INFO", logger="mspca.genomics"):
        outcome = gx.run_job(gx.load_config(cfg))
    ds = gx.open_genomics_result(outcome.output_dir)
    lines = [r.getMessage() for r in caplog.records if r.name == "mspca.genomics"]
    pcs = [ln for ln in lines if re.match(r"PC\d+: eigenvalue", ln)]
    assert [ln.split(":")[0] for ln in pcs] == [
        f"PC{k}" for k in range(1, ds.sizes["component"] + 1)
    ]
    share = ds["variance_explained"].values
    for k, ln in enumerate(pcs):
        assert f"({100 * share[k]:.2f}% of the variance)" in ln
    assert share.sum() < 1 and np.all(np.diff(share) <= 0)
    np.testing.assert_allclose(share, ds["eigenvalue"].values / ds.attrs["total_variance"])
    assert ds["component"].values.tolist() == list(range(1, len(pcs) + 1))
    # Every registered output is there, and nothing else.
    assert {p.name for p in outcome.output_dir.iterdir()} == (
        set(OUTPUTS) - {"report.html", "figures"}
    )


def test_open_genomics_result__flipped_byte_is_a_clear_error(
    tskit_run: tuple[Path, gx.JobOutcome], tmp_path: Path
) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(tskit_run[1].output_dir, copy)
    chunk = copy / gx.RESULT_NAME / "sample_score" / "c" / "0" / "0"
    data = bytearray(chunk.read_bytes())
    data[len(data) // 2] ^= 0x04
    chunk.write_bytes(bytes(data))
    with pytest.raises(ResultCorruptError, match="damaged.*checksum"):
        gx.open_genomics_result(copy)


def test_run_job__on_a_scheduler_address_gives_the_threaded_result(
    tskit_run: tuple[Path, gx.JobOutcome], tskit_cohort: dict[str, Any], tmp_path: Path
) -> None:
    """``[compute] scheduler = "tcp://..."``: one client for the whole job, same numbers."""
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
    ) as cluster:
        extra = (
            "[report]\ncompare_all_sample_centring = true\n"
            f'[compute]\nscheduler = "{cluster.scheduler_address}"\n'
        )
        outcome = gx.run_job(gx.load_config(_config(tmp_path, tskit_cohort, extra=extra)))
    assert outcome.status == "computed"
    ours = gx.open_genomics_result(outcome.output_dir)
    threaded = gx.open_genomics_result(tskit_run[1].output_dir)
    np.testing.assert_array_equal(ours["verdict"].values, threaded["verdict"].values)
    np.testing.assert_allclose(ours["eigenvalue"].values, threaded["eigenvalue"].values, rtol=1e-9)


def test_run_job__unreachable_scheduler_address_is_a_scheduler_error(
    tskit_cohort: dict[str, Any], tmp_path: Path
) -> None:
    import dask

    cfg = _config(tmp_path, tskit_cohort, extra='[compute]\nscheduler = "tcp://127.0.0.1:9"\n')
    with (
        dask.config.set({"mspca.connect-timeout": "1s"}),
        pytest.raises(SchedulerError, match=r"could not connect to the Dask scheduler at"),
    ):
        gx.run_job(gx.load_config(cfg))
    assert not (tmp_path / "out" / "job").exists()


def test_run_job__outcome_records_every_pass_it_ran(tskit_run: tuple[Path, gx.JobOutcome]) -> None:
    """Statistics, then the fit's passes, then the comparison fit's.

    Under the threaded scheduler the statistics pass holds the compact matrix's rows in this
    process: no pass reads them back from the temporary directory.
    """
    _, outcome = tskit_run
    names = [p["name"] for p in outcome.passes]
    assert names[:2] == ["genomics-statistics", "mspca-stats"]
    fits = [i for i, name in enumerate(names) if name == "mspca-stats"]
    assert len(fits) == 2  # the fit and the all-sample-centring comparison, each from pass 1
    assert names[fits[0] : fits[1]] == names[fits[1] :]  # the same solver, the same passes
    assert all(p["seconds"] >= 0 and p["products"] for p in outcome.passes)
