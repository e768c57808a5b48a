from django import template

from evaluation.report_formats import _fixed

register = template.Library()


@register.filter
def whole_percent(value) -> str:
    """Show a fraction as a whole percentage, halves rounded up as the reports round them
    (0.125 is "13", where `{% widthratio %}` and Python's round gave "12"); n/a when undefined."""
    return _fixed(value, scale=100, digits=0, minus="-")
