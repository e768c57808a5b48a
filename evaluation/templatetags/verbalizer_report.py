from django import template

register = template.Library()


@register.filter
def pct(value) -> str:
    """Show a fraction as a percentage with one decimal; n/a when undefined."""
    if value is None:
        return "n/a"
    return f"{100 * value:.1f}"
