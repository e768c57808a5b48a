import numpy as np
import pytest

from evaluation.stats import cluster_weights, ratio_ci
from evaluation.stats.bootstrap import percentile_interval, ratio_resamples


def test_cluster_weights_count_draws_of_each_cluster():
    weights = cluster_weights(8, 500, np.random.default_rng(1))
    assert weights.shape == (500, 8)
    assert weights.dtype == np.int64
    assert (weights >= 0).all()
    assert (weights.sum(axis=1) == 8).all()
    # Each cluster is drawn once per resample on average.
    assert weights.mean(axis=0) == pytest.approx(np.ones(8), abs=0.15)
    # Some resamples leave a cluster out, some draw one twice or more.
    assert (weights == 0).any() and (weights >= 2).any()


def test_cluster_weights_follow_the_seed():
    first = cluster_weights(20, 50, np.random.default_rng(9))
    assert np.array_equal(first, cluster_weights(20, 50, np.random.default_rng(9)))
    assert not np.array_equal(first, cluster_weights(20, 50, np.random.default_rng(10)))


def test_cluster_weights_with_no_clusters():
    assert cluster_weights(0, 4, np.random.default_rng(0)).shape == (4, 0)


def test_ratio_resamples_are_weighted_sums():
    num = np.array([[1.0, 0.0], [2.0, 0.0], [0.0, 0.0]])
    den = np.array([[2.0, 0.0], [2.0, 1.0], [1.0, 0.0]])
    weights = np.array([[1, 1, 1], [0, 0, 3], [2, 0, 1]])
    samples = ratio_resamples(num, den, weights)
    assert samples[:, 0].tolist() == pytest.approx([3 / 5, 0.0, 2 / 5])
    assert samples[0, 1] == 0.0
    assert np.isnan(samples[1, 1]) and np.isnan(samples[2, 1])


def test_ratio_ci_equals_percentiles_of_the_resamples():
    rng = np.random.default_rng(4)
    den = rng.integers(1, 6, size=(30, 3)).astype(float)
    num = np.floor(den * rng.random((30, 3)))
    lower, upper = ratio_ci(num, den, np.random.default_rng(8), n_resamples=200, level=0.9)
    samples = ratio_resamples(num, den, cluster_weights(30, 200, np.random.default_rng(8)))
    expected = np.quantile(samples, [0.05, 0.95], axis=0)
    np.testing.assert_allclose(lower, expected[0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(upper, expected[1], rtol=0, atol=1e-12)


def test_ratio_ci_is_reproducible_and_contains_the_estimate():
    rng = np.random.default_rng(12)
    den = rng.integers(1, 10, size=(200, 4))
    num = rng.binomial(den, [0.2, 0.5, 0.7, 0.9])
    first = ratio_ci(num, den, np.random.default_rng(3))
    second = ratio_ci(num, den, np.random.default_rng(3))
    assert np.array_equal(first[0], second[0]) and np.array_equal(first[1], second[1])
    estimate = num.sum(axis=0) / den.sum(axis=0)
    assert (first[0] < estimate).all() and (estimate < first[1]).all()


def test_ratio_ci_resamples_instructions_not_items():
    # 40 instructions of 50 questions: 20 answered all YES, 20 all NO. All of the variation is
    # between instructions, so the CI is that of a share among 40 instructions
    # (sd = sqrt(.25 / 40) ≈ .079, 95% width ≈ .31), not among 2000 items (width ≈ .044).
    num = np.array([[50.0]] * 20 + [[0.0]] * 20)
    den = np.full((40, 1), 50.0)
    lower, upper = ratio_ci(num, den, np.random.default_rng(0), n_resamples=2000)
    assert lower[0] < 0.5 < upper[0]
    assert 0.25 < upper[0] - lower[0] < 0.37


def test_ratio_ci_is_nan_where_nothing_is_counted():
    num = np.array([[1, 0], [2, 0], [0, 0]])
    den = np.array([[2, 0], [3, 0], [1, 0]])
    lower, upper = ratio_ci(num, den, np.random.default_rng(0), n_resamples=100)
    assert 0 <= lower[0] <= upper[0] <= 1
    assert np.isnan(lower[1]) and np.isnan(upper[1])


def test_ratio_ci_of_one_column_returns_scalars():
    lower, upper = ratio_ci(np.array([1, 2, 3]), np.array([2, 4, 4]), np.random.default_rng(0))
    assert lower.shape == upper.shape == ()
    assert 0.5 <= lower <= upper <= 0.75


def test_ratio_ci_handles_many_resamples_in_chunks():
    # 10,000 clusters x 300 resamples is several chunks of weights; the result is still valid.
    rng = np.random.default_rng(6)
    den = rng.integers(1, 5, size=(10_000, 2))
    num = rng.binomial(den, 0.3)
    lower, upper = ratio_ci(num, den, np.random.default_rng(1), n_resamples=300)
    estimate = num.sum(axis=0) / den.sum(axis=0)
    assert (lower < estimate).all() and (estimate < upper).all()
    assert (upper - lower < 0.03).all()


def test_percentile_interval_needs_half_of_the_resamples_defined():
    samples = np.array([[0.1, 0.1], [0.2, np.nan], [np.nan, np.nan], [0.4, np.nan]])
    lower, upper = percentile_interval(samples, 0.5)
    assert lower[0] == pytest.approx(np.quantile([0.1, 0.2, 0.4], 0.25))
    assert upper[0] == pytest.approx(np.quantile([0.1, 0.2, 0.4], 0.75))
    assert np.isnan(lower[1]) and np.isnan(upper[1])
    exactly_half = np.array([[0.1], [np.nan], [0.3], [np.nan]])
    assert not np.isnan(percentile_interval(exactly_half, 0.9)[0][0])


def test_level_outside_0_1_is_refused():
    with pytest.raises(ValueError, match="level"):
        ratio_ci(np.ones((3, 1)), np.ones((3, 1)), np.random.default_rng(0), level=95)
