"""A file with several wrong lines: one attempt names every one of them (up to 20), in file
order, each with its line and field, and writes nothing. One wrong line reads as it always did."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotate.errors import ImportFileError, ImportFileProblems
from annotate.models import Annotator, Benchmark, ImportJob, Instruction, Label
from annotate.revision.models import RevisionSession, Study
from annotate.revision.services.imports import sessions_import
from annotate.services.files import MAX_PROBLEMS
from annotate.services.imports import instructions_import
from annotate.services.label_imports import labels_import
from annotate.verbalizer.models import ClassificationItem
from tests.annotate.revision.test_imports import SESSION_A, SESSION_B
from tests.annotate.test_imports import ROW, write_jsonl, write_text

pytestmark = pytest.mark.django_db


def _lines_named(error: ImportFileError) -> list[str]:
    return [line for line in str(error).splitlines() if line.startswith("- ")]


def test_every_wrong_line_of_a_benchmark_file_is_named_and_nothing_is_written(tmp_path):
    path = write_jsonl(
        tmp_path / "bench.jsonl",
        [
            ROW,
            {**ROW, "id": "t2", "subset": "Medium_set"},
            '{"id": "t3" "input": ""}\n',  # not JSON
            {**ROW, "id": "t4"},
            {key: value for key, value in ROW.items() if key != "instruction"} | {"id": "t5"},
            {**ROW, "id": "t1", "instruction": "Write a sonnet."},  # t1 again, other content
        ],
    )
    with pytest.raises(ImportFileProblems) as caught:
        instructions_import(path=path, benchmark_name="b")
    assert str(caught.value).splitlines()[0] == f"{path}: 4 wrong lines:"
    assert _lines_named(caught.value) == [
        "- line 2, field 'subset': expected Easy_set or Hard_set, found 'Medium_set'",
        "- line 3: not valid JSON (Expecting ',' delimiter at column 13)",
        "- line 5, field 'instruction': this field is missing",
        "- line 6, field 'instruction': id 't1' appears again (first on line 1) with different "
        "content",
    ]
    assert (caught.value.line, caught.value.field) == (2, "subset")  # the first, for one-line UIs
    assert not Benchmark.objects.exists() and not Instruction.objects.exists()


def test_one_wrong_line_reads_as_before(tmp_path):
    path = write_jsonl(tmp_path / "b.jsonl", [ROW, {**ROW, "id": "t2", "subset": "x"}])
    with pytest.raises(ImportFileError) as caught:
        instructions_import(path=path, benchmark_name="b")
    assert not isinstance(caught.value, ImportFileProblems)
    assert str(caught.value) == (
        f"{path}, line 2, field 'subset': expected Easy_set or Hard_set, found 'x'"
    )


def test_a_file_wrong_on_every_line_stops_at_the_limit_and_says_there_may_be_more(tmp_path):
    rows = [{**ROW, "id": f"t{i}", "subset": "x"} for i in range(MAX_PROBLEMS + 15)]
    path = write_jsonl(tmp_path / "b.jsonl", rows)
    with pytest.raises(CommandError) as caught:
        call_command("import_instructions", path, "--benchmark", "b")
    message = str(caught.value)
    assert f"the first {MAX_PROBLEMS} wrong lines (there may be more):" in message
    named = [line for line in message.splitlines() if line.startswith("- line ")]
    assert [int(line.split()[2].rstrip(",")) for line in named] == list(range(1, MAX_PROBLEMS + 1))
    assert message.endswith("Nothing was written.") and not Benchmark.objects.exists()


@pytest.fixture
def benchmark(tmp_path):
    instructions_import(path=write_jsonl(tmp_path / "b.jsonl", [ROW]), benchmark_name="b")
    write_jsonl(tmp_path / "r.jsonl", [{"id": "t1", "output": "A haiku."}])
    call_command("import_responses", str(tmp_path / "r.jsonl"), "--benchmark", "b", "--system", "s")
    return tmp_path


def _label_csv_problems(folder, *rows: str) -> list[str]:
    header = "instruction_id,system,annotator,question_index,label,annotator_kind\n"
    path = write_text(folder / "labels.csv", header + "".join(f"{row}\n" for row in rows))
    with pytest.raises(ImportFileProblems) as caught:
        labels_import(path=path, benchmark_name="b")
    return _lines_named(caught.value)


def test_label_csv_names_each_bad_row_then_each_row_naming_what_is_not_stored(benchmark):
    good = "t1,s,ann,1,YES,expert"
    assert _label_csv_problems(
        benchmark, good, "t1,s,ann,2,MAYBE,expert", "t1,s,ann,x,NO,expert", "t1,s,ann,2,NO"
    ) == [
        "- line 3, field 'label': expected YES, NO or UNKNOWN, found 'MAYBE'",
        "- line 4, field 'question_index': expected a whole number, found 'x'",
        "- line 5: expected 6 columns, found 5",
    ]
    assert _label_csv_problems(
        benchmark, good, "t9,s,ann,1,YES,expert", "t1,other,ann,1,NO,expert", "t1,s,ann,7,NO,expert"
    ) == [
        "- line 3, field 'instruction_id': no instruction 't9' in benchmark 'b'",
        "- line 4, field 'system': no system named 'other': import its responses first",
        "- line 5, field 'question_index': instruction 't1' has 2 questions (question_index 1 to "
        "2); there is no question 7",
    ]
    assert not Label.objects.exists()


def test_a_json_lines_label_line_is_named_once_however_many_questions_it_labels(benchmark):
    rows = [
        {"id": "t1", "eval": [True, False]},
        {"id": "t9", "eval": [True, False, None]},
        {"id": "t8", "eval": [True]},
        {"id": "t1", "eval": [True, False, True]},
    ]

    def refused(name, system):
        path = write_jsonl(benchmark / name, rows if system == "s" else rows[:1])
        with pytest.raises(ImportFileError) as caught:
            labels_import(
                path=path, benchmark_name="b", system_name=system, annotator_name="j", kind="llm"
            )
        return caught.value

    # Named by the file's own fields, not the CSV's columns.
    assert [line.split(":")[0] for line in _lines_named(refused("a.jsonl", "s"))] == [
        "- line 2, field 'id'",
        "- line 3, field 'id'",
        "- line 4, field 'eval[2]'",
    ]
    assert refused("b.jsonl", "nope").field == "--system"


def test_a_glue_file_whose_header_line_is_unreadable_says_so(tmp_path):
    from annotate.verbalizer.services.imports import classification_import

    path = write_text(tmp_path / "dev.tsv", "sentence\tla\x00bel\ngood film\t1\n")
    with pytest.raises(ImportFileError) as caught:
        classification_import(path=path, dataset="SST-2", fmt="glue-sst2")
    assert (caught.value.line, "NUL" in caught.value.problem) == (1, True)


def test_kiwi_sessions_name_each_wrong_turn(tmp_path):
    wrong_a = json.loads(json.dumps(SESSION_A))
    wrong_a["interaction"][1]["rating"] = "great"
    wrong_b = {**SESSION_B, "model_name": ""}
    path = write_jsonl(tmp_path / "s.jsonl", [wrong_a, SESSION_B, wrong_b])
    with pytest.raises(ImportFileProblems) as caught:
        sessions_import(path=path, study_name="K")
    named = _lines_named(caught.value)
    assert [line.split(":")[0] for line in named] == [
        "- line 1, field 'interaction[1].rating'",
        "- line 3, field 'model_name'",
    ]
    assert not Study.objects.exists() and not RevisionSession.objects.exists()


def test_the_verbalizer_page_lists_each_wrong_line_of_an_upload(client, researcher):
    client.force_login(researcher)
    upload = SimpleUploadedFile(
        "dev.tsv", b"sentence\tlabel\ngood film\t1\nbad film\t7\nno label\nworse film\t9\n"
    )
    refused = client.post(
        reverse("verbalizer:overview"),
        {"i-dataset": "SST-2", "i-format": "glue-sst2", "i-upload": upload},
    )
    text = refused.content.decode()
    assert refused.status_code == 400 and "dev.tsv: 3 wrong lines:" in text
    for named in (
        "- line 3, field &#x27;label&#x27;: expected &#x27;1&#x27; or &#x27;0&#x27;, found "
        "&#x27;7&#x27;",
        "- line 4: expected 2 columns, found 1",
        "- line 5, field &#x27;label&#x27;",
    ):
        assert named in text
    assert "Nothing was written." in text and not ClassificationItem.objects.exists()


def test_every_upload_page_refuses_a_file_over_the_limit_and_names_it(
    client, researcher, settings, tmp_path
):

    settings.MEDIA_ROOT = tmp_path
    settings.IMPORT_MAX_UPLOAD_BYTES = 40
    client.force_login(researcher)
    big = json.dumps(ROW).encode()  # well over 40 bytes
    pages = [
        (
            reverse("annotate:import-list"),
            {"kind": "instructions", "benchmark_name": "b", "upload": ("b.jsonl", big)},
        ),
        (
            reverse("verbalizer:overview"),
            {"i-dataset": "SST-2", "i-format": "jsonl", "i-upload": ("d.jsonl", big)},
        ),
        (
            reverse("revision:upload"),
            {"study": "s", "kind": "questions", "file": ("q.jsonl", big)},
        ),
    ]
    for url, form in pages:
        data = {
            key: SimpleUploadedFile(*value) if isinstance(value, tuple) else value
            for key, value in form.items()
        }
        page = client.post(url, data)
        assert page.status_code == 400, url
        assert "larger than the upload limit (40 bytes)" in page.text, url
    assert not ImportJob.objects.exists() and not ClassificationItem.objects.exists()
    assert not Study.objects.exists() and not Benchmark.objects.exists()


def test_the_verbalizer_page_names_an_empty_upload_as_the_other_upload_pages_do(client, researcher):
    """It said only "The submitted file is empty." (the form field's own check), with no name:
    the importer's refusal names the file, as on the revision upload page."""
    client.force_login(researcher)
    for fmt, name, problem in (
        ("glue-sst2", "dev.tsv", "the file is empty"),
        ("csv", "items.csv", "the file is empty"),
        ("jsonl", "items.jsonl", "the file holds no items"),
    ):
        page = client.post(
            reverse("verbalizer:overview"),
            {"i-dataset": "SST-2", "i-format": fmt, "i-upload": SimpleUploadedFile(name, b"")},
        )
        assert page.status_code == 400
        assert f"{name}: {problem}. Nothing was written." in page.text, fmt
        assert "The submitted file is empty." not in page.text
    revision = client.post(
        reverse("revision:upload"),
        {"study": "s", "kind": "questions", "file": SimpleUploadedFile("q.jsonl", b"")},
    )
    assert "q.jsonl: the file holds no questions. Nothing was written." in revision.text
    assert not ClassificationItem.objects.exists()
    benchmark = client.post(
        reverse("annotate:import-list"),
        {
            "kind": "instructions",
            "benchmark_name": "b",
            "upload": SimpleUploadedFile("b.jsonl", b""),
        },
    )
    assert benchmark.status_code == 400
    assert "b.jsonl: the file is empty. Nothing was written." in benchmark.text
    assert "The submitted file is empty." not in benchmark.text
    assert not ImportJob.objects.exists() and not Benchmark.objects.exists()


def test_a_broken_json_line_is_placed_where_it_breaks(tmp_path):
    truncated = '{"id": "t2", "input": "", "category": "Poems", "instruction": \n'
    unterminated = '{"id": "t3", "input": "no end\n'
    path = write_jsonl(tmp_path / "b.jsonl", [ROW, truncated, unterminated])
    with pytest.raises(ImportFileProblems) as caught:
        instructions_import(path=path, benchmark_name="b")
    assert _lines_named(caught.value) == [
        f"- line 2: not valid JSON (Expecting value at column {len(truncated)})",
        "- line 3: not valid JSON (Unterminated string starting at column 23)",
    ]


def test_an_upload_page_says_nothing_was_written_under_the_list(client, researcher):
    client.force_login(researcher)
    upload = SimpleUploadedFile("dev.tsv", b"sentence\tlabel\na\t7\nb\t9\n")
    page = client.post(
        reverse("verbalizer:overview"),
        {"i-dataset": "SST-2", "i-format": "glue-sst2", "i-upload": upload},
    )
    assert "found &#x27;9&#x27;\nNothing was written." in page.text
    # The form is far down the page: its top says so and links to it.
    assert 'id="form-refused">The items were not imported: <a href="#add-items">' in page.text


def test_label_csv_names_bad_rows_and_rows_naming_what_is_not_stored_in_one_attempt(benchmark):
    """Format problems and unknown instructions, systems and questions in one round, in file
    order: a researcher fixing a big file should not have to run it twice."""
    assert _label_csv_problems(
        benchmark,
        "t1,s,ann,1,YES,expert",
        "t9,s,ann,1,YES,expert",
        "t1,s,ann,2,MAYBE,expert",
        "t1,other,ann,1,NO,expert",
        "t1,s,ann,0,NO,expert",
        "t1,s,ann,7,NO,expert",
        "t1,s,,2,NO,expert",
    ) == [
        "- line 3, field 'instruction_id': no instruction 't9' in benchmark 'b'",
        "- line 4, field 'label': expected YES, NO or UNKNOWN, found 'MAYBE'",
        "- line 5, field 'system': no system named 'other': import its responses first",
        "- line 6, field 'question_index': instruction 't1' has 2 questions (question_index 1 to "
        "2); there is no question 0",
        "- line 7, field 'question_index': instruction 't1' has 2 questions (question_index 1 to "
        "2); there is no question 7",
        "- line 8, field 'annotator': expected a non-empty text",
    ]
    assert not Label.objects.exists()


def test_a_label_file_with_many_wrong_lines_names_the_first_and_counts_the_rest(benchmark):
    unknown = [f"t{n},s,ann,1,YES,expert" for n in range(100, 130)]  # 30 unknown instructions
    malformed = ["t1,s,ann,1,MAYBE,expert"] * 5
    path = write_text(
        benchmark / "labels.csv",
        "instruction_id,system,annotator,question_index,label,annotator_kind\n"
        + "".join(f"{row}\n" for row in malformed + unknown),
    )
    with pytest.raises(CommandError) as caught:
        call_command("import_labels", path, "--benchmark", "b")
    message = str(caught.value)
    assert message.splitlines()[0] == f"{path}: 35 wrong lines:"
    named = [line for line in message.splitlines() if line.startswith("- line ")]
    assert [int(line.split()[2].rstrip(",")) for line in named] == list(range(2, 22))
    assert "field 'label'" in named[4] and "no instruction 't100'" in named[5]
    assert message.endswith(f"\nand {35 - MAX_PROBLEMS} more\nNothing was written.")
    assert not Label.objects.exists()


def test_json_lines_labels_name_bad_lines_and_unknown_instructions_in_one_attempt(benchmark):
    rows = [
        {"id": "t1", "eval": [True, "yes"]},
        {"id": "t9", "eval": [True]},
        {"id": "t1", "eval": [True, False, True]},
    ]
    path = write_jsonl(benchmark / "a.jsonl", rows)
    with pytest.raises(ImportFileProblems) as caught:
        labels_import(
            path=path, benchmark_name="b", system_name="s", annotator_name="j", kind="llm"
        )
    assert [line.split(":")[0] for line in _lines_named(caught.value)] == [
        "- line 1, field 'eval[1]'",
        "- line 2, field 'id'",
        "- line 3, field 'eval[2]'",
    ]
    assert not Label.objects.exists()


def test_naming_unknown_questions_takes_as_many_queries_for_ten_lines_as_for_two(benchmark):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def queries(bad_lines: int) -> int:
        rows = [f"t1,s,ann,{7 + n},NO,expert" for n in range(bad_lines)]
        with CaptureQueriesContext(connection) as captured:
            assert len(_label_csv_problems(benchmark, *rows)) == bad_lines
        return len(captured)

    assert queries(10) == queries(2)


def test_a_new_annotator_without_a_kind_is_named_with_the_other_wrong_lines(benchmark):
    assert _label_csv_problems(
        benchmark,
        "t1,s,ann,1,MAYBE,expert",
        "t1,s,newbie,1,YES,",
        "t1,s,ann,1,YES,expert",
        "t9,s,ann,1,YES,expert",
        "t1,s,ann,2,NO,crowd",
    ) == [
        "- line 2, field 'label': expected YES, NO or UNKNOWN, found 'MAYBE'",
        "- line 3, field 'annotator': annotator 'newbie' is new: give its kind, expert, crowd "
        "or llm ('Kind of new annotators' on the import page, --kind on the command line, "
        "annotator_kind in the API, or an annotator_kind column)",
        "- line 5, field 'instruction_id': no instruction 't9' in benchmark 'b'",
        "- line 6, field 'annotator_kind': 'crowd' but line 4 gave 'expert' for annotator "
        "'ann': an annotator has one kind",
    ]
    assert not Label.objects.exists() and not Annotator.objects.exists()


# --- Clashes with stored work and second kinds: named in the same round as the line errors ---

LABEL_HEADER = "instruction_id,system,annotator,question_index,label,annotator_kind\n"


def _stored_labels(folder, *rows: str) -> None:
    path = write_text(folder / "stored.csv", LABEL_HEADER + "".join(f"{row}\n" for row in rows))
    labels_import(path=path, benchmark_name="b")


def _labels_on_the_import_page(client, capture_on_commit, labels: str, **fields):
    """Upload `labels` as labels.csv of benchmark b on the Import page, the background import
    run at once; the page's answer (a redirect to the import's own page)."""
    with capture_on_commit(execute=True):
        return client.post(
            reverse("annotate:import-list"),
            {
                "kind": "labels",
                "benchmark_name": "b",
                **fields,
                "upload": SimpleUploadedFile("labels.csv", labels.encode()),
            },
        )


def _import_labels_command(folder, *rows: str) -> str:
    path = write_text(folder / "labels.csv", LABEL_HEADER + "".join(f"{row}\n" for row in rows))
    with pytest.raises(CommandError) as caught:
        call_command("import_labels", path, "--benchmark", "b")
    assert str(caught.value).endswith("\nNothing was written.")
    return str(caught.value)


def test_a_label_file_names_its_line_errors_and_its_clashes_in_one_round(benchmark):
    """A researcher fixed the line errors, uploaded again, and only then learnt that other
    lines contradict stored labels or each other: the command names all of them at once."""
    _stored_labels(benchmark, "t1,s,ann,1,YES,expert")
    message = _import_labels_command(
        benchmark,
        "t1,s,ann,1,NO,expert",  # line 2: the stored label says YES
        "t1,s,ann,2,MAYBE,expert",  # line 3: not a label
        "t1,s,new,2,YES,crowd",  # line 4: fine by itself
        "t9,s,ann,1,YES,expert",  # line 5: no such instruction
        "t1,s,new,2,NO,crowd",  # line 6: line 4 said YES
    )
    assert message.splitlines()[0].endswith(": 4 wrong lines:")
    assert [line for line in message.splitlines() if line.startswith("- ")] == [
        "- line 2, field 'label': a stored label says YES, the file says NO; nothing was "
        "overwritten",
        "- line 3, field 'label': expected YES, NO or UNKNOWN, found 'MAYBE'",
        "- line 5, field 'instruction_id': no instruction 't9' in benchmark 'b'",
        "- line 6, field 'label': the same label appears on line 4 with a different value",
    ]
    assert list(Label.objects.values_list("value", flat=True)) == [1]
    assert list(Annotator.objects.values_list("name", flat=True)) == ["ann"]


def test_the_import_page_names_line_errors_and_clashes_in_one_round(
    client, researcher, django_capture_on_commit_callbacks, settings, benchmark
):
    settings.MEDIA_ROOT = benchmark
    _stored_labels(benchmark, "t1,s,ann,1,YES,expert")
    labels = LABEL_HEADER + "t1,s,ann,2,MAYBE,expert\nt1,s,ann,1,UNKNOWN,expert\n"
    client.force_login(researcher)
    page = _labels_on_the_import_page(client, django_capture_on_commit_callbacks, labels)
    detail = client.get(page["Location"]).text
    assert "labels.csv: 2 wrong lines:" in detail
    assert "- line 2, field &#x27;label&#x27;: expected YES, NO or UNKNOWN" in detail
    assert (
        "- line 3, field &#x27;label&#x27;: a stored label says YES, the file says UNKNOWN"
        in detail
    )
    assert "Nothing was written." in detail
    assert list(Label.objects.values_list("value", flat=True)) == [1]


def test_a_json_lines_clash_names_its_eval_field_beside_the_line_errors(benchmark):
    path = write_jsonl(benchmark / "a.jsonl", [{"id": "t1", "eval": [True, True]}])
    labels_import(path=path, benchmark_name="b", system_name="s", annotator_name="j", kind="llm")
    rows = [{"id": "t9", "eval": [True]}, {"id": "t1", "eval": [True, False]}]
    path = write_jsonl(benchmark / "b.jsonl", rows)
    with pytest.raises(ImportFileProblems) as caught:
        labels_import(path=path, benchmark_name="b", system_name="s", annotator_name="j")
    assert _lines_named(caught.value) == [
        "- line 1, field 'id': no instruction 't9' in benchmark 'b'",
        "- line 2, field 'eval[1]': a stored label says YES, the file says NO; nothing was "
        "overwritten",
    ]
    assert Label.objects.count() == 2


def test_clashes_and_line_errors_share_one_limit_and_the_rest_are_counted(benchmark):
    annotators = [f"a{n:02}" for n in range(25)]
    _stored_labels(benchmark, *(f"t1,s,{name},1,YES,expert" for name in annotators))
    bad = ["t1,s,a00,2,MAYBE,expert"] * 5  # lines 2-6
    clashing = [f"t1,s,{name},1,NO,expert" for name in annotators]  # lines 7-31
    message = _import_labels_command(benchmark, *bad, *clashing)
    assert message.splitlines()[0].endswith(": 30 wrong lines:")
    named = [line for line in message.splitlines() if line.startswith("- line ")]
    assert [int(line.split()[2].rstrip(",")) for line in named] == list(range(2, 22))
    assert "a stored label says YES, the file says NO" in named[-1]
    assert f"\nand {30 - MAX_PROBLEMS} more\n" in message
    assert Label.objects.count() == len(annotators)


def test_a_second_kind_names_its_own_line_and_the_line_of_the_first(benchmark):
    """The refusal named the annotator's first line, which was right; the line to fix is the
    one giving another kind, and each such line is named."""
    message = _import_labels_command(
        benchmark,
        "t1,s,ann,1,YES,expert",
        "t1,s,ann,2,MAYBE,expert",
        "t1,s,ann,2,NO,expert",
        "t1,s,other,1,NO,crowd",
        "t1,s,ann,1,YES,crowd",
        "t1,s,ann,2,NO,llm",
    )
    assert [line for line in message.splitlines() if line.startswith("- ")] == [
        "- line 3, field 'label': expected YES, NO or UNKNOWN, found 'MAYBE'",
        "- line 6, field 'annotator_kind': 'crowd' but line 2 gave 'expert' for annotator "
        "'ann': an annotator has one kind",
        "- line 7, field 'annotator_kind': 'llm' but line 2 gave 'expert' for annotator "
        "'ann': an annotator has one kind",
    ]
    assert not Label.objects.exists() and not Annotator.objects.exists()


def test_a_kind_given_on_some_lines_only_is_still_one_kind(benchmark):
    """A line without a kind sorted first hid every kind but the largest: 'crowd' here was
    not seen, and the labels went in as an expert's."""
    message = _import_labels_command(
        benchmark, "t1,s,ann,1,YES,", "t1,s,ann,2,NO,crowd", "t1,s,ann,1,YES,expert"
    )
    assert "labels.csv, line 4, field 'annotator_kind': 'expert' but line 3 gave 'crowd'" in (
        message
    )
    assert not Label.objects.exists() and not Annotator.objects.exists()


def test_a_kind_contradicting_the_stored_one_names_the_line_that_gives_it(benchmark):
    _stored_labels(benchmark, "t1,s,ann,1,YES,expert")
    message = _import_labels_command(benchmark, "t1,s,ann,2,NO,", "t1,s,ann,2,NO,crowd")
    assert message.splitlines()[-2] == (
        f"{benchmark / 'labels.csv'}, line 3, field 'annotator_kind': annotator 'ann' is "
        "stored as expert, the file says crowd"
    )
    assert Label.objects.count() == 1


def test_the_kind_option_is_for_new_annotators_a_line_without_a_kind_keeps_the_stored_one(
    benchmark,
):
    """--kind crowd was also applied to a stored expert's lines without a kind, and the file was
    refused: "annotator 'ann' is stored as expert, the file says crowd"."""
    _stored_labels(benchmark, "t1,s,ann,1,YES,expert")
    path = write_text(
        benchmark / "labels.csv", LABEL_HEADER + "t1,s,ann,2,NO,\nt1,s,newbie,1,YES,\n"
    )
    call_command("import_labels", path, "--benchmark", "b", "--kind", "crowd")
    assert dict(Annotator.objects.values_list("name", "kind")) == {
        "ann": "expert",
        "newbie": "crowd",
    }
    assert sorted(Label.objects.values_list("annotator__name", "question__position")) == [
        ("ann", 1),
        ("ann", 2),
        ("newbie", 1),
    ]


def test_the_kind_option_leaves_a_stored_annotator_of_a_json_lines_file_and_a_score_file_alone(
    benchmark,
):
    from annotate.models import DirectScore
    from annotate.services.label_imports import scores_import

    _stored_labels(benchmark, "t1,s,ann,1,YES,expert")
    rows = [{"id": "t1", "eval": [True, False], "system": "s", "annotator": "ann"}]
    labels_import(path=write_jsonl(benchmark / "a.jsonl", rows), benchmark_name="b", kind="llm")
    scores = write_text(benchmark / "s.csv", "instruction_id,system,annotator,score\nt1,s,ann,4\n")
    scores_import(path=scores, benchmark_name="b", kind="crowd")
    assert Annotator.objects.get().kind == "expert"
    assert Label.objects.count() == 2 and DirectScore.objects.get().score == 4


def test_an_explicit_kind_contradicting_the_stored_one_is_refused_whatever_the_kind_option(
    benchmark,
):
    _stored_labels(benchmark, "t1,s,ann,1,YES,expert")
    path = write_text(
        benchmark / "labels.csv", LABEL_HEADER + "t1,s,ann,2,NO,\nt1,s,ann,2,NO,crowd\n"
    )
    with pytest.raises(CommandError) as caught:
        call_command("import_labels", path, "--benchmark", "b", "--kind", "expert")
    assert str(caught.value).splitlines()[-2] == (
        f"{path}, line 3, field 'annotator_kind': annotator 'ann' is stored as expert, "
        "the file says crowd"
    )
    assert Label.objects.count() == 1


def test_two_kinds_for_a_stored_annotator_do_not_blame_the_kind_option(benchmark):
    _stored_labels(benchmark, "t1,s,ann,1,YES,expert")
    path = write_text(
        benchmark / "labels.csv", LABEL_HEADER + "t1,s,ann,2,NO,expert\nt1,s,ann,2,NO,crowd\n"
    )
    with pytest.raises(CommandError) as caught:
        call_command("import_labels", path, "--benchmark", "b", "--kind", "crowd")
    assert str(caught.value).splitlines()[-2] == (
        f"{path}, line 3, field 'annotator_kind': 'crowd' but line 2 gave 'expert' for "
        "annotator 'ann': an annotator has one kind"
    )


def test_the_import_pages_kind_of_new_annotators_leaves_a_stored_one_alone(
    client, researcher, django_capture_on_commit_callbacks, settings, benchmark
):
    settings.MEDIA_ROOT = benchmark
    _stored_labels(benchmark, "t1,s,ann,1,YES,expert")
    labels = LABEL_HEADER + "t1,s,ann,2,NO,\n"
    client.force_login(researcher)
    _labels_on_the_import_page(
        client, django_capture_on_commit_callbacks, labels, annotator_kind="crowd"
    )
    job = ImportJob.objects.get()
    assert job.status == "done", job.message
    assert Annotator.objects.get().kind == "expert" and Label.objects.count() == 2


def test_the_import_page_names_the_line_giving_a_second_kind(
    client, researcher, django_capture_on_commit_callbacks, settings, benchmark
):
    settings.MEDIA_ROOT = benchmark
    labels = LABEL_HEADER + "t1,s,ann,1,YES,expert\nt1,s,ann,2,NO,crowd\n"
    client.force_login(researcher)
    page = _labels_on_the_import_page(client, django_capture_on_commit_callbacks, labels)
    detail = client.get(page["Location"]).text
    assert (
        "labels.csv, line 3, field &#x27;annotator_kind&#x27;: &#x27;crowd&#x27; but line 2 "
        "gave &#x27;expert&#x27; for annotator &#x27;ann&#x27;: an annotator has one kind"
    ) in detail
    assert "Nothing was written." in detail
    assert not Label.objects.exists() and not Annotator.objects.exists()


def test_a_row_differing_from_an_earlier_one_is_named_not_the_last_of_its_key(benchmark):
    """YES, NO, YES for one label named the third line, which agrees with the first."""
    message = _import_labels_command(
        benchmark, "t1,s,ann,1,YES,expert", "t1,s,ann,1,NO,expert", "t1,s,ann,1,YES,expert"
    )
    assert message.splitlines()[0] == (
        f"{benchmark / 'labels.csv'}, line 3, field 'label': the same label appears on line 2 "
        "with a different value"
    )
    assert not Label.objects.exists() and not Annotator.objects.exists()


def test_a_line_contradicting_stored_work_is_named_once(benchmark):
    _stored_labels(benchmark, "t1,s,ann,1,YES,expert")
    message = _import_labels_command(
        benchmark, "t1,s,ann,2,MAYBE,expert", "t1,s,ann,1,YES,expert", "t1,s,ann,1,NO,expert"
    )
    assert message.splitlines()[0].endswith(": 2 wrong lines:")
    assert [line.split(":")[0] for line in message.splitlines() if line.startswith("- ")] == [
        "- line 2, field 'label'",
        "- line 4, field 'label'",
    ]
    assert "- line 4, field 'label': a stored label says YES, the file says NO" in message


# --- KIWI questions and verbalizer items: a repeat of a wrong line is named in the same round --


RTE_REPEAT = (
    "index\tsentence1\tsentence2\tlabel\n"
    "0\t\tb\tentailment\n"  # line 2: no premise
    "0\tc\td\tentailment\n"  # line 3: the id of line 2 again
)


def test_import_classification_names_a_repeated_id_beside_its_wrong_first_line(tmp_path):
    """The first line's empty text kept its id unseen: the repeat was named only once the
    first line was fixed."""
    path = write_text(tmp_path / "dev.tsv", RTE_REPEAT)
    with pytest.raises(CommandError) as caught:
        call_command("import_classification", path, "--dataset", "RTE", "--format", "glue-rte")
    assert _lines_named(caught.value) == [
        "- line 2, field 'sentence1': the text is empty",
        "- line 3, field 'index': the id '0' is already on line 2",
    ]
    assert not ClassificationItem.objects.exists()


def test_the_verbalizer_page_names_a_repeated_id_beside_its_wrong_first_line(client, researcher):
    client.force_login(researcher)
    refused = client.post(
        reverse("verbalizer:overview"),
        {
            "i-dataset": "RTE",
            "i-format": "glue-rte",
            "i-upload": SimpleUploadedFile("dev.tsv", RTE_REPEAT.encode()),
        },
    )
    assert refused.status_code == 400
    assert "dev.tsv: 2 wrong lines:" in refused.text
    assert "- line 3, field &#x27;index&#x27;: the id &#x27;0&#x27; is already on line 2" in (
        refused.text
    )
    assert not ClassificationItem.objects.exists()


QUESTION_REPEAT = [
    {"question": "Why is the sky blue?", "documents": []},  # line 1: no documents
    {"question": "Why is the sky blue?", "documents": [{"title": "Sky", "text": "Rayleigh."}]},
    {"question": "Why is grass green?", "documents": [{"title": "Grass", "text": "Light."}]},
]


def test_import_study_names_a_repeated_question_beside_its_wrong_first_line(tmp_path):
    path = write_jsonl(tmp_path / "q.jsonl", QUESTION_REPEAT)
    with pytest.raises(CommandError) as caught:
        call_command("import_study", path, "--study", "K")
    assert _lines_named(caught.value) == [
        "- line 1, field 'documents': must be a non-empty list of documents",
        "- line 2, field 'question': repeats the question of line 1",
    ]
    assert not Study.objects.exists()


def test_the_study_upload_page_names_a_repeated_question_beside_its_wrong_first_line(
    client, researcher
):
    client.force_login(researcher)
    upload = "".join(json.dumps(row) + "\n" for row in QUESTION_REPEAT).encode()
    refused = client.post(
        reverse("revision:upload"),
        {"study": "K", "kind": "questions", "file": SimpleUploadedFile("q.jsonl", upload)},
    )
    assert refused.status_code == 400
    assert "- line 2, field &#x27;question&#x27;: repeats the question of line 1" in refused.text
    assert "Nothing was written." in refused.text and not Study.objects.exists()


def test_a_score_file_names_its_line_errors_and_its_clashes_in_one_round(benchmark):
    from annotate.services.label_imports import scores_import

    header = "instruction_id,system,annotator,score,annotator_kind\n"
    path = write_text(benchmark / "s.csv", header + "t1,s,ann,4,expert\n")
    scores_import(path=path, benchmark_name="b")
    path = write_text(benchmark / "t.csv", header + "t1,s,ann,2,expert\nt9,s,ann,6,expert\n")
    with pytest.raises(ImportFileProblems) as caught:
        scores_import(path=path, benchmark_name="b")
    assert _lines_named(caught.value) == [
        "- line 2, field 'score': a stored direct score says 4, the file says 2; nothing was "
        "overwritten",
        "- line 3, field 'score': 6 is out of range (1 to 5)",
    ]


def test_a_second_kind_in_json_lines_names_the_kind_field_and_the_kind_option(benchmark):
    rows = [
        {"id": "t1", "eval": [True], "system": "s", "annotator": "j"},
        {"id": "t1", "eval": [True, False], "system": "s", "annotator": "j", "kind": "crowd"},
    ]
    path = write_jsonl(benchmark / "a.jsonl", rows)
    with pytest.raises(ImportFileError) as caught:
        labels_import(path=path, benchmark_name="b", kind="expert")
    assert str(caught.value) == (
        f"{path}, line 2, field 'kind': 'crowd' but line 1 gave 'expert' for annotator 'j' "
        "(--kind expert stands for a line that gives none): an annotator has one kind"
    )
    assert not Label.objects.exists() and not Annotator.objects.exists()


# --- A line wrong in two ways is one wrong line: named once, by its first problem, counted once --


def test_a_label_line_wrong_in_two_ways_is_named_once_by_its_first_problem(benchmark):
    """A line giving a stored annotator another kind and naming an unknown instruction was
    listed twice and counted as two wrong lines."""
    _stored_labels(benchmark, "t1,s,ann,1,YES,expert")
    message = _import_labels_command(
        benchmark,
        "t9,s,ann,1,YES,crowd",  # line 2: ann is an expert, and there is no t9
        "t1,s,ann,2,MAYBE,crowd",  # line 3: not a label
        "t1,s,new,1,YES,expert",  # line 4: fine by itself
        "t1,s,new,1,NO,crowd",  # line 5: a second kind, and line 4 said YES
    )
    assert message.splitlines()[0].endswith(": 3 wrong lines:")
    assert [line for line in message.splitlines() if line.startswith("- ")] == [
        "- line 2, field 'annotator_kind': annotator 'ann' is stored as expert, the file says "
        "crowd",
        "- line 3, field 'label': expected YES, NO or UNKNOWN, found 'MAYBE'",
        "- line 5, field 'annotator_kind': 'crowd' but line 4 gave 'expert' for annotator "
        "'new': an annotator has one kind",
    ]
    assert Label.objects.count() == 1


def test_json_lines_labels_wrong_in_two_ways_on_one_line_are_named_once(benchmark):
    """One line of the evaluation file labels several questions: one row contradicting a
    stored label and another asking for a question that is not there made it two lines."""
    path = write_jsonl(benchmark / "a.jsonl", [{"id": "t1", "eval": [True, True]}])
    labels_import(path=path, benchmark_name="b", system_name="s", annotator_name="j", kind="llm")
    rows = [
        {"id": "t1", "eval": [True, False, True]},  # eval[1] says NO, and there is no eval[2]
        {"id": "t1", "eval": [True]},
        {"id": "t1", "eval": [False, True]},  # line 2 said YES for eval[0], the stored YES too
    ]
    path = write_jsonl(benchmark / "b.jsonl", rows)
    with pytest.raises(ImportFileProblems) as caught:
        labels_import(path=path, benchmark_name="b", system_name="s", annotator_name="j")
    assert str(caught.value).splitlines()[0] == f"{path}: 2 wrong lines:"
    assert _lines_named(caught.value) == [
        "- line 1, field 'eval[2]': instruction 't1' has 2 questions (eval[0] to eval[1]); there "
        "is no question 3",
        "- line 3, field 'eval[0]': a stored label says YES, the file says NO; nothing was "
        "overwritten",
    ]
    assert Label.objects.count() == 2


def test_a_file_of_many_lines_wrong_in_two_ways_counts_each_line_once(benchmark):
    """25 lines each giving a second kind and an unknown instruction read "50 wrong lines",
    the first ten named twice, "and 30 more"."""
    twice_wrong = [f"t{n},s,ann,1,YES,crowd" for n in range(100, 125)]  # lines 3-27
    message = _import_labels_command(benchmark, "t1,s,ann,1,YES,expert", *twice_wrong)
    assert message.splitlines()[0].endswith(": 25 wrong lines:")
    named = [line for line in message.splitlines() if line.startswith("- line ")]
    assert [int(line.split()[2].rstrip(",")) for line in named] == list(range(3, 23))
    assert all("'crowd' but line 2 gave 'expert'" in line for line in named)
    assert f"\nand {25 - MAX_PROBLEMS} more\n" in message
    assert not Label.objects.exists() and not Annotator.objects.exists()


def test_json_lines_of_many_lines_wrong_in_two_ways_count_each_line_once(benchmark):
    path = write_jsonl(benchmark / "a.jsonl", [{"id": "t1", "eval": [True, True]}])
    labels_import(path=path, benchmark_name="b", system_name="s", annotator_name="j", kind="llm")
    rows = [{"id": "t1", "eval": [False, True, True]}] * 25  # a stored YES, and no eval[2]
    path = write_jsonl(benchmark / "b.jsonl", rows)
    with pytest.raises(ImportFileProblems) as caught:
        labels_import(path=path, benchmark_name="b", system_name="s", annotator_name="j")
    assert str(caught.value).splitlines()[0] == f"{path}: 25 wrong lines:"
    assert [problem.line for problem in caught.value.problems] == list(range(1, 21))
    assert caught.value.more == 25 - MAX_PROBLEMS
    assert Label.objects.count() == 2


def test_a_score_line_wrong_in_two_ways_is_named_once(benchmark):
    from annotate.services.label_imports import scores_import

    header = "instruction_id,system,annotator,score,annotator_kind\n"
    scores_import(
        path=write_text(benchmark / "s.csv", header + "t1,s,ann,4,expert\n"), benchmark_name="b"
    )
    path = write_text(
        benchmark / "t.csv",
        header + "t1,s,ann,2,crowd\n"  # ann is an expert, and its stored score is 4
        "t1,s,ann,6,expert\n",
    )
    with pytest.raises(ImportFileProblems) as caught:
        scores_import(path=path, benchmark_name="b")
    assert str(caught.value).splitlines()[0] == f"{path}: 2 wrong lines:"
    assert _lines_named(caught.value) == [
        "- line 2, field 'annotator_kind': annotator 'ann' is stored as expert, the file says "
        "crowd",
        "- line 3, field 'score': 6 is out of range (1 to 5)",
    ]
