"""Ways in which the data do not fit the spiked model, in words (NumPy only)."""

from __future__ import annotations

import numpy as np

__all__ = ["model_fit_diagnostics"]

#: Largest relative spread (IQR / median) of the feature variances under the model, at least.
HETEROSCEDASTIC_SPREAD = 0.5
#: Fewest computed eigenvalues for the bulk check (asking for K pairs when there are K spikes
#: is normal; six or more all above the edge is not).
MIN_BULK_CHECK = 6
#: Fewest samples or features for which the random-matrix approximations are trusted.
MIN_DIMENSION = 40


def model_fit_diagnostics(
    eigenvalues: np.ndarray,
    edge: float,
    margin: float,
    feature_variances: np.ndarray | None,
    n_samples: int,
    n_features: int,
) -> list[str]:
    """Ways in which the data do not fit the spiked model, in words (empty: none seen).

    * **Heteroscedastic noise**: the model has one noise variance for every feature, so the
      feature variances differ only by the spikes' loadings and sampling noise.  A relative
      spread ``IQR / median`` above ``max(0.5, 6 √(2/n))`` means the edge and the noise level
      are wrong for most features (standardise them, or expect bulk directions as spikes).
    * **Bulk far from Marchenko–Pastur**: every one of six or more computed eigenvalues is
      above the candidate line, so either there are more than K spikes or the bulk is not
      Marchenko–Pastur with the estimated noise variance (correlated noise, e.g. linkage
      disequilibrium); the verdicts then rest on a wrong edge.
    * **Too small**: ``min(n, d) < 40``: the asymptotics behind the edge and ``g`` are poor.

    Parameters
    ----------
    eigenvalues : (K,) ndarray
    edge, margin : float
        Marchenko–Pastur edge and the candidate margin above it.
    feature_variances : (d,) ndarray or None
    n_samples, n_features : int

    Returns
    -------
    list of str

    Examples
    --------
    >>> model_fit_diagnostics(np.array([5.0, 3.0]), 3.8, 0.1, np.ones(100), 1000, 100)
    []
    >>> len(model_fit_diagnostics(np.full(6, 5.0), 3.8, 0.1, np.ones(30), 30, 30))
    2
    """
    out: list[str] = []
    lam = np.asarray(eigenvalues, dtype=float)
    if feature_variances is not None and np.size(feature_variances) >= 4:
        v = np.asarray(feature_variances, dtype=float)
        med = float(np.median(v))
        spread = float(np.subtract(*np.percentile(v, [75, 25]))) / med if med > 0 else np.inf
        limit = max(HETEROSCEDASTIC_SPREAD, 6 * np.sqrt(2 / n_samples))
        if spread > limit:
            out.append(
                f"heteroscedastic noise: the feature variances spread by {spread:.3g} "
                f"(interquartile range over median; the model allows about {limit:.2g}); the "
                f"noise level and bulk edge fit few features. Standardise the features."
            )
    if MIN_BULK_CHECK <= lam.size < min(n_samples, n_features) and lam[-1] > edge + margin:
        out.append(
            f"bulk far from Marchenko-Pastur: all {lam.size} computed eigenvalues are above the "
            f"candidate line {edge + margin:.4g} (smallest {lam[-1]:.4g}); there are more "
            f"spikes than n_components or the noise is correlated."
        )
    if min(n_samples, n_features) < MIN_DIMENSION:
        out.append(
            f"too small: min(n, d) = {min(n_samples, n_features)} < {MIN_DIMENSION}; the "
            f"random-matrix approximations behind the edge and the knockoff are poor."
        )
    return out
