"""The annotators page: per person and project, what they did and how well they agree, and per
person their verbalizer human-study answers and KIWI revision sessions."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import numpy as np
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Avg, Count, Exists, F, Max, OuterRef, Q

from annotate.crowd.models import WorkerBlock
from annotate.crowd.selectors import GoldScore, worker_gold_scores
from annotate.models import (
    Annotator,
    AnnotatorKind,
    Assignment,
    DirectScore,
    Label,
    Project,
    ProjectAnnotatorKind,
)
from annotate.revision.models import RerateStatus, Rerating, RevisionSession, SessionStatus
from annotate.roles import is_admin
from annotate.selectors.annotator_kinds import annotator_kinds_effective
from annotate.selectors.identities import identity_scope
from annotate.selectors.results import counted_assignment_q, human_answer_waiting_for_kind_q
from annotate.selectors.work import projects_for_researcher
from annotate.verbalizer.models import HumanAnswer
from evaluation.selectors.report_data import fetch_label_rows
from evaluation.stats.annotators import agreement_with_expert_majority, agreement_with_others


@dataclass
class HumanStudyWork:
    """One person's answers in one verbalizer human study."""

    study_id: int
    name: str
    evaluation_set_id: int
    answers: int
    waiting: int  # would count but for the annotator's undecided kind


@dataclass
class RevisionStudyWork:
    """One person's KIWI revision sessions and finished re-ratings in one study."""

    study_id: int
    name: str
    sessions: int = 0
    finished: int = 0
    turns: int = 0
    reratings: int = 0


@dataclass
class AnnotatorProjectRow:
    """A person's row: their Annotator, or None for a user who has only done KIWI sessions or
    re-ratings (no Annotator record yet: deciding their kind makes it)."""

    annotator: Annotator | None
    project: Project | None
    override: str  # the project's kind for this annotator, "" when it follows their own
    effective_kind: str
    tasks_done: int = 0  # assignments that count in results (results.counted_assignment_q)
    seconds_per_task: float | None = None
    last_active: datetime | None = None
    agreement_majority: float | None = None
    agreement_others: float | None = None
    gold: GoldScore | None = None
    block: WorkerBlock | None = None  # blocked now: none of their work counts anywhere
    name: str = ""  # as the viewer may see it: a hidden crowd worker's pseudonym
    name_hidden: bool = False  # `name` is that pseudonym, which the page says why
    # The person's work outside InFoBench projects, on their first row only (None on the others).
    human_studies: list[HumanStudyWork] | None = None
    revision_studies: list[RevisionStudyWork] | None = None
    user_id: int | None = None  # whose KIWI sessions the row shows
    kind_locked: bool = False  # the viewer may not change their own kind (work outside theirs)

    @property
    def answers_waiting(self) -> int:
        return sum(study.waiting for study in self.human_studies or ())


def annotators_kind_locked(
    *, user: AbstractBaseUser, annotator_ids: list[int] | None = None
) -> set[int]:
    """Return the ids (of `annotator_ids`, or of everyone) of annotators whose own kind `user`
    may not change (one query; none for an admin).

    Kinds decide who counts in the expert and crowd majorities of every report, so a researcher
    may change a person's own kind only when all their work is in results the researcher owns:
    assignments in the researcher's projects, labels and direct scores on benchmarks every
    project of which is theirs (reports are per benchmark), and verbalizer answers in human
    studies they made (the study or its evaluation set). Anyone else asks an admin, or
    overrides the kind in their own project.
    """
    if is_admin(user):
        return set()
    own = projects_for_researcher(user=user).order_by().values("pk")
    foreign_benchmarks = Project.objects.exclude(pk__in=own).order_by().values("benchmark_id")
    own_benchmarks = Project.objects.filter(pk__in=own).order_by().values("benchmark_id")
    outside_benchmarks = ~Q(response__instruction__benchmark_id__in=own_benchmarks) | Q(
        response__instruction__benchmark_id__in=foreign_benchmarks
    )
    own_studies = Q(study__created_by=user) | Q(study__evaluation_set__created_by=user)
    mine = OuterRef("pk")
    outside = (
        Exists(Assignment.objects.filter(annotator=mine).exclude(task__batch__project__in=own))
        | Exists(Label.objects.filter(outside_benchmarks, annotator=mine))
        | Exists(DirectScore.objects.filter(outside_benchmarks, annotator=mine))
        | Exists(HumanAnswer.objects.filter(annotator=mine).exclude(own_studies))
    )
    locked = Annotator.objects.filter(outside).order_by()
    if annotator_ids is not None:
        locked = locked.filter(pk__in=list(annotator_ids))
    return set(locked.values_list("pk", flat=True))


def annotator_override_locked(
    *, user: AbstractBaseUser, project: Project, annotator_id: int
) -> bool:
    """Whether `user` may not set (or clear) the annotator's kind in `project` (never for an
    admin).

    A project's kind counts in its benchmark's whole report (annotator_kinds_effective), so it
    is `annotators_kind_locked`'s rule read on that benchmark: the researcher's to set only when
    the annotator has no assignment in another's project on it and, if another's project shares
    the benchmark, no label or direct score on it either.
    """
    if is_admin(user):
        return False
    own = projects_for_researcher(user=user).order_by().values("pk")
    benchmark_id = project.benchmark_id
    assignments = Assignment.objects.filter(
        annotator_id=annotator_id, task__batch__project__benchmark_id=benchmark_id
    )
    if assignments.exclude(task__batch__project__in=own).exists():
        return True
    if not Project.objects.filter(benchmark_id=benchmark_id).exclude(pk__in=own).exists():
        return False
    work = Q(annotator_id=annotator_id, response__instruction__benchmark_id=benchmark_id)
    return Label.objects.filter(work).exists() or DirectScore.objects.filter(work).exists()


def annotator_rows(
    *, user: AbstractBaseUser, project_id: int | None = None, kind: str = ""
) -> list[AnnotatorProjectRow]:
    """Return one row per (person, project they worked in) of the projects the user may read,
    and one row (project None) per person who has no assignment there yet: unless a project or
    a decided kind is chosen, users who have only done KIWI sessions (no Annotator, so their
    kind is not decided: annotate.revision.counting) too."""
    projects = {p.pk: p for p in projects_for_researcher(user=user)}
    if project_id is not None:
        projects = {pk: p for pk, p in projects.items() if pk == project_id}
    work = (
        Assignment.objects.filter(task__batch__project__in=list(projects))
        .values("annotator_id", "task__batch__project_id")
        .annotate(
            # What results count (the progress page's "tasks done" rule), so a blocked worker's,
            # rejected or unconfirmed crowd work moves neither column.
            done=Count("id", filter=counted_assignment_q()),
            seconds=Avg("active_seconds", filter=counted_assignment_q()),
            last=Max("submitted_at"),
            claimed=Max("claimed_at"),
        )
    )
    people = Annotator.objects.exclude(kind=AnnotatorKind.LLM).select_related("user")
    if kind:
        people = people.filter(kind=kind)
    people = {a.pk: a for a in people}
    overrides = {
        (o.annotator_id, o.project_id): o.kind
        for o in ProjectAnnotatorKind.objects.filter(project__in=list(projects))
    }
    rows, seen = [], set()
    for entry in work:
        annotator = people.get(entry["annotator_id"])
        if annotator is None:
            continue
        project = projects[entry["task__batch__project_id"]]
        override = overrides.get((annotator.pk, project.pk), "")
        rows.append(
            AnnotatorProjectRow(
                annotator=annotator,
                project=project,
                override=override,
                effective_kind=override or annotator.kind,
                tasks_done=entry["done"],
                seconds_per_task=entry["seconds"],
                last_active=entry["last"] or entry["claimed"],
                user_id=annotator.user_id,
            )
        )
        seen.add(annotator.pk)
    if project_id is None:
        rows += [
            AnnotatorProjectRow(a, None, "", a.kind, user_id=a.user_id)
            for pk, a in people.items()
            if pk not in seen
        ]
    kiwi_only = project_id is None and kind in ("", AnnotatorKind.UNDECIDED)
    users = {a.user_id for a in people.values() if a.user_id is not None}
    revision = _revision_work(user_ids=None if kiwi_only else users)
    if kiwi_only:
        # Filtered to the undecided, `people` is not everyone a KIWI-only user must not be.
        known = Annotator.objects.only("user_id", "name").order_by() if kind else people.values()
        rows += _kiwi_only_rows(revision, {a.pk: a for a in known})
    blocks = WorkerBlock.objects.filter(active=True, annotator_id__in=list(people))
    blocks = {block.annotator_id: block for block in blocks}
    scope = identity_scope(user=user)  # a crowd worker's platform id only to those it may show
    locked = annotators_kind_locked(user=user, annotator_ids=list(people))
    for row in rows:
        if row.annotator is not None:
            row.block = blocks.get(row.annotator.pk)
            row.kind_locked = row.annotator.pk in locked
            row.name = scope.name_of(row.annotator)
            row.name_hidden = scope.hides(
                annotator_id=row.annotator.pk, worker_id=row.annotator.worker_id
            )
    _add_agreement(rows)
    _add_gold(rows)
    rows.sort(key=lambda r: (r.name, r.project.name if r.project else ""))
    _add_other_studies(rows, people, revision)
    return rows


def _kiwi_only_rows(
    revision: dict[int, tuple[str, list[RevisionStudyWork]]], people: dict[int, Annotator]
) -> list[AnnotatorProjectRow]:
    """A row for each user in `revision` who is none of `people`: named as annotator_for_user
    would name them, so no two rows read the same."""
    users = {a.user_id for a in people.values()}
    names = {a.name for a in people.values()}
    return [
        AnnotatorProjectRow(
            None, None, "", "", user_id=user_id,
            name=f"{username} (user {user_id})" if username in names else username,
        )
        for user_id, (username, _) in revision.items()
        if user_id not in users
    ]  # fmt: skip


def _revision_work(*, user_ids: set[int] | None) -> dict[int, tuple[str, list[RevisionStudyWork]]]:
    """Each user's KIWI sessions and finished re-ratings per study, with their username (two
    queries): of `user_ids`, or of everyone who has steered a session or re-rated a turn
    (None). Researchers read every KIWI study, so this is not limited to their projects."""
    # A session given up (its model kept failing, nothing rated) counts nowhere.
    sessions = RevisionSession.objects.filter(annotator__isnull=False).exclude(
        status=SessionStatus.GIVEN_UP
    )
    reratings = Rerating.objects.filter(status=RerateStatus.DONE)
    if user_ids is not None:
        sessions = sessions.filter(annotator_id__in=list(user_ids))
        reratings = reratings.filter(annotator_id__in=list(user_ids))
    per_study = sessions.values(
        "annotator_id", "annotator__username", "study_id", "study__name"
    ).annotate(
        sessions=Count("id", distinct=True),
        finished=Count("id", filter=Q(status=SessionStatus.FINISHED), distinct=True),
        turns=Count("turns"),
    )
    rerated = reratings.values(
        "annotator_id",
        "annotator__username",
        study_id=F("turn__session__study_id"),
        study__name=F("turn__session__study__name"),
    ).annotate(reratings=Count("id"))
    studies: dict[tuple[int, int], RevisionStudyWork] = {}
    usernames: dict[int, str] = {}
    for entry in [*per_study.order_by(), *rerated.order_by()]:
        user_id, username = entry.pop("annotator_id"), entry.pop("annotator__username")
        usernames[user_id] = username
        key = (user_id, entry["study_id"])
        name = entry.pop("study__name")
        study = studies.setdefault(key, RevisionStudyWork(study_id=entry["study_id"], name=name))
        for field_name, value in entry.items():
            setattr(study, field_name, value)
    work: dict[int, tuple[str, list[RevisionStudyWork]]] = {}
    for (user_id, _), study in sorted(studies.items(), key=lambda item: item[1].name):
        work.setdefault(user_id, (usernames[user_id], []))[1].append(study)
    return work


def _add_other_studies(
    rows: list[AnnotatorProjectRow],
    people: dict[int, Annotator],
    revision: dict[int, tuple[str, list[RevisionStudyWork]]],
) -> None:
    """Give each person's first row their verbalizer answers (one query) and KIWI sessions.

    Researchers read every human study and KIWI study, so these are not limited to their
    projects: an annotator who only answered there is listed with it, not as idle.
    """
    answers: dict[int, list[HumanStudyWork]] = {}
    per_study = (
        HumanAnswer.objects.filter(annotator_id__in=list(people))
        .values("annotator_id", "study_id", "study__name")
        .annotate(
            set_id=Max("study__evaluation_set_id"),
            answers=Count("id"),
            waiting=Count("id", filter=human_answer_waiting_for_kind_q()),
        )
        .order_by("study__name")
    )
    for entry in per_study:
        answers.setdefault(entry["annotator_id"], []).append(
            HumanStudyWork(
                study_id=entry["study_id"],
                name=entry["study__name"],
                evaluation_set_id=entry["set_id"],
                answers=entry["answers"],
                waiting=entry["waiting"],
            )
        )
    seen: set[tuple[str, int | None]] = set()
    for row in rows:
        person = ("annotator", row.annotator.pk) if row.annotator else ("user", row.user_id)
        if person not in seen:
            seen.add(person)
            row.human_studies = answers.get(row.annotator.pk, []) if row.annotator else []
            row.revision_studies = revision.get(row.user_id, ("", []))[1]


def _add_agreement(rows: list[AnnotatorProjectRow]) -> None:
    """Agreement over each annotator's labels on the project's benchmark (all projects on it)."""
    for benchmark_id in {row.project.benchmark_id for row in rows if row.project}:
        majority, others = benchmark_agreement(benchmark_id=benchmark_id)
        for row in rows:
            if row.project and row.project.benchmark_id == benchmark_id:
                row.agreement_majority = majority.get(row.annotator.pk)
                row.agreement_others = others.get(row.annotator.pk)


def benchmark_agreement(*, benchmark_id: int) -> tuple[dict[int, float], dict[int, float]]:
    """Return {annotator id: agreement with the expert majority} and {…: with the others}.

    Every label counts here, undecided annotators' too (deciding their kind is what this is
    for); the expert majority is of the annotators who count as experts in the benchmark, and
    "the others" are people only: an LLM judge's labels are left out, so running a judge does
    not move anyone's share (a judge's own share is still against the people).
    """
    rows = fetch_label_rows(benchmark_id)
    if len(rows) == 0:
        return {}, {}
    _, item = np.unique(rows[:, 0] * (int(rows[:, 1].max()) + 1) + rows[:, 1], return_inverse=True)
    annotator_ids, annotator = np.unique(rows[:, 2], return_inverse=True)
    kinds = annotator_kinds_effective(
        benchmark_id=benchmark_id, annotator_ids=annotator_ids.tolist()
    )
    is_expert = np.array([kinds.get(pk) == AnnotatorKind.EXPERT for pk in annotator_ids.tolist()])
    n_items = int(item.max()) + 1
    majority = agreement_with_expert_majority(item, annotator, rows[:, 3], is_expert, n_items)
    is_person = np.array([kinds.get(pk) != AnnotatorKind.LLM for pk in annotator_ids.tolist()])
    others = agreement_with_others(
        item, annotator, rows[:, 3], len(annotator_ids), n_items, is_other=is_person
    )

    def as_dict(shares: np.ndarray) -> dict[int, float]:
        return {
            int(pk): float(share)
            for pk, share in zip(annotator_ids.tolist(), shares, strict=True)
            if not np.isnan(share)
        }

    return as_dict(majority), as_dict(others)


def _add_gold(rows: list[AnnotatorProjectRow]) -> None:
    by_project: dict[int, list[AnnotatorProjectRow]] = {}
    for row in rows:
        if row.project and row.effective_kind == AnnotatorKind.CROWD:
            by_project.setdefault(row.project.pk, []).append(row)
    for project_rows in by_project.values():
        project = project_rows[0].project
        scores = worker_gold_scores(
            project=project, annotator_ids=[row.annotator.pk for row in project_rows]
        )
        for row in project_rows:
            row.gold = scores.get(row.annotator.pk)
