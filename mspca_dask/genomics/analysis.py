"""The fit: standardise with the reference frequencies and run MS-PCA."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dask.array as da
import numpy as np

from .._execution import Executor
from ..errors import InputError
from . import compact as _compact
from . import ld_prune as _ld
from . import preprocess
from .cohort import VcfZarr
from .config import JobConfig
from .genotypes import centre_and_scale
from .qc import QCResult

if TYPE_CHECKING:
    from ..result import MSPCAResult


logger = logging.getLogger("mspca.genomics")


@dataclass
class Analysis:
    """The fit and what is needed to write and report it."""

    result: MSPCAResult  # sliced to the K requested eigenpairs
    centre_frequency: np.ndarray  # (V_kept,) frequency whose dosage 2p was subtracted
    scale: np.ndarray  # (V_kept,)
    comparison: dict[str, Any] | None
    n_imputed_calls: int
    n_raw_passes: int = 0  # reads of the raw store after QC (the compaction pass)
    #: the passes that built the compact matrix (``PassRecord.as_dict``), before the fit's
    compaction_passes: tuple[dict[str, Any], ...] = ()
    #: ``tr(ZᵀZ) / n`` of the centred, standardised genotypes Z the fit decomposed: the sum
    #: of all their eigenvalues (:func:`total_variance`)
    total_variance: float = float("nan")
    #: the fit's ModelFitWarning messages (logged; the report shows them)
    fit_warnings: tuple[str, ...] = ()

    @property
    def variance_explained(self) -> np.ndarray:
        """(K,) each eigenvalue's share of :attr:`total_variance`."""
        return np.asarray(self.result.eigenvalues, float) / self.total_variance


def total_variance(
    stats: preprocess.GenotypeStats,
    keep: np.ndarray,
    centre: np.ndarray,
    imputed_at: np.ndarray,
    scale: np.ndarray,
) -> float:
    """``tr(ZᵀZ) / n`` of ``Z = (g − P c) / s`` from the statistics pass, no further read.

    Parameters
    ----------
    stats : GenotypeStats
        Sums over the analysed samples (``alt_sum``, ``alt_sq_sum``, ``n_called``).
    keep : (V,) bool
        The analysed variants.
    centre : (d,) ndarray
        Frequency ``c`` whose dosage ``P c`` the fit subtracted (the reference frequency, or
        the all-sample frequency moved by the robust location).
    imputed_at : (d,) ndarray
        Frequency whose dosage replaced a missing call (the centre of the standardisation,
        before any location): a missing call contributes ``(P (imputed_at − c) / s)²``.
    scale : (d,) ndarray

    Notes
    -----
    Per variant, ``Σ_called (g − P c)² = Σg² − 2 P c Σg + n_called (P c)²``; the eigenvalues
    are those of ``ZᵀZ / n`` with ``n`` the analysed samples, so this total is their sum over
    all ``min(n, d)`` eigenpairs, and ``eigenvalue / total`` each PC's share of the variance
    (``explained_variance_ratio_`` in scikit-learn).
    """
    if stats.alt_sq_sum is None:
        raise ValueError("the statistics pass computed no sums of squares")
    P = float(stats.ploidy)
    n = int(stats.n_samples)
    s1 = stats.alt_sum[keep]
    s2 = stats.alt_sq_sum[keep]
    called = stats.n_called[keep].astype(float)
    mu = P * np.asarray(centre, float)
    per_variant = s2 - 2.0 * mu * s1 + called * mu**2
    per_variant += (n - called) * (P * (np.asarray(imputed_at, float) - centre)) ** 2
    return float(np.sum(per_variant / np.asarray(scale, float) ** 2) / max(n, 1))


def _fit(
    X: da.Array, cfg: JobConfig, location: Any, scheduler: Any, reference: np.ndarray | None
) -> tuple[MSPCAResult, tuple[str, ...]]:
    """MS-PCA of the standardised genotypes, and the fit's ModelFitWarning messages (logged).

    A knockoff's own spike can push the K-th eigenpair out of that knockoff's top K; the core
    computes ``K + 2`` eigenpairs of every knockoff spectrum for that (``KNOCKOFF_EXTRA`` in
    :mod:`mspca_dask.api`), so the job asks for the K it reports.
    """
    import warnings

    from ..api import fit
    from ..errors import ModelFitWarning

    n, d = (int(s) for s in X.shape)
    K = min(cfg.n_components, n - 1, d)
    # Genotypes always have a bulk above the Marchenko-Pastur edge (linkage disequilibrium):
    # the fit's ModelFitWarning says so, and the diagnostics are in the result; the job logs
    # them instead of raising them as a warning to its caller.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ModelFitWarning)
        res = fit(
            X,
            n_components=K,
            location=location,
            reference_samples=reference,
            solver=cfg.solver,
            n_knockoffs=cfg.n_knockoffs,
            random_state=cfg.seed,
            **cfg.fit_options,
            scheduler=scheduler,
        )
    messages = []
    for w in caught:
        if issubclass(w.category, ModelFitWarning):
            messages.append(" ".join(str(w.message).split()))
            logger.warning("model fit: %s", messages[-1])
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return res, tuple(messages)


def analyse(
    cfg: JobConfig, vz: VcfZarr, qc: QCResult, scheduler: Any, workspace: Path | None = None
) -> Analysis:
    """Standardise (lazily) with the reference frequencies and run MS-PCA.

    With hard calls (``vz.calls``), the fit reads a compact int8 matrix of the kept variants
    and samples (in memory within ``[compute] memory_budget``, else a temporary Zarr store in
    ``workspace``, next to the output), standardising each chunk in float32 inside the task
    (:mod:`mspca_dask.genomics.compact`).  Its rows come from the candidates the statistics pass
    wrote (no further raw read) or, when samples were dropped, from one more raw pass.
    """
    if vz.calls is None:
        if cfg.ld is None or not cfg.ld.prunes:
            return _analyse(cfg, vz, qc, scheduler, None)
        # Dosages without hard calls have no compact matrix: the pruning reads the raw store.
        dosage = vz.dosage[qc.variant_keep][:, qc.sample_keep]
        _, record = prune_ld(cfg, vz, qc, dosage)
        return dataclasses.replace(
            _analyse(cfg, vz, qc, scheduler, None), n_raw_passes=1, compaction_passes=(record,)
        )
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
            compact, ld_passes = _pruned(cfg, vz, qc, compact)
            return dataclasses.replace(
                _analyse(cfg, vz, qc, scheduler, compact),
                compaction_passes=(*(p.as_dict() for p in executor.passes), *ld_passes),
            )
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
        compact, ld_passes = _pruned(cfg, vz, qc, compact)
        return dataclasses.replace(
            _analyse(cfg, vz, qc, scheduler, compact),
            n_raw_passes=1,
            compaction_passes=(*(p.as_dict() for p in executor.passes), *ld_passes),
        )


def prune_ld(
    cfg: JobConfig, vz: VcfZarr, qc: QCResult, calls: da.Array
) -> tuple[np.ndarray, dict[str, Any]]:
    """``[ld]`` r² pruning of the QC'd variants; updates ``qc`` (keep mask and counts).

    ``calls`` holds the kept variants (rows, in store order) over the analysed samples:
    the compact int8 matrix, read once more block by block (it is small: kept variants ×
    kept samples, one byte a call), since the greedy rule runs along the genome in order.
    Returns the mask over those rows and the pass's record.
    """
    assert cfg.ld is not None
    kv = np.flatnonzero(qc.variant_keep)
    keep, record = _ld.prune_dask(
        calls,
        np.asarray(vz.variant_contig)[kv],
        np.asarray(vz.variant_position)[kv],
        window_bp=cfg.ld.window_bp,
        r2=cfg.ld.r2,
        ploidy=vz.ploidy,
    )
    new_keep = np.zeros_like(qc.variant_keep)
    new_keep[kv[keep]] = True
    qc.variant_keep = new_keep
    qc.counts["variants_ld_pruned"] = int((~keep).sum())
    qc.counts["variants_analysed"] = int(keep.sum())
    logger.info(
        "LD pruning (window %g kb, r2 > %g): %d of %d variants removed, %d analysed (%.1f s)",
        cfg.ld.window_kb,
        cfg.ld.r2,
        int((~keep).sum()),
        len(keep),
        int(keep.sum()),
        record["seconds"],
    )
    if keep.sum() < 2:
        raise InputError(
            f"only {int(keep.sum())} variant(s) remain after LD pruning; raise [ld] r2"
        )
    return keep, record


def _pruned(
    cfg: JobConfig, vz: VcfZarr, qc: QCResult, compact: _compact.CompactCalls
) -> tuple[_compact.CompactCalls, tuple[dict[str, Any], ...]]:
    """The compact matrix of the variants ``[ld]`` keeps (as it was without pruning)."""
    if cfg.ld is None or not cfg.ld.prunes:
        return compact, ()
    keep, record = prune_ld(cfg, vz, qc, compact.calls)
    if keep.all():
        return compact, (record,)
    rows = np.flatnonzero(keep)
    n_cols = int(compact.calls.shape[1])
    chunk = _compact._row_chunk(len(rows), n_cols, cfg.workers)
    if compact.held is not None:  # gathered once, in this process: no pass over the store
        arr = compact.held[rows]
        pruned = _compact._held(
            arr, chunk, "genomics-ld-kept", cfg.memory_budget, compact.has_missing
        )
        return pruned, (record,)
    calls = compact.calls[rows].rechunk((chunk, n_cols))
    return dataclasses.replace(compact, calls=calls, nbytes=len(rows) * n_cols), (record,)


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
    centre_p, scale = centre_and_scale(stats, kv, qc.reference, cfg.scale)
    # a missing call was imputed at the standardisation's centre, before any location
    imputed_at = centre_p
    # with a reference the data are already centred on it in the chunk function
    location: Any = "auto" if qc.reference is None else None
    X = standardize(P * centre_p, scale)
    logger.info(
        "MS-PCA: n = %d samples (observations) x d = %d variants (features), K = %d, "
        "reference = %s",
        X.shape[0],
        X.shape[1],
        cfg.n_components,
        cfg.reference_mode,
    )
    kept_reference = qc.kept_reference
    if cfg.fit is not None and kept_reference is not None and kept_reference.all():
        # [fit] on the reference set (or a part of it): the data are centred on the mean of
        # every fitted sample, and the fit has no non-reference samples to set apart from them
        kept_reference = None
    res, fit_warnings = _fit(X, cfg, location, scheduler, kept_reference)
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
        cres, _ = _fit(X_all, cfg, None, scheduler, None)
        comparison = {
            "description": "the same data centred by the all-sample allele frequencies",
            "result": cres,
        }
    n_kept = int(qc.sample_keep.sum())
    imputed = int((n_kept - stats.n_called[kv]).sum())
    centre_p = np.asarray(centre_p, dtype=float)
    # The core's own total when it reports one (the same trace, from the fit's first pass);
    # else the same sum from the statistics pass.
    total = getattr(res, "total_variance", None)
    if total is None:
        total = total_variance(stats, kv, centre_p, imputed_at, scale)
    return Analysis(
        res,
        centre_p,
        scale,
        comparison,
        imputed,
        total_variance=float(total),
        fit_warnings=fit_warnings,
    )
