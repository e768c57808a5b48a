"""Reads of benchmarks for researchers: counts and one instruction with everything attached."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.db.models import Count, Exists, OuterRef, Prefetch, QuerySet

from annotate.errors import NotFoundError
from annotate.models import (
    Benchmark,
    DirectScore,
    Instruction,
    Label,
    Question,
    Response,
    System,
)
from annotate.selectors.identities import OPERATOR, IdentityScope
from annotate.selectors.results import counted_work


def benchmark_list_with_counts() -> QuerySet[Benchmark]:
    """Return every benchmark annotated with instruction counts per subset."""
    return Benchmark.objects.annotate(instruction_count=Count("instructions")).order_by("name")


def systems_with_responses(*, benchmark: Benchmark | None = None) -> QuerySet[System]:
    """Return the systems with at least one response (in `benchmark`, when given), to choose
    from where responses are needed.

    A generation run creates its system before any call; if every call fails the system stays
    with no response, and there is nothing of it to label or judge.
    """
    responses = Response.objects.filter(system=OuterRef("pk"))
    if benchmark is not None:
        responses = responses.filter(instruction__benchmark=benchmark)
    return System.objects.filter(Exists(responses)).order_by("name")


def responses_missing_refusal(
    *, systems: Iterable[System], instructions: Sequence[Instruction]
) -> str:
    """Return why these systems cannot all be used on these instructions ("" when they can).

    The rule of projects and judge runs alike: every chosen system needs a response to every
    selected instruction. Each system lacking some is named, by name order, with up to 20 of
    the instructions it lacks (by external id, in the order given). One query.
    """
    systems = sorted(systems, key=lambda system: system.name)
    present = set(
        Response.objects.filter(instruction__in=instructions, system__in=systems).values_list(
            "instruction_id", "system_id"
        )
    )
    lacks = []
    for system in systems:
        lacking = [
            instruction.external_id
            for instruction in instructions
            if (instruction.id, system.id) not in present
        ]
        if lacking:
            more = f" and {len(lacking) - 20} more" if len(lacking) > 20 else ""
            lacks.append(f"{system.name} has no response to {', '.join(lacking[:20])}{more}")
    if not lacks:
        return ""
    return (
        "Every chosen system needs a response to every selected instruction: "
        + "; ".join(lacks)
        + ". Leave those systems or instructions out, or import the responses first."
    )


def benchmark_systems_by_benchmark() -> dict[int, list[str]]:
    """The names of the systems with responses in each benchmark, by benchmark id (one query)."""
    pairs = (
        Response.objects.order_by()
        .values_list("instruction__benchmark_id", "system__name")
        .distinct()
    )
    systems: dict[int, list[str]] = {}
    for benchmark_id, name in pairs:
        systems.setdefault(benchmark_id, []).append(name)
    return {pk: sorted(names) for pk, names in systems.items()}


def benchmark_get(*, benchmark_id: int) -> Benchmark:
    try:
        return Benchmark.objects.get(pk=benchmark_id)
    except Benchmark.DoesNotExist:
        raise NotFoundError("No such benchmark.") from None


def benchmark_summary(*, benchmark: Benchmark) -> dict[str, int]:
    """Return counts of instructions, questions, responses and labels in the benchmark."""
    return {
        "instructions": Instruction.objects.filter(benchmark=benchmark).count(),
        "questions": Question.objects.filter(instruction__benchmark=benchmark).count(),
        "responses": Response.objects.filter(instruction__benchmark=benchmark).count(),
        "labels": Label.objects.filter(response__instruction__benchmark=benchmark).count(),
    }


def benchmark_instructions(*, benchmark: Benchmark) -> QuerySet[Instruction]:
    return (
        Instruction.objects.filter(benchmark=benchmark)
        .annotate(question_count=Count("questions", distinct=True))
        .annotate(response_count=Count("responses", distinct=True))
        .order_by("position", "id")
    )


def instruction_with_work(
    *, benchmark: Benchmark, instruction_id: int, scope: IdentityScope = OPERATOR
) -> Instruction:
    """Return one instruction with its questions, responses and the labels and direct scores
    that count in results (annotate.selectors.results) prefetched."""
    labels = counted_work(Label.objects.select_related("annotator")).order_by("annotator__name")
    scores = counted_work(DirectScore.objects.select_related("annotator"))
    queryset = Instruction.objects.filter(benchmark=benchmark).prefetch_related(
        "questions",
        Prefetch(
            "responses",
            queryset=Response.objects.select_related("system").prefetch_related(
                Prefetch("labels", queryset=labels), Prefetch("scores", queryset=scores)
            ),
        ),
    )
    try:
        instruction = queryset.get(pk=instruction_id)
    except Instruction.DoesNotExist:
        raise NotFoundError("No such instruction.") from None
    for response in instruction.responses.all():
        for work in [*response.labels.all(), *response.scores.all()]:
            work.annotator.shown_name = scope.name_of(work.annotator)
    return instruction


@dataclass(frozen=True)
class LabelMatrix:
    """Labels of one instruction as questions × (system, annotator) cells ("" = no label)."""

    systems: list[str]
    annotators: list[str]  # the same annotators under every system
    rows: list[tuple[Question, list[str]]]  # each question with one cell per (system, annotator)
    kinds: dict[str, str]  # annotator name → kind in this benchmark

    @property
    def columns(self) -> list[tuple[str, str, str]]:
        """(system, annotator, annotator's kind) per column, in cell order."""
        return [(s, a, self.kinds.get(a, "")) for s in self.systems for a in self.annotators]


def instruction_label_matrix(*, instruction: Instruction) -> LabelMatrix:
    """Build the matrix from an instruction_with_work() result (no further query for labels)."""
    from annotate.selectors.annotator_kinds import annotator_kinds_effective

    responses = sorted(instruction.responses.all(), key=lambda r: r.system.name)
    values: dict[tuple[int, str, str], str] = {}
    annotators: dict[str, int] = {}
    for response in responses:
        for label in response.labels.all():
            name = getattr(label.annotator, "shown_name", label.annotator.name)
            annotators[name] = label.annotator_id
            key = (label.question_id, response.system.name, name)
            values[key] = label.get_value_display()
    names = sorted(annotators)
    kinds_by_id = annotator_kinds_effective(
        benchmark_id=instruction.benchmark_id, annotator_ids=annotators.values()
    )
    systems = [response.system.name for response in responses]
    rows = [
        (
            question,
            [values.get((question.pk, s, a), "") for s in systems for a in names],
        )
        for question in instruction.questions.all()
    ]
    kinds = {name: kinds_by_id.get(pk, "") for name, pk in annotators.items()}
    return LabelMatrix(systems, names, rows, kinds)
