"""Reads of benchmarks for researchers: counts and one instruction with everything attached."""

from __future__ import annotations

from django.db.models import Count, Prefetch, QuerySet

from annotate.errors import NotFoundError
from annotate.models import Benchmark, Instruction, Label, Question, Response


def benchmark_list_with_counts() -> QuerySet[Benchmark]:
    """Return every benchmark annotated with instruction counts per subset."""
    return Benchmark.objects.annotate(instruction_count=Count("instructions")).order_by("name")


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


def instruction_with_work(*, benchmark: Benchmark, instruction_id: int) -> Instruction:
    """Return one instruction with its questions, responses and their labels prefetched."""
    labels = Label.objects.select_related("annotator").order_by("annotator__name")
    queryset = Instruction.objects.filter(benchmark=benchmark).prefetch_related(
        "questions",
        Prefetch(
            "responses",
            queryset=Response.objects.select_related("system").prefetch_related(
                Prefetch("labels", queryset=labels), "scores__annotator"
            ),
        ),
    )
    try:
        return queryset.get(pk=instruction_id)
    except Instruction.DoesNotExist:
        raise NotFoundError("No such instruction.") from None
