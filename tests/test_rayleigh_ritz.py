"""Rayleigh–Ritz and its eigenvalue error bounds against dense ``eigh``.

Under test: ``_engine.linalg.rayleigh_ritz`` and ``projected_ritz``, the same from ``QᵀMᵀMQ``.

The randomized solver reports each eigenvalue as a Ritz value ``θ`` with a bound: Bauer–Fike
puts an eigenvalue of the operator within the residual ``r = ‖Op x − θ x‖`` of ``θ``, and the
Kato–Temple refinement ``r² / gap`` tightens it, pair by pair or for a run of close Ritz
values apart from the rest (its block form).  These tests hold both against a dense
reference on small symmetric matrices with a known spectrum, across shapes, spectral gaps and
float32/float64 inputs.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from mspca_dask._engine.linalg import (
    LowRank,
    apply_operator,
    dense_operator,
    orthonormalize,
    projected_ritz,
    rayleigh_ritz,
    top_eigh,
)

FAST = settings(max_examples=25, deadline=None)

#: ``rayleigh_ritz`` takes the Kato–Temple gap from the other *Ritz* values; an eigenvalue
#: the subspace has not seen can lie closer to ``θ`` than they do, and then ``r² / gap``
#: understates the error (by 2x in the hand-made case below, 20 % in Hypothesis' case).  This
#: is the documented condition of the refined bound (``rayleigh_ritz``'s Notes, README); the
#: residual bound holds in these cases too.  Strict: a rigorous gap makes these pass, and then
#: the mark must go.
KATO_TEMPLE_GAP_FROM_RITZ_VALUES = pytest.mark.xfail(
    strict=True,
    reason="the refined bound assumes span(Q) has missed no eigenvalue nearer than the Ritz gap",
)


def _operator(seed: int, eigenvalues: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A symmetric ``(p, p)`` matrix with the given spectrum and its eigenvectors (columns)."""
    p = eigenvalues.size
    V, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((p, p)))
    return (V * eigenvalues) @ V.T, V


def _subspace(seed: int, V: np.ndarray, m: int, L: int, noise: float) -> np.ndarray:
    """Orthonormal ``(p, L)`` basis: the top ``m`` eigenvectors plus ``noise`` of a random
    perturbation, completed by random directions."""
    p = V.shape[0]
    rng = np.random.default_rng(seed + 1)
    B = rng.standard_normal((p, L))
    B[:, :m] = V[:, :m] + noise * B[:, :m] / np.sqrt(p)
    Q, _ = np.linalg.qr(B)
    return Q


def _rounding(A: np.ndarray, dtype: type) -> float:
    """Allowance for the rounding of the products ``QᵀOpQ`` and the residuals in ``dtype``
    (and of the dense reference): a few units of ``dtype`` per summed term, on ``‖A‖``."""
    return 8.0 * A.shape[0] * float(np.finfo(dtype).eps) * float(np.linalg.norm(A, 2))


def _distance_to_spectrum(values: np.ndarray, eigenvalues: np.ndarray) -> np.ndarray:
    return np.min(np.abs(values[:, None] - eigenvalues[None, :]), axis=1)


@st.composite
def problems(draw: st.DrawFn) -> dict:
    """A spectrum (descending, positive, with a drawn gap below the top ``m``), a subspace
    dimension ``L`` and number ``k`` of wanted pairs, an input dtype and a perturbation."""
    p = draw(st.integers(4, 40))
    L = draw(st.integers(1, p))
    k = draw(st.integers(1, L))
    m = draw(st.integers(0, L))
    top = draw(st.floats(1.0, 1e3))
    gap = draw(st.floats(1e-6, 0.9))  # relative gap between the top m and the rest
    bulk = np.sort(np.random.default_rng(draw(st.integers(0, 2**32 - 1))).uniform(0, 1, p))
    eigenvalues = np.sort(bulk * top)[::-1].copy()
    eigenvalues[m:] *= 1.0 - gap
    return {
        "seed": draw(st.integers(0, 2**32 - 2)),
        "eigenvalues": eigenvalues,
        "L": L,
        "k": k,
        "m": m,
        "noise": draw(st.sampled_from([0.0, 1e-8, 1e-4, 1e-2, 0.3, 3.0])),
        "dtype": draw(st.sampled_from([np.float32, np.float64])),
    }


def _ritz(problem: dict):
    lam = problem["eigenvalues"]
    A, V = _operator(problem["seed"], lam)
    Q = _subspace(problem["seed"], V, problem["m"], problem["L"], problem["noise"])
    dtype = problem["dtype"]
    A_in, Q_in = A.astype(dtype), Q.astype(dtype)
    # the reference spectrum is that of the operator the solver saw (A rounded to dtype)
    exact = np.linalg.eigvalsh(A_in.astype(np.float64))[::-1]
    values, coef, res, bounds = rayleigh_ritz(Q_in, A_in @ Q_in, problem["k"])
    return exact, values, coef, res, bounds, _rounding(A, dtype)


@FAST
@given(problem=problems())
def test_rayleigh_ritz__returns_k_descending_pairs_with_unit_ritz_vectors(problem):
    exact, values, coef, res, bounds, tol = _ritz(problem)
    k = problem["k"]
    assert values.shape == res.shape == bounds.shape == (k,)
    assert coef.shape == (problem["L"], k)
    assert np.all(np.diff(values) <= tol)
    np.testing.assert_allclose(np.linalg.norm(coef, axis=0), 1.0, rtol=1e-3)


@FAST
@given(problem=problems())
def test_ritz_values__lie_below_the_eigenvalues_of_the_same_rank(problem):
    # Cauchy interlacing: the i-th Ritz value on any subspace is at most the i-th eigenvalue.
    exact, values, _coef, _res, _bounds, tol = _ritz(problem)
    assert np.all(values <= exact[: values.size] + tol)


@FAST
@given(problem=problems())
def test_residual__bounds_the_distance_to_the_nearest_eigenvalue(problem):
    # Bauer–Fike for a symmetric operator: an eigenvalue lies within ‖Op x − θ x‖ of θ.
    exact, values, _coef, res, _bounds, tol = _ritz(problem)
    assert np.all(_distance_to_spectrum(values, exact) <= res + tol)


@FAST
@given(problem=problems())
def test_bounds__are_non_negative_and_never_looser_than_the_residual(problem):
    _exact, _values, _coef, res, bounds, _tol = _ritz(problem)
    assert np.all(bounds >= 0.0)
    assert np.all(bounds <= res)


@FAST
@given(problem=problems())
def test_bound__holds_the_distance_to_the_nearest_eigenvalue_when_the_subspace_holds_the_top(
    problem,
):
    # The solver's setting: the basis grows around the top eigenvectors, so for k < m <= L
    # the Ritz values below the k-th approximate the eigenvalues below it.  A basis perturbed
    # by a third of its norm or more does not hold them (Hypothesis found noise = 3 breaking
    # the refined bound, the documented condition): the setting keeps noise <= 1e-2.
    problem = {**problem, "noise": min(problem["noise"], 1e-2)}
    if not problem["k"] < problem["m"]:
        problem = {**problem, "m": min(problem["L"], problem["k"] + 1)}
    if not problem["k"] < problem["m"]:
        return  # L == k: no Ritz value below the k-th to measure a gap from
    exact, values, _coef, _res, bounds, tol = _ritz(problem)
    assert np.all(_distance_to_spectrum(values, exact) <= bounds + tol)


@KATO_TEMPLE_GAP_FROM_RITZ_VALUES
@FAST
@example(
    problem={
        "seed": 1,
        "eigenvalues": np.array([0.47523185, 0.47432472, 0.25591081, 0.07207981]),
        "L": 2,
        "k": 1,
        "m": 0,
        "noise": 0.0,
        "dtype": np.float32,
    }
)
@given(problem=problems())
def test_bound__holds_the_distance_to_the_nearest_eigenvalue_on_any_subspace(problem):
    exact, values, _coef, _res, bounds, tol = _ritz(problem)
    assert np.all(_distance_to_spectrum(values, exact) <= bounds + tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("p", "L", "k"), [(5, 5, 5), (30, 6, 3), (60, 12, 12)])
def test_invariant_subspace__gives_zero_residual_and_the_exact_eigenvalues(p, L, k, dtype):
    lam = np.linspace(10.0, 1.0, p)
    A, V = _operator(p, lam)
    Q = V[:, :L] @ np.linalg.qr(np.random.default_rng(1).standard_normal((L, L)))[0]
    A_in, Q_in = A.astype(dtype), Q.astype(dtype)
    values, _coef, res, bounds = rayleigh_ritz(Q_in, A_in @ Q_in, k)
    tol = _rounding(A, dtype)
    np.testing.assert_allclose(values, lam[:k], atol=tol)
    assert np.all(res <= tol)
    assert np.all(bounds <= tol)


def test_bounds__shrink_as_the_subspace_captures_the_eigenvectors():
    lam = np.concatenate([[50.0, 40.0, 30.0], np.linspace(5.0, 1.0, 37)])
    A, V = _operator(7, lam)
    worst = []
    for noise in [1.0, 1e-1, 1e-2, 1e-3, 1e-4]:
        Q = _subspace(7, V, 3, 8, noise)
        _values, _coef, res, bounds = rayleigh_ritz(Q, A @ Q, 3)
        worst.append(float(bounds.max()))
    assert all(b < a for a, b in zip(worst, worst[1:], strict=False))
    # the Kato–Temple bound is quadratic in the residual: 10x less noise, ~100x smaller bound
    assert worst[-1] < 1e-4 * worst[-3]


@pytest.mark.parametrize("noise", [1e-2, 1e-3, 1e-4])
def test_bounds__stay_quadratic_for_a_cluster_apart_from_the_rest(noise):
    # Three eigenvalues 1e-4 apart, 3 below the top one and 3 above the bulk: each one's own
    # Ritz gap is below its residual, so Kato–Temple pair by pair gives only the residual;
    # the run of the three has the gap of 3, and its block bound is quadratic in the noise.
    lam = np.concatenate([[10.0, 5.0001, 5.0, 4.9999], np.linspace(2.0, 0.1, 36)])
    A, V = _operator(11, lam)
    Q = _subspace(11, V, 4, 8, noise)
    values, _coef, res, bounds = rayleigh_ritz(Q, A @ Q, 4)
    error = np.abs(values - lam[:4])
    assert np.all(error <= bounds + _rounding(A, np.float64))
    assert np.all(res[1:] > 1e-4)  # above the cluster's own gaps: pair by pair, no help
    assert np.max(bounds[1:]) < 10 * noise * np.max(res[1:])


@KATO_TEMPLE_GAP_FROM_RITZ_VALUES
def test_kato_temple_bound__counts_an_eigenvalue_the_subspace_has_not_seen():
    # Eigenvalues 3, 2, 1; the basis holds the top eigenvector and v3 + ε v2.  The second
    # Ritz value is 1 + ε²/(1 + ε²) with residual ≈ ε: its nearest eigenvalue is 1, at ≈ ε²,
    # and the next one (2) is ≈ 1 away.  The nearest *other Ritz value* (3) is ≈ 2 away, so a
    # gap taken from the Ritz values halves the true Kato–Temple bound ε²/1.
    A, V = _operator(0, np.array([3.0, 2.0, 1.0]))
    eps = 1e-2
    Q, _ = np.linalg.qr(np.column_stack([V[:, 0], V[:, 2] + eps * V[:, 1]]))
    values, _coef, _res, bounds = rayleigh_ritz(Q, A @ Q, 2)
    error = _distance_to_spectrum(values, np.array([3.0, 2.0, 1.0]))
    assert error[1] <= bounds[1] + _rounding(A, np.float64)


def _random_lowrank(rng: np.random.Generator, p: int, r: int) -> LowRank:
    """A low-rank part of rank ``r`` with a positive semi-definite ``OᵀO``."""
    B = rng.standard_normal((r, r))
    return LowRank(P=rng.standard_normal((p, r)), MtO=rng.standard_normal((p, r)), OtO=B @ B.T)


@FAST
@given(
    seed=st.integers(0, 2**32 - 1),
    p=st.integers(2, 30),
    r=st.integers(0, 3),
    a=st.integers(1, 5),
    n=st.integers(1, 1000),
)
def test_apply_operator__equals_the_dense_operator_on_the_same_vectors(seed, p, r, a, n):
    rng = np.random.default_rng(seed)
    M = rng.standard_normal((p + 3, p))
    lowrank = _random_lowrank(rng, p, r)
    Vs = rng.standard_normal((p, a))
    MtM = M.T @ M
    dense = dense_operator(MtM, lowrank, n)
    np.testing.assert_allclose(dense, dense.T)
    scale = float(np.abs(dense).max()) * p
    np.testing.assert_allclose(
        apply_operator(MtM @ Vs, Vs, lowrank, n), dense @ Vs, atol=1e-12 * scale
    )


@FAST
@given(seed=st.integers(0, 2**32 - 1), p=st.integers(2, 40), k=st.integers(1, 45))
def test_top_eigh__returns_the_largest_eigenpairs_descending(seed, p, k):
    B = np.random.default_rng(seed).standard_normal((p, p))
    A = (B + B.T) / 2
    values, vectors = top_eigh(A, k)
    kk = min(k, p)
    np.testing.assert_allclose(values, np.linalg.eigvalsh(A)[::-1][:kk], atol=1e-10 * p)
    np.testing.assert_allclose(A @ vectors, vectors * values, atol=1e-9 * p)


@FAST
@given(seed=st.integers(0, 2**32 - 1), p=st.integers(3, 30), a=st.integers(1, 6))
def test_orthonormalize__gives_an_orthonormal_basis_orthogonal_to_the_old_one(seed, p, a):
    rng = np.random.default_rng(seed)
    old = orthonormalize(rng.standard_normal((p, min(a, p - 1))))
    new = orthonormalize(rng.standard_normal((p, a)), against=old)
    assert new.shape[1] <= p - old.shape[1]
    np.testing.assert_allclose(new.T @ new, np.eye(new.shape[1]), atol=1e-12)
    np.testing.assert_allclose(old.T @ new, 0.0, atol=1e-12)


@FAST
@given(
    seed=st.integers(0, 2**32 - 1),
    p=st.integers(4, 40),
    r=st.integers(0, 3),
    k=st.integers(1, 4),
    n=st.integers(1, 1000),
)
def test_projected_ritz__equals_rayleigh_ritz_on_the_applied_operator(seed, p, r, k, n):
    # the same Ritz pairs, bounds and images whether the operator is applied to the whole
    # basis (rayleigh_ritz) or only QᵀMᵀMQ and the low-rank factors are (projected_ritz)
    rng = np.random.default_rng(seed)
    M = rng.standard_normal((p + 3, p)) * np.linspace(3.0, 0.5, p)
    lowrank = _random_lowrank(rng, p, r)
    base = LowRank(P=rng.standard_normal((p, 1)), MtO=rng.standard_normal((p, 1)), OtO=np.eye(1))
    Q = orthonormalize(rng.standard_normal((p, min(p, k + 3))))
    Z = M.T @ (M @ Q)
    values, coef, _res, bounds = rayleigh_ritz(Q, apply_operator(Z, Q, lowrank, n), k)
    got, vectors, got_bounds, images = projected_ritz(Q, Z, Q.T @ Z, lowrank, n, k, base)
    scale = float(np.abs(dense_operator(M.T @ M, lowrank, n)).max()) * p
    np.testing.assert_allclose(got, values, atol=1e-10 * scale)
    # a vector is the same up to its sign where its value is apart from the others
    gaps = np.array(
        [np.min(np.abs(np.delete(values, i) - v), initial=np.inf) for i, v in enumerate(values)]
    )
    apart = gaps > 1e-4 * scale
    cos = np.abs(np.sum(vectors * (Q @ coef), axis=0))
    np.testing.assert_allclose(cos[apart], 1.0, atol=1e-6)
    np.testing.assert_allclose(got_bounds, bounds, atol=1e-8 * scale)
    assert images is not None
    np.testing.assert_allclose(
        images, dense_operator(M.T @ M, base, n) @ vectors, atol=1e-9 * scale
    )
