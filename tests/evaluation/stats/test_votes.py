import numpy as np
import pytest

from evaluation.stats import MISSING, NO, UNKNOWN, YES, majority_vote

M, N, Y, U = MISSING, NO, YES, UNKNOWN


def test_majority_per_item_with_ties_unknowns_and_padding():
    labels = np.array(
        [
            [Y, Y, N],  # 2 YES vs 1 NO
            [N, N, Y],  # 2 NO vs 1 YES
            [Y, N, M],  # tie between two annotators
            [Y, N, U],  # UNKNOWN is not a vote: still a tie
            [U, U, M],  # no YES/NO vote
            [M, M, M],  # no label at all
            [Y, U, U],  # one YES beats no NO
            [N, M, M],  # a single annotator
        ],
        dtype=np.int8,
    )
    result = majority_vote(labels)
    assert result.values.tolist() == [Y, N, U, U, U, U, Y, N]
    assert result.values.dtype == np.int8
    assert result.ties.tolist() == [False, False, True, True, False, False, False, False]
    assert result.no_votes.tolist() == [False, False, False, False, True, True, False, False]
    assert result.tie_count == 2
    assert result.no_vote_count == 2


def test_even_number_of_annotators():
    result = majority_vote(np.array([[Y, Y, N, N], [Y, Y, Y, N]]))
    assert result.values.tolist() == [U, Y]
    assert result.tie_count == 1


def test_no_items():
    result = majority_vote(np.empty((0, 3), dtype=np.int8))
    assert result.values.shape == (0,)
    assert result.tie_count == 0 and result.no_vote_count == 0


def test_rejects_a_flat_array():
    with pytest.raises(ValueError, match="n_items, n_slots"):
        majority_vote(np.array([Y, N, Y]))
