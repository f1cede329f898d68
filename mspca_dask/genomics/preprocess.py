"""Genotype preprocessing: dosages, QC statistics, reference allele frequencies, standardisation.

Every function here is lazy (``dask.array`` only) or pure NumPy; nothing is computed until a
caller runs a pass (:class:`mspca_dask._execution.Executor` or ``dask.compute``).

Axes
----
Genotype stores (VCF Zarr, as written by bio2zarr) are laid out ``(variants, samples[,
ploidy])``.  The PCA takes **samples as the observations** (``n`` = number of samples, the rows
of ``X``) and **variants as the features** (``d`` = number of variants, the columns), so
:func:`standardize` returns the transpose, ``(samples, variants)``, and the scores of a fit are
per sample.

Centring — why the allele frequencies come from a *reference* set
------------------------------------------------------------------
Standard genotype PCA (EIGENSOFT's ``smartpca``, plink ``--pca``) centres each variant by the
mean over all samples, ``(g − 2p)/√(2p(1−p))`` with ``p`` the all-sample allele frequency
(Patterson, Price & Reich 2006).  With a reference set, the centre is the reference
population's (the scale stays the analysed samples' unless asked otherwise): the paper's
knockoff moves a mean-shift eigenvalue only through the overlap of its random membership with
the shifted group, which all-sample centring cancels, and the reference's samples are the
inliers' group of the verdict.  So :func:`standardize` takes the centre and the scale as
arguments, and callers compute them from a reference set of samples
(:func:`reference_frequency`).

Missing calls are mean-imputed *with the centre* inside the chunk function (their standardised
value is exactly 0), so no dense copy of the genotypes is ever made.

References
----------
Patterson N, Price AL, Reich D (2006). Population structure and eigenanalysis. PLoS Genet
2(12): e190.
"""

from __future__ import annotations

from dataclasses import dataclass

import dask.array as da
import numpy as np

from ..errors import DTypeError, InputError, ParameterError, ShapeError

__all__ = [
    "dosage_from_genotypes",
    "dosage_from_values",
    "genotype_statistics",
    "GenotypeStats",
    "reference_frequency",
    "patterson_scale",
    "standardize",
    "impute_and_standardize_block",
]


# --------------------------------------------------------------------------------------
# Dosages
# --------------------------------------------------------------------------------------


def _dosage_block(gt: np.ndarray) -> np.ndarray:
    """Chunk function: ``(v, s, ploidy)`` allele indices → ``(v, s)`` float32 dosage.

    The dosage is the number of non-reference alleles (index ``> 0``).  A call with any
    allele ``-1`` (missing) is NaN.  ``-2`` (bio2zarr's fill value for a sample of lower
    ploidy) is neither an allele nor missing: it is skipped.
    """
    missing = (gt == -1).any(axis=-1)
    dosage = (gt > 0).sum(axis=-1, dtype=np.int8).astype(np.float32)
    dosage[missing] = np.nan
    return dosage


def dosage_from_genotypes(call_genotype: da.Array) -> da.Array:
    """Alternate-allele dosage per variant and sample, lazily, with NaN for missing calls.

    Parameters
    ----------
    call_genotype : (n_variants, n_samples, ploidy) dask array of int
        Allele indices as in VCF Zarr: 0 the reference allele, ``> 0`` an alternate allele,
        ``-1`` missing, ``-2`` fill (mixed ploidy).

    Returns
    -------
    (n_variants, n_samples) dask array of float32
        Number of alternate alleles of each call (``0 .. ploidy``); NaN where any allele of
        the call is missing.  Same variant/sample chunks as the input.

    Raises
    ------
    ShapeError
        The input is not 3-D.
    DTypeError
        The input is not of an integer dtype.

    Notes
    -----
    Multi-allelic sites count every alternate allele (``g = #{alleles > 0}``): the dosage of
    "not the reference".  The missingness is read from the allele values themselves, which
    VCF Zarr's ``call_genotype_mask`` mirrors, so the mask array need not be read.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> gt = da.from_array(np.array([[[0, 1], [1, 1], [-1, -1]]], dtype=np.int8))
    >>> dosage_from_genotypes(gt).compute().tolist()
    [[1.0, 2.0, nan]]
    """
    call_genotype = checked_genotypes(call_genotype)
    return da.map_blocks(_dosage_block, call_genotype, drop_axis=2, dtype=np.float32)


def checked_genotypes(call_genotype: da.Array) -> da.Array:
    """``call_genotype`` checked (3-D, integer alleles) with the ploidy axis in one chunk.

    Raises
    ------
    ShapeError, DTypeError
    """
    if call_genotype.ndim != 3:
        raise ShapeError(
            "call_genotype must be 3-D, shaped (variants, samples, ploidy) "
            f"(got shape {call_genotype.shape})"
        )
    if call_genotype.dtype.kind not in "iu":
        raise DTypeError(
            f"call_genotype must hold integer allele indices (got dtype {call_genotype.dtype})"
        )
    if len(call_genotype.chunks[2]) > 1:
        call_genotype = call_genotype.rechunk({2: -1})
    return call_genotype


def _values_block(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float32, copy=True)
    x[~np.isfinite(x) | (x < 0)] = np.nan  # VCF Zarr float fill / missing are NaN payloads
    return x


def dosage_from_values(call_dosage: da.Array) -> da.Array:
    """Dosage from a stored dosage variable (e.g. ``call_DS``), NaN for missing, lazily.

    Parameters
    ----------
    call_dosage : (n_variants, n_samples) dask array of float
        Expected alternate-allele counts.  NaN (VCF Zarr's missing and fill values are NaN
        payloads), infinite or negative values are missing.

    Returns
    -------
    (n_variants, n_samples) dask array of float32
    """
    if call_dosage.ndim != 2:
        raise ShapeError(
            f"a dosage variable must be 2-D, shaped (variants, samples) (got shape "
            f"{call_dosage.shape})"
        )
    if call_dosage.dtype.kind not in "fiu":
        raise DTypeError(f"a dosage variable must be numeric (got dtype {call_dosage.dtype})")
    return da.map_blocks(_values_block, call_dosage, dtype=np.float32)


# --------------------------------------------------------------------------------------
# The statistics pass
# --------------------------------------------------------------------------------------


def genotype_statistics(
    dosage: da.Array, reference: np.ndarray | None = None
) -> dict[str, da.Array]:
    """The lazy products of the one QC statistics pass over a dosage array.

    Parameters
    ----------
    dosage : (n_variants, n_samples) dask array
        Dosages with NaN for missing calls (:func:`dosage_from_genotypes`).
    reference : (n_samples,) bool array, optional
        Reference samples; the ``ref_*`` products are restricted to them.  Omitted: no
        ``ref_*`` products.

    Returns
    -------
    dict of str to dask array
        ``alt_sum`` (variants,): sum of called dosages; ``alt_sq_sum`` (variants,): sum of
        their squares (zero-variance check); ``n_called`` (variants,): number of
        called samples; ``sample_n_called`` (samples,): called variants per sample;
        ``ref_alt_sum`` and ``ref_n_called`` (variants,) over the reference samples.
        Computing them together (one ``dask.compute``) reads the data once.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> g = da.from_array(np.array([[0.0, 1.0, np.nan], [2.0, 2.0, 1.0]], dtype=np.float32))
    >>> out = genotype_statistics(g, reference=np.array([True, True, False]))
    >>> {k: v.compute().tolist() for k, v in sorted(out.items())}  # doctest: +NORMALIZE_WHITESPACE
    {'alt_sq_sum': [1.0, 9.0], 'alt_sum': [1.0, 5.0], 'n_called': [2, 3],
     'ref_alt_sum': [1.0, 4.0], 'ref_n_called': [2, 2], 'sample_n_called': [2, 2, 1]}
    """
    called = ~da.isnan(dosage)
    filled = da.where(called, dosage, np.float32(0)).astype(np.float64)
    out = {
        "alt_sum": filled.sum(axis=1),
        "alt_sq_sum": (filled * filled).sum(axis=1),
        "n_called": called.sum(axis=1, dtype=np.int64),
        "sample_n_called": called.sum(axis=0, dtype=np.int64),
    }
    if reference is not None:
        ref = np.asarray(reference, dtype=bool)
        if ref.shape != (dosage.shape[1],):
            raise ShapeError(
                f"reference must be a boolean vector over the {dosage.shape[1]} samples "
                f"(got shape {ref.shape})"
            )
        ref_d = da.from_array(ref, chunks=(dosage.chunks[1],))[None, :]
        out["ref_alt_sum"] = da.where(ref_d, filled, 0.0).sum(axis=1)
        out["ref_n_called"] = (called & ref_d).sum(axis=1, dtype=np.int64)
    return out


@dataclass(frozen=True)
class GenotypeStats:
    """Results of the statistics pass (NumPy), and the QC quantities derived from them.

    Attributes
    ----------
    alt_sum, n_called : (n_variants,) ndarray
        Sum of called dosages and number of called samples, over the samples analysed.
    sample_n_called : (n_samples,) ndarray
        Called variants per sample.
    ref_alt_sum, ref_n_called : (n_variants,) ndarray or None
        The same over the reference samples.
    n_samples : int
        Samples the variant statistics were taken over.
    ploidy : int
        Alleles per call (2 for diploids).
    """

    alt_sum: np.ndarray
    n_called: np.ndarray
    sample_n_called: np.ndarray
    ref_alt_sum: np.ndarray | None
    ref_n_called: np.ndarray | None
    n_samples: int
    ploidy: int = 2
    alt_sq_sum: np.ndarray | None = None

    @classmethod
    def from_pass(
        cls, out: dict[str, np.ndarray], n_samples: int, ploidy: int = 2
    ) -> GenotypeStats:
        """Build from the computed products of :func:`genotype_statistics`."""
        return cls(
            alt_sum=np.asarray(out["alt_sum"], dtype=float),
            n_called=np.asarray(out["n_called"], dtype=np.int64),
            sample_n_called=np.asarray(out["sample_n_called"], dtype=np.int64),
            ref_alt_sum=None if "ref_alt_sum" not in out else np.asarray(out["ref_alt_sum"]),
            ref_n_called=None if "ref_n_called" not in out else np.asarray(out["ref_n_called"]),
            n_samples=int(n_samples),
            ploidy=int(ploidy),
            alt_sq_sum=None if "alt_sq_sum" not in out else np.asarray(out["alt_sq_sum"], float),
        )

    @property
    def allele_frequency(self) -> np.ndarray:
        """(n_variants,) alternate-allele frequency over the called samples (NaN if none)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.alt_sum / (self.ploidy * self.n_called)

    @property
    def minor_allele_frequency(self) -> np.ndarray:
        """(n_variants,) ``min(p, 1 − p)`` (0 where no sample is called)."""
        p = np.nan_to_num(self.allele_frequency, nan=0.0)
        return np.minimum(p, 1.0 - p)

    @property
    def constant_calls(self) -> np.ndarray:
        """(n_variants,) bool: every called dosage of the variant is the same value.

        Such a variant has zero variance once its missing calls are imputed (an all-het
        variant has MAF 0.5 and passes a MAF filter; one called sample is constant too), and
        nothing to contribute to a PCA.  Needs ``alt_sq_sum`` from the statistics pass.
        """
        if self.alt_sq_sum is None:
            raise InputError("these statistics were computed without the sums of squares")
        n = self.n_called.astype(float)
        # n Σg² − (Σg)² = n² var: exact in float64 for integer dosages; a relative tolerance
        # for real-valued ones (call_DS).
        spread = n * self.alt_sq_sum - self.alt_sum**2
        return spread <= 1e-9 * np.maximum(n * self.alt_sq_sum, 1.0)

    @property
    def missing_rate(self) -> np.ndarray:
        """(n_variants,) fraction of samples whose call is missing."""
        return 1.0 - self.n_called / max(self.n_samples, 1)

    def sample_call_rate(self, n_variants: int | None = None) -> np.ndarray:
        """(n_samples,) fraction of variants called in each sample."""
        nv = len(self.alt_sum) if n_variants is None else n_variants
        return self.sample_n_called / max(nv, 1)

    @property
    def reference_frequency(self) -> np.ndarray:
        """(n_variants,) frequency in the reference set, by :func:`reference_frequency`."""
        if self.ref_alt_sum is None or self.ref_n_called is None:
            raise InputError("these statistics were computed without a reference set of samples")
        return reference_frequency(self.ref_alt_sum, self.ref_n_called, ploidy=self.ploidy)


def reference_frequency(
    alt_sum: np.ndarray, n_called: np.ndarray, *, ploidy: int = 2
) -> np.ndarray:
    """Allele frequency with one pseudo-observation of each allele, ``(1 + Σg)/(2 + P·n)``.

    Parameters
    ----------
    alt_sum : (n_variants,) array
        Sum of the called dosages over the reference samples.
    n_called : (n_variants,) array
        Number of called reference samples.
    ploidy : int
        ``P``, alleles per call.

    Returns
    -------
    (n_variants,) ndarray
        Strictly inside ``(0, 1)``, so the Patterson scale ``√(P p(1 − p))`` is never 0.

    Notes
    -----
    The pseudocount is EIGENSOFT's (``smartpca`` uses ``p = (1 + Σg)/(2 + 2n)``).  It matters
    here because a variant can be common in the whole cohort (it passes the MAF filter) and
    absent from the reference set — exactly the variants that carry a shifted population.

    Examples
    --------
    >>> reference_frequency(np.array([0.0, 10.0]), np.array([4, 5])).round(3).tolist()
    [0.1, 0.917]
    """
    alt = np.asarray(alt_sum, dtype=float)
    n = np.asarray(n_called, dtype=float)
    return (1.0 + alt) / (2.0 + ploidy * n)


def patterson_scale(p: np.ndarray, *, ploidy: int = 2) -> np.ndarray:
    """Patterson's scale ``√(P p (1 − p))``: the binomial standard deviation of a dosage."""
    p = np.asarray(p, dtype=float)
    if np.any(~np.isfinite(p)) or np.any((p <= 0) | (p >= 1)):
        bad = int(np.flatnonzero(~np.isfinite(p) | (p <= 0) | (p >= 1))[0])
        raise InputError(
            f"allele frequencies must lie strictly between 0 and 1 to scale (variant index "
            f"{bad} has {float(p[bad])!r}); filter monomorphic variants or use reference_frequency"
        )
    return np.sqrt(ploidy * p * (1.0 - p))


# --------------------------------------------------------------------------------------
# Standardisation
# --------------------------------------------------------------------------------------


def impute_and_standardize_block(
    dosage: np.ndarray, centre: np.ndarray, scale: np.ndarray
) -> np.ndarray:
    """Chunk function: ``(v, s)`` dosages → ``(s, v)`` ``(g − centre)/scale``, missing → 0.

    ``centre`` and ``scale`` are ``(v,)`` blocks.  A missing call is imputed with the centre
    (the reference mean dosage), so its standardised value is exactly 0.
    """
    c = np.asarray(centre, dtype=np.float64)[:, None]
    s = np.asarray(scale, dtype=np.float64)[:, None]
    z = (dosage.astype(np.float64) - c) / s
    z[np.isnan(z)] = 0.0
    return np.ascontiguousarray(z.T)


def standardize(dosage: da.Array, centre: np.ndarray, scale: np.ndarray) -> da.Array:
    """Centre, scale and impute lazily; returns the ``(samples, variants)`` data of the PCA.

    Parameters
    ----------
    dosage : (n_variants, n_samples) dask array
        Dosages with NaN for missing calls.
    centre : (n_variants,) array
        Mean dosage to subtract, ``P·p`` with ``p`` the reference allele frequency.
    scale : (n_variants,) array
        Positive divisor, e.g. :func:`patterson_scale`.

    Returns
    -------
    (n_samples, n_variants) dask array of float64
        ``(g − centre)/scale`` with missing calls set to 0 (imputed with the centre), samples
        along axis 0 (the observations of the PCA).  One task per input chunk; nothing is
        materialised beyond a chunk.

    Raises
    ------
    ShapeError
        ``centre`` or ``scale`` does not have one value per variant.
    ParameterError
        ``scale`` has a non-positive or non-finite value.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> g = da.from_array(np.array([[0.0, 2.0, np.nan]], dtype=np.float32))
    >>> standardize(g, np.array([1.0]), np.array([0.5])).compute().ravel().tolist()
    [-2.0, 2.0, 0.0]
    """
    nv = dosage.shape[0]
    centre, scale = checked_centre_scale(int(nv), centre, scale)
    c = da.from_array(centre, chunks=(dosage.chunks[0],))
    s = da.from_array(scale, chunks=(dosage.chunks[0],))
    return da.blockwise(
        impute_and_standardize_block,
        "sv",
        dosage,
        "vs",
        c,
        "v",
        s,
        "v",
        dtype=np.float64,
        concatenate=True,
    )


def checked_centre_scale(
    nv: int, centre: np.ndarray, scale: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(centre, scale)`` as float64 ``(nv,)`` vectors, checked for standardising dosages.

    Raises
    ------
    ShapeError
        Not one value per variant.
    ParameterError
        A non-finite centre, or a scale that is not finite and positive.
    """
    centre = np.asarray(centre, dtype=np.float64)
    scale = np.asarray(scale, dtype=np.float64)
    for name, vec in (("centre", centre), ("scale", scale)):
        if vec.shape != (nv,):
            raise ShapeError(
                f"{name} must have one value per variant, shape ({nv},) (got {vec.shape})"
            )
    if not np.all(np.isfinite(centre)):
        raise ParameterError("centre contains NaN or infinite values")
    if not np.all(np.isfinite(scale) & (scale > 0)):
        raise ParameterError("scale must be finite and > 0 for every variant")
    return centre, scale
