"""Agreement of an annotation source with the gold labels: accuracy and pairwise label distance."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evaluation.stats.codes import MISSING, N_CODES, NO, UNKNOWN, YES


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
    groups = np.zeros(source.shape, dtype=np.intp)
    return accuracy_from_pairs(
        label_pairs(source, gold, groups, 1)[0], unknown_is_wrong=unknown_is_wrong
    )


def label_pairs(
    source: np.ndarray, gold: np.ndarray, groups: np.ndarray, n_groups: int
) -> np.ndarray:
    """Count the items of each group by (source label, gold label).

    `groups` holds each item's group, 0..n_groups-1. Returns int64 of shape (n_groups, 4, 4):
    [group, source code + 1, gold code + 1] (codes MISSING -1, NO 0, YES 1, UNKNOWN 2). Tables
    of several groups add up to the table of their items together (`accuracy_from_pairs`).
    """
    source, gold = np.asarray(source), np.asarray(gold)
    for name, codes in (("source", source), ("gold", gold)):
        if codes.size and (codes.min() < MISSING or codes.max() > UNKNOWN):
            raise ValueError(f"{name} labels must be codes {MISSING}..{UNKNOWN}")
    key = np.asarray(groups, dtype=np.intp) * N_CODES
    key += source + 1
    key *= N_CODES
    key += gold + 1
    counts = np.bincount(key, minlength=n_groups * N_CODES * N_CODES)
    return counts.reshape(n_groups, N_CODES, N_CODES)


def accuracy_from_pairs(pairs: np.ndarray, *, unknown_is_wrong: bool = False) -> AccuracyResult:
    """Return `accuracy` of the items counted in a (4, 4) table of `label_pairs`."""
    answered = [NO, YES, UNKNOWN] if unknown_is_wrong else [NO, YES]
    rows = np.asarray(answered) + 1
    n_compared = int(pairs[np.ix_(rows, [NO + 1, YES + 1])].sum())
    # A compared item agrees when the source gave gold's YES or NO.
    agree = int(pairs[NO + 1, NO + 1] + pairs[YES + 1, YES + 1])
    return AccuracyResult(
        acc=agree / n_compared if n_compared else None,
        compared=n_compared,
        skipped=int(pairs.sum()) - n_compared,
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
