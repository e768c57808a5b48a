"""The human name of a crowd platform, for pages: {{ publication.platform|platform_label }};
and a fresh idempotency token for a form that pays ({% request_token %}).

Loaded for every template (TEMPLATES OPTIONS "builtins"), so crowd pages need no {% load %}.
"""

import uuid

from django import template

from annotate.crowd.platforms import platform_label as _platform_label

register = template.Library()


@register.filter
def platform_label(name: str) -> str:
    return _platform_label(name)


@register.filter
def answers_by_system(submission: dict | None) -> list[tuple[str, str]]:
    """The worker's answers per shown system: [("System A", "YES NO UNKNOWN"), ...]."""
    from annotate.selectors.work import system_label
    from annotate.services.submissions import FIELD_PATTERN

    answers = (submission or {}).get("labels") or {}
    by_position: dict[int, list[tuple[int, str]]] = {}
    for name, value in answers.items():
        match = FIELD_PATTERN.match(name)
        if match and match.group(2):
            by_position.setdefault(int(match.group(1)), []).append(
                (int(match.group(2)), str(value).upper())
            )
    return [
        (system_label(position), " ".join(value for _, value in sorted(values)))
        for position, values in sorted(by_position.items())
    ]


@register.simple_tag
def request_token() -> str:
    """A new token for one rendering of a form that spends money: the service takes the same
    token twice (a double click, a resent form) as one request."""
    return uuid.uuid4().hex
