import pytest

from evaluation.judges.parsing import NO, UNKNOWN, YES, parse_answer, parse_numbered_answers


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("YES", YES),
        ("yes, it is.", YES),
        ("No.", NO),
        ("**NO**", NO),
        ('"Yes"', YES),
        ("Not really, the text has two sentences.", UNKNOWN),
        ("Nothing in the text answers this.", UNKNOWN),
        ("NOTHING", UNKNOWN),
        ("I do not KNOW.", UNKNOWN),
        ("The answer is YES.", YES),
        ("The answer is no", NO),
        ("CANNOT say; NOT sure", UNKNOWN),
        ("It could be YES or NO", UNKNOWN),
        ("", UNKNOWN),
        ("   ", UNKNOWN),
        (None, UNKNOWN),
        ("Yesterday it was", UNKNOWN),
        ("Noted. YES", YES),
    ],
)
def test_parse_answer(reply, expected):
    assert parse_answer(reply) == expected


def test_numbered_answers_by_number_with_missing_ones_unknown():
    assert parse_numbered_answers("2. NO\n1. YES\n4. maybe", 4) == [YES, NO, UNKNOWN, UNKNOWN]


def test_numbered_answers_unnumbered_lines_in_order_when_count_matches():
    assert parse_numbered_answers("YES\nNO\n", 2) == [YES, NO]
    assert parse_numbered_answers("YES\nNO\n", 3) == [UNKNOWN, UNKNOWN, UNKNOWN]
