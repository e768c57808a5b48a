"""The label list of a benchmark for researchers: every label, whether it counts, and why not.

Whether a label counts is the one rule of the results (annotate.selectors.results: rejected,
late, unconfirmed or blocked work does not) and, as in every report, its annotator's kind in this
benchmark (annotate.selectors.annotator_kinds) must be decided. Annotator names go through the
viewer's IdentityScope: a researcher not on a crowd worker's project sees a pseudonym, in the
rows and in the annotator filter alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.db.models import Q, QuerySet

from annotate.errors import SystemNotFoundError
from annotate.models import DECIDED_KIND_VALUES, Annotator, Benchmark, Label, System
from annotate.selectors.annotator_kinds import annotator_kinds_effective
from annotate.selectors.identities import IdentityScope
from annotate.selectors.results import (
    WorkStatus,
    counted_work_q,
    unassigned_work_status,
    work_statuses_of,
)

KIND_NOT_DECIDED = "annotator's kind not decided"


@dataclass(frozen=True)
class LabelAnnotators:
    """The annotators with labels in one benchmark, as one viewer may see them."""

    names: dict[int, str]  # annotator id → name or pseudonym, sorted by shown name
    kinds: dict[int, str]  # annotator id → kind in this benchmark (project overrides applied)

    def ids_of_kind(self, kind: str) -> list[int]:
        return [pk for pk, annotator_kind in self.kinds.items() if annotator_kind == kind]

    @property
    def decided_ids(self) -> list[int]:
        return [pk for pk, kind in self.kinds.items() if kind in DECIDED_KIND_VALUES]


@dataclass(frozen=True)
class LabelRow:
    label: Label
    annotator: str  # as this viewer may see it
    kind: str
    counted: bool
    why_not: str  # "" when counted


def label_annotators(*, benchmark: Benchmark, scope: IdentityScope) -> LabelAnnotators:
    """Return the benchmark's labelling annotators with shown names and kinds (three queries)."""
    present = Label.objects.filter(response__instruction__benchmark=benchmark).values(
        "annotator_id"
    )
    annotators = list(Annotator.objects.filter(pk__in=present.order_by()).order_by())
    kinds = annotator_kinds_effective(
        benchmark_id=benchmark.pk, annotator_ids=[a.pk for a in annotators]
    )
    shown = sorted((scope.name_of(a), a.pk) for a in annotators)
    return LabelAnnotators(names={pk: name for name, pk in shown}, kinds=kinds)


def benchmark_systems(*, benchmark: Benchmark) -> QuerySet[System]:
    return (
        System.objects.filter(responses__instruction__benchmark=benchmark)
        .distinct()
        .order_by("name")
    )


def systems_by_name(*, names: Sequence[str], benchmark: Benchmark) -> list[System]:
    """The systems of these names (no names: every system with a response in the benchmark),
    as the judge's API and command take them. Raises SystemNotFoundError naming those not
    stored."""
    if not names:
        return list(benchmark_systems(benchmark=benchmark))
    names = list(dict.fromkeys(names))
    systems = list(System.objects.filter(name__in=names))
    missing = sorted(set(names) - {system.name for system in systems})
    if missing:
        raise SystemNotFoundError(missing)
    return systems


def benchmark_labels(*, benchmark: Benchmark) -> QuerySet[Label]:
    """Return the benchmark's labels with what a row shows, in instruction and question order."""
    return (
        Label.objects.filter(response__instruction__benchmark=benchmark)
        .select_related("question", "response__system", "response__instruction", "annotator")
        .order_by(
            "response__instruction__position",
            "response__instruction_id",
            "question__position",
            "response__system__name",
            "annotator_id",
            "pk",
        )
    )


def counted_q(annotators: LabelAnnotators) -> Q:
    """Labels that count in results: the counting rule, and an annotator of a decided kind."""
    return counted_work_q() & Q(annotator_id__in=annotators.decided_ids)


def label_rows(*, labels: list[Label], annotators: LabelAnnotators) -> list[LabelRow]:
    """Return one page's rows, each saying whether it counts and why not (three queries)."""
    counted = set(
        Label.objects.filter(counted_q(annotators), pk__in=[label.pk for label in labels])
        .order_by()
        .values_list("pk", flat=True)
    )
    statuses = work_statuses_of(
        assignment_ids={label.assignment_id for label in labels if label.assignment_id}
    )
    rows = []
    for label in labels:
        kind = annotators.kinds.get(label.annotator_id, "")
        why_not = ""
        if label.pk not in counted:
            why_not = _why_not(label, kind, statuses)
        rows.append(
            LabelRow(
                label=label,
                annotator=annotators.names.get(label.annotator_id, ""),
                kind=kind,
                counted=label.pk in counted,
                why_not=why_not,
            )
        )
    return rows


def _why_not(label: Label, kind: str, statuses: dict[int, str]) -> str:
    if label.assignment_id is not None:
        status = statuses.get(label.assignment_id, WorkStatus.COUNTED)
    else:
        platform = label.annotator.platform
        status = unassigned_work_status(imported=label.imported, platform=platform)
    if status != WorkStatus.COUNTED:
        return status
    if kind not in DECIDED_KIND_VALUES:
        return KIND_NOT_DECIDED
    return WorkStatus.BLOCKED
