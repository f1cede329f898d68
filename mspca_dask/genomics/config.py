"""The job config: sections and keys of the TOML/YAML file, validated into a JobConfig."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._execution import JOB_SCHEDULERS
from .._params import _suggest, config_keys, from_mapping
from ..errors import ConfigError, ParameterError
from ..io.urls import LOCAL_PROTOCOLS, is_url, local_path
from . import compact as _compact
from . import ld_prune as _ld


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
    #: Worker processes bio2zarr encodes with (0: this process).  Not part of the data: a
    #: store written with 2 is reused by a config that asks for 0.
    writer_processes: int = 0


@dataclass(frozen=True)
class LDConfig:
    """``[ld]``: LD pruning and long-range-LD regions (:mod:`mspca_dask.genomics.ld_prune`).

    A job without an ``[ld]`` section (or with ``enabled = false``) prunes nothing, as jobs
    did before the section existed; with it, the defaults are those of
    ``plink2 --indep-pairwise 500kb 1 0.2``.
    """

    window_kb: float = _ld.DEFAULT_WINDOW_KB
    #: ``1.0`` keeps every pair (r² is never above 1): pruning off, regions still applied.
    r2: float = _ld.DEFAULT_R2
    #: ``"none"``, ``"hg19"``, ``"hg38"`` or the resolved path of a BED file.
    exclude_regions: str = "none"
    #: The intervals of ``exclude_regions``, read when the config is (so a missing or bad
    #: BED file fails before anything runs, and the job fingerprint holds what was excluded).
    regions: tuple[_ld.Region, ...] = ()

    @property
    def prunes(self) -> bool:
        """Whether the r² pruning runs (``r2 < 1``)."""
        return self.r2 < 1.0

    @property
    def window_bp(self) -> int:
        return int(round(self.window_kb * 1000))


@dataclass(frozen=True)
class SampleSet:
    """Samples given one of four ways, as ``[reference]`` and ``[fit]`` both take them.

    Resolved against a store by :func:`mspca_dask.genomics.reference.resolve_samples`.
    """

    samples: tuple[str, ...] | None = None
    samples_file: Path | None = None
    variable: str | None = None
    metadata_column: str | None = None
    metadata_values: tuple[str, ...] | None = None

    @property
    def mode(self) -> str:
        """``"samples"``, ``"file"``, ``"variable"``, ``"metadata"`` or ``"auto"`` (none)."""
        if self.samples is not None:
            return "samples"
        if self.samples_file is not None:
            return "file"
        if self.variable is not None:
            return "variable"
        if self.metadata_column is not None:
            return "metadata"
        return "auto"


@dataclass(frozen=True)
class FitConfig(SampleSet):
    """``[fit]``: the samples MS-PCA is fitted on; every other sample that passes QC is
    projected onto the fitted components (:mod:`mspca_dask.genomics.projection`).

    A job without the section fits every sample that passes QC, as jobs did before it.
    """

    #: ``samples = "reference"``: fit on the reference set of ``[reference]``.
    reference: bool = False

    @property
    def mode(self) -> str:
        """``"reference"`` or one of :attr:`SampleSet.mode`."""
        return "reference" if self.reference else super().mode


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
    scale: str = "all"
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
    ld: LDConfig | None = None
    fit: FitConfig | None = None
    config_path: Path | None = None
    fit_options: dict[str, Any] = field(default_factory=dict)

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

    @property
    def reference_set(self) -> SampleSet:
        """The ``[reference]`` keys as a :class:`SampleSet`."""
        return SampleSet(
            self.reference_samples,
            self.reference_samples_file,
            self.reference_variable,
            self.reference_metadata_column,
            self.reference_metadata_values,
        )

    def fingerprint_params(self) -> dict[str, Any]:
        """Everything that changes the result (not overwrite, scheduler, or workers)."""
        d = dataclasses.asdict(self)
        for k in ("overwrite", "scheduler", "workers", "config_path", "output_dir", "name"):
            d.pop(k)
        d.pop("memory_budget")  # where the compact matrix lives and what a pass holds, not results
        # recorded only when used, so the fingerprints of jobs that do not use them stay as
        # they were
        for k in ("allow_missing_chunks", "fit_options", "ld", "fit"):
            if not d[k]:
                d.pop(k)
        return json.loads(json.dumps(d, default=str))

    # ------------------------------------------------------------------ parsing
    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any], base: Path | None = None) -> JobConfig:
        """Validate a parsed config (the sections of the TOML/YAML file).

        The keys that map to one field each are read by the table :data:`_FIELDS`; the
        ``[pca]`` section by the parameter registry (:func:`mspca_dask._params.from_mapping`);
        the rest (required keys and keys that depend on each other) by the rules below.

        Parameters
        ----------
        raw : mapping
            ``{"job": {...}, "input": {...}, "reference": {...}, "qc": {...}, "pca": {...},
            "compute": {...}, "output": {...}, "report": {...}, "simulate": {...},
            "ld": {...}, "fit": {...}}``.
        base : Path, optional
            Directory that relative paths are resolved against (the config file's).

        Raises
        ------
        ConfigError
            An unknown section or key (with the closest valid one), a missing required key,
            or a value of the wrong type or out of range.
        """
        base = Path.cwd() if base is None else base
        sections = _sections(raw)
        values: dict[str, Any] = {}
        for section, keys in _FIELDS.items():
            for key, value in sections.get(section, {}).items():
                if key in keys:
                    name, parse = keys[key]
                    where = f"[{section}] {key}"
                    values[name] = (
                        _path(value, where, base) if parse is _path else parse(value, where)
                    )
        inp, out = sections.get("input", {}), sections.get("output", {})
        values["store"] = _store(inp, base)
        values["output_dir"] = _output_dir(out, base)
        values.setdefault("name", values["output_dir"].name)
        values["scale"] = _reference_rules(sections.get("reference", {}), inp, values.get("scale"))
        values.update(_pca(sections.get("pca", {})))
        if "simulate" in sections:
            values["simulate"] = _simulate_config(sections["simulate"])
        if "ld" in sections:
            values["ld"] = _ld_config(sections["ld"], base)
        if "fit" in sections:
            values["fit"] = _fit_config(sections["fit"], inp, sections.get("reference", {}), base)
        cfg = cls(**values)
        if cfg.color_by is not None and cfg.sample_metadata is None:
            raise ConfigError("color_by needs [input] sample_metadata (the file with that column)")
        if cfg.simulate is not None and is_url(cfg.store):
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


def _listing(what: str) -> Callable[[Any, str], tuple[str, ...]]:
    """A parser of a non-empty list of strings (``what`` names one entry in the message)."""

    def parse(v: Any, where: str) -> tuple[str, ...]:
        values = _str_tuple(v, where)
        if not values:
            raise ConfigError(f"{where} must list at least one {what}")
        return values

    return parse


def _table(v: Any, where: str) -> dict[str, Any]:
    if not isinstance(v, Mapping):
        raise ConfigError(f"{where} must be a table (got {v!r})")
    return dict(v)


def _int(v: Any, where: str, lo: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise ConfigError(f"{where} must be an integer >= {lo} (got {v!r})")
    return int(v)


def _at_least(lo: int) -> Callable[[Any, str], int]:
    """A parser of an integer ``>= lo``."""
    return lambda v, where: _int(v, where, lo)


def _bool(v: Any, where: str) -> bool:
    if not isinstance(v, bool):
        raise ConfigError(f"{where} must be true or false (got {v!r})")
    return v


def _path(value: Any, where: str, base: Path) -> Path:
    """A local path, ``~`` expanded and resolved against ``base`` (the config's directory)."""
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where} must be a non-empty string path (got {value!r})")
    p = Path(os.path.expanduser(value))
    return p if p.is_absolute() else (base / p).resolve()


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


def _up_to(upper: float) -> Callable[[Any, str], float]:
    """A parser of a number in ``[0, upper]``."""
    return lambda v, where: _fraction(v, where, upper)


def _choice(v: Any, where: str, options: tuple[str, ...]) -> str:
    if v not in options:
        raise ConfigError(f"{where} must be one of {list(options)} (not {v!r})")
    return str(v)


def _one_of(*options: str) -> Callable[[Any, str], str]:
    """A parser of one of ``options``."""
    return lambda v, where: _choice(v, where, options)


def _scheduler(v: Any, where: str = "[compute] scheduler") -> str:
    if isinstance(v, str) and (v in JOB_SCHEDULERS or "://" in v):
        return v
    raise ConfigError(
        f"{where} must be one of {list(JOB_SCHEDULERS)} or a scheduler address like "
        f"'tcp://host:8786' (not {v!r})"
    )


#: Every key that sets one :class:`JobConfig` field: ``section → key → (field, parser)``.
#: Sections are read in this order, so ``[report] color_by`` wins over ``[input] color_by``.
_FIELDS: dict[str, dict[str, tuple[str, Callable[..., Any]]]] = {
    "job": {"name": ("name", _string)},
    "input": {
        "storage_options": ("storage_options", _table),
        "genotype_variable": ("genotype_variable", _string),
        "ploidy": ("ploidy", _at_least(1)),
        "sample_metadata": ("sample_metadata", _path),
        "metadata_id_column": ("metadata_id_column", _string),
        "color_by": ("color_by", _string),
        "allow_missing_chunks": ("allow_missing_chunks", _bool),
    },
    "reference": {
        "samples": ("reference_samples", _listing("sample id")),
        "samples_file": ("reference_samples_file", _path),
        "variable": ("reference_variable", _string),
        "metadata_column": ("reference_metadata_column", _string),
        "metadata_values": ("reference_metadata_values", _listing("value")),
        "scale": ("scale", _one_of("reference", "all")),
    },
    "qc": {
        "min_maf": ("min_maf", _up_to(0.5)),
        "max_variant_missing": ("max_variant_missing", _up_to(1.0)),
        "min_sample_call_rate": ("min_sample_call_rate", _up_to(1.0)),
    },
    "compute": {
        "scheduler": ("scheduler", _scheduler),
        "workers": ("workers", _at_least(1)),
        "memory_budget": ("memory_budget", _bytes),
    },
    "output": {
        "overwrite": ("overwrite", _bool),
        "fingerprint": ("fingerprint", _one_of("listing", "content")),
    },
    "report": {
        "enabled": ("report", _bool),
        "compare_all_sample_centring": ("compare_all_sample_centring", _bool),
        "color_by": ("color_by", _string),
    },
}

#: Keys read by rules of their own: required, checked together, or another registry's.
_RULED: dict[str, set[str]] = {
    "input": {"store"},
    "output": {"dir"},
    "pca": set(config_keys()),
    "simulate": {f.name for f in dataclasses.fields(SimulateConfig)},
    "ld": {"enabled", "window_kb", "r2", "exclude_regions"},
    "fit": {"samples", "samples_file", "variable", "metadata_column", "metadata_values"},
}

_SECTIONS = {s: set(_FIELDS.get(s, {})) | _RULED.get(s, set()) for s in [*_FIELDS, *_RULED]}
_REFERENCES = ("samples", "samples_file", "variable", "metadata_column")


def _sections(raw: Any) -> dict[str, Mapping[str, Any]]:
    """The sections of ``raw``, every section and key known (else the closest valid one)."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"the config must be a table of sections (got {type(raw).__name__})")
    for section, body in raw.items():
        if section not in _SECTIONS:
            raise ConfigError(f"unknown section [{section}]{_suggest(section, _SECTIONS)}")
        if not isinstance(body, Mapping):
            raise ConfigError(f"[{section}] must be a table of keys (got {body!r})")
        for key in body:
            if key not in _SECTIONS[section]:
                raise ConfigError(
                    f"unknown key {key!r} in [{section}]{_suggest(key, _SECTIONS[section])}"
                )
    return {section: body or {} for section, body in raw.items()}


def _store(inp: Mapping[str, Any], base: Path) -> str:
    """``[input] store``: required; a URL as given, a local path resolved against ``base``."""
    if "store" not in inp:
        raise ConfigError("[input] store is required: the path or URL of a VCF Zarr store")
    store = inp["store"]
    if not isinstance(store, str) or not store:
        raise ConfigError(f"[input] store must be a path or URL (got {store!r})")
    if is_url(store):
        return store
    if store.startswith(LOCAL_PROTOCOLS):  # file:// or local://: fsspec's local paths
        store = str(local_path(store))
    return str(_path(store, "[input] store", base))


def _output_dir(out: Mapping[str, Any], base: Path) -> Path:
    """``[output] dir``: required, and local (the result is committed by a rename)."""
    if "dir" not in out:
        raise ConfigError("[output] dir is required: the directory the job writes")
    value = out["dir"]
    if isinstance(value, str) and is_url(value):
        raise ConfigError(
            f"[output] dir must be a local directory (got {value!r}): the result is "
            "committed by an atomic rename, which object stores lack; write locally and "
            "copy the finished directory"
        )
    if isinstance(value, str) and value.startswith(LOCAL_PROTOCOLS):
        value = local_path(value)
    return _path(value, "[output] dir", base)


def _sample_set_rules(section: str, body: Mapping[str, Any], inp: Mapping[str, Any]) -> list[str]:
    """Check the keys of a sample set (``[reference]``, ``[fit]``) against each other;
    returns those of :data:`_REFERENCES` given (at most one)."""
    refs = [k for k in _REFERENCES if k in body]
    if len(refs) > 1:
        raise ConfigError(
            f"[{section}] takes only one of {', '.join(_REFERENCES)} (got {', '.join(refs)})"
        )
    if "metadata_column" in body:
        if "metadata_values" not in body:
            raise ConfigError(
                f"[{section}] metadata_column needs metadata_values, e.g. "
                'metadata_column = "population" and metadata_values = ["CEU"]'
            )
        if "sample_metadata" not in inp:
            raise ConfigError(
                f"[{section}] metadata_column needs [input] sample_metadata (the file that "
                "holds that column)"
            )
    elif "metadata_values" in body:
        raise ConfigError(f"[{section}] metadata_values needs metadata_column")
    return refs


def _reference_rules(ref: Mapping[str, Any], inp: Mapping[str, Any], scale: str | None) -> str:
    """Check the ``[reference]`` keys against each other; returns the scale (default all)."""
    refs = _sample_set_rules("reference", ref, inp)
    if scale is None:
        return "all"
    if scale == "reference" and not refs:
        raise ConfigError(
            "[reference] scale = 'reference' needs a reference set (samples, samples_file, "
            "variable or metadata_column); without one the scale comes from all samples"
        )
    return scale


def _fit_config(
    body: Mapping[str, Any], inp: Mapping[str, Any], ref: Mapping[str, Any], base: Path
) -> FitConfig:
    """``[fit]``: exactly one way of giving the fitted samples, or ``samples = "reference"``."""
    given = _sample_set_rules("fit", body, inp)
    if not given:
        raise ConfigError(
            f"[fit] needs one of {', '.join(_REFERENCES)}: the samples to fit on, e.g. "
            'samples = "reference" or samples_file = "unrelated.txt"'
        )
    if body.get("samples") == "reference":
        if not any(k in ref for k in _REFERENCES):
            raise ConfigError(
                '[fit] samples = "reference" needs a reference set in [reference] (samples, '
                "samples_file, variable or metadata_column)"
            )
        return FitConfig(reference=True)
    fields = _FIELDS["reference"]  # the same keys as [reference], parsed the same way
    values: dict[str, Any] = {}
    for key, value in body.items():
        name, parse = fields[key]
        name = name.removeprefix("reference_")
        where = f"[fit] {key}"
        if key == "samples" and isinstance(value, str):
            raise ConfigError(
                f'{where} must be a list of sample ids or "reference" (got {value!r})'
            )
        values[name] = _path(value, where, base) if parse is _path else parse(value, where)
    return FitConfig(**values)


def _pca(section: Mapping[str, Any]) -> dict[str, Any]:
    """``[pca]`` by the parameter registry: the four job fields, and ``fit_options``.

    ``n_components``, ``n_knockoffs``, ``solver`` and ``seed`` are fields of their own (as
    they always were: the job fingerprint holds them); any other tuning parameter given
    (``knockoff_weight``, ``tol``, ...) goes to ``fit_options``, passed on to
    :func:`mspca_dask.fit`.
    """
    try:
        params = from_mapping(section, where="[pca]")
    except ParameterError as exc:
        raise ConfigError(str(exc)) from exc
    if params.random_state is None:
        raise ConfigError("[pca] seed must be a non-negative integer: a job is reproducible")
    keys = config_keys()
    options = {keys[k]: getattr(params, keys[k]) for k in section if k not in _PCA_FIELDS}
    return {
        "n_components": params.n_components,
        "n_knockoffs": params.n_knockoffs,
        "solver": params.solver,
        "seed": params.random_state,
        "fit_options": options,
    }


#: The ``[pca]`` keys that are JobConfig fields of their own.
_PCA_FIELDS = ("n_components", "n_knockoffs", "solver", "seed")


def _number_from(lo: int) -> Callable[[Any, str], float]:
    """A parser of a number ``>= lo``."""

    def parse(v: Any, where: str) -> float:
        if isinstance(v, bool) or not isinstance(v, int | float) or v < lo:
            raise ConfigError(f"{where} must be a number >= {lo} (got {v!r})")
        return float(v)

    return parse


def _populations(v: Any, where: str) -> dict[str, int]:
    if (
        not isinstance(v, Mapping)
        or not v
        or not all(
            isinstance(k, str) and isinstance(n, int) and not isinstance(n, bool) and n >= 1
            for k, n in v.items()
        )
    ):
        raise ConfigError(
            f"{where} must map population names to sample counts >= 1, e.g. "
            f"{{CEU = 200, YRI = 20}} (got {v!r})"
        )
    return dict(v)


#: Every key of ``[simulate]``: ``key → parser`` (the key is the SimulateConfig field).
_SIMULATE: dict[str, Callable[[Any, str], Any]] = {
    "species": _string,
    "model": _string,
    "populations": _populations,
    "chromosome": _string,
    "left": _number_from(0),
    "length": _number_from(1000),
    "seed": _at_least(1),
    "missing_rate": _up_to(0.5),
    "writer": _one_of("tskit2zarr", "vcf2zarr"),
    "variants_chunk_size": _at_least(1),
    "writer_processes": _at_least(0),
}


def _simulate_config(body: Mapping[str, Any]) -> SimulateConfig:
    cfg = SimulateConfig(**{k: _SIMULATE[k](v, f"[simulate] {k}") for k, v in body.items()})
    if cfg.missing_rate > 0 and cfg.writer != "vcf2zarr":
        raise ConfigError(
            "[simulate] missing_rate > 0 needs writer = 'vcf2zarr' (missing calls are written "
            "into a VCF, which vcf2zarr converts)"
        )
    return cfg


def _ld_config(body: Mapping[str, Any], base: Path) -> LDConfig | None:
    """``[ld]``: None when ``enabled = false`` (every key still checked)."""
    enabled = _bool(body.get("enabled", True), "[ld] enabled")
    window_kb = body.get("window_kb", _ld.DEFAULT_WINDOW_KB)
    if isinstance(window_kb, bool) or not isinstance(window_kb, int | float) or window_kb <= 0:
        raise ConfigError(
            f"[ld] window_kb must be a number of kb > 0, e.g. 500 (got {window_kb!r})"
        )
    r2 = body.get("r2", _ld.DEFAULT_R2)
    if isinstance(r2, bool) or not isinstance(r2, int | float) or not 0 < r2 <= 1:
        raise ConfigError(
            f"[ld] r2 must be a number in (0, 1], e.g. 0.2; 1.0 turns the pruning off (got {r2!r})"
        )
    where = "[ld] exclude_regions"
    value = body.get("exclude_regions", "none")
    if not isinstance(value, str) or not value:
        raise ConfigError(
            f"{where} must be one of {[*_ld.BUILDS, 'none']} or the path of a BED file "
            f"(got {value!r})"
        )
    regions: tuple[_ld.Region, ...] = ()
    if value in _ld.BUILDS:
        regions = _ld.builtin_regions(value)
    elif value != "none":
        looks_like_path = any(ch in value for ch in "/\\.")
        if not looks_like_path:
            raise ConfigError(
                f"{where} must be one of {[*_ld.BUILDS, 'none']} or the path of a BED file "
                f"(not {value!r}){_suggest(value, {*_ld.BUILDS, 'none'})}"
            )
        path = _path(value, where, base)
        if not path.is_file():
            raise ConfigError(f"{where}: no BED file at {path}; check the path")
        regions = _ld.read_bed(path, where)
        value = str(path)
    if not enabled:
        return None
    return LDConfig(float(window_kb), float(r2), value, regions)


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
