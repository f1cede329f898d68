"""Properties of the verdict's model (mspca_dask.verdict): calibration, power, invariances.

The fast tests check the pieces on small seeded draws; the ``statistical`` ones measure the
group test's false-rejection rate on null families of every kind the twins must respect
(Gaussian, skewed, heavy-tailed, flat) and its power on displaced groups.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from mspca_dask.verdict import (
    VERDICTS,
    between_group_share,
    bulk_level,
    clean_components,
    decide,
    fit_groups,
    judge_pairs,
    knockoff_report,
    shift_statistics,
)
from mspca_dask.verdict.mixture import fit_mixture, select_mixture
from mspca_dask.verdict.pairs import chi2_deviate
from mspca_dask.verdict.twins import critical_bandwidth, unimodal_twins


def _shifted(n: int = 1000, k: int = 3, share: float = 0.1, shift: float = 6.0, seed: int = 0):
    rng = np.random.default_rng(seed)
    T = rng.standard_normal((n, k))
    members = np.zeros(n, dtype=bool)
    members[: int(share * n)] = True
    T[members, 0] += shift
    return T, members


# ---------------------------------------------------------------- the mixture


def test_mixture_recovers_two_separated_groups():
    T, members = _shifted()
    mix = select_mixture(T, 6)
    assert mix.n_groups == 2
    labels = mix.labels
    minority = labels[members]
    assert np.mean(minority == np.bincount(minority).argmax()) > 0.97


def test_mixture_prefers_one_group_on_a_gaussian_cloud():
    T = np.random.default_rng(3).standard_normal((2000, 4))
    assert select_mixture(T, 6).n_groups == 1


def test_pinned_rows_stay_in_group_zero():
    T, members = _shifted(seed=1)
    pinned = np.zeros(T.shape[0], dtype=bool)
    pinned[members] = True  # pin the shifted rows: they become group 0
    mix = fit_mixture(T, 2, pinned=pinned)
    assert np.all(mix.responsibilities[pinned, 0] == 1.0)


def test_tied_mixture_has_one_covariance():
    T, _ = _shifted(seed=2)
    mix = fit_mixture(T, 3, tied=True)
    assert np.allclose(mix.covariances[0], mix.covariances[1])
    assert mix.n_parameters < fit_mixture(T, 3).n_parameters


# ---------------------------------------------------------------- the twins


def test_twins_keep_mean_and_variance():
    rng = np.random.default_rng(4)
    T = np.column_stack([rng.exponential(size=3000), rng.uniform(size=3000)])
    twin = unimodal_twins(T, rng)
    assert np.allclose(twin.mean(axis=0), T.mean(axis=0), atol=0.06)
    assert np.allclose(twin.std(axis=0), T.std(axis=0), rtol=0.06)


def test_separated_groups_need_a_wide_critical_bandwidth():
    rng = np.random.default_rng(5)
    one = rng.standard_normal(2000)
    two = np.r_[rng.standard_normal(1600), 6 + rng.standard_normal(400)]
    assert critical_bandwidth(two) / two.std() > 3 * critical_bandwidth(one) / one.std()


def test_twins_keep_a_skewed_column_skewed():
    rng = np.random.default_rng(6)
    x = rng.exponential(size=(3000, 1))
    twin = unimodal_twins(x, rng)
    assert stats.skew(twin[:, 0]) > 0.6 * stats.skew(x[:, 0])


# ---------------------------------------------------------------- the group test


def test_group_test_finds_a_separated_group():
    T, members = _shifted(seed=7)
    g = fit_groups(T)
    assert g.found and g.p_value <= 0.05
    assert np.mean(g.labels[members] > 0) > 0.97
    assert np.mean(g.labels[~members] == 0) > 0.99


def test_group_test_is_invariant_to_row_order_and_scale():
    T, _ = _shifted(seed=8)
    g = fit_groups(T)
    perm = np.random.default_rng(0).permutation(T.shape[0])
    assert np.array_equal(fit_groups(T[perm]).labels, g.labels[perm])
    assert np.array_equal(fit_groups(T * [3.0, 0.01, 50.0]).labels, g.labels)


def test_group_test_draws_as_many_twins_as_its_level_needs():
    T, _ = _shifted(seed=9)
    assert fit_groups(T, level=0.05).n_twins == 19
    assert fit_groups(T, level=0.1).n_twins == 9


def test_group_zero_holds_the_reference():
    T, members = _shifted(seed=10, share=0.3)
    g = fit_groups(T, pinned=members)  # the shifted 30 % are the reference
    assert np.all(g.labels[members] == 0)
    assert np.mean(g.labels[~members] > 0) > 0.97


# ---------------------------------------------------------------- per pair


def test_chi2_deviate_is_the_normal_quantile_of_the_p_value():
    x = np.array([0.5, 3.0, 12.0])
    expected = stats.norm.isf(stats.chi2.sf(x, 3))
    assert np.allclose(chi2_deviate(x, 3), expected)
    assert np.isfinite(chi2_deviate(np.array([0.0, 1e6]), 2)).all()


def test_shift_z_is_standard_normal_without_a_shift():
    rng = np.random.default_rng(11)
    z = np.concatenate(
        [
            shift_statistics(rng.standard_normal((600, 4)), rng.integers(0, 3, 600))
            for _ in range(300)
        ]
    )
    assert abs(np.mean(z**2) - 1) < 0.1
    assert abs(np.mean(z)) < 0.08


def test_shift_z_is_nan_with_one_group():
    assert np.isnan(shift_statistics(np.ones((5, 2)), np.zeros(5, int))).all()


def test_between_group_share():
    T = np.array([[0.0, 1.0], [0.0, -1.0], [2.0, 1.0], [2.0, -1.0]])
    assert np.allclose(between_group_share(T, np.array([0, 0, 1, 1])), [1.0, 0.0])


def _pairs_data(seed: int = 12):
    """Pair 0 a pure shift, pair 1 a covariance spike of the inliers, pair 2 both, pair 3 bulk."""
    rng = np.random.default_rng(seed)
    n = 2000
    labels = (np.arange(n) < 200).astype(int)
    T = rng.standard_normal((n, 4))
    T[:, 1] *= 3.0
    T[:, 2] *= 3.0
    T[labels == 1, 0] += 8.0
    T[labels == 1, 2] += 8.0
    return T, labels


def test_the_four_verdicts():
    T, labels = _pairs_data()
    out = judge_pairs(T, np.array([True, True, True, False]), labels, bulk=2.0, level=0.05)
    assert out.verdicts.tolist() == ["mean shift", "covariance", "mixed", "bulk"]
    assert out.stable.tolist() == [False, True, True, False]
    assert set(out.verdicts) <= set(VERDICTS)


def test_a_spread_of_the_displaced_group_alone_is_undetermined():
    rng = np.random.default_rng(13)
    n = 2000
    labels = (np.arange(n) < 200).astype(int)
    T = rng.standard_normal((n, 2))
    T[labels == 1, 1] *= 6.0  # the displaced group spreads; the inliers do not
    T[labels == 1, 0] += 8.0
    out = judge_pairs(T, np.array([True, True]), labels, bulk=2.0, level=0.05)
    assert out.verdicts[1] == "undetermined"


def test_verdicts_do_not_depend_on_the_scale_of_the_scores():
    T, labels = _pairs_data(seed=14)
    cand = np.array([True, True, True, False])
    a = judge_pairs(T, cand, labels, bulk=2.0, level=0.05)
    b = judge_pairs(7.0 * T, cand, labels, bulk=2.0 * 49.0, level=0.05)
    assert a.verdicts.tolist() == b.verdicts.tolist()
    assert np.allclose(a.shift_z, b.shift_z)


def test_without_groups_every_candidate_is_covariance():
    T = np.random.default_rng(15).standard_normal((500, 3)) * [3.0, 2.0, 1.0]
    out = judge_pairs(T, np.array([True, True, False]), np.zeros(500, int), bulk=1.5, level=0.05)
    assert out.verdicts.tolist() == ["covariance", "covariance", "bulk"]


def test_bulk_level_is_the_largest_non_candidate_at_least_the_edge():
    lam = np.array([9.0, 5.0, 3.2, 3.1])
    assert bulk_level(lam, np.array([True, True, False, False]), 3.0) == 3.2
    assert bulk_level(lam, np.array([True, True, False, False]), 3.5) == 3.5
    assert bulk_level(lam, np.ones(4, bool), 3.0) == 3.0


def test_clean_components_remove_the_shift():
    """A spike of the inliers at 45 degrees to the shift comes back without it."""
    rng = np.random.default_rng(16)
    n = 3000
    labels = (np.arange(n) < 300).astype(int)
    spike = np.array([1.0, 1.0]) / np.sqrt(2)
    T = rng.standard_normal((n, 2)) + 2.5 * rng.standard_normal((n, 1)) * spike
    T[labels == 1, 0] += 10.0
    rotation, variances = clean_components(T, labels, 1)
    assert abs(rotation[:, 0] @ spike) > 0.98
    plain = np.linalg.eigh(np.cov(T, rowvar=False))[1][:, -1]
    assert abs(plain @ spike) < 0.9  # plain PCA is pulled towards the shift


def test_knockoff_report_matches_by_overlap():
    lam = np.array([5.0, 3.0])
    knock = np.array([[3.1, 5.5, 1.0]])
    overlaps = np.array([[[0.1, 0.95, 0.0], [0.9, 0.1, 0.0]]])
    rep = knockoff_report(lam, knock, overlaps)
    assert rep.matched.tolist() == [[1, 0]]
    assert np.allclose(rep.displacement, [0.5, 0.1])


def test_decide_runs_the_model_end_to_end():
    T, members = _shifted(seed=17, k=3)
    T[:, 1] *= 3.0
    v = decide(T, T.var(axis=0), np.array([True, True, False]), edge=1.5, seed=0)
    assert v.groups.found
    assert v.pairs.verdicts.tolist() == ["mean shift", "covariance", "bulk"]


# ---------------------------------------------------------------- calibration and power


def _null_columns(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """Two candidate score columns: a factor of the given kind plus noise, and a Gaussian."""
    factor = {
        "gaussian": rng.standard_normal(n),
        "skewed": (rng.chisquare(1, n) - 1) / np.sqrt(2),
        "heavy": rng.standard_t(3, n) / np.sqrt(3),
        "flat": (rng.uniform(size=n) - 0.5) * np.sqrt(12),
    }[kind]
    return np.column_stack([2.0 * factor + rng.standard_normal(n), rng.standard_normal(n)])


@pytest.mark.statistical
@pytest.mark.parametrize("kind", ["gaussian", "skewed", "heavy", "flat"])
def test_group_test_false_rejections_are_at_most_its_level(kind):
    rng = np.random.default_rng(100)
    reps = 60
    found = sum(fit_groups(_null_columns(kind, 1000, rng), seed=r).found for r in range(reps))
    # level 0.05: 3 expected; 8 or more has probability below 0.02 under the level
    assert found <= 7, f"{kind}: {found} of {reps} null fits found groups"


@pytest.mark.statistical
@pytest.mark.parametrize(("share", "shift"), [(0.05, 6.0), (0.2, 4.0), (0.01, 12.0)])
def test_group_test_finds_displaced_groups(share, shift):
    found = [
        fit_groups(_shifted(n=2000, share=share, shift=shift, seed=s)[0], seed=s).found
        for s in range(20)
    ]
    assert np.mean(found) >= 0.95
