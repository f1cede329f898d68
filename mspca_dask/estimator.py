"""A scikit-learn estimator around :func:`mspca_dask.fit`: :class:`MeanShiftPCA`."""

from __future__ import annotations

import math
import warnings
from numbers import Integral
from typing import TYPE_CHECKING, Any

import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.validation import (
    _check_feature_names,
    _check_n_features,
    check_array,
    check_is_fitted,
    validate_data,
)

from ._params import PARAMETERS, sklearn_constraints
from .errors import NoStableComponentWarning, ParameterError, ShapeError

if TYPE_CHECKING:
    import dask.array as da

    from .result import MSPCAResult

__all__ = ["MeanShiftPCA"]


def _is_dask_array(X: Any) -> bool:
    """Whether ``X`` is a Dask array (checked without importing Dask for other inputs)."""
    if not type(X).__module__.startswith("dask"):
        return False
    import dask.array as da

    return isinstance(X, da.Array)


def _check_dask_array(X: da.Array) -> None:
    """The checks ``validate_data`` would make, on metadata only (nothing is computed).

    NaN and infinite values are found by :func:`mspca_dask.fit` as it streams the data.
    """
    if X.ndim != 2:
        raise ValueError(
            f"Expected a 2D array, got a {X.ndim}D Dask array of shape {X.shape} instead."
        )
    if any(np.isnan(s) for s in X.shape):
        raise ValueError(
            f"the Dask array has unknown chunk sizes (shape {X.shape}); call "
            "X.compute_chunk_sizes() first"
        )
    if X.dtype.kind not in "biuf":
        raise ValueError(f"Dask array of dtype {X.dtype} is not supported: expected real numbers.")


def _lazy_matrix(X: Any) -> Any:
    """AnnData and SciPy sparse input as a lazy ``(n_samples, n_features)`` Dask array.

    Opened as :func:`mspca_dask.fit` opens them (an AnnData's ``X``; CSR by rows, CSC by
    columns), with each chunk densified inside its own task, so nothing is densified whole;
    any other input is returned as it is.
    """
    from scipy import sparse

    from .io.anndata import is_anndata

    if not (sparse.issparse(X) or is_anndata(X)):
        return X
    import dask.array as da

    from ._passes import _dense
    from .io.sources import open_source

    data = open_source(X).data
    return da.map_blocks(_dense, data, dtype=data.dtype, meta=np.empty((0, 0), data.dtype))


class MeanShiftPCA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Mean-Shift PCA by Knockoff Mean, as a scikit-learn transformer.

    Computes the top ``n_components`` eigenpairs of the covariance and keeps the
    *stable* ones — the covariance principal components, along which no group of samples
    is displaced from the rest — discarding the eigenpairs caused by a mean shift of a
    minority of samples (see :func:`mspca_dask.fit`).  :meth:`transform` projects on
    the stable components only, or on a fixed number of components
    (``n_features_out``).  :meth:`score_samples` and :meth:`score` give the
    probabilistic-PCA log-likelihood of :class:`sklearn.decomposition.PCA`, so that
    :func:`sklearn.model_selection.cross_val_score` and
    :class:`sklearn.model_selection.GridSearchCV` can compare settings.

    Parameters
    ----------
    n_components : int, default=10
        ``K``, the number of leading eigenpairs examined, ``1 <= K <= min(n_samples,
        n_features)``.  The number of components *kept*, :attr:`n_components_`, is the
        number of stable eigenpairs among them and may be smaller (down to 0), unless
        ``n_features_out`` fixes it.
    n_features_out : int or None, default=None
        Width of :meth:`transform`'s output (its number of output features, as in
        :meth:`get_feature_names_out`).  ``None``: the stable components, however many
        the fit finds; when it finds none, :meth:`transform` raises
        :class:`mspca_dask.ParameterError` rather than return zero columns.  An int
        ``1 <= n_features_out <= n_components``: exactly that many columns, for a
        pipeline whose next step needs a fixed width — the leading stable components,
        completed when too few are stable by the leading *bulk* eigenpairs (those below
        the noise edge, as :class:`sklearn.decomposition.PCA` would keep them); a
        mean-shift eigenpair is never used.  :meth:`fit` raises
        :class:`mspca_dask.ParameterError` when the ``K`` eigenpairs examined hold fewer
        than ``n_features_out`` that are not mean shifts (raise ``n_components``).
    location : {"auto"}, array-like of shape (n_features,) or None, default="auto"
        What is subtracted from every sample.  ``"auto"``: the mean of the inliers
        (robust to a shifted minority); ``None``: nothing (the data are analysed as they
        are); a vector: that location.
    solver : {"auto", "exact", "randomized"}, default="auto"
        Eigensolver: dense Gram matrix, certified block-Krylov, or the cheaper of the two.
    n_knockoffs : int, default=5
        Number of independent knockoffs; each statistic is their median.
    knockoff_weight : float, default=1.0
        Fraction ``π'`` in ``(0, 1]`` of samples that receive the knockoff shift.
    knockoff_factor : float, default=2.0
        Knockoff strength factor (``θ'² = knockoff_factor · σ² g⁻¹(λ̃₁/σ²)``).
    threshold_scale : float, default=3.0
        ``C`` in the invariance radius ``ε = C σ² n^{-1/2}``.
    alpha : float, default=0.05
        Level of the verdict's tests, in ``(0, 0.5)`` (:func:`mspca_dask.fit`).
    edge_margin : float, default=4.0
        A candidate spike must exceed the Marchenko–Pastur bulk edge by this many
        Tracy–Widom units (``>= 0``); the within-group covariance's spikes its own edge.
    tol : float or None, default=None
        Eigenvalue accuracy (``> 0``) the randomized solver certifies; ``None``:
        ``0.1 σ² n^{-1/2}`` (:func:`mspca_dask.rmt.eigenvalue_tolerance`).
    max_passes : int, default=40
        Pass budget of the randomized solver (``>= 2``).
    oversampling : int, default=10
        Extra columns (``>= 0``) of the randomized solver's sketch.
    random_state : int, RandomState instance or None, default=0
        Seed of the sketch, knockoff directions and memberships.  An int gives
        reproducible results; a ``RandomState`` instance is used to draw such an int
        (so repeated fits differ); ``None`` draws fresh entropy.
    scheduler : str, distributed.Client or None, default=None
        Where the passes over the data run; ``None`` uses the active
        ``distributed.Client`` if any, else Dask's threaded scheduler.

    Attributes
    ----------
    result_ : MSPCAResult
        The full result of :func:`mspca_dask.fit` (every eigenpair, verdict and reason).
    components_ : ndarray of shape ``(n_components_, n_features)``
        The components :meth:`transform` projects on, as unit rows with deterministic
        signs: the stable (covariance) eigenvectors in the order of ``result_.components``
        (by descending variance within the groups), and with ``n_features_out`` the bulk
        ones that complete them, by descending eigenvalue.
    components_index_ : ndarray of shape ``(n_components_,)``, dtype int
        The index of each component among the ``K`` eigenpairs examined
        (``components_ == result_.eigenvectors[components_index_]``).
    explained_variance_ : ndarray of shape ``(n_components_,)``
        Their pairs' eigenvalues, in the order of ``components_`` (a mixed pair's includes
        its groups' shift: ``result_.component_variances`` has its variance within the
        groups), as eigenvalues of ``(X - mean_)ᵀ(X - mean_) / n_samples``
        (divided by ``n``, not ``n - 1`` as in :class:`sklearn.decomposition.PCA`).
    explained_variance_ratio_ : ndarray of shape ``(n_components_,)``
        Their share of the total variance about ``mean_``: ``explained_variance_`` over
        ``tr((X - mean_)ᵀ(X - mean_)) / n_samples`` (``result_.total_variance``), as in
        :class:`sklearn.decomposition.PCA` (the ``n`` or ``n - 1`` cancels).
    n_components_ : int
        Number of components, the width of :meth:`transform`'s output:
        ``n_features_out``, or the number of stable components (0 when no eigenpair is
        stable).
    mean_ : ndarray of shape (n_features,)
        The location subtracted from every sample (zeros for ``location=None``).
    noise_variance_ : float
        Estimated noise variance ``σ²`` of the bulk.
    mean_shift_components_ : ndarray of shape (n_mean_shift, n_features)
        The eigenvectors with verdict ``"mean shift"`` (directions of a shift between
        groups of samples), as rows.
    eigenvalues_ : ndarray of shape (K,)
        All ``K`` eigenvalues examined: the ``n_components`` top ones, descending, then any
        within-group covariance spikes that pairs carrying none pushed out of them
        (:attr:`MSPCAResult.eigenvalues`).
    stable_ : ndarray of shape (K,), dtype bool
        True for the stable eigenpairs among the ``K``: verdict ``"covariance"`` or
        ``"mixed"``.
    verdicts_ : ndarray of shape (K,), dtype str
        The verdict of each of the ``K`` eigenpairs: ``"covariance"``, ``"mean shift"``,
        ``"mixed"``, ``"undetermined"`` or ``"bulk"`` (:attr:`MSPCAResult.verdicts`).
    groups_ : ndarray of shape (n_samples,), dtype int
        Each training sample's group from the verdict's group test, 0 for the inliers
        (all 0 when no displaced group was found).
    n_features_in_ : int
        Number of features seen during :meth:`fit`.
    feature_names_in_ : ndarray of shape ``(n_features_in_,)``
        Names of the features seen during :meth:`fit`, when ``X`` has string column
        names.

    See Also
    --------
    mspca_dask.fit : The function this estimator wraps.
    sklearn.decomposition.PCA : Plain principal component analysis.

    Notes
    -----
    **No stable component.**  When no eigenvalue rises clearly above the
    Marchenko–Pastur edge of the noise (pure noise, or too few samples), or every spike
    is a mean shift, no eigenpair is stable.  The fit then still succeeds and says so:
    in the first case :func:`mspca_dask.fit` warns with
    :class:`mspca_dask.NoSpikeWarning`, which is passed on to the caller; in the second
    the estimator warns with :class:`mspca_dask.NoStableComponentWarning`.  With
    ``n_features_out=None`` then ``n_components_ = 0``, ``components_`` has shape
    ``(0, n_features)``, and :meth:`transform`, :meth:`fit_transform` and
    :meth:`inverse_transform` raise :class:`mspca_dask.ParameterError` (a
    ``ValueError``) saying to set ``n_features_out``: a pipeline never receives zero
    columns silently.  :meth:`score_samples` still works (the model is then isotropic
    noise about ``mean_``).  With ``n_features_out`` set the output keeps its width,
    made of bulk eigenpairs.

    **Log-likelihood.**  :meth:`score_samples` is the probabilistic-PCA log-density of
    :class:`sklearn.decomposition.PCA` (Tipping & Bishop 1999) with this fit's
    parameters: a Gaussian about ``mean_`` with covariance

    ``C = σ² I + Σₖ max(λₖ − σ², 0) wₖ wₖᵀ``

    over the rows ``wₖ`` of ``components_`` with eigenvalues ``λₖ``
    (``explained_variance_``) and the noise variance ``σ²`` (``noise_variance_``), the
    Marchenko–Pastur fit of the bulk rather than PCA's mean of the discarded
    eigenvalues.  A mean-shift direction is left to the noise, so samples displaced
    along it score lower than under PCA.  It is computed with ``C``'s low-rank form
    (``O(n_features · n_components_)`` per sample, lazily for Dask input);
    :meth:`get_covariance` and :meth:`get_precision` give ``C`` and ``C⁻¹`` whole.

    **Reference samples.**  ``reference_samples`` is a parameter of :meth:`fit`, not of
    the constructor, like ``sample_weight`` in scikit-learn: it is one entry per sample
    of the data being fitted.  In cross-validation pass it as a boolean mask (e.g.
    ``cross_val_score(pipe, X, y, params={"meanshiftpca__reference_samples": mask})``),
    which is split with the samples; integer indices are not.  As in
    :func:`mspca_dask.fit`, ``location`` must then be their centre (a vector, or None for
    data already centred on it).

    **Input.**  NumPy-like input (lists, pandas DataFrames, ...) is validated as in
    scikit-learn (float64, at least 2 samples, no NaN or infinity).  A Dask array is *not*
    loaded into memory: its shape and dtype are checked here, its values (NaN, infinity) by
    :func:`mspca_dask.fit` as it streams, and :meth:`transform` returns a lazy Dask array
    for Dask input.  SciPy sparse matrices (CSR, CSC) and ``anndata.AnnData`` objects (their
    ``X``; a single-cell count matrix) are read as :func:`mspca_dask.fit` reads them, one
    densified chunk at a time, and :meth:`transform` returns a NumPy array for them.
    Features that are constant across the samples are refused, as by
    :func:`mspca_dask.fit` (:class:`mspca_dask.InputError`, a ``ValueError`` naming
    them): they carry no variance, and with ``location=None`` they would silently
    enter the uncentred analysis.  Drop them first, e.g. with
    :class:`sklearn.feature_selection.VarianceThreshold` in a pipeline.

    **n_components.**  As in :class:`sklearn.decomposition.PCA`, ``n_components`` larger
    than ``min(n_samples, n_features)`` is an error (``ValueError``), not silently
    clipped.

    References
    ----------
    M. E. Tipping and C. M. Bishop, "Probabilistic principal component analysis",
    Journal of the Royal Statistical Society B 61(3), 611–622, 1999.

    Examples
    --------
    >>> from mspca_dask import MeanShiftPCA
    >>> from mspca_dask.testing import paper_setting
    >>> X = paper_setting(pi1=0.1, random_state=1).to_numpy()
    >>> est = MeanShiftPCA(n_components=4).fit(X)
    >>> est.n_components_, est.components_.shape
    (1, (1, 900))
    >>> est.transform(X[:5]).shape
    (5, 1)
    >>> MeanShiftPCA(n_components=4, n_features_out=3).fit(X).transform(X[:5]).shape
    (5, 3)
    >>> bool(est.score(X) < 0), est.inverse_transform(est.transform(X[:5])).shape
    (True, (5, 900))
    """

    # Every tuning parameter of mspca_dask.fit, with the registry's ranges (one source).
    _parameter_constraints: dict[str, list[Any]] = {
        **sklearn_constraints(PARAMETERS),
        "n_features_out": [Interval(Integral, 1, None, closed="left"), None],
        "location": [StrOptions({"auto"}), "array-like", None],
        "scheduler": [str, HasMethods(["compute", "scheduler_info"]), None],
    }

    def __init__(
        self,
        n_components: int = 10,
        *,
        n_features_out: int | None = None,
        location: str | np.ndarray | None = "auto",
        solver: str = "auto",
        n_knockoffs: int = 5,
        knockoff_weight: float = 1.0,
        knockoff_factor: float = 2.0,
        threshold_scale: float = 3.0,
        alpha: float = 0.05,
        edge_margin: float = 4.0,
        tol: float | None = None,
        max_passes: int = 40,
        oversampling: int = 10,
        random_state: int | np.random.RandomState | None = 0,
        scheduler: Any = None,
    ) -> None:
        self.n_components = n_components
        self.n_features_out = n_features_out
        self.location = location
        self.solver = solver
        self.n_knockoffs = n_knockoffs
        self.knockoff_weight = knockoff_weight
        self.knockoff_factor = knockoff_factor
        self.threshold_scale = threshold_scale
        self.alpha = alpha
        self.edge_margin = edge_margin
        self.tol = tol
        self.max_passes = max_passes
        self.oversampling = oversampling
        self.random_state = random_state
        self.scheduler = scheduler

    # ------------------------------------------------------------------ fitting
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any = None, *, reference_samples: Any = None) -> MeanShiftPCA:
        """Fit the model: find the stable (covariance) principal components of ``X``.

        Parameters
        ----------
        X : array-like or dask.array.Array of shape (n_samples, n_features)
            Training data.  A Dask array is streamed, never loaded whole.
        y : None
            Ignored.
        reference_samples : array-like of shape (n_samples,), dtype bool, or of int, optional
            Samples known to be inliers (a reference population), as a boolean mask or
            sample indices, passed to :func:`mspca_dask.fit`: the mean-shift evidence takes
            its null variance from them.  ``location`` must then be their centre (a
            vector, or None for data already centred on it).

        Returns
        -------
        self : MeanShiftPCA
            The fitted estimator.

        Raises
        ------
        ValueError
            ``X`` has fewer than 2 samples, NaN or infinite values, a constant feature,
            or ``n_components > min(n_samples, n_features)``.
        ParameterError
            ``n_features_out`` is larger than ``n_components``, or than the number of
            eigenpairs examined that are not mean shifts; ``reference_samples`` is not a
            mask or indices of at least 2 samples, or comes with ``location="auto"``.
        DTypeError
            ``X`` is a sparse matrix of a format other than CSR or CSC.
        """
        self._fit(X, reference_samples)
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    def fit_transform(
        self, X: Any, y: Any = None, *, reference_samples: Any = None
    ) -> np.ndarray | da.Array:
        """Fit the model and return the scores of ``X`` on its components.

        The scores come from the fit itself (no second pass over the data).

        Parameters
        ----------
        X : array-like or dask.array.Array of shape (n_samples, n_features)
            Training data.
        y : None
            Ignored.
        reference_samples : array-like of shape (n_samples,), dtype bool, or of int, optional
            Samples known to be inliers (see :meth:`fit`).

        Returns
        -------
        X_new : ndarray or dask.array.Array of shape ``(n_samples, n_components_)``
            ``(X - mean_) @ components_.T``; a Dask array (chunked along the samples
            like ``X``) for Dask input.

        Raises
        ------
        ParameterError
            No component is stable and ``n_features_out`` is None (the estimator stays
            fitted: ``result_`` says why), or as in :meth:`fit`.
        """
        X = self._fit(X, reference_samples)
        self._check_width()
        scores = np.ascontiguousarray(np.asarray(self.result_.scores)[:, self.components_index_])
        if _is_dask_array(X):
            import dask.array as da

            return da.from_array(scores, chunks=(X.chunks[0], scores.shape[1]))
        return scores

    def _fit(self, X: Any, reference_samples: Any) -> Any:
        from .api import fit

        X = _lazy_matrix(X)
        if _is_dask_array(X):
            _check_dask_array(X)
            _check_n_features(self, X, reset=True)
            _check_feature_names(self, X, reset=True)
        else:
            X = validate_data(self, X, dtype=np.float64, ensure_min_samples=2)
        n, d = (int(s) for s in X.shape)
        if self.n_components > min(n, d):
            raise ValueError(
                f"n_components={self.n_components} must be between 1 and "
                f"min(n_samples, n_features)={min(n, d)}"
            )
        if self.n_features_out is not None and self.n_features_out > self.n_components:
            raise ParameterError(
                f"n_features_out={self.n_features_out} must be at most "
                f"n_components={self.n_components}, the number of eigenpairs examined"
            )
        location = self.location
        if location is not None and not isinstance(location, str):
            location = np.asarray(location, dtype=float)
        res = fit(
            X,
            n_components=int(self.n_components),
            location=location,
            solver=self.solver,
            n_knockoffs=int(self.n_knockoffs),
            knockoff_weight=float(self.knockoff_weight),
            knockoff_factor=float(self.knockoff_factor),
            threshold_scale=float(self.threshold_scale),
            alpha=float(self.alpha),
            edge_margin=float(self.edge_margin),
            tol=None if self.tol is None else float(self.tol),
            max_passes=int(self.max_passes),
            oversampling=int(self.oversampling),
            random_state=self._seed(),
            scheduler=self.scheduler,
            reference_samples=reference_samples,
        )
        # Chosen before any attribute is set, so that a refused width leaves no half fit.
        index = self._output_index(res)
        self.result_: MSPCAResult = res
        self.eigenvalues_ = np.asarray(res.eigenvalues, dtype=float)
        self.stable_ = np.asarray(res.stable, dtype=bool)
        self.verdicts_ = np.asarray(res.verdicts, dtype=str)
        # a fit always stores the groups; zeros keep the attribute's shape if one did not
        self.groups_ = np.zeros(n, dtype=np.intp) if res.groups is None else np.asarray(res.groups)
        self.components_index_ = index
        self.components_ = np.asarray(res.eigenvectors, dtype=float).reshape(-1, d)[index]
        self.explained_variance_ = self.eigenvalues_[index]
        self.explained_variance_ratio_ = self.explained_variance_ / float(
            res.total_variance  # type: ignore[arg-type]  # always set by a fit
        )
        self.n_components_ = int(index.size)
        if not np.any(self.stable_) and np.any(res.candidate):
            then = (
                "transform() raises until n_features_out is set"
                if self.n_features_out is None
                else f"the {self.n_components_} output components are bulk eigenpairs"
            )
            warnings.warn(
                f"MeanShiftPCA kept 0 components: none of the {int(np.sum(res.candidate))} "
                "spike(s) above the noise was judged covariance or mixed (see "
                f"result_.summary()); {then}.",
                NoStableComponentWarning,
                stacklevel=3,
            )
        self.mean_shift_components_ = np.asarray(res.mean_shift_components, dtype=float).reshape(
            -1, d
        )
        self.mean_ = np.zeros(d) if res.location is None else np.asarray(res.location, dtype=float)
        self.noise_variance_ = float(res.noise_variance)
        return X

    def _output_index(self, res: MSPCAResult) -> np.ndarray:
        """Indices, among the ``K`` eigenpairs, of the components :meth:`transform` uses."""
        stable = res.component_index
        if self.n_features_out is None:
            return stable
        width = int(self.n_features_out)
        bulk = np.flatnonzero(~np.asarray(res.stable, dtype=bool) & ~np.asarray(res.candidate))
        # Bulk eigenpairs, as PCA would keep them, complete the width; a mean-shift or an
        # undetermined one never does: leaving those out is what the estimator is for.
        chosen = np.concatenate([stable[:width], bulk[: max(width - stable.size, 0)]])
        if chosen.size < width:
            n_shift = int(res.n_components - stable.size - bulk.size)
            raise ParameterError(
                f"n_features_out={width} needs {width} eigenpairs that are not mean shifts, "
                f"but of the n_components={res.n_components} examined {n_shift} are mean "
                f"shifts or undetermined ({stable.size} stable, {bulk.size} bulk); raise "
                f"n_components to at least {width + n_shift} or lower n_features_out"
            )
        return chosen

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # CSR and CSC, densified one chunk at a time
        return tags

    def _seed(self) -> int | None:
        """The integer seed handed to :func:`mspca_dask.fit`."""
        rs = self.random_state
        if rs is None or isinstance(rs, Integral):
            return None if rs is None else int(rs)
        return int(check_random_state(rs).randint(np.iinfo(np.int32).max))

    def _check_width(self) -> None:
        """Refuse to output zero columns (``n_features_out=None`` and nothing stable)."""
        if self.n_components_ > 0:
            return
        verdicts = self.result_.verdicts
        counts = ", ".join(
            f"{int(np.sum(verdicts == v))} {v}"
            for v in ("mean shift", "undetermined", "bulk")
            if v != "undetermined" or np.any(verdicts == v)
        )
        raise ParameterError(
            f"MeanShiftPCA kept no component: none of the {verdicts.size} eigenpairs examined "
            f"is stable ({counts}; see result_.summary()), and "
            "n_features_out=None outputs the stable ones only, which would be zero columns. "
            "Set n_features_out to the number of columns the next step needs (the stable "
            "components, completed by the leading bulk eigenpairs)."
        )

    def _check_X(self, X: Any) -> Any:
        """``X`` checked against the fit: a Dask array on metadata, else as a float64 array."""
        X = _lazy_matrix(X)
        if _is_dask_array(X):
            _check_dask_array(X)
            _check_n_features(self, X, reset=False)
            _check_feature_names(self, X, reset=False)
            return X
        return validate_data(self, X, dtype=np.float64, reset=False)

    # ------------------------------------------------------------------ transform
    def transform(self, X: Any) -> np.ndarray | da.Array:
        """Project ``X`` on the components.

        Parameters
        ----------
        X : array-like or dask.array.Array of shape (n_samples, n_features)
            New samples, with the features seen in :meth:`fit`.

        Returns
        -------
        X_new : ndarray or dask.array.Array of shape ``(n_samples, n_components_)``
            ``(X - mean_) @ components_.T``: a NumPy array for NumPy-like input, a lazy
            Dask array for Dask input.

        Raises
        ------
        ParameterError
            No component is stable and ``n_features_out`` is None: the output would have
            zero columns.
        """
        check_is_fitted(self)
        lazy = _is_dask_array(X)
        X = self._check_X(X)
        self._check_width()
        scores = (X - self.mean_) @ self.components_.T
        # sparse or AnnData input is streamed as Dask chunks; the caller gave no Dask array
        return scores if lazy or not _is_dask_array(scores) else scores.compute()

    def inverse_transform(self, X: Any) -> np.ndarray | da.Array:
        """Map scores back to the feature space: ``X @ components_ + mean_``.

        Parameters
        ----------
        X : array-like or dask.array.Array of shape ``(n_samples, n_components_)``
            Scores, as :meth:`transform` returns them.

        Returns
        -------
        X_original : ndarray or dask.array.Array of shape ``(n_samples, n_features_in_)``
            The samples' projection on the components' span, shifted back by ``mean_``
            (equal to the samples themselves only when they lie in that span).

        Raises
        ------
        ParameterError
            No component is stable and ``n_features_out`` is None (as :meth:`transform`).
        ShapeError
            ``X`` does not have ``n_components_`` columns.
        """
        check_is_fitted(self)
        self._check_width()
        if _is_dask_array(X):
            if X.ndim != 2:
                raise ShapeError(f"Expected a 2D array, got a {X.ndim}D Dask array instead.")
        else:
            X = check_array(X, dtype=np.float64, input_name="X")
        if X.shape[1] != self.n_components_:
            raise ShapeError(
                f"X has {X.shape[1]} columns, but MeanShiftPCA has {self.n_components_} "
                "components: inverse_transform takes the output of transform"
            )
        return X @ self.components_ + self.mean_

    # ------------------------------------------------------------------ likelihood
    def _noise_shrinkage(self) -> tuple[float, np.ndarray]:
        """``σ²`` and ``δₖ = max(λₖ − σ², 0)`` of the probabilistic-PCA covariance."""
        s2 = self.noise_variance_
        # As scikit-learn's get_covariance: a component below the noise adds nothing.
        return s2, np.maximum(self.explained_variance_ - s2, 0.0)

    def get_covariance(self) -> np.ndarray:
        """The model's covariance ``C = σ² I + components_ᵀ diag(δ) components_``.

        ``δₖ = max(explained_variance_ₖ − noise_variance_, 0)``, as in
        :meth:`sklearn.decomposition.PCA.get_covariance`.

        Returns
        -------
        cov : ndarray of shape ``(n_features_in_, n_features_in_)``
        """
        check_is_fitted(self)
        s2, delta = self._noise_shrinkage()
        cov = (self.components_.T * delta) @ self.components_
        cov.flat[:: cov.shape[0] + 1] += s2
        return cov

    def get_precision(self) -> np.ndarray:
        """The model's precision ``C⁻¹``, by the matrix inversion lemma.

        With orthonormal ``components_`` the lemma is explicit:
        ``C⁻¹ = (I − components_ᵀ diag(δ / (σ² + δ)) components_) / σ²``.

        Returns
        -------
        precision : ndarray of shape ``(n_features_in_, n_features_in_)``
        """
        check_is_fitted(self)
        s2, delta = self._noise_shrinkage()
        precision = -(self.components_.T * (delta / (s2 + delta))) @ self.components_
        precision.flat[:: precision.shape[0] + 1] += 1.0
        return precision / s2

    def score_samples(self, X: Any) -> np.ndarray | da.Array:
        """Log-likelihood of each sample under the probabilistic-PCA model.

        The same density as :meth:`sklearn.decomposition.PCA.score_samples`, with this
        fit's ``mean_``, ``components_``, ``explained_variance_`` and
        ``noise_variance_`` (see Notes of the class).

        Parameters
        ----------
        X : array-like or dask.array.Array of shape (n_samples, n_features)
            Samples, with the features seen in :meth:`fit`.

        Returns
        -------
        ll : ndarray or dask.array.Array of shape (n_samples,)
            ``log N(x; mean_, C)`` per sample; lazy for Dask input.

        Notes
        -----
        With ``r = x − mean_``, ``pₖ = wₖ · r`` and ``δₖ = max(λₖ − σ², 0)``:

        ``log N = −½ [ (‖r‖² − Σₖ pₖ² δₖ / (σ² + δₖ)) / σ² + d log 2π
        + d log σ² + Σₖ log(1 + δₖ / σ²) ]``

        — ``C⁻¹`` and ``log det C`` in low-rank form, so no ``d × d`` matrix is formed.
        """
        check_is_fitted(self)
        lazy = _is_dask_array(X)
        X = self._check_X(X)
        s2, delta = self._noise_shrinkage()
        d = self.components_.shape[1]
        R = X - self.mean_
        P = R @ self.components_.T
        quad = ((R * R).sum(axis=1) - (P * P) @ (delta / (s2 + delta))) / s2
        logdet = d * math.log(s2) + float(np.sum(np.log1p(delta / s2)))
        out = -0.5 * (quad + d * math.log(2.0 * math.pi) + logdet)
        return out if lazy or not _is_dask_array(out) else out.compute()

    def score(self, X: Any, y: Any = None) -> float:
        """Average log-likelihood of the samples (:meth:`score_samples`).

        Parameters
        ----------
        X : array-like or dask.array.Array of shape (n_samples, n_features)
            Samples, with the features seen in :meth:`fit`.
        y : None
            Ignored.

        Returns
        -------
        ll : float
            The mean of :meth:`score_samples` (computed for Dask input).
        """
        ll = self.score_samples(X)
        return float(ll.mean().compute() if _is_dask_array(ll) else np.mean(ll))

    @property
    def _n_features_out(self) -> int:
        """Number of output features (used by :meth:`get_feature_names_out`)."""
        return self.components_.shape[0]
