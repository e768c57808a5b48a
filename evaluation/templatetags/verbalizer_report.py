from django import template

from evaluation.report_formats import _fixed
from evaluation.verbalizer import report
from evaluation.verbalizer.formats import kappa_interval_text, kappa_text
from evaluation.verbalizer.slices import SET_PROMPTS, SLICE_WHO

register = template.Library()


@register.filter
def pct(value) -> str:
    """Show a fraction as a percentage with one decimal, halves rounded up as the report's
    LaTeX and Markdown tables round them (0.8125 is 81.3 in both); n/a when undefined."""
    return _fixed(value, scale=100, digits=1, minus="-")


@register.filter
def pct_interval(low, high) -> str:
    """Show an interval of fractions as "low–high" percentages; n/a once when undefined."""
    if low is None or high is None:
        return "n/a"
    return f"{pct(low)}–{pct(high)}"


@register.filter
def kappa(value) -> str:
    """Show a kappa as the report's Markdown and LaTeX tables do ("0.063"; n/a when undefined)."""
    return kappa_text(value)


@register.filter
def kappa_interval(low, high) -> str:
    """Show a kappa interval as the report's Markdown does ("-0.500 to 0.200"; n/a)."""
    return kappa_interval_text(low, high)


@register.filter
def system_label(system: str, prompts: str) -> str:
    """Name a row's system as the report's tables do ("gpt-4, on people's prompts")."""
    return report.system_label(system, prompts)


@register.filter
def prompts_heading(prompts: str) -> str:
    """Head the rows of one kind of prompts: the set's, or those some people answered."""
    if prompts == SET_PROMPTS:
        return "Every prompt of the set each model answered"
    return f"On the prompts {SLICE_WHO[prompts]} answered: models beside them on the same prompts"
