"""Genotype files and genomics jobs for the tests, written by real writers.

``simulate`` makes a stdpopsim cohort as VCF Zarr (bio2zarr's tskit2zarr) and ``write_job``
the config file of a job on it; the genomics test modules share both.
``balding_nichols`` draws unlinked populations (and, on request, one block of variants in
strong LD) in the same layout, for tests that need many variants per sample quickly;
``fileset_arrays`` reads the biallelic sites of a VCF Zarr store (as bio2zarr wrote it);
``write_bed`` writes them, or a subset of samples / variants, as a PLINK 1 fileset with the
ALT allele as A1 (the counted allele), the orientation bio2zarr's ``plink2zarr`` reads back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import zarr

from mspca_dask import genomics as gx
from mspca_dask.io.writing import str_objects

#: ``[reference]`` of most test jobs: the CEU samples of the sample metadata.
CEU_REFERENCE = 'metadata_column = "population"\nmetadata_values = ["CEU"]'


def simulate(
    root: Path, name: str = "cohort", *, metadata: bool = True, **kw: Any
) -> dict[str, Any]:
    """Simulate ``root/NAME.vcz`` (and ``root/samples.tsv``) with ``SimulateConfig(**kw)``."""
    return gx.simulate_cohort(
        root / f"{name}.vcz",
        metadata=root / "samples.tsv" if metadata else None,
        config=gx.SimulateConfig(**kw),
    )


def write_job(
    directory: Path,
    name: str,
    store: str | Path,
    *,
    metadata: str | Path | None = None,
    reference: str = CEU_REFERENCE,
    extra: str = "",
) -> Path:
    """Write ``directory/NAME.toml``: a job on ``store`` with ``K = 4``, no report, output
    ``out/NAME``; ``extra`` is appended (more sections)."""
    lines = [f'[job]\nname = "{name}"', f'[input]\nstore = "{store}"']
    if metadata is not None:
        lines.append(f'sample_metadata = "{metadata}"')
    lines += [
        f"[reference]\n{reference}",
        "[pca]\nn_components = 4",
        f'[output]\ndir = "out/{name}"',
        "[report]\nenabled = false",
        extra,
    ]
    path = directory / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def fileset_arrays(store: str) -> dict[str, Any]:
    """Dosage (variants, samples) with NaN missing, positions, REF, ALT, sample ids."""
    g = zarr.open_group(store, mode="r")
    gt = g["call_genotype"][:]
    alleles = str_objects(g["variant_allele"][:])
    biallelic = (alleles[:, 2:] == "").all(axis=1)
    gt, alleles = gt[biallelic], alleles[biallelic]
    dosage = (gt > 0).sum(axis=2).astype(np.float32)
    dosage[(gt == -1).any(axis=2)] = np.nan
    return {
        "dosage": dosage,
        "position": g["variant_position"][:][biallelic].astype(np.int64),
        "ref": alleles[:, 0].astype(str),
        "alt": alleles[:, 1].astype(str),
        "sample_id": str_objects(g["sample_id"][:]).astype(str),
    }


def balding_nichols(
    populations: dict[str, int],
    n_variants: int,
    *,
    fst: float,
    seed: int,
    contig_bp: int = 15_000_000,
    n_contigs: int = 2,
    ld_block: int = 0,
    ld_block_bp: int = 400_000,
) -> dict[str, Any]:
    """Unlinked variants of populations drawn from one ancestral frequency (Balding-Nichols).

    Ancestral frequencies are uniform on [0.1, 0.9]; each population's frequency is
    ``Beta(p (1 - F) / F, (1 - p) (1 - F) / F)`` with ``F = fst``; genotypes are binomial.
    Variants sit evenly on ``n_contigs`` contigs named ``"1"``, ``"2"``... of ``contig_bp``.
    ``ld_block > 0`` adds that many variants within ``ld_block_bp`` at 5 Mb of contig 1 that
    all tag one haplotype (frequency 0.3; each allele differs from it with chance 0.02): a
    block in strong linkage disequilibrium, like an inversion.

    Returns the layout of :func:`fileset_arrays` with ``contig`` and ``populations`` added.
    """
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.1, 0.9, n_variants)
    a, b = p * (1 - fst) / fst, (1 - p) * (1 - fst) / fst
    blocks, labels = [], []
    for name, count in populations.items():
        freq = rng.beta(a, b)
        blocks.append(rng.binomial(2, freq, (count, n_variants)))
        labels += [name] * count
    g = np.vstack(blocks).T.astype(np.float32)  # (variants, samples)
    n = g.shape[1]
    per = -(-n_variants // n_contigs)
    contig = np.repeat([str(i + 1) for i in range(n_contigs)], per)[:n_variants]
    position = (np.arange(n_variants) % per) * (contig_bp // per) + 1
    if ld_block:
        hap = rng.random((2, n)) < 0.3
        flips = rng.random((ld_block, 2, n)) < 0.02
        g = np.vstack([g, (hap[None] ^ flips).sum(axis=1).astype(np.float32)])
        contig = np.concatenate([contig, np.full(ld_block, "1")])
        step = ld_block_bp // ld_block
        position = np.concatenate([position, 5_000_000 + 7 + step * np.arange(ld_block)])
        order = np.lexsort((position, contig))
        g, contig, position = g[order], contig[order], position[order]
    V = g.shape[0]
    alleles = np.array(["A", "C", "G", "T"])
    ref = alleles[rng.integers(0, 4, V)]
    alt = alleles[(np.searchsorted(alleles, ref) + rng.integers(1, 4, V)) % 4]
    return {
        "dosage": g,
        "position": position.astype(np.int64),
        "contig": contig,
        "ref": ref,
        "alt": alt,
        "sample_id": np.array([f"{lab}_{i:04d}" for i, lab in enumerate(labels)]),
        "populations": np.array(labels),
    }


def add_qc_cases(a: dict[str, Any]) -> dict[str, Any]:
    """Append the QC cases real data have: an all-het variant, a variant called in one
    sample, an ALT allele 'N', and a second record at an existing position."""
    dosage, pos, ref, alt = a["dosage"], a["position"], a["ref"], a["alt"]
    n = dosage.shape[1]
    one = np.full(n, np.nan, np.float32)
    one[0] = 1.0
    extra = [
        (np.ones(n, np.float32), pos[-1] + 10, "A", "G"),
        (one, pos[-1] + 20, "C", "T"),
        (dosage[5].copy(), pos[-1] + 30, "A", "N"),
        (dosage[7].copy(), int(pos[7]), ref[7], alt[7]),
    ]
    for row, p, r, x in extra:
        dosage = np.vstack([dosage, row[None, :]])
        pos, ref, alt = np.append(pos, p), np.append(ref, r), np.append(alt, x)
    order = np.argsort(pos, kind="stable")
    return {
        **a,
        "dosage": dosage[order],
        "position": pos[order],
        "ref": ref[order],
        "alt": alt[order],
    }


def write_bed(
    prefix: Path,
    a: dict[str, Any],
    *,
    samples: np.ndarray | None = None,
    variants: np.ndarray | None = None,
    swap: np.ndarray | None = None,
    strand: np.ndarray | None = None,
    family_prefix: str = "",
) -> None:
    """Write ``a`` (or the ``samples``/``variants`` selected) as ``prefix.bed/.bim/.fam``.

    ``swap`` (per selected variant): write A1/A2 the other way round (the count becomes
    ``2 - g``); ``strand``: complement both alleles (the other strand); ``family_prefix``:
    the FID is ``family_prefix + IID`` (the IID itself by default).
    """
    from bed_reader import to_bed

    s = np.arange(a["dosage"].shape[1]) if samples is None else np.asarray(samples)
    v = np.arange(a["dosage"].shape[0]) if variants is None else np.asarray(variants)
    dosage = a["dosage"][np.ix_(v, s)].copy()
    ref, alt = a["ref"][v].copy(), a["alt"][v].copy()
    if strand is not None:
        comp = str.maketrans("ACGT", "TGCA")
        ref = np.where(strand, [r.translate(comp) for r in ref], ref)
        alt = np.where(strand, [x.translate(comp) for x in alt], alt)
    if swap is not None:
        dosage[swap] = 2 - dosage[swap]
        ref, alt = np.where(swap, alt, ref), np.where(swap, ref, alt)
    ids = a["sample_id"][s]
    to_bed(
        str(prefix) + ".bed",
        dosage.T,
        properties={
            "iid": ids,
            "fid": np.asarray([family_prefix + i for i in ids]),
            "sid": np.asarray([f"v{i}" for i in v]),
            "chromosome": a["contig"][v] if "contig" in a else np.full(len(v), "22"),
            "bp_position": a["position"][v],
            "allele_1": alt,  # A1, the counted allele, is the ALT
            "allele_2": ref,
        },
        count_A1=True,
    )


def write_pgen(prefix: Path, a: dict[str, Any]) -> None:
    """Write ``a`` as a PLINK 2 fileset with pgenlib's ``PgenWriter`` (REF = A2, ALT = A1)."""
    import pgenlib

    dosage = a["dosage"]
    V, N = dosage.shape
    writer = pgenlib.PgenWriter(
        (str(prefix) + ".pgen").encode(), N, variant_ct=V, nonref_flags=False
    )
    try:
        for row in dosage:
            g = np.where(np.isnan(row), -9, row).astype(np.int8)
            writer.append_biallelic(g)
    finally:
        writer.close()
    with open(str(prefix) + ".pvar", "w") as f:
        f.write("##fileformat=VCFv4.2\n#CHROM\tPOS\tID\tREF\tALT\n")
        for i in range(V):
            f.write(f"22\t{a['position'][i]}\tv{i}\t{a['ref'][i]}\t{a['alt'][i]}\n")
    with open(str(prefix) + ".psam", "w") as f:
        f.write("#IID\tSEX\n" + "".join(f"{s}\tNA\n" for s in a["sample_id"]))
