"""Gaussian mixtures in score space, fitted by EM (NumPy only).

Each group has its own mean; the covariances take one of two forms: *proportional*, one shape
scaled per group (``Σ_g = s_g Σ``: batches with more noise, populations of different
diversity, and at ``s_g = 1`` groups that differ by their means only), or *full*, each its own.
Rows may be *pinned* to group 0 (a reference known to be inliers): their responsibilities are
fixed, so group 0 is the inliers' group by construction.  Group 0's mean may be *anchored* at
a known centre (the inliers' centre, when the data are centred on it): it is then no
parameter of the fit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .levels import MIN_GROUP_ROWS

__all__ = ["FORMS", "Mixture", "add_group", "fit_mixture", "select_mixture"]

#: EM stops when the mean log-likelihood per row improves by less than this (at 4000 rows in
#: 2-4 dimensions a BIC within 0.4 of 1e-5's, in 10 up to 3 % lower; the data and its twins
#: stop by the same rule).
_TOL = 1e-4
#: The same for the mixture whose groups are returned (fitted once, after the test rejects).
TOL_GROUPS = 1e-5
_MAX_ITER = 200
#: The covariance forms (module docstring).
FORMS = ("proportional", "full")
#: Covariance floor, as a share of the data's variance per column (keeps EM off singular fits).
_FLOOR = 1e-4


@dataclass(frozen=True)
class Mixture:
    """A fitted mixture: ``G`` groups in ``k`` dimensions over ``n`` rows."""

    weights: np.ndarray  # (G,)
    means: np.ndarray  # (G, k)
    covariances: np.ndarray  # (G, k, k)
    responsibilities: np.ndarray  # (n, G)
    loglik: float  # total log-likelihood
    form: str = "full"  # "proportional" (Σ_g = s_g Σ) or "full"
    anchored: bool = False  # group 0's mean held at a known centre (not fitted)

    @property
    def n_groups(self) -> int:
        return int(self.weights.size)

    @property
    def n_parameters(self) -> int:
        G, k = self.means.shape
        shape = k * (k + 1) // 2
        covariance = shape + G - 1 if self.form == "proportional" else G * shape
        return (G - self.anchored) * k + covariance + G - 1

    @property
    def smallest_group(self) -> float:
        """Rows in the smallest group (sum of its responsibilities)."""
        return float(self.responsibilities.sum(axis=0).min())

    def bic(self, n: int) -> float:
        return -2.0 * self.loglik + self.n_parameters * np.log(n)

    @property
    def labels(self) -> np.ndarray:
        """(n,) the most likely group of each fitted row."""
        return np.argmax(self.responsibilities, axis=1)

    def _joint(self, T: np.ndarray) -> np.ndarray:
        """(G, m) log of each group's weight times its density at each row of ``T`` (m, k)."""
        logp = _log_densities(np.ascontiguousarray(T.T), self.means, self.covariances)
        return logp + np.log(np.maximum(self.weights, 1e-300))[:, None]

    def predict(self, T: np.ndarray) -> np.ndarray:
        """(m,) the most likely group of each row of ``T`` (m, k)."""
        return np.argmax(self._joint(T), axis=0)

    def log_density(self, T: np.ndarray) -> np.ndarray:
        """(m,) the mixture's log-density at each row of ``T`` (m, k)."""
        return _log_sum(self._joint(T))


# Arrays over rows are held group-major, (G, n) and (k, n): numpy reduces across a few long
# contiguous rows many times faster than along a short trailing axis.


def _log_densities(Tt: np.ndarray, means: np.ndarray, covs: np.ndarray) -> np.ndarray:
    """(G, n) log-density of every row (columns of ``Tt``, (k, n)) under every group."""
    k, n = Tt.shape
    G = means.shape[0]
    L = np.linalg.cholesky(covs)  # (G, k, k)
    Linv = np.linalg.inv(L)
    logdet = np.sum(np.log(np.diagonal(L, axis1=1, axis2=2)), axis=1)  # (G,)
    # every group's whitened rows in one product: z[g·k + j] = (L_g⁻¹ T)[j]
    z = Linv.reshape(G * k, k) @ Tt
    z -= np.einsum("gji,gi->gj", Linv, means).reshape(G * k, 1)
    z *= z
    quad = z.reshape(G, k, n).sum(axis=1)
    return -0.5 * quad - (logdet + 0.5 * k * np.log(2 * np.pi))[:, None]


def _log_sum(logp: np.ndarray) -> np.ndarray:
    """(n,) ``log Σ_g exp`` over the groups of ``logp`` (G, n)."""
    top = logp.max(axis=0)
    return top + np.log(np.exp(logp - top).sum(axis=0))


def _nearest(T: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """(n,) the nearest centre of each row (Euclidean, on standardised scores)."""
    # ‖t − c‖² less the rows' own ‖t‖², which does not change the nearest
    return np.argmin((centres * centres).sum(axis=1)[None, :] - 2.0 * (T @ centres.T), axis=1)


class _Products:
    """The rows' second moments, packed once for every EM step of every fit on them.

    Each EM step then needs only products with these: the groups' scatters are
    ``Σᵢ rᵢ tᵢtᵢᵀ − n_g μ_g μ_gᵀ`` and the quadratic forms ``(tᵢ − μ)ᵀP(tᵢ − μ)`` are
    ``⟨P, tᵢtᵢᵀ⟩ − 2 (Pμ)ᵀtᵢ + μᵀPμ``: two matrix products per step instead of a (G, k, n)
    array built and reduced twice (several times faster on 4000 rows in ten dimensions).
    """

    def __init__(self, T: np.ndarray) -> None:
        k = T.shape[1]
        self.scores = np.ascontiguousarray(T, dtype=float)  # (n, k)
        self.upper = np.triu_indices(k)
        # (n, k(k+1)/2): tᵢₐtᵢ_b for a ≤ b, off-diagonal terms counted twice in ⟨P, tᵢtᵢᵀ⟩
        self.outer = self.scores[:, self.upper[0]] * self.scores[:, self.upper[1]]
        self.twice = np.where(self.upper[0] == self.upper[1], 1.0, 2.0)
        self.floor = _FLOOR * np.diag(np.atleast_2d(np.cov(T, rowvar=False))).mean() * np.eye(k)

    def scatters(self, R: np.ndarray, nk: np.ndarray, means: np.ndarray) -> np.ndarray:
        """(G, k, k) each group's weighted scatter about its mean (``R``: (G, n))."""
        G, k = means.shape
        packed = R @ self.outer
        raw = np.empty((G, k, k))
        raw[:, self.upper[0], self.upper[1]] = packed
        raw[:, self.upper[1], self.upper[0]] = packed
        return raw - nk[:, None, None] * (means[:, :, None] * means[:, None, :])

    def log_densities(self, means: np.ndarray, covs: np.ndarray) -> np.ndarray:
        """(G, n) log-density of every row under every group (:func:`_log_densities`)."""
        k = means.shape[1]
        L = np.linalg.cholesky(covs)
        Linv = np.linalg.inv(L)
        P = Linv.transpose(0, 2, 1) @ Linv  # (G, k, k) precisions
        Pm = np.einsum("gij,gj->gi", P, means)
        quad = (P[:, self.upper[0], self.upper[1]] * self.twice) @ self.outer.T
        quad -= 2.0 * (Pm @ self.scores.T)
        quad += np.einsum("gi,gi->g", Pm, means)[:, None]
        logdet = np.sum(np.log(np.diagonal(L, axis1=1, axis2=2)), axis=1)
        return -0.5 * np.maximum(quad, 0.0) - (logdet + 0.5 * k * np.log(2 * np.pi))[:, None]


def fit_mixture(
    T: np.ndarray,
    n_groups: int,
    *,
    pinned: np.ndarray | None = None,
    anchor: np.ndarray | None = None,
    centres: np.ndarray | None = None,
    form: str = "full",
    tol: float = _TOL,
    products: _Products | None = None,
) -> Mixture:
    """Fit a ``n_groups``-group Gaussian mixture to the rows of ``T`` by EM.

    Parameters
    ----------
    T : (n, k) ndarray
        Scores (rows are samples).
    n_groups : int
        ``G``.
    pinned : (n,) bool ndarray or None
        Rows held in group 0 throughout.
    anchor : (k,) ndarray or None
        Group 0's mean, held there throughout (its covariance is the scatter about it).
    centres : (n_groups, k) ndarray or None
        Starting means (each row starts in the group of the nearest); None: the mean, then
        each time the row farthest from every centre.  With ``anchor``, group 0 starts
        there.
    form : {"full", "proportional"}
        Each group its own covariance, or one shape scaled per group (``Σ_g = s_g Σ``).
    tol : float
        EM stops when the mean log-likelihood per row improves by less than this.
    products : _Products or None
        ``T``'s packed second moments, when several fits share them.
    """
    n, k = T.shape
    rows = _Products(T) if products is None else products
    if n_groups == 1:
        R = np.ones((1, n))
    else:
        if centres is None:  # the mean, then each time the row farthest from every centre
            centres = T.mean(axis=0, keepdims=True) if anchor is None else anchor[None, :]
            while centres.shape[0] < n_groups:
                far = ((T[:, None, :] - centres[None]) ** 2).sum(axis=2).min(axis=1)
                centres = np.vstack([centres, T[np.argmax(far)]])
        elif anchor is not None:
            centres = np.vstack([anchor, centres[1:]])
        labels = _nearest(T, centres)
        if pinned is not None and np.any(pinned):
            labels[pinned] = 0  # group 0 starts at (and holds) the pinned rows
        R = np.eye(n_groups)[labels].T
    previous = -np.inf
    loglik = -np.inf
    for _ in range(_MAX_ITER if n_groups > 1 else 1):
        nk = R.sum(axis=1) + 1e-12
        weights = nk / n
        means = (R @ rows.scores) / nk[:, None]
        scatter = rows.scatters(R, nk, means)
        if anchor is not None:  # group 0's scatter about the anchor, not its rows' mean
            off = means[0] - anchor
            scatter[0] += nk[0] * np.outer(off, off)
            means[0] = anchor
        if form == "proportional":
            covs = _proportional(scatter, nk) + rows.floor
        else:
            covs = scatter / nk[:, None, None] + rows.floor
        logp = rows.log_densities(means, covs) + np.log(np.maximum(weights, 1e-300))[:, None]
        # responsibilities and the log-likelihood from one exponential of the (G, n) array
        top = logp.max(axis=0)
        R = np.exp(logp - top)
        total = R.sum(axis=0)
        R /= total
        loglik = float(np.sum(top + np.log(total)))
        if pinned is not None and np.any(pinned):
            R[:, pinned] = 0.0
            R[0, pinned] = 1.0
        if loglik - previous < tol * n:
            break
        previous = loglik
    return Mixture(weights, means, covs, R.T, loglik, form, anchor is not None)


def _proportional(scatter: np.ndarray, nk: np.ndarray, sweeps: int = 3) -> np.ndarray:
    """(G, k, k) ``s_g Σ`` near the likelihood's maximum given each group's scatter ``W_g``.

    Alternates ``s_g = tr(Σ⁻¹ W_g) / (k n_g)`` and ``Σ = Σ_g W_g / (s_g n)`` (Flury 1988,
    proportional covariance matrices), ``sweeps`` times from the pooled scatter at every EM
    step: not the exact maximiser (three groups of scales 1, 1.2 and 4: a log-likelihood 0.7
    below it), and the data and its twins are fitted alike."""
    k = scatter.shape[1]
    n = float(nk.sum())
    shape = scatter.sum(axis=0) / n
    scale = np.ones(len(nk))
    for _ in range(sweeps):
        inv = np.linalg.inv(shape + 1e-300 * np.eye(k))
        scale = np.einsum("ij,gji->g", inv, scatter) / (k * nk)
        scale = np.maximum(scale, 1e-12)
        shape = np.tensordot(1.0 / scale, scatter, axes=1) / n
    return scale[:, None, None] * shape[None]


def select_mixture(
    T: np.ndarray, max_groups: int, *, pinned: np.ndarray | None = None, tol: float = _TOL
) -> Mixture:
    """The mixture that BIC prefers: for each covariance form, groups added while BIC falls.

    Each form has its own path of :func:`add_group` steps: groups with their own
    covariances, and groups sharing one shape at their own scales (the sparser model batches
    and populations are: they differ by their means and their spread).  A path stops at its
    first rise in BIC, and the better of the two paths' mixtures is kept.  Mixing the forms
    along one path would let a wide full-covariance group hold several small far groups at
    once, a local optimum the next start cannot leave.  Stopping at the first rise makes the
    statistic cheap on data with no group and is applied to the data and to its twins alike.
    """
    n = T.shape[0]
    rows = _Products(T)
    one = fit_mixture(T, 1, pinned=pinned, tol=tol, products=rows)
    best = one
    for form in FORMS:
        current = one
        while current.n_groups < max_groups:
            more = add_group(T, current, forms=(form,), pinned=pinned, tol=tol, products=rows)
            if more is None or more.bic(n) >= current.bic(n):
                break
            current = more
        if current.bic(n) < best.bic(n):
            best = current
    return best


def add_group(
    T: np.ndarray,
    current: Mixture,
    *,
    forms: tuple[str, ...] = FORMS,
    refit: str | None = None,
    pinned: np.ndarray | None = None,
    anchor: np.ndarray | None = None,
    tol: float = _TOL,
    products: _Products | None = None,
) -> Mixture | None:
    """The best mixture with one group more than ``current`` (by BIC), or None.

    Greedy EM (Vlassis & Likas 2002): the new group is added from two or three starts built
    on ``current`` (:func:`_starts`): its means and the row it explains worst (a small, far
    group), and a group split in two along its principal axis (a balanced split); no random
    draw.  Each start is fitted in each of ``forms``; with ``refit``, the best fit of another
    form is fitted again in that form from the means it reached (the forms find different
    groups; the result has one form).  A mixture with a group of fewer than
    ``MIN_GROUP_ROWS`` rows is outside the model (its density is the floor's).

    Parameters
    ----------
    T : (n, k) ndarray
    current : Mixture
        Fitted to ``T``.
    forms : tuple of {"proportional", "full"}
    refit : {"proportional", "full"} or None
    pinned : (n,) bool ndarray or None
    anchor : (k,) ndarray or None
        Group 0's mean (:func:`fit_mixture`).
    tol : float
        EM's stopping rule (:func:`fit_mixture`).
    products : _Products or None
        ``T``'s packed second moments, when several fits share them.
    """
    n, G = T.shape[0], current.n_groups
    rows = _Products(T) if products is None else products
    fits = [
        fit_mixture(
            T,
            G + 1,
            pinned=pinned,
            anchor=anchor,
            centres=centres,
            form=form,
            tol=tol,
            products=rows,
        )
        for form in forms
        for centres in _starts(T, current, pinned, anchor)
    ]
    fits = [m for m in fits if m.smallest_group >= MIN_GROUP_ROWS]
    if refit is not None:
        # the best of the other forms, fitted again in ``refit`` from its means
        others = [m for m in fits if m.form != refit]
        fits = [m for m in fits if m.form == refit]
        if others:
            best = min(others, key=lambda m: m.bic(n))
            again = fit_mixture(
                T,
                G + 1,
                pinned=pinned,
                anchor=anchor,
                centres=best.means,
                form=refit,
                tol=tol,
                products=rows,
            )
            if again.smallest_group >= MIN_GROUP_ROWS:
                fits.append(again)
    return min(fits, key=lambda m: m.bic(n)) if fits else None


def _starts(
    T: np.ndarray, best: Mixture, pinned: np.ndarray | None, anchor: np.ndarray | None = None
) -> list[np.ndarray]:
    """Starting means for one more group: the ``G − 1`` means plus the row they explain worst
    (a small, far group), and a group split in two along its principal axis (a balanced
    split, which the worst row never starts): the widest group (the most variance in all)
    and, when it is another one, the most elongated (the largest variance along one axis: two
    small groups fitted as one, beside a large group that holds more variance in all).

    Widths and axes are those of each group's own rows (their scatter about its mean, weighted
    by the responsibilities), not of its fitted covariance: in the proportional form every
    group has the fitted shape, which two groups fitted as one do not."""
    worst = np.vstack([best.means, T[int(np.argmin(best.log_density(T)))]])
    R = best.responsibilities
    scatter = np.empty_like(best.covariances)
    for g in range(best.n_groups):
        D = T - best.means[g]
        scatter[g] = (D * R[:, g, None]).T @ D / max(float(R[:, g].sum()), 1e-300)
    w, V = np.linalg.eigh(scatter)  # ascending, per group
    widest = int(np.argmax(best.weights * w.sum(axis=1)))
    elongated = int(np.argmax(w[:, -1]))
    pinned_mean = T[pinned].mean(axis=0) if pinned is not None and np.any(pinned) else None
    if anchor is not None:
        pinned_mean = anchor  # the inliers' centre itself
    starts = [worst]
    for g in dict.fromkeys((widest, elongated)):
        axis = V[g, :, -1]
        # an eigenvector's sign is arbitrary (rounding can flip it): fix it, then, with a
        # reference, start the new group on the side away from it, where group 0 (reset
        # to the reference below) cannot take it
        step = np.sqrt(max(w[g, -1], 0.0)) * axis * np.sign(axis[np.argmax(np.abs(axis))])
        if pinned_mean is not None:
            away = np.sum((best.means[g] + step - pinned_mean) ** 2)
            if away > np.sum((best.means[g] - step - pinned_mean) ** 2):
                step = -step
        split = np.vstack([best.means, best.means[g] - step])
        split[g] = best.means[g] + step
        starts.append(split)
    if pinned_mean is not None:
        for c in starts:
            c[0] = pinned_mean  # the inliers' group starts at the reference (or the anchor)
    return starts
