"""Lazy Dask graphs of one pass over the data (``dask.array`` only: nothing here computes).

MS-PCA needs, per pass, a handful of products of the data with *small* NumPy matrices.
This module builds them as one dictionary of lazy arrays that share the chunk reads, so that
:mod:`mspca_dask._execution` evaluates them with a single ``dask.compute`` — one read of
every chunk.

Orientation
-----------
All spectra are computed in the *operator space* of dimension ``p``, the side along which
the chunks are (or are made) whole.  ``M`` is the data arranged ``(m, p)`` with chunks that
span all ``p`` columns:

* primal, ``M = X`` (``m = n`` samples, ``p = d`` features): the operator is ``XᵀX``;
* dual, ``M = Xᵀ`` (``m = d`` features, ``p = n`` samples): the operator is ``XXᵀ``.

Both share the non-zero spectrum; :func:`orient` picks the side that needs no costly
rechunk.  Products named after the sides of ``M``:

``gram``      ``MᵀM``               ``(p, p)`` — the exact path's one-pass Gram matrix
``krylov``    ``Mᵀ(M V)``           ``(p, a)`` — one block-Krylov step for a block ``V``
``keep``      ``M W``               ``(m, k)`` — the big-side image of operator-side vectors
``side``      ``Mᵀ O``              ``(p, s)`` — images of big-side vectors (memberships,
                                                 shift directions)
``stats``     sums, squares, non-finite counts along both sides

Each product reads the chunk of ``M`` once, in float64 (float32 storage is up-cast per chunk:
the invariance check needs eigenvalue errors far below ``n^{-1/2}``).
"""

from __future__ import annotations

from dataclasses import dataclass

import dask.array as da
import numpy as np

__all__ = ["Oriented", "orient", "pass_graph"]


@dataclass(frozen=True)
class Oriented:
    """The data arranged for passes.

    Attributes
    ----------
    M : dask.array.Array, shape (m, p)
        Chunks span the full operator dimension ``p``.
    dual : bool
        ``True`` when ``M = Xᵀ`` (operator space = samples).
    n_samples, n_features : int
    """

    M: da.Array
    dual: bool
    n_samples: int
    n_features: int

    @property
    def m(self) -> int:
        return int(self.M.shape[0])

    @property
    def p(self) -> int:
        return int(self.M.shape[1])


def orient(X: da.Array, *, dual: bool | None = None) -> Oriented:
    """Arrange ``X`` (n_samples, n_features) as ``M`` with chunks spanning the operator side.

    The operator side is the smaller dimension unless the chunks already span the other one
    whole and not the smaller one (then merging chunks along the smaller side would gather
    pieces of every chunk into every block, which needs the whole array in memory).  Merging
    chunks along the side they are to span is a streaming rechunk: every output block reads
    only its own input chunks.

    Parameters
    ----------
    X : dask.array.Array, shape (n_samples, n_features)
    dual : bool, optional
        Force the orientation (``True``: operator space = samples).
    """
    n, d = (int(s) for s in X.shape)
    if dual is None:
        whole_rows = X.numblocks[1] == 1  # chunks span all features
        whole_cols = X.numblocks[0] == 1  # chunks span all samples
        if whole_rows and not whole_cols:
            dual = False
        elif whole_cols and not whole_rows:
            dual = True
        else:
            dual = n < d
    M = X.T if dual else X
    if M.numblocks[1] != 1:
        M = M.rechunk({1: -1})
    return Oriented(M=M, dual=bool(dual), n_samples=n, n_features=d)


def _big_side(values: np.ndarray, M: da.Array) -> da.Array:
    """Wrap a NumPy ``(m, k)`` array with the row chunks of ``M``."""
    return da.from_array(np.ascontiguousarray(values, dtype=np.float64), chunks=(M.chunks[0], values.shape[1]))


def _small(values: np.ndarray) -> da.Array:
    return da.from_array(np.ascontiguousarray(values, dtype=np.float64), chunks=values.shape)


def pass_graph(
    data: Oriented,
    *,
    gram: bool = False,
    krylov: np.ndarray | None = None,
    keep: np.ndarray | None = None,
    side: np.ndarray | None = None,
    stats: bool = False,
) -> dict[str, da.Array]:
    """Lazy products of one pass over ``data.M``; every entry reads the same chunks.

    Parameters
    ----------
    data : Oriented
    gram : bool
        Include ``MᵀM`` (p, p).
    krylov : (p, a) ndarray, optional
        Include ``Mᵀ(M V)`` (p, a) — the Gram operator applied to the block without forming it.
    keep : (p, k) ndarray, optional
        Include ``M W`` (m, k).
    side : (m, s) ndarray, optional
        Include ``Mᵀ O`` (p, s).
    stats : bool
        Include ``row_sum`` (m,), ``col_sum`` (p,), ``row_sumsq`` (m,), ``col_sumsq`` (p,),
        ``row_nonfinite`` (m,) and ``col_nonfinite`` (p,) counts.

    Returns
    -------
    dict of str to dask.array.Array
    """
    M = data.M
    if M.dtype != np.float64:
        M = M.astype(np.float64)
    out: dict[str, da.Array] = {}
    if gram:
        out["gram"] = M.T @ M
    if krylov is not None:
        Y = M @ _small(krylov)
        out["krylov"] = M.T @ Y
    if keep is not None:
        out["keep"] = M @ _small(keep)
    if side is not None:
        out["side"] = M.T @ _big_side(side, M)
    if stats:
        finite = da.isfinite(M)
        clean = da.where(finite, M, 0.0)
        sq = clean * clean
        bad = (~finite).astype(np.int64)
        out["row_sum"] = clean.sum(axis=1)
        out["col_sum"] = clean.sum(axis=0)
        out["row_sumsq"] = sq.sum(axis=1)
        out["col_sumsq"] = sq.sum(axis=0)
        out["row_nonfinite"] = bad.sum(axis=1)
        out["col_nonfinite"] = bad.sum(axis=0)
    return out
