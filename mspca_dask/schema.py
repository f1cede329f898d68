"""The Dataset layouts we write, declared once: variables, attributes and their validation.

Every Dataset that mspca_dask writes or reads is declared here, in the spirit of sgkit's
``variables.py``: the result of :func:`mspca_dask.fit` (:data:`RESULT_VARIABLES`,
:data:`RESULT_ATTRS`, checked by :func:`validate_result_dataset`) and the output of the
genomics job (:data:`GENOMICS_VARIABLES`, :data:`GENOMICS_ATTRS`).  One type declares a
variable (:class:`VariableSpec`), one an attribute (:class:`AttrSpec`), and one routine,
:meth:`DatasetSchema.validate`, checks a Dataset against a layout.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from .errors import DTypeError, InputError

if TYPE_CHECKING:
    import xarray as xr

__all__ = [
    "VariableSpec",
    "AttrSpec",
    "DatasetSchema",
    "RESULT_VARIABLES",
    "RESULT_ATTRS",
    "RESULT_SCHEMA",
    "SCHEMA_VERSION",
    "GENOMICS_VARIABLES",
    "GENOMICS_ATTRS",
    "GENOMICS_SCHEMA",
    "GENOMICS_SCHEMA_VERSION",
    "validate_result_dataset",
    "attr_kind_ok",
    "resolve_dims",
    "STRING_KINDS",
    "variable_problem",
]

#: Version of the Dataset layout below.  Bump it when a variable or attribute changes
#: meaning; :meth:`MSPCAResult.from_dataset` refuses stores written by a newer layout.
SCHEMA_VERSION = 1

#: Placeholders in :data:`RESULT_VARIABLES` for the sample and feature dimension names,
#: which the user chooses (``sample_dim`` / ``feature_dim`` of the source).
SAMPLE_DIM = "{sample_dim}"
FEATURE_DIM = "{feature_dim}"
#: Fixed dimension names of the result.
COMPONENT_DIM = "component"
KNOCKOFF_DIM = "knockoff"
#: Eigenpairs of each knockoff spectrum: K' >= K of them (a knockoff's own spike can push an
#: invariant pair below the K-th place, so ``fit`` computes K + 2).
KNOCKOFF_COMPONENT_DIM = "knockoff_component"
#: Version of the genomics output layout (:data:`GENOMICS_VARIABLES`, :data:`GENOMICS_ATTRS`).
#: 2: the ``component`` coordinate numbers the PCs from 1 (0 in layout 1).
GENOMICS_SCHEMA_VERSION = 2

#: dtype kinds of a string variable: object (of str), fixed unicode/bytes, NumPy 2 StringDType.
STRING_KINDS = "OUST"


@dataclass(frozen=True)
class VariableSpec:
    """Declaration of one data variable of a Dataset.

    Attributes
    ----------
    dims : tuple of str
        Dimension names, in order; :data:`SAMPLE_DIM` and :data:`FEATURE_DIM` stand for the
        result's ``sample_dim`` and ``feature_dim``.
    kind : str
        Accepted NumPy dtype kinds (``"f"`` float, ``"b"`` bool, ``"iu"`` integers,
        :data:`STRING_KINDS` strings).
    required : bool
        Whether every Dataset of the layout has it (the result's ``location`` is absent when
        no location was subtracted).
    doc : str
        What it holds.
    field : str
        Name of the :class:`~mspca_dask.MSPCAResult` field it stores (``""``: the variable
        is not a field of the result, e.g. a genomics output).
    """

    dims: tuple[str, ...]
    kind: str
    required: bool
    doc: str
    field: str = ""


def resolve_dims(dims: tuple[str, ...], sample_dim: str, feature_dim: str) -> tuple[str, ...]:
    """``dims`` with :data:`SAMPLE_DIM` and :data:`FEATURE_DIM` replaced by the given names.

    Examples
    --------
    >>> resolve_dims((SAMPLE_DIM, "component"), "cells", "genes")
    ('cells', 'component')
    """
    return tuple(
        sample_dim if d == SAMPLE_DIM else feature_dim if d == FEATURE_DIM else d for d in dims
    )


class AttrSpec(NamedTuple):
    """Declaration of one attribute of a Dataset: ``(kind, required, doc)``.

    Attributes
    ----------
    kind : {"float", "int", "str"}
        Accepted Python kind (integers are accepted for ``"float"``; booleans never).
    required : bool
        Whether every Dataset of the layout has it (``random_state`` is omitted when None).
    doc : str
        What it holds.
    """

    kind: str
    required: bool
    doc: str


def attr_kind_ok(value: Any, kind: str) -> bool:
    """Whether an attribute value is of ``kind`` ("int", "float" or "str"; never a bool).

    Examples
    --------
    >>> attr_kind_ok(3, "float"), attr_kind_ok(True, "int"), attr_kind_ok("x", "str")
    (True, False, True)
    """
    if kind == "str":
        return isinstance(value, str)
    number = numbers.Integral if kind == "int" else numbers.Real
    return isinstance(value, number) and not isinstance(value, bool)


def variable_problem(var: Any, dims: tuple[str, ...], kinds: str) -> str | None:
    """What is wrong with a Dataset variable's dims or dtype kind (None: nothing).

    The text continues a sentence that names the variable, e.g. ``"must have dims ..."``.
    """
    if tuple(var.dims) != dims:
        return f"must have dims {dims} (got {tuple(var.dims)})"
    if var.dtype.kind not in kinds:
        return f"must have a dtype of kind {kinds!r} (got {var.dtype})"
    return None


@dataclass(frozen=True)
class DatasetSchema:
    """One Dataset layout: its variables, its attributes and the attribute of its version.

    Attributes
    ----------
    what : str
        How messages name a Dataset of this layout (``"the result Dataset"``).
    variables : mapping of str to VariableSpec
    attrs : mapping of str to AttrSpec
    version_attr : str
        The attribute holding the layout version the Dataset was written with.
    version : int
        The newest layout version this module reads.
    hint : str
        Appended to the message of a missing required attribute.
    dim_attrs : mapping of str to str
        Placeholder dimension names of :attr:`VariableSpec.dims` and the attribute naming
        the dimension each stands for (``{SAMPLE_DIM: "sample_dim"}``).
    """

    what: str
    variables: Mapping[str, VariableSpec]
    attrs: Mapping[str, AttrSpec]
    version_attr: str
    version: int
    hint: str = ""
    dim_attrs: Mapping[str, str] = field(default_factory=dict)

    def validate(self, ds: xr.Dataset) -> None:
        """Check ``ds``: required attributes and variables present, kinds, dims and version.

        Parameters
        ----------
        ds : xarray.Dataset

        Raises
        ------
        InputError
            A variable or attribute is missing, of the wrong kind, dims or dtype, or the
            layout is newer than this module; the message names it.
        DTypeError
            ``ds`` is not an ``xarray.Dataset``.
        """
        import xarray as xr

        if not isinstance(ds, xr.Dataset):
            raise DTypeError(f"expected an xarray.Dataset (got {type(ds).__name__})")
        what, attrs = self.what, ds.attrs
        for name, aspec in self.attrs.items():
            if name not in attrs:
                if aspec.required:
                    raise InputError(
                        f"{what} lacks the attribute {name!r} ({aspec.doc}){self.hint}"
                    )
                continue
            value = attrs[name]
            if not attr_kind_ok(value, aspec.kind):
                raise InputError(
                    f"{what} attribute {name!r} must be a {aspec.kind} "
                    f"(got {value!r} of type {type(value).__name__})"
                )
        version = int(attrs[self.version_attr])
        if version > self.version:
            raise InputError(
                f"{what} has layout version {version}, newer than this mspca_dask "
                f"understands ({self.version}); upgrade mspca_dask to read it"
            )
        rename = {d: str(attrs[a]) for d, a in self.dim_attrs.items()}
        for name, spec in self.variables.items():
            if name not in ds.data_vars:
                if spec.required:
                    raise InputError(f"{what} lacks the variable {name!r} ({spec.doc})")
                continue
            want = tuple(rename.get(d, d) for d in spec.dims)
            problem = variable_problem(ds[name], want, spec.kind)
            if problem:
                raise InputError(f"{what} variable {name!r} {problem}")


# --------------------------------------------------------------------------------------
# The result of mspca_dask.fit
# --------------------------------------------------------------------------------------

#: Every data variable of the result Dataset: name → dims, dtype kind, field, meaning.
RESULT_VARIABLES: dict[str, VariableSpec] = {
    "eigenvalue": VariableSpec(
        (COMPONENT_DIM,),
        "f",
        True,
        "Top-K eigenvalues of (X - location)ᵀ(X - location)/n, descending.",
        field="eigenvalues",
    ),
    "knockoff_eigenvalue": VariableSpec(
        (KNOCKOFF_DIM, KNOCKOFF_COMPONENT_DIM),
        "f",
        True,
        "Top-K' eigenvalues of each knockoff spectrum (K' >= K), descending.",
        field="knockoff_eigenvalues_all",
    ),
    "stable": VariableSpec(
        (COMPONENT_DIM,),
        "b",
        True,
        "True for the eigenpairs of the inliers' covariance: verdict 'covariance' or 'mixed'.",
        field="stable",
    ),
    "candidate": VariableSpec(
        (COMPONENT_DIM,),
        "b",
        True,
        "True for eigenvalues clearly above the Marchenko-Pastur edge.",
        field="candidate",
    ),
    "reason": VariableSpec(
        (COMPONENT_DIM,),
        STRING_KINDS,
        True,
        "Why each eigenpair got its verdict, in words.",
        field="reasons",
    ),
    "displacement": VariableSpec(
        (COMPONENT_DIM,),
        "f",
        True,
        "Median over knockoffs of |eigenvalue - matched knockoff eigenvalue|.",
        field="displacement",
    ),
    "eigenvector_overlap": VariableSpec(
        (COMPONENT_DIM,),
        "f",
        True,
        "Median over knockoffs of |<eigenvector, matched knockoff eigenvector>|.",
        field="eigenvector_overlap",
    ),
    "eigenvalue_bound": VariableSpec(
        (COMPONENT_DIM,),
        "f",
        True,
        "Bound on the error of each eigenvalue: the Ritz residual bound plus the estimated "
        "rounding of float32 products (0 for the exact solver).",
        field="eigenvalue_bounds",
    ),
    "eigenvector": VariableSpec(
        (COMPONENT_DIM, FEATURE_DIM),
        "f",
        True,
        "Direction (unit rows, deterministic signs) of each top-K eigenpair: pca_eigenvector, "
        "or for a stable pair carrying a spike within displaced groups that spike's "
        "eigenvector (the shift removed).",
        field="eigenvectors",
    ),
    "pca_eigenvector": VariableSpec(
        (COMPONENT_DIM, FEATURE_DIM),
        "f",
        False,
        "The covariance's own top-K eigenvectors (rows), partners of eigenvalue: plain PCA's "
        "axes; eigenvector differs from it where a stable pair carries a within-group spike "
        "(absent in results written before it was stored).",
        field="pca_eigenvectors",
    ),
    "score": VariableSpec(
        (SAMPLE_DIM, COMPONENT_DIM),
        "f",
        True,
        "Sample scores (X - location) @ eigenvector.T on all top-K eigenpairs.",
        field="scores",
    ),
    "location": VariableSpec(
        (FEATURE_DIM,),
        "f",
        False,
        "Location subtracted from every sample before the analysis (absent: none).",
        field="location",
    ),
    "shift_z": VariableSpec(
        (COMPONENT_DIM,),
        "f",
        False,
        "Shift between the sample groups along each eigenvector: Welch's F of the "
        "group means as an N(0, 1) deviate under no shift (NaN: no displaced group, nothing to "
        "measure); a pair is shifted above the Bonferroni critical value at level alpha over "
        "the candidates.",
        field="shift_z",
    ),
    "component_variance": VariableSpec(
        (COMPONENT_DIM,),
        "f",
        False,
        "Variance of each stable pair's component within the groups: the eigenvalue of the "
        "within-group spike it carries, else its eigenvalue; NaN where the pair is not "
        "stable. The components are ordered by it (absent in results written before it was "
        "stored: eigenvalue order).",
        field="component_variances",
    ),
    "verdict": VariableSpec(
        (COMPONENT_DIM,),
        STRING_KINDS,
        False,
        "Verdict of each eigenpair: 'covariance', 'mean shift', 'mixed', 'undetermined' or "
        "'bulk' (absent in results written before it was stored: derived from stable and "
        "candidate).",
        field="pair_verdicts",
    ),
    "group": VariableSpec(
        (SAMPLE_DIM,),
        "iu",
        False,
        "Each sample's group from the verdict's group test, 0 for the inliers (absent in "
        "results written before it was stored).",
        field="groups",
    ),
    "knockoff_match": VariableSpec(
        (KNOCKOFF_DIM, COMPONENT_DIM),
        "i",
        False,
        "Index (along knockoff_component) of the knockoff eigenpair matched, by eigenvector, "
        "to each eigenpair.",
        field="knockoff_match",
    ),
}


#: Every attribute of the result Dataset: name → kind, whether required, meaning.
RESULT_ATTRS: dict[str, AttrSpec] = {
    "noise_variance": AttrSpec("float", True, "Estimated noise variance σ² of the bulk."),
    "total_variance": AttrSpec(
        "float",
        False,
        "Total variance about the location, tr((X - location)ᵀ(X - location))/n, the sum of "
        "all eigenvalues (omitted in results written before it was stored).",
    ),
    "group_p_value": AttrSpec(
        "float",
        False,
        "p-value of the verdict's group test (omitted in results written before it was stored).",
    ),
    "group_centre": AttrSpec(
        "str",
        False,
        "'origin' when the data were centred on their inliers and the group test's null was "
        "one group about the origin (omitted otherwise).",
    ),
    "within_samples": AttrSpec(
        "int",
        False,
        "Samples whose covariance within their groups gives the covariance components: all "
        "but those of groups spread along their own shift (omitted with no displaced group).",
    ),
    "threshold": AttrSpec("float", True, "Invariance radius ε on the eigenvalue scale."),
    "knockoff_strength": AttrSpec("float", True, "Knockoff strength θ'²."),
    "mp_edge": AttrSpec("float", True, "Marchenko-Pastur upper edge σ²(1 + √(d/n))²."),
    "n_samples": AttrSpec("int", True, "Number of samples n."),
    "n_features": AttrSpec("int", True, "Number of features d."),
    "solver": AttrSpec("str", True, "Eigensolver used ('exact' or 'randomized')."),
    "n_passes": AttrSpec("int", True, "Number of passes over the data."),
    "random_state": AttrSpec("int", False, "Seed of the fit (omitted when None)."),
    "diagnostics": AttrSpec(
        "str",
        False,
        "Ways the data do not fit the spiked model, one per line (omitted when none).",
    ),
    "params": AttrSpec("str", True, "All fit parameters, as a JSON object."),
    "sample_dim": AttrSpec("str", True, "Name of the sample dimension."),
    "feature_dim": AttrSpec("str", True, "Name of the feature dimension."),
    "mspca_dask_version": AttrSpec("str", True, "Version of mspca_dask that wrote it."),
    "mspca_schema_version": AttrSpec("int", True, "Version of this Dataset layout."),
}

RESULT_SCHEMA = DatasetSchema(
    "the result Dataset",
    RESULT_VARIABLES,
    RESULT_ATTRS,
    version_attr="mspca_schema_version",
    version=SCHEMA_VERSION,
    hint="; it was not written by MSPCAResult.to_dataset",
    dim_attrs={SAMPLE_DIM: "sample_dim", FEATURE_DIM: "feature_dim"},
)


def validate_result_dataset(ds: xr.Dataset) -> None:
    """Check that ``ds`` follows the result layout of :data:`RESULT_VARIABLES`.

    Parameters
    ----------
    ds : xarray.Dataset
        A Dataset made by :meth:`MSPCAResult.to_dataset` or read from a result store.

    Raises
    ------
    InputError
        A variable or attribute is missing, has the wrong dimensions or dtype, or the
        layout was written by a newer version of mspca_dask.  The message names it.
    DTypeError
        ``ds`` is not an ``xarray.Dataset``.
    """
    RESULT_SCHEMA.validate(ds)
    attrs = ds.attrs
    sample_dim, feature_dim = attrs["sample_dim"], attrs["feature_dim"]
    for dim, size in (("n_samples", sample_dim), ("n_features", feature_dim)):
        if ds.sizes.get(size) != attrs[dim]:
            raise InputError(
                f"the result Dataset attribute {dim!r} = {attrs[dim]} does not match the "
                f"size of its dimension {size!r} ({ds.sizes.get(size)})"
            )


# --------------------------------------------------------------------------------------
# The output of the genomics job
# --------------------------------------------------------------------------------------


STRING_KINDS = "OUST"

#: Every variable of the output Dataset (validated on the way out and on the way in).
GENOMICS_VARIABLES: dict[str, VariableSpec] = {
    "sample_id": VariableSpec(("samples",), STRING_KINDS, True, "Sample ids of the store."),
    "sample_included": VariableSpec(
        ("samples",),
        "b",
        True,
        "True if the sample passed QC and has a score: fitted, or (with [fit]) projected.",
    ),
    "sample_fitted": VariableSpec(
        ("samples",),
        "b",
        False,
        "True for the samples the PCA was fitted on ([fit]; the other included samples were "
        "projected onto it). Absent without [fit]: every included sample was fitted.",
    ),
    "sample_is_reference": VariableSpec(
        ("samples",),
        "b",
        True,
        "True for the reference samples whose allele frequencies centred the data "
        "(all False with reference_mode 'auto').",
    ),
    "sample_call_rate": VariableSpec(
        ("samples",), "f", True, "Fraction of all variants called in the sample."
    ),
    "sample_label": VariableSpec(
        ("samples",), STRING_KINDS, False, "Metadata label used to colour the plots (color_by)."
    ),
    "sample_family_id": VariableSpec(
        ("samples",), STRING_KINDS, False, "Family id (FID) of a PLINK fileset's samples."
    ),
    "sample_score": VariableSpec(
        ("samples", "component"),
        "f",
        True,
        "Score of each sample on each eigenpair (NaN for excluded samples).",
    ),
    "variant_position": VariableSpec(("variants",), "iu", True, "Variant position."),
    "variant_contig": VariableSpec(
        ("variants",), STRING_KINDS, True, "Contig name of the variant."
    ),
    "variant_allele_frequency": VariableSpec(
        ("variants",), "f", True, "Alternate-allele frequency over the analysed samples."
    ),
    "variant_reference_frequency": VariableSpec(
        ("variants",),
        "f",
        True,
        "Frequency p whose dosage P*p centred the variant (reference set, or the robust "
        "location in 'auto' mode); NaN for excluded variants.",
    ),
    "variant_scale": VariableSpec(
        ("variants",),
        "f",
        False,
        "Divisor of the centred dosage (Patterson scale); NaN for excluded variants.  With "
        "variant_reference_frequency and variant_loading it projects new samples.",
    ),
    "variant_allele": VariableSpec(
        ("variants", "alleles"),
        STRING_KINDS,
        False,
        "REF then ALT allele(s) of the store ('' pads); the dosage counts the ALT allele.",
    ),
    "variant_id": VariableSpec(("variants",), STRING_KINDS, False, "Variant id of the store."),
    "variant_missing_rate": VariableSpec(
        ("variants",), "f", True, "Fraction of analysed samples with a missing call."
    ),
    "variant_included": VariableSpec(
        ("variants",), "b", True, "True if the variant passed QC and was analysed."
    ),
    "variant_loading": VariableSpec(
        ("variants", "component"),
        "f",
        True,
        "Unit eigenvector entry of each standardised variant (NaN for excluded variants).",
    ),
    "eigenvalue": VariableSpec(
        ("component",), "f", True, "Top-K eigenvalues of the sample covariance, descending."
    ),
    "knockoff_eigenvalue": VariableSpec(
        ("knockoff", "component"),
        "f",
        True,
        "Where each eigenvalue went under each knockoff (the eigenpair matched by eigenvector).",
    ),
    "stable": VariableSpec(
        ("component",), "b", True, "True for covariance (knockoff-invariant) eigenpairs."
    ),
    "candidate": VariableSpec(
        ("component",), "b", True, "True for eigenvalues clearly above the Marchenko-Pastur edge."
    ),
    "verdict": VariableSpec(
        ("component",),
        STRING_KINDS,
        True,
        "'covariance', 'mean shift', 'mixed', 'undetermined' or 'bulk' (older outputs say "
        "'stable' for 'covariance').",
    ),
    "reason": VariableSpec(("component",), STRING_KINDS, True, "Why, in words."),
    "displacement": VariableSpec(
        ("component",), "f", True, "Median |eigenvalue - matched knockoff eigenvalue|."
    ),
    "eigenvector_overlap": VariableSpec(
        ("component",), "f", True, "Median |<eigenvector, matched knockoff eigenvector>|."
    ),
    "variance_explained": VariableSpec(
        ("component",),
        "f",
        False,
        "Share of the total variance (total_variance) of each eigenpair: eigenvalue / total.",
    ),
    "ld_top_share": VariableSpec(
        ("component",),
        "f",
        False,
        "LD diagnostic: share of the PC's ld_top_variants largest |loadings| that lie in its "
        "densest window of ld_window_bp base pairs of one contig.",
    ),
    "ld_background_share": VariableSpec(
        ("component",),
        "f",
        False,
        "Share of all analysed variants in that window (what diffuse loadings would put there).",
    ),
    "ld_window_contig": VariableSpec(
        ("component",), STRING_KINDS, False, "Contig of the PC's densest window."
    ),
    "ld_window_start": VariableSpec(
        ("component",), "iu", False, "Position of the first top variant in that window."
    ),
    "ld_window_end": VariableSpec(
        ("component",), "iu", False, "Position of the last top variant in that window."
    ),
    "ld_region_warning": VariableSpec(
        ("component",),
        "b",
        False,
        "True where the PC looks driven by one region: ld_top_share >= 0.5 and >= 5 times "
        "ld_background_share (mspca_dask.genomics.ld).",
    ),
}

#: Every attribute of the output Dataset: name → (kind, required, meaning).
GENOMICS_ATTRS: dict[str, AttrSpec] = {
    "mspca_genomics_schema_version": AttrSpec("int", True, "Version of this layout."),
    "job_name": AttrSpec("str", True, "[job] name."),
    "job_fingerprint": AttrSpec(
        "str", True, "SHA-256 of input fingerprint + parameters + versions."
    ),
    "input_fingerprint": AttrSpec("str", True, "SHA-256 of the input store (listing or content)."),
    "input_store": AttrSpec(
        "str", True, "Path or URL of the VCF Zarr store, or the PLINK fileset."
    ),
    "input_variable": AttrSpec("str", True, "Variable the dosages were made from."),
    "reference_mode": AttrSpec("str", True, "samples | file | variable | metadata | auto."),
    "reference_description": AttrSpec("str", True, "Which reference set centred the data."),
    "n_reference_samples": AttrSpec("int", True, "Reference samples used (0 in 'auto' mode)."),
    "scale_from": AttrSpec("str", True, "'reference' or 'all': whose frequencies gave the scale."),
    "params": AttrSpec("str", True, "The job's parameters, JSON."),
    "random_state": AttrSpec("int", True, "Seed of the fit."),
    "versions": AttrSpec("str", True, "Versions of Python and the libraries, JSON."),
    "timings": AttrSpec("str", True, "Seconds per phase, JSON."),
    "qc_counts": AttrSpec("str", True, "Counts of samples and variants per QC outcome, JSON."),
    "created_utc": AttrSpec("str", True, "When the result was computed (ISO 8601, UTC)."),
    "noise_variance": AttrSpec("float", True, "Estimated noise variance of the bulk."),
    "total_variance": AttrSpec(
        "float",
        False,
        "Sum of all eigenvalues: the trace of Z'Z/n of the centred, standardised genotypes.",
    ),
    "mp_edge": AttrSpec("float", True, "Marchenko-Pastur upper edge."),
    "threshold": AttrSpec("float", True, "Invariance radius epsilon."),
    "knockoff_strength": AttrSpec("float", True, "Knockoff strength theta'^2."),
    "n_samples_analysed": AttrSpec("int", True, "n: samples analysed (the observations)."),
    "n_variants_analysed": AttrSpec("int", True, "d: variants analysed (the features)."),
    "n_imputed_calls": AttrSpec("int", True, "Missing calls imputed with the reference frequency."),
    "n_passes": AttrSpec("int", True, "Passes over the genotypes (statistics, compaction, fit)."),
    "n_passes_detail": AttrSpec(
        "str", False, "How n_passes splits between QC, the fit, the comparison."
    ),
    "axes": AttrSpec("str", True, "Which axis is n and which is d."),
    "centring_note": AttrSpec("str", True, "Why the frequencies come from a reference set."),
    "centring_comparison": AttrSpec(
        "str", False, "The fit with all-sample centring, JSON (report)."
    ),
    "ld_top_variants": AttrSpec(
        "int", False, "Largest |loadings| per PC counted by the LD diagnostic."
    ),
    "ld_window_bp": AttrSpec("int", False, "Window length of the LD diagnostic (base pairs)."),
    "fit_description": AttrSpec("str", False, "[fit]: which samples the PCA was fitted on."),
    "n_samples_projected": AttrSpec(
        "int", False, "[fit]: samples that passed QC and were projected, not fitted."
    ),
    "projection_method": AttrSpec(
        "str", False, "[fit]: how the projected samples were scored ('corrected' or 'plain')."
    ),
    "projection_shrinkage_factor": AttrSpec(
        "str",
        False,
        "[fit]: the shrinkage factor per PC (PC1 first, JSON) that corrected scores divide by.",
    ),
    "model_fit_warning": AttrSpec(
        "str", False, "The fit's ModelFitWarning(s), one per line (the log carries them too)."
    ),
}

GENOMICS_SCHEMA = DatasetSchema(
    "the genomics result",
    GENOMICS_VARIABLES,
    GENOMICS_ATTRS,
    version_attr="mspca_genomics_schema_version",
    version=GENOMICS_SCHEMA_VERSION,
)
