"""Import binary classification data: the GLUE TSV layouts and a generic CSV / JSON Lines.

One transaction per file: every wrong line (up to MAX_PROBLEMS) is named in one ImportFileError
with file, line and field, and nothing is written. Layouts (GLUE's own files, header line first):

- glue-sst2: ``sentence<TAB>label`` (1 = positive, 0 = negative)
- glue-rte:  ``index<TAB>sentence1<TAB>sentence2<TAB>label`` (entailment / not_entailment)
- glue-mrpc: ``Quality<TAB>#1 ID<TAB>#2 ID<TAB>#1 String<TAB>#2 String`` (1 = equivalent)
- glue-qqp:  ``id<TAB>qid1<TAB>qid2<TAB>question1<TAB>question2<TAB>is_duplicate`` (1 = duplicate)
- csv / jsonl: ``text``, optional ``text_b`` and ``id``, ``label`` = one of the dataset's two
  golden label names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from django.db import transaction
from django.template.defaultfilters import pluralize

from annotate.errors import ImportFileError
from annotate.services.files import (
    ImportProblems,
    _lines,
    _open_text,
    read_csv,
    read_jsonl,
    tab_field_not_utf8,
)
from annotate.verbalizer.models import ClassificationDataset, ClassificationItem, TaskFamily
from annotate.verbalizer.words import label_words_problem

FORMATS = ("glue-sst2", "glue-rte", "glue-mrpc", "glue-qqp", "csv", "jsonl")
PAIR_FAMILIES = (TaskFamily.ENTAILMENT, TaskFamily.PARAPHRASE)  # prompts show text and text_b


@dataclass(frozen=True)
class _Row:
    line: int
    external_id: str
    text: str
    text_b: str
    label_field: str
    label_value: str
    # A line the reader refused: only its id (when readable) and the problem are kept, so that
    # a later line repeating the id is named in the same round.
    refused: ImportFileError | None = None


def _refused(line: int, external_id: str, problem: ImportFileError) -> _Row:
    return _Row(line, external_id, "", "", "", "", refused=problem)


@dataclass(frozen=True)
class GlueLayout:
    header: tuple[str, ...]
    text: str
    text_b: str
    label: str
    id_field: str
    positive_value: str
    negative_value: str
    default_names: tuple[str, str]
    family: str


GLUE_LAYOUTS = {
    "glue-sst2": GlueLayout(
        ("sentence", "label"), "sentence", "", "label", "", "1", "0",
        ("positive", "negative"), TaskFamily.SENTIMENT,
    ),
    "glue-rte": GlueLayout(
        ("index", "sentence1", "sentence2", "label"), "sentence1", "sentence2", "label", "index",
        "entailment", "not_entailment", ("entailment", "not entailment"), TaskFamily.ENTAILMENT,
    ),
    "glue-mrpc": GlueLayout(
        ("Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"), "#1 String", "#2 String",
        "Quality", "#1 ID", "1", "0", ("equivalent", "not equivalent"), TaskFamily.PARAPHRASE,
    ),
    "glue-qqp": GlueLayout(
        ("id", "qid1", "qid2", "question1", "question2", "is_duplicate"), "question1",
        "question2", "is_duplicate", "id", "1", "0", ("duplicate", "not duplicate"),
        TaskFamily.PARAPHRASE,
    ),
}  # fmt: skip


@dataclass
class ClassificationImportSummary:
    path: str
    dataset: str
    created: int
    positive: int

    @property
    def message(self) -> str:
        return (
            f"Imported {self.created:,} item{pluralize(self.created)} into {self.dataset} from {self.path} "
            f"({self.positive:,} positive, {self.created - self.positive:,} negative)."
        )


def _read_tsv(path: str, layout: GlueLayout, problems: ImportProblems) -> Iterator[_Row]:
    with _open_text(path) as handle:
        lines = _lines(path, handle, problems, tab_field_not_utf8(layout.header))
        try:
            _, first = next(lines)
        except StopIteration:
            problems.raise_found()
            raise ImportFileError(path, None, None, "the file is empty") from None
        problems.raise_found()  # the header line itself was unreadable
        header = tuple(first.rstrip("\r\n").split("\t"))
        if header != layout.header:
            found = "<TAB>".join(header)
            if len(header) == 1 and "," in found:
                found += " (a CSV file? its format is csv)"
            raise ImportFileError(
                path, 1, None, f"the header must be {'<TAB>'.join(layout.header)}; found {found}"
            )
        for line_number, line in lines:
            if not line.strip():
                continue
            values = line.rstrip("\r\n").split("\t")
            if len(values) != len(header):
                problem = f"expected {len(header)} columns, found {len(values)}"
                error = ImportFileError(path, line_number, None, problem)
                yield _refused(line_number, _tsv_id(layout, values), error)
                continue
            row = dict(zip(header, values, strict=True))
            yield _Row(
                line_number,
                row[layout.id_field] if layout.id_field else "",
                row[layout.text],
                row[layout.text_b] if layout.text_b else "",
                layout.label,
                row[layout.label].strip(),
            )


def _tsv_id(layout: GlueLayout, values: list[str]) -> str:
    """Return the id of a line of the wrong width, if its id column is there and ends at a tab
    (a line without the tab is more likely the rest of a line broken in two)."""
    if not layout.id_field:
        return ""
    column = layout.header.index(layout.id_field)
    return values[column] if column < len(values) - 1 else ""


def _read_generic(path: str, fmt: str, problems: ImportProblems) -> Iterator[_Row]:
    if fmt == "csv":
        optional = ["text_b", "id"]
        rows = read_csv(path, required=["text", "label"], optional=optional, problems=problems)
    else:
        _csv_header_refused(path)
        rows = read_jsonl(path, problems)
    for line, row in rows:
        try:
            parsed = _generic_row(path, line, row)
        except ImportFileError as error:
            parsed = _refused(line, _readable_id(path, line, row), error)
        yield parsed


def _csv_header_refused(path: str) -> None:
    """Refuse a CSV file chosen as JSON Lines by its header, as a GLUE layout refuses one,
    rather than name every one of its lines "not valid JSON"."""
    with _open_text(path) as handle:
        try:
            first = handle.readline(1000).rstrip("\r\n")
        except UnicodeDecodeError:
            return  # the reader names the line and field
    header = {name.strip() for name in first.split(",")}
    if not first.lstrip().startswith("{") and {"text", "label"} <= header:
        raise ImportFileError(
            path,
            1,
            None,
            f"not JSON: {first[:200]} is a CSV header (a CSV file? its format is csv)",
        )


def _readable_id(path: str, line: int, row: dict) -> str:
    try:
        return _field_text(path, line, row, "id")
    except ImportFileError:
        return ""


def _field_text(path: str, line: int, row: dict, name: str) -> str:
    value = row.get(name, "")
    if value is None and name in ("text_b", "id"):
        value = ""  # an optional field written as null (pandas' to_json does) is absent
    if isinstance(value, int) and not isinstance(value, bool) and name != "text":
        value = str(value)
    if not isinstance(value, str):
        raise ImportFileError(path, line, name, f"expected text, found {_json_kind(value)}")
    return value


def _generic_row(path: str, line: int, row: dict) -> _Row:
    values = {
        name: _field_text(path, line, row, name) for name in ("text", "label", "text_b", "id")
    }
    if "text" not in row:
        raise ImportFileError(path, line, "text", "this field is missing")
    if "label" not in row:
        raise ImportFileError(path, line, "label", "this field is missing")
    return _Row(
        line, values["id"], values["text"], values["text_b"], "label", values["label"].strip()
    )


def _json_kind(value: object) -> str:
    """Name a JSON value's kind as JSON does ("null", not Python's "NoneType")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    kinds = {int: "a number", float: "a number", list: "a list", dict: "an object"}
    return kinds.get(type(value), type(value).__name__)


def _dataset_for(
    *, path: str, name: str, fmt: str, labels: tuple[str, str] | None, family: str | None
) -> ClassificationDataset:
    layout = GLUE_LAYOUTS.get(fmt)
    dataset = ClassificationDataset.objects.filter(name=name).first()
    if dataset is not None and layout and dataset.family != layout.family:
        raise ImportFileError(
            path, None, "--format",
            f"dataset {name} is {_a(dataset.family)} dataset; {fmt} files hold {layout.family} "
            "data: import it into a dataset of that family",
        )  # fmt: skip
    if dataset is not None:
        if labels and labels != (dataset.positive_name, dataset.negative_name):
            raise ImportFileError(
                path, None, "--labels",
                f"dataset {name} has the golden labels {dataset.positive_name},"
                f"{dataset.negative_name}; found {','.join(labels)}",
            )  # fmt: skip
        held = dataset.items.count()
        if held:
            raise ImportFileError(
                path, None, None,
                f"dataset {name} already has {held} item{pluralize(held)}; a dataset takes the "
                "items of one file, once: import this file into a new dataset, or put every "
                "item in one file and import it into an empty dataset",
            )  # fmt: skip
        return dataset
    names = labels or (layout.default_names if layout else None)
    if names is None:
        raise ImportFileError(
            path, None, "--labels", "a new dataset needs its two golden label names"
        )
    family = family or (layout.family if layout else None)
    if family not in TaskFamily.values:
        raise ImportFileError(
            path, None, "--family", f"a new dataset needs a family, one of {TaskFamily.values}"
        )
    if names[0] == names[1] or not all(names):
        raise ImportFileError(path, None, "--labels", "two different, non-empty label names")
    problem = label_words_problem(*names)
    if problem:
        raise ImportFileError(path, None, "--labels", problem)
    return ClassificationDataset.objects.create(
        name=name, family=family, positive_name=names[0], negative_name=names[1]
    )


def _label_reader(fmt: str, dataset: ClassificationDataset) -> Callable[[str, _Row], bool]:
    layout = GLUE_LAYOUTS.get(fmt)
    if layout:
        values = {layout.positive_value: True, layout.negative_value: False}
    else:
        values = {dataset.positive_name: True, dataset.negative_name: False}

    def read(path: str, row: _Row) -> bool:
        if row.label_value not in values:
            raise ImportFileError(
                path, row.line, row.label_field,
                f"expected {' or '.join(repr(v) for v in values)}, found {row.label_value!r}",
            )  # fmt: skip
        return values[row.label_value]

    return read


def _a(noun: str) -> str:
    return f"{'an' if noun[:1] in 'aeiou' else 'a'} {noun}"


def _pair_check(path: str, dataset: ClassificationDataset, row: _Row) -> None:
    """An entailment or paraphrase prompt shows two texts, the others one: a pair without its
    second text made a prompt with an empty hypothesis, and a text_b on a one-text dataset was
    dropped from every prompt without a word."""
    if dataset.family in PAIR_FAMILIES and not row.text_b.strip():
        raise ImportFileError(
            path, row.line, "text_b",
            f"dataset {dataset.name} is {_a(dataset.family)} dataset of text pairs: the second "
            "text is empty",
        )  # fmt: skip
    if dataset.family not in PAIR_FAMILIES and row.text_b.strip():
        raise ImportFileError(
            path, row.line, "text_b",
            f"dataset {dataset.name} is {_a(dataset.family)} dataset of one text each; its prompts "
            "would not show this second text (a pair needs an entailment or paraphrase dataset)",
        )  # fmt: skip


def _id_check(path: str, fmt: str, row: _Row, first_line_of: dict[str, int]) -> None:
    """Refuse a row id seen on an earlier line: two files pasted together, or a row copied.
    MRPC's "#1 ID" names a sentence, not the pair, and may come back."""
    if not row.external_id or fmt == "glue-mrpc":
        return
    seen = first_line_of.setdefault(row.external_id, row.line)
    if seen != row.line:
        field = GLUE_LAYOUTS[fmt].id_field if fmt in GLUE_LAYOUTS else "id"
        raise ImportFileError(
            path, row.line, field, f"the id {row.external_id!r} is already on line {seen}"
        )


@transaction.atomic
def classification_import(
    *,
    path: str,
    dataset: str,
    fmt: str,
    labels: tuple[str, str] | None = None,
    family: str | None = None,
) -> ClassificationImportSummary:
    """Import one file into `dataset` (created when new); raise ImportFileError on any problem."""
    if fmt not in FORMATS:
        raise ImportFileError(path, None, "--format", f"expected one of {', '.join(FORMATS)}")
    target = _dataset_for(path=path, name=dataset, fmt=fmt, labels=labels, family=family)
    label_of = _label_reader(fmt, target)
    problems = ImportProblems(path)
    if fmt in GLUE_LAYOUTS:
        rows = _read_tsv(path, GLUE_LAYOUTS[fmt], problems)
    else:
        rows = _read_generic(path, fmt, problems)
    items, first_line_of = [], {}
    for position, row in enumerate(rows, start=1):
        with problems.line():
            # A line refused by the reader still holds its id, so that a later line repeating
            # it is named in the same round; its own problem is the one named for it.
            if row.refused:
                if row.external_id:
                    first_line_of.setdefault(row.external_id, row.line)
                raise row.refused
            # The id before the other fields: a line wrong elsewhere still holds its id.
            _id_check(path, fmt, row, first_line_of)
            if not row.text.strip():
                field = "text" if fmt in ("csv", "jsonl") else GLUE_LAYOUTS[fmt].text
                raise ImportFileError(path, row.line, field, "the text is empty")
            if fmt in ("csv", "jsonl"):
                _pair_check(path, target, row)
            items.append(
                ClassificationItem(
                    dataset=target, position=position, external_id=row.external_id[:200],
                    text=row.text, text_b=row.text_b, is_positive=label_of(path, row),
                )
            )  # fmt: skip
    problems.raise_found()
    if not items:
        raise ImportFileError(path, None, None, "the file holds no items")
    ClassificationItem.objects.bulk_create(items, batch_size=1000)
    positive = sum(item.is_positive for item in items)
    return ClassificationImportSummary(path, target.name, len(items), positive)
