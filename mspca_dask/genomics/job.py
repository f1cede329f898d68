"""One job run: lock, fingerprints, compute, atomic write of the output directory."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .._execution import Executor, job_scheduler
from ..errors import (
    ConfigError,
    JobLockedError,
    ResultExistsError,
)
from ..io import commit_directory, is_complete, write_dataset_atomic
from ..io.safety import check_output_not_input, foreign_error, is_replaceable
from ..schema import GENOMICS_SCHEMA_VERSION
from . import compact as _compact
from .analysis import Analysis, analyse
from .config import JobConfig
from .dataset import (
    AXES_NOTE,
    CENTRING_NOTE,
    RESULT_NAME,
    FitSplit,
    _centring_this_run,
    build_dataset,
    ld_lines,
    pc_names,
)
from .plink_out import PLINK2_FILES, SCORE_COMMAND, write_plink2_files
from .projection import project_dosage, spectrum_shrinkage
from .qc import QCResult, run_qc
from .reference import (
    _metadata_column,
    read_sample_metadata,
    resolve_fit_samples,
    resolve_reference,
)
from .report import write_report
from .simulate import simulate_cohort
from .sources import input_fingerprint, open_genotypes

if TYPE_CHECKING:
    import xarray as xr


logger = logging.getLogger("mspca.genomics")

#: Every file of a job's output directory and what it holds; all are written into a hidden
#: temporary directory that is renamed into place only when complete (:func:`run_job`).
OUTPUTS: dict[str, str] = {
    "summary.txt": "the notes, one row per PC (PC1 first) and the MS-PCA fit's table",
    **PLINK2_FILES,
    "report.html": "self-contained HTML report ([report] enabled)",
    "figures": "the report's PNG figures ([report] enabled)",
    RESULT_NAME: "the result Dataset (GENOMICS_VARIABLES), written last",
}


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
    if cfg.fit is not None and cfg.fit.samples_file is not None:  # only then: the
        doc["fit_samples_file"] = _file_hash(cfg.fit.samples_file)  # others' stay as they were
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


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
        for old in sorted(output_dir.parent.glob(f".{output_dir.name}.old-*")):
            if is_complete(str(old / RESULT_NAME)):
                logger.info("restoring the result moved aside by an interrupted run: %s", old)
                os.replace(old, output_dir)
                break
    for pattern in (f".{output_dir.name}.tmp-*", f".{output_dir.name}.old-*"):
        for p in output_dir.parent.glob(pattern):
            logger.info("removing the leftovers of an interrupted run: %s", p)
            shutil.rmtree(p, ignore_errors=True)


def _existing_fingerprint(output_dir: Path) -> str | None:
    """The job fingerprint of a complete result in ``output_dir``, or None."""
    import zarr

    store = output_dir / RESULT_NAME
    if not is_complete(str(store)):
        return None
    try:
        group = zarr.open_group(str(store), mode="r", use_consolidated=False)
        fp = group.attrs.get("job_fingerprint")
    except (OSError, ValueError, KeyError):
        return None
    return fp if isinstance(fp, str) else ""


@dataclass
class JobOutcome:
    """What :func:`run_job` did: ``"computed"`` or ``"up to date"``, where, and the fingerprint."""

    status: str
    output_dir: Path
    job_fingerprint: str
    dataset: xr.Dataset | None = None
    seconds: float = 0.0
    #: Every pass the job ran, in order: statistics, compaction, the fit's, the comparison
    #: fit's (each ``{"name", "products", "seconds"}``); empty when it was up to date.
    passes: tuple[dict[str, Any], ...] = ()


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
        ds, an, passes = _compute(cfg, input_fp, job_fp, timings)
        t0 = time.perf_counter()
        tmp = out.parent / f".{out.name}.tmp-{uuid.uuid4().hex}"
        tmp.mkdir(parents=True)
        try:
            _write_outputs(ds, an, tmp, cfg)
            # io's commit: only our own result (or an empty directory) is replaced; the old
            # one is moved aside and put back if the rename fails.
            commit_directory(str(tmp), str(out), bool(overwrite), result_name=RESULT_NAME)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        timings["write"] = time.perf_counter() - t0
    seconds = time.perf_counter() - t_start
    logger.info("done in %.1f s: %s (report: %s)", seconds, out / RESULT_NAME, out / "report.html")
    return JobOutcome("computed", out, job_fp, ds, seconds, passes)


def _compute(
    cfg: JobConfig, input_fp: str, job_fp: str, timings: dict[str, float]
) -> tuple[xr.Dataset, Analysis, tuple[dict[str, Any], ...]]:
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
        listed = set(metadata.index)
        known = sum(sample in listed for sample in vz.sample_id)
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
    fit, fit_desc = resolve_fit_samples(cfg, vz, metadata, reference)
    if fit is not None and reference is not None and not (reference <= fit).all():
        ref_desc += (
            f"; {int((reference & fit).sum())} of them fitted, whose frequencies centre the data"
        )
    if fit is not None:
        logger.info(
            "fit on %d samples (%s); the other %d are projected onto its components",
            int(fit.sum()),
            fit_desc,
            int((~fit).sum()),
        )
    timings["open"] = time.perf_counter() - t0
    with (
        job_scheduler(cfg.scheduler, cfg.workers) as scheduler,
        _compact.workspace(cfg.output_dir.parent) as ws,
    ):
        executor = Executor(scheduler=scheduler)
        t0 = time.perf_counter()
        qc = run_qc(cfg, vz, reference, executor, ws, fit=fit)
        timings["statistics"] = time.perf_counter() - t0
        logger.info("QC: %s", json.dumps(qc.counts))
        t0 = time.perf_counter()
        an = analyse(cfg, vz, qc, scheduler, ws)
        timings["fit"] = time.perf_counter() - t0
        split = None
        projector = Executor(scheduler=scheduler)
        if fit is not None:
            t0 = time.perf_counter()
            split = _project_rest(vz, qc, an, fit_desc, projector)
            timings["project"] = time.perf_counter() - t0
    res = an.result
    passes = (
        *(p.as_dict() for p in executor.passes),
        *an.compaction_passes,
        *res.passes,
        *(an.comparison["result"].passes if an.comparison is not None else ()),
        *(p.as_dict() for p in projector.passes),
    )
    n_passes = (
        qc.n_passes
        + an.n_raw_passes
        + res.n_passes
        + (an.comparison["result"].n_passes if an.comparison is not None else 0)
        + len(projector.passes)
    )
    share = an.variance_explained
    logger.info("total variance %.6g (the sum of all eigenvalues)", an.total_variance)
    for k, name in enumerate(pc_names(res.n_components)):
        logger.info(
            "%s: eigenvalue %.6g (%.2f%% of the variance) -> %.6g under the knockoff (median), %s",
            name,
            res.eigenvalues[k],
            100.0 * share[k],
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
        fit_split=split,
    )
    lines, warnings = ld_lines(ds)
    for line in lines:
        logger.info("LD diagnostic, %s", line)
    for line in warnings:
        logger.warning("LD diagnostic: %s", line)
    return ds, an, passes


def _project_rest(
    vz: Any, qc: QCResult, an: Analysis, description: str, executor: Executor
) -> FitSplit:
    """``[fit]``: the samples that passed QC but were not fitted, projected onto the fit.

    The corrected scores of :mod:`mspca_dask.genomics.projection` (its default): the plain
    score ``Σ_v (g_v − P p_v) / s_v · L_vk`` with the fit's centre, scale and loadings,
    divided by the shrinkage factor ``ρ_k`` of the fitted spectrum, which puts the projected
    samples on the fitted samples' scale.  One pass over the raw store, of those samples.
    """
    assert qc.projected is not None
    res = an.result
    rho = spectrum_shrinkage(
        np.asarray(res.eigenvalues, float),
        int(res.n_features),
        int(res.n_samples),
        float(res.noise_variance),
    )
    loadings = np.asarray(res.eigenvectors, float).T  # (d, K)
    n_proj = int(qc.projected.sum())
    if n_proj == 0:
        scores = np.empty((0, loadings.shape[1]))
    else:
        scores = project_dosage(
            vz.dosage[qc.variant_keep][:, qc.projected],
            an.centre_frequency,
            an.scale,
            loadings,
            ploidy=vz.ploidy,
            shrinkage=rho,
            method="corrected",
            executor=executor,
        )
    logger.info(
        "fitted %d samples (%s), projected %d (corrected scores; shrinkage factors %s)",
        int(qc.sample_keep.sum()),
        description,
        n_proj,
        " ".join(f"PC{k + 1} {r:.3g}" for k, r in enumerate(rho)),
    )
    return FitSplit(description, scores, "corrected", rho)


def pc_table(ds: xr.Dataset) -> str:
    """One row per PC, PC1 first: eigenvalue, share of the variance, knockoff, verdict."""
    kn = np.median(np.asarray(ds["knockoff_eigenvalue"].values, float), axis=0)
    share = (
        np.asarray(ds["variance_explained"].values, float)
        if "variance_explained" in ds
        else np.full(ds.sizes["component"], np.nan)
    )
    rows = [("PC", "eigenvalue", "variance", "knockoff (median)", "verdict")]
    for k, name in enumerate(pc_names(ds.sizes["component"])):
        rows.append(
            (
                name,
                f"{float(ds['eigenvalue'].values[k]):.6g}",
                f"{100.0 * share[k]:.2f}%",
                f"{kn[k]:.6g}",
                str(ds["verdict"].values[k]),
            )
        )
    widths = [max(len(r[j]) for r in rows) for j in range(len(rows[0]))]
    lines = [
        "  ".join(
            c.ljust(w) if j in (0, 4) else c.rjust(w)
            for j, (c, w) in enumerate(zip(r, widths, strict=True))
        ).rstrip()
        for r in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _write_outputs(ds: xr.Dataset, an: Analysis, directory: Path, cfg: JobConfig) -> None:
    """Every file of :data:`OUTPUTS` into ``directory`` (the hidden temporary one): the
    result last."""
    a = ds.attrs
    K = ds.sizes["component"]
    lines, warnings = ld_lines(ds)
    ld_text = (
        "LD diagnostic (is a PC one region's haplotypes?)\n"
        + "".join(f"  {line}\n" for line in lines)
        + "".join(f"  WARNING: {line}\n" for line in warnings)
        + "\n"
        if lines
        else ""
    )
    (directory / "summary.txt").write_text(
        f"{CENTRING_NOTE}\n\n{_centring_this_run(a)}\n{AXES_NOTE}\n\n"
        f"{_fit_line(a)}"
        f"passes over the genotypes: {a['n_passes']} ({a['n_passes_detail']}); the MS-PCA "
        f"summary below counts the fit's own {an.result.n_passes}\n\n"
        f"total variance {a['total_variance']:.6g} (the sum of all eigenvalues); variance: "
        f"each PC's share of it\n{pc_table(ds)}\n\n{ld_text}"
        f"PLINK 2: pca.eigenvec, pca.eigenval; scores of other samples by\n"
        f"  {SCORE_COMMAND.format(last=5 + K)}\n\n"
        f"The MS-PCA fit (its # column counts from 0: # 0 is PC1)\n{an.result.summary()}\n"
    )
    write_plink2_files(ds, directory)
    if cfg.report:
        write_report(ds, an, directory)
    write_dataset_atomic(ds, directory / RESULT_NAME)


def _fit_line(a: Any) -> str:
    """With ``[fit]``: how many samples were fitted and projected (a paragraph), else ``""``."""
    if "n_samples_projected" not in a:
        return ""
    return (
        f"fitted on {a['n_samples_analysed']} samples ({a['fit_description']}); "
        f"{a['n_samples_projected']} more projected onto the fitted components "
        f"({a['projection_method']} scores; sample_fitted says which)\n\n"
    )
