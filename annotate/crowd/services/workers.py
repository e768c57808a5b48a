"""The crowd worker's side: who the worker is, which assignment they hold, where they post back.

Inside MTurk's iframe third-party cookies may be blocked, so nothing here uses the session: an
accepted assignment is carried by a signed token (django.core.signing) naming the assignment and
the validated turkSubmitTo address.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlsplit

from django.conf import settings
from django.core import signing
from django.db import IntegrityError, transaction

from annotate.crowd.base import PREVIEW_ASSIGNMENT_ID
from annotate.crowd.models import Hit, HitStatus, Publication, WorkerBlock
from annotate.errors import AnnotateError, ConflictError, NotFoundError, PermissionDeniedError
from annotate.models import Annotator, AnnotatorKind, Assignment, AssignmentStatus, Task
from annotate.services.assignments import assignment_claim_next, assignment_claim_task

TOKEN_SALT = "annotate.crowd.assignment"
TOKEN_MAX_AGE = 14 * 24 * 3600
SELFHOSTED_ID_PARAMS = ("PROLIFIC_PID", "workerId", "worker_id")


@dataclass(frozen=True)
class WorkerAssignment:
    """An assignment reached through a worker token, and where to post the finished work."""

    assignment: Assignment
    submit_to: str  # "" for self-hosted links
    token: str

    @property
    def external_submit_url(self) -> str:
        return f"{self.submit_to}/mturk/externalSubmit" if self.submit_to else ""


def assignment_token(*, assignment: Assignment, submit_to: str = "") -> str:
    return signing.dumps({"a": assignment.pk, "s": submit_to}, salt=TOKEN_SALT, compress=True)


def worker_assignment_get(*, token: str) -> WorkerAssignment:
    """Return the assignment a worker token names; a bad or old token is a 404."""
    try:
        data = signing.loads(token, salt=TOKEN_SALT, max_age=TOKEN_MAX_AGE)
        assignment = Assignment.objects.select_related(
            "annotator", "task__instruction", "task__batch__project"
        ).get(pk=data["a"], annotator__kind=AnnotatorKind.CROWD)
    except (signing.BadSignature, KeyError, TypeError, Assignment.DoesNotExist):
        raise NotFoundError("This task link is not valid (or has expired).") from None
    return WorkerAssignment(assignment=assignment, submit_to=data.get("s", ""), token=token)


def submit_base_checked(turk_submit_to: str) -> str:
    """Return turkSubmitTo without its trailing slash if its host is allowed, else refuse.

    The browser will post the worker's assignment there, so only MTurk's own hosts qualify
    (CROWD_SUBMIT_HOSTS: www.mturk.com and workersandbox.mturk.com, plus any a test adds).
    """
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
    """Return the crowd Annotator for a platform's worker id; blocked workers are refused."""
    worker_id = worker_id.strip()
    if not worker_id or len(worker_id) > 200:
        raise AnnotateError("A worker id is required (at most 200 characters).")
    try:
        with transaction.atomic():
            annotator, _ = Annotator.objects.get_or_create(
                platform=platform,
                worker_id=worker_id,
                defaults={"name": f"{platform}:{worker_id}", "kind": AnnotatorKind.CROWD},
            )
    except IntegrityError:  # the same worker's first two requests raced
        annotator = Annotator.objects.get(platform=platform, worker_id=worker_id)
    if WorkerBlock.objects.filter(annotator=annotator, active=True).exists():
        raise PermissionDeniedError("Sorry, you can no longer take tasks from this requester.")
    return annotator


def hit_get_for_worker(*, hit_token: str) -> Hit:
    try:
        return Hit.objects.select_related("publication", "task__batch__project").get(
            unique_request_token=hit_token
        )
    except Hit.DoesNotExist:
        raise NotFoundError("No such task.") from None


def is_preview(assignment_id: str) -> bool:
    return not assignment_id or assignment_id == PREVIEW_ASSIGNMENT_ID


def mturk_assignment_open(
    *,
    hit: Hit,
    assignment_id: str,
    hit_id: str,
    worker_id: str,
    turk_submit_to: str,
    now: datetime,
) -> WorkerAssignment:
    """Link an accepted MTurk assignment to one of ours, creating it the first time.

    Reopening the same assignment returns it; a worker who already did the task is refused.
    """
    if hit.status != HitStatus.CREATED or hit_id != hit.hit_id:
        raise NotFoundError("This HIT is not one of ours.")
    submit_to = submit_base_checked(turk_submit_to)
    annotator = crowd_worker_get_or_create(platform=hit.publication.platform, worker_id=worker_id)
    with transaction.atomic():
        existing = (
            Assignment.objects.select_for_update()
            .filter(annotator=annotator, task=hit.task)
            .first()
        )
        if existing is not None:
            assignment = _reopen(existing, assignment_id=assignment_id)
        else:
            assignment = assignment_claim_task(
                annotator=annotator, task=hit.task, now=now, check_slots=False
            )
        assignment.platform_assignment_id = assignment_id
        assignment.platform_hit_id = hit.hit_id
        assignment.save(update_fields=["platform_assignment_id", "platform_hit_id"])
    return WorkerAssignment(
        assignment=assignment,
        submit_to=submit_to,
        token=assignment_token(assignment=assignment, submit_to=submit_to),
    )


def _reopen(existing: Assignment, *, assignment_id: str) -> Assignment:
    """The same MTurk assignment again (a reload), or a fresh accept of a HIT returned unfinished."""
    if existing.platform_assignment_id == assignment_id:
        return existing
    if existing.status == AssignmentStatus.CLAIMED:
        return existing
    raise ConflictError("You have already done this task; please return the HIT.")


def publication_for_link(*, link_token: str) -> Publication:
    try:
        return Publication.objects.select_related("batch__project").get(
            link_token=link_token, platform="selfhosted"
        )
    except Publication.DoesNotExist:
        raise NotFoundError("This study link is not valid.") from None


def selfhosted_start(
    *, publication: Publication, params: dict[str, str], now: datetime
) -> WorkerAssignment:
    """Give a worker from a self-hosted link their next task of the batch.

    The worker id comes from the URL (PROLIFIC_PID, workerId) or is a new anonymous one; a
    STUDY_ID and SESSION_ID, if given, are kept on the assignment.
    """
    if not publication.batch.active:
        raise NotFoundError("This study is closed.")
    worker_id = next((params[k] for k in SELFHOSTED_ID_PARAMS if params.get(k, "").strip()), "")
    worker_id = worker_id or f"anon-{uuid.uuid4().hex[:20]}"
    annotator = crowd_worker_get_or_create(platform="selfhosted", worker_id=worker_id)
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


def task_of_hit_for_preview(*, hit: Hit) -> Task:
    if hit.status != HitStatus.CREATED:
        raise NotFoundError("This HIT is not one of ours.")
    return hit.task
