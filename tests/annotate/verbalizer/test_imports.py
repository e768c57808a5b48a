import json

import pytest
from django.core.management import CommandError, call_command

from annotate.errors import ImportFileError
from annotate.verbalizer.models import ClassificationDataset, ClassificationItem
from annotate.verbalizer.services.imports import classification_import

pytestmark = pytest.mark.django_db


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_sst2_label_1_is_positive_and_the_seeded_dataset_is_filled(tmp_path):
    path = write(tmp_path, "dev.tsv", "sentence\tlabel\na gripping film \t1\ndull and long \t0\n")
    call_command("import_classification", path, "--dataset", "SST-2", "--format", "glue-sst2")
    items = list(ClassificationItem.objects.filter(dataset__name="SST-2"))
    assert [(i.position, i.text, i.is_positive) for i in items] == [
        (1, "a gripping film ", True),
        (2, "dull and long ", False),
    ]


def test_rte_layout_pairs_and_label_names(tmp_path):
    path = write(
        tmp_path,
        "rte.tsv",
        "index\tsentence1\tsentence2\tlabel\n0\tA cat sat.\tAn animal sat.\tentailment\n"
        "1\tA cat sat.\tA dog ran.\tnot_entailment\n",
    )
    classification_import(path=path, dataset="RTE", fmt="glue-rte")
    first, second = ClassificationItem.objects.filter(dataset__name="RTE")
    assert (first.external_id, first.text, first.text_b, first.is_positive) == (
        "0", "A cat sat.", "An animal sat.", True,
    )  # fmt: skip
    assert second.is_positive is False


def test_mrpc_and_qqp_layouts_create_new_datasets_with_default_names(tmp_path):
    mrpc = write(
        tmp_path,
        "mrpc.tsv",
        "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t11\t12\tHe left.\tHe went away.\n"
        "0\t13\t14\tIt rained.\tIt was sunny.\n",
    )
    qqp = write(
        tmp_path,
        "qqp.tsv",
        "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n7\t1\t2\tHow old?\tWhat age?\t1\n",
    )
    classification_import(path=mrpc, dataset="my-mrpc", fmt="glue-mrpc")
    classification_import(path=qqp, dataset="my-qqp", fmt="glue-qqp")
    mrpc_set = ClassificationDataset.objects.get(name="my-mrpc")
    assert (mrpc_set.family, mrpc_set.positive_name, mrpc_set.negative_name) == (
        "paraphrase", "equivalent", "not equivalent",
    )  # fmt: skip
    assert [i.is_positive for i in mrpc_set.items.all()] == [True, False]
    assert mrpc_set.items.first().text_b == "He went away."
    qqp_item = ClassificationItem.objects.get(dataset__name="my-qqp")
    assert (qqp_item.external_id, qqp_item.text, qqp_item.is_positive) == ("7", "How old?", True)


def test_csv_and_jsonl_with_golden_names(tmp_path):
    csv_path = write(tmp_path, "a.csv", "text,label,text_b\nsunny day,joy,\nlost it,sadness,\n")
    call_command(
        "import_classification", csv_path, "--dataset", "emo", "--format", "csv",
        "--labels", "joy,sadness", "--family", "sentiment",
    )  # fmt: skip
    jsonl = write(
        tmp_path,
        "b.jsonl",
        json.dumps({"text": "I think", "label": "subjective", "id": 5}) + "\n\n"
        + json.dumps({"text": "It is 3 m.", "text_b": "", "label": "objective"}) + "\n",
    )  # fmt: skip
    classification_import(
        path=jsonl, dataset="subj2", fmt="jsonl", labels=("subjective", "objective"),
        family="subjectivity",
    )  # fmt: skip
    assert [i.is_positive for i in ClassificationItem.objects.filter(dataset__name="emo")] == [
        True,
        False,
    ]
    first = ClassificationItem.objects.filter(dataset__name="subj2").first()
    assert (first.external_id, first.is_positive) == ("5", True)


@pytest.mark.parametrize(
    ("fmt", "text", "expected"),
    [
        ("glue-sst2", "sentence\tlabel\ngood\t1\nbad\t2\n", "line 3, field 'label': expected"),
        ("glue-sst2", "sentence\tlabels\ngood\t1\n",
         "line 1: the header must be sentence<TAB>label; found sentence<TAB>labels"),
        # It read "found ('text,label',)", a Python tuple.
        ("glue-sst2", "text,label\ngood,positive\n",
         "found text,label (a CSV file? its format is csv)"),
        ("glue-rte", "index\tsentence1\tsentence2\tlabel\n0\ta\tb\n", "line 2: expected 4 columns"),
        ("glue-sst2", "sentence\tlabel\n\t1\n", "line 2, field 'sentence': the text is empty"),
        ("csv", "text,label\nok,positive\nno,neutral\n", "line 3, field 'label'"),
        # An unclosed quote swallows the lines after it: named where it opened, with a hint.
        ("csv", 'text,label\nok,positive\n"unclosed,negative\nfine,positive\n',
         'line 3: expected 2 columns, found 1 (a quote opened on this line runs to line 4'),
        ("csv", 'text,label\n"two\nlines",positive\nno,neutral\n', "line 4, field 'label'"),
        ("csv", 'text,label\nok,positive\n"two\nlines",neutral\n', "line 3, field 'label'"),
        ("jsonl", '{"text": "ok", "label": "positive"}\n{"text": 3, "label": "negative"}\n',
         "line 2, field 'text': expected text"),
        ("jsonl", '{"text": "ok"}\n', "line 1, field 'label': this field is missing"),
        # JSON's names for JSON's values, not Python's ("found NoneType", "found bool").
        ("jsonl", '{"text": null, "label": "positive"}\n', "field 'text': expected text, found null"),
        ("jsonl", '{"text": "ok", "label": true}\n', "field 'label': expected text, found true"),
        ("jsonl", '{"text": ["a"], "label": "positive"}\n', "expected text, found a list"),
        # A column the layout does not know: named, with the optional ones ("(missing: [],
        # unknown: ['extra'])" read as Python); a file separated by ';' is told so.
        ("csv", "text,label,extra\nok,positive,x\n",
         "line 1: the header must be text,label, optionally with text_b,id; unknown column "
         "'extra'"),
        ("csv", "text;label\nok;positive\n", "missing 'text', 'label'; unknown column "
         "'text;label'; is the file separated by ';'? it must be by commas"),
        # The same id twice (two files pasted together) was imported as two items.
        ("csv", "text,label,id\nok,positive,a1\nno,negative,a1\n",
         "line 3, field 'id': the id 'a1' is already on line 2"),
        ("jsonl", '{"text": "ok", "label": "positive", "id": 7}\n'
         '{"text": "no", "label": "negative", "id": "7"}\n',
         "line 2, field 'id': the id '7' is already on line 1"),
        ("glue-rte", "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n"
         "0\tc\td\tentailment\n", "line 3, field 'index': the id '0' is already on line 2"),
    ],
)  # fmt: skip
def test_bad_files_name_line_and_field_and_write_nothing(tmp_path, fmt, text, expected):
    path = write(tmp_path, "bad.txt", text)
    dataset = "RTE" if fmt == "glue-rte" else "SST-2"  # pairs go into an entailment dataset
    with pytest.raises(ImportFileError) as error:
        classification_import(path=path, dataset=dataset, fmt=fmt)
    assert expected in str(error.value)
    assert str(error.value).startswith(path)
    assert not ClassificationItem.objects.exists()


def test_a_file_must_fit_its_datasets_family(tmp_path):
    """RTE pairs went into SST-2 (its prompts dropped every hypothesis and read 'entailment' as
    positive), a CSV of entailment pairs without text_b gave prompts with an empty hypothesis,
    and a text_b on a sentiment dataset was dropped without a word."""
    rte = write(tmp_path, "dev.tsv", "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n")
    with pytest.raises(ImportFileError) as refused:
        classification_import(path=rte, dataset="SST-2", fmt="glue-rte")
    assert str(refused.value) == (
        f"{rte}, field '--format': dataset SST-2 is a sentiment dataset; glue-rte files hold "
        "entailment data: import it into a dataset of that family"
    )
    pairs = write(tmp_path, "pairs.csv", "text,label,text_b\nA man plays.,entailment,\n")
    with pytest.raises(
        ImportFileError,
        match="line 2, field 'text_b': dataset RTE is an entailment dataset of text pairs",
    ):
        classification_import(path=pairs, dataset="RTE", fmt="csv")
    single = write(tmp_path, "one.jsonl", json.dumps({"text": "ok", "label": "positive",
                                                      "text_b": "more"}) + "\n")  # fmt: skip
    with pytest.raises(ImportFileError) as refused:
        classification_import(path=single, dataset="SST-2", fmt="jsonl")
    assert "line 1, field 'text_b': dataset SST-2 is a sentiment dataset of one text each" in str(
        refused.value
    )
    assert not ClassificationItem.objects.exists()


def test_a_file_not_in_utf8_says_what_it_is_and_to_save_it_as_utf8(tmp_path):
    """Latin-1 and UTF-16 files (Excel's "Unicode text") said only "not UTF-8 text (byte 1 of the
    line is 0xff)": nothing about what to do."""
    latin = tmp_path / "latin.csv"
    latin.write_bytes("text,label\nCafé,positive\n".encode("latin-1"))
    with pytest.raises(ImportFileError) as refused:
        classification_import(path=str(latin), dataset="SST-2", fmt="csv")
    assert str(refused.value) == (
        f"{latin}, line 2, field 'text': not UTF-8 text (byte 4 of the line is 0xe9): save the "
        "file as UTF-8"
    )
    wide = tmp_path / "wide.csv"
    wide.write_bytes("text,label\nok,positive\n".encode("utf-16"))
    with pytest.raises(ImportFileError) as refused:
        classification_import(path=str(wide), dataset="SST-2", fmt="csv")
    assert str(refused.value) == (
        f"{wide}, line 1: not UTF-8 text (it begins with a UTF-16 byte order mark): save the file "
        "as UTF-8"
    )
    assert not ClassificationItem.objects.exists()


@pytest.mark.parametrize(
    ("fmt", "name", "data", "where"),
    [
        ("csv", "a.csv", b'id,label,text\nr1,positive,ok\nr2,negative,"fine,\nClum\xe9sy"\n',
         "line 4, field 'text'"),
        ("csv", "b.csv", b"text,id,label\nok,r\xe91,positive\n", "line 2, field 'id'"),
        ("jsonl", "c.jsonl", b'{"text": "ok", "label": "positive"}\n'
                             b'{"id": "r2", "label": "negative", "text": "Clum\xe9sy"}\n',
         "line 2, field 'text'"),
        ("glue-sst2", "dev.tsv", b"sentence\tlabel\nok\t1\nClum\xe9sy\t0\n",
         "line 3, field 'sentence'"),
    ],
)  # fmt: skip
def test_a_byte_not_in_utf8_names_its_field(tmp_path, fmt, name, data, where):
    """A Latin-1 byte named the file and the line but not the field, as every other problem
    of an import does: a researcher had to count commas to find the cell."""
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(ImportFileError) as refused:
        classification_import(path=str(path), dataset="SST-2", fmt=fmt)
    assert str(refused.value).startswith(f"{path}, {where}: not UTF-8 text (byte ")
    assert not ClassificationItem.objects.exists()


def test_a_csv_file_chosen_as_json_lines_is_named_as_csv(tmp_path):
    """A CSV file imported as jsonl was refused line by line, "not valid JSON (Expecting value
    at column 1)" thirteen times, never saying what the file was (a GLUE layout says so)."""
    path = write(tmp_path, "walk.csv", "id,text,label\nr1,ok,positive\nr2,dull,negative\n")
    with pytest.raises(ImportFileError) as refused:
        classification_import(path=path, dataset="SST-2", fmt="jsonl")
    assert str(refused.value) == (
        f"{path}, line 1: not JSON: id,text,label is a CSV header (a CSV file? its format is csv)"
    )
    assert not ClassificationItem.objects.exists()


def test_an_optional_field_written_as_null_is_absent(tmp_path):
    """pandas' to_json writes a missing text_b or id as null: the file was refused."""
    line = {"text": "ok", "label": "positive", "text_b": None, "id": None}
    path = write(tmp_path, "a.jsonl", json.dumps(line) + "\n")
    classification_import(path=path, dataset="SST-2", fmt="jsonl")
    item = ClassificationItem.objects.get()
    assert (item.text, item.text_b, item.external_id, item.is_positive) == ("ok", "", "", True)


def test_new_dataset_from_csv_needs_label_names_and_nothing_is_created(tmp_path):
    path = write(tmp_path, "a.csv", "text,label\nok,good\n")
    with pytest.raises(CommandError, match="--labels"):
        call_command("import_classification", path, "--dataset", "new", "--format", "csv")
    assert not ClassificationDataset.objects.filter(name="new").exists()


def test_labels_contradicting_an_existing_dataset_are_refused(tmp_path):
    path = write(tmp_path, "a.csv", "text,label\nok,good\n")
    with pytest.raises(ImportFileError, match="golden labels positive,negative"):
        classification_import(path=path, dataset="SST-2", fmt="csv", labels=("good", "bad"))


def test_a_second_import_into_a_filled_dataset_is_refused(tmp_path):
    path = write(tmp_path, "dev.tsv", "sentence\tlabel\ngood\t1\n")
    summary = classification_import(path=path, dataset="SST-2", fmt="glue-sst2")
    assert summary.message.startswith("Imported 1 item into SST-2")  # not "1 items"
    with pytest.raises(ImportFileError) as refused:
        classification_import(path=path, dataset="SST-2", fmt="glue-sst2")
    assert ClassificationItem.objects.count() == 1
    # Says what to do instead: a dataset is filled from one file, once.
    assert str(refused.value) == (
        f"{path}: dataset SST-2 already has 1 item; a dataset takes the items of one file, "
        "once: import this file into a new dataset, or put every item in one file and import "
        "it into an empty dataset"
    )


def _lines_named(error: ImportFileError) -> list[str]:
    return [line for line in str(error).splitlines() if line.startswith("- ")]


@pytest.mark.parametrize(
    "fmt, text, refused",
    [
        # `text` not a string: the reader refused the line, and its id went unseen.
        ("jsonl", '{"text": 3, "label": "positive", "id": "a"}\n'
         '{"text": "ok", "label": "positive", "id": "a"}\n',
         "- line 1, field 'text': expected text, found a number"),
        ("jsonl", '{"text": "ok", "label": true, "id": 7}\n'
         '{"text": "ok", "label": "positive", "id": "7"}\n',
         "- line 1, field 'label': expected text, found true"),
    ],
)  # fmt: skip
def test_a_line_the_reader_refuses_keeps_its_id_for_a_later_repeat(tmp_path, fmt, text, refused):
    path = write(tmp_path, "items.jsonl", text)
    with pytest.raises(ImportFileError) as error:
        classification_import(path=path, dataset="SST-2", fmt=fmt)
    repeated = json.loads(text.splitlines()[1])["id"]
    assert _lines_named(error.value) == [
        refused,
        f"- line 2, field 'id': the id {repeated!r} is already on line 1",
    ]
    assert not ClassificationItem.objects.exists()


def test_a_tsv_line_of_the_wrong_width_keeps_its_id_for_a_later_repeat(tmp_path):
    path = write(
        tmp_path,
        "dev.tsv",
        "index\tsentence1\tsentence2\tlabel\n"
        "0\ta\tb\n"  # line 2: a column short
        "0\tc\td\tentailment\n"  # line 3: its id again
        "the rest of a broken line\n",  # line 4: no tab, so no id
    )
    with pytest.raises(ImportFileError) as error:
        classification_import(path=path, dataset="RTE", fmt="glue-rte")
    assert _lines_named(error.value) == [
        "- line 2: expected 4 columns, found 3",
        "- line 3, field 'index': the id '0' is already on line 2",
        "- line 4: expected 4 columns, found 1",
    ]
    assert not ClassificationItem.objects.exists()


def test_a_refused_line_repeating_an_id_is_named_by_its_own_problem(tmp_path):
    path = write(
        tmp_path,
        "items.jsonl",
        '{"text": "ok", "label": "positive", "id": "a"}\n'
        '{"text": 7, "label": "positive", "id": "a"}\n',
    )
    with pytest.raises(ImportFileError) as error:
        classification_import(path=path, dataset="SST-2", fmt="jsonl")
    # The id is fixed by fixing the line; what is wrong with the line itself comes first.
    assert str(error.value) == f"{path}, line 2, field 'text': expected text, found a number"
    assert not ClassificationItem.objects.exists()


def test_a_refused_line_with_an_unreadable_id_is_named_once(tmp_path):
    path = write(
        tmp_path,
        "items.jsonl",
        '{"text": "ok", "label": "positive", "id": ["a"]}\n'
        '{"text": "ok", "label": "positive", "id": "a"}\n',
    )
    with pytest.raises(ImportFileError) as error:
        classification_import(path=path, dataset="SST-2", fmt="jsonl")
    assert str(error.value) == f"{path}, line 1, field 'id': expected text, found a list"
