"""The benchmark scripts run (`--quick`) and write their results files; `--render` rewrites them.

Smoke tests of the benchmark scripts (issue: performance benchmarks run by hand, results
committed).  They check the structure of what the scripts write, never a timing: the
timings of a test run on a shared machine mean nothing.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"

pytestmark = pytest.mark.integration

META_KEYS = {
    "cpu",
    "cores",
    "ram_gib",
    "versions",
    "blas",
    "load_average_start",
    "load_average_end",
    "shared_machine",
    "quick",
}


def _run(script: str, out: Path, *options: str) -> dict:
    proc = subprocess.run(
        [sys.executable, str(BENCH / script), "--quick", "--out", str(out), *options],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    name = script.removesuffix(".py")
    for ext in ("json", "md", "png"):
        assert (out / f"{name}.{ext}").is_file(), f"{name}.{ext} missing"
    payload = json.loads((out / f"{name}.json").read_text())
    assert META_KEYS <= set(payload["meta"]), set(payload["meta"])
    assert payload["meta"]["quick"] is True
    md = (out / f"{name}.md").read_text()
    assert "shared 2-core" in md or "shared" in md
    return payload


def test_scale_quick__writes_points_limits_and_memory(tmp_path):
    payload = _run("scale.py", tmp_path)
    assert len(payload["points"]) == 2
    for point in payload["points"]:
        assert point["n_passes"] >= 2
        assert point["peak_rss"] > 0
        assert point["limits"]["read"]["seconds"] > 0
        assert {"gram_f64", "krylov_f64", "thin_f64", "gram_f32"} <= set(point["limits"]["gemm"])
        for p in point["passes"]:
            assert {
                "name",
                "seconds",
                "gb_per_s",
                "read_limit_gb_per_s",
                "gemm_f64_limit_gb_per_s",
            } <= set(p)
    assert payload["chunking"] and payload["location_study"]
    assert {"intercept", "slope", "r2"} <= set(payload["linear_fit_seconds"])


def test_cluster_cohort_quick__a_killed_worker_leaves_the_genomics_result_unchanged(tmp_path):
    """The genomics job on ``dask scheduler`` + two ``dask worker`` processes: a worker
    SIGKILLed during a fit pass is restarted by its nanny and the job's result is the same
    (the killed run alone, added to the stored undisturbed one)."""
    data = ("--data", str(tmp_path / "data"))
    first = _run("cluster_cohort.py", tmp_path, "--no-kill", *data)
    assert "killed" not in first
    payload = _run("cluster_cohort.py", tmp_path, "--killed-only", *data)
    assert payload["undisturbed"] == first["undisturbed"]
    assert "--killed-only" in payload["killed_command"]
    undisturbed, killed = payload["undisturbed"], payload["killed"]
    assert killed["killed"]["task"].startswith("mspca-pass-")
    assert killed["killed"]["pid"] > 0
    np.testing.assert_allclose(killed["eigenvalues"], undisturbed["eigenvalues"], rtol=1e-6)
    assert killed["verdicts"] == undisturbed["verdicts"]
    for run in (undisturbed, killed):
        assert run["n_passes"] >= 2
        assert 0 < run["worker_peak_rss"]["per_worker"] <= payload["memory_limit_bytes"]
    assert any(p["name"].startswith("mspca-pass-") for p in undisturbed["passes"])
    if shutil.which("plink2"):  # plink2's row alone, the job's rows kept
        again = _run("cluster_cohort.py", tmp_path, "--plink2-only", *data)
        assert (again["undisturbed"], again["killed"]) == (undisturbed, killed)
        assert again["plink2"]["seconds"] > 0 and "--plink2-only" in again["plink2_command"]
        assert "--plink2-only" in (tmp_path / "cluster_cohort.md").read_text()


def test_peers_quick__compares_against_the_exact_spectrum(tmp_path):
    payload = _run("peers.py", tmp_path)
    methods = {r["method"] for r in payload["methods"]}
    assert {"mspca randomized", "svd_compressed q4", "dask-ml PCA"} <= methods
    for r in payload["methods"]:
        assert r["seconds"] > 0 and r["peak_rss"] > 0
        assert r["max_abs_error"] >= 0
    assert {"time_ratio", "accuracy_ratio", "met"} <= set(payload["target"])
    assert len(payload["exact"]["uncentred"]) == payload["meta"]["K"]


def test_runtime_quick__fits_the_cost_model(tmp_path):
    payload = _run("runtime.py", tmp_path)
    assert [r["case"] for r in payload["paper"]["components"]] == ["1 PC", "9 PCs"]
    assert payload["paper"]["scaling"]
    for r in payload["grid"]:
        assert r["randomized"]["n_passes"] >= 2
        assert r["auto_choice"] in ("exact", "randomized")
    model = payload["cost_model"]
    for key in ("a_gram_s_per_madd", "a_eigh_s_per_p3", "a_krylov_s_per_madd", "p_star"):
        assert key in model
    assert model["crossover"]


def test_runtime_quick__grid_only_keeps_the_paper_tables_and_render_rewrites(tmp_path):
    first = _run("runtime.py", tmp_path)
    second = _run("runtime.py", tmp_path, "--grid-only")
    assert second["paper"] == first["paper"]
    assert second["meta"]["paper_tables_from"]["date"] == first["meta"]["date"]
    assert "earlier run of the script" in (tmp_path / "runtime.md").read_text()
    (tmp_path / "runtime.md").unlink()
    third = _run("runtime.py", tmp_path, "--render")
    assert third == second  # re-rendering measures nothing and changes nothing stored
    assert (tmp_path / "runtime.md").is_file()


def test_accuracy_quick__runs_and_merges_one_method_into_stored_results(tmp_path):
    def run(*options: str) -> dict:
        proc = subprocess.run(
            [
                sys.executable,
                str(BENCH / "accuracy.py"),
                "--quick",
                "--out",
                str(tmp_path),
                "--only",
                "pi1=0.05",
                *options,
            ],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=ROOT,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads((tmp_path / "accuracy.json").read_text())

    first = run("--methods", "ms-pca", "vanilla-pca")
    (row,) = first["results"]
    assert set(row["methods"]) == {"ms-pca", "vanilla-pca"}
    assert "| — |" in (tmp_path / "accuracy.md").read_text()  # methods not run show a dash
    second = run("--methods", "ms-pca-randomized")
    (row2,) = second["results"]
    assert row2["methods"]["ms-pca"] == row["methods"]["ms-pca"]  # kept, not rerun
    assert set(row2["methods"]) == {"ms-pca", "vanilla-pca", "ms-pca-randomized"}
    assert row2["methods"]["ms-pca-randomized"]["mean"] > 90  # same data as ms-pca


def _run_script(script: str, *options: str) -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH / script), *options],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_accuracy_quick__beyond_suite_writes_its_table(tmp_path):
    _run_script("accuracy.py", "--suite", "beyond", "--quick", "--out", str(tmp_path))
    payload = json.loads((tmp_path / "accuracy.json").read_text())
    rows = {r["scenario"]: r for r in payload["beyond"]}
    assert payload["meta"]["beyond"]["quick"] is True
    assert set(rows) == {
        "paper pi1=0.05",
        "3 equal clusters 5 % each",
        "no contamination, 2 cov spikes",
    }
    assert all(r["trials"] == 1 for r in rows.values())
    assert 0 <= rows["paper pi1=0.05"]["mean_alignment"] <= 100
    assert "trials_with_false_flag" in rows["no contamination, 2 cov spikes"]
    md = (tmp_path / "accuracy.md").read_text()
    assert "## Beyond the paper's setting" in md and "| 3 equal clusters 5 % each |" in md


@pytest.mark.parametrize(
    ("script", "sections"),
    [
        ("accuracy.py", ["## The paper's setting", "## Beyond the paper's setting"]),
        ("genotype_verdicts.py", ["## The run"]),
        ("detection_limits.py", ["## The run"]),
    ],
)
def test_render__rewrites_the_results_file_from_the_committed_json(tmp_path, script, sections):
    name = script.removesuffix(".py")
    stored = BENCH / "results" / f"{name}.json"
    (tmp_path / f"{name}.json").write_bytes(stored.read_bytes())
    _run_script(script, "--render", "--out", str(tmp_path))
    assert (tmp_path / f"{name}.json").read_bytes() == stored.read_bytes()  # nothing rerun
    md = (tmp_path / f"{name}.md").read_text()
    for heading in ["## How to read this file", *sections]:
        assert heading in md
    for field in ("- Command: `python benchmarks/", "- Date: ", "- Machine: ", "- Commit: "):
        assert field in md
    payload = json.loads(stored.read_text())
    rows = payload.get("beyond", []) + payload.get("results", []) + payload.get("runs", [])
    assert md.count("\n| ") - md.count("\n|---") >= len(rows)  # every stored row, and heads
    # the committed file is exactly what the renderer writes
    assert md == (BENCH / "results" / f"{name}.md").read_text()


def test_detection_limits__one_trial_writes_its_records_and_table(tmp_path):
    _run_script("detection_limits.py", "--trials", "1", "--out", str(tmp_path))
    payload = json.loads((tmp_path / "detection_limits.json").read_text())
    assert payload["command"] == "python benchmarks/detection_limits.py --trials 1"
    meta = payload["meta"]
    assert {"cpu", "cores", "date", "commit", "seconds", "load_average_start"} <= set(meta)
    assert meta["load_average_end"] is not None
    (cluster,) = payload["clusters"]
    (twin,) = payload["twins"]
    assert (cluster["seed"], twin["seed"]) == (5000, 6000)
    for record in (cluster, twin):
        test = record["group_test"]
        assert set(test) == {"found", "statistic", "p_value", "n_twins"}
        assert test["statistic"] >= 0 and 0 < test["p_value"] <= 1 and 0 <= test["n_twins"] <= 19
        if test["found"]:  # declared only when the data beat every twin drawn, at 5 %
            assert test["statistic"] > 0 and test["p_value"] <= 0.05 and test["n_twins"] == 19
    assert math.isfinite(cluster["oracle_ratio"]) and cluster["oracle_distance_sd"] > 0
    fit = cluster["fit"]
    assert 0 <= fit["alignment"] <= 1 and fit["failure"] == (fit["alignment"] < 0.5)
    assert fit["flagged"] == any(v in ("mean shift", "mixed") for v in fit["verdicts"])
    assert 0 <= fit["members_displaced"] <= 1
    summary = payload["summary"]
    expected = {
        "clusters_found": cluster["group_test"]["found"],
        "twins_with_a_group": twin["group_test"]["found"],
        "fit_flagged": fit["flagged"],
        "failures": fit["failure"],
    }
    assert set(summary) == set(expected)
    for key, flag in expected.items():
        row = summary[key]
        assert (row["count"], row["trials"]) == (int(flag), 1)
        assert row["wilson95"][0] <= row["rate"] <= row["wilson95"][1]
    md = (tmp_path / "detection_limits.md").read_text()
    for line in (
        "## How to read this file",
        "## The run",
        "- Command: `python benchmarks/detection_limits.py --trials 1`",
        "- Date: ",
        "- Machine: ",
        "- Commit: ",
        "| cluster found by the group test | ",
        "| Gaussian twin given a group (false) | ",
        "| default fit: failure (alignment < 0.5) | ",
    ):
        assert line in md
    assert str(tmp_path) not in md + json.dumps(payload)  # no path of the machine
    # --render writes the same file from the JSON alone
    (tmp_path / "detection_limits.md").unlink()
    _run_script("detection_limits.py", "--render", "--out", str(tmp_path))
    assert (tmp_path / "detection_limits.md").read_text() == md


def test_verdict_suite_quick__one_trial_of_two_families(tmp_path):
    _run_script("verdict_suite.py", "--quick", "--out", str(tmp_path))
    payload = json.loads((tmp_path / "verdict_suite.json").read_text())
    assert {"cores", "ram_gib", "commit", "command", "load_average_end"} <= set(payload["meta"])
    assert payload["meta"]["quick"] is True and "--quick" in payload["meta"]["command"]
    assert [s["family"] for s in payload["summary"]] == ["N-iso", "P-paper-10"]
    assert [(f["family"], f["seed"]) for f in payload["fits"]] == [("N-iso", 0), ("P-paper-10", 0)]
    for fit in payload["fits"]:
        assert 0 <= fit["cos"] <= 1 and fit["seconds"] > 0 and fit["n_passes"] >= 1
        assert fit["failure"] == (fit["cos"] < 0.5)
    null, power = payload["summary"]
    assert null["kind"] == "null" and null["detected"] is None and null["trials"] == 1
    assert power["kind"] == "power" and len(payload["fits"][1]["captured"]) == 1
    md = (tmp_path / "verdict_suite.md").read_text()
    assert "How to read the tables" in md and "| N-iso | 1000 × 900 | 1 |" in md
    assert "## Real data" not in md  # no real family was run
