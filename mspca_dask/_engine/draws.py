"""Every random draw of a fit, from one seed (NumPy only).

One ``numpy.random.SeedSequence(random_state)`` is split by ``spawn`` into three independent
streams, one per kind of draw, so that adding or resizing one kind of draw never changes
another:

======  ==================  =============================================================
index   stream              draws
======  ==================  =============================================================
0       ``sketch``          the randomized solver's first block ``Ω`` (p, ℓ)
1       ``directions``      the knockoff directions ``m̂'`` (d, B), unit columns
2       ``memberships``     which ``round(π' n)`` samples each knockoff shifts (π' < 1)
======  ==================  =============================================================

The small matrices are drawn in NumPy (never ``dask.array.random``, whose values depend on
the chunking), so a fit's result does not depend on chunks or workers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["STREAMS", "Draws"]

#: The streams of :class:`Draws`, in the order of ``SeedSequence.spawn``.
STREAMS = ("sketch", "directions", "memberships")


@dataclass(frozen=True)
class Draws:
    """The random matrices of one fit.

    Attributes
    ----------
    knock_dirs : (d, B) ndarray
        Unit knockoff directions ``m̂'``.
    memberships : (n, B) ndarray
        Knockoff memberships ``γ'``: all ones when ``π' = 1``, else ``round(π' n)`` ones per
        column (at least one).
    omega : (p, ℓ) ndarray
        The randomized solver's sketch (drawn for both solvers, so that the other streams do
        not depend on the solver).

    Examples
    --------
    >>> a = Draws.from_seed(0, n=5, d=3, p=3, n_knockoffs=2, knockoff_weight=1.0, width=2)
    >>> b = Draws.from_seed(0, n=5, d=3, p=3, n_knockoffs=2, knockoff_weight=1.0, width=2)
    >>> bool((a.knock_dirs == b.knock_dirs).all()), a.memberships.shape, a.omega.shape
    (True, (5, 2), (3, 2))
    """

    knock_dirs: np.ndarray
    memberships: np.ndarray
    omega: np.ndarray

    @classmethod
    def from_seed(
        cls,
        random_state: int | None,
        *,
        n: int,
        d: int,
        p: int,
        n_knockoffs: int,
        knockoff_weight: float,
        width: int,
    ) -> Draws:
        """Draw everything from ``random_state``.

        Parameters
        ----------
        random_state : int or None
            The fit's seed (None: fresh entropy).
        n, d : int
            Samples and features.
        p : int
            Operator dimension (``d`` primal, ``n`` dual): the rows of the sketch.
        n_knockoffs : int
            ``B``.
        knockoff_weight : float
            ``π'`` in ``(0, 1]``.
        width : int
            ``ℓ``, the columns of the sketch.
        """
        seeds = np.random.SeedSequence(random_state).spawn(len(STREAMS))
        rng = dict(zip(STREAMS, (np.random.default_rng(s) for s in seeds), strict=True))
        B = n_knockoffs
        dirs = rng["directions"].standard_normal((d, B))
        knock_dirs = dirs / np.linalg.norm(dirs, axis=0)
        if knockoff_weight >= 1:
            memberships = np.ones((n, B))
        else:
            k = max(1, int(round(knockoff_weight * n)))
            memberships = np.zeros((n, B))
            for b in range(B):
                memberships[rng["memberships"].choice(n, size=k, replace=False), b] = 1.0
        omega = rng["sketch"].standard_normal((p, width))
        return cls(knock_dirs, memberships, omega)

    @property
    def n_knockoffs(self) -> int:
        return int(self.knock_dirs.shape[1])
