"""What a crowd platform charges on top of what workers are paid: the one formula for its fee.

MTurk's schedule (https://www.mturk.com/pricing), which the offline demo platform mirrors: a 20%
fee on the reward of each assignment and on each bonus; a HIT with 10 or more assignments pays
an additional 20% (40% in all) on its assignments' rewards, bonuses stay at 20%; the fee is at
least $0.01 per assignment and per bonus. It is computed on each payment and rounded to cents
(halves up, to_cents), so an assignment of $0.03 pays $0.01 of fee, not $0.006. MTurk refuses
to extend a HIT made with fewer than 10 assignments to 10 or more, so a HIT's rate is fixed by
the MaxAssignments it was created with. (Masters and premium qualifications add more; the app
refuses the Masters qualification rather than price it: publishing.qualifications_check.)

CROWD_FEE_RATE, when set, replaces the schedule with a flat rate (a negotiated price, another
platform): amount × rate on each payment, rounded to cents as the schedule's fee is, with no
minimum. A publication stores the flat rate it was published at (`fee_rate`), or none for the
schedule.

Every payment's price (`paid_with_fee`) is whole cents, so every figure is a plain sum of
them: the offline account charging a HIT and refunding a rejected assignment, the publish
preview, "Spent so far" and the report's crowd cost (Table 4) agree to the cent, for HITs
published since this rule (2026-11-29). A flat fee rounded once on a total (7 × $0.0875 read
$0.61) disagreed with the account, which is charged per HIT and refunded per assignment (7
HITs of one assignment: 7 × $0.09 = $0.63). A flat-fee HIT of several assignments published
before it was charged with its fee rounded once per HIT, which the per-assignment figures can
miss by a few cents (at most about half a cent an assignment); the offline account keeps only
its balance, not each HIT's charge, so it cannot be recomputed.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal, InvalidOperation
from typing import NamedTuple

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from annotate.crowd.base import to_cents

MTURK_PRICING_URL = "https://www.mturk.com/pricing"
MTURK_FEE = Decimal("0.20")
MTURK_LARGE_HIT_FEE = Decimal("0.40")  # 20% more on the rewards of a HIT of 10+ assignments
MTURK_LARGE_HIT = 10
MTURK_MIN_FEE = Decimal("0.01")
MTURK_SCHEDULE = (
    "20% MTurk fee (40% for HITs of 10 or more assignments), at least $0.01 an assignment"
)


def fee_override() -> Decimal | None:
    """CROWD_FEE_RATE as a flat rate, or None when it is unset or empty (MTurk's schedule).
    Raises ImproperlyConfigured for a value that is not a rate from 0 to 9.999 (a publication
    stores it with three decimals)."""
    text = str(getattr(settings, "CROWD_FEE_RATE", None) or "").strip()
    if not text:
        return None
    try:
        rate = Decimal(text)
    except InvalidOperation:
        rate = None
    if rate is None or not rate.is_finite() or not 0 <= rate < 10 or rate != round(rate, 3):
        raise ImproperlyConfigured(
            f"CROWD_FEE_RATE must be a rate from 0 to 9.999 with at most three decimals "
            f"(0.25 for 25%), or empty for MTurk's schedule; not {text!r}."
        )
    return rate


def platform_fee(amount, *, max_assignments: int | None, flat_rate: Decimal | None) -> Decimal:
    """The platform's fee on one payment: an assignment's reward (`max_assignments`: its HIT's
    MaxAssignments) or a bonus (None), rounded to cents, halves up. A flat rate takes
    amount × rate; MTurk's schedule 20%, or 40% of an assignment's reward on a HIT of 10 or
    more, at least $0.01 (nothing on a payment of $0)."""
    amount = Decimal(amount)
    if flat_rate is not None:
        return to_cents(amount * Decimal(flat_rate))
    if amount <= 0:
        return Decimal(0)
    large = max_assignments is not None and max_assignments >= MTURK_LARGE_HIT
    return max(to_cents(amount * (MTURK_LARGE_HIT_FEE if large else MTURK_FEE)), MTURK_MIN_FEE)


class BonusFeeTerms(NamedTuple):
    """How a bonus's fee is reckoned, for a page that prices an amount typed in the browser:
    `platform_fee` of a bonus is max(amount × rate rounded to cents, halves up, minimum)."""

    rate: Decimal
    minimum: Decimal
    name: str  # "MTurk fee", "25% platform fee"


def bonus_fee_terms(*, flat_rate: Decimal | None) -> BonusFeeTerms:
    """The terms `platform_fee` applies to a bonus under `flat_rate` (a publication's
    `fee_rate`; None: MTurk's schedule, 20% and at least $0.01)."""
    if flat_rate is not None:
        percent = f"{(Decimal(flat_rate) * 100).normalize():f}"
        return BonusFeeTerms(Decimal(flat_rate), Decimal(0), f"{percent}% platform fee")
    return BonusFeeTerms(MTURK_FEE, MTURK_MIN_FEE, "MTurk fee")


def paid_with_fee(amount, *, max_assignments: int | None, flat_rate: Decimal | None) -> Decimal:
    """What paying `amount` costs, the platform's fee (platform_fee) included."""
    fee = platform_fee(amount, max_assignments=max_assignments, flat_rate=flat_rate)
    return Decimal(amount) + fee


def assignments_cost(
    *, hits: Iterable[tuple[int, int]], reward_usd: Decimal, flat_rate: Decimal | None
) -> Decimal:
    """Assignments at `reward_usd` on HITs given as (assignments paid, the HIT's
    MaxAssignments), each HIT at its own rate, the fee included: the sum of each assignment's
    `paid_with_fee` (whole cents for a reward of whole cents; to_cents, halves up, for any
    other)."""
    total = Decimal(0)
    for assignments, max_assignments in hits:
        one = paid_with_fee(reward_usd, max_assignments=max_assignments, flat_rate=flat_rate)
        total += assignments * one
    return to_cents(total)


def fee_description(*, flat_rate: Decimal | None, max_assignments: Iterable[int] = ()) -> str:
    """The fee these HITs pay and why, for whoever confirms a total: a flat rate and where it
    comes from, or MTurk's schedule with how many HITs pay 20% and how many 40%."""
    if flat_rate is not None:
        if not flat_rate:
            return "no platform fee"
        percent = f"{(flat_rate * 100).normalize():f}"
        return (
            f"{percent}% flat fee (CROWD_FEE_RATE), on every assignment and bonus, "
            "rounded to cents on each"
        )
    sizes = list(max_assignments)
    large = sum(1 for n in sizes if n >= MTURK_LARGE_HIT)
    if not sizes:
        return f"{MTURK_SCHEDULE} ({MTURK_PRICING_URL})"
    small = len(sizes) - large
    if not large:
        why = f"{_hits(small)} of fewer than 10 assignments: 20%"
    elif not small:
        why = f"{_hits(large)} of 10 or more assignments: 40%"
    else:
        why = (
            f"{_hits(small)} of fewer than 10 assignments pay 20%, {_hits(large)} of 10 or more 40%"
        )
    return f"{MTURK_SCHEDULE}; {why} ({MTURK_PRICING_URL})"


def _hits(n: int) -> str:
    return f"{n} HIT" if n == 1 else f"{n} HITs"
