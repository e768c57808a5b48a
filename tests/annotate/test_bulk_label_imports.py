"""The fast ways through a large label CSV give the same result as the row-by-row way."""

import json
from functools import partial
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from annotate.errors import ImportFileError
from annotate.models import Annotator, Label, LabelValue
from annotate.services import files, label_imports
from annotate.services.imports import instructions_import, responses_import
from annotate.services.label_imports import labels_import

pytestmark = pytest.mark.django_db

HEADER = "instruction_id,system,annotator,question_index,label\n"
on_postgresql = pytest.mark.skipif(
    not settings.DATABASES["default"]["ENGINE"].endswith("postgresql"), reason="PostgreSQL only"
)


@pytest.fixture
def bench(tmp_path) -> Path:
    """One instruction with three questions and a response from system `sys`."""
    instruction = {
        "id": "t1",
        "input": "",
        "category": "Poems",
        "instruction": "Write a haiku.",
        "decomposed_questions": ["A?", "B?", "C?"],
        "subset": "Easy_set",
        "question_label": [["Format"], ["Content"], ["Style"]],
    }
    (tmp_path / "b.json").write_text(json.dumps(instruction) + "\n")
    instructions_import(path=str(tmp_path / "b.json"), benchmark_name="bulk")
    (tmp_path / "r.jsonl").write_text('{"id": "t1", "output": "spring rain"}\n')
    responses_import(path=str(tmp_path / "r.jsonl"), benchmark_name="bulk", system_name="sys")
    return tmp_path


def stored() -> set[tuple[str, int, int]]:
    return set(
        Label.objects.values_list("annotator__name", "question__position", "value").order_by()
    )


def label_indexes() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'annotate_label'")
        return {name for (name,) in cursor.fetchall()}


def test_odd_but_valid_values_are_stored_as_written(bench):
    """Windows line ends, a backslash and a tab, a neutralised formula, a zero-padded index."""
    text = HEADER + "t1,sys,back\\slash,1,YES\nt1,sys,tab\there,01,NO\nt1,sys,'=sum,3,UNKNOWN\n"
    path = bench / "l.csv"
    path.write_bytes(text.replace("\n", "\r\n").encode())
    summary = labels_import(path=str(path), benchmark_name="bulk", kind="crowd")
    assert (summary.rows, summary.created) == (3, 3)
    assert stored() == {
        ("back\\slash", 1, LabelValue.YES),
        ("tab\there", 1, LabelValue.NO),
        ("=sum", 3, LabelValue.UNKNOWN),
    }
    assert set(Label.objects.values_list("imported", flat=True)) == {True}


def test_a_file_that_turns_odd_after_its_first_block_is_staged_once(bench, monkeypatch):
    """A quoted value further down sends the whole file through the row reader, once."""
    monkeypatch.setattr(
        label_imports, "read_csv_columns", partial(files.read_csv_columns, chars=20)
    )
    path = bench / "l.csv"
    path.write_text(HEADER + 't1,sys,a,1,YES\nt1,sys,a,2,NO\n\nt1,sys,"b,c",3,YES\n')
    summary = labels_import(path=str(path), benchmark_name="bulk", kind="crowd")
    assert (summary.rows, summary.created) == (3, 3)
    assert stored() == {("a", 1, 1), ("a", 2, 0), ("b,c", 3, 1)}


@on_postgresql
def test_bulk_import_builds_the_label_indexes_again(bench, monkeypatch):
    monkeypatch.setattr(label_imports, "BULK_ROWS", 1)
    before = label_indexes()
    path = bench / "l.csv"
    # The last row repeats the first word for word: it is one label, stored once.
    path.write_text(HEADER + "t1,sys,a,1,YES\nt1,sys,a,2,NO\nt1,sys,b,1,NO\nt1,sys,a,1,YES\n")
    summary = labels_import(path=str(path), benchmark_name="bulk", kind="crowd")
    assert (summary.rows, summary.created) == (4, 3)
    assert stored() == {("a", 1, 1), ("a", 2, 0), ("b", 1, 0)}
    rebuilt = {"label_unique_per_annotator", "label_response_annotator", "label_unassigned"}
    assert label_indexes() == before >= rebuilt
    # Imported work counts without an assignment (annotate.selectors.results).
    assert set(Label.objects.values_list("imported", flat=True)) == {True}
    again = labels_import(path=str(path), benchmark_name="bulk")
    assert (again.created, again.unchanged) == (0, 3)


@on_postgresql
def test_bulk_import_refuses_an_in_file_conflict_and_keeps_the_indexes(bench, monkeypatch):
    monkeypatch.setattr(label_imports, "BULK_ROWS", 1)
    before = label_indexes()
    path = bench / "l.csv"
    path.write_text(HEADER + "t1,sys,a,1,YES\nt1,sys,a,2,NO\nt1,sys,a,1,NO\n")
    with pytest.raises(ImportFileError) as error:
        labels_import(path=str(path), benchmark_name="bulk", kind="crowd")
    assert (error.value.line, error.value.field) == (4, "label")
    assert "appears on line 2" in str(error.value)
    assert not Label.objects.exists() and not Annotator.objects.exists()
    assert label_indexes() == before
