"""Hypothesis strategies for property tests: shapes, chunkings, dtypes and spiked matrices.

Needs Hypothesis (a test dependency, not a runtime one): import this module explicitly,
``from mspca_dask.testing import strategies``; ``import mspca_dask.testing`` does not load it.

Every matrix strategy draws its parameters (shape, spikes, weights, a seed) and builds the
data with :func:`~mspca_dask.testing.make_spiked_mixture`, so a failing example shrinks to
small readable parameters and is reproduced exactly from them.

Examples
--------
>>> from hypothesis import given
>>> from mspca_dask.testing import strategies as mst
>>> @given(mst.spiked_matrices(max_samples=40, max_features=20))
... def test_shape(X):
...     assert X.ndim == 2 and X.shape[0] >= 8
>>> test_shape()
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import strategies as st

from .simulators import SpikedMixture, make_spiked_mixture

__all__ = [
    "dtypes",
    "shapes",
    "chunks_for",
    "spiked_mixtures",
    "spiked_matrices",
    "chunked_spiked_matrices",
]

#: The floating dtypes the analysis runs in.
FLOAT_DTYPES = (np.dtype(np.float64), np.dtype(np.float32))


def dtypes() -> st.SearchStrategy[np.dtype[Any]]:
    """float64 or float32 (float64 first: it is what a failing example shrinks to)."""
    return st.sampled_from(FLOAT_DTYPES)


def shapes(
    *,
    min_samples: int = 8,
    max_samples: int = 200,
    min_features: int = 2,
    max_features: int = 100,
) -> st.SearchStrategy[tuple[int, int]]:
    """``(n_samples, n_features)`` within the given bounds (inclusive).

    Both orientations occur: more samples than features and the reverse, as long as the
    bounds allow it.
    """
    if not 2 <= min_samples <= max_samples or not 1 <= min_features <= max_features:
        raise ValueError(
            "need 2 <= min_samples <= max_samples and 1 <= min_features <= max_features "
            f"(got samples {min_samples}..{max_samples}, features {min_features}..{max_features})"
        )
    return st.tuples(st.integers(min_samples, max_samples), st.integers(min_features, max_features))


@st.composite
def _axis_chunks(draw: st.DrawFn, size: int, max_chunks: int) -> tuple[int, ...]:
    """Irregular chunk sizes of one axis of length ``size``: cut at distinct points."""
    cuts = draw(
        st.lists(
            st.integers(1, size - 1) if size > 1 else st.nothing(),
            max_size=min(max_chunks - 1, max(size - 1, 0)),
            unique=True,
        )
    )
    edges = [0, *sorted(cuts), size]
    return tuple(b - a for a, b in zip(edges[:-1], edges[1:], strict=True))


def chunks_for(
    shape: tuple[int, int],
    *,
    max_row_chunks: int = 6,
    max_col_chunks: int = 3,
) -> st.SearchStrategy[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Dask chunks of an array of ``shape``: regular or irregular, one chunk or several.

    Returns
    -------
    strategy of ((int, ...), (int, ...))
        Explicit chunk sizes per axis, summing to ``shape``; shrinks to one chunk.
    """
    n, d = shape
    return st.tuples(_axis_chunks(n, max_row_chunks), _axis_chunks(d, max_col_chunks))


@st.composite
def spiked_mixtures(
    draw: st.DrawFn,
    *,
    min_samples: int = 20,
    max_samples: int = 200,
    min_features: int = 2,
    max_features: int = 100,
    max_covariance_spikes: int = 2,
    max_clusters: int = 1,
    spike_range: tuple[float, float] = (0.5, 20.0),
    strength_range: tuple[float, float] = (0.0, 20.0),
) -> SpikedMixture:
    """A :class:`~mspca_dask.testing.SpikedMixture` with drawn, always valid, parameters.

    Parameters
    ----------
    min_samples, max_samples, min_features, max_features : int
        Bounds of the shape.
    max_covariance_spikes : int
        At most this many covariance spikes ``ℓ_k`` (none is possible).
    max_clusters : int
        At most this many mean-shift clusters (none is possible); each has at least one
        member and the inliers stay a majority.
    spike_range, strength_range : (float, float)
        Ranges of the spikes ``ℓ_k`` and of the strengths ``θ_i²``.
    """
    n, d = draw(
        shapes(
            min_samples=min_samples,
            max_samples=max_samples,
            min_features=min_features,
            max_features=max_features,
        )
    )
    r = draw(st.integers(0, min(max_covariance_spikes, d)))
    spikes = draw(st.lists(st.floats(*spike_range, allow_nan=False), min_size=r, max_size=r))
    k = draw(st.integers(0, max_clusters))
    # Drawn as member counts, so that rounding cannot take the inliers' majority: weights each
    # below 0.45 / k rounded up to 5 + 5 of 20 samples (0.225 each), half of them.  Each
    # cluster has at least one member, at most 0.45 n / k, and all together fewer than n / 2.
    most = min(math.floor(0.45 * n / max(k, 1)), (n - 1) // 2 // max(k, 1))
    counts = draw(
        st.lists(st.integers(1, most), min_size=k, max_size=k) if most >= 1 else st.just([])
    )
    weights = [c / n for c in counts]
    strengths = draw(
        st.lists(
            st.floats(*strength_range, allow_nan=False),
            min_size=len(weights),
            max_size=len(weights),
        )
    )
    seed = draw(st.integers(0, 2**32 - 1))
    return make_spiked_mixture(
        n,
        d,
        covariance_spikes=tuple(spikes),
        mean_shift_weights=tuple(weights),
        mean_shift_strengths=tuple(strengths),
        random_state=seed,
    )


@st.composite
def spiked_matrices(
    draw: st.DrawFn,
    *,
    dtype: np.dtype[Any] | st.SearchStrategy[np.dtype[Any]] | None = None,
    **mixture: Any,
) -> np.ndarray:
    """The data of a drawn :func:`spiked_mixtures` model, as an in-memory array.

    Parameters
    ----------
    dtype : dtype or strategy of dtypes, optional
        Default: :func:`dtypes` (float64 or float32).
    **mixture
        Passed to :func:`spiked_mixtures` (bounds of the shape, spikes, clusters).

    Returns
    -------
    strategy of (n_samples, n_features) ndarray
    """
    model = draw(spiked_mixtures(**mixture))
    dt = draw(dtypes()) if dtype is None else dtype
    if isinstance(dt, st.SearchStrategy):
        dt = draw(dt)
    return model.to_numpy().astype(dt, copy=False)


@st.composite
def chunked_spiked_matrices(
    draw: st.DrawFn,
    *,
    dtype: np.dtype[Any] | st.SearchStrategy[np.dtype[Any]] | None = None,
    max_row_chunks: int = 6,
    max_col_chunks: int = 3,
    **mixture: Any,
) -> tuple[SpikedMixture, Any]:
    """A drawn model and its data as a Dask array with drawn (possibly irregular) chunks.

    Returns
    -------
    strategy of (SpikedMixture, (n_samples, n_features) dask.array.Array)
        The array equals ``model.to_numpy()`` cast to the dtype, whatever the chunks.
    """
    model = draw(spiked_mixtures(**mixture))
    chunks = draw(
        chunks_for(model.shape, max_row_chunks=max_row_chunks, max_col_chunks=max_col_chunks)
    )
    dt = draw(dtypes()) if dtype is None else dtype
    if isinstance(dt, st.SearchStrategy):
        dt = draw(dt)
    return model, model.to_dask(chunks, dtype=dt)
