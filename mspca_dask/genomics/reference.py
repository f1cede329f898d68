"""Sample metadata and the reference set whose allele frequencies centre the data."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._params import _suggest
from ..errors import (
    ConfigError,
    InputError,
)
from .cohort import VcfZarr
from .config import JobConfig, SampleSet


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


def _ids_to_mask(
    ids: Sequence[str],
    sample_id: np.ndarray,
    where: str,
    what: str = "reference sample",
    error: type[Exception] = InputError,
) -> np.ndarray:
    index = {s: i for i, s in enumerate(sample_id.tolist())}
    unknown = [s for s in ids if s not in index]
    if unknown:
        shown = ", ".join(repr(s) for s in unknown[:5]) + (" ..." if len(unknown) > 5 else "")
        raise error(f"{len(unknown)} {what} id(s) from {where} are not in the store: {shown}")
    mask = np.zeros(len(sample_id), dtype=bool)
    mask[[index[s] for s in ids]] = True
    return mask


def resolve_reference(cfg: JobConfig, vz: VcfZarr, metadata: Any) -> tuple[np.ndarray | None, str]:
    """The reference samples as a boolean mask (None for ``auto``) and a description."""
    if cfg.reference_mode == "auto":
        return None, (
            "no reference set given; location estimated robustly by mspca_dask.fit "
            "(location='auto', mean of the inliers in the leading-score space), scale from "
            "all samples"
        )
    return resolve_samples(cfg.reference_set, "reference", vz, metadata, cfg.sample_metadata)


def resolve_fit_samples(
    cfg: JobConfig, vz: VcfZarr, metadata: Any, reference: np.ndarray | None
) -> tuple[np.ndarray | None, str]:
    """``[fit]``: the samples MS-PCA is fitted on as a mask (None: every sample), described.

    Every problem is a :class:`ConfigError` naming the ``[fit]`` key, raised before any pass:
    unknown ids, a non-boolean variable, fewer than 2 samples, or fewer than 2 reference
    samples among them (the reference frequencies come from the fitted samples only).
    """
    fit = cfg.fit
    if fit is None:
        return None, "every sample that passes QC"
    if fit.reference:
        assert reference is not None
        mask, desc = reference.copy(), "the reference set"
    else:
        mask, desc = resolve_samples(
            fit, "fit", vz, metadata, cfg.sample_metadata, error=ConfigError
        )
    if reference is not None and int((reference & mask).sum()) < 2:
        raise ConfigError(
            f"[fit] {_KEYS[fit.mode]} leaves {int((reference & mask).sum())} reference "
            f"sample(s) among the fitted ones ({desc}); the reference frequencies come from "
            "the fitted samples, so at least 2 of them must be in the reference set"
        )
    return mask, desc


#: The key of a sample set that gives it, per :attr:`SampleSet.mode`.
_KEYS = {
    "samples": "samples",
    "reference": "samples",
    "file": "samples_file",
    "variable": "variable",
    "metadata": "metadata_column",
}


def resolve_samples(
    spec: SampleSet,
    section: str,
    vz: VcfZarr,
    metadata: Any,
    sample_metadata: Path | None,
    *,
    error: type[Exception] = InputError,
) -> tuple[np.ndarray, str]:
    """The samples of ``spec`` (``[reference]`` or ``[fit]``) as a boolean mask, described.

    ``error`` is raised for ids not in the store, a non-boolean variable, or fewer than 2
    samples; its message names the key of ``[section]``.
    """
    mode = spec.mode
    key = f"[{section}] {_KEYS.get(mode, mode)}"
    what = "reference sample" if section == "reference" else f"{section} sample"
    if mode == "samples":
        assert spec.samples is not None
        mask = _ids_to_mask(spec.samples, vz.sample_id, key, what, error)
        desc = f"{int(mask.sum())} sample ids listed in the config"
    elif mode == "file":
        assert spec.samples_file is not None
        try:
            lines = spec.samples_file.read_text().splitlines()
        except OSError as exc:
            raise ConfigError(f"could not read {spec.samples_file} ({key}): {exc}") from exc
        ids = [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
        mask = _ids_to_mask(ids, vz.sample_id, f"{spec.samples_file} ({key})", what, error)
        desc = f"{int(mask.sum())} sample ids from {spec.samples_file}"
    elif mode == "variable":
        assert spec.variable is not None
        values = vz.sample_variable(spec.variable)
        if values.dtype.kind != "b":
            raise error(
                f"the {section} variable {spec.variable!r} ({key}) must be boolean (got "
                f"dtype {values.dtype})"
            )
        mask = values.astype(bool)
        desc = f"store variable {spec.variable!r} ({int(mask.sum())} samples)"
    else:
        assert spec.metadata_column is not None and sample_metadata is not None
        assert spec.metadata_values is not None
        col = _metadata_column(metadata, spec.metadata_column, vz.sample_id, sample_metadata)
        mask = np.isin(col, list(spec.metadata_values))
        desc = (
            f"{spec.metadata_column} in "
            f"{list(spec.metadata_values)} ({int(mask.sum())} samples, "
            f"{sample_metadata.name})"
        )
    if mask.sum() < 2:
        purpose = (
            "to estimate allele frequencies" if section == "reference" else f"({key}) to fit on"
        )
        raise error(
            f"the {section} set has {int(mask.sum())} sample(s) ({desc}); at least 2 are "
            f"needed {purpose}"
        )
    return mask, desc
