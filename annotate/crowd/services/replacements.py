"""Replace crowd work that no longer counts, on the publication's own HITs.

A HIT's MaxAssignments are spent once a worker submits, whatever the review says: work rejected
here, handed back late or blocked leaves its task short of workers while the HIT has no
assignment left to give (and a batch is published once per platform). The plan compares, for
every created HIT, what its task (a study's prompt) still needs from this platform's workers
with what the platform says the HIT still offers (`assignments_available`, asked per HIT that
needs work), and asks for the difference (MTurk's CreateAdditionalAssignmentsForHIT), at the
publication's reward and fee, reopening a HIT that expired for the publication's lifetime. Each
addition's token is stored before the platform is asked (HitExtension), so a retry after a lost
reply is a no-op on the platform instead of a second payment; once the platform forgot the
token, the HIT's MaxAssignments say which pending additions it made (_made_of)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from annotate.crowd.models import (
    Hit,
    HitExtension,
    HitExtensionStatus,
    HitStatus,
    PlatformAssignment,
    Publication,
)
from annotate.crowd.platforms import platform_class, platform_label, publication_platform
from annotate.crowd.pricing import assignments_cost, fee_description
from annotate.crowd.services.publishing import account_balance_check, open_assignments
from annotate.crowd.services.review import hits_released_work_synced, require_admin
from annotate.errors import (
    AlreadyProcessedError,
    ConflictError,
    CrowdPlatformError,
    HitAlreadyExistsError,
    NotFoundError,
    PublishError,
    TransientPlatformError,
)
from annotate.models import Annotator, AnnotatorKind, Assignment
from annotate.services.assignments import counted_assignments
from annotate.verbalizer.models import HumanAnswer
from annotate.verbalizer.services.humans import same_channel_q

# MTurk: "HITs created with fewer than 10 assignments cannot be extended to have 10 or more".
MTURK_EXTENSION_LIMIT = 10


@dataclass(frozen=True)
class ReplacementRow:
    hit: Hit
    wanted: int  # assignments its task (prompt) still needs from this platform's workers
    available: int  # assignments of the HIT no worker holds, as the platform says
    add: int  # assignments to ask for (0 when refused)
    reopen: bool  # expired with assignments to offer: offered again for the publication's lifetime
    refused: str = ""  # why this HIT cannot get them
    unseen: int = 0  # accepted on the platform by workers not seen here yet: not asked for


@dataclass(frozen=True)
class ReplacementPlan:
    publication: Publication
    rows: list[ReplacementRow]  # the created HITs whose task needs more than they offer
    reward_usd: Decimal
    fee_rate: Decimal | None  # the publication's flat rate, or None: MTurk's schedule (pricing)
    balance_usd: Decimal | None
    handed_back: int = 0  # released work the platform confirmed since the last sync: no gap

    @property
    def handed_back_note(self) -> str:
        """What the plan found of released work handed back since the last sync ("" if none)."""
        return handed_back_note(self.handed_back, study=self.publication.human_study_id is not None)

    @property
    def assignments(self) -> int:
        return sum(row.add for row in self.rows)

    @property
    def hits(self) -> int:
        return sum(1 for row in self.rows if row.add)

    @property
    def reopens(self) -> int:
        """Expired HITs to offer again (free), with their untaken or new assignments."""
        return sum(1 for row in self.rows if row.reopen)

    @property
    def total_usd(self) -> Decimal:
        """The assignments asked for, each at its HIT's rate: MTurk refuses to take a HIT made
        with fewer than 10 assignments to 10 or more, so the MaxAssignments it was made with
        says which."""
        return assignments_cost(
            hits=[(row.add, row.hit.max_assignments) for row in self.rows if row.add],
            reward_usd=self.reward_usd,
            flat_rate=self.fee_rate,
        )

    @property
    def fee(self) -> str:
        """Which fee applies and why (pricing.fee_description)."""
        sizes = [row.hit.max_assignments for row in self.rows if row.add]
        return fee_description(flat_rate=self.fee_rate, max_assignments=sizes)

    @property
    def affordable(self) -> bool:
        return self.balance_usd is None or self.balance_usd >= self.total_usd


def _wanted(publication: Publication, now: datetime) -> dict[int, int]:
    """What each HIT's task (a study's prompt) still needs, by Hit pk: a batch's tasks as a
    publish counts them (open_assignments: live claims and accepted work hold their slots), a
    study's prompts as its crowd channel on this platform does (same_channel_q: every answer
    not rejected holds one, but one whose place a sync released: the platform never listed
    it once its hand-back was due)."""
    hits = publication.hits.filter(status=HitStatus.CREATED)
    if publication.batch_id is not None:
        still_open = open_assignments(batch=publication.batch, now=now)
        return {pk: still_open.get(task, 0) for pk, task in hits.values_list("pk", "task_id")}
    study = publication.human_study
    channel = same_channel_q(Annotator(kind=AnnotatorKind.CROWD, platform=publication.platform))
    answered = dict(
        HumanAnswer.objects.filter(channel, study=study)
        .values("prompt_id")
        .annotate(n=Count("id"))
        .values_list("prompt_id", "n")
        .order_by()
    )
    return {
        pk: max(study.answers_per_prompt - answered.get(prompt, 0), 0)
        for pk, prompt in hits.values_list("pk", "prompt_id")
    }


def _pending_here(publication: Publication, hit: Hit, *, now: datetime) -> int:
    """How many of the HIT's assignments the platform may count as accepted, not submitted, that
    hold a slot here (a claim being worked on, work whose hand-back has not reached the
    platform): ours of this HIT that the platform never listed as submitted.

    The platform's pending assignments beyond these are workers who accepted the HIT but have
    not opened our page yet: each will take a slot, or give the assignment back to the HIT, so
    the plan does not pay for another in their place. Counted generously (a forged claim, a
    claim whose worker gave the HIT back, work submitted since the last sync all count here),
    so a doubt asks for one more, never one fewer. Work a sync released holds no slot (no
    place): it is not counted here, as `_wanted` leaves it out; if it is a hand-back still on
    its way, its assignment is pending on the platform and not paid for twice."""
    listed = PlatformAssignment.objects.filter(hit=hit).values("platform_assignment_id")
    if hit.task_id is not None:
        ours = Assignment.objects.filter(counted_assignments(now=now), task_id=hit.task_id)
    else:
        channel = same_channel_q(Annotator(kind=AnnotatorKind.CROWD, platform=publication.platform))
        ours = HumanAnswer.objects.filter(
            channel, study_id=publication.human_study_id, prompt_id=hit.prompt_id
        )
    return (
        ours.filter(platform_hit_id=hit.hit_id).exclude(platform_assignment_id__in=listed).count()
    )


def handed_back_note(count: int, *, study: bool) -> str:
    if not count:
        return ""
    noun = "answer" if study else "assignment"
    was = "was" if count == 1 else "were"
    return (
        f"{count} released {noun}{'' if count == 1 else 's'} {was} handed back since the last "
        f"sync: no replacement needed for {'it' if count == 1 else 'them'}."
    )


NO_HITS_TO_EXTEND = (
    "A self-hosted link has no HITs to extend: a task whose work was rejected is offered on "
    "the link again by itself, while the link is open."
)


@dataclass(frozen=True)
class StoredNeed:
    """What the created HITs' tasks (a study's prompts) still need from this platform's
    workers, as stored here: how many HITs, and how many assignments in all. What those HITs
    still offer, and so what replacing costs, only the platform says (replacements_plan)."""

    hits: int
    assignments: int


def replacements_stored_need(*, publication_id: int, now: datetime, user) -> StoredNeed:
    """What the publication's tasks still need, from our own rows only: the replacements page's
    view, which makes no platform call (slow, rate-limited, and failing in an outage). Raises
    PublishError on a platform without HITs of its own."""
    require_admin(user)
    publication = Publication.objects.select_related("batch__project", "human_study").get(
        pk=publication_id
    )
    if not platform_class(publication.platform).creates_hits:
        raise PublishError(NO_HITS_TO_EXTEND)
    wanted = [n for n in _wanted(publication, now).values() if n]
    return StoredNeed(hits=len(wanted), assignments=sum(wanted))


def replacements_plan(*, publication_id: int, now: datetime, user) -> ReplacementPlan:
    """What replacing the work that no longer counts would ask for, and cost (nothing is
    spent). Asks the platform about each created HIT whose task still needs work, and for the
    account balance. Raises PublishError on a platform without HITs of its own.

    Those HITs that hold work a sync released are synced first (hits_released_work_synced):
    a hand-back that reached the platform after the last sync shows there as submitted, neither
    pending nor available, and the plan paid for a worker in the place the work now fills."""
    require_admin(user)
    publication = Publication.objects.select_related("batch__project", "human_study").get(
        pk=publication_id
    )
    platform = publication_platform(publication, user=user)
    if not platform.creates_hits:
        raise PublishError(NO_HITS_TO_EXTEND)
    wanted = {pk: n for pk, n in _wanted(publication, now).items() if n}
    needing = list(Hit.objects.filter(pk__in=wanted).select_related("publication").order_by("id"))
    handed_back = hits_released_work_synced(hits=needing, platform=platform, now=now)
    wanted = {pk: n for pk, n in _wanted(publication, now).items() if n}
    rows = []
    hits = (
        Hit.objects.filter(pk__in=wanted)
        .select_related("task__instruction", "prompt__item", "prompt__mapping")
        .order_by("id")
    )
    for hit in hits:
        try:
            info = platform.hit_get(hit_id=hit.hit_id)
        except TransientPlatformError:
            raise
        except CrowdPlatformError as error:  # deleted on the platform, say
            rows.append(ReplacementRow(hit, wanted[hit.pk], 0, 0, False, refused=str(error)))
            continue
        available = info.assignments_available
        if available is None:  # a platform that does not say: only what we know is taken
            available = 0
        unseen = 0
        if info.assignments_pending and wanted[hit.pk] > available:
            unseen = max(info.assignments_pending - _pending_here(publication, hit, now=now), 0)
        add = max(wanted[hit.pk] - available - unseen, 0)
        expired = info.expires_at is not None and info.expires_at <= now
        if not add and not (expired and available):  # offered, to workers who can take it
            continue
        refused = ""
        if info.max_assignments < MTURK_EXTENSION_LIMIT <= info.max_assignments + add:
            refused = (
                f"the HIT has {info.max_assignments} assignments, and a HIT made with fewer "
                f"than {MTURK_EXTENSION_LIMIT} cannot reach {MTURK_EXTENSION_LIMIT} or more"
            )
        rows.append(
            ReplacementRow(
                hit=hit,
                wanted=wanted[hit.pk],
                available=available,
                add=0 if refused else add,
                # the assignments no worker took are worth reopening for, before paying more
                reopen=expired and bool(available or not refused),
                refused=refused,
                unseen=unseen,
            )
        )
    return ReplacementPlan(
        publication=publication,
        rows=rows,
        reward_usd=publication.reward_usd,
        fee_rate=publication.fee_rate,
        balance_usd=account_balance_check(
            platform=platform, platform_name=publication.platform, sandbox=publication.sandbox
        ),
        handed_back=handed_back,
    )


@dataclass(frozen=True)
class ReplacementResult:
    added: int  # assignments added
    hits: int  # HITs they were added to
    reopened: int  # expired HITs offered again
    failed: list[str]  # "HIT id: the platform's refusal"
    stopped: bool = False  # another request took the publication over: LEASE_LOST
    handed_back: str = ""  # ReplacementPlan.handed_back_note: released work found confirmed


# How long one request for replacements holds its publication (it asks the platform once per HIT
# that needs work, each call retried by boto3): a crashed one frees it after this.
REPLACING_SECONDS = 300


class _Lease:
    """One request's hold on a publication (`Publication.replacing_until`, its value the
    holder's mark): renewed before each addition, so a request that runs past
    REPLACING_SECONDS (many HITs, a slow or throttling platform) keeps it, and one whose hold
    ran out and was taken by another request stops instead of asking for assignments that
    request plans too."""

    def __init__(self, publication_id: int, until: datetime) -> None:
        self.publication_id, self.until = publication_id, until

    def renewed(self) -> bool:
        """Hold the publication REPLACING_SECONDS more; False if another request holds it."""
        until = max(self.until, timezone.now() + timedelta(seconds=REPLACING_SECONDS))
        mine = Publication.objects.filter(pk=self.publication_id, replacing_until=self.until)
        if not mine.update(replacing_until=until):
            return False
        self.until = until
        return True


@contextmanager
def _replacing(publication_id: int, now: datetime) -> Iterator[_Lease]:
    """Hold the publication for one request for replacements at a time (an UPDATE that only one
    of two admins' requests can make): a second, planned on the same figures, would otherwise
    ask the platform for the same assignments again, and pay them twice."""
    free = Q(replacing_until__isnull=True) | Q(replacing_until__lte=now)
    lease = _Lease(publication_id, now + timedelta(seconds=REPLACING_SECONDS))
    if not Publication.objects.filter(free, pk=publication_id).update(replacing_until=lease.until):
        if not Publication.objects.filter(pk=publication_id).exists():
            raise NotFoundError("No such publication.")
        raise ConflictError(
            "Workers in place of rejected work are being asked for on this publication right "
            "now (by you in another tab, or another admin): look at the page again in a minute."
        )
    try:
        yield lease
    finally:
        Publication.objects.filter(pk=publication_id, replacing_until=lease.until).update(
            replacing_until=None
        )


LEASE_LOST = (
    f"Stopped before the last HITs: this request ran past {REPLACING_SECONDS} s and another "
    "request for this publication took over (it asks for what is left): look at the page again."
)


def replacements_create(
    *, publication_id: int, confirm_total: Decimal, now: datetime, user
) -> ReplacementResult:
    """Ask the platform for the plan's assignments, as the admin confirmed it.

    Refused (nothing asked) when the total is no longer the one confirmed (work came in or was
    rejected since), when the account cannot pay it, when there is nothing to replace, or while
    another request for this publication runs (`_replacing`). A HIT the platform refuses is
    reported and the others go on; an addition whose reply was lost is asked again with its
    stored token first (a no-op on the platform when it was done)."""
    require_admin(user)
    with _replacing(publication_id, now) as lease:
        return _replacements_create(
            publication_id=publication_id,
            confirm_total=confirm_total,
            now=now,
            user=user,
            lease=lease,
        )


def _replacements_create(
    *, publication_id: int, confirm_total: Decimal, now: datetime, user, lease: _Lease
) -> ReplacementResult:
    result = _pending_retried(publication_id=publication_id, now=now, user=user, lease=lease)
    if result.stopped:
        return result
    plan = replacements_plan(publication_id=publication_id, now=now, user=user)
    found = plan.handed_back_note
    lead = f"{found} " if found else ""
    if not plan.assignments and not plan.reopens:
        if result.added or result.failed:  # what the pending additions came to, said
            return replace(result, handed_back=found)
        raise PublishError(f"{lead}No task of this publication needs another worker on its HIT.")
    if plan.total_usd != confirm_total:
        raise ConflictError(
            f"{lead}The cost is now ${plan.total_usd} (you confirmed ${confirm_total}): work was "
            "submitted, returned or reviewed since. Look at the new plan and confirm again."
        )
    if not plan.affordable:
        raise PublishError(
            f"The {platform_label(plan.publication.platform)} account has ${plan.balance_usd}, "
            f"less than the ${plan.total_usd} these assignments cost."
        )
    platform = publication_platform(plan.publication, user=user)
    added = hits = reopened = 0
    failed, stopped = list(result.failed), False
    for row in plan.rows:
        if not row.add and not row.reopen:
            continue
        if not lease.renewed():
            stopped = True
            break
        if row.reopen:  # first: assignments paid on a HIT no worker can take help nobody
            until = now + timedelta(seconds=plan.publication.lifetime_seconds)
            platform.hit_update_expiration(hit_id=row.hit.hit_id, expires_at=until)
            Hit.objects.filter(pk=row.hit.pk).update(expires_at=until)
            reopened += 1
        if not row.add:
            continue
        extension = HitExtension.objects.create(
            hit=row.hit,
            count=row.add,
            reward_usd=plan.reward_usd,
            fee_rate=plan.fee_rate,
            unique_request_token=uuid.uuid4().hex,
            created_by=user if getattr(user, "pk", None) else None,
        )
        error = _ask(platform, extension, now=now)
        if error:
            failed.append(f"{row.hit.hit_id}: {error}")
            continue
        added, hits = added + row.add, hits + 1
    return ReplacementResult(
        added=result.added + added,
        hits=result.hits + hits,
        reopened=reopened,
        failed=failed,
        stopped=stopped,
        handed_back=found,
    )


def _ask(platform, extension: HitExtension, *, now: datetime) -> str:
    """Ask for one stored addition; mark it and the HIT's MaxAssignments. Return the platform's
    refusal ("" when added). A transient error leaves it pending, for a retry with its token."""
    try:
        platform.hit_add_assignments(
            hit_id=extension.hit.hit_id,
            count=extension.count,
            unique_request_token=extension.unique_request_token,
        )
    except (AlreadyProcessedError, HitAlreadyExistsError):
        pass  # done by an earlier try whose reply was lost
    except TransientPlatformError:
        raise
    except CrowdPlatformError as error:
        extension.status, extension.error = HitExtensionStatus.FAILED, str(error)
        extension.save(update_fields=["status", "error"])
        return str(error)
    _mark_done(extension, now=now)
    return ""


@transaction.atomic
def _mark_done(extension: HitExtension, *, now: datetime, settled_by=None) -> bool:
    """Record a done addition: the HIT's MaxAssignments here grow by its count, once (an
    addition marked done by another request already is left as it is). `settled_by`: the admin
    who said the platform made it (hit_extension_settle). Return whether this call marked it."""
    hit = Hit.objects.select_for_update().get(pk=extension.hit_id)
    settled = {"settled_by": settled_by, "settled_at": now} if settled_by is not None else {}
    pending = HitExtension.objects.filter(pk=extension.pk, status=HitExtensionStatus.PENDING)
    marked = pending.update(status=HitExtensionStatus.DONE, done_at=now, **settled)
    if marked:
        hit.max_assignments += extension.count
        hit.save(update_fields=["max_assignments"])
        for name, value in settled.items():
            setattr(extension, name, value)
    extension.status, extension.done_at = HitExtensionStatus.DONE, extension.done_at or now
    return bool(marked)


# MTurk remembers a UniqueRequestToken for 24 hours from its first use, which is after the
# addition was stored: one stored less than this long ago (an hour spared for clocks) is asked
# again with its token, a no-op on the platform when it was made.
TOKEN_REMEMBERED = timedelta(hours=23)


def _token_forgotten(extension: HitExtension, now: datetime) -> bool:
    """Whether MTurk may have forgotten the addition's token by `now` (TOKEN_REMEMBERED): asked
    again with it, it could add the assignments a second time."""
    return extension.created_at <= now - TOKEN_REMEMBERED


def _made_of(forgotten: list[HitExtension], rise: int) -> list[HitExtension] | None:
    """Which of a HIT's pending additions whose tokens MTurk forgot it made, judged by how far
    its MaxAssignments rose above ours (which grow only with the additions marked done): all of
    them when the rise reaches their sum, none when there is no rise, else the ones whose counts
    add up to the rise exactly. None when no set of them does (assignments added elsewhere, on
    the requester site say): which were made cannot be told.

    Counts alone tell only how many were made, not always which (1 and 1 for a rise of 1): any
    set that adds up will do, since the others are then asked for and every addition ends up
    made once and counted once."""
    if rise <= 0:
        return []
    if rise >= sum(extension.count for extension in forgotten):
        return list(forgotten)
    reachable: dict[int, tuple[int, ...]] = {0: ()}  # a sum of counts: the first set making it
    for index, extension in enumerate(forgotten):
        for total, chosen in list(reachable.items()):
            if total + extension.count <= rise:
                reachable.setdefault(total + extension.count, (*chosen, index))
    if rise not in reachable:
        return None
    return [forgotten[index] for index in reachable[rise]]


def _hit_pending_retried(
    platform, extensions: list[HitExtension], *, now: datetime, lease: _Lease
) -> tuple[int, list[str], bool]:
    """Settle one HIT's pending additions, oldest first: those whose tokens MTurk still keeps are
    asked again with them; then the rest are credited with what the HIT's MaxAssignments show
    (_made_of) and the others asked for. Return (assignments added, refusals, lease lost).

    Checking each addition against the HIT on its own credited the wrong one of two (a rise of 2
    from the newer addition taken for the older one of 1, the newer one then asked again: made
    twice once its token was forgotten, or counted here without being made)."""
    added, failed = 0, []

    def ask(extension: HitExtension) -> bool:
        nonlocal added
        if not lease.renewed():
            return False
        error = _ask(platform, extension, now=now)
        if error:
            failed.append(f"{extension.hit.hit_id}: {error}")
        else:
            added += extension.count
        return True

    remembered = [e for e in extensions if not _token_forgotten(e, now)]
    forgotten = [e for e in extensions if _token_forgotten(e, now)]
    for extension in remembered:
        if not ask(extension):
            return added, failed, True
    if not forgotten:
        return added, failed, False
    made = _made_of(forgotten, _rise(platform, forgotten[0].hit))
    if made is None:
        hit_id = forgotten[0].hit.hit_id
        counts = " and ".join(str(extension.count) for extension in forgotten)
        failed.append(
            f"{hit_id}: MTurk's HIT has more assignments than recorded here, but not as many more "
            f"as any of the additions left pending ({counts}) add up to, so we cannot tell which "
            "it made: none is asked for again (it might be paid twice) nor counted. Compare the "
            "HIT on the requester site with the additions on the replacements page, and settle "
            "each there: made, or not made."
        )
        return added, failed, False
    for extension in made:
        _mark_done(extension, now=now)
        added += extension.count
    for extension in forgotten:
        if extension not in made and not ask(extension):
            return added, failed, True
    return added, failed, False


def _rise(platform, hit: Hit) -> int:
    """How far the platform's HIT has more assignments than ours (0 for a HIT it no longer
    shows: its additions are asked for, and refused)."""
    theirs = _platform_max_assignments(platform, hit)
    if theirs is None:
        return 0
    ours = Hit.objects.values_list("max_assignments", flat=True).get(pk=hit.pk)
    return theirs - ours


def _platform_max_assignments(platform, hit: Hit) -> int | None:
    """The platform's MaxAssignments of the HIT; None when it no longer shows the HIT."""
    try:
        return platform.hit_get(hit_id=hit.hit_id).max_assignments
    except TransientPlatformError:
        raise
    except CrowdPlatformError:
        return None


def _pending_retried(
    *, publication_id: int, now: datetime, user, lease: _Lease
) -> ReplacementResult:
    """Ask again for the additions of this publication left pending (a lost reply, a crash),
    unless the platform's HIT shows it made them (_hit_pending_retried)."""
    require_admin(user)
    pending = list(
        HitExtension.objects.filter(
            hit__publication_id=publication_id, status=HitExtensionStatus.PENDING
        )
        .select_related("hit__publication")
        .order_by("hit_id", "created_at", "id")
    )
    if not pending:
        return ReplacementResult(added=0, hits=0, reopened=0, failed=[])
    platform = publication_platform(pending[0].hit.publication, user=user)
    by_hit: dict[int, list[HitExtension]] = {}
    for extension in pending:
        by_hit.setdefault(extension.hit_id, []).append(extension)
    added = hits = 0
    failed: list[str] = []
    for extensions in by_hit.values():
        done, refused, stopped = _hit_pending_retried(platform, extensions, now=now, lease=lease)
        added, hits, failed = added + done, hits + bool(done), failed + refused
        if stopped:
            return ReplacementResult(added, hits, reopened=0, failed=failed, stopped=True)
    return ReplacementResult(added=added, hits=hits, reopened=0, failed=failed)


# --- Additions settled by hand ---------------------------------------------------------------


def hit_extension_settle(
    *, publication_id: int, extension_id: int, made: bool, now: datetime, user
) -> HitExtension:
    """Settle a pending addition as the admin found it on the requester site: made (counted as
    a done addition is, _mark_done: its assignments, its cost, the HIT's MaxAssignments here)
    or not made (HitExtensionStatus.NOT_MADE: never asked for again, nothing counted).

    For the additions _made_of cannot tell about, which a request for replacements would
    otherwise name on every press. Only an admin, only an addition still pending whose token
    MTurk may have forgotten (a younger one is asked again with its token, safely), under the
    publication's hold (_replacing) so that a request for replacements running meanwhile does
    not count it too. "Made" is refused when the platform's HIT has no room for it."""
    require_admin(user)
    if not HitExtension.objects.filter(
        pk=extension_id, hit__publication_id=publication_id
    ).exists():
        raise NotFoundError("No such addition on this publication.")
    with _replacing(publication_id, now):
        extension = HitExtension.objects.select_related("hit__publication").get(pk=extension_id)
        _settle_check(extension, now=now)
        if made:
            platform = publication_platform(extension.hit.publication, user=user)
            _made_check(platform, extension)
            marked = _mark_done(extension, now=now, settled_by=user)
        else:
            marked = _mark_not_made(extension, now=now, settled_by=user)
        if not marked:  # only a write that does not take the hold could get here
            raise ConflictError("The addition was settled meanwhile: look at the page again.")
    return extension


def _mark_not_made(extension: HitExtension, *, now: datetime, settled_by) -> bool:
    """Record that the platform did not make a pending addition; return whether this call did."""
    pending = HitExtension.objects.filter(pk=extension.pk, status=HitExtensionStatus.PENDING)
    settled = {"settled_by": settled_by, "settled_at": now}
    if not pending.update(status=HitExtensionStatus.NOT_MADE, **settled):
        return False
    extension.status = HitExtensionStatus.NOT_MADE
    extension.settled_by, extension.settled_at = settled_by, now
    return True


def _settle_check(extension: HitExtension, *, now: datetime) -> None:
    """Refuse to settle an addition that is not pending, or whose token MTurk still keeps."""
    what = f"The addition of {extension.count} on HIT {extension.hit.hit_id}"
    if extension.status != HitExtensionStatus.PENDING:
        raise ConflictError(
            f"{what} is settled already ({extension.get_status_display()}): nothing to change."
        )
    if not _token_forgotten(extension, now):
        until = extension.created_at + TOKEN_REMEMBERED
        raise ConflictError(
            f"{what} was asked for at {_utc(extension.created_at)}: MTurk keeps its token until "
            f"about {_utc(until)}, so pressing Add on this page asks for it again safely (MTurk "
            "does nothing if it made it). It can be settled by hand only after that."
        )


def _made_check(platform, extension: HitExtension) -> None:
    """Refuse to count an addition the platform's HIT has no room for: MTurk's MaxAssignments
    only grow, so a HIT that made it has at least ours and its count. (A HIT the platform no
    longer shows cannot be compared: the admin's word stands.)"""
    theirs = _platform_max_assignments(platform, extension.hit)
    ours = Hit.objects.values_list("max_assignments", flat=True).get(pk=extension.hit_id)
    if theirs is not None and theirs < ours + extension.count:
        raise ConflictError(
            f"HIT {extension.hit.hit_id} has {theirs} assignments on "
            f"{platform_label(extension.hit.publication.platform)} and {ours} are counted here: "
            f"it cannot have made this addition of {extension.count} as well "
            f"({ours + extension.count}). Nothing is counted; if it did not make it, say so."
        )


def _utc(moment: datetime) -> str:
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M} UTC"


def addition_cost(extension: HitExtension) -> Decimal:
    """What an addition costs, the fee included: its assignments at the reward and fee it was
    asked at, at its HIT's rate (which no addition changes: MTurk refuses to take a HIT of fewer
    than 10 assignments to 10 or more)."""
    return assignments_cost(
        hits=[(extension.count, extension.hit.max_assignments)],
        reward_usd=extension.reward_usd,
        flat_rate=extension.fee_rate,
    )


@dataclass(frozen=True)
class AdditionRow:
    extension: HitExtension
    cost_usd: Decimal  # addition_cost: counted once done, never otherwise
    remembered_until: datetime | None  # pending, its token kept: asked again until about then
    settle: bool  # pending, its token forgotten: an admin says whether the platform made it
    platform_max_assignments: int | None = None  # to settle: the platform's MaxAssignments
    platform_asked: bool = False  # whether it was asked for (None then: the HIT is not shown)

    @property
    def counted_usd(self) -> Decimal:
        done = self.extension.status == HitExtensionStatus.DONE
        return self.cost_usd if done else Decimal("0.00")


@dataclass(frozen=True)
class Additions:
    rows: list[AdditionRow]  # the publication's additions, HIT by HIT (the first SHOWN)
    assignments: int  # assignments added: the done additions'
    hits: int  # HITs they were added to
    total_usd: Decimal  # what they cost, each addition_cost (nothing for any other status)


ADDITIONS_SHOWN = 200


def additions_overview(
    *, publication_id: int, now: datetime, user, ask_platform: bool = False
) -> Additions:
    """The publication's additions as the replacements page lists them: what each cost, which
    are counted, which an admin may settle by hand. `ask_platform`: also ask the platform for
    the MaxAssignments of those HITs, to compare (the page's check, never its GET)."""
    require_admin(user)
    additions = (
        HitExtension.objects.filter(hit__publication_id=publication_id)
        .select_related("hit__publication", "settled_by")
        .order_by("hit_id", "created_at", "id")
    )
    shown = list(additions[:ADDITIONS_SHOWN])
    pending = [e for e in shown if e.status == HitExtensionStatus.PENDING]
    to_settle = {e.pk for e in pending if _token_forgotten(e, now)}
    theirs: dict[int, int | None] = {}
    for extension in pending:
        if ask_platform and extension.pk in to_settle and extension.hit_id not in theirs:
            platform = publication_platform(extension.hit.publication, user=user)
            theirs[extension.hit_id] = _platform_max_assignments(platform, extension.hit)
    rows = [
        AdditionRow(
            extension=e,
            cost_usd=addition_cost(e),
            remembered_until=e.created_at + TOKEN_REMEMBERED
            if e.status == HitExtensionStatus.PENDING and e.pk not in to_settle
            else None,
            settle=e.pk in to_settle,
            platform_max_assignments=theirs.get(e.hit_id),
            platform_asked=e.hit_id in theirs,
        )
        for e in shown
    ]
    done = list(additions.filter(status=HitExtensionStatus.DONE))
    return Additions(
        rows=rows,
        assignments=sum(e.count for e in done),
        hits=len({e.hit_id for e in done}),
        total_usd=sum((addition_cost(e) for e in done), Decimal("0.00")),
    )
