"""Small simulations that several test modules share."""

from __future__ import annotations

import numpy as np


def weaker_spike_lifted(seed: int, n: int = 2000, d: int = 300) -> tuple[np.ndarray, np.ndarray]:
    """``(X (n, d), U (d, 2))``: spikes of variance 3 along ``U[:, 0]`` and 2 along
    ``U[:, 1]`` over unit noise, and a tenth of the samples shifted by 5 along ``U[:, 1]``.

    The shift lifts the weaker spike's eigenvalue above the stronger one's: that pair is
    mixed, and by variance within the groups it is the second covariance component.
    """
    rng = np.random.default_rng(seed)
    U = np.linalg.qr(rng.standard_normal((d, 2)))[0]
    X = rng.standard_normal((n, d))
    X += rng.standard_normal((n, 1)) * np.sqrt(3.0) * U[:, 0]
    X += rng.standard_normal((n, 1)) * np.sqrt(2.0) * U[:, 1]
    X[: n // 10] += 5.0 * U[:, 1]
    return X, U


def spike_beside_oblique_shift(
    seed: int, n: int = 1000, d: int = 900, angle: float = 45.0
) -> np.ndarray:
    """``X (n, d)``: spikes ``2√c`` and ``1.5√c`` (``c = d/n``) over unit noise, a tenth of the
    samples shifted by ``√(40√c)`` at ``angle`` degrees to the first spike's direction.

    The spikes lie a little above the bulk edge and the shift adds to the first spike's
    direction, so the top eigenpair carries both.
    """
    rng = np.random.default_rng(seed)
    c = d / n
    U = np.linalg.qr(rng.standard_normal((d, 3)))[0]
    a = np.radians(angle)
    shift = np.sqrt(40.0 * np.sqrt(c)) * (np.cos(a) * U[:, 0] + np.sin(a) * U[:, 2])
    X = rng.standard_normal((n, d))
    for k, spike in enumerate((2.0, 1.5)):
        X += rng.standard_normal((n, 1)) * np.sqrt(spike * np.sqrt(c)) * U[:, k]
    X[: n // 10] += shift
    return X
