"""Write labels and direct scores back out in the long formats that the imports read.

Rows stream from the database in chunks; an export of a million labels never holds them all.
Cells that a spreadsheet would run as a formula are written with a leading quote, which the
imports strip again, so import → export → import gives the same data.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import IO

from annotate.models import DECIDED_KIND_VALUES, Benchmark, DirectScore, Label, LabelValue
from annotate.selectors.annotator_kinds import annotator_kinds_effective
from annotate.selectors.identities import OPERATOR, IdentityScope
from annotate.selectors.results import (
    AnsweredWorkStatuses,
    WorkStatus,
    blocked_annotator_ids,
    unassigned_work_status,
)
from annotate.services.files import csv_writer
from annotate.services.label_imports import (
    KIND_COLUMN,
    LABEL_CSV_COLUMNS,
    SCORE_CSV_COLUMNS,
    WORK_STATUS_COLUMN,
)

CHUNK = 5000
JSON_VALUES = {LabelValue.YES: True, LabelValue.NO: False, LabelValue.UNKNOWN: None}


def _kinds(benchmark: Benchmark | None) -> tuple[dict[int, str], set[int]]:
    """Each annotator's kind in the benchmark, and those whose kind is not decided: their
    labels stay out of every export (annotate.selectors.annotator_kinds)."""
    kinds = annotator_kinds_effective(benchmark_id=benchmark.pk if benchmark else 0)
    return kinds, {pk for pk, kind in kinds.items() if kind not in DECIDED_KIND_VALUES}


def _label_rows(benchmark_name: str, scope: IdentityScope) -> Iterator[tuple]:
    """Yield (instruction, system, annotator, kind, question position, value, work status),
    the annotator named as `scope` allows."""
    benchmark = Benchmark.objects.filter(name=benchmark_name).first()
    statuses = AnsweredWorkStatuses(benchmark=benchmark)
    blocked = set(blocked_annotator_ids().values_list("annotator_id", flat=True))
    kinds, undecided = _kinds(benchmark)
    for row in _label_values(benchmark_name):
        instruction, system, name, kind, position, value, annotator_id, worker_id = row[:8]
        assignment, imported, platform = row[8:]
        if annotator_id in undecided:
            continue
        kind = kinds.get(annotator_id, kind)
        if annotator_id in blocked:
            status = WorkStatus.BLOCKED
        elif assignment is None:
            status = unassigned_work_status(imported=imported, platform=platform)
        else:
            status = statuses(assignment)
        name = scope.name(annotator_id=annotator_id, name=name, worker_id=worker_id)
        yield instruction, system, name, kind, position, value, status


def _label_values(benchmark_name: str) -> Iterator[tuple]:
    return (
        Label.objects.filter(response__instruction__benchmark__name=benchmark_name)
        .order_by(
            "response__instruction__position",
            "response__instruction_id",
            "response__system__name",
            "annotator__name",
            "question__position",
        )
        .values_list(
            "response__instruction__external_id",
            "response__system__name",
            "annotator__name",
            "annotator__kind",
            "question__position",
            "value",
            "annotator_id",
            "annotator__worker_id",
            "assignment_id",
            "imported",
            "annotator__platform",
        )
        .iterator(chunk_size=CHUNK)
    )


def labels_export(
    *, benchmark_name: str, output: IO[str], file_format: str, scope: IdentityScope = OPERATOR
) -> int:
    """Write every label of the benchmark as long CSV or JSON Lines; return the rows written.

    This is the raw export: work that does not count in results (rejected, a blocked worker's,
    not confirmed by the platform) is written too, with its `work_status`. Crowd workers are
    named as `scope` allows (annotate.selectors.identities; the default is an operator's).
    """
    if file_format == "csv":
        return _labels_csv(benchmark_name, output, scope)
    if file_format == "jsonl":
        return _labels_jsonl(benchmark_name, output, scope)
    raise ValueError(f"unknown format {file_format!r}: expected csv or jsonl")


def _labels_csv(benchmark_name: str, output: IO[str], scope: IdentityScope) -> int:
    writer = csv_writer(output)
    writer.writerow([*LABEL_CSV_COLUMNS, KIND_COLUMN, WORK_STATUS_COLUMN])
    count = 0
    for instruction, system, annotator, kind, position, value, status in _label_rows(
        benchmark_name, scope
    ):
        label = LabelValue(value).label
        writer.writerow([instruction, system, annotator, position, label, kind, status])
        count += 1
    return count


def _labels_jsonl(benchmark_name: str, output: IO[str], scope: IdentityScope) -> int:
    """One line per (instruction, system, annotator), `eval` in question order.

    A question left unlabelled between labelled ones is written as null and listed in `missing`,
    so that it is not mistaken for UNKNOWN on the way back in.
    """
    count = 0
    key, labels, kind, status = None, {}, "", ""

    def flush() -> None:
        instruction, system, annotator = key
        last = max(labels)
        row = {
            "id": instruction,
            "system": system,
            "annotator": annotator,
            "kind": kind,
            "eval": [JSON_VALUES[labels[i]] if i in labels else None for i in range(1, last + 1)],
        }
        missing = [i for i in range(1, last + 1) if i not in labels]
        if missing:
            row["missing"] = missing
        row[WORK_STATUS_COLUMN] = status
        output.write(json.dumps(row, ensure_ascii=False) + "\n")

    for instruction, system, annotator, row_kind, position, value, row_status in _label_rows(
        benchmark_name, scope
    ):
        if (instruction, system, annotator) != key:
            if key is not None:
                flush()
            key, labels, kind = (instruction, system, annotator), {}, row_kind
            status = row_status
        labels[position] = value
        count += 1
    if key is not None:
        flush()
    return count


def scores_export(*, benchmark_name: str, output: IO[str]) -> int:
    """Write every direct score of the benchmark as a long CSV; return the rows written."""
    writer = csv_writer(output)
    writer.writerow([*SCORE_CSV_COLUMNS, KIND_COLUMN])
    kinds, undecided = _kinds(Benchmark.objects.filter(name=benchmark_name).first())
    rows = (
        DirectScore.objects.filter(response__instruction__benchmark__name=benchmark_name)
        .exclude(annotator_id__in=undecided)
        .order_by("response__instruction__position", "response__system__name", "annotator__name")
        .values_list(
            "response__instruction__external_id",
            "response__system__name",
            "annotator__name",
            "score",
            "annotator_id",
        )
        .iterator(chunk_size=CHUNK)
    )
    count = 0
    for instruction, system, annotator, score, annotator_id in rows:
        writer.writerow([instruction, system, annotator, score, kinds[annotator_id]])
        count += 1
    return count
