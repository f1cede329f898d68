"""QC in one statistics pass: allele frequency, missingness, MAF and call-rate filters."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import dask.array as da
import numpy as np
import pandas as pd

from .._execution import Executor
from ..errors import InputError
from ..io.writing import str_objects
from . import compact as _compact
from . import ld_prune as _ld
from . import preprocess
from .cohort import VcfZarr
from .config import JobConfig

logger = logging.getLogger("mspca.genomics")


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
    #: (N,) bool: the samples projected onto the fit (``[fit]``: passed QC, not fitted)
    projected: np.ndarray | None = None

    @property
    def kept_reference(self) -> np.ndarray | None:
        """``(N_kept,)`` bool: the reference among the samples QC kept (the fit's rows)."""
        return None if self.reference is None else self.reference[self.sample_keep]


def _statistics(
    vz: VcfZarr,
    samples: np.ndarray | None,
    reference: np.ndarray | None,
    candidates: tuple[_compact.CandidateFilter, Path] | None = None,
    *,
    memory_budget: int = _compact.DEFAULT_MEMORY_BUDGET,
    workers: int = 2,
    held: _compact.HeldParts | None = None,
) -> dict[str, da.Array]:
    """The statistics pass's products, from the int8 calls when the store has them.

    With ``candidates`` (a filter and a directory), the pass also writes the rows of the
    variants that pass the per-variant filters there, or keeps them in ``held`` while they
    fit its budget (see :mod:`mspca_dask.genomics.compact`); ``memory_budget`` (bytes) and
    ``workers`` bound what that pass holds.
    """
    if vz.calls is not None and candidates is not None and samples is None:
        if vz.raw_genotypes is not None:
            return _compact.statistics_from_chunks(
                vz.raw_genotypes,
                reference,
                *candidates,
                memory_budget=memory_budget,
                workers=workers,
                held=held,
            )
        return _compact.statistics_and_candidates(vz.calls, reference, *candidates, held)
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
    fit: np.ndarray | None = None,
) -> QCResult:
    """One statistics pass (two if samples fail the call-rate filter), then the filters.

    With a ``workspace`` directory and hard calls, the first pass also writes the candidate
    rows of the compact matrix there (``QCResult.candidates``), so that the fit needs no
    further read of the raw store.

    With ``fit`` (``[fit]``: a mask of the samples to fit on), the call-rate filter still
    judges every sample, and the variant statistics and filters are those of the fitted
    samples that pass it (a second statistics pass): the fit is the one a job on those
    samples alone would give, and the samples projected onto it (``QCResult.projected``, the
    others that pass) play no part in the centre, the scale or the choice of variants.
    """
    N, V = vz.n_samples, vz.n_variants
    filt = None
    spill: tuple[_compact.CandidateFilter, Path] | None = None
    held = None
    if workspace is not None and vz.calls is not None and fit is None:
        filt = _compact.CandidateFilter(cfg.min_maf, cfg.max_variant_missing, vz.ploidy, N)
        spill = (filt, workspace)
        if executor.shares_memory:
            n_parts = len(vz.calls.chunks[0])  # one per row of raw chunks
            held = _compact.HeldParts(cfg.memory_budget, n_parts)
    # The site filters read variant metadata only (0.3 s of Python on the benchmark cohort's
    # 626k variants): worked out in this process while the pass's tasks, which release the
    # GIL in decompression and NumPy, run.
    with ThreadPoolExecutor(1, thread_name_prefix="mspca-site-filters") as pool:
        sites = pool.submit(site_filters, vz)
        try:
            out = executor.run(
                "genomics-statistics",
                _statistics(
                    vz,
                    None,
                    reference,
                    spill,
                    memory_budget=cfg.memory_budget,
                    workers=cfg.workers,
                    held=held,
                ),
            )
        finally:
            executor.on_workers(_compact.release_scratch)
    candidates = None
    if filt is not None and workspace is not None:
        chunks = tuple(int(c) for c in vz.calls.chunks[0])  # type: ignore[union-attr]
        candidates = _compact.Candidates(workspace, np.asarray(out["candidate"]), chunks, N, held)
    stats = preprocess.GenotypeStats.from_pass(out, N, vz.ploidy)
    call_rate = stats.sample_call_rate(V)
    passed = call_rate >= cfg.min_sample_call_rate
    keep_s = passed if fit is None else passed & fit
    n_passes = 1
    ref = reference
    if fit is not None:
        logger.info(
            "QC: %d of %d samples have a call rate below %.3g; fitting on %d of the %d [fit] "
            "samples that pass, projecting the other %d (second statistics pass, over the "
            "fitted samples)",
            int((~passed).sum()),
            N,
            cfg.min_sample_call_rate,
            int(keep_s.sum()),
            int(fit.sum()),
            int((passed & ~fit).sum()),
        )
    elif not keep_s.all():
        logger.info(
            "QC: %d of %d samples have a call rate below %.3g and are excluded; recomputing "
            "the variant statistics without them (second statistics pass)",
            int((~keep_s).sum()),
            N,
            cfg.min_sample_call_rate,
        )
    if not keep_s.all():
        if keep_s.sum() < 2:
            raise InputError(
                f"only {int(keep_s.sum())} sample(s){'' if fit is None else ' to fit on'} "
                f"have a call rate >= {cfg.min_sample_call_rate}; lower [qc] "
                "min_sample_call_rate"
            )
        sub_ref = None if ref is None else ref[keep_s]
        out = executor.run("genomics-statistics-2", _statistics(vz, keep_s, sub_ref))
        stats = preprocess.GenotypeStats.from_pass(out, int(keep_s.sum()), vz.ploidy)
        n_passes = 2
        candidates = None  # chosen over all samples: not valid for the samples kept
        if held is not None:
            held.clear()
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
    site_bad = sites.result()
    if cfg.ld is not None and cfg.ld.regions:  # [ld] exclude_regions: metadata only, no pass
        site_bad["variants_ld_region"] = _ld.region_mask(
            vz.variant_contig, vz.variant_position, cfg.ld.regions
        )
    for name, bad in site_bad.items():
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
    counts["samples_low_call_rate"] = int((~passed).sum())
    counts["samples_analysed"] = int(keep_s.sum())
    projected = None
    if fit is not None:
        projected = passed & ~fit
        counts["samples_fitted"] = int(keep_s.sum())
        counts["samples_projected"] = int(projected.sum())
    if keep_v.sum() < 2:
        raise InputError(
            f"only {int(keep_v.sum())} of {V} variants pass QC (monomorphic "
            f"{counts['variants_monomorphic']}, MAF < {cfg.min_maf}: {counts['variants_low_maf']}, "
            f"missing > {cfg.max_variant_missing}: {counts['variants_high_missing']}); relax [qc]"
        )
    return QCResult(stats, call_rate, keep_s, keep_v, ref, n_passes, counts, candidates, projected)


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
        alleles = str_objects(vz.variant_allele).reshape(V, -1)
        # Each distinct allele string is judged once (a cohort has few: the bases and some
        # longer ones), then mapped back by hashing: 626k variants took 2 s one string at a
        # time, 0.4 s sorting them (np.unique), 0.07 s so.
        inverse, distinct = pd.factorize(alleles.ravel())
        present = np.array([a not in _MISSING_ALLELES for a in distinct], dtype=bool)
        acgt = np.array(
            [a in _MISSING_ALLELES or set(a.upper()) <= set("ACGT") for a in distinct], dtype=bool
        )
        present = present[inverse].reshape(alleles.shape)
        acgt = acgt[inverse].reshape(alleles.shape)
        if alleles.shape[1] == 0:
            present = acgt = np.zeros((V, 1), dtype=bool)
        out["variants_multiallelic"] = present[:, 1:].sum(axis=1) > 1
        out["variants_non_acgt"] = ~acgt.all(axis=1) | ~present[:, 0]
    else:
        out["variants_multiallelic"] = np.zeros(V, dtype=bool)
        out["variants_non_acgt"] = np.zeros(V, dtype=bool)
    sites = pd.MultiIndex.from_arrays(
        [str_objects(vz.variant_contig), np.asarray(vz.variant_position)]
    )
    out["variants_duplicate_position"] = sites.duplicated(keep=False) & (
        np.asarray(vz.variant_position) > 0
    )
    return out
