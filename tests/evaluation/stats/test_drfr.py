import numpy as np
import pytest

from evaluation.stats import MISSING, NO, UNKNOWN, YES, drfr_by_bits, drfr_counts, ratio

M, N, Y, U = MISSING, NO, YES, UNKNOWN

# Group 0: YES, YES, NO, UNKNOWN; group 1: NO, MISSING; group 2: UNKNOWN only; group 3: no item.
VALUES = np.array([Y, Y, N, U, N, M, U], dtype=np.int8)
GROUPS = np.array([0, 0, 0, 0, 1, 1, 2])


def test_counts_leave_unknown_and_missing_out_by_default():
    yes, counted = drfr_counts(VALUES, GROUPS, 4)
    assert yes.tolist() == [2, 0, 0, 0]
    assert counted.tolist() == [3, 1, 0, 0]
    assert yes.dtype == np.int64 and counted.dtype == np.int64


def test_unknown_as_no_counts_every_item():
    yes, counted = drfr_counts(VALUES, GROUPS, 4, unknown_as_no=True)
    assert yes.tolist() == [2, 0, 0, 0]
    assert counted.tolist() == [4, 2, 1, 0]


def test_ratio_is_nan_where_nothing_counted():
    drfr = ratio(np.array([2, 0, 0, 0]), np.array([3, 1, 0, 0]))
    assert drfr[0] == pytest.approx(2 / 3)
    assert drfr[1] == 0.0
    assert np.isnan(drfr[2]) and np.isnan(drfr[3])
    assert drfr.dtype == np.float64


def test_group_ids_out_of_range_are_refused():
    with pytest.raises(ValueError, match="0..1"):
        drfr_counts(VALUES, GROUPS, 2)
    with pytest.raises(ValueError, match="one entry per item"):
        drfr_counts(VALUES, GROUPS[:3], 4)


def test_by_bits_counts_an_item_under_each_of_its_bits():
    values = np.array([Y, N, Y, U, Y])
    groups = np.array([0, 0, 1, 1, 1])
    # Content 1, Linguistic 2, Style 4, Format 8, Number 16.
    masks = np.array([1 | 2, 2, 1 | 16, 4, 0])
    yes, counted = drfr_by_bits(values, groups, 2, masks, 5)
    assert yes.shape == counted.shape == (2, 5)
    assert yes.tolist() == [[1, 1, 0, 0, 0], [1, 0, 0, 0, 1]]
    assert counted.tolist() == [[1, 2, 0, 0, 0], [1, 0, 0, 0, 1]]
    yes, counted = drfr_by_bits(values, groups, 2, masks, 5, unknown_as_no=True)
    assert yes.tolist() == [[1, 1, 0, 0, 0], [1, 0, 0, 0, 1]]
    assert counted.tolist() == [[1, 2, 0, 0, 0], [1, 0, 1, 0, 1]]


def test_by_bits_summed_over_groups_matches_counts_per_bit():
    rng = np.random.default_rng(7)
    values = rng.choice([M, N, Y, U], size=500)
    groups = rng.integers(0, 9, size=500)
    masks = rng.integers(1, 32, size=500)
    yes, counted = drfr_by_bits(values, groups, 9, masks, 5)
    for bit in range(5):
        has_bit = (masks >> bit) & 1 == 1
        expected_yes, expected_counted = drfr_counts(values[has_bit], groups[has_bit], 9)
        assert yes[:, bit].tolist() == expected_yes.tolist()
        assert counted[:, bit].tolist() == expected_counted.tolist()


@pytest.mark.parametrize("unknown_as_no", [False, True])
def test_counts_of_label_codes_equal_counts_of_any_values(unknown_as_no):
    """Label codes are counted in one pass per group and code; values of another kind (floats,
    a code outside -1..2) item by item: the same counts."""
    rng = np.random.default_rng(5)
    values = rng.integers(-1, 3, 400).astype(np.int8)
    groups = rng.integers(0, 9, 400)
    counted_codes = drfr_counts(values, groups, 9, unknown_as_no=unknown_as_no)
    counted_floats = drfr_counts(values.astype(float), groups, 9, unknown_as_no=unknown_as_no)
    for codes, floats in zip(counted_codes, counted_floats, strict=True):
        assert codes.dtype == np.int64 and codes.tolist() == floats.tolist()
    # A value 7 is neither YES nor NO: it counts only when every given item counts.
    with_seven = drfr_counts(
        np.append(values, 7), np.append(groups, 0), 9, unknown_as_no=unknown_as_no
    )
    assert with_seven[0].tolist() == counted_codes[0].tolist()
    assert with_seven[1][0] == counted_codes[1][0] + unknown_as_no
