"""Properties of the random-matrix formulas (pure math, Hypothesis)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mspca_dask import rmt

aspect = st.floats(min_value=0.01, max_value=20.0, allow_nan=False)
noise = st.floats(min_value=0.05, max_value=50.0, allow_nan=False)
strength_above = st.floats(min_value=1.001, max_value=200.0)  # multiple of √c


@given(c=aspect, s2=noise, mult=strength_above)
def test_spike_inverse__inverts_forward_above_threshold(c, s2, mult):
    ell = mult * np.sqrt(c)
    lam = rmt.spike_forward(ell, c, s2)
    assert rmt.spike_inverse(lam, c, s2) == pytest.approx(ell, rel=1e-7)


@given(c=aspect, s2=noise, frac=st.floats(min_value=0.0, max_value=1.0))
def test_spike_forward__below_threshold_is_the_edge(c, s2, frac):
    edge = rmt.mp_edges(c, s2)[1]
    assert rmt.spike_forward(frac * np.sqrt(c), c, s2) == pytest.approx(edge)


@given(c=aspect, s2=noise, frac=st.floats(min_value=0.0, max_value=1.0))
def test_spike_inverse__at_or_below_edge_is_bbp_threshold_not_nan(c, s2, frac):
    lam = frac * rmt.mp_edges(c, s2)[1]
    out = rmt.spike_inverse(lam, c, s2)
    assert np.isfinite(out)
    assert out == pytest.approx(rmt.bbp_threshold(c))
    assert not rmt.is_detectable(lam, c, s2)


@given(c=aspect, s2=noise, a=st.floats(1.001, 50), b=st.floats(1.001, 50))
def test_spike_forward__is_increasing_and_continuous_at_threshold(c, s2, a, b):
    lo, hi = sorted((a, b))
    sc = np.sqrt(c)
    assert rmt.spike_forward(lo * sc, c, s2) <= rmt.spike_forward(hi * sc, c, s2) + 1e-12
    assert rmt.spike_forward(sc * (1 + 1e-9), c, s2) == pytest.approx(
        rmt.mp_edges(c, s2)[1], rel=1e-6
    )


@given(c=aspect, s2=noise)
def test_mp_edges__scale_with_noise_variance(c, s2):
    lo1, hi1 = rmt.mp_edges(c, 1.0)
    lo, hi = rmt.mp_edges(c, s2)
    assert (lo, hi) == pytest.approx((s2 * lo1, s2 * hi1))
    assert 0 <= lo < hi


@settings(deadline=None)
@given(c=st.floats(0.05, 1.0), s2=st.floats(0.2, 5.0))
def test_mp_density__integrates_to_continuous_mass(c, s2):
    from scipy import integrate

    lo, hi = rmt.mp_edges(c, s2)
    w = hi - lo

    # x = lo + w sin²t: the square-root edges and, as c -> 1 (lo -> 0), the 1/x peak become a
    # smooth integrand (quad warned of round-off on the plain one at c = 0.9987)
    def integrand(t: float) -> float:
        x = lo + w * np.sin(t) ** 2
        return float(rmt.mp_density(x, c, s2)) * 2 * w * np.sin(t) * np.cos(t)

    mass, _ = integrate.quad(integrand, 0.0, np.pi / 2, limit=200)
    assert mass == pytest.approx(min(1.0, 1 / c), abs=1e-4)


@given(c=st.floats(0.05, 5.0), s2=st.floats(0.2, 5.0), z=st.floats(0.01, 100.0))
def test_mp_stieltjes__solves_its_quadratic_above_the_edge(c, s2, z):
    x = rmt.mp_edges(c, s2)[1] + z
    m = rmt.mp_stieltjes(x, c, s2)
    assert abs(c * s2 * x * m**2 + (x - s2 * (1 - c)) * m + 1) < 1e-8 * max(1, abs(x))
    assert m.real < 0  # the transform of a positive measure is negative to its right


def test_mp_stieltjes__matches_empirical_spectrum():
    rng = np.random.default_rng(0)
    n, d = 3000, 1500
    X = rng.standard_normal((n, d))
    ev = np.linalg.eigvalsh(X.T @ X / n)
    for z in (3.5, 1 + 1j, 0.5 + 0.2j):
        assert rmt.mp_stieltjes(z, d / n) == pytest.approx(np.mean(1 / (ev - z)), abs=5e-3)


def test_spike_forward__matches_simulated_sample_eigenvalue():
    # The spike eigenvalue fluctuates by O(n^{-1/2}) (std ≈ 0.06 here): average 4 draws.
    n, d, ell = 2000, 1000, 2.0
    c = d / n
    tops = []
    for seed in range(4):
        Z = np.random.default_rng(seed).standard_normal((n, d))
        Z[:, 0] *= np.sqrt(1 + ell)
        tops.append(np.linalg.eigvalsh(Z.T @ Z / n)[-1])
    assert np.mean(tops) == pytest.approx(float(rmt.spike_forward(ell, c)), abs=0.1)


@settings(deadline=None, max_examples=20)
@given(seed=st.integers(0, 10_000), s2=st.floats(0.3, 4.0))
def test_estimate_noise_variance__recovers_sigma2_with_spikes(seed, s2):
    rng = np.random.default_rng(seed)
    n, d = 600, 300
    Z = rng.standard_normal((n, d)) * np.sqrt(s2)
    Z[:, 0] *= 2.0  # spike ℓ = 3
    S = Z.T @ Z / n
    lam = np.linalg.eigvalsh(S)[::-1][:5]
    est = rmt.estimate_noise_variance(np.trace(S), lam, n, d)
    assert est == pytest.approx(s2, rel=0.02)


def test_estimate_noise_variance__raises_on_zero_trace():
    with pytest.raises(ValueError, match="zero total variance"):
        rmt.estimate_noise_variance(0.0, [0.0], 10, 5)


@given(c=aspect, s2=noise, lam=st.floats(0.0, 100.0))
def test_knockoff_strength__is_twice_the_inverse_map(c, s2, lam):
    t2 = rmt.knockoff_strength(lam, c, s2)
    assert t2 == pytest.approx(2 * s2 * float(rmt.spike_inverse(lam, c, s2)))
    assert t2 >= 2 * s2 * np.sqrt(c) * (1 - 1e-12)


def test_invariance_threshold__paper_default_and_explicit_scale():
    assert rmt.invariance_threshold(1000, 0.9) == pytest.approx((1 / 0.9) / np.sqrt(1000))
    assert rmt.invariance_threshold(1000, 2.0) == pytest.approx(1 / np.sqrt(1000))
    assert rmt.invariance_threshold(400, 0.5, 2.0, scale=3.0) == pytest.approx(3 * 2 / 20)
    with pytest.raises(ValueError, match="threshold scale must be > 0"):
        rmt.invariance_threshold(400, 0.5, scale=0.0)


@given(n=st.integers(1, 10**7), s2=noise)
def test_eigenvalue_tolerance__a_tenth_of_the_noise_scale_of_sampling_error(n, s2):
    tol = rmt.eigenvalue_tolerance(n, s2)
    assert tol == pytest.approx(0.1 * s2 / np.sqrt(n))
    # never looser than the knockoff's own tenth of its invariance radius, at any c
    for c in (0.01, 0.5, 1.0, 10.0):
        assert tol <= rmt.invariance_threshold(n, c, s2) / 10 * (1 + 1e-12)


@pytest.mark.parametrize("bad", [0.0, -1.0, np.inf, np.nan])
def test_rmt__rejects_bad_aspect_ratio(bad):
    with pytest.raises(ValueError, match="aspect ratio"):
        rmt.mp_edges(bad)


@given(c=aspect, mult=strength_above)
def test_eigenvector_alignment__in_unit_interval_and_zero_below(c, mult):
    a = rmt.eigenvector_alignment(mult * np.sqrt(c), c)
    assert 0 <= a <= 1
    assert rmt.eigenvector_alignment(0.5 * np.sqrt(c), c) == 0


@given(a=st.floats(-12.0, 12.0), b=st.floats(-12.0, 12.0))
def test_tracy_widom_sf__is_a_decreasing_probability(a, b):
    lo, hi = sorted((a, b))
    p_lo, p_hi = rmt.tracy_widom_sf([lo, hi])
    assert 0.0 <= p_hi <= p_lo <= 1.0


def test_tracy_widom_sf__does_not_understate_how_often_the_largest_bulk_eigenvalue_passes():
    # pure Gaussian noise, n = 400, d = 200: the share of largest eigenvalues more than s
    # Tracy-Widom units above sigma^2 (1 + sqrt(c))^2 is at most P(TW1 > s) (at finite n the
    # largest eigenvalue sits a little below the edge), so a p-value from it is conservative
    rng = np.random.default_rng(3)
    n, d, reps = 400, 200, 250
    edge = rmt.mp_edges(d / n, 1.0)[1]
    scale = rmt.tracy_widom_scale(n, d)
    units = np.empty(reps)
    for r in range(reps):
        X = rng.standard_normal((n, d))
        units[r] = (np.linalg.eigvalsh(X.T @ X / n)[-1] - edge) / scale
    for s in (-2.0, -1.0, 0.0, 1.0, 2.0):
        p = float(rmt.tracy_widom_sf(s))
        assert np.mean(units > s) <= p + 3 * np.sqrt(p * (1 - p) / reps)
    # and it is not vacuous: most of the mass is where the law puts it
    assert np.mean(units > -2.0) > 0.5 * float(rmt.tracy_widom_sf(-2.0))
    assert rmt.tracy_widom_sf(4.0) < 1e-3


@given(c=aspect, s2=noise, mult=strength_above)
def test_score_shrinkage__is_population_over_sample_eigenvalue_and_continuous_at_edge(c, s2, mult):
    ell = mult * np.sqrt(c)
    lam = float(rmt.spike_forward(ell, c, s2))
    rho = float(rmt.score_shrinkage(lam, c, s2))
    assert rho == pytest.approx(s2 * (1 + ell) / lam, rel=1e-9)
    a2 = float(rmt.eigenvector_alignment(ell, c))
    assert rho == pytest.approx(np.sqrt((1 + ell * a2) * s2 / lam), rel=1e-6)
    edge = rmt.mp_edges(c, s2)[1]
    at_edge = float(rmt.score_shrinkage(edge * (1 + 1e-9), c, s2))
    assert at_edge == pytest.approx(1 / (1 + np.sqrt(c)), rel=1e-3)
    assert float(rmt.score_shrinkage(edge, c, s2)) == pytest.approx(at_edge, rel=1e-3)


def test_score_shrinkage__predicts_held_out_over_fitted_score_scale():
    # n = 200 fitted and 400 new samples, d = 2000 (c = 10), one spike ℓ = 20: the new
    # samples' scores on the sample eigenvector spread ρ = 20 / 30 as much as the fitted.
    n, d, ell = 200, 2000, 20.0
    rng = np.random.default_rng(0)
    scale = np.ones(d)
    scale[0] = np.sqrt(1 + ell)
    Z, new = rng.standard_normal((n, d)) * scale, rng.standard_normal((400, d)) * scale
    lam, vecs = np.linalg.eigh(Z @ Z.T / n)
    u = Z.T @ vecs[:, -1]
    u /= np.linalg.norm(u)
    ratio = np.std(new @ u) / np.sqrt(lam[-1])
    rho = float(rmt.score_shrinkage(lam[-1], d / n))
    assert rho == pytest.approx(ell / (ell + d / n), rel=0.05)
    assert ratio == pytest.approx(rho, rel=0.08)
