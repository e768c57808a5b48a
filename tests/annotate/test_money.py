"""The money filters every estimate and cost is shown through (annotate/templatetags/money.py)."""

from decimal import Decimal

import pytest

from annotate.templatetags.money import usd, usd_at_most


@pytest.mark.parametrize(
    "amount, shown",
    [
        ("0", "$0.00"),  # nothing: the only amount shown as "$0.00"
        ("0.01", "$0.01"),
        ("0.012345", "$0.01"),  # an estimate's six stored decimals, in cents
        ("0.096480", "$0.10"),  # halves up
        ("1234.567891", "$1,234.57"),  # thousands grouped
        ("0.0042", "$0.0042"),  # under a cent: enough digits not to read as free
        ("0.004237", "$0.0042"),  # two significant digits, not six decimals
        ("0.005", "$0.005"),
        ("0.000123", "$0.00012"),
        ("0.0000001", "$0.0000001"),  # never in exponent notation
        ("0.00996", "$0.01"),  # a cent once rounded: shown in cents
        ("-0.0042", "-$0.0042"),
        ("-12.5", "-$12.50"),
    ],
)
def test_usd_shows_cents_from_a_cent_up_and_significant_digits_below(amount, shown):
    assert usd(Decimal(amount)) == shown
    assert usd(amount) == shown  # as a template hands it a string


@pytest.mark.parametrize("value", ["", "n/a", None, "NaN", "Infinity"])
def test_usd_shows_what_is_no_amount_as_it_is(value):
    assert usd(value) == str(value)


@pytest.mark.parametrize(
    "amount, shown",
    [
        ("0", "$0.00"),
        ("0.674", "$0.68"),  # half up read "at most $0.67", under the worst case
        ("0.674120", "$0.68"),
        ("0.67", "$0.67"),  # a whole cent stays as it is
        ("0.010001", "$0.02"),
        ("1234.561", "$1,234.57"),
        ("0.00421", "$0.0043"),  # under a cent: up at two significant digits
        ("0.0042", "$0.0042"),
        ("0.009901", "$0.01"),  # a cent once rounded up: shown in cents
        ("-0.674", "-$0.67"),  # up is toward zero below it
    ],
)
def test_usd_at_most_rounds_up_at_the_same_precision(amount, shown):
    """An upper bound shown rounded half up understated it: a cap copied from "at most $0.67"
    (a worst case of $0.674) stopped the run."""
    assert usd_at_most(Decimal(amount)) == shown
    assert usd_at_most(amount) == shown
    assert Decimal(shown.replace("$", "").replace(",", "")) >= Decimal(amount)


@pytest.mark.parametrize("value", ["", "n/a", None, "NaN"])
def test_usd_at_most_shows_what_is_no_amount_as_it_is(value):
    assert usd_at_most(value) == str(value)
