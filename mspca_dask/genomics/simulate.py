"""Simulated cohorts (demo and tests): stdpopsim/msprime, then bio2zarr."""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError
from .config import SimulateConfig

logger = logging.getLogger("mspca.genomics")


SIMULATION_ATTR = "mspca_simulation"


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
        and bio2zarr's vcf2zarr converts it), encoding in ``writer_processes`` worker
        processes (0: this one).

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
    params.pop("writer_processes")  # how it is written, not what: not part of the cache key
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
                worker_processes=cfg.writer_processes,
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
            worker_processes=cfg.writer_processes,
        )
    return n_missing
