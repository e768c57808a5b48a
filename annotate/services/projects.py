"""Create annotation projects and their batches of tasks."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from annotate.errors import ProjectSetupError
from annotate.models import (
    Batch,
    Benchmark,
    Instruction,
    Project,
    ProjectMode,
    Subset,
    System,
    Task,
)
from annotate.selectors.benchmarks import responses_missing_refusal

DEFAULT_GUIDELINES = """\
Read the instruction (and its input, if there is one), then each response. For every question \
about a response, choose one answer:

YES: the response fully meets what the question asks. Be strict: a single small slip means it \
does not. If the question asks whether every sentence is in the second person and one sentence \
is not, the answer is not YES.

NO: the response does not meet what the question asks, or it gives you nothing to judge it by \
(for example, the question asks about the second sentence and the response has only one).

UNKNOWN: you do not have the knowledge needed to decide (a fact you cannot check, a language \
you do not read). Use it rarely; it is not counted.

Judge each question on its own. The systems are shown as System A, B, C... in an order shuffled \
for you, so do not try to guess which model wrote what."""

# The direct-score step's guidelines: DEFAULT_GUIDELINES are about the YES/NO questions.
DIRECT_SCORE_GUIDELINES = """\
Read the instruction (and its input, if there is one), then each response. Give each response \
one score from 1 to 5 for how well it does what the instruction asks, as the rubric below \
describes. Judge each response on its own, not against the others.

The systems are shown as System A, B, C... in an order shuffled for you, so do not try to guess \
which model wrote what."""

DIRECT_SCORE_RUBRIC = {
    1: ("Very bad", "Unrelated to the instruction; shows no grasp of the task."),
    2: ("Bad", "Slightly related, but mostly wrong, confusing, or both."),
    3: ("Okay", "Related, but missing important details or containing mistakes."),
    4: ("Good", "Mostly correct and complete; small errors or omissions."),
    5: ("Excellent", "Fully correct, detailed, and exactly what the instruction asks."),
}


def guidelines_for_mode(mode: str) -> str:
    """Return the guidelines a new project of this mode starts with.

    A project that asks the YES/NO questions starts with the ones about them (a project of
    both steps shows the scoring ones on its scoring step, `AssignmentPage.guidelines`); a
    direct-score project with the scoring ones.
    """
    return DIRECT_SCORE_GUIDELINES if mode == ProjectMode.DIRECT_SCORE else DEFAULT_GUIDELINES


def _project_guidelines(guidelines: str, *, mode: str) -> str:
    """The researcher's guidelines, or the mode's own when they left them empty or as a form
    pre-filled them for another mode (its mode changed after the page loaded)."""
    text = guidelines.replace("\r\n", "\n").strip()
    if text in ("", DEFAULT_GUIDELINES, DIRECT_SCORE_GUIDELINES):
        return guidelines_for_mode(mode)
    return guidelines.strip()


class Selection:
    ALL = "all"
    IDS = "ids"
    RANDOM = "random"
    CHOICES = (ALL, IDS, RANDOM)


@dataclass(frozen=True)
class InstructionSelection:
    """Which instructions become tasks: all, the given external ids, or N random per subset."""

    kind: str = Selection.ALL
    external_ids: Sequence[str] = field(default_factory=tuple)
    per_subset: int = 0
    seed: int = 0


def project_create(
    *,
    name: str,
    benchmark: Benchmark,
    systems: Sequence[System],
    selection: InstructionSelection,
    mode: str = ProjectMode.DRFR,
    assignments_per_task: int = 3,
    allotted_minutes: int = 60,
    guidelines: str = "",
    researchers: Sequence[AbstractBaseUser] = (),
    created_by: AbstractBaseUser | None = None,
    batch_name: str = "Batch 1",
    continue_to_next: bool = True,
    practice: bool = False,
) -> Project:
    """Create a project and its first batch, with one task per selected instruction."""
    name = name.strip()
    _validate_project(
        name=name,
        systems=systems,
        mode=mode,
        assignments_per_task=assignments_per_task,
        allotted_minutes=allotted_minutes,
    )
    with transaction.atomic():
        project = Project.objects.create(
            name=name,
            benchmark=benchmark,
            mode=mode,
            assignments_per_task=assignments_per_task,
            allotted_minutes=allotted_minutes,
            guidelines=_project_guidelines(guidelines, mode=mode),
            created_by=created_by,
            continue_to_next=continue_to_next,
            practice=practice,
        )
        project.systems.set(systems)
        project.researchers.set(researchers)
        batch_create(project=project, name=batch_name, selection=selection)
    return project


def _validate_project(
    *,
    name: str,
    systems: Sequence[System],
    mode: str,
    assignments_per_task: int,
    allotted_minutes: int,
) -> None:
    if not name:
        raise ProjectSetupError("Give the project a name.", field="name")
    if Project.objects.filter(name=name).exists():
        raise ProjectSetupError(f"A project named '{name}' already exists.", field="name")
    if mode not in ProjectMode.values:
        raise ProjectSetupError(
            f"Mode must be one of {', '.join(ProjectMode.values)}.", field="mode"
        )
    if not systems:
        raise ProjectSetupError("Choose at least one system.", field="systems")
    if not 1 <= assignments_per_task <= 100:
        raise ProjectSetupError(
            "Assignments per task must be between 1 and 100.", field="assignments_per_task"
        )
    if not 1 <= allotted_minutes <= 24 * 60:
        raise ProjectSetupError(
            "Allotted minutes must be between 1 and 1440.", field="allotted_minutes"
        )


@transaction.atomic
def batch_create(*, project: Project, name: str, selection: InstructionSelection) -> Batch:
    """Create a batch of tasks for instructions not yet in any batch of the project."""
    name = name.strip()
    if not name:
        raise ProjectSetupError("Give the batch a name.", field="name")
    if Batch.objects.filter(project=project, name=name).exists():
        raise ProjectSetupError(f"The project already has a batch named '{name}'.", field="name")
    instructions = _select_instructions(project=project, selection=selection)
    _check_responses_exist(project=project, instructions=instructions)
    batch = Batch.objects.create(project=project, name=name)
    Task.objects.bulk_create(
        Task(batch=batch, instruction=instruction, position=position)
        for position, instruction in enumerate(instructions)
    )
    return batch


def _select_instructions(*, project: Project, selection: InstructionSelection) -> list[Instruction]:
    available = (
        Instruction.objects.filter(benchmark=project.benchmark)
        .exclude(tasks__batch__project=project)
        .order_by("position", "id")
    )
    if selection.kind == Selection.ALL:
        chosen = list(available)
    elif selection.kind == Selection.IDS:
        chosen = _select_by_ids(project=project, available=available, ids=selection.external_ids)
    elif selection.kind == Selection.RANDOM:
        chosen = _select_random(available=list(available), selection=selection)
    else:
        raise ProjectSetupError(
            f"Instruction selection must be one of {', '.join(Selection.CHOICES)}.",
            field="selection",
        )
    if not chosen:
        raise ProjectSetupError(
            "No instruction selected: every one is already in a batch, or none match.",
            field="selection",
        )
    return chosen


def _select_by_ids(*, project: Project, available, ids: Sequence[str]) -> list[Instruction]:
    wanted = list(dict.fromkeys(item.strip() for item in ids if item.strip()))
    by_id = {
        instruction.external_id: instruction
        for instruction in available.filter(external_id__in=wanted)
    }
    missing = [external_id for external_id in wanted if external_id not in by_id]
    if missing:
        raise ProjectSetupError(
            f"Not in benchmark '{project.benchmark.name}' or already in a batch of this project: "
            + ", ".join(missing[:20]),
            field="external_ids",
        )
    return [by_id[external_id] for external_id in wanted]


def _select_random(
    *, available: list[Instruction], selection: InstructionSelection
) -> list[Instruction]:
    if selection.per_subset < 1:
        raise ProjectSetupError(
            "The random sample needs at least 1 instruction per subset.", field="per_subset"
        )
    rng = random.Random(selection.seed)
    chosen: list[Instruction] = []
    for subset in Subset.values:
        pool = [instruction for instruction in available if instruction.subset == subset]
        chosen.extend(rng.sample(pool, min(selection.per_subset, len(pool))))
    return sorted(chosen, key=lambda instruction: (instruction.position, instruction.id))


def _check_responses_exist(*, project: Project, instructions: list[Instruction]) -> None:
    """Refuse instructions some chosen system has no response to, naming each such system."""
    refusal = responses_missing_refusal(systems=project.systems.all(), instructions=instructions)
    if refusal:
        raise ProjectSetupError(refusal, field="systems")
