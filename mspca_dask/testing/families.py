"""Named, seeded data families on which a verdict is judged: null, power and real.

Each :class:`Family` draws, from one integer seed, a :class:`Draw`: the data (row block by row
block, so a large draw never needs to be held in memory) and its :class:`Truth`: the top
eigenvector of the *clean* sample covariance (the data without any mean shift) and the
membership and direction of every mean-shifted group.

* **null** families have no mean shift: every flagged eigenpair is a false flag.
* **power** families have one or more shifted groups: the verdict should flag them and keep
  the top covariance component stable.
* **real** families are one class of a scikit-learn data set plus 5 % of another class
  (shipped with scikit-learn; nothing is downloaded), features standardised.

Simulated rows follow a factor model (samples as rows, ``c = d / n``)

.. math::

    x_j = a_j \\, L z_j + \\sum_k \\sqrt{\\ell_k} \\, f_{jk} u_k + s_j m_{g(j)},

with ``z_j ~ N(0, I_d)``; ``L`` the noise's feature structure (identity, AR(1) across features,
or a power-law of variances), of unit average variance; ``a_j`` a per-sample noise scale (1
except in a noisier batch); ``f_jk`` a factor of mean 0 and variance 1 (Gaussian, standardised
χ²₁, exponential, Student-t₃ or uniform); ``u_k`` orthonormal; ``m_g`` the shift of group ``g``
with strength ``θ² = π ‖m‖²`` and ``s_j`` a per-sample multiplier of mean 1 (1, Exp(1) or
U(0, 2)) for members, 0 for the others.  Families that are exactly the paper's mixture use
:func:`~mspca_dask.testing.make_spiked_mixture`.

A draw's data derive from ``SeedSequence([crc32(family name), seed])``: the same seed gives
unrelated data in two families, and the same data however its rows are requested.

Examples
--------
>>> from mspca_dask.testing import family
>>> draw = family("P-paper-10").draw(0)
>>> draw.shape
(1000, 900)
>>> int((draw.truth.membership == 1).sum())
100
>>> draw.truth.shift_directions.shape
(900, 1)
"""

from __future__ import annotations

import functools
import math
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np

from ..errors import ParameterError
from .simulators import BLOCK_ROWS, make_spiked_mixture, paper_setting

if TYPE_CHECKING:
    import dask.array

__all__ = [
    "FAMILIES",
    "Draw",
    "Family",
    "Truth",
    "family",
    "family_names",
]

Kind = Literal["null", "power", "real"]

#: The factor distributions along a covariance direction (all of mean 0 and variance 1).
_FACTORS = ("gaussian", "chi2", "exponential", "t3", "uniform")


class _Rows(Protocol):
    @property
    def n_samples(self) -> int: ...

    @property
    def n_features(self) -> int: ...

    def rows(self, start: int, stop: int) -> np.ndarray: ...

    def clean_rows(self, start: int, stop: int) -> np.ndarray: ...


# ---------------------------------------------------------------------- truth and draw
@dataclass(frozen=True, eq=False, repr=False)
class Truth:
    """What a draw was made of.

    Attributes
    ----------
    clean_top : (n_features,) ndarray
        Unit top eigenvector of the clean sample covariance: the data without the mean-shift
        term (simulated families: ``Yᵀ Y / n``, uncentred, of the inliers' rows alone when a
        batch has more noise, as
        :meth:`~mspca_dask.testing.SpikedMixture.clean_top_eigenvectors`; real families: the
        covariance of the main class alone).
    membership : (n_samples,) int ndarray
        0 for an unshifted sample, ``g`` for a member of shifted group ``g`` (1-based).
    shift_directions : (n_features, k) ndarray
        Unit direction of each group's mean shift (``k = 0`` for a null family).
    covariance_directions : (n_features, r) ndarray
        The population spike directions ``u_k`` (``r = 0`` for a real family).
    """

    clean_top: np.ndarray
    membership: np.ndarray
    shift_directions: np.ndarray
    covariance_directions: np.ndarray

    def __post_init__(self) -> None:
        for array in (
            self.clean_top,
            self.membership,
            self.shift_directions,
            self.covariance_directions,
        ):
            array.setflags(write=False)

    @property
    def n_groups(self) -> int:
        """``k``, the number of shifted groups."""
        return int(self.shift_directions.shape[1])


class Draw:
    """One seeded draw of a family: data on demand and its :class:`Truth`.

    Attributes
    ----------
    family : str
    seed : int
    truth : Truth
    """

    def __init__(self, family: str, seed: int, model: _Rows, truth: Truth) -> None:
        self.family = family
        self.seed = seed
        self.truth = truth
        self._model = model

    def __repr__(self) -> str:
        n, d = self.shape
        return f"Draw(family={self.family!r}, seed={self.seed}, n_samples={n}, n_features={d})"

    @property
    def shape(self) -> tuple[int, int]:
        """``(n_samples, n_features)``."""
        return (self._model.n_samples, self._model.n_features)

    def rows(self, start: int, stop: int) -> np.ndarray:
        """Data rows ``start:stop`` (float64), the same however they are requested."""
        n = self._model.n_samples
        if not 0 <= start <= stop <= n:
            raise ParameterError(
                f"rows must satisfy 0 <= start <= stop <= {n} (got {start}, {stop})"
            )
        return self._model.rows(start, stop)

    def to_numpy(self, dtype: Any = "float64") -> np.ndarray:
        """The whole ``(n_samples, n_features)`` matrix."""
        return np.ascontiguousarray(self.rows(0, self.shape[0]), dtype=dtype)

    def blocks(self, rows: int = BLOCK_ROWS, dtype: Any = "float64") -> Iterator[np.ndarray]:
        """The data as consecutive row blocks of at most ``rows`` rows."""
        n = self.shape[0]
        for start in range(0, n, rows):
            yield np.ascontiguousarray(self.rows(start, min(start + rows, n)), dtype=dtype)

    def to_dask(self, chunks: Any = (BLOCK_ROWS, -1), dtype: Any = "float64") -> dask.array.Array:
        """The data as a lazily generated dask array (equal to :meth:`to_numpy`)."""
        import dask.array as da

        dt = np.dtype(dtype)
        normalized = da.core.normalize_chunks(chunks, shape=self.shape, dtype=dt)

        def block(block_info: dict[Any, Any] | None = None) -> np.ndarray:
            assert block_info is not None
            (r0, r1), (c0, c1) = block_info[None]["array-location"]
            return np.ascontiguousarray(self.rows(r0, r1)[:, c0:c1], dtype=dt)

        name = f"family-{self.family}-{self.seed}-{dt.str}-{hash(normalized)}"
        return da.map_blocks(
            block, chunks=normalized, dtype=dt, name=name, meta=np.empty((0, 0), dt)
        )

    def write_zarr(self, path: str, *, chunk_rows: int = 10_000, dtype: Any = "float32") -> str:
        """Write the data to a bare Zarr array at ``path``, one row chunk at a time."""
        import zarr

        n, d = self.shape
        chunk_rows = min(chunk_rows, n)
        target = zarr.create_array(
            store=path, shape=(n, d), chunks=(chunk_rows, d), dtype=np.dtype(dtype), overwrite=True
        )
        for start in range(0, n, chunk_rows):
            stop = min(start + chunk_rows, n)
            target[start:stop] = self.rows(start, stop).astype(dtype, copy=False)
        return path


@dataclass(frozen=True)
class Family:
    """A named, seeded generator of :class:`Draw` objects.

    Attributes
    ----------
    name : str
    kind : {"null", "power", "real"}
    description : str
        One line: what the family is.
    """

    name: str
    kind: Kind
    description: str
    _build: Callable[[int], tuple[_Rows, Truth]] = field(repr=False, compare=False)
    _shape: Callable[[], tuple[int, int]] = field(repr=False, compare=False)

    @property
    def shape(self) -> tuple[int, int]:
        """``(n_samples, n_features)`` of every draw."""
        return self._shape()

    def draw(self, seed: int) -> Draw:
        """The draw of this family for ``seed`` (a non-negative integer)."""
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
            raise ParameterError(f"seed must be a non-negative integer (got {seed!r})")
        model, truth = self._build(int(seed))
        return Draw(self.name, int(seed), model, truth)


def _streams(name: str, seed: int, count: int) -> list[np.random.SeedSequence]:
    return np.random.SeedSequence([zlib.crc32(name.encode()), seed]).spawn(count)


def _int_seed(name: str, seed: int) -> int:
    """An integer ``random_state`` for the shipped simulators, from the family and the seed."""
    return int(np.random.SeedSequence([zlib.crc32(name.encode()), seed]).generate_state(1)[0])


def _unit_columns(A: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(A / np.linalg.norm(A, axis=0))


def _top_eigenvector(
    model: _Rows, centre: np.ndarray | None = None, rows: np.ndarray | None = None
) -> np.ndarray:
    """Top eigenvector of ``(Y - centre)ᵀ(Y - centre) / n``, Y the clean rows (those where the
    bool mask ``rows`` holds, when given); sign fixed."""
    n, d = model.n_samples, model.n_features
    scales = np.ones(n) if rows is None else np.where(rows, 1.0, 0.0)
    if d <= n:
        gram = np.zeros((d, d))
        for start in range(0, n, BLOCK_ROWS):
            stop = min(start + BLOCK_ROWS, n)
            Y = model.clean_rows(start, stop)
            if centre is not None:
                Y = Y - centre
            Y = Y * scales[start:stop, None]
            gram += Y.T @ Y
        _, vecs = np.linalg.eigh(gram)
        v = vecs[:, -1]
    else:
        Y = model.clean_rows(0, n)
        if centre is not None:
            Y = Y - centre
        Y = Y * scales[:, None]
        v = np.linalg.svd(Y, full_matrices=False)[2][0]
    v = v * (1.0 if v[np.argmax(np.abs(v))] >= 0 else -1.0)
    return np.ascontiguousarray(v)


# ---------------------------------------------------------------------- the factor model
@dataclass(frozen=True, eq=False, repr=False)
class _FactorModel:
    """Rows of the factor model of the module docstring, generated in fixed seeded blocks."""

    n_samples: int
    n_features: int
    spikes: tuple[float, ...]
    factors: tuple[str, ...]
    directions: np.ndarray  # (d, r)
    noise: str  # "iso", "ar" or "power"
    rho: float
    feature_scales: np.ndarray  # (d,) noise SD per feature ("power"), else ones
    sample_scales: np.ndarray  # (n,) a_j
    membership: np.ndarray  # (n,)
    shift_vectors: np.ndarray  # (d, k) m_g, not unit
    multipliers: np.ndarray  # (n,) s_j
    noise_stream: np.random.SeedSequence

    def _block(self, b: int) -> np.ndarray:
        first = b * BLOCK_ROWS
        m = min(BLOCK_ROWS, self.n_samples - first)
        ss = self.noise_stream
        child = np.random.SeedSequence(ss.entropy, spawn_key=(*ss.spawn_key, b))
        rng = np.random.default_rng(child)
        z = rng.standard_normal((m, self.n_features))
        if self.noise == "ar":
            # stationary AR(1) across features, unit variance in every feature
            w = math.sqrt(1.0 - self.rho**2)
            for t in range(1, self.n_features):
                z[:, t] = self.rho * z[:, t - 1] + w * z[:, t]
        elif self.noise == "power":
            z *= self.feature_scales
        z *= self.sample_scales[first : first + m, None]
        for k, (ell, kind) in enumerate(zip(self.spikes, self.factors, strict=True)):
            z += np.outer(math.sqrt(ell) * _factor(rng, kind, m), self.directions[:, k])
        return z

    def clean_rows(self, start: int, stop: int) -> np.ndarray:
        out = np.empty((stop - start, self.n_features))
        if stop == start:
            return out
        for b in range(start // BLOCK_ROWS, (stop - 1) // BLOCK_ROWS + 1):
            lo, hi = max(start, b * BLOCK_ROWS), min(stop, (b + 1) * BLOCK_ROWS)
            out[lo - start : hi - start] = self._block(b)[lo - b * BLOCK_ROWS : hi - b * BLOCK_ROWS]
        return out

    def rows(self, start: int, stop: int) -> np.ndarray:
        out = self.clean_rows(start, stop)
        if self.shift_vectors.shape[1]:
            shifts = np.vstack([np.zeros((1, self.n_features)), self.shift_vectors.T])
            out += self.multipliers[start:stop, None] * shifts[self.membership[start:stop]]
        return out


def _factor(rng: np.random.Generator, kind: str, m: int) -> np.ndarray:
    """``m`` draws of mean 0 and variance 1."""
    if kind == "gaussian":
        return rng.standard_normal(m)
    if kind == "chi2":
        return (rng.standard_normal(m) ** 2 - 1.0) / math.sqrt(2.0)
    if kind == "exponential":
        return rng.standard_exponential(m) - 1.0
    if kind == "t3":
        return rng.standard_t(3, m) / math.sqrt(3.0)  # Var(t_3) = 3
    if kind == "uniform":
        return rng.uniform(-math.sqrt(3.0), math.sqrt(3.0), m)
    raise ParameterError(f"factor must be one of {list(_FACTORS)} (not {kind!r})")


def _factor_family(
    name: str,
    *,
    n: int = 1000,
    d: int = 900,
    spikes: tuple[float, ...] = (2.0, 1.5),
    factors: tuple[str, ...] | None = None,
    noise: str = "iso",
    rho: float = 0.0,
    weights: tuple[float, ...] = (),
    multiplier: str = "one",
    noisy_batch_sd: float = 1.0,
    shift_angle: float | None = None,
) -> Callable[[int], tuple[_Rows, Truth]]:
    """A factor-model family; ``spikes`` in units of ``√c``, strengths ``θ² = 4√c`` per group.

    ``multiplier``: "one", "gamma" (Exp(1)) or "uniform" (U(0, 2)) for ``s_j``;
    ``noisy_batch_sd``: noise scale ``a_j`` of the first group's members; ``shift_angle``:
    degrees between the first group's shift and ``u_1`` (None: a uniform direction).
    """
    c = d / n
    ell = tuple(s * math.sqrt(c) for s in spikes)
    kinds = factors if factors is not None else ("gaussian",) * len(spikes)

    def build(seed: int) -> tuple[_Rows, Truth]:
        s_dir, s_shift, s_member, s_noise = _streams(name, seed, 4)
        rng = np.random.default_rng(s_dir)
        q, rr = np.linalg.qr(rng.standard_normal((d, max(len(ell), 1))))
        U = np.ascontiguousarray((q * np.sign(np.diag(rr)))[:, : len(ell)])
        rng = np.random.default_rng(s_shift)
        V = _unit_columns(rng.standard_normal((d, len(weights)))) if weights else np.zeros((d, 0))
        if weights and shift_angle is not None:
            # the first group's direction at the given angle to u_1, in a plane orthogonal to
            # every other covariance direction
            w = rng.standard_normal(d)
            w -= U @ (U.T @ w)
            w /= np.linalg.norm(w)
            a = math.radians(shift_angle)
            V[:, 0] = math.cos(a) * U[:, 0] + math.sin(a) * w
        norms = np.sqrt(np.array([4.0 * math.sqrt(c) / p for p in weights]))
        M = V * norms if weights else V
        rng = np.random.default_rng(s_member)
        membership = np.zeros(n, dtype=np.int64)
        order = rng.permutation(n)
        first = 0
        for g, p in enumerate(weights, start=1):
            count = int(math.floor(p * n + 0.5))
            membership[order[first : first + count]] = g
            first += count
        if multiplier == "gamma":
            mult = rng.gamma(1.0, 1.0, n)
        elif multiplier == "uniform":
            mult = rng.uniform(0.0, 2.0, n)
        else:
            mult = np.ones(n)
        sample_scales = np.where(membership == 1, noisy_batch_sd, 1.0)
        j = np.arange(1, d + 1, dtype=float)
        variances = j**-0.5 / np.mean(j**-0.5)
        model = _FactorModel(
            n_samples=n,
            n_features=d,
            spikes=ell,
            factors=kinds,
            directions=U,
            noise=noise,
            rho=rho,
            feature_scales=np.sqrt(variances) if noise == "power" else np.ones(d),
            sample_scales=sample_scales,
            membership=membership,
            shift_vectors=np.ascontiguousarray(M),
            multipliers=mult,
            noise_stream=s_noise,
        )
        # with a noisier batch, the covariance of the main population alone (as for real
        # families): the batch's own noise is no covariance structure the groups share
        inliers = membership == 0 if noisy_batch_sd != 1.0 else None
        truth = Truth(_top_eigenvector(model, rows=inliers), membership, V, U)
        return model, truth

    return build


def _mixture_family(
    name: str,
    *,
    n: int = 1000,
    d: int = 900,
    spikes: tuple[float, ...] = (2.0, 1.5),
    weights: tuple[float, ...] = (),
    paper_pi: float | None = None,
) -> Callable[[int], tuple[_Rows, Truth]]:
    """A family that is exactly the shipped spiked mixture (spikes in units of ``√c``)."""
    c = d / n

    def build(seed: int) -> tuple[_Rows, Truth]:
        if paper_pi is not None:
            model = paper_setting(paper_pi, n, d, random_state=_int_seed(name, seed))
        else:
            model = make_spiked_mixture(
                n,
                d,
                covariance_spikes=tuple(s * math.sqrt(c) for s in spikes),
                mean_shift_weights=weights,
                random_state=_int_seed(name, seed),
            )
        M = np.asarray(model.mean_shift_vectors)
        V = _unit_columns(M) if M.shape[1] else np.zeros((d, 0))
        truth = Truth(
            np.ascontiguousarray(model.clean_top_eigenvectors(1)[:, 0]),
            np.array(model.membership),
            V,
            np.array(model.covariance_directions),
        )
        return model, truth

    return build


# ---------------------------------------------------------------------- real data
@dataclass(frozen=True, eq=False, repr=False)
class _ArrayRows:
    data: np.ndarray  # (n, d), shifted rows as they are
    clean: np.ndarray  # (n, d), contaminants replaced by nothing: see _real_family

    @property
    def n_samples(self) -> int:
        return int(self.data.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.data.shape[1])

    def rows(self, start: int, stop: int) -> np.ndarray:
        return np.array(self.data[start:stop])

    def clean_rows(self, start: int, stop: int) -> np.ndarray:
        return np.array(self.clean[start:stop])


#: The contamination weight of the real families: contaminants are 5 % of a draw.
_REAL_WEIGHT = 0.05


def _load_real(dataset: str) -> tuple[np.ndarray, np.ndarray]:
    from sklearn import datasets

    loaders = {
        "digits": datasets.load_digits,
        "wine": datasets.load_wine,
        "breast_cancer": datasets.load_breast_cancer,
    }
    bunch = loaders[dataset]()
    return np.asarray(bunch.data, dtype=float), np.asarray(bunch.target)


def _real_shape(dataset: str, main: int) -> tuple[int, int]:
    X, y = _load_real(dataset)
    n_main = int((y == main).sum())
    n_other = int(math.floor(_REAL_WEIGHT * n_main / (1 - _REAL_WEIGHT) + 0.5))
    d = int((X[y == main].std(axis=0) > 0).sum())
    return n_main + n_other, d


def _real_family(
    name: str, dataset: str, main: int, other: int
) -> Callable[[int], tuple[_Rows, Truth]]:
    """Class ``main`` of ``dataset`` plus contaminants of class ``other`` (5 % of the draw).

    The seed picks which samples of ``other`` are drawn and the row order.  Features constant
    within the main class are dropped (standardised, they would be the contaminants alone);
    the others are standardised over the draw.  Truth: the main class's covariance top
    eigenvector and the direction of the contaminants' mean from the main class's mean.
    """

    def build(seed: int) -> tuple[_Rows, Truth]:
        (stream,) = _streams(name, seed, 1)
        rng = np.random.default_rng(stream)
        X, y = _load_real(dataset)
        keep = X[y == main].std(axis=0) > 0
        A, B = X[y == main][:, keep], X[y == other][:, keep]
        n_other = int(math.floor(_REAL_WEIGHT * len(A) / (1 - _REAL_WEIGHT) + 0.5))
        B = B[rng.choice(len(B), size=n_other, replace=False)]
        data = np.vstack([A, B])
        membership = np.r_[np.zeros(len(A), dtype=np.int64), np.ones(n_other, dtype=np.int64)]
        order = rng.permutation(len(data))
        data, membership = data[order], membership[order]
        data = (data - data.mean(axis=0)) / data.std(axis=0)
        inliers = data[membership == 0]
        centre = inliers.mean(axis=0)
        shift = data[membership == 1].mean(axis=0) - centre
        model = _ArrayRows(data, inliers)
        top = _top_eigenvector(_ArrayRows(inliers, inliers), centre)
        truth = Truth(
            top,
            membership,
            (shift / np.linalg.norm(shift))[:, None],
            np.zeros((data.shape[1], 0)),
        )
        return model, truth

    return build


# ---------------------------------------------------------------------- the suite
def _families() -> dict[str, Family]:
    out: list[Family] = []

    def add(name: str, kind: Kind, description: str, shape: tuple[int, int], build: Any) -> None:
        out.append(Family(name, kind, description, build, lambda: shape))

    std = (1000, 900)
    two = "spikes 2.0√c and 1.5√c"
    add("N-iso", "null", f"isotropic noise, 2 Gaussian {two}", std, _mixture_family("N-iso"))
    add(
        "N-ar03",
        "null",
        f"AR(1) noise across features, rho 0.3; {two}",
        std,
        _factor_family("N-ar03", noise="ar", rho=0.3),
    )
    add(
        "N-ar06",
        "null",
        f"AR(1) noise across features, rho 0.6; {two}",
        std,
        _factor_family("N-ar06", noise="ar", rho=0.6),
    )
    add(
        "N-power",
        "null",
        f"feature noise variances ∝ j^-0.5 (mean 1); {two}",
        std,
        _factor_family("N-power", noise="power"),
    )
    add(
        "N-skew",
        "null",
        f"{two}, standardised χ²₁ and exponential factors",
        std,
        _factor_family("N-skew", factors=("chi2", "exponential")),
    )
    add(
        "N-heavy",
        "null",
        "one spike 2.0√c with a standardised Student-t₃ factor",
        std,
        _factor_family("N-heavy", spikes=(2.0,), factors=("t3",)),
    )
    add(
        "N-flat",
        "null",
        "one spike 2.0√c with a uniform factor (a continuous covariate)",
        std,
        _factor_family("N-flat", spikes=(2.0,), factors=("uniform",)),
    )
    add(
        "N-five",
        "null",
        "5 Gaussian spikes 3.0, 2.5, 2.0, 1.75, 1.5 √c",
        std,
        _mixture_family("N-five", spikes=(3.0, 2.5, 2.0, 1.75, 1.5)),
    )
    add("N-wide", "null", f"d/n = 10; {two}", (300, 3000), _mixture_family("N-wide", n=300, d=3000))
    add("N-tall", "null", f"d/n = 0.3; {two}", (3000, 900), _mixture_family("N-tall", n=3000))
    add(
        "N-big",
        "null",
        f"n = 100,000, d = 200; {two}",
        (100_000, 200),
        _mixture_family("N-big", n=100_000, d=200),
    )
    for pct in (5, 10, 15, 20):
        add(
            f"P-paper-{pct}",
            "power",
            f"paper setting, π₁ = {pct} %",
            std,
            _mixture_family(f"P-paper-{pct}", paper_pi=pct / 100),
        )
    add(
        "P-gamma",
        "power",
        f"one 10 % batch shifted by m·s, s ~ Gamma(1); {two}",
        std,
        _factor_family("P-gamma", weights=(0.10,), multiplier="gamma"),
    )
    add(
        "P-uniform",
        "power",
        f"one 10 % batch shifted by m·s, s ~ U(0, 2); {two}",
        std,
        _factor_family("P-uniform", weights=(0.10,), multiplier="uniform"),
    )
    add(
        "P-noisy2",
        "power",
        f"one 10 % batch, 2× noise SD, shifted; {two}",
        std,
        _factor_family("P-noisy2", weights=(0.10,), noisy_batch_sd=2.0),
    )
    add(
        "P-noisy15",
        "power",
        f"one 10 % batch, 1.5× noise SD, shifted; {two}",
        std,
        _factor_family("P-noisy15", weights=(0.10,), noisy_batch_sd=1.5),
    )
    add(
        "P-ten",
        "power",
        f"ten batches of 1 %; {two}",
        std,
        _mixture_family("P-ten", weights=(0.01,) * 10),
    )
    add(
        "P-unequal",
        "power",
        f"batches of 2, 5 and 10 %; {two}",
        std,
        _mixture_family("P-unequal", weights=(0.02, 0.05, 0.10)),
    )
    add(
        "P-angle45",
        "power",
        f"one 10 % batch shifted at 45° to u₁; {two}",
        std,
        _factor_family("P-angle45", weights=(0.10,), shift_angle=45.0),
    )
    add(
        "P-angle90",
        "power",
        f"one 10 % batch shifted at 90° to u₁ and u₂; {two}",
        std,
        _factor_family("P-angle90", weights=(0.10,), shift_angle=90.0),
    )
    add(
        "P-45",
        "power",
        "one batch of 45 %; one spike 2.0√c (paper scaling)",
        std,
        _mixture_family("P-45", spikes=(2.0,), weights=(0.45,)),
    )
    for name, dataset, main, other, label in (
        ("R-digits", "digits", 0, 6, "digits: class 0 + 5 % class 6"),
        ("R-wine", "wine", 1, 0, "wine: class 1 + 5 % class 0"),
        ("R-breast", "breast_cancer", 1, 0, "breast_cancer: benign + 5 % malignant"),
    ):
        shape = functools.partial(_real_shape, dataset, main)  # read from the data set on use
        out.append(
            Family(
                name,
                "real",
                f"{label}, standardised",
                _real_family(name, dataset, main, other),
                shape,
            )
        )
    return {f.name: f for f in out}


#: Every family, by name, in the order of the suite (null, power, real).
FAMILIES: dict[str, Family] = _families()


def family_names(kind: Kind | None = None) -> list[str]:
    """Names of the families (of one ``kind``), in the order of the suite."""
    return [f.name for f in FAMILIES.values() if kind is None or f.kind == kind]


def family(name: str) -> Family:
    """The family called ``name``.

    Raises
    ------
    ParameterError
        If there is none, with the names there are.
    """
    try:
        return FAMILIES[name]
    except KeyError:
        raise ParameterError(f"family must be one of {list(FAMILIES)} (not {name!r})") from None
