"""The group test: are some samples displaced from the rest in candidate score space, and
how many groups are there?

Whether: one statistic, one calibration.

* The statistic is the BIC gain of the best Gaussian mixture (groups added while BIC falls,
  for each covariance form: :func:`~.mixture.select_mixture`) over one Gaussian, on the
  candidates' scores standardised per column and turned to their most independent axes
  (:func:`independent_axes`, FastICA).
* Its null distribution comes from *twins*: each axis made unimodal and drawn independently
  of the others (:mod:`~mspca_dask.verdict.twins`).  The null is a factor model: independent
  unimodal factors of any shape (Gaussian, skewed, heavy-tailed, flat) mixed linearly, as the
  eigenvectors of close spikes mix them; a skewed factor, a heavy-tailed one or a flat
  covariate is compared with its own kind, and the search over groups and directions is paid
  for by running it on every twin too.
* It is a Monte Carlo test at level ``α``: groups are declared when the data's gain exceeds
  that of all ``⌈1/α⌉ − 1`` twins (drawing stops at the first twin that reaches it).
* When the inliers' centre is known (the data are centred on them: :mod:`.origin`), the null
  is also that the scores' mean is there: Hotelling's ``T²`` of the mean, and the twins'
  test when it does not reject, each at ``α/2``.  A displaced group whose marginal has one
  mode, which no test of the shape can tell from a skewed factor, still moves the mean.

How many: when the test rejects, the mixture grows from two groups one group at a time, each
step the same kind of test at level ``α`` given the groups before it.  Its statistic is the
BIC gain of one group more (:func:`~.mixture.add_group`, started in either covariance form,
counted with one shape at each group's scale: :data:`~.levels.COUNTED_FORM`); its twins keep
every sample's group and the group's mean and redraw the group's own rows, whole (a smoothed
bootstrap), smoothed just enough to have one mode along each of its independent axes and
along the cut the step proposes (:class:`_GroupsNull`).  The null is that each group has one
mode, of any shape: a population's own skewed, long-tailed, correlated or mildly curved
spread splits off as a group no more often than ``α``; a mixture chosen by BIC alone cuts it
whenever a second Gaussian fits it better, and twins drawn on independent axes whenever its
axes are not independent (a scale shared by a row's coordinates, a curve).

Which groups: of mixtures with as many groups, the count goes on from the likelier.  When the
inliers' centre is known, that likelihood holds their group's mean at the centre, and so does
the fit the groups come from: a Gaussian mixture of two groups may part a skewed factor's tail
from the rest, cluster included, which leaves the rest's mean off the centre, while the split
that parts the cluster leaves it there.  The steps' statistics stay the gains over the likelier
mixture, as their twins' are.

Displaced from the inliers: a Gaussian mixture fits a skewed cloud's tail as a group of its
own, and the steps can count it (beside a cluster, the two-group fit may hold the cluster and
the tail as one group, which the next step parts).  So each displaced group, when there are
two or more, must then be displaced from the inliers: on its rows and theirs alone, the BIC
gain of two groups (EM started at the two means) over one is tested at level ``α`` against
twins that redraw the rows as one group, smoothed to one mode along the cut between them
(:func:`_apart`); the groups that are not join the inliers (:func:`_not_apart`).  With
one displaced group, the first test has decided.

Group 0, the inliers, is the group holding the pinned (reference) rows, else the largest.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy.special import chdtrc

from .levels import COUNTED_FORM, MAX_GROUPS, MAX_TEST_ROWS, MIN_GROUP_ROWS
from .mixture import TOL_GROUPS, Mixture, _Products, add_group, fit_mixture, select_mixture
from .twins import (
    axis_kernel,
    critical_bandwidth,
    cut_width,
    inverse_sqrt,
    row_kernel,
    unimodal_rows,
    unimodal_twins,
)

__all__ = ["GroupFit", "fit_groups", "independent_axes"]


@dataclass(frozen=True)
class GroupFit:
    """The outcome of the group test on ``n`` rows.

    Attributes
    ----------
    labels : (n,) int ndarray
        Each row's group; 0 is the inliers' (every row when no groups were found).
    statistic : float
        BIC gain of the data's mixture over one Gaussian (0: one group is best).
    p_value : float
        p-value of the test: Monte Carlo against its twins (1 when the statistic is 0; a
        lower bound when drawing stopped early), and with a known centre the Bonferroni
        combination with the mean's test: whether there are displaced groups at all.
    n_twins : int
        Twins the test (whether there are groups) drew.
    level : float
        The test's level ``α``.
    centred : bool
        Whether the test's null was one group about a known centre (the inliers').
    scores : (n, k) ndarray or None
        The scores the groups were found on.
    """

    labels: np.ndarray
    statistic: float
    p_value: float
    n_twins: int
    level: float
    centred: bool = False
    scores: np.ndarray | None = field(default=None, repr=False, compare=False)

    @classmethod
    def none(cls, n: int, level: float) -> GroupFit:
        """No test run (no candidate): one group."""
        return cls(np.zeros(n, dtype=np.intp), 0.0, 1.0, 0, level)

    @property
    def n_groups(self) -> int:
        return int(self.labels.max()) + 1 if self.labels.size else 1

    @property
    def found(self) -> bool:
        """Whether displaced groups were declared."""
        return self.n_groups > 1

    def indicators(self, inliers: bool = False) -> np.ndarray:
        """(n, G − 1) float ndarray: membership of each displaced group; with ``inliers``,
        (n, G) with the inliers' column first."""
        first = 0 if inliers else 1
        return (self.labels[:, None] == np.arange(first, self.n_groups)[None, :]).astype(float)


def _more(
    T: np.ndarray, current: Mixture, pinned: np.ndarray | None, rows: _Products
) -> Mixture | None:
    """One group more than ``current``, counted in ``COUNTED_FORM`` (started in either)."""
    return add_group(T, current, refit=COUNTED_FORM, pinned=pinned, products=rows)


def _step(
    T: np.ndarray, current: Mixture, pinned: np.ndarray | None, rows: _Products
) -> tuple[float, Mixture | None]:
    """The BIC gain of one group more than ``current`` (0 when none fits), and that
    mixture."""
    more = _more(T, current, pinned, rows)
    if more is None:
        return 0.0, None
    n = T.shape[0]
    return max(0.0, current.bic(n) - more.bic(n)), more


class _GroupsNull:
    """Twins of the rows of ``T`` under ``current``'s groups (the null of one step).

    Every row keeps its group (its most likely one; pinned rows group 0) and the group's
    mean; the group's deviations from that mean are redrawn by the smoothed bootstrap of its
    own rows (:func:`~mspca_dask.verdict.twins.unimodal_rows`): whole rows, so the group
    keeps its joint shape (skewed, heavy-tailed, flat, correlated or curved).  The kernel
    (:func:`~mspca_dask.verdict.twins.row_kernel`) smooths along each of the group's
    independent axes (:func:`independent_axes`; the data's axes for a group of at most
    ``2k + 1`` rows, too few to whiten, or without spread in some direction) by that axis's
    critical bandwidth and, in a group that ``more`` cuts in parts, by a multiple of the
    group's covariance as wide as the widest critical bandwidth along a cut (the Fisher
    direction between two parts): a group of several clusters is blurred into one cloud, so
    that any of them, not only the part the step proposes, splits off in the data alone.
    """

    def __init__(
        self,
        T: np.ndarray,
        current: Mixture,
        more: Mixture,
        pinned: np.ndarray | None,
        known: dict[bytes, tuple[np.ndarray, ...]],
    ) -> None:
        k = T.shape[1]
        labels = current.labels.copy()
        if pinned is not None:
            labels[pinned] = 0
        parts = more.labels
        self.shape = T.shape
        self._parts: list[tuple[np.ndarray, ...]] = []
        for g in range(current.n_groups):
            idx = np.flatnonzero(labels == g)
            if not idx.size:
                continue
            key = idx.tobytes()  # a group the previous steps had: its axes are known
            if key not in known:
                mean = T[idx].mean(axis=0)
                deviations = T[idx] - mean
                # the rows' own axes when they are enough, and spread in every direction, to
                # whiten; else the data's
                whiten = idx.size > 2 * k + 1
                if whiten:
                    spread = np.linalg.eigvalsh(np.atleast_2d(np.cov(deviations, rowvar=False)))
                    whiten = spread[0] > 1e-6 * max(float(spread[-1]), 1e-300)
                axes = independent_axes(deviations) if whiten else np.eye(k)
                known[key] = (mean, deviations, axis_kernel(deviations, axes))
            mean, deviations, columns = known[key]
            # the parts ``more`` cuts this group into: its groups with most of their rows here
            held = [
                c for c in range(more.n_groups) if 2 * np.sum(parts[idx] == c) > np.sum(parts == c)
            ]
            cuts = [
                more.means[a] - more.means[b] for i, a in enumerate(held) for b in held[i + 1 :]
            ]
            width = 0.0
            if cuts:
                C = np.atleast_2d(np.cov(deviations, rowvar=False))
                fisher = np.linalg.lstsq(C, np.column_stack(cuts), rcond=None)[0]
                width = cut_width(deviations, fisher)
            self._parts.append((idx, mean, deviations, *row_kernel(deviations, columns, width)))

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        """(n, k) one twin."""
        Y = np.empty(self.shape)
        for idx, mean, deviations, root, back in self._parts:
            Y[idx] = mean + unimodal_rows(deviations, rng, root, back)
        return Y


def _first_reaching(twin_gain: Callable[[int], float], statistic: float, n_twins: int) -> int:
    """The number (from 1) of the first twin whose gain reaches ``statistic``; 0 if none.

    Twins are drawn one after another and drawing stops at the first that reaches the data;
    twin ``i`` has its own stream, whatever was drawn before.  (Threads drawing twins side by
    side gained nothing: an EM step is many small NumPy calls, bound by the interpreter, and
    its products are too small for BLAS threads.)
    """
    for i in range(1, n_twins + 1):
        if twin_gain(i) >= statistic:
            return i
    return 0


def _gain(T: np.ndarray, pinned: np.ndarray | None) -> tuple[float, Mixture]:
    """The test's statistic, the BIC gain of the mixture BIC prefers over one Gaussian, and
    that mixture."""
    best = select_mixture(T, MAX_GROUPS, pinned=pinned)
    if best.n_groups == 1:
        return 0.0, best
    one = fit_mixture(T, 1, pinned=pinned)
    n = T.shape[0]
    return max(0.0, one.bic(n) - best.bic(n)), best


def _mean_moved(S: np.ndarray, centre: np.ndarray) -> float:
    """p-value of Hotelling's ``T² = n (s̄ − c)ᵀ Ĉ⁻¹ (s̄ − c)`` of the rows' mean against
    ``centre``, as ``χ²_k`` (the sample mean of ``n`` rows of one group of any shape about
    ``c`` is ``N(c, C/n)`` for large ``n``; ``Ĉ`` includes any spread between groups, so
    the test is conservative when they exist)."""
    n, k = S.shape
    gap = S.mean(axis=0) - centre
    C = np.atleast_2d(np.cov(S, rowvar=False))
    t2 = n * float(gap @ np.linalg.lstsq(C, gap, rcond=None)[0])
    return float(chdtrc(k, t2))


def _step_reached(
    T: np.ndarray,
    current: Mixture,
    pinned: np.ndarray | None,
    statistic: float,
    n_twins: int,
    seed: int,
    known: dict[bytes, tuple[np.ndarray, ...]],
    more: Mixture,
) -> int:
    """:func:`_first_reaching` for one step from ``current``'s groups: twins of its null
    (:class:`_GroupsNull`), each fitted alike: its mixture of ``current``'s groups (started
    at their means, in its form), then one group more."""
    null = _GroupsNull(T, current, more, pinned, known)
    G = current.n_groups

    def twin_gain(i: int) -> float:
        Y = null.draw(np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(G, i))))
        rows = _Products(Y)
        twin = fit_mixture(
            Y, G, pinned=pinned, centres=current.means, form=current.form, products=rows
        )
        return _step(Y, twin, pinned, rows)[0]

    return _first_reaching(twin_gain, statistic, n_twins)


def _without_one(
    T: np.ndarray, mixture: Mixture, pinned: np.ndarray | None, rows: _Products
) -> Mixture:
    """The best mixture (BIC) of ``mixture``'s groups less one, each refitted by EM from the
    others' means in its form (group 0 stays when rows are pinned to it)."""
    n, G = T.shape[0], mixture.n_groups
    first = 1 if pinned is not None else 0
    fits = [
        fit_mixture(
            T,
            G - 1,
            pinned=pinned,
            centres=np.delete(mixture.means, j, axis=0),
            form=mixture.form,
            products=rows,
        )
        for j in range(first, G)
    ]
    fits = [m for m in fits if m.smallest_group >= MIN_GROUP_ROWS] or fits
    return min(fits, key=lambda m: m.bic(n))


def _centred_first(mixture: Mixture, pinned: np.ndarray | None) -> np.ndarray:
    """(G, k) ``mixture``'s means, the inliers' group first: the pinned rows' group (already
    group 0), else the largest."""
    if pinned is not None and np.any(pinned):
        return mixture.means
    return mixture.means[np.argsort(-mixture.responsibilities.sum(axis=0), kind="stable")]


class _BicAtCentre:
    """BIC of a mixture's groups with the inliers' mean held at the known centre ``anchor``:
    refitted by EM from its means, the inliers' group first (:func:`_centred_first`); without
    a centre, the mixture's own BIC.  Each mixture is refitted once per fit (the count
    compares the one it goes on from again at its next step)."""

    def __init__(
        self,
        T: np.ndarray,
        pinned: np.ndarray | None,
        anchor: np.ndarray | None,
        rows: _Products,
    ) -> None:
        self.T, self.pinned, self.anchor, self.rows = T, pinned, anchor, rows
        self._held: dict[int, tuple[Mixture, float]] = {}  # by id, the mixture kept alive

    def __call__(self, mixture: Mixture) -> float:
        n = self.T.shape[0]
        if self.anchor is None:
            return mixture.bic(n)
        seen = self._held.get(id(mixture))
        if seen is not None and seen[0] is mixture:
            return seen[1]
        held = fit_mixture(
            self.T,
            mixture.n_groups,
            pinned=self.pinned,
            anchor=self.anchor,
            centres=_centred_first(mixture, self.pinned),
            form=mixture.form,
            products=self.rows,
        )
        self._held[id(mixture)] = (mixture, held.bic(n))
        return held.bic(n)


def _count_groups(
    T: np.ndarray,
    start: Mixture,
    pinned: np.ndarray | None,
    rows: _Products,
    n_twins: int,
    seed: int,
    bic_at: _BicAtCentre,
) -> Mixture:
    """``start`` grown one group at a time while each step's test rejects
    (:func:`_step_reached`), up to ``MAX_GROUPS``.

    Of two mixtures with as many groups (the one grown, and the one more less one of its
    groups), the count goes on from the likelier by ``bic_at`` (with the inliers' mean at
    the known centre when there is one); the step's gain is over the likelier by its own
    BIC either way, as its twins' is."""
    current = start
    n = T.shape[0]
    known: dict[bytes, tuple[np.ndarray, ...]] = {}  # each group's twin draws, by its rows
    while current.n_groups < MAX_GROUPS:
        more = _more(T, current, pinned, rows)
        if more is None:
            break
        # the gain must be the new group's, not a better fit of the groups before it: EM's
        # path can hold a worse optimum with G groups than ``more`` less one of its groups
        fewer = _without_one(T, more, pinned, rows)
        likeliest = min(current.bic(n), fewer.bic(n))
        if bic_at(fewer) < bic_at(current):
            current = fewer
            again = _more(T, current, pinned, rows)
            if again is not None and again.bic(n) < more.bic(n):
                more = again
        statistic = max(0.0, likeliest - more.bic(n))
        if statistic <= 0:
            break
        if _step_reached(T, current, pinned, statistic, n_twins, seed, known, more):
            break
        current = more
    return current


def _not_apart(
    T: np.ndarray, labels: np.ndarray, pinned: np.ndarray | None, n_twins: int, seed: int
) -> list[int]:
    """The displaced groups of ``labels`` (0 the inliers) that are not displaced from the
    inliers (:func:`_apart`, each tested against the inliers as they are): they join them.
    With one displaced group, the test of whether there are groups at all
    (:func:`fit_groups`) has decided: none."""
    G = int(labels.max()) + 1
    if G <= 2:
        return []
    tests = {g: _apart(T, labels, g, pinned, n_twins, seed) for g in range(1, G)}
    joined = [g for g, (reached, _) in tests.items() if reached]
    if len(joined) == G - 1:
        # none shown apart, yet the first test found groups: the clearest one stays
        joined.remove(min(joined, key=lambda g: (tests[g][0], -tests[g][1])))
    return joined


def _apart(
    T: np.ndarray, labels: np.ndarray, g: int, pinned: np.ndarray | None, n_twins: int, seed: int
) -> tuple[int, float]:
    """Whether group ``g`` is displaced from the inliers (group 0), on their rows alone: the
    BIC gain of two groups, EM started at the two groups' means (in ``COUNTED_FORM``), over
    one, against twins that redraw the rows as one group, smoothed to one mode along the cut
    between the two (:class:`_GroupsNull`) and fitted alike from the same starts.  Returns
    :func:`_first_reaching`'s count (0: displaced at level ``α``) and the statistic."""
    sub = np.flatnonzero((labels == 0) | (labels == g))
    Tg = T[sub]
    pin = None if pinned is None else pinned[sub]
    starts = np.vstack([Tg[labels[sub] == 0].mean(axis=0), Tg[labels[sub] == g].mean(axis=0)])

    def gain(Y: np.ndarray) -> tuple[float, Mixture, Mixture]:
        rows = _Products(Y)
        one = fit_mixture(Y, 1, pinned=pin, products=rows)
        two = fit_mixture(Y, 2, pinned=pin, centres=starts, form=COUNTED_FORM, products=rows)
        if two.smallest_group < MIN_GROUP_ROWS:
            return 0.0, one, two
        n = Y.shape[0]
        return max(0.0, one.bic(n) - two.bic(n)), one, two

    statistic, one, two = gain(Tg)
    if statistic <= 0:
        return 1, statistic
    null = _GroupsNull(Tg, one, two, pin, {})

    def twin_gain(i: int) -> float:
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(g, 0, i)))
        return gain(null.draw(rng))[0]

    return _first_reaching(twin_gain, statistic, n_twins), statistic


def independent_axes(T: np.ndarray, max_iter: int = 200, tol: float = 1e-6) -> np.ndarray:
    """(k, k) ``R``: the columns of ``T R`` are uncorrelated, of unit variance and as
    independent as FastICA makes them.

    Symmetric whitening ``C^{-1/2}`` (the axes stay where they are when the columns are
    already uncorrelated), then symmetric FastICA with the log-cosh contrast (Hyvärinen 1999)
    from the identity: independent non-Gaussian factors that the eigenvectors have mixed are
    turned back to their own axes; Gaussian columns stay as they are.

    Parameters
    ----------
    T : (n, k) ndarray
        Centred scores.
    """
    n, k = T.shape
    A = inverse_sqrt(np.atleast_2d(np.cov(T, rowvar=False)))
    Z = T @ A
    Q = np.eye(k)
    for _ in range(max_iter):
        g = np.tanh(Z @ Q)
        step = Z.T @ g / n - Q * (1.0 - g * g).mean(axis=0)
        u, _s, vt = np.linalg.svd(step)
        new = u @ vt  # symmetric decorrelation: the nearest orthogonal matrix
        done = float(np.max(np.abs(np.abs(np.sum(new * Q, axis=0)) - 1.0))) < tol
        Q = new
        if done:
            break
    return A @ Q


def fit_groups(
    scores: np.ndarray,
    *,
    pinned: np.ndarray | None = None,
    centre: np.ndarray | None = None,
    level: float = 0.05,
    seed: int = 0,
) -> GroupFit:
    """Test for displaced groups among the rows of ``scores`` and return them.

    Parameters
    ----------
    scores : (n, k) ndarray
        Sample scores on the ``k`` candidate eigenvectors.
    pinned : (n,) bool ndarray or None
        Rows known to be inliers (a reference): held in group 0 in the data and in the twins.
    centre : (k,) ndarray or None
        The inliers' centre in the coordinates of ``scores``, when it is known: the null is
        then also that the rows' mean is there, and two tests at level ``α/2`` each decide
        (Bonferroni): Hotelling's ``T²`` of the mean against the centre, which sees a
        displaced group whose marginal has a single mode (a minority less than about two
        spreads away, a batch shifted by a long-tailed amount) by the mean it moves, and,
        when that does not reject, the twins' test of the shape (``⌈2/α⌉ − 1`` twins).  The
        two groups that EM starts counting from may hold the inliers' group at the centre.
    level : float
        ``α``; ``⌈1/α⌉ − 1`` twins are drawn.
    seed : int
        Seeds the subsample and the twins.

    Returns
    -------
    GroupFit
    """
    T = np.asarray(scores, dtype=float)
    n, k = T.shape
    if n == 0 or k == 0:
        return GroupFit.none(n, level)
    # rows in a canonical order (by their first score): the outcome does not depend on the
    # order the samples came in
    order = np.argsort(T[:, 0], kind="stable")
    fitted = _fit_sorted(
        T[order],
        None if pinned is None else np.asarray(pinned, bool)[order],
        None if centre is None else np.asarray(centre, dtype=float).reshape(k),
        level,
        seed,
    )
    labels = np.empty(n, dtype=np.intp)
    labels[order] = fitted.labels
    return GroupFit(
        labels, fitted.statistic, fitted.p_value, fitted.n_twins, level, centre is not None, T
    )


def _fit_sorted(
    T: np.ndarray,
    pinned: np.ndarray | None,
    centre: np.ndarray | None,
    level: float,
    seed: int,
) -> GroupFit:
    n, k = T.shape
    mean, sd = T.mean(axis=0), T.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    S = (T - mean) / sd
    rng = np.random.default_rng(seed)
    rows = np.arange(n)
    if n > MAX_TEST_ROWS:
        rows = np.sort(rng.choice(n, MAX_TEST_ROWS, replace=False))
    # the test, the twins and the groups live on the independent axes (a linear map: the
    # mixture's fit is the same up to its starts)
    axes = independent_axes(S[rows])
    S = S @ axes
    anchor = None if centre is None else ((centre - mean) / sd) @ axes
    Ts = S[rows]
    has_pins = pinned is not None and bool(np.any(pinned))
    pin = pinned[rows] if has_pins and pinned is not None else None
    n_twins = max(1, math.ceil(1.0 / level - 1e-9) - 1)
    none = GroupFit.none(n, level)
    if Ts.shape[0] < 2 * MIN_GROUP_ROWS:
        return none
    # with a known centre, two tests at level α/2 each (Bonferroni): the mean's, then the
    # shape's, which pays with twins only when the mean has not moved
    split = 1.0 if anchor is None else 2.0
    moved = 1.0 if anchor is None else _mean_moved(S, anchor)
    statistic, preferred = _gain(Ts, pin)
    drawn = 0  # twins of the first test: none when the mean alone rejects
    if split * moved <= level:
        p_value = split * moved
    else:
        if statistic <= 0:
            return GroupFit(none.labels, 0.0, min(1.0, split * moved), 0, level)
        bandwidths = np.array([critical_bandwidth(Ts[:, j]) for j in range(k)])
        drawn = max(1, math.ceil(split / level - 1e-9) - 1)

        def twin_gain(i: int) -> float:
            rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(i,)))
            return _gain(unimodal_twins(Ts, rng, bandwidths), pin)[0]

        reached = _first_reaching(twin_gain, statistic, drawn)
        if reached:
            # at least one twin of ``reached`` reached the data: p >= 2 / (reached + 1) > α
            p_shape = min(1.0, split * 2.0 / (reached + 1))
            return GroupFit(none.labels, statistic, p_shape, reached, level)
        p_value = split / (drawn + 1)
    # how many: from two groups, one more while each step's test rejects, in one form
    rows_products = _Products(Ts)
    one = fit_mixture(Ts, 1, pinned=pin, products=rows_products)
    two = _more(Ts, one, pin, rows_products)
    bic_at = _BicAtCentre(Ts, pin, anchor, rows_products)
    if anchor is not None:
        # the two groups the centre sees, as a start: EM alone may part a unimodal cloud
        # elsewhere (by spread, or a skewed factor's tail); the likelier of the two with the
        # inliers' mean at the centre goes on
        seen = add_group(
            Ts,
            fit_mixture(Ts, 1, pinned=pin, anchor=anchor, products=rows_products),
            refit=COUNTED_FORM,
            pinned=pin,
            anchor=anchor,
            products=rows_products,
        )
        if seen is not None:
            freed = fit_mixture(
                Ts, 2, pinned=pin, centres=seen.means, form=seen.form, products=rows_products
            )
            if two is None or bic_at(freed) < bic_at(two):
                two = freed
    current = (
        _count_groups(Ts, two, pin, rows_products, n_twins, seed, bic_at)
        if two is not None
        # no two groups of that form with enough rows each: the groups the test found
        else preferred
    )
    # the steps' mixtures stop EM as their twins' do; the groups come from the accepted
    # mixture fitted to convergence (a stop short of it can merge two groups), with the
    # inliers' mean at the known centre when there is one
    mix = fit_mixture(
        Ts,
        current.n_groups,
        pinned=pin,
        anchor=anchor,
        centres=current.means if anchor is None else _centred_first(current, pin),
        form=current.form,
        tol=TOL_GROUPS,
    )
    labels = mix.predict(S)
    if has_pins and pinned is not None:
        labels[pinned] = 0
        inliers = 0  # the mixture holds the pinned rows in group 0
    else:
        inliers = int(np.argmax(np.bincount(labels, minlength=mix.n_groups)))
    # group 0 = the inliers, then the others by size; a group too small to have a mean and a
    # variance of its own joins the inliers
    new = _by_size(labels, inliers)
    # each displaced group must be displaced from the inliers, on their rows alone
    present, compact = np.unique(new[rows], return_inverse=True)
    if present[0] == 0:  # the groups as numbered among the test's rows
        joined = present[_not_apart(Ts, compact, pin, n_twins, seed)]
        new = _by_size(np.where(np.isin(new, joined), 0, new), 0)
    return GroupFit(new, statistic, p_value, drawn, level)


def _by_size(labels: np.ndarray, inliers: int) -> np.ndarray:
    """``labels`` renumbered: 0 the inliers' group, then the others by size; a group too
    small to have a mean and a variance of its own joins the inliers."""
    counts = np.bincount(labels)
    others = [g for g in np.argsort(-counts, kind="stable") if g != inliers]
    new = np.zeros(labels.size, dtype=np.intp)
    for i, g in enumerate((g for g in others if counts[g] >= MIN_GROUP_ROWS), start=1):
        new[labels == g] = i
    return new
