from django import template

register = template.Library()


@register.filter
def pct(value) -> str:
    """Show a fraction as a percentage with one decimal; n/a when undefined."""
    if value is None:
        return "n/a"
    return f"{100 * value:.1f}"


@register.filter
def pct_interval(low, high) -> str:
    """Show an interval of fractions as "low–high" percentages; n/a once when undefined."""
    if low is None or high is None:
        return "n/a"
    return f"{pct(low)}–{pct(high)}"
