"""Which kind each annotator counts as in one benchmark's results.

An annotator's own kind applies unless a project on the benchmark overrides it. Labels of an
annotator whose kind is not decided (a new web account) count nowhere: not in reports, majorities,
agreement or exports.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Max

from annotate.models import DECIDED_KIND_VALUES, Annotator, ProjectAnnotatorKind


def annotator_kinds_effective(
    *, benchmark_id: int, annotator_ids: Iterable[int] | None = None
) -> dict[int, str]:
    """Return {annotator id: kind} in the benchmark, project overrides applied (two queries).

    With `annotator_ids` only those annotators are read. A benchmark whose projects give one
    annotator two different kinds cannot happen: annotator_project_kind_set refuses it.
    """
    annotators = Annotator.objects.order_by()
    if annotator_ids is not None:
        annotators = annotators.filter(pk__in=list(annotator_ids))
    kinds = dict(annotators.values_list("id", "kind"))
    overrides = ProjectAnnotatorKind.objects.filter(project__benchmark_id=benchmark_id).order_by()
    for annotator_id, kind in overrides.values_list("annotator_id", "kind"):
        if annotator_id in kinds:
            kinds[annotator_id] = kind
    return kinds


def annotators_counted(*, benchmark_id: int, annotator_ids: Iterable[int]) -> dict[int, str]:
    """Return {annotator id: kind} of those annotators whose labels count in the benchmark."""
    kinds = annotator_kinds_effective(benchmark_id=benchmark_id, annotator_ids=annotator_ids)
    return {pk: kind for pk, kind in kinds.items() if kind in DECIDED_KIND_VALUES}


def kinds_fingerprint(*, benchmark_id: int) -> tuple:
    """Return what changes whenever a kind that matters to the benchmark's results changes."""

    decided = Annotator.objects.aggregate(last=Max("kind_changed_at"))["last"]
    overrides = tuple(
        ProjectAnnotatorKind.objects.filter(project__benchmark_id=benchmark_id)
        .order_by("annotator_id", "project_id")
        .values_list("annotator_id", "project_id", "kind")
    )
    return (decided, overrides)
