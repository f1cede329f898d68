"""Genotype sources opened lazily: VCF Zarr stores (and PLINK filesets), and their fingerprints."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from typing import Any, TypedDict, Unpack

import dask.array as da
import numpy as np

from ..errors import (
    DTypeError,
    InputError,
    SourceNotFoundError,
    VariableNotFoundError,
)
from ..io import ZarrChunkReader, is_url
from ..io.chunks import ChunkDecoder, read_strings
from ..io.safety import check_chunks_present
from ..io.writing import str_objects
from . import compact as _compact
from . import plink, preprocess
from .cohort import VcfZarr

logger = logging.getLogger("mspca.genomics")


_META_NAMES = (".zarray", ".zattrs", ".zgroup", ".zmetadata", "zarr.json")


def input_fingerprint(
    store: str, *, mode: str = "listing", storage_options: Mapping[str, Any] | None = None
) -> str:
    """A SHA-256 fingerprint of a Zarr store, without reading its chunks (``"listing"``).

    ``"listing"`` hashes every metadata document's content and every chunk's key and size
    (a changed, added or removed chunk changes it); ``"content"`` hashes every byte of the
    store (a full read).  Object-store ETags are included when the filesystem reports them.
    """
    import fsspec

    if plink.is_plink_source(store):
        return plink.plink_fingerprint(store, mode=mode)
    fs, root = fsspec.core.url_to_fs(store, **dict(storage_options or {}))
    try:
        entries = fs.find(root, detail=True)
    except FileNotFoundError as exc:
        raise SourceNotFoundError(f"no VCF Zarr store at {store}: {exc}") from exc
    if not entries:
        raise SourceNotFoundError(f"no VCF Zarr store at {store} (nothing found there)")
    h = hashlib.sha256()
    root_s = root.rstrip("/")
    for name in sorted(entries):
        info = entries[name]
        rel = name[len(root_s) :].lstrip("/") if name.startswith(root_s) else name
        h.update(rel.encode())
        h.update(str(info.get("size")).encode())
        etag = info.get("ETag") or info.get("etag")
        if etag:
            h.update(str(etag).encode())
        if mode == "content" or rel.rsplit("/", 1)[-1] in _META_NAMES:
            with fs.open(name, "rb") as f:
                while block := f.read(1 << 20):
                    h.update(block)
    return h.hexdigest()


def open_vcf_zarr(
    store: str,
    *,
    genotype_variable: str = "auto",
    ploidy: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
    allow_missing_chunks: bool = False,
) -> VcfZarr:
    """Open a VCF Zarr store (bio2zarr's layout) lazily.

    Parameters
    ----------
    store : str
        Path or fsspec URL.
    genotype_variable : str
        ``"auto"``: ``call_dosage`` or ``call_DS`` if the store has one, else
        ``call_genotype``.  Or the name of one of them.
    ploidy : int, optional
        Alleles per call for a dosage variable (default 2); read from ``call_genotype``.
    storage_options : mapping, optional
        fsspec options for URLs.
    allow_missing_chunks : bool
        Read genotype chunks absent from the store as the fill value instead of refusing it.

    Raises
    ------
    SourceNotFoundError
        No Zarr group at ``store``.
    ChunkReadError
        A chunk of the genotype variable is missing from the store's listing and
        ``allow_missing_chunks`` is False.
    VariableNotFoundError
        A required variable (``sample_id``, ``variant_position``, the genotypes) is missing.
    """
    import zarr

    kwargs: dict[str, Any] = {}
    if storage_options and is_url(store):
        kwargs["storage_options"] = dict(storage_options)
    try:
        group = zarr.open_group(store, mode="r", **kwargs)
    except (FileNotFoundError, ValueError, KeyError) as exc:
        raise SourceNotFoundError(
            f"no VCF Zarr store at {store} ({type(exc).__name__}: {exc}); convert a VCF with "
            "bio2zarr's vcf2zarr (or tskit2zarr) first"
        ) from exc
    keys = set(group.keys())

    def need(name: str) -> Any:
        if name not in keys:
            raise VariableNotFoundError(
                f"{store} is not a VCF Zarr store: it lacks {name!r} (has: "
                f"{', '.join(sorted(keys)[:12])})"
            )
        return group[name]

    var: str | None
    if genotype_variable == "auto":
        var = next((v for v in ("call_dosage", "call_DS", "call_genotype") if v in keys), None)
        if var is None:
            raise VariableNotFoundError(
                f"{store} has none of call_genotype, call_dosage, call_DS; it is not a VCF "
                "Zarr store with genotypes"
            )
    else:
        var = genotype_variable
    arr = need(var)
    # zarr reads absent chunks as fill values: compare the genotypes' chunks with the listing.
    # (call_genotype_mask is not read here, and bio2zarr leaves its all-False chunks unwritten.)
    n_missing = check_chunks_present(
        arr, f"VCF Zarr {store}", var, allow_missing=allow_missing_chunks
    )
    if n_missing:
        logger.warning("%s: %d chunk(s) of %s read as fill values", store, n_missing, var)
    where = f"VCF Zarr {store} variable {var!r}"
    reader = ZarrChunkReader(arr, f"VCF Zarr {store}", var)
    calls: da.Array | None = None
    raw: ChunkDecoder | None = None
    lazy = da.from_array(reader, chunks=arr.chunks, lock=False, fancy=False)
    if lazy.ndim == 3:
        try:
            dosage = preprocess.dosage_from_genotypes(lazy)
            calls = _compact.calls_from_genotypes(lazy)
        except (DTypeError, InputError) as exc:
            raise InputError(f"{where}: {exc}") from exc
        ploidy_ = int(lazy.shape[2])
        if not n_missing:  # absent chunks are read by zarr, as fill values
            raw = ChunkDecoder.of(arr, f"VCF Zarr {store}", var)
    elif lazy.ndim == 2:
        dosage = preprocess.dosage_from_values(lazy)
        ploidy_ = 2 if ploidy is None else int(ploidy)
    else:
        raise InputError(
            f"{where} has shape {lazy.shape}: expected (variants, samples, ploidy) genotypes "
            "or (variants, samples) dosages"
        )
    sample_id = str_objects(need("sample_id")[:])
    position = np.asarray(need("variant_position")[:]).astype(np.int64)
    if "variant_contig" in keys and "contig_id" in keys:
        contig_arr: Any = group["contig_id"]
        index_arr: Any = group["variant_contig"]
        contig = str_objects(contig_arr[:])[np.asarray(index_arr[:]).astype(np.int64)]
    else:
        contig = np.full(position.shape, "unknown", dtype=object)
    nv, ns = (int(s) for s in dosage.shape)
    if sample_id.shape != (ns,) or position.shape != (nv,):
        raise InputError(
            f"{store}: sample_id has {sample_id.shape[0]} entries and variant_position "
            f"{position.shape[0]}, but {var} is shaped {tuple(lazy.shape)}"
        )
    if len(set(sample_id.tolist())) != ns:
        raise InputError(f"{store}: sample_id holds duplicate ids")
    attrs = dict(group.attrs.asdict()) if hasattr(group.attrs, "asdict") else dict(group.attrs)
    alleles = ids = None
    allele_arr: Any = group["variant_allele"] if "variant_allele" in keys else None
    id_arr: Any = group["variant_id"] if "variant_id" in keys else None
    if allele_arr is not None and tuple(allele_arr.shape)[:1] == (nv,):
        alleles = read_strings(allele_arr, str(store), "variant_allele")
        if alleles is None:
            alleles = str_objects(allele_arr[:])
    if id_arr is not None and tuple(id_arr.shape) == (nv,):
        ids = str_objects(id_arr[:])
    return VcfZarr(
        dosage=dosage,
        calls=calls,
        raw_genotypes=raw,
        sample_id=sample_id,
        variant_position=position,
        variant_contig=np.asarray(contig, dtype=object),
        ploidy=ploidy_,
        variable=var,
        group=group,
        attrs=attrs,
        where=store,
        variant_allele=alleles,
        variant_id=ids,
    )


class OpenOptions(TypedDict, total=False):
    """The keywords of :func:`open_vcf_zarr` that :func:`open_genotypes` passes on."""

    genotype_variable: str
    ploidy: int | None
    storage_options: Mapping[str, Any] | None
    allow_missing_chunks: bool


def open_genotypes(store: str, **options: Unpack[OpenOptions]) -> VcfZarr:
    """Open a VCF Zarr store or a PLINK 1 fileset (``x.bed`` or the prefix ``x``) lazily.

    Both give the same :class:`VcfZarr` (see :mod:`mspca_dask.genomics.plink` for the fileset).
    ``options`` are those of :func:`open_vcf_zarr` and apply to VCF Zarr only (a PLINK
    fileset has no chunks: a short ``.bed`` is an error when it is opened).
    """
    if plink.is_plink_source(store):
        return plink.open_plink(store)
    return open_vcf_zarr(store, **options)
