import csv
import json

import pytest
from django.core.management import CommandError, call_command

from annotate.engine.models import Endpoint
from annotate.errors import ImportFileError
from annotate.revision.models import Document, Passage, RevisionSession, Study, Turn
from annotate.revision.services.exports import sessions_export_jsonl, study_get
from annotate.revision.services.imports import passages_split, sessions_import, study_upload

pytestmark = pytest.mark.django_db

SESSION_A = {
    "original_question": "How do models handle long documents?",
    "model_name": "gpt-4",
    "initial_answer": "A0",
    "annotator_id": "ann-7",
    "interaction": [
        {
            "instruction": "Add an example.",
            "answer_1": "A1",
            "answer_2": "",
            "rating": "GOOD",
            "comment": "fine",
            "turn_note": {"kept": True},
        },
        {
            "instruction": "Shorten it.",
            "answer_1": "A2",
            "answer_2": "",
            "rating": "Bad",
            "comment": "ignored",
        },
        {
            "instruction": "Shorten it, please.",
            "answer_1": "A3",
            "answer_2": "A3 edited",
            "rating": "neutral",
            "comment": "partly",
            "instruction_type": "Stylistic",
        },
        {
            "instruction": "Cite paper 2.",
            "answer_1": "A4",
            "answer_2": "",
            "rating": "good",
            "comment": "ok",
        },
    ],
}
SESSION_B = {
    "original_question": "How do models handle long documents?",
    "model_name": "llama2",
    "initial_answer": "B0",
    "interaction": [
        {"instruction": "More.", "answer_1": "B1", "answer_2": "", "rating": "bad", "comment": "no"}
    ],
}


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return str(path)


def test_import_stores_sessions_turns_and_the_answer_history(tmp_path):
    path = write_jsonl(tmp_path / "kiwi.jsonl", [SESSION_A, SESSION_B])
    summary = sessions_import(path=path, study_name="kiwi")
    assert summary.created == 2
    study = Study.objects.get(name="kiwi")
    assert study.questions.count() == 1
    assert sorted(study.systems.values_list("name", flat=True)) == ["gpt-4", "llama2"]
    turns = list(Turn.objects.filter(session__system__name="gpt-4").order_by("position"))
    assert [t.rating for t in turns] == ["good", "bad", "neutral", "good"]
    # Paper §2.2: a bad un-edited answer is dropped from the history, an edit replaces the answer.
    assert [t.previous_answer for t in turns] == ["A0", "A1", "A1", "A3 edited"]
    assert turns[2].instruction_type == "stylistic"
    assert turns[0].extra == {"turn_note": {"kept": True}}


def test_import_export_import_is_lossless(tmp_path):
    path = write_jsonl(tmp_path / "kiwi.jsonl", [SESSION_A, SESSION_B])
    sessions_import(path=path, study_name="first")
    exported = tmp_path / "out.jsonl"
    call_command("export_sessions", "--study", "first", "--output", str(exported))
    records = [json.loads(line) for line in exported.read_text().splitlines()]
    assert records[0]["annotator_id"] == "ann-7"
    assert records[0]["interaction"][0]["turn_note"] == {"kept": True}
    assert records[0]["interaction"][0]["rating"] == "good"
    call_command("import_sessions", str(exported), "--study", "second")
    again = tmp_path / "again.jsonl"
    with again.open("w") as output:
        sessions_export_jsonl(study=study_get(name="second"), output=output)
    assert again.read_text() == exported.read_text()


def test_a_label_given_empty_comes_back_on_export(tmp_path):
    """`"instruction_type": null` (or "") was read as "no label" and left out of the export."""
    session = json.loads(json.dumps(SESSION_B))
    session["interaction"][0]["instruction_type"] = None
    session["interaction"][0]["error_category"] = ""
    path = write_jsonl(tmp_path / "kiwi.jsonl", [session])
    sessions_import(path=path, study_name="empty labels")
    exported = tmp_path / "out.jsonl"
    call_command("export_sessions", "--study", "empty labels", "--output", str(exported))
    turn = json.loads(exported.read_text())["interaction"][0]
    assert turn["instruction_type"] is None and turn["error_category"] == ""
    assert Turn.objects.get(position=1).instruction_type == ""


def test_an_answer_given_back_as_its_own_edit_is_no_edit(tmp_path):
    """The paper keeps a bad answer only when the edit differs from it (Figure 3, line 17): a
    bad A2 with answer_2 "A2" was kept as the next turn's previous answer. The file's
    answer_2 still comes back on export."""
    session = json.loads(json.dumps(SESSION_A))
    session["interaction"][1]["answer_2"] = "A2"  # rated Bad
    path = write_jsonl(tmp_path / "kiwi.jsonl", [session])
    sessions_import(path=path, study_name="kiwi")
    turns = Turn.objects.order_by("position")
    assert [t.previous_answer for t in turns] == ["A0", "A1", "A1", "A3 edited"]
    exported = tmp_path / "out.jsonl"
    call_command("export_sessions", "--study", "kiwi", "--output", str(exported))
    assert json.loads(exported.read_text())["interaction"][1]["answer_2"] == "A2"


def test_importing_the_same_file_again_adds_nothing(tmp_path):
    path = write_jsonl(tmp_path / "kiwi.jsonl", [SESSION_A])
    sessions_import(path=path, study_name="kiwi")
    summary = sessions_import(path=path, study_name="kiwi")
    assert summary.created == 0 and summary.unchanged == 1
    assert RevisionSession.objects.count() == 1


def test_a_session_repeated_in_the_file_is_imported_once_and_said_so(tmp_path):
    """A line repeated in a new file was counted as "already stored, left as they were",
    though the study had held none of it: the summary now names the repeat and its line."""
    path = write_jsonl(tmp_path / "kiwi.jsonl", [SESSION_A, SESSION_B, SESSION_A])
    summary = sessions_import(path=path, study_name="kiwi")
    assert (summary.created, summary.unchanged, summary.skipped) == (2, 0, 1)
    assert "already stored" not in summary.message
    assert summary.message.endswith(
        "1 line skipped: a session repeated in the file is imported once (line 3 repeats line 1)."
    )
    assert RevisionSession.objects.count() == 2
    again = sessions_import(path=path, study_name="kiwi")
    assert (again.created, again.unchanged, again.skipped) == (0, 3, 0)


def test_the_export_imported_into_its_own_study_adds_nothing(tmp_path):
    """SESSION_A's "GOOD" comes back as "good": the export was read as a new session, so
    export then import into the same study counted every such session twice."""
    path = write_jsonl(tmp_path / "kiwi.jsonl", [SESSION_A, SESSION_B])
    sessions_import(path=path, study_name="kiwi")
    exported = tmp_path / "out.jsonl"
    call_command("export_sessions", "--study", "kiwi", "--output", str(exported))
    summary = sessions_import(path=str(exported), study_name="kiwi")
    assert summary.created == 0 and summary.unchanged == 2
    assert sessions_import(path=path, study_name="kiwi").created == 0
    assert RevisionSession.objects.count() == 2


@pytest.mark.parametrize(
    ("change", "field", "problem"),
    [
        (lambda s: s.pop("model_name"), "model_name", "is missing"),
        (lambda s: s.update(interaction={}), "interaction", "must be a list"),
        (
            lambda s: s["interaction"][1].update(rating="great"),
            "interaction[1].rating",
            "not one of",
        ),
        (lambda s: s["interaction"][0].pop("answer_2"), "interaction[0].answer_2", "is missing"),
        (lambda s: s["interaction"][0].update(comment=3), "interaction[0].comment", "string"),
        (lambda s: s["interaction"][2].update(instruction_type="x"), "instruction_type", "not one"),
    ],
)
def test_bad_lines_are_refused_with_file_line_and_field_and_nothing_is_written(
    tmp_path, change, field, problem
):
    bad = json.loads(json.dumps(SESSION_A))
    change(bad)
    path = write_jsonl(tmp_path / "bad.jsonl", [SESSION_B, bad])
    with pytest.raises(ImportFileError) as error:
        sessions_import(path=path, study_name="kiwi")
    assert error.value.line == 2 and field in error.value.field and problem in str(error.value)
    assert not Study.objects.exists() and not Turn.objects.exists()


def test_an_answer_2_far_longer_than_its_answer_1_is_refused_with_file_line_and_field(tmp_path):
    from annotate.revision.models import EDITED_ANSWER_MARGIN_CHARS, EDITED_ANSWER_MAX_CHARS

    long_1 = "a" * EDITED_ANSWER_MAX_CHARS
    taken = json.loads(json.dumps(SESSION_A))
    taken["interaction"][0].update(answer_1=long_1, answer_2=long_1 + "b" * 4000)
    bad = json.loads(json.dumps(SESSION_B))
    bad["interaction"][0]["answer_2"] = "c" * (EDITED_ANSWER_MAX_CHARS + 1)
    path = write_jsonl(tmp_path / "long.jsonl", [taken, bad])
    with pytest.raises(ImportFileError) as error:
        sessions_import(path=path, study_name="kiwi")
    assert error.value.line == 2 and error.value.field == "interaction[0].answer_2"
    assert f"at most {EDITED_ANSWER_MAX_CHARS:,} are taken" in str(error.value)
    assert "long.jsonl" in str(error.value)
    assert not Study.objects.exists() and not Turn.objects.exists()
    bad["interaction"][0]["answer_1"] = "c" * EDITED_ANSWER_MARGIN_CHARS * 4  # grows the limit
    path = write_jsonl(tmp_path / "long.jsonl", [taken, bad])
    assert sessions_import(path=path, study_name="kiwi").created == 2


def test_an_empty_file_is_refused_and_makes_no_study(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_text("\n")
    with pytest.raises(CommandError, match=r"empty.jsonl: the file holds no sessions"):
        call_command("import_sessions", str(path), "--study", "kiwi")
    assert not Study.objects.exists()


def test_command_reports_the_error_and_exits_non_zero(tmp_path):
    path = tmp_path / "broken.jsonl"
    path.write_text('{"original_question": "q"\n')
    with pytest.raises(CommandError, match=r"broken.jsonl, line 1: not valid JSON"):
        call_command("import_sessions", str(path), "--study", "kiwi")


def test_export_to_a_folder_that_does_not_exist_names_the_path(tmp_path):
    """It ended in a FileNotFoundError traceback."""
    sessions_import(path=write_jsonl(tmp_path / "kiwi.jsonl", [SESSION_B]), study_name="kiwi")
    missing = str(tmp_path / "no-such-folder" / "out.jsonl")
    with pytest.raises(CommandError, match=r"no-such-folder/out.jsonl: cannot write this file"):
        call_command("export_sessions", "--study", "kiwi", "--output", missing)


def test_csv_export_has_one_row_per_turn(tmp_path):
    sessions_import(path=write_jsonl(tmp_path / "k.jsonl", [SESSION_A, SESSION_B]), study_name="k")
    out = tmp_path / "turns.csv"
    call_command("export_sessions", "--study", "k", "--output", str(out))
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 5
    assert rows[2]["answer_2"] == "A3 edited" and rows[2]["previous_answer"] == "A1"
    assert {row["model_name"] for row in rows} == {"gpt-4", "llama2"}


STUDY_LINE = {
    "question": "What limits long-context models?",
    "documents": [
        {"title": "Paper A", "text": "First paragraph.\n\nSecond paragraph.", "year": 2023},
        {"title": "Paper B", "text": "Only paragraph."},
    ],
    "source": "related work of X",
}


def test_study_upload_stores_documents_split_into_passages_and_systems(tmp_path):
    path = write_jsonl(tmp_path / "study.jsonl", [STUDY_LINE])
    Endpoint.objects.create(name="openai-gpt4", model="gpt-4")
    summary = study_upload(path=path, study_name="s", systems=["gpt-4=openai-gpt4", "fake"])
    assert summary.created == 1
    study = Study.objects.get(name="s")
    assert dict(study.systems.values_list("name", "endpoint_name")) == {
        "gpt-4": "openai-gpt4",
        "fake": "",
    }
    question = study.questions.get()
    assert question.extra == {"source": "related work of X"}
    assert list(Document.objects.values_list("title", flat=True)) == ["Paper A", "Paper B"]
    assert Document.objects.get(title="Paper A").extra == {"year": 2023}
    assert list(Passage.objects.order_by("id").values_list("text", flat=True)) == [
        "First paragraph.",
        "Second paragraph.",
        "Only paragraph.",
    ]
    assert study_upload(path=path, study_name="s", systems=[]).created == 0


def test_import_study_again_with_another_endpoint_says_the_system_changed(tmp_path, capsys):
    """It changed the system's endpoint and said only "Nothing new"."""
    path = write_jsonl(tmp_path / "study.jsonl", [STUDY_LINE])
    Endpoint.objects.create(name="gpt4o", model="gpt-4o")
    Endpoint.objects.create(name="gpt4-official", model="gpt-4")
    call_command("import_study", path, "--study", "s", "--system", "gpt-4=gpt4o")
    assert capsys.readouterr().out == (
        f"Imported 1 question from {path}. System gpt-4 added (endpoint: gpt4o).\n"
    )
    call_command("import_study", path, "--study", "s", "--system", "gpt-4=gpt4-official")
    assert capsys.readouterr().out == (
        f"No new questions: the 1 question in {path} is already stored. "
        "System gpt-4: endpoint changed from gpt4o to gpt4-official.\n"
    )
    call_command("import_study", path, "--study", "s", "--system", "gpt-4")
    assert "endpoint changed from gpt4-official to the offline fake model." in (
        capsys.readouterr().out
    )
    call_command("import_study", path, "--study", "s", "--system", "gpt-4")  # as it is
    assert capsys.readouterr().out == (
        f"Nothing new: the 1 question in {path} is already stored.\n"
    )
    assert list(Study.objects.get().systems.values_list("name", "endpoint_name")) == [("gpt-4", "")]


def test_a_system_known_from_imported_sessions_is_said_to_be_made_live(tmp_path):
    sessions_import(path=write_jsonl(tmp_path / "kiwi.jsonl", [SESSION_B]), study_name="s")
    assert not Study.objects.get().systems.get(name="llama2").live
    path = write_jsonl(tmp_path / "study.jsonl", [STUDY_LINE])
    summary = study_upload(path=path, study_name="s", systems=["llama2"])
    assert "System llama2: now live (annotators get sessions with it)." in summary.message
    assert Study.objects.get().systems.get(name="llama2").live


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ({"question": "q"}, "documents"),
        ({"question": "q", "documents": []}, "documents"),
        ({"question": "q", "documents": [{"title": "t"}]}, "documents[0].text"),
        ({"question": "", "documents": [{"title": "t", "text": "x"}]}, "question"),
    ],
)
def test_study_upload_refuses_bad_lines(tmp_path, line, field):
    path = write_jsonl(tmp_path / "study.jsonl", [STUDY_LINE, line])
    with pytest.raises(ImportFileError) as error:
        study_upload(path=path, study_name="s", systems=[])
    assert error.value.line == 2 and error.value.field == field
    assert not Study.objects.exists()


def test_an_empty_study_file_is_refused_and_makes_no_study(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_text("\n")
    with pytest.raises(CommandError, match=r"empty.jsonl: the file holds no questions"):
        call_command("import_study", str(path), "--study", "s", "--system", "a")
    assert not Study.objects.exists()


def test_a_system_on_an_endpoint_that_does_not_exist_is_refused(tmp_path):
    """It was stored, and every annotator session on it failed at its first call."""
    path = write_jsonl(tmp_path / "study.jsonl", [STUDY_LINE])
    with pytest.raises(ImportFileError, match="no engine endpoint named .gpt4o."):
        study_upload(path=path, study_name="s", systems=["alpha", "gpt-4=gpt4o"])
    assert not Study.objects.exists()


def test_the_study_name_is_trimmed_and_a_blank_one_refused(tmp_path):
    """--study " kiwi" made a second study beside "kiwi"; --study " " one named " "."""
    path = write_jsonl(tmp_path / "kiwi.jsonl", [SESSION_B])
    sessions_import(path=path, study_name="kiwi")
    assert sessions_import(path=path, study_name=" kiwi ").unchanged == 1
    with pytest.raises(CommandError, match="--study: the study needs a name"):
        call_command(
            "import_study", write_jsonl(tmp_path / "q.jsonl", [STUDY_LINE]), "--study", " "
        )
    assert list(Study.objects.values_list("name", flat=True)) == ["kiwi"]


@pytest.mark.parametrize("command", ["import_sessions", "import_study"])
def test_a_blank_study_is_refused_before_the_files_lines(tmp_path, command, capsys):
    """`import_sessions FILE --study ""` named the file's wrong lines first, and the blank study
    only once they were fixed."""
    from django.core.management import load_command_class

    path = str(tmp_path / "broken.jsonl")
    write_jsonl(tmp_path / "broken.jsonl", ['{"original_question": "q"\n'])
    with pytest.raises(CommandError) as refused:
        call_command(command, path, "--study", "")
    assert str(refused.value) == "Error: argument --study: the study needs a name"
    handler = load_command_class("annotate.revision", command)
    handler._called_from_command_line = True  # argparse exits as for any argument error
    with pytest.raises(SystemExit) as exited:
        handler.create_parser("manage.py", command).parse_args([path, "--study", " "])
    assert exited.value.code == 2
    assert "error: argument --study: the study needs a name" in capsys.readouterr().err
    assert not Study.objects.exists()


def test_import_study_refuses_a_system_on_an_endpoint_that_does_not_exist(tmp_path):
    path = write_jsonl(tmp_path / "study.jsonl", [STUDY_LINE])
    with pytest.raises(CommandError) as error:
        call_command("import_study", path, "--study", "s", "--system", "gpt-4=openai-gpt4")
    assert str(error.value) == (
        "--system: 'gpt-4=openai-gpt4': no engine endpoint named 'openai-gpt4'; create it first "
        "(endpoint_create, or the Endpoints page), or give NAME alone for the offline fake "
        "model\nNothing was written."
    )
    assert not Study.objects.exists()


def test_long_paragraphs_are_cut_into_passages_of_200_words():
    text = " ".join(f"w{i}" for i in range(450)) + "\n\nshort"
    passages = passages_split(text)
    assert [len(p.split()) for p in passages] == [200, 200, 50, 1]


def test_csv_export_neutralises_formulas_and_json_keeps_them(tmp_path):
    session = json.loads(json.dumps(SESSION_B))
    session["interaction"][0]["instruction"] = '=HYPERLINK("http://evil.example","x")'
    sessions_import(path=write_jsonl(tmp_path / "f.jsonl", [session]), study_name="f")
    out = tmp_path / "turns.csv"
    call_command("export_sessions", "--study", "f", "--output", str(out))
    row = next(csv.DictReader(out.open()))
    assert row["instruction"] == "'" + session["interaction"][0]["instruction"]
    back = tmp_path / "back.jsonl"
    call_command("export_sessions", "--study", "f", "--output", str(back))
    assert json.loads(back.read_text())["interaction"][0]["instruction"].startswith("=HYPER")


def _migration_0006():
    import importlib

    return importlib.import_module("annotate.revision.migrations.0006_imports_before_live")


def test_sessions_imported_before_the_export_key_are_not_imported_again_from_the_export(tmp_path):
    """Imports before the export-form key stored the hash of the line as given ("GOOD"): the
    export ("good") of such a study was read as new sessions, counted twice in Table 2."""
    from django.apps import apps

    from annotate.revision.services.imports import _content_key

    path = write_jsonl(tmp_path / "kiwi.jsonl", [SESSION_A, SESSION_B])
    sessions_import(path=path, study_name="kiwi")
    for session, line in zip(
        RevisionSession.objects.order_by("source_position"), [SESSION_A, SESSION_B], strict=True
    ):
        RevisionSession.objects.filter(pk=session.pk).update(source_key=_content_key(line))
    _migration_0006().forwards(apps, None)
    exported = tmp_path / "out.jsonl"
    call_command("export_sessions", "--study", "kiwi", "--output", str(exported))
    assert sessions_import(path=str(exported), study_name="kiwi").created == 0
    assert sessions_import(path=path, study_name="kiwi").created == 0
    assert RevisionSession.objects.count() == 2


def test_a_system_imported_before_the_live_flag_is_not_live(tmp_path):
    """0005 gave every system live=True: a published model_name imported before it stayed one
    annotators got sessions with (the offline fake model under that name)."""
    from django.apps import apps

    from annotate.revision.models import StudySystem

    sessions_import(path=write_jsonl(tmp_path / "kiwi.jsonl", [SESSION_B]), study_name="s")
    StudySystem.objects.update(live=True)  # as 0005 left it
    Endpoint.objects.create(name="openai-gpt4", model="gpt-4")
    study_upload(
        path=write_jsonl(tmp_path / "study.jsonl", [STUDY_LINE]), study_name="s",
        systems=["gpt-4=openai-gpt4", "fake"],
    )  # fmt: skip
    _migration_0006().forwards(apps, None)
    live = dict(StudySystem.objects.values_list("name", "live"))
    assert live == {"llama2": False, "gpt-4": True, "fake": True}


def test_a_file_of_the_other_kind_says_which_kind_it_is(tmp_path):
    questions = write_jsonl(tmp_path / "questions.jsonl", [STUDY_LINE])
    with pytest.raises(ImportFileError) as error:
        sessions_import(path=questions, study_name="kiwi")
    assert error.value.field == "original_question"
    assert 'a question with documents, not a KIWI session (upload it as "Questions with' in str(
        error.value
    )
    sessions = write_jsonl(tmp_path / "sessions.jsonl", [SESSION_A])
    with pytest.raises(ImportFileError) as error:
        study_upload(path=sessions, study_name="s", systems=[])
    assert error.value.field == "question"
    assert 'a KIWI session, not a question with documents (upload it as "Sessions' in str(
        error.value
    )
    assert not Study.objects.exists()


def test_questions_uploaded_after_their_sessions_get_their_documents_and_it_is_said(
    tmp_path, capsys
):
    """Sessions imported first made the question with no documents; the questions' upload then
    counted it as already stored and dropped its documents: no annotator could ever get it."""
    session = {**SESSION_B, "original_question": STUDY_LINE["question"]}
    sessions_import(path=write_jsonl(tmp_path / "kiwi.jsonl", [session]), study_name="s")
    question = Study.objects.get().questions.get()
    assert not question.documents.exists()
    path = write_jsonl(tmp_path / "study.jsonl", [STUDY_LINE])
    call_command("import_study", path, "--study", "s", "--system", "fresh")
    out = capsys.readouterr().out
    assert "Documents added to 1 question the study knew only from imported sessions" in out
    assert list(question.documents.values_list("title", flat=True)) == ["Paper A", "Paper B"]
    assert Document.objects.get(title="Paper A").extra == {"year": 2023}
    assert Passage.objects.filter(question=question).count() == 3
    assert Study.objects.get().questions.count() == 1
    question.refresh_from_db()
    assert question.extra == {"source": "related work of X"}
    again = study_upload(path=path, study_name="s", systems=[])  # now as stored: nothing to add
    assert (again.created, again.unchanged) == (0, 1) and "Documents added" not in again.message
    assert Passage.objects.filter(question=question).count() == 3


def test_a_question_uploaded_again_with_other_documents_is_refused_naming_the_line(tmp_path):
    first = write_jsonl(tmp_path / "study.jsonl", [STUDY_LINE])
    study_upload(path=first, study_name="s", systems=[])
    other = {**STUDY_LINE, "documents": [{"title": "Paper C", "text": "Else."}]}
    new_question = {"question": "Another one?", "documents": [{"title": "D", "text": "d"}]}
    path = write_jsonl(tmp_path / "other.jsonl", [new_question, other])
    with pytest.raises(ImportFileError) as refused:
        study_upload(path=path, study_name="s", systems=[])
    assert (refused.value.path, refused.value.line, refused.value.field) == (path, 2, "documents")
    assert str(refused.value).endswith(
        "the study holds this question already, with other documents: 2 stored ('Paper A', "
        "'Paper B'), 1 on this line ('Paper C'): a question keeps the documents its sessions "
        "were answered from"
    )
    assert Study.objects.get().questions.count() == 1  # nothing written, the new one neither
    assert list(Document.objects.values_list("title", flat=True)) == ["Paper A", "Paper B"]


def test_a_question_uploaded_again_with_new_text_under_its_titles_says_so(tmp_path):
    """The refusal called the stored documents "2 other document(s) ('Paper A', 'Paper B')"
    though the line gave the very same titles: it says the text under them differs, and
    names the titles whose text does."""
    first = write_jsonl(tmp_path / "study.jsonl", [STUDY_LINE])
    study_upload(path=first, study_name="s", systems=[])
    paper_a, paper_b = STUDY_LINE["documents"]
    changed = {**STUDY_LINE, "documents": [paper_a, {**paper_b, "text": "Rewritten."}]}
    path = write_jsonl(tmp_path / "changed.jsonl", [changed])
    with pytest.raises(ImportFileError) as refused:
        study_upload(path=path, study_name="s", systems=[])
    assert (refused.value.line, refused.value.field) == (1, "documents")
    assert str(refused.value).endswith(
        "the study holds this question already, with different text under the same title: "
        "'Paper B': a question keeps the documents its sessions were answered from"
    )
    assert Passage.objects.filter(text="Rewritten.").count() == 0


def test_a_sessions_question_matches_the_uploaded_one_whatever_its_outer_blanks(tmp_path):
    """The questions' upload strips the question's text; the sessions' import matched it as
    given: " Q " made a second question beside "Q", with no documents."""
    study_upload(
        path=write_jsonl(tmp_path / "study.jsonl", [STUDY_LINE]), study_name="s", systems=[]
    )
    session = {**SESSION_B, "original_question": f"  {STUDY_LINE['question']}\n"}
    path = write_jsonl(tmp_path / "kiwi.jsonl", [session])
    assert sessions_import(path=path, study_name="s").created == 1
    question = Study.objects.get().questions.get()
    assert question.text == STUDY_LINE["question"]
    assert RevisionSession.objects.get().question == question
    # The same line, and its export (which writes the stored text), are one session.
    assert sessions_import(path=path, study_name="s").created == 0
    exported = tmp_path / "out.jsonl"
    call_command("export_sessions", "--study", "s", "--output", str(exported))
    assert sessions_import(path=str(exported), study_name="s").created == 0
    # A question that came in from sessions first is stored without its blanks too.
    sessions_import(path=path, study_name="t")
    assert Study.objects.get(name="t").questions.get().text == STUDY_LINE["question"]
