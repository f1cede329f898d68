"""``mspca_dask.fit`` on genotype stores: VCF Zarr and PLINK 1 filesets.

:func:`genotype_input` turns a path naming a VCF Zarr store (a Zarr group holding
``call_genotype``, ``call_dosage`` or ``call_DS``) or a PLINK 1 fileset into the standardised
``(samples, variants)`` matrix the core analyses, with the *same* code as the genomics job:
:func:`mspca_dask.genomics.sources.open_genotypes` (dosages, NaN for missing calls),
:func:`mspca_dask.genomics.qc.run_qc` with the job's default ``[qc]`` thresholds (site filters,
monomorphic / zero-variance / MAF / missingness), and :func:`centre_and_scale` +
:func:`mspca_dask.genomics.preprocess.standardize` (missing calls imputed at the centre, Patterson
scaling).  **Samples are the observations** (``n`` = samples, ``d`` = variants kept).

With ``reference_samples`` the centre is the reference set's allele frequencies, the scale
the all-sample ones (:func:`centre_and_scale` says why), and the core's location is ``None``
(the data are already centred on the inliers); without, the centre and scale are the
all-sample frequencies and the core's own ``location`` (default ``"auto"``, robust) is used.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ParameterError
from ..io import is_genotype_source
from . import preprocess

__all__ = ["genotype_input", "centre_and_scale", "GenotypeInput"]


@dataclass(frozen=True)
class GenotypeInput:
    """What :func:`genotype_input` hands to the core.

    Attributes
    ----------
    data : xarray.DataArray, (samples, variants)
        Standardised dosages of the samples and variants that passed QC, lazy; ``samples``
        coordinate = sample ids, ``variants`` coordinate = variant ids (``contig:position``
        when the store has none).
    location : "auto", None or ndarray
        What the core subtracts: None when a reference set centred the data.
    qc_counts : dict
        Samples and variants per QC outcome (as in the job's ``qc_counts``).
    centre_frequency, scale : (d,) ndarray
        Frequency ``p`` whose dosage ``P p`` was subtracted, and the divisor, per kept variant.
    reference : (n,) bool ndarray or None
        The reference samples among those kept by QC (the rows of ``data``).
    """

    data: Any
    location: Any
    qc_counts: dict[str, int]
    centre_frequency: np.ndarray
    scale: np.ndarray
    reference: np.ndarray | None = None


def centre_and_scale(
    stats: preprocess.GenotypeStats,
    variant_keep: np.ndarray,
    reference: np.ndarray | None,
    scale_from: str = "all",
) -> tuple[np.ndarray, np.ndarray]:
    """Centre frequency and Patterson scale of the kept variants (the job's rule).

    ``reference`` given: centre on the reference frequency (EIGENSOFT's pseudocount), scale by
    the all-sample (default) or the reference frequency (``scale_from="reference"``); None:
    both from all samples.  The all-sample scale gives every variant unit variance over the
    analysed samples, the common noise level the verdict's model assumes; the reference's
    scale weights a variant rare in the reference by up to ``1/√(2p(1 − p))`` at the
    pseudocount frequency, so the other populations' own diversity dominates the spectrum.
    """
    p_all = stats.allele_frequency[variant_keep]
    if reference is None:
        return p_all, preprocess.patterson_scale(p_all, ploidy=stats.ploidy)
    p_ref = stats.reference_frequency[variant_keep]
    base = p_ref if scale_from == "reference" else p_all
    return p_ref, preprocess.patterson_scale(base, ploidy=stats.ploidy)


def _reference_mask(reference_samples: Any, sample_id: np.ndarray) -> np.ndarray:
    from .reference import _ids_to_mask

    ref = np.asarray(reference_samples)
    if ref.dtype.kind == "b":
        if ref.shape != sample_id.shape:
            raise ParameterError(
                f"reference_samples as a boolean mask must have one entry per sample, shape "
                f"{sample_id.shape} (got {ref.shape})"
            )
        mask = ref.copy()
    else:
        mask = _ids_to_mask([str(s) for s in np.ravel(ref)], sample_id, "reference_samples")
    if mask.sum() < 2:
        raise ParameterError(
            f"reference_samples selects {int(mask.sum())} sample(s); at least 2 are needed to "
            "estimate allele frequencies"
        )
    return mask


def genotype_input(
    source: Any,
    *,
    reference_samples: Any = None,
    location: Any = "auto",
    variable: str | None = None,
    scheduler: Any = None,
    allow_missing_chunks: bool = False,
    ld: Mapping[str, Any] | None = None,
) -> GenotypeInput | None:
    """Open, QC and standardise a genotype store for :func:`mspca_dask.fit`; None otherwise.

    Parameters
    ----------
    source : Any
        What was passed to ``fit``.  Only a path naming a VCF Zarr store or a PLINK 1 fileset
        is handled here (:func:`mspca_dask.io.is_genotype_source`); anything else returns None.
    reference_samples : sequence of str or (n_samples,) bool array, optional
        Sample ids, or a mask, of the reference set whose allele frequencies centre
        the data.
    location : "auto", None or array
        The core's location; must be left at ``"auto"`` when ``reference_samples`` is given.
    variable : str, optional
        Genotype variable of a VCF Zarr store (default: as the job, ``call_dosage`` /
        ``call_DS`` if present, else ``call_genotype``).
    scheduler : optional
        Where the statistics pass runs (as in ``fit``).
    allow_missing_chunks : bool
        Read genotype chunks absent from a VCF Zarr store as fill values (as in ``fit``);
        by default an absent chunk is a :class:`~mspca_dask.errors.ChunkReadError`.
    ld : mapping, optional
        The job's ``[ld]`` section as a mapping (``window_kb``, ``r2``, ``exclude_regions``,
        ``enabled``; relative BED paths against the working directory): variants in the
        excluded regions are dropped with the QC, then the rest pruned by pairwise r² over
        the analysed samples (one more read of the kept dosages), counted in ``qc_counts``.
        None: no LD handling.

    Raises
    ------
    ParameterError
        ``reference_samples`` on a source that is not a genotype store, a bad mask, or a
        ``location`` together with ``reference_samples``.
    InputError
        Unknown reference ids, or too few variants passing QC (or LD pruning).
    """
    if not is_genotype_source(source, variable):
        if reference_samples is not None:
            raise ParameterError(
                "reference_samples applies to genotype sources only (a VCF Zarr store or a "
                "PLINK fileset path); for other data pass location= (a vector) instead"
            )
        return None
    import xarray as xr

    from .._execution import Executor
    from .config import JobConfig
    from .qc import run_qc
    from .sources import open_genotypes

    vz = open_genotypes(
        os.fspath(source),
        genotype_variable=variable or "auto",
        allow_missing_chunks=allow_missing_chunks,
    )
    reference = (
        None if reference_samples is None else _reference_mask(reference_samples, vz.sample_id)
    )
    if reference is not None and not (isinstance(location, str) and location == "auto"):
        raise ParameterError(
            "reference_samples centres the genotypes on the reference allele frequencies; do "
            "not pass location= as well"
        )
    # The job's QC thresholds, from one place (JobConfig's defaults).
    cfg = JobConfig(name="fit", store=os.fspath(source), output_dir=Path("."), ld=_ld_section(ld))
    qc = run_qc(cfg, vz, reference, Executor(scheduler=scheduler))
    if cfg.ld is not None and cfg.ld.prunes:
        from .analysis import prune_ld

        # the greedy r² rule runs along the genome in this process, reading the kept dosages
        # once more block by block, as the job reads its compact calls
        prune_ld(cfg, vz, qc, vz.dosage[qc.variant_keep][:, qc.sample_keep])
    centre_p, scale = centre_and_scale(qc.stats, qc.variant_keep, qc.reference, cfg.scale)
    dosage = vz.dosage[qc.variant_keep][:, qc.sample_keep]
    X = preprocess.standardize(dosage, vz.ploidy * centre_p, scale)
    kv = qc.variant_keep
    if vz.variant_id is not None and len(set(vz.variant_id[kv].tolist())) == int(kv.sum()):
        vid = vz.variant_id[kv].astype(str)
    else:
        vid = np.char.add(
            np.char.add(vz.variant_contig[kv].astype(str), ":"),
            vz.variant_position[kv].astype(str),
        )
    data = xr.DataArray(
        X,
        dims=("samples", "variants"),
        coords={"samples": vz.sample_id[qc.sample_keep].astype(str), "variants": vid},
    )
    return GenotypeInput(
        data=data,
        location=None if reference is not None else location,
        qc_counts=dict(qc.counts),
        centre_frequency=np.asarray(centre_p, dtype=float),
        scale=np.asarray(scale, dtype=float),
        reference=qc.kept_reference,
    )


def _ld_section(ld: Mapping[str, Any] | None) -> Any:
    """``fit(ld=...)`` read as the job's ``[ld]`` section (its checks, its messages)."""
    if ld is None:
        return None
    from ..errors import ConfigError
    from .config import _ld_config

    if not isinstance(ld, Mapping):
        raise ParameterError(
            f"ld must be a mapping like the job's [ld] section, e.g. "
            f"{{'window_kb': 500, 'r2': 0.2, 'exclude_regions': 'hg19'}} (got {ld!r})"
        )
    unknown = set(ld) - {"enabled", "window_kb", "r2", "exclude_regions"}
    if unknown:
        raise ParameterError(
            f"ld has unknown key(s) {sorted(unknown)}; the keys are enabled, window_kb, r2 "
            "and exclude_regions"
        )
    try:
        return _ld_config(ld, Path.cwd())
    except ConfigError as err:
        raise ParameterError(str(err).replace("[ld] ", "ld: ")) from err
