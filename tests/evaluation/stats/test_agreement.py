import numpy as np
import pytest

from evaluation.stats import MISSING, NO, UNKNOWN, YES, accuracy, pld

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
