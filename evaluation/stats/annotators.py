"""Per-annotator agreement: with the expert majority (leave-one-out) and with the others.

Labels are parallel arrays: `item` (index of a question × response), `annotator` (index) and
`value` (0 NO, 1 YES, 2 UNKNOWN), one entry per label, each (item, annotator) at most once.
"""

from __future__ import annotations

import numpy as np

from evaluation.stats.codes import NO, YES


def agreement_with_expert_majority(
    item: np.ndarray,
    annotator: np.ndarray,
    value: np.ndarray,
    is_expert: np.ndarray,
    n_items: int,
) -> np.ndarray:
    """Return, per annotator, the share of their labels equal to the experts' majority.

    The majority of an item is YES when its YES votes outnumber its NO votes, NO the other way
    round; UNKNOWN is no vote. An expert is compared with the majority of the *other* experts
    (leave-one-out), so nobody agrees with themselves. Items with a tie or no vote are skipped;
    an UNKNOWN label on an item with a majority counts as a disagreement. NaN for an annotator
    with no compared item.
    """
    item, annotator, value = (np.asarray(a, dtype=np.int64) for a in (item, annotator, value))
    is_expert = np.asarray(is_expert, dtype=bool)
    n_annotators = len(is_expert)
    by_expert = is_expert[annotator]
    yes = np.bincount(item[by_expert & (value == YES)], minlength=n_items)[item]
    no = np.bincount(item[by_expert & (value == NO)], minlength=n_items)[item]
    yes = yes - (by_expert & (value == YES))
    no = no - (by_expert & (value == NO))
    compared = yes != no
    agrees = compared & (value == np.where(yes > no, YES, NO))
    return _share(annotator, agrees, compared, n_annotators)


def agreement_with_others(
    item: np.ndarray,
    annotator: np.ndarray,
    value: np.ndarray,
    n_annotators: int,
    n_items: int,
    *,
    is_other: np.ndarray | None = None,
) -> np.ndarray:
    """Return, per annotator, the share of pairs (their label, another's on the same item) that
    are equal, over the labels of every other annotator marked in `is_other` (bool per
    annotator; default every annotator); UNKNOWN equals only UNKNOWN.

    Formula: Σ_labels (count of the item's other labels with the same value) /
    Σ_labels (count of the item's other labels), "other" meaning by another annotator marked
    in `is_other`. An annotator not marked is still given a share, against the marked ones.
    NaN for an annotator who shares no item with one.
    """
    item, annotator, value = (np.asarray(a, dtype=np.int64) for a in (item, annotator, value))
    if is_other is None:
        is_other = np.ones(n_annotators, dtype=bool)
    own = np.asarray(is_other, dtype=bool)[annotator].astype(np.int64)
    key = item * 3 + value
    same = np.bincount(key, weights=own, minlength=n_items * 3)[key] - own
    total = np.bincount(item, weights=own, minlength=n_items)[item] - own
    sums = np.bincount(annotator, weights=same, minlength=n_annotators)
    pairs = np.bincount(annotator, weights=total, minlength=n_annotators)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(pairs > 0, sums / np.maximum(pairs, 1), np.nan)


def _share(annotator, hits, compared, n_annotators) -> np.ndarray:
    good = np.bincount(annotator, weights=hits.astype(float), minlength=n_annotators)
    seen = np.bincount(annotator, weights=compared.astype(float), minlength=n_annotators)
    return np.where(seen > 0, good / np.maximum(seen, 1), np.nan)
