"""Template filters for amounts of money, as the reports show them."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

from django import template

register = template.Library()

CENT = Decimal("0.01")


@register.filter
def usd(value) -> str:
    """Show dollars as the InFoBench report does: two decimals, halves up, thousands grouped
    ("$1,234.57"); "<$0.01" for a cost under half a cent that is not nothing (written "$0.00"
    it would read as free), "$0.00" for nothing. A value that is no number is shown as is."""
    try:
        amount = Decimal(str(value))
    except (InvalidOperation, ValueError):
        return str(value)
    if not amount.is_finite():
        return str(value)
    if 0 < abs(amount) < CENT / 2:
        return "<$0.01" if amount > 0 else "-<$0.01"
    text = f"{amount.quantize(CENT, ROUND_HALF_UP):,.2f}"
    return f"-${text[1:]}" if text.startswith("-") else f"${text}"
