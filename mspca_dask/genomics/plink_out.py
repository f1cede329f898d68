"""The job's PCA in the files ``plink2 --pca allele-wts`` writes, and the one its ``--score`` reads.

Written into the job's output directory with the other outputs (so committed with them):

``pca.eigenvec``
    ``#FID IID PC1 ... PCK``, tab-separated, one row per included sample, in store order
    (with ``[fit]`` the projected ones too, whose corrected scores are the ``--score`` sums
    below divided by ``projection_shrinkage_factor``): the job's scores
    (``sample_score``, ``Z L``: plink2's own ``.eigenvec`` holds unit eigenvectors, ``Z L`` divided
    by ``√(n λ)``).  FID is the fileset's ``.fam`` FID; a VCF Zarr store has none and gets
    ``FID = IID`` (as ``plink2 --double-id``).
``pca.eigenval``
    One eigenvalue per line, PC1 first (eigenvalues of ``ZᵀZ / n``; plink2's are those of
    the relationship matrix ``Z Zᵀ / d``).
``pca.eigenvec.allele``
    ``#CHROM ID REF ALT A1 PC1 ... PCK``, two lines per analysed variant (``A1`` = REF, then
    ``A1`` = ALT) with opposite weights ``∓W/2``, the layout of ``plink2 --pca allele-wts``.
``pca.afreq``
    ``#CHROM ID REF ALT ALT_FREQS``: the centre frequencies ``c`` (``variant_reference_frequency``).

With them, plink2 reproduces the job's scores, on the fitted samples or on new ones
(:data:`SCORE_COMMAND`: the ``_SUM`` columns of ``.sscore``)::

    plink2 --bfile NEW --read-freq pca.afreq \\
        --score pca.eigenvec.allele 2 5 header-read no-mean-imputation variance-standardize \\
        cols=+scoresums --score-col-nums 6-(5+K)

``variance-standardize`` scores ``(g − 2c) / √(2c(1 − c))`` with ``c`` from ``--read-freq``;
the job divided by its own scale ``s`` (from the reference or from all samples), so the weight
is ``W = L √(2c(1 − c)) / s`` and the score is ``Σ_v L_vk (g_v − 2c_v) / s_v``, the job's.  A
missing call adds nothing (``no-mean-imputation``), as the job imputes it at the centre.

Variant ids are the store's; where one is missing (``.``) or repeated they are all written as
``CHROM:POS:REF:ALT`` (give the new fileset the same with ``plink2 --set-all-var-ids
@:#:\\$r:\\$a``).  The weights need diploid calls and centres strictly between 0 and 1 (a robust
``auto`` location can move a centre outside); otherwise the two weight files are not written
and the log says why.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .dataset import pc_names

if TYPE_CHECKING:
    import xarray as xr

__all__ = ["PLINK2_FILES", "SCORE_COMMAND", "write_plink2_files", "allele_weights"]

logger = logging.getLogger("mspca.genomics")

#: The files :func:`write_plink2_files` writes into the output directory, and what each holds.
PLINK2_FILES = {
    "pca.eigenvec": "scores of the included samples (with [fit]: fitted and projected), #FID "
    "IID PC1..PCK (plink2 layout)",
    "pca.eigenval": "eigenvalues, one per line (plink2 layout)",
    "pca.eigenvec.allele": "allele weights for plink2 --score variance-standardize",
    "pca.afreq": "centre frequencies for plink2 --read-freq",
}

#: How plink2 reproduces the scores from the files (``{last}`` is 5 + the number of PCs).
SCORE_COMMAND = (
    "plink2 --bfile NEW --read-freq pca.afreq --score pca.eigenvec.allele 2 5 header-read "
    "no-mean-imputation variance-standardize cols=+scoresums --score-col-nums 6-{last}"
)


def _number(x: float) -> str:
    """The shortest text that reads back as the same double.

    Callers pass Python floats from one ``tolist()``: formatting NumPy scalars one by one
    took several times as long on a weight file's million numbers.
    """
    return repr(float(x))


def _numbers(row: list[float]) -> str:
    """``row`` tab-separated, each number as :func:`_number` writes it."""
    return "\t".join(map(repr, row))


def _negated(text: str) -> str:
    """Tab-separated numbers of :func:`_numbers` with every sign flipped, as text.

    ``"0.5\t-1e-05"`` → ``"-0.5\t1e-05"``: three replacements over the line instead of
    formatting its numbers a second time.
    """
    flipped = ("\t" + text).replace("\t-", "\0").replace("\t", "\t-").replace("\0", "\t")
    return flipped[1:]


def _write_lines(path: Path, lines: Iterable[str]) -> None:
    with open(path, "x", encoding="utf-8") as f:
        for line in lines:
            f.write(line + "\n")


def _variant_ids(ds: xr.Dataset, inc: np.ndarray, alleles: np.ndarray) -> np.ndarray:
    """The store's ids of the analysed variants, or ``CHROM:POS:REF:ALT`` for all of them."""
    if "variant_id" in ds:
        ids = np.asarray(ds["variant_id"].values).astype(str)[inc]
        if not np.isin(ids, [".", ""]).any() and len(set(ids.tolist())) == len(ids):
            return ids
        logger.info("PLINK 2 files: variant ids missing or repeated; written as CHROM:POS:REF:ALT")
    contig = np.asarray(ds["variant_contig"].values).astype(str)[inc]
    pos = np.asarray(ds["variant_position"].values)[inc]
    return np.asarray(
        [f"{c}:{p}:{r}:{a}" for c, p, (r, a) in zip(contig, pos, alleles, strict=True)]
    )


def allele_weights(ds: xr.Dataset) -> tuple[np.ndarray, str | None]:
    """``(d, K)`` weights ``W = L √(2c(1 − c)) / s`` of the analysed variants, or why none.

    Returns
    -------
    W : (d, K) ndarray
        Empty when the reason is not None.
    reason : str or None
        Why ``plink2 --score variance-standardize`` cannot reproduce the scores.
    """
    params = json.loads(ds.attrs["params"])
    ploidy = params.get("ploidy")
    if ploidy not in (None, 2):
        return np.empty((0, 0)), f"plink2 standardises diploid calls (ploidy {ploidy})"
    if "variant_allele" not in ds or "variant_scale" not in ds:
        return np.empty((0, 0)), "the result stores no alleles or scales"
    inc = np.asarray(ds["variant_included"].values, bool)
    c = np.asarray(ds["variant_reference_frequency"].values, float)[inc]
    if not np.all((c > 0) & (c < 1)):
        bad = int(np.sum(~((c > 0) & (c < 1))))
        return np.empty((0, 0)), (
            f"{bad} centre frequencies lie outside (0, 1) (moved by the robust location), "
            "where plink2's variance-standardize has no scale"
        )
    s = np.asarray(ds["variant_scale"].values, float)[inc]
    L = np.asarray(ds["variant_loading"].values, float)[inc]
    return L * (np.sqrt(2.0 * c * (1.0 - c)) / s)[:, None], None


def write_plink2_files(ds: xr.Dataset, directory: Path) -> list[Path]:
    """Write :data:`PLINK2_FILES` of the result ``ds`` into ``directory``.

    Returns
    -------
    list of Path
        The files written (the two weight files are left out, with a log line, when
        :func:`allele_weights` gives a reason).
    """
    K = int(ds.sizes["component"])
    pcs = pc_names(K)
    written: list[Path] = []

    inc_s = np.asarray(ds["sample_included"].values, bool)
    iid = np.asarray(ds["sample_id"].values).astype(str)[inc_s]
    fid = (
        np.asarray(ds["sample_family_id"].values).astype(str)[inc_s]
        if "sample_family_id" in ds
        else iid
    )
    scores = np.asarray(ds["sample_score"].values, float)[inc_s]
    path = directory / "pca.eigenvec"
    _write_lines(
        path,
        [
            "\t".join(["#FID", "IID", *pcs]),
            *(
                "\t".join([f, i, *map(_number, row)])
                for f, i, row in zip(fid, iid, scores.tolist(), strict=True)
            ),
        ],
    )
    written.append(path)
    path = directory / "pca.eigenval"
    _write_lines(path, map(_number, np.asarray(ds["eigenvalue"].values, float).tolist()))
    written.append(path)

    W, reason = allele_weights(ds)
    if reason is not None:
        logger.warning("PLINK 2 allele weights not written: %s", reason)
        return written
    inc = np.asarray(ds["variant_included"].values, bool)
    alleles = np.asarray(ds["variant_allele"].values).astype(str)[inc][:, :2]
    ids = _variant_ids(ds, inc, alleles)
    contig = np.asarray(ds["variant_contig"].values).astype(str)[inc]
    c = np.asarray(ds["variant_reference_frequency"].values, float)[inc]

    def weight_lines() -> Iterable[str]:
        yield "\t".join(["#CHROM", "ID", "REF", "ALT", "A1", *pcs])
        rows = (W / 2).tolist()
        for chrom, vid, (ref, alt), w in zip(contig, ids, alleles, rows, strict=True):
            # the REF line standardises 2 − g, i.e. −(g − 2c)/σ: with weight −W/2 it adds
            # what the ALT line adds with +W/2, together W (g − 2c)/σ
            head = f"{chrom}\t{vid}\t{ref}\t{alt}"
            text = _numbers(w)
            yield f"{head}\t{ref}\t{_negated(text)}"
            yield f"{head}\t{alt}\t{text}"

    path = directory / "pca.eigenvec.allele"
    _write_lines(path, weight_lines())
    written.append(path)
    path = directory / "pca.afreq"
    _write_lines(
        path,
        [
            "#CHROM\tID\tREF\tALT\tALT_FREQS",
            *(
                f"{chrom}\t{vid}\t{ref}\t{alt}\t{_number(p)}"
                for chrom, vid, (ref, alt), p in zip(contig, ids, alleles, c.tolist(), strict=True)
            ),
        ],
    )
    written.append(path)
    return written
