"""Majority vote over the labels of several annotators."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evaluation.stats.codes import NO, UNKNOWN, YES


@dataclass(frozen=True)
class VoteResult:
    """Majority label per item, with the items that had a tie or no vote at all."""

    values: np.ndarray
    ties: np.ndarray
    no_votes: np.ndarray

    @property
    def tie_count(self) -> int:
        """Return how many items had as many YES as NO votes (at least one of each)."""
        return int(np.count_nonzero(self.ties))

    @property
    def no_vote_count(self) -> int:
        """Return how many items had neither a YES nor a NO vote."""
        return int(np.count_nonzero(self.no_votes))


def majority_vote(labels: np.ndarray) -> VoteResult:
    """Aggregate each item's labels by simple majority of its YES and NO votes.

    `labels` has shape (n_items, n_slots) with codes NO/YES/UNKNOWN, padded with MISSING where an
    item has fewer annotators. Only YES and NO are votes: UNKNOWN and MISSING are ignored.

    Rule: YES if yes > no, NO if no > yes, otherwise UNKNOWN. A tie (yes == no > 0) is "no
    majority": it is reported as UNKNOWN, so DRFR leaves it out by default, and flagged in
    `ties`. An item with no YES and no NO vote is UNKNOWN as well and flagged in `no_votes`.
    """
    labels = np.asarray(labels)
    if labels.ndim != 2:
        raise ValueError(f"labels must have shape (n_items, n_slots); got shape {labels.shape}")
    return majority_from_votes(
        np.count_nonzero(labels == YES, axis=1), np.count_nonzero(labels == NO, axis=1)
    )


def majority_from_votes(yes: np.ndarray, no: np.ndarray) -> VoteResult:
    """Apply `majority_vote`'s rule to each item's count of YES votes and of NO votes.

    The same rule without the label matrix, for callers that count the votes per item
    directly (np.bincount over millions of labels is cheaper than arranging them in slots).
    """
    yes, no = np.asarray(yes), np.asarray(no)
    if yes.shape != no.shape or yes.ndim != 1:
        raise ValueError(f"yes and no must be aligned 1-D counts; got {yes.shape}, {no.shape}")
    values = np.full(yes.shape[0], UNKNOWN, dtype=np.int8)
    values[yes > no] = YES
    values[no > yes] = NO
    return VoteResult(
        values=values,
        ties=(yes == no) & (yes > 0),
        no_votes=(yes == 0) & (no == 0),
    )
