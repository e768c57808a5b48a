"""Agreement of an annotation source with the gold labels: accuracy and pairwise label distance."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evaluation.stats.codes import MISSING, NO, YES


@dataclass(frozen=True)
class AccuracyResult:
    """Share of compared items where the source equals gold, with the compared/skipped counts."""

    acc: float | None
    compared: int
    skipped: int


@dataclass(frozen=True)
class PldResult:
    """Distribution of the pairwise label distance in percent, and its weighted mean WPLD."""

    pld0: float | None
    pld1: float | None
    pld2: float | None
    wpld: float | None
    items: int


def accuracy(
    source: np.ndarray, gold: np.ndarray, *, unknown_is_wrong: bool = False
) -> AccuracyResult:
    """Return ACC = #(source == gold) / #compared over the items that can be compared.

    An item is compared when its gold label is YES or NO (it had a majority) and the source
    answered YES or NO: a source's UNKNOWN is not counted (InFoBench appendix A.3: UNKNOWN
    "will not be counted during the experiment and the evaluation"). With
    `unknown_is_wrong=True` a source's UNKNOWN is compared too and counts as a disagreement
    (gold said YES or NO and the source did not). MISSING is never compared. acc is a share in
    0..1, None when no item could be compared.
    """
    source = np.asarray(source)
    gold = np.asarray(gold)
    if source.shape != gold.shape or source.ndim != 1:
        raise ValueError(
            f"source and gold must be one-dimensional and aligned; got {source.shape} and "
            f"{gold.shape}"
        )
    answered = (source != MISSING) if unknown_is_wrong else ((source == YES) | (source == NO))
    compared = ((gold == YES) | (gold == NO)) & answered
    n_compared = int(np.count_nonzero(compared))
    agree = int(np.count_nonzero(source[compared] == gold[compared]))
    return AccuracyResult(
        acc=agree / n_compared if n_compared else None,
        compared=n_compared,
        skipped=int(source.size - n_compared),
    )


def pld(categories: np.ndarray, gold_categories: np.ndarray, defined: np.ndarray) -> PldResult:
    """Return the pairwise label distance distribution of a source against gold (paper §4).

    `categories` and `gold_categories` hold pairwise categories in {-1, 0, 1} (see
    `pairwise.drfr_categories`), any shape; `defined` (bool, same shape) marks the entries
    where both are defined, and only those are used. PLD = |category − gold category| ∈
    {0, 1, 2}: 0 the order is right, 1 a tie taken for an order or the reverse, 2 the order is
    reversed. pld0..pld2 are the percentages (0..100) of each distance and
    WPLD = Σ_i i · P(PLD = i) with P a fraction (eq. 2), so 0 ≤ WPLD ≤ 2. All are None when no
    entry is defined.
    """
    categories = np.asarray(categories, dtype=np.int64)
    gold_categories = np.asarray(gold_categories, dtype=np.int64)
    defined = np.asarray(defined, dtype=bool)
    if not categories.shape == gold_categories.shape == defined.shape:
        raise ValueError(
            "categories, gold_categories and defined must have the same shape; got "
            f"{categories.shape}, {gold_categories.shape} and {defined.shape}"
        )
    distance = np.abs(categories[defined] - gold_categories[defined])
    if np.any(distance > 2):
        raise ValueError("categories must lie in {-1, 0, 1}")
    items = int(distance.size)
    if items == 0:
        return PldResult(None, None, None, None, items=0)
    share = np.bincount(distance, minlength=3) / items
    return PldResult(
        pld0=float(100 * share[0]),
        pld1=float(100 * share[1]),
        pld2=float(100 * share[2]),
        wpld=float(share[1] + 2 * share[2]),
        items=items,
    )
