"""Pairwise comparison of systems per instruction: which of two systems did better."""

from __future__ import annotations

from itertools import combinations

import numpy as np


def system_pairs(n_systems: int) -> list[tuple[int, int]]:
    """Return every pair (a, b) of system indices with a < b, in itertools.combinations order."""
    return list(combinations(range(n_systems), 2))


def _pair_columns(n_systems: int) -> tuple[np.ndarray, np.ndarray]:
    pairs = np.array(system_pairs(n_systems), dtype=np.intp).reshape(-1, 2)
    return pairs[:, 0], pairs[:, 1]


def drfr_categories(yes: np.ndarray, counted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Compare the instruction-level DRFR of every pair of systems, exactly.

    `yes` and `counted` have shape (n_instructions, n_systems). For each instruction and each
    pair (a, b) of `system_pairs(n_systems)` the category is 1 when yes_a/counted_a >
    yes_b/counted_b (system A better), 0 on a tie and -1 when B is better (the paper's §4
    labels). The fractions are compared by cross-multiplication in int64 (yes_a*counted_b vs
    yes_b*counted_a), so 1/3 and 2/6 tie exactly. `defined` is False where counted_a == 0 or
    counted_b == 0; the category there is 0 and means nothing. Returns (categories int8,
    defined bool), both of shape (n_instructions, n_pairs).
    """
    yes = np.asarray(yes, dtype=np.int64)
    counted = np.asarray(counted, dtype=np.int64)
    if yes.ndim != 2 or yes.shape != counted.shape:
        raise ValueError(
            "yes and counted must have the same shape (n_instructions, n_systems); "
            f"got {yes.shape} and {counted.shape}"
        )
    if np.any(yes < 0) or np.any(yes > counted):
        raise ValueError("every yes count must lie in 0..counted")
    a, b = _pair_columns(yes.shape[1])
    cross_a = yes[:, a] * counted[:, b]
    cross_b = yes[:, b] * counted[:, a]
    defined = (counted[:, a] > 0) & (counted[:, b] > 0)
    categories = np.sign(cross_a - cross_b).astype(np.int8)
    categories[~defined] = 0
    return categories, defined


def score_categories(scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Compare the direct scores (1..5) of every pair of systems per instruction.

    `scores` has shape (n_instructions, n_systems), 0 meaning "no score". Category 1 when
    score_a > score_b, 0 on equal scores, -1 when score_b is higher, for the pairs of
    `system_pairs`. `defined` is False where either score is 0; the category there is 0 and
    means nothing. Returns (categories int8, defined bool) of shape (n_instructions, n_pairs).
    """
    scores = np.asarray(scores, dtype=np.int64)
    if scores.ndim != 2:
        raise ValueError(f"scores must have shape (n_instructions, n_systems); got {scores.shape}")
    if np.any((scores < 0) | (scores > 5)):
        raise ValueError("scores must lie in 1..5, or be 0 for no score")
    a, b = _pair_columns(scores.shape[1])
    defined = (scores[:, a] > 0) & (scores[:, b] > 0)
    categories = np.sign(scores[:, a] - scores[:, b]).astype(np.int8)
    categories[~defined] = 0
    return categories, defined
