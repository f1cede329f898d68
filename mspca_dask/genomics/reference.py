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
from .config import JobConfig


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
