"""The money filter every estimate and cost is shown through (annotate/templatetags/money.py)."""

from decimal import Decimal

import pytest

from annotate.templatetags.money import usd


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
