"""Scoring on plain arrays, against numbers computed by hand (no database)."""

import numpy as np
import pytest

from evaluation.verbalizer.scoring import Records, agreement_counts, cells, majority_codes


def records(item, group, valid, correct):
    n = len(item)
    valid, correct = np.array(valid, bool), np.array(correct, bool)
    return Records(
        source=np.array(["m"] * n, dtype=object),
        prompts=np.array(["set"] * n, dtype=object),
        item=np.array(item),
        dataset=np.array(["d"] * n, dtype=object),
        group=np.array(group, dtype=object),
        mapping=np.array(["x"] * n, dtype=object),
        mode=np.array(["direct"] * n, dtype=object),
        valid={"strict": valid, "lenient": valid},
        correct={"strict": correct, "lenient": correct},
        choice=np.where(valid, 1, -1),
    )


def test_accuracy_is_correct_over_valid_and_invalid_is_a_share_of_n():
    # Group a: 4 answers, 1 invalid, 2 right of 3 valid. Group b: 2 answers, both invalid.
    rec = records(
        item=[1, 2, 3, 4, 1, 2],
        group=["a", "a", "a", "a", "b", "b"],
        valid=[1, 1, 1, 0, 0, 0],
        correct=[1, 1, 0, 0, 0, 0],
    )
    out = {row["key"]: row for row in cells(rec, np.ones(6, bool), ["group"])}
    assert out[("a",)]["n"] == 4
    assert out[("a",)]["accuracy_lenient"] == pytest.approx(2 / 3)
    assert out[("a",)]["invalid_lenient"] == 0.25
    assert out[("b",)]["accuracy_lenient"] is None
    assert out[("b",)]["invalid_lenient"] == 1.0
    assert out[("b",)]["ci_lenient"] == (None, None)
    low, high = out[("a",)]["ci_lenient"]
    assert 0 <= low <= 2 / 3 <= high <= 1


def test_an_all_correct_cell_has_no_interval_and_the_mask_is_respected():
    """Every resample of an all-correct cell is 100 %: the interval read [1, 1], certainty
    where the bootstrap measured no spread. None; the masked-out wrong item stays out."""
    rec = records(item=[1, 2, 3], group=["a"] * 3, valid=[1, 1, 1], correct=[1, 1, 0])
    (row,) = cells(rec, np.array([True, True, False]), ["group"])
    assert (row["n"], row["accuracy_strict"], row["ci_strict"]) == (2, 1.0, (None, None))
    (row,) = cells(rec, np.ones(3, bool), ["group"])
    assert row["ci_strict"][0] < row["ci_strict"][1]


def test_majority_ties_are_invalid():
    prompts, majority = majority_codes(np.array([5, 5, 5, 7, 7, 9]), np.array([1, 1, 0, 1, 0, 0]))
    assert prompts.tolist() == [5, 7, 9]
    assert majority.tolist() == [1, -1, 0]


def test_agreement_counts_keep_the_most_common_number_of_raters():
    # Prompt 0: 3 answers (2 pos, 1 neg); prompt 1: 3 answers (0 pos); prompt 2: 2 answers.
    counts = agreement_counts(
        np.array([0, 0, 0, 1, 1, 1, 2, 2]), np.array([1, 1, 0, 0, 0, 0, 1, 1])
    )
    assert counts.tolist() == [[1, 2], [3, 0]]


def test_a_group_is_the_mean_of_its_datasets_and_mappings_as_the_paper_averages():
    """Paper §3.2: each instruction group "averaged over datasets and verbalizers". Dataset A
    (8 items, all right) and dataset B (2 items, all wrong): the group reads 50 %, not the
    80 % of pooling every answer, which let the larger dataset weigh more."""
    rec = records(item=list(range(10)), group=["g"] * 10, valid=[1] * 10, correct=[1] * 8 + [0] * 2)
    rec.dataset = np.array(["A"] * 8 + ["B"] * 2, dtype=object)
    (row,) = cells(rec, np.ones(10, bool), ["group"])
    assert (row["n"], row["accuracy_lenient"], row["invalid_lenient"]) == (10, 0.5, 0.0)
    # Per dataset, a cell is its own pooled accuracy.
    by_dataset = {
        r["key"]: r["accuracy_lenient"] for r in cells(rec, np.ones(10, bool), ["dataset"])
    }
    assert by_dataset == {("A",): 1.0, ("B",): 0.0}
    # A piece with no valid reply is left out of the mean; the invalid share stays of all answers.
    rec.valid = {rule: np.array([1] * 8 + [0] * 2, bool) for rule in ("strict", "lenient")}
    (row,) = cells(rec, np.ones(10, bool), ["group"])
    assert (row["accuracy_lenient"], row["invalid_lenient"]) == (1.0, 0.2)


def test_a_groups_interval_is_of_the_same_mean_over_datasets_as_its_accuracy():
    """Dataset A (8 items, all right) and B (2 items, all wrong) read exactly 50 % in any
    resample holding both. Items drawn from all ten at once left B out of one resample in ten,
    whose "mean" was A's 100 % alone: the interval read 50-100 % around an exact 50 %. Drawn
    within datasets every resample reads 50 %: no spread measured, no interval (not [50, 50])."""
    rec = records(item=list(range(10)), group=["g"] * 10, valid=[1] * 10, correct=[1] * 8 + [0] * 2)
    rec.dataset = np.array(["A"] * 8 + ["B"] * 2, dtype=object)
    (row,) = cells(rec, np.ones(10, bool), ["group"])
    assert (row["accuracy_lenient"], row["ci_lenient"]) == (0.5, (None, None))


def test_a_groups_accuracy_counts_a_one_item_column_whatever_the_bootstrap_leaves_out():
    """Dataset A: items 0-2, right, right, wrong (2/3). Dataset B: item 3 answered validly and
    wrongly (0/1), item 4 invalid. The group reads (2/3 + 0) / 2 = 1/3 (pooled: 2/4; without
    B's one-item column: 2/3). A resample drawing item 4 twice has no valid answer of B and its
    mean is A's alone, but the point estimate is over all the data, not over the resamples."""
    rec = records(
        item=[0, 1, 2, 3, 4],
        group=["g"] * 5,
        valid=[1, 1, 1, 1, 0],
        correct=[1, 1, 0, 0, 0],
    )
    rec.dataset = np.array(["A", "A", "A", "B", "B"], dtype=object)
    (row,) = cells(rec, np.ones(5, bool), ["group"])
    assert row["accuracy_lenient"] == pytest.approx(1 / 3)
    assert row["invalid_lenient"] == pytest.approx(1 / 5)
    low, high = row["ci_lenient"]
    assert 0.0 <= low <= 1 / 3 <= high <= 1.0
    # B alone: one valid item, so its accuracy 0 has no interval (only the interval is null).
    by_dataset = {r["key"]: r for r in cells(rec, np.ones(5, bool), ["dataset"])}
    assert by_dataset[("B",)]["accuracy_lenient"] == 0.0
    assert by_dataset[("B",)]["ci_lenient"] == (None, None)
    # Every item of B answered validly and wrongly, one item in B: the same 1/3 with B's
    # column fixed at 0 in every resample.
    rec = records(item=[0, 1, 2, 3], group=["g"] * 4, valid=[1] * 4, correct=[1, 1, 0, 0])
    rec.dataset = np.array(["A", "A", "A", "B"], dtype=object)
    (row,) = cells(rec, np.ones(4, bool), ["group"])
    assert row["accuracy_lenient"] == pytest.approx(1 / 3)
    low, high = row["ci_lenient"]
    assert (low, high) != (None, None) and 0.0 <= low <= 1 / 3 <= high <= 0.5
