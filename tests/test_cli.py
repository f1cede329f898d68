"""Tests of the ``mspca`` command (:mod:`mspca_dask.cli`), in process and as a subprocess."""

from __future__ import annotations

import contextlib
import inspect
import io
import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mspca_dask
from mspca_dask._params import PARAMETERS
from mspca_dask.cli import demo as cli_demo
from mspca_dask.cli import fit as cli_fit
from mspca_dask.cli import main
from mspca_dask.cli.messages import report_warnings
from mspca_dask.testing import make_spiked_mixture

REPO_ROOT = Path(__file__).resolve().parents[1]
# index, eigenvalue, knockoff, displacement, overlap, bound, shift z, verdict
TABLE_ROW = re.compile(
    r"^\d+\s+\S+\s+\S+\s+\S+\s+\S+\s+\S+\s+\S+\s+(covariance|mean shift|mixed|undetermined|bulk)\s",
    re.M,
)
STABLE_SENTENCE = re.compile(
    r"MS-PCA's first stable component .* aligns \d+\.\d% with the true covariance PC"
)
SHIFT_SENTENCE = re.compile(
    r"mean-shift component .* aligns \d+\.\d% with the contamination direction"
)


@pytest.fixture(scope="module")
def source_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A covariance spike and a 10 % cluster 7.5 noise sd off the rest (n = 600, d = 300), as a
    Zarr v3 group with array X: the fit has both a covariance and a mean-shift verdict."""
    c = 300 / 600
    model = make_spiked_mixture(
        600,
        300,
        covariance_spikes=(2 * c**0.5,),
        mean_shift_weights=(0.1,),
        mean_shift_strengths=(8 * c**0.5,),
        random_state=7,
    )
    path = tmp_path_factory.mktemp("cli-source") / "data.zarr"
    model.write_zarr(path, name="X")
    return str(path)


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory, source_store: str) -> dict[str, Any]:
    """One ``mspca fit`` run: its exit status, output and written files."""
    out_dir = tmp_path_factory.mktemp("cli-fit")
    out, png = out_dir / "result.zarr", out_dir / "spectrum.png"
    # capsys is function-scoped; capture by hand for this module-scoped run.
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(
            [
                "fit",
                source_store,
                "--variable",
                "X",
                "--components",
                "6",
                "--out",
                str(out),
                "--plot",
                str(png),
            ]
        )
    return {
        "code": code,
        "out": out,
        "png": png,
        "stdout": stdout.getvalue(),
        "stderr": stderr.getvalue(),
    }


def _no_fit(*args: Any, **kwargs: Any) -> None:
    raise AssertionError("fit must not run when the output is refused")


# ------------------------------------------------------------------------ mspca fit


def test_fit__prints_table_with_both_verdicts_and_writes_result(fitted: dict[str, Any]) -> None:
    assert fitted["code"] == 0, fitted["stderr"]
    assert fitted["stderr"] == ""
    stdout = fitted["stdout"]
    assert "eigenvalue" in stdout and "knockoff" in stdout and "verdict" in stdout
    verdicts = TABLE_ROW.findall(stdout)
    assert len(verdicts) == 6
    assert "covariance" in verdicts and "mean shift" in verdicts
    assert f"result written to {fitted['out']}" in stdout
    res = mspca_dask.open_result(fitted["out"])
    assert res.n_components == 6 and res.n_samples == 600 and res.n_features == 300
    assert res.verdicts.tolist() == verdicts
    assert fitted["png"].stat().st_size > 0


def test_fit__refuses_existing_result_before_fitting(
    fitted: dict[str, Any],
    source_store: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(cli_fit, "fit", _no_fit)
    code = main(["fit", source_store, "--variable", "X", "--out", str(fitted["out"])])
    assert code == 3
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert captured.err.startswith(
        f"mspca: error: a complete result already exists at {fitted['out']}"
    )
    assert "--overwrite" in captured.err
    assert mspca_dask.open_result(fitted["out"]).n_components == 6  # untouched


def test_fit__refuses_existing_path_that_is_not_a_result(
    tmp_path: Path,
    source_store: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(cli_fit, "fit", _no_fit)
    out = tmp_path / "precious"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    assert main(["fit", source_store, "--variable", "X", "--out", str(out)]) == 3
    err = capsys.readouterr().err
    assert re.fullmatch(
        r"mspca: error: .*precious already exists and is not a complete result.*\n", err
    )
    assert (out / "notes.txt").read_text() == "keep me"


def test_fit__overwrite_replaces_result(
    fitted: dict[str, Any],
    source_store: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "result.zarr"
    shutil.copytree(fitted["out"], out)
    code = main(
        [
            "fit",
            source_store,
            "--variable",
            "X",
            "-k",
            "3",
            "--seed",
            "5",
            "--out",
            str(out),
            "--overwrite",
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    res = mspca_dask.open_result(out)
    assert res.n_components == 3 and res.random_state == 5
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir())  # no leftovers


def test_fit__passes_options_to_fit(
    fitted: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    calls: list[dict[str, Any]] = []
    stored = mspca_dask.open_result(fitted["out"])

    def fake_fit(source: Any, **kwargs: Any) -> mspca_dask.MSPCAResult:
        calls.append({"source": source, **kwargs})
        return stored

    monkeypatch.setattr(cli_fit, "fit", fake_fit)
    code = main(
        [
            "fit",
            "some.zarr",
            "--components",
            "6",
            "--out",
            str(tmp_path / "r.zarr"),
            "--variable",
            "V",
            "--sample-dim",
            "cells",
            "--location",
            "none",
            "--solver",
            "exact",
            "--knockoffs",
            "7",
            "--seed",
            "11",
            "--scheduler",
            "sync",
            "--progress",
            "--knockoff-weight",
            "0.5",
            "--knockoff-factor",
            "3",
            "--threshold-scale",
            "2.5",
            "--alpha",
            "0.1",
            "--edge-margin",
            "2",
            "--tol",
            "1e-3",
            "--max-passes",
            "12",
            "--oversampling",
            "4",
        ]
    )
    assert code == 0, capsys.readouterr().err
    assert calls == [
        {
            "source": "some.zarr",
            "n_components": 6,
            "variable": "V",
            "sample_dim": "cells",
            "location": None,
            "solver": "exact",
            "n_knockoffs": 7,
            "random_state": 11,
            "scheduler": "sync",
            "progress": True,
            "allow_missing_chunks": False,
            "layer": None,
            "mask_obs": None,
            "mask_var": None,
            "knockoff_weight": 0.5,
            "knockoff_factor": 3.0,
            "threshold_scale": 2.5,
            "alpha": 0.1,
            "edge_margin": 2.0,
            "tol": 1e-3,
            "max_passes": 12,
            "oversampling": 4,
        }
    ]
    assert mspca_dask.open_result(tmp_path / "r.zarr").n_components == 6


def test_fit__tuning_defaults_are_fit_defaults(
    fitted: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[dict[str, Any]] = []

    def fake_fit(source: Any, **kwargs: Any) -> mspca_dask.MSPCAResult:
        calls.append(kwargs)
        return mspca_dask.open_result(fitted["out"])

    monkeypatch.setattr(cli_fit, "fit", fake_fit)
    assert main(["fit", "some.zarr", "--out", str(tmp_path / "r.zarr")]) == 0
    (kwargs,) = calls
    assert set(PARAMETERS) <= set(kwargs)  # every tuning parameter is passed on
    signature = inspect.signature(mspca_dask.fit).parameters
    assert kwargs == {name: signature[name].default for name in kwargs}


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--knockoff-weight", "1.5", r"argument --knockoff-weight: must be a number in \(0, 1\]"),
        ("--tol", "0", r"argument --tol: must be a number > 0 or None \(not '0'\)"),
        ("--max-passes", "1", r"argument --max-passes: must be an integer >= 2 \(not '1'\)"),
    ],
)
def test_fit__tuning_option_out_of_range_exits_2_before_reading(
    option: str,
    value: str,
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(cli_fit, "fit", _no_fit)
    assert main(["fit", "some.zarr", "--out", str(tmp_path / "r.zarr"), option, value]) == 2
    assert re.search(message, capsys.readouterr().err)


def test_fit__missing_source_exits_2_with_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-such-store.zarr"
    code = main(["fit", str(missing), "--out", str(tmp_path / "r.zarr")])
    assert code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("mspca: error: ")
    assert captured.err.count("\n") == 1
    assert str(missing) in captured.err
    assert "Traceback" not in captured.err
    assert not (tmp_path / "r.zarr").exists()


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0", r"argument --components/-k: must be an integer >= 1 \(not '0'\)"),
        ("two", r"argument --components/-k: must be an integer >= 1 \(not 'two'\)"),
        (
            "301",
            r"mspca: error: n_components must be between 1 and "
            r"min\(n_samples, n_features\) = 300",
        ),
    ],
)
def test_fit__bad_components_exits_2(
    value: str,
    message: str,
    source_store: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(
        [
            "fit",
            source_store,
            "--variable",
            "X",
            "--components",
            value,
            "--out",
            str(tmp_path / "r.zarr"),
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert re.search(message, err)
    assert "Traceback" not in err
    assert not (tmp_path / "r.zarr").exists()


def test_fit__unknown_variable_exits_2(
    source_store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["fit", source_store, "--variable", "Y", "--out", str(tmp_path / "r.zarr")])
    assert code == 2
    err = capsys.readouterr().err
    assert re.fullmatch(r"mspca: error: variable 'Y' is not in it: .*\n", err)


def test_fit__unknown_scheduler_exits_2(
    source_store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "fit",
            source_store,
            "--variable",
            "X",
            "--scheduler",
            "bogus",
            "--out",
            str(tmp_path / "r.zarr"),
        ]
    )
    assert code == 2
    assert capsys.readouterr().err.startswith("mspca: error: scheduler must be one of")


def test_fit__no_spike_warning_is_one_line_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    noise = make_spiked_mixture(
        400, 200, covariance_spikes=(), mean_shift_weights=(), random_state=3
    )
    src = noise.write_zarr(tmp_path / "noise.zarr", name="X")
    code = main(["fit", src, "--variable", "X", "-k", "3", "--out", str(tmp_path / "r.zarr")])
    captured = capsys.readouterr()
    assert code == 0
    assert re.fullmatch(
        r"mspca: warning: no eigenvalue is clearly above the Marchenko-Pastur edge .*\n",
        captured.err,
    )
    assert "bulk" in captured.out
    assert mspca_dask.open_result(tmp_path / "r.zarr").n_stable == 0


def test_report_warnings__our_warnings_become_one_line_each_others_pass_through() -> None:
    lines: list[str] = []

    def warn_ours_twice_then_theirs() -> None:
        for _ in range(2):  # every occurrence, not once per location
            warnings.warn("no spike\n above the edge", mspca_dask.NoSpikeWarning, stacklevel=1)
        warnings.warn("not ours", RuntimeWarning, stacklevel=1)

    with pytest.warns(RuntimeWarning, match="not ours"), report_warnings(lines.append):
        warn_ours_twice_then_theirs()
    assert lines == ["no spike above the edge"] * 2


# ------------------------------------------------------------------------ top level


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"mspca {mspca_dask.__version__}\n"


def test_help_lists_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: mspca ")
    assert "fit" in out and "demo" in out


#: What the command's start must not load: its subcommands import them when they run.
HEAVY_MODULES = ("dask", "distributed", "xarray", "zarr")


@pytest.mark.parametrize(
    "argv",
    [[], ["--help"], ["genomics", "--help"], ["genomics", "run", "--help"], ["fit", "--help"]],
    ids=["import", "help", "genomics-help", "genomics-run-help", "fit-help"],
)
def test_start__import_and_help_load_no_dask_xarray_or_zarr(argv: list[str]) -> None:
    code = (
        "import sys, contextlib, io\n"
        "import mspca_dask.cli\n"
        f"argv = {argv!r}\n"
        "if argv:\n"
        "    with contextlib.redirect_stdout(io.StringIO()):\n"
        "        assert mspca_dask.cli.main(argv) == 0\n"
        f"print(sorted(m for m in {HEAVY_MODULES!r} if m in sys.modules))\n"
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_no_command_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "the following arguments are required: COMMAND" in capsys.readouterr().err


# ------------------------------------------------------------------------ mspca demo


@pytest.mark.integration
def test_demo__no_cluster_end_to_end_then_reuses_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    demo = tmp_path / "demo"
    args = ["demo", "--no-cluster", "--samples", "600", "--features", "300", "--dir", str(demo)]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    out = captured.out
    assert "data.zarr written" in out
    assert "MSPCAResult" in out and len(TABLE_ROW.findall(out)) == 10
    assert STABLE_SENTENCE.search(out) and SHIFT_SENTENCE.search(out)
    for name in ("data.zarr", "result.zarr", "spectrum.png"):
        assert (demo / name).exists()
    first = mspca_dask.open_result(demo / "result.zarr")
    assert first.n_samples == 600 and first.n_stable >= 1

    # Same parameters: the data are reused and the demo's own result is replaced.
    def no_write(*a: Any, **k: Any) -> None:
        raise AssertionError("the demo data must be reused")

    monkeypatch.setattr(cli_demo, "_write_demo_data", no_write)
    assert main(args) == 0
    assert "reused" in capsys.readouterr().out
    np.testing.assert_array_equal(
        mspca_dask.open_result(demo / "result.zarr").eigenvalues, first.eigenvalues
    )


@pytest.mark.integration
def test_demo__other_parameters_rewrite_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    demo = tmp_path / "demo"
    base = ["demo", "--no-cluster", "--features", "150", "--dir", str(demo)]
    assert main([*base, "--samples", "300"]) == 0
    assert main([*base, "--samples", "400"]) == 0
    assert capsys.readouterr().out.count("data.zarr written") == 2
    assert mspca_dask.open_result(demo / "result.zarr").n_samples == 400


@pytest.mark.integration
def test_demo__refuses_a_result_path_that_is_not_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "result.zarr").mkdir()
    code = main(["demo", "--no-cluster", "--dir", str(tmp_path)])
    assert code == 3
    assert capsys.readouterr().err.startswith("mspca: error: ")
    assert not (tmp_path / "data.zarr").exists()


@pytest.mark.integration
def test_demo__bad_pi1_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--pi1", "1.5", "--dir", str(tmp_path)]) == 2
    assert "argument --pi1: must be a number in (0, 1) (not '1.5')" in capsys.readouterr().err


@pytest.mark.integration
def test_python_m_demo_on_a_local_cluster(tmp_path: Path) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mspca_dask",
            "demo",
            "--dir",
            str(tmp_path / "demo"),
            "--samples",
            "600",
            "--features",
            "300",
            "--workers",
            "2",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"Dask dashboard: http://\S+", proc.stdout)
    assert STABLE_SENTENCE.search(proc.stdout)
    assert "Traceback" not in proc.stderr
    assert (tmp_path / "demo" / "result.zarr").is_dir()
