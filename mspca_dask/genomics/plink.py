"""PLINK filesets (``.bed/.bim/.fam``; ``.pgen/.pvar/.psam``) read lazily, chunk by chunk.

:func:`open_plink` returns the same :class:`mspca_dask.genomics.VcfZarr` that
:func:`mspca_dask.genomics.open_vcf_zarr` returns for a store, so QC, standardisation, the fit
and projection are shared: a ``(variants, samples)`` float32 dask array of dosages with NaN for
missing calls, plus sample ids (``.fam`` IID) and family ids (FID), contigs, positions, ids and
alleles (``.bim``).
A ``.bed``'s genotypes are decoded here, one block of whole variants per dask task, by a
256-entry table from each byte to its four calls (NumPy releases the GIL in the lookup, so
the scheduler's threads decode side by side; ``bed-reader``'s reads held it and ran one at a
time); ``.pgen`` is read by ``pgenlib``.  Nothing is read when the fileset is opened.

Which allele is counted
-----------------------
A ``.bed`` stores, per call, the count of ``A1`` (the ``.bim``'s fifth column; PLINK 1.9 puts
the minor allele there).  bio2zarr's ``plink2zarr`` writes ``A1`` as the ALT allele and ``A2``
as REF, so the VCF Zarr dosage ("number of ALT alleles") of a converted fileset is the count of
``A1``: this module counts ``A1`` too and records ``variant_allele = [A2, A1]`` (REF, ALT), so
the two routes agree call by call (``tests/test_plink.py`` checks it).
"""

from __future__ import annotations

import csv
import hashlib
import os
from pathlib import Path
from typing import Any

import dask.array as da
import numpy as np

from ..errors import InputError, MSPCAError, SourceNotFoundError
from ..io import plink_fileset
from .cohort import VcfZarr

__all__ = ["plink_prefix", "is_plink_source", "open_plink", "plink_fingerprint"]

#: Target bytes of one float32 dosage block (variants x samples) read per task.
BLOCK_BYTES = 32 * 1024 * 1024
_MAGIC = b"\x6c\x1b\x01"


_BED_EXT = (".bed", ".bim", ".fam")
_PGEN_EXT = (".pgen", ".pvar", ".psam")


def _calls_table() -> np.ndarray:
    """``(256,)`` int32 whose four bytes are the A1 counts of a ``.bed`` byte's four calls.

    Two bits a call, the first sample in the lowest bits: ``00`` two copies of A1, ``01``
    missing (``-1``), ``10`` one, ``11`` none.  Gathered into an int32 array and viewed as
    int8, the bytes land in sample order whatever the machine's byte order.
    """
    code_to_count = np.array([2, -1, 1, 0], dtype=np.int8)
    codes = (np.arange(256)[:, None] >> (2 * np.arange(4))[None, :]) & 3
    return np.ascontiguousarray(code_to_count[codes]).view(np.int32).ravel()


_CALLS_TABLE = _calls_table()


def read_bed_calls(
    bed: str | os.PathLike[str], n_samples: int, start: int, stop: int
) -> np.ndarray:
    """``(stop − start, n_samples)`` int8 A1 counts of variants ``start:stop``, ``-1`` missing.

    One read of the variants' contiguous bytes and one table lookup per byte.
    """
    per_variant = (n_samples + 3) // 4
    raw = np.fromfile(
        bed, dtype=np.uint8, count=(stop - start) * per_variant, offset=3 + start * per_variant
    )
    calls = _CALLS_TABLE[raw].view(np.int8).reshape(stop - start, 4 * per_variant)
    return np.ascontiguousarray(calls[:, :n_samples])


def plink_prefix(source: Any) -> Path | None:
    """The fileset prefix if ``source`` names a PLINK fileset, else None.

    ``cohort.bed``, ``cohort.bim``, ``cohort.fam`` and the bare prefix ``cohort`` all name the
    PLINK 1 fileset ``cohort.{bed,bim,fam}`` (a bare prefix must not itself be a file or
    directory); ``cohort.pgen``/``.pvar``/``.psam`` (or a bare prefix with only a ``.pgen``)
    the PLINK 2 fileset.
    """
    fs = plink_fileset(source)
    return None if fs is None else fs[0]


def is_plink_source(source: Any) -> bool:
    """True if ``source`` is a path naming a PLINK 1 fileset (see :func:`plink_prefix`)."""
    return plink_prefix(source) is not None


def _paths(prefix: Path, exts: tuple[str, ...] = _BED_EXT) -> tuple[Path, Path, Path]:
    bed, bim, fam = (prefix.with_name(prefix.name + ext) for ext in exts)
    missing = [p.name for p in (bed, bim, fam) if not p.is_file()]
    if missing:
        raise SourceNotFoundError(
            f"the PLINK fileset {prefix} lacks {', '.join(missing)} (a fileset is "
            f"{prefix.name}.bed, .bim and .fam side by side)"
        )
    return bed, bim, fam


class _BedBlocks:
    """Array-like over a ``.bed``: ``[variants, samples]`` slices → float32 A1 counts, NaN missing.

    Holds only paths and counts (picklable for distributed workers); each read opens the file,
    reads the block's bytes (:func:`read_bed_calls`) and closes it.
    """

    def __init__(self, bed: Path, n_variants: int, n_samples: int, calls: bool = False) -> None:
        self.bed = str(bed)
        self.shape = (n_variants, n_samples)
        # calls=True: int8 hard calls, -1 missing (the layout of VcfZarr.calls)
        self.dtype = np.dtype(np.int8 if calls else np.float32)
        self.ndim = 2

    def __getitem__(self, key: tuple[slice, slice]) -> np.ndarray:
        v, s = key
        start, stop, step = v.indices(self.shape[0])
        calls = read_bed_calls(self.bed, self.shape[1], start, max(start, stop))[::step]
        if s != slice(None):
            calls = np.ascontiguousarray(calls[:, s])
        if self.dtype == np.int8:
            return calls
        dosage = calls.astype(np.float32)
        dosage[calls < 0] = np.nan
        return dosage


def _read_table(path: Path, n_cols: int, what: str) -> np.ndarray:
    """A whitespace-separated PLINK text table as a (rows, n_cols) array of str.

    Read by pandas' C tokenizer when every line has exactly ``n_cols`` fields (a biobank's
    ``.bim`` has millions of lines; splitting them in Python costs seconds); else line by line,
    which keeps the first ``n_cols`` fields of a longer line and names a short one.
    """
    import pandas as pd

    try:
        table = pd.read_csv(
            path,
            sep=r"\s+",
            header=None,
            dtype=str,
            na_filter=False,
            quoting=csv.QUOTE_NONE,
            encoding="utf-8",
            engine="c",
        ).to_numpy(dtype=object)
    except (pd.errors.ParserError, pd.errors.EmptyDataError):
        table = None
    # a short line comes back padded with "" (whitespace splitting never makes an empty field)
    if table is not None and table.shape[1] == n_cols and not (table == "").any():
        return table
    rows = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) < n_cols:
                raise InputError(
                    f"{path} line {i} has {len(fields)} fields; a {what} line has {n_cols}"
                )
            rows.append(fields[:n_cols])
    return np.asarray(rows, dtype=object).reshape(len(rows), n_cols)


def open_plink(source: str | os.PathLike[str], *, variants_chunk_size: int | None = None) -> Any:
    """Open a PLINK 1 fileset lazily as a :class:`~mspca_dask.genomics.VcfZarr`.

    Parameters
    ----------
    source : path
        ``cohort.bed`` (or ``.bim``/``.fam``) or the prefix ``cohort``.
    variants_chunk_size : int, optional
        Variants per dask block (default: blocks of about 32 MiB of float32 dosages).

    Returns
    -------
    VcfZarr
        ``dosage`` ``(n_variants, n_samples)`` float32 dask array (count of A1, the ALT
        allele; NaN for a missing call), ``sample_id`` (``.fam`` IID), ``family_id``
        (``.fam`` FID), ``variant_contig``,
        ``variant_position``, ``variant_id`` and ``variant_allele`` ``(n_variants, 2)`` =
        ``[A2, A1]`` = ``[REF, ALT]`` as bio2zarr's ``plink2zarr`` writes them.

    Raises
    ------
    SourceNotFoundError
        A file of the fileset is missing.
    InputError
        A malformed ``.bim``/``.fam``, a ``.bed`` that is not SNP-major PLINK 1 or whose size
        does not match the ``.bim`` and ``.fam``, or duplicate sample ids.
    """
    fs = plink_fileset(source)
    if fs is None:
        raise SourceNotFoundError(f"{source} does not name a PLINK fileset (.bed/.bim/.fam)")
    prefix, kind = fs
    if kind == "pgen":
        return _open_pgen(prefix, variants_chunk_size)
    bed, bim, fam = _paths(prefix)
    fam_t = _read_table(fam, 6, ".fam")
    bim_t = _read_table(bim, 6, ".bim")
    n, v = fam_t.shape[0], bim_t.shape[0]
    with open(bed, "rb") as f:
        magic = f.read(3)
    if magic != _MAGIC:
        raise InputError(
            f"{bed} is not a SNP-major PLINK 1 .bed (its first bytes are {magic!r}, not "
            f"{_MAGIC!r}); rewrite it with plink --make-bed"
        )
    expected = 3 + v * ((n + 3) // 4)
    size = bed.stat().st_size
    if size != expected:
        raise InputError(
            f"{bed} holds {size} bytes, but {v} variants (.bim) x {n} samples (.fam) need "
            f"{expected}: the fileset is truncated or its files do not belong together"
        )
    sample_id = np.asarray(fam_t[:, 1], dtype=object)
    if len(set(sample_id.tolist())) != n:
        raise InputError(f"{fam}: the sample ids (IID, column 2) are not unique")
    try:
        position = bim_t[:, 3].astype(np.int64)
    except ValueError as exc:
        raise InputError(f"{bim}: column 4 (base-pair position) must be integers: {exc}") from exc
    if variants_chunk_size is None:
        variants_chunk_size = max(1, BLOCK_BYTES // (4 * max(n, 1)))
    chunk = max(1, min(int(variants_chunk_size), max(v, 1)))
    reader = _BedBlocks(bed, v, n)
    dosage = da.from_array(reader, chunks=(chunk, max(n, 1)), lock=False, fancy=False)
    # The same counts as int8 hard calls: the job's statistics and compaction passes read
    # these, as they read a VCF Zarr store's call_genotype (one arithmetic for both routes).
    calls = da.from_array(
        _BedBlocks(bed, v, n, calls=True), chunks=(chunk, max(n, 1)), lock=False, fancy=False
    )
    alleles = np.stack([bim_t[:, 5], bim_t[:, 4]], axis=1).astype(object)
    return VcfZarr(
        dosage=dosage,
        calls=calls,
        sample_id=sample_id,
        variant_position=position,
        variant_contig=np.asarray(bim_t[:, 0], dtype=object),
        ploidy=2,
        variable="bed",
        group=None,
        attrs={"source": f"PLINK 1 fileset {prefix.name}"},
        where=str(prefix),
        variant_allele=alleles,
        variant_id=np.asarray(bim_t[:, 1], dtype=object),
        family_id=np.asarray(fam_t[:, 0], dtype=object),
    )


def plink_fingerprint(source: str | os.PathLike[str], *, mode: str = "listing") -> str:
    """SHA-256 of a fileset: ``.bim``/``.fam`` content, and the ``.bed`` size and mtime
    (``"listing"``) or its content (``"content"``)."""
    fs = plink_fileset(source)
    if fs is None:
        raise SourceNotFoundError(f"{source} does not name a PLINK fileset (.bed/.bim/.fam)")
    prefix, kind = fs
    bed, bim, fam = _paths(prefix, _PGEN_EXT if kind == "pgen" else _BED_EXT)
    h = hashlib.sha256(b"plink1" if kind == "bed" else b"plink2")
    for p in (bim, fam):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    st = bed.stat()
    h.update(f"{bed.name}:{st.st_size}".encode())
    if mode == "content":
        with open(bed, "rb") as f:
            while block := f.read(1 << 20):
                h.update(block)
    else:
        h.update(str(st.st_mtime_ns).encode())
    return h.hexdigest()


# ------------------------------------------------------------------------------ PLINK 2


class _PgenBlocks:
    """Array-like over a ``.pgen``: ``[variants, samples]`` → float32 ALT dosage, NaN missing.

    pgenlib's ``read_dosages_range`` gives the ALT (first ALT) dosage, a hardcall count where
    the file has no dosage track; ``-9`` is missing.
    """

    def __init__(self, pgen: Path, n_variants: int, n_samples: int, offsets: Any) -> None:
        self.pgen = str(pgen)
        self.offsets = offsets
        self.shape = (n_variants, n_samples)
        self.dtype = np.dtype(np.float32)
        self.ndim = 2

    def __getitem__(self, key: tuple[slice, slice]) -> np.ndarray:
        import pgenlib

        v, s = key
        start, stop, _ = v.indices(self.shape[0])
        out = np.empty((stop - start, self.shape[1]), dtype=np.float32)
        reader = pgenlib.PgenReader(
            self.pgen.encode(),
            raw_sample_ct=self.shape[1],
            variant_ct=self.shape[0],
            allele_idx_offsets=self.offsets,
        )
        try:
            if stop > start:
                reader.read_dosages_range(start, stop, out)
        finally:
            reader.close()
        out[out < 0] = np.nan
        return out[:, s]


def _read_header_table(path: Path, what: str) -> tuple[list[str], list[list[str]]]:
    """A ``.pvar``/``.psam``: the ``#``-header's column names and the rows (``##`` skipped)."""
    header: list[str] | None = None
    rows: list[list[str]] = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("##") or not line.strip():
                continue
            if line.startswith("#") and header is None and not rows:
                header = line[1:].split()
                continue
            rows.append(line.split())
    if header is None:
        raise InputError(
            f"{path} has no '#' header line; mspca_dask reads {what} files with a header "
            "(as plink2 writes them)"
        )
    return header, rows


def _column(header: list[str], rows: list[list[str]], name: str, path: Path) -> np.ndarray:
    if name not in header:
        raise InputError(f"{path} has no {name} column (header: {' '.join(header)})")
    i = header.index(name)
    try:
        return np.asarray([r[i] for r in rows], dtype=object)
    except IndexError as exc:
        raise InputError(f"{path}: a line has fewer fields than the header") from exc


def _open_pgen(prefix: Path, variants_chunk_size: int | None) -> Any:
    try:
        import pgenlib  # noqa: F401
    except ImportError as exc:
        raise MSPCAError(
            "reading PLINK 2 .pgen filesets needs pgenlib: pip install pgenlib"
        ) from exc
    pgen, pvar, psam = _paths(prefix, _PGEN_EXT)
    sh, srows = _read_header_table(psam, ".psam")
    sample_id = _column(sh, srows, "IID", psam)
    family_id = _column(sh, srows, "FID", psam) if "FID" in sh else None
    vh, vrows = _read_header_table(pvar, ".pvar")
    contig = _column(vh, vrows, "CHROM", pvar)
    try:
        position = _column(vh, vrows, "POS", pvar).astype(np.int64)
    except ValueError as exc:
        raise InputError(f"{pvar}: POS must be integers: {exc}") from exc
    ref = _column(vh, vrows, "REF", pvar)
    alts = [a.split(",") for a in _column(vh, vrows, "ALT", pvar)]
    ids = _column(vh, vrows, "ID", pvar) if "ID" in vh else None
    n, v = len(sample_id), len(position)
    if len(set(sample_id.tolist())) != n:
        raise InputError(f"{psam}: the sample ids (IID) are not unique")
    n_alt = np.asarray([len(a) for a in alts], dtype=np.int64)
    width = 1 + int(n_alt.max(initial=1))
    alleles = np.full((v, width), "", dtype=object)
    alleles[:, 0] = ref
    for i, a in enumerate(alts):
        alleles[i, 1 : 1 + len(a)] = [x if x != "." else "" for x in a]
    offsets = None
    if (n_alt > 1).any():
        offsets = np.zeros(v + 1, dtype=np.uintp)
        offsets[1:] = np.cumsum(np.maximum(2, 1 + n_alt))
    if variants_chunk_size is None:
        variants_chunk_size = max(1, BLOCK_BYTES // (4 * max(n, 1)))
    chunk = max(1, min(int(variants_chunk_size), max(v, 1)))
    reader = _PgenBlocks(pgen, v, n, offsets)
    dosage = da.from_array(reader, chunks=(chunk, max(n, 1)), lock=False, fancy=False)
    from importlib.metadata import version

    return VcfZarr(
        dosage=dosage,
        sample_id=sample_id,
        variant_position=position,
        variant_contig=contig,
        ploidy=2,
        variable="pgen",
        group=None,
        attrs={"source": f"PLINK 2 fileset {prefix.name} (pgenlib {version('pgenlib')})"},
        where=str(prefix),
        variant_allele=alleles,
        variant_id=ids,
        family_id=family_id,
    )
