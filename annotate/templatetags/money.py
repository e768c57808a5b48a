"""Template filters for amounts of money, as the pages and commands show them."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

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
    try:
        amount = Decimal(str(value))
    except (InvalidOperation, ValueError):
        return str(value)
    if not amount.is_finite():
        return str(value)
    sign = "-" if amount < 0 else ""
    amount = abs(amount)
    if 0 < amount < CENT:
        rounded = _significant(amount, SUB_CENT_DIGITS)
        if rounded < CENT:
            return f"{sign}${rounded:f}"
        amount = rounded  # 0.00996 is $0.01 to two digits: shown in cents as such
    return f"{sign}${amount.quantize(CENT, ROUND_HALF_UP):,.2f}"


def _significant(amount: Decimal, digits: int) -> Decimal:
    """`amount` (> 0) rounded half up to `digits` significant digits, trailing zeros dropped."""
    exponent = amount.adjusted() - digits + 1
    return amount.quantize(Decimal(1).scaleb(exponent), ROUND_HALF_UP).normalize()
