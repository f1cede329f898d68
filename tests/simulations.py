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
