"""The human name of a crowd platform, for pages: {{ publication.platform|platform_label }};
whether a publication was made on the other MTurk endpoint ({{ publication|other_endpoint }});
a worker's time on a task ({{ row.time_spent|minutes_seconds }}); and a fresh idempotency
token for a form that pays ({% request_token %}).

Loaded for every template (TEMPLATES OPTIONS "builtins"), so crowd pages need no {% load %}.
"""

import uuid
from datetime import timedelta

from django import template

from annotate.crowd.platforms import platform_label as _platform_label
from annotate.crowd.platforms import publication_on_other_endpoint

register = template.Library()


@register.filter
def platform_label(name: str) -> str:
    return _platform_label(name)


@register.filter
def other_endpoint(publication) -> bool:
    """True when MTURK_SANDBOX points the publication's platform at the other endpoint than the
    one it was made on: a sync, a verdict or an expiry of it is refused."""
    return publication_on_other_endpoint(publication)


@register.filter
def minutes_seconds(spent: timedelta | None) -> str:
    """A duration as a reviewer reads it: "45 s", "12 min 5 s", "2 h 3 min"; "–" for none."""
    if spent is None:
        return "–"
    seconds = round(spent.total_seconds())
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min {seconds} s" if minutes else f"{seconds} s"


@register.simple_tag
def request_token() -> str:
    """A new token for one rendering of a form that spends money: the service takes the same
    token twice (a double click, a resent form) as one request."""
    return uuid.uuid4().hex
