"""Cluster bootstrap: resample whole instructions with replacement, all resamples at once."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

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
    return _draw_weights(n_clusters, n_resamples, rng, np.int64)


def _draw_weights(n_clusters: int, n_resamples: int, rng: np.random.Generator, dtype) -> np.ndarray:
    """Return `cluster_weights` as an array of `dtype` (the counts written into it directly)."""
    if n_clusters < 0 or n_resamples < 0:
        raise ValueError("n_clusters and n_resamples must not be negative")
    if n_clusters == 0 or n_resamples == 0:
        return np.zeros((n_resamples, n_clusters), dtype=dtype)
    weights = np.empty((n_resamples, n_clusters), dtype=dtype)  # every row is written below
    picks_dtype = np.int32 if n_clusters < 2**30 else np.int64
    picks = rng.integers(0, n_clusters, size=(n_resamples, n_clusters), dtype=picks_dtype)
    # Count a few resamples per bincount call: the counts then stay in the CPU cache, which is
    # about twice as fast as one bincount over a whole chunk. Each resample's picks are shifted
    # into a range of their own, in one reused buffer of the index type bincount works in.
    rows = min(n_resamples, max(1, _COUNT_BLOCK_CELLS // n_clusters))
    offsets = (np.arange(rows, dtype=np.intp) * n_clusters)[:, None]
    flat = np.empty((rows, n_clusters), dtype=np.intp)
    for start in range(0, n_resamples, rows):
        block = picks[start : start + rows]
        shifted = flat[: block.shape[0]]
        np.add(block, offsets[: block.shape[0]], out=shifted)
        weights[start : start + block.shape[0]] = np.bincount(
            shifted.reshape(-1), minlength=shifted.size
        ).reshape(block.shape)
    return weights


def weight_chunks(
    n_clusters: int, n_resamples: int, rng: np.random.Generator
) -> Iterator[np.ndarray]:
    """Yield the cluster weights of n_resamples resamples as float64 chunks of bounded size.

    Chunks are drawn one after the other with `cluster_weights`; each holds about 2**20 cells
    (at least one resample), so memory stays bounded for any number of resamples.
    """
    for size in _chunk_sizes(n_clusters, n_resamples):
        yield _draw_weights(n_clusters, size, rng, np.float64)


def _chunk_sizes(n_clusters: int, n_resamples: int) -> list[int]:
    per_chunk = max(1, _CHUNK_CELLS // max(n_clusters, 1))
    return [min(per_chunk, n_resamples - start) for start in range(0, n_resamples, per_chunk)]


@dataclass
class _DrawnAhead:
    n_clusters: int
    state: dict  # the generator's state before this set's first chunk
    chunks: list[np.ndarray] = field(default_factory=list)


class WeightStream:
    """Hand out `weight_chunks` for successive sets of resamples, all drawn from one generator.

    The chunks of a set depend only on the generator's state when the set begins, and that
    state only on the seed and the numbers of clusters of the sets before it. So they can be
    drawn ahead for the sets one expects (`draw_ahead`, while waiting for something else) and
    handed out when a set asked for has the expected number of clusters; at the first set
    that differs, what was drawn ahead is dropped and the generator is put back in the state
    it had there. `chunks` gives the same weights either way, float for float.
    """

    def __init__(self, rng: np.random.Generator, n_resamples: int):
        self.rng, self.n_resamples = rng, n_resamples
        self._ahead: list[_DrawnAhead] = []
        self._started = False

    def draw_ahead(self, sizes: list[int], *, stop: Callable[[], bool], max_cells: int) -> None:
        """Draw the chunks of sets of `sizes` clusters, in order, until `stop()` is true or
        `max_cells` weights are held (kept as small integers until handed out)."""
        if self._started:
            raise ValueError("weights can be drawn ahead only before the first set is asked for")
        self._started = True
        cells = 0
        for n_clusters in sizes:
            drawn = _DrawnAhead(n_clusters, self.rng.bit_generator.state)
            self._ahead.append(drawn)
            for size in _chunk_sizes(n_clusters, self.n_resamples):
                cells += size * n_clusters
                if cells > max_cells or stop():
                    return
                weights = cluster_weights(n_clusters, size, self.rng)
                small = weights.size == 0 or weights.max() <= np.iinfo(np.uint8).max
                drawn.chunks.append(weights.astype(np.uint8) if small else weights)

    def chunks(self, n_clusters: int) -> Iterator[np.ndarray]:
        """Return the float64 weight chunks of the next set of resamples, of `n_clusters`
        clusters: those of `weight_chunks(n_clusters, n_resamples, rng)` had no set been drawn
        ahead. Chunks drawn ahead come in one buffer that the next chunk overwrites: use each
        before asking for the next."""
        self._started = True
        drawn = self._ahead.pop(0) if self._ahead else None
        if drawn is not None and drawn.n_clusters != n_clusters:
            self.rng.bit_generator.state = drawn.state
            self._ahead.clear()
            drawn = None
        if drawn is None:
            return weight_chunks(n_clusters, self.n_resamples, self.rng)
        # Only the last set drawn ahead can be short of chunks: the generator is then where
        # its last chunk left it.
        rest = _chunk_sizes(n_clusters, self.n_resamples)[len(drawn.chunks) :]
        return self._handed_out(drawn.chunks, n_clusters, rest)

    def _handed_out(self, chunks: list, n_clusters: int, rest: list[int]) -> Iterator[np.ndarray]:
        buffer = np.empty(max((c.size for c in chunks), default=0))
        while chunks:
            chunk = chunks.pop(0)
            weights = buffer[: chunk.size].reshape(chunk.shape)
            np.copyto(weights, chunk)
            yield weights
        for size in rest:
            yield _draw_weights(n_clusters, size, self.rng, np.float64)


def percentile_interval(samples: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Return the percentile interval of each column of bootstrap `samples`, ignoring NaN.

    `samples` has shape (n_resamples, k); NaN marks a resample where the statistic is
    undefined. Bounds are the (1 - level)/2 and (1 + level)/2 quantiles (numpy's default
    linear interpolation) of the defined resamples. A column where fewer than half of the
    resamples are defined gets NaN for both bounds, and so does one whose defined resamples
    all give the same value (`no_spread`): its clusters differ in nothing the statistic reads
    (every item in full agreement, every reply right, each instruction at the same ratio), so
    the interval would be [x, x], read as certainty where the bootstrap measured no spread.
    """
    _check_level(level)
    samples = np.asarray(samples, dtype=np.float64)
    lower = np.full(samples.shape[1], np.nan)
    upper = np.full(samples.shape[1], np.nan)
    enough = 2 * np.count_nonzero(~np.isnan(samples), axis=0) >= max(samples.shape[0], 1)
    enough &= ~no_spread(samples)
    if samples.shape[0] and enough.any():
        alpha = (1.0 - level) / 2.0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            bounds = np.nanquantile(samples[:, enough], [alpha, 1.0 - alpha], axis=0)
        lower[enough], upper[enough] = bounds[0], bounds[1]
    return lower, upper


def no_spread(samples: np.ndarray) -> np.ndarray:
    """Return, per column of bootstrap `samples` (shape (n_resamples, k), NaN undefined),
    whether every defined resample gives the same value, up to rounding (a relative 1e-9:
    the same ratio summed in another order differs in its last bits). A column with no
    defined resample has no spread either. Returns bool of shape (k,)."""
    samples = np.asarray(samples, dtype=np.float64)
    if samples.shape[0] == 0:
        return np.ones(samples.shape[1], dtype=bool)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN column
        high, low = np.nanmax(samples, axis=0), np.nanmin(samples, axis=0)
    with np.errstate(invalid="ignore"):
        same = high - low <= 1e-9 * np.maximum(1.0, np.abs(high))
    return same | np.isnan(high)


def too_few_clusters(denominators: np.ndarray, strata: np.ndarray | None = None) -> np.ndarray:
    """Return, per column, whether its bootstrap interval would be one resample repeated.

    `denominators` has shape (n_clusters, k); a cluster takes part in a column where its
    denominator is positive. Resampling changes a column's statistic only when at least two
    clusters take part in it and the draws can change their weights: without `strata` two
    taking part are enough; with `strata` (each stratum's clusters drawn among themselves, as
    many as it holds) some stratum of at least two clusters must hold one taking part, since
    a stratum of one cluster gives it the weight 1 in every resample. A taking-part cluster in
    such a stratum may be drawn 0, 1, 2… times while the other one keeps its weight, so the
    column's Σ num / Σ den mix changes, whichever strata the two are in. Otherwise every
    resample draws the same items (or none), and its percentile interval is the point estimate
    twice, [x, x], which reads as certainty where there is no measure of spread at all. Such a
    column gets no interval (NaN bounds), as one defined in fewer than half of the resamples.
    Returns bool of shape (k,).
    """
    taking_part = np.asarray(denominators) > 0
    few = np.count_nonzero(taking_part, axis=0) < 2
    if strata is None:
        return few
    _, stratum = np.unique(np.asarray(strata), return_inverse=True)
    stratum = stratum.reshape(-1)
    sizes = np.bincount(stratum)
    in_drawn_stratum = taking_part & (sizes[stratum] >= 2)[:, None]
    return few | ~in_drawn_stratum.any(axis=0)


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
    column whose total denominator is 0 is NaN), or when fewer than two clusters have a
    positive denominator in it (`too_few_clusters`: the interval would be [x, x]). Returns
    (lower, upper) float64 arrays of shape (k,) (shape () for one-dimensional input).
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
    few = too_few_clusters(den)
    lower[few], upper[few] = np.nan, np.nan
    return lower.reshape(column_shape), upper.reshape(column_shape)


def mean_ratio_ci(
    numerators: np.ndarray,
    denominators: np.ndarray,
    members: np.ndarray,
    rng: np.random.Generator,
    *,
    n_groups: int,
    strata: np.ndarray | None = None,
    n_resamples: int = 1000,
    level: float = 0.95,
) -> tuple[np.ndarray, np.ndarray]:
    """Return a cluster-bootstrap percentile CI of the mean of column ratios per group.

    Column j (shape (n_clusters, m) as in `ratio_ci`) belongs to group `members[j]` (0 ..
    n_groups - 1). The statistic of a group in a resample is the plain mean of its columns'
    Σ w_c num_c / Σ w_c den_c over the columns defined in that resample (NaN when none is),
    so each column weighs the same whatever its size: an average over cells, as a paper that
    "averages over datasets" reports it. Bounds as `ratio_ci` (NaN with fewer than half of the
    resamples defined, or when fewer than two clusters take part in the group's columns or
    none of them is in a stratum of two clusters or more, so that every resample is the same:
    `too_few_clusters`). Returns (lower, upper)
    of shape (n_groups,).

    `strata` (one label per cluster) resamples the clusters within each stratum, as many as it
    holds: with columns of different strata (datasets) a plain resample can miss a small
    stratum altogether, and that resample's mean then leaves its column out, an average over
    other columns than the point estimate's (2 items all wrong beside 8 all right read a
    95 % interval of 50-100 % around an exact 50 %).
    """
    _check_level(level)
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be at least 1; got {n_resamples}")
    num = np.asarray(numerators, dtype=np.float64)
    den = np.asarray(denominators, dtype=np.float64)
    members = np.asarray(members, dtype=np.int64)
    if num.shape != den.shape or num.ndim != 2 or members.shape != (num.shape[1],):
        raise ValueError(
            "numerators and denominators must have the same shape (n_clusters, m) and members "
            f"one group per column; got {num.shape}, {den.shape} and {members.shape}"
        )
    onehot = np.zeros((num.shape[1], n_groups))
    onehot[np.arange(num.shape[1]), members] = 1.0
    resample = ratio_resampler(num, den)
    chunks = []
    for weights in _stratified_chunks(num.shape[0], n_resamples, rng, strata):
        ratios = resample(weights)
        defined = ~np.isnan(ratios)
        total = np.where(defined, ratios, 0.0) @ onehot
        count = defined.astype(np.float64) @ onehot
        with np.errstate(invalid="ignore", divide="ignore"):
            chunks.append(np.where(count > 0, total / np.maximum(count, 1.0), np.nan))
    lower, upper = percentile_interval(np.vstack(chunks), level)
    few = too_few_clusters((den > 0).astype(np.float64) @ onehot, strata)
    lower[few], upper[few] = np.nan, np.nan
    return lower, upper


def _stratified_chunks(
    n_clusters: int, n_resamples: int, rng: np.random.Generator, strata: np.ndarray | None
) -> Iterator[np.ndarray]:
    """`weight_chunks`, each stratum's clusters drawn among themselves (one stratum, or none
    given: the same weights as `weight_chunks`)."""
    if strata is None:
        yield from weight_chunks(n_clusters, n_resamples, rng)
        return
    strata = np.asarray(strata)
    if strata.shape != (n_clusters,):
        raise ValueError(f"strata must give one label per cluster; got shape {strata.shape}")
    _, stratum = np.unique(strata, return_inverse=True)
    members = [np.flatnonzero(stratum == s) for s in range(int(stratum.max(initial=-1)) + 1)]
    for size in _chunk_sizes(n_clusters, n_resamples):
        weights = np.empty((size, n_clusters))
        for columns in members:
            weights[:, columns] = _draw_weights(columns.size, size, rng, np.float64)
        yield weights


def _check_level(level: float) -> None:
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie strictly between 0 and 1; got {level}")
