import math

import numpy as np
import pytest

from evaluation.stats.revision import (
    agreement,
    binary_metric_intervals,
    binary_metrics,
    majority_predictions,
    random_predictions,
    rating_shares,
    split_indices,
    split_min_items,
    split_sizes,
)


def test_rating_shares_by_hand():
    # 3 good, 1 neutral, 2 bad of 6
    assert rating_shares([0, 0, 2, 1, 0, 2]) == pytest.approx((0.5, 1 / 6, 1 / 3))
    assert all(math.isnan(x) for x in rating_shares([]))


def test_binary_metrics_by_hand():
    truth = [True, True, True, False, False, False, False, True]
    pred = [True, True, False, True, False, False, True, False]
    # TP 2, FP 2, FN 2, TN 2: accuracy 4/8, precision 2/4, recall 2/4, F1 0.5, 4/8 predicted good
    assert binary_metrics(truth, pred) == pytest.approx(
        {
            "accuracy": 0.5,
            "precision": 0.5,
            "recall": 0.5,
            "f1": 0.5,
            "predicted_good": 0.5,
            "predicted_bad": 0.5,
        }
    )
    truth = [True, False, False, True, True]
    pred = [True, True, False, False, True]
    # TP 2, FP 1, FN 1, TN 1: acc 3/5, P 2/3, R 2/3, F1 2/3, 3/5 predicted good
    m = binary_metrics(truth, pred)
    assert m["accuracy"] == pytest.approx(0.6)
    assert m["precision"] == pytest.approx(2 / 3) and m["recall"] == pytest.approx(2 / 3)
    assert m["f1"] == pytest.approx(2 / 3) and m["predicted_good"] == pytest.approx(0.6)


def test_a_judge_that_never_says_good_has_undefined_precision_not_zero():
    """Precision is TP / (TP + FP) = 0/0 for a judge predicting no good turn: it was 0.0, which
    a researcher copying Table 5's Majority row would publish as measured."""
    m = binary_metrics([True, False, False], [False, False, False])
    # TP 0, FP 0, FN 1, TN 2: accuracy 2/3, precision 0/0, recall 0/1, F1 0/(0+0+1) = 0
    assert m["accuracy"] == pytest.approx(2 / 3)
    assert (m["recall"], m["predicted_bad"], m["f1"]) == (0.0, 1.0, 0.0)
    assert math.isnan(m["precision"])
    # No good item: recall 0/0 undefined; precision 0/1 and F1 0/(0+1+0) are measured zeros.
    m = binary_metrics([False, False], [True, False])
    assert (m["precision"], m["f1"]) == (0.0, 0.0) and math.isnan(m["recall"])
    # No good item and none predicted good: precision, recall and F1 all 0/0.
    m = binary_metrics([False, False], [False, False])
    assert all(math.isnan(m[name]) for name in ("precision", "recall", "f1"))
    # TP 0, FP 1, FN 1: precision 0/1 and recall 0/1 are both 0, and so is F1 (0 / (0+1+1)).
    m = binary_metrics([True, False], [False, True])
    assert (m["precision"], m["recall"], m["f1"]) == (0.0, 0.0, 0.0)


def test_an_undefined_metric_has_no_interval_and_no_nan_bound_from_a_zero():
    """Every resample of a judge predicting nothing good has precision 0/0: no interval (NaN
    bounds, shown as none), where it was [0, 0]. Its F1 and recall are 0 and its share
    predicted bad 1 in every resample: no spread measured, no interval either (was [0, 0] and
    [1, 1])."""
    truth, never = [True, False] * 10, [False] * 20
    ci = binary_metric_intervals(truth, never, np.random.default_rng(0), n_resamples=200)
    for name in ("precision", "f1", "recall", "predicted_bad"):
        assert all(math.isnan(bound) for bound in ci[name]), name
    assert all(not math.isnan(bound) for bound in ci["accuracy"])


def test_intervals_contain_the_estimate_and_are_none_when_every_item_agrees():
    """A judge right on all 40 turns read accuracy 1.00 [1.00, 1.00], certainty from 40 turns:
    every resample is right everywhere, so the bootstrap measured no spread; no interval."""
    rng = np.random.default_rng(0)
    truth = [True, False] * 20
    ci = binary_metric_intervals(truth, truth, rng, n_resamples=200)
    assert all(math.isnan(bound) for bound in ci["accuracy"])
    pred = [True, True, False, False] * 10
    ci = binary_metric_intervals(truth, pred, np.random.default_rng(1), n_resamples=500)
    low, high = ci["accuracy"]
    assert low < 0.5 < high and low >= 0 and high <= 1


def test_agreement_by_hand():
    assert agreement(["good", "bad", "bad", "good"], ["good", "good", "bad", "bad"]) == 0.5


def test_split_sizes_follow_the_paper_and_are_seeded():
    train, dev, test = split_indices(1260, np.random.default_rng(3))
    assert (len(train), len(dev), len(test)) == (888, 186, 186)
    assert len(set(train) | set(dev) | set(test)) == 1260
    again = split_indices(1260, np.random.default_rng(3))
    assert all((a == b).all() for a, b in zip((train, dev, test), again, strict=True))


def test_the_fewest_items_with_a_test_item_by_hand():
    # 3 x 186/1260 = 0.44 rounds to no test item; 4 x 186/1260 = 0.59 rounds to one.
    assert split_min_items() == 4
    assert len(split_indices(3, np.random.default_rng(0))[2]) == 0
    assert len(split_indices(4, np.random.default_rng(0))[2]) == 1
    assert split_min_items(0.5) == 2  # round(0.5) = 0 (halves to even), round(1.0) = 1
    assert split_min_items(0.25) == 3  # round(0.25) = round(0.5) = 0, round(0.75) = 1


def test_majority_and_random_baselines_follow_the_training_split():
    assert majority_predictions([True, False, False], 4).tolist() == [False] * 4
    assert majority_predictions([True, True, False], 2).tolist() == [True, True]
    assert majority_predictions([True, False], 1).tolist() == [False]  # a tie is not good
    draws = random_predictions([True, False, False, False], 20000, np.random.default_rng(0))
    assert abs(draws.mean() - 0.25) < 0.02


def test_split_sizes_are_the_lengths_split_indices_gives():
    assert split_sizes(1260) == (888, 186, 186)
    for n in range(30):
        parts = split_indices(n, np.random.default_rng(0))
        assert split_sizes(n) == tuple(len(part) for part in parts)


def test_a_figure_of_fewer_than_two_items_has_no_interval_not_a_point():
    """One test turn: every resample is that turn, so accuracy's interval was [1, 1]. Of 20
    turns only one predicted good (and good): precision is 1/1 in every resample drawing it,
    an interval [1, 1] over one turn; recall, over the ten good turns, keeps its interval."""
    one = binary_metric_intervals([True], [True], np.random.default_rng(0), n_resamples=100)
    assert all(math.isnan(bound) for bounds in one.values() for bound in bounds)
    truth, predicted = [True, False] * 10, [True] + [False] * 19
    ci = binary_metric_intervals(truth, predicted, np.random.default_rng(0), n_resamples=200)
    assert binary_metrics(truth, predicted)["precision"] == 1.0
    assert all(math.isnan(bound) for bound in ci["precision"])
    low, high = ci["recall"]
    assert 0.0 <= low < 0.1 <= high
    assert ci["accuracy"][0] < ci["accuracy"][1]


def test_binary_metric_intervals_resample_clusters_together():
    """Two re-ratings of one turn, one agreeing: drawn as one cluster, every resample reads
    0.5 and there is no interval; drawn apart they read 0 to 1."""
    truth, pred = [True, True], [True, False]
    apart = binary_metric_intervals(truth, pred, np.random.default_rng(0), n_resamples=200)
    assert apart["accuracy"] == (0.0, 1.0)
    together = binary_metric_intervals(
        truth, pred, np.random.default_rng(0), clusters=[7, 7], n_resamples=200
    )
    assert all(np.isnan(v) for v in together["accuracy"])
    # One label per item, all distinct: the same draws and intervals as without labels.
    distinct = binary_metric_intervals(
        truth, pred, np.random.default_rng(0), clusters=[3, 9], n_resamples=200
    )
    assert np.array_equal(list(distinct.values()), list(apart.values()), equal_nan=True)
    with pytest.raises(ValueError, match="one label per item"):
        binary_metric_intervals(truth, pred, np.random.default_rng(0), clusters=[1])
