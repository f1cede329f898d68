"""The result of a Mean-Shift PCA fit: :class:`MSPCAResult`, its Dataset schema and storage.

An :class:`MSPCAResult` holds small NumPy arrays only (``K`` eigenpairs, ``B`` knockoffs,
``n`` sample scores, ``d`` loadings); it never keeps a reference to the data.  It converts
to and from an ``xarray.Dataset`` whose layout is declared once, in :data:`RESULT_VARIABLES`
and :data:`RESULT_ATTRS` (in the spirit of sgkit's ``variables.py``), and every Dataset that
goes out (:meth:`MSPCAResult.to_dataset`) or comes in (:meth:`MSPCAResult.from_dataset`) is
validated against that declaration.  Storage goes through :mod:`mspca_dask.io`, which writes
Zarr stores atomically and refuses incomplete ones.

Samples are the observations (``n``, rows of the data), features the variables (``d``,
columns).  Eigenpairs are indexed from 0 in descending order of eigenvalue everywhere
(arrays, :meth:`MSPCAResult.summary`, :meth:`MSPCAResult.plot`).
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import DTypeError, InputError, ParameterError, ShapeError
from .io.writing import str_objects
from .schema import (
    COMPONENT_DIM,
    KNOCKOFF_DIM,
    RESULT_ATTRS,
    RESULT_VARIABLES,
    SCHEMA_VERSION,
    STRING_KINDS,
    resolve_dims,
    validate_result_dataset,
)
from .verdict import VERDICTS

if TYPE_CHECKING:
    import dask.array as da
    import xarray as xr
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from numpy.typing import ArrayLike

__all__ = [
    "MSPCAResult",
    "open_result",
    "RESULT_VARIABLES",
    "RESULT_ATTRS",
    "SCHEMA_VERSION",
    "VERDICTS",
    "validate_result_dataset",
]


#: Colour of each verdict (:data:`VERDICTS`, the order of legends) in :meth:`MSPCAResult.plot`.
_VERDICT_COLOURS = {
    "covariance": "tab:blue",
    "mean shift": "tab:red",
    "mixed": "tab:purple",
    "undetermined": "tab:orange",
    "bulk": "tab:gray",
}

#: Footnote of :meth:`MSPCAResult.summary`: the matched knockoff eigenvalue is not stored.
_KNOCKOFF_NOTE = (
    "knockoff = where the eigenvalue went under the first knockoff (the eigenpair matched by "
    "eigenvector); displacement and overlap are medians over all knockoffs"
)

#: Footer of :meth:`MSPCAResult.summary`: what every column of its table means.
_COLUMNS_NOTE = (
    "columns: eigenvalue = of the covariance about the location; knockoff, displacement = "
    "where a knockoff mean shift moved it and by how much (medians over knockoffs); overlap = "
    "|cos| of its eigenvector with the matched knockoff one; bound = certified error of the "
    "eigenvalue; shift z = Welch's F of the group means along the eigenvector as an "
    "N(0, 1) deviate (nan: no displaced group, nothing to measure); verdict = covariance (a "
    "spike of the within-group covariance, the groups not shifted along it), mean shift (the "
    "groups shifted along it, no spike once their means are removed), mixed (shifted, and a "
    "spike of the within-group covariance too), undetermined (neither) or bulk (not above the "
    "Marchenko–Pastur edge); reason = what decided it"
)

_FLOAT_ATTRS = tuple(k for k, v in RESULT_ATTRS.items() if v.kind == "float")


# --------------------------------------------------------------------------------------
# The result
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False, repr=False)
class MSPCAResult:
    """Result of :func:`mspca_dask.fit`: every eigenpair, its verdict, and provenance.

    ``K`` is the number of computed eigenpairs, ``B`` the number of knockoffs, ``n`` the
    number of samples and ``d`` the number of features.  Eigenpairs are in descending
    order of eigenvalue.

    Attributes
    ----------
    eigenvalues : (K,) ndarray
        Top eigenvalues ``λ̃`` of the covariance ``(X - location)ᵀ(X - location)/n``: the
        ``n_components`` the fit asked for, then, when pairs that carry no within-group spike
        (mean shift, undetermined) took places among them, the within-group covariance
        spikes they pushed out (at most one per such pair, with that covariance's
        eigenvalues and vectors and no knockoff partner).
    knockoff_eigenvalues_all : (B, K') ndarray
        Top-K' eigenvalues ``λ'`` of each knockoff spectrum (``fit``: ``n_components + 2``,
        at most the smaller dimension), so that an eigenpair pushed down by the knockoff's
        own spike still has its partner; :attr:`matched_knockoff_eigenvalues` is ``(B, K)``.
    stable : (K,) bool ndarray
        True for the eigenpairs of the inliers' covariance: verdict ``"covariance"`` or
        ``"mixed"`` (:attr:`verdicts`).
    candidate : (K,) bool ndarray
        True for eigenvalues clearly above the Marchenko–Pastur edge (only those are
        tested; the others are bulk).
    reasons : (K,) object ndarray of str
        Why each eigenpair got its verdict.
    displacement : (K,) ndarray
        Median over knockoffs of ``|λ̃ᵢ - λ'ⱼ|`` for the matched knockoff eigenvalue.
    eigenvector_overlap : (K,) ndarray
        Median over knockoffs of ``|⟨ũᵢ, u'ⱼ⟩|`` for the matched knockoff eigenvector.
    eigenvalue_bounds : (K,) ndarray
        Bound on the error of each eigenvalue (0 for the exact solver): the Ritz residual
        bound ``min(r, r²/gap)`` (for a run of close eigenvalues apart from the rest, its
        block form) plus the estimated rounding of the passes' products.  The
        randomized solver drives it below its target for the eigenvalues above the bulk edge;
        bulk eigenvalues keep looser bounds.
    eigenvectors : (K, d) ndarray
        The direction of each eigenpair, unit rows with deterministic signs: the top-K
        eigenvectors of the covariance (:attr:`pca_eigenvectors`), except that a stable pair
        carrying a covariance spike within displaced groups gets that spike's eigenvector,
        the groups' shift removed.
    scores : (n, K) ndarray
        Sample scores ``(X - location) @ eigenvectors.T`` on all top-K eigenpairs.
    pca_eigenvectors : (K, d) ndarray or None
        The top-K eigenvectors of the covariance ``(X - location)ᵀ(X - location)/n`` as
        rows, the partners of :attr:`eigenvalues`: plain PCA's axes (the same as
        :attr:`eigenvectors` where no displaced group was found).  None in results written
        before it was stored.
    component_variances : (K,) ndarray or None
        The variance of each stable pair's component with the groups' shifts removed: the
        eigenvalue of the within-group spike it carries (at the inliers' scale), else its
        eigenvalue; NaN where the pair is not stable.  :attr:`components` are ordered by
        it: a spike's order among the covariance components is its order in the covariance
        within the groups, which a group's shift or extra spread does not change.  None in
        results written before it was stored.
    location : (d,) ndarray or None
        Location subtracted from every sample before the analysis; None when the data
        were analysed as they are.
    noise_variance : float
        Estimated noise variance ``σ²`` of the bulk.
    threshold : float
        Invariance radius ``ε`` on the eigenvalue scale.
    knockoff_strength : float
        Knockoff strength ``θ'²``.
    mp_edge : float
        Marchenko–Pastur upper edge ``σ²(1 + √(d/n))²``.
    n_samples, n_features : int
        ``n`` and ``d``.
    solver : str
        Eigensolver used (``"exact"`` or ``"randomized"``).
    n_passes : int
        Number of passes over the data.
    random_state : int or None
        Seed of the fit.
    params : dict
        All fit parameters, JSON-serialisable, for provenance.
    sample_coords : (n,) ndarray or None
        Labels of the samples, if the source had them.
    feature_coords : (d,) ndarray or None
        Labels of the features, if the source had them.
    sample_dim, feature_dim : str
        Names of the sample and feature dimensions.
    knockoff_match : (B, K) int ndarray or None
        Index of the knockoff eigenpair matched to each eigenpair, per knockoff; ``-1``
        for a within-group spike that follows the top eigenpairs (no knockoff partner).
    shift_z : (K,) ndarray or None
        Evidence of a shift between the groups along each eigenvector: Welch's F of the
        group means as a normal deviate, ``N(0, 1)`` without a shift along it
        (:func:`mspca_dask.verdict.shift_statistics`).  NaN where no displaced group was
        found (there is nothing to measure); None in results written before it existed.
    diagnostics : str or None
        Ways the data do not fit the spiked model (heteroscedastic noise, a bulk far from
        Marchenko–Pastur, too few samples or features), one per line; each was also issued
        as a :class:`~mspca_dask.errors.ModelFitWarning`.  None when none was seen.
    total_variance : float or None
        Total variance about the location, ``tr((X - location)ᵀ(X - location)) / n``: the sum
        of all ``min(n, d)`` eigenvalues, so ``eigenvalues / total_variance`` is each
        eigenpair's share of the variance (scikit-learn's ``explained_variance_ratio_``).
        None in results written before it was stored.
    pair_verdicts : (K,) object ndarray of str or None
        The verdict of each eigenpair, one of :data:`VERDICTS`; read it through
        :attr:`verdicts`, which also serves results written before it was stored (None).
    groups : (n,) int ndarray or None
        Each sample's group from the verdict's group test, ``0`` for the inliers (every
        sample when no displaced group was found).  None in results written before it was
        stored.
    group_p_value : float or None
        p-value of the group test (displaced groups are declared at or below the level
        ``params["alpha"]``).  None in results written before it was stored.
    group_centre : {"origin"} or None
        ``"origin"`` when the data's mean off the candidates passed as the origin's (the data
        were centred on their inliers: :mod:`mspca_dask.verdict.origin`) and the group
        test's null was one group about it; None when the test rested on the scores' shape
        alone.
    within_samples : int or None
        The samples whose covariance within their groups gives the covariance components:
        all but those of groups whose spread along their own shift is larger than the
        inliers' (a batch shifted by varying amounts), which are left out.  None when no
        displaced group was found, or in results written before it was stored.

    Notes
    -----
    The verdicts come from one model (:mod:`mspca_dask.verdict`): a calibrated test says
    whether some samples form groups displaced from the inliers in the candidates' score
    space; per eigenpair, ``shift_z`` says whether the groups are shifted along it and the
    inliers' variance whether a covariance spike remains within them.  Eigenpairs of the
    inliers' covariance ("covariance", "mixed") are :attr:`components`; those that only a
    shift of the groups put above the edge ("mean shift") are
    :attr:`mean_shift_components`.

    The class is a frozen dataclass compared by identity (NumPy fields have no single
    truth value); compare fields with :func:`numpy.testing.assert_array_equal`.

    Examples
    --------
    >>> import numpy as np
    >>> res = MSPCAResult(
    ...     eigenvalues=np.array([9.0, 6.0, 3.0]),
    ...     knockoff_eigenvalues_all=np.array([[9.01, 4.0, 3.1]]),
    ...     stable=np.array([True, False, False]),
    ...     candidate=np.array([True, True, False]),
    ...     reasons=np.array(["not shifted", "shifted", "bulk"], dtype=object),
    ...     displacement=np.array([0.01, 2.0, 0.1]),
    ...     eigenvector_overlap=np.array([1.0, 0.3, 0.9]),
    ...     eigenvalue_bounds=np.zeros(3),
    ...     eigenvectors=np.eye(3, 4),
    ...     scores=np.zeros((5, 3)),
    ...     location=None,
    ...     noise_variance=1.0, threshold=0.1, knockoff_strength=5.0, mp_edge=3.2,
    ...     n_samples=5, n_features=4, solver="exact", n_passes=1, random_state=0,
    ...     params={},
    ...     pair_verdicts=np.array(["covariance", "mean shift", "bulk"], dtype=object),
    ...     groups=np.array([0, 0, 0, 1, 1]),
    ...     group_p_value=0.01,
    ... )
    >>> res
    MSPCAResult(n_samples=5, n_features=4, n_components=3, n_stable=1)
    >>> res.verdicts.tolist()
    ['covariance', 'mean shift', 'bulk']
    >>> res.displaced.tolist(), res.n_groups
    ([False, False, False, True, True], 2)
    >>> res.transform(np.ones((2, 4))).tolist()
    [[1.0], [1.0]]
    """

    eigenvalues: np.ndarray
    knockoff_eigenvalues_all: np.ndarray
    stable: np.ndarray
    candidate: np.ndarray
    reasons: np.ndarray
    displacement: np.ndarray
    eigenvector_overlap: np.ndarray
    eigenvalue_bounds: np.ndarray
    eigenvectors: np.ndarray
    scores: np.ndarray
    location: np.ndarray | None
    noise_variance: float
    threshold: float
    knockoff_strength: float
    mp_edge: float
    n_samples: int
    n_features: int
    solver: str
    n_passes: int
    random_state: int | None
    params: dict[str, Any] = field(default_factory=dict)
    sample_coords: np.ndarray | None = None
    feature_coords: np.ndarray | None = None
    sample_dim: str = "samples"
    feature_dim: str = "features"
    knockoff_match: np.ndarray | None = None
    shift_z: np.ndarray | None = None
    diagnostics: str | None = None
    total_variance: float | None = None
    pair_verdicts: np.ndarray | None = None
    groups: np.ndarray | None = None
    group_p_value: float | None = None
    group_centre: str | None = None
    within_samples: int | None = None
    pca_eigenvectors: np.ndarray | None = None
    component_variances: np.ndarray | None = None

    # ---------------------------------------------------------------- validation
    def __post_init__(self) -> None:
        # Shapes are checked here once, so every method below may rely on them.
        ev = np.asarray(self.eigenvalues)
        if ev.ndim != 1:
            raise ShapeError(f"eigenvalues must be 1-D, shaped (K,) (got shape {ev.shape})")
        K, n, d = ev.shape[0], int(self.n_samples), int(self.n_features)
        if np.ndim(self.knockoff_eigenvalues_all) != 2:
            raise ShapeError(
                "knockoff_eigenvalues_all must be 2-D, shaped (B, K') with K' >= K "
                f"(got shape {np.shape(self.knockoff_eigenvalues_all)})"
            )
        B, K_knock = np.shape(self.knockoff_eigenvalues_all)
        # every eigenpair with a knockoff partner needs one of its own (−1: none)
        partnered = (
            K
            if self.knockoff_match is None or not np.size(self.knockoff_match)
            else int(np.count_nonzero(np.any(np.asarray(self.knockoff_match) >= 0, axis=0)))
        )
        if K_knock < partnered:
            raise ShapeError(
                f"knockoff_eigenvalues_all must have shape (B, K') with K' at least the "
                f"{partnered} eigenpairs with a knockoff partner "
                f"(got shape {np.shape(self.knockoff_eigenvalues_all)})"
            )
        if self.knockoff_match is not None and np.size(self.knockoff_match):
            match = np.asarray(self.knockoff_match)
            if match.dtype.kind not in "iu" or match.min() < -1 or match.max() >= K_knock:
                raise ShapeError(
                    f"knockoff_match must hold indices in [0, {K_knock}) of the knockoff "
                    f"eigenpairs, or -1 for none (got {match.dtype} values from {match.min()} "
                    f"to {match.max()})"
                )
        expected: dict[str, tuple[int, ...] | None] = {
            "knockoff_eigenvalues_all": (B, K_knock),
            "stable": (K,),
            "candidate": (K,),
            "reasons": (K,),
            "displacement": (K,),
            "eigenvector_overlap": (K,),
            "eigenvalue_bounds": (K,),
            "eigenvectors": (K, d),
            "pca_eigenvectors": (K, d),
            "component_variances": (K,),
            "scores": (n, K),
            "location": (d,),
            "knockoff_match": (B, K),
            "shift_z": (K,),
            "pair_verdicts": (K,),
            "groups": (n,),
            "sample_coords": (n,),
            "feature_coords": (d,),
        }
        for name, shape in expected.items():
            value = getattr(self, name)
            if value is None and name in (
                "location",
                "knockoff_match",
                "shift_z",
                "pair_verdicts",
                "groups",
                "pca_eigenvectors",
                "component_variances",
                "sample_coords",
                "feature_coords",
            ):
                continue
            if np.shape(value) != shape:
                raise ShapeError(
                    f"{name} must have shape {shape} with K = {K} eigenpairs, "
                    f"n_samples = {n}, n_features = {d} (got shape {np.shape(value)})"
                )
        for name in ("stable", "candidate"):
            if np.asarray(getattr(self, name)).dtype.kind != "b":
                raise DTypeError(
                    f"{name} must be a boolean array (got dtype "
                    f"{np.asarray(getattr(self, name)).dtype})"
                )
        if self.pair_verdicts is not None:
            verdicts = np.asarray(self.pair_verdicts).astype(str)
            unknown = sorted(set(verdicts.tolist()) - set(VERDICTS))
            if unknown:
                raise InputError(f"pair_verdicts must be among {VERDICTS} (got {unknown})")
            # stable is what components select: it must agree with the verdicts it summarises
            if not np.array_equal(
                np.isin(verdicts, ("covariance", "mixed")), np.asarray(self.stable)
            ):
                raise InputError(
                    "stable must be True exactly where pair_verdicts is 'covariance' or 'mixed' "
                    f"(verdicts {verdicts.tolist()}, stable {np.asarray(self.stable).tolist()})"
                )
        if self.groups is not None:
            groups = np.asarray(self.groups)
            if groups.dtype.kind not in "iu" or (groups.size and groups.min() < 0):
                raise DTypeError(
                    f"groups must hold non-negative integers (got dtype {groups.dtype}"
                    + (f", smallest {groups.min()})" if groups.size else ")")
                )
        dims = (self.sample_dim, self.feature_dim)
        if (
            not all(isinstance(x, str) for x in dims)
            or len(set(dims)) != 2
            or set(dims)
            & {
                COMPONENT_DIM,
                KNOCKOFF_DIM,
            }
        ):
            raise InputError(
                f"sample_dim and feature_dim must be two different strings other than "
                f"{COMPONENT_DIM!r} and {KNOCKOFF_DIM!r} (got {dims})"
            )

    # ---------------------------------------------------------------- properties
    @property
    def n_components(self) -> int:
        """Number ``K`` of computed eigenpairs, whatever their verdict."""
        return int(np.shape(self.eigenvalues)[0])

    @property
    def n_knockoffs(self) -> int:
        """Number ``B`` of knockoffs."""
        return int(np.shape(self.knockoff_eigenvalues_all)[0])

    @property
    def n_stable(self) -> int:
        """Number of stable eigenpairs: verdict "covariance" or "mixed"."""
        return int(np.count_nonzero(self.stable))

    @property
    def n_groups(self) -> int:
        """Number of sample groups the group test found (1: none displaced, or not stored)."""
        if self.groups is None or not np.size(self.groups):
            return 1
        return int(np.max(self.groups)) + 1

    @property
    def displaced(self) -> np.ndarray:
        """(n,) bool ndarray: samples outside the inliers' group (all False without groups)."""
        if self.groups is None:
            return np.zeros(self.n_samples, dtype=bool)
        return np.asarray(self.groups) != 0

    @property
    def knockoff_eigenvalues(self) -> np.ndarray:
        """(K,) ndarray: the same eigenvalues after the (first) knockoff (NaN if ``B = 0``).

        Entry ``i`` is the eigenvalue of the first knockoff's spectrum matched to eigenpair
        ``i``: row 0 of :attr:`matched_knockoff_eigenvalues`.  The first knockoff's own
        spectrum, unmatched and ``(K',)``, is ``knockoff_eigenvalues_all[0]``.
        """
        if self.n_knockoffs == 0:
            return np.full(self.n_components, np.nan)
        return self.matched_knockoff_eigenvalues[0]

    @property
    def passes(self) -> list[dict[str, Any]]:
        """The passes over the data the fit made, in order (``params["passes"]``).

        Each is a dict with the pass ``name`` (``"mspca-stats"``, ``"mspca-pass-3"``,
        ``"mspca-output"``, ...), the ``products`` it computed and its wall-clock
        ``seconds``; ``len(result.passes) == result.n_passes``.  Empty for a result built
        without a record (by hand, or stored before passes were recorded).
        """
        return [dict(p) for p in self.params.get("passes", [])]

    @property
    def matched_knockoff_eigenvalues(self) -> np.ndarray:
        """(B, K) ndarray: for each knockoff, the eigenvalue of the pair matched to each eigenpair.

        This is where each eigenvalue *went* under the knockoff; without stored matches
        (results written before matches were kept) the same-index eigenvalue is used.  NaN
        where an eigenpair has no knockoff partner (``knockoff_match`` −1).
        """
        knock = np.asarray(self.knockoff_eigenvalues_all, dtype=float)
        if self.knockoff_match is None:
            return knock[:, : self.n_components]
        match = np.asarray(self.knockoff_match, dtype=int)
        out = np.take_along_axis(knock, np.maximum(match, 0), axis=1)
        return np.where(match >= 0, out, np.nan)

    @property
    def explained_variance(self) -> np.ndarray:
        """(K,) ndarray: alias of :attr:`eigenvalues` (scikit-learn's name)."""
        return self.eigenvalues

    @property
    def component_index(self) -> np.ndarray:
        """(n_stable,) int ndarray: the stable eigenpairs in the order of :attr:`components`,
        by descending :attr:`component_variances` (eigenvalue order in results written
        before they were stored)."""
        stable = np.flatnonzero(np.asarray(self.stable))
        if self.component_variances is None:
            return stable
        variances = np.asarray(self.component_variances, dtype=float)[stable]
        return stable[np.argsort(-variances, kind="stable")]

    @property
    def components(self) -> np.ndarray:
        """(n_stable, d) ndarray: the stable eigenvectors ("covariance", "mixed"), as rows,
        the covariance components by descending variance within the groups
        (:attr:`component_index`)."""
        return np.asarray(self.eigenvectors)[self.component_index]

    @property
    def mean_shift_components(self) -> np.ndarray:
        """(n_mean_shift, d) ndarray: the eigenvectors with verdict "mean shift", as rows."""
        return np.asarray(self.eigenvectors)[self.verdicts == "mean shift"]

    @property
    def verdicts(self) -> np.ndarray:
        """(K,) str ndarray: the verdict of each eigenpair, one of :data:`VERDICTS`.

        A result written before verdicts were stored gets them from :attr:`stable` and
        :attr:`candidate`: "covariance" where stable, "mean shift" where a candidate is not,
        "bulk" elsewhere.
        """
        if self.pair_verdicts is not None:
            return np.asarray(self.pair_verdicts).astype(str)
        stable, candidate = np.asarray(self.stable), np.asarray(self.candidate)
        return np.where(stable, "covariance", np.where(candidate, "mean shift", "bulk"))

    # ---------------------------------------------------------------- transform
    def transform(
        self, source: Any, *, variable: str | None = None, sample_dim: str = "samples"
    ) -> np.ndarray | da.Array | xr.DataArray:
        """Scores of new samples on the stable components.

        Parameters
        ----------
        source : array, xarray object, str or os.PathLike
            Samples shaped ``(n_new, d)``: a NumPy array, a Dask array, an
            ``xarray.DataArray`` or ``Dataset`` (with ``variable`` and ``sample_dim``), or
            the path or URL of a Zarr store — anything :func:`mspca_dask.io.open_source`
            opens.
        variable : str, optional
            Variable of a Dataset or Zarr group.
        sample_dim : str, default "samples"
            Name of the sample dimension of an xarray or Zarr source.

        Returns
        -------
        scores : ndarray, dask.array.Array or xarray.DataArray
            ``(source - location) @ components.T``, shaped ``(n_new, n_stable)``: a NumPy
            array for NumPy input and for a Zarr path (computed), a lazy Dask array for
            Dask input, and a DataArray with dims ``(sample_dim, "component")`` for
            xarray input (lazy if the input is).  Its ``component`` coordinate holds the
            indices of the stable eigenpairs among all ``K``, in the order of
            :attr:`components` (:attr:`component_index`).

        Raises
        ------
        ShapeError
            The source does not have ``d`` features (or is not 2-D).
        InputError
            Both the source and the result carry feature labels and they differ (the
            features are in another order, or are other features).
        """
        import dask.array as da
        import xarray as xr

        from .io import open_source

        is_xarray = isinstance(source, (xr.DataArray, xr.Dataset))
        is_path = isinstance(source, (str, os.PathLike))
        src = open_source(source, variable=variable, sample_dim=sample_dim)
        if src.n_features != self.n_features:
            raise ShapeError(
                f"the source has {src.n_features} features but the result was fitted on "
                f"{self.n_features}; transform needs data with the same features, in the "
                f"same order ({src.description})"
            )
        if (
            src.feature_coords is not None
            and self.feature_coords is not None
            and not (
                np.array_equal(np.asarray(src.feature_coords), np.asarray(self.feature_coords))
            )
        ):
            raise InputError(
                f"the feature labels of the source ({src.description}) differ from those "
                "the result was fitted on; select and order them first, e.g. "
                f"data.sel({src.feature_dim}=result.feature_coords)"
            )
        comps = self.components
        loc = None if self.location is None else np.asarray(self.location)
        if not (is_xarray or is_path or isinstance(source, da.Array)):
            # NumPy (or array-like) in, NumPy out: no graph for a small in-memory product.
            X = np.asarray(source, dtype=src.data.dtype)
            return (X if loc is None else X - loc) @ comps.T
        # Subtracting first (rather than ``X @ C.T - location @ C.T``) avoids cancellation
        # when the location is large next to the spread (uncentred genotypes); the
        # subtraction is blockwise and fuses with the product, so it costs no pass.
        data = src.data
        scores = (data if loc is None else data - loc) @ comps.T
        if is_path:
            return np.asarray(scores.compute())
        if not is_xarray:
            return scores
        if not _xarray_is_lazy(source, variable):
            scores = scores.compute()
        coords: dict[str, Any] = {COMPONENT_DIM: self.component_index}
        if src.sample_coords is not None:
            coords[src.sample_dim] = src.sample_coords
        return xr.DataArray(
            scores, dims=(src.sample_dim, COMPONENT_DIM), coords=coords, name="score"
        )

    # ---------------------------------------------------------------- xarray / zarr
    def to_dataset(self) -> xr.Dataset:
        """The result as an ``xarray.Dataset`` (layout :data:`RESULT_VARIABLES`).

        Returns
        -------
        xarray.Dataset
            Dims ``component`` (K, with an integer coordinate 0..K-1), ``knockoff`` (B),
            ``sample_dim`` (n) and ``feature_dim`` (d), with the sample and feature labels
            as coordinates when known.  Scalars are attributes; ``params`` is a JSON
            string; ``random_state`` is omitted when None.

        Raises
        ------
        InputError
            ``params`` is not JSON-serialisable.
        """
        import xarray as xr

        import mspca_dask

        data_vars: dict[str, Any] = {}
        for name, spec in RESULT_VARIABLES.items():
            value = getattr(self, spec.field)
            if value is None:
                continue
            dims = resolve_dims(spec.dims, self.sample_dim, self.feature_dim)
            data_vars[name] = (dims, np.asarray(value), {"description": spec.doc})
        coords: dict[str, Any] = {COMPONENT_DIM: np.arange(self.n_components)}
        if self.sample_coords is not None:
            coords[self.sample_dim] = np.asarray(self.sample_coords)
        if self.feature_coords is not None:
            coords[self.feature_dim] = np.asarray(self.feature_coords)
        try:
            params_json = json.dumps(self.params, default=_json_default, allow_nan=True)
        except (TypeError, ValueError) as exc:
            raise InputError(f"params must be JSON-serialisable: {exc}") from exc
        attrs: dict[str, Any] = {
            name: float(getattr(self, name))
            for name in _FLOAT_ATTRS
            if getattr(self, name) is not None  # optional ones (total_variance) may be None
        }
        attrs.update(
            n_samples=int(self.n_samples),
            n_features=int(self.n_features),
            solver=str(self.solver),
            n_passes=int(self.n_passes),
            params=params_json,
            sample_dim=self.sample_dim,
            feature_dim=self.feature_dim,
            mspca_dask_version=str(mspca_dask.__version__),
            mspca_schema_version=SCHEMA_VERSION,
        )
        if self.random_state is not None:
            attrs["random_state"] = int(self.random_state)
        if self.diagnostics:
            attrs["diagnostics"] = str(self.diagnostics)
        if self.group_centre:
            attrs["group_centre"] = str(self.group_centre)
        if self.within_samples is not None:
            attrs["within_samples"] = int(self.within_samples)
        ds = xr.Dataset(data_vars, coords=coords, attrs=attrs)
        validate_result_dataset(ds)
        return ds

    @classmethod
    def from_dataset(cls, ds: xr.Dataset) -> MSPCAResult:
        """Rebuild a result from :meth:`to_dataset`'s Dataset (or a stored copy of it).

        Parameters
        ----------
        ds : xarray.Dataset
            A result Dataset; lazy variables are loaded.

        Returns
        -------
        MSPCAResult
            Equal field by field to the result that made ``ds``.  Strings read from a Zarr
            store (reasons, string labels) come back as object arrays of ``str``; ``params``
            comes back through JSON (tuples become lists).

        Raises
        ------
        InputError
            ``ds`` does not follow the result layout; the message names the variable or
            attribute at fault.
        """
        validate_result_dataset(ds)
        attrs = ds.attrs
        fields: dict[str, Any] = {}
        for name, spec in RESULT_VARIABLES.items():
            if name not in ds.data_vars:
                fields[spec.field] = None
                continue
            value = np.asarray(ds[name].values)
            if spec.kind == STRING_KINDS:
                value = str_objects(value)
            fields[spec.field] = value
        sample_dim, feature_dim = attrs["sample_dim"], attrs["feature_dim"]
        try:
            params = json.loads(attrs["params"])
        except ValueError as exc:
            raise InputError(f"the result attribute 'params' is not valid JSON: {exc}") from exc
        if not isinstance(params, dict):
            raise InputError(
                f"the result attribute 'params' must be a JSON object (got {type(params).__name__})"
            )
        rs = attrs.get("random_state")
        fields.update({name: float(attrs[name]) for name in _FLOAT_ATTRS if name in attrs})
        return cls(
            **fields,
            n_samples=int(attrs["n_samples"]),
            n_features=int(attrs["n_features"]),
            solver=str(attrs["solver"]),
            n_passes=int(attrs["n_passes"]),
            random_state=None if rs is None else int(rs),
            diagnostics=attrs.get("diagnostics"),
            group_centre=attrs.get("group_centre"),
            within_samples=None
            if attrs.get("within_samples") is None
            else int(attrs["within_samples"]),
            params=params,
            sample_coords=_coord(ds, sample_dim),
            feature_coords=_coord(ds, feature_dim),
            sample_dim=sample_dim,
            feature_dim=feature_dim,
        )

    def to_zarr(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> str:
        """Write the result atomically to a Zarr store.

        Parameters
        ----------
        path : str or os.PathLike
            Local path or fsspec URL of the store to create.
        overwrite : bool, default False
            Replace an existing store at ``path``.

        Returns
        -------
        str
            The path (absolute for a local store) or URL written.

        Raises
        ------
        ResultExistsError
            Something exists at ``path`` and ``overwrite`` is False.

        Notes
        -----
        The store is written under a temporary name and renamed into place once marked
        complete, so a crash never leaves a complete-looking result
        (:func:`mspca_dask.io.write_dataset_atomic`).  Read it with :func:`open_result`.
        """
        from .io import write_dataset_atomic

        return write_dataset_atomic(self.to_dataset(), path, overwrite=overwrite)

    # ---------------------------------------------------------------- display
    def _table_rows(self) -> list[tuple[str, ...]]:
        matched = self.matched_knockoff_eigenvalues
        knock = matched[0] if len(matched) else np.full(self.n_components, np.nan)
        verdicts = self.verdicts
        return [
            (
                str(i),
                f"{self.eigenvalues[i]:.6g}",
                f"{knock[i]:.6g}",
                f"{self.displacement[i]:.3g}",
                f"{self.eigenvector_overlap[i]:.3f}",
                f"{self.eigenvalue_bounds[i]:.2g}",
                "-" if self.shift_z is None else f"{self.shift_z[i]:.3g}",
                str(verdicts[i]),
                str(self.reasons[i]),
            )
            for i in range(self.n_components)
        ]

    _TABLE_HEADER = (
        "#",
        "eigenvalue",
        "knockoff",
        "displacement",
        "overlap",
        "bound",
        "shift z",
        "verdict",
        "reason",
    )

    def _header_lines(self) -> list[str]:
        precision = {
            "float32": " (float32 products)",
            "float32-certified": " (float32 Krylov products, eigenpairs certified in float64)",
        }.get(str(self.params.get("precision")), "")
        verdicts = self.verdicts
        # covariance and mean shift always, the rarer verdicts when some pair has them; the
        # rest are bulk
        counts = ", ".join(
            f"{int(np.count_nonzero(verdicts == v))} {v}"
            for v in VERDICTS
            if v in ("covariance", "mean shift") or (v != "bulk" and np.any(verdicts == v))
        )
        notes = []
        if self.groups is not None:
            p = "" if self.group_p_value is None else f", group test p = {self.group_p_value:.3g}"
            if self.group_centre == "origin":
                p += ", about the origin: the data are centred on their inliers"
            if self.within_samples is not None and self.within_samples < self.n_samples:
                p += (
                    f"; covariance within the groups read from {self.within_samples} "
                    f"samples, groups spread along their own shift left out"
                )
            notes = [
                f"groups = {self.n_groups} ({int(np.count_nonzero(self.displaced))} displaced "
                f"samples{p})"
            ]
        order = self.component_index
        if not np.array_equal(order, np.sort(order)):
            # only when it differs from the table's: a shift lifted a weaker spike's pair
            variances = np.asarray(self.component_variances, dtype=float)
            notes.append(
                "components (by variance within the groups): "
                + ", ".join(f"#{j} ({variances[j]:.4g})" for j in order)
            )
        return [
            f"n = {self.n_samples} samples, d = {self.n_features} features, "
            f"K = {self.n_components} eigenpairs ({counts}), B = {self.n_knockoffs} knockoffs",
            *notes,
            f"noise variance σ² = {self.noise_variance:.6g}, "
            f"Marchenko–Pastur edge = {self.mp_edge:.6g}",
            f"threshold ε = {self.threshold:.4g}, knockoff strength θ'² = "
            f"{self.knockoff_strength:.4g}",
            f"solver = {self.solver}{precision}, passes = {self.n_passes}, "
            f"random_state = {self.random_state}",
            *(f"model misfit: {line}" for line in (self.diagnostics or "").splitlines()),
        ]

    def summary(self) -> str:
        """A plain-text table: one row per eigenpair, under a few header lines.

        Returns
        -------
        str
            Header lines (n, d, the groups, the components' order where a shift moved a
            weaker spike's pair ahead, noise variance, Marchenko–Pastur edge, threshold ε,
            knockoff strength θ'², solver, passes), then per eigenpair: index, eigenvalue,
            first knockoff's eigenvalue at the same index, displacement, eigenvector
            overlap, eigenvalue error bound, shift between the groups ``shift_z`` (nan with
            no displaced group), verdict (one of :data:`VERDICTS`) and reason; a footer says
            what each column and verdict means.
        """
        rows = [self._TABLE_HEADER, *self._table_rows()]
        ncol = len(self._TABLE_HEADER)
        widths = [max(len(r[j]) for r in rows) for j in range(ncol - 1)]
        lines = ["MSPCAResult", *self._header_lines(), _KNOCKOFF_NOTE, ""]
        for k, row in enumerate(rows):
            cells = [
                row[j].ljust(widths[j]) if j in (0, ncol - 2) else row[j].rjust(widths[j])
                for j in range(ncol - 1)
            ]
            lines.append("  ".join([*cells, row[-1]]).rstrip())
            if k == 0:
                lines.append("  ".join("-" * w for w in widths) + "  " + "-" * 6)
        return "\n".join([*lines, "", _COLUMNS_NOTE])

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(n_samples={self.n_samples}, n_features={self.n_features}, "
            f"n_components={self.n_components}, n_stable={self.n_stable})"
        )

    def _repr_html_(self) -> str:
        esc = html.escape
        header = "<br>".join(esc(line) for line in [*self._header_lines(), _KNOCKOFF_NOTE])
        head = "".join(f"<th>{esc(h)}</th>" for h in self._TABLE_HEADER)
        body = "".join(
            "<tr>"
            + "".join(
                f'<td style="text-align:{"left" if j >= 6 else "right"}">{esc(c)}</td>'
                for j, c in enumerate(row)
            )
            + "</tr>"
            for row in self._table_rows()
        )
        return (
            f"<div><strong>{esc(type(self).__name__)}</strong><br>{header}"
            f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"
        )

    # ---------------------------------------------------------------- plot
    def plot(
        self,
        ax: Axes | None = None,
        *,
        kind: str = "spectrum",
        pairs: tuple[int, int] = (0, 1),
        color: ArrayLike | None = None,
    ) -> Figure:
        """The spectrum with its verdicts, or the samples' scores on two eigenpairs.

        Parameters
        ----------
        ax : matplotlib.axes.Axes, optional
            Axes to draw on; a new Figure (not registered with pyplot) is made otherwise.
        kind : {"spectrum", "scores"}, default "spectrum"
            ``"spectrum"``: eigenvalues on a log axis, coloured by verdict, every knockoff's
            eigenvalues as hollow markers joined to them by vertical segments, the
            Marchenko–Pastur edge dashed and a shaded band ``±ε`` around each stable
            eigenvalue.  ``"scores"``: one point per sample at its scores on ``pairs``
            (0-based eigenpair indices), the axes labelled with their verdicts.
        pairs : (int, int), default (0, 1)
            The eigenpairs of the ``"scores"`` plot.
        color : (n_samples,) array-like, optional
            Per-sample values or labels that colour the ``"scores"`` plot (a batch, a
            population); one colour otherwise.

        Returns
        -------
        matplotlib.figure.Figure
            The figure drawn on.

        Raises
        ------
        ImportError
            matplotlib is not installed.
        ParameterError
            ``kind`` is unknown, ``pairs`` out of range or ``color`` of the wrong length.
        """
        try:
            from matplotlib.figure import Figure
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(
                "MSPCAResult.plot needs matplotlib: pip install mspca-dask[plot]"
            ) from exc

        if kind not in ("spectrum", "scores"):
            raise ParameterError(f"kind must be 'spectrum' or 'scores' (not {kind!r})")
        if ax is None:
            fig = Figure(figsize=(6.4, 4.0), layout="constrained")
            ax = fig.add_subplot()
        else:
            fig = _root_figure(ax)
        if kind == "scores":
            self._plot_scores(ax, pairs, color)
            return fig
        x = np.arange(self.n_components)
        ev = np.asarray(self.eigenvalues, dtype=float)
        knock = self.matched_knockoff_eigenvalues
        verdicts = self.verdicts

        eps = float(self.threshold)
        for k, j in enumerate(np.flatnonzero(np.asarray(self.stable))):
            ax.fill_between(
                [j - 0.3, j + 0.3],
                ev[j] - eps,
                ev[j] + eps,
                color=_VERDICT_COLOURS[str(verdicts[j])],
                alpha=0.2,
                linewidth=0,
                label="±ε around stable eigenvalues" if k == 0 else None,
            )
        for b in range(knock.shape[0]):
            ax.vlines(x, ev, knock[b], colors="0.6", linewidth=1.0, zorder=1)
        if knock.shape[0]:
            ax.scatter(
                np.repeat(x[None, :], knock.shape[0], axis=0).ravel(),
                knock.ravel(),
                facecolors="none",
                edgecolors="0.3",
                marker="o",
                s=36,
                zorder=2,
                label="knockoff eigenvalues",
            )
        for verdict in VERDICTS:
            mask = verdicts == verdict
            if mask.any():
                ax.scatter(
                    x[mask],
                    ev[mask],
                    color=_VERDICT_COLOURS[verdict],
                    marker="o",
                    s=36,
                    zorder=3,
                    label=verdict,
                )
        ax.axhline(
            float(self.mp_edge),
            color="black",
            linestyle="--",
            linewidth=1.0,
            label="Marchenko–Pastur edge",
        )
        # one knockoff eigenvalue far above the rest squashed every other point onto the edge
        # on a linear axis; eigenvalues are positive, so a log axis shows them all
        ax.set_yscale("log")
        ax.set_xticks(x)
        ax.set_xlabel("eigenpair")
        ax.set_ylabel("eigenvalue (log scale)")
        ax.set_title(f"MS-PCA: {self.n_stable} stable of {self.n_components} eigenpairs")
        ax.legend(loc="best", fontsize="small")
        return fig

    def _plot_scores(self, ax: Axes, pairs: tuple[int, int], color: ArrayLike | None) -> None:
        """The ``"scores"`` kind of :meth:`plot`."""
        i, j = (int(p) for p in pairs)
        K = self.n_components
        if not (0 <= i < K and 0 <= j < K) or i == j:
            raise ParameterError(f"pairs must be two different indices in [0, {K}) (not {pairs})")
        scores = np.asarray(self.scores, dtype=float)
        verdicts = self.verdicts
        if color is None:
            ax.scatter(scores[:, i], scores[:, j], s=6, alpha=0.6, linewidths=0)
        else:
            c = np.asarray(color)
            if c.shape != (scores.shape[0],):
                raise ParameterError(
                    f"color must hold one value per sample ({scores.shape[0]}), not shape {c.shape}"
                )
            if c.dtype.kind in "biuf":
                points = ax.scatter(scores[:, i], scores[:, j], c=c, s=6, alpha=0.6, linewidths=0)
                _root_figure(ax).colorbar(points, ax=ax)
            else:  # labels: one colour and one legend entry each
                for label in np.unique(c):
                    at = c == label
                    ax.scatter(
                        scores[at, i], scores[at, j], s=6, alpha=0.6, linewidths=0, label=label
                    )
                ax.legend(loc="best", fontsize="small", markerscale=2)
        ax.set_xlabel(f"eigenpair {i} ({verdicts[i]})")
        ax.set_ylabel(f"eigenpair {j} ({verdicts[j]})")
        ax.set_title("MS-PCA scores")


def open_result(path: str | os.PathLike[str]) -> MSPCAResult:
    """Read a result written by :meth:`MSPCAResult.to_zarr`.

    Parameters
    ----------
    path : str or os.PathLike
        Local path or fsspec URL of the store.

    Returns
    -------
    MSPCAResult

    Raises
    ------
    SourceNotFoundError
        Nothing is stored at ``path``.
    InputError
        The store is incomplete (an interrupted write) or is not a result store.
    """
    from .io import open_dataset_checked

    return MSPCAResult.from_dataset(open_dataset_checked(path))


# --------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------


def _json_default(obj: Any) -> Any:
    """JSON encoding of the NumPy values and paths that fit parameters may hold."""
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    if isinstance(obj, Mapping):
        return dict(obj)
    raise TypeError(f"object of type {type(obj).__name__} is not JSON-serialisable: {obj!r}")


def _coord(ds: xr.Dataset, dim: str) -> np.ndarray | None:
    if dim not in ds.coords:
        return None
    values = np.asarray(ds.coords[dim].values)
    if values.dtype.kind == "T":
        # NumPy's StringDType (how zarr reads format 3 strings) is not understood
        # everywhere yet; object arrays of str are.
        values = values.astype(object)
    return values


def _xarray_is_lazy(source: xr.DataArray | xr.Dataset, variable: str | None) -> bool:
    import xarray as xr

    if isinstance(source, xr.DataArray):
        return source.chunks is not None
    if variable is not None and variable in source:
        return source[variable].chunks is not None
    return any(v.chunks is not None for v in source.data_vars.values())


def _root_figure(ax: Axes) -> Figure:
    """The top-level Figure of ``ax`` (``ax.figure`` may be a SubFigure)."""
    try:
        fig: Any = ax.get_figure(root=True)  # matplotlib >= 3.10
    except TypeError:  # pragma: no cover - older matplotlib
        fig = ax.figure
        while getattr(fig, "figure", fig) is not fig:
            fig = fig.figure
    return fig
