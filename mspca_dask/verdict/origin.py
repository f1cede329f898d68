"""Is the origin the inliers' centre?  (NumPy/SciPy.)

Data centred on their inliers (inliers at zero mean, as the paper's model has them; dosages
centred on a reference's frequencies) hold a fact beside the shape of their scores: a
displaced group moves the data's mean off the origin along the candidates, even when its
marginal has a single mode (a minority less than about two spreads away).

Whether the data are so centred is tested off the candidates, where a displaced group moves
the mean only by the share of its direction that the sample eigenvectors miss (``1 − cos²``,
:func:`~mspca_dask.rmt.eigenvector_alignment`).  The statistic,
``a = n(‖x̄‖² − Σ_j (x̄·v_j)² / cos²_j)``, is the mean's squared norm off the candidates less
those shares.  When the inliers are centred at the origin it is a weighted sum of ``χ²₁``
over the bulk (weights: the bulk's variances) less ``(1 − cos²_j)/cos²_j`` times a
non-central ``χ²₁`` per candidate (``n(x̄·v_j)²``, whose noise the correction carries).  Its
mean and an upper bound of its variance (every bulk weight at most ``λ_b``, the largest bulk
eigenvalue seen; the candidates' terms at their observed non-centrality) give it a gamma
distribution (Satterthwaite), against which ``a`` is tested two-sided at level ``α``; the
sample eigenvectors' own fluctuation about their limiting alignment is left out of the
variance.  Raw data with an offset lie far above it; data centred on their own mean
(``x̄ = 0``: the origin is the sample mean, not the inliers') far below: either way the origin
says nothing and the groups rest on the scores' shape alone.
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammainc

__all__ = ["origin_is_centre"]


def origin_is_centre(
    n: int,
    mean_sq: float,
    mean_on_candidates: np.ndarray,
    total_variance: float,
    candidate_values: np.ndarray,
    alignments: np.ndarray,
    bulk_top: float,
    level: float,
) -> bool:
    """Whether the data's mean off the candidates is the origin's, within its sampling error.

    Parameters
    ----------
    n : int
        Samples.
    mean_sq : float
        ``‖x̄‖²``, the squared norm of the data's mean (about the origin).
    mean_on_candidates : (k,) ndarray
        ``x̄ · v_j``: the mean's coordinates on the candidates' unit eigenvectors.
    total_variance : float
        ``tr(S)``, the trace of the sample covariance (about ``x̄``).
    candidate_values : (k,) ndarray
        The candidates' eigenvalues of ``S``.
    alignments : (k,) ndarray
        ``cos²_j``, each candidate's expected squared alignment with its population
        eigenvector (:func:`~mspca_dask.rmt.eigenvector_alignment`); 0 leaves it out.
    bulk_top : float
        The largest eigenvalue of ``S`` that is no candidate (or, when every computed one
        is, the smallest candidate's): an upper bound of the bulk's variances.
    level : float
        ``α`` of the two-sided test.

    Returns
    -------
    bool
        True when the origin passes as the inliers' centre.
    """
    on = np.asarray(mean_on_candidates, dtype=float)
    values = np.asarray(candidate_values, dtype=float)
    cos2 = np.asarray(alignments, dtype=float)
    seen = cos2 > 0
    missed = np.where(seen, (1.0 - cos2) / np.where(seen, cos2, 1.0), 0.0)
    a = n * (mean_sq - float(np.sum(on * on)) - float(np.sum(missed * on * on)))
    spread = total_variance - float(np.sum(values))
    mean = spread - float(np.sum(missed * values))
    # n(x̄·v_j)² is λ_j times a non-central χ²₁: variance 2λ_j² + 4λ_j n(x̄·v_j)²
    var = 2.0 * bulk_top * spread + float(
        np.sum(missed**2 * (2.0 * values**2 + 4.0 * values * n * on * on))
    )
    if not (mean > 0 and var > 0 and np.isfinite(a)):
        return False
    scale, shape = var / (2.0 * mean), 2.0 * mean * mean / var  # gamma(shape/2, 2·scale)
    below = float(gammainc(shape / 2.0, max(a, 0.0) / (2.0 * scale)))  # P(A ≤ a)
    return level / 2.0 < below < 1.0 - level / 2.0
