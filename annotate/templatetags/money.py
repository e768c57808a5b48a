"""Template filters for amounts of money, as the pages and commands show them."""

from __future__ import annotations

from decimal import ROUND_CEILING, ROUND_HALF_UP, Decimal, InvalidOperation

from django import template

register = template.Library()

CENT = Decimal("0.01")
# Digits kept of an amount under a cent: "$0.0042" reads, "$0.004237" is noise, "$0.00" a lie.
SUB_CENT_DIGITS = 2


@register.filter
def usd(value) -> str:
    """Show dollars as people read them: from a cent up, two decimals, halves up, thousands
    grouped ("$1,234.57"); under a cent, the first two significant digits ("$0.0042",
    "$0.00012"), since "$0.00" would read as free; "$0.00" only for nothing. Used wherever an
    estimate or a cost is shown (pages, the commands' lines), so "$0.012345" never is. A value
    that is no number is shown as is."""
    return _dollars(value, ROUND_HALF_UP)


@register.filter
def usd_at_most(value) -> str:
    """Show an upper bound (an estimate's worst case, a spending cap) as `usd` does, but
    rounded up at the same precision: "at most $0.68" for $0.674120, "$0.0043" for $0.00421.
    Rounded half up it read "at most $0.67", and a cap copied from that line stopped the run."""
    return _dollars(value, ROUND_CEILING)


def _dollars(value, rounding: str) -> str:
    """The one rule of `usd` and `usd_at_most`, rounding as `rounding` (a `decimal` mode)."""
    try:
        amount = Decimal(str(value))
    except (InvalidOperation, ValueError):
        return str(value)
    if not amount.is_finite():
        return str(value)
    if 0 < abs(amount) < CENT:
        rounded = _significant(amount, SUB_CENT_DIGITS, rounding)
        if abs(rounded) < CENT:
            return _signed(rounded, f"{abs(rounded):f}")
        amount = rounded  # 0.00996 is $0.01 to two digits: shown in cents as such
    rounded = amount.quantize(CENT, rounding)
    return _signed(rounded, f"{abs(rounded):,.2f}")


def _significant(amount: Decimal, digits: int, rounding: str) -> Decimal:
    """`amount` (not 0) rounded to `digits` significant digits, trailing zeros dropped."""
    exponent = amount.adjusted() - digits + 1
    return amount.quantize(Decimal(1).scaleb(exponent), rounding).normalize()


def _signed(amount: Decimal, digits: str) -> str:
    """Put the dollar sign before `digits`, and a minus before it when `amount` is below 0."""
    return f"{'-' if amount < 0 else ''}${digits}"
