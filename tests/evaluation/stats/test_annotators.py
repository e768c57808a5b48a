import math

import numpy as np

from evaluation.stats.annotators import agreement_with_expert_majority, agreement_with_others

YES, NO, UNK = 1, 0, 2


def test_expert_majority_is_leave_one_out_and_skips_ties():
    # Three experts (0, 1, 2) and a crowd worker (3) on two items.
    # item 0: YES, YES, NO | worker YES.  item 1: NO, YES, UNKNOWN | worker NO.
    item = [0, 0, 0, 0, 1, 1, 1, 1]
    annotator = [0, 1, 2, 3, 0, 1, 2, 3]
    value = [YES, YES, NO, YES, NO, YES, UNK, NO]
    shares = agreement_with_expert_majority(
        item, annotator, value, np.array([True, True, True, False]), 2
    )
    # Expert 0: item 0 others (YES, NO) tie -> skipped; item 1 others (YES, UNK) -> YES, 0 said NO.
    assert shares[0] == 0.0
    # Expert 1: item 0 others (YES, NO) tie; item 1 others (NO, UNK) -> NO, 1 said YES.
    assert shares[1] == 0.0
    # Expert 2: item 0 others YES, YES -> YES vs NO; item 1 others NO, YES tie -> 0 of 1.
    assert shares[2] == 0.0
    # Worker: item 0 majority YES (2-1) agrees; item 1 NO 1 vs YES 1 tie -> 1 of 1.
    assert shares[3] == 1.0


def test_agreement_with_others_counts_equal_pairs():
    # item 0: a YES, b YES, c NO; item 1: a NO, b UNKNOWN; item 2: c alone.
    item = [0, 0, 0, 1, 1, 2]
    annotator = [0, 1, 2, 0, 1, 2]
    value = [YES, YES, NO, NO, UNK, YES]
    shares = agreement_with_others(item, annotator, value, 4, 3)
    assert shares[0] == 1 / 3  # pairs: (a,b) equal, (a,c) not, item 1 (a,b) not
    assert shares[1] == 1 / 3
    assert shares[2] == 0.0  # item 0 two unequal pairs; item 2 has no pair
    assert math.isnan(shares[3])


def test_agreement_with_others_counts_only_the_marked_others():
    # Two people (0, 1) and a judge (2): item 0: YES, NO, YES; item 1: YES, YES, NO.
    item = [0, 0, 0, 1, 1, 1]
    annotator = [0, 1, 2, 0, 1, 2]
    value = [YES, NO, YES, YES, YES, NO]
    people = np.array([True, True, False])
    shares = agreement_with_others(item, annotator, value, 3, 2, is_other=people)
    # Person 0 against person 1 only: item 0 unequal, item 1 equal: 1 of 2 (with the judge's
    # labels it would be 2 of 4, and 1 of 2 again by chance, so person 1 tells them apart).
    assert shares[0] == 1 / 2
    # Person 1 against person 0: 1 of 2 (with the judge: item 0 NO vs YES, YES; item 1 YES vs
    # YES, NO: 1 of 4).
    assert shares[1] == 1 / 2
    # The judge against the two people: item 0 YES vs YES, NO; item 1 NO vs YES, YES: 1 of 4.
    assert shares[2] == 1 / 4
    everyone = agreement_with_others(item, annotator, value, 3, 2)
    assert everyone[1] == 1 / 4
