"""Robust inlier weights in score space (mspca_dask.location)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.covariance import MinCovDet

from mspca_dask.location import MCD_MAX_SAMPLES, robust_inlier_weights


def shifted_scores(n: int, k: int = 2, frac: float = 0.1, shift: float = 8.0, seed: int = 0):
    rng = np.random.default_rng(seed)
    T = rng.standard_normal((n, k))
    m = int(frac * n)
    T[:m, 0] += shift
    return T, m


@pytest.mark.statistical
@pytest.mark.parametrize("n", [300, 3 * MCD_MAX_SAMPLES])
def test_robust_inlier_weights__drop_the_shifted_cluster_keep_the_inliers(n):
    T, m = shifted_scores(n)
    w = robust_inlier_weights(T)
    assert set(np.unique(w)) <= {0.0, 1.0}
    assert w[:m].sum() == 0  # every shifted sample is out
    assert 0.95 < w[m:].mean() < 0.995  # about the 97.5 % chi-square quantile of the inliers


@pytest.mark.statistical
def test_robust_inlier_weights__large_n_fits_the_mcd_to_a_seeded_subsample(monkeypatch):
    seen: list[int] = []
    fit = MinCovDet.fit

    def recording_fit(self, X, y=None):
        seen.append(len(X))
        return fit(self, X, y)

    monkeypatch.setattr(MinCovDet, "fit", recording_fit)
    T, m = shifted_scores(5 * MCD_MAX_SAMPLES, k=3, seed=1)
    a = robust_inlier_weights(T)
    b = robust_inlier_weights(T)
    assert seen == [MCD_MAX_SAMPLES, MCD_MAX_SAMPLES]
    np.testing.assert_array_equal(a, b)  # reproducible
    assert a.shape == (len(T),) and a[:m].sum() == 0
    # the subsampled fit agrees with the full fit on nearly every sample
    monkeypatch.setattr("mspca_dask.location.MCD_MAX_SAMPLES", len(T))
    full = robust_inlier_weights(T)
    assert np.mean(a != full) < 0.01


def test_robust_inlier_weights__never_keep_fewer_than_half():
    rng = np.random.default_rng(3)
    T = rng.standard_normal((200, 2)) * np.r_[np.ones(100), 50 * np.ones(100)][:, None]
    w = robust_inlier_weights(T, quantile=0.5)
    assert w.sum() >= 100


def test_robust_inlier_weights__too_few_samples_are_all_inliers():
    np.testing.assert_array_equal(robust_inlier_weights(np.ones((3, 2))), np.ones(3))


# ------------------------------------------------------------------ per-candidate location
from mspca_dask.location import candidate_location, density_groups, gaussian_mixture  # noqa: E402


@pytest.mark.parametrize("seed", range(5))
def test_density_groups__never_split_gaussian_heavy_tailed_or_skewed_samples(seed):
    rng = np.random.default_rng(seed)
    for t in (
        rng.standard_normal(1000),
        rng.standard_t(5, 1000),
        rng.gamma(4.0, size=1000),
        rng.standard_normal(4000),
    ):
        assert density_groups(t) is None


def test_density_groups__cut_between_separated_groups():
    rng = np.random.default_rng(0)
    t = np.r_[rng.standard_normal(950), 8 + rng.standard_normal(50)]
    cuts = density_groups(t)
    assert cuts is not None and len(cuts) == 1 and 2 < cuts[0] < 7


def test_candidate_location__offset_is_the_main_groups_mean_up_to_45_percent():
    rng = np.random.default_rng(1)
    z = rng.standard_normal((2000, 2))
    z[:900, 0] += 3.0  # 45 % displaced by 3 sd: overlapping groups, no density gap needed
    T = z - z.mean(axis=0)
    loc = candidate_location(T)
    inlier_mean = T[900:, 0].mean()
    assert loc.methods[0] in ("mixture", "modes")
    assert abs(loc.offsets[0] - inlier_mean) < 0.15
    # along the other direction: the mean of the samples outside the group (near 0 here)
    assert abs(loc.offsets[1]) < 0.15 and loc.methods[1] == "inliers"
    assert loc.groups.shape == (2000, 1) and loc.groups[:900, 0].mean() > 0.8


def test_candidate_location__a_direction_carrying_clusters_found_elsewhere_gets_no_own_group():
    # two equal clusters far out along direction 0 are displaced by 0.7 sd along direction 1
    # (a covariance spike mixed with the mean shift at finite n): tested on all samples,
    # direction 1 fitted a mixture of its own that cut its scores; peeled, it is unimodal
    rng = np.random.default_rng(6)
    n = 2000
    T = rng.standard_normal((n, 2)) * [1.0, 2.2]
    T[:200] += [8.0, -1.5]
    T[200:400] += [-8.0, -1.5]
    T -= T.mean(axis=0)
    loc = candidate_location(T)
    assert loc.methods[1] == "inliers"
    assert loc.groups.shape[1] == 2
    truth = np.zeros((n, 2), dtype=bool)
    truth[:200, 0] = truth[200:400, 1] = True
    G = loc.groups > 0
    # each group is one cluster, not a cut along direction 1
    assert sorted(int(np.max(truth[G[:, g]].sum(axis=0))) for g in range(2)) == [200, 200]
    assert abs(loc.offsets[1] - T[400:, 1].mean()) < 1e-12


@pytest.mark.statistical
def test_candidate_location__two_clusters_merged_along_one_direction_are_split_along_another():
    # clusters 1 and 2 coincide along direction 0 (where the groups are found) and sit
    # 12 units apart along direction 1
    rng = np.random.default_rng(7)
    n = 2000
    T = rng.standard_normal((n, 3)) * 1.5
    T[:100] += [-7.0, -6.0, 0.0]
    T[100:200] += [-7.0, 6.0, 0.0]
    T[200:300] += [6.0, 0.0, 5.0]
    T -= T.mean(axis=0)
    loc = candidate_location(T)
    G = loc.groups > 0
    label = np.repeat([1, 2, 3, 0], [100, 100, 100, 1700])
    counts = np.array([np.bincount(label[G[:, g]], minlength=4) for g in range(G.shape[1])])
    assert G.shape[1] == 3
    assert np.all(counts.max(axis=1) >= 0.8 * counts.sum(axis=1))  # one cluster per group
    majority = counts.argmax(axis=1)
    assert sorted(majority.tolist()) == [1, 2, 3]  # clusters 1 and 2 in different groups


@pytest.mark.statistical
def test_candidate_location__unimodal_skewed_scores_keep_the_sample_mean():
    # a skewed covariance PC (genotype-like) must not drag the location: Johnson SU fits it
    rng = np.random.default_rng(2)
    T = np.column_stack([rng.gamma(2.0, size=3000), rng.standard_t(5, 3000)])
    loc = candidate_location(T - T.mean(axis=0))
    np.testing.assert_array_equal(loc.offsets, 0.0)
    assert loc.groups.shape == (3000, 0)


def test_candidate_location__equal_clusters_on_both_sides_give_two_groups():
    rng = np.random.default_rng(3)
    t = 1.4 * rng.standard_normal(1000)
    t[:100] += 5.0
    t[100:200] -= 4.5
    loc = candidate_location((t - t.mean())[:, None])
    assert loc.groups.shape[1] == 2
    assert abs(loc.offsets[0] - (t[200:] - t.mean()).mean()) < 0.2


@pytest.mark.statistical
def test_candidate_location__large_n_fits_a_capped_subsample_and_is_reproducible():
    # paper scaling at large n: per sample the cluster overlaps the inliers (2.5 sd), in
    # aggregate it is obvious; the fits see TEST_MAX_SAMPLES rows
    rng = np.random.default_rng(4)
    z = rng.standard_normal((60_000, 1))
    z[:6000, 0] += 2.5
    T = z - z.mean(axis=0)
    a, b = candidate_location(T), candidate_location(T)
    np.testing.assert_array_equal(a.offsets, b.offsets)
    assert a.methods[0] == "mixture"
    assert abs(a.offsets[0] - T[6000:, 0].mean()) < 0.05


@pytest.mark.statistical
def test_candidate_location__large_n_decides_on_every_score_a_cluster_the_subsample_misses():
    # paper scaling at n = 100 000 puts a 10 % cluster 1.7 noise sd from the inliers: on the
    # 4 000-score test subsample no mixture wins, on every score it wins by a wide margin
    from mspca_dask.location import BIC_MARGIN, TEST_MAX_SAMPLES, mixture_evidence

    n = 50_000
    t = np.random.default_rng(3).standard_normal(n)
    t[: n // 10] += 1.7
    t -= t.mean()
    sub = t[np.random.default_rng(0).choice(n, TEST_MAX_SAMPLES, replace=False)]
    assert mixture_evidence(sub)[0] < BIC_MARGIN  # the subsample the location step draws
    loc = candidate_location(t[:, None])
    assert loc.methods[0] == "mixture" and loc.evidence[0] > 10 * BIC_MARGIN
    assert abs(loc.offsets[0] - t[n // 10 :].mean()) < 0.01
    # hard labels of overlapping components: the cluster's upper tail, few inliers
    assert loc.groups[: n // 10, 0].mean() > 10 * loc.groups[n // 10 :, 0].mean()


@pytest.mark.statistical
def test_candidate_location__large_n_gaussian_or_skewed_scores_get_no_group():
    rng = np.random.default_rng(0)
    n = 50_000
    T = np.column_stack([rng.standard_normal(n), rng.gamma(4.0, size=n), rng.standard_t(6, n)])
    loc = candidate_location(T - T.mean(axis=0))
    assert loc.groups.shape == (n, 0)
    np.testing.assert_array_equal(loc.offsets, 0.0)


def test_johnson_su_refit__binned_all_scores_reach_the_full_maximum_likelihood():
    from scipy import stats

    from mspca_dask.location import REFIT_BINS, _johnson_su_fit, _johnson_su_refit

    x = stats.johnsonsu.rvs(-1.0, 2.0, loc=0.5, scale=1.5, size=20_000, random_state=4)
    _, start = _johnson_su_fit(x[:1000])
    counts, edges = np.histogram(x, bins=REFIT_BINS)
    centres = 0.5 * (edges[:-1] + edges[1:])
    ll_refit = _johnson_su_refit(centres[counts > 0], counts[counts > 0], start)
    ll_full, _ = _johnson_su_fit(x)  # scipy's fit on every score
    assert ll_refit > float(np.sum(stats.johnsonsu.logpdf(x, *start)))
    assert abs(ll_refit - ll_full) < 1.0


def test_mixture_em__counts_weigh_values_like_repeats():
    from mspca_dask.location import _mixture_em

    rng = np.random.default_rng(6)
    values = np.r_[rng.standard_normal(40), 3 + rng.standard_normal(10)]
    counts = rng.integers(1, 5, values.size)
    start = (np.array([0.0, 2.0]), np.array([0.5, 0.5]), 1.0)
    weighted = _mixture_em(values, *start, counts=counts)
    repeated = _mixture_em(np.repeat(values, counts), *start)
    np.testing.assert_allclose(weighted[0], repeated[0], rtol=1e-10)
    for a, b in zip(weighted[1:], repeated[1:], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-8)


def test_gaussian_mixture__recovers_three_components():
    rng = np.random.default_rng(5)
    z = rng.standard_normal(1500)
    t = np.r_[z[:1200], 6 + z[1200:1350], -6 + z[1350:]]
    _, means, w, var = gaussian_mixture(t, 3)
    order = np.argsort(means)
    np.testing.assert_allclose(means[order], [-6, 0, 6], atol=0.3)
    np.testing.assert_allclose(w[order], [0.1, 0.8, 0.1], atol=0.03)
    assert abs(var - 1) < 0.15


def test_residual_groups__finds_a_cluster_left_among_the_inliers_and_keeps_the_old_groups():
    from mspca_dask.location import residual_groups

    rng = np.random.default_rng(3)
    T = rng.standard_normal((1000, 2))
    T[:60, 1] -= 9  # a group found before
    T[60:160, 0] += 5.5  # a 10 % cluster the location step missed: 4 sd along column 0
    old = np.zeros((1000, 1))
    old[:60, 0] = 1
    G = residual_groups(T, old)
    assert G.shape[1] == 2
    np.testing.assert_array_equal(G[:, 0], old[:, 0])
    assert G[60:160, 1].mean() > 0.95 and G[160:, 1].sum() < 5 and G[:60, 1].sum() == 0


def test_split_groups__splits_a_group_holding_clusters_on_both_sides_and_keeps_one_whole():
    from mspca_dask.location import split_groups

    rng = np.random.default_rng(4)
    T = rng.standard_normal((1000, 1))
    T[850:920, 0] += 6.0  # one group holds two clusters, 6 sd either side of the inliers
    T[920:, 0] -= 6.0
    old = np.zeros((1000, 2))
    old[850:, 0] = 1
    old[700:760, 1] = 1  # a group that is one Gaussian along this column
    G = split_groups(T, old)
    assert G.shape[1] == 3
    np.testing.assert_array_equal(G[:, :2], old)
    new = G[:, 2] > 0
    assert new[850:].sum() in (70, 80) and not new[:850].any()  # one cluster, exactly
    # nothing within a group of fewer than 20 samples is tested
    np.testing.assert_array_equal(
        split_groups(T, old[:, :1] * (np.arange(1000) >= 985)[:, None]),
        old[:, :1] * (np.arange(1000) >= 985)[:, None],
    )


@pytest.mark.parametrize("seed", range(5))
def test_residual_groups__covariance_spike_inlier_scores_get_no_group(seed):
    from mspca_dask.location import residual_groups

    rng = np.random.default_rng(seed)
    T = 2.0 * rng.standard_normal((1000, 1))  # a covariance spike: one wide Gaussian
    T[:80, 0] += 12  # with a group displaced along it, already found
    old = np.zeros((1000, 1))
    old[:80, 0] = 1
    np.testing.assert_array_equal(residual_groups(T, old), old)


def _skewed_spike_scores(seed: int, n: int, d: int, k: int, spike="exponential", **kw):
    """Centred scores on the top ``k`` sample PCs of a mixture with skewed covariance spikes,
    the model, and each sample's factor on the first spike in units of its sd."""
    from mspca_dask.testing import make_spiked_mixture

    model = make_spiked_mixture(n, d, spike_distribution=spike, random_state=seed, **kw)
    X = model.to_numpy()
    X -= X.mean(axis=0)
    _, _, vt = np.linalg.svd(X, full_matrices=False)
    factor = model.clean_rows(0, n) @ model.covariance_directions[:, 0]
    return X @ vt[:k].T, model, factor / factor.std()


def test_candidate_location__a_skewed_pcs_tail_is_not_a_group():
    # accuracy.py S3 trial 18: a three-component fit along the 10 % cluster's direction took
    # the cluster and 48 inliers from the skewed spike's tail (factor 2.6 sd on average)
    T, model, factor = _skewed_spike_scores(
        5018,
        1200,
        600,
        3,
        covariance_spikes=(3 * np.sqrt(0.5),),
        mean_shift_weights=(0.10, 0.06),
        noise="student-t",
        df=6,
    )
    loc = candidate_location(T)
    G = loc.groups > 0
    labels = np.asarray(model.membership)
    for g in G.T:
        assert factor[g].mean() < 1.0  # no group is the tail
        assert np.bincount(labels[g], minlength=3)[1:].max() >= 0.8 * g.sum()  # each a cluster
    found = {int(np.argmax(np.bincount(labels[g], minlength=3))) for g in G.T}
    assert found == {1, 2}


def _chi2_spikes_two_clusters_scores(seed: int):
    """Scores on the top 4 sample PCs of accuracy.py S8 (clusters 8/5 % among two chi-square(1)
    spikes, d = 800, n = 1600, t6), and the model."""
    T, model, _ = _skewed_spike_scores(
        seed,
        1600,
        800,
        4,
        spike="chi2",
        covariance_spikes=(3 * np.sqrt(0.5), 2 * np.sqrt(0.5)),
        mean_shift_weights=(0.08, 0.05),
        noise="student-t",
        df=6,
    )
    return T, model


@pytest.mark.statistical
def test_candidate_location__a_density_mode_in_a_skewed_tail_is_not_a_group():
    # accuracy.py S8 trial 1: chi-square(1) spikes; the kernel density along the top spike
    # (bandwidth from its narrow interquartile range) showed a mode of 40 inliers in its tail
    T, model = _chi2_spikes_two_clusters_scores(5001)
    G = candidate_location(T).groups > 0
    labels = np.asarray(model.membership)
    for g in G.T:
        assert np.bincount(labels[g], minlength=3)[1:].max() >= 0.8 * g.sum()  # each a cluster
    assert {int(np.argmax(np.bincount(labels[g], minlength=3))) for g in G.T} == {1, 2}


@pytest.mark.statistical
def test_candidate_location__groups_take_no_inliers_from_a_skewed_pcs_tail():
    # accuracy.py S8 trial 8: the 8 % cluster's group, cut along a direction that carries a
    # chi-square(1) spike, held 50 inliers from the spike's tail (then 46 % of the spike's
    # variance read as between the groups); reassigned in all the score columns
    T, model = _chi2_spikes_two_clusters_scores(5008)
    G = candidate_location(T).groups > 0
    labels = np.asarray(model.membership)
    assert G.shape[1] == 2
    for g in G.T:
        counts = np.bincount(labels[g], minlength=3)
        assert counts[0] <= 3  # inliers in the group
        assert counts[1:].max() >= 0.95 * np.bincount(labels)[np.argmax(counts)]


@pytest.mark.statistical
def test_candidate_location__a_chance_dip_in_a_skewed_tail_is_not_a_group():
    # accuracy.py S6 trial 32 (no contamination, two chi-square(1) spikes): the kernel
    # density along the second spike dipped in its sparse tail, and the 41 samples beyond
    # the dip passed as a separated group (found again along their own displacement, the
    # same direction); the spike was flagged with 31.9 % of its variance between the groups.
    # A Johnson SU of the scores puts 25 samples where the dip has 19.
    T, _, _ = _skewed_spike_scores(
        5032,
        1400,
        700,
        2,
        spike="chi2",
        covariance_spikes=(3 * np.sqrt(0.5), 2 * np.sqrt(0.5)),
        mean_shift_weights=(),
    )
    assert candidate_location(T).groups.shape[1] == 0


def test_chance_gaps__a_gap_before_a_separated_cluster_is_no_chance():
    from mspca_dask.location import _chance_gaps, density_groups

    rng = np.random.default_rng(3)
    t = np.r_[rng.standard_normal(1400), 7 + rng.standard_normal(45)]  # a 3 % cluster
    cuts = density_groups(t)
    assert cuts is not None and not _chance_gaps(t, cuts).any()


@pytest.mark.statistical
@pytest.mark.parametrize("seed", range(3))
def test_candidate_location__a_small_separated_cluster_stays_a_group(seed):
    # a density group is confirmed whatever its weight (a 3 % cluster is below the mixture
    # rule's smallest component, MIN_GROUP_WEIGHT)
    rng = np.random.default_rng(seed)
    T = rng.standard_normal((1500, 3)) * [2.0, 1.5, 1.0]
    T[:45] += [0.0, 12.0, 6.0]
    loc = candidate_location(T - T.mean(axis=0))
    G = loc.groups > 0
    assert G.shape[1] == 1
    assert G[:45, 0].sum() >= 43 and G[45:, 0].sum() <= 2


@pytest.mark.statistical
def test_candidate_location__skewed_spikes_alone_get_no_group_from_a_projection():
    # accuracy.py S2 trial 34: no cluster; a kurtosis-minimising projection of two skewed
    # spikes fitted a mixture (evidence 4.9) whose components were the spikes' tails
    T, _, _ = _skewed_spike_scores(
        5034,
        1000,
        900,
        2,
        covariance_spikes=(3 * np.sqrt(0.9), 2 * np.sqrt(0.9)),
        mean_shift_weights=(),
    )
    loc = candidate_location(T)
    assert loc.groups.shape == (1000, 0)
    np.testing.assert_array_equal(loc.offsets, 0.0)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_ex_gaussian_fit__recovers_the_parameters_and_either_skew(sign):
    from scipy import stats

    from mspca_dask.location import REFIT_BINS, _ex_gaussian_fit

    rng = np.random.default_rng(3)
    x = sign * (1.0 + 0.5 * rng.standard_normal(20_000) + rng.exponential(1.5, 20_000))
    ll, params = _ex_gaussian_fit(x)
    assert params is not None
    got_sign, mu, log_sigma, log_tau = params
    assert got_sign == sign
    assert mu == pytest.approx(1.0, abs=0.05)
    assert np.exp(log_sigma) == pytest.approx(0.5, rel=0.1)
    assert np.exp(log_tau) == pytest.approx(1.5, rel=0.05)
    truth = float(np.sum(stats.exponnorm.logpdf(sign * x, 3.0, 1.0, 0.5)))
    assert ll >= truth - 1e-6  # the maximum is at least the truth's likelihood
    # carried on to a histogram of the scores from the subsample's fit
    counts, edges = np.histogram(x, bins=REFIT_BINS)
    centres = 0.5 * (edges[:-1] + edges[1:])
    ll_binned, _ = _ex_gaussian_fit(centres[counts > 0], counts[counts > 0], start=params)
    assert abs(ll_binned - ll) < 5.0


@pytest.mark.parametrize("seed", range(4))
def test_refine_memberships__a_group_whose_members_join_another_is_merged_into_it(seed: int):
    # one cluster found as two groups, one of them with a skewed column's tail: reassigned
    # apart, that group gave its cluster members to the other and kept the tail (a group of
    # inliers); merged, the cluster is one group and the tail stays with the inliers
    import mspca_dask.location as location

    rng = np.random.default_rng(seed)
    n = 1000
    T = np.c_[1.5 * rng.chisquare(1, n), rng.standard_normal(n)]
    T[:60, 0] = rng.standard_normal(60)
    T[:60, 1] += 5.0
    part = np.zeros(n, dtype=bool)
    part[:30] = True
    part[60 + np.argsort(T[60:, 0])[-20:]] = True  # and 20 inliers from the tail
    rest = np.zeros(n, dtype=bool)
    rest[30:60] = True
    (cluster,) = location._refine_memberships(T, [part, rest])
    assert cluster[:60].sum() >= 56
    assert cluster[60:].sum() <= 3


def test_refine_memberships__a_group_overlapping_the_inliers_is_left_as_found(monkeypatch):
    # paper scaling at n = 100 000: a 10 % cluster 1.7 noise sd away; hard labels shrink its
    # group round by round to nothing (the fit then had no group and failed)
    import mspca_dask.location as location

    rng = np.random.default_rng(0)
    T = rng.standard_normal((20_000, 2))
    T[:2000, 0] += 1.7
    group = T[:, 0] > 2.2  # the side of the cut a 1-D mixture fit gives it
    kept = location._refine_memberships(T, [group])
    assert len(kept) == 1
    np.testing.assert_array_equal(kept[0], group)
    monkeypatch.setattr(location, "REFINE_KEEP", 0.0)
    assert location._refine_memberships(T, [group])[0].sum() < 0.5 * group.sum()


def _cluster_found_in_two_parts_and_a_missed_cluster(seed: int):
    """Scores with cluster A (samples 0-59, +5 along column 1) found earlier as two groups,
    one holding 20 inliers from column 0's skewed tail, and cluster B (samples 100-179, +8
    along column 2) still among the inliers."""
    rng = np.random.default_rng(seed)
    n = 1000
    T = np.c_[1.5 * rng.chisquare(1, n), rng.standard_normal((n, 2))]
    T[:60, 0] = rng.standard_normal(60)
    T[:60, 1] += 5.0
    T[100:180, 2] += 8.0
    part = np.zeros(n, dtype=bool)
    part[:30] = True
    part[60 + np.argsort(T[60:, 0])[-20:]] = True
    rest = np.zeros(n, dtype=bool)
    rest[30:60] = True
    return T, np.c_[part, rest].astype(float)


@pytest.mark.parametrize("seed", range(3))
def test_groups_outside__a_new_group_is_told_apart_when_earlier_groups_merge(seed: int):
    # reassigned, A's two parts merge into one group while B is found: as many columns as
    # before, one of them new
    from mspca_dask.location import groups_outside, residual_groups

    T, earlier = _cluster_found_in_two_parts_and_a_missed_cluster(seed)
    G = residual_groups(T[:, [2]], earlier, refine_on=T)
    assert G.shape[1] == earlier.shape[1]
    assert groups_outside(G, earlier).tolist() == [False, True]
    assert G[:60, 0].sum() >= 56 and G[100:180, 1].all()


def test_groups_outside__earlier_groups_refined_and_new_ones_appended():
    from mspca_dask.location import groups_outside

    before = np.zeros((10, 2))
    before[:3, 0] = before[3:6, 1] = 1
    after = np.zeros((10, 3))
    after[:4, 0] = 1  # grew by one former inlier
    after[4:6, 1] = 1  # lost one member
    after[6:9, 2] = 1  # new
    assert groups_outside(after, before).tolist() == [False, False, True]
    assert groups_outside(before, np.zeros((10, 0))).tolist() == [True, True]
    assert groups_outside(np.zeros((10, 0)), before).tolist() == []


@pytest.mark.parametrize("seed", range(2))
def test_missed_clusters__a_cluster_found_while_two_earlier_groups_merge_is_counted(seed: int):
    # the search for missed clusters stopped when a round returned no more columns than it
    # was given, and a round merges groups as it reassigns them: cluster B, found while the
    # two parts of cluster A merged, was dropped and the pair carrying it read z 0.5
    from mspca_dask._engine.run import _missed_clusters

    T, earlier = _cluster_found_in_two_parts_and_a_missed_cluster(seed)
    T = T - T.mean(axis=0)
    groups, _, shift_z = _missed_clusters(
        T,
        earlier,
        np.ones(3, dtype=bool),
        np.array([1.0, 20.0, 0.5]),
        3.29,
        T.var(axis=0),
        edge=1.5,
        margin=0.1,
        random_state=0,
    )
    assert any(
        groups[100:180, j].all() and groups[:, j].sum() <= 82 for j in range(groups.shape[1])
    )
    assert shift_z[2] > 30
