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

Each product reads the chunk of ``M`` once.  The Gram matrix, the side products and the
statistics are computed in float64 (float32 storage is up-cast per chunk, or, for the
statistics, accumulated in float64 from the stored values).  The thin products of the Krylov
and output passes may run at *single* precision on float32 chunks (``single=True``): float32
BLAS on the stored values, 2–7× faster than up-casting them (0.13 s against 0.85 s for
``bᵀ(b V)`` on a 4000 × 10 000 chunk, 27 columns, one thread), with each chunk's partial
result summed across chunks in float64.  Their rounding error, about ``u₃₂ (√rows + √p)``
relative to the operator's norm, is far below ``n^{-1/2}`` for centred data; the fit decides
when it may use them (for the statistics pass's Krylov block, after that pass, recomputing
the block in float64 when it may not) and adds the rounding to its error bounds.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import dask
import dask.array as da
import numpy as np
from dask._task_spec import Alias, Task
from dask.base import collections_to_expr
from dask.highlevelgraph import HighLevelGraph

if TYPE_CHECKING:
    from dask.typing import Key

__all__ = ["Oriented", "PassGraph", "merged_columns", "orient", "pass_graph", "name_pass"]


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

    @property
    def chunk_rows(self) -> int:
        """Rows of the largest chunk of ``M`` (the length of a chunk's sums)."""
        return int(max(self.M.chunks[0]))


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
    M = merged_columns(X.T if dual else X)
    return Oriented(M=M, dual=bool(dual), n_samples=n, n_features=d)


def merged_columns(M: da.Array) -> da.Array:
    """``M`` with each row of chunks merged into one chunk spanning all columns.

    The rechunk method is dask's own choice, named only where dask would import
    ``distributed`` to make it: with no method configured (``array.rechunk.method``) and
    ``distributed`` never imported, no client can exist and dask's choice is ``"tasks"``.
    """
    if M.numblocks[1] == 1:
        return M
    unset = dask.config.get("array.rechunk.method", None) is None
    method = "tasks" if unset and "distributed" not in sys.modules else None
    return M.rechunk({1: -1}, method=method)


def _big_side(values: np.ndarray, M: da.Array) -> da.Array:
    """Wrap a NumPy ``(m, k)`` array with the row chunks of ``M``."""
    return da.from_array(
        np.ascontiguousarray(values, dtype=np.float64), chunks=(M.chunks[0], values.shape[1])
    )


def _small(values: np.ndarray) -> da.Array:
    return da.from_array(np.ascontiguousarray(values, dtype=np.float64), chunks=values.shape)


# ---------------------------------------------------------------------------- chunk kernels
# One task per chunk computes every product of the pass (``_pass_kernel``): for each, the chunk is
# cast to its compute dtype, multiplied by a thin block, and only the small results leave the task.
# The per-chunk partials of a reduction are added in chunk order by ``_ordered_sum`` (element-wise
# additions in a fixed order), so a result does not depend on which worker computed which partial,
# nor on a recomputation after a worker was lost: the same graph gives the same bits.  The kernels
# use only ``@``, ``.T``, ``astype``, indexing and functions of the chunk's own array module
# (:func:`_namespace`), so CuPy-backed chunks run them on their device: the small operand is copied
# to the chunk's device (:func:`_like`) and only the small result comes back to host memory
# (:func:`_host`), inside the task, so everything past the kernels is NumPy.


def _as_aligned(block: Any, dtype: Any = np.float64) -> Any:
    """The chunk (or a small operand) as an aligned ``dtype`` (float64) array, C-ordered
    unless it is F-ordered already.

    Copied only when it is not one already.  This matters for reproducibility, not only for
    speed: an array deserialized from a transfer between workers can start at any byte, and
    NumPy multiplies misaligned arrays with its own loops instead of BLAS, which sum in a
    different order — the same task then gave results that differed in the last bits
    depending on whether its inputs had travelled.  An F-ordered chunk (the transpose of a
    C-ordered one, as the genotype standardisation makes them) stays F-ordered: BLAS reads
    it transposed without a copy, and a transfer keeps its order, so the task sums in the
    same order wherever it runs.

    A sparse chunk is densified here (:func:`_dense`), inside the task: only the chunk is
    ever dense, and it is the same dense array a dense input would have given.
    """
    out = _dense(block)
    order = "F" if _f_ordered(out) else "C"
    out = out.astype(dtype, order=order, copy=False)
    # NumPy arrays can be misaligned; CuPy allocations always are aligned (no such flag)
    if not getattr(getattr(out, "flags", None), "aligned", True):
        out = out.copy(order=order)
    return out


def _f_ordered(a: Any) -> bool:
    """Whether ``a`` is F-ordered and not C-ordered: the transpose of a C-ordered array."""
    flags = getattr(a, "flags", None)
    return flags is not None and bool(flags.f_contiguous) and not bool(flags.c_contiguous)


def _dense(block: Any) -> Any:
    """A sparse chunk as a dense array of its own dtype; any other chunk as it is.

    Every kernel reads its chunk through :func:`_as_aligned`, which calls this first, so a
    Dask array of ``scipy.sparse`` chunks (CSR or CSC, matrices or arrays; also CuPy's) is
    densified one chunk at a time within the task that multiplies it, and its dense copy is
    freed with the task.  Dense BLAS products then give the same bits as the dense fit of the
    same data; a sparse product would be cheaper for very sparse chunks but sums in another
    order.  Chunks of pydata ``sparse`` arrays (``todense``) are densified too.  Duck-typed,
    so this module needs no SciPy.
    """
    to_dense = getattr(block, "toarray", None) or getattr(block, "todense", None)
    if to_dense is None or isinstance(block, np.ndarray):
        return block
    return to_dense()


def _joined(part: Any) -> Any:
    """The one chunk of an operand along a contracted index.

    ``M`` spans the operator side in one chunk (:func:`orient`) and the small operands are
    one chunk (:func:`_small`), so ``blockwise`` hands a kernel a one-element list for each.
    It is unpacked here, not joined by ``concatenate=True``: dask's concatenation allocates
    and fills a new array even for a single chunk, a copy of every chunk of ``M`` on every
    pass (1 s of the 5,000-sample genomics benchmark's 32 CPU seconds).
    """
    while isinstance(part, list):
        if len(part) != 1:
            raise ValueError(
                f"expected one chunk along the contracted axis, got {len(part)} (see orient)"
            )
        part = part[0]
    return part


def _namespace(block: Any) -> Any:
    """The array module of a chunk (``numpy``, or e.g. ``cupy`` for CuPy-backed chunks)."""
    root = type(block).__module__.split(".")[0]
    return np if root == "numpy" else sys.modules.get(root, np)


def _like(operand: Any, block: Any) -> Any:
    """A small NumPy operand on the chunk's device (itself for NumPy chunks).

    CuPy refuses to multiply its arrays by NumPy ones; the copy is ``(p, a)`` numbers, next to
    the ``(rows, p)`` chunk it multiplies.
    """
    xp = _namespace(block)
    return operand if xp is np else xp.asarray(operand)


def _host(result: Any) -> Any:
    """A kernel's small result in host memory (``.get()`` of a device array).

    Partials leave their task as NumPy, so the ordered sums, the transfers between workers
    and the driver's linear algebra are the same code for every kind of chunk.
    """
    if isinstance(result, np.ndarray) or not hasattr(result, "__cuda_array_interface__"):
        return result
    return result.get()


def _quiet(kernel: Any) -> Any:
    """Run a product kernel without NumPy's floating-point warnings.

    Non-finite data make BLAS products warn ("invalid value encountered in matmul") before the
    statistics of the same first pass report them with their position (``NonFiniteError``).
    """

    @functools.wraps(kernel)
    def run(*args: Any, **kwargs: Any) -> Any:
        with np.errstate(all="ignore"):
            return kernel(*args, **kwargs)

    return run


def _weighted(rows: Any, weights: Any) -> Any:
    """``diag(w) rows`` for a chunk's per-row weights ``w`` (rows, 1); ``rows`` when None."""
    if weights is None:
        return rows
    return rows * _like(weights, rows).astype(rows.dtype, copy=False)


@_quiet
def _gram_kernel(block: Any, weights: Any = None) -> Any:
    b = _as_aligned(block)
    return _host((b.T @ _weighted(b, weights))[None])


def _compute_dtype(block: Any, single: bool) -> Any:
    """float32 for a float32 chunk when single precision is allowed, else float64."""
    return np.float32 if single and block.dtype == np.float32 else np.float64


@_quiet
def _krylov_kernel(
    block: Any, V: Any, single: bool = False, weights: Any = None
) -> tuple[Any, Any]:
    """Both products of a Krylov step from one read of the chunk:
    ``(bᵀ diag(w) (b V) (1, p, a) float64, b V (rows, a))`` (``w`` the rows' weights, 1 when
    None).

    ``b V`` is the chunk's part of the block's *image* ``M V``; keeping it lets the final
    scores (or loadings) come from the basis instead of another pass.  It stays in the
    dtype it was computed in (float32 at single precision: no information is lost).
    """
    dtype = _compute_dtype(block, single)
    b = _as_aligned(block, dtype)
    bV = b @ _as_aligned(_like(V, b), dtype)
    return _host((b.T @ _weighted(bV, weights)).astype(np.float64, copy=False)[None]), _host(bV)


def _pick(fused: Any, index: int) -> Any:
    """Entry ``index`` of the tuple a one-element object array holds (a fused task's)."""
    return fused[0][index]


@_quiet
def _keep_kernel(block: Any, W: Any, single: bool = False) -> Any:
    dtype = _compute_dtype(block, single)
    b = _as_aligned(block, dtype)
    return _host((b @ _as_aligned(_like(W, b), dtype)).astype(np.float64, copy=False))


@_quiet
def _side_kernel(block: Any, O: Any) -> Any:  # noqa: E741 - the paper's name
    """``bᵀ O`` (1, p, k) in float64.

    Columns of zeros and ones (the groups' indicators, what the fit reads this way) are the
    sums of the rows they pick, accumulated in float64 straight from the stored dtype: no
    float64 copy of the chunk (on a float32 chunk of 5,000 × 2,500, 1.4 ms against 43 ms).
    """
    host = np.asarray(O)
    if host.size and bool(np.all((host == 0) | (host == 1))):
        b = _as_aligned(block, block.dtype)
        xp = _namespace(b)
        sums = [
            b[_like(np.flatnonzero(host[:, j]), b)].sum(axis=0, dtype=np.float64)
            for j in range(host.shape[1])
        ]
        return _host(xp.stack(sums, axis=1)[None])
    b = _as_aligned(block)
    return _host((b.T @ _as_aligned(_like(O, b)))[None])


def _finite_part(block: Any) -> tuple[Any, Any]:
    """The chunk with non-finite values zeroed (the chunk itself when all are finite, the
    common case: no copy) and the mask of non-finite values (None when there are none)."""
    xp = _namespace(block)
    if bool(xp.isfinite(block).all()):
        return block, None
    bad = ~xp.isfinite(block)
    return xp.where(bad, 0, block), bad


#: Rows (columns, for an F-ordered chunk) per slab of :func:`_stats_kernel`: a float64 slab of
#: a few thousand features stays in the processor's cache for its four sums, where the sums of
#: a whole chunk read it from memory four times (on 5,000 × 2,500 float32: 23 ms, against
#: 51 ms for NumPy's reductions over the whole chunk).
STATS_SLAB = 128


def _stats_kernel(block: Any) -> tuple[Any, Any]:
    """Both sides' statistics of one chunk from one finiteness check,
    ``(columns (1, 3, p), rows (rows, 3))``: sums, sums of squares and non-finite counts
    along each side.

    Sums accumulate in float64 from the stored values, slab by slab (:data:`STATS_SLAB`
    rows, or columns of an F-ordered chunk, at a time, each cast to float64), over the
    chunk aligned, in the order :func:`_as_aligned` fixes (copied only when it is not: the
    order of the sums, and so their last bits, must not depend on how the chunk arrived).
    """
    block = _as_aligned(block, block.dtype)
    xp = _namespace(block)
    clean, bad = _finite_part(block)
    cols = xp.zeros((1, 3, block.shape[1]), dtype=np.float64)
    rows = xp.zeros((block.shape[0], 3), dtype=np.float64)
    if _f_ordered(clean):  # its transpose is C-ordered
        rows[:, 0], rows[:, 1], cols[0, 0], cols[0, 1] = _slab_sums(clean.T, xp)
    else:
        cols[0, 0], cols[0, 1], rows[:, 0], rows[:, 1] = _slab_sums(clean, xp)
    if bad is not None:
        cols[0, 2] = bad.sum(axis=0)
        rows[:, 2] = bad.sum(axis=1)
    return _host(cols), _host(rows)


def _slab_sums(clean: Any, xp: Any) -> tuple[Any, Any, Any, Any]:
    """Column sums, column sums of squares, row sums and row sums of squares of a C-ordered
    chunk, in float64, :data:`STATS_SLAB` rows at a time."""
    n_rows, p = clean.shape
    col_sum, col_sq = xp.zeros(p), xp.zeros(p)
    row_sum, row_sq = xp.empty(n_rows), xp.empty(n_rows)
    for start in range(0, n_rows, STATS_SLAB):
        part = slice(start, start + STATS_SLAB)
        slab = clean[part].astype(np.float64, copy=False)
        col_sum += slab.sum(axis=0)
        col_sq += xp.einsum("ij,ij->j", slab, slab)
        row_sum[part] = slab.sum(axis=1)
        row_sq[part] = xp.einsum("ij,ij->i", slab, slab)
    return col_sum, col_sq, row_sum, row_sq


@dataclass(frozen=True)
class _Products:
    """Which products a pass computes; :meth:`parts` names what its fused task returns."""

    gram: bool = False
    krylov: bool = False
    krylov_images: bool = False
    keep: bool = False
    side: bool = False
    stats: bool = False
    within: bool = False
    within_images: bool = False
    within_single: bool = False  # the within product at single precision on float32 chunks
    weighted: bool = False  # the Gram and within products weight M's rows (an operand)

    def parts(self) -> tuple[str, ...]:
        return (
            *(("gram",) if self.gram else ()),
            *(("krylov",) if self.krylov else ()),
            *(("krylov_image",) if self.krylov_images else ()),
            *(("keep",) if self.keep else ()),
            *(("side",) if self.side else ()),
            *(("col_stats", "row_stats") if self.stats else ()),
            *(("within",) if self.within else ()),
            *(("within_image",) if self.within_images else ()),
        )


def _pass_kernel(block: Any, *operands: Any, what: _Products, single: bool = False) -> Any:
    """Every product of a pass from one read of the chunk, as a one-element object array
    holding a tuple in the order of ``what.parts()``.

    ``operands`` are the Krylov block, the kept block, the side block, the within block and
    the rows' weights, those asked for, in that order.  Each product is the kernel it would
    be alone (same casts, same sums): the fusion changes when the chunk is freed, not a bit
    of the results.
    """
    block = _joined(block)
    given = iter(_joined(o) for o in operands)
    results: list[Any] = []
    krylov = next(given) if what.krylov else None
    keep = next(given) if what.keep else None
    side = next(given) if what.side else None
    within = next(given) if what.within else None
    weights = next(given) if what.weighted else None
    if what.gram:
        results.append(_gram_kernel(block, weights))
    if what.krylov:
        partial, image = _krylov_kernel(block, krylov, single)
        results += [partial, image] if what.krylov_images else [partial]
    if what.keep:
        results.append(_keep_kernel(block, keep, single))
    if what.side:
        results.append(_side_kernel(block, side))
    if what.stats:
        results.extend(_stats_kernel(block))
    if what.within:  # at its own precision, whatever the main block's
        partial, image = _krylov_kernel(block, within, what.within_single, weights)
        results += [partial, image] if what.within_images else [partial]
    out = np.empty(1, dtype=object)
    out[0] = tuple(results)
    return out


def _ordered_sum(parts: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """Sum of per-chunk partials (a list, or one array) along axis 0, in chunk order."""
    if isinstance(parts, list):
        total = parts[0].copy() if len(parts) == 1 else parts[0] + parts[1]  # element-wise
        for part in parts[2:]:
            total += part
    else:
        total = parts
    return total if keepdims else total[0]


def _sum_partials(partials: da.Array) -> da.Array:
    """``partials.sum(axis=0)`` for ``(n_chunks, ...)`` partials with blocks of length 1."""
    if partials.numblocks[0] == 1:
        return partials[0]
    return da.reduction(
        partials,
        chunk=_identity_chunk,
        combine=_ordered_sum,
        aggregate=_ordered_sum,
        axis=0,
        concatenate=False,
        dtype=np.float64,
        meta=np.empty((0,) * (partials.ndim - 1)),
        name="sum-partials",
    )


def _identity_chunk(x: Any, axis: Any = None, keepdims: bool = True) -> Any:
    return x


class PassGraph(dict[str, da.Array]):
    """The lazy products of one pass (a ``dict``).

    ``named`` is the pass name once the keys carry it.  ``n_chunks`` is the number of row
    blocks of ``M`` the pass reads (the executor sizes BLAS thread pools with it).
    """

    named: str | None = None
    n_chunks: int | None = None


def pass_graph(
    data: Oriented,
    *,
    name: str | None = None,
    gram: bool = False,
    krylov: np.ndarray | None = None,
    keep: np.ndarray | None = None,
    side: np.ndarray | None = None,
    stats: bool = False,
    single: bool = False,
    krylov_images: bool = False,
    within: np.ndarray | None = None,
    within_images: bool = False,
    within_single: bool = False,
    row_weights: np.ndarray | None = None,
) -> dict[str, da.Array]:
    """Lazy products of one pass over ``data.M``; every entry reads the same chunks.

    Parameters
    ----------
    data : Oriented
    name : str, optional
        The pass name (``"mspca-stats"``, ``"mspca-pass-3"``, ...): when given, every task key
        of the pass, chunk reads included, starts with it (see :func:`name_pass`).
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
    single : bool
        Compute ``krylov`` and ``keep`` at single precision when the chunks are float32
        (results and cross-chunk sums stay float64).  Other dtypes are unaffected.
    krylov_images : bool
        With ``krylov``, also include ``krylov_image`` = ``M V`` (m, a), computed in the same
        task as ``Mᵀ(M V)`` (no extra product; float32 at single precision on float32
        chunks, else float64).
    within : (p, b) ndarray, optional
        Include ``within`` = ``Mᵀ diag(w) M V_w`` (p, b), a second Krylov product (of another
        operator's iteration) in float64 (float32 with ``within_single`` on float32 chunks,
        whatever ``single`` says), with the rows' weights ``w`` when given; with
        ``within_images``, also ``within_image`` = ``M V_w`` (m, b).
    within_images : bool
    within_single : bool
    row_weights : (m,) ndarray, optional
        Weights ``w`` of ``M``'s rows for ``gram`` (``Mᵀ diag(w) M``) and ``within``; the
        Krylov, kept and side products are unweighted.

    Returns
    -------
    PassGraph
        A ``dict`` of str to dask.array.Array.
    """
    M = data.M
    nb, p = int(M.numblocks[0]), int(M.shape[1])
    operands: list[Any] = []
    if krylov is not None:
        operands += [_small(krylov), "ja"]
    if keep is not None:
        operands += [_small(keep), "jb"]
    if side is not None:
        operands += [_big_side(side, M), "ic"]
    if within is not None:
        operands += [_small(within), "jd"]
    weighted = row_weights is not None and (gram or within is not None)
    if weighted:
        operands += [_big_side(np.asarray(row_weights, dtype=np.float64)[:, None], M), "iw"]
    what = _Products(
        gram=gram,
        krylov=krylov is not None,
        krylov_images=krylov is not None and krylov_images,
        keep=keep is not None,
        side=side is not None,
        stats=stats,
        within=within is not None,
        within_images=within is not None and within_images,
        within_single=within is not None and within_single,
        weighted=weighted,
    )
    out: dict[str, da.Array] = {}
    if not what.parts():
        return PassGraph(out)
    # one task per chunk computes every product: the chunk is read, and dropped, once
    fused = da.blockwise(
        _pass_kernel,
        "i",
        M,
        "ij",
        *operands,
        what=what,
        single=single,
        adjust_chunks={"i": 1},
        dtype=object,
        meta=np.empty((0,), dtype=object),
    )
    parts = what.parts()

    def partials(part: str, depth: int, width: int) -> da.Array:
        """The chunks' (1, depth, width) partials of ``part``, summed in chunk order."""
        shape = ((1,) * nb, (depth,), (width,))
        picked = fused.map_blocks(
            _pick,
            index=parts.index(part),
            new_axis=[1, 2],
            chunks=shape,
            dtype=np.float64,
            meta=np.empty((0, 0, 0)),
        )
        return _sum_partials(picked)

    def per_row(part: str, width: int, dtype: Any = np.float64) -> da.Array:
        """The chunks' (rows, width) results of ``part``, stacked along ``M``'s rows."""
        return fused.map_blocks(
            _pick,
            index=parts.index(part),
            new_axis=[1],
            chunks=(M.chunks[0], (width,)),
            dtype=dtype,
            meta=np.empty((0, 0), dtype=dtype),
        )

    if gram:
        out["gram"] = partials("gram", p, p)
    if krylov is not None:
        a = int(krylov.shape[1])
        out["krylov"] = partials("krylov", p, a)
        if krylov_images:
            img_dtype = _compute_dtype(np.empty(0, dtype=M.dtype), single)
            out["krylov_image"] = per_row("krylov_image", a, img_dtype)
    if keep is not None:
        out["keep"] = per_row("keep", int(keep.shape[1]))
    if side is not None:
        out["side"] = partials("side", p, int(side.shape[1]))
    if within is not None:
        b = int(within.shape[1])
        out["within"] = partials("within", p, b)
        if within_images:
            img_dtype = _compute_dtype(np.empty(0, dtype=M.dtype), within_single)
            out["within_image"] = per_row("within_image", b, img_dtype)
    if stats:
        cols = partials("col_stats", 3, p)
        rows = per_row("row_stats", 3)
        out["row_sum"] = rows[:, 0]
        out["col_sum"] = cols[0]
        out["row_sumsq"] = rows[:, 1]
        out["col_sumsq"] = cols[1]
        out["row_nonfinite"] = rows[:, 2].astype(np.int64)
        out["col_nonfinite"] = cols[2].astype(np.int64)
    graph = PassGraph(out)
    graph.n_chunks = int(M.numblocks[0])
    return name_pass(graph, name) if name else graph


def _key_name(key: Hashable) -> str:
    return str(key[0] if isinstance(key, tuple) else key)


def _own_chunk(
    dep: Hashable,
    kernel: Hashable,
    dsk: Mapping[Hashable, Any],
    dependents: Mapping[Hashable, list[Hashable]],
) -> list[Hashable]:
    """The tasks that compute the kernel's own chunk ``dep`` (through an alias), or none.

    Only a chunk computed from one stored block at most, whose task holds nothing but that
    block's read and transform.  A chunk merged from several blocks (a rechunk of blocks to
    whole rows) stays a task of its own, as Dask builds it: its merge is a copy of its own,
    and its blocks' reads, each a task, run side by side; fused, they would run one after
    another inside the kernel's task.
    """
    node = dsk.get(dep)
    if dependents.get(dep) != [kernel]:
        return []
    chain = [dep]
    if isinstance(node, Alias):  # a blockwise layer's output renamed: fuse what it names
        if dependents.get(node.target) != [dep]:
            return []
        chain.insert(0, node.target)
        node = dsk.get(node.target)
    if not isinstance(node, Task):
        return []
    blocks = [d for d in node.dependencies if isinstance(dsk.get(d), (Task, Alias))]
    return chain if len(blocks) <= 1 else []


def _chunk_into_kernel(dsk: dict[Hashable, Any]) -> dict[Hashable, Any]:
    """Each chunk's own task (its read and any transform of it: a standardisation, a
    transpose) fused into the one kernel task that multiplies it.

    Dask's blockwise fusion stops at the kernel, whose operands contract the chunk's columns,
    so the chunk would be a task of its own: held in a worker's memory between the two tasks,
    and sent to another worker when the kernel runs there.  A task is fused only when the
    kernel is its sole dependent and it reads one stored block at most (:func:`_own_chunk`);
    the small operands every kernel shares stay tasks.
    """
    dependents: dict[Hashable, list[Hashable]] = {}
    for key, node in dsk.items():
        for dep in getattr(node, "dependencies", ()):
            dependents.setdefault(dep, []).append(key)
    out = dict(dsk)
    for key, node in dsk.items():
        base = _key_name(key).rsplit("-", 1)[0]  # blockwise names the kernel after _pass_kernel
        if base != "pass_kernel" and not base.endswith("-pass_kernel"):
            continue
        own = [k for d in node.dependencies for k in _own_chunk(d, key, dsk, dependents)]
        if own:
            out[key] = Task.fuse(*(dsk[d] for d in own), node, key=cast("Key", key))
            for d in own:
                del out[d]
    return out


def name_pass(graph: Mapping[str, da.Array], name: str) -> PassGraph:
    """The same products with every computed task key prefixed by the pass name.

    The graph is optimised (as ``dask.compute`` would: blockwise fusion, culling) and its keys
    renamed from ``matmul-<token>`` to ``<name>-matmul-<token>``, so that Dask's task *groups*
    (``key_split_group``: the layer name) carry the pass name and the dashboard's task stream,
    progress bars and task-group graph tell which pass is running.  The chunk reads are
    renamed too (``<name>-zarr-<token>``): passes are computed one after another, and a read
    key shared by two passes reached the scheduler with a different task in each (its
    dependencies renamed differently, or fused), which distributed warns "can cause failures
    and deadlocks" while the previous pass's keys are still being released.  Passes never
    share results anyway.  Nothing is added to the graph, so each chunk is still read once
    per pass.  Compute the result with ``optimize_graph=False`` (it is optimised).

    Dask's task *prefix* (``key_split``) stops at the first word that is not alphabetic: a
    pass numbered ``mspca-pass-3`` shows as prefix ``mspca-pass`` (one colour for all Krylov
    passes) and as group ``mspca-pass-3-matmul-<token>``.

    Parameters
    ----------
    graph : mapping of str to dask.array.Array
        Products of one pass, typically from :func:`pass_graph`.
    name : str
        The pass name.

    Returns
    -------
    PassGraph
    """
    arrays = list(graph.values())
    n_chunks = getattr(graph, "n_chunks", None)
    if not arrays:
        out = PassGraph()
        out.named, out.n_chunks = name, n_chunks
        return out
    # The optimised, merged graph that dask.compute would run (shared chunk reads stay shared).
    expr = collections_to_expr(arrays, optimize_graph=True).optimize()
    dsk: dict[Hashable, Any] = dict(expr.__dask_graph__())
    prefix = f"{name}-"

    def rename(key: Hashable) -> Hashable:
        base = _key_name(key)
        if base.startswith(prefix):
            return key
        new = prefix + base
        return (new, *key[1:]) if isinstance(key, tuple) else new

    subs = {k: r for k in dsk if (r := rename(k)) != k}
    renamed = _chunk_into_kernel(
        {
            subs.get(k, k): (
                node.substitute(subs, key=subs[k]) if k in subs else node.substitute(subs)
            )
            for k, node in dsk.items()
        }
    )
    out = PassGraph()
    for product, arr in graph.items():
        new_name = _key_name(rename(arr.name))
        layer: Any = renamed  # a mapping of keys to tasks, as HighLevelGraph expects
        hlg = HighLevelGraph.from_collections(new_name, layer, dependencies=())
        out[product] = da.Array(hlg, new_name, chunks=arr.chunks, meta=arr._meta)
    out.named, out.n_chunks = name, n_chunks
    return out
