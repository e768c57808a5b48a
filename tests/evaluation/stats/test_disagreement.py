import numpy as np
import pytest

from evaluation.stats import MISSING, NO, UNKNOWN, YES, disagreement_levels, level_distribution

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
