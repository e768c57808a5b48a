"""An offline crowd platform for the demo and unit tests: HITs, workers and payments that
behave like MTurk's (tokens, statuses, idempotent bonuses) without leaving the machine.

Its state is a JSON file (CROWD_FAKE_STATE_FILE, under VAR_DIR), read and replaced whole under a
file lock, so it outlives a restart of the server (`make run` again, or its autoreloader after an
edit) and every process of the site (web, Celery) sees the same HITs, as with a real platform.
Its account is prepaid, as MTurk's: creating a HIT takes MaxAssignments × (reward + fee) from
the balance, adding assignments takes theirs, a bonus takes amount + fee, and a HIT or an
addition the balance cannot pay is refused. Work given back returns its price: rejecting an
assignment, and deleting an expired HIT, for the assignments no worker ever took. The fee is the
one the app priced the HIT's publication at (HitTypeSpec.fee_rate, its `fee_rate`): MTurk's
schedule (20%, 40% on a HIT of 10 or more assignments, at least $0.01 per assignment and per
bonus), or a flat rate (CROWD_FEE_RATE when it was published), as annotate.crowd.pricing prices
it; changing CROWD_FEE_RATE later reprices neither its work nor its bonuses, as in the app.

Each process keeps the last state it parsed and parses the file again only when it changed; a
call that changes nothing writes nothing. It is the platform's state, not ours: our transactions
do not roll it back.
"""

from __future__ import annotations

import fcntl
import itertools
import json
import os
import secrets
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from django.conf import settings

from annotate.crowd.base import AssignmentInfo, BonusInfo, HitInfo, HitTypeSpec, to_cents
from annotate.crowd.pricing import assignments_cost, fee_override, paid_with_fee
from annotate.errors import AlreadyProcessedError, CrowdPlatformError, HitAlreadyExistsError

REVIEWED = {"Approved", "Rejected"}
# A worker's assignment they gave back before submitting it: it holds none of the HIT's slots.
RETURNED = "Returned"
DEMO_WORKER = "DEMOWORKER"  # the ids an admin takes the offline platform's HITs as
# Threads of one process take the file lock one after the other (flock is per open file).
_PROCESS_LOCK = threading.RLock()


@dataclass
class FakeStore:
    balance: Decimal = Decimal("10000.00")
    hit_types: dict[str, HitTypeSpec] = field(default_factory=dict)
    hits: dict[str, HitInfo] = field(default_factory=dict)
    questions: dict[str, str] = field(default_factory=dict)
    # Each HIT's type, whose reward its assignments were paid at (refunds take it back).
    hit_type_of: dict[str, str] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)
    assignments: dict[str, AssignmentInfo] = field(default_factory=dict)
    bonuses: list[dict] = field(default_factory=list)
    bonus_tokens: set[str] = field(default_factory=set)
    # UniqueRequestTokens of CreateAdditionalAssignmentsForHIT calls done (a retry is refused).
    extension_tokens: set[str] = field(default_factory=set)
    blocks: dict[str, str] = field(default_factory=dict)
    notifications: list[dict] = field(default_factory=list)
    next_id: int = 1
    # A new store (its file deleted, or another VAR_DIR) numbers its ids from 1 again: this
    # part keeps them apart from the ids of the HITs the database kept from before.
    run: str = field(default_factory=lambda: secrets.token_hex(4).upper())

    def to_json(self) -> dict:
        def when(value: datetime | None) -> str | None:
            return value.isoformat() if value else None

        return {
            "balance": str(self.balance),
            "hit_types": {
                key: {
                    **asdict(spec),
                    "reward": str(spec.reward),
                    "fee_rate": None if spec.fee_rate is None else str(spec.fee_rate),
                }
                for key, spec in self.hit_types.items()
            },
            "hits": {
                key: {**asdict(hit), "expires_at": when(hit.expires_at)}
                for key, hit in self.hits.items()
            },
            "questions": self.questions,
            "hit_type_of": self.hit_type_of,
            "tokens": self.tokens,
            "assignments": {
                key: {**asdict(row), "submitted_at": when(row.submitted_at)}
                for key, row in self.assignments.items()
            },
            "bonuses": [{**bonus, "amount": str(bonus["amount"])} for bonus in self.bonuses],
            "bonus_tokens": sorted(self.bonus_tokens),
            "extension_tokens": sorted(self.extension_tokens),
            "blocks": self.blocks,
            "notifications": self.notifications,
            "next_id": self.next_id,
            "run": self.run,
        }

    @classmethod
    def from_json(cls, data: dict) -> FakeStore:
        def when(value: str | None) -> datetime | None:
            return datetime.fromisoformat(value) if value else None

        return cls(
            balance=Decimal(data["balance"]),
            hit_types={key: _spec_of(spec) for key, spec in data["hit_types"].items()},
            hits={
                key: HitInfo(**{**hit, "expires_at": when(hit["expires_at"])})
                for key, hit in data["hits"].items()
            },
            questions=data["questions"],
            hit_type_of=data.get("hit_type_of", {}),  # older state files: HITs never charged
            tokens=data["tokens"],
            assignments={
                key: AssignmentInfo(**{**row, "submitted_at": when(row["submitted_at"])})
                for key, row in data["assignments"].items()
            },
            bonuses=[{**bonus, "amount": Decimal(bonus["amount"])} for bonus in data["bonuses"]],
            bonus_tokens=set(data["bonus_tokens"]),
            extension_tokens=set(data.get("extension_tokens", [])),  # older state files: none
            blocks=data["blocks"],
            notifications=data["notifications"],
            next_id=data["next_id"],
            run=data["run"],
        )


def _spec_of(data: dict) -> HitTypeSpec:
    """A HIT type as the state file keeps it (`fee_rate` null: MTurk's schedule). One of a file
    written before HIT types kept their fee has no `fee_rate` at all: it is charged today's
    CROWD_FEE_RATE (fee_override; MTurk's schedule when unset), as the offline account charged
    every HIT then. The fake cannot read our database for its publication's fee_rate; this
    matches the publications made since crowd 0009 under the same CROWD_FEE_RATE, and the
    first state written after it keeps that rate on the HIT type from then on."""
    if "fee_rate" not in data:
        rate = fee_override()
    else:
        rate = None if data["fee_rate"] is None else Decimal(data["fee_rate"])
    return HitTypeSpec(**{**data, "reward": Decimal(data["reward"]), "fee_rate": rate})


def state_file() -> Path:
    return Path(settings.CROWD_FAKE_STATE_FILE)


@contextmanager
def _locked(*, exclusive: bool) -> Iterator[Path]:
    path = state_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    with _PROCESS_LOCK, open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield path


@dataclass(frozen=True)
class _Parsed:
    """The state file as this process last read it: its text and that text parsed."""

    text: str
    store: FakeStore  # shared by every reader: never changed in place


_parsed: _Parsed | None = None  # under _PROCESS_LOCK


def _load(path: Path) -> FakeStore:
    """The platform's state, parsed again only if the file's text changed since the last read
    (reading it is cheap; parsing and building the store is what a call paid)."""
    global _parsed
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return FakeStore()
    if _parsed is None or _parsed.text != text:
        _parsed = _Parsed(text, _parse(path, text))
    return _parsed.store


def _parse(path: Path, text: str) -> FakeStore:
    try:
        return FakeStore.from_json(json.loads(text))
    except (ValueError, KeyError, TypeError) as error:
        raise CrowdPlatformError(
            f"The offline demo platform's state file {path} is unreadable ({error}); "
            "delete it to start the platform afresh."
        ) from None


def _save(path: Path, text: str) -> None:
    """Replace the file whole, so a reader never sees half of it."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(text)
    os.replace(temporary, path)


def _read_store() -> FakeStore:
    with _locked(exclusive=False) as path:
        return _load(path)


@contextmanager
def _changing() -> Iterator[FakeStore]:
    """The platform's state to change, parsed for this change alone (readers share theirs):
    written back when the block ends without an error and changed something."""
    with _locked(exclusive=True) as path:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            text = None
        store = FakeStore() if text is None else _parse(path, text)
        yield store
        after = json.dumps(store.to_json())
        if after != text:
            _save(path, after)


class _StoreSnapshot:
    """`FakePlatform.store`: what the platform holds now, read from its file (for tests and
    pages that look, never to change: every change goes through a method)."""

    def __get__(self, instance, owner) -> FakeStore:
        return _read_store()


class FakePlatform:
    """Every instance reads and writes one state file, so pages, tasks and restarts see the
    same HITs."""

    name = "fake"
    creates_hits = True
    pays_workers = True
    store = _StoreSnapshot()

    @staticmethod
    def on_sandbox() -> bool:
        return False  # the offline demo's work is the demo's real work, not a sandbox's

    @staticmethod
    def worker_id_issued(worker_id: str) -> bool:
        """Any: its workers are whoever an admin plays (DEMOWORKER<n>), and it takes any id."""
        return True

    @staticmethod
    def assignment_id_issued(assignment_id: str) -> bool:
        return True

    @classmethod
    def reset(cls) -> None:
        """Forget everything: the platform starts afresh (tests; a demo's new database)."""
        global _parsed
        with _locked(exclusive=True) as path:
            path.unlink(missing_ok=True)
            _parsed = None

    @staticmethod
    def _new_id(store: FakeStore, prefix: str) -> str:
        """A 30-character id, as MTurk's, unique across resets: FAKEHIT<run><number>."""
        head = f"{prefix}{store.run}"
        number, store.next_id = store.next_id, store.next_id + 1
        return f"{head}{number:0{30 - len(head)}d}"

    def account_balance(self) -> Decimal | None:
        return self.store.balance

    def hit_type_create(self, *, spec: HitTypeSpec) -> str:
        with _changing() as store:
            for type_id, known in store.hit_types.items():
                if known == spec:
                    return type_id
            type_id = self._new_id(store, "FAKETYPE")
            store.hit_types[type_id] = spec
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
        with _changing() as store:
            if unique_request_token in store.tokens:
                raise HitAlreadyExistsError(
                    "A HIT with this UniqueRequestToken exists.", code="HitAlreadyExists"
                )
            if hit_type_id not in store.hit_types:
                raise CrowdPlatformError(f"Hit type {hit_type_id} does not exist.")
            spec = store.hit_types[hit_type_id]
            price = _price(
                spec.reward, count=max_assignments, hit_size=max_assignments, rate=spec.fee_rate
            )
            _charge(store, price, "HIT")
            hit = HitInfo(
                hit_id=self._new_id(store, "FAKEHIT"),
                status="Assignable",
                max_assignments=max_assignments,
                expires_at=datetime.now(UTC) + timedelta(seconds=lifetime_seconds),
                annotation=unique_request_token,
            )
            store.hits[hit.hit_id] = hit
            store.questions[hit.hit_id] = question_url
            store.hit_type_of[hit.hit_id] = hit_type_id
            store.tokens[unique_request_token] = hit.hit_id
            return hit

    def hit_find(self, *, unique_request_token: str) -> HitInfo | None:
        store = self.store
        hit_id = store.tokens.get(unique_request_token)
        return store.hits.get(hit_id) if hit_id else None

    def hits_find(self, *, unique_request_tokens: set[str]) -> dict[str, HitInfo]:
        found = {
            token: self.hit_find(unique_request_token=token) for token in unique_request_tokens
        }
        return {token: hit for token, hit in found.items() if hit is not None}

    def hit_get(self, *, hit_id: str) -> HitInfo:
        store = self.store
        hit = _hit_of(store, hit_id)
        holding = _holding_a_slot(store, hit_id)
        return replace(
            hit,
            assignments_available=max(hit.max_assignments - len(holding), 0),
            assignments_pending=sum(a.status == "Accepted" for a in holding),
        )

    def hit_update_expiration(self, *, hit_id: str, expires_at: datetime) -> None:
        with _changing() as store:
            store.hits[hit_id] = replace(_hit_of(store, hit_id), expires_at=expires_at)

    def hit_delete(self, *, hit_id: str) -> None:
        with _changing() as store:
            hit = _hit_of(store, hit_id)
            open_work = any(
                a.hit_id == hit_id and a.status not in REVIEWED | {RETURNED}
                for a in store.assignments.values()
            )
            if open_work or (hit.expires_at and hit.expires_at > datetime.now(UTC)):
                raise CrowdPlatformError(
                    f"Hit {hit_id} is still assignable or has unreviewed assignments."
                )
            untaken = hit.max_assignments - len(_holding_a_slot(store, hit_id))
            store.balance += _hit_price(store, hit_id, max(untaken, 0))
            del store.hits[hit_id]
            store.hit_type_of.pop(hit_id, None)

    def hit_add_assignments(self, *, hit_id: str, count: int, unique_request_token: str) -> None:
        """MTurk's rules: a token used before is refused, and a HIT made with fewer than 10
        assignments cannot reach 10 or more."""
        with _changing() as store:
            hit = _hit_of(store, hit_id)
            if unique_request_token in store.extension_tokens:
                raise AlreadyProcessedError(
                    "These assignments were added already.", code="AlreadyProcessed"
                )
            if count < 1:
                raise CrowdPlatformError("NumberOfAdditionalAssignments must be at least 1.")
            if hit.max_assignments < 10 <= hit.max_assignments + count:
                raise CrowdPlatformError(
                    f"HIT {hit_id} has {hit.max_assignments} assignments: a HIT made with fewer "
                    "than 10 cannot be extended to 10 or more.",
                    code="AWS.MechanicalTurk.InvalidMaximumAssignmentsIncrease",
                )
            _charge(store, _hit_price(store, hit_id, count), "addition")
            store.hits[hit_id] = replace(hit, max_assignments=hit.max_assignments + count)
            store.extension_tokens.add(unique_request_token)

    def assignments_list(self, *, hit_id: str) -> list[AssignmentInfo]:
        store = self.store
        _hit_of(store, hit_id)
        return [
            a
            for a in store.assignments.values()
            if a.hit_id == hit_id and a.status in REVIEWED | {"Submitted"}
        ]

    def assignment_get(self, *, assignment_id: str) -> AssignmentInfo:
        return _assignment_of(self.store, assignment_id)

    def _set_status(self, assignment_id: str, new: str, allowed: set[str]) -> None:
        with _changing() as store:
            row = _assignment_of(store, assignment_id)
            if row.status not in allowed:
                raise CrowdPlatformError(
                    f"Assignment {assignment_id} is {row.status}; expected {sorted(allowed)}."
                )
            store.assignments[assignment_id] = replace(row, status=new)
            if new == "Rejected":  # MTurk pays neither the reward nor the fee of rejected work
                store.balance += _hit_price(store, row.hit_id, 1)

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
        with _changing() as store:
            if unique_request_token in store.bonus_tokens:
                raise AlreadyProcessedError("This bonus was paid already.", code="AlreadyProcessed")
            price = paid_with_fee(
                amount, max_assignments=None, flat_rate=_bonus_fee_rate(store, assignment_id)
            )
            _charge(store, to_cents(price), "bonus")
            store.bonus_tokens.add(unique_request_token)
            store.bonuses.append(
                {
                    "worker_id": worker_id,
                    "assignment_id": assignment_id,
                    "amount": amount,
                    "reason": reason,
                }
            )

    def bonuses_list(self, *, assignment_id: str) -> list[BonusInfo]:
        return [
            BonusInfo(
                worker_id=bonus["worker_id"],
                assignment_id=bonus["assignment_id"],
                amount=bonus["amount"],
                reason=bonus.get("reason", ""),  # older state files: none
            )
            for bonus in self.store.bonuses
            if bonus["assignment_id"] == assignment_id
        ]

    def worker_block(self, *, worker_id: str, reason: str) -> None:
        with _changing() as store:
            store.blocks[worker_id] = reason

    def worker_unblock(self, *, worker_id: str, reason: str = "") -> None:
        with _changing() as store:
            store.blocks.pop(worker_id, None)

    def workers_notify(self, *, worker_ids: list[str], subject: str, message: str) -> list[str]:
        with _changing() as store:
            store.notifications.append({"to": list(worker_ids), "subject": subject})
        return []

    # --- The worker's side, for the demo and tests ---------------------------------------

    def worker_accept(self, *, hit_id: str, worker_id: str) -> str:
        """Accept the HIT as MTurk lets a worker: not once it expired, nor for a worker the
        requester blocked."""
        with _changing() as store:
            hit = _hit_of(store, hit_id)
            if hit.expires_at is not None and hit.expires_at <= datetime.now(UTC):
                raise CrowdPlatformError(f"HIT {hit_id} has expired: no worker can accept it.")
            if worker_id in store.blocks:
                raise CrowdPlatformError(f"Worker {worker_id} is blocked by this requester.")
            taken = _holding_a_slot(store, hit_id)
            if len(taken) >= hit.max_assignments or any(a.worker_id == worker_id for a in taken):
                raise CrowdPlatformError(f"HIT {hit_id} cannot be accepted by {worker_id}.")
            assignment_id = self._new_id(store, "FAKEASG")
            store.assignments[assignment_id] = AssignmentInfo(
                assignment_id=assignment_id, worker_id=worker_id, hit_id=hit_id, status="Accepted"
            )
            return assignment_id

    def worker_submit(self, *, assignment_id: str, answer: str = "") -> None:
        with _changing() as store:
            row = store.assignments.get(assignment_id)
            if row is None or row.status != "Accepted":
                raise CrowdPlatformError(f"No accepted assignment {assignment_id} to submit.")
            store.assignments[assignment_id] = replace(
                row, status="Submitted", submitted_at=datetime.now(UTC), answer=answer
            )

    def worker_return(self, *, hit_id: str, assignment_id: str, worker_id: str) -> bool:
        """The worker gives back an assignment they accepted and have not submitted, as MTurk's
        Return button does: its slot of the HIT is free for another worker. False (nothing
        changes) unless that worker holds that assignment of that HIT, accepted."""
        with _changing() as store:
            row = store.assignments.get(assignment_id)
            if row is None or (row.hit_id, row.worker_id, row.status) != (
                hit_id, worker_id, "Accepted",
            ):  # fmt: skip
                return False
            store.assignments[assignment_id] = replace(row, status=RETURNED)
            return True

    def taken_per_hit(self) -> dict[str, int]:
        """How many workers took each HIT (accepted, submitted or reviewed; not returned)."""
        taken: dict[str, int] = {}
        for row in self.store.assignments.values():
            if row.status != RETURNED:
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
        """A worker id that has not taken this HIT yet, is not blocked, nor is in `exclude`:
        DEMOWORKER1, 2, ... (one who took it and gave it back, refused by our page, is not sent
        again)."""
        taken = {a.worker_id for a in self.store.assignments.values() if a.hit_id == hit_id}
        taken |= set(exclude) | set(self.store.blocks)
        return next(
            f"{DEMO_WORKER}{n}" for n in itertools.count(1) if f"{DEMO_WORKER}{n}" not in taken
        )


def _hit_price(store: FakeStore, hit_id: str, count: int) -> Decimal:
    """What `count` assignments of this HIT cost (0 for a HIT of an older state file), at its
    type's fee and the rate of its MaxAssignments (the same as the one it was made with:
    hit_add_assignments)."""
    type_id = store.hit_type_of.get(hit_id)
    if not type_id:
        return Decimal(0)
    spec = store.hit_types[type_id]
    hit = store.hits.get(hit_id)
    size = hit.max_assignments if hit else count
    return _price(spec.reward, count=count, hit_size=size, rate=spec.fee_rate)


def _price(reward: Decimal, *, count: int, hit_size: int, rate: Decimal | None) -> Decimal:
    """What `count` assignments at `reward` of a HIT of `hit_size` cost, at the flat fee `rate`
    (None: MTurk's schedule), the fee included."""
    return assignments_cost(hits=[(count, hit_size)], reward_usd=reward, flat_rate=rate)


def _bonus_fee_rate(store: FakeStore, assignment_id: str) -> Decimal | None:
    """The fee of a bonus on this assignment: its HIT's type's (the publication's, as the app
    prices the bonus), or for an assignment of no HIT here (another state file's) today's
    CROWD_FEE_RATE, as the app prices work that came through no publication."""
    row = store.assignments.get(assignment_id)
    type_id = store.hit_type_of.get(row.hit_id) if row else None
    if type_id is None:
        return fee_override()
    return store.hit_types[type_id].fee_rate


def _charge(store: FakeStore, cost: Decimal, what: str) -> None:
    if cost > store.balance:
        raise CrowdPlatformError(
            f"Not enough funds: this {what} costs ${cost} (fee included) and the account "
            f"balance is ${store.balance}.",
            code="InsufficientFunds",
        )
    store.balance -= cost


def _holding_a_slot(store: FakeStore, hit_id: str) -> list[AssignmentInfo]:
    return [a for a in store.assignments.values() if a.hit_id == hit_id and a.status != RETURNED]


def _hit_of(store: FakeStore, hit_id: str) -> HitInfo:
    try:
        return store.hits[hit_id]
    except KeyError:
        raise CrowdPlatformError(f"Hit {hit_id} does not exist.") from None


def _assignment_of(store: FakeStore, assignment_id: str) -> AssignmentInfo:
    row = store.assignments.get(assignment_id)
    if row is None or row.status in ("Accepted", RETURNED):
        raise CrowdPlatformError(f"Assignment {assignment_id} does not exist.")
    return row


def demo_submit_base() -> str:
    """The turkSubmitTo of the demo's workers: this site's own page that plays MTurk's
    externalSubmit for the offline platform (same origin, so no other host is ever allowed)."""
    from django.urls import reverse

    return reverse("crowd:demo-external-submit").removesuffix("/mturk/externalSubmit")
