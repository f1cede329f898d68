"""Scheduled genomics PCA: VCF Zarr in, population structure flagged, report out.

One job = one config file (TOML, or YAML when PyYAML is installed); one command runs it::

    python -m pipelines.genomics run job.toml     # from a source checkout
    mspca genomics run job.toml                   # once wired into the mspca command

What a run does
---------------
1. Opens the VCF Zarr store (bio2zarr's layout: ``call_genotype`` int8 ``(variants, samples,
   ploidy)``, ``-1`` missing; or a dosage variable ``call_dosage`` / ``call_DS``) lazily.
2. QC in one statistics pass: allele frequency, missingness, minor-allele-frequency filter,
   per-sample call rate (a second pass only if samples fail the call-rate filter).
3. MS-PCA through :func:`mspca_dask.fit`.  **Samples are the observations** (``n`` = number of
   samples) and **variants are the features** (``d`` = number of variants); scores are per
   sample, loadings per variant.  Missing calls are mean-imputed with the *reference*
   frequency inside the chunk function
   (:func:`mspca_dask.genomics.preprocess.standardize`); no dense copy of the genotypes is made.
4. Writes ``OUTPUT/result.zarr`` (the Dataset of :data:`GENOMICS_VARIABLES`), a self-contained
   ``OUTPUT/report.html`` with PNG figures, and ``OUTPUT/summary.txt`` — all into a hidden
   temporary directory that is renamed into place only when complete.

Centring: the allele frequencies come from a **reference** set of samples
-------------------------------------------------------------------------
Standard genotype PCA centres every variant by its mean over *all* samples.  Here the centre
(and by default the scale) of every variant come from a reference set: the scores are in the
reference population's units, the location is its centre, and its samples are the inliers'
group of the verdict (:mod:`mspca_dask.verdict`).  It is given in ``[reference]`` (sample
ids, a file of ids, a boolean sample variable of the store, or metadata values such as
``population = CEU``).
Without one, the location is estimated robustly by the core (``location="auto"``: the mean of
the inliers in the space of the leading scores) and the scale from all samples.  The result
records which reference was used (``reference_mode``, ``reference_description``,
``sample_is_reference``, ``variant_reference_frequency``).

Scheduling
----------
Reruns with the same input fingerprint and parameters are no-ops (exit 0).  A crashed or
killed run leaves at most hidden ``.NAME.tmp-*`` directories, never a complete-looking
result; the next run removes them.  Exit status: 0 done or up to date, 1 runtime error,
2 bad config or input, 3 a complete result from other inputs/parameters exists and
``overwrite`` was not asked, 75 another run of the same job holds the lock (EX_TEMPFAIL: try
later), 130 interrupted, 143 terminated (SIGTERM).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import (
    EXIT_ERROR,
    EXIT_EXISTS,
    EXIT_INTERRUPTED,
    EXIT_LOCKED,
    EXIT_OK,
    EXIT_TERMINATED,
    EXIT_USAGE,
    ConfigError,
    JobLockedError,
)
from ..schema import GENOMICS_ATTRS, GENOMICS_SCHEMA_VERSION, GENOMICS_VARIABLES
from .cli import build_parser, main, register_cli

if TYPE_CHECKING:
    from .cohort import VcfZarr
    from .config import JobConfig, SimulateConfig, load_config
    from .dataset import RESULT_NAME, open_genomics_result, validate_genomics_dataset
    from .genotypes import genotype_input
    from .job import JobOutcome, job_fingerprint, run_job
    from .simulate import simulate_cohort
    from .sources import input_fingerprint, open_genotypes, open_vcf_zarr

#: Names loaded on first use, and their modules: the command's parsers (``mspca --help``)
#: need none of them, and they pull in Dask, xarray and Zarr.
_LAZY = {
    "VcfZarr": ".cohort",
    "JobConfig": ".config",
    "SimulateConfig": ".config",
    "load_config": ".config",
    "RESULT_NAME": ".dataset",
    "open_genomics_result": ".dataset",
    "validate_genomics_dataset": ".dataset",
    "genotype_input": ".genotypes",
    "JobOutcome": ".job",
    "job_fingerprint": ".job",
    "run_job": ".job",
    "simulate_cohort": ".simulate",
    "input_fingerprint": ".sources",
    "open_genotypes": ".sources",
    "open_vcf_zarr": ".sources",
}

__all__ = [
    "JobConfig",
    "JobOutcome",
    "load_config",
    "run_job",
    "simulate_cohort",
    "SimulateConfig",
    "open_vcf_zarr",
    "open_genotypes",
    "VcfZarr",
    "input_fingerprint",
    "job_fingerprint",
    "genotype_input",
    "RESULT_NAME",
    "open_genomics_result",
    "validate_genomics_dataset",
    "GENOMICS_VARIABLES",
    "GENOMICS_ATTRS",
    "GENOMICS_SCHEMA_VERSION",
    "ConfigError",
    "JobLockedError",
    "main",
    "build_parser",
    "register_cli",
    "EXIT_OK",
    "EXIT_ERROR",
    "EXIT_USAGE",
    "EXIT_EXISTS",
    "EXIT_LOCKED",
    "EXIT_INTERRUPTED",
    "EXIT_TERMINATED",
]


def __getattr__(name: str) -> object:
    import importlib

    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'mspca_dask.genomics' has no attribute {name!r}")
    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
