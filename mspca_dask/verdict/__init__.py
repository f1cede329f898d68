"""The verdict: one model, one calibrated group test, two statistics per eigenpair.

The model, in ten lines:

1. The candidates are the eigenpairs above the noise's Marchenko–Pastur edge by ``edge_margin``
   Tracy–Widom units; their ``n × k`` scores are group means plus within-group noise,
   ``tᵢ = m_g(i) + eᵢ``, each group with its own covariance (batches and populations differ).
2. Groups come from one fit: a Gaussian mixture in score space (EM, groups added while BIC
   falls; reference rows pinned to the inliers' group 0, else group 0 is the largest).
3. One test says whether there are displaced groups at all, at level ``α``: the mixture's BIC
   gain against ``⌈1/α⌉ − 1`` twins with the data's columns made unimodal (Silverman's
   critical bandwidth) and independent.  Not rejected: one group, every candidate covariance.
4. The location is the inliers' mean.
5. Per candidate, ``shift_z``: Welch's χ² of the group means as an ``N(0, 1)`` deviate;
   ``within_z``: the inliers' variance against the bulk level ``b`` (the largest
   non-candidate eigenvalue, at least the edge).
6. Verdicts at ``z* = Φ⁻¹(1 − α/k)``: shifted and a spike within → mixed; shifted, noise within
   → mean shift; not shifted → covariance; the rest undetermined (:mod:`.pairs`).
7. Covariance components are the top eigenvectors of the inliers' covariance in the span of
   the K eigenvectors (the shift removed); the knockoff displacement is reported, not used.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .groups import GroupFit, fit_groups
from .knockoff import KnockoffReport, knockoff_report, max_overlap_assignment
from .levels import ALPHA
from .pairs import VERDICTS, PairVerdicts, between_group_share, judge_pairs, shift_statistics

__all__ = [
    "ALPHA",
    "VERDICTS",
    "GroupFit",
    "KnockoffReport",
    "PairVerdicts",
    "Verdict",
    "between_group_share",
    "bulk_level",
    "clean_components",
    "decide",
    "fit_groups",
    "judge_pairs",
    "knockoff_report",
    "max_overlap_assignment",
    "shift_statistics",
]


def bulk_level(eigenvalues: np.ndarray, candidate: np.ndarray, edge: float) -> float:
    """The bulk level ``b``: the largest computed non-candidate eigenvalue, at least ``edge``.

    It is the variance a direction fitted to the noise reaches; with every computed pair a
    candidate the edge is all the data say.
    """
    rest = np.asarray(eigenvalues)[~np.asarray(candidate, dtype=bool)]
    return float(max(edge, rest.max())) if rest.size else float(edge)


def clean_components(
    scores: np.ndarray, labels: np.ndarray, n_clean: int
) -> tuple[np.ndarray, np.ndarray]:
    """The inliers' top covariance directions in the span of the K eigenvectors.

    Parameters
    ----------
    scores : (n, K) ndarray
    labels : (n,) int ndarray
        Groups (0: the inliers).
    n_clean : int
        How many to return.

    Returns
    -------
    rotation : (K, n_clean) ndarray
        Orthonormal; the clean components are ``eigenvectors.T @ rotation`` and their scores
        ``scores @ rotation``.
    variances : (n_clean,) ndarray
        The inliers' variance along each.
    """
    inl = np.asarray(scores, dtype=float)[labels == 0]
    C = np.cov(inl, rowvar=False).reshape(scores.shape[1], scores.shape[1])
    w, R = np.linalg.eigh(C)
    order = np.argsort(w)[::-1][:n_clean]
    return R[:, order], w[order]


@dataclass(frozen=True)
class Verdict:
    """Everything the verdict decided about one fit."""

    groups: GroupFit
    pairs: PairVerdicts
    knockoff: KnockoffReport
    bulk: float


def decide(
    scores: np.ndarray,
    eigenvalues: np.ndarray,
    candidate: np.ndarray,
    *,
    edge: float,
    level: float = ALPHA,
    groups: GroupFit | None = None,
    pinned: np.ndarray | None = None,
    knockoff_eigenvalues: np.ndarray | None = None,
    overlaps: np.ndarray | None = None,
    seed: int = 0,
) -> Verdict:
    """Run the model on one fit's scores (module docstring).

    Parameters
    ----------
    scores : (n, K) ndarray
        Sample scores on the K eigenvectors.
    eigenvalues : (K,) ndarray
    candidate : (K,) bool ndarray
    edge : float
        The bulk edge (Marchenko–Pastur, at the estimated noise variance).
    level : float
        ``α``.
    groups : GroupFit or None
        Groups already fitted (by the location step); else fitted on the candidates' scores.
    pinned : (n,) bool ndarray or None
        Reference rows (group 0).
    knockoff_eigenvalues, overlaps : ndarrays or None
        The knockoff spectra (B, K') and overlaps (B, K, K'), for the report.
    seed : int
    """
    T = np.asarray(scores, dtype=float)
    cand = np.asarray(candidate, dtype=bool)
    if groups is None:
        groups = fit_groups(T[:, cand], pinned=pinned, level=level, seed=seed)
    bulk = bulk_level(eigenvalues, cand, edge)
    pairs = judge_pairs(T, cand, groups.labels, bulk=bulk, level=level)
    if knockoff_eigenvalues is not None and overlaps is not None:
        report = knockoff_report(eigenvalues, knockoff_eigenvalues, overlaps)
    else:
        K = T.shape[1]
        report = KnockoffReport(np.full(K, np.nan), np.full(K, np.nan), np.zeros((0, K), int))
    return Verdict(groups, pairs, report, bulk)
