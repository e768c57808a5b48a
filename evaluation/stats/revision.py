"""Statistics of KIWI revision sessions (Xu et al. 2024, §4 and §5), on plain numpy arrays.

Ratings are coded GOOD = 0, NEUTRAL = 1, BAD = 2. The judge task of §5 is binary: good is the
positive class, neutral and bad together the negative one.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from evaluation.stats.bootstrap import cluster_weights, percentile_interval, too_few_clusters

GOOD, NEUTRAL, BAD = 0, 1, 2
METRICS = ("accuracy", "precision", "recall", "f1", "predicted_good", "predicted_bad")
# §5: 1,260 turns split into 888 train, 186 dev and 186 test.
PAPER_DEV_FRACTION = PAPER_TEST_FRACTION = 186 / 1260


def rating_shares(ratings: Sequence[int] | np.ndarray) -> tuple[float, float, float]:
    """Return the fractions of good, neutral and bad ratings; NaN for all three when empty."""
    codes = np.asarray(ratings, dtype=np.int64)
    if codes.size == 0:
        return (float("nan"),) * 3
    counts = np.bincount(codes, minlength=3)[:3]
    return tuple(float(c) / codes.size for c in counts)  # type: ignore[return-value]


def _counts(truth: np.ndarray, predicted: np.ndarray) -> tuple[np.ndarray, ...]:
    tp = np.sum(truth & predicted, axis=-1)
    fp = np.sum(~truth & predicted, axis=-1)
    fn = np.sum(truth & ~predicted, axis=-1)
    tn = np.sum(~truth & ~predicted, axis=-1)
    return tp, fp, fn, tn


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """Return num / den, NaN (undefined) where den is 0."""
    num, den = np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
    out = np.full(np.broadcast(num, den).shape, np.nan)
    np.divide(num, den, out=out, where=den != 0)
    return out


def _metrics_from_counts(tp, fp, fn, tn) -> dict[str, np.ndarray]:
    n = tp + fp + fn + tn
    precision, recall = _ratio(tp, tp + fp), _ratio(tp, tp + fn)
    # 2TP / (2TP + FP + FN): 2PR / (P + R) wherever both are defined, and a measured 0 where
    # one is 0/0 but the other is not (no turn predicted good while some are good: the
    # Majority baseline; the paper prints 0.0 there), undefined only when TP, FP and FN are
    # all 0 (no good turn, none predicted good).
    f1 = _ratio(2 * tp, 2 * tp + fp + fn)
    return {
        "accuracy": _ratio(tp + tn, n),
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "predicted_good": _ratio(tp + fp, n),
        "predicted_bad": _ratio(fn + tn, n),
    }


def binary_metrics(truth: Sequence[bool], predicted: Sequence[bool]) -> dict[str, float]:
    """Return accuracy, precision, recall, F1 (good = positive) and the shares predicted good/bad.

    accuracy = (TP + TN) / n, precision = TP / (TP + FP), recall = TP / (TP + FN),
    F1 = 2PR / (P + R). Convention: a ratio whose denominator is 0 is undefined, NaN (never
    0.0, which a reader would take for a measured zero): precision when nothing is predicted
    good (the Majority baseline of a split whose training turns are mostly not good), recall
    when no item is good; F1 is 2TP / (2TP + FP + FN), undefined only when no item is good
    and none is predicted good (TP, FP and FN all 0), a measured 0 when no good item is found
    (the Majority baseline's). Empty input gives NaN for every figure.
    """
    t, p = np.asarray(truth, dtype=bool), np.asarray(predicted, dtype=bool)
    if t.shape != p.shape:
        raise ValueError("truth and predicted must have the same length")
    if t.size == 0:
        return {name: float("nan") for name in METRICS}
    return {name: float(v) for name, v in _metrics_from_counts(*_counts(t, p)).items()}


def binary_metric_intervals(
    truth: Sequence[bool],
    predicted: Sequence[bool],
    rng: np.random.Generator,
    *,
    clusters: Sequence | None = None,
    n_resamples: int = 1000,
    level: float = 0.95,
) -> dict[str, tuple[float, float]]:
    """Return a percentile bootstrap interval of each binary metric, resampling clusters.

    A cluster is an item, or with `clusters` (one label per item) the items sharing a label,
    drawn together (the re-ratings of one turn). Each resample draws as many clusters as there
    are with replacement (weights from `cluster_weights`) and computes the metrics of
    `binary_metrics` on their items; a resample where a metric is undefined (NaN) is left out
    of its interval, which is (NaN, NaN) when fewer than half of the resamples define it or
    every one gives the same value (`percentile_interval`: no spread measured, e.g. a judge
    right on every turn), or when fewer than two clusters take part in it (those with an
    item in its denominator: all of them for accuracy and the shares predicted good/bad,
    those predicted good for precision, the good ones for recall, those good or predicted
    good for F1): every resample would then give the same figure, an interval [x, x] with no
    spread measured (`too_few_clusters`). Empty input gives (NaN, NaN).
    """
    t, p = np.asarray(truth, dtype=bool), np.asarray(predicted, dtype=bool)
    if t.size == 0 or n_resamples == 0:
        return {name: (float("nan"), float("nan")) for name in METRICS}
    if clusters is None:
        cluster, n_clusters = np.arange(t.size), t.size
    else:
        labels = np.asarray(clusters)
        if labels.shape != t.shape:
            raise ValueError(f"clusters must give one label per item; got shape {labels.shape}")
        _, cluster = np.unique(labels, return_inverse=True)
        cluster = cluster.reshape(-1)
        n_clusters = int(cluster.max()) + 1
    weights = cluster_weights(n_clusters, n_resamples, rng)
    cells = np.zeros((4, n_clusters), dtype=np.int64)  # tp, fp, fn, tn per cluster
    np.add.at(cells, (slice(None), cluster), np.stack([t & p, ~t & p, t & ~p, ~t & ~p]))
    tp, fp, fn, tn = (weights @ cells.T).T
    metrics = _metrics_from_counts(tp, fp, fn, tn)
    samples = np.column_stack([metrics[name] for name in METRICS])
    low, high = percentile_interval(samples, level)
    taking_part = {"precision": p, "recall": t, "f1": t | p}
    per_item = np.column_stack(
        [taking_part.get(name, np.ones(t.size, dtype=bool)) for name in METRICS]
    ).astype(np.int64)
    per_cluster = np.zeros((n_clusters, len(METRICS)), dtype=np.int64)
    np.add.at(per_cluster, cluster, per_item)
    few = too_few_clusters(per_cluster)
    low[few], high[few] = np.nan, np.nan
    return {name: (float(low[i]), float(high[i])) for i, name in enumerate(METRICS)}


def agreement(first: Sequence, second: Sequence) -> float:
    """Return the fraction of positions where the two label sequences agree (NaN when empty)."""
    a, b = np.asarray(first), np.asarray(second)
    if a.shape != b.shape:
        raise ValueError("both label sequences must have the same length")
    return float(np.mean(a == b)) if a.size else float("nan")


def split_min_items(test_fraction: float = PAPER_TEST_FRACTION) -> int:
    """Return the fewest items whose split (split_indices) has a test item.

    The smallest n with round(n * test_fraction) >= 1, Python's rounding (halves to even);
    the paper's fraction, 186/1260, gives 4 (3 items split 3/0/0, with no test item).
    """
    n = 1
    while round(n * test_fraction) < 1:
        n += 1
    return n


def split_sizes(
    n: int,
    *,
    dev_fraction: float = PAPER_DEV_FRACTION,
    test_fraction: float = PAPER_TEST_FRACTION,
) -> tuple[int, int, int]:
    """Return the train, dev and test sizes split_indices gives n items.

    dev and test get round(n * fraction) items each (Python's rounding), train the rest: the
    paper's 1,260 turns split 888/186/186.
    """
    n_dev, n_test = round(n * dev_fraction), round(n * test_fraction)
    return n - n_dev - n_test, n_dev, n_test


def split_indices(
    n: int,
    rng: np.random.Generator,
    *,
    dev_fraction: float = PAPER_DEV_FRACTION,
    test_fraction: float = PAPER_TEST_FRACTION,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Split range(n) at random into train, dev and test index arrays (each sorted).

    dev and test get round(n * fraction) items each (the paper: 186 of 1,260), train the rest.
    """
    order = rng.permutation(n)
    _, n_dev, n_test = split_sizes(n, dev_fraction=dev_fraction, test_fraction=test_fraction)
    dev, test = order[:n_dev], order[n_dev : n_dev + n_test]
    return np.sort(order[n_dev + n_test :]), np.sort(dev), np.sort(test)


def majority_predictions(train_truth: Sequence[bool], n: int) -> np.ndarray:
    """Predict the training split's majority class for n items (a tie predicts not good)."""
    t = np.asarray(train_truth, dtype=bool)
    return np.full(n, bool(t.size) and 2 * int(t.sum()) > t.size)


def random_predictions(train_truth: Sequence[bool], n: int, rng: np.random.Generator) -> np.ndarray:
    """Predict good with the training split's share of good, independently for n items."""
    t = np.asarray(train_truth, dtype=bool)
    share = float(t.mean()) if t.size else 0.0
    return rng.random(n) < share
