"""The one interface every crowd platform implements, and the plain records it exchanges.

A platform is chosen in settings (CROWD_BACKEND: a short name or a dotted path to a class), like
Django's EMAIL_BACKEND. Services never talk to boto3 or any other client directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Protocol, runtime_checkable

PREVIEW_ASSIGNMENT_ID = "ASSIGNMENT_ID_NOT_AVAILABLE"
# MTurk forgets a UniqueRequestToken after 24 hours: a request sent again with it after that is
# done again (a second HIT, addition or bonus). Work whose first try may be older than this (an
# hour to spare) is looked for on the platform before it is asked for again.
TOKENS_KEPT = timedelta(hours=23)

# MTurk's system qualifications (ids as MTurk documents them).
PERCENT_APPROVED = "000000000000000000L0"
NUMBER_APPROVED = "00000000000000000040"
LOCALE = "00000000000000000071"
# Masters (production, sandbox): a 5% fee more, which the app does not price (pricing.py).
MASTERS = frozenset({"2F1QJWKUDD8XADTFD2Q0G6UTO95ALH", "2ARFPLSP75KLA8M8DH1HTEQVJT3SY6"})


@dataclass(frozen=True)
class HitTypeSpec:
    title: str
    description: str
    keywords: str
    reward: Decimal
    assignment_duration_seconds: int
    auto_approval_delay_seconds: int
    qualification_requirements: list[dict] = field(default_factory=list)
    # The fee the app prices this type's work and bonuses at: its publication's `fee_rate` (a
    # flat rate, or None for MTurk's schedule; annotate.crowd.pricing). MTurk is not sent it
    # (it charges its schedule); the offline platform charges it, whatever CROWD_FEE_RATE says
    # later, so its account is charged what the app's costs and reports say was paid.
    fee_rate: Decimal | None = None


@dataclass(frozen=True)
class HitInfo:
    hit_id: str
    status: str
    max_assignments: int
    expires_at: datetime | None = None
    annotation: str = ""
    # Assignments no worker holds: MTurk's NumberOfAssignmentsAvailable (None: not reported).
    assignments_available: int | None = None
    # Accepted by a worker, not submitted yet: MTurk's NumberOfAssignmentsPending (None: not
    # reported). Each is submitted, or offered again when given back or abandoned.
    assignments_pending: int | None = None


@dataclass(frozen=True)
class AssignmentInfo:
    assignment_id: str
    worker_id: str
    hit_id: str
    status: str
    submitted_at: datetime | None = None
    answer: str = ""


@dataclass(frozen=True)
class BonusInfo:
    worker_id: str
    assignment_id: str
    amount: Decimal
    reason: str = ""


@runtime_checkable
class CrowdPlatform(Protocol):
    """A place where workers find our tasks. Methods raise annotate.errors.CrowdPlatformError."""

    name: str
    creates_hits: bool  # False: workers come through our own public link (self-hosted)
    pays_workers: bool  # False: payment happens on the recruiting site, not through us

    @staticmethod
    def on_sandbox() -> bool:
        """True while the platform is a test environment whose workers are test accounts nobody
        pays (MTurk's requester sandbox): their work counts nowhere and costs nothing."""
        ...

    @staticmethod
    def worker_id_issued(worker_id: str) -> bool:
        """Whether the platform could have given a worker this id (MTurk: its WorkerId shape).

        An id it could not have given was made up by whoever opened our page, and a platform
        call naming it (a block, a message) is refused whole by the platform."""
        ...

    @staticmethod
    def assignment_id_issued(assignment_id: str) -> bool:
        """Whether the platform could have given an assignment this id (MTurk: its shape)."""
        ...

    def account_balance(self) -> Decimal | None: ...

    def hit_type_create(self, *, spec: HitTypeSpec) -> str: ...

    def hit_create(
        self,
        *,
        hit_type_id: str,
        question_url: str,
        max_assignments: int,
        lifetime_seconds: int,
        unique_request_token: str,
    ) -> HitInfo: ...

    def hit_find(self, *, unique_request_token: str) -> HitInfo | None: ...

    def hits_find(self, *, unique_request_tokens: set[str]) -> dict[str, HitInfo]:
        """The HITs made with these tokens, by token, in one pass over the account's HITs."""
        ...

    def hit_get(self, *, hit_id: str) -> HitInfo: ...

    def hit_update_expiration(self, *, hit_id: str, expires_at: datetime) -> None: ...

    def hit_delete(self, *, hit_id: str) -> None: ...

    def hit_add_assignments(self, *, hit_id: str, count: int, unique_request_token: str) -> None:
        """Raise the HIT's MaxAssignments by `count` (MTurk's CreateAdditionalAssignmentsForHIT);
        the token makes a retried request a no-op (AlreadyProcessedError)."""
        ...

    def assignments_list(self, *, hit_id: str) -> list[AssignmentInfo]: ...

    def assignment_get(self, *, assignment_id: str) -> AssignmentInfo: ...

    def assignment_approve(self, *, assignment_id: str, feedback: str = "") -> None: ...

    def assignment_reject(self, *, assignment_id: str, feedback: str) -> None: ...

    def bonus_send(
        self,
        *,
        worker_id: str,
        assignment_id: str,
        amount: Decimal,
        reason: str,
        unique_request_token: str,
    ) -> None: ...

    def bonuses_list(self, *, assignment_id: str) -> list[BonusInfo]:
        """The bonuses paid on this assignment (MTurk's ListBonusPayments)."""
        ...

    def worker_block(self, *, worker_id: str, reason: str) -> None: ...

    def worker_unblock(self, *, worker_id: str, reason: str = "") -> None: ...

    def workers_notify(self, *, worker_ids: list[str], subject: str, message: str) -> list[str]:
        """Send a message; return the ids it could not reach."""
        ...


def external_question_xml(url: str) -> str:
    """Return an ExternalQuestion pointing at url; FrameHeight 0 lets the page use the window."""
    from xml.sax.saxutils import escape

    return (
        '<ExternalQuestion xmlns="http://mechanicalturk.amazonaws.com/'
        'AWSMechanicalTurkDataSchemas/2006-07-14/ExternalQuestion.xsd">'
        f"<ExternalURL>{escape(url)}</ExternalURL><FrameHeight>0</FrameHeight>"
        "</ExternalQuestion>"
    )


def reward_string(amount: Decimal) -> str:
    """MTurk wants US dollars as a string with two decimals, e.g. "1.00"."""
    return f"{amount.quantize(Decimal('0.01')):.2f}"


def to_cents(amount: Decimal) -> Decimal:
    """Round to cents, halves up ($0.125 is $0.13), as every amount the app shows."""
    return amount.quantize(Decimal("0.01"), ROUND_HALF_UP)
