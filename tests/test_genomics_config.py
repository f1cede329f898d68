"""The genomics job's config: the [pca] section read by the parameter registry, fingerprints.

No genomics extra needed: nothing here opens a store.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mspca_dask._params import PARAMETERS, from_mapping
from mspca_dask.errors import EXIT_USAGE, ConfigError, ParameterError
from mspca_dask.genomics import JobConfig, SimulateConfig

BASE = Path("/base")
REPO = Path(__file__).resolve().parents[1]
MINIMAL: dict[str, Any] = {"input": {"store": "s3://bucket/c.vcz"}, "output": {"dir": "o"}}

#: ``fingerprint_params()`` of this config as the single-module genomics wrote it: a result
#: directory written then must still be recognised as up to date (same job fingerprint).
PINNED_RAW: dict[str, Any] = {
    "job": {"name": "pinned"},
    "input": {"store": "cohort.vcz", "sample_metadata": "samples.tsv", "color_by": "population"},
    "reference": {"metadata_column": "population", "metadata_values": ["CEU"]},
    "qc": {"min_maf": 0.01},
    "pca": {"n_components": 6, "n_knockoffs": 3, "solver": "exact", "seed": 11},
    "compute": {"workers": 3, "memory_budget": "1GiB"},
    "output": {"dir": "out/pinned"},
    "report": {"compare_all_sample_centring": True},
}
PINNED_PARAMS = {
    "color_by": "population",
    "compare_all_sample_centring": True,
    "fingerprint": "listing",
    "genotype_variable": "auto",
    "max_variant_missing": 0.1,
    "metadata_id_column": "sample_id",
    "min_maf": 0.01,
    "min_sample_call_rate": 0.9,
    "n_components": 6,
    "n_knockoffs": 3,
    "ploidy": None,
    "reference_metadata_column": "population",
    "reference_metadata_values": ["CEU"],
    "reference_samples": None,
    "reference_samples_file": None,
    "reference_variable": None,
    "report": True,
    "sample_metadata": "/base/samples.tsv",
    "scale": "all",
    "seed": 11,
    "simulate": None,
    "solver": "exact",
    "storage_options": {},
    "store": "/base/cohort.vcz",
}


def test_job_config__fingerprint_params_are_those_of_earlier_results() -> None:
    cfg = JobConfig.from_mapping(PINNED_RAW, base=BASE)
    assert cfg.fingerprint_params() == PINNED_PARAMS


def test_job_config__pca_defaults_are_the_registry_defaults() -> None:
    cfg = JobConfig.from_mapping(MINIMAL, base=BASE)
    defaults = from_mapping({})
    assert (cfg.n_components, cfg.n_knockoffs, cfg.solver, cfg.seed) == (
        defaults.n_components,
        defaults.n_knockoffs,
        defaults.solver,
        defaults.random_state,
    )
    assert cfg.fit_options == {} and "fit_options" not in cfg.fingerprint_params()


def test_job_config__pca_takes_every_tuning_parameter_and_fingerprints_it() -> None:
    raw = {**MINIMAL, "pca": {"knockoff_weight": 0.5, "oversampling": 4}}
    cfg = JobConfig.from_mapping(raw, base=BASE)
    assert cfg.fit_options == {"knockoff_weight": 0.5, "oversampling": 4}
    plain = JobConfig.from_mapping(MINIMAL, base=BASE).fingerprint_params()
    assert cfg.fingerprint_params() == {**plain, "fit_options": cfg.fit_options}


@pytest.mark.parametrize(
    ("pca", "key"),
    [
        ({"n_knockoffs": 0}, "n_knockoffs"),
        ({"n_components": True}, "n_components"),
        ({"solver": "svd"}, "solver"),
        ({"knockoff_weight": -1.0}, "knockoff_weight"),
        ({"seed": -3}, "random_state"),
    ],
)
def test_job_config__bad_pca_value_raises_the_registry_message(
    pca: dict[str, Any], key: str
) -> None:
    with pytest.raises(
        ParameterError, match=r"^\[pca\] .* must be " + re.escape(PARAMETERS[key].range_text())
    ) as expected:
        from_mapping(pca, where="[pca]")
    with pytest.raises(
        ConfigError, match=r"^\[pca\] .* must be " + re.escape(PARAMETERS[key].range_text())
    ):
        JobConfig.from_mapping({**MINIMAL, "pca": pca}, base=BASE)
    assert str(expected.value).startswith("[pca] ")


def test_job_config__unknown_pca_key_suggests_the_closest() -> None:
    with pytest.raises(ConfigError, match=r"unknown key 'n_knockofs' in \[pca\]; did you mean"):
        JobConfig.from_mapping({**MINIMAL, "pca": {"n_knockofs": 2}}, base=BASE)


def test_job_config__report_color_by_wins_over_input_color_by() -> None:
    raw = {
        "input": {"store": "s", "sample_metadata": "m.tsv", "color_by": "a"},
        "report": {"color_by": "b"},
        "output": {"dir": "o"},
    }
    assert JobConfig.from_mapping(raw, base=BASE).color_by == "b"


@pytest.mark.integration
def test_python_m_genomics__runs_the_command_with_the_shared_exit_codes(tmp_path: Path) -> None:
    missing = tmp_path / "missing.toml"
    proc = subprocess.run(
        [sys.executable, "-m", "mspca_dask.genomics", "check", str(missing), "--quiet"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.returncode == EXIT_USAGE == ConfigError.exit_code
    assert f"no config file at {missing}" in proc.stderr


def test_job_config__simulate_section_reads_every_field_and_checks_the_writer() -> None:
    body = {f.name: getattr(SimulateConfig(), f.name) for f in dataclasses.fields(SimulateConfig)}
    raw = {"input": {"store": "c.vcz"}, "output": {"dir": "o"}}
    cfg = JobConfig.from_mapping({**raw, "simulate": body}, base=BASE)
    assert cfg.simulate == SimulateConfig()
    bad = {**body, "missing_rate": 0.1}
    with pytest.raises(ConfigError, match="missing_rate > 0 needs writer = 'vcf2zarr'"):
        JobConfig.from_mapping({**raw, "simulate": bad}, base=BASE)
    with pytest.raises(ConfigError, match=r"\[simulate\] length must be a number >= 1000"):
        JobConfig.from_mapping({**raw, "simulate": {"length": 10}}, base=BASE)
    with pytest.raises(ConfigError, match=r"\[simulate\] writer_processes"):
        JobConfig.from_mapping({**raw, "simulate": {"writer_processes": -1}}, base=BASE)


# ------------------------------------------------------------------------------ [fit]

_CEU = {"metadata_column": "population", "metadata_values": ["CEU"]}
_WITH_METADATA = {**MINIMAL, "input": {**MINIMAL["input"], "sample_metadata": "samples.tsv"}}


@pytest.mark.parametrize(
    ("fit", "mode", "field", "value"),
    [
        ({"samples": ["a", "b"]}, "samples", "samples", ("a", "b")),
        ({"samples_file": "fit.txt"}, "file", "samples_file", Path("/base/fit.txt")),
        ({"variable": "sample_unrelated"}, "variable", "variable", "sample_unrelated"),
        ({**_CEU, "metadata_values": ["YRI"]}, "metadata", "metadata_values", ("YRI",)),
        ({"samples": "reference"}, "reference", "reference", True),
    ],
)
def test_job_config__fit_takes_every_way_of_giving_samples(
    fit: dict[str, Any], mode: str, field: str, value: Any
) -> None:
    raw = {**_WITH_METADATA, "reference": _CEU, "fit": fit}
    cfg = JobConfig.from_mapping(raw, base=BASE)
    assert cfg.fit is not None and cfg.fit.mode == mode
    assert getattr(cfg.fit, field) == value
    assert "fit" in cfg.fingerprint_params()


def test_job_config__no_fit_section_leaves_the_fingerprint_params_as_they_were() -> None:
    cfg = JobConfig.from_mapping(PINNED_RAW, base=BASE)
    assert cfg.fit is None and "fit" not in cfg.fingerprint_params()


@pytest.mark.parametrize(
    ("fit", "match"),
    [
        ({}, r"\[fit\] needs one of samples, samples_file"),
        ({"samples": []}, r"\[fit\] samples must list at least one sample id"),
        ({"samples": "unrelated"}, r'\[fit\] samples must be a list of sample ids or "reference"'),
        ({"samples": ["a"], "variable": "v"}, r"\[fit\] takes only one of .*got samples, variable"),
        ({"metadata_column": "population"}, r"\[fit\] metadata_column needs metadata_values"),
        ({"metadata_values": ["CEU"]}, r"\[fit\] metadata_values needs metadata_column"),
        ({"sample": ["a"]}, r"unknown key 'sample' in \[fit\].*samples"),
    ],
)
def test_job_config__bad_fit_section_raises_naming_the_key(fit: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        JobConfig.from_mapping({**_WITH_METADATA, "fit": fit}, base=BASE)


def test_job_config__fit_on_the_reference_needs_a_reference_set() -> None:
    with pytest.raises(ConfigError, match=r'\[fit\] samples = "reference" needs a reference'):
        JobConfig.from_mapping({**MINIMAL, "fit": {"samples": "reference"}}, base=BASE)
    with pytest.raises(ConfigError, match=r"\[fit\] metadata_column needs \[input\] sample_meta"):
        JobConfig.from_mapping({**MINIMAL, "fit": _CEU}, base=BASE)
