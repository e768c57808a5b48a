"""Imports of the official InFoBench file, responses, labels and scores; exports back."""

import io
import json
import re
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db.models import Count

from annotate.errors import ImportFileError, ImportFileProblems
from annotate.models import (
    Annotator,
    ConstraintType,
    DirectScore,
    Instruction,
    Label,
    LabelValue,
    Question,
    Response,
    System,
)
from annotate.services.exports import labels_export, scores_export
from annotate.services.imports import instructions_import, responses_import
from annotate.services.label_imports import labels_import, scores_import

pytestmark = pytest.mark.django_db

INFOBENCH = Path(settings.BASE_DIR).parent / "shared" / "data" / "infobench" / "InfoBench.json"
ROW = {
    "id": "t1",
    "input": "",
    "category": "Poems",
    "instruction": "Write a haiku.",
    "decomposed_questions": ["Is it a haiku?", "Is it about spring?"],
    "subset": "Easy_set",
    "question_label": [["Format"], ["Content", "Style"]],
}


def write_jsonl(path: Path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" if isinstance(r, dict) else r for r in rows))
    return str(path)


def write_text(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


@pytest.fixture
def small(tmp_path):
    """A two-instruction benchmark with responses from one system."""
    rows = [
        ROW,
        {
            **ROW,
            "id": "t2",
            "subset": "Hard_set",
            "decomposed_questions": ["A?", "B?", "C?"],
            "question_label": [["Number"], ["Format"], ["Linguistic"]],
        },
    ]
    instructions_import(path=write_jsonl(tmp_path / "b.json", rows), benchmark_name="small")
    responses = [{"id": "t1", "output": "spring rain"}, {"id": "t2", "output": "x"}]
    responses_import(
        path=write_jsonl(tmp_path / "r.jsonl", responses), benchmark_name="small", system_name="sys"
    )
    return tmp_path


@pytest.mark.skipif(
    not INFOBENCH.exists(), reason="../shared/data/infobench is not beside the checkout"
)
def test_official_infobench_file_imports_with_the_published_counts():
    summary = instructions_import(path=str(INFOBENCH), benchmark_name="InFoBench")
    assert summary.created == 500
    by_subset = dict(Instruction.objects.values_list("subset").annotate(n=Count("id")))
    assert by_subset == {"easy": 252, "hard": 248}
    questions = dict(Question.objects.values_list("instruction__subset").annotate(n=Count("id")))
    assert questions == {"easy": 690, "hard": 1560}
    masks = list(Question.objects.values_list("constraint_mask", flat=True))
    per_type = {t.label: sum(1 for m in masks if m & t.value) for t in ConstraintType}
    assert per_type == {
        "Content": 1395,
        "Format": 794,
        "Number": 419,
        "Style": 190,
        "Linguistic": 168,
    }
    first = Instruction.objects.get(external_id="user_oriented_task_167")
    assert first.category == "Quora" and first.input_text.startswith("The typical avocado")
    assert [q.text for q in first.questions.all()][0] == "Is the generated text a post title?"

    again = instructions_import(path=str(INFOBENCH), benchmark_name="InFoBench")
    assert (again.created, again.unchanged) == (0, 500)
    assert "Nothing new" in again.message
    assert Question.objects.count() == 2250


def test_responses_ignore_extra_fields_and_reimport_is_a_no_op(small):
    assert Response.objects.count() == 2
    rows = [{**ROW, "output": "spring rain"}]
    summary = responses_import(
        path=write_jsonl(small / "r2.jsonl", rows), benchmark_name="small", system_name="sys"
    )
    assert (summary.created, summary.unchanged) == (0, 1)


def test_official_eval_output_imports_with_null_as_unknown_and_short_lists(small):
    rows = [{"id": "t1", "eval": [True, None]}, {"id": "t2", "eval": [False]}]
    summary = labels_import(
        path=write_jsonl(small / "e.jsonl", rows),
        benchmark_name="small",
        system_name="sys",
        annotator_name="gpt4-judge",
        kind="llm",
    )
    assert summary.created == 3
    values = sorted(
        Label.objects.values_list(
            "response__instruction__external_id", "question__position", "value"
        )
    )
    assert values == [
        ("t1", 1, LabelValue.YES),
        ("t1", 2, LabelValue.UNKNOWN),
        ("t2", 1, LabelValue.NO),
    ]
    assert Annotator.objects.get(name="gpt4-judge").kind == "llm"


def test_long_csv_holds_many_annotators_and_round_trips(small):
    csv_text = (
        "instruction_id,system,annotator,question_index,label\n"
        "t1,sys,ann-a,1,YES\n"
        "t1,sys,ann-a,2,NO\n"
        "t1,sys,ann-b,1,unknown\n"
        "t2,sys,ann-b,3,YES\n"
    )
    labels_import(path=write_text(small / "l.csv", csv_text), benchmark_name="small", kind="expert")
    assert Label.objects.count() == 4
    for file_format in ("csv", "jsonl"):
        exported = io.StringIO()
        assert labels_export(benchmark_name="small", output=exported, file_format=file_format) == 4
        before = set(
            Label.objects.values_list("question_id", "response_id", "annotator__name", "value")
        )
        Label.objects.all().delete()
        path = write_text(small / f"out.{file_format}", exported.getvalue())
        assert labels_import(path=path, benchmark_name="small").created == 4
        after = set(
            Label.objects.values_list("question_id", "response_id", "annotator__name", "value")
        )
        assert after == before
    # ann-b labelled questions 1 and 3 of t2? no: t1 q1 and t2 q3; the gap in t2 survives JSON Lines.
    assert not Label.objects.filter(
        annotator__name="ann-b", question__position=1, response__instruction__external_id="t2"
    ).exists()


def test_spreadsheet_formulas_are_neutralised_on_export_and_restored_on_import(small, tmp_path):
    responses_import(
        path=write_jsonl(tmp_path / "f.jsonl", [{"id": "t1", "output": "x"}]),
        benchmark_name="small",
        system_name="=HYPERLINK(1)",
    )
    labels_import(
        path=write_text(
            tmp_path / "f.csv",
            "instruction_id,system,annotator,question_index,label\nt1,'=HYPERLINK(1),@evil,1,YES\n",
        ),
        benchmark_name="small",
        kind="crowd",
    )
    out = io.StringIO()
    labels_export(benchmark_name="small", output=out, file_format="csv")
    assert "'=HYPERLINK(1),'@evil,1,YES" in out.getvalue()
    assert Annotator.objects.filter(name="@evil").exists()


def test_direct_scores_import_and_export(small):
    path = write_text(
        small / "s.csv", "instruction_id,system,annotator,score\nt1,sys,ann-a,5\nt2,sys,ann-a,1\n"
    )
    assert scores_import(path=path, benchmark_name="small", kind="expert").created == 2
    assert set(DirectScore.objects.values_list("imported", flat=True)) == {True}
    out = io.StringIO()
    scores_export(benchmark_name="small", output=out)
    DirectScore.objects.all().delete()
    assert (
        scores_import(
            path=write_text(small / "s2.csv", out.getvalue()), benchmark_name="small"
        ).created
        == 2
    )


BAD_INSTRUCTION_FILES = [
    ("missing.json", None, None, "does not exist"),
    ("bad json", 2, None, "not valid JSON"),
    ([{k: v for k, v in ROW.items() if k != "subset"}], 1, "subset", "missing"),
    ([{**ROW, "subset": "Medium"}], 1, "subset", "Easy_set"),
    ([{**ROW, "question_label": [["Format"]]}], 1, "question_label", "one list per question"),
    (
        [{**ROW, "question_label": [["Format"], ["Colour"]]}],
        1,
        "question_label[1]",  # the JSON list's entry 1 (from 0), the second question
        "question 2: unknown constraint type 'Colour'",
    ),
    (
        [{**ROW, "decomposed_questions": "Is it?"}],
        1,
        "decomposed_questions",
        "expected a list, found a string",
    ),
    ([ROW, {**ROW, "instruction": "Other"}], 2, "instruction", "appears again"),
    ([ROW, "[1, 2]\n"], 2, None, "JSON object"),
]


@pytest.mark.parametrize(("content", "line", "field", "problem"), BAD_INSTRUCTION_FILES)
def test_bad_instruction_files_name_line_and_field_and_write_nothing(
    tmp_path, content, line, field, problem
):
    if content == "missing.json":
        path = str(tmp_path / "missing.json")
    elif content == "bad json":
        path = write_jsonl(tmp_path / "b.json", [ROW, '{"id": "t2", \n'])
    else:
        path = write_jsonl(tmp_path / "b.json", content)
    with pytest.raises(ImportFileError) as error:
        instructions_import(path=path, benchmark_name="bad")
    assert (error.value.line, error.value.field) == (line, field)
    assert problem in str(error.value) and path in str(error.value)
    assert Instruction.objects.count() == 0


def test_non_utf8_file_is_refused(tmp_path):
    path = tmp_path / "latin1.json"
    path.write_bytes(
        json.dumps({**ROW, "instruction": "Café"}, ensure_ascii=False).encode("latin-1")
    )
    with pytest.raises(ImportFileError, match="not UTF-8"):
        instructions_import(path=str(path), benchmark_name="bad")


def test_changed_instruction_on_reimport_is_refused_not_overwritten(small):
    with pytest.raises(ImportFileError, match="different content") as error:
        instructions_import(
            path=write_jsonl(small / "c.json", [{**ROW, "category": "Songs"}]),
            benchmark_name="small",
        )
    assert error.value.field == "category"
    assert Instruction.objects.get(external_id="t1").category == "Poems"


BAD_LABEL_CSVS = [
    ("t9,sys,a,1,YES", "instruction_id", "no instruction 't9'"),
    ("t1,nosuch,a,1,YES", "system", "no system named"),
    ("t1,sys,a,3,YES", "question_index", "there is no question 3"),
    # In the file's numbering, from 1: not the range the database could store.
    (
        "t1,sys,a,0,YES",
        "question_index",
        "has 2 questions (question_index 1 to 2); there is no question 0",
    ),
    ("t1,sys,a,-1,YES", "question_index", "(question_index 1 to 2); there is no question -1"),
    ("t1,sys,a,x,YES", "question_index", "whole number"),
    ("t1,sys,a,1,MAYBE", "label", "YES, NO or UNKNOWN"),
    ("t1,sys,a,1,YES\nt1,sys,a,1,NO", "label", "appears on line 3"),
]


@pytest.mark.parametrize(("rows", "field", "problem"), BAD_LABEL_CSVS)
def test_bad_label_rows_name_line_and_field_and_write_nothing(small, rows, field, problem):
    path = write_text(
        small / "bad.csv",
        "instruction_id,system,annotator,question_index,label\nt2,sys,a,1,YES\n" + rows + "\n",
    )
    with pytest.raises(ImportFileError) as error:
        labels_import(path=path, benchmark_name="small", kind="expert")
    assert error.value.field == field and problem in str(error.value)
    assert error.value.line == len(rows.splitlines()) + 2
    assert Label.objects.count() == 0 and not Annotator.objects.exists()


def test_label_contradicting_a_stored_one_is_refused(small):
    header = "instruction_id,system,annotator,question_index,label\n"
    labels_import(
        path=write_text(small / "a.csv", header + "t1,sys,a,1,YES\n"),
        benchmark_name="small",
        kind="expert",
    )
    with pytest.raises(ImportFileError, match="stored label says YES, the file says NO"):
        labels_import(
            path=write_text(small / "b.csv", header + "t1,sys,a,2,YES\nt1,sys,a,1,NO\n"),
            benchmark_name="small",
        )
    assert Label.objects.count() == 1


def test_every_clash_inside_a_file_is_named_at_once(small):
    rows = "t1,sys,a,1,YES\nt1,sys,a,1,NO\nt2,sys,a,1,YES\nt2,sys,a,2,NO\nt2,sys,a,1,NO\n"
    path = write_text(
        small / "c.csv", "instruction_id,system,annotator,question_index,label\n" + rows
    )
    with pytest.raises(ImportFileProblems) as error:
        labels_import(path=path, benchmark_name="small", kind="expert")
    named = [(p.line, p.field) for p in error.value.problems]
    assert named == [(3, "label"), (6, "label")]
    assert "line 6, field 'label': the same label appears on line 4" in str(error.value)
    assert not Label.objects.exists() and not Annotator.objects.exists()


def test_every_row_contradicting_stored_work_is_named_at_once(small):
    header = "instruction_id,system,annotator,question_index,label\n"
    labels_import(
        path=write_text(small / "a.csv", header + "t1,sys,a,1,YES\nt2,sys,a,3,NO\n"),
        benchmark_name="small",
        kind="expert",
    )
    rows = "t1,sys,a,1,NO\nt1,sys,a,2,YES\nt2,sys,a,3,UNKNOWN\n"
    with pytest.raises(ImportFileProblems) as error:
        labels_import(path=write_text(small / "b.csv", header + rows), benchmark_name="small")
    named = [(p.line, p.field) for p in error.value.problems]
    assert named == [(2, "label"), (4, "label")]
    assert "stored label says NO, the file says UNKNOWN" in str(error.value)
    assert Label.objects.count() == 2

    scores = "instruction_id,system,annotator,score\n"
    scores_import(
        path=write_text(small / "s.csv", scores + "t1,sys,a,5\nt2,sys,a,1\n"),
        benchmark_name="small",
    )
    with pytest.raises(ImportFileProblems) as error:
        scores_import(
            path=write_text(small / "s2.csv", scores + "t1,sys,a,4\nt2,sys,a,2\n"),
            benchmark_name="small",
        )
    assert [(p.line, p.field) for p in error.value.problems] == [(2, "score"), (3, "score")]
    assert DirectScore.objects.count() == 2


def test_new_annotator_needs_a_kind_and_a_wrong_header_is_named(small):
    with pytest.raises(ImportFileError, match="give its kind"):
        labels_import(
            path=write_text(
                small / "a.csv",
                "instruction_id,system,annotator,question_index,label\nt1,sys,a,1,YES\n",
            ),
            benchmark_name="small",
        )
    with pytest.raises(ImportFileError, match="header must be") as error:
        labels_import(
            path=write_text(small / "h.csv", "instruction,system,annotator,question_index,label\n"),
            benchmark_name="small",
        )
    assert error.value.line == 1


def test_score_out_of_range_is_refused(small):
    path = write_text(small / "s.csv", "instruction_id,system,annotator,score\nt1,sys,a,6\n")
    with pytest.raises(ImportFileError, match="out of range"):
        scores_import(path=path, benchmark_name="small", kind="expert")


def test_eval_with_a_non_boolean_value_is_refused(small):
    path = write_jsonl(small / "e.jsonl", [{"id": "t1", "eval": [True, 1]}])
    with pytest.raises(ImportFileError) as error:
        labels_import(
            path=path, benchmark_name="small", system_name="sys", annotator_name="j", kind="llm"
        )
    assert error.value.field == "eval[1]"  # from 0, as JSON tools index it: the second question
    assert error.value.problem == "question 2: expected true, false or null, found 1"


def test_eval_lines_without_system_or_annotator_ask_for_the_options(small):
    path = write_jsonl(small / "e.jsonl", [{"id": "t1", "eval": [True]}, {"id": "t2", "eval": []}])
    with pytest.raises(CommandError) as error:
        call_command("import_labels", path, "--benchmark", "small", "--annotator", "j")
    assert str(error.value) == (
        f"{path}: 2 wrong lines:\n"
        "- line 1, field 'system': this field is missing: give --system for the whole file\n"
        "- line 2, field 'system': this field is missing: give --system for the whole file\n"
        "Nothing was written."
    )
    with pytest.raises(CommandError, match="'annotator': this field is missing: give --annotator"):
        call_command("import_labels", path, "--benchmark", "small", "--system", "sys")
    # A line naming its own system (as export_labels writes them) still needs it to be a text.
    blank = write_jsonl(small / "b.jsonl", [{"id": "t1", "eval": [True], "system": ""}])
    with pytest.raises(CommandError, match="'system': expected a non-empty text"):
        call_command("import_labels", blank, "--benchmark", "small", "--annotator", "j")
    assert not Label.objects.exists()


def test_an_unknown_system_given_for_the_whole_file_is_named_once(small):
    rows = [{"id": "t1", "eval": [True]}, {"id": "t2", "eval": [False]}]
    path = write_jsonl(small / "e.jsonl", rows)
    with pytest.raises(CommandError) as error:
        call_command(
            "import_labels", path, "--benchmark", "small", "--system", "nosys", "--annotator", "j"
        )
    assert str(error.value) == (
        f"{path}, field '--system': no system named 'nosys': import its responses first\n"
        "Nothing was written."
    )
    assert not Label.objects.exists()


def test_responses_not_generated_yet_are_skipped_as_the_official_script_skips_them(small, capsys):
    rows = [{"id": "t1", "output": None}, {"id": "t2", "output": "ok"}]
    path = write_jsonl(small / "partial.jsonl", rows)
    call_command("import_responses", path, "--benchmark", "small", "--system", "late")
    said = capsys.readouterr().out
    assert "Imported 1 response from" in said
    assert '1 line skipped: "output" is null (not generated yet' in said
    texts = Response.objects.filter(system__name="late").values_list(
        "instruction__external_id", "text"
    )
    assert list(texts) == [("t2", "ok")]
    # A wrong type is still refused, named as JSON names it.
    bad = write_jsonl(small / "bad.jsonl", [{"id": "t1", "output": 3}])
    with pytest.raises(ImportFileError, match="field 'output': expected a string, found a number"):
        responses_import(path=bad, benchmark_name="small", system_name="late")


def test_an_unknown_id_is_refused_even_when_its_output_is_null_and_no_system_is_made(small):
    rows = [{"id": "t1", "output": None}, {"id": "no_such_id", "output": None}]
    path = write_jsonl(small / "unknown.jsonl", rows)
    with pytest.raises(CommandError) as refused:
        call_command("import_responses", path, "--benchmark", "small", "--system", "zz2")
    assert refused.value.returncode == 1
    assert str(refused.value) == (
        f"{path}, line 2, field 'id': no instruction 'no_such_id' in benchmark 'small'\n"
        "Nothing was written."
    )
    assert not System.objects.filter(name="zz2").exists()


def test_an_import_that_writes_nothing_creates_no_system(small, capsys):
    path = write_jsonl(small / "later.jsonl", [{"id": "t1", "output": None}])
    call_command("import_responses", path, "--benchmark", "small", "--system", "zz2")
    said = capsys.readouterr().out
    assert f"Nothing imported from {path}." in said
    assert '1 line skipped: "output" is null' in said
    assert not System.objects.filter(name="zz2").exists()
    # Its first written response makes it; a stored system takes more as before.
    responses_import(path=write_jsonl(small / "t2.jsonl", [{"id": "t2", "output": "b"}]),
                     benchmark_name="small", system_name="zz2")  # fmt: skip
    responses_import(path=write_jsonl(small / "t1.jsonl", [{"id": "t1", "output": "a"}]),
                     benchmark_name="small", system_name="zz2")  # fmt: skip
    texts = Response.objects.filter(system__name="zz2").order_by("text").values_list("text")
    assert [text for (text,) in texts] == ["a", "b"]
    assert System.objects.filter(name="zz2").count() == 1


def test_commands_print_the_summary_and_exit_non_zero_on_errors(small, capsys):
    call_command("import_instructions", str(small / "b.json"), "--benchmark", "small")
    assert "Nothing new" in capsys.readouterr().out
    with pytest.raises(CommandError, match="Nothing was written"):
        call_command("import_labels", str(small / "nope.csv"), "--benchmark", "small")
    out = small / "export.csv"
    call_command("export_labels", "--benchmark", "small", "--output", str(out))
    assert out.read_text().startswith("instruction_id,system,annotator,question_index,label")
    # A folder that does not exist: the path and the reason, not a Python traceback.
    missing = str(small / "no-such-folder" / "export.csv")
    with pytest.raises(CommandError, match=r"no-such-folder/export.csv: cannot write this file"):
        call_command("export_labels", "--benchmark", "small", "--output", missing)


def test_load_demo_is_idempotent_and_creates_a_login_per_role(capsys, settings):
    settings.DEBUG = True
    call_command("load_demo")
    first = capsys.readouterr().out
    counts = (
        Instruction.objects.count(),
        Response.objects.count(),
        Label.objects.count(),
        DirectScore.objects.count(),
    )
    # Three imported systems and the demo's system generating through the fake endpoint.
    assert counts[0] >= 8 and counts[1] == 4 * counts[0] and counts[2] > 200 and counts[3] > 0
    for login in ("admin", "researcher", "ana", "ben"):
        assert login in first
    # On a fresh database nothing was "already stored": the expert study recorded a moment
    # before the import gave the experts' labels.
    assert "already stored" not in first
    assert re.search(
        r"Imported \d+ labels from \S+labels\.csv \(\d+ more were given just now by the demo "
        r"experts, in the recorded study 'Demo record: expert study \(finished\)'\)\.\n",
        first,
    )
    # Experts, the recorded crowd study and the judges; nobody left undecided.
    assert set(Annotator.objects.values_list("kind", flat=True)) == {"expert", "crowd", "llm"}
    call_command("load_demo")
    assert "Nothing new" in capsys.readouterr().out
    assert counts == (
        Instruction.objects.count(),
        Response.objects.count(),
        Label.objects.count(),
        DirectScore.objects.count(),
    )


def test_load_demo_refuses_known_passwords_without_debug(settings):
    settings.DEBUG = False
    with pytest.raises(CommandError, match="DEBUG is off"):
        call_command("load_demo")


@pytest.mark.skipif(
    not settings.DATABASES["default"]["ENGINE"].endswith("postgresql"), reason="PostgreSQL only"
)
def test_bulk_label_import_keeps_every_foreign_key_validated(small, monkeypatch):
    from django.db import connection

    from annotate.services import label_imports

    monkeypatch.setattr(label_imports, "BULK_ROWS", 1)
    path = write_text(
        small / "l.csv",
        "instruction_id,system,annotator,question_index,label\nt1,sys,a,1,YES\nt1,sys,a,2,NO\n",
    )
    assert labels_import(path=path, benchmark_name="small", kind="expert").created == 2
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT a.attname, c.convalidated FROM pg_constraint c "
            "JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = ANY(c.conkey) "
            "WHERE c.conrelid = 'annotate_label'::regclass AND c.contype = 'f'"
        )
        foreign_keys = dict(cursor.fetchall())
    assert foreign_keys == {
        "question_id": True,
        "response_id": True,
        "annotator_id": True,
        "assignment_id": True,
    }
    bad = write_text(
        small / "bad.csv", "instruction_id,system,annotator,question_index,label\nt9,sys,a,1,YES\n"
    )
    with pytest.raises(ImportFileError):
        labels_import(path=bad, benchmark_name="small")
    assert Label.objects.count() == 2


def test_every_command_parses_its_documented_arguments(tmp_path, capsys):
    """The README's command lines, as a person types them, end to end through the parsers."""
    bench = write_jsonl(tmp_path / "b.json", [ROW])
    call_command("import_instructions", bench, "--benchmark", "cli")
    responses = write_jsonl(tmp_path / "r.jsonl", [{**ROW, "output": "Spring rain falls"}])
    call_command("import_responses", responses, "--benchmark", "cli", "--system", "s1")
    evals = write_jsonl(tmp_path / "e.jsonl", [{"id": "t1", "eval": [True, None]}])
    call_command(
        "import_labels", evals, "--benchmark", "cli", "--system", "s1",
        "--annotator", "judge", "--kind", "llm",
    )  # fmt: skip
    labels = write_text(
        tmp_path / "l.csv",
        "instruction_id,system,annotator,question_index,label\nt1,s1,w1,2,NO\n",
    )
    call_command("import_labels", labels, "--benchmark", "cli", "--kind", "crowd")
    scores = write_text(tmp_path / "s.csv", "instruction_id,system,annotator,score\nt1,s1,w1,3\n")
    call_command("import_scores", scores, "--benchmark", "cli", "--kind", "crowd")
    assert dict(Annotator.objects.values_list("name", "kind")) == {"judge": "llm", "w1": "crowd"}
    assert sorted(Label.objects.values_list("annotator__name", "question__position", "value")) == [
        ("judge", 1, LabelValue.YES),
        ("judge", 2, LabelValue.UNKNOWN),
        ("w1", 2, LabelValue.NO),
    ]
    assert DirectScore.objects.get().score == 3
    capsys.readouterr()

    out = tmp_path / "out.jsonl"
    call_command("export_labels", "--benchmark", "cli", "--format", "jsonl", "--output", str(out))
    exported = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(exported) == 2  # one line per (instruction, system, annotator)
    call_command("import_labels", str(out), "--benchmark", "cli")
    assert "Nothing new" in capsys.readouterr().out
    call_command("export_labels", "--benchmark", "cli", "--scores")
    assert "t1,s1,w1,3" in capsys.readouterr().out
    with pytest.raises(CommandError):
        call_command("import_labels", labels, "--benchmark", "cli", "--kind", "robot")


@pytest.mark.parametrize("command", ["import_labels", "import_scores"])
def test_kind_offers_only_the_kinds_an_import_takes(command):
    """--help showed "--kind {,expert,crowd,llm,undecided}": an empty choice, and one (undecided)
    the import then refused. Left out, the file's own kinds decide, as before."""
    from django.core.management import load_command_class

    parser = load_command_class("annotate", command).create_parser("manage.py", command)
    assert "--kind {expert,crowd,llm}" in " ".join(parser.format_help().split())
    assert parser.parse_args(["f.csv", "--benchmark", "b"]).kind is None
    with pytest.raises(CommandError, match="invalid choice: 'undecided'"):
        call_command(command, "f.csv", "--benchmark", "b", "--kind", "undecided")


def test_a_kind_column_refusal_lists_the_kinds_as_words(tmp_path):
    call_command("import_instructions", write_jsonl(tmp_path / "b.json", [ROW]), "--benchmark", "k")
    responses = write_jsonl(tmp_path / "r.jsonl", [{**ROW, "output": "Spring rain falls"}])
    call_command("import_responses", responses, "--benchmark", "k", "--system", "s1")
    head = "instruction_id,system,annotator,question_index,label,annotator_kind\n"
    robot = write_text(tmp_path / "robot.csv", head + "t1,s1,w1,1,YES,robot\n")
    with pytest.raises(ImportFileError) as refused:
        labels_import(path=robot, benchmark_name="k")
    assert refused.value.problem == "expected one of expert, crowd, llm, found 'robot'"
    two = write_text(tmp_path / "two.csv", head + "t1,s1,w1,1,YES,crowd\nt1,s1,w1,2,NO,expert\n")
    with pytest.raises(ImportFileError) as refused:
        labels_import(path=two, benchmark_name="k")
    assert (refused.value.line, refused.value.field, refused.value.problem) == (
        3,
        "annotator_kind",
        "'expert' but line 2 gave 'crowd' for annotator 'w1': an annotator has one kind",
    )
    assert not Label.objects.exists()
