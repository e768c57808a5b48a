"""CSV exports neutralise spreadsheet formulas, and the neutralised file imports back unchanged.

Convention (annotate.services.files): a text cell whose first character after any leading
apostrophes is = + - @ TAB or CR gets one more apostrophe in front; the importer takes exactly one
off such a cell. So "=x" is written "'=x", "'=x" is written "''=x", and both come back as they
were. Leading whitespace is not kept by the importers (they strip cells), so names starting with
TAB or CR are neutralised on export but do not round-trip.
"""

from __future__ import annotations

import csv
import io

import pytest
from django.urls import reverse

from annotate.models import Label
from annotate.services.exports import labels_export, scores_export
from annotate.services.files import FORMULA_PREFIXES
from annotate.services.label_imports import labels_import
from tests.factories import (
    AnnotatorFactory,
    AssignmentFactory,
    BenchmarkFactory,
    DirectScoreFactory,
    InstructionFactory,
    LabelFactory,
    QuestionFactory,
    ResponseFactory,
    SystemFactory,
    project_with_tasks,
)

pytestmark = pytest.mark.django_db
HOSTILE_IDS = ["=cmd|' /C calc'!A0", "+1+1", "-2+3", "@SUM(A1)", "'=already quoted", "plain"]
HOSTILE_NAMES = ['=HYPERLINK("http://x")', "-sys", "''=two quotes", "ok-name"]


def is_neutral(cell: str) -> bool:
    return not cell.startswith(FORMULA_PREFIXES)


def text_cells(csv_text: str, columns: int) -> list[str]:
    rows = list(csv.reader(io.StringIO(csv_text)))[1:]
    return [cell for row in rows for cell in row[:columns]]


@pytest.fixture
def hostile_labels():
    benchmark = BenchmarkFactory(name="formulas")
    systems = [SystemFactory(name=name) for name in HOSTILE_NAMES[:2]]
    annotators = [AnnotatorFactory(name=name) for name in HOSTILE_NAMES[2:]]
    for position, external_id in enumerate(HOSTILE_IDS):
        instruction = InstructionFactory(
            benchmark=benchmark, external_id=external_id, position=position
        )
        question = QuestionFactory(instruction=instruction, position=1)
        for system in systems:
            response = ResponseFactory(instruction=instruction, system=system)
            for annotator in annotators:
                LabelFactory(question=question, response=response, annotator=annotator)
    return benchmark


def label_keys() -> set[tuple]:
    return set(
        Label.objects.values_list(
            "response__instruction__external_id",
            "response__system__name",
            "annotator__name",
            "question__position",
            "value",
        )
    )


def test_label_export_neutralises_every_formula_cell_and_imports_back_unchanged(
    hostile_labels, tmp_path
):
    before = label_keys()
    out = io.StringIO()
    assert labels_export(benchmark_name="formulas", output=out, file_format="csv") == len(before)
    cells = text_cells(out.getvalue(), columns=3)
    assert all(is_neutral(cell) for cell in cells)
    assert (
        "'=cmd|' /C calc'!A0" in cells
        and "'''=two quotes" in cells
        and "''=already quoted" in cells
    )
    assert "plain" in cells and "ok-name" in cells  # nothing else is touched

    Label.objects.all().delete()
    path = tmp_path / "export.csv"
    path.write_text(out.getvalue(), encoding="utf-8")
    summary = labels_import(path=str(path), benchmark_name="formulas")
    assert summary.created == len(before)
    assert label_keys() == before


@pytest.mark.parametrize("prefix", FORMULA_PREFIXES)
def test_score_export_neutralises_each_formula_character(prefix):
    response = ResponseFactory(
        instruction__benchmark__name="scores", system=SystemFactory(name=f"{prefix}system")
    )
    DirectScoreFactory(response=response, annotator=AnnotatorFactory(name=f"{prefix}person"))
    out = io.StringIO()
    scores_export(benchmark_name="scores", output=out)
    text = out.getvalue()
    # Read as text, not with csv.reader: Python 3.11's writer leaves a lone CR unquoted.
    assert f",'{prefix}system,'{prefix}person," in text
    assert f",{prefix}" not in text and f"\n{prefix}" not in text


def test_project_labels_csv_page_neutralises_formulas(client, researcher):
    project = project_with_tasks(instructions=1, systems=1, questions=1, assignments_per_task=1)
    project.researchers.add(researcher)
    batch = project.batches.get()
    batch.name = '=HYPERLINK("http://evil")'
    batch.save()
    task = batch.tasks.get()
    worker = AnnotatorFactory(name="@crowd-worker")
    LabelFactory(
        question=task.instruction.questions.get(),
        response=task.instruction.responses.get(),
        annotator=worker,
        assignment=AssignmentFactory(task=task, annotator=worker),
    )
    client.force_login(researcher)
    response = client.get(reverse("work:labels-csv", args=[project.id]))
    cells = text_cells(b"".join(response.streaming_content).decode(), columns=4)
    assert '\'=HYPERLINK("http://evil")' in cells and "'@crowd-worker" in cells
    assert all(is_neutral(cell) for cell in cells)
