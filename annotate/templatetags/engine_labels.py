"""Template filters naming what an engine endpoint costs, as its choices in forms do."""

from __future__ import annotations

from django import template

from annotate.engine.forms import endpoint_cost_label as _endpoint_cost_label
from annotate.engine.models import Endpoint

register = template.Library()


@register.filter
def endpoint_cost_label(endpoint: Endpoint) -> str:
    """Say whether the endpoint bills nobody (researchers may use it) or is for admins only."""
    return _endpoint_cost_label(endpoint)


@register.filter
def model_size(size_b: float | None) -> str:
    """A model's size in billions of parameters as people write it: "1B", "70B", "1.5B" (the
    float column read back showed "1.0" and "70.0"); "" when not given."""
    if size_b is None:
        return ""
    return f"{size_b:g}B"
