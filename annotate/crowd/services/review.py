"""Review and pay crowd work: sync with the platform, approve, reject, bonus, block, notify, and
manage HITs' lifetimes. Every call that can spend money checks that an admin asked for it.

Each operation calls the platform first and writes our database after, and each is written so a
second run after a crash in between does no harm (the platform's state or token tells us).
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import NamedTuple

from django.conf import settings
from django.db import IntegrityError, OperationalError, transaction
from django.db.models import (
    BooleanField,
    Exists,
    ExpressionWrapper,
    OuterRef,
    Q,
    QuerySet,
    Sum,
    Value,
)
from django.db.models.functions import Least, Now
from django.utils import timezone

from annotate.crowd.base import TOKENS_KEPT
from annotate.crowd.limits import (
    FEEDBACK_MAX_CHARS,
    MESSAGE_MAX_CHARS,
    SUBJECT_MAX_CHARS,
    text_length_check,
)
from annotate.crowd.models import (
    LINKED_TO_OURS,
    Bonus,
    BonusStatus,
    Hit,
    HitStatus,
    PlatformAssignment,
    Publication,
    WorkerBlock,
    crowd_worker_q,
)
from annotate.crowd.platforms import (
    get_platform,
    platform_class,
    platform_label,
    publication_endpoint_check,
    publication_platform,
    workers_endpoint_check,
)
from annotate.crowd.services.expiry import (
    ExpiryOutcome,
    expiry_alive_q,
    expiry_claimable_q,
    expiry_run_read,
    expiry_summary,
    hits_expire,
    hits_expiry_ask,
)
from annotate.crowd.services.publishing import (
    MISSING,
    completion_check,
    publication_orphans_adopt,
    publication_unheld_expire,
)
from annotate.crowd.services.workers import study_link_lock
from annotate.errors import (
    AlreadyProcessedError,
    AnnotateError,
    ConflictError,
    CrowdPlatformError,
    FieldInputError,
    NotFoundError,
    PermissionDeniedError,
    TransientPlatformError,
)
from annotate.models import Annotator, AnnotatorKind, Assignment, AssignmentStatus
from annotate.roles import is_admin
from annotate.selectors.results import (
    PLATFORMS_WITHOUT_CONFIRMATION,
    released_unconfirmed_q,
    work_through_hit_q,
)
from annotate.services.assignments import task_left_out_restore, task_lock, task_slots_taken
from annotate.services.leases import lease_beating, lease_take
from annotate.verbalizer.models import HumanAnswer, HumanStudy
from annotate.verbalizer.services.humans import channel_places_free

PLATFORM_TO_OURS = {"Approved": AssignmentStatus.APPROVED, "Rejected": AssignmentStatus.REJECTED}
# A link's cap on anonymous starts: the largest value its column holds (32 bits on PostgreSQL).
STARTS_LIMIT_AT_MOST = 2**31 - 1


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
    """Read every HIT's assignments from the platform and match them with ours.

    Expired HITs are read too (the platform still lists their submitted work); a HIT deleted on
    the platform keeps the confirmations stored before.
    """
    publication = Publication.objects.get(pk=publication_id)
    platform = publication_platform(publication, user=user)
    hits = list(publication.hits.filter(status=HitStatus.CREATED).select_related("publication"))
    seen = new = 0
    for hit in hits:
        rows = platform.assignments_list(hit_id=hit.hit_id)
        seen += len(rows)
        new += _hit_store(hit=hit, rows=rows, now=now)
    missing = PlatformAssignment.objects.filter(
        hit__publication=publication, assignment__isnull=True, human_answer__isnull=True
    ).count()
    return SyncResult(hits=len(hits), seen=seen, new=new, missing_here=missing)


def hits_released_work_synced(*, hits: list[Hit], platform, now: datetime) -> int:
    """Sync those of the HITs that hold work a sync released (_unconfirmed_slots_released) and
    the platform has not confirmed since; return how much of that work holds its place again.

    Its hand-back may have reached the platform after the last sync: the platform then shows it
    submitted, so it is neither pending nor available there, and a plan that trusted the last
    sync paid for a worker in its place (annotate.crowd.services.replacements). A HIT the
    platform no longer shows is left as it is: the caller's own call about it says why."""
    restored = 0
    for hit in hits:
        waiting = list(_released_unconfirmed(hit).values_list("pk", flat=True))
        if not waiting:  # nearly every HIT: one query, no platform call
            continue
        try:
            rows = platform.assignments_list(hit_id=hit.hit_id)
        except TransientPlatformError:
            raise
        except CrowdPlatformError:
            continue
        _hit_store(hit=hit, rows=rows, now=now)
        restored += _released_unconfirmed(hit, confirmed=True).filter(pk__in=waiting).count()
    return restored


def _released_unconfirmed(hit: Hit, *, confirmed: bool = False):
    """The HIT's work here that a sync released (_released), not rejected: the part of it the
    platform has not confirmed, or (`confirmed`) the part that holds its place again."""
    platform_name = hit.publication.platform
    if hit.prompt_id is not None:
        work = HumanAnswer.objects.filter(
            study_id=hit.publication.human_study_id, prompt_id=hit.prompt_id
        ).exclude(status=AssignmentStatus.REJECTED)
        held = Q(place_released=False)
        released = Q(place_released=True)
    else:
        work = Assignment.objects.filter(task_id=hit.task_id, status=AssignmentStatus.SUBMITTED)
        held, released = Q(is_late=False), Q(is_late=True)
    work = work.filter(platform_hit_id=hit.hit_id, annotator__platform=platform_name)
    if confirmed:
        return work.filter(held)
    return work.filter(released, platform_record__isnull=True)


@dataclass(frozen=True)
class SyncChanges:
    """What one sync changed in a publication's work here (publication_sync_reported)."""

    result: SyncResult
    confirmed: int  # the platform confirmed it for its worker and HIT: it may count now
    approved: int  # approved or rejected by the platform itself (its auto-approval delay)
    rejected: int
    released: int  # not listed for its worker once its hand-back was due: its slot taken back
    restored: int  # released before, confirmed now: its slot given back

    @property
    def any(self) -> bool:
        return any((self.confirmed, self.approved, self.rejected, self.released, self.restored))


def publication_sync_reported(*, publication_id: int, now: datetime, user=None) -> SyncChanges:
    """Sync the publication now (publication_sync) and tell what it changed in our work.

    Each HIT is stored in a transaction of its own, so work synced before a platform error is
    kept; the error is raised.
    """
    before = _work_states(publication_id)
    result = publication_sync(publication_id=publication_id, now=now, user=user)
    pairs = [
        (before[pk], state) for pk, state in _work_states(publication_id).items() if pk in before
    ]
    submitted = AssignmentStatus.SUBMITTED

    def became(old_status: str, new_status: str) -> int:
        return sum(old.status == old_status and new.status == new_status for old, new in pairs)

    return SyncChanges(
        result=result,
        confirmed=sum(not old.confirmed and new.confirmed for old, new in pairs),
        approved=became(submitted, AssignmentStatus.APPROVED),
        rejected=became(submitted, AssignmentStatus.REJECTED),
        released=sum(not old.late and new.late and new.status == submitted for old, new in pairs),
        restored=sum(old.late and not new.late for old, new in pairs),
    )


class _WorkState(NamedTuple):
    status: str
    late: bool
    confirmed: bool


def _work_states(publication_id: int) -> dict[int, _WorkState]:
    """Each piece of the publication's work here (its batch's assignments on its platform, or
    its human study's answers), by id: one query."""
    publication = Publication.objects.get(pk=publication_id)
    if publication.human_study_id:
        answers = HumanAnswer.objects.filter(
            study_id=publication.human_study_id, annotator__platform=publication.platform
        ).values_list("pk", "status", "place_released", "platform_record")
        return {
            pk: _WorkState(status, released, rec is not None)
            for pk, status, released, rec in answers
        }
    assignments = (
        Assignment.objects.filter(
            task__batch_id=publication.batch_id, annotator__platform=publication.platform
        )
        .exclude(status=AssignmentStatus.CLAIMED)
        .values_list("pk", "status", "is_late", "platform_record")
    )
    return {pk: _WorkState(status, late, rec is not None) for pk, status, late, rec in assignments}


def _our_work(hit: Hit, assignment_ids: list[str]):
    """Our work on a HIT that names one of these platform assignment ids, locked: the
    assignments of a batch's HIT, or the answers of a human study's HIT."""
    if hit.prompt_id is not None:
        work = HumanAnswer.objects.filter(
            study_id=hit.publication.human_study_id, prompt_id=hit.prompt_id
        )
    else:
        work = Assignment.objects.filter(task_id=hit.task_id)
    return (
        work.select_for_update(of=("self",))
        .select_related("annotator")
        .filter(
            platform_hit_id=hit.hit_id,
            annotator__platform=hit.publication.platform,
            platform_assignment_id__in=assignment_ids,
        )
    )


@transaction.atomic
def _hit_store(*, hit: Hit, rows, now: datetime, whole_listing: bool = True) -> int:
    """Store the platform's view of a HIT's assignments; link each to ours only when the
    platform's assignment, HIT and worker all match ours, and never more distinct workers than
    the HIT's MaxAssignments: a link is the confirmation that lets the work count. A row of
    another HIT is neither stored nor linked (its record stays where it is).

    The task's lock comes first, before the work's rows, in the order of a claim, an accept
    and a restore of left-out work (the task's lock, then its rows) and of a block
    (worker_block: its tasks, then its rows); the other order deadlocked with them
    (PostgreSQL aborted one of the two). A study's HIT's row comes first for the same reason:
    an answer (mturk_answer_submit), a place handed on (_answer_places_given) and a block
    (_blocked_answers_released) take it before the answers' rows; then the study's row, as
    they do, before the answers': an in-house place freed elsewhere goes to an answer on any
    HIT of its prompt under the study's row alone (_in_house_places_handed_on), and a sync
    holding that answer's row while it waited for the study's deadlocked with it."""
    study = None
    if hit.task_id is not None:
        task_lock(task_id=hit.task_id)
    else:
        _hits_locked([hit.pk])
        study = HumanStudy.objects.select_for_update().get(pk=hit.publication.human_study_id)
    ours = {
        (a.platform_assignment_id, a.annotator.worker_id): a
        for a in _our_work(hit, [r.assignment_id for r in rows])
    }
    link_field = "human_answer" if hit.prompt_id is not None else "assignment"
    new = 0
    for row in rows:
        # The platform's record of another HIT's assignment is that HIT's: a forger who typed an
        # honest worker's id on this HIT made assignment_confirm ask for it, and storing it here
        # moved the honest worker's record to this HIT and unlinked their work.
        if row.hit_id != hit.hit_id:
            continue
        local = ours.get((row.assignment_id, row.worker_id))
        if local is not None and not _worker_slot_free(hit=hit, row=row):
            local = None
        _, created = PlatformAssignment.objects.update_or_create(
            platform_assignment_id=row.assignment_id,
            defaults={
                "hit": hit,
                "worker_id": row.worker_id,
                "status": row.status,
                "submitted_at": row.submitted_at,
                "answer": row.answer,
                link_field: local,
                "synced_at": now,
            },
        )
        new += created
        if local is not None and _released(local):
            _place_given_back(local, now=now)
        # The platform decides on its own after the auto-approval delay: follow it.
        if (
            local is not None
            and local.status == AssignmentStatus.SUBMITTED
            and row.status in PLATFORM_TO_OURS
        ):
            local.status = PLATFORM_TO_OURS[row.status]
            local.save(update_fields=["status"])
    if whole_listing:  # reconciliation trusts synced_at to mean "every assignment was listed"
        hit.synced_at = now
        hit.save(update_fields=["synced_at"])
        _unconfirmed_slots_released(hit=hit, now=now)
    if hit.task_id is not None:  # a release or the platform's reject may have freed a slot
        task_left_out_restore(task_id=hit.task_id, now=now)
    else:  # or a place, which a confirmed answer kept out of its full prompt takes
        _answer_places_handed_on(study_id=study.pk, prompt_id=hit.prompt_id, hit=hit)
    return new


def release_grace() -> timedelta:
    """How long work submitted here may wait for the platform to list it before a sync that
    does not find it takes its slot back (CROWD_RELEASE_GRACE_SECONDS).

    The worker's browser hands the work back to MTurk (externalSubmit) only after our page has
    stored it: the done page posts it as soon as it loads, so it arrives seconds later, or,
    where the script did not run, when the worker presses the page's button. A sync in between
    took the honest worker's slot, another worker could take it, and the work then stayed out
    as late work when the platform confirmed it. The default, 300 s, covers a slow network and
    a worker who has to press the button; a forger's submissions keep their slots at most that
    much longer (the grace plus CROWD_SYNC_INTERVAL_SECONDS, 15 minutes by default), still less
    than a forged claim holds one (the assignment duration, an hour by default).
    """
    return timedelta(seconds=settings.CROWD_RELEASE_GRACE_SECONDS)


def hand_back_overdue(*, submitted_at: datetime | None, listed_at: datetime | None) -> bool:
    """True if work submitted here at `submitted_at` should have been in the platform's whole
    listing of its HIT made at `listed_at`: its hand-back's grace was over by then."""
    if submitted_at is None or listed_at is None:
        return False
    return submitted_at <= listed_at - release_grace()


def _unconfirmed_slots_released(*, hit: Hit, now: datetime) -> int:
    """Take their task's slots back from the HIT's work submitted here at least release_grace()
    before `now` that the platform's whole listing of the HIT did not have for its worker (a
    forged assignment id, or a hand-back that has not arrived): it never counts unless the
    platform confirms it, and holding a slot until an admin rejects it let a forger keep
    in-house annotators, a self-hosted link's participants and, once work here left the HIT
    fewer slots, the platform's own workers from a task. Work submitted within the grace keeps
    its slot until a later sync. Released work is kept (an admin may still reject it) and
    marked is_late, the mark of submitted work that holds no slot; a sync that confirms it
    later gives it its slot back if the task still has one (_slot_taken_back), or it stays out
    as late work.

    A human study's answers give up their places on their prompt the same way, marked
    place_released (HumanAnswer has no slots, and is never late: same_channel_q, the one count
    of a prompt's places, leaves it out); a sync that confirms one later gives its place back.
    """
    since = now - release_grace()
    if hit.prompt_id is not None:
        return HumanAnswer.objects.filter(
            study_id=hit.publication.human_study_id,
            prompt_id=hit.prompt_id,
            platform_hit_id=hit.hit_id,
            annotator__platform=hit.publication.platform,
            status=AssignmentStatus.SUBMITTED,
            place_released=False,
            created_at__lte=since,
            platform_record__isnull=True,
        ).update(place_released=True)
    return Assignment.objects.filter(
        task_id=hit.task_id,
        platform_hit_id=hit.hit_id,
        annotator__platform=hit.publication.platform,
        status=AssignmentStatus.SUBMITTED,
        is_late=False,
        submitted_at__lte=since,
        platform_record__isnull=True,
    ).update(is_late=True)


def _released(work: Assignment | HumanAnswer) -> bool:
    """Submitted work whose slot (an answer's place) a sync took back
    (_unconfirmed_slots_released): late work proper is expired, not submitted."""
    if isinstance(work, HumanAnswer):
        return work.place_released
    return work.is_late and work.status == AssignmentStatus.SUBMITTED


def _place_given_back(work: Assignment | HumanAnswer, *, now: datetime) -> None:
    """Released work the platform now confirms: an assignment takes its slot again if its task
    has one (_slot_taken_back); an answer its place on its prompt if the prompt has one free,
    once the HIT's listing is stored (_answer_places_handed_on, at the end of _hit_store)."""
    if isinstance(work, Assignment):
        _slot_taken_back(work, now=now)


def _answer_places_handed_on(*, study_id: int, prompt_id: int, hit: Hit | None) -> int:
    """Give the prompt's free places to the answers waiting for one, oldest first in each
    channel (same_channel_q), and return how many took one: a place of the crowd channel of
    `hit`'s platform to that HIT's answers the platform confirmed (or, `hit` None, a place of
    the study's self-hosted link's channel to the link's answers), and an in-house place to
    any answer counted in-house (a worker counted as an expert, on any HIT of the prompt or
    through the link), where its platform confirms work once it did.

    Waiting answers: confirmed after a sync released them and a replacement took the place,
    left out by an unblock (the prompt was filled meanwhile), on a HIT of a worker counted as an
    expert when the in-house places were taken, or moved by a kind's change into a full
    channel (human_answers_channel_moved). They stay out, kept and paid, and count nowhere
    (results: an answer counts while it holds its place), as a batch's work left out does,
    until a place frees up (a reject, a block, a kind's change, a sync releasing an answer):
    every one of those hands it on here. A self-hosted answer has no platform to confirm it or
    sync to come by, so without this one left out stayed out for good. A blocked worker's
    answers hold no place while the block lasts (worker_block)."""
    if hit is not None:
        platform = hit.publication.platform
        crowd_waiting = HumanAnswer.objects.filter(
            platform_hit_id=hit.hit_id, platform_record__isnull=False
        )
    else:
        platform, crowd_waiting = "selfhosted", HumanAnswer.objects.all()
    channel = Annotator(kind=AnnotatorKind.CROWD, platform=platform)
    given = _answer_places_given(
        study_id=study_id,
        prompt_id=prompt_id,
        channel=channel,
        waiting=crowd_waiting,
        lock_turns=_turns_of(hit=hit, study_id=study_id, channel=channel),
    )
    return len(given) + _in_house_places_handed_on(study_id=study_id, prompt_id=prompt_id)


def _in_house_places_handed_on(*, study_id: int, prompt_id: int) -> int:
    """Give the prompt's free in-house places to the answers counted in-house that wait for
    one (_answer_places_handed_on), under the study's row alone, which every in-house answer
    takes turns on (_turns_of of the in-house channel, no HIT); return how many took one."""
    confirmed = HumanAnswer.objects.filter(
        Q(platform_record__isnull=False) | Q(annotator__platform__in=PLATFORMS_WITHOUT_CONFIRMATION)
    )
    channel = Annotator(kind=AnnotatorKind.EXPERT, platform="")
    given = _answer_places_given(
        study_id=study_id,
        prompt_id=prompt_id,
        channel=channel,
        waiting=confirmed,
        lock_turns=_turns_of(hit=None, study_id=study_id, channel=channel),
    )
    return len(given)


def _hits_locked(hit_ids) -> None:
    """Lock the HITs' rows, in id order: a study's HIT's row is what its prompt's answers on
    its platform take turns on, and it comes before any answer's row (_hit_store)."""
    hits = Hit.objects.select_for_update().filter(pk__in=hit_ids).order_by("pk")
    list(hits.values_list("pk", flat=True))


def _web_crowd_places_handed_on(*, study_id: int, prompt_id: int) -> int:
    """Give the prompt's free places of the web accounts' crowd channel (in-house accounts
    counted as crowd workers: crowd on platform "", same_channel_q) to its answers waiting for
    one (moved there full by a kind's change, or left out by an unblock), oldest first, under
    the study's row, which their answers take turns on (human_work_answer_submit); return how
    many took one. Nothing else hands these places on: a web account's answer has no HIT to
    sync, so without this one waiting stayed out for good."""
    channel = Annotator(kind=AnnotatorKind.CROWD, platform="")
    given = _answer_places_given(
        study_id=study_id,
        prompt_id=prompt_id,
        channel=channel,
        waiting=HumanAnswer.objects.all(),  # web accounts' answers need no confirmation
        lock_turns=_turns_of(hit=None, study_id=study_id, channel=channel),
    )
    return len(given)


def _answer_place_handed_on(answer: HumanAnswer) -> int:
    """Give the place `answer` held on its prompt (a reject, a block or a kind's change freed
    it) to an answer waiting for one (_answer_places_handed_on): in its crowd channel on its
    HIT or through the study's self-hosted link, and in-house wherever it waits; return how
    many took one. An in-house annotator's answer has neither HIT nor link: its in-house place
    and its web accounts' crowd place (_web_crowd_places_handed_on) are handed on, both under
    the study's row."""
    hit = hit_of_work(answer)
    if hit is None and answer.annotator.platform != "selfhosted":
        where = {"study_id": answer.study_id, "prompt_id": answer.prompt_id}
        return _in_house_places_handed_on(**where) + _web_crowd_places_handed_on(**where)
    return _answer_places_handed_on(study_id=answer.study_id, prompt_id=answer.prompt_id, hit=hit)


def _answer_places_given(
    *, study_id: int, prompt_id: int, channel: Annotator, waiting, lock_turns
) -> list[int]:
    """Give the prompt's places that `channel`'s answers (same_channel_q) have free to the
    `waiting` answers of that channel (its kind, and a crowd channel's platform: a platform
    worker counted as an expert answers in-house) that hold none, oldest first, leaving out
    those of a worker blocked now; return their ids. `lock_turns` locks the rows the channel's
    answers to the prompt take turns on, first (_turns_of: its HIT's, _hits_locked, or the
    study's self-hosted link's, study_link_lock; for the in-house channel then the study's,
    which every in-house answer takes turns on: human_work_answer_submit, an expert's answer
    on a HIT or through the link, and a sync of a study's HIT before it locks any answer,
    _hit_store, so an in-house place may go to an answer on another HIT than the caller's).

    The answers' rows are locked before their workers' blocks are read: a block marks its
    worker's answers (_blocked_answers_released) under those rows' locks, so one committing
    meanwhile is read here, or waits for this and then takes the place back."""
    members = Q(annotator__kind=channel.kind)
    if channel.kind == AnnotatorKind.CROWD:
        members &= Q(annotator__platform=channel.platform)
    waiting = waiting.filter(
        members, study_id=study_id, prompt_id=prompt_id, place_released=True
    ).exclude(status=AssignmentStatus.REJECTED)
    if not waiting.exists():  # nearly every HIT: one statement
        return []
    with transaction.atomic():  # a block's or a kind's change's own; a reject's verdict too
        lock_turns()
        study = HumanStudy.objects.get(pk=study_id)
        candidates = list(
            waiting.select_for_update(of=("self",)).order_by("id").values_list("pk", "annotator")
        )
        blocked = set(
            WorkerBlock.objects.filter(
                active=True, annotator_id__in={who for _, who in candidates}
            ).values_list("annotator_id", flat=True)
        )
        free = channel_places_free(study=study, prompt_id=prompt_id, channel=channel)
        if free <= 0:
            return []
        given = [pk for pk, who in candidates if who not in blocked][:free]
        HumanAnswer.objects.filter(pk__in=given).update(place_released=False)
        return given


def _slot_taken_back(assignment: Assignment, *, now: datetime) -> bool:
    """Released work the platform now confirms holds its slot again, and counts, if its task
    has one free under the task's lock, as every claim counts them; otherwise it stays out,
    kept and not counted, as work submitted after the task was filled: never one assignment
    more than the project's assignments per task. A blocked worker's work holds no slot while
    the block lasts (worker_block): the unblock gives it back.

    A sync reads the block after its link to the work (PlatformAssignment) went in, and that
    waited for the work's row if a block held it (_blocked_work_released holds every
    assignment of the worker), so a block committing meanwhile is read here."""
    if WorkerBlock.objects.filter(annotator_id=assignment.annotator_id, active=True).exists():
        return False
    task_lock(task_id=assignment.task_id)
    taken = task_slots_taken(task_id=assignment.task_id, now=now, exclude_id=assignment.pk)
    if taken >= assignment.task.batch.project.assignments_per_task:
        return False
    assignment.is_late = False
    assignment.save(update_fields=["is_late"])
    return True


def _worker_slot_free(*, hit: Hit, row) -> bool:
    """True if linking this worker keeps the HIT within MaxAssignments distinct workers."""
    others = (
        PlatformAssignment.objects.filter(LINKED_TO_OURS, hit=hit)
        .exclude(worker_id=row.worker_id)
        .values("worker_id")
        .distinct()
        .count()
    )
    return others < hit.max_assignments


def hit_of_work(work: Assignment | HumanAnswer) -> Hit | None:
    """The HIT an assignment (or a human study's answer) says it was done on, if it is ours."""
    if not work.platform_hit_id:
        return None
    hits = Hit.objects.select_related("publication").filter(hit_id=work.platform_hit_id)
    if isinstance(work, HumanAnswer):
        return hits.filter(
            prompt_id=work.prompt_id, publication__human_study_id=work.study_id
        ).first()
    return hits.filter(task_id=work.task_id).first()


def assignment_confirm(*, assignment: Assignment | HumanAnswer, now: datetime, user=None) -> bool:
    """Ask the platform about one of our assignments (GetAssignment) and store its answer.

    Return True if the platform knows it for that HIT and that worker, which lets it count.
    A human study's answer is confirmed the same way.
    """
    hit = hit_of_work(assignment)
    if hit is None or not assignment.platform_assignment_id:
        return False
    platform = publication_platform(hit.publication, user=user)
    try:
        row = platform.assignment_get(assignment_id=assignment.platform_assignment_id)
    except TransientPlatformError:
        raise
    except CrowdPlatformError:
        return False  # unknown to the platform, or not submitted there yet
    _hit_store(hit=hit, rows=[row], now=now, whole_listing=False)
    link = {"human_answer" if isinstance(assignment, HumanAnswer) else "assignment": assignment}
    return PlatformAssignment.objects.filter(**link).exists()


# --- Approve and reject ---------------------------------------------------------------------


def _crowd_assignment(assignment_id: int) -> Assignment:
    try:
        return Assignment.objects.select_related("annotator").get(
            crowd_worker_q("annotator__"), pk=assignment_id
        )
    except Assignment.DoesNotExist:
        raise NotFoundError("No such crowd assignment.", field="assignment") from None


def feedback_length_check(feedback: str) -> None:
    """Refuse feedback longer than a worker can be sent (FieldInputError on `feedback`): the one
    limit for every platform, so a reason kept here is the feedback a worker is sent, wherever
    they came from."""
    text_length_check(
        feedback, field="feedback", most=FEEDBACK_MAX_CHARS, what="the feedback a worker is sent"
    )


def _decide(*, assignment, verdict: str, feedback: str, user):
    """Tell the platform, then us. A verdict the platform already has counts as done.

    `assignment` is an Assignment or a human study's HumanAnswer (same status and platform ids).
    On a platform that confirms work, the platform hears only of work it confirmed for this
    worker and HIT: the assignment id a forger typed may be an honest worker's, whose work a
    reject would then refuse to pay. Work it did not confirm is rejected here only, and cannot
    be approved. Feedback longer than a worker can be sent is refused before any of it.
    """
    feedback_length_check(feedback)
    wanted = AssignmentStatus.APPROVED if verdict == "Approved" else AssignmentStatus.REJECTED
    if assignment.status == wanted:
        if not (verdict == "Rejected" and rejected_here_only(assignment)):
            return assignment
    elif assignment.status != AssignmentStatus.SUBMITTED:
        raise ConflictError(
            f"Only a submitted assignment can be {verdict.lower()}; this one is "
            f"{assignment.get_status_display().lower()}."
        )
    confirms = platform_confirms(assignment.annotator.platform)
    if confirms:
        work_endpoint_check(assignment)
    if confirms and not _confirmed(assignment, user=user):
        if verdict == "Approved":
            raise ConflictError(
                f"The platform has not confirmed assignment {assignment.platform_assignment_id} "
                f"for worker {assignment.annotator.worker_id} on this HIT, so it cannot be "
                "approved (it counts nowhere). If the worker has not handed it back yet, sync "
                "later; otherwise reject it, which is recorded here only."
            )
        return _verdict_stored(assignment, wanted, reason=feedback)
    if assignment.platform_assignment_id:
        platform = get_platform(assignment.annotator.platform, user=user)
        call = platform.assignment_approve if verdict == "Approved" else platform.assignment_reject
        try:
            call(assignment_id=assignment.platform_assignment_id, feedback=feedback)
        except TransientPlatformError:
            raise
        except CrowdPlatformError:
            if not _platform_has_verdict(platform, assignment, verdict):
                raise
        try:
            _verdict_stored(assignment, wanted, reason=feedback)
        except ConflictError as meanwhile:
            # The platform took the verdict (an approve pays the worker), but another verdict
            # was stored here between our read and our lock (a reject recorded here only):
            # say both, not "it was not approved".
            here = type(assignment).objects.get(pk=assignment.pk).get_status_display().lower()
            raise ConflictError(
                f"The platform has this work {verdict.lower()} now"
                + (" (the worker is paid)" if verdict == "Approved" else "")
                + f", but here it was {here} meanwhile (by another admin or a platform sync) "
                f"and stays {here}. Reload the page and check the work on the platform."
            ) from meanwhile
    else:
        _verdict_stored(assignment, wanted, reason=feedback)
    if confirms:  # store the platform's record with its new status
        assignment_confirm(assignment=assignment, now=timezone.now(), user=user)
    return assignment


def work_endpoint_check(work: Assignment | HumanAnswer) -> None:
    """Refuse to act on work whose HIT's publication was made on the other MTurk endpoint
    (publication_endpoint_check): the platform MTURK_SANDBOX points at now never had it."""
    hit = hit_of_work(work)
    if hit is not None:
        publication_endpoint_check(hit.publication)


def _verdict_stored(
    work: Assignment | HumanAnswer, status: str, *, reason: str = ""
) -> Assignment | HumanAnswer:
    """Store a verdict; a reject with its `reason` (reject_reason), kept for every platform: a
    web account reads it on their own pages, and for a platform it is the record of what the
    worker was sent. A rejected assignment holds no slot: its task's left-out work takes it
    (task_left_out_restore), as it takes any slot that frees up; a rejected answer's place goes
    to an answer waiting for one (_answer_place_handed_on); each in the verdict's own
    transaction (_assignment_rejected, _answer_rejected). An approve locks the same rows in the
    same order (_assignment_approved, _answer_approved).

    _decide read the status before any lock: each of these reads it again under the work's
    row lock (_status_locked), so two admins deciding the same work at once cannot both win
    (an approve written over a reject that had handed the slot or place on made the work hold
    it again next to the work restored in its place)."""
    if status == AssignmentStatus.REJECTED and isinstance(work, HumanAnswer):
        return _answer_rejected(work, reason=reason)
    if status == AssignmentStatus.REJECTED:
        return _assignment_rejected(work, reason=reason)
    if isinstance(work, HumanAnswer):
        return _answer_approved(work)
    return _assignment_approved(work)


def _status_locked(work: Assignment | HumanAnswer) -> str:
    """Lock the work's row (its channel's or task's rows locked first) and read its status now."""
    model = HumanAnswer if isinstance(work, HumanAnswer) else Assignment
    status = (
        model.objects.select_for_update(of=("self",))
        .filter(pk=work.pk)
        .order_by()
        .values_list("status", flat=True)
        .first()
    )
    if status is None:
        raise NotFoundError("This work no longer exists.", field="assignment")
    return status


def _decided_meanwhile(*, now_status: str, verdict: str) -> ConflictError:
    """The error for a verdict on work another verdict (another admin's, or a sync's) decided
    between our read and our lock."""
    label = AssignmentStatus(now_status).label.lower()
    return ConflictError(
        f"This work was {label} meanwhile (by another admin or a platform sync), so it was not "
        f"{verdict}; reload the page to see its verdict."
    )


def _verdict_start(work: Assignment | HumanAnswer, *, wanted: str) -> bool:
    """Under the row lock: True to store `wanted`, False if it is stored already (a retry or the
    same verdict given at once by someone else), ConflictError if the other verdict came.
    Rejected work rejected here only (the re-send of a reject to the platform) is stored again,
    as _decide let it through."""
    was = work.status
    now_status = _status_locked(work)
    if now_status == AssignmentStatus.SUBMITTED:
        return True
    if now_status == wanted:
        # A reject sent again to the platform (rejected_here_only) read REJECTED already before
        # the lock: keep doing it; one that read SUBMITTED was beaten to the same verdict.
        return wanted == AssignmentStatus.REJECTED and was == AssignmentStatus.REJECTED
    verdict = "approved" if wanted == AssignmentStatus.APPROVED else "rejected"
    raise _decided_meanwhile(now_status=now_status, verdict=verdict)


@transaction.atomic
def _assignment_approved(assignment: Assignment) -> Assignment:
    """Approve the assignment here if it is still submitted, under the locks a reject takes (the
    task's, then the assignment's row): approved already is done (a retry)."""
    task_lock(task_id=assignment.task_id)
    return _approval_stored(assignment)


@transaction.atomic
def _answer_approved(answer: HumanAnswer) -> HumanAnswer:
    """Approve the answer here if it is still submitted, under the locks a reject takes (its
    channels' rows, _answers_turns_locked, then its own): approved already is done (a retry)."""
    _answers_turns_locked(HumanAnswer.objects.filter(pk=answer.pk))
    return _approval_stored(answer)


def _approval_stored(work: Assignment | HumanAnswer) -> Assignment | HumanAnswer:
    """Under the locks its caller took: store APPROVED unless it is stored already."""
    store = _verdict_start(work, wanted=AssignmentStatus.APPROVED)
    work.status = AssignmentStatus.APPROVED
    if store:
        work.save(update_fields=["status"])
    return work


@transaction.atomic
def _assignment_rejected(assignment: Assignment, *, reason: str) -> Assignment:
    """Reject the assignment here and give its slot to its task's left-out work, in one
    transaction, as _answer_rejected does for an answer: stored apart, a failure in between
    left it rejected with the slot free and the left-out work out, and the reject sent again
    found the verdict stored and did nothing (_decide). The task's lock comes first, then the
    assignment's row, in the order of a sync (_hit_store), a claim and a block; the status is
    read again under them (_verdict_start): an approve that came meanwhile is not overwritten.
    The reason is stored with the status, in the same save."""
    task_lock(task_id=assignment.task_id)
    if not _verdict_start(assignment, wanted=AssignmentStatus.REJECTED):
        assignment.status = AssignmentStatus.REJECTED
        return assignment  # rejected meanwhile, its slot handed on by that reject
    assignment.status, assignment.reject_reason = AssignmentStatus.REJECTED, reason
    assignment.save(update_fields=["status", "reject_reason"])
    task_left_out_restore(task_id=assignment.task_id, now=timezone.now())
    return assignment


@transaction.atomic
def _answer_rejected(answer: HumanAnswer, *, reason: str) -> HumanAnswer:
    """Reject the answer here and hand its place on, in one transaction: the platform heard of
    the reject first (_decide), so a failure in between leaves the answer submitted, and the
    reject sent again finds the platform's verdict there and does both. The rows its channels
    take turns on come first (its HIT's or link's, then its study's: _answers_turns_locked),
    then its own, in the order of a sync and a block; the status is read again under them
    (_verdict_start): an approve that came meanwhile is not overwritten. The reason is stored
    with the status, in the same save."""
    _answers_turns_locked(HumanAnswer.objects.filter(pk=answer.pk))
    if not _verdict_start(answer, wanted=AssignmentStatus.REJECTED):
        answer.status = AssignmentStatus.REJECTED
        return answer  # rejected meanwhile, its place handed on by that reject
    answer.status, answer.reject_reason = AssignmentStatus.REJECTED, reason
    answer.save(update_fields=["status", "reject_reason"])
    _answer_place_handed_on(answer)
    return answer


def platform_has_verdict_of(work: Assignment | HumanAnswer) -> bool:
    """False for work decided here only: on a platform that confirms work, the platform has no
    record of it for that worker and HIT (forged, or not handed back yet) or has not the verdict."""
    if not platform_confirms(work.annotator.platform):
        return True
    record = PlatformAssignment.objects.filter(
        **{"human_answer" if isinstance(work, HumanAnswer) else "assignment": work}
    ).first()
    return record is not None and record.status in PLATFORM_TO_OURS


def rejected_here_only(work: Assignment | HumanAnswer) -> bool:
    """True for work rejected here before the platform had it (the worker's hand-back came
    after the verdict) that the platform now holds as submitted: it pays such work when the
    auto-approval delay ends unless it is rejected there too."""
    record = getattr(work, "platform_record", None)
    return (
        work.status == AssignmentStatus.REJECTED
        and record is not None
        and record.status == "Submitted"
    )


def _confirmed(work: Assignment | HumanAnswer, *, user) -> bool:
    """True if the platform's record of this work is linked to it (a sync or GetAssignment
    found it for this worker and HIT); asks the platform once more if it is not yet."""
    link = {"human_answer" if isinstance(work, HumanAnswer) else "assignment": work}
    if PlatformAssignment.objects.filter(**link).exists():
        return True
    return assignment_confirm(assignment=work, now=timezone.now(), user=user)


def _platform_has_verdict(platform, assignment, verdict: str) -> bool:
    """After a refused call: the platform already has the verdict (a retry), or, to reject,
    does not know the assignment at all (forged work is rejected here only)."""
    try:
        current = platform.assignment_get(assignment_id=assignment.platform_assignment_id)
    except TransientPlatformError:
        raise
    except CrowdPlatformError:
        return verdict == "Rejected"
    return current.status == verdict


def platform_confirms(platform_name: str) -> bool:
    """True for platforms whose work counts only once they confirm it (not self-hosted)."""
    return platform_name not in PLATFORMS_WITHOUT_CONFIRMATION


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
        raise AnnotateError(reject_reason_missing(Assignment.objects.filter(pk=assignment_id)))
    return _decide(
        assignment=_crowd_assignment(assignment_id),
        verdict="Rejected",
        feedback=feedback.strip(),
        user=user,
    )


def reject_reason_missing(work: QuerySet) -> str:
    """The refusal of a reject without a reason (`work`: the assignment or answer, maybe none),
    true to who reads the reason. The reason is kept on the work (reject_reason) for everyone;
    a platform that shows workers its requester's feedback (MTurk) tells them, a web account
    reads it on its own page here (the one listing that work, its most recent only), and a
    self-hosted link's participant, who has no account here and no channel back from here,
    is not told. Read before the work is looked up as a crowd worker's, so a blank reason is
    refused (400) whatever the id; only for crowd work (crowd_worker_q, the rule of the
    reject's own lookup): an in-house expert's work, which no reject takes, gets the neutral
    wording."""
    platform = (
        work.filter(crowd_worker_q("annotator__"))
        .values_list("annotator__platform", flat=True)
        .first()
    )
    if platform is None:
        return "Say why you reject this work."
    if platform == "selfhosted":
        return (
            "Say why you reject this work, for the record: a self-hosted link's participant "
            "is not told (reject the submission on the recruiting site too)."
        )
    if platform == "":
        page = "Label-word tasks" if work.model is HumanAnswer else "My tasks"
        return (
            "Say why you reject this work: the worker (a web account, signed up on this site) "
            f"reads it beside the rejected work among their recent tasks on their '{page}' page."
        )
    return "Say why you reject this work: the worker sees the feedback on the platform."


def _crowd_human_answer(answer_id: int) -> HumanAnswer:
    try:
        return HumanAnswer.objects.select_related("annotator").get(
            crowd_worker_q("annotator__"), pk=answer_id
        )
    except HumanAnswer.DoesNotExist:
        raise NotFoundError("No such crowd answer.", field="answer") from None


def human_answer_approve(*, answer_id: int, user, feedback: str = "") -> HumanAnswer:
    """Approve a crowd worker's answer to a human study's HIT (pays the worker on MTurk)."""
    require_admin(user)
    return _decide(
        assignment=_crowd_human_answer(answer_id), verdict="Approved", feedback=feedback, user=user
    )


def human_answer_reject(*, answer_id: int, user, feedback: str) -> HumanAnswer:
    """Reject a crowd worker's answer: it leaves every result at once (raw export keeps it)."""
    require_admin(user)
    if not feedback.strip():
        raise AnnotateError(reject_reason_missing(HumanAnswer.objects.filter(pk=answer_id)))
    return _decide(
        assignment=_crowd_human_answer(answer_id),
        verdict="Rejected",
        feedback=feedback.strip(),
        user=user,
    )


@dataclass(frozen=True)
class Approvals:
    """What approving a review page's answers together did, answer by answer."""

    approved: int
    refused: list[str]  # "answer 12: why", for each answer it could not approve
    untried: int  # answers not tried: the platform asked to slow down (`stopped` says so)
    # Answers asked for that are not submitted (decided meanwhile), unconfirmed, or of a worker
    # blocked now.
    skipped: int
    stopped: str = ""


def human_answers_approve(
    *, publication: Publication, answer_ids: list[int], user, feedback: str = ""
) -> Approvals:
    """Approve each of `answer_ids` that is still a submitted answer of the publication and
    confirmed (by the platform, or needing none: the answers a reviewer may approve one by one),
    each as human_answer_approve approves it, in its own transaction: one refused keeps those
    approved before it, and a throttled platform (TransientPlatformError) stops the rest, to be
    sent again later. Answers not submitted any more (decided meanwhile), not confirmed, or of
    a worker blocked now are left as they are, counted as skipped: the block told the admin
    such answers are paid unless rejected (crowd.views.worker_action), so they are not paid
    with the rest; each one's own Approve still takes it."""
    require_admin(user)
    feedback_length_check(feedback)
    answers = HumanAnswer.objects.filter(
        crowd_worker_q("annotator__"), pk__in=answer_ids, status=AssignmentStatus.SUBMITTED,
        study_id=publication.human_study_id, annotator__platform=publication.platform,
    ).exclude(annotator__block__active=True)  # fmt: skip
    if platform_confirms(publication.platform):
        answers = answers.filter(platform_record__isnull=False)
    chosen = list(answers.order_by("id").values_list("pk", flat=True))
    skipped = len(set(answer_ids)) - len(chosen)
    approved, refused = 0, []
    for done, answer_id in enumerate(chosen):
        try:
            human_answer_approve(answer_id=answer_id, user=user, feedback=feedback)
        except TransientPlatformError as error:
            untried = len(chosen) - done
            return Approvals(approved, refused, untried, skipped, stopped=str(error))
        except AnnotateError as error:
            refused.append(f"answer {answer_id}: {error}")
        else:
            approved += 1
    return Approvals(approved, refused, untried=0, skipped=skipped)


# --- Bonuses --------------------------------------------------------------------------------


def bonus_create(
    *, assignment_id: int, amount_usd: Decimal, reason: str, user, request_token: str = "",
    now: datetime | None = None,
) -> Bonus:  # fmt: skip
    """Store a bonus and its idempotency token; `bonus_pay` sends it.

    `request_token` (the bonus form's, made with the page) becomes the platform's
    UniqueRequestToken: the same form sent again returns the bonus it made, never a second one.
    Without one, a bonus like one made in the last REPEAT_WINDOW is refused as a retry
    (`_untokened_repeat_check`).
    """
    require_admin(user)
    assignment = _crowd_assignment(assignment_id)
    return _bonus_store(
        assignment=assignment, amount_usd=amount_usd, reason=reason, user=user,
        request_token=request_token, now=now or timezone.now(),
    )  # fmt: skip


def human_answer_bonus_create(
    *, answer_id: int, amount_usd: Decimal, reason: str, user, request_token: str = "",
    now: datetime | None = None,
) -> Bonus:  # fmt: skip
    """Store a bonus for a crowd worker's answer to a human study's HIT; `bonus_pay` sends it
    (`request_token` as for `bonus_create`)."""
    require_admin(user)
    answer = _crowd_human_answer(answer_id)
    return _bonus_store(
        human_answer=answer, amount_usd=amount_usd, reason=reason, user=user,
        request_token=request_token, now=now or timezone.now(),
    )  # fmt: skip


REQUEST_TOKEN = re.compile(r"^[A-Za-z0-9_-]{16,64}$")
# A bonus sent without a request_token, like one of the same work made this recently, is taken
# for a retry of it after a lost reply (a day: a retry comes within minutes, a deliberate second
# bonus of the same amount and reason can say so with a token).
REPEAT_WINDOW = timedelta(hours=24)


def _bonus_store(
    *, assignment=None, human_answer=None, amount_usd: Decimal, reason: str, user,
    request_token: str = "", now: datetime,
) -> Bonus:  # fmt: skip
    """Check and store a bonus for an Assignment or a HumanAnswer, with its idempotency token.

    Only approved work takes a bonus: that is the work whose pay the spending and Table 4's cost
    count (a bonus on rejected or unreviewed work was paid and counted nowhere), and on a
    platform that confirms work, approved work is work it confirmed for that worker. Each
    refusal names the input at fault (`field`: the API's names; the work is "assignment" or
    "answer"). The work's bonuses together are at most CROWD_BONUS_MAX_USD
    (`_bonus_total_check`, under the work's row lock, as `bonus_pay` checks it again).
    """
    paid_for = assignment or human_answer
    if request_token and not REQUEST_TOKEN.match(request_token):
        raise FieldInputError(
            "request_token: 16 to 64 letters, digits, '-' or '_'.", field="request_token"
        )
    earlier = _bonus_of_token(request_token, paid_for) if request_token else None
    if earlier is not None:
        return earlier
    _bonus_input_check(paid_for, amount_usd=amount_usd, reason=reason)
    try:
        with transaction.atomic():
            _work_lock(paid_for)
            # The same form sent twice at once: the first made it while this one waited.
            if request_token and (earlier := _bonus_of_token(request_token, paid_for)):
                return earlier
            if not request_token:
                _untokened_repeat_check(paid_for, amount_usd=amount_usd, reason=reason, now=now)
            _bonus_total_check(paid_for, amount_usd=amount_usd)
            return Bonus.objects.create(
                assignment=assignment,
                human_answer=human_answer,
                amount_usd=amount_usd,
                reason=reason.strip(),
                unique_request_token=request_token or uuid.uuid4().hex,
                created_by=user,
            )
    except IntegrityError:  # the same form, sent twice at once (SQLite: no row lock)
        if not request_token:
            raise
        return _bonus_of_token(request_token, paid_for)


def _bonus_input_check(paid_for, *, amount_usd: Decimal, reason: str) -> None:
    """Refuse a bonus whose amount, reason or work cannot take one, naming the field."""
    if not _dollars_and_cents(amount_usd):
        raise FieldInputError(
            "A bonus is a positive amount in dollars and cents, e.g. 0.50.", field="amount_usd"
        )
    if amount_usd > bonus_max_usd():
        raise FieldInputError(
            f"Bonus amount: ${Decimal(amount_usd):,.2f} is more than the most one bonus may be, "
            f"${bonus_max_usd():,.2f} (CROWD_BONUS_MAX_USD). Nothing was paid.",
            field="amount_usd",
        )
    if not reason.strip():
        raise FieldInputError("Give the worker a reason for the bonus.", field="feedback")
    text_length_check(
        reason.strip(),
        field="feedback",
        most=FEEDBACK_MAX_CHARS,
        what="the feedback a worker is sent, a bonus's reason too",
    )
    work = _work_field(paid_for)
    if not paid_for.annotator.platform:
        raise FieldInputError(WEB_ACCOUNT_UNPAID, field=work)
    if not get_platform(paid_for.annotator.platform).pays_workers:
        raise FieldInputError(
            "This worker came through a self-hosted link: pay on that site.", field=work
        )
    if paid_for.status != AssignmentStatus.APPROVED:
        raise ConflictError(
            f"A bonus is paid on approved work only; this is "
            f"{paid_for.get_status_display().lower()}.",
            field=work,
        )


# A web account (platform "") has no platform account: get_platform("") is CROWD_BACKEND's,
# which MTurk would have been asked to pay an empty WorkerId on (and the offline fake "paid").
WEB_ACCOUNT_UNPAID = (
    "This is a web account's work (signed up on this site): it has no crowd platform to pay "
    "a bonus through, and this site pays nobody itself. Nothing was paid."
)


def _work_field(paid_for) -> str:
    """The input that names the work a bonus is for: "assignment", or a study's "answer"."""
    return "answer" if isinstance(paid_for, HumanAnswer) else "assignment"


def _work_lock(paid_for) -> None:
    """Lock the work's row: its bonuses are checked and stored, or sent, one after the other."""
    type(paid_for).objects.select_for_update().filter(pk=paid_for.pk).order_by().first()


def bonus_max_usd() -> Decimal:
    """The most the bonuses of one assignment or answer may come to, together
    (CROWD_BONUS_MAX_USD): checked when a bonus is stored and again just before it is sent."""
    return Decimal(str(settings.CROWD_BONUS_MAX_USD))


# Bonuses that are paid, or may be: stored and not sent yet, or being sent, or refused on a
# retry after a send whose reply was lost (failed with `sent_at` kept: that send may have paid).
# A failed one refused on its first send holds nothing until it is tried again (bonus_pay makes
# it pending first).
BONUSES_HELD_Q = Q(status__in=(BonusStatus.PENDING, BonusStatus.PAID)) | Q(
    status=BonusStatus.FAILED, sent_at__isnull=False
)


def _bonus_total_check(paid_for, *, amount_usd: Decimal, bonus: Bonus | None = None) -> None:
    """Refuse `amount_usd` (a new bonus, or `bonus` about to be sent) when with the work's other
    bonuses paid or pending it comes to more than CROWD_BONUS_MAX_USD. Called under the work's
    row lock, so two bonuses checked at once see each other."""
    others = paid_for.bonuses.filter(BONUSES_HELD_Q)
    if bonus is not None:
        others = others.exclude(pk=bonus.pk)
    before = others.aggregate(total=Sum("amount_usd"))["total"] or Decimal(0)
    limit, total = bonus_max_usd(), before + Decimal(amount_usd)
    if total <= limit:
        return
    work = _work_field(paid_for)
    raise FieldInputError(
        f"Bonus amount: ${Decimal(amount_usd):,.2f} would bring the bonuses of this {work} to "
        f"${total:,.2f} (${before:,.2f} paid or being paid already), more than the most one "
        f"{work} may be paid in bonuses, ${limit:,.2f} (CROWD_BONUS_MAX_USD). Nothing was paid.",
        field="amount_usd",
    )


def _untokened_repeat_check(paid_for, *, amount_usd: Decimal, reason: str, now: datetime) -> None:
    """Refuse a bonus without a request token when the same work had one of the same amount
    and reason made within REPEAT_WINDOW: an API client that retried after a lost reply (it
    never learnt the first was made) would pay the worker twice. Called under the work's row
    lock, so two such requests at once check one after the other."""
    earlier = (
        paid_for.bonuses.filter(
            amount_usd=amount_usd, reason=reason.strip(), created_at__gt=now - REPEAT_WINDOW
        )
        .order_by("-created_at")
        .first()
    )
    if earlier is None:
        return
    made = earlier.created_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    raise ConflictError(
        f"Bonus {earlier.pk} of ${earlier.amount_usd} with this reason was made for this work "
        f"at {made} ({earlier.get_status_display().lower()}); a request without request_token "
        "like it within 24 hours is taken for a retry and pays nothing more. To pay a second "
        "bonus on purpose, send a new request_token (16 to 64 letters, digits, '-' or '_'); "
        "sending that same token again is then a safe retry.",
        field="request_token",
    )


def _dollars_and_cents(amount: Decimal | int) -> bool:
    """A positive amount below a million (what a bonus row holds) with at most two decimals;
    NaN and infinities are not (Decimal refuses to compare or round them)."""
    amount = Decimal(amount)
    if not amount.is_finite() or not Decimal(0) < amount < Decimal(1_000_000):
        return False
    return amount == amount.quantize(Decimal("0.01"))


def _bonus_of_token(request_token: str, paid_for) -> Bonus | None:
    """The bonus a request token made, if it is this work's; another's is a conflict."""
    bonus = Bonus.objects.filter(unique_request_token=request_token).first()
    if bonus is not None and bonus.paid_for != paid_for:
        raise ConflictError(
            "This bonus form belongs to another assignment; reload the page.",
            field="request_token",
        )
    return bonus


def bonus_pay(*, bonus_id: int, user, now: datetime) -> Bonus:
    """Send a stored bonus. A retry reuses the token, so the worker is never paid twice.

    Just before it is first sent, the work's bonuses are checked against CROWD_BONUS_MAX_USD
    again (`_bonus_send_hold`): a bonus stored under a higher limit, or beside others, that
    would take them over it is marked failed and refused (FieldInputError on `amount_usd`),
    nothing sent. A bonus sent before (`sent_at`: the platform may have paid it, its reply lost)
    is not checked again but sent again with its token, which the platform pays at most once.
    """
    require_admin(user)
    bonus = Bonus.objects.select_related("assignment__annotator", "human_answer__annotator").get(
        pk=bonus_id
    )
    if bonus.status == BonusStatus.PAID:
        return bonus
    assignment = bonus.paid_for
    if not assignment.annotator.platform:  # stored before bonus_create refused web accounts
        Bonus.objects.filter(pk=bonus.pk).exclude(status=BonusStatus.PAID).update(
            status=BonusStatus.FAILED, error=WEB_ACCOUNT_UNPAID, sent_at=None
        )
        bonus.refresh_from_db(fields=["status", "error", "sent_at"])
        return bonus
    work_endpoint_check(assignment)
    platform = get_platform(assignment.annotator.platform, user=user)
    if bonus.created_at <= now - TOKENS_KEPT and _paid_before(platform, bonus):
        return _bonus_paid(bonus, now=now)
    status, sent_before = _bonus_send_hold(bonus, now=now)
    if status == BonusStatus.PAID:
        return bonus  # another delivery paid it meanwhile
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
        return _bonus_refused(bonus, error=error, sent_before=sent_before, stamp=now)
    return _bonus_paid(bonus, now=now)


def _bonus_refused(
    bonus: Bonus, *, error: CrowdPlatformError, sent_before: bool, stamp: datetime
) -> Bonus:
    """Store the platform's refusal of this send, under the work's row lock and only if the
    bonus is still as this send left it (pending, stamped `stamp`): a concurrent delivery that
    was paid meanwhile is never overwritten. Refused on its first send, nothing was paid: failed,
    `sent_at` cleared, and the limit applies again when it is retried. Refused on a retry, an
    earlier send may have paid it (its reply lost): failed with `sent_at` kept, so it still
    counts toward the limit (BONUSES_HELD_Q) and is sent again with its token when retried."""
    message = str(error) or type(error).__name__
    if sent_before:
        message = (
            f"{message} (an earlier send of this bonus may have paid it, its reply lost: it "
            "still counts toward the bonus limit; Retry sends it again with the same token, "
            "which the platform pays at most once)"
        )
    with transaction.atomic():
        _work_lock(bonus.paid_for)
        fields = {"status": BonusStatus.FAILED, "error": message[:2000]}
        if not sent_before:
            fields["sent_at"] = None
        Bonus.objects.filter(pk=bonus.pk, status=BonusStatus.PENDING, sent_at=stamp).update(
            **fields
        )
    bonus.refresh_from_db(fields=["status", "error", "sent_at", "paid_at"])
    return bonus


def _bonus_send_hold(bonus: Bonus, *, now: datetime) -> tuple[str, bool]:
    """The last step before a bonus is sent: under its work's row lock, check that with the
    work's other bonuses paid or pending it stays within CROWD_BONUS_MAX_USD, and hold its place
    (pending: a failed bonus tried again is pending once more, so a bonus checked at the same
    time counts it), stamping `sent_at`. Over the limit it is marked failed, with why, and the
    refusal raised after that is stored. A bonus sent before (`sent_at` set: the platform may
    have paid it and the reply been lost) is not checked again: a lower limit since then, or
    another worker process's, does not make it unpaid; it stays pending and is sent again with
    the same token. Return its status as stored (paid: another delivery sent it meanwhile) and
    whether it had been sent before this send."""
    with transaction.atomic():
        _work_lock(bonus.paid_for)
        status, sent_at = Bonus.objects.values_list("status", "sent_at").get(pk=bonus.pk)
        if status == BonusStatus.PAID:
            bonus.status = status
            return status, True
        refused = None
        if sent_at is None:
            try:
                _bonus_total_check(bonus.paid_for, amount_usd=bonus.amount_usd, bonus=bonus)
            except FieldInputError as over:
                refused = over
        if refused is not None:
            bonus.status, bonus.error, bonus.sent_at = BonusStatus.FAILED, str(refused), None
        else:
            bonus.status, bonus.error, bonus.sent_at = BonusStatus.PENDING, "", now
        bonus.save(update_fields=["status", "error", "sent_at"])
    if refused is not None:
        raise refused
    return bonus.status, sent_at is not None


def _bonus_paid(bonus: Bonus, *, now: datetime) -> Bonus:
    bonus.status, bonus.paid_at, bonus.error = BonusStatus.PAID, now, ""
    bonus.save(update_fields=["status", "paid_at", "error"])
    return bonus


def _paid_before(platform, bonus: Bonus) -> bool:
    """True if the platform paid this bonus already: it lists more bonuses of its amount and
    reason on the assignment than are marked paid here.

    Asked for a bonus whose first try may be older than the platform keeps its token
    (TOKENS_KEPT): MTurk forgets a UniqueRequestToken after 24 hours, and a bonus whose reply
    was lost then is paid a second time by a send with the same token."""
    work = bonus.paid_for
    paid_there = sum(
        row.worker_id == work.annotator.worker_id
        and row.amount == bonus.amount_usd
        and row.reason == bonus.reason
        for row in platform.bonuses_list(assignment_id=work.platform_assignment_id)
    )
    link = {"human_answer" if bonus.human_answer_id else "assignment": work}
    paid_here = Bonus.objects.filter(
        **link, status=BonusStatus.PAID, amount_usd=bonus.amount_usd, reason=bonus.reason
    ).count()
    return paid_there > paid_here


# --- Workers --------------------------------------------------------------------------------


def _crowd_worker(annotator_id: int, *, or_blocked: bool = False) -> Annotator:
    """The crowd worker `annotator_id` (crowd_worker_q); `or_blocked`, also anyone blocked now:
    a web account counted as a crowd worker when blocked, made an expert since, is no crowd
    worker any more, and their block, which keeps their work out of every result, must still
    be lifted."""
    who = crowd_worker_q()
    if or_blocked:
        who |= Q(block__active=True)
    try:
        return Annotator.objects.get(who, pk=annotator_id)
    except Annotator.DoesNotExist:
        raise NotFoundError("No such crowd worker.") from None


def workers_on_sandbox(*, annotator_ids: list[int]) -> dict[int, bool | None]:
    """Each worker's MTurk endpoint, from the publications of the HITs they took, handed work
    back on or were listed on by a sync: True for a worker known only from the requester
    sandbox (test work), False for one with work on production (a real worker, whatever they
    also tested), None for one with no HIT of ours (the endpoint MTURK_SANDBOX names then).
    One query."""
    rows = Annotator.objects.filter(pk__in=annotator_ids).annotate(
        sandbox_work=ExpressionWrapper(_worked_on(sandbox=True), output_field=BooleanField()),
        real_work=ExpressionWrapper(_worked_on(sandbox=False), output_field=BooleanField()),
    )
    return {
        pk: False if real else (True if test else None)
        for pk, test, real in rows.values_list("pk", "sandbox_work", "real_work")
    }


def _worked_on(*, sandbox: bool) -> Q:
    """Whether the outer worker did work through a HIT of ours on that endpoint (results.
    work_through_hit_q, the rule that keeps the sandbox's test work out of every result), or
    was listed on one by a sync (the subquery of workers_on_sandbox)."""
    worker = OuterRef("pk")
    through = work_through_hit_q(sandbox=sandbox)
    listed = PlatformAssignment.objects.filter(
        worker_id=OuterRef("worker_id"),
        hit__publication__platform=OuterRef("platform"),
        hit__publication__sandbox=sandbox,
    )
    return (
        Q(Exists(Assignment.objects.filter(through, annotator=worker)))
        | Q(Exists(HumanAnswer.objects.filter(through, annotator=worker)))
        | Q(Exists(listed))
    )


def platform_never_gave(worker: Annotator) -> bool:
    """Whether the worker's id is one their platform never gives (CrowdPlatform.
    worker_id_issued: on MTurk, an id someone typed into our task page's address, stored
    before the page refused such ids). The platform refuses any call naming it: a block, an
    unblock, a message to them and whoever is in the same call."""
    if not worker.platform:
        return False
    return not platform_class(worker.platform).worker_id_issued(worker.worker_id)


def platform_not_told(worker: Annotator, *, done: str) -> str:
    """What the admin is told of a block or unblock (`done`: "blocked") kept on this site
    alone because the platform never gave the worker's id; "" when the platform was told."""
    if not platform_never_gave(worker):
        return ""
    name = platform_label(worker.platform)
    return (
        f"{name} was not told: it never gives a worker the id '{worker.worker_id}' (someone "
        f"typed it into our task page's address) and refuses any call naming it. The worker "
        f"is {done} on this site, which is the only place that id can work."
    )


def _worker_platform(worker: Annotator, *, user, verb: str, done: str):
    """The worker's platform, refused while it points at the other MTurk endpoint than the one
    the worker works for us on (workers_on_sandbox): a block or an unblock there would leave
    the account they work with as it was. None for a web account (platform ""), which has no
    platform account: get_platform("") is CROWD_BACKEND's, and MTurk refused its empty
    WorkerId, so such an account could be neither blocked nor unblocked. None too for an id
    the platform never gives (platform_never_gave): it refused the call, so such a worker
    could not be blocked at all; the block holds here, where alone that id can work."""
    if not worker.platform or platform_never_gave(worker):
        return None
    sandbox = workers_on_sandbox(annotator_ids=[worker.pk])[worker.pk]
    if sandbox is not None:
        workers_endpoint_check(
            platform_name=worker.platform,
            sandbox=sandbox,
            workers=[worker.worker_id],
            verb=verb,
            done=done,
        )
    return get_platform(worker.platform, user=user)


def worker_block(
    *, annotator_id: int, reason: str, user, now: datetime | None = None
) -> WorkerBlock:
    """Block a worker on the platform and here: they get no more of our tasks, their work
    counts in no result, and none of it holds a slot of its task any longer
    (_blocked_work_released), so each task is offered to other workers again."""
    require_admin(user)
    if not reason.strip():
        raise AnnotateError("Say why the worker is blocked: MTurk requires a reason.")
    worker = _crowd_worker(annotator_id)
    platform = _worker_platform(worker, user=user, verb="block", done="blocked")
    if platform is not None:
        platform.worker_block(worker_id=worker.worker_id, reason=reason.strip())
    now = now or timezone.now()
    with transaction.atomic():
        # The worker's row first, as each claim of theirs takes it before reading the block
        # (workers.crowd_worker_get_or_create): a claim in flight is waited for, then ended
        # below with the others; one that comes after waits for this block and is refused.
        Annotator.objects.select_for_update(no_key=True).filter(pk=worker.pk).order_by().first()
        block, _ = WorkerBlock.objects.update_or_create(
            annotator=worker,
            defaults={"reason": reason.strip(), "active": True, "created_by": user},
        )
        for task_id in _blocked_work_released(annotator_id=worker.pk, now=now):
            task_left_out_restore(task_id=task_id, now=now)
        for answer in _blocked_answers_released(annotator_id=worker.pk):
            _answer_place_handed_on(answer)
    return block


def _blocked_answers_released(*, annotator_id: int) -> list[HumanAnswer]:
    """Free the places a blocked worker's human-study answers hold on their prompts, as their
    batch work frees its slots: each answer is kept (an admin may still reject it) and marked
    place_released, the mark of an answer that holds no place (same_channel_q), so the prompt
    is offered to other workers again. Without this their answers, which count nowhere while
    the block lasts, kept the prompt full and the study ended short of counted answers. Return
    the answers that held a place: worker_block hands each place on to an answer of its
    channel waiting for one (_answer_place_handed_on), as a batch's freed slot goes to its
    task's left-out work.

    The rows the answers' channels take turns on come first (their HITs', the study's
    self-hosted link's), then the answers' rows, in the order of a sync (_hit_store) and of a
    place handed on (_answer_places_given), which lock the answers of the HIT after it: the
    other order deadlocked with a sync of one of the HITs. Every answer not rejected is marked,
    whatever its mark was: a sync or a reject giving one its place back holds its HIT's or
    link's row, so this waits for it and marks it after; one that comes after waits for them
    and reads the block. A new answer of the worker waits for the worker's row, which the
    block holds (worker_block)."""
    answers = HumanAnswer.objects.filter(annotator_id=annotator_id).exclude(
        status=AssignmentStatus.REJECTED
    )
    _answers_turns_locked(answers)
    holding = list(
        answers.select_for_update(of=("self",))
        .select_related("annotator")
        .filter(place_released=False)
        .order_by("pk")
    )
    answers.update(place_released=True)
    return holding


def _answers_turns_locked(answers) -> None:
    """Lock the rows the channels of `answers` (one worker's) take turns on, each kind in id
    order: their HITs', then their studies' self-hosted links', then their studies' own (the
    in-house channel's, which handing a place on to a worker counted as an expert takes:
    _turns_of). Taken before any answer's row (_hit_store); a block or an unblock that took
    them answer by answer could hold one HIT, or one study, and wait for another that the
    other held (two blocks deadlocked on two studies' rows, PostgreSQL aborting one after the
    platform had been told)."""
    hit_ids = set(answers.exclude(platform_hit_id="").values_list("platform_hit_id", flat=True))
    if hit_ids:
        _hits_locked(Hit.objects.filter(hit_id__in=hit_ids, prompt__isnull=False).values("pk"))
    study_ids = sorted(set(answers.values_list("study_id", flat=True)))
    if answers.filter(annotator__platform="selfhosted").exists():
        for study_id in study_ids:
            study_link_lock(human_study_id=study_id)
    if study_ids:
        studies = HumanStudy.objects.select_for_update().filter(pk__in=study_ids).order_by("pk")
        list(studies.values_list("pk", flat=True))


def human_answers_locked(*, annotator_id: int) -> list[HumanAnswer]:
    """Lock a person's verbalizer answers that are not rejected, after the rows their channels
    take turns on (_answers_turns_locked), and return them: a change of their kind moves them
    to another channel (same_channel_q; annotate.services.annotators.annotator_kind_set), which
    holds the person's row first, as their answers and a block do."""
    answers = HumanAnswer.objects.filter(annotator_id=annotator_id).exclude(
        status=AssignmentStatus.REJECTED
    )
    _answers_turns_locked(answers)
    return list(
        answers.select_for_update(of=("self",)).select_related("annotator", "study").order_by("pk")
    )


def human_answers_channel_moved(*, answers: list[HumanAnswer], kind: str) -> int:
    """Settle the places of a person's answers (human_answers_locked) now that their kind is
    `kind`: an answer holding a place keeps it in its new channel only if the channel has one
    free for it, and otherwise waits there for one, the channel's answers that held their
    places keeping them (the one that came last waits, as an answer on a HIT of a worker
    counted as an expert waits when the in-house places are taken); then the place each left
    in its old channel goes to an answer waiting for one (_answer_place_handed_on), and one
    free in its new channel to the oldest waiting there, its own maybe. Without this a kind
    decided after the answers were given overfilled their new channel. Return how many
    answers lost their place here because their new channel was full (one may have taken a
    place back in the hand-on that follows; answers that waited already are not counted). A
    person of no decided kind holds a place in no channel."""
    waiting = 0
    for answer in answers:
        answer.annotator.kind = kind
        if kind in (AnnotatorKind.EXPERT, AnnotatorKind.CROWD) and not answer.place_released:
            free = channel_places_free(
                study=answer.study,
                prompt_id=answer.prompt_id,
                channel=answer.annotator,
                exclude_id=answer.pk,
            )
            if free <= 0:
                answer.place_released = True
                answer.save(update_fields=["place_released"])
                waiting += 1
    for answer in answers:
        _answer_place_handed_on(answer)
    return waiting


def _blocked_work_released(*, annotator_id: int, now: datetime) -> list[int]:
    """Free the slots a blocked worker's work holds: their submitted and approved work is kept
    (their labels too) but marked is_late, the mark of submitted work that holds no slot (the
    TaskSlots triggers follow it), and their claims end now, marked expired as the beat marks
    a claim past its time (what they still submit on one is stored the same way, annotate.
    services.submissions). Without this their work, which counts nowhere while the block lasts,
    kept its task from ever getting the counted answers it needs until an admin rejected it.
    Return the ids of the tasks whose slots it freed, in order."""
    # Every assignment of the worker first, under its row lock: whatever gives one a slot (a
    # submit, left-out work restored: task_left_out_restore) holds its row and reads the block
    # only after taking it. So one in flight is waited for here, and the marking below, in
    # statements with snapshots of their own, sees what it did; a later one waits for this
    # transaction and then reads the block. Claims past their time or expired by the beat
    # still take a submit: they are held too. The claims end as expired, not by their time
    # alone: a submit reads its time before it waits for the row, and a claim ending at a later
    # time was still live for it.
    mine = _worker_work_locked(annotator_id)
    claims = [(pk, task) for pk, task, status in mine if status == AssignmentStatus.CLAIMED]
    ended = Assignment.objects.filter(pk__in=[pk for pk, _ in claims])
    # Only a claim with time left was ended by the block (the review page says so); one past
    # its time had run out already, and the beat had not marked it yet.
    ended.filter(expires_at__gt=now).update(ended_by_block_at=now)
    ended.update(status=AssignmentStatus.EXPIRED, expires_at=Least("expires_at", Value(now)))
    freed = {task_id for _, task_id in claims}
    holding = Assignment.objects.filter(
        annotator_id=annotator_id,
        status__in=[AssignmentStatus.SUBMITTED, AssignmentStatus.APPROVED],
        is_late=False,
    )
    freed |= set(holding.values_list("task_id", flat=True))
    holding.update(is_late=True)
    return sorted(freed)


def _worker_work_locked(annotator_id: int) -> list[tuple[int, int, str]]:
    """(pk, task id, status) of every assignment of the worker, under their row locks, taken
    after their tasks' locks (in id order): a sync (_hit_store) and a claim take a task's lock
    before its rows, and the block then takes the freed tasks' left-out rows.

    A submit of a lapsed claim and a return take the claim's row before its task's lock: the
    rows are taken without waiting, and when one is held, every lock taken here goes back
    and the block waits for that row alone, then tries again. No assignment of the worker
    appears meanwhile: a claim of theirs waits for the worker's row (worker_block), and an
    assignment never changes its task."""
    mine = Assignment.objects.filter(annotator_id=annotator_id).order_by("pk")
    while True:
        try:
            with transaction.atomic():
                for task_id in sorted(set(mine.values_list("task_id", flat=True))):
                    task_lock(task_id=task_id)
                return list(
                    mine.select_for_update(nowait=True).values_list("pk", "task_id", "status")
                )
        except OperationalError as error:
            if getattr(error.__cause__, "sqlstate", None) != _LOCK_NOT_AVAILABLE:
                raise
        with transaction.atomic():
            list(mine.select_for_update().values_list("pk", flat=True))
            transaction.set_rollback(True)  # its locks go back with the savepoint


_LOCK_NOT_AVAILABLE = "55P03"  # PostgreSQL: FOR UPDATE NOWAIT found the row locked


@dataclass(frozen=True)
class Unblocked:
    restored: int  # assignments that hold their slot and count again
    left_out: int  # their task was filled meanwhile: kept, counted nowhere, as late work
    platform_note: str = ""  # the platform was not told: it never gave the id (platform_not_told)


def worker_unblock(
    *, annotator_id: int, user, reason: str = "", now: datetime | None = None
) -> Unblocked:
    """Unblock a worker: their work counts again where its task still has a free slot.

    The block freed its slots (worker_block) and other workers may have filled them since: each
    piece of work takes its slot back under its task's lock, as every claim does, only when the
    task still has one, so no task ever counts more answers than its assignments per task.
    Work its platform has not confirmed yet waits for the sync that confirms it, as any work
    a sync released. A claim the block ended stays ended (the worker may take the task up
    again, like any lapsed claim, if it still has a slot).

    Their human-study answers follow the same rule (_unblocked_answers_restored): each takes
    its place back only when its prompt still has one free in its channel; the others stay
    out, kept and counted nowhere, and are counted in `restored` and `left_out` with the rest.
    """
    require_admin(user)
    worker = _crowd_worker(annotator_id, or_blocked=True)
    platform = _worker_platform(worker, user=user, verb="unblock", done="unblocked")
    if platform is not None:
        platform.worker_unblock(worker_id=worker.worker_id, reason=reason.strip())
    now = now or timezone.now()
    restored = left_out = 0
    with transaction.atomic():
        # The worker's row first, and read again under its lock, as a kind's change holds it
        # (annotator_kind_set) before their answers' channels' rows: the kind read before the
        # platform call may be stale, and the channel of a kind decided meanwhile is the one
        # their answers take their places back in.
        locked = Annotator.objects.select_for_update(no_key=True).filter(pk=worker.pk)
        worker = locked.order_by().get()
        WorkerBlock.objects.filter(annotator=worker).update(active=False)
        released = (
            Assignment.objects.filter(
                annotator=worker,
                status__in=[AssignmentStatus.SUBMITTED, AssignmentStatus.APPROVED],
                is_late=True,
            )
            .exclude(released_unconfirmed_q())
            .select_related("task__batch__project")
            .order_by("task_id")
        )
        for assignment in released:
            if _slot_taken_back(assignment, now=now):
                restored += 1
            else:
                left_out += 1
        answers_restored, answers_left_out = _unblocked_answers_restored(worker)
    return Unblocked(
        restored=restored + answers_restored,
        left_out=left_out + answers_left_out,
        platform_note=platform_not_told(worker, done="unblocked"),
    )


def _unblocked_answers_restored(worker: Annotator) -> tuple[int, int]:
    """Give an unblocked worker's answers their places back where their prompt has one free in
    their channel, under the rows that channel's answers to the prompt take turns on (the
    answer's HIT, mturk_answer_submit; the study's self-hosted link, link_answer_submit; a web
    account's, the study's, human_work_answer_submit: _turns_of), all taken first
    (_answers_turns_locked): never one answer more than the study's answers per
    prompt. Return (restored, left out). An answer left out is kept and counts nowhere, as a
    batch's work left out does, until a place of its prompt frees up in its channel (a reject,
    a block or a kind's change: _answer_place_handed_on; on a HIT, a sync too:
    _answer_places_handed_on), which it then takes, the oldest waiting first. One the platform
    has not confirmed yet waits for the sync that confirms it, as any answer a sync released,
    and is neither."""
    released = HumanAnswer.objects.filter(annotator=worker, place_released=True).exclude(
        status=AssignmentStatus.REJECTED
    )
    if platform_confirms(worker.platform):
        released = released.filter(platform_record__isnull=False)
    restored = left_out = 0
    _answers_turns_locked(released)
    for answer in released.order_by("study_id", "prompt_id"):
        hit = hit_of_work(answer)
        given = _answer_places_given(
            study_id=answer.study_id,
            prompt_id=answer.prompt_id,
            channel=worker,
            waiting=HumanAnswer.objects.filter(pk=answer.pk),
            lock_turns=_turns_of(hit=hit, study_id=answer.study_id, channel=worker),
        )
        restored += bool(given)
        left_out += not given
    return restored, left_out


def _turns_of(*, hit: Hit | None, study_id: int, channel: Annotator):
    """What locks the rows an answer's channel takes turns on: its HIT's, or (none) the
    study's link's for a self-hosted participant's answer, nothing more for a web account's
    (platform ""); for a worker counted as an expert (`channel`'s kind: the in-house channel)
    and for a web account (in-house, or counted as a crowd worker) then the study's row, which
    their answers take turns on (human_work_answer_submit): after the HIT's or link's, as an
    MTurk answer's insert holds its HIT and a link's answer its link, and then read the
    study's row. A web account's answer never takes the link's row: an unblock holds the
    study's row already (_answers_turns_locked), and the link's after it would reverse the
    order of a link's answer. The in-house channel as a whole (expert, platform "", no HIT:
    _in_house_places_handed_on) takes the study's row alone, as a web account's does.

    The one order of these rows: HIT, then link, then study, then the answers, which
    _answer_places_given locks after this (_answers_turns_locked takes the same rows for
    several answers at once). Every caller that hands a place on took its study's row first (a
    sync, _hit_store; a reject, a block, an unblock or a kind's change, _answers_turns_locked),
    so the study's row the in-house channel takes after a crowd channel's answers
    (_answer_places_handed_on) is one it holds already."""
    web_account = hit is None and channel.platform == ""

    def lock() -> None:
        if hit is not None:
            _hits_locked([hit.pk])
        elif not web_account:
            study_link_lock(human_study_id=study_id)
        if channel.kind != AnnotatorKind.CROWD or web_account:
            HumanStudy.objects.select_for_update().filter(pk=study_id).first()

    return lock


@dataclass(frozen=True)
class Notified:
    failed: list[str]  # platform worker ids their platform could not reach
    not_sent: list[str]  # names of the web accounts among them: no platform to message them on
    # Worker ids their platform never gives (platform_never_gave), left out of its call.
    unknown_ids: list[str] = field(default_factory=list)


def web_accounts_unreachable(names: list[str]) -> str:
    """What the admin is told of web accounts a message was not sent to."""
    return (
        f"Not sent to {', '.join(names)}: a web account (signed up on this site) has no crowd "
        "platform to message it through, and this site sends no messages of its own."
    )


def ids_never_given(worker_ids: list[str]) -> str:
    """What the admin is told of workers left out of a message: their platform never gives
    their ids (platform_never_gave)."""
    ids = f"{len(worker_ids)} worker id" + ("s" if len(worker_ids) != 1 else "")
    return (
        f"Not sent to {ids} the platform never gives ({', '.join(worker_ids)}: typed into "
        "our task page's address): the platform refuses a message naming one, and everyone "
        "else in it went unmessaged."
    )


def workers_notify(*, annotator_ids: list[int], subject: str, message: str, user) -> Notified:
    """Message workers on their platform; return the worker ids it could not reach, the web
    accounts among them (platform ""), which were sent nothing: get_platform("") is
    CROWD_BACKEND's, where they have no account (MTurk refused the empty WorkerId, and the
    platform workers of the same call went unmessaged), and the ids their platform never gives
    (platform_never_gave), left out of its call, which MTurk refused whole for one of them.
    Refused when none is left to message."""
    require_admin(user)
    if not subject.strip() or not message.strip():
        raise AnnotateError("A message to workers needs a subject and a text.")
    text_length_check(
        subject.strip(), field="subject", most=SUBJECT_MAX_CHARS, what="a message's subject"
    )
    text_length_check(
        message.strip(), field="message", most=MESSAGE_MAX_CHARS, what="a message's text"
    )
    workers = list(Annotator.objects.filter(crowd_worker_q(), pk__in=annotator_ids))
    if len(workers) != len(set(annotator_ids)):
        raise NotFoundError("Some of these workers do not exist.")
    web_accounts = sorted(w.name for w in workers if not w.platform)
    unknown_ids = sorted(w.worker_id for w in workers if platform_never_gave(w))
    if not workers:
        raise AnnotateError("Name at least one worker to message.")
    if len(web_accounts) + len(unknown_ids) == len(workers):
        said = [web_accounts_unreachable(web_accounts)] if web_accounts else []
        said += [ids_never_given(unknown_ids)] if unknown_ids else []
        raise ConflictError(" ".join(["Nothing was sent.", *said]))
    groups = _notify_groups([w for w in workers if w.platform and not platform_never_gave(w)])
    failed: list[str] = []
    for platform_name, ids in groups:
        failed += get_platform(platform_name, user=user).workers_notify(
            worker_ids=ids, subject=subject.strip(), message=message.strip()
        )
    return Notified(failed=failed, not_sent=web_accounts, unknown_ids=unknown_ids)


def _notify_groups(workers: list[Annotator]) -> list[tuple[str, list[str]]]:
    """The worker ids to message per platform, each group on the MTurk endpoint its workers
    work for us on (workers_on_sandbox). Refused before any message is sent when a platform's
    group mixes workers known only from the sandbox with workers from production (one call
    reaches one endpoint), or when its endpoint is not the one MTURK_SANDBOX names now."""
    on_sandbox = workers_on_sandbox(annotator_ids=[w.pk for w in workers])
    groups = []
    for platform_name in sorted({w.platform for w in workers}):
        mine = [w for w in workers if w.platform == platform_name]
        test = [w.worker_id for w in mine if on_sandbox[w.pk] is True]
        real = [w.worker_id for w in mine if on_sandbox[w.pk] is False]
        if test and real:
            raise ConflictError(
                "Some of these workers are known only from test work on the MTurk sandbox "
                f"({', '.join(test)}), the others from work on MTurk production "
                f"({', '.join(real)}): a message goes to one endpoint, so nothing was sent. "
                "Message each group on its own."
            )
        if test or real:
            workers_endpoint_check(
                platform_name=platform_name,
                sandbox=bool(test),
                workers=test or real,
                verb="message",
                done="sent",
            )
        groups.append((platform_name, [w.worker_id for w in mine]))
    return groups


# --- Self-hosted links ---------------------------------------------------------------------


def _selfhosted(publication_id: int) -> Publication:
    try:
        return Publication.objects.get(pk=publication_id, platform="selfhosted")
    except Publication.DoesNotExist:
        raise NotFoundError("No such self-hosted study link.") from None


def publication_link_set(
    *, publication_id: int, user, closed: bool, anonymous_starts_limit: int | None, now: datetime
) -> Publication:
    """Close or reopen a study link and set its cap on starts without a participant id
    (None: CROWD_ANONYMOUS_STARTS_PER_LINK). Work already started may still be submitted."""
    require_admin(user)
    publication = _selfhosted(publication_id)
    if anonymous_starts_limit is not None and anonymous_starts_limit < 0:
        raise AnnotateError("anonymous_starts_limit must be 0 or more (0: an id is required).")
    if anonymous_starts_limit is not None and anonymous_starts_limit > STARTS_LIMIT_AT_MOST:
        raise AnnotateError(
            f"anonymous_starts_limit must be at most {STARTS_LIMIT_AT_MOST} (empty: the default)."
        )
    if closed and publication.link_closed_at is None:
        publication.link_closed_at = now
    elif not closed:
        publication.link_closed_at = None
    publication.anonymous_starts_limit = anonymous_starts_limit
    publication.save(update_fields=["link_closed_at", "anonymous_starts_limit"])
    return publication


def publication_completion_set(
    *, publication_id: int, user, completion_code: str, completion_url: str
) -> Publication:
    """Set what a self-hosted link's participants get after the submit: the recruiting site's
    completion code, or the address to return to (the site often gives the code only once it
    has the link, that is after publishing). A human study's are the study's own, so every
    link of the study gives them: they are set on the study."""
    require_admin(user)
    publication = _selfhosted(publication_id)
    completion_check(completion_code=completion_code, completion_url=completion_url)
    target = publication.human_study if publication.human_study_id else publication
    target.completion_code = completion_code.strip()
    target.completion_url = completion_url.strip()
    target.save(update_fields=["completion_code", "completion_url"])
    return publication


# --- HIT lifetimes --------------------------------------------------------------------------


def _created_hit(hit_pk: int) -> Hit:
    try:
        return Hit.objects.select_related("publication").get(pk=hit_pk, status=HitStatus.CREATED)
    except Hit.DoesNotExist:
        raise NotFoundError("No such HIT on the platform.") from None


def hit_set_expiration(*, hit_pk: int, expires_at: datetime, user) -> Hit:
    """Extend a HIT's life, or end it now (any time in the past expires it at once). The time
    the platform confirmed replaces an expiry it had not confirmed: the admin's latest word."""
    require_admin(user)
    hit = _created_hit(hit_pk)
    publication_platform(hit.publication, user=user).hit_update_expiration(
        hit_id=hit.hit_id, expires_at=expires_at
    )
    hit.expires_at, hit.expiry_pending_since, hit.expiry_error = expires_at, None, ""
    hit.save(update_fields=["expires_at", "expiry_pending_since", "expiry_error"])
    return hit


def publication_expire(*, publication_id: int, now: datetime, user) -> ExpiryOutcome:
    """Expire a publication within this call: publication_expire_start, then
    publication_expire_run (pages and the API start the run in the background instead)."""
    publication_expire_start(publication_id=publication_id, now=now, user=user)
    return publication_expire_run(publication_id=publication_id, now=now, user=user)


@transaction.atomic
def publication_expire_start(*, publication_id: int, now: datetime, user) -> int:
    """Stop offering every HIT of a publication as far as no platform call is needed, and stop
    its publish from making more; return how many HITs are left for the platform to end
    (publication_expire_run, which the caller starts in the background). Those are stored as
    asked for first (hits_expiry_ask): whatever becomes of that run, each HIT whose end the
    platform does not confirm stays live here, asked for again by the next Expire and by the
    sync beat. Refused while the last Expire's run waits to start or runs (a second would
    only ask the platform twice); one that stopped without finishing may be pressed again.
    Only an admin's Resume asks for the missing HITs again."""
    require_admin(user)
    publication = Publication.objects.get(pk=publication_id)
    # Before anything is written: on the other endpoint no HIT of it could be expired.
    publication_endpoint_check(publication)
    pressed = (
        Publication.objects.filter(pk=publication_id)
        .exclude(expiry_alive_q())
        .update(
            expiry_asked_at=Now(),
            expiry_started_at=None,
            expiry_heartbeat_at=None,
            expiry_finished_at=None,
            expiry_lease="",
            expiry_outcome="",
        )
    )
    if not pressed:
        _expiry_alive_refuse(publication)
    # First, so a publish still making HITs stops before its next one (and ends the one it was
    # making when this ran: publishing._expired_meanwhile); a redelivery of it makes none. One
    # that no delivery holds (waiting, or gone silent) ends here and now.
    if not publication_unheld_expire(publication_id=publication_id, now=now):
        Publication.objects.filter(pk=publication_id, expired_at__isnull=True).update(
            expired_at=now
        )
    return hits_expiry_ask(Hit.objects.filter(publication_id=publication_id), at=now)


def _expiry_alive_refuse(publication: Publication) -> None:
    run = expiry_run_read(publication.pk)
    since = run.heartbeat_at or run.started_at or run.asked_at
    raise ConflictError(
        f"An Expire of this publication was asked at {_utc(run.asked_at)} and its run "
        f"{'runs' if run.started_at else 'has not started yet'} (last sign of life "
        f"{_utc(since)}): it asks the platform for every HIT marked. Should it stop, the "
        "publication page says so and Expire can be pressed again."
    )


def _utc(moment: datetime | None) -> str:
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC" if moment else "never"


def publication_expire_run(*, publication_id: int, now: datetime, user=None) -> ExpiryOutcome:
    """Ask the platform to end the publication's HITs an Expire marked (publication_expire_start),
    after looking for HITs a stopped publish made but never stored; return, and store for the
    page, how many it confirmed and how many it did not (those stay stored as live:
    expiry.hit_expire). The run takes the Expire's lease and beats while it asks, so the page
    shows it running, and stopped once it falls silent (its worker killed); a delivery of it
    whose Expire has finished, or that another delivery runs, asks nothing. A run stopped by
    an unexpected error ends finished, saying so, and leaves the HITs it did not reach to the
    beat."""
    job = Publication.objects.filter(pk=publication_id)
    token = lease_take(
        job=job,
        claimable=expiry_claimable_q(),
        now=Now(),
        heartbeat_field="expiry_heartbeat_at",
        lease_field="expiry_lease",
        expiry_started_at=Now(),
    )
    if token is None:
        return ExpiryOutcome()
    mine = job.filter(expiry_lease=token, expiry_finished_at__isnull=True)
    try:
        with lease_beating(
            job=job,
            token=token,
            every=settings.CROWD_EXPIRY_STALE_SECONDS / 20,
            heartbeat_field="expiry_heartbeat_at",
            lease_field="expiry_lease",
        ):
            outcome = _publication_hits_expire(job.get(), now=now, user=user)
    except Exception as error:
        mine.update(
            expiry_finished_at=Now(),
            expiry_outcome=f"The expiry stopped on an unexpected error ({type(error).__name__}: "
            f"{str(error)[:500]}). The HITs it did not end stay live here and marked to be "
            "ended: the sync beat asks the platform again, and so does Expire.",
        )
        raise
    mine.update(expiry_finished_at=Now(), expiry_outcome=expiry_summary(outcome))
    return outcome


def _publication_hits_expire(publication: Publication, *, now: datetime, user) -> ExpiryOutcome:
    """End the HITs marked to be ended (publication_expire_start), and those a stopped publish
    made before the Expire that are found now; not a HIT an admin extended since the Expire."""
    platform = publication_platform(publication, user=user)
    hits = Hit.objects.filter(publication_id=publication.pk, status=HitStatus.CREATED)
    unchecked = ""
    if platform_class(publication.platform).creates_hits:
        missing = list(publication.hits.filter(status__in=MISSING).values_list("pk", flat=True))
        try:
            publication_orphans_adopt(publication=publication, platform=platform, now=now)
        except CrowdPlatformError as error:  # the HITs stored here are expired all the same
            unchecked = f"HITs a stopped publish may have made were not looked for: {error}"
        hits_expiry_ask(hits.filter(pk__in=missing), at=now)
    asked = hits.filter(expiry_pending_since__isnull=False)
    return replace(hits_expire(asked, platform, at=now), unchecked=unchecked)


def publication_delete_finished(*, publication_id: int, user) -> tuple[int, int]:
    """Delete the HITs whose work is all reviewed; return (deleted, still busy)."""
    require_admin(user)
    publication = Publication.objects.get(pk=publication_id)
    platform = publication_platform(publication, user=user)
    deleted = busy = 0
    for hit in publication.hits.filter(status=HitStatus.CREATED):
        try:
            platform.hit_delete(hit_id=hit.hit_id)
        except TransientPlatformError:
            raise
        except CrowdPlatformError:
            busy += 1  # still assignable, or has work waiting for review
            continue
        # Deleted on the platform: no worker takes it, whatever expiry was still pending.
        hit.status, hit.expiry_pending_since, hit.expiry_error = HitStatus.DELETED, None, ""
        hit.save(update_fields=["status", "expiry_pending_since", "expiry_error"])
        deleted += 1
    return deleted, busy
