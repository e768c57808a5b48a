"""Demo annotation projects on the demo benchmark, with accounts of annotators to do them, and
a system that generates its responses in the app through the offline fake endpoint.

The demo experts (ana, ben) labelled every demo instruction through a recorded expert study, and
three crowd workers through a recorded crowd study, so the report compares expert, crowd and LLM
judge with cost and time. An annotator labels a response once, so the open projects get two fresh
annotator accounts (cara, dev), whose kind a researcher decides. Safe to run again.
"""

from __future__ import annotations

import csv
from datetime import timedelta
from pathlib import Path

from django.contrib.auth.models import Group, User
from django.db import transaction
from django.utils import timezone

from annotate.engine.models import Endpoint
from annotate.engine.services import endpoint_create, engine_run_execute
from annotate.engine.services.generation import (
    generating_system_get_or_create,
    generation_run_create,
)
from annotate.errors import NoWorkError
from annotate.models import (
    Annotator,
    AnnotatorKind,
    Assignment,
    Benchmark,
    Project,
    ProjectMode,
    Response,
    System,
)
from annotate.revision.models import Rerating, Study
from annotate.revision.services.imports import sessions_import, study_upload
from annotate.revision.services.reratings import rerating_submit, reratings_sample
from annotate.roles import ADMIN, ANNOTATOR
from annotate.services.assignments import assignment_claim_next
from annotate.services.demo_data import DEMO_BENCHMARK, DEMO_DIR, DemoLogin
from annotate.services.projects import InstructionSelection, Selection, project_create
from annotate.services.submissions import assignment_submit, question_field

DEMO_ANNOTATOR_LOGINS = [
    DemoLogin("cara", "demo-cara", ANNOTATOR),
    DemoLogin("dev", "demo-dev", ANNOTATOR),
]
DEMO_PROJECTS = [
    ("Demo study: decomposed questions", ProjectMode.DRFR),
    ("Demo study: direct score, then questions", ProjectMode.BOTH),
]
EXPERT_STUDY = "Demo record: expert study (finished)"
CROWD_STUDY = "Demo record: crowd study (finished)"
DEMO_EXPERTS = ["expert-ana", "expert-ben"]
DEMO_CROWD_WORKERS = ["crowd-w1", "crowd-w2", "crowd-w3"]
# Both demo studies ask about the same 8 instructions and an annotator works on an instruction
# once, in whichever study she takes it first.
_SHARED_WORK = "8 instructions between the two demo studies (one done in either leaves the other)"
# Every demo annotator also has the other two methods' work: the demo readers' label-word study
# (Label-word tasks) and revision sessions to start (Revision sessions); cara and dev each have
# a turn of the re-rated sample left to rate again.
_OTHER_WORK = "label-word tasks and revision sessions open too"
DEMO_LOGIN_NOTES = {
    "admin": "publish to the crowd, judge runs, endpoints, the admin",
    "researcher": "reports (expert vs crowd vs LLM judge), annotators (decide cara and dev)",
    "ana": f"has labelled every demo instruction already (My tasks: none left); {_OTHER_WORK}",
    "ben": f"has labelled every demo instruction already (My tasks: none left); {_OTHER_WORK}",
    "cara": (
        f"{_SHARED_WORK}; counts once a researcher decides her kind; {_OTHER_WORK}, "
        "and a turn to rate again"
    ),
    "dev": (
        f"{_SHARED_WORK}; counts once a researcher decides his kind; {_OTHER_WORK}, "
        "and a turn to rate again"
    ),
}


@transaction.atomic
def demo_projects_create() -> list[DemoLogin]:
    """Create the demo annotators and the demo projects (each once); return the logins."""
    for login in DEMO_ANNOTATOR_LOGINS:
        user, created = User.objects.get_or_create(username=login.username)
        if created:
            user.set_password(login.password)
            user.save()
        user.groups.add(Group.objects.get(name=login.role))
    benchmark = Benchmark.objects.get(name=DEMO_BENCHMARK)
    systems = list(System.objects.filter(responses__instruction__benchmark=benchmark).distinct())
    creator = User.objects.filter(groups__name=ADMIN).order_by("pk").first()
    for name, mode in DEMO_PROJECTS:
        if Project.objects.filter(name=name).exists():
            continue
        project = project_create(
            name=name,
            benchmark=benchmark,
            systems=systems,
            selection=InstructionSelection(),
            mode=mode,
            assignments_per_task=2,
            allotted_minutes=30,
            created_by=creator,
        )
        project.researchers.set(User.objects.filter(groups__name="researcher"))
    # The finished studies were recorded before the demo's researcher existed: theirs too, so
    # the researcher reads them and decides the kind of the people who worked in them.
    for project in Project.objects.filter(name__in=[EXPERT_STUDY, CROWD_STUDY]):
        project.researchers.add(*User.objects.filter(groups__name="researcher"))
    return DEMO_ANNOTATOR_LOGINS


DEMO_ENDPOINT = "demo-fake"
DEMO_GENERATING_SYSTEM = "Demo generator (fake model)"


def demo_generation_create() -> int:
    """Create the fake endpoint and a system generating the demo benchmark's responses through
    it (once); return how many responses were generated now."""
    endpoint = Endpoint.objects.filter(name=DEMO_ENDPOINT).first() or endpoint_create(
        name=DEMO_ENDPOINT, base_url="", model="fake-demo", concurrency=4
    )
    benchmark = Benchmark.objects.get(name=DEMO_BENCHMARK)
    system = generating_system_get_or_create(name=DEMO_GENERATING_SYSTEM, endpoint=endpoint)
    answered = Response.objects.filter(system=system, instruction__benchmark=benchmark).count()
    if answered == benchmark.instructions.count():
        return 0
    run = generation_run_create(benchmark=benchmark, systems=[system], endpoint=endpoint)
    return engine_run_execute(run_id=run.pk).units_done - answered


DEMO_REVISION_STUDY = "Demo revision study (KIWI)"
DEMO_REVISION_SYSTEMS = ["demo-model-a", "demo-model-b"]  # blank endpoints: the fake model
# Of the re-rated sample, these many are rated by the demo (by ana and ben, experts, so the
# Human row of Table 5 counts them); the rest wait for cara and dev, whose kind a researcher
# decides first (annotate.revision.counting).
DEMO_RERATINGS, DEMO_RERATINGS_DONE = 8, 6
DEMO_RERATERS = ["ana", "ben"]


@transaction.atomic
def demo_revision_create(*, fixtures_dir: Path = DEMO_DIR / "revision") -> Study:
    """Load the demo revision study: questions with documents, finished sessions, re-ratings.

    Safe to run again: the imports add nothing the second time and the re-rated sample is
    drawn only once. The experts ana and ben (demo_data) re-rate the first few turns, so that
    Table 5 has a human row; the rest are sent to the annotators cara and dev
    (demo_projects_create), whose kind is not decided: their re-ratings count once it is.
    """
    study_upload(
        path=str(fixtures_dir / "study.jsonl"),
        study_name=DEMO_REVISION_STUDY,
        systems=DEMO_REVISION_SYSTEMS,
    )
    sessions_import(path=str(fixtures_dir / "sessions.jsonl"), study_name=DEMO_REVISION_STUDY)
    study = Study.objects.get(name=DEMO_REVISION_STUDY)
    if not Rerating.objects.filter(turn__session__study=study).exists():
        now = timezone.now()
        raters = list(User.objects.filter(username__in=DEMO_RERATERS).order_by("username"))
        sample = reratings_sample(
            study=study, annotators=raters, size=DEMO_RERATINGS_DONE, seed=0, now=now
        )
        for index, rerating in enumerate(sample):
            original = rerating.turn.rating
            # Deterministic second opinions: most agree, every third one is a notch stricter.
            stricter = {"good": "neutral", "neutral": "bad", "bad": "bad"}[original]
            rating = stricter if index % 3 == 2 else original
            rerating_submit(
                rerating_id=rerating.pk,
                user=rerating.annotator,
                rating=rating,
                comment="Demo second rating.",
                now=now,
            )
        waiting = list(
            User.objects.filter(
                username__in=[login.username for login in DEMO_ANNOTATOR_LOGINS]
            ).order_by("username")
        )
        reratings_sample(
            study=study,
            annotators=waiting,
            size=DEMO_RERATINGS - DEMO_RERATINGS_DONE,
            seed=1,
            now=now,
        )
    return study


def _demo_labels(path: Path) -> dict[tuple[str, str, str], dict[int, str]]:
    """Return {(instruction id, system, annotator): {question index: "yes"/"no"/"unknown"}}."""
    labels: dict[tuple[str, str, str], dict[int, str]] = {}
    with path.open(newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            key = (row["instruction_id"], row["system"], row["annotator"])
            labels.setdefault(key, {})[int(row["question_index"])] = row["label"].lower()
    return labels


def _crowd_answer(expert: str, worker: int, instruction: int, question: int) -> str:
    """A crowd worker's answer: the expert's, flipped on a fixed pattern (about one in four)."""
    if expert == "unknown" or (worker + instruction + question) % 4:
        return expert
    return "no" if expert == "yes" else "yes"


def _record_study(*, project: Project, annotators: list[Annotator], answer, start) -> None:
    """Let each annotator do every task of the project in turn, five minutes a task."""
    clock = start
    names = dict(System.objects.values_list("pk", "name"))
    for rank, annotator in enumerate(annotators):
        while True:
            try:
                assignment = assignment_claim_next(annotator=annotator, project=project, now=clock)
            except NoWorkError:
                break
            instruction = assignment.task.instruction
            answers = {}
            for position, system_id in enumerate(assignment.display_order, start=1):
                for question in range(1, instruction.questions.count() + 1):
                    answers[question_field(position, question)] = answer(
                        rank, instruction, names[system_id], question
                    )
            clock += timedelta(minutes=5)
            assignment_submit(
                assignment_id=assignment.pk,
                annotator=annotator,
                answers=answers,
                active_seconds=4 * 60 + 30 * (rank + 1),
                now=clock,
            )
            clock += timedelta(minutes=1)
    project.batches.update(active=False)  # a finished record: nothing to claim


def _complete_instructions(benchmark: Benchmark, labels: dict) -> list[str]:
    """Instructions every demo expert labelled completely (a web submission answers all)."""
    systems = list(
        System.objects.filter(responses__instruction__benchmark=benchmark)
        .distinct()
        .values_list("name", flat=True)
    )
    complete = []
    for instruction in benchmark.instructions.order_by("position"):
        wanted = set(range(1, instruction.questions.count() + 1))
        if all(
            set(labels.get((instruction.external_id, system, expert), {})) == wanted
            for system in systems
            for expert in DEMO_EXPERTS
        ):
            complete.append(instruction.external_id)
    return complete


def _recorded_project(
    name: str,
    benchmark: Benchmark,
    instruction_ids: list[str],
    *,
    annotators: int,
    reward: str = "1.00",
) -> Project | None:
    """Create a finished study's project once, each task asking for one assignment per
    annotator (so the record's page shows every task done); None when it exists already."""
    if Project.objects.filter(name=name).exists():
        return None
    project = project_create(
        name=name,
        benchmark=benchmark,
        systems=list(System.objects.filter(responses__instruction__benchmark=benchmark).distinct()),
        selection=InstructionSelection(kind=Selection.IDS, external_ids=instruction_ids),
        assignments_per_task=annotators,
        allotted_minutes=30,
        continue_to_next=False,
    )
    project.reward_usd = reward
    project.save(update_fields=["reward_usd"])
    project.researchers.set(User.objects.filter(groups__name="researcher"))
    return project


@transaction.atomic
def demo_studies_record(*, fixtures_dir: Path = DEMO_DIR) -> None:
    """Record the demo experts' and crowd workers' work as finished studies (once each).

    The experts give the labels of fixtures/demo/labels.csv through assignments, so their time
    (and so their cost) is on record; the crowd workers give the first expert's labels with a
    fixed share flipped. Runs before labels.csv is imported, which then adds only the judge's.
    """
    benchmark = Benchmark.objects.get(name=DEMO_BENCHMARK)
    labels = _demo_labels(fixtures_dir / "labels.csv")
    start = timezone.now() - timedelta(days=3)
    experts = [
        Annotator.objects.get_or_create(name=name, defaults={"kind": AnnotatorKind.EXPERT})[0]
        for name in DEMO_EXPERTS
    ]
    # One demo response has a question nobody labelled: its instruction stays imported only.
    complete = _complete_instructions(benchmark, labels)
    project = _recorded_project(EXPERT_STUDY, benchmark, complete, annotators=len(experts))
    if project is not None and not Assignment.objects.filter(annotator__in=experts).exists():
        _record_study(
            project=project,
            annotators=experts,
            answer=lambda rank, instruction, system, question: labels[
                (instruction.external_id, system, DEMO_EXPERTS[rank])
            ][question],
            start=start,
        )
    workers = [
        Annotator.objects.get_or_create(
            name=name,
            defaults={"kind": AnnotatorKind.CROWD, "platform": "selfhosted", "worker_id": name},
        )[0]
        for name in DEMO_CROWD_WORKERS
    ]
    project = _recorded_project(
        CROWD_STUDY, benchmark, complete, annotators=len(workers), reward="0.50"
    )
    if project is not None:
        _record_study(
            project=project,
            annotators=workers,
            answer=lambda rank, instruction, system, question: _crowd_answer(
                labels[(instruction.external_id, system, DEMO_EXPERTS[0])][question],
                rank,
                instruction.position,
                question,
            ),
            start=start + timedelta(days=1),
        )
