import numpy as np
import pytest

from evaluation.stats import MISSING, NO, UNKNOWN, YES, accuracy, pld
from evaluation.stats.agreement import accuracy_from_pairs, label_pairs

M, N, Y, U = MISSING, NO, YES, UNKNOWN


def test_accuracy_leaves_a_source_unknown_out_by_default():
    gold = np.array([Y, Y, N, N, U, Y, Y])
    source = np.array([Y, N, N, U, Y, M, Y])
    # Appendix A.3: compared are items 0-2 and 6 (item 3 is the source's UNKNOWN, item 4 has
    # no gold majority, item 5 no source label). Agree on 0, 2, 6.
    result = accuracy(source, gold)
    assert result.acc == pytest.approx(3 / 4)
    assert (result.compared, result.skipped) == (4, 3)


def test_accuracy_counting_a_source_unknown_as_wrong():
    gold = np.array([Y, Y, N, N, U, Y, Y])
    source = np.array([Y, N, N, U, Y, M, Y])
    # Compared: items 0-3 and 6; agree on 0, 2, 6; item 3's UNKNOWN is a disagreement.
    result = accuracy(source, gold, unknown_is_wrong=True)
    assert result.acc == pytest.approx(3 / 5)
    assert (result.compared, result.skipped) == (5, 2)


def test_accuracy_with_nothing_to_compare():
    result = accuracy(np.array([Y, M]), np.array([U, Y]))
    assert result.acc is None
    assert (result.compared, result.skipped) == (0, 2)


def test_accuracy_refuses_misaligned_arrays():
    with pytest.raises(ValueError, match="aligned"):
        accuracy(np.array([Y, N]), np.array([Y]))


@pytest.mark.parametrize("unknown_is_wrong", [False, True])
def test_accuracy_from_pair_counts_of_groups_added_up(unknown_is_wrong):
    """The items of the first test in two groups: each group's table gives that group's
    accuracy, and the tables added up give the accuracy of all the items."""
    gold = np.array([Y, Y, N, N, U, Y, Y])
    source = np.array([Y, N, N, U, Y, M, Y])
    groups = np.array([1, 0, 1, 0, 0, 1, 1])
    pairs = label_pairs(source, gold, groups, 2)
    assert pairs.shape == (2, 4, 4) and pairs.sum() == 7
    assert pairs[1, Y + 1, Y + 1] == 2 and pairs[1, M + 1, Y + 1] == 1
    for group in (0, 1):
        assert accuracy_from_pairs(pairs[group], unknown_is_wrong=unknown_is_wrong) == accuracy(
            source[groups == group], gold[groups == group], unknown_is_wrong=unknown_is_wrong
        )
    together = accuracy_from_pairs(pairs.sum(axis=0), unknown_is_wrong=unknown_is_wrong)
    assert together == accuracy(source, gold, unknown_is_wrong=unknown_is_wrong)
    assert together.acc == pytest.approx(3 / 5 if unknown_is_wrong else 3 / 4)


def test_label_pairs_refuse_codes_that_are_not_labels():
    with pytest.raises(ValueError, match="source labels must be codes -1..2"):
        label_pairs(np.array([Y, 3]), np.array([Y, Y]), np.zeros(2, dtype=int), 1)


def test_pld_distribution_and_weighted_mean():
    categories = np.array([[1, 0, -1], [1, 0, 0]])
    gold = np.array([[1, 1, 1], [-1, 0, 1]])
    defined = np.array([[True, True, True], [True, False, False]])
    # Distances on defined entries: 0, 1, 2, 2.
    result = pld(categories, gold, defined)
    assert result.items == 4
    assert (result.pld0, result.pld1, result.pld2) == pytest.approx((25.0, 25.0, 50.0))
    assert result.wpld == pytest.approx((0 * 1 + 1 * 1 + 2 * 2) / 4)


def test_pld_with_nothing_defined():
    result = pld(np.array([1]), np.array([-1]), np.array([False]))
    assert result == type(result)(None, None, None, None, items=0)


def test_pld_refuses_categories_outside_minus_one_to_one():
    with pytest.raises(ValueError, match="-1, 0, 1"):
        pld(np.array([3]), np.array([0]), np.array([True]))
