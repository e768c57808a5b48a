import numpy as np
import pytest

from evaluation.stats import cluster_weights, ratio_ci
from evaluation.stats.bootstrap import (
    WeightStream,
    mean_ratio_ci,
    no_spread,
    percentile_interval,
    ratio_resamples,
    too_few_clusters,
    weight_chunks,
)


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


def _stream_chunks(stream: WeightStream, sizes: list[int]) -> list[list[np.ndarray]]:
    return [[chunk.copy() for chunk in stream.chunks(size)] for size in sizes]


def _plain_chunks(seed: int, sizes: list[int], n_resamples: int) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [list(weight_chunks(size, n_resamples, rng)) for size in sizes]


def _same(first: list[list[np.ndarray]], second: list[list[np.ndarray]]) -> bool:
    """Tell whether both hold the same sets of chunks, dtype and values."""
    if [len(chunks) for chunks in first] != [len(chunks) for chunks in second]:
        return False
    pairs = [pair for a, b in zip(first, second, strict=True) for pair in zip(a, b, strict=True)]
    return all(x.dtype == y.dtype and np.array_equal(x, y) for x, y in pairs)


@pytest.mark.parametrize("stop_after", [0, 1, 2, 3, 5, 100])
@pytest.mark.parametrize(
    "asked", [[300_000, 100_000, 400_000], [300_000, 7, 400_000, 300_000], [5, 300_000]]
)
def test_weights_drawn_ahead_are_those_drawn_when_asked(stop_after, asked):
    """Sets of 300,000 clusters come in chunks of 3 resamples (2**20 cells each): drawing
    ahead may stop inside a set, and the sets asked for may differ from those expected from
    the first, the second or no set on. The weights are those of weight_chunks in every case."""
    polls = iter(range(stop_after, -1, -1))
    stream = WeightStream(np.random.default_rng(21), n_resamples=8)
    stream.draw_ahead(
        [300_000, 100_000, 400_000], stop=lambda: next(polls, 0) == 0, max_cells=1 << 30
    )
    assert _same(_stream_chunks(stream, asked), _plain_chunks(21, asked, 8))


def test_weights_drawn_ahead_stop_at_the_cell_budget():
    stream = WeightStream(np.random.default_rng(4), n_resamples=10)
    stream.draw_ahead([300_000, 300_000], stop=lambda: False, max_cells=2 * 3 * 300_000)
    assert [len(drawn.chunks) for drawn in stream._ahead] == [2]
    asked = [300_000, 300_000]
    assert _same(_stream_chunks(stream, asked), _plain_chunks(4, asked, 10))


def test_weights_are_drawn_ahead_only_before_the_first_set():
    stream = WeightStream(np.random.default_rng(0), n_resamples=4)
    list(stream.chunks(3))
    with pytest.raises(ValueError, match="before the first set"):
        stream.draw_ahead([3], stop=lambda: False, max_cells=100)


def test_mean_ratio_ci_is_the_percentiles_of_the_mean_of_each_groups_column_ratios():
    """Columns 0 and 1 form group 0, column 2 group 1: each resample's statistic of group 0 is
    (r0 + r1) / 2 of that resample's column ratios (one column alone where the other is
    undefined), whatever the columns' sizes."""
    rng = np.random.default_rng(5)
    den = rng.integers(0, 6, size=(25, 3)).astype(float)
    num = np.floor(den * rng.random((25, 3)))
    members = np.array([0, 0, 1])
    lower, upper = mean_ratio_ci(
        num, den, members, np.random.default_rng(9), n_groups=2, n_resamples=300, level=0.9
    )
    ratios = ratio_resamples(num, den, cluster_weights(25, 300, np.random.default_rng(9)))
    first = np.nanmean(ratios[:, :2], axis=1)
    np.testing.assert_allclose(
        [lower[0], upper[0]], np.quantile(first, [0.05, 0.95]), rtol=0, atol=1e-12
    )
    np.testing.assert_allclose(
        [lower[1], upper[1]], np.quantile(ratios[:, 2], [0.05, 0.95]), rtol=0, atol=1e-12
    )


def test_mean_ratio_ci_weighs_a_small_column_as_much_as_a_large_one():
    # Column 0: 8 clusters all right; column 1: 2 clusters all wrong. The mean of the two
    # ratios is 1/2 in every resample drawing both (pooled it would be 8/10).
    num = np.array([[1.0, 0.0]] * 8 + [[0.0, 0.0]] * 2)
    den = np.array([[1.0, 0.0]] * 8 + [[0.0, 1.0]] * 2)
    lower, upper = mean_ratio_ci(
        num, den, np.array([0, 0]), np.random.default_rng(0), n_groups=1, n_resamples=500
    )
    assert lower[0] == pytest.approx(0.5) and upper[0] == pytest.approx(1.0)  # 1.0: no B drawn


def test_a_column_counted_on_one_cluster_has_no_interval_not_a_point():
    """Column 0 is counted on the first cluster only (1 of 2): every resample that draws it
    gives 1/2, so its percentile interval was [0.5, 0.5], a spread of nothing read as
    certainty. Column 1, counted on two clusters (0/1 and 1/1), keeps an interval."""
    num = np.array([[1, 0], [0, 1], [0, 0]])
    den = np.array([[2, 1], [0, 1], [0, 0]])
    lower, upper = ratio_ci(num, den, np.random.default_rng(0), n_resamples=200)
    assert np.isnan(lower[0]) and np.isnan(upper[0])
    assert (lower[1], upper[1]) == (0.0, 1.0)


def test_too_few_clusters_needs_two_taking_part_and_one_of_them_drawn():
    den = np.array([[1, 1, 0], [0, 2, 0], [1, 0, 0]])
    assert too_few_clusters(den).tolist() == [False, False, True]
    # Every cluster a stratum of its own: each keeps the weight 1, every resample the same.
    assert too_few_clusters(den, np.array(["a", "b", "c"])).tolist() == [True, True, True]
    # Column 0: cluster 0 is drawn 0-2 times within "a" while cluster 2 (alone in "b") keeps
    # its weight, so the column's mix changes; column 1 has two in "a".
    assert too_few_clusters(den, np.array(["a", "a", "b"])).tolist() == [False, False, True]
    # One cluster taking part, however often it is drawn, gives the same ratio.
    assert too_few_clusters(np.array([[1], [0]]), np.array(["a", "a"])).tolist() == [True]


def test_a_column_across_strata_keeps_its_interval():
    """One column whose clusters a1 (stratum A) and b1 (stratum B) take part, each stratum
    also holding a cluster with denominator 0: a1's and b1's weights vary independently, and
    the ratio takes 0, 1/3, 1/2, 2/3 and 1. too_few_clusters counted the clusters taking part
    per stratum (one and one) and dropped the interval."""
    num = np.array([[1.0], [0.0], [0.0], [0.0]])
    den = np.array([[1.0], [0.0], [1.0], [0.0]])
    lower, upper = mean_ratio_ci(
        num, den, np.array([0]), np.random.default_rng(0), n_groups=1,
        strata=np.array(["A", "A", "B", "B"]), n_resamples=500,
    )  # fmt: skip
    assert lower[0] < upper[0]


def test_mean_ratio_ci_of_one_item_per_stratum_has_no_interval():
    """Two datasets of one item each, drawn within their dataset: every resample is the
    same two items, so the mean (1/1 + 0/1) / 2 = 0.5 had the interval [0.5, 0.5]."""
    num, den = np.array([[1.0, 0.0], [0.0, 0.0]]), np.array([[1.0, 0.0], [0.0, 1.0]])
    lower, upper = mean_ratio_ci(
        num, den, np.array([0, 0]), np.random.default_rng(0), n_groups=1,
        strata=np.array(["x", "y"]), n_resamples=100,
    )  # fmt: skip
    assert np.isnan(lower[0]) and np.isnan(upper[0])
    # Without strata the two items are drawn together or apart: an interval of 0 to 1.
    lower, upper = mean_ratio_ci(
        num, den, np.array([0, 0]), np.random.default_rng(0), n_groups=1, n_resamples=100
    )
    assert (lower[0], upper[0]) == (0.0, 1.0)


def test_a_column_every_resample_gives_alike_has_no_interval_not_a_point():
    """Each instruction at the same ratio (1 of 2 YES; all 3 YES): every resample gives the
    estimate, and the interval was [x, x], no spread measured. Rounding of the sums (a
    relative 1e-12) is no spread either; a column that varies keeps its interval."""
    num = np.array([[1, 3, 1], [1, 3, 0], [1, 3, 2]])
    den = np.array([[2, 3, 2], [2, 3, 2], [2, 3, 2]])
    lower, upper = ratio_ci(num, den, np.random.default_rng(0), n_resamples=200)
    assert np.isnan(lower[:2]).all() and np.isnan(upper[:2]).all()
    assert lower[2] < 0.5 < upper[2]
    samples = np.array([[0.3, 0.3], [0.3 + 1e-12, 0.3], [0.3, 0.31]])
    assert no_spread(samples).tolist() == [True, False]
    lower, upper = percentile_interval(samples, 0.9)
    assert np.isnan(lower[0]) and not np.isnan(lower[1])
