"""A scikit-learn estimator around :func:`mspca_dask.fit`: :class:`MeanShiftPCA`."""

from __future__ import annotations

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
from sklearn.utils._param_validation import HasMethods, StrOptions
from sklearn.utils.validation import (
    _check_feature_names,
    _check_n_features,
    check_is_fitted,
    validate_data,
)

from ._params import PARAMETERS, sklearn_constraints
from .errors import NoStableComponentWarning

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


class MeanShiftPCA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Mean-Shift PCA by Knockoff Mean, as a scikit-learn transformer.

    Computes the top ``n_components`` eigenpairs of the covariance and keeps the
    *stable* ones — those a knockoff mean shift leaves in place, i.e. the covariance
    principal components — discarding the eigenpairs caused by a mean shift of a
    minority of samples (see :func:`mspca_dask.fit`).  :meth:`transform` projects on
    the stable components only.

    Parameters
    ----------
    n_components : int, default=10
        ``K``, the number of leading eigenpairs examined, ``1 <= K <= min(n_samples,
        n_features)``.  The number of components *kept*, :attr:`n_components_`, is the
        number of stable eigenpairs among them and may be smaller (down to 0).
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
    min_overlap : float, default=0.5
        Smallest median overlap, in ``(0, 1]``, of a stable eigenvector with its knockoff
        match.
    min_shift_share : float, default=0.05
        Smallest share ``η²``, in ``[0, 1)``, of a pair's score variance between the groups
        (reference and rest, or groups found in score space) for a mean-shift verdict.
    edge_margin : float, default=4.0
        A candidate spike must exceed the Marchenko–Pastur bulk edge by this many
        Tracy–Widom units (``>= 0``), or lie above the edge with scores so skewed (a bulk
        direction's are symmetric) that both together reach the same level.
    tol : float or None, default=None
        Eigenvalue accuracy (``> 0``) the randomized solver certifies; ``None`` derives it
        from the invariance radius (``ε / 10``).
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
        The stable (covariance) eigenvectors, as unit rows, by descending eigenvalue,
        with deterministic signs.
    explained_variance_ : ndarray of shape ``(n_components_,)``
        Their eigenvalues, as eigenvalues of ``(X - mean_)ᵀ(X - mean_) / n_samples``
        (divided by ``n``, not ``n - 1`` as in :class:`sklearn.decomposition.PCA`).
    n_components_ : int
        Number of stable components (0 when no eigenpair is stable).
    mean_ : ndarray of shape (n_features,)
        The location subtracted from every sample (zeros for ``location=None``).
    noise_variance_ : float
        Estimated noise variance ``σ²`` of the bulk.
    mean_shift_components_ : ndarray of shape (n_mean_shift, n_features)
        Eigenvectors above the noise edge that the knockoff moved (mean-shift
        directions), as rows.
    eigenvalues_ : ndarray of shape (n_components,)
        All ``K`` eigenvalues examined, descending.
    stable_ : ndarray of shape (n_components,), dtype bool
        True for the stable eigenpairs among the ``K``.
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
    is a mean shift, no eigenpair is stable.  The fit then still succeeds:
    ``n_components_ = 0``, ``components_`` has shape ``(0, n_features)`` and
    :meth:`transform` returns an array of shape ``(n_samples, 0)`` — the honest answer
    "there is no covariance principal component above the noise".  In the first case
    :func:`mspca_dask.fit` warns with :class:`mspca_dask.NoSpikeWarning`, which is
    passed on to the caller; in the second the estimator warns with
    :class:`mspca_dask.NoStableComponentWarning`: it never returns zero components silently.

    **Input.**  NumPy-like input (lists, pandas DataFrames, ...) is validated as in
    scikit-learn (float64, at least 2 samples, no NaN or infinity, no sparse matrix).
    A Dask array is *not* loaded into memory: its shape and dtype are checked here,
    its values (NaN, infinity) by :func:`mspca_dask.fit` as it streams, and
    :meth:`transform` returns a lazy Dask array for Dask input.
    Features that are constant across the samples are refused, as by
    :func:`mspca_dask.fit` (:class:`mspca_dask.InputError`, a ``ValueError`` naming
    them): they carry no variance, and with ``location=None`` they would silently
    enter the uncentred analysis.  Drop them first, e.g. with
    :class:`sklearn.feature_selection.VarianceThreshold` in a pipeline.

    **n_components.**  As in :class:`sklearn.decomposition.PCA`, ``n_components`` larger
    than ``min(n_samples, n_features)`` is an error (``ValueError``), not silently
    clipped.

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
    """

    # Every tuning parameter of mspca_dask.fit, with the registry's ranges (one source).
    _parameter_constraints: dict[str, list[Any]] = {
        **sklearn_constraints(PARAMETERS),
        "location": [StrOptions({"auto"}), "array-like", None],
        "scheduler": [str, HasMethods(["compute", "scheduler_info"]), None],
    }

    def __init__(
        self,
        n_components: int = 10,
        *,
        location: str | np.ndarray | None = "auto",
        solver: str = "auto",
        n_knockoffs: int = 5,
        knockoff_weight: float = 1.0,
        knockoff_factor: float = 2.0,
        threshold_scale: float = 3.0,
        min_overlap: float = 0.5,
        min_shift_share: float = 0.05,
        edge_margin: float = 4.0,
        tol: float | None = None,
        max_passes: int = 40,
        oversampling: int = 10,
        random_state: int | np.random.RandomState | None = 0,
        scheduler: Any = None,
    ) -> None:
        self.n_components = n_components
        self.location = location
        self.solver = solver
        self.n_knockoffs = n_knockoffs
        self.knockoff_weight = knockoff_weight
        self.knockoff_factor = knockoff_factor
        self.threshold_scale = threshold_scale
        self.min_overlap = min_overlap
        self.min_shift_share = min_shift_share
        self.edge_margin = edge_margin
        self.tol = tol
        self.max_passes = max_passes
        self.oversampling = oversampling
        self.random_state = random_state
        self.scheduler = scheduler

    # ------------------------------------------------------------------ fitting
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any = None) -> MeanShiftPCA:
        """Fit the model: find the stable (covariance) principal components of ``X``.

        Parameters
        ----------
        X : array-like or dask.array.Array of shape (n_samples, n_features)
            Training data.  A Dask array is streamed, never loaded whole.
        y : None
            Ignored.

        Returns
        -------
        self : MeanShiftPCA
            The fitted estimator.

        Raises
        ------
        ValueError
            ``X`` has fewer than 2 samples, NaN or infinite values, a constant feature,
            or ``n_components > min(n_samples, n_features)``.
        TypeError
            ``X`` is a sparse matrix.
        """
        self._fit(X)
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    def fit_transform(self, X: Any, y: Any = None) -> np.ndarray | da.Array:
        """Fit the model and return the scores of ``X`` on the stable components.

        The scores come from the fit itself (no second pass over the data).

        Parameters
        ----------
        X : array-like or dask.array.Array of shape (n_samples, n_features)
            Training data.
        y : None
            Ignored.

        Returns
        -------
        X_new : ndarray or dask.array.Array of shape ``(n_samples, n_components_)``
            ``(X - mean_) @ components_.T``; a Dask array (chunked along the samples
            like ``X``) for Dask input.
        """
        X = self._fit(X)
        scores = np.ascontiguousarray(np.asarray(self.result_.scores)[:, self.stable_])
        if _is_dask_array(X):
            import dask.array as da

            return da.from_array(scores, chunks=(X.chunks[0], scores.shape[1]))
        return scores

    def _fit(self, X: Any) -> Any:
        from .api import fit

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
            min_overlap=float(self.min_overlap),
            min_shift_share=float(self.min_shift_share),
            edge_margin=float(self.edge_margin),
            tol=None if self.tol is None else float(self.tol),
            max_passes=int(self.max_passes),
            oversampling=int(self.oversampling),
            random_state=self._seed(),
            scheduler=self.scheduler,
        )
        self.result_: MSPCAResult = res
        self.eigenvalues_ = np.asarray(res.eigenvalues, dtype=float)
        self.stable_ = np.asarray(res.stable, dtype=bool)
        self.components_ = np.asarray(res.components, dtype=float).reshape(-1, d)
        self.explained_variance_ = self.eigenvalues_[self.stable_]
        self.n_components_ = int(self.components_.shape[0])
        if self.n_components_ == 0 and np.any(res.candidate):
            warnings.warn(
                f"MeanShiftPCA kept 0 components: all {int(np.sum(res.candidate))} spike(s) "
                f"above the noise were judged mean shifts (see result_.summary()); "
                f"transform() returns an empty (n_samples, 0) array.",
                NoStableComponentWarning,
                stacklevel=3,
            )
        self.mean_shift_components_ = np.asarray(res.mean_shift_components, dtype=float).reshape(
            -1, d
        )
        self.mean_ = np.zeros(d) if res.location is None else np.asarray(res.location, dtype=float)
        self.noise_variance_ = float(res.noise_variance)
        return X

    def _seed(self) -> int | None:
        """The integer seed handed to :func:`mspca_dask.fit`."""
        rs = self.random_state
        if rs is None or isinstance(rs, Integral):
            return None if rs is None else int(rs)
        return int(check_random_state(rs).randint(np.iinfo(np.int32).max))

    # ------------------------------------------------------------------ transform
    def transform(self, X: Any) -> np.ndarray | da.Array:
        """Project ``X`` on the stable components.

        Parameters
        ----------
        X : array-like or dask.array.Array of shape (n_samples, n_features)
            New samples, with the features seen in :meth:`fit`.

        Returns
        -------
        X_new : ndarray or dask.array.Array of shape ``(n_samples, n_components_)``
            ``(X - mean_) @ components_.T``: a NumPy array for NumPy-like input, a lazy
            Dask array for Dask input.
        """
        check_is_fitted(self)
        if _is_dask_array(X):
            _check_dask_array(X)
            _check_n_features(self, X, reset=False)
            _check_feature_names(self, X, reset=False)
            return (X - self.mean_) @ self.components_.T
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return (X - self.mean_) @ self.components_.T

    @property
    def _n_features_out(self) -> int:
        """Number of output features (used by :meth:`get_feature_names_out`)."""
        return self.components_.shape[0]
