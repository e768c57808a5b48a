"""The one rule for which work counts in results.

Reports, majorities, agreement, costs, the aggregated exports and the instruction page read labels
and direct scores through this module, so rejected work, a blocked worker, or crowd work that the
platform never confirmed leaves every result at once. The raw exports keep such work and name its
status (`work_status`).

A label or direct score counts when its annotator is not a blocked crowd worker, and
- it came with no assignment and was imported (a label or score import, which reads back only the
  raw export's counted rows), or it has no assignment and its annotator came through no platform
  (an LLM judge, an in-house annotator): a platform worker's work without an assignment is none
  the platform confirmed (an assignment is never deleted while it holds work: the foreign key is
  PROTECT, and these labels are left from before it was), or
- its assignment was submitted in time (submitted or approved, not late), and, for a worker who
  came through a crowd platform that hands out the assignments itself (MTurk, the fake
  platform), whatever kind a researcher gives that worker later, that platform confirmed the
  assignment for that HIT and that worker: the assignment has a linked
  `PlatformAssignment` (stored by a sync through ListAssignmentsForHIT, or by GetAssignment when
  an admin decides on it) whose status is Submitted or Approved, and
- it was not done through a HIT of a publication made on MTurk's requester sandbox
  (`Publication.sandbox`; `sandbox_work_q`, the one definition of test work, which the exports,
  pages and a worker's block read too): the sandbox's workers are test accounts nobody pays, and
  it confirms their work as production confirms real work. Test work counts in no result and costs nothing
  (annotate.crowd.selectors.crowd_paid_work_q); the offline demo platform is no sandbox.

A verbalizer human study's answer (`HumanAnswer`) is its own assignment: it counts under the same
rule (status submitted or approved, worker not blocked, confirmed by the platform for that HIT and
worker unless it came from a self-hosted link or an in-house annotator, not test work on the
sandbox, holding its place on its prompt: not `place_released`, as an assignment holds its slot,
annotate.crowd.services.review._answer_places_handed_on), and only once a researcher
has decided whether its annotator is an expert or a crowd worker, as labels count in InFoBench
results (annotate.selectors.annotator_kinds): `counted_human_answers`. A person counts once per
prompt: a prompt in two studies of its set may be answered in both, and only the first answer
that counts does (`WorkStatus.REPEATED` for the other).
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import BooleanField, Case, Exists, F, OuterRef, Q, QuerySet, When

from annotate.crowd.models import Hit, WorkerBlock
from annotate.models import (
    PERSON_KINDS,
    Annotator,
    AnnotatorKind,
    Assignment,
    AssignmentStatus,
    Benchmark,
)
from annotate.selectors.fingerprints import ids_fingerprint

# Self-hosted links have no platform that could confirm an assignment; "" is imported work.
PLATFORMS_WITHOUT_CONFIRMATION = ("", "selfhosted")
CONFIRMED_PLATFORM_STATUSES = ("Submitted", "Approved")


class WorkStatus:
    """Why an assignment's work does or does not count, as the raw exports write it."""

    COUNTED = "counted"
    REJECTED = "rejected"
    BLOCKED = "worker blocked"
    UNCONFIRMED = "not confirmed by the platform"
    SANDBOX = "sandbox test work"
    NOT_SUBMITTED = "not submitted"
    LATE = "late"
    KIND_NOT_DECIDED = "annotator's kind not decided"
    REPEATED = "the same person's earlier answer to this prompt counts"


def _needs_confirmation(prefix: str = "") -> Q:
    """Work of a worker who came through a platform that hands out assignments itself: whatever
    kind a researcher later gives that worker (an expert, say), the platform's confirmation is
    what makes the work real."""
    return ~Q(**{f"{prefix}annotator__platform__in": PLATFORMS_WITHOUT_CONFIRMATION})


def _confirmed(prefix: str = "") -> Q:
    return Q(**{f"{prefix}platform_record__status__in": CONFIRMED_PLATFORM_STATUSES})


def sandbox_work_q(prefix: str = "") -> Q:
    """Work (an Assignment or a HumanAnswer, reached through `prefix`) done through a HIT of a
    publication made on MTurk's requester sandbox: test work, which counts in no result
    (_counted_q), which nobody pays (annotate.crowd.selectors._spent_q), whatever the sandbox
    confirmed, and which the pages, the raw exports and the endpoint of a worker's block tell
    apart from real work, confirmed or not yet. The one definition (work_through_hit_q)."""
    return work_through_hit_q(prefix, sandbox=True)


def work_through_hit_q(prefix: str = "", *, sandbox: bool) -> Q:
    """Work done through a HIT of ours on MTurk's requester sandbox (`sandbox`) or on a
    platform's production: the HIT of the platform's record linked to it (a sync or
    GetAssignment confirmed it), or, before any confirmation, the HIT by the id its worker's
    page stored (stored_hits_of_work)."""
    recorded = Q(**{f"{prefix}platform_record__hit__publication__sandbox": sandbox})
    return recorded | Q(Exists(stored_hits_of_work(prefix).filter(publication__sandbox=sandbox)))


def stored_hits_of_work(prefix: str = "") -> QuerySet[Hit]:
    """The HIT of ours the outer work's stored HIT id names on its worker's platform, as an
    OuterRef query. An empty id names none: a HIT not created yet (pending, or refused by the
    platform) has an empty id too, and work done in-house stores none."""
    return Hit.objects.filter(
        hit_id=OuterRef(f"{prefix}platform_hit_id"),
        publication__platform=OuterRef(f"{prefix}annotator__platform"),
    ).exclude(hit_id="")


def _confirmed_work_q(prefix: str, submitted: Q) -> Q:
    """The `submitted` work of a worker not blocked that its platform confirmed (or that needs
    no confirmation): what counts, or what holds a slot of its task when it has one."""
    not_blocked = ~Q(**{f"{prefix}annotator_id__in": blocked_annotator_ids()})
    return submitted & not_blocked & (~_needs_confirmation(prefix) | _confirmed(prefix))


def _counted_q(prefix: str, submitted: Q) -> Q:
    """The counting rule: confirmed work (_confirmed_work_q) that is no test work."""
    return _confirmed_work_q(prefix, submitted) & ~sandbox_work_q(prefix)


def counted_assignment_q(prefix: str = "") -> Q:
    """Assignments whose work counts in results (`prefix` e.g. "assignment__")."""
    submitted = Q(
        **{
            f"{prefix}status__in": [AssignmentStatus.SUBMITTED, AssignmentStatus.APPROVED],
            f"{prefix}is_late": False,
        }
    )
    return _counted_q(prefix, submitted)


def released_unconfirmed_q(prefix: str = "") -> Q:
    """Submitted work whose slot a sync took back (is_late: the platform's listing of its HIT
    did not have it, annotate.crowd.services.review._unconfirmed_slots_released) and that its
    platform has still not confirmed: it waits for that confirmation (or was forged), and is
    not late work. The rule of `_why_not_counted` (WorkStatus.UNCONFIRMED for late-marked work),
    as a filter."""
    released = Q(
        **{
            f"{prefix}is_late": True,
            f"{prefix}status__in": [AssignmentStatus.SUBMITTED, AssignmentStatus.APPROVED],
        }
    )
    return released & _needs_confirmation(prefix) & ~_confirmed(prefix)


def left_out_q(prefix: str = "") -> Q:
    """Submitted or approved work that holds no slot of its task (is_late) but would count if
    it held one: its worker is not blocked and its platform confirmed it (or needs not). The
    work of a worker unblocked after their task was filled, or confirmed by the platform only
    after it was (annotate.crowd.services.review); it takes the task's first slot that frees
    up (annotate.services.assignments.task_left_out_restore). Late work proper (expired) and
    work still waiting for its confirmation are not left out. Test work on the sandbox is left
    out and restored as real work would be, so a rehearsal there fills tasks as production
    will; it counts nowhere all the same (_counted_q)."""
    held_no_slot = Q(
        **{
            f"{prefix}status__in": [AssignmentStatus.SUBMITTED, AssignmentStatus.APPROVED],
            f"{prefix}is_late": True,
        }
    )
    return _confirmed_work_q(prefix, held_no_slot)


def counted_human_answer_q(prefix: str = "") -> Q:
    """Verbalizer HumanAnswers that count in results (same rule; an answer is never late), from
    an annotator whose kind is decided (a new web account's answers wait for a researcher)."""
    return _human_answer_q(prefix, Q(**{f"{prefix}annotator__kind__in": PERSON_KINDS}))


def human_answer_waiting_for_kind_q(prefix: str = "") -> Q:
    """Verbalizer HumanAnswers that would count but for their annotator's undecided kind: they
    count once a researcher decides it (the annotators page shows how many)."""
    return _human_answer_q(prefix, Q(**{f"{prefix}annotator__kind": AnnotatorKind.UNDECIDED}))


def human_answer_counted_any_kind_q(prefix: str = "") -> Q:
    """Verbalizer HumanAnswers that count, or would but for their annotator's kind or for the
    place a sync released (a confirmed answer kept out of a full prompt): what a platform pays
    does not wait for a researcher's decision (the publication's spending)."""
    return _human_answer_q(prefix, Q(), holding_place=False)


def _human_answer_q(prefix: str, kind: Q, *, holding_place: bool = True) -> Q:
    """The counting rule on answers; `holding_place`: only those holding a place of their
    prompt (not place_released: a confirmed answer whose place a replacement took while a sync
    held it released stays out, as a batch's work confirmed after its task was filled)."""
    statuses = [AssignmentStatus.SUBMITTED, AssignmentStatus.APPROVED]
    submitted = Q(**{f"{prefix}status__in": statuses}) & kind
    if holding_place:
        submitted &= Q(**{f"{prefix}place_released": False})
    return _counted_q(prefix, submitted)


def counted_human_answers(queryset: QuerySet) -> QuerySet:
    """Keep the HumanAnswers of `queryset` that count in results: of a person's answers to one
    prompt (a prompt two studies of its set share is offered in both), the first that counts
    under the rule, so no one weighs twice in an accuracy, a majority or an agreement."""
    counted = counted_human_answer_q()
    earlier = queryset.model.objects.filter(
        counted,
        annotator_id=OuterRef("annotator_id"),
        prompt_id=OuterRef("prompt_id"),
        pk__lt=OuterRef("pk"),
    )
    return queryset.filter(counted).exclude(Exists(earlier))


def counted_human_answers_fingerprint(queryset: QuerySet) -> tuple:
    """What decides which of these HumanAnswers count, and as whose (crowd or in-house): changes
    with every approve, reject, block, unblock and platform confirmation, so a cached report is
    never stale. Each answer is hashed as its id and whether it counts as crowd work
    (ids_fingerprint), so a kind changed moves it too."""
    crowd = Case(When(annotator__kind=AnnotatorKind.CROWD, then=1), default=0)
    keyed = counted_human_answers(queryset).annotate(fingerprint_key=F("id") * 2 + crowd)
    return ids_fingerprint(keyed, "fingerprint_key")


def human_answer_statuses(queryset: QuerySet) -> dict[int, str]:
    """Return the WorkStatus of every HumanAnswer of `queryset`, by id (for the raw export)."""
    counted = set(counted_human_answers(queryset).values_list("id", flat=True))
    repeated = set(
        queryset.filter(counted_human_answer_q()).values_list("id", flat=True)
    ).difference(counted)
    blocked = set(blocked_annotator_ids().values_list("annotator_id", flat=True))
    out = {}
    rows = queryset.annotate(sandbox=_is_sandbox_work()).values_list(
        "id", "annotator_id", "status", "annotator__kind", "sandbox", "place_released",
        "platform_record__status", "annotator__platform",
    )  # fmt: skip
    for answer_id, annotator_id, status, kind, sandbox, released, confirmation, platform in rows:
        if answer_id in counted:
            out[answer_id] = WorkStatus.COUNTED
        elif answer_id in repeated:
            out[answer_id] = WorkStatus.REPEATED
        elif annotator_id in blocked:
            out[answer_id] = WorkStatus.BLOCKED
        elif sandbox:
            out[answer_id] = WorkStatus.SANDBOX
        elif status == AssignmentStatus.REJECTED:
            out[answer_id] = WorkStatus.REJECTED
        elif released and (
            confirmation in CONFIRMED_PLATFORM_STATUSES
            or platform in PLATFORMS_WITHOUT_CONFIRMATION
        ):
            # Confirmed after its prompt was full, or (no platform to confirm it) left out by
            # an unblock: kept out until a place frees.
            out[answer_id] = WorkStatus.LATE
        elif kind not in PERSON_KINDS:
            out[answer_id] = WorkStatus.KIND_NOT_DECIDED
        else:
            out[answer_id] = WorkStatus.UNCONFIRMED
    return out


def blocked_annotator_ids() -> QuerySet:
    """Ids of crowd workers blocked now (a subquery, evaluated where it is used)."""
    return WorkerBlock.objects.filter(active=True).order_by().values("annotator_id")


def blocked_user_ids() -> QuerySet:
    """Ids of the accounts whose annotator is blocked now (blocked_annotator_ids, the same
    block), for work done by an account rather than an Annotator: KIWI revision sessions and
    re-ratings (annotate.revision.counting). A subquery, evaluated where it is used."""
    return (
        Annotator.objects.filter(id__in=blocked_annotator_ids(), user__isnull=False)
        .order_by()
        .values("user_id")
    )


def counted_assignments() -> QuerySet[Assignment]:
    return Assignment.objects.filter(counted_assignment_q()).order_by()


def platform_annotator_ids() -> QuerySet:
    """Ids of annotators who came through a crowd platform (a subquery, evaluated where used)."""
    return Annotator.objects.exclude(platform="").order_by().values("id")


def unassigned_counted_q() -> Q:
    """Work without an assignment that counts: imported, or of an annotator of no platform."""
    return Q(assignment__isnull=True) & (
        Q(imported=True) | ~Q(annotator_id__in=platform_annotator_ids())
    )


def counted_work_q() -> Q:
    """The rule on a label or direct score row, as a Q (negate it for the work that does not)."""
    return ~Q(annotator_id__in=blocked_annotator_ids()) & (
        unassigned_counted_q() | Q(assignment_id__in=counted_assignments().values("id"))
    )


def unassigned_work_status(*, imported: bool, platform: str) -> str:
    """The WorkStatus of a label or score without an assignment, its annotator not blocked: the
    rule of `unassigned_counted_q` on one row."""
    return WorkStatus.COUNTED if imported or not platform else WorkStatus.UNCONFIRMED


def counted_work(queryset: QuerySet) -> QuerySet:
    """Keep the labels or direct scores of `queryset` that count in results."""
    return queryset.filter(counted_work_q())


def counted_work_sql(alias: str) -> tuple[str, tuple]:
    """The same rule as SQL on a label or direct score row named `alias`, with its parameters."""
    blocked_sql, blocked_params = blocked_annotator_ids().query.sql_with_params()
    platform_sql, platform_params = platform_annotator_ids().query.sql_with_params()
    counted_sql, counted_params = counted_assignments().values("id").query.sql_with_params()
    unassigned = (
        f"({alias}.assignment_id IS NULL AND ({alias}.imported "
        f"OR {alias}.annotator_id NOT IN ({platform_sql})))"
    )
    sql = (
        f"({alias}.annotator_id NOT IN ({blocked_sql}) AND ({unassigned} "
        f"OR {alias}.assignment_id IN ({counted_sql})))"
    )
    return sql, (*blocked_params, *platform_params, *counted_params)


def counted_work_fingerprint(*, benchmark: Benchmark) -> tuple:
    """What decides which of the benchmark's work counts: changes with every approve, reject,
    block, unblock and platform confirmation, so a cached report is never stale. The counted
    assignments by a hash of their ids (ids_fingerprint), not a count and sums that a swap of
    as many ids with the same sums keeps."""
    counted = counted_assignments().filter(task__instruction__benchmark=benchmark)
    blocked = sorted(blocked_annotator_ids().values_list("annotator_id", flat=True))
    return (*ids_fingerprint(counted), tuple(blocked))


def work_statuses(*, benchmark: Benchmark) -> dict[int, str]:
    """Return the WorkStatus of every assignment of the benchmark, by assignment id."""
    return _statuses(Q(task__instruction__benchmark=benchmark))


def work_statuses_of(*, assignment_ids: Iterable[int]) -> dict[int, str]:
    """Return the WorkStatus of these assignments (one page of a list), by assignment id."""
    return _statuses(Q(pk__in=list(assignment_ids)))


class AnsweredWorkStatuses:
    """The WorkStatus of the assignments a streamed export's answers (labels, scores, late
    submissions) belong to, by assignment id: read for the benchmark when the export starts.

    An answer is submitted work, but a file streams for a while: work submitted since the start
    was read as a claim ("not submitted") or not at all. Its status is asked again, once per
    assignment, when an answer of it is written.
    """

    def __init__(self, *, benchmark: Benchmark | None) -> None:
        self.known = work_statuses(benchmark=benchmark) if benchmark else {}
        self._asked: set[int] = set()

    def __call__(self, assignment_id: int) -> str:
        if assignment_id not in self._asked and (
            self.known.get(assignment_id, WorkStatus.NOT_SUBMITTED) == WorkStatus.NOT_SUBMITTED
        ):
            self.ask_again([assignment_id])
        return self.known[assignment_id]

    def ask_again(self, assignment_ids: Iterable[int]) -> None:
        ids = list(assignment_ids)
        self._asked.update(ids)
        self.known.update(work_statuses_of(assignment_ids=ids))


def _statuses(which: Q) -> dict[int, str]:
    counted = set(counted_assignments().filter(which).values_list("id", flat=True))
    blocked = set(blocked_annotator_ids().values_list("annotator_id", flat=True))
    assignments = (
        Assignment.objects.filter(which)
        .select_related("annotator", "platform_record")
        .annotate(sandbox=_is_sandbox_work())
    )
    return {
        a.id: WorkStatus.COUNTED if a.id in counted else _why_not_counted(a, blocked)
        for a in assignments.order_by()
    }


def _is_sandbox_work() -> Case:
    """sandbox_work_q on each row, as a column (`sandbox`)."""
    return Case(When(sandbox_work_q(), then=True), default=False, output_field=BooleanField())


def _why_not_counted(assignment: Assignment, blocked: set[int]) -> str:
    if assignment.annotator_id in blocked:
        return WorkStatus.BLOCKED
    if assignment.sandbox:
        return WorkStatus.SANDBOX
    if assignment.status == AssignmentStatus.REJECTED:
        return WorkStatus.REJECTED
    submitted = assignment.status in (AssignmentStatus.SUBMITTED, AssignmentStatus.APPROVED)
    if assignment.is_late and not (submitted and _unconfirmed(assignment)):
        return WorkStatus.LATE
    if not submitted:
        return WorkStatus.NOT_SUBMITTED
    return WorkStatus.UNCONFIRMED


def _unconfirmed(assignment: Assignment) -> bool:
    """Work that waits for its platform's confirmation (a sync took its slot back while it
    waits: annotate.crowd.services.review._unconfirmed_slots_released)."""
    if assignment.annotator.platform in PLATFORMS_WITHOUT_CONFIRMATION:
        return False
    record = getattr(assignment, "platform_record", None)
    return record is None or record.status not in CONFIRMED_PLATFORM_STATUSES
