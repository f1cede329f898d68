"""The opened genotypes of a cohort, :class:`VcfZarr`, whichever format they were read from.

A VCF Zarr store (:func:`~mspca_dask.genomics.sources.open_vcf_zarr`) and a PLINK fileset
(:func:`~mspca_dask.genomics.plink.open_plink`) both open as this lazy container; QC, the
reference set and the analysis read only it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import dask.array as da
import numpy as np

from .._params import _suggest
from ..errors import InputError, VariableNotFoundError
from ..io.chunks import ChunkDecoder

__all__ = ["VcfZarr"]


@dataclass(frozen=True)
class VcfZarr:
    """A VCF Zarr store opened lazily.

    Attributes
    ----------
    dosage : (n_variants, n_samples) dask array of float32
        Alternate-allele dosage, NaN for missing calls (nothing read yet).
    sample_id : (n_samples,) ndarray of str
    variant_position : (n_variants,) ndarray of int
    variant_contig : (n_variants,) ndarray of str
        Contig names (``contig_id[variant_contig]``).
    ploidy : int
    variable : str
        The variable the dosage was made from (``call_genotype``, ``call_dosage``, ...).
    group : zarr.Group
        The opened store (to read further sample variables).
    attrs : dict
        Root attributes (``source``, ``vcf_zarr_version``, ...).
    variant_allele : (n_variants, n_alleles) ndarray of str, optional
        REF then ALT alleles (``""`` pads a missing ALT), when the store has them.
    variant_id : (n_variants,) ndarray of str, optional
    calls : (n_variants, n_samples) dask array of int8, or None
        The same dosages as int8 hard calls, ``-1`` missing, when the variable holds calls
        (``call_genotype``): the statistics and compaction passes read these (a quarter of
        the bytes of ``dosage``, and a table lookup instead of float arithmetic).
    raw_genotypes : ChunkDecoder, optional
        The genotypes' whole chunks, decoded straight into reused buffers, when the store's
        layout allows it (Zarr format 2, one compressor, no filters; every chunk present):
        the statistics pass reads these instead of ``calls``, with the same results.
    family_id : (n_samples,) ndarray of str, optional
        Family ids (FID) of a PLINK fileset's ``.fam`` (or a ``.psam`` with a FID column);
        None for a VCF Zarr store, which has none.
    """

    dosage: da.Array
    sample_id: np.ndarray
    variant_position: np.ndarray
    variant_contig: np.ndarray
    ploidy: int
    variable: str
    group: Any
    attrs: dict[str, Any]
    where: str
    variant_allele: np.ndarray | None = None
    variant_id: np.ndarray | None = None
    calls: da.Array | None = None
    raw_genotypes: ChunkDecoder | None = None
    family_id: np.ndarray | None = None

    @property
    def n_samples(self) -> int:
        return int(self.dosage.shape[1])

    @property
    def n_variants(self) -> int:
        return int(self.dosage.shape[0])

    def sample_variable(self, name: str) -> np.ndarray:
        """A ``(samples,)`` variable of the store, read whole (it is small)."""
        if self.group is None:
            raise VariableNotFoundError(
                f"{self.where} is not a Zarr store: it has no sample variable {name!r}"
            )
        if name not in self.group:
            raise VariableNotFoundError(
                f"the store {self.where} has no variable {name!r}"
                f"{_suggest(name, self.group.keys())}"
            )
        arr = self.group[name]
        if tuple(arr.shape) != (self.n_samples,):
            raise InputError(
                f"{self.where} variable {name!r} has shape {tuple(arr.shape)}; a sample "
                f"variable must have shape ({self.n_samples},)"
            )
        return np.asarray(arr[:])
