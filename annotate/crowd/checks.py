"""The crowd platform's own system checks (shown by `manage.py check`, runserver and migrate)."""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.core.checks import Warning

# CROWD_FEE_RATE's default before MTurk's schedule, and the value the old .env.example set.
OLD_DEFAULT_RATE = Decimal("0.25")


def old_flat_rate_check(app_configs=None, **kwargs) -> list[Warning]:
    """CROWD_FEE_RATE=0.25 on MTurk is, in all likelihood, a setting carried over from before the
    fee schedule (the old default, written in the old .env.example): every new publication would
    then store a flat 25% where MTurk charges 20% or 40%, and its previews, the totals an admin
    confirms and Table 4's cost would be wrong — while migration crowd 0009 priced the old
    publications by the schedule. A negotiated 25% is possible, so it warns and does not stop."""
    from annotate.crowd.pricing import fee_override

    if getattr(settings, "CROWD_BACKEND", "") != "mturk" or fee_override() != OLD_DEFAULT_RATE:
        return []
    return [
        Warning(
            "CROWD_FEE_RATE=0.25 on MTurk: a flat 25% fee on every new publication, where MTurk "
            "charges 20% (40% on HITs of 10 or more assignments). 0.25 was the app's old "
            "default; the old publications are priced by MTurk's schedule.",
            hint="Leave CROWD_FEE_RATE empty for MTurk's schedule; keep 0.25 only for a "
            "negotiated flat rate (docs/crowd.md).",
            id="crowd.W001",
        )
    ]
