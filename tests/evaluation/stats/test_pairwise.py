import numpy as np
import pytest

from evaluation.stats import drfr_categories, score_categories, system_pairs


def test_pairs_in_combinations_order():
    assert system_pairs(4) == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    assert system_pairs(1) == []


def test_categories_for_each_instruction_and_pair():
    # Systems 0, 1, 2 on two instructions. Pairs: (0, 1), (0, 2), (1, 2).
    yes = np.array([[2, 1, 0], [1, 1, 3]])
    counted = np.array([[3, 3, 0], [2, 2, 4]])
    categories, defined = drfr_categories(yes, counted)
    assert categories.dtype == np.int8
    assert categories.tolist() == [[1, 0, 0], [0, -1, -1]]
    assert defined.tolist() == [[True, False, False], [True, True, True]]


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ((1, 3), (2, 6), 0),  # 0.333... vs 0.333...: equal fractions
        ((3, 9), (1, 3), 0),
        ((1, 10), (3, 30), 0),
        ((7, 49), (1, 7), 0),
        ((2, 3), (66, 100), 1),  # 0.6666... > 0.66: not a tie
        ((66, 100), (2, 3), -1),
        ((333333333, 1000000000), (1, 3), -1),
    ],
)
def test_fractions_are_compared_exactly(a, b, expected):
    yes = np.array([[a[0], b[0]]])
    counted = np.array([[a[1], b[1]]])
    categories, defined = drfr_categories(yes, counted)
    assert categories.tolist() == [[expected]]
    assert defined.tolist() == [[True]]


def test_fractions_that_are_equal_as_floats_are_still_ordered():
    # 1/3 and 10**16/(3*10**16 + 1) round to the same float64, yet 1/3 is larger.
    counted_b = 3 * 10**16 + 1
    assert 10**16 / counted_b == 1 / 3
    categories, _ = drfr_categories(np.array([[1, 10**16]]), np.array([[3, counted_b]]))
    assert categories.tolist() == [[1]]


def test_yes_above_counted_is_refused():
    with pytest.raises(ValueError, match="0..counted"):
        drfr_categories(np.array([[3, 1]]), np.array([[2, 1]]))


def test_score_categories():
    scores = np.array([[5, 3, 3], [0, 2, 4]])
    categories, defined = score_categories(scores)
    assert categories.tolist() == [[1, 1, 0], [0, 0, -1]]
    assert defined.tolist() == [[True, True, True], [False, False, True]]


def test_scores_outside_the_scale_are_refused():
    with pytest.raises(ValueError, match="1..5"):
        score_categories(np.array([[6, 1]]))
