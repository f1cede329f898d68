"""The verdict: one model, one calibrated group test, two facts per eigenpair.

The model, in ten lines:

1. The candidates are the eigenpairs above the noise's Marchenko–Pastur edge by ``edge_margin``
   Tracy–Widom units; their ``n × k`` scores are group means plus within-group noise,
   ``tᵢ = m_g(i) + eᵢ``; the groups' covariances share one shape at their own scales
   (batches with more noise, populations of different diversity) or each has its own.
2. One test says whether there are displaced groups at all, at level ``α``: a Gaussian
   mixture's BIC gain (EM) against ``⌈1/α⌉ − 1`` twins drawn under a factor model: the
   scores' most independent axes (FastICA), each made unimodal (Silverman's critical
   bandwidth), drawn independently; when the data's mean off the candidates passes as the
   origin's (:mod:`.origin`), also Hotelling's ``T²`` of the scores' mean against the
   origin, each at ``α/2``.  Not rejected: one group, every candidate covariance.
3. Rejected, the groups grow from two, one at a time while each step's test (the same; its
   twins redraw each group's own rows, smoothed to one mode along its axes and the step's
   cut) rejects at level ``α``, each from the likelier of its mixtures (the inliers' mean
   held at the origin when it is their centre, as in the final fit); reference rows are
   pinned to the inliers' group 0, else group 0 is the largest; of two or more displaced
   groups, one that its rows and the inliers' alone do not show apart from them at level
   ``α`` (twins of the two as one group) joins them: a skewed cloud's tail (:mod:`.groups`).
4. The location is the inliers' mean; the covariance is that of the data re-centred at each
   group's own mean, ``S_w``, with each group brought to the inliers' scale when the groups'
   spreads differ at level ``α`` (:func:`~.pairs.spread_z`), and a group left out whose
   spread along its own shift is larger than the inliers' (a batch shifted by varying
   amounts; :func:`~.pairs.own_spread_p`, level ``α`` over the groups); its spikes (above
   its own edge) are the covariance components.
5. Per candidate: ``shift_z``, Welch's F of the group means as an ``N(0, 1)`` deviate, and
   whether it carries a spike of ``S_w`` (matched one-to-one, largest total ``|cos|``).
6. Shifted (``shift_z ≥ Φ⁻¹(1 − α/k)``) and carrying → mixed; shifted only → mean shift;
   carrying only → covariance; neither → undetermined (:mod:`.pairs`).
7. A spike of ``S_w`` that no candidate carries, with ``S_w``'s bulk in view, was pushed out
   of the top K by a shift or a group's own spread: it follows the K pairs (mixed when
   shifted), one per candidate that carries none.
8. The knockoff's displacements are computed in the same passes and reported, not used.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .groups import GroupFit, fit_groups
from .knockoff import KnockoffReport, knockoff_report, max_overlap_assignment
from .levels import ALPHA
from .origin import origin_is_centre
from .pairs import (
    VERDICTS,
    PairVerdicts,
    between_group_share,
    judge_pairs,
    match_spikes,
    shift_statistics,
)

__all__ = [
    "ALPHA",
    "VERDICTS",
    "GroupFit",
    "HiddenSpikes",
    "KnockoffReport",
    "PairVerdicts",
    "Verdict",
    "WithinSpikes",
    "between_group_share",
    "decide",
    "fit_groups",
    "hidden_spikes",
    "judge_pairs",
    "knockoff_report",
    "match_spikes",
    "max_overlap_assignment",
    "origin_is_centre",
    "shift_statistics",
]


@dataclass(frozen=True)
class WithinSpikes:
    """The top eigenpairs of the within-group covariance ``S_w`` and its candidate line."""

    values: np.ndarray  # (s,)
    components: np.ndarray  # (s, d) unit rows
    line: float  # its candidate line: the edge at its own noise level plus the margin
    scores: np.ndarray  # (n, s) sample scores on them, about the location
    bounds: np.ndarray  # (s,) certified error bounds of ``values`` (0: exact)
    samples: int | None = None  # the samples S_w is the covariance of (None: all)

    @property
    def spikes(self) -> np.ndarray:
        """(s,) bool: above the line."""
        return self.values > self.line


@dataclass(frozen=True)
class Verdict:
    """Everything the verdict decided about one fit."""

    groups: GroupFit
    pairs: PairVerdicts
    knockoff: KnockoffReport
    hidden: HiddenSpikes


@dataclass(frozen=True)
class HiddenSpikes:
    """Spikes of ``S_w`` that no candidate carries, one per candidate that carries none.

    With ``m`` candidates among the top ``K`` eigenpairs that carry no within-group spike (a
    shift between the groups, or a group's own larger spread: mean shift or undetermined),
    only ``K − m`` slots were left for covariance; a within-group spike outside their span
    is a covariance component they pushed out, and follows the ``K`` pairs.
    """

    index: np.ndarray  # (h,) int: which within-group spikes, largest first
    verdicts: np.ndarray  # (h,) str: "covariance", or "mixed" when shifted along it
    shift_z: np.ndarray  # (h,)
    reasons: np.ndarray  # (h,) str

    @classmethod
    def none(cls) -> HiddenSpikes:
        return cls(np.zeros(0, np.intp), np.zeros(0, object), np.zeros(0), np.zeros(0, object))


def hidden_spikes(within: WithinSpikes, pairs: PairVerdicts, labels: np.ndarray) -> HiddenSpikes:
    """The within-group spikes no pair carries, up to one per candidate that carries none.

    A spike needs the bulk below it: when every computed eigenvalue of ``S_w`` is above the
    line, the line is not the edge of its bulk (correlated noise, linkage) and no spike is
    claimed.  Only spikes above the line by more than their error bound count: no pair's
    convergence was waited for along them.  Judged as the pairs are (:mod:`.pairs`): a
    spike, so covariance, or mixed when ``shift_z`` along it reaches the pairs' critical
    value.
    """
    if np.all(within.spikes):
        return HiddenSpikes.none()
    slots = int(np.count_nonzero(np.isin(pairs.verdicts, ("mean shift", "undetermined"))))
    sure = np.flatnonzero(within.spikes & (within.values - within.bounds > within.line))
    free = np.setdiff1d(sure, pairs.carried[pairs.carried >= 0])
    index = free[:slots]
    if not index.size:
        return HiddenSpikes.none()
    T = within.scores[:, index]
    z = shift_statistics(T, labels)
    share = between_group_share(T, labels)
    verdicts = np.where(z >= pairs.z_critical, "mixed", "covariance").astype(object)
    reasons = np.array(
        [
            f"{v}: within-group spike {s + 1} (eigenvalue {within.values[s]:.4g} above its "
            f"line {within.line:.4g}) along none of the top eigenpairs, whose mean shifts "
            f"took its place; shift z {zs:.2f} (critical {pairs.z_critical:.2f}), "
            f"{100 * sh:.0f} % of its variance between the groups"
            for v, s, zs, sh in zip(verdicts, index, z, share, strict=True)
        ],
        dtype=object,
    )
    return HiddenSpikes(index, verdicts, z, reasons)


def decide(
    scores: np.ndarray,
    eigenvalues: np.ndarray,
    candidate: np.ndarray,
    components: np.ndarray,
    groups: GroupFit,
    *,
    level: float = ALPHA,
    within: WithinSpikes | None = None,
    knockoff_eigenvalues: np.ndarray | None = None,
    overlaps: np.ndarray | None = None,
) -> Verdict:
    """The verdict of every eigenpair of one fit (module docstring).

    Parameters
    ----------
    scores : (n, K) ndarray
        Sample scores on the K eigenvectors.
    eigenvalues : (K,) ndarray
    candidate : (K,) bool ndarray
    components : (K, d) ndarray
        The unit eigenvectors, as rows.
    groups : GroupFit
        From :func:`fit_groups` on the candidates' scores.
    level : float
        ``α``.
    within : WithinSpikes or None
        The within-group covariance's top eigenpairs (needed when groups were found).
    knockoff_eigenvalues, overlaps : ndarrays or None
        The knockoff spectra (B, K') and overlaps (B, K, K'), for the report.
    """
    cand = np.asarray(candidate, dtype=bool)
    K = cand.size
    carried, cosine = np.full(K, -1, dtype=np.intp), np.zeros(K)
    if groups.found and within is not None:
        carried, cosine = match_spikes(components, cand, within.components[within.spikes])
    pairs = judge_pairs(
        scores,
        cand,
        groups.labels,
        carried=carried,
        carried_cosine=cosine,
        level=level,
        within_values=None if within is None else within.values,
        within_line=None if within is None else within.line,
    )
    if knockoff_eigenvalues is not None and overlaps is not None:
        report = knockoff_report(eigenvalues, knockoff_eigenvalues, overlaps)
    else:
        report = KnockoffReport(np.full(K, np.nan), np.full(K, np.nan), np.zeros((0, K), int))
    hidden = (
        hidden_spikes(within, pairs, groups.labels)
        if groups.found and within is not None
        else HiddenSpikes.none()
    )
    return Verdict(groups, pairs, report, hidden)
