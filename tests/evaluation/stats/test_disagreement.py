import numpy as np
import pytest

from evaluation.stats import (
    MISSING,
    NO,
    UNKNOWN,
    YES,
    disagreement_levels,
    judged_levels,
    level_distribution,
    reachable_level,
)

M, N, Y, U = MISSING, NO, YES, UNKNOWN


def test_level_counts_the_systems_whose_annotators_split():
    labels = np.array(
        [
            [[Y, Y, Y], [Y, N, Y]],  # system 1 splits: level 1
            [[Y, U, Y], [N, M, N]],  # UNKNOWN does not diverge, padding neither: level 0
            [[Y, N, M], [N, Y, U]],  # both split: level 2
            [[U, U, U], [Y, M, M]],  # fewer than two YES/NO votes: level 0
        ]
    )
    levels = disagreement_levels(labels)
    assert levels.tolist() == [1, 0, 2, 0]
    assert level_distribution(levels, 2).tolist() == [2, 1, 1]


def test_distribution_has_a_slot_for_every_level():
    assert level_distribution(np.array([0, 0, 5]), 5).tolist() == [2, 0, 0, 0, 0, 1]
    assert level_distribution(np.array([], dtype=int), 3).tolist() == [0, 0, 0, 0]


def test_levels_beyond_the_system_count_are_refused():
    with pytest.raises(ValueError, match="0..2"):
        level_distribution(np.array([3]), 2)


def test_labels_must_be_three_dimensional():
    with pytest.raises(ValueError, match="n_questions, n_systems, n_annotators"):
        disagreement_levels(np.array([[Y, N]]))


def test_judged_levels_apply_the_rule_to_votes_given_per_output():
    """The labels of the first test as vote counts per (question, system) output, listed in a
    shuffled order: the fourth question, with no output of two YES/NO votes, is not judged."""
    labels = np.array(
        [
            [[Y, Y, Y], [Y, N, Y]],
            [[Y, U, Y], [N, M, N]],
            [[Y, N, M], [N, Y, U]],
            [[U, U, U], [Y, M, M]],
        ]
    )
    yes = (labels == Y).sum(axis=2).ravel()
    no = (labels == N).sum(axis=2).ravel()
    question = np.repeat(np.arange(4), 2)
    order = np.array([5, 0, 7, 2, 6, 1, 3, 4])
    levels = judged_levels(yes[order], no[order], question[order], 4)
    assert levels.tolist() == [1, 0, 2]
    assert levels.tolist() == disagreement_levels(labels)[:3].tolist()


def test_judged_levels_with_no_outputs():
    none = np.zeros(0, dtype=np.int64)
    assert judged_levels(none, none, none, 0).tolist() == []


def test_reachable_level_is_the_most_outputs_of_one_question_with_two_votes():
    # Question 0: three outputs, two with two YES/NO votes (one has a single vote);
    # question 1: one output with two; question 2: one output with one vote only.
    yes = np.array([2, 1, 1, 1, 0])
    no = np.array([0, 1, 0, 1, 1])
    question = np.array([0, 0, 0, 1, 2])
    assert reachable_level(yes, no, question) == 2
    assert reachable_level(np.array([1]), np.array([0]), np.array([0])) == 0
    assert reachable_level(np.array([], int), np.array([], int), np.array([], int)) == 0
