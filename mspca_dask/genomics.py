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
   frequency inside the chunk function (:func:`mspca_dask.preprocess.standardize`); no dense
   copy of the genotypes is made.
4. Writes ``OUTPUT/result.zarr`` (the Dataset of :data:`GENOMICS_VARIABLES`), a self-contained
   ``OUTPUT/report.html`` with PNG figures, and ``OUTPUT/summary.txt`` — all into a hidden
   temporary directory that is renamed into place only when complete.

Centring: the allele frequencies come from a **reference** set of samples
-----------------------------------------------------------------------
Standard genotype PCA centres every variant by its mean over *all* samples.  That centring
removes exactly what the knockoff needs to see: on a stdpopsim Out-of-Africa simulation
(200 CEU + 20 YRI) the YRI spike went from 3509.12 to 3508.97 under the knockoff with
all-sample frequencies — judged "stable", which is wrong — and from 2826.7 to 2377.4 with the
CEU frequencies, correctly flagged as a mean shift.  So the centre (and by default the scale)
of every variant come from a reference set given in ``[reference]`` (sample ids, a file of ids,
a boolean sample variable of the store, or metadata values such as ``population = CEU``).
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

import argparse
import base64
import contextlib
import dataclasses
import difflib
import hashlib
import html
import io as _stdio
import json
import logging
import os
import platform
import shutil
import signal
import sys
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dask.array as da
import numpy as np

from . import _compact, preprocess
from ._execution import Executor
from .io.safety import check_chunks_present, check_output_not_input, foreign_error, is_replaceable
from .errors import (
    USAGE_ERRORS,
    ConfigError,
    DTypeError,
    InputError,
    JobLockedError,
    MSPCAError,
    ResultExistsError,
    SourceNotFoundError,
    VariableNotFoundError,
)
from .io import ZarrChunkReader as _ZarrChunkReader

if TYPE_CHECKING:
    import xarray as xr
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from .result import MSPCAResult

__all__ = [
    "JobConfig",
    "JobOutcome",
    "load_config",
    "run_job",
    "simulate_cohort",
    "open_vcf_zarr",
    "VcfZarr",
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

logger = logging.getLogger("mspca.genomics")

#: Exit status: done, or already up to date (a no-op rerun).
EXIT_OK = 0
#: Exit status: a runtime error (unreadable chunk, failed write, scheduler, a bug).
EXIT_ERROR = 1
#: Exit status: the config file or the input is wrong.
EXIT_USAGE = 2
#: Exit status: a complete result from other inputs/parameters exists; overwrite not asked.
EXIT_EXISTS = 3
#: Exit status: another run of the same job holds its lock (sysexits' EX_TEMPFAIL).
EXIT_LOCKED = 75
#: Exit status after SIGINT (128 + 2).
EXIT_INTERRUPTED = 130
#: Exit status after SIGTERM (128 + 15), e.g. Kubernetes stopping the pod.
EXIT_TERMINATED = 143

#: Version of the output Dataset layout (:data:`GENOMICS_VARIABLES`, :data:`GENOMICS_ATTRS`).
GENOMICS_SCHEMA_VERSION = 1
#: Name of the result store inside the output directory.
RESULT_NAME = "result.zarr"
#: Root attribute of a simulated store holding the parameters it was simulated with.
SIMULATION_ATTR = "mspca_simulation"

CENTRING_NOTE = (
    "Allele frequencies (centre and scale) come from a reference set of samples, not from all "
    "samples: centring by the all-sample mean cancels the overlap between the knockoff and a "
    "shifted population, so a shifted minority would look 'stable'. Set [report] "
    "compare_all_sample_centring = true to see what all-sample centring gives on this run."
)
AXES_NOTE = (
    "Samples are the observations of the PCA (n = number of samples analysed) and variants "
    "the features (d = number of variants analysed); scores are per sample, loadings per "
    "variant."
)


# --------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------


class _Terminated(BaseException):
    """Raised in the main thread by the SIGTERM handler (so cleanup code runs)."""


# --------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------

_SCHEDULERS = ("threads", "sync", "processes", "local-cluster")


@dataclass(frozen=True)
class SimulateConfig:
    """``[simulate]``: make the input store with stdpopsim/msprime and bio2zarr (demo, tests)."""

    species: str = "HomSap"
    model: str = "OutOfAfrica_3G09"
    populations: dict[str, int] = field(default_factory=lambda: {"CEU": 200, "YRI": 20})
    chromosome: str = "chr22"
    left: float = 10_000_000.0
    length: float = 4_000_000.0
    seed: int = 1
    missing_rate: float = 0.0
    writer: str = "tskit2zarr"
    variants_chunk_size: int = 2000


@dataclass(frozen=True)
class JobConfig:
    """A validated job, with paths resolved against the config file's directory.

    Build it with :func:`load_config` (from a file) or :meth:`from_mapping`; the keys are
    documented in ``pipelines/README.md``.
    """

    name: str
    store: str
    output_dir: Path
    storage_options: dict[str, Any] = field(default_factory=dict)
    genotype_variable: str = "auto"
    ploidy: int | None = None
    sample_metadata: Path | None = None
    metadata_id_column: str = "sample_id"
    color_by: str | None = None
    reference_samples: tuple[str, ...] | None = None
    reference_samples_file: Path | None = None
    reference_variable: str | None = None
    reference_metadata_column: str | None = None
    reference_metadata_values: tuple[str, ...] | None = None
    scale: str = "reference"
    min_maf: float = 0.05
    max_variant_missing: float = 0.1
    min_sample_call_rate: float = 0.9
    n_components: int = 10
    n_knockoffs: int = 5
    solver: str = "auto"
    seed: int = 0
    scheduler: str = "threads"
    workers: int = 2
    memory_budget: int = _compact.DEFAULT_MEMORY_BUDGET
    overwrite: bool = False
    allow_missing_chunks: bool = False
    fingerprint: str = "listing"
    report: bool = True
    compare_all_sample_centring: bool = False
    simulate: SimulateConfig | None = None
    config_path: Path | None = None

    # ------------------------------------------------------------------ derived
    @property
    def reference_mode(self) -> str:
        """``"samples"``, ``"file"``, ``"variable"``, ``"metadata"`` or ``"auto"``."""
        if self.reference_samples is not None:
            return "samples"
        if self.reference_samples_file is not None:
            return "file"
        if self.reference_variable is not None:
            return "variable"
        if self.reference_metadata_column is not None:
            return "metadata"
        return "auto"

    def fingerprint_params(self) -> dict[str, Any]:
        """Everything that changes the result (not overwrite, scheduler, or workers)."""
        d = dataclasses.asdict(self)
        for k in ("overwrite", "scheduler", "workers", "config_path", "output_dir", "name"):
            d.pop(k)
        d.pop("memory_budget")  # where the compact matrix lives, not what it holds
        if not d["allow_missing_chunks"]:  # recorded only when used: old fingerprints hold
            d.pop("allow_missing_chunks")
        return json.loads(json.dumps(d, default=str))

    # ------------------------------------------------------------------ parsing
    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any], base: Path | None = None) -> JobConfig:
        """Validate a parsed config (the sections of the TOML/YAML file).

        Parameters
        ----------
        raw : mapping
            ``{"job": {...}, "input": {...}, "reference": {...}, "qc": {...}, "pca": {...},
            "compute": {...}, "output": {...}, "report": {...}, "simulate": {...}}``.
        base : Path, optional
            Directory that relative paths are resolved against (the config file's).

        Raises
        ------
        ConfigError
            An unknown section or key (with the closest valid one), a missing required key,
            or a value of the wrong type or out of range.
        """
        base = Path.cwd() if base is None else base
        sections = {
            "job": {"name"},
            "input": {
                "store",
                "storage_options",
                "genotype_variable",
                "ploidy",
                "sample_metadata",
                "metadata_id_column",
                "color_by",
                "allow_missing_chunks",
            },
            "reference": {
                "samples",
                "samples_file",
                "variable",
                "metadata_column",
                "metadata_values",
                "scale",
            },
            "qc": {"min_maf", "max_variant_missing", "min_sample_call_rate"},
            "pca": {"n_components", "n_knockoffs", "solver", "seed"},
            "compute": {"scheduler", "workers", "memory_budget"},
            "output": {"dir", "overwrite", "fingerprint"},
            "report": {"enabled", "compare_all_sample_centring", "color_by"},
            "simulate": {f.name for f in dataclasses.fields(SimulateConfig)},
        }
        if not isinstance(raw, Mapping):
            raise ConfigError(f"the config must be a table of sections (got {type(raw).__name__})")
        for section, body in raw.items():
            if section not in sections:
                raise ConfigError(f"unknown section [{section}]{_suggest(section, sections)}")
            if not isinstance(body, Mapping):
                raise ConfigError(f"[{section}] must be a table of keys (got {body!r})")
            for key in body:
                if key not in sections[section]:
                    raise ConfigError(
                        f"unknown key {key!r} in [{section}]{_suggest(key, sections[section])}"
                    )

        def sec(name: str) -> Mapping[str, Any]:
            return raw.get(name, {}) or {}

        inp, ref, qc, pca = sec("input"), sec("reference"), sec("qc"), sec("pca")
        comp, out, rep, job = sec("compute"), sec("output"), sec("report"), sec("job")

        def path(value: Any, where: str) -> Path:
            if not isinstance(value, str) or not value:
                raise ConfigError(f"{where} must be a non-empty string path (got {value!r})")
            p = Path(os.path.expanduser(value))
            return p if p.is_absolute() else (base / p).resolve()

        if "store" not in inp:
            raise ConfigError("[input] store is required: the path or URL of a VCF Zarr store")
        store_raw = inp["store"]
        if not isinstance(store_raw, str) or not store_raw:
            raise ConfigError(f"[input] store must be a path or URL (got {store_raw!r})")
        store = store_raw if _is_url(store_raw) else str(path(store_raw, "[input] store"))
        if "dir" not in out:
            raise ConfigError("[output] dir is required: the directory the job writes")
        out_raw = out["dir"]
        if isinstance(out_raw, str) and _is_url(out_raw):
            raise ConfigError(
                f"[output] dir must be a local directory (got {out_raw!r}): the result is "
                "committed by an atomic rename, which object stores lack; write locally and "
                "copy the finished directory"
            )
        output_dir = path(out_raw, "[output] dir")

        refs = [k for k in ("samples", "samples_file", "variable", "metadata_column") if k in ref]
        if len(refs) > 1:
            raise ConfigError(
                "[reference] takes only one of samples, samples_file, variable, "
                f"metadata_column (got {', '.join(refs)})"
            )
        ref_samples = None
        if "samples" in ref:
            ref_samples = _str_tuple(ref["samples"], "[reference] samples")
            if not ref_samples:
                raise ConfigError("[reference] samples must list at least one sample id")
        ref_values = None
        if "metadata_column" in ref:
            if "metadata_values" not in ref:
                raise ConfigError(
                    "[reference] metadata_column needs metadata_values, e.g. "
                    'metadata_column = "population" and metadata_values = ["CEU"]'
                )
            ref_values = _str_tuple(ref["metadata_values"], "[reference] metadata_values")
            if not ref_values:
                raise ConfigError("[reference] metadata_values must list at least one value")
            if "sample_metadata" not in inp:
                raise ConfigError(
                    "[reference] metadata_column needs [input] sample_metadata (the file that "
                    "holds that column)"
                )
        elif "metadata_values" in ref:
            raise ConfigError("[reference] metadata_values needs metadata_column")
        scale = ref.get("scale", "reference" if refs else "all")
        if scale not in ("reference", "all"):
            raise ConfigError(f"[reference] scale must be 'reference' or 'all' (not {scale!r})")
        if scale == "reference" and not refs:
            raise ConfigError(
                "[reference] scale = 'reference' needs a reference set (samples, samples_file, "
                "variable or metadata_column); without one the scale comes from all samples"
            )

        simulate = None
        if "simulate" in raw:
            simulate = _simulate_config(sec("simulate"))

        color_by = rep.get("color_by", inp.get("color_by"))
        cfg = cls(
            name=_string(job.get("name", output_dir.name), "[job] name"),
            store=store,
            output_dir=output_dir,
            storage_options=dict(_mapping(inp.get("storage_options", {}), "storage_options")),
            genotype_variable=_string(inp.get("genotype_variable", "auto"), "genotype_variable"),
            ploidy=None if "ploidy" not in inp else _int(inp["ploidy"], "[input] ploidy", 1),
            sample_metadata=(
                None
                if "sample_metadata" not in inp
                else path(inp["sample_metadata"], "[input] sample_metadata")
            ),
            metadata_id_column=_string(
                inp.get("metadata_id_column", "sample_id"), "[input] metadata_id_column"
            ),
            color_by=None if color_by is None else _string(color_by, "color_by"),
            reference_samples=ref_samples,
            reference_samples_file=(
                None
                if "samples_file" not in ref
                else path(ref["samples_file"], "[reference] samples_file")
            ),
            reference_variable=(
                None if "variable" not in ref else _string(ref["variable"], "[reference] variable")
            ),
            reference_metadata_column=(
                None
                if "metadata_column" not in ref
                else _string(ref["metadata_column"], "[reference] metadata_column")
            ),
            reference_metadata_values=ref_values,
            scale=scale,
            min_maf=_fraction(qc.get("min_maf", 0.05), "[qc] min_maf", upper=0.5),
            max_variant_missing=_fraction(
                qc.get("max_variant_missing", 0.1), "[qc] max_variant_missing"
            ),
            min_sample_call_rate=_fraction(
                qc.get("min_sample_call_rate", 0.9), "[qc] min_sample_call_rate"
            ),
            n_components=_int(pca.get("n_components", 10), "[pca] n_components", 1),
            n_knockoffs=_int(pca.get("n_knockoffs", 5), "[pca] n_knockoffs", 1),
            solver=_choice(
                pca.get("solver", "auto"), "[pca] solver", ("auto", "exact", "randomized")
            ),
            seed=_int(pca.get("seed", 0), "[pca] seed", 0),
            scheduler=_scheduler(comp.get("scheduler", "threads")),
            workers=_int(comp.get("workers", 2), "[compute] workers", 1),
            memory_budget=_bytes(
                comp.get("memory_budget", _compact.DEFAULT_MEMORY_BUDGET),
                "[compute] memory_budget",
            ),
            overwrite=_bool(out.get("overwrite", False), "[output] overwrite"),
            allow_missing_chunks=_bool(
                inp.get("allow_missing_chunks", False), "[input] allow_missing_chunks"
            ),
            fingerprint=_choice(
                out.get("fingerprint", "listing"), "[output] fingerprint", ("listing", "content")
            ),
            report=_bool(rep.get("enabled", True), "[report] enabled"),
            compare_all_sample_centring=_bool(
                rep.get("compare_all_sample_centring", False),
                "[report] compare_all_sample_centring",
            ),
            simulate=simulate,
            config_path=None,
        )
        if cfg.color_by is not None and cfg.sample_metadata is None:
            raise ConfigError("color_by needs [input] sample_metadata (the file with that column)")
        if simulate is not None and _is_url(store):
            raise ConfigError("[simulate] writes [input] store, which must then be a local path")
        return cfg


def _suggest(word: str, options: Any) -> str:
    close = difflib.get_close_matches(str(word), sorted(options), n=1)
    return f"; did you mean {close[0]!r}?" if close else f"; valid: {', '.join(sorted(options))}"


def _string(v: Any, where: str) -> str:
    if not isinstance(v, str) or not v:
        raise ConfigError(f"{where} must be a non-empty string (got {v!r})")
    return v


def _str_tuple(v: Any, where: str) -> tuple[str, ...]:
    if isinstance(v, str) or not isinstance(v, Sequence):
        raise ConfigError(f"{where} must be a list of strings (got {v!r})")
    if not all(isinstance(x, str) for x in v):
        raise ConfigError(f"{where} must be a list of strings (got {v!r})")
    return tuple(v)


def _mapping(v: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(v, Mapping):
        raise ConfigError(f"{where} must be a table (got {v!r})")
    return v


def _int(v: Any, where: str, lo: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise ConfigError(f"{where} must be an integer >= {lo} (got {v!r})")
    return int(v)


def _bool(v: Any, where: str) -> bool:
    if not isinstance(v, bool):
        raise ConfigError(f"{where} must be true or false (got {v!r})")
    return v


_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_UNITS.update({"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40})


def _bytes(v: Any, where: str) -> int:
    """A size in bytes: an integer, or a string such as ``"512 MiB"`` or ``"2GB"``."""
    if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
        return v
    if isinstance(v, str):
        text = v.strip().lower().replace(" ", "")
        digits = text.rstrip("kmgtib")
        unit = text[len(digits) :]
        try:
            value = float(digits)
        except ValueError:
            value = -1.0
        if unit in _UNITS and value >= 0:
            return int(value * _UNITS[unit])
    raise ConfigError(
        f"{where} must be a size in bytes, an integer or a string like '2GiB' or '500MB' "
        f"(got {v!r})"
    )


def _fraction(v: Any, where: str, upper: float = 1.0) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v <= upper:
        raise ConfigError(f"{where} must be a number in [0, {upper}] (got {v!r})")
    return float(v)


def _choice(v: Any, where: str, options: tuple[str, ...]) -> str:
    if v not in options:
        raise ConfigError(f"{where} must be one of {list(options)} (not {v!r})")
    return str(v)


def _scheduler(v: Any) -> str:
    if isinstance(v, str) and (v in _SCHEDULERS or "://" in v):
        return v
    raise ConfigError(
        f"[compute] scheduler must be one of {list(_SCHEDULERS)} or a scheduler address like "
        f"'tcp://host:8786' (not {v!r})"
    )


def _simulate_config(body: Mapping[str, Any]) -> SimulateConfig:
    d = SimulateConfig()
    pops = body.get("populations", d.populations)
    if (
        not isinstance(pops, Mapping)
        or not pops
        or not all(
            isinstance(k, str) and isinstance(n, int) and not isinstance(n, bool) and n >= 1
            for k, n in pops.items()
        )
    ):
        raise ConfigError(
            f"[simulate] populations must map population names to sample counts >= 1, e.g. "
            f"{{CEU = 200, YRI = 20}} (got {pops!r})"
        )
    writer = _choice(body.get("writer", d.writer), "[simulate] writer", ("tskit2zarr", "vcf2zarr"))
    missing = _fraction(body.get("missing_rate", d.missing_rate), "[simulate] missing_rate", 0.5)
    if missing > 0 and writer != "vcf2zarr":
        raise ConfigError(
            "[simulate] missing_rate > 0 needs writer = 'vcf2zarr' (missing calls are written "
            "into a VCF, which vcf2zarr converts)"
        )

    def num(key: str, lo: float) -> float:
        v = body.get(key, getattr(d, key))
        if isinstance(v, bool) or not isinstance(v, int | float) or v < lo:
            raise ConfigError(f"[simulate] {key} must be a number >= {lo} (got {v!r})")
        return float(v)

    return SimulateConfig(
        species=_string(body.get("species", d.species), "[simulate] species"),
        model=_string(body.get("model", d.model), "[simulate] model"),
        populations=dict(pops),
        chromosome=_string(body.get("chromosome", d.chromosome), "[simulate] chromosome"),
        left=num("left", 0),
        length=num("length", 1000),
        seed=_int(body.get("seed", d.seed), "[simulate] seed", 1),
        missing_rate=missing,
        writer=writer,
        variants_chunk_size=_int(
            body.get("variants_chunk_size", d.variants_chunk_size),
            "[simulate] variants_chunk_size",
            1,
        ),
    )


def load_config(path: str | os.PathLike[str]) -> JobConfig:
    """Read and validate a job config file (``.toml``, or ``.yaml``/``.yml`` with PyYAML).

    Relative paths in the file are resolved against the file's directory, so a job file
    means the same thing whatever directory cron, Kubernetes or SLURM starts it in.

    Raises
    ------
    ConfigError
        The file is missing, cannot be parsed, or holds an invalid value.
    """
    p = Path(path).expanduser()
    if not p.is_file():
        raise ConfigError(f"no config file at {p}; check the path")
    text = p.read_bytes()
    suffix = p.suffix.lower()
    try:
        if suffix in (".yaml", ".yml"):
            try:
                import yaml
            except ImportError as exc:
                raise ConfigError(
                    f"{p} is YAML, which needs PyYAML (pip install pyyaml); or write it as TOML"
                ) from exc
            raw = yaml.safe_load(text.decode("utf-8")) or {}
        else:
            import tomllib

            raw = tomllib.loads(text.decode("utf-8"))
    except ConfigError:
        raise
    except Exception as exc:  # tomllib.TOMLDecodeError, yaml.YAMLError, UnicodeDecodeError
        raise ConfigError(f"could not parse {p}: {exc}") from exc
    cfg = JobConfig.from_mapping(raw, base=p.parent.resolve())
    return dataclasses.replace(cfg, config_path=p.resolve())


# --------------------------------------------------------------------------------------
# Fingerprints
# --------------------------------------------------------------------------------------

_META_NAMES = (".zarray", ".zattrs", ".zgroup", ".zmetadata", "zarr.json")


def _is_url(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def input_fingerprint(
    store: str, *, mode: str = "listing", storage_options: Mapping[str, Any] | None = None
) -> str:
    """A SHA-256 fingerprint of a Zarr store, without reading its chunks (``"listing"``).

    ``"listing"`` hashes every metadata document's content and every chunk's key and size
    (a changed, added or removed chunk changes it); ``"content"`` hashes every byte of the
    store (a full read).  Object-store ETags are included when the filesystem reports them.
    """
    import fsspec

    from . import plink

    if plink.is_plink_source(store):
        return plink.plink_fingerprint(store, mode=mode)
    fs, root = fsspec.core.url_to_fs(store, **dict(storage_options or {}))
    try:
        entries = fs.find(root, detail=True)
    except FileNotFoundError as exc:
        raise SourceNotFoundError(f"no VCF Zarr store at {store}: {exc}") from exc
    if not entries:
        raise SourceNotFoundError(f"no VCF Zarr store at {store} (nothing found there)")
    h = hashlib.sha256()
    root_s = root.rstrip("/")
    for name in sorted(entries):
        info = entries[name]
        rel = name[len(root_s) :].lstrip("/") if name.startswith(root_s) else name
        h.update(rel.encode())
        h.update(str(info.get("size")).encode())
        etag = info.get("ETag") or info.get("etag")
        if etag:
            h.update(str(etag).encode())
        if mode == "content" or rel.rsplit("/", 1)[-1] in _META_NAMES:
            with fs.open(name, "rb") as f:
                while block := f.read(1 << 20):
                    h.update(block)
    return h.hexdigest()


def _file_hash(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        raise ConfigError(f"could not read {path}: {exc}") from exc


def job_fingerprint(cfg: JobConfig, input_fp: str) -> str:
    """SHA-256 of the input fingerprint, every result-changing parameter, the side files and
    the versions of mspca_dask and of the output layout."""
    import mspca_dask

    doc = {
        "input": input_fp,
        "params": cfg.fingerprint_params(),
        "sample_metadata": _file_hash(cfg.sample_metadata),
        "reference_samples_file": _file_hash(cfg.reference_samples_file),
        "mspca_dask": mspca_dask.__version__,
        "schema": GENOMICS_SCHEMA_VERSION,
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


# --------------------------------------------------------------------------------------
# Reading VCF Zarr
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class VcfZarr:
    """A VCF Zarr store opened lazily.

    Attributes
    ----------
    dosage : (n_variants, n_samples) dask array of float32
        Alternate-allele dosage, NaN for missing calls (nothing read yet).
    sample_id : (n_samples,) ndarray of str
    variant_position : (n_variants,) ndarray of int
    variant_contig : (n_variants,) ndarray of str
        Contig names (``contig_id[variant_contig]``).
    ploidy : int
    variable : str
        The variable the dosage was made from (``call_genotype``, ``call_dosage``, ...).
    group : zarr.Group
        The opened store (to read further sample variables).
    attrs : dict
        Root attributes (``source``, ``vcf_zarr_version``, ...).
    variant_allele : (n_variants, n_alleles) ndarray of str, optional
        REF then ALT alleles (``""`` pads a missing ALT), when the store has them.
    variant_id : (n_variants,) ndarray of str, optional
    calls : (n_variants, n_samples) dask array of int8, or None
        The same dosages as int8 hard calls, ``-1`` missing, when the variable holds calls
        (``call_genotype``): the statistics and compaction passes read these (a quarter of
        the bytes of ``dosage``, and a table lookup instead of float arithmetic).
    """

    dosage: da.Array
    sample_id: np.ndarray
    variant_position: np.ndarray
    variant_contig: np.ndarray
    ploidy: int
    variable: str
    group: Any
    attrs: dict[str, Any]
    where: str
    variant_allele: np.ndarray | None = None
    variant_id: np.ndarray | None = None
    calls: da.Array | None = None

    @property
    def n_samples(self) -> int:
        return int(self.dosage.shape[1])

    @property
    def n_variants(self) -> int:
        return int(self.dosage.shape[0])

    def sample_variable(self, name: str) -> np.ndarray:
        """A ``(samples,)`` variable of the store, read whole (it is small)."""
        if self.group is None:
            raise VariableNotFoundError(
                f"{self.where} is not a Zarr store: it has no sample variable {name!r}"
            )
        if name not in self.group:
            raise VariableNotFoundError(
                f"the store {self.where} has no variable {name!r}"
                f"{_suggest(name, self.group.keys())}"
            )
        arr = self.group[name]
        if tuple(arr.shape) != (self.n_samples,):
            raise InputError(
                f"{self.where} variable {name!r} has shape {tuple(arr.shape)}; a sample "
                f"variable must have shape ({self.n_samples},)"
            )
        return np.asarray(arr[:])


def open_vcf_zarr(
    store: str,
    *,
    genotype_variable: str = "auto",
    ploidy: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
    allow_missing_chunks: bool = False,
) -> VcfZarr:
    """Open a VCF Zarr store (bio2zarr's layout) lazily.

    Parameters
    ----------
    store : str
        Path or fsspec URL.
    genotype_variable : str
        ``"auto"``: ``call_dosage`` or ``call_DS`` if the store has one, else
        ``call_genotype``.  Or the name of one of them.
    ploidy : int, optional
        Alleles per call for a dosage variable (default 2); read from ``call_genotype``.
    storage_options : mapping, optional
        fsspec options for URLs.
    allow_missing_chunks : bool
        Read genotype chunks absent from the store as the fill value instead of refusing it.

    Raises
    ------
    SourceNotFoundError
        No Zarr group at ``store``.
    ChunkReadError
        A chunk of the genotype variable is missing from the store's listing and
        ``allow_missing_chunks`` is False.
    VariableNotFoundError
        A required variable (``sample_id``, ``variant_position``, the genotypes) is missing.
    """
    import zarr

    kwargs: dict[str, Any] = {}
    if storage_options and _is_url(store):
        kwargs["storage_options"] = dict(storage_options)
    try:
        group = zarr.open_group(store, mode="r", **kwargs)
    except (FileNotFoundError, ValueError, KeyError) as exc:
        raise SourceNotFoundError(
            f"no VCF Zarr store at {store} ({type(exc).__name__}: {exc}); convert a VCF with "
            "bio2zarr's vcf2zarr (or tskit2zarr) first"
        ) from exc
    keys = set(group.keys())

    def need(name: str) -> Any:
        if name not in keys:
            raise VariableNotFoundError(
                f"{store} is not a VCF Zarr store: it lacks {name!r} (has: "
                f"{', '.join(sorted(keys)[:12])})"
            )
        return group[name]

    var: str | None
    if genotype_variable == "auto":
        var = next((v for v in ("call_dosage", "call_DS", "call_genotype") if v in keys), None)
        if var is None:
            raise VariableNotFoundError(
                f"{store} has none of call_genotype, call_dosage, call_DS; it is not a VCF "
                "Zarr store with genotypes"
            )
    else:
        var = genotype_variable
    arr = need(var)
    # zarr reads absent chunks as fill values: compare the genotypes' chunks with the listing.
    # (call_genotype_mask is not read here, and bio2zarr leaves its all-False chunks unwritten.)
    n_missing = check_chunks_present(
        arr, f"VCF Zarr {store}", var, allow_missing=allow_missing_chunks
    )
    if n_missing:
        logger.warning("%s: %d chunk(s) of %s read as fill values", store, n_missing, var)
    where = f"VCF Zarr {store} variable {var!r}"
    reader = _ZarrChunkReader(arr, f"VCF Zarr {store}", var)
    calls: da.Array | None = None
    lazy = da.from_array(reader, chunks=arr.chunks, lock=False, fancy=False)
    if lazy.ndim == 3:
        try:
            dosage = preprocess.dosage_from_genotypes(lazy)
            calls = _compact.calls_from_genotypes(lazy)
        except (DTypeError, InputError) as exc:
            raise InputError(f"{where}: {exc}") from exc
        ploidy_ = int(lazy.shape[2])
    elif lazy.ndim == 2:
        dosage = preprocess.dosage_from_values(lazy)
        ploidy_ = 2 if ploidy is None else int(ploidy)
    else:
        raise InputError(
            f"{where} has shape {lazy.shape}: expected (variants, samples, ploidy) genotypes "
            "or (variants, samples) dosages"
        )
    sample_id = _str_objects(need("sample_id")[:])
    position = np.asarray(need("variant_position")[:]).astype(np.int64)
    if "variant_contig" in keys and "contig_id" in keys:
        contig_arr: Any = group["contig_id"]
        index_arr: Any = group["variant_contig"]
        contig = _str_objects(contig_arr[:])[np.asarray(index_arr[:]).astype(np.int64)]
    else:
        contig = np.full(position.shape, "unknown", dtype=object)
    nv, ns = (int(s) for s in dosage.shape)
    if sample_id.shape != (ns,) or position.shape != (nv,):
        raise InputError(
            f"{store}: sample_id has {sample_id.shape[0]} entries and variant_position "
            f"{position.shape[0]}, but {var} is shaped {tuple(lazy.shape)}"
        )
    if len(set(sample_id.tolist())) != ns:
        raise InputError(f"{store}: sample_id holds duplicate ids")
    attrs = dict(group.attrs.asdict()) if hasattr(group.attrs, "asdict") else dict(group.attrs)
    alleles = ids = None
    allele_arr: Any = group["variant_allele"] if "variant_allele" in keys else None
    id_arr: Any = group["variant_id"] if "variant_id" in keys else None
    if allele_arr is not None and tuple(allele_arr.shape)[:1] == (nv,):
        alleles = _str_objects(allele_arr[:])
    if id_arr is not None and tuple(id_arr.shape) == (nv,):
        ids = _str_objects(id_arr[:])
    return VcfZarr(
        dosage=dosage,
        calls=calls,
        sample_id=sample_id,
        variant_position=position,
        variant_contig=np.asarray(contig, dtype=object),
        ploidy=ploidy_,
        variable=var,
        group=group,
        attrs=attrs,
        where=store,
        variant_allele=alleles,
        variant_id=ids,
    )


def open_genotypes(
    store: str,
    *,
    genotype_variable: str = "auto",
    ploidy: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
    allow_missing_chunks: bool = False,
) -> VcfZarr:
    """Open a VCF Zarr store or a PLINK 1 fileset (``x.bed`` or the prefix ``x``) lazily.

    Both give the same :class:`VcfZarr` (see :mod:`mspca_dask.plink` for the fileset).
    ``allow_missing_chunks`` applies to VCF Zarr (a PLINK fileset has no chunks: a short
    ``.bed`` is an error when it is opened).
    """
    from . import plink

    if plink.is_plink_source(store):
        return plink.open_plink(store)
    return open_vcf_zarr(
        store,
        genotype_variable=genotype_variable,
        ploidy=ploidy,
        storage_options=storage_options,
        allow_missing_chunks=allow_missing_chunks,
    )


def _str_objects(values: Any) -> np.ndarray:
    """An object array of ``str`` from any string array (StringDType, fixed width, bytes)."""
    flat = [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in np.ravel(values)]
    return np.asarray(flat, dtype=object).reshape(np.shape(values))


# --------------------------------------------------------------------------------------
# Sample metadata and the reference set
# --------------------------------------------------------------------------------------


def read_sample_metadata(path: Path, id_column: str) -> Any:
    """Read a TSV (``.tsv``/``.txt``) or CSV (``.csv``) table indexed by ``id_column``."""
    import pandas as pd

    sep = "," if path.suffix.lower() == ".csv" else "\t"
    try:
        table = pd.read_csv(path, sep=sep, dtype=str, keep_default_na=False)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"could not read the sample metadata {path}: {exc}") from exc
    if id_column not in table.columns:
        raise ConfigError(
            f"the sample metadata {path} has no column {id_column!r} (columns: "
            f"{', '.join(map(str, table.columns))}); set [input] metadata_id_column"
        )
    if table[id_column].duplicated().any():
        dup = table[id_column][table[id_column].duplicated()].iloc[0]
        raise ConfigError(f"the sample metadata {path} lists sample {dup!r} more than once")
    return table.set_index(id_column)


def _metadata_column(table: Any, column: str, sample_id: np.ndarray, path: Path) -> np.ndarray:
    if column not in table.columns:
        raise ConfigError(
            f"the sample metadata {path} has no column {column!r}"
            f"{_suggest(column, list(map(str, table.columns)))}"
        )
    values = table[column].reindex(list(sample_id))
    return np.asarray(values.fillna("unknown").astype(str), dtype=object)


def _ids_to_mask(ids: Sequence[str], sample_id: np.ndarray, where: str) -> np.ndarray:
    index = {s: i for i, s in enumerate(sample_id.tolist())}
    unknown = [s for s in ids if s not in index]
    if unknown:
        shown = ", ".join(repr(s) for s in unknown[:5]) + (" ..." if len(unknown) > 5 else "")
        raise InputError(
            f"{len(unknown)} reference sample id(s) from {where} are not in the store: {shown}"
        )
    mask = np.zeros(len(sample_id), dtype=bool)
    mask[[index[s] for s in ids]] = True
    return mask


def resolve_reference(cfg: JobConfig, vz: VcfZarr, metadata: Any) -> tuple[np.ndarray | None, str]:
    """The reference samples as a boolean mask (None for ``auto``) and a description."""
    mode = cfg.reference_mode
    if mode == "auto":
        return None, (
            "no reference set given; location estimated robustly by mspca_dask.fit "
            "(location='auto', mean of the inliers in the leading-score space), scale from "
            "all samples"
        )
    if mode == "samples":
        assert cfg.reference_samples is not None
        mask = _ids_to_mask(cfg.reference_samples, vz.sample_id, "[reference] samples")
        desc = f"{int(mask.sum())} sample ids listed in the config"
    elif mode == "file":
        assert cfg.reference_samples_file is not None
        try:
            lines = cfg.reference_samples_file.read_text().splitlines()
        except OSError as exc:
            raise ConfigError(f"could not read {cfg.reference_samples_file}: {exc}") from exc
        ids = [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
        mask = _ids_to_mask(ids, vz.sample_id, str(cfg.reference_samples_file))
        desc = f"{int(mask.sum())} sample ids from {cfg.reference_samples_file}"
    elif mode == "variable":
        assert cfg.reference_variable is not None
        values = vz.sample_variable(cfg.reference_variable)
        if values.dtype.kind != "b":
            raise InputError(
                f"the reference variable {cfg.reference_variable!r} must be boolean (got "
                f"dtype {values.dtype})"
            )
        mask = values.astype(bool)
        desc = f"store variable {cfg.reference_variable!r} ({int(mask.sum())} samples)"
    else:
        assert cfg.reference_metadata_column is not None and cfg.sample_metadata is not None
        assert cfg.reference_metadata_values is not None
        col = _metadata_column(
            metadata, cfg.reference_metadata_column, vz.sample_id, cfg.sample_metadata
        )
        mask = np.isin(col, list(cfg.reference_metadata_values))
        desc = (
            f"{cfg.reference_metadata_column} in "
            f"{list(cfg.reference_metadata_values)} ({int(mask.sum())} samples, "
            f"{cfg.sample_metadata.name})"
        )
    if mask.sum() < 2:
        raise InputError(
            f"the reference set has {int(mask.sum())} sample(s) ({desc}); at least 2 are needed "
            "to estimate allele frequencies"
        )
    return mask, desc


# --------------------------------------------------------------------------------------
# QC
# --------------------------------------------------------------------------------------


@dataclass
class QCResult:
    """Outcome of the statistics pass(es) and the filters."""

    stats: preprocess.GenotypeStats  # over the samples kept
    sample_call_rate: np.ndarray  # (N,) over all variants, every sample
    sample_keep: np.ndarray  # (N,) bool
    variant_keep: np.ndarray  # (V,) bool
    reference: np.ndarray | None  # (N,) bool, after QC
    n_passes: int
    counts: dict[str, int]
    candidates: _compact.Candidates | None = None  # rows written by the statistics pass


def _statistics(
    vz: VcfZarr,
    samples: np.ndarray | None,
    reference: np.ndarray | None,
    candidates: tuple[_compact.CandidateFilter, Path] | None = None,
) -> dict[str, da.Array]:
    """The statistics pass's products, from the int8 calls when the store has them.

    With ``candidates`` (a filter and a directory), the pass also writes the rows of the
    variants that pass the per-variant filters there (see :mod:`mspca_dask._compact`).
    """
    if vz.calls is not None and candidates is not None and samples is None:
        return _compact.statistics_and_candidates(vz.calls, reference, *candidates)
    if vz.calls is not None:
        calls = vz.calls if samples is None else vz.calls[:, samples]
        return _compact.call_statistics(calls, reference)
    dosage = vz.dosage if samples is None else vz.dosage[:, samples]
    return preprocess.genotype_statistics(dosage, reference)


def run_qc(
    cfg: JobConfig,
    vz: VcfZarr,
    reference: np.ndarray | None,
    executor: Executor,
    workspace: Path | None = None,
) -> QCResult:
    """One statistics pass (two if samples fail the call-rate filter), then the filters.

    With a ``workspace`` directory and hard calls, the first pass also writes the candidate
    rows of the compact matrix there (``QCResult.candidates``), so that the fit needs no
    further read of the raw store.
    """
    N, V = vz.n_samples, vz.n_variants
    filt = None
    if workspace is not None and vz.calls is not None:
        filt = _compact.CandidateFilter(cfg.min_maf, cfg.max_variant_missing, vz.ploidy, N)
    out = executor.run(
        "genomics-statistics",
        _statistics(vz, None, reference, None if filt is None else (filt, workspace)),
    )
    candidates = None
    if filt is not None and workspace is not None:
        chunks = tuple(int(c) for c in vz.calls.chunks[0])  # type: ignore[union-attr]
        candidates = _compact.Candidates(workspace, np.asarray(out["candidate"]), chunks)
    stats = preprocess.GenotypeStats.from_pass(out, N, vz.ploidy)
    call_rate = stats.sample_call_rate(V)
    keep_s = call_rate >= cfg.min_sample_call_rate
    n_passes = 1
    ref = reference
    if not keep_s.all():
        logger.info(
            "QC: %d of %d samples have a call rate below %.3g and are excluded; recomputing "
            "the variant statistics without them (second statistics pass)",
            int((~keep_s).sum()),
            N,
            cfg.min_sample_call_rate,
        )
        if keep_s.sum() < 2:
            raise InputError(
                f"only {int(keep_s.sum())} sample(s) have a call rate >= "
                f"{cfg.min_sample_call_rate}; lower [qc] min_sample_call_rate"
            )
        sub_ref = None if ref is None else ref[keep_s]
        out = executor.run("genomics-statistics-2", _statistics(vz, keep_s, sub_ref))
        stats = preprocess.GenotypeStats.from_pass(out, int(keep_s.sum()), vz.ploidy)
        n_passes = 2
        candidates = None  # chosen over all samples: not valid for the samples kept
    if ref is not None:
        ref = ref & keep_s
        if ref.sum() < 2:
            raise InputError(
                f"after the call-rate filter the reference set has {int(ref.sum())} sample(s); "
                "at least 2 are needed"
            )
    maf = stats.minor_allele_frequency
    miss = stats.missing_rate
    counts: dict[str, int] = {"variants": V}
    site_ok = np.ones(V, dtype=bool)
    for name, bad in site_filters(vz).items():
        counts[name] = int((site_ok & bad).sum())
        site_ok &= ~bad
    polymorphic = maf > 0
    varies = ~stats.constant_calls
    maf_ok = maf >= cfg.min_maf
    miss_ok = miss <= cfg.max_variant_missing
    keep_v = site_ok & polymorphic & varies & maf_ok & miss_ok
    counts.update(
        variants_monomorphic=int((site_ok & ~polymorphic).sum()),
        variants_zero_variance=int((site_ok & polymorphic & ~varies).sum()),
        variants_low_maf=int((site_ok & polymorphic & varies & ~maf_ok).sum()),
        variants_high_missing=int((site_ok & polymorphic & varies & maf_ok & ~miss_ok).sum()),
    )
    if ref is not None:
        assert stats.ref_n_called is not None
        n_ref = int(ref.sum())
        ref_miss_ok = 1.0 - stats.ref_n_called / n_ref <= cfg.max_variant_missing
        counts["variants_high_reference_missing"] = int((keep_v & ~ref_miss_ok).sum())
        keep_v &= ref_miss_ok
    counts["variants_analysed"] = int(keep_v.sum())
    counts["samples"] = N
    counts["samples_low_call_rate"] = int((~keep_s).sum())
    counts["samples_analysed"] = int(keep_s.sum())
    if keep_v.sum() < 2:
        raise InputError(
            f"only {int(keep_v.sum())} of {V} variants pass QC (monomorphic "
            f"{counts['variants_monomorphic']}, MAF < {cfg.min_maf}: {counts['variants_low_maf']}, "
            f"missing > {cfg.max_variant_missing}: {counts['variants_high_missing']}); relax [qc]"
        )
    return QCResult(stats, call_rate, keep_s, keep_v, ref, n_passes, counts, candidates)


_MISSING_ALLELES = frozenset(("", ".", "0", "-"))


def site_filters(vz: VcfZarr) -> dict[str, np.ndarray]:
    """Sites no genotype PCA should use, from the variant metadata alone (no pass).

    Returns ``{qc_counts name: (n_variants,) bool}``, applied in this order (each variant is
    counted under the first filter it fails):

    - ``variants_multiallelic``: more than one ALT allele (a dosage of "not REF" would merge
      different alleles);
    - ``variants_non_acgt``: an allele that is not a string of A, C, G, T (symbolic ``<DEL>``,
      ``*``, ``N``, IUPAC codes); a missing ALT (``.``, PLINK's ``0``) is not counted here
      (such a site is monomorphic and counted as that);
    - ``variants_duplicate_position``: every copy of a (contig, position) that occurs more
      than once (split multi-allelic records, duplicated probes): which copy is right cannot
      be told from the data, and projection matches variants by position.  Position 0 is
      PLINK's "unknown" and is not a duplicate (gemma's HLC fileset has 0 everywhere).

    Stores without ``variant_allele`` get only the duplicate-position filter.
    """
    V = vz.n_variants
    out: dict[str, np.ndarray] = {}
    if vz.variant_allele is not None:
        alleles = np.asarray(vz.variant_allele, dtype=object).reshape(V, -1)
        present = np.vectorize(lambda a: str(a) not in _MISSING_ALLELES, otypes=[bool])(alleles)
        acgt = np.vectorize(
            lambda a: str(a) in _MISSING_ALLELES or set(str(a).upper()) <= set("ACGT"),
            otypes=[bool],
        )(alleles)
        if alleles.shape[1] == 0:
            present = acgt = np.zeros((V, 1), dtype=bool)
        out["variants_multiallelic"] = present[:, 1:].sum(axis=1) > 1
        out["variants_non_acgt"] = ~acgt.all(axis=1) | ~present[:, 0]
    else:
        out["variants_multiallelic"] = np.zeros(V, dtype=bool)
        out["variants_non_acgt"] = np.zeros(V, dtype=bool)
    keys = np.char.add(
        np.char.add(np.asarray(vz.variant_contig, dtype=str), ":"),
        np.asarray(vz.variant_position).astype(str),
    )
    _, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    out["variants_duplicate_position"] = (counts[inverse] > 1) & (
        np.asarray(vz.variant_position) > 0
    )
    return out


# --------------------------------------------------------------------------------------
# The fit
# --------------------------------------------------------------------------------------


@dataclass
class Analysis:
    """The fit and what is needed to write and report it."""

    result: MSPCAResult  # sliced to the K requested eigenpairs
    centre_frequency: np.ndarray  # (V_kept,) frequency whose dosage 2p was subtracted
    scale: np.ndarray  # (V_kept,)
    comparison: dict[str, Any] | None
    n_imputed_calls: int
    n_raw_passes: int = 0  # reads of the raw store after QC (the compaction pass)


def _fit_k(X: da.Array, cfg: JobConfig, location: Any, scheduler: Any) -> MSPCAResult:
    """Fit with one spare eigenpair and return the first ``K``.

    Each knockoff adds a spike of strength ``θ'²`` (several times the largest eigenvalue) to
    the knockoff spectrum, which then pushes the K-th eigenpair out of the knockoff's top K;
    that eigenpair is matched to the knockoff spike and looks moved.  Measured on the
    Out-of-Africa simulation: the 6th of K = 6 eigenpairs (66.8, above the edge 25.3) went to
    "389.7, mean shift" with eigenvector overlap 0.012.  Computing ``K + 1`` and keeping ``K``
    removes that artefact (same run: every verdict but the YRI spike's "stable").
    """
    import warnings

    from .api import fit
    from .errors import ModelFitWarning

    n, d = (int(s) for s in X.shape)
    K = min(cfg.n_components, n - 1, d)
    k_fit = min(K + 1, n, d)
    # Genotypes always have a bulk above the Marchenko-Pastur edge (linkage disequilibrium):
    # the fit's ModelFitWarning says so, and the diagnostics are in the result; the job logs
    # them instead of raising them as a warning to its caller.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ModelFitWarning)
        res = fit(
            X,
            n_components=k_fit,
            location=location,
            solver=cfg.solver,
            n_knockoffs=cfg.n_knockoffs,
            random_state=cfg.seed,
            scheduler=scheduler,
        )
    for w in caught:
        if issubclass(w.category, ModelFitWarning):
            logger.warning("model fit: %s", " ".join(str(w.message).split()))
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return _first_k(res, K)


def _first_k(res: MSPCAResult, K: int) -> MSPCAResult:
    if res.n_components == K:
        return res
    # A match may point at the spare (index K) of a knockoff spectrum: keep the *matched*
    # knockoff eigenvalues, re-indexed so that eigenpair k is matched to column k.
    matched = np.asarray(res.matched_knockoff_eigenvalues)[:, :K]
    identity = np.broadcast_to(np.arange(K), matched.shape).copy()
    return dataclasses.replace(
        res,
        eigenvalues=np.asarray(res.eigenvalues)[:K],
        knockoff_eigenvalues_all=matched,
        stable=np.asarray(res.stable)[:K],
        candidate=np.asarray(res.candidate)[:K],
        reasons=np.asarray(res.reasons)[:K],
        displacement=np.asarray(res.displacement)[:K],
        eigenvector_overlap=np.asarray(res.eigenvector_overlap)[:K],
        eigenvalue_bounds=np.asarray(res.eigenvalue_bounds)[:K],
        eigenvectors=np.asarray(res.eigenvectors)[:K],
        scores=np.asarray(res.scores)[:, :K],
        knockoff_match=identity,
        shift_z=None if res.shift_z is None else np.asarray(res.shift_z)[:K],
        params={**res.params, "n_components": K, "n_components_fitted": res.n_components},
    )


def analyse(
    cfg: JobConfig, vz: VcfZarr, qc: QCResult, scheduler: Any, workspace: Path | None = None
) -> Analysis:
    """Standardise (lazily) with the reference frequencies and run MS-PCA.

    With hard calls (``vz.calls``), the fit reads a compact int8 matrix of the kept variants
    and samples (in memory within ``[compute] memory_budget``, else a temporary Zarr store in
    ``workspace``, next to the output), standardising each chunk in float32 inside the task
    (:mod:`mspca_dask._compact`).  Its rows come from the candidates the statistics pass
    wrote (no further raw read) or, when samples were dropped, from one more raw pass.
    """
    if vz.calls is None:
        return _analyse(cfg, vz, qc, scheduler, None)
    n_kept = int(qc.sample_keep.sum())
    has_missing = bool((qc.stats.n_called[qc.variant_keep] < n_kept).any())
    executor = Executor(scheduler=scheduler)
    if qc.candidates is not None and qc.sample_keep.all():
        compact = _compact.compact_from_parts(
            qc.candidates,
            qc.variant_keep,
            executor,
            has_missing=has_missing,
            memory_budget=cfg.memory_budget,
            workers=cfg.workers,
        )
        if compact is not None:
            return _analyse(cfg, vz, qc, scheduler, compact)
    with _compact.compact_calls(
        vz.calls,
        qc.variant_keep,
        qc.sample_keep,
        executor,
        has_missing=has_missing,
        memory_budget=cfg.memory_budget,
        spill_dir=cfg.output_dir.parent if workspace is None else workspace,
        workers=cfg.workers,
    ) as compact:
        return dataclasses.replace(_analyse(cfg, vz, qc, scheduler, compact), n_raw_passes=1)


def _analyse(
    cfg: JobConfig,
    vz: VcfZarr,
    qc: QCResult,
    scheduler: Any,
    compact: _compact.CompactCalls | None,
) -> Analysis:
    P = vz.ploidy
    stats = qc.stats
    kv = qc.variant_keep

    def standardize(centre: np.ndarray, scale: np.ndarray) -> da.Array:
        if compact is not None:
            return _compact.standardized(compact, centre, scale)
        return preprocess.standardize(vz.dosage[kv][:, qc.sample_keep], centre, scale)

    p_all = stats.allele_frequency[kv]
    if qc.reference is None:
        centre_p = p_all
        scale = preprocess.patterson_scale(p_all, ploidy=P)
        location: Any = "auto"
    else:
        p_ref = stats.reference_frequency[kv]
        centre_p = p_ref
        scale = preprocess.patterson_scale(p_ref if cfg.scale == "reference" else p_all, ploidy=P)
        location = None  # already centred on the reference in the chunk function
    X = standardize(P * centre_p, scale)
    logger.info(
        "MS-PCA: n = %d samples (observations) x d = %d variants (features), K = %d, "
        "reference = %s",
        X.shape[0],
        X.shape[1],
        cfg.n_components,
        cfg.reference_mode,
    )
    res = _fit_k(X, cfg, location, scheduler)
    logger.info(
        "fit: solver %s, %d passes over the %s",
        res.params.get("solver"),
        res.n_passes,
        "raw store" if compact is None else f"compact matrix ({compact.where})",
    )
    if qc.reference is None and res.location is not None:
        # The robust location is on the standardised scale: convert it to a frequency.
        centre_p = centre_p + np.asarray(res.location) * scale / P
    comparison = None
    if cfg.compare_all_sample_centring:
        X_all = standardize(P * p_all, scale)
        cres = _fit_k(X_all, cfg, None, scheduler)
        comparison = {
            "description": "the same data centred by the all-sample allele frequencies",
            "result": cres,
        }
    n_kept = int(qc.sample_keep.sum())
    imputed = int((n_kept - stats.n_called[kv]).sum())
    return Analysis(res, np.asarray(centre_p, dtype=float), scale, comparison, imputed)


# --------------------------------------------------------------------------------------
# Output Dataset
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GenomicsVariable:
    """Declaration of one variable of the output Dataset: dims, dtype kinds, meaning."""

    dims: tuple[str, ...]
    kind: str
    required: bool
    doc: str


_STR = "OUST"

#: Every variable of the output Dataset (validated on the way out and on the way in).
GENOMICS_VARIABLES: dict[str, GenomicsVariable] = {
    "sample_id": GenomicsVariable(("samples",), _STR, True, "Sample ids of the store."),
    "sample_included": GenomicsVariable(
        ("samples",), "b", True, "True if the sample passed QC and was analysed."
    ),
    "sample_is_reference": GenomicsVariable(
        ("samples",),
        "b",
        True,
        "True for the reference samples whose allele frequencies centred the data "
        "(all False with reference_mode 'auto').",
    ),
    "sample_call_rate": GenomicsVariable(
        ("samples",), "f", True, "Fraction of all variants called in the sample."
    ),
    "sample_label": GenomicsVariable(
        ("samples",), _STR, False, "Metadata label used to colour the plots (color_by)."
    ),
    "sample_score": GenomicsVariable(
        ("samples", "component"),
        "f",
        True,
        "Score of each sample on each eigenpair (NaN for excluded samples).",
    ),
    "variant_position": GenomicsVariable(("variants",), "iu", True, "Variant position."),
    "variant_contig": GenomicsVariable(("variants",), _STR, True, "Contig name of the variant."),
    "variant_allele_frequency": GenomicsVariable(
        ("variants",), "f", True, "Alternate-allele frequency over the analysed samples."
    ),
    "variant_reference_frequency": GenomicsVariable(
        ("variants",),
        "f",
        True,
        "Frequency p whose dosage P*p centred the variant (reference set, or the robust "
        "location in 'auto' mode); NaN for excluded variants.",
    ),
    "variant_scale": GenomicsVariable(
        ("variants",),
        "f",
        False,
        "Divisor of the centred dosage (Patterson scale); NaN for excluded variants.  With "
        "variant_reference_frequency and variant_loading it projects new samples.",
    ),
    "variant_allele": GenomicsVariable(
        ("variants", "alleles"),
        _STR,
        False,
        "REF then ALT allele(s) of the store ('' pads); the dosage counts the ALT allele.",
    ),
    "variant_id": GenomicsVariable(("variants",), _STR, False, "Variant id of the store."),
    "variant_missing_rate": GenomicsVariable(
        ("variants",), "f", True, "Fraction of analysed samples with a missing call."
    ),
    "variant_included": GenomicsVariable(
        ("variants",), "b", True, "True if the variant passed QC and was analysed."
    ),
    "variant_loading": GenomicsVariable(
        ("variants", "component"),
        "f",
        True,
        "Unit eigenvector entry of each standardised variant (NaN for excluded variants).",
    ),
    "eigenvalue": GenomicsVariable(
        ("component",), "f", True, "Top-K eigenvalues of the sample covariance, descending."
    ),
    "knockoff_eigenvalue": GenomicsVariable(
        ("knockoff", "component"),
        "f",
        True,
        "Where each eigenvalue went under each knockoff (the eigenpair matched by eigenvector).",
    ),
    "stable": GenomicsVariable(
        ("component",), "b", True, "True for covariance (knockoff-invariant) eigenpairs."
    ),
    "candidate": GenomicsVariable(
        ("component",), "b", True, "True for eigenvalues clearly above the Marchenko-Pastur edge."
    ),
    "verdict": GenomicsVariable(("component",), _STR, True, "'stable', 'mean shift' or 'bulk'."),
    "reason": GenomicsVariable(("component",), _STR, True, "Why, in words."),
    "displacement": GenomicsVariable(
        ("component",), "f", True, "Median |eigenvalue - matched knockoff eigenvalue|."
    ),
    "eigenvector_overlap": GenomicsVariable(
        ("component",), "f", True, "Median |<eigenvector, matched knockoff eigenvector>|."
    ),
}

#: Every attribute of the output Dataset: name → (kind, required, meaning).
GENOMICS_ATTRS: dict[str, tuple[str, bool, str]] = {
    "mspca_genomics_schema_version": ("int", True, "Version of this layout."),
    "job_name": ("str", True, "[job] name."),
    "job_fingerprint": ("str", True, "SHA-256 of input fingerprint + parameters + versions."),
    "input_fingerprint": ("str", True, "SHA-256 of the input store (listing or content)."),
    "input_store": ("str", True, "Path or URL of the VCF Zarr store, or the PLINK fileset."),
    "input_variable": ("str", True, "Variable the dosages were made from."),
    "reference_mode": ("str", True, "samples | file | variable | metadata | auto."),
    "reference_description": ("str", True, "Which reference set centred the data."),
    "n_reference_samples": ("int", True, "Reference samples used (0 in 'auto' mode)."),
    "scale_from": ("str", True, "'reference' or 'all': whose frequencies gave the scale."),
    "params": ("str", True, "The job's parameters, JSON."),
    "random_state": ("int", True, "Seed of the fit."),
    "versions": ("str", True, "Versions of Python and the libraries, JSON."),
    "timings": ("str", True, "Seconds per phase, JSON."),
    "qc_counts": ("str", True, "Counts of samples and variants per QC outcome, JSON."),
    "created_utc": ("str", True, "When the result was computed (ISO 8601, UTC)."),
    "noise_variance": ("float", True, "Estimated noise variance of the bulk."),
    "mp_edge": ("float", True, "Marchenko-Pastur upper edge."),
    "threshold": ("float", True, "Invariance radius epsilon."),
    "knockoff_strength": ("float", True, "Knockoff strength theta'^2."),
    "n_samples_analysed": ("int", True, "n: samples analysed (the observations)."),
    "n_variants_analysed": ("int", True, "d: variants analysed (the features)."),
    "n_imputed_calls": ("int", True, "Missing calls imputed with the reference frequency."),
    "n_passes": ("int", True, "Passes over the genotypes (statistics, compaction, fit)."),
    "n_passes_detail": ("str", False, "How n_passes splits between QC, the fit, the comparison."),
    "axes": ("str", True, "Which axis is n and which is d."),
    "centring_note": ("str", True, "Why the frequencies come from a reference set."),
    "centring_comparison": ("str", False, "The fit with all-sample centring, JSON (report)."),
}


def _passes_detail(n_passes: int, an: Analysis) -> str:
    """``"QC, statistics and compaction 2 + MS-PCA fit 2 (+ all-sample-centring comparison 2)"``."""
    fit = int(an.result.n_passes)
    comp = int(an.comparison["result"].n_passes) if an.comparison is not None else 0
    text = f"QC, statistics and compaction {int(n_passes) - fit - comp} + MS-PCA fit {fit}"
    return text + (f" + all-sample-centring comparison {comp}" if comp else "")


def _centring_this_run(a: Mapping[str, Any]) -> str:
    """What centred this run, and (when it was computed) what all-sample centring gave."""
    text = (
        f"This run: {a['reference_mode']}: {a['reference_description']} (scale from "
        f"{a['scale_from']} frequencies)."
    )
    if "centring_comparison" not in a:
        return text
    c = json.loads(a["centring_comparison"])
    if not c["eigenvalue"]:
        return text
    k = 0
    return text + (
        f" With all-sample centring instead, eigenpair {k} of this run went from "
        f"{c['eigenvalue'][k]:.6g} to {c['knockoff_eigenvalue'][k]:.6g} under the knockoffs "
        f"(median; judged {c['verdict'][k]!r})."
    )


def build_dataset(
    cfg: JobConfig,
    vz: VcfZarr,
    qc: QCResult,
    an: Analysis,
    *,
    labels: np.ndarray | None,
    reference_description: str,
    input_fp: str,
    job_fp: str,
    timings: dict[str, float],
    n_passes: int,
) -> xr.Dataset:
    """Assemble the output Dataset (:data:`GENOMICS_VARIABLES`) and validate it."""
    import xarray as xr

    res = an.result
    N, V, K = vz.n_samples, vz.n_variants, res.n_components
    scores = np.full((N, K), np.nan)
    scores[qc.sample_keep] = res.scores
    loadings = np.full((V, K), np.nan)
    loadings[qc.variant_keep] = np.asarray(res.eigenvectors).T
    ref_freq = np.full(V, np.nan)
    ref_freq[qc.variant_keep] = an.centre_frequency
    ref_mask = np.zeros(N, bool) if qc.reference is None else qc.reference
    s = qc.stats
    data: dict[str, Any] = {
        "sample_id": (("samples",), vz.sample_id.astype(str)),
        "sample_included": (("samples",), qc.sample_keep),
        "sample_is_reference": (("samples",), ref_mask),
        "sample_call_rate": (("samples",), qc.sample_call_rate),
        "sample_score": (("samples", "component"), scores),
        "variant_position": (("variants",), vz.variant_position),
        "variant_contig": (("variants",), vz.variant_contig.astype(str)),
        "variant_allele_frequency": (("variants",), s.allele_frequency),
        "variant_reference_frequency": (("variants",), ref_freq),
        "variant_missing_rate": (("variants",), s.missing_rate),
        "variant_included": (("variants",), qc.variant_keep),
        "variant_loading": (("variants", "component"), loadings),
        "eigenvalue": (("component",), np.asarray(res.eigenvalues, float)),
        "knockoff_eigenvalue": (("knockoff", "component"), res.matched_knockoff_eigenvalues),
        "stable": (("component",), np.asarray(res.stable, bool)),
        "candidate": (("component",), np.asarray(res.candidate, bool)),
        "verdict": (("component",), np.asarray(res.verdicts).astype(str)),
        "reason": (("component",), np.asarray(res.reasons).astype(str)),
        "displacement": (("component",), np.asarray(res.displacement, float)),
        "eigenvector_overlap": (("component",), np.asarray(res.eigenvector_overlap, float)),
    }
    if labels is not None:
        data["sample_label"] = (("samples",), labels.astype(str))
    scale = np.full(V, np.nan)
    scale[qc.variant_keep] = an.scale
    data["variant_scale"] = (("variants",), scale)
    if vz.variant_allele is not None:
        data["variant_allele"] = (("variants", "alleles"), vz.variant_allele.astype(str))
    if vz.variant_id is not None:
        data["variant_id"] = (("variants",), vz.variant_id.astype(str))
    data = {
        k: (dims, value, {"description": GENOMICS_VARIABLES[k].doc})
        for k, (dims, value) in data.items()
    }
    attrs: dict[str, Any] = {
        "mspca_genomics_schema_version": GENOMICS_SCHEMA_VERSION,
        "job_name": cfg.name,
        "job_fingerprint": job_fp,
        "input_fingerprint": input_fp,
        "input_store": cfg.store,
        "input_variable": vz.variable,
        "reference_mode": cfg.reference_mode,
        "reference_description": reference_description,
        "n_reference_samples": int(ref_mask.sum()),
        "scale_from": cfg.scale,
        "params": json.dumps(cfg.fingerprint_params(), sort_keys=True),
        "random_state": int(cfg.seed),
        "versions": json.dumps(_versions(vz), sort_keys=True),
        "timings": json.dumps({k: round(v, 3) for k, v in timings.items()}),
        "qc_counts": json.dumps(qc.counts),
        "created_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "noise_variance": float(res.noise_variance),
        "mp_edge": float(res.mp_edge),
        "threshold": float(res.threshold),
        "knockoff_strength": float(res.knockoff_strength),
        "n_samples_analysed": int(res.n_samples),
        "n_variants_analysed": int(res.n_features),
        "n_imputed_calls": int(an.n_imputed_calls),
        "n_passes": int(n_passes),
        "n_passes_detail": _passes_detail(n_passes, an),
        "axes": AXES_NOTE,
        "centring_note": CENTRING_NOTE,
    }
    if an.comparison is not None:
        c = an.comparison["result"]
        attrs["centring_comparison"] = json.dumps(
            {
                "description": an.comparison["description"],
                "eigenvalue": np.asarray(c.eigenvalues, float).tolist(),
                "knockoff_eigenvalue": np.median(c.matched_knockoff_eigenvalues, axis=0).tolist(),
                "displacement": np.asarray(c.displacement, float).tolist(),
                "verdict": np.asarray(c.verdicts).astype(str).tolist(),
                "threshold": float(c.threshold),
                "mp_edge": float(c.mp_edge),
            }
        )
    ds = xr.Dataset(
        data,
        coords={"component": np.arange(K), "knockoff": np.arange(res.n_knockoffs)},
        attrs=attrs,
    )
    validate_genomics_dataset(ds)
    return ds


def _versions(vz: VcfZarr | None = None) -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for pkg in ("mspca-dask", "numpy", "scipy", "dask", "distributed", "zarr", "xarray"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "not installed"
    if vz is not None:
        for k in ("source", "vcf_zarr_version"):
            if k in vz.attrs:
                out[f"input_{k}"] = str(vz.attrs[k])
    return out


def validate_genomics_dataset(ds: xr.Dataset) -> None:
    """Check ``ds`` against :data:`GENOMICS_VARIABLES` and :data:`GENOMICS_ATTRS`.

    Raises
    ------
    InputError
        A variable or attribute is missing or has the wrong dims, dtype, kind or length, or
        the layout is newer than this module; the message names it.
    """
    import xarray as xr

    from .result import attr_kind_ok, variable_problem

    if not isinstance(ds, xr.Dataset):
        raise DTypeError(f"expected an xarray.Dataset (got {type(ds).__name__})")
    for name, (kind, required, doc) in GENOMICS_ATTRS.items():
        if name not in ds.attrs:
            if required:
                raise InputError(f"the genomics result lacks the attribute {name!r} ({doc})")
            continue
        v = ds.attrs[name]
        if not attr_kind_ok(v, kind):
            raise InputError(f"the genomics result attribute {name!r} must be a {kind} (got {v!r})")
    if int(ds.attrs["mspca_genomics_schema_version"]) > GENOMICS_SCHEMA_VERSION:
        raise InputError(
            "the genomics result was written by a newer layout "
            f"({ds.attrs['mspca_genomics_schema_version']} > {GENOMICS_SCHEMA_VERSION}); "
            "upgrade mspca_dask"
        )
    for name, spec in GENOMICS_VARIABLES.items():
        if name not in ds.data_vars:
            if spec.required:
                raise InputError(f"the genomics result lacks the variable {name!r} ({spec.doc})")
            continue
        problem = variable_problem(ds[name], spec.dims, spec.kind)
        if problem:
            raise InputError(f"the genomics result variable {name!r} {problem}")
    n_inc = int(np.asarray(ds["sample_included"]).sum())
    d_inc = int(np.asarray(ds["variant_included"]).sum())
    if n_inc != ds.attrs["n_samples_analysed"] or d_inc != ds.attrs["n_variants_analysed"]:
        raise InputError(
            f"the genomics result says n = {ds.attrs['n_samples_analysed']}, d = "
            f"{ds.attrs['n_variants_analysed']} but includes {n_inc} samples and {d_inc} variants"
        )


def open_genomics_result(path: str | os.PathLike[str]) -> xr.Dataset:
    """Open a job's result (the output directory or its ``result.zarr``), validated.

    Raises
    ------
    SourceNotFoundError
        Nothing at ``path``.
    InputError
        The store is incomplete (a crashed write) or does not follow the layout.
    """
    from .io import open_dataset_checked

    p = Path(path)
    if (p / RESULT_NAME).exists():
        p = p / RESULT_NAME
    ds = open_dataset_checked(str(p))
    validate_genomics_dataset(ds)
    return ds


# --------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------

_PALETTE = (
    "tab:blue",
    "tab:red",
    "tab:green",
    "tab:orange",
    "tab:purple",
    "tab:brown",
    "tab:pink",
    "tab:olive",
    "tab:cyan",
    "tab:gray",
)


def _scatter(ax: Axes, x: np.ndarray, y: np.ndarray, labels: np.ndarray | None) -> None:
    if labels is None:
        ax.scatter(x, y, s=10, color="tab:blue", alpha=0.7)
        return
    groups = sorted(set(labels.tolist()), key=lambda g: -int((labels == g).sum()))
    for i, g in enumerate(groups):
        m = labels == g
        ax.scatter(
            x[m],
            y[m],
            s=12,
            alpha=0.75,
            color=_PALETTE[i % len(_PALETTE)],
            label=f"{g} ({int(m.sum())})",
        )
    ax.legend(fontsize="small", markerscale=1.5, loc="best")


def _figure(**kw: Any) -> Figure:
    from matplotlib.figure import Figure

    return Figure(layout="constrained", **kw)


def _pc_label(ds: xr.Dataset, k: int) -> str:
    return f"PC{k} ({ds['verdict'].values[k]}, λ = {float(ds['eigenvalue'].values[k]):.4g})"


def make_figures(ds: xr.Dataset, an: Analysis | None = None) -> dict[str, Figure]:
    """The report's figures: spectrum, stable and mean-shift score plots, QC histograms."""
    figs: dict[str, Figure] = {}
    inc = np.asarray(ds["sample_included"].values, bool)
    scores = np.asarray(ds["sample_score"].values)[inc]
    labels = None
    if "sample_label" in ds:
        labels = np.asarray(ds["sample_label"].values).astype(str)[inc]
    verdict = np.asarray(ds["verdict"].values).astype(str)
    stable = np.flatnonzero(verdict == "stable")
    shift = np.flatnonzero(verdict == "mean shift")

    # Spectrum (and the all-sample-centred comparison when computed).
    if an is not None:
        panels = [
            (
                "reference centring"
                if ds.attrs["reference_mode"] != "auto"
                else "robust (auto) centring",
                an.result,
            )
        ]
        if an.comparison is not None:
            panels.append(("all-sample centring (for comparison)", an.comparison["result"]))
        fig = _figure(figsize=(6.4 * len(panels), 4.2))
        axes = fig.subplots(1, len(panels), squeeze=False)[0]
        for ax, (title, r) in zip(axes, panels, strict=True):
            r.plot(ax=ax)
            ax.set_title(f"{title}: {r.n_stable} stable of {r.n_components}")
        figs["spectrum"] = fig

    def score_fig(pairs: list[tuple[int, int | None]], title: str) -> Figure:
        fig = _figure(figsize=(5.2 * len(pairs), 4.4))
        axes = fig.subplots(1, len(pairs), squeeze=False)[0]
        for ax, (a, b) in zip(axes, pairs, strict=True):
            if b is None:
                _scatter(ax, np.arange(len(scores)), scores[:, a], labels)
                ax.set_xlabel("sample (index)")
                ax.set_ylabel(_pc_label(ds, a))
            else:
                _scatter(ax, scores[:, a], scores[:, b], labels)
                ax.set_xlabel(_pc_label(ds, a))
                ax.set_ylabel(_pc_label(ds, b))
        fig.suptitle(title)
        return fig

    if len(stable) >= 2:
        figs["scores_stable"] = score_fig(
            [(int(stable[0]), int(stable[1]))], "Top stable (covariance) PCs"
        )
    elif len(stable) == 1:
        figs["scores_stable"] = score_fig(
            [(int(stable[0]), None)], "The only stable (covariance) PC"
        )
    if len(shift):
        pairs: list[tuple[int, int | None]] = []
        for k in shift[:2]:
            other = next((int(j) for j in stable), None)
            if other is None:
                other = next((int(j) for j in shift if j != k), None)
            pairs.append((int(k), other))
        figs["scores_mean_shift"] = score_fig(
            pairs, "Mean-shift PCs (made by a shifted group of samples)"
        )

    # QC histograms.
    fig = _figure(figsize=(12.8, 3.6))
    a1, a2, a3, a4 = fig.subplots(1, 4)
    p = np.asarray(ds["variant_allele_frequency"].values)
    maf = np.minimum(p, 1 - p)
    params = json.loads(ds.attrs["params"])
    a1.hist(maf[np.isfinite(maf)], bins=50, color="0.5")
    a1.axvline(params["min_maf"], color="tab:red", linestyle="--", label="min_maf")
    a1.set_xlabel("minor allele frequency (all variants)")
    a1.legend(fontsize="small")
    vm = np.asarray(ds["variant_missing_rate"].values)
    a2.hist(
        vm,
        bins=50,
        range=(0.0, max(1.5 * params["max_variant_missing"], vm.max(), 0.01)),
        color="0.5",
    )
    a2.axvline(params["max_variant_missing"], color="tab:red", linestyle="--")
    a2.set_xlabel("variant missing rate")
    cr = np.asarray(ds["sample_call_rate"].values)
    lo = min(params["min_sample_call_rate"] - 0.05, float(cr.min()))
    a3.hist(cr, bins=30, range=(max(lo, 0.0), 1.0), color="0.5")
    a3.axvline(params["min_sample_call_rate"], color="tab:red", linestyle="--")
    a3.set_xlabel("sample call rate")
    vi = np.asarray(ds["variant_included"].values, bool)
    pr = np.asarray(ds["variant_reference_frequency"].values)
    a4.scatter(p[vi], pr[vi], s=2, alpha=0.3, color="tab:blue")
    a4.plot([0, 1], [0, 1], color="black", linewidth=0.8)
    a4.set_xlabel("all-sample frequency")
    a4.set_ylabel("centring (reference) frequency")
    for ax in (a1, a2, a3):
        ax.set_ylabel("count")
    fig.suptitle("QC")
    figs["qc"] = fig
    return figs


def _group_table(ds: xr.Dataset) -> list[tuple[str, list[tuple[str, int, float, float]]]]:
    """Per candidate eigenpair: mean and sd of scores per metadata group."""
    if "sample_label" not in ds:
        return []
    inc = np.asarray(ds["sample_included"].values, bool)
    labels = np.asarray(ds["sample_label"].values).astype(str)[inc]
    scores = np.asarray(ds["sample_score"].values)[inc]
    out = []
    for k in np.flatnonzero(np.asarray(ds["candidate"].values)):
        rows = []
        for g in sorted(set(labels.tolist())):
            v = scores[labels == g, k]
            rows.append((g, int(v.size), float(v.mean()), float(v.std())))
        out.append((_pc_label(ds, int(k)), rows))
    return out


def write_report(ds: xr.Dataset, an: Analysis | None, directory: Path) -> list[Path]:
    """Write ``figures/*.png`` and a self-contained ``report.html`` (PNGs inlined)."""
    figdir = directory / "figures"
    figdir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    pngs: dict[str, bytes] = {}
    for name, fig in make_figures(ds, an).items():
        buf = _stdio.BytesIO()
        fig.savefig(buf, format="png", dpi=110)
        pngs[name] = buf.getvalue()
        path = figdir / f"{name}.png"
        path.write_bytes(pngs[name])
        written.append(path)
    page = directory / "report.html"
    page.write_text(_report_html(ds, pngs), encoding="utf-8")
    written.append(page)
    return written


_CAPTIONS = {
    "spectrum": "Eigenvalues (filled), where the knockoffs moved them (hollow), and the "
    "Marchenko-Pastur bulk edge (dashed). Mean-shift spikes move; covariance spikes stay.",
    "scores_stable": "Top stable PCs: covariance structure of the reference-like samples.",
    "scores_mean_shift": "Mean-shift PCs: directions made by a shifted group of samples (e.g. "
    "an admixed or distinct population).",
    "qc": "Minor allele frequency, variant missingness, sample call rate (dashed: thresholds), "
    "and centring vs all-sample frequency of the analysed variants.",
}
_EIG_HEADER = (
    "eigenpair",
    "eigenvalue",
    "knockoff (median)",
    "displacement",
    "overlap",
    "verdict",
    "reason",
)


def _report_html(ds: xr.Dataset, pngs: Mapping[str, bytes]) -> str:
    esc = html.escape
    a = ds.attrs

    def img(name: str, caption: str) -> str:
        if name not in pngs:
            return ""
        b64 = base64.b64encode(pngs[name]).decode("ascii")
        return (
            f'<figure><img alt="{esc(name)}" src="data:image/png;base64,{b64}">'
            f"<figcaption>{esc(caption)}</figcaption></figure>"
        )

    def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
        head = "".join(f"<th>{esc(str(h))}</th>" for h in header)
        body = "".join(
            "<tr>" + "".join(f"<td>{esc(str(c))}</td>" for c in r) + "</tr>" for r in rows
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    kn = np.asarray(ds["knockoff_eigenvalue"].values)
    eig_rows = [
        (
            k,
            f"{float(ds['eigenvalue'].values[k]):.6g}",
            f"{float(np.median(kn[:, k])):.6g}",
            f"{float(ds['displacement'].values[k]):.4g}",
            f"{float(ds['eigenvector_overlap'].values[k]):.3f}",
            str(ds["verdict"].values[k]),
            str(ds["reason"].values[k]),
        )
        for k in range(ds.sizes["component"])
    ]
    verdict = np.asarray(ds["verdict"].values).astype(str)
    n_shift = int((verdict == "mean shift").sum())
    n_stable = int((verdict == "stable").sum())
    qc_rows = [*json.loads(a["qc_counts"]).items(), ("missing calls imputed", a["n_imputed_calls"])]
    groups = "".join(
        f"<h3>{esc(title)}</h3>"
        + table(
            ("group", "samples", "mean score", "sd"),
            [(g, n, f"{m:.4g}", f"{s:.4g}") for g, n, m, s in rows],
        )
        for title, rows in _group_table(ds)
    )
    comparison = ""
    if "centring_comparison" in a:
        c = json.loads(a["centring_comparison"])
        comparison = (
            "<h2>What all-sample centring would have said</h2><p>"
            + esc(c["description"])
            + ". After all-sample centring the knockoff no longer "
            "overlaps the shifted population, so its spike barely moves (compare the "
            "displacements with the table above):</p>"
            + table(
                ("eigenpair", "eigenvalue", "knockoff (median)", "displacement", "verdict"),
                [
                    (k, f"{ev:.6g}", f"{kv:.6g}", f"{dv:.4g}", v)
                    for k, (ev, kv, dv, v) in enumerate(
                        zip(
                            c["eigenvalue"],
                            c["knockoff_eigenvalue"],
                            c["displacement"],
                            c["verdict"],
                            strict=True,
                        )
                    )
                ],
            )
        )
    prov = [
        ("job", a["job_name"]),
        ("created (UTC)", a["created_utc"]),
        ("input store", a["input_store"]),
        ("input variable", a["input_variable"]),
        ("input fingerprint", a["input_fingerprint"]),
        ("job fingerprint", a["job_fingerprint"]),
        ("reference", f"{a['reference_mode']}: {a['reference_description']}"),
        ("scale from", a["scale_from"]),
        ("seed", a["random_state"]),
        (
            "passes over the genotypes",
            f"{a['n_passes']} ({a['n_passes_detail']})"
            if "n_passes_detail" in a
            else a["n_passes"],
        ),
        ("timings (s)", a["timings"]),
        ("versions", a["versions"]),
    ]
    style = (
        "body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;"
        "color:#222}table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid "
        "#ccc;padding:.25em .6em;text-align:left;font-size:.9em;vertical-align:top}"
        "th{background:#f3f3f3}.note{background:#fff6d6;border-left:5px solid #e0a800;"
        "padding:.8em 1em;margin:1em 0}img{max-width:100%}figure{margin:1em 0}"
        "figcaption{font-size:.85em;color:#555}pre{white-space:pre-wrap;font-size:.8em}"
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>MS-PCA genomics report: {esc(a["job_name"])}</title>
<style>{style}</style></head><body>
<h1>MS-PCA genomics report: {esc(a["job_name"])}</h1>
<p><strong>{n_stable}</strong> stable (covariance) PC(s) and <strong>{n_shift}</strong>
mean-shift PC(s) among the top {ds.sizes["component"]} eigenpairs of
n = {a["n_samples_analysed"]} samples &times; d = {a["n_variants_analysed"]} variants.
{esc(AXES_NOTE)}</p>
<div class="note"><strong>Centring.</strong> {esc(CENTRING_NOTE)}<br>
{esc(_centring_this_run(a))}</div>
<h2>Spectrum and knockoff movement</h2>
{img("spectrum", _CAPTIONS["spectrum"])}
{table(_EIG_HEADER, eig_rows)}
{comparison}
<h2>Sample scores</h2>
{img("scores_stable", _CAPTIONS["scores_stable"])}
{img("scores_mean_shift", _CAPTIONS["scores_mean_shift"])}
{groups}
<h2>QC</h2>
{table(("quantity", "count"), qc_rows)}
{img("qc", _CAPTIONS["qc"])}
<h2>Provenance</h2>
{table(("", ""), prov)}
<h3>Parameters</h3><pre>{esc(json.dumps(json.loads(a["params"]), indent=2))}</pre>
</body></html>
"""


# --------------------------------------------------------------------------------------
# Atomic output directory, lock
# --------------------------------------------------------------------------------------


@contextlib.contextmanager
def _job_lock(output_dir: Path) -> Iterator[None]:
    """An exclusive, non-blocking ``flock`` on ``.NAME.lock`` next to the output directory."""
    import fcntl

    output_dir.parent.mkdir(parents=True, exist_ok=True)
    lock_path = output_dir.parent / f".{output_dir.name}.lock"
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise JobLockedError(
                f"another run of this job holds {lock_path}; try again when it has finished"
            ) from exc
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {datetime.now(UTC).isoformat(timespec='seconds')}\n".encode())
        yield
    finally:
        os.close(fd)  # releases the lock


def _remove_stale(output_dir: Path) -> None:
    """Remove the hidden leftovers of crashed runs (only called while holding the lock).

    A run killed between moving the old result aside and renaming the new one into place
    leaves no ``output_dir`` but a complete ``.NAME.old-*``: that old result is put back.
    """
    if not (output_dir.exists() or output_dir.is_symlink()):
        from .io import is_complete

        for old in sorted(output_dir.parent.glob(f".{output_dir.name}.old-*")):
            if is_complete(str(old / RESULT_NAME)):
                logger.info("restoring the result moved aside by an interrupted run: %s", old)
                os.replace(old, output_dir)
                break
    for pattern in (f".{output_dir.name}.tmp-*", f".{output_dir.name}.old-*"):
        for p in output_dir.parent.glob(pattern):
            logger.info("removing the leftovers of an interrupted run: %s", p)
            shutil.rmtree(p, ignore_errors=True)


def _commit_dir(tmp: Path, target: Path, overwrite: bool) -> None:
    """Rename the finished ``tmp`` to ``target`` by the rules of every result we write
    (:func:`mspca_dask.io._commit`): only a directory holding our result (or an empty one)
    is replaced, the old one is moved aside and put back if the rename fails."""
    from .io.writing import _fsync_dir, commit_directory as _commit

    _commit(str(tmp), str(target), overwrite, uuid.uuid4().hex, result_name=RESULT_NAME)
    _fsync_dir(str(target.parent))


def _existing_fingerprint(output_dir: Path) -> str | None:
    """The job fingerprint of a complete result in ``output_dir``, or None."""
    import zarr

    from .io import is_complete

    store = output_dir / RESULT_NAME
    if not is_complete(str(store)):
        return None
    try:
        group = zarr.open_group(str(store), mode="r", use_consolidated=False)
        fp = group.attrs.get("job_fingerprint")
    except (OSError, ValueError, KeyError):
        return None
    return fp if isinstance(fp, str) else ""


# --------------------------------------------------------------------------------------
# Simulation (demo and tests): stdpopsim/msprime → tskit2zarr or VCF → vcf2zarr
# --------------------------------------------------------------------------------------


def simulate_cohort(
    store: str | os.PathLike[str],
    *,
    metadata: str | os.PathLike[str] | None = None,
    config: SimulateConfig | None = None,
) -> dict[str, Any]:
    """Simulate a cohort with stdpopsim and write it as VCF Zarr with bio2zarr's own writers.

    Parameters
    ----------
    store : path
        Directory of the VCF Zarr store to create.  Reused when it was simulated with the
        same parameters (root attribute ``mspca_simulation``).
    metadata : path, optional
        Where to write a TSV ``sample_id<TAB>population``.
    config : SimulateConfig, optional
        Model, populations (e.g. ``{"CEU": 200, "YRI": 20}``), region, seed, missing rate,
        and writer: ``"tskit2zarr"`` (bio2zarr's tskit converter) or ``"vcf2zarr"`` (tskit
        writes a VCF, cyvcf2 rewrites it with ``missing_rate`` of the calls set to ``./.``,
        and bio2zarr's vcf2zarr converts it).

    Returns
    -------
    dict
        ``store``, ``metadata``, ``populations`` (per-sample labels), ``n_missing`` and
        ``reused``.  Needs the ``genomics`` extra (msprime, stdpopsim, tskit, bio2zarr,
        cyvcf2 for the VCF route).
    """
    import zarr

    cfg = config or SimulateConfig()
    params = {**dataclasses.asdict(cfg), "layout": 1}
    store = Path(store)
    meta_path = None if metadata is None else Path(metadata)
    if store.is_dir():
        try:
            old = zarr.open_group(str(store), mode="r").attrs.get(SIMULATION_ATTR)
        except (OSError, ValueError, KeyError):
            old = None
        if (
            isinstance(old, dict)
            and old.get("params") == params
            and (meta_path is None or meta_path.exists())
        ):
            return {
                "store": str(store),
                "metadata": None if meta_path is None else str(meta_path),
                "populations": np.asarray(old["populations"], dtype=object),
                "n_missing": int(old["n_missing"]),
                "reused": True,
            }
    try:
        import msprime  # noqa: F401
        import stdpopsim
        import tskit  # noqa: F401
    except ImportError as exc:
        raise ConfigError(
            f"[simulate] needs the genomics extra: pip install 'mspca-dask[genomics]' ({exc})"
        ) from exc
    t0 = time.perf_counter()
    species = stdpopsim.get_species(cfg.species)
    model = species.get_demographic_model(cfg.model)
    contig = species.get_contig(
        cfg.chromosome,
        left=cfg.left,
        right=cfg.left + cfg.length,
        mutation_rate=model.mutation_rate,  # the model's own rate (no mismatch warning)
    )
    ts = stdpopsim.get_engine("msprime").simulate(
        model, contig, dict(cfg.populations), seed=cfg.seed
    )
    pop_names = [
        p.metadata["name"] if isinstance(p.metadata, dict) else str(p.id) for p in ts.populations()
    ]
    ind_pop = [pop_names[ts.node(ind.nodes[0]).population] for ind in ts.individuals()]
    counters: dict[str, int] = {}
    names = []
    for pop in ind_pop:
        counters[pop] = counters.get(pop, 0) + 1
        names.append(f"{pop}_{counters[pop]:04d}")
    store.parent.mkdir(parents=True, exist_ok=True)
    tmp = store.parent / f".{store.name}.tmp-{uuid.uuid4().hex}"
    n_missing = 0
    try:
        if cfg.writer == "tskit2zarr":
            from bio2zarr import tskit as b2t

            b2t.convert(
                ts,
                str(tmp),
                model_mapping=ts.map_to_vcf_model(individual_names=names),
                variants_chunk_size=cfg.variants_chunk_size,
                worker_processes=0,
            )
        else:
            n_missing = _write_vcf_with_missing_and_convert(ts, names, cfg, tmp)
        group = zarr.open_group(str(tmp), mode="r+")
        group.attrs[SIMULATION_ATTR] = {
            "params": params,
            "populations": ind_pop,
            "n_missing": int(n_missing),
        }
        if store.exists():
            shutil.rmtree(store)
        os.replace(tmp, store)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if meta_path is not None:
        meta_path.parent.mkdir(parents=True, exist_ok=True)
        meta_path.write_text(
            "sample_id\tpopulation\n"
            + "".join(f"{s}\t{p}\n" for s, p in zip(names, ind_pop, strict=True))
        )
    logger.info(
        "simulated %s (%s: %s) with %d sites in %.1f s; written by %s to %s",
        cfg.model,
        cfg.species,
        cfg.populations,
        ts.num_sites,
        time.perf_counter() - t0,
        cfg.writer,
        store,
    )
    return {
        "store": str(store),
        "metadata": None if meta_path is None else str(meta_path),
        "populations": np.asarray(ind_pop, dtype=object),
        "n_missing": n_missing,
        "reused": False,
    }


def _write_vcf_with_missing_and_convert(
    ts: Any, names: list[str], cfg: SimulateConfig, out: Path
) -> int:
    """tskit writes the VCF, cyvcf2 blanks ``missing_rate`` of the calls, vcf2zarr converts."""
    import tempfile

    import cyvcf2
    from bio2zarr import vcf as b2v

    rng = np.random.default_rng(cfg.seed)
    n_missing = 0
    with tempfile.TemporaryDirectory(prefix="mspca-sim-") as d:
        clean, dirty = Path(d) / "clean.vcf", Path(d) / "cohort.vcf"
        with open(clean, "w") as f:
            ts.write_vcf(f, individual_names=names)
        reader = cyvcf2.VCF(str(clean))
        writer = cyvcf2.Writer(str(dirty), reader)
        try:
            for v in reader:
                gt = v.genotype.array()  # (samples, ploidy + 1): alleles..., phased flag
                miss = rng.random(gt.shape[0]) < cfg.missing_rate
                if miss.any():
                    # htslib's encoding: (allele + 1) << 1 | phased; 0 is a missing allele.
                    enc = ((gt[:, :-1].astype(np.int32) + 1) << 1) | gt[:, -1:].astype(np.int32)
                    enc[miss] = 0
                    v.set_format("GT", enc)
                    n_missing += int(miss.sum())
                writer.write_record(v)
        finally:
            writer.close()
            reader.close()
        b2v.convert(
            [str(dirty)],
            str(out),
            variants_chunk_size=cfg.variants_chunk_size,
            worker_processes=0,
        )
    return n_missing


# --------------------------------------------------------------------------------------
# The job
# --------------------------------------------------------------------------------------


@dataclass
class JobOutcome:
    """What :func:`run_job` did: ``"computed"`` or ``"up to date"``, where, and the fingerprint."""

    status: str
    output_dir: Path
    job_fingerprint: str
    dataset: xr.Dataset | None = None
    seconds: float = 0.0


@contextlib.contextmanager
def _scheduler_for(cfg: JobConfig) -> Iterator[Any]:
    if cfg.scheduler == "local-cluster":
        from distributed import Client, LocalCluster

        with (
            LocalCluster(
                n_workers=cfg.workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
            ) as cluster,
            Client(cluster) as client,
        ):
            yield client
    elif "://" in cfg.scheduler:
        from distributed import Client

        from .errors import SchedulerError

        try:
            client = Client(cfg.scheduler, timeout="30s")
        except OSError as exc:
            raise SchedulerError(
                f"could not connect to the Dask scheduler {cfg.scheduler}: {exc}"
            ) from exc
        with client:
            yield client
    else:
        yield cfg.scheduler


def run_job(cfg: JobConfig, *, overwrite: bool | None = None) -> JobOutcome:
    """Run one job: simulate (if asked), check fingerprints, QC, fit, write, report.

    Parameters
    ----------
    cfg : JobConfig
    overwrite : bool, optional
        Overrides ``[output] overwrite``.

    Returns
    -------
    JobOutcome
        ``status`` is ``"up to date"`` (nothing was done: a complete result with the same
        job fingerprint exists) or ``"computed"``.

    Raises
    ------
    ResultExistsError
        A complete result from other inputs or parameters exists and overwrite is off.
    JobLockedError
        Another run of the same job holds the lock.
    ConfigError, InputError, ...
        Bad config or input (nothing is written).
    """
    t_start = time.perf_counter()
    overwrite = cfg.overwrite if overwrite is None else overwrite
    out = cfg.output_dir
    if cfg.report:
        try:
            import matplotlib  # noqa: F401
        except ImportError as exc:
            raise ConfigError(
                "the report needs matplotlib: pip install 'mspca-dask[genomics]', or set "
                "[report] enabled = false"
            ) from exc
    # Before the lock, whose file sits next to the output: never write into or over the input.
    check_output_not_input(
        out, [cfg.store], storage_options=cfg.storage_options, what="[output] dir"
    )
    with _job_lock(out):
        _remove_stale(out)
        timings: dict[str, float] = {}
        if cfg.simulate is not None:
            t0 = time.perf_counter()
            sim = simulate_cohort(cfg.store, metadata=cfg.sample_metadata, config=cfg.simulate)
            timings["simulate"] = time.perf_counter() - t0
            if sim["reused"]:
                logger.info("input: %s (simulated earlier with the same parameters)", cfg.store)
        t0 = time.perf_counter()
        input_fp = input_fingerprint(
            cfg.store, mode=cfg.fingerprint, storage_options=cfg.storage_options
        )
        job_fp = job_fingerprint(cfg, input_fp)
        timings["fingerprint"] = time.perf_counter() - t0
        existing = _existing_fingerprint(out)
        if existing == job_fp:
            logger.info(
                "up to date: %s holds a complete result of the same input and parameters "
                "(job fingerprint %s); nothing to do",
                out,
                job_fp[:12],
            )
            return JobOutcome("up to date", out, job_fp, seconds=time.perf_counter() - t_start)
        if (out.exists() or out.is_symlink()) and not overwrite:
            what = (
                "a complete result of other inputs or parameters"
                if existing is not None
                else "something that is not a complete result"
            )
            raise ResultExistsError(
                f"{out} holds {what}; set [output] overwrite = true (or pass --overwrite) to "
                "replace it, or choose another [output] dir"
            )
        if (out.exists() or out.is_symlink()) and not is_replaceable(out, result_name=RESULT_NAME):
            raise foreign_error(str(out), "[output] dir")
        ds, an = _compute(cfg, input_fp, job_fp, timings)
        t0 = time.perf_counter()
        tmp = out.parent / f".{out.name}.tmp-{uuid.uuid4().hex}"
        tmp.mkdir(parents=True)
        try:
            _write_outputs(ds, an, tmp, cfg)
            _commit_dir(tmp, out, overwrite=True if overwrite else False)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        timings["write"] = time.perf_counter() - t0
    seconds = time.perf_counter() - t_start
    logger.info("done in %.1f s: %s (report: %s)", seconds, out / RESULT_NAME, out / "report.html")
    return JobOutcome("computed", out, job_fp, ds, seconds)


def _compute(
    cfg: JobConfig, input_fp: str, job_fp: str, timings: dict[str, float]
) -> tuple[xr.Dataset, Analysis]:
    t0 = time.perf_counter()
    vz = open_genotypes(
        cfg.store,
        genotype_variable=cfg.genotype_variable,
        ploidy=cfg.ploidy,
        storage_options=cfg.storage_options,
        allow_missing_chunks=cfg.allow_missing_chunks,
    )
    metadata = None
    labels = None
    if cfg.sample_metadata is not None:
        metadata = read_sample_metadata(cfg.sample_metadata, cfg.metadata_id_column)
        known = int(np.isin(vz.sample_id, metadata.index.to_numpy()).sum())
        logger.info(
            "sample metadata: %s (%d of %d samples of the store listed)",
            cfg.sample_metadata,
            known,
            vz.n_samples,
        )
        if cfg.color_by is not None:
            labels = _metadata_column(metadata, cfg.color_by, vz.sample_id, cfg.sample_metadata)
    reference, ref_desc = resolve_reference(cfg, vz, metadata)
    logger.info(
        "input: %s, %d variants x %d samples (%s, ploidy %d); reference (%s): %s",
        cfg.store,
        vz.n_variants,
        vz.n_samples,
        vz.variable,
        vz.ploidy,
        cfg.reference_mode,
        ref_desc,
    )
    timings["open"] = time.perf_counter() - t0
    with _scheduler_for(cfg) as scheduler, _compact.workspace(cfg.output_dir.parent) as ws:
        executor = Executor(scheduler=scheduler)
        t0 = time.perf_counter()
        qc = run_qc(cfg, vz, reference, executor, ws)
        timings["statistics"] = time.perf_counter() - t0
        logger.info("QC: %s", json.dumps(qc.counts))
        t0 = time.perf_counter()
        an = analyse(cfg, vz, qc, scheduler, ws)
        timings["fit"] = time.perf_counter() - t0
    res = an.result
    n_passes = (
        qc.n_passes
        + an.n_raw_passes
        + res.n_passes
        + (an.comparison["result"].n_passes if an.comparison is not None else 0)
    )
    for k in range(res.n_components):
        logger.info(
            "PC%d: eigenvalue %.6g -> %.6g under the knockoff (median), %s",
            k,
            res.eigenvalues[k],
            float(np.median(res.matched_knockoff_eigenvalues[:, k])),
            res.verdicts[k],
        )
    ds = build_dataset(
        cfg,
        vz,
        qc,
        an,
        labels=labels,
        reference_description=ref_desc,
        input_fp=input_fp,
        job_fp=job_fp,
        timings=timings,
        n_passes=n_passes,
    )
    return ds, an


def _write_outputs(ds: xr.Dataset, an: Analysis, directory: Path, cfg: JobConfig) -> None:
    """Everything into ``directory`` (the hidden temporary one): report first, result last."""
    from .io import write_dataset_atomic

    a = ds.attrs
    (directory / "summary.txt").write_text(
        f"{CENTRING_NOTE}\n\n{_centring_this_run(a)}\n{AXES_NOTE}\n\n"
        f"passes over the genotypes: {a['n_passes']} ({a['n_passes_detail']}); the MS-PCA "
        f"summary below counts the fit's own {an.result.n_passes}\n\n{an.result.summary()}\n"
    )
    if cfg.report:
        write_report(ds, an, directory)
    write_dataset_atomic(ds, directory / RESULT_NAME)


# --------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------


def build_parser(prog: str = "mspca-genomics") -> argparse.ArgumentParser:
    """Parser of the genomics command (``run`` and ``check`` subcommands)."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Scheduled genomics MS-PCA: VCF Zarr in, population structure flagged, "
        "report out. One config file per job.",
        epilog="Exit status: 0 done or up to date, 1 runtime error, 2 bad config or input, "
        "3 a complete result of other inputs exists (overwrite not asked), 75 another run holds "
        "the lock, 130 interrupted, 143 terminated.",
    )
    sub = parser.add_subparsers(dest="genomics_command", metavar="COMMAND", required=True)
    _add_subcommands(sub)
    return parser


def _add_subcommands(sub: Any) -> None:
    r = sub.add_parser(
        "run",
        help="run a job (a no-op when its result is up to date)",
        description="Run the job described by CONFIG (TOML or YAML). Reruns with the same "
        "input fingerprint and parameters do nothing and exit 0.",
    )
    r.add_argument("config", metavar="CONFIG", help="job config file (.toml, .yaml)")
    r.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a complete result of other inputs/parameters ([output] overwrite)",
    )
    r.add_argument("--quiet", "-q", action="store_true", help="log warnings and errors only")
    r.set_defaults(genomics_handler=_cmd_run)
    c = sub.add_parser(
        "check",
        help="validate a config and say whether its result is up to date",
        description="Validate CONFIG and fingerprint its input; exit 0 if the result is up to "
        "date, 1 if a run would compute, 2 if the config or input is bad.",
    )
    c.add_argument("config", metavar="CONFIG")
    c.add_argument("--quiet", "-q", action="store_true")
    c.set_defaults(genomics_handler=_cmd_check)
    p = sub.add_parser(
        "project",
        help="put new samples on a result's components",
        description="Score the samples of NEW_STORE (VCF Zarr or PLINK fileset) on every "
        "component of RESULT with the stored centre frequencies, scales and loadings; "
        "variants matched by contig, position and alleles (swaps and strand flips handled, "
        "unmatched ones imputed at the centre). Writes SCORES atomically: a TSV "
        "(FID IID PC1..PCK, as FlashPCA2 --project) or, for a .zarr path, a Zarr Dataset.",
    )
    p.add_argument("result", metavar="RESULT", help="job output directory or its result.zarr")
    p.add_argument("new_store", metavar="NEW_STORE", help="VCF Zarr store or PLINK .bed/prefix")
    p.add_argument("--out", required=True, metavar="SCORES", help="TSV file or .zarr path")
    p.add_argument("--overwrite", action="store_true", help="replace an existing SCORES")
    p.add_argument(
        "--drop-ambiguous",
        action="store_true",
        help="treat strand-ambiguous SNPs (A/T, C/G) as missing instead of matching as written",
    )
    p.add_argument("--quiet", "-q", action="store_true")
    p.set_defaults(genomics_handler=_cmd_project)


def register_cli(subparsers: Any) -> None:
    """Add ``genomics run|check`` to the ``mspca`` command's subparsers.

    In ``mspca_dask/cli.py``'s ``build_parser``::

        from .genomics import register_cli
        register_cli(sub)

    The handler returns its own exit status (including 75 and 143), so ``cli.main`` only
    returns it.
    """
    g = subparsers.add_parser(
        "genomics",
        help="scheduled genomics PCA job: VCF Zarr in, report out",
        description="Run or check a genomics MS-PCA job described by a config file.",
    )
    _add_subcommands(g.add_subparsers(dest="genomics_command", metavar="COMMAND", required=True))
    g.set_defaults(handler=lambda args: args.genomics_handler(args))


def _setup_logging(quiet: bool) -> logging.Handler:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        logging.Formatter(
            "%(asctime)s %(levelname)s mspca-genomics: %(message)s", datefmt="%Y-%m-%dT%H:%M:%S%z"
        )
    )
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING if quiet else logging.INFO)
    logger.propagate = False
    return handler


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    """Turn SIGTERM into an exception in the main thread so temporary files are removed."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise _Terminated()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _exit_code(err: BaseException) -> int:
    if isinstance(err, JobLockedError):
        return EXIT_LOCKED
    if isinstance(err, ResultExistsError):
        return EXIT_EXISTS
    if isinstance(err, USAGE_ERRORS):
        return EXIT_USAGE
    return EXIT_ERROR


@contextlib.contextmanager
def _warnings_to_log() -> Iterator[None]:
    """mspca_dask's warnings (no spike above the edge, solver budget) become log lines."""
    import warnings

    from .errors import MSPCAWarning

    with warnings.catch_warnings():
        warnings.simplefilter("always", MSPCAWarning)
        previous = warnings.showwarning

        def show(message: Any, category: Any, *rest: Any, **kw: Any) -> None:
            if issubclass(category, MSPCAWarning):
                logger.warning("%s", " ".join(str(message).split()))
            else:
                previous(message, category, *rest, **kw)

        warnings.showwarning = show
        yield


def _guarded(fn: Any, args: argparse.Namespace) -> int:
    handler = _setup_logging(getattr(args, "quiet", False))
    try:
        with _sigterm_raises(), _warnings_to_log():
            return int(fn(args))
    except MSPCAError as err:
        logger.error("%s", " ".join(str(err).split()) or type(err).__name__)
        return _exit_code(err)
    except KeyboardInterrupt:
        logger.error("interrupted; no result was committed")
        return EXIT_INTERRUPTED
    except _Terminated:
        logger.error("terminated (SIGTERM); no result was committed")
        return EXIT_TERMINATED
    except Exception:  # a bug or an unexpected library error: keep the traceback for the log
        logger.exception("unexpected error")
        return EXIT_ERROR
    finally:
        logger.removeHandler(handler)


def _cmd_run(args: argparse.Namespace) -> int:
    def go(a: argparse.Namespace) -> int:
        cfg = load_config(a.config)
        outcome = run_job(cfg, overwrite=True if a.overwrite else None)
        print(f"{outcome.status}: {outcome.output_dir}")
        return EXIT_OK

    return _guarded(go, args)


def _cmd_check(args: argparse.Namespace) -> int:
    def go(a: argparse.Namespace) -> int:
        cfg = load_config(a.config)
        if cfg.simulate is not None and not Path(cfg.store).exists():
            print(f"would simulate {cfg.store} and compute {cfg.output_dir}")
            return EXIT_ERROR
        fp = job_fingerprint(
            cfg,
            input_fingerprint(cfg.store, mode=cfg.fingerprint, storage_options=cfg.storage_options),
        )
        if _existing_fingerprint(cfg.output_dir) == fp:
            print(f"up to date: {cfg.output_dir}")
            return EXIT_OK
        print(f"would compute: {cfg.output_dir}")
        return EXIT_ERROR

    return _guarded(go, args)


def _cmd_project(args: argparse.Namespace) -> int:
    def go(a: argparse.Namespace) -> int:
        from .projection import project

        ds = project(
            a.result,
            a.new_store,
            out=a.out,
            overwrite=a.overwrite,
            ambiguous="drop" if a.drop_ambiguous else "keep",
        )
        verdicts = ", ".join(
            f"PC{k + 1} {v}" for k, v in enumerate(ds["verdict"].values.astype(str))
        )
        print(f"projected {ds.sizes['samples']} samples: {a.out} ({verdicts})")
        print(f"variant matching: {ds.attrs['match_counts']}")
        return EXIT_OK

    return _guarded(go, args)


def main(argv: Sequence[str] | None = None, prog: str = "mspca-genomics") -> int:
    """Run the genomics command; returns the exit status (see the module docstring)."""
    parser = build_parser(prog)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (EXIT_OK if code is None else EXIT_USAGE)
    return int(args.genomics_handler(args))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
