"""Projection of new samples onto a genomics result's components.

:func:`project` puts the samples of a new VCF Zarr store or PLINK 1 fileset on every stored
eigenpair (stable and mean-shift alike) with the stored centre frequencies
(``variant_reference_frequency``), scales (``variant_scale``) and loadings
(``variant_loading``): for a new sample with dosage ``g``,

    score_k = Σ_v (g_v − P p_v) / s_v · L_vk,

the formula that gave the fitted samples their ``sample_score`` (so projecting the fitted
samples themselves returns their scores).  New samples play no part in the centre, the scale
or the loadings, as with ``plink2 --score`` on PCA loadings or FlashPCA2 ``--project``.

Shrinkage
---------
With many more variants than samples, those plain scores of new samples are pulled towards 0:
the fitted samples helped choose the loadings, the new ones did not, and their scores spread
by a factor ``ρ_k < 1`` as much (Lee, Zou & Wright 2010).  ``method="corrected"`` (the
default) divides PC k's score by ``ρ_k`` of :func:`mspca_dask.rmt.score_shrinkage`, read off
the fitted spectrum (eigenvalue, noise variance, ``c = d / n``), as ``hdpca::pc_adjust`` does;
``method="plain"`` keeps the formula above.  The factors are in the output.  The correction
does not remove a second, smaller pull: the reference samples set the centre, so new samples
of the reference population sit off 0 by the centre's own error (about ``d / n_ref`` of the
squared shift), most visible when the reference set is small.

Variant matching
----------------
Variants are matched by contig and position (by variant id where the position is 0, PLINK's
"unknown"), then alleles:

- same REF/ALT: the dosage is used as is;
- REF/ALT swapped: the dosage counts the other allele, ``g → P − g``;
- the same after complementing both alleles (the other strand: A↔T, C↔G), as is or swapped;
- strand-ambiguous SNPs (A/T, C/G) are matched as written (a swap is read as a swap, never as
  a strand flip); ``ambiguous="drop"`` treats them as missing instead;
- anything else (other alleles, a multi-allelic or duplicated site in the new store) and result
  variants absent from the new store are **missing**: imputed at the centre, i.e. contribute 0.
  Their number is reported; scores shrink toward the centre as it grows.

Output
------
A TSV (default) in FlashPCA2's ``--project`` layout after one ``#`` line that records the
method and the factors: a header ``FID  IID  PC1 ... PCK``, one row per new sample,
tab-separated; FID is the new fileset's ``.fam`` (or ``.psam``) FID, and
the IID again for a VCF Zarr store, which has no family ids.  ``PCk`` is the result's PCk (the
``component`` coordinate numbers the PCs from 1; verdicts are in the log and the Zarr output).
A path ending in ``.zarr`` gets an xarray Dataset (``sample_id``, ``sample_family_id`` for a
PLINK fileset, ``sample_score``, ``eigenvalue``, ``verdict``, ``shrinkage_factor``; the method
and matching counts as attributes).
Both are written atomically and never replace an existing file unless ``overwrite``.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dask.array as da
import numpy as np

from ..errors import InputError, ParameterError, ResultExistsError
from . import preprocess

__all__ = [
    "project",
    "project_dosage",
    "match_variants",
    "VariantMatch",
    "PROJECTION_METHODS",
    "shrinkage_factors",
    "spectrum_shrinkage",
]

#: ``method`` of :func:`project`: divide by the shrinkage factors, or not.
PROJECTION_METHODS = ("corrected", "plain")

logger = logging.getLogger("mspca.genomics")

_COMPLEMENT = str.maketrans("ACGTacgt", "TGCAtgca")


def _complement(a: str) -> str:
    return a.translate(_COMPLEMENT)


def _ambiguous(ref: str, alt: str) -> bool:
    return {ref.upper(), alt.upper()} in ({"A", "T"}, {"C", "G"})


@dataclass(frozen=True)
class VariantMatch:
    """Which new-store variant (if any) each result variant reads, and how.

    Attributes
    ----------
    new_index : (m,) ndarray of int
        Rows of the new store used, increasing.
    result_index : (m,) ndarray of int
        The result variant (index among the *analysed* variants) each row stands for.
    flip : (m,) ndarray of bool
        True where the new store counts the other allele (``g → P − g``).
    counts : dict
        ``variants_in_result``, ``matched``, ``allele_swapped``, ``strand_flipped``,
        ``strand_ambiguous``, ``missing`` (not in the new store), ``allele_mismatch``
        (same position, other alleles; also dropped ambiguous SNPs and sites duplicated in
        the new store).
    """

    new_index: np.ndarray
    result_index: np.ndarray
    flip: np.ndarray
    counts: dict[str, int]


def match_variants(
    result_contig: np.ndarray,
    result_position: np.ndarray,
    result_alleles: np.ndarray | None,
    new_contig: np.ndarray,
    new_position: np.ndarray,
    new_alleles: np.ndarray | None,
    *,
    ambiguous: str = "keep",
    result_id: np.ndarray | None = None,
    new_id: np.ndarray | None = None,
) -> VariantMatch:
    """Match result variants to new-store variants by contig, position and alleles.

    Parameters
    ----------
    result_contig, result_position : (d,) arrays
        The analysed variants of the result.
    result_alleles : (d, A) array of str or None
        REF then ALT; None: positions only (orientation assumed the same).
    new_contig, new_position : (V,) arrays
    new_alleles : (V, A') array of str or None
    ambiguous : {"keep", "drop"}
        Strand-ambiguous SNPs (A/T, C/G): matched as written, or treated as missing.
    result_id, new_id : (d,) and (V,) arrays of str, optional
        Variant ids, used instead of the position where the position is 0 (PLINK's
        "unknown").
    """

    def key(c: Any, p: Any, vid: Any) -> tuple[str, Any]:
        if int(p) == 0 and vid is not None:
            return ("id", str(vid))
        return (str(c), int(p))

    rid = [None] * len(result_position) if result_id is None else list(result_id)
    nid = [None] * len(new_position) if new_id is None else list(new_id)
    if ambiguous not in ("keep", "drop"):
        raise ParameterError(f"ambiguous must be 'keep' or 'drop' (not {ambiguous!r})")
    keys_new: dict[tuple[str, Any], int] = {}
    dup: set[tuple[str, Any]] = set()
    for j, (c, p) in enumerate(zip(new_contig.tolist(), new_position.tolist(), strict=True)):
        k = key(c, p, nid[j])
        if k in keys_new:
            dup.add(k)
        keys_new[k] = j
    new_i: list[int] = []
    res_i: list[int] = []
    flips: list[bool] = []
    counts = dict.fromkeys(
        ("matched", "allele_swapped", "strand_flipped", "strand_ambiguous", "missing"), 0
    )
    counts["allele_mismatch"] = 0
    for i, (c, p) in enumerate(zip(result_contig.tolist(), result_position.tolist(), strict=True)):
        k = key(c, p, rid[i])
        found = keys_new.get(k)
        if found is None:
            counts["missing"] += 1
            continue
        j = found
        if k in dup:
            counts["allele_mismatch"] += 1
            continue
        flip = False
        if result_alleles is not None and new_alleles is not None:
            r = [str(a) for a in result_alleles[i] if str(a) not in ("", ".")]
            n = [str(a) for a in new_alleles[j] if str(a) not in ("", ".")]
            if len(r) != 2 or len(n) != 2:
                counts["allele_mismatch"] += 1
                continue
            amb = _ambiguous(*r)
            if amb and ambiguous == "drop":
                counts["allele_mismatch"] += 1
                continue
            rc = [_complement(a) for a in n]
            if n == r:
                pass
            elif n == r[::-1]:
                flip = True
                counts["allele_swapped"] += 1
            elif not amb and rc == r:
                counts["strand_flipped"] += 1
            elif not amb and rc == r[::-1]:
                flip = True
                counts["strand_flipped"] += 1
                counts["allele_swapped"] += 1
            else:
                counts["allele_mismatch"] += 1
                continue
            counts["strand_ambiguous"] += int(amb)
        new_i.append(j)
        res_i.append(i)
        flips.append(flip)
        counts["matched"] += 1
    order = np.argsort(np.asarray(new_i, dtype=np.int64), kind="stable")
    counts = {"variants_in_result": int(len(result_position)), **counts}
    return VariantMatch(
        new_index=np.asarray(new_i, dtype=np.int64)[order],
        result_index=np.asarray(res_i, dtype=np.int64)[order],
        flip=np.asarray(flips, dtype=bool)[order],
        counts=counts,
    )


def _flip_block(g: np.ndarray, flip: np.ndarray, ploidy: int) -> np.ndarray:
    out = g.copy()
    out[flip] = ploidy - out[flip]  # NaN (missing) stays NaN
    return out


def project(
    result: str | os.PathLike[str] | Any,
    new_store: str | os.PathLike[str],
    *,
    out: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
    ambiguous: str = "keep",
    genotype_variable: str = "auto",
    scheduler: Any = None,
    method: str = "corrected",
) -> Any:
    """Scores of new samples on a genomics result's components.

    Parameters
    ----------
    result : path or xarray.Dataset
        A genomics job's output directory or ``result.zarr`` (or the opened Dataset).
    new_store : path
        VCF Zarr store or PLINK 1 fileset (``x.bed`` or prefix ``x``) of the new samples.
    out : path, optional
        Where to write the scores: a ``.zarr`` path (xarray Dataset) or anything else (TSV in
        FlashPCA2's layout).  Nothing is written when None.
    overwrite : bool
        Replace an existing ``out`` (refused otherwise, before anything is computed).
    ambiguous : {"keep", "drop"}
        Strand-ambiguous SNPs matched as written, or treated as missing.
    genotype_variable : str
        Genotype variable of a VCF Zarr store (as the job's ``[input] genotype_variable``).
    scheduler : optional
        Where the one pass over the new genotypes runs.
    method : {"corrected", "plain"}
        ``"corrected"``: PC k's plain score divided by its shrinkage factor ``ρ_k``
        (:func:`shrinkage_factors`), which puts new samples on the fitted samples' scale;
        ``"plain"``: ``Σ_v (g_v − P p_v) / s_v · L_vk`` as is.

    Returns
    -------
    xarray.Dataset
        ``sample_id (samples)`` (and ``sample_family_id`` from a PLINK fileset),
        ``sample_score (samples, component)``, ``eigenvalue``, ``verdict`` and
        ``shrinkage_factor (component)``, the ``component`` coordinate numbering the PCs from
        1; attributes ``method``, ``match_counts`` (JSON of :attr:`VariantMatch.counts`),
        ``result_input_store``, ``new_store``.

    Raises
    ------
    InputError
        The result lacks what projection needs (variant_scale, from a layout before it was
        stored, is recomputed from the stored frequencies), or no variant matches.
    ResultExistsError
        ``out`` exists and ``overwrite`` is False.
    """
    import xarray as xr

    from .._execution import Executor
    from .dataset import open_genomics_result
    from .sources import open_genotypes

    if method not in PROJECTION_METHODS:
        raise ParameterError(f"method must be one of {list(PROJECTION_METHODS)} (not {method!r})")
    if out is not None and not overwrite and (os.path.lexists(out)):
        raise ResultExistsError(f"{out} exists; pass overwrite=True (--overwrite) to replace it")
    ds = result if isinstance(result, xr.Dataset) else open_genomics_result(result)
    inc = np.asarray(ds["variant_included"].values, dtype=bool)
    centre = np.asarray(ds["variant_reference_frequency"].values, float)[inc]
    loadings = np.asarray(ds["variant_loading"].values, float)[inc]
    if "variant_scale" in ds:
        scale = np.asarray(ds["variant_scale"].values, float)[inc]
    else:  # layout without variant_scale: the job's rule from the stored frequencies
        base = (
            ds["variant_reference_frequency"]
            if ds.attrs["scale_from"] == "reference" and ds.attrs["n_reference_samples"] > 0
            else ds["variant_allele_frequency"]
        )
        scale = preprocess.patterson_scale(np.asarray(base.values, float)[inc])
    r_alleles = None
    if "variant_allele" in ds:
        r_alleles = np.asarray(ds["variant_allele"].values).astype(str)[inc]
    vz = open_genotypes(os.fspath(new_store), genotype_variable=genotype_variable)
    m = match_variants(
        np.asarray(ds["variant_contig"].values).astype(str)[inc],
        np.asarray(ds["variant_position"].values)[inc],
        r_alleles,
        np.asarray(vz.variant_contig).astype(str),
        np.asarray(vz.variant_position),
        None if vz.variant_allele is None else np.asarray(vz.variant_allele).astype(str),
        ambiguous=ambiguous,
        result_id=None if "variant_id" not in ds else np.asarray(ds["variant_id"].values)[inc],
        new_id=vz.variant_id,
    )
    c = m.counts
    logger.info("projection: variant matching %s", json.dumps(c))
    if c["matched"] == 0:
        raise InputError(
            f"none of the {c['variants_in_result']} variants of the result is in {new_store} "
            f"with the same contig, position and alleles ({json.dumps(c)}); are both on the "
            "same genome build and contig naming ('22' vs 'chr22')?"
        )
    if r_alleles is None:
        logger.warning(
            "the result stores no alleles (an older layout): variants were matched by "
            "position only, assuming the same ALT allele"
        )
    P = vz.ploidy
    g = vz.dosage[m.new_index]
    if m.flip.any():
        f = da.from_array(m.flip, chunks=(g.chunks[0],))
        g = da.blockwise(_flip_block, "vs", g, "vs", f, "v", ploidy=P, dtype=g.dtype)
    rho = shrinkage_factors(ds)
    scores = project_dosage(
        g,
        centre[m.result_index],
        scale[m.result_index],
        loadings[m.result_index],
        ploidy=P,
        shrinkage=rho,
        method=method,
        executor=Executor(scheduler=scheduler),
    )
    K = scores.shape[1]
    logger.info(
        "projection: %s scores (shrinkage factors %s)",
        method,
        " ".join(f"PC{k + 1} {r:.3g}" for k, r in enumerate(rho)),
    )
    family: dict[str, Any] = {}
    if vz.family_id is not None:
        family["sample_family_id"] = (("samples",), np.asarray(vz.family_id).astype(str))
    res_ds = xr.Dataset(
        {
            "sample_id": (("samples",), vz.sample_id.astype(str)),
            **family,
            "sample_score": (("samples", "component"), np.asarray(scores, float)),
            "eigenvalue": (("component",), np.asarray(ds["eigenvalue"].values, float)),
            "verdict": (("component",), np.asarray(ds["verdict"].values).astype(str)),
            "shrinkage_factor": (("component",), rho),
        },
        coords={"component": np.arange(1, K + 1)},  # PC numbers, from 1
        attrs={
            "match_counts": json.dumps(c),
            "result_input_store": str(ds.attrs.get("input_store", "")),
            "result_job_fingerprint": str(ds.attrs.get("job_fingerprint", "")),
            "new_store": os.fspath(new_store),
            "ambiguous": ambiguous,
            "method": method,
            "description": "Scores of new samples on the result's components: "
            "sum_v (g - P p_v)/s_v L_vk with the result's centre p, scale s and loadings L; "
            "unmatched variants imputed at the centre"
            + (
                "; divided by shrinkage_factor (Lee, Zou & Wright 2010), which puts them on "
                "the fitted samples' scale."
                if method == "corrected"
                else "; not corrected for shrinkage (shrinkage_factor: by how much they are "
                "pulled towards 0)."
            ),
        },
    )
    if out is not None:
        _write(res_ds, Path(out), overwrite)
    return res_ds


def project_dosage(
    dosage: da.Array,
    centre: np.ndarray,
    scale: np.ndarray,
    loadings: np.ndarray,
    *,
    ploidy: int,
    shrinkage: np.ndarray,
    method: str = "corrected",
    executor: Any,
) -> np.ndarray:
    """``(n, K)`` scores of the samples of ``dosage`` in one pass: plain, or corrected.

    Parameters
    ----------
    dosage : (d, n) dask array
        The result's analysed variants (rows, in its order) of the samples to project; NaN
        for a missing call, imputed at the centre (it contributes 0).
    centre, scale : (d,) ndarray
        Centre frequency ``p`` and scale ``s`` of each variant.
    loadings : (d, K) ndarray
    ploidy : int
    shrinkage : (K,) ndarray
        ``ρ_k`` (:func:`shrinkage_factors`); the corrected score is the plain one over it.
    method : {"corrected", "plain"}
    executor : mspca_dask._execution.Executor
        Runs (and records) the pass, named ``"projection"``.
    """
    z = preprocess.standardize(dosage, ploidy * np.asarray(centre, float), scale)
    scores = np.asarray(executor.run("projection", {"scores": z @ loadings})["scores"], float)
    return scores / shrinkage if method == "corrected" else scores


def shrinkage_factors(ds: Any) -> np.ndarray:
    """(K,) ``ρ_k``: how much new samples' plain scores on PC k shrink, from the fitted spectrum.

    :func:`mspca_dask.rmt.score_shrinkage` of the result's eigenvalues with its noise variance
    and aspect ratio ``c = d / n`` (variants over samples analysed): ``ℓ_k / (ℓ_k + c)`` with
    ``ℓ_k = g⁻¹(λ_k / σ²)`` above the Marchenko–Pastur edge (Lee, Zou & Wright 2010), and
    ``√(σ² / λ_k)`` at or below it.
    """
    a = ds.attrs
    return spectrum_shrinkage(
        np.asarray(ds["eigenvalue"].values, float),
        int(a["n_variants_analysed"]),
        int(a["n_samples_analysed"]),
        float(a["noise_variance"]),
    )


def spectrum_shrinkage(
    eigenvalues: np.ndarray, n_variants: int, n_samples: int, noise_variance: float
) -> np.ndarray:
    """(K,) ``ρ_k`` of :func:`shrinkage_factors` from a fit's spectrum, ``d`` and ``n``."""
    from ..rmt import score_shrinkage

    c = float(n_variants) / float(n_samples)
    return np.asarray(score_shrinkage(np.asarray(eigenvalues, float), c, noise_variance), float)


def _write(ds: Any, out: Path, overwrite: bool) -> None:
    from ..io import write_dataset_atomic

    if out.suffix == ".zarr":
        write_dataset_atomic(ds, out, overwrite=overwrite)
        return
    ids = ds["sample_id"].values.astype(str)
    fids = ds["sample_family_id"].values.astype(str) if "sample_family_id" in ds else ids
    scores = ds["sample_score"].values
    header = ["FID", "IID"] + [f"PC{k + 1}" for k in range(scores.shape[1])]
    rho = " ".join(f"{v:.6g}" for v in np.asarray(ds["shrinkage_factor"].values, float))
    lines = [
        f"# mspca genomics project: method={ds.attrs['method']}; shrinkage factors "
        f"(PC1 first) {rho}",
        "\t".join(header),
    ]
    for fid, sid, row in zip(fids, ids, scores, strict=True):
        lines.append("\t".join([fid, sid, *(f"{v:.10g}" for v in row)]))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp-{uuid.uuid4().hex}")
    try:
        with open(tmp, "x", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
            f.flush()
            os.fsync(f.fileno())
        if not overwrite and os.path.lexists(out):
            raise ResultExistsError(f"{out} appeared while the scores were computed; not replaced")
        if out.is_dir():
            raise ResultExistsError(f"{out} is a directory; not replaced by the scores file")
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            tmp.unlink()
