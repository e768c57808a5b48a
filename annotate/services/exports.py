"""Write labels and direct scores back out in the long formats that the imports read.

Rows stream from the database in chunks; an export of a million labels never holds them all.
Cells that a spreadsheet would run as a formula are written with a leading quote, which the
imports strip again, so import → export → import gives the same data.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from typing import IO

from annotate.models import DirectScore, Label, LabelValue
from annotate.services.files import csv_escape
from annotate.services.label_imports import KIND_COLUMN, LABEL_CSV_COLUMNS, SCORE_CSV_COLUMNS

CHUNK = 5000
JSON_VALUES = {LabelValue.YES: True, LabelValue.NO: False, LabelValue.UNKNOWN: None}


def _label_rows(benchmark_name: str) -> Iterator[tuple]:
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
        )
        .iterator(chunk_size=CHUNK)
    )


def labels_export(*, benchmark_name: str, output: IO[str], file_format: str) -> int:
    """Write every label of the benchmark as long CSV or JSON Lines; return the rows written."""
    if file_format == "csv":
        return _labels_csv(benchmark_name, output)
    if file_format == "jsonl":
        return _labels_jsonl(benchmark_name, output)
    raise ValueError(f"unknown format {file_format!r}: expected csv or jsonl")


def _labels_csv(benchmark_name: str, output: IO[str]) -> int:
    writer = csv.writer(output, lineterminator="\n")
    writer.writerow([*LABEL_CSV_COLUMNS, KIND_COLUMN])
    count = 0
    for instruction, system, annotator, kind, position, value in _label_rows(benchmark_name):
        writer.writerow(
            [
                csv_escape(instruction),
                csv_escape(system),
                csv_escape(annotator),
                position,
                LabelValue(value).label,
                kind,
            ]
        )
        count += 1
    return count


def _labels_jsonl(benchmark_name: str, output: IO[str]) -> int:
    """One line per (instruction, system, annotator), `eval` in question order.

    A question left unlabelled between labelled ones is written as null and listed in `missing`,
    so that it is not mistaken for UNKNOWN on the way back in.
    """
    count = 0
    key, labels, kind = None, {}, ""

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
        output.write(json.dumps(row, ensure_ascii=False) + "\n")

    for instruction, system, annotator, row_kind, position, value in _label_rows(benchmark_name):
        if (instruction, system, annotator) != key:
            if key is not None:
                flush()
            key, labels, kind = (instruction, system, annotator), {}, row_kind
        labels[position] = value
        count += 1
    if key is not None:
        flush()
    return count


def scores_export(*, benchmark_name: str, output: IO[str]) -> int:
    """Write every direct score of the benchmark as a long CSV; return the rows written."""
    writer = csv.writer(output, lineterminator="\n")
    writer.writerow([*SCORE_CSV_COLUMNS, KIND_COLUMN])
    rows = (
        DirectScore.objects.filter(response__instruction__benchmark__name=benchmark_name)
        .order_by("response__instruction__position", "response__system__name", "annotator__name")
        .values_list(
            "response__instruction__external_id",
            "response__system__name",
            "annotator__name",
            "score",
            "annotator__kind",
        )
        .iterator(chunk_size=CHUNK)
    )
    count = 0
    for instruction, system, annotator, score, kind in rows:
        writer.writerow(
            [csv_escape(instruction), csv_escape(system), csv_escape(annotator), score, kind]
        )
        count += 1
    return count
