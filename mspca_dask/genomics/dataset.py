"""The output Dataset: build it from the fit, validate it, open it."""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import (
    InputError,
)
from ..io.writing import str_objects
from ..schema import GENOMICS_SCHEMA, GENOMICS_SCHEMA_VERSION, GENOMICS_VARIABLES
from .analysis import Analysis
from .cohort import VcfZarr
from .config import JobConfig
from .ld import describe, region_diagnostic, warning_line
from .qc import QCResult

if TYPE_CHECKING:
    import xarray as xr


RESULT_NAME = "result.zarr"


CENTRING_NOTE = (
    "Allele frequencies of a reference set of samples, not of all samples, centre the "
    "genotypes (the scale comes from all samples unless [reference] scale = 'reference'): the "
    "location is the reference's centre and its samples are the inliers' group of the verdict. "
    "Set [report] compare_all_sample_centring = true to see what all-sample centring gives on "
    "this run."
)
AXES_NOTE = (
    "Samples are the observations of the PCA (n = number of samples analysed) and variants "
    "the features (d = number of variants analysed); scores are per sample, loadings per "
    "variant."
)


@dataclass(frozen=True)
class FitSplit:
    """``[fit]``: which samples were fitted, and the scores of those projected onto the fit."""

    description: str  # of the [fit] set
    scores: np.ndarray  # (n_projected, K): the rows of QCResult.projected, in store order
    method: str  # the projection method (mspca_dask.genomics.projection.PROJECTION_METHODS)
    shrinkage: np.ndarray  # (K,) the factors the corrected scores were divided by

    @property
    def n_passes(self) -> int:
        """The projection's pass over the store (none when nothing was projected)."""
        return int(len(self.scores) > 0)


def _passes_detail(n_passes: int, an: Analysis, split: FitSplit | None = None) -> str:
    """``"QC, statistics and compaction 2 + MS-PCA fit 2 (+ all-sample-centring comparison 2)
    (+ projection 1)"``."""
    fit = int(an.result.n_passes)
    comp = int(an.comparison["result"].n_passes) if an.comparison is not None else 0
    proj = 0 if split is None else split.n_passes
    text = f"QC, statistics and compaction {int(n_passes) - fit - comp - proj} + MS-PCA fit {fit}"
    text += f" + all-sample-centring comparison {comp}" if comp else ""
    return text + (f" + projection {proj}" if proj else "")


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
    return text + (
        f" With all-sample centring instead, PC1 of this run went from "
        f"{c['eigenvalue'][0]:.6g} to {c['knockoff_eigenvalue'][0]:.6g} under the knockoffs "
        f"(median; judged {c['verdict'][0]!r})."
    )


def ld_lines(ds: xr.Dataset) -> tuple[list[str], list[str]]:
    """The LD diagnostic of a result in words: one line per PC, and the warnings.

    Both empty for a result written before the diagnostic was stored.
    """
    if "ld_top_share" not in ds:
        return [], []
    lines, warnings = [], []
    n_top, window = int(ds.attrs["ld_top_variants"]), int(ds.attrs["ld_window_bp"])
    for k, pc in enumerate(pc_names(ds.sizes["component"])):
        share = float(ds["ld_top_share"].values[k])
        background = float(ds["ld_background_share"].values[k])
        region = ld_region(ds, k)
        lines.append(describe(pc, share, background, region, n_top, window))
        if bool(ds["ld_region_warning"].values[k]):
            warnings.append(warning_line(pc, share, background, region))
    return lines, warnings


def ld_region(ds: xr.Dataset, k: int) -> str:
    """``contig:start-end`` of PC ``k + 1``'s densest window."""
    return (
        f"{ds['ld_window_contig'].values[k]}:{int(ds['ld_window_start'].values[k])}-"
        f"{int(ds['ld_window_end'].values[k])}"
    )


def pc_names(n_components: int) -> list[str]:
    """``["PC1", ..., "PCK"]``: what every output calls the components, from 1."""
    return [f"PC{k + 1}" for k in range(n_components)]


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
    fit_split: FitSplit | None = None,
) -> xr.Dataset:
    """Assemble the output Dataset (:data:`GENOMICS_VARIABLES`) and validate it.

    With ``fit_split`` (``[fit]``), the projected samples get their scores too and count as
    included; ``sample_fitted`` says which samples the fit used.
    """
    import xarray as xr

    res = an.result
    N, V, K = vz.n_samples, vz.n_variants, res.n_components
    scores = np.full((N, K), np.nan)
    scores[qc.sample_keep] = res.scores
    included = qc.sample_keep
    if fit_split is not None:
        assert qc.projected is not None
        scores[qc.projected] = fit_split.scores
        included = qc.sample_keep | qc.projected
    loadings = np.full((V, K), np.nan)
    loadings[qc.variant_keep] = np.asarray(res.eigenvectors).T
    ref_freq = np.full(V, np.nan)
    ref_freq[qc.variant_keep] = an.centre_frequency
    ref_mask = np.zeros(N, bool) if qc.reference is None else qc.reference
    s = qc.stats
    data: dict[str, Any] = {
        "sample_id": (("samples",), str_objects(vz.sample_id)),
        "sample_included": (("samples",), included),
        "sample_is_reference": (("samples",), ref_mask),
        "sample_call_rate": (("samples",), qc.sample_call_rate),
        "sample_score": (("samples", "component"), scores),
        "variant_position": (("variants",), vz.variant_position),
        "variant_contig": (("variants",), str_objects(vz.variant_contig)),
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
        "variance_explained": (("component",), an.variance_explained),
    }
    ld = region_diagnostic(
        np.asarray(res.eigenvectors).T,
        np.asarray(vz.variant_contig).astype(str)[qc.variant_keep],
        np.asarray(vz.variant_position)[qc.variant_keep],
    )
    data.update(
        {
            "ld_top_share": (("component",), ld.share),
            "ld_background_share": (("component",), ld.background),
            "ld_window_contig": (("component",), str_objects(ld.contig)),
            "ld_window_start": (("component",), ld.start),
            "ld_window_end": (("component",), ld.end),
            "ld_region_warning": (("component",), ld.flagged),
        }
    )
    if fit_split is not None:
        data["sample_fitted"] = (("samples",), qc.sample_keep)
    if vz.family_id is not None:
        data["sample_family_id"] = (("samples",), str_objects(vz.family_id))
    if labels is not None:
        data["sample_label"] = (("samples",), labels.astype(str))
    scale = np.full(V, np.nan)
    scale[qc.variant_keep] = an.scale
    data["variant_scale"] = (("variants",), scale)
    if vz.variant_allele is not None:
        data["variant_allele"] = (("variants", "alleles"), str_objects(vz.variant_allele))
    if vz.variant_id is not None:
        data["variant_id"] = (("variants",), str_objects(vz.variant_id))
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
        "total_variance": float(an.total_variance),
        "mp_edge": float(res.mp_edge),
        "threshold": float(res.threshold),
        "knockoff_strength": float(res.knockoff_strength),
        "n_samples_analysed": int(res.n_samples),
        "n_variants_analysed": int(res.n_features),
        "n_imputed_calls": int(an.n_imputed_calls),
        "n_passes": int(n_passes),
        "n_passes_detail": _passes_detail(n_passes, an, fit_split),
        "axes": AXES_NOTE,
        "centring_note": CENTRING_NOTE,
        "ld_top_variants": int(ld.n_top),
        "ld_window_bp": int(ld.window_bp),
    }
    if fit_split is not None:
        attrs["fit_description"] = fit_split.description
        attrs["n_samples_projected"] = int(len(fit_split.scores))
        attrs["projection_method"] = fit_split.method
        attrs["projection_shrinkage_factor"] = json.dumps(
            np.asarray(fit_split.shrinkage, float).tolist()
        )
    if an.fit_warnings:
        attrs["model_fit_warning"] = "\n".join(an.fit_warnings)
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
        # PC numbers from 1, as in the log, the report and the text outputs
        coords={"component": np.arange(1, K + 1), "knockoff": np.arange(res.n_knockoffs)},
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
    """Check ``ds`` against :data:`~mspca_dask.schema.GENOMICS_SCHEMA`, and its counts.

    Raises
    ------
    InputError
        A variable or attribute is missing or has the wrong dims, dtype, kind or length, or
        the layout is newer than this module; the message names it.
    DTypeError
        ``ds`` is not an ``xarray.Dataset``.
    """
    GENOMICS_SCHEMA.validate(ds)
    fitted = "sample_fitted" if "sample_fitted" in ds else "sample_included"  # [fit] or not
    n_inc = int(np.asarray(ds[fitted]).sum())
    d_inc = int(np.asarray(ds["variant_included"]).sum())
    if n_inc != ds.attrs["n_samples_analysed"] or d_inc != ds.attrs["n_variants_analysed"]:
        raise InputError(
            f"the genomics result says n = {ds.attrs['n_samples_analysed']}, d = "
            f"{ds.attrs['n_variants_analysed']} but fits {n_inc} samples and includes {d_inc} "
            "variants"
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
    from ..io import open_dataset_checked

    p = Path(path)
    if (p / RESULT_NAME).exists():
        p = p / RESULT_NAME
    ds = open_dataset_checked(str(p))
    validate_genomics_dataset(ds)
    return ds
