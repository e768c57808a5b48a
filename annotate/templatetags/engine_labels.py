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
