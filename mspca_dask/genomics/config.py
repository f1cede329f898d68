"""The job config: sections and keys of the TOML/YAML file, validated into a JobConfig."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._params import _suggest
from ..errors import ConfigError
from . import compact as _compact
from .sources import _is_url

logger = logging.getLogger("mspca.genomics")


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
