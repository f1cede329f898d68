"""The invariance check: which eigenpairs stayed put under the knockoff (pure NumPy/SciPy).

The paper's rule (Algorithm 1) keeps ``λ̃ᵢ`` when *some* knockoff eigenvalue ``λ'ⱼ`` lies within
``ε = C n^{-1/2}``.  Measured on its own Gaussian-mixture setting (DESIGN.md §2) it fails in
0.5–3 % of trials, catastrophically, in two ways: a mean-shift eigenvalue lands within ``ε``
of an unrelated knockoff eigenvalue by chance and is kept, or the covariance spike drifts by
more than ``ε`` and a bulk eigenvector is returned instead.  This module's rule:

1. **Only spikes are candidates.**  An eigenvalue must exceed the Marchenko–Pastur edge by
   ``margin`` (by default 4 Tracy–Widom units): bulk eigenvalues are never "stable components".
2. **One-to-one matching by eigenvector.**  The knockoff eigenpair matched to ``ũᵢ`` is chosen
   by a maximum-overlap assignment (Hungarian algorithm on ``|⟨ũᵢ, u'ⱼ⟩|``), not by the
   nearest eigenvalue, so an unrelated eigenvalue that happens to be close cannot vouch for it.
3. **Eigenvalue and eigenvector must both stay.**  The displacement ``|λ̃ᵢ − λ'_{π(i)}|`` must be
   below ``ε`` and the overlap at least ``min_overlap``: a mean-shift eigenvector mixes with
   the knockoff direction.
4. **Several knockoffs, median.**  Each statistic is the median over independent knockoffs,
   which removes the chance alignments of a single random direction.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import linear_sum_assignment

__all__ = ["InvarianceCheck", "check_invariance", "paper_rule"]


@dataclass(frozen=True)
class InvarianceCheck:
    """Outcome of the invariance check for the top-K eigenpairs.

    Attributes
    ----------
    stable : (K,) bool ndarray
        True for covariance (invariant) eigenpairs.
    candidate : (K,) bool ndarray
        True where the eigenvalue is clearly above the bulk edge.
    displacement : (K,) ndarray
        Median over knockoffs of ``|λ̃ᵢ − λ'_{π_b(i)}|``.
    overlap : (K,) ndarray
        Median over knockoffs of ``|⟨ũᵢ, u'_{π_b(i)}⟩|``.
    matched : (B, K) int ndarray
        Index of the knockoff eigenpair matched to each original one, per knockoff.
    reasons : (K,) object ndarray of str
        Why each eigenpair got its verdict.
    """

    stable: np.ndarray
    candidate: np.ndarray
    displacement: np.ndarray
    overlap: np.ndarray
    matched: np.ndarray
    reasons: np.ndarray


def check_invariance(
    eigenvalues: np.ndarray,
    knockoff_eigenvalues: np.ndarray,
    overlaps: np.ndarray,
    *,
    threshold: float,
    edge: float,
    margin: float,
    min_overlap: float,
) -> InvarianceCheck:
    """Label the top-K eigenpairs stable (covariance) or not (mean shift or bulk).

    Parameters
    ----------
    eigenvalues : (K,) ndarray
        Original eigenvalues ``λ̃``, descending.
    knockoff_eigenvalues : (B, K') ndarray
        Top-K' eigenvalues of each of the ``B`` knockoff spectra, descending, ``K' ≥ K``.
        A knockoff's own spike can push an invariant eigenpair below its K-th place, so
        computing a couple more than K (``fit`` takes ``K' = K + 2``) keeps its partner
        in view.
    overlaps : (B, K, K') ndarray
        ``|⟨ũᵢ, u'_{b,j}⟩|`` between unit feature-space eigenvectors.
    threshold : float
        ``ε``, on the data scale.
    edge : float
        Upper Marchenko–Pastur edge ``σ²(1 + √c)²``.
    margin : float
        How far above the edge a candidate must be.
    min_overlap : float
        Smallest median eigenvector overlap of a stable pair, in ``(0, 1]``.

    Returns
    -------
    InvarianceCheck

    Examples
    --------
    >>> lam = np.array([6.0, 4.3, 3.7])
    >>> knock = np.array([[9.5, 5.0, 4.3]])
    >>> ov = np.array([[[0.2, 0.85, 0.1], [0.1, 0.1, 0.99], [0.0, 0.1, 0.1]]])
    >>> res = check_invariance(lam, knock, ov, threshold=0.1, edge=3.8, margin=0.1, min_overlap=0.8)
    >>> res.stable.tolist()
    [False, True, False]
    """
    lam = np.asarray(eigenvalues, dtype=float)
    knock = np.atleast_2d(np.asarray(knockoff_eigenvalues, dtype=float))
    ov = np.asarray(overlaps, dtype=float)
    if ov.ndim == 2:
        ov = ov[None]
    K = lam.shape[0]
    B, K_knock = knock.shape
    if K_knock < K or ov.shape != (B, K, K_knock):
        raise ValueError(
            f"shapes disagree: eigenvalues {lam.shape}, knockoff_eigenvalues {knock.shape}, "
            f"overlaps {ov.shape}; expected (K,), (B, K') and (B, K, K') with K' >= K"
        )
    matched = np.zeros((B, K), dtype=int)
    disp = np.zeros((B, K))
    over = np.zeros((B, K))
    for b in range(B):
        rows, cols = linear_sum_assignment(-ov[b])
        matched[b, rows] = cols
        disp[b, rows] = np.abs(lam[rows] - knock[b, cols])
        over[b, rows] = ov[b, rows, cols]
    displacement = np.median(disp, axis=0) if B else np.full(K, np.inf)
    overlap = np.median(over, axis=0) if B else np.zeros(K)
    candidate = lam > edge + margin
    moved = displacement >= threshold
    turned = overlap < min_overlap
    stable = candidate & ~moved & ~turned
    reasons = np.empty(K, dtype=object)
    for i in range(K):
        knock_txt = f"median of {B} knockoff{'s' if B != 1 else ''}"
        if not candidate[i]:
            reasons[i] = (
                f"bulk: {lam[i]:.4g} is not above the Marchenko-Pastur edge {edge:.4g} "
                f"by the margin {margin:.3g}"
            )
        elif moved[i]:
            reasons[i] = (
                f"mean shift: eigenvalue moved {displacement[i]:.3g} >= threshold {threshold:.3g} "
                f"({knock_txt}); eigenvector overlap {overlap[i]:.3f}"
            )
        elif turned[i]:
            reasons[i] = (
                f"mean shift: eigenvector turned, overlap {overlap[i]:.3f} < {min_overlap:.3g} "
                f"({knock_txt}); eigenvalue moved {displacement[i]:.3g}"
            )
        else:
            reasons[i] = (
                f"stable: eigenvalue moved {displacement[i]:.3g} < threshold {threshold:.3g} and "
                f"eigenvector overlap {overlap[i]:.3f} >= {min_overlap:.3g} ({knock_txt})"
            )
    return InvarianceCheck(
        stable=stable,
        candidate=candidate,
        displacement=displacement,
        overlap=overlap,
        matched=matched,
        reasons=reasons,
    )


def paper_rule(
    eigenvalues: np.ndarray, knockoff_eigenvalues: np.ndarray, threshold: float
) -> np.ndarray:
    """The paper's Algorithm 1 check, for comparison: ``∃ j : |λ̃ᵢ − λ'ⱼ| < ε``.

    Parameters
    ----------
    eigenvalues : (K,) ndarray
    knockoff_eigenvalues : (K,) ndarray
    threshold : float

    Returns
    -------
    stable : (K,) bool ndarray

    Examples
    --------
    >>> paper_rule(np.array([6.0, 4.3]), np.array([9.5, 4.31]), 0.035).tolist()
    [False, True]
    """
    lam = np.asarray(eigenvalues, dtype=float)
    knock = np.asarray(knockoff_eigenvalues, dtype=float)
    return np.min(np.abs(lam[:, None] - knock[None, :]), axis=1) < threshold
