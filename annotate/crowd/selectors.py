"""Reads for the crowd admin pages: publication progress, the review table with gold accuracy,
and the reconciliation of our assignments with the platform's."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db.models import Count, OuterRef, Q, Subquery, TextField
from django.db.models.functions import Cast, JSONObject, Now
from django.utils import timezone

from annotate.crowd.base import to_cents
from annotate.crowd.models import (
    Bonus,
    BonusStatus,
    GoldAnswer,
    Hit,
    HitStatus,
    PlatformAssignment,
    Publication,
)
from annotate.crowd.pricing import fee_override, paid_with_fee
from annotate.crowd.services.expiry import still_live_q
from annotate.crowd.services.publishing import ENDED_MISSING
from annotate.crowd.services.review import hand_back_overdue, hit_of_work, platform_confirms
from annotate.errors import NotFoundError
from annotate.models import Annotator, Assignment, AssignmentStatus, Label, Project, Question
from annotate.selectors.results import (
    CONFIRMED_PLATFORM_STATUSES,
    blocked_annotator_ids,
    counted_assignment_q,
    human_answer_counted_any_kind_q,
    sandbox_work_q,
    stored_hits_of_work,
)
from annotate.selectors.work import system_label
from annotate.services.submissions import FIELD_PATTERN
from annotate.verbalizer.models import HumanAnswer


def publication_get(*, publication_id: int) -> Publication:
    try:
        # The database's clock with the row: the Expire's state is judged by it (expiry).
        return (
            Publication.objects.select_related("batch__project", "human_study")
            .annotate(database_now=Now())
            .get(pk=publication_id)
        )
    except Publication.DoesNotExist:
        raise NotFoundError("No such publication.") from None


def completion_of(publication: Publication) -> tuple[str, str]:
    """The completion code and URL a self-hosted participant gets: a human study's own, else
    the publication's, else (a publication made before it had its own) the project's."""
    if publication.human_study_id:
        study = publication.human_study
        return study.completion_code, study.completion_url
    project = publication.batch.project if publication.batch_id else None
    if publication.completion_code or publication.completion_url or project is None:
        return publication.completion_code, publication.completion_url
    return project.completion_code, project.completion_url


def participant_submitted_in_batch(*, annotator_id: int, batch_id: int) -> bool:
    """Whether a participant submitted any task of the batch (their completion code is due)."""
    return Assignment.objects.filter(
        annotator_id=annotator_id, task__batch_id=batch_id, submitted_at__isnull=False
    ).exists()


def selfhosted_participant_submitted(*, worker_id: str, batch_id: int) -> bool:
    """Whether the self-hosted participant of this id submitted any task of the batch."""
    return Assignment.objects.filter(
        annotator__platform="selfhosted",
        annotator__worker_id=worker_id.strip(),
        task__batch_id=batch_id,
        submitted_at__isnull=False,
    ).exists()


@dataclass(frozen=True)
class Progress:
    total: int
    created: int
    failed: int
    deleted: int
    live: int = 0  # HITs workers may still take (expiry.still_live_q)
    expiry_pending: int = 0  # of them, HITs an admin expired that the platform did not confirm
    expiring: int = 0  # of those, HITs the platform has not answered about yet (no refusal)

    @property
    def missing(self) -> int:
        """HITs a Resume makes: not made yet, or refused (publishing.MISSING); a deleted HIT was
        made."""
        return self.total - self.created - self.deleted

    @property
    def percent(self) -> int:
        return round(100 * (self.created + self.deleted) / self.total) if self.total else 100

    @property
    def expiry_failed(self) -> int:
        """HITs whose expiry the platform refused or did not answer: live, against the wish."""
        return self.expiry_pending - self.expiring


def publication_progress(*, publication: Publication, now: datetime | None = None) -> Progress:
    """The publication's HITs by status, how many are still live at `now`, how many of those
    an admin expired without the platform confirming it, and of those how many it has not
    answered about yet (whether an Expire's run is asking is the publication's own state:
    expiry.expiry_run_of)."""
    counts = publication.hits.aggregate(
        total=Count("id"),
        created=Count("id", filter=Q(status=HitStatus.CREATED)),
        failed=Count("id", filter=Q(status=HitStatus.FAILED)),
        deleted=Count("id", filter=Q(status=HitStatus.DELETED)),
        live=Count("id", filter=still_live_q(now=now or timezone.now())),
        expiry_pending=Count(
            "id", filter=Q(status=HitStatus.CREATED, expiry_pending_since__isnull=False)
        ),
        # hits_expiry_ask marks them; expiry.hit_expire's refusals leave an error until answered.
        expiring=Count(
            "id",
            filter=Q(status=HitStatus.CREATED, expiry_pending_since__isnull=False, expiry_error=""),
        ),
    )
    return Progress(**counts)


def publication_note(*, publication: Publication, progress: Progress) -> str:
    """What the publication page and the API say of how the publication stands: its stored note
    (`error`: why it ended, or what it waits for), and, once it ended with HITs missing, how
    many, counted from its HITs as stored now (`progress`, publication_progress). The note never
    holds that figure: HITs a stopped publish made on the platform are found and stored after it
    is written (an Expire's run, a Resume), and they are made, not missing."""
    missing, total = progress.missing, progress.total
    if publication.status not in ENDED_MISSING or not missing:
        return publication.error
    made = f"{total - missing} of {total} HIT{'s' if total != 1 else ''} made"
    figure = f"{made}; Resume makes the {missing} missing, none twice."
    return f"{publication.error} {figure}".strip()


@dataclass(frozen=True)
class GoldScore:
    correct: int
    total: int

    @property
    def accuracy(self) -> float | None:
        """correct / total over the gold items the worker answered; None when they saw none."""
        return self.correct / self.total if self.total else None


def worker_gold_scores(*, project: Project, annotator_ids: list[int]) -> dict[int, GoldScore]:
    """Each worker's answers on the project's gold items, compared with the known answers."""
    gold = {
        (g.question_id, g.response_id): g.value for g in GoldAnswer.objects.filter(project=project)
    }
    if not gold:
        return {}
    tally: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    labels = Label.objects.filter(
        annotator_id__in=annotator_ids,
        question_id__in={q for q, _ in gold},
        response_id__in={r for _, r in gold},
    ).values_list("annotator_id", "question_id", "response_id", "value")
    for annotator_id, question_id, response_id, value in labels:
        expected = gold.get((question_id, response_id))
        if expected is not None:
            tally[annotator_id][0] += value == expected
            tally[annotator_id][1] += 1
    return {annotator_id: GoldScore(*counts) for annotator_id, counts in tally.items()}


def suggestion(score: GoldScore | None) -> str:
    """ "approve" at or above CROWD_GOLD_MIN_ACCURACY, "reject" below, "" without gold answers."""
    if score is None or score.accuracy is None:
        return ""
    return "approve" if score.accuracy >= settings.CROWD_GOLD_MIN_ACCURACY else "reject"


class Confirmation:
    """Whether the platform confirmed an assignment; only confirmed work counts in results."""

    NOT_NEEDED = "not needed"  # self-hosted links: no platform to ask
    CONFIRMED = "confirmed"
    WAITING = "waiting for the platform"
    REFUSED = "unknown to the platform"


def confirmation_of(*, assignment: Assignment, synced_at=None) -> str:
    """The Confirmation of one assignment (its annotator and platform_record loaded).

    REFUSED: a sync that listed the HIT once the work's hand-back was due (hand_back_overdue)
    did not find this assignment for this worker (forged ids, or a hand-back to MTurk that never
    arrived); until then the work waits, and its worker's page still hands it back.
    """
    if not platform_confirms(assignment.annotator.platform):
        return Confirmation.NOT_NEEDED
    if getattr(assignment, "platform_record", None) is not None:
        return Confirmation.CONFIRMED
    if hand_back_overdue(submitted_at=assignment.submitted_at, listed_at=synced_at):
        return Confirmation.REFUSED
    return Confirmation.WAITING


def assignment_confirmation(*, assignment: Assignment | HumanAnswer) -> str:
    """The Confirmation of an assignment, or of a human study's answer, read from its HIT."""
    hit = hit_of_work(assignment)
    return confirmation_of(assignment=assignment, synced_at=hit.synced_at if hit else None)


@dataclass(frozen=True)
class AnsweredQuestion:
    """One question of a submission: its text and the worker's answer for each shown system."""

    position: int
    text: str
    by_system: list[tuple[str, str]]  # ("System A", "YES"); "" where the submission has none


@dataclass(frozen=True)
class Answers:
    """A submission's labels as the reviewer reads them: each answered question with the
    worker's answer for each system, in the order the worker saw them ("System A", ...)."""

    questions: list[AnsweredQuestion]


def answers_of(*, submission: dict | None, questions: Iterable[Question]) -> Answers:
    """The labels of a stored submission (fields `r<shown position>_q<question position>`) with
    the text of each answered question; direct scores (`r<n>_score`) are not labels."""
    given: dict[tuple[int, int], str] = {}
    for name, value in ((submission or {}).get("labels") or {}).items():
        match = FIELD_PATTERN.match(name)
        if match and match.group(2):
            given[int(match.group(1)), int(match.group(2))] = str(value).upper()
    shown = sorted({system for system, _ in given})
    texts = {question.position: question.text for question in questions}
    rows = [
        AnsweredQuestion(
            position=position,
            text=texts.get(position, ""),
            by_system=[
                (system_label(system), given.get((system, position), "")) for system in shown
            ],
        )
        for position in sorted({position for _, position in given})
    ]
    return Answers(questions=rows)


def time_spent(assignment: Assignment) -> timedelta | None:
    """From the claim (the worker's accept) to the submit; None before a submit."""
    if assignment.submitted_at is None:
        return None
    return max(assignment.submitted_at - assignment.claimed_at, timedelta(0))


@dataclass(frozen=True)
class ReviewRow:
    assignment: Assignment
    worker: Annotator
    gold: GoldScore | None
    suggestion: str
    blocked: bool
    platform_status: str
    confirmation: str
    bonuses: list[Bonus]  # newest first: pending, paid or failed
    answers: Answers
    time_spent: timedelta | None


def review_rows(*, publication: Publication) -> list[ReviewRow]:
    """The publication's crowd submissions, oldest first, with what helps decide on each.

    Only work that was submitted (in time or late) is reviewed: a claim returned or run out
    before a submit has nothing to approve or reject (never_submitted lists those apart). A
    human study's publication has answers, not assignments: see
    annotate.verbalizer.selectors.study_review_rows (an answer exists only once submitted).
    """
    if publication.batch_id is None:
        return []
    assignments = list(
        Assignment.objects.filter(
            task__batch=publication.batch,
            annotator__platform=publication.platform,
            submitted_at__isnull=False,
        )
        .select_related("annotator__block", "task__instruction", "platform_record")
        .prefetch_related("bonuses", "task__instruction__questions")
        .order_by("submitted_at", "id")
    )
    scores = worker_gold_scores(
        project=publication.batch.project,
        annotator_ids=sorted({a.annotator_id for a in assignments}),
    )
    synced = dict(publication.hits.exclude(hit_id="").values_list("hit_id", "synced_at"))
    rows = []
    for assignment in assignments:
        worker = assignment.annotator
        block = getattr(worker, "block", None)
        record = getattr(assignment, "platform_record", None)
        score = scores.get(worker.pk)
        rows.append(
            ReviewRow(
                assignment=assignment,
                worker=worker,
                gold=score,
                suggestion=suggestion(score),
                blocked=bool(block and block.active),
                platform_status=record.status if record else "",
                confirmation=confirmation_of(
                    assignment=assignment, synced_at=synced.get(assignment.platform_hit_id)
                ),
                bonuses=list(assignment.bonuses.all()),
                answers=answers_of(
                    submission=assignment.submission,
                    questions=assignment.task.instruction.questions.all(),
                ),
                time_spent=time_spent(assignment),
            )
        )
    return rows


@dataclass(frozen=True)
class UnsubmittedRow:
    assignment: Assignment
    worker: Annotator
    blocked: bool


def never_submitted(*, publication: Publication) -> list[UnsubmittedRow]:
    """The publication's claims returned or run out without a submit, newest first: nothing to
    review, listed apart from the submissions so a worker who only takes tasks can be blocked."""
    if publication.batch_id is None:
        return []
    assignments = (
        Assignment.objects.filter(
            task__batch=publication.batch,
            annotator__platform=publication.platform,
            submitted_at__isnull=True,
            status__in=[AssignmentStatus.RETURNED, AssignmentStatus.EXPIRED],
        )
        .select_related("annotator__block", "task__instruction")
        .order_by("-claimed_at", "-id")
    )
    rows = []
    for assignment in assignments:
        block = getattr(assignment.annotator, "block", None)
        rows.append(
            UnsubmittedRow(
                assignment=assignment,
                worker=assignment.annotator,
                blocked=bool(block and block.active),
            )
        )
    return rows


@dataclass(frozen=True)
class Reconciliation:
    missing_here: list[PlatformAssignment]
    missing_on_platform: list  # Assignments, or a human study's HumanAnswers


def reconciliation(*, publication: Publication) -> Reconciliation:
    """Work the platform has and we do not, and work we have that the platform's last sync did
    not list for its worker and HIT."""
    missing_here = list(
        PlatformAssignment.objects.filter(
            hit__publication=publication, assignment__isnull=True, human_answer__isnull=True
        ).select_related("hit__task__instruction", "hit__prompt__item")
    )
    synced = {
        h.hit_id: h.synced_at
        for h in Hit.objects.filter(publication=publication, synced_at__isnull=False).exclude(
            hit_id=""
        )
    }
    if publication.human_study_id:
        candidates = HumanAnswer.objects.filter(
            study_id=publication.human_study_id,
            platform_hit_id__in=list(synced),
            status__in=[AssignmentStatus.SUBMITTED, AssignmentStatus.APPROVED],
            platform_record__isnull=True,
        ).select_related("annotator", "prompt__item")
    else:
        candidates = Assignment.objects.filter(
            platform_hit_id__in=list(synced),
            annotator__platform=publication.platform,
            status__in=[AssignmentStatus.SUBMITTED, AssignmentStatus.APPROVED],
            submitted_at__isnull=False,
            platform_record__isnull=True,
        ).select_related("annotator", "task__instruction")
    # Not linked to a platform record: the sync did not find it for this worker and HIT (its id
    # may still be known, as another worker's).
    missing_on_platform = [
        a
        for a in candidates
        if hand_back_overdue(submitted_at=a.submitted_at, listed_at=synced[a.platform_hit_id])
    ]
    return Reconciliation(missing_here=missing_here, missing_on_platform=missing_on_platform)


def platform_workers_of_instruction(*, platform: str, instruction_id: int) -> set[str]:
    """The worker ids of a platform who already have work on an instruction (in any project):
    the claim refuses them that instruction's task again."""
    return set(
        Assignment.objects.filter(
            task__instruction_id=instruction_id, annotator__platform=platform
        ).values_list("annotator__worker_id", flat=True)
    )


def worker_unreviewed_count(*, annotator_id: int) -> int:
    """How many of a worker's platform submissions (assignments and human study answers) wait
    for approve or reject: blocking them does not stop the platform paying these."""
    waiting = Q(annotator_id=annotator_id, status=AssignmentStatus.SUBMITTED) & ~Q(
        platform_assignment_id=""
    )
    return Assignment.objects.filter(waiting).count() + HumanAnswer.objects.filter(waiting).count()


def crowd_paid_work_q() -> Q:
    """The assignments their platform (a self-hosted link's recruiting site) paid or will pay:
    the publication page's "Spent so far" (publication_spending) and Table 4's crowd cost, one
    rule for both (_spent_q: the counted work, approved work of workers blocked since, a blocked
    worker's confirmed work waiting for review, work rejected here only; _late_paid_q: late work
    the platform confirmed, or a link's participant was handed the code for). Nothing of it is
    test work on MTurk's requester sandbox, which nobody pays."""
    return _spent_q(counted_assignment_q() | _late_paid_q())


def crowd_paid_human_answer_q() -> Q:
    """A human study's answers paid or to be paid, by crowd_paid_work_q's rule (an answer is
    never late), whatever kind its worker counts as in results."""
    return _spent_q(human_answer_counted_any_kind_q())


def _paid_before_block() -> Q:
    return Q(status=AssignmentStatus.APPROVED, annotator_id__in=blocked_annotator_ids())


def _spent_q(counted: Q) -> Q:
    """Work a publication's platform paid or will pay (through a self-hosted link: the work
    handed a completion code and not rejected here, which the recruiting site pays unless it
    is rejected there, out of our sight), whatever kind a researcher gives its
    worker in results (which work counts and what was paid are different questions): the
    `counted` work of any kind (with an assignment's paid late work: crowd_paid_work_q),
    approved work of workers blocked since, submitted work of a
    blocked worker that the platform confirmed (it pays that when the auto-approval delay
    ends unless it is rejected) or, on a self-hosted link, that was handed its completion
    code, and work rejected here only (rejected_here_only: the
    platform holds it as submitted and pays it unless it is rejected there too, or approved
    it already, its auto-approval delay over: paid, whatever we say). None of it is test work
    on MTurk's requester sandbox (sandbox_work_q): its workers are test accounts nobody pays,
    whatever the sandbox says it approved."""
    blocked = Q(annotator_id__in=blocked_annotator_ids())
    confirmed_waiting = Q(
        status=AssignmentStatus.SUBMITTED,
        platform_record__status__in=CONFIRMED_PLATFORM_STATUSES,
    )
    # A self-hosted participant was handed the completion code with the submission: their
    # recruiting site pays it unless it is rejected there, blocked here or not.
    code_handed_waiting = Q(annotator__platform="selfhosted", status=AssignmentStatus.SUBMITTED)
    rejected_here_only = Q(
        status=AssignmentStatus.REJECTED,
        platform_record__status__in=CONFIRMED_PLATFORM_STATUSES,
    )
    waiting = confirmed_waiting | code_handed_waiting
    paid = counted | _paid_before_block() | (blocked & waiting) | rejected_here_only
    return paid & ~sandbox_work_q()


def _late_paid_q() -> Q:
    """Assignments submitted late (after their claim lapsed and the task was filled: kept, not
    counted in any result) that their platform paid or will pay all the same: on a platform
    that confirms work, those it confirmed for that worker and HIT and has not rejected (it
    pays submitted work when the auto-approval delay ends); through a self-hosted link, every
    one not rejected here, whose participant was given the completion code with it."""
    late = Q(is_late=True, submitted_at__isnull=False)
    confirmed = Q(platform_record__status__in=CONFIRMED_PLATFORM_STATUSES)
    handed_code = Q(annotator__platform="selfhosted") & ~Q(status=AssignmentStatus.REJECTED)
    return late & (confirmed | handed_code)


def platform_work_late(*, platform: str, assignment_id: str) -> bool:
    """True if the platform's assignment `assignment_id` is late work here: submitted after its
    claim lapsed and its task was filled, kept and never counted, whatever the platform says."""
    return Assignment.objects.filter(
        annotator__platform=platform,
        platform_assignment_id=assignment_id,
        is_late=True,
        status=AssignmentStatus.EXPIRED,
    ).exists()


def publication_id_of_hit(*, hit_id: str) -> int | None:
    """The id of the publication whose HIT is the platform's `hit_id`, or None if none here."""
    return Hit.objects.filter(hit_id=hit_id).values_list("publication_id", flat=True).first()


def platform_work_of_blocked_worker(*, platform: str, assignment_id: str) -> bool:
    """True if the platform's assignment `assignment_id` here is the work of a worker blocked
    now: kept, counted in no result while the block lasts, paid by the platform unless an
    admin rejects it (_spent_q)."""
    return Assignment.objects.filter(
        annotator__platform=platform,
        platform_assignment_id=assignment_id,
        annotator_id__in=blocked_annotator_ids(),
    ).exists()


def worker_blocked(*, annotator_id: int) -> bool:
    """Whether this crowd worker is blocked now (their work counts in no result)."""
    return blocked_annotator_ids().filter(annotator_id=annotator_id).exists()


# _spending's key for work the platform approved (paid) that was rejected here: a sync follows
# the platform's verdict only on work still submitted here.
_PAID_THOUGH_REJECTED = (AssignmentStatus.REJECTED, "Approved")


@dataclass(frozen=True)
class Spending:
    """What a publication's work cost so far: every piece of work its platform (a self-hosted
    link's recruiting site) paid or will pay (_spent_q), whatever kind its worker counts as in
    results, priced as Table 4 prices it (crowd_paid_per_assignment,
    crowd_paid_per_human_answer): each piece of work's reward and its paid bonuses, fee
    included, each payment's price whole cents (pricing.paid_with_fee), so each line is its
    exact sum and the total the lines' sum, what the platform's account is charged."""

    approved: int
    approved_usd: Decimal
    waiting: int  # submitted, not reviewed yet: the platform pays it unless it is rejected
    waiting_usd: Decimal
    # Rejected here before the platform had it: the platform pays it when the auto-approval
    # delay ends unless it is rejected there too (the review page's "Reject on the platform too").
    unless_rejected: int
    unless_rejected_usd: Decimal
    # Submitted late (counted in no result) and paid or to be paid by the platform all the same.
    late: int
    late_usd: Decimal
    total_usd: Decimal


def publication_spending(*, publication: Publication) -> Spending:
    """What the work of a publication was paid or will be: a batch's assignments (late work
    too) or a human study's answers (never late), whoever they count as in results (three
    queries, a batch's four)."""
    if publication.batch_id is None:
        by = ("status", "platform_record__status")
        answers = HumanAnswer.objects.filter(
            crowd_paid_human_answer_q(),
            study_id=publication.human_study_id,
            annotator__platform=publication.platform,
        ).order_by()
        return _spending(answers, crowd_paid_per_human_answer(answers, by=by), by=by)
    by = ("status", "platform_record__status", "is_late", "annotator_id")
    work = Assignment.objects.filter(
        crowd_paid_work_q(),
        task__batch_id=publication.batch_id,
        annotator__platform=publication.platform,
    ).order_by()
    # A blocked worker's work holds no slot (is_late) while the block lasts, but it is not late
    # work: it stays on the line of its status.
    blocked = set(blocked_annotator_ids().values_list("annotator_id", flat=True))

    def line_of(status, platform_status, late, annotator_id) -> str:
        return _line_of(status, platform_status, late and annotator_id not in blocked)

    return _spending(work, crowd_paid_per_assignment(work, by=by), by=by, line_of=line_of)


_LINES = ("approved", "waiting", "unless_rejected", "late")


def _spending(work, paid_by_key: dict, *, by: tuple[str, ...], line_of=None) -> Spending:
    """The Spending of `work` (assignments or answers), given what it was paid by `by`
    (status, platform status, and for assignments whether it was late): late work is a line
    of its own; the only other rejected work _spent_q keeps is the work rejected here only,
    with the approved work when the platform approved it (paid), else waiting for a reject on
    the platform."""
    counts = {row[:-1]: row[-1] for row in work.values_list(*by).annotate(n=Count("id"))}
    usd = dict.fromkeys(_LINES, Decimal(0))
    n = dict.fromkeys(_LINES, 0)
    for key in set(paid_by_key) | set(counts):
        name = (line_of or _line_of)(*key)
        usd[name] += paid_by_key.get(key, Decimal(0))
        n[name] += counts.get(key, 0)
    return Spending(
        **{name: n[name] for name in _LINES},
        **{f"{name}_usd": to_cents(usd[name]) for name in _LINES},
        total_usd=to_cents(sum(usd.values())),
    )


def _line_of(status: str, platform_status: str | None, late: bool = False) -> str:
    """The line of "Spent so far" that work of this status (ours, the platform's) falls on."""
    if status == AssignmentStatus.REJECTED and platform_status == "Submitted":
        return "unless_rejected"
    if late:
        return "late"
    if status == AssignmentStatus.APPROVED or (status, platform_status) == _PAID_THOUGH_REJECTED:
        return "approved"
    return "waiting" if status == AssignmentStatus.SUBMITTED else "unless_rejected"


def paid_through(*, platform: str, reward_usd, fee_rate, max_assignments: int) -> Decimal:
    """What one piece of work that came through a publication on `platform` was paid: its
    reward and the platform's fee (the publication's flat rate, or with none MTurk's schedule
    at the rate of its HIT's MaxAssignments: annotate.crowd.pricing), or on a self-hosted link
    (paid on the recruiting site, whatever fee the publication stored) the reward alone."""
    if platform == "selfhosted":
        return Decimal(reward_usd)
    return paid_with_fee(reward_usd, max_assignments=max_assignments, flat_rate=fee_rate)


def crowd_paid_per_assignment(assignments, *, by: tuple[str, ...] = ("id",)) -> dict:
    """What these assignments were paid, the platform's fee included (paper Table 4's crowd
    cost), in one query (counted by key and price): by assignment id, or summed by the fields
    `by` names (a tuple of their values as the key). Each assignment is paid the reward and fee
    of the publication the work came through (paid_through), that is its HIT's, at the rate of
    the HIT's MaxAssignments, or, from a self-hosted link (no platform takes a fee), the batch's
    latest link's reward; work that came through no publication (an in-house account counted as
    crowd, say) its project's reward and the platform's fee today (CROWD_FEE_RATE, or MTurk's
    schedule for a HIT of the project's assignments per task). The bonuses paid on them are
    added with their HIT's publication's fee (a second query).

    The HIT is the one of the assignment's task on the platform its worker came through: a
    self-hosted participant's STUDY_ID, kept where a HIT id goes, is only what their URL said."""
    hit = _hit_of_work(prefix="")
    bonus_hit = _hit_of_work(prefix="assignment__")
    link = Publication.objects.filter(
        platform="selfhosted", batch_id=OuterRef("task__batch_id")
    ).order_by("-id")
    # Thousands of assignments share a few prices: the database counts the assignments of each
    # key and price terms (one row per group, not per assignment, reaches Python), and each
    # price is worked out once, keyed by its terms as written (repr: Decimal("1.2") and
    # Decimal("1.20") are equal but not alike). n equal Decimals add up to amount × n exactly.
    # The HIT's terms come in one subquery (one lookup of the HIT per assignment, not three).
    terms = (
        "annotator__platform", "task__batch__project__reward_usd",
        "task__batch__project__assignments_per_task", "hit_terms", "link_reward",
    )  # fmt: skip
    rows = (
        assignments.annotate(
            hit_terms=Subquery(hit.annotate(terms=_HIT_TERMS).values("terms")[:1]),
            link_reward=Subquery(link.values("reward_usd")[:1]),
        )
        .order_by()
        .values(*by, *terms)
        .annotate(n_assignments=Count("id"))
        .values_list(*by, *terms, "n_assignments")
    )
    fee = fee_override()
    paid: dict = {}
    prices: dict[str, Decimal] = {}
    for row in rows:
        row_terms = row[len(by) : -1]
        key = repr(row_terms)
        amount = prices.get(key)
        if amount is None:
            platform, project_reward, per_task, hit_terms, link_reward = row_terms
            amount = prices[key] = _assignment_price(
                platform, project_reward, per_task, *_hit_terms(hit_terms), link_reward, fee=fee
            )
        _add(paid, row, by, amount * row[-1])
    bonuses = (
        Bonus.objects.filter(status=BonusStatus.PAID, assignment__in=assignments)
        .annotate(
            hit_publication=Subquery(bonus_hit.values("publication_id")[:1]),
            hit_fee=Subquery(bonus_hit.values("publication__fee_rate")[:1]),
        )
        .values_list(
            *(f"assignment__{name}" for name in by), "amount_usd", "hit_publication", "hit_fee"
        )
        .order_by()
    )
    for row in bonuses:
        amount, hit_publication, hit_fee = row[len(by) :]
        flat_rate = fee if hit_publication is None else hit_fee
        _add(paid, row, by, _bonus_charge(amount, flat_rate=flat_rate))
    return paid


# A HIT's price terms as one JSON text: its publication's reward and fee rate, its
# MaxAssignments. The numbers keep their digits ("1.20"), read back as Decimals (_hit_terms).
_HIT_TERMS = Cast(
    JSONObject(
        reward="publication__reward_usd", fee="publication__fee_rate", size="max_assignments"
    ),
    TextField(),
)


def _hit_terms(text: str | None) -> tuple:
    """(reward, fee rate, MaxAssignments) of a HIT from its _HIT_TERMS; all None for no HIT."""
    if text is None:
        return None, None, None
    terms = json.loads(text, parse_float=Decimal)
    reward, fee = (None if terms[k] is None else Decimal(str(terms[k])) for k in ("reward", "fee"))
    return reward, fee, int(terms["size"])


def _assignment_price(
    platform, project_reward, per_task, hit_reward, hit_fee, hit_size, link_reward, *, fee
) -> Decimal:
    """What one assignment was paid (crowd_paid_per_assignment's rule), from its row's fields."""
    if hit_reward is not None:
        return paid_through(
            platform=platform, reward_usd=hit_reward, fee_rate=hit_fee, max_assignments=hit_size
        )
    if platform == "selfhosted" and link_reward is not None:
        return Decimal(link_reward)
    return paid_with_fee(project_reward or 0, max_assignments=per_task, flat_rate=fee)


def crowd_paid_per_human_answer(answers, *, by: tuple[str, ...] = ("id",)) -> dict:
    """What these human study answers were paid, the platform's fee included, priced as
    crowd_paid_per_assignment prices an assignment (paid_through), in two queries: by answer
    id, or summed by the fields `by` names. Each answer is paid the reward and fee of its
    study's publication on the platform its worker came through (a study has one per platform:
    the one whose HIT the answer names, or the self-hosted link, no fee), at the rate of its
    prompt's HIT's MaxAssignments (the publication's answers per prompt when it has none), and
    the bonuses paid on it with that fee; an answer that came through no publication (an
    in-house annotator's) costs nothing here."""
    publication = _publication_of_answer(prefix="")
    prompt_hit = Hit.objects.filter(
        publication__human_study_id=OuterRef("study_id"),
        publication__platform=OuterRef("annotator__platform"),
        prompt_id=OuterRef("prompt_id"),
    )
    rows = answers.annotate(
        reward=Subquery(publication.values("reward_usd")[:1]),
        fee=Subquery(publication.values("fee_rate")[:1]),
        per_prompt=Subquery(publication.values("assignments_per_task")[:1]),
        hit_size=Subquery(prompt_hit.values("max_assignments")[:1]),
    ).values_list(*by, "annotator__platform", "reward", "fee", "per_prompt", "hit_size")
    paid: dict = {}
    for row in rows:
        platform, reward, fee, per_prompt, hit_size = row[len(by) :]
        amount = Decimal(0)
        if reward is not None:
            amount = paid_through(
                platform=platform,
                reward_usd=reward,
                fee_rate=fee,
                max_assignments=hit_size or per_prompt,
            )
        _add(paid, row, by, amount)
    bonuses = (
        Bonus.objects.filter(status=BonusStatus.PAID, human_answer__in=answers)
        .annotate(
            fee=Subquery(_publication_of_answer(prefix="human_answer__").values("fee_rate")[:1])
        )
        .values_list(*(f"human_answer__{name}" for name in by), "amount_usd", "fee")
        .order_by()
    )
    for row in bonuses:
        amount, fee = row[len(by) :]
        _add(paid, row, by, _bonus_charge(amount, flat_rate=fee))
    return paid


def _bonus_charge(amount: Decimal, *, flat_rate: Decimal | None) -> Decimal:
    """What one bonus was charged, its fee included: each bonus is a charge of its own, its
    fee whole cents (pricing.platform_fee), so three $0.03 bonuses at a flat 25% cost
    3 × $0.04, not $0.1125 rounded once."""
    return paid_with_fee(amount, max_assignments=None, flat_rate=flat_rate)


def _publication_of_answer(*, prefix: str):
    """The publication a human study's answer (reached through `prefix`) came through, as an
    OuterRef query: its study's on its worker's platform."""
    return Publication.objects.filter(
        human_study_id=OuterRef(f"{prefix}study_id"),
        platform=OuterRef(f"{prefix}annotator__platform"),
    )


def _hit_of_work(*, prefix: str):
    """The HIT an assignment (reached through `prefix`) was done on, as an OuterRef query.

    At most one HIT has a given non-empty id (crowd_hit_unique_hit_id), so the query is not
    ordered: a HIT's ordering would make the database sort and join the HIT's task and
    publication once per assignment, for each of the subqueries taking a field of it."""
    return stored_hits_of_work(prefix).filter(task_id=OuterRef(f"{prefix}task_id")).order_by()


def _add(paid: dict, row: tuple, by: tuple[str, ...], amount: Decimal) -> None:
    """Add `amount` to the sum of `row`'s key: its first field, or its first len(by) fields."""
    key = row[0] if len(by) == 1 else row[: len(by)]
    paid[key] = paid.get(key, Decimal(0)) + amount
