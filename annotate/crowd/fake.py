"""An in-memory crowd platform for the demo and unit tests: HITs, workers and payments that
behave like MTurk's (tokens, statuses, idempotent bonuses) without leaving the process."""

from __future__ import annotations

import itertools
import secrets
import threading
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from annotate.crowd.base import AssignmentInfo, HitInfo, HitTypeSpec
from annotate.errors import AlreadyProcessedError, CrowdPlatformError, HitAlreadyExistsError

REVIEWED = {"Approved", "Rejected"}
DEMO_WORKER = "DEMOWORKER"  # the ids an admin takes the offline platform's HITs as


@dataclass
class FakeStore:
    balance: Decimal = Decimal("10000.00")
    hit_types: dict[str, HitTypeSpec] = field(default_factory=dict)
    hits: dict[str, HitInfo] = field(default_factory=dict)
    questions: dict[str, str] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)
    assignments: dict[str, AssignmentInfo] = field(default_factory=dict)
    bonuses: list[dict] = field(default_factory=list)
    bonus_tokens: set[str] = field(default_factory=set)
    blocks: dict[str, str] = field(default_factory=dict)
    notifications: list[dict] = field(default_factory=list)
    ids: itertools.count = field(default_factory=lambda: itertools.count(1))
    # A new store (a restart of the demo) numbers its ids from 1 again: this part keeps them
    # apart from the ids of the HITs the database kept from before.
    run: str = field(default_factory=lambda: secrets.token_hex(4).upper())
    lock: threading.RLock = field(default_factory=threading.RLock)


class FakePlatform:
    """Every instance shares one store per process, so the web pages and tasks see the same HITs."""

    name = "fake"
    creates_hits = True
    pays_workers = True
    store = FakeStore()

    @classmethod
    def reset(cls) -> None:
        cls.store = FakeStore()

    def _new_id(self, prefix: str) -> str:
        """A 30-character id, as MTurk's, unique across restarts: FAKEHIT<run><number>."""
        head = f"{prefix}{self.store.run}"
        return f"{head}{next(self.store.ids):0{30 - len(head)}d}"

    def account_balance(self) -> Decimal | None:
        return self.store.balance

    def hit_type_create(self, *, spec: HitTypeSpec) -> str:
        with self.store.lock:
            for type_id, known in self.store.hit_types.items():
                if known == spec:
                    return type_id
            type_id = self._new_id("FAKETYPE")
            self.store.hit_types[type_id] = spec
            return type_id

    def hit_create(
        self,
        *,
        hit_type_id: str,
        question_url: str,
        max_assignments: int,
        lifetime_seconds: int,
        unique_request_token: str,
    ) -> HitInfo:
        with self.store.lock:
            if unique_request_token in self.store.tokens:
                raise HitAlreadyExistsError(
                    "A HIT with this UniqueRequestToken exists.", code="HitAlreadyExists"
                )
            if hit_type_id not in self.store.hit_types:
                raise CrowdPlatformError(f"Hit type {hit_type_id} does not exist.")
            hit = HitInfo(
                hit_id=self._new_id("FAKEHIT"),
                status="Assignable",
                max_assignments=max_assignments,
                expires_at=datetime.now(UTC) + timedelta(seconds=lifetime_seconds),
                annotation=unique_request_token,
            )
            self.store.hits[hit.hit_id] = hit
            self.store.questions[hit.hit_id] = question_url
            self.store.tokens[unique_request_token] = hit.hit_id
            return hit

    def hit_find(self, *, unique_request_token: str) -> HitInfo | None:
        hit_id = self.store.tokens.get(unique_request_token)
        return self.store.hits.get(hit_id) if hit_id else None

    def hit_get(self, *, hit_id: str) -> HitInfo:
        try:
            return self.store.hits[hit_id]
        except KeyError:
            raise CrowdPlatformError(f"Hit {hit_id} does not exist.") from None

    def hit_update_expiration(self, *, hit_id: str, expires_at: datetime) -> None:
        with self.store.lock:
            self.store.hits[hit_id] = replace(self.hit_get(hit_id=hit_id), expires_at=expires_at)

    def hit_delete(self, *, hit_id: str) -> None:
        with self.store.lock:
            hit = self.hit_get(hit_id=hit_id)
            open_work = any(
                a.hit_id == hit_id and a.status not in REVIEWED
                for a in self.store.assignments.values()
            )
            if open_work or (hit.expires_at and hit.expires_at > datetime.now(UTC)):
                raise CrowdPlatformError(
                    f"Hit {hit_id} is still assignable or has unreviewed assignments."
                )
            del self.store.hits[hit_id]

    def assignments_list(self, *, hit_id: str) -> list[AssignmentInfo]:
        self.hit_get(hit_id=hit_id)
        return [
            a
            for a in self.store.assignments.values()
            if a.hit_id == hit_id and a.status in REVIEWED | {"Submitted"}
        ]

    def assignment_get(self, *, assignment_id: str) -> AssignmentInfo:
        row = self.store.assignments.get(assignment_id)
        if row is None or row.status == "Accepted":
            raise CrowdPlatformError(f"Assignment {assignment_id} does not exist.")
        return row

    def _set_status(self, assignment_id: str, new: str, allowed: set[str]) -> None:
        with self.store.lock:
            row = self.assignment_get(assignment_id=assignment_id)
            if row.status not in allowed:
                raise CrowdPlatformError(
                    f"Assignment {assignment_id} is {row.status}; expected {sorted(allowed)}."
                )
            self.store.assignments[assignment_id] = replace(row, status=new)

    def assignment_approve(self, *, assignment_id: str, feedback: str = "") -> None:
        self._set_status(assignment_id, "Approved", {"Submitted"})

    def assignment_reject(self, *, assignment_id: str, feedback: str) -> None:
        if not feedback:
            raise CrowdPlatformError("Feedback is required to reject.")
        self._set_status(assignment_id, "Rejected", {"Submitted"})

    def bonus_send(
        self,
        *,
        worker_id: str,
        assignment_id: str,
        amount: Decimal,
        reason: str,
        unique_request_token: str,
    ) -> None:
        with self.store.lock:
            if unique_request_token in self.store.bonus_tokens:
                raise AlreadyProcessedError("This bonus was paid already.", code="AlreadyProcessed")
            if amount > self.store.balance:
                raise CrowdPlatformError("Not enough funds.", code="InsufficientFunds")
            self.store.balance -= amount
            self.store.bonus_tokens.add(unique_request_token)
            self.store.bonuses.append(
                {"worker_id": worker_id, "assignment_id": assignment_id, "amount": amount}
            )

    def worker_block(self, *, worker_id: str, reason: str) -> None:
        self.store.blocks[worker_id] = reason

    def worker_unblock(self, *, worker_id: str, reason: str = "") -> None:
        self.store.blocks.pop(worker_id, None)

    def workers_notify(self, *, worker_ids: list[str], subject: str, message: str) -> list[str]:
        self.store.notifications.append({"to": list(worker_ids), "subject": subject})
        return []

    # --- The worker's side, for the demo and tests ---------------------------------------

    def worker_accept(self, *, hit_id: str, worker_id: str) -> str:
        with self.store.lock:
            hit = self.hit_get(hit_id=hit_id)
            taken = [a for a in self.store.assignments.values() if a.hit_id == hit_id]
            if len(taken) >= hit.max_assignments or any(a.worker_id == worker_id for a in taken):
                raise CrowdPlatformError(f"HIT {hit_id} cannot be accepted by {worker_id}.")
            assignment_id = self._new_id("FAKEASG")
            self.store.assignments[assignment_id] = AssignmentInfo(
                assignment_id=assignment_id, worker_id=worker_id, hit_id=hit_id, status="Accepted"
            )
            return assignment_id

    def worker_submit(self, *, assignment_id: str, answer: str = "") -> None:
        with self.store.lock:
            row = self.store.assignments.get(assignment_id)
            if row is None or row.status != "Accepted":
                raise CrowdPlatformError(f"No accepted assignment {assignment_id} to submit.")
            self.store.assignments[assignment_id] = replace(
                row, status="Submitted", submitted_at=datetime.now(UTC), answer=answer
            )

    def taken_per_hit(self) -> dict[str, int]:
        """How many workers took each HIT (accepted, submitted or reviewed)."""
        taken: dict[str, int] = {}
        for row in self.store.assignments.values():
            taken[row.hit_id] = taken.get(row.hit_id, 0) + 1
        return taken

    def accepted_not_submitted(self, *, hit_ids: set[str]) -> list[AssignmentInfo]:
        """Assignments of these HITs that a worker accepted and never submitted, oldest first."""
        return [
            row
            for row in self.store.assignments.values()
            if row.hit_id in hit_ids and row.status == "Accepted"
        ]

    def next_demo_worker(self, *, hit_id: str, exclude: set[str] = frozenset()) -> str:
        """A worker id that has not taken this HIT yet, nor is in `exclude`: DEMOWORKER1, 2, ..."""
        taken = {a.worker_id for a in self.store.assignments.values() if a.hit_id == hit_id}
        taken |= set(exclude)
        return next(
            f"{DEMO_WORKER}{n}" for n in itertools.count(1) if f"{DEMO_WORKER}{n}" not in taken
        )


def demo_submit_base() -> str:
    """The turkSubmitTo of the demo's workers: this site's own page that plays MTurk's
    externalSubmit for the offline platform (same origin, so no other host is ever allowed)."""
    from django.urls import reverse

    return reverse("crowd:demo-external-submit").removesuffix("/mturk/externalSubmit")
