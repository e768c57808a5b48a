"""Fleiss' kappa: agreement of a fixed number of raters per item beyond chance."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from evaluation.stats.bootstrap import percentile_interval, weight_chunks

# P_e is a sum of squares of shares; it is 1 only when every rating fell in one category.
_PE_TOLERANCE = 1e-12
_ALL_ONE_CATEGORY = "P_e = 1: every rating fell in one category, so kappa is undefined"
_NO_ITEMS = "no items"


@dataclass(frozen=True)
class KappaResult:
    """Fleiss' kappa with its parts; kappa is None when it is undefined (see undefined_reason)."""

    kappa: float | None
    p_bar: float | None
    p_e: float | None
    raw_agreement: float | None
    items: int
    raters: int
    dropped: int = 0
    undefined_reason: str = ""


def _rater_count(counts: np.ndarray) -> int:
    """Return n, the number of ratings per item, after checking that every row sums to it."""
    if counts.ndim != 2:
        raise ValueError(f"counts must have shape (n_items, n_categories); got {counts.shape}")
    if counts.size and counts.min() < 0:
        raise ValueError("counts must not be negative")
    sums = np.einsum("ij->i", counts)  # row sums; faster than sum(axis=1) over a few columns
    uneven = np.flatnonzero(sums != sums[0])
    if uneven.size:
        row = int(uneven[0])
        raise ValueError(
            "every item must have the same number of ratings: "
            f"row 0 has {sums[0]:g}, row {row} has {sums[row]:g}"
        )
    if sums[0] < 2:
        raise ValueError(f"each item needs at least 2 ratings; got {sums[0]:g}")
    return int(sums[0])


def _square_sums(counts: np.ndarray) -> np.ndarray:
    """Return Σ_j n_ij² per item (integers: exact in float64 whatever the order of summation)."""
    return np.einsum("ij,ij->i", counts, counts)


def _item_agreement(counts: np.ndarray, n: int, square_sums: np.ndarray | None = None):
    """Return P_i = (Σ_j n_ij² − n) / (n(n − 1)) per item."""
    square_sums = _square_sums(counts) if square_sums is None else square_sums
    return (square_sums - n) / (n * (n - 1.0))


def fleiss_kappa(counts: np.ndarray) -> KappaResult:
    """Compute Fleiss' kappa (Fleiss 1971) from a table of category counts per item.

    `counts` has shape (N items, k categories); n_ij is how many of the n raters put item i in
    category j, and every row must sum to the same n >= 2 (ValueError otherwise).

        P_i = (Σ_j n_ij² − n) / (n(n − 1)),   P̄ = mean_i P_i,
        p_j = Σ_i n_ij / (N n),               P_e = Σ_j p_j²,
        κ = (P̄ − P_e) / (1 − P_e).

    raw_agreement is the share of items on which all n raters chose the same category.
    Edge cases: with no items everything is None ("no items"); when P_e = 1 (within 1e-12),
    i.e. every rating fell in one category, κ is 0/0 and is reported as None with the reason,
    never as 1 or 0.
    """
    counts = np.asarray(counts)
    if counts.ndim != 2:
        raise ValueError(f"counts must have shape (n_items, n_categories); got {counts.shape}")
    n_items = counts.shape[0]
    if n_items == 0:
        return KappaResult(None, None, None, None, items=0, raters=0, undefined_reason=_NO_ITEMS)
    n = _rater_count(counts)
    counts = counts.astype(np.float64)
    square_sums = _square_sums(counts)
    p_bar = float(_item_agreement(counts, n, square_sums).mean())
    p_j = counts.sum(axis=0) / (n_items * n)
    p_e = float((p_j * p_j).sum())
    # All n ratings in one category <=> Σ_j n_ij² = n² (the counts sum to n).
    raw = float(np.count_nonzero(square_sums == n * n) / n_items)
    if 1.0 - p_e < _PE_TOLERANCE:
        return KappaResult(None, p_bar, p_e, raw, n_items, n, undefined_reason=_ALL_ONE_CATEGORY)
    kappa = (p_bar - p_e) / (1.0 - p_e)
    return KappaResult(kappa, p_bar, p_e, raw, n_items, n)


def ratings_to_counts(
    ratings: np.ndarray, valid: np.ndarray, categories: Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    """Turn per-rater ratings into Fleiss count rows, dropping items with an invalid rating.

    `ratings` has shape (n_items, n_raters) with values from `categories` (e.g. -1/0/1);
    `valid` (bool, same shape) is False where a rater gave no category. Fleiss' kappa needs the
    same raters count on every item, so an item with any invalid rating is dropped whole.
    Returns (counts of the kept items, int64 of shape (n_kept, len(categories)); kept, a bool
    mask over all items). A valid rating outside `categories` raises ValueError.
    """
    ratings = np.asarray(ratings)
    valid = np.asarray(valid, dtype=bool)
    if ratings.ndim != 2 or valid.shape != ratings.shape:
        raise ValueError(
            "ratings and valid must have the same shape (n_items, n_raters); "
            f"got {ratings.shape} and {valid.shape}"
        )
    kept = valid.all(axis=1)
    kept_ratings = ratings[kept]
    counts = np.zeros((kept_ratings.shape[0], len(categories)), dtype=np.int64)
    for column, category in enumerate(categories):
        counts[:, column] = np.count_nonzero(kept_ratings == category, axis=1)
    unmatched = np.flatnonzero(counts.sum(axis=1) != ratings.shape[1])
    if unmatched.size:
        item = int(np.flatnonzero(kept)[unmatched[0]])
        raise ValueError(
            f"item {item} has ratings {ratings[item].tolist()}: each valid rating must be "
            f"exactly one of the categories {list(categories)}"
        )
    return counts, kept


def kappa_from_ratings(
    ratings: np.ndarray, valid: np.ndarray, categories: Sequence[int]
) -> KappaResult:
    """Compute Fleiss' kappa from per-rater ratings; items with an invalid rating are dropped.

    Same as `ratings_to_counts` followed by `fleiss_kappa`, with `dropped` set to the number of
    items left out. When every item is dropped the result is "no items" (kappa None).
    """
    counts, kept = ratings_to_counts(ratings, valid, categories)
    result = fleiss_kappa(counts)
    return dataclasses.replace(
        result,
        dropped=int(kept.size - np.count_nonzero(kept)),
        raters=result.raters or int(np.asarray(ratings).shape[1]),
    )


@dataclass(frozen=True)
class _ClusterSums:
    """Per-cluster sums from which kappa of any weighted resample of clusters follows.

    `table` has one row per cluster and columns [item count, Σ P_i, Σ n_i1, ..., Σ n_ik], so
    one matrix product with the weights gives every resample's sums.
    """

    table: np.ndarray
    raters: int

    @property
    def n_clusters(self) -> int:
        return self.table.shape[0]


def _cluster_sums(counts: np.ndarray, clusters: np.ndarray) -> _ClusterSums:
    counts = np.asarray(counts)
    clusters = np.asarray(clusters)
    if counts.ndim != 2 or clusters.shape != (counts.shape[0],):
        raise ValueError(
            f"clusters must hold one id per item ({counts.shape[0]}); got shape {clusters.shape}"
        )
    if clusters.size and clusters.min() < 0:
        raise ValueError("cluster ids must not be negative")
    n = _rater_count(counts)
    counts = counts.astype(np.float64)
    n_clusters = int(clusters.max()) + 1
    columns = [
        np.bincount(clusters, minlength=n_clusters).astype(np.float64),
        np.bincount(clusters, weights=_item_agreement(counts, n), minlength=n_clusters),
    ] + [np.bincount(clusters, weights=column, minlength=n_clusters) for column in counts.T]
    table = np.stack(columns, axis=1)
    return _ClusterSums(table=table, raters=n)


def _weighted_kappa(sums: _ClusterSums, weights: np.ndarray) -> np.ndarray:
    """Return kappa for each row of cluster weights, NaN where it is undefined."""
    weighted = weights @ sums.table
    items, agreement, totals = weighted[:, 0], weighted[:, 1], weighted[:, 2:]
    with np.errstate(divide="ignore", invalid="ignore"):
        p_bar = agreement / items
        p_j = totals / (items * sums.raters)[:, None]
        p_e = (p_j * p_j).sum(axis=1)
        kappa = (p_bar - p_e) / (1.0 - p_e)
    defined = (items > 0) & (1.0 - p_e >= _PE_TOLERANCE)
    return np.where(defined, kappa, np.nan)


def kappa_resamples(counts: np.ndarray, clusters: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Return Fleiss' kappa of each weighted resample of clusters, NaN where undefined.

    `weights` has shape (n_resamples, n_clusters): how often each cluster is drawn. A
    resample's kappa is Fleiss' kappa of the multiset of items it draws; with per-cluster sums
    S_c = Σ P_i, m_c = #items and T_cj = Σ n_ij it is κ from P̄ = Σ w_c S_c / Σ w_c m_c and
    p_j = Σ w_c T_cj / (n Σ w_c m_c), so all resamples take one matrix product.
    """
    return kappa_resampler(counts, clusters)(weights)


def kappa_resampler(counts: np.ndarray, clusters: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """Return `weights -> kappa_resamples(counts, clusters, weights)`, the per-cluster sums
    computed once for every chunk of resamples."""
    sums = _cluster_sums(counts, clusters)

    def resample(weights: np.ndarray) -> np.ndarray:
        weights = np.asarray(weights, dtype=np.float64)
        if weights.ndim != 2 or weights.shape[1] != sums.n_clusters:
            raise ValueError(
                f"weights must have shape (n_resamples, {sums.n_clusters}); got {weights.shape}"
            )
        return _weighted_kappa(sums, weights)

    return resample


# Why kappa_interval gives no interval (KappaInterval.missing).
NO_INTERVAL_NO_ITEMS = "no_items"
NO_INTERVAL_ONE_CLUSTER = "one_cluster"
NO_INTERVAL_UNDEFINED = "undefined"
NO_INTERVAL_NO_SPREAD = "no_spread"


@dataclass(frozen=True)
class KappaInterval:
    """A bootstrap interval of kappa; both bounds None with `missing` saying why (one of the
    NO_INTERVAL_* codes), "" when there is one."""

    low: float | None
    high: float | None
    missing: str = ""


def kappa_ci(
    counts: np.ndarray,
    clusters: np.ndarray,
    rng: np.random.Generator,
    *,
    n_resamples: int = 1000,
    level: float = 0.95,
) -> tuple[float | None, float | None]:
    """Return `kappa_interval`'s bounds: (low, high), or (None, None) when it has none."""
    found = kappa_interval(counts, clusters, rng, n_resamples=n_resamples, level=level)
    return found.low, found.high


def kappa_interval(
    counts: np.ndarray,
    clusters: np.ndarray,
    rng: np.random.Generator,
    *,
    n_resamples: int = 1000,
    level: float = 0.95,
) -> KappaInterval:
    """Return a percentile bootstrap CI of Fleiss' kappa, resampling whole clusters.

    `counts` is the table of `fleiss_kappa`; `clusters` gives each item's cluster id (the
    instruction), 0..K-1; ids used by no item are ignored. Each resample draws the clusters
    with replacement (weights from `cluster_weights`, in chunks of bounded size) and computes
    kappa as in `kappa_resamples`. Resamples where kappa is undefined (P_e = 1) are skipped.
    Bounds are the (1 - level)/2 and (1 + level)/2 quantiles (linear interpolation). There is
    no interval (None, None, and `missing` says why) when there are no items, when they all
    belong to one cluster (every resample would draw the same items), when fewer than half of
    the resamples are defined, or when every defined resample gives the same kappa (items all
    in full agreement, or every cluster split alike: `no_spread`): the last two would read
    [κ, κ], certainty where the bootstrap measured no spread.
    """
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be at least 1; got {n_resamples}")
    counts = np.asarray(counts)
    clusters = np.asarray(clusters)
    if counts.ndim == 2 and counts.shape[0] == 0:
        return KappaInterval(None, None, NO_INTERVAL_NO_ITEMS)
    if clusters.shape != (counts.shape[0],):
        raise ValueError(
            f"clusters must hold one id per item ({counts.shape[0]}); got shape {clusters.shape}"
        )
    distinct, dense_clusters = np.unique(clusters, return_inverse=True)
    if distinct.size < 2:
        return KappaInterval(None, None, NO_INTERVAL_ONE_CLUSTER)
    sums = _cluster_sums(counts, dense_clusters.reshape(-1))
    n_clusters = sums.n_clusters
    samples = np.concatenate(
        [_weighted_kappa(sums, w) for w in weight_chunks(n_clusters, n_resamples, rng)]
    )[:, None]
    lower, upper = percentile_interval(samples, level)
    if not np.isnan(lower[0]):
        return KappaInterval(float(lower[0]), float(upper[0]))
    defined = 2 * np.count_nonzero(~np.isnan(samples)) >= samples.shape[0]
    return KappaInterval(None, None, NO_INTERVAL_NO_SPREAD if defined else NO_INTERVAL_UNDEFINED)
