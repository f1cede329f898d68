"""Simulators of the paper's spiked Gaussian mixture, and alignment assertions.

The model is the paper's spiked Gaussian mixture (Section 5, "Gaussian data"), written with the
samples as *rows*: ``X`` is ``(n_samples, n_features)`` and ``c = n_features / n_samples``.
Row ``j`` is

.. math::

    x_j = \\sigma \\, \\Sigma^{1/2} z_j + \\sum_i \\gamma_{ij} m_i,
    \\qquad \\Sigma = I_d + \\sum_k \\ell_k u_k u_k^\\top,

with ``z_j`` i.i.d. of zero mean and unit variance (Gaussian, or Student-t rescaled to unit
variance), ``γ_ij ∈ {0, 1}`` the membership of sample ``j`` in mean-shift cluster ``i`` (weight
``π_i``, exactly ``round(π_i n)`` members) and ``m_i = ‖m_i‖ v_i`` with strength
``θ_i² = π_i ‖m_i‖²``.  Inliers have mean zero; the data are *not* centred afterwards.

Everything is reproducible from one ``random_state``: it is split with
:meth:`numpy.random.SeedSequence.spawn` into independent streams (covariance directions, mean-shift
directions, membership, noise), and the noise is drawn in fixed blocks of rows, each from its own
child seed.  A row therefore has the same value however the rows are requested (one call, a dask
chunking, a zarr write loop).

Examples
--------
>>> from mspca_dask.testing import paper_setting, alignment
>>> model = paper_setting(pi1=0.1, n_samples=200, n_features=180, random_state=1)
>>> X = model.to_numpy()
>>> X.shape
(200, 180)
>>> int((model.membership == 1).sum())
20
>>> bool((model.to_dask(chunks=(64, -1)).compute() == X).all())
True
"""

from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ..errors import ParameterError

if TYPE_CHECKING:
    import dask.array
    import xarray

__all__ = [
    "BLOCK_ROWS",
    "SpikedMixture",
    "make_spiked_mixture",
    "paper_setting",
    "alignment",
    "assert_alignment",
]

#: Rows per noise block (upper bound): each block of rows is drawn from its own child seed.
BLOCK_ROWS = 1024
#: Upper bound on the elements of one generated block (128 MiB of float64), so that very wide
#: data do not allocate huge blocks; the block height is ``min(BLOCK_ROWS, _BLOCK_ELEMENTS // d)``.
_BLOCK_ELEMENTS = 2**24

_NOISES = ("gaussian", "student-t")
_SPIKE_DISTRIBUTIONS = ("gaussian", "exponential", "chi2")

# Indices of the independent streams spawned from SeedSequence(random_state).
_STREAM_COV_DIRECTIONS = 0
_STREAM_SHIFT_DIRECTIONS = 1
_STREAM_MEMBERSHIP = 2
_STREAM_NOISE = 3
_N_STREAMS = 4


def _noise_stream(seed: int) -> np.random.SeedSequence:
    return np.random.SeedSequence(seed).spawn(_N_STREAMS)[_STREAM_NOISE]


@dataclass(frozen=True, eq=False, repr=False)
class SpikedMixture:
    """Parameters of a spiked covariance model with mean-shift clusters (no data).

    Instances are made by :func:`make_spiked_mixture` or :func:`paper_setting`; the data are
    generated on demand, row block by row block, by :meth:`rows`, :meth:`to_numpy`,
    :meth:`to_dask`, :meth:`to_xarray` or :meth:`write_zarr`, and are the same whichever is used.

    Attributes
    ----------
    n_samples : int
        ``n``, the number of rows.
    n_features : int
        ``d``, the number of columns.
    covariance_spikes : tuple of float
        ``ℓ_k > 0``, the ``r`` covariance spikes: ``Σ = I + Σ_k ℓ_k u_k u_kᵀ``.
    covariance_directions : (n_features, r) array
        Orthonormal ``u_k``, uniform on the Stiefel manifold.
    mean_shift_weights : tuple of float
        ``π_i``, the ``k`` cluster weights (sum below 1).
    mean_shift_strengths : tuple of float
        ``θ_i² = π_i ‖m_i‖²``.
    mean_shift_vectors : (n_features, k) array
        The shifts ``m_i`` (not unit: ``‖m_i‖ = sqrt(θ_i² / π_i)``), directions uniform on the
        sphere, independent of the ``u_k``.
    membership : (n_samples,) int array
        ``0`` for an inlier, ``i`` for a member of cluster ``i`` (1-based).
    noise_variance : float
        ``σ²``; the bulk of the spectrum is Marchenko–Pastur with this variance.
    noise : {"gaussian", "student-t"}
        Distribution of the entries of ``z_j``.
    df : float or None
        Degrees of freedom of the Student-t noise (``> 2``), else None.
    seed : int
        The ``random_state`` the model was drawn from; the noise blocks derive from it.
    spike_distribution : {"gaussian", "exponential", "chi2"}
        Distribution of each sample's factor along a covariance direction ``u_k``:
        ``"exponential"`` is a standardised Exp(1) (mean 0, variance 1, skewness 2) and
        ``"chi2"`` a standardised χ²₁ (skewness 2√2), skewed covariance PCs as allele counts
        give; the covariance ``Σ`` is the same for all.
    """

    n_samples: int
    n_features: int
    covariance_spikes: tuple[float, ...]
    covariance_directions: np.ndarray
    mean_shift_weights: tuple[float, ...]
    mean_shift_strengths: tuple[float, ...]
    mean_shift_vectors: np.ndarray
    membership: np.ndarray
    noise_variance: float
    noise: str
    df: float | None
    seed: int
    spike_distribution: str = "gaussian"

    def __post_init__(self) -> None:
        # Freeze the arrays too: a frozen model whose directions could be edited in place would
        # silently disagree with data generated earlier.
        for array in (self.covariance_directions, self.mean_shift_vectors, self.membership):
            array.setflags(write=False)

    # ------------------------------------------------------------------ small properties
    @property
    def shape(self) -> tuple[int, int]:
        """``(n_samples, n_features)``."""
        return (self.n_samples, self.n_features)

    @property
    def aspect_ratio(self) -> float:
        """``c = n_features / n_samples``."""
        return self.n_features / self.n_samples

    @property
    def n_clusters(self) -> int:
        """``k``, the number of mean-shift clusters."""
        return len(self.mean_shift_weights)

    @property
    def block_rows(self) -> int:
        """Height of the fixed noise blocks (1024, fewer for very wide data)."""
        return max(1, min(BLOCK_ROWS, _BLOCK_ELEMENTS // self.n_features))

    def __repr__(self) -> str:
        spikes = ", ".join(f"{v:.4g}" for v in self.covariance_spikes)
        weights = ", ".join(f"{v:.4g}" for v in self.mean_shift_weights)
        strengths = ", ".join(f"{v:.4g}" for v in self.mean_shift_strengths)
        df = f", df={self.df:g}" if self.df is not None else ""
        if self.spike_distribution != "gaussian":
            df += f", spike_distribution={self.spike_distribution!r}"
        return (
            f"SpikedMixture(n_samples={self.n_samples}, n_features={self.n_features}, "
            f"covariance_spikes=({spikes}), mean_shift_weights=({weights}), "
            f"mean_shift_strengths=({strengths}), noise_variance={self.noise_variance:g}, "
            f"noise={self.noise!r}{df}, seed={self.seed})"
        )

    def __dask_tokenize__(self) -> tuple[Any, ...]:
        # Everything else is a deterministic function of these.
        return (
            type(self).__name__,
            self.n_samples,
            self.n_features,
            self.covariance_spikes,
            self.mean_shift_weights,
            self.mean_shift_strengths,
            self.noise_variance,
            self.noise,
            self.df,
            self.seed,
            self.spike_distribution,
        )

    # ------------------------------------------------------------------ generation
    def _check_range(self, start: int, stop: int) -> tuple[int, int]:
        start, stop = int(start), int(stop)
        if not 0 <= start <= stop <= self.n_samples:
            raise ParameterError(
                f"rows must satisfy 0 <= start <= stop <= n_samples={self.n_samples} "
                f"(got start={start}, stop={stop})"
            )
        return start, stop

    def _clean_block(self, b: int) -> np.ndarray:
        """Noise rows of block ``b``: ``σ Σ^{1/2} z`` for the whole block, shape (rows, d)."""
        height = self.block_rows
        first = b * height
        m = min(height, self.n_samples - first)
        noise_ss = _noise_stream(self.seed)
        # The b-th child of the noise stream, made directly (what noise_ss.spawn would give).
        child = np.random.SeedSequence(
            noise_ss.entropy, spawn_key=(*noise_ss.spawn_key, b), pool_size=noise_ss.pool_size
        )
        rng = np.random.default_rng(child)
        if self.noise == "gaussian":
            z = rng.standard_normal((m, self.n_features))
        else:
            assert self.df is not None
            # Var(t_df) = df / (df - 2): rescale to unit variance.
            z = rng.standard_t(self.df, size=(m, self.n_features))
            z *= math.sqrt((self.df - 2.0) / self.df)
        if self.covariance_spikes:
            U = self.covariance_directions
            root = np.sqrt(1.0 + np.asarray(self.covariance_spikes))
            if self.spike_distribution == "gaussian":
                # Σ^{1/2} = I + U diag(sqrt(1 + ℓ) - 1) Uᵀ (U orthonormal), applied to rows.
                z += ((z @ U) * (root - 1.0)) @ U.T
            else:
                # the factors along U replaced by skewed ones of the same variance 1 + ℓ
                if self.spike_distribution == "exponential":
                    factors = rng.standard_exponential((m, U.shape[1])) - 1.0
                else:
                    factors = (rng.standard_normal((m, U.shape[1])) ** 2 - 1.0) / math.sqrt(2.0)
                z += (factors * root - z @ U) @ U.T
        if self.noise_variance != 1.0:
            z *= math.sqrt(self.noise_variance)
        return z

    def _generate(self, start: int, stop: int, *, shifted: bool) -> np.ndarray:
        start, stop = self._check_range(start, stop)
        out = np.empty((stop - start, self.n_features), dtype=np.float64)
        if stop == start:
            return out
        height = self.block_rows
        # Always generate whole blocks and slice: the values cannot depend on the request.
        for b in range(start // height, (stop - 1) // height + 1):
            lo, hi = max(start, b * height), min(stop, (b + 1) * height)
            out[lo - start : hi - start] = self._clean_block(b)[lo - b * height : hi - b * height]
        if shifted and self.n_clusters:
            shifts = np.vstack([np.zeros((1, self.n_features)), self.mean_shift_vectors.T])
            out += shifts[self.membership[start:stop]]
        return out

    def rows(self, start: int, stop: int) -> np.ndarray:
        """Data rows ``start:stop``.

        Parameters
        ----------
        start, stop : int
            ``0 <= start <= stop <= n_samples``.

        Returns
        -------
        (stop - start, n_features) float64 array
            The same values whichever way the rows are requested.
        """
        return self._generate(start, stop, shifted=True)

    def clean_rows(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` without the mean-shift term, ``σ Σ^{1/2} z_j``.

        Returns
        -------
        (stop - start, n_features) float64 array
        """
        return self._generate(start, stop, shifted=False)

    def to_numpy(self) -> np.ndarray:
        """The whole data matrix, ``(n_samples, n_features)`` float64."""
        return self.rows(0, self.n_samples)

    def _dask_block(
        self, dtype: np.dtype[Any], block_info: dict[Any, Any] | None = None
    ) -> np.ndarray:
        assert block_info is not None
        (r0, r1), (c0, c1) = block_info[None]["array-location"]
        block = self.rows(r0, r1)
        if (c0, c1) != (0, self.n_features):
            block = block[:, c0:c1]
        return np.ascontiguousarray(block, dtype=dtype)

    def to_dask(
        self, chunks: Any = (BLOCK_ROWS, -1), *, dtype: Any = "float64"
    ) -> dask.array.Array:
        """The data as a lazily generated dask array.

        Parameters
        ----------
        chunks : dask chunk specification, default ``(1024, -1)``
            Anything :func:`dask.array.core.normalize_chunks` accepts, irregular tuples included
            (e.g. ``((300, 700), (900,))``).  Each chunk calls :meth:`rows`; chunks aligned to
            :attr:`block_rows` generate each row once.
        dtype : dtype, default float64
            Values are generated in float64 and cast.

        Returns
        -------
        (n_samples, n_features) dask array
            Equal to :meth:`to_numpy` (cast to ``dtype``) for every chunking.
        """
        import dask.array as da
        from dask.base import tokenize

        dt = np.dtype(dtype)
        normalized = da.core.normalize_chunks(chunks, shape=self.shape, dtype=dt)
        name = "spiked-mixture-" + tokenize(self, normalized, dt.str)
        return da.map_blocks(
            self._dask_block,
            dt,
            chunks=normalized,
            dtype=dt,
            meta=np.empty((0, 0), dtype=dt),
            name=name,
        )

    def sample_ids(self) -> np.ndarray:
        """Sample identifiers ``"s0000", "s0001", ...`` (zero padded to at least 4 digits)."""
        width = max(4, len(str(self.n_samples - 1)))
        return np.array([f"s{j:0{width}d}" for j in range(self.n_samples)])

    def to_xarray(
        self,
        sample_dim: str = "samples",
        feature_dim: str = "features",
        name: str = "X",
        *,
        chunks: Any | None = (BLOCK_ROWS, -1),
    ) -> xarray.DataArray:
        """The data as a named ``xarray.DataArray``.

        Parameters
        ----------
        sample_dim, feature_dim : str
            Dimension names of the rows and columns.
        name : str
            Name of the DataArray.
        chunks : dask chunk specification or None, default ``(1024, -1)``
            Dask-backed (lazy) with these chunks; None for an in-memory NumPy array.

        Returns
        -------
        xarray.DataArray, dims ``(sample_dim, feature_dim)``
            Coordinates on ``sample_dim``: the sample ids (:meth:`sample_ids`) and
            ``"membership"`` (0 = inlier).
        """
        import xarray as xr

        if sample_dim == feature_dim:
            raise ParameterError(
                f"sample_dim and feature_dim must differ (both are {sample_dim!r})"
            )
        data = self.to_numpy() if chunks is None else self.to_dask(chunks)
        return xr.DataArray(
            data,
            dims=(sample_dim, feature_dim),
            coords={
                sample_dim: self.sample_ids(),
                "membership": (sample_dim, np.asarray(self.membership)),
            },
            name=name,
        )

    def write_zarr(
        self,
        path: str | os.PathLike[str],
        *,
        chunks: tuple[int | None, int | None] = (BLOCK_ROWS, None),
        dtype: Any = "float64",
        zarr_format: Literal[2, 3] = 3,
        name: str | None = None,
        sample_dim: str = "samples",
        feature_dim: str = "features",
        overwrite: bool = False,
        consolidated: bool = True,
    ) -> str:
        """Write the data to a Zarr store, one slab of row chunks at a time.

        The whole array is never held in memory: rows are generated and written in slabs of
        whole row chunks (at most about :attr:`block_rows` rows).

        Parameters
        ----------
        path : str or path-like
            Local path or fsspec URL of the store.
        chunks : (int or None, int or None), default ``(1024, None)``
            Zarr chunk shape; None means the full extent of that axis.
        dtype : dtype, default float64
        zarr_format : {2, 3}, default 3
        name : str or None
            None: a bare array at ``path``.  Otherwise a group at ``path`` holding the data as
            array ``name`` and the ``"membership"`` array, with dimension names so that
            ``xarray.open_zarr(path)`` reads it as a Dataset.
        sample_dim, feature_dim : str
            Dimension names recorded in the store.
        overwrite : bool, default False
            Replace an existing array or group at ``path``.
        consolidated : bool, default True
            For a group (``name`` given): consolidate its metadata at the end, as
            ``xarray.Dataset.to_zarr`` does, so that ``xarray.open_zarr(path)`` opens it without
            a warning.  Ignored for a bare array.

        Returns
        -------
        str
            ``path``.
        """
        import zarr

        if zarr_format not in (2, 3):
            raise ParameterError(f"zarr_format must be 2 or 3 (not {zarr_format!r})")
        if len(chunks) != 2:
            raise ParameterError(f"chunks must have two entries (rows, features), got {chunks!r}")
        row_chunk = self.n_samples if chunks[0] is None else int(chunks[0])
        col_chunk = self.n_features if chunks[1] is None else int(chunks[1])
        if row_chunk < 1 or col_chunk < 1:
            raise ParameterError(f"chunk sizes must be positive integers or None, got {chunks!r}")
        row_chunk = min(row_chunk, self.n_samples)
        col_chunk = min(col_chunk, self.n_features)
        dt = np.dtype(dtype)
        store = os.fspath(path)
        dims = (sample_dim, feature_dim)

        def _array_kwargs(dim_names: tuple[str, ...]) -> dict[str, Any]:
            if zarr_format == 3:
                return {"dimension_names": dim_names}
            # Zarr v2: xarray reads the dimension names from this attribute, and would decode a
            # fill value as missing (0 → NaN, int → float), so write none.
            return {"attributes": {"_ARRAY_DIMENSIONS": list(dim_names)}, "fill_value": None}

        if name is None:
            target = zarr.create_array(
                store=store,
                shape=self.shape,
                chunks=(row_chunk, col_chunk),
                dtype=dt,
                zarr_format=zarr_format,
                overwrite=overwrite,
                **_array_kwargs(dims),
            )
        else:
            group = zarr.open_group(store, mode="w" if overwrite else "w-", zarr_format=zarr_format)
            target = group.create_array(
                name,
                shape=self.shape,
                chunks=(row_chunk, col_chunk),
                dtype=dt,
                **_array_kwargs(dims),
            )
            membership = group.create_array(
                "membership",
                shape=(self.n_samples,),
                chunks=(row_chunk,),
                dtype=np.int32,
                **_array_kwargs((sample_dim,)),
            )
            membership[:] = self.membership.astype(np.int32)

        # Write whole row chunks, several per slab when chunks are shorter than a noise block.
        step = row_chunk * max(1, self.block_rows // row_chunk)
        for start in range(0, self.n_samples, step):
            stop = min(start + step, self.n_samples)
            target[start:stop] = self.rows(start, stop).astype(dt, copy=False)
        if name is not None and consolidated:
            with warnings.catch_warnings():
                # zarr warns that consolidated metadata is not (yet) in the v3 spec; xarray and
                # zarr-python both read it, and xarray writes it by default too.
                warnings.filterwarnings(
                    "ignore", message="Consolidated metadata is currently not part"
                )
                zarr.consolidate_metadata(store, zarr_format=zarr_format)
        return store

    def clean_top_eigenvectors(self, k: int = 1) -> np.ndarray:
        """Top eigenvectors of the *clean* sample covariance.

        The clean sample covariance is ``C = Yᵀ Y / n`` with ``Y`` the rows without the
        mean-shift term (:meth:`clean_rows`), uncentred.  The paper measures alignment against
        its top eigenvector (the population direction ``u_1`` is out of reach at ``c > 0``:
        RMT caps the alignment of any estimate near ``sqrt((1 - c/ℓ²) / (1 + c/ℓ))``).

        Parameters
        ----------
        k : int, default 1
            Number of eigenvectors, ``1 <= k <= min(n_samples, n_features)``.

        Returns
        -------
        (n_features, k) float64 array
            Orthonormal columns, descending eigenvalue; each column's largest-magnitude entry
            is positive (deterministic signs).
        """
        k = int(k)
        n, d = self.shape
        if not 1 <= k <= min(n, d):
            raise ParameterError(f"k must be in [1, min(n_samples, n_features)={min(n, d)}]")
        height = self.block_rows
        if d <= n:
            # Accumulate the d × d Gram matrix block by block.
            gram = np.zeros((d, d))
            for start in range(0, n, height):
                Y = self.clean_rows(start, min(start + height, n))
                gram += Y.T @ Y
            _, vecs = np.linalg.eigh(gram / n)
            V = vecs[:, ::-1][:, :k]
        else:
            # Wide data: the n × d matrix is the small side; use its SVD.
            Y = self.clean_rows(0, n)
            _, _, vt = np.linalg.svd(Y, full_matrices=False)
            V = vt[:k].T
        idx = np.argmax(np.abs(V), axis=0)
        signs = np.sign(V[idx, np.arange(k)])
        signs[signs == 0] = 1.0
        return np.ascontiguousarray(V * signs)


# ---------------------------------------------------------------------- constructors
def _as_float_tuple(values: Any, what: str) -> tuple[float, ...]:
    """A scalar or sequence of numbers as a tuple of finite floats (``()`` stays empty)."""
    try:
        out = tuple(float(v) for v in np.atleast_1d(np.asarray(values, dtype=float)).ravel())
    except (TypeError, ValueError) as exc:
        raise ParameterError(f"{what} must be a sequence of numbers (got {values!r})") from exc
    if not all(math.isfinite(v) for v in out):
        raise ParameterError(f"{what} must be finite (got {values!r})")
    return out


def _check_count(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ParameterError(f"{what} must be a positive integer (got {value!r})")
    return int(value)


def make_spiked_mixture(
    n_samples: int = 1000,
    n_features: int = 900,
    *,
    covariance_spikes: Any = None,
    mean_shift_weights: Any = (0.05,),
    mean_shift_strengths: Any = None,
    noise_variance: float = 1.0,
    noise: str = "gaussian",
    df: float | None = None,
    random_state: int | None = 0,
    spike_distribution: str = "gaussian",
) -> SpikedMixture:
    """Draw the parameters of a spiked covariance model with mean-shift clusters.

    Parameters
    ----------
    n_samples, n_features : int
        ``n`` rows and ``d`` columns; ``c = d / n``.
    covariance_spikes : sequence of float or None
        ``ℓ_k > 0`` (at most ``n_features``); None gives the paper's ``(2√c,)``; ``()`` none.
    mean_shift_weights : sequence of float, default ``(0.05,)``
        ``π_i > 0`` with sum below 1; cluster ``i`` has exactly ``round(π_i n) >= 1`` members,
        at random rows, disjoint.  ``()`` for no contamination.
    mean_shift_strengths : sequence of float or None
        ``θ_i² >= 0``, one per weight; None gives the paper's ``4√c`` for each.
    noise_variance : float, default 1
        ``σ² > 0``.
    noise : {"gaussian", "student-t"}
        Distribution of the entries of ``z_j``; Student-t is rescaled to unit variance.
    df : float or None
        Degrees of freedom, required (``> 2``) for ``"student-t"``, None for ``"gaussian"``.
    random_state : int or None, default 0
        Seed of :class:`numpy.random.SeedSequence`; None draws fresh entropy (recorded in
        :attr:`SpikedMixture.seed`, so the model is still reproducible).
    spike_distribution : {"gaussian", "exponential", "chi2"}, default "gaussian"
        Distribution of each sample's factor along a covariance direction; "exponential"
        (standardised Exp(1), skewness 2) and "chi2" (standardised χ²₁, skewness 2√2) make
        every covariance spike a skewed PC with the same covariance.  The Gaussian default
        draws the same data as before this option.

    Returns
    -------
    SpikedMixture

    Raises
    ------
    ParameterError
        On any parameter out of range (the message says which and why).

    Notes
    -----
    ``x_j = σ Σ^{1/2} z_j + Σ_i γ_ij m_i`` with ``Σ = I + Σ_k ℓ_k u_k u_kᵀ`` and
    ``θ_i² = π_i ‖m_i‖²`` (paper, Section 3 and the Gaussian experiments of Section 5).
    The ``u_k`` are the Q factor of a Gaussian ``d × r`` matrix (signs fixed by ``R``'s
    diagonal, so uniform); the ``v_i = m_i / ‖m_i‖`` are normalised Gaussian vectors drawn from
    a separate stream.

    Examples
    --------
    >>> model = make_spiked_mixture(100, 50, mean_shift_weights=(0.1, 0.2), random_state=3)
    >>> [int((model.membership == i).sum()) for i in (0, 1, 2)]
    [70, 10, 20]
    """
    n = _check_count(n_samples, "n_samples")
    d = _check_count(n_features, "n_features")
    c = d / n

    spikes = (2.0 * math.sqrt(c),) if covariance_spikes is None else covariance_spikes
    spikes = _as_float_tuple(spikes, "covariance_spikes")
    if any(v <= 0 for v in spikes):
        raise ParameterError(f"covariance_spikes must be positive (got {spikes})")
    if len(spikes) > d:
        raise ParameterError(
            f"at most n_features={d} covariance spikes are possible (got {len(spikes)})"
        )

    weights = _as_float_tuple(mean_shift_weights, "mean_shift_weights")
    if any(w <= 0 or w >= 1 for w in weights):
        raise ParameterError(f"mean_shift_weights must lie in (0, 1) (got {weights})")
    if sum(weights) >= 1:
        raise ParameterError(
            f"mean_shift_weights must sum to less than 1 so that inliers remain "
            f"(got sum {sum(weights):.4g})"
        )
    counts = [int(math.floor(w * n + 0.5)) for w in weights]
    for w, count in zip(weights, counts, strict=True):
        if count < 1:
            raise ParameterError(
                f"mean-shift weight {w:g} gives round({w:g} * n_samples) = 0 members; "
                f"use a larger weight or more samples"
            )
    if sum(counts) >= n:
        raise ParameterError(
            f"the clusters would take all {n} samples after rounding ({counts}); "
            f"lower mean_shift_weights"
        )

    if mean_shift_strengths is None:
        strengths: tuple[float, ...] = tuple(4.0 * math.sqrt(c) for _ in weights)
    else:
        strengths = _as_float_tuple(mean_shift_strengths, "mean_shift_strengths")
    if len(strengths) != len(weights):
        raise ParameterError(
            f"mean_shift_strengths needs one value per weight: {len(weights)} weights, "
            f"{len(strengths)} strengths"
        )
    if any(s < 0 for s in strengths):
        raise ParameterError(f"mean_shift_strengths must be non-negative (got {strengths})")

    try:
        sigma2 = float(noise_variance)
    except (TypeError, ValueError) as exc:
        raise ParameterError(f"noise_variance must be a number (got {noise_variance!r})") from exc
    if not (math.isfinite(sigma2) and sigma2 > 0):
        raise ParameterError(f"noise_variance must be positive and finite (got {noise_variance!r})")

    if noise not in _NOISES:
        raise ParameterError(f"noise must be one of {list(_NOISES)} (not {noise!r})")
    if noise == "student-t":
        if df is None:
            raise ParameterError("noise='student-t' needs df, the degrees of freedom (> 2)")
        df = float(df)
        if not (df > 2 and math.isfinite(df)):
            raise ParameterError(
                f"df must be finite and > 2 for unit-variance Student-t noise (got {df:g})"
            )
    elif df is not None:
        raise ParameterError(f"df is only used with noise='student-t' (got df={df!r})")
    if spike_distribution not in _SPIKE_DISTRIBUTIONS:
        raise ParameterError(
            f"spike_distribution must be one of {list(_SPIKE_DISTRIBUTIONS)} "
            f"(not {spike_distribution!r})"
        )

    if random_state is None:
        seed = int(np.random.SeedSequence().entropy)  # type: ignore[arg-type]
    elif isinstance(random_state, bool) or not isinstance(random_state, int | np.integer):
        raise ParameterError(
            f"random_state must be a non-negative integer or None (got {random_state!r})"
        )
    elif random_state < 0:
        raise ParameterError(f"random_state must be non-negative (got {random_state})")
    else:
        seed = int(random_state)

    streams = np.random.SeedSequence(seed).spawn(_N_STREAMS)

    r = len(spikes)
    rng = np.random.default_rng(streams[_STREAM_COV_DIRECTIONS])
    if r:
        q, rr = np.linalg.qr(rng.standard_normal((d, r)))
        # Fix QR's sign ambiguity so that Q is Haar distributed (Mezzadri 2007).
        diag = np.sign(np.diag(rr))
        diag[diag == 0] = 1.0
        U = np.ascontiguousarray(q * diag)
    else:
        U = np.zeros((d, 0))

    k = len(weights)
    rng = np.random.default_rng(streams[_STREAM_SHIFT_DIRECTIONS])
    V = rng.standard_normal((d, k))
    if k:
        V /= np.linalg.norm(V, axis=0)
        norms = np.sqrt(np.asarray(strengths) / np.asarray(weights))
        M = np.ascontiguousarray(V * norms)
    else:
        M = np.zeros((d, 0))

    rng = np.random.default_rng(streams[_STREAM_MEMBERSHIP])
    order = rng.permutation(n)
    membership = np.zeros(n, dtype=np.int64)
    first = 0
    for i, count in enumerate(counts, start=1):
        membership[order[first : first + count]] = i
        first += count

    return SpikedMixture(
        n_samples=n,
        n_features=d,
        covariance_spikes=spikes,
        covariance_directions=U,
        mean_shift_weights=weights,
        mean_shift_strengths=strengths,
        mean_shift_vectors=M,
        membership=membership,
        noise_variance=sigma2,
        noise=noise,
        df=df if noise == "student-t" else None,
        seed=seed,
        spike_distribution=spike_distribution,
    )


def paper_setting(
    pi1: float = 0.05,
    n_samples: int = 1000,
    n_features: int = 900,
    random_state: int | None = 0,
) -> SpikedMixture:
    """The paper's Gaussian experiment: one covariance spike and one mean-shift cluster.

    ``ℓ_1 = 2√c``, ``θ_1² = 4√c`` (so ``‖m_1‖ = 2 (√c / π_1)^{1/2}``), ``σ = 1``, Gaussian
    noise; the paper uses ``d = 900``, ``n = 1000`` and ``π_1 ∈ {5, 10, 15, 20}%``.

    Parameters
    ----------
    pi1 : float, default 0.05
        Weight ``π_1`` of the mean-shift cluster.
    n_samples, n_features : int
    random_state : int or None

    Returns
    -------
    SpikedMixture
    """
    c = _check_count(n_features, "n_features") / _check_count(n_samples, "n_samples")
    return make_spiked_mixture(
        n_samples,
        n_features,
        covariance_spikes=(2.0 * math.sqrt(c),),
        mean_shift_weights=(pi1,),
        mean_shift_strengths=(4.0 * math.sqrt(c),),
        noise_variance=1.0,
        noise="gaussian",
        random_state=random_state,
    )


# ---------------------------------------------------------------------- assertions
def _as_vector(x: Any, what: str) -> np.ndarray:
    a = np.asarray(x, dtype=float)
    if a.ndim == 2 and 1 in a.shape:
        a = a.ravel()
    if a.ndim != 1:
        raise ParameterError(f"{what} must be a vector, shape (d,) or (d, 1) (got {a.shape})")
    return a


def alignment(u: Any, v: Any) -> float:
    """Cosine alignment ``|⟨u, v⟩| / (‖u‖ ‖v‖)`` in ``[0, 1]`` (sign-free).

    Parameters
    ----------
    u, v : (d,) arrays
        ``(d, 1)`` and ``(1, d)`` are accepted too.

    Returns
    -------
    float

    Examples
    --------
    >>> alignment([1.0, 0.0], [-2.0, 0.0])
    1.0
    """
    a = _as_vector(u, "u")
    b = _as_vector(v, "v")
    if a.shape != b.shape:
        raise ParameterError(f"u and v must have the same length (got {a.size} and {b.size})")
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0 or nb == 0 or not (math.isfinite(na) and math.isfinite(nb)):
        raise ParameterError("alignment needs finite non-zero vectors")
    return min(1.0, abs(float(a @ b)) / (na * nb))


def assert_alignment(estimate: Any, truth: Any, *, at_least: float) -> None:
    """Assert that ``alignment(estimate, truth) >= at_least``.

    Raises
    ------
    AssertionError
        With the measured alignment, the threshold and the dimension in the message.

    Examples
    --------
    >>> assert_alignment([1.0, 0.1], [1.0, 0.0], at_least=0.99)
    """
    value = alignment(estimate, truth)
    if not value >= at_least:
        d = _as_vector(truth, "truth").size
        raise AssertionError(
            f"alignment |<estimate, truth>| / (|estimate| |truth|) = {value:.4f} is below the "
            f"required {at_least:.4f} (n_features={d}; a random direction would give about "
            f"{1 / math.sqrt(d):.3f})"
        )
