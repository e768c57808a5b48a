import pytest

from evaluation.verbalizer.parsing import (
    INVALID,
    NEGATIVE,
    POSITIVE,
    normalise,
    parse_lenient,
    parse_strict,
)


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("positive", POSITIVE),
        ("  Negative.\n", NEGATIVE),
        ('"POSITIVE"', POSITIVE),
        ("**negative**", NEGATIVE),
        ("positive sentiment", INVALID),
        ("The answer is positive.", INVALID),
        ("", INVALID),
    ],
)
def test_strict_accepts_only_the_bare_word(reply, expected):
    assert parse_strict(reply, "positive", "negative") == expected


def test_strict_on_two_word_labels_and_underscores():
    assert parse_strict("not_entailment", "entailment", "not entailment") == NEGATIVE
    assert parse_strict("Not   entailment!", "entailment", "not entailment") == NEGATIVE
    assert parse_strict("entailment", "entailment", "not entailment") == POSITIVE


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        # After the last marker the word right after it counts.
        ("The review praises the film. So the answer is negative.", NEGATIVE),
        ("Answer: foo", POSITIVE),
        ("I first thought the answer is foo, but the answer is: bar", NEGATIVE),
        ('Positive words abound... Therefore, the answer is "negative".', NEGATIVE),
        # A marker followed by something else is invalid, even if a word occurs earlier.
        ("It is positive. The answer is unclear.", INVALID),
        # No marker: exactly one of the words must occur.
        ("positive", POSITIVE),
        ("I would say positive, clearly positive.", POSITIVE),
        ("Could be positive or negative.", INVALID),
        ("No idea.", INVALID),
        # Whole words only: "positively" is not "positive".
        ("positively negative", NEGATIVE),
    ],
)
def test_lenient_rule(reply, expected):
    words = ("foo", "bar") if "foo" in reply or "bar" in reply else ("positive", "negative")
    assert parse_lenient(reply, *words) == expected


def test_lenient_reads_the_longer_label_first():
    assert parse_lenient("So the answer is not entailment.", "entailment", "not entailment") == 0
    assert parse_lenient("It is not entailment here.", "entailment", "not entailment") == 0
    assert parse_lenient("The answer is entailment", "entailment", "not entailment") == 1
    # Both words as words on their own: invalid.
    assert parse_lenient("entailment vs not entailment", "entailment", "not entailment") == -1


def test_lenient_on_digits():
    assert parse_lenient("Let's think. Step 1: ... The answer is 0.", "1", "0") == NEGATIVE
    assert parse_lenient("Answer: 1", "0", "1") == NEGATIVE


def test_normalise():
    assert normalise('  "Not_Entailment."  ') == "not entailment"
