"""The crowd worker's side: who the worker is, which assignment they hold, where they post back.

Inside MTurk's iframe third-party cookies may be blocked, so nothing here uses the session: an
accepted assignment is carried by a signed token (django.core.signing) naming the assignment and
the validated turkSubmitTo address.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from django.conf import settings
from django.core import signing
from django.db import IntegrityError, transaction
from django.db.models import Count, Exists, OuterRef, Q
from django.utils import timezone

from annotate.crowd import fake
from annotate.crowd.base import PREVIEW_ASSIGNMENT_ID
from annotate.crowd.models import (
    LINKED_TO_OURS,
    Hit,
    HitStatus,
    PlatformAssignment,
    Publication,
    WorkerBlock,
    crowd_worker_q,
)
from annotate.crowd.platforms import demo_platform_in_use, platform_class, platform_label
from annotate.errors import (
    AnnotateError,
    ConflictError,
    NotFoundError,
    PermissionDeniedError,
    StudyClosedError,
    WorkerBlockedError,
)
from annotate.models import Annotator, AnnotatorKind, Assignment, AssignmentStatus, Task
from annotate.selectors.results import left_out_q
from annotate.services.assignments import (
    assignment_claim_next,
    assignment_claim_task,
    assignment_return,
    batch_slot_free,
    counted_assignments,
    task_left_out_restore,
    task_lock,
)

TOKEN_SALT = "annotate.crowd.assignment"
CLAIM_COOKIE_SALT = "annotate.crowd.claim-browser"
CLAIM_COOKIE_PREFIX = "crowd_claim_"
# A claim no longer held: its worker's new accept of the HIT takes it up again.
LAPSED = (AssignmentStatus.EXPIRED, AssignmentStatus.RETURNED)
DEMO_SUBMIT_SALT = "annotate.crowd.demo-submit"
TOKEN_MAX_AGE = 14 * 24 * 3600
SELFHOSTED_ID_PARAMS = ("PROLIFIC_PID", "workerId", "worker_id")
ANONYMOUS_PREFIX = "anon-"
ANONYMOUS_COOKIE_SALT = "annotate.crowd.anonymous-participant"
ANONYMOUS_COOKIE_PREFIX = "crowd_participant_"


@dataclass(frozen=True)
class WorkerAssignment:
    """An assignment reached through a worker token, and where to post the finished work."""

    assignment: Assignment
    submit_to: str  # "" for self-hosted links
    token: str

    @property
    def external_submit_url(self) -> str:
        return f"{self.submit_to}/mturk/externalSubmit" if self.submit_to else ""

    @property
    def submits_to_mturk(self) -> bool:
        return submits_to_host(self.submit_to)


def submits_to_host(submit_to: str) -> bool:
    """Whether finished work is posted to MTurk's host (a source the page's form-action must
    name): False for a self-hosted link, and for the offline demo platform, whose
    externalSubmit is a page of this site (a path, not a host)."""
    return submit_to.startswith("http")


def assignment_token(*, assignment: Assignment, submit_to: str = "") -> str:
    return signing.dumps({"a": assignment.pk, "s": submit_to}, salt=TOKEN_SALT, compress=True)


def worker_assignment_get(*, token: str) -> WorkerAssignment:
    """Return the assignment a worker token names; a bad or old token is a 404."""
    try:
        data = signing.loads(token, salt=TOKEN_SALT, max_age=TOKEN_MAX_AGE)
        assignment = Assignment.objects.select_related(
            "annotator", "task__instruction", "task__batch__project"
        ).get(crowd_worker_q("annotator__"), pk=data["a"])
    except (signing.BadSignature, KeyError, TypeError, Assignment.DoesNotExist):
        raise NotFoundError("This task link is not valid (or has expired).") from None
    return WorkerAssignment(assignment=assignment, submit_to=data.get("s", ""), token=token)


def demo_submit_token(*, held_submit_to: str, assignment_id: str) -> str:
    """The offline demo platform's externalSubmit is a page of this site: the done page gives
    the worker a signed word for their own assignment id, and only that submits it there
    (`demo_submit_check`). Empty for a worker who posts to MTurk itself, or to no platform."""
    if not held_submit_to or held_submit_to.startswith("http"):
        return ""
    return signing.dumps({"d": assignment_id}, salt=DEMO_SUBMIT_SALT, compress=True)


def demo_submit_check(*, token: str, assignment_id: str) -> None:
    """Refuse (404) a demo externalSubmit whose signed word names another assignment."""
    try:
        data = signing.loads(token, salt=DEMO_SUBMIT_SALT, max_age=TOKEN_MAX_AGE)
    except signing.BadSignature:
        raise NotFoundError("Not this worker's assignment.") from None
    if not assignment_id or not isinstance(data, dict) or data.get("d") != assignment_id:
        raise NotFoundError("Not this worker's assignment.")


def submit_base_checked(turk_submit_to: str, *, platform: str = "mturk") -> str:
    """Return turkSubmitTo without its trailing slash if its host is allowed, else refuse.

    The browser will post the worker's assignment there, so only MTurk's own hosts qualify
    (CROWD_SUBMIT_HOSTS: www.mturk.com and workersandbox.mturk.com, plus any a test adds), and
    for the offline demo platform its page on this site (`fake.demo_submit_base`).
    """
    demo = platform == "fake" and demo_platform_in_use()
    if demo and turk_submit_to == fake.demo_submit_base():
        return turk_submit_to
    parts = urlsplit(turk_submit_to.strip())
    base = f"{parts.scheme}://{parts.netloc}"
    allowed = parts.netloc.lower() in {h.lower() for h in settings.CROWD_SUBMIT_HOSTS}
    https_or_test = parts.scheme == "https" or (
        parts.scheme == "http" and parts.hostname in {"127.0.0.1", "localhost"}
    )
    if not (allowed and https_or_test and parts.path.strip("/") == "" and not parts.query):
        raise AnnotateError(
            f"turkSubmitTo '{turk_submit_to}' is not a Mechanical Turk address; "
            "open this task from Mechanical Turk."
        )
    return base


def crowd_worker_get_or_create(*, platform: str, worker_id: str) -> Annotator:
    """Return the crowd Annotator for a platform's worker id; blocked workers are refused.

    The worker's row stays locked to the end of the caller's transaction, which makes the
    claim: a block takes the same lock (review.worker_block), so it either waits for the
    claim and then ends it, or the claim waits for it and reads the block here, after the lock.
    Without it a claim that read the block before a block committed got a claim the block never
    saw. FOR NO KEY UPDATE: the worker's own rows going in (labels, claims) are not held up.
    """
    worker_id = worker_id.strip()
    if not worker_id or len(worker_id) > 200:
        raise AnnotateError("A worker id is required (at most 200 characters).")
    locked = Annotator.objects.select_for_update(no_key=True)
    try:
        with transaction.atomic():
            annotator, _ = locked.get_or_create(
                platform=platform,
                worker_id=worker_id,
                defaults={"name": f"{platform}:{worker_id}", "kind": AnnotatorKind.CROWD},
            )
    except IntegrityError:  # the same worker's first two requests raced
        annotator = locked.get(platform=platform, worker_id=worker_id)
    if WorkerBlock.objects.filter(annotator=annotator, active=True).exists():
        raise WorkerBlockedError("Sorry, you can no longer take tasks from this requester.")
    return annotator


def hit_get_for_worker(*, hit_token: str) -> Hit:
    """A batch's HIT by the token in its ExternalQuestion URL; a study's (a prompt, no task:
    annotate.verbalizer.services.crowd.study_hit_get) or anything else is a 404."""
    try:
        return Hit.objects.select_related("publication", "task__batch__project").get(
            unique_request_token=hit_token, task__isnull=False
        )
    except Hit.DoesNotExist:
        raise NotFoundError("No such task.") from None


def is_preview(assignment_id: str) -> bool:
    return not assignment_id or assignment_id == PREVIEW_ASSIGNMENT_ID


@dataclass(frozen=True)
class AdmittedWorker:
    """An MTurk worker on one of our HITs whom nothing we know contradicts."""

    annotator: Annotator
    submit_to: str
    assignment_id: str


def mturk_worker_admit(
    *, hit: Hit, assignment_id: str, hit_id: str, worker_id: str, turk_submit_to: str
) -> AdmittedWorker:
    """Check what MTurk added to an ExternalQuestion URL before any work is taken.

    Refuses a HIT that is not ours, a turkSubmitTo outside MTurk, a worker or assignment id the
    platform never gives, an assignment id the platform reported for another worker or HIT, and
    a blocked worker. Whether the HIT has room for one more worker is checked where the work is
    stored (`worker_slot_check`).
    """
    if hit.status != HitStatus.CREATED or hit_id != hit.hit_id:
        raise NotFoundError("This HIT is not one of ours.")
    submit_to = submit_base_checked(turk_submit_to, platform=hit.publication.platform)
    platform_ids_check(
        platform=hit.publication.platform, worker_id=worker_id, assignment_id=assignment_id
    )
    _refuse_what_the_platform_contradicts(hit=hit, assignment_id=assignment_id, worker_id=worker_id)
    annotator = crowd_worker_get_or_create(platform=hit.publication.platform, worker_id=worker_id)
    return AdmittedWorker(
        annotator=annotator, submit_to=submit_to, assignment_id=assignment_id.strip()
    )


def platform_ids_check(*, platform: str, worker_id: str, assignment_id: str) -> None:
    """Refuse a workerId or assignmentId that the HIT's platform never gives (MTurk: "A" then
    capitals or digits, at most 64 characters; its assignment ids capitals or digits): someone
    made it up. Stored, such a worker could be neither blocked nor messaged on the platform,
    which refuses a call naming the id, and a message to them with others fails for all.
    An empty id is left to the checks that require one."""
    issued = platform_class(platform)
    name = platform_label(platform)
    for field, value, ok in (
        ("workerId", worker_id.strip(), issued.worker_id_issued),
        ("assignmentId", assignment_id.strip(), issued.assignment_id_issued),
    ):
        if value and not ok(value):
            shown = value if len(value) <= 70 else f"{value[:67]}..."
            raise AnnotateError(
                f"The {field} in this page's address, '{shown}', is not one {name} gives: "
                f"nothing was taken. Open this task from {name}."
            )


def mturk_assignment_open(
    *,
    hit: Hit,
    assignment_id: str,
    hit_id: str,
    worker_id: str,
    turk_submit_to: str,
    now: datetime,
    browser_claims: Collection[int] = (),
    new_claim_check: Callable[[], None] = lambda: None,
) -> WorkerAssignment:
    """Link an accepted MTurk assignment to one of ours, creating it the first time.

    Reopening the same assignment returns it; a worker who already did the task is refused.
    `browser_claims` are the claims the opening browser made or opened (claims_of_browser):
    only that browser moves a live claim to another assignment id (_reopen).
    `new_claim_check` is called before a claim is made or a lapsed one taken up (not on a
    reload): the opening address's limit of open claims (annotate.crowd.services.addresses).
    """
    with (
        demo_hit_returned_when_refused(hit=hit, assignment_id=assignment_id, worker_id=worker_id),
        # One transaction from the worker's record to the claim: an accept refused on the way
        # (the address's open claims, a full task or HIT, a closed batch) leaves no worker
        # record behind, which the annotators page listed as a worker with no work.
        transaction.atomic(),
    ):
        admitted = mturk_worker_admit(
            hit=hit,
            assignment_id=assignment_id,
            hit_id=hit_id,
            worker_id=worker_id,
            turk_submit_to=turk_submit_to,
        )
        annotator, submit_to = admitted.annotator, admitted.submit_to
        existing = (
            Assignment.objects.select_for_update()
            .filter(annotator=annotator, task=hit.task)
            .first()
        )
        if existing is not None:
            if existing.status in LAPSED and existing.submitted_at is None:
                _closed_batch_refused(hit.task)
            if existing.status in LAPSED:
                new_claim_check()
                worker_slot_check(hit=hit, worker_id=annotator.worker_id)
                task_slot_check(hit=hit, now=now)
            minutes = hit.task.batch.project.allotted_minutes
            assignment = _reopen(
                existing, assignment_id=assignment_id, browser_claims=browser_claims,
                lapsed_until=now + timedelta(minutes=minutes),
            )  # fmt: skip
        else:
            _closed_batch_refused(hit.task, new=True)
            new_claim_check()
            worker_slot_check(hit=hit, worker_id=annotator.worker_id)
            task_slot_check(hit=hit, now=now)
            assignment = assignment_claim_task(
                annotator=annotator, task=hit.task, now=now, check_slots=False
            )
        if assignment.platform_assignment_id != assignment_id:  # a new accept, not a reload
            # The platform gives the worker the publication's assignment duration from each
            # accept (a HIT returned and accepted again too): the claim keeps its slot as long,
            # when that is longer than the project's minutes.
            on_platform = now + timedelta(seconds=hit.publication.assignment_duration_seconds)
            assignment.expires_at = max(assignment.expires_at, on_platform)
        assignment.platform_assignment_id = assignment_id
        assignment.platform_hit_id = hit.hit_id
        assignment.save(update_fields=["platform_assignment_id", "platform_hit_id", "expires_at"])
        return WorkerAssignment(
            assignment=assignment,
            submit_to=submit_to,
            token=assignment_token(assignment=assignment, submit_to=submit_to),
        )


def _closed_batch_refused(task: Task, *, new: bool = False) -> None:
    """A deactivated batch takes no new worker (a HIT still open on the platform, accepted
    after the admin closed the batch), and a lapsed claim is not taken up again in it: its
    page takes no more answers there (annotate.services.submissions). A claim still live
    when the batch was closed may be finished."""
    if task.batch.active:
        return
    if new:
        raise StudyClosedError(
            "This batch is closed: it takes no new workers. Please return the HIT."
        )
    raise StudyClosedError(
        "This batch is closed and the time for this task is up: it takes no more answers. "
        "Please return the HIT."
    )


@contextmanager
def demo_hit_returned_when_refused(*, hit: Hit, assignment_id: str, worker_id: str) -> Iterator:
    """On the offline demo platform, give back the HIT of a worker our page refuses.

    A refused MTurk worker is asked to return the HIT, and MTurk frees its slot when they do (or
    when the assignment duration ends). The offline platform has nobody to press Return: its
    accepted assignment held one of the HIT's MaxAssignments for good, so the HIT looked full
    and "Do it as a worker" was gone while the task still needed a worker. Only that worker's
    accepted, unsubmitted assignment of that HIT is returned (FakePlatform.worker_return).
    """
    try:
        yield
    except (ConflictError, PermissionDeniedError, StudyClosedError):
        if hit.publication.platform == fake.FakePlatform.name and demo_platform_in_use():
            fake.FakePlatform().worker_return(
                hit_id=hit.hit_id, assignment_id=assignment_id.strip(), worker_id=worker_id.strip()
            )
        raise


def task_slot_check(*, hit: Hit, now: datetime) -> None:
    """Refuse one more worker of a HIT whose task would then hold more assignments than its
    project's assignments per task (live claims and accepted submissions, as every claim
    counts them), under the task's row lock: run it in the claim's transaction.

    The HIT asked for what its task still needed when it was published (Hit.max_assignments),
    and the platform hands out no more. While the work of everyone else here (in-house
    annotators, a self-hosted link) leaves that many slots free, the platform's limit is the
    rule, so workers who invent assignment ids (whose work never counts unless the platform
    confirms it) cannot take a real worker's place. Once work done here since the HIT was
    published leaves fewer free, the platform's workers fill only what is left.
    """
    task_lock(task_id=hit.task_id)
    held = _slots_held(hit=hit, now=now)
    # Accepted work waiting for a slot goes first, where a slot is free; the count says whether
    # there is any, so the accept on a task without (nearly every one), or on a full task
    # (where left-out work usually waits), runs no statement more.
    per_task = hit.task.batch.project.assignments_per_task
    some_free = per_task - held["others"] - held["of_platform"] > 0
    if held["left_out"] and some_free and task_left_out_restore(task_id=hit.task_id, now=now):
        held = _slots_held(hit=hit, now=now)
    free = per_task - held["others"]
    if free < hit.max_assignments and held["of_platform"] >= free:
        raise ConflictError(
            "This task already has all the workers it needs (its other assignments are done "
            "or being done); please return the HIT."
        )


def _slots_held(*, hit: Hit, now: datetime) -> dict[str, int]:
    """The slots of the HIT's task held by the HIT's platform's workers and by everyone else,
    and how many pieces of its left-out work wait for one, in one statement."""
    of_platform = Q(annotator__platform=hit.publication.platform)
    counted = counted_assignments(now=now)
    return Assignment.objects.filter(task_id=hit.task_id).aggregate(
        others=Count("pk", filter=counted & ~of_platform),
        of_platform=Count("pk", filter=counted & of_platform),
        left_out=Count("pk", filter=left_out_q()),
    )


def _refuse_what_the_platform_contradicts(*, hit: Hit, assignment_id: str, worker_id: str) -> None:
    """Refuse an assignment id the platform reported for another worker or HIT (a new worker on
    a HIT whose MaxAssignments workers the platform already confirmed: worker_slot_check).

    Work from an id the platform never reported is stored but counts only once a sync or
    GetAssignment confirms it (annotate.selectors.results).
    """
    assignment_id, worker_id = assignment_id.strip(), worker_id.strip()
    if not assignment_id or len(assignment_id) > 200:
        raise AnnotateError("An assignmentId is required (at most 200 characters).")
    known = PlatformAssignment.objects.filter(platform_assignment_id=assignment_id).first()
    if known is not None and (known.worker_id != worker_id or known.hit_id != hit.pk):
        raise PermissionDeniedError(
            f"Mechanical Turk reported assignment {assignment_id} for another worker or HIT: "
            "this work cannot be accepted here."
        )


def worker_slot_check(*, hit: Hit, worker_id: str) -> None:
    """Refuse a new worker on a HIT whose MaxAssignments workers the platform already confirmed."""
    confirmed = set(
        PlatformAssignment.objects.filter(LINKED_TO_OURS, hit=hit).values_list(
            "worker_id", flat=True
        )
    )
    if worker_id not in confirmed and len(confirmed) >= hit.max_assignments:
        raise ConflictError(
            f"This HIT already has the {len(confirmed)} workers it asked for; please return it."
        )


def _reopen(
    existing: Assignment,
    *,
    assignment_id: str,
    browser_claims: Collection[int],
    lapsed_until: datetime,
) -> Assignment:
    """The same MTurk assignment again (a reload), or a fresh accept of a HIT returned unfinished.

    MTurk's requester API shows an assignment only once it is submitted, so nothing here can
    tell a worker's own new accept from an assignment id someone made up with that worker's id.
    A live claim therefore moves to another assignment id only from the browser that made or
    opened it (its claim cookie, claims_of_browser): anyone else would take the worker's task
    page from under them, and the hand-back of their work with it. A claim that lapsed (its
    worker's assignment on MTurk lapsed with it) is taken up again under the new id, with the
    work saved on it (a `both` project's direct scores), until `lapsed_until` at least; work
    submitted late (expired, kept, not counted) is a task done.
    """
    if existing.platform_assignment_id == assignment_id:
        return existing
    if PlatformAssignment.objects.filter(assignment=existing).exists():
        # The platform holds a hand-back of this claim's assignment (a sync linked it), though
        # nothing was submitted here: moved to another id, the claim would keep that record's
        # confirmation for work stored under an id the platform never issued (counted, then
        # unlinked and dropped by the next sync, or never, once the HIT is no longer listed).
        raise ConflictError(
            "This task was already handed back to the platform under your earlier assignment: "
            "it cannot be opened under another one. Please return this HIT."
        )
    if existing.status == AssignmentStatus.CLAIMED and existing.pk in browser_claims:
        return existing
    if existing.status == AssignmentStatus.CLAIMED:
        until = timezone.localtime(existing.expires_at).strftime("%Y-%m-%d %H:%M %Z")
        raise ConflictError(
            "This task is open under another of your assignments in another browser: finish it "
            "there. If you returned that HIT, open this one in the browser where you started it, "
            f"or here again after {until}."
        )
    if existing.status in LAPSED and existing.submitted_at is None:  # not work submitted late
        existing.status = AssignmentStatus.CLAIMED
        existing.expires_at = lapsed_until
        existing.ended_by_block_at = None  # a claim again: whatever ended it before is past
        existing.save(update_fields=["status", "expires_at", "ended_by_block_at"])
        return existing
    raise ConflictError("You have already done this task; please return the HIT.")


def claim_cookie(*, assignment: Assignment, now: datetime) -> tuple[str, str, int]:
    """The cookie (name, value, max-age in seconds) that marks the browser holding a claim, for
    as long as the claim lasts: only that browser moves it to another assignment id (_reopen)."""
    max_age = max(int((assignment.expires_at - now).total_seconds()), 60)
    value = signing.dumps(assignment.pk, salt=CLAIM_COOKIE_SALT)
    return f"{CLAIM_COOKIE_PREFIX}{assignment.pk}", value, max_age


def claims_of_browser(cookies: Mapping[str, str]) -> frozenset[int]:
    """The claims a browser's claim cookies name (claim_cookie); a cookie not signed by us, or
    naming another claim than its name says, names none."""
    claims = set()
    for name, value in cookies.items():
        if not name.startswith(CLAIM_COOKIE_PREFIX):
            continue
        try:
            claim = signing.loads(value, salt=CLAIM_COOKIE_SALT, max_age=TOKEN_MAX_AGE)
        except signing.BadSignature:
            continue
        if isinstance(claim, int) and name == f"{CLAIM_COOKIE_PREFIX}{claim}":
            claims.add(claim)
    return frozenset(claims)


def publication_for_link(*, link_token: str, human_study: bool = False) -> Publication:
    """The self-hosted publication of a link: of a batch, or (human_study=True) of a study."""
    try:
        return Publication.objects.select_related("batch__project", "human_study").get(
            link_token=link_token, platform="selfhosted", human_study__isnull=not human_study
        )
    except Publication.DoesNotExist:
        raise NotFoundError("This study link is not valid.") from None


def link_open_check(*, publication: Publication) -> None:
    """Refuse a link an admin closed, or whose batch (or human study) is no longer active."""
    if publication.link_closed_at is not None or not publication.target.active:
        raise StudyClosedError("This study is closed: it takes no new participants.")


def study_link_lock(*, human_study_id: int) -> None:
    """Lock the human study's self-hosted link (its publication's row; a study has one per
    platform at most: crowd_publication_study_one_per_platform): the row its self-hosted
    answers to any prompt take turns on, when one is stored (verbalizer.services.crowd.
    link_answer_submit) and when a place is given back or handed on (review.
    _answer_places_given), so no prompt counts more than the study's answers per prompt."""
    link = Publication.objects.filter(human_study_id=human_study_id, platform="selfhosted")
    list(link.select_for_update().order_by("pk").values_list("pk", flat=True))


def anonymous_worker_id(*, publication: Publication) -> str:
    """A new anonymous participant id; a human study's name its link, so its starts count."""
    if publication.human_study_id:
        return f"{ANONYMOUS_PREFIX}p{publication.pk}-{uuid.uuid4().hex[:20]}"
    return f"{ANONYMOUS_PREFIX}{uuid.uuid4().hex[:20]}"


def anonymous_start_check(*, publication: Publication) -> None:
    """Refuse one more start without a participant id once the link's cap is reached.

    The publication's row lock makes concurrent starts count one after the other. A batch's
    starts are its anonymous assignments; a human study's are the anonymous participants its
    link created (`anonymous_worker_id`).
    """
    Publication.objects.select_for_update().filter(pk=publication.pk).first()
    limit = publication.anonymous_starts_limit
    limit = settings.CROWD_ANONYMOUS_STARTS_PER_LINK if limit is None else limit
    if publication.human_study_id:
        started = Annotator.objects.filter(
            platform="selfhosted", worker_id__startswith=f"{ANONYMOUS_PREFIX}p{publication.pk}-"
        ).count()
    else:
        started = Assignment.objects.filter(
            task__batch_id=publication.batch_id,
            annotator__platform="selfhosted",
            annotator__worker_id__startswith=ANONYMOUS_PREFIX,
        ).count()
    if started >= limit:
        raise StudyClosedError(
            "This study link takes no more participants without an id: "
            "open it from the study's site (it adds your participant id)."
        )


def selfhosted_start(
    *,
    publication: Publication,
    params: dict[str, str],
    now: datetime,
    new_claim_check: Callable[[], None] = lambda: None,
) -> WorkerAssignment:
    """Give a worker from a self-hosted link their next task of the batch.

    The worker id comes from the URL (PROLIFIC_PID, workerId) or is a new anonymous one; a
    STUDY_ID and SESSION_ID, if given, are kept on the assignment. `new_claim_check` is called
    before a task is claimed (not when the participant's open claim is handed back to them):
    the starting address's limit of open claims (annotate.crowd.services.addresses).
    """
    link_open_check(publication=publication)
    worker_id = selfhosted_worker_id(params)
    with transaction.atomic():
        if not worker_id:
            anonymous_start_check(publication=publication)
            worker_id = anonymous_worker_id(publication=publication)
        annotator = crowd_worker_get_or_create(platform="selfhosted", worker_id=worker_id)
        if not Assignment.objects.filter(
            annotator=annotator,
            queue_project=publication.batch.project,
            status=AssignmentStatus.CLAIMED,
            expires_at__gt=now,
        ).exists():
            new_claim_check()
        assignment = assignment_claim_next(
            annotator=annotator, project=publication.batch.project, batch=publication.batch, now=now
        )
    study, session = params.get("STUDY_ID", "")[:200], params.get("SESSION_ID", "")[:200]
    if (study or session) and not assignment.platform_hit_id:
        assignment.platform_hit_id, assignment.platform_assignment_id = study, session
        assignment.save(update_fields=["platform_hit_id", "platform_assignment_id"])
    return WorkerAssignment(
        assignment=assignment, submit_to="", token=assignment_token(assignment=assignment)
    )


@transaction.atomic
def selfhosted_assignment_return(*, held: WorkerAssignment, now: datetime) -> Assignment:
    """Give a self-hosted participant's claimed task back: its slot is free at once for another
    participant, and nothing the participant gave on it counts (a returned assignment takes no
    submit; a `both` project's first-step scores stay on it, never made results). They never
    get that task again.

    A platform's worker returns the HIT on the platform, which frees the claim here when its
    time ends. Returning twice (a resent form) returns it once; submitted work is never returned.
    """
    try:
        assignment = Assignment.objects.select_for_update().get(
            pk=held.assignment.pk, annotator__platform="selfhosted"
        )
    except Assignment.DoesNotExist:
        raise AnnotateError(
            "Return this task on the platform you took it from (Return the HIT on Mechanical "
            "Turk): nothing is returned here."
        ) from None
    if assignment.status == AssignmentStatus.RETURNED:
        return assignment
    if assignment.submitted_at is not None:
        raise ConflictError(
            "You submitted this task already: your answers are kept, and it cannot be returned."
        )
    if assignment.status == AssignmentStatus.EXPIRED:  # its time ran out: its slot is free
        assignment.status = AssignmentStatus.RETURNED
        assignment.save(update_fields=["status"])
        return assignment
    return assignment_return(assignment_id=assignment.pk, annotator=assignment.annotator, now=now)


def selfhosted_returning(*, publication: Publication, params: dict[str, str]) -> bool:
    """Whether the start is a participant's next task ("Do the next task"): their id has work
    in the link's batch already. Such a start makes no participant, and it hands out only the
    tasks one participant may do, so it is not counted among an address's starts."""
    worker_id = selfhosted_worker_id(params).strip()
    return bool(worker_id) and (
        Assignment.objects.filter(
            task__batch_id=publication.batch_id,
            annotator__platform="selfhosted",
            annotator__worker_id=worker_id,
        ).exists()
    )


@dataclass(frozen=True)
class JoinOffer:
    """What a link's join page offers the participant who opened it."""

    start: bool  # the Start button
    blocked: bool  # their id is blocked: the page says what became of their work instead


def selfhosted_join_offer(
    *, publication: Publication, params: dict[str, str], now: datetime
) -> JoinOffer:
    """What the link's join page offers: Start to a returning participant always (their start
    gives them their next task or, with none left, their completion code again), to a newcomer
    while a task of the batch has a free slot (batch_slot_free, as the claim reads its
    candidates): a full batch's newcomer reads so on the page, not after pressing Start. A
    blocked participant, whose start is refused, is told so instead. One query for the
    participant (work here, block), one for a newcomer's slots."""
    worker_id = selfhosted_worker_id(params).strip()
    returning = blocked = False
    if worker_id:
        mine = OuterRef("pk")
        participant = (
            Annotator.objects.filter(platform="selfhosted", worker_id=worker_id)
            .annotate(
                has_work=Exists(
                    Assignment.objects.filter(annotator=mine, task__batch_id=publication.batch_id)
                ),
                is_blocked=Exists(WorkerBlock.objects.filter(annotator=mine, active=True)),
            )
            .values_list("has_work", "is_blocked")
            .first()
        )
        returning, blocked = participant or (False, False)
    if blocked:
        return JoinOffer(start=False, blocked=True)
    start = returning or batch_slot_free(batch=publication.batch, now=now)
    return JoinOffer(start=start, blocked=False)


def selfhosted_next_task_open(*, publication: Publication, annotator: Annotator) -> bool:
    """Whether the link would hand this participant another task now, as selfhosted_start
    checks it: the link open, its batch active, the participant not blocked."""
    if publication.link_closed_at is not None or not publication.target.active:
        return False
    return not WorkerBlock.objects.filter(annotator=annotator, active=True).exists()


def anonymous_participant_cookie(
    *, publication: Publication, worker_id: str
) -> tuple[str, str, int] | None:
    """The cookie (name, value, max-age in seconds) by which a browser that started on a link
    without a participant id is that same participant on its next Start (a double click, back
    and Start again), or None for a participant whose id the recruiting site gave."""
    if not worker_id.startswith(ANONYMOUS_PREFIX):
        return None
    value = signing.dumps({"p": publication.pk, "w": worker_id}, salt=ANONYMOUS_COOKIE_SALT)
    return f"{ANONYMOUS_COOKIE_PREFIX}{publication.pk}", value, TOKEN_MAX_AGE


def selfhosted_params_of_browser(
    *, publication: Publication, params: dict[str, str], cookies: Mapping[str, str]
) -> dict[str, str]:
    """The link's parameters with, when they name no participant, the anonymous participant
    this browser started as on this link before (anonymous_participant_cookie): each Start
    without an id made a new participant, who took a slot and counted as one more rater."""
    if selfhosted_worker_id(params):
        return params
    raw = cookies.get(f"{ANONYMOUS_COOKIE_PREFIX}{publication.pk}", "")
    try:
        known = signing.loads(raw, salt=ANONYMOUS_COOKIE_SALT, max_age=TOKEN_MAX_AGE)
    except signing.BadSignature:
        return params
    if not isinstance(known, dict) or known.get("p") != publication.pk:
        return params
    worker_id = known.get("w")
    if not isinstance(worker_id, str) or not worker_id.startswith(ANONYMOUS_PREFIX):
        return params
    return {**params, "workerId": worker_id}


def selfhosted_worker_id(params: dict[str, str]) -> str:
    """The participant id a recruiting site put on the link (PROLIFIC_PID, workerId), or ""."""
    return next((params[k] for k in SELFHOSTED_ID_PARAMS if params.get(k, "").strip()), "")


def task_of_hit_for_preview(*, hit: Hit) -> Task:
    if hit.status != HitStatus.CREATED:
        raise NotFoundError("This HIT is not one of ours.")
    return hit.task
