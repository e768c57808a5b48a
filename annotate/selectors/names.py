"""The names there are, for a message about a name that is not: a new user types the README's
`--benchmark InFoBench` against the demo, whose benchmark has another name, and should read
which names would have worked."""

from __future__ import annotations

from django.db.models import QuerySet

NAMES_SHOWN = 10


def names_there_are(queryset: QuerySet, *, what: str) -> str:
    """Return "the <what> here: 'a', 'b'" (the first NAMES_SHOWN by name, then "and N more"),
    or "there is none yet", to follow a "no <what> named 'x'" message."""
    names = list(queryset.order_by("name").values_list("name", flat=True)[: NAMES_SHOWN + 1])
    if not names:
        return "there is none yet"
    shown = ", ".join(repr(name) for name in names[:NAMES_SHOWN])
    more = queryset.count() - NAMES_SHOWN
    return f"the {what} here: {shown}" + (f" and {more} more" if more > 0 else "")
