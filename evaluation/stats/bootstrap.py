"""Cluster bootstrap: resample whole instructions with replacement, all resamples at once."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator

import numpy as np

# About 2**20 cells per chunk of resamples keeps every temporary array near 8 MB.
_CHUNK_CELLS = 1 << 20
_COUNT_BLOCK_CELLS = 1 << 15


def cluster_weights(n_clusters: int, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Draw how often each cluster is picked in each bootstrap resample.

    One resample draws n_clusters clusters uniformly with replacement, so its row of weights is
    a Multinomial(n_clusters; 1/n_clusters, ..., 1/n_clusters) sample: non-negative counts that
    sum to n_clusters. Returns int64 of shape (n_resamples, n_clusters).
    """
    if n_clusters < 0 or n_resamples < 0:
        raise ValueError("n_clusters and n_resamples must not be negative")
    weights = np.zeros((n_resamples, n_clusters), dtype=np.int64)
    if weights.size == 0:
        return weights
    dtype = np.int32 if n_clusters < 2**30 else np.int64
    picks = rng.integers(0, n_clusters, size=(n_resamples, n_clusters), dtype=dtype)
    # Count a few resamples per bincount call: the counts then stay in the CPU cache, which is
    # about twice as fast as one bincount over a whole chunk.
    rows = max(1, _COUNT_BLOCK_CELLS // n_clusters)
    offsets = (np.arange(rows, dtype=dtype) * n_clusters)[:, None]
    for start in range(0, n_resamples, rows):
        block = picks[start : start + rows]
        flat = (block + offsets[: block.shape[0]]).ravel()
        weights[start : start + block.shape[0]] = np.bincount(flat, minlength=block.size).reshape(
            block.shape
        )
    return weights


def weight_chunks(
    n_clusters: int, n_resamples: int, rng: np.random.Generator
) -> Iterator[np.ndarray]:
    """Yield the cluster weights of n_resamples resamples as float64 chunks of bounded size.

    Chunks are drawn one after the other with `cluster_weights`; each holds about 2**20 cells
    (at least one resample), so memory stays bounded for any number of resamples.
    """
    per_chunk = max(1, _CHUNK_CELLS // max(n_clusters, 1))
    for start in range(0, n_resamples, per_chunk):
        size = min(per_chunk, n_resamples - start)
        yield cluster_weights(n_clusters, size, rng).astype(np.float64)


def percentile_interval(samples: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Return the percentile interval of each column of bootstrap `samples`, ignoring NaN.

    `samples` has shape (n_resamples, k); NaN marks a resample where the statistic is
    undefined. Bounds are the (1 - level)/2 and (1 + level)/2 quantiles (numpy's default
    linear interpolation) of the defined resamples. A column where fewer than half of the
    resamples are defined gets NaN for both bounds.
    """
    _check_level(level)
    samples = np.asarray(samples, dtype=np.float64)
    lower = np.full(samples.shape[1], np.nan)
    upper = np.full(samples.shape[1], np.nan)
    enough = 2 * np.count_nonzero(~np.isnan(samples), axis=0) >= max(samples.shape[0], 1)
    if samples.shape[0] and enough.any():
        alpha = (1.0 - level) / 2.0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            bounds = np.nanquantile(samples[:, enough], [alpha, 1.0 - alpha], axis=0)
        lower[enough], upper[enough] = bounds[0], bounds[1]
    return lower, upper


def ratio_resamples(
    numerators: np.ndarray, denominators: np.ndarray, weights: np.ndarray
) -> np.ndarray:
    """Return Σ w_c num_c / Σ w_c den_c per resample and column, NaN where the sum of den is 0.

    `numerators` and `denominators` have shape (n_clusters, k), `weights` (n_resamples,
    n_clusters). Returns float64 of shape (n_resamples, k).
    """
    return ratio_resampler(numerators, denominators)(weights)


def ratio_resampler(
    numerators: np.ndarray, denominators: np.ndarray
) -> Callable[[np.ndarray], np.ndarray]:
    """Return `weights -> ratio_resamples(numerators, denominators, weights)`, the table of
    numerators and denominators laid out once for every chunk of resamples.

    With integer counts and integer weights every sum is an integer below 2**53, exact in
    float64 whatever the order of summation: resamples give the same ratios one chunk at a
    time or many chunks in one matrix product (which reads the table once per product, the
    cost that matters with a hundred thousand instructions).
    """
    k = numerators.shape[1]
    table = np.hstack([numerators, denominators]).astype(np.float64)

    def resample(weights: np.ndarray) -> np.ndarray:
        sums = weights @ table
        num, den = sums[:, :k], sums[:, k:]
        out = np.full(num.shape, np.nan)
        np.divide(num, den, out=out, where=den != 0)
        return out

    return resample


def ratio_ci(
    numerators: np.ndarray,
    denominators: np.ndarray,
    rng: np.random.Generator,
    *,
    n_resamples: int = 1000,
    level: float = 0.95,
) -> tuple[np.ndarray, np.ndarray]:
    """Return a cluster-bootstrap percentile CI of Σ numerators / Σ denominators per column.

    `numerators` and `denominators` have shape (n_clusters, k): one row per cluster (an
    instruction), one column per quantity (e.g. per system). Each resample draws the clusters
    with replacement (`cluster_weights`), so the items of an instruction stay together; the
    statistic of a resample is Σ w_c num_c / Σ w_c den_c. Resamples whose denominator is 0 are
    skipped; a column gets NaN bounds when fewer than half of the resamples are defined (so a
    column whose total denominator is 0 is NaN). Returns (lower, upper) float64 arrays of
    shape (k,) (shape () for one-dimensional input).
    """
    _check_level(level)
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be at least 1; got {n_resamples}")
    num = np.asarray(numerators, dtype=np.float64)
    den = np.asarray(denominators, dtype=np.float64)
    if num.shape != den.shape or num.ndim not in (1, 2):
        raise ValueError(
            "numerators and denominators must have the same shape (n_clusters, k); "
            f"got {num.shape} and {den.shape}"
        )
    column_shape = num.shape[1:]
    num = num.reshape(num.shape[0], -1)
    den = den.reshape(den.shape[0], -1)
    samples = np.vstack(
        [ratio_resamples(num, den, w) for w in weight_chunks(num.shape[0], n_resamples, rng)]
    )
    lower, upper = percentile_interval(samples, level)
    return lower.reshape(column_shape), upper.reshape(column_shape)


def _check_level(level: float) -> None:
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie strictly between 0 and 1; got {level}")
