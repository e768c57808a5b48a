"""Review and pay crowd work: sync with the platform, approve, reject, bonus, block, notify, and
manage HITs' lifetimes. Every call that can spend money checks that an admin asked for it.

Each operation calls the platform first and writes our database after, and each is written so a
second run after a crash in between does no harm (the platform's state or token tells us).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.db import transaction

from annotate.crowd.models import (
    Bonus,
    BonusStatus,
    Hit,
    HitStatus,
    PlatformAssignment,
    Publication,
    WorkerBlock,
)
from annotate.crowd.platforms import get_platform
from annotate.errors import (
    AlreadyProcessedError,
    AnnotateError,
    ConflictError,
    CrowdPlatformError,
    NotFoundError,
    PermissionDeniedError,
    TransientPlatformError,
)
from annotate.models import Annotator, AnnotatorKind, Assignment, AssignmentStatus
from annotate.roles import is_admin

PLATFORM_TO_OURS = {"Approved": AssignmentStatus.APPROVED, "Rejected": AssignmentStatus.REJECTED}


def require_admin(user) -> None:
    if user is None or not is_admin(user):
        raise PermissionDeniedError("Only an admin may do this: it spends money or speaks for us.")


# --- Sync and reconcile ---------------------------------------------------------------------


@dataclass(frozen=True)
class SyncResult:
    hits: int
    seen: int
    new: int
    missing_here: int


def publication_sync(*, publication_id: int, now: datetime, user=None) -> SyncResult:
    """Read every HIT's assignments from the platform and match them with ours."""
    publication = Publication.objects.get(pk=publication_id)
    platform = get_platform(publication.platform, user=user)
    hits = list(publication.hits.filter(status=HitStatus.CREATED))
    seen = new = 0
    for hit in hits:
        rows = platform.assignments_list(hit_id=hit.hit_id)
        seen += len(rows)
        new += _hit_store(hit=hit, rows=rows, now=now)
    missing = PlatformAssignment.objects.filter(
        hit__publication=publication, assignment__isnull=True
    ).count()
    return SyncResult(hits=len(hits), seen=seen, new=new, missing_here=missing)


@transaction.atomic
def _hit_store(*, hit: Hit, rows, now: datetime) -> int:
    ours = {
        a.platform_assignment_id: a
        for a in Assignment.objects.select_for_update().filter(
            platform_hit_id=hit.hit_id, platform_assignment_id__in=[r.assignment_id for r in rows]
        )
    }
    new = 0
    for row in rows:
        local = ours.get(row.assignment_id)
        _, created = PlatformAssignment.objects.update_or_create(
            platform_assignment_id=row.assignment_id,
            defaults={
                "hit": hit,
                "worker_id": row.worker_id,
                "status": row.status,
                "submitted_at": row.submitted_at,
                "answer": row.answer,
                "assignment": local,
                "synced_at": now,
            },
        )
        new += created
        # The platform decides on its own after the auto-approval delay: follow it.
        if (
            local is not None
            and local.status == AssignmentStatus.SUBMITTED
            and row.status in PLATFORM_TO_OURS
        ):
            local.status = PLATFORM_TO_OURS[row.status]
            local.save(update_fields=["status"])
    hit.synced_at = now
    hit.save(update_fields=["synced_at"])
    return new


# --- Approve and reject ---------------------------------------------------------------------


def _crowd_assignment(assignment_id: int) -> Assignment:
    try:
        return Assignment.objects.select_related("annotator").get(
            pk=assignment_id, annotator__kind=AnnotatorKind.CROWD
        )
    except Assignment.DoesNotExist:
        raise NotFoundError("No such crowd assignment.") from None


def _decide(*, assignment: Assignment, verdict: str, feedback: str, user) -> Assignment:
    """Tell the platform, then us. A verdict the platform already has counts as done."""
    wanted = AssignmentStatus.APPROVED if verdict == "Approved" else AssignmentStatus.REJECTED
    if assignment.status == wanted:
        return assignment
    if assignment.status != AssignmentStatus.SUBMITTED:
        raise ConflictError(
            f"Only a submitted assignment can be {verdict.lower()}; this one is "
            f"{assignment.get_status_display().lower()}."
        )
    if assignment.platform_assignment_id:
        platform = get_platform(assignment.annotator.platform, user=user)
        call = platform.assignment_approve if verdict == "Approved" else platform.assignment_reject
        try:
            call(assignment_id=assignment.platform_assignment_id, feedback=feedback)
        except TransientPlatformError:
            raise
        except CrowdPlatformError:
            current = platform.assignment_get(assignment_id=assignment.platform_assignment_id)
            if current.status != verdict:
                raise
    assignment.status = wanted
    assignment.save(update_fields=["status"])
    return assignment


def assignment_approve(*, assignment_id: int, user, feedback: str = "") -> Assignment:
    require_admin(user)
    return _decide(
        assignment=_crowd_assignment(assignment_id),
        verdict="Approved",
        feedback=feedback,
        user=user,
    )


def assignment_reject(*, assignment_id: int, user, feedback: str) -> Assignment:
    require_admin(user)
    if not feedback.strip():
        raise AnnotateError("Say why you reject this work: the worker sees the feedback.")
    return _decide(
        assignment=_crowd_assignment(assignment_id),
        verdict="Rejected",
        feedback=feedback.strip(),
        user=user,
    )


# --- Bonuses --------------------------------------------------------------------------------


def bonus_create(*, assignment_id: int, amount_usd: Decimal, reason: str, user) -> Bonus:
    """Store a bonus and its idempotency token; `bonus_pay` sends it."""
    require_admin(user)
    assignment = _crowd_assignment(assignment_id)
    if amount_usd <= 0 or amount_usd != amount_usd.quantize(Decimal("0.01")):
        raise AnnotateError("A bonus is a positive amount in dollars and cents, e.g. 0.50.")
    if not reason.strip():
        raise AnnotateError("Give the worker a reason for the bonus.")
    if not get_platform(assignment.annotator.platform).pays_workers:
        raise AnnotateError("This worker came through a self-hosted link: pay on that site.")
    return Bonus.objects.create(
        assignment=assignment,
        amount_usd=amount_usd,
        reason=reason.strip(),
        unique_request_token=uuid.uuid4().hex,
        created_by=user,
    )


def bonus_pay(*, bonus_id: int, user, now: datetime) -> Bonus:
    """Send a stored bonus. A retry reuses the token, so the worker is never paid twice."""
    require_admin(user)
    bonus = Bonus.objects.select_related("assignment__annotator").get(pk=bonus_id)
    if bonus.status == BonusStatus.PAID:
        return bonus
    assignment = bonus.assignment
    platform = get_platform(assignment.annotator.platform, user=user)
    try:
        platform.bonus_send(
            worker_id=assignment.annotator.worker_id,
            assignment_id=assignment.platform_assignment_id,
            amount=bonus.amount_usd,
            reason=bonus.reason,
            unique_request_token=bonus.unique_request_token,
        )
    except AlreadyProcessedError:
        pass  # an earlier try was paid; its reply was lost
    except TransientPlatformError:
        raise
    except CrowdPlatformError as error:
        bonus.status, bonus.error = BonusStatus.FAILED, str(error)
        bonus.save(update_fields=["status", "error"])
        return bonus
    bonus.status, bonus.paid_at, bonus.error = BonusStatus.PAID, now, ""
    bonus.save(update_fields=["status", "paid_at", "error"])
    return bonus


# --- Workers --------------------------------------------------------------------------------


def _crowd_worker(annotator_id: int) -> Annotator:
    try:
        return Annotator.objects.get(pk=annotator_id, kind=AnnotatorKind.CROWD)
    except Annotator.DoesNotExist:
        raise NotFoundError("No such crowd worker.") from None


def worker_block(*, annotator_id: int, reason: str, user) -> WorkerBlock:
    """Block a worker on the platform and here: they get no more of our tasks."""
    require_admin(user)
    if not reason.strip():
        raise AnnotateError("Say why the worker is blocked: MTurk requires a reason.")
    worker = _crowd_worker(annotator_id)
    get_platform(worker.platform, user=user).worker_block(
        worker_id=worker.worker_id, reason=reason.strip()
    )
    block, _ = WorkerBlock.objects.update_or_create(
        annotator=worker, defaults={"reason": reason.strip(), "active": True, "created_by": user}
    )
    return block


def worker_unblock(*, annotator_id: int, user, reason: str = "") -> None:
    require_admin(user)
    worker = _crowd_worker(annotator_id)
    get_platform(worker.platform, user=user).worker_unblock(
        worker_id=worker.worker_id, reason=reason.strip()
    )
    WorkerBlock.objects.filter(annotator=worker).update(active=False)


def workers_notify(*, annotator_ids: list[int], subject: str, message: str, user) -> list[str]:
    """Message workers on their platform; return the worker ids it could not reach."""
    require_admin(user)
    if not subject.strip() or not message.strip():
        raise AnnotateError("A message to workers needs a subject and a text.")
    workers = list(Annotator.objects.filter(pk__in=annotator_ids, kind=AnnotatorKind.CROWD))
    if len(workers) != len(set(annotator_ids)):
        raise NotFoundError("Some of these workers do not exist.")
    failed: list[str] = []
    for platform_name in sorted({w.platform for w in workers}):
        ids = [w.worker_id for w in workers if w.platform == platform_name]
        failed += get_platform(platform_name, user=user).workers_notify(
            worker_ids=ids, subject=subject.strip(), message=message.strip()
        )
    return failed


# --- HIT lifetimes --------------------------------------------------------------------------


def _created_hit(hit_pk: int) -> Hit:
    try:
        return Hit.objects.select_related("publication").get(pk=hit_pk, status=HitStatus.CREATED)
    except Hit.DoesNotExist:
        raise NotFoundError("No such HIT on the platform.") from None


def hit_set_expiration(*, hit_pk: int, expires_at: datetime, user) -> Hit:
    """Extend a HIT's life, or end it now (any time in the past expires it at once)."""
    require_admin(user)
    hit = _created_hit(hit_pk)
    get_platform(hit.publication.platform, user=user).hit_update_expiration(
        hit_id=hit.hit_id, expires_at=expires_at
    )
    hit.expires_at = expires_at
    hit.save(update_fields=["expires_at"])
    return hit


def publication_expire(*, publication_id: int, now: datetime, user) -> int:
    """Stop offering every HIT of a publication; return how many were expired."""
    require_admin(user)
    hits = Hit.objects.filter(publication_id=publication_id, status=HitStatus.CREATED)
    count = 0
    for hit in hits:
        if hit.expires_at is None or hit.expires_at > now:
            hit_set_expiration(hit_pk=hit.pk, expires_at=now, user=user)
            count += 1
    return count


def publication_delete_finished(*, publication_id: int, user) -> tuple[int, int]:
    """Delete the HITs whose work is all reviewed; return (deleted, still busy)."""
    require_admin(user)
    publication = Publication.objects.get(pk=publication_id)
    platform = get_platform(publication.platform, user=user)
    deleted = busy = 0
    for hit in publication.hits.filter(status=HitStatus.CREATED):
        try:
            platform.hit_delete(hit_id=hit.hit_id)
        except TransientPlatformError:
            raise
        except CrowdPlatformError:
            busy += 1  # still assignable, or has work waiting for review
            continue
        hit.status = HitStatus.DELETED
        hit.save(update_fields=["status"])
        deleted += 1
    return deleted, busy
