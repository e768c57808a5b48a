"""Import labels and direct scores in bulk: stream the file into a staging table, check in SQL.

A file of a million labels never becomes a million Python objects: rows are parsed and checked
while they stream into a temporary table (COPY on PostgreSQL, batched inserts on SQLite), then a
few set-based queries resolve instruction ids, systems and questions, find the bad lines if any
(each wrong row named, up to MAX_PROBLEMS), and insert what is new. Everything runs in one transaction, so an error anywhere writes
nothing.

Where the CPU goes in a million-label CSV import on PostgreSQL, and what keeps it low: a plain CSV
(no quoting) is split into columns a block at a time and checked once per distinct value, so
Python spends about a second where row-by-row parsing took five; any file with something unusual
goes through the row-by-row parser, which names the line and field of a problem. On the server,
the label foreign keys are checked once as a set instead of by one trigger call per row, and when
the table is small next to the import its two indexes are built after the insert instead of
grown a row at a time.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from itertools import islice
from pathlib import Path

from django.db import DatabaseError, IntegrityError, connection, transaction
from django.utils import timezone

from annotate.errors import ImportFileError, ImportFileProblems
from annotate.models import (
    DECIDED_KIND_VALUES,
    LABEL_UNASSIGNED_INDEX,
    Annotator,
    AnnotatorKind,
    Benchmark,
    LabelValue,
    System,
)
from annotate.services.files import (
    MAX_INTEGER_DIGITS,
    MAX_PROBLEMS,
    ImportProblems,
    NeedsRowReader,
    read_csv,
    read_csv_columns,
    read_jsonl,
)
from annotate.services.imports import MAX_QUESTIONS, ImportSummary, benchmark_get_for_import

STAGE = "annotate_import_stage"
RESOLVED = "annotate_import_resolved"
STAGE_COLUMNS = ("line", "instruction", "system", "annotator", "kind", "qindex", "value")
LABEL_CSV_COLUMNS = ["instruction_id", "system", "annotator", "question_index", "label"]
SCORE_CSV_COLUMNS = ["instruction_id", "system", "annotator", "score"]
KIND_COLUMN = "annotator_kind"
# Where a new annotator's kind is given, named for whoever reads the refusal: a file refused on
# the import page named only the command line's option, which the page does not have.
NEW_KIND_WAYS = (
    "'Kind of new annotators' on the import page, --kind on the command line, "
    "annotator_kind in the API"
)
# Written by the raw export (annotate.services.exports): only rows whose work counted are read
# back, so export → import gives the same results.
WORK_STATUS_COLUMN = "work_status"
COUNTED = "counted"
LABEL_NAMES = {choice.label: choice.value for choice in LabelValue}
JSON_VALUES = {True: LabelValue.YES, False: LabelValue.NO, None: LabelValue.UNKNOWN}
# From this many rows on, a label import checks foreign keys once for the whole set (PostgreSQL).
BULK_ROWS = 100_000
BULK_CHECKED_COLUMNS = ("question_id", "response_id", "annotator_id", "assignment_id")
# A bulk label import rebuilds the label indexes instead of growing them row by row while the
# table holds at most this many stored labels per new one. Measured on 1M labels: inserting into
# an index costs about 3.5 µs a row, building it about 1 µs a row of the whole table.
REBUILD_STORED_PER_NEW = 2
WHOLE_NUMBER = re.compile(r"[+-]?[0-9]+")
# The staging table's qindex is an `integer`: a question_index within it is staged, and one its
# instruction does not have is named with that instruction's range, as the file counts
# (_unresolved), rather than with the range the database could store.
STAGED_INDEX_MAX = 2**31 - 1
StageRow = tuple[int, str, str, str, str, int | None, int]
# A query selecting the lines one check finds wrong, with its parameters: asked for only when the
# check found more than it names, to count the wrong lines of all checks together.
LinesQuery = tuple[str, Sequence[object]]
# A row's kind is staged as the file gives it, "" for none: what a line without a kind stands for
# (the stored kind, or --kind for an annotator that is new) is decided per annotator, after staging.
STAGED_KINDS = {"": "", **{kind: kind for kind in DECIDED_KIND_VALUES}}
# COPY's text format gives these characters a meaning, so a value holding one is escaped.
COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


@dataclass(frozen=True)
class _Target:
    """Where staged rows land: labels (per question) or direct scores (per response)."""

    what: str
    table: str
    value_column: str
    per_question: bool


LABELS = _Target("labels", "annotate_label", "value", per_question=True)
SCORES = _Target("direct scores", "annotate_directscore", "score", per_question=False)


# --- parsing: each row checked on its own, as it streams -------------------------------------


def _kind(path: str, line: int, field: str, value: str) -> str:
    kind = value.strip().lower()
    if kind and kind not in DECIDED_KIND_VALUES:
        raise ImportFileError(
            path, line, field, f"expected one of {', '.join(DECIDED_KIND_VALUES)}, found {value!r}"
        )
    return kind


def _text(path: str, line: int, row: dict, field: str) -> str:
    value = row.get(field)
    if not isinstance(value, str) or not value.strip():
        raise ImportFileError(path, line, field, "expected a non-empty text")
    return value.strip()


def _int(path: str, line: int, field: str, value: str, low: int, high: int | None) -> int:
    text = value.strip()
    if not WHOLE_NUMBER.fullmatch(text):
        shown = value if len(value) <= 40 else f"{value[:40]}… ({len(value):,} characters)"
        raise ImportFileError(path, line, field, f"expected a whole number, found {shown!r}")
    bounds = f"from {low}" if high is None else f"{low} to {high}"
    digits = len(text.lstrip("+-"))
    if digits > MAX_INTEGER_DIGITS:  # Python refuses to read over 4,300 digits at all
        raise ImportFileError(
            path, line, field, f"a {digits:,}-digit number is out of range ({bounds})"
        )
    number = int(text)
    if number < low or (high is not None and number > high):
        raise ImportFileError(path, line, field, f"{number} is out of range ({bounds})")
    return number


def _question_index(path: str, line: int, text: str) -> int:
    """Read a CSV question_index: any whole number to look up among its instruction's questions."""
    stripped = text.strip()
    if not WHOLE_NUMBER.fullmatch(stripped):
        return _int(path, line, "question_index", text, 1, None)  # says a whole number is expected
    digits = stripped.lstrip("+-")
    if len(digits) > len(str(STAGED_INDEX_MAX)) or abs(int(stripped)) > STAGED_INDEX_MAX:
        shown = stripped if len(stripped) <= 40 else f"a {len(digits):,}-digit number"
        raise ImportFileError(
            path,
            line,
            "question_index",
            f"{shown} is no question of any instruction: question_index counts an "
            "instruction's questions from 1",
        )
    return int(stripped)


def _plain_index(index: str) -> bool:
    """True for a question number the fast path may read as it is: ASCII digits, in range."""
    return index.isascii() and index.isdigit() and 1 <= int(index[:6]) <= MAX_QUESTIONS


def _label_csv_rows(path: str, problems: ImportProblems) -> Iterator[StageRow]:
    optional = [KIND_COLUMN, WORK_STATUS_COLUMN]
    rows = read_csv(path, required=LABEL_CSV_COLUMNS, optional=optional, problems=problems)
    for line, row in rows:
        if row.get(WORK_STATUS_COLUMN, COUNTED).strip() not in ("", COUNTED):
            continue  # rejected, blocked or unconfirmed work: kept in the file, not counted
        # The fast path takes well-formed rows as they are; anything odd goes through the
        # checks below, which name the field and what was expected. (Inline, and a plain try:
        # a million rows come through here on SQLite.)
        instruction, system, annotator = row["instruction_id"], row["system"], row["annotator"]
        value = LABEL_NAMES.get(row["label"])
        kind = STAGED_KINDS.get(row.get(KIND_COLUMN, ""))
        index = row["question_index"]
        plain = _plain_index(index)
        try:
            if value is None or kind is None or not (instruction and system and annotator):
                value = _label_value(path, line, row["label"])
                kind = _kind(path, line, KIND_COLUMN, row.get(KIND_COLUMN, ""))
                instruction = _text(path, line, row, "instruction_id")
                system = _text(path, line, row, "system")
                annotator = _text(path, line, row, "annotator")
            number = int(index) if plain else _question_index(path, line, index)
        except ImportFileError as error:
            problems.add(error)
            continue
        yield line, instruction.strip(), system.strip(), annotator.strip(), kind, number, value


def _label_csv_copy_blocks(path: str) -> Iterator[tuple[int, str]]:
    """Yield (rows, COPY text) for blocks of a well-formed label CSV, each column checked once.

    The same rows as _label_csv_rows, without Python work per row: each check runs on a block's
    distinct values, and the staging rows are joined into COPY's text format in C. Any value
    the checks do not take as it is raises NeedsRowReader, and the file goes through
    _label_csv_rows instead, which names the line and field of the problem.
    """
    values = {name: str(value) for name, value in LABEL_NAMES.items()}
    for first, columns in read_csv_columns(
        path, required=LABEL_CSV_COLUMNS, optional=[KIND_COLUMN, WORK_STATUS_COLUMN]
    ):
        if not set(columns.get(WORK_STATUS_COLUMN, ())) <= {"", COUNTED}:
            raise NeedsRowReader  # the row reader leaves out the work that did not count
        count = len(columns["label"])
        texts = [_copy_text(columns[name]) for name in LABEL_CSV_COLUMNS[:3]]
        kind = columns.get(KIND_COLUMN, [""] * count)
        staged = zip(
            map(str, range(first, first + count)),
            *texts,
            map(_lookup(STAGED_KINDS, kind), kind),
            map(_lookup(_question_numbers(columns["question_index"])), columns["question_index"]),
            map(_lookup(values, columns["label"]), columns["label"]),
            strict=True,
        )
        yield count, "\n".join(map("\t".join, staged)) + "\n"


def _lookup(known: dict[str, str], column: Sequence[str] = ()) -> Callable[[str], str]:
    """Return the lookup of a column's values, if every distinct one is known."""
    if not known.keys() >= set(column):
        raise NeedsRowReader
    return known.__getitem__


def _copy_text(column: Sequence[str]) -> Sequence[str]:
    """Return the column's values escaped for COPY, if each is a non-empty, stripped text."""
    distinct = set(column)
    if not all(value and value == value.strip() for value in distinct):
        raise NeedsRowReader
    if any(char in "".join(distinct) for char in "\\\t\n\r"):
        return tuple(value.translate(COPY_ESCAPES) for value in column)
    return column


def _question_numbers(column: Sequence[str]) -> dict[str, str]:
    """Map each distinct question index to its number as text, if every one is a number from 1."""
    numbers = {}
    for index in set(column):
        if not _plain_index(index):  # a superscript digit, 0, or more than any instruction has
            raise NeedsRowReader
        numbers[index] = str(int(index))
    return numbers


def _label_value(path: str, line: int, text: str) -> int:
    label = text.strip().upper()
    if label not in LABEL_NAMES:
        raise ImportFileError(path, line, "label", f"expected YES, NO or UNKNOWN, found {text!r}")
    return LABEL_NAMES[label]


def _label_jsonl_rows(
    path: str, system: str, annotator: str, problems: ImportProblems
) -> Iterator[StageRow]:
    for line, row in read_jsonl(path, problems):
        if str(row.get(WORK_STATUS_COLUMN) or COUNTED) != COUNTED:
            continue  # rejected, blocked or unconfirmed work: kept in the file, not counted
        staged = []
        with problems.line():
            staged = list(_label_jsonl_row(path, line, row, system, annotator))
        yield from staged


def _label_jsonl_row(
    path: str, line: int, row: dict, system: str, annotator: str
) -> Iterator[StageRow]:
    instruction = _text(path, line, {"id": row.get("id")}, "id")
    row_system = system or _text_or_option(path, line, row, "system")
    row_annotator = annotator or _text_or_option(path, line, row, "annotator")
    row_kind = _kind(path, line, "kind", str(row.get("kind") or ""))
    values = row.get("eval")
    if not isinstance(values, list):
        raise ImportFileError(path, line, "eval", "expected a list of true, false or null")
    skipped = row.get("missing") or []
    if not isinstance(skipped, list) or not all(isinstance(i, int) for i in skipped):
        raise ImportFileError(path, line, "missing", "expected a list of question numbers")
    for index, value in enumerate(values, start=1):
        if not (value is True or value is False or value is None):
            raise ImportFileError(
                path,
                line,
                f"eval[{index - 1}]",
                f"question {index}: expected true, false or null, found {value!r}",
            )
        if index in skipped:
            continue
        yield line, instruction, row_system, row_annotator, row_kind, index, JSON_VALUES[value]


def _text_or_option(path: str, line: int, row: dict, field: str) -> str:
    """A per-line `system` or `annotator` (as export_labels writes them); the evaluation
    script's lines have neither, so a missing one asks for the option naming the whole file's."""
    if field not in row:
        raise ImportFileError(
            path, line, field, f"this field is missing: give --{field} for the whole file"
        )
    return _text(path, line, row, field)


def _score_csv_rows(path: str, problems: ImportProblems) -> Iterator[StageRow]:
    optional = [KIND_COLUMN]
    for line, row in read_csv(
        path, required=SCORE_CSV_COLUMNS, optional=optional, problems=problems
    ):
        staged = None
        with problems.line():
            staged = (
                line,
                _text(path, line, row, "instruction_id"),
                _text(path, line, row, "system"),
                _text(path, line, row, "annotator"),
                _kind(path, line, KIND_COLUMN, row.get(KIND_COLUMN, "")),
                None,
                _int(path, line, "score", row["score"], 1, 5),
            )
        if staged is not None:
            yield staged


# --- staging and set-based checks -------------------------------------------------------------


CopyBlocks = Callable[[], Iterator[tuple[int, str]]]


def _stage(cursor, rows: Iterator[StageRow], blocks: CopyBlocks | None = None) -> int:
    """Create the staging table and stream the rows into it; return how many rows there were.

    On PostgreSQL, `blocks` (if given) is tried first: a file it cannot take as it is is rolled
    back to the savepoint and streamed again row by row, so its problem is named exactly.
    """
    on_commit = " ON COMMIT DROP" if connection.vendor == "postgresql" else ""
    cursor.execute(f"DROP TABLE IF EXISTS {STAGE}")
    cursor.execute(
        f"CREATE TEMPORARY TABLE {STAGE} (line integer, instruction text, system text, "
        f"annotator text, kind text, qindex integer, value smallint){on_commit}"
    )
    if connection.vendor == "postgresql":
        count = _copy_blocks(cursor, blocks) if blocks else None
        if count is None:
            count = _copy_rows(cursor, rows)
        # A temporary table has no statistics until analysed, and the planner needs them for joins.
        cursor.execute(f"ANALYZE {STAGE}")
        return count
    count = 0
    insert = f"INSERT INTO {STAGE} VALUES ({', '.join(['%s'] * len(STAGE_COLUMNS))})"
    while chunk := list(islice(rows, 10_000)):
        cursor.executemany(insert, chunk)
        count += len(chunk)
    return count


def _copy_sql() -> str:
    return f"COPY {STAGE} ({', '.join(STAGE_COLUMNS)}) FROM STDIN"


def _copy_rows(cursor, rows: Iterator[StageRow]) -> int:
    count = 0
    with cursor.cursor.copy(_copy_sql()) as copy:
        for row in rows:
            copy.write_row(row)
            count += 1
    return count


def _copy_blocks(cursor, blocks: CopyBlocks) -> int | None:
    """Copy the text blocks into the staging table; return None if the file needs the rows."""
    count = 0
    try:
        with transaction.atomic(), cursor.cursor.copy(_copy_sql()) as copy:
            for rows, text in blocks():
                copy.write(text)
                count += rows
    except NeedsRowReader:
        return None
    return count


def _resolve(cursor, benchmark: Benchmark, target: _Target) -> None:
    on_commit = " ON COMMIT DROP" if connection.vendor == "postgresql" else ""
    question_join = (
        "LEFT JOIN annotate_question q ON q.instruction_id = i.id AND q.position = s.qindex"
        if target.per_question
        else ""
    )
    question_id = "q.id" if target.per_question else "0"
    cursor.execute(f"DROP TABLE IF EXISTS {RESOLVED}")
    cursor.execute(
        f"CREATE TEMPORARY TABLE {RESOLVED}{on_commit} AS "
        f"SELECT s.line, s.instruction, s.system, s.qindex, s.annotator, s.value, "
        f"i.id AS instruction_id, sy.id AS system_id, r.id AS response_id, {question_id} AS question_id "
        f"FROM {STAGE} s "
        f"LEFT JOIN annotate_instruction i ON i.benchmark_id = %s AND i.external_id = s.instruction "
        f"LEFT JOIN annotate_system sy ON sy.name = s.system "
        f"LEFT JOIN annotate_response r ON r.instruction_id = i.id AND r.system_id = sy.id "
        f"{question_join}",
        [benchmark.pk],
    )


# Where the file says what the staged columns hold: a label CSV's own column names, and in the
# evaluation JSON Lines its `id`, the `--system` argument (or a `system` field) and `eval[i]`;
# `questions` is an instruction's questions in the file's numbering: question_index counts from
# 1, a field path indexes its JSON list from 0 (`eval[0]` is question 1).
CSV_FIELDS = {
    "instruction": "instruction_id",
    "system": "system",
    "question": "question_index",
    "questions": "question_index 1 to {count}",
    "kind": KIND_COLUMN,
}


def _jsonl_fields(system_argument: bool) -> dict[str, str]:
    return {
        "instruction": "id",
        "system": "--system" if system_argument else "system",
        "question": "eval[{position}]",
        "questions": "eval[0] to eval[{last}]",
        "kind": "kind",
        "value": "eval[{position}]",
    }


def _unresolved_problems(
    cursor, path: str, benchmark: Benchmark, fields: dict[str, str]
) -> tuple[list[ImportFileError], LinesQuery | None]:
    """Return the rows whose instruction, system, response or question is not stored (the
    first MAX_PROBLEMS lines, in file order), and the query of all their lines if there are more.

    A JSON Lines line is several rows, named once. A fixed number of queries whatever the
    file's size.
    """
    unresolved = "(response_id IS NULL OR question_id IS NULL)"
    cursor.execute(
        f"SELECT DISTINCT line FROM {RESOLVED} WHERE {unresolved} ORDER BY line "
        f"LIMIT {MAX_PROBLEMS}"
    )
    lines = [line for (line,) in cursor.fetchall()]
    if not lines:  # the usual case: one pass over the staged rows
        return [], None
    cursor.execute(
        f"SELECT line, instruction, system, qindex, instruction_id, system_id, response_id, question_id "
        f"FROM {RESOLVED} WHERE {unresolved} AND line IN ({', '.join(['%s'] * len(lines))}) "
        "ORDER BY line, qindex",
        lines,
    )
    bad_rows, named = [], set()
    for bad in cursor.fetchall():
        if bad[0] not in named:
            named.add(bad[0])
            bad_rows.append(bad)
    questions = _question_counts(
        cursor, {bad[4] for bad in bad_rows if bad[4] is not None and bad[6] is not None}
    )
    problems = [_unresolved(path, benchmark, bad, fields, questions) for bad in bad_rows]
    every_line = f"SELECT line FROM {RESOLVED} WHERE {unresolved}"
    return problems, _if_more(problems, every_line)


def _if_more(
    named: Sequence[ImportFileError], lines: str, params: Sequence[object] = ()
) -> LinesQuery | None:
    """Return the query of a check's wrong `lines` if it may find more than the `named` ones
    (one each, the first MAX_PROBLEMS or all of them); None when they are all."""
    return (lines, params) if len(named) >= MAX_PROBLEMS else None


def _raise_problems(
    cursor, path: str, found: list[ImportFileError], more: Sequence[LinesQuery | None] = ()
) -> None:
    """Raise the problems found, if any, one per line: the first MAX_PROBLEMS lines in file
    order, the rest counted.

    `found` holds each check's problems in the order the checks ran, so a line wrong in two
    ways is named by the first check's problem. `more`: the lines queries of the checks that
    found more lines than they named; their lines and the named ones are counted together in
    one query, so a line two checks find counts once.
    """
    if not found:
        return
    first_of_line: dict[int, ImportFileError] = {}
    for problem in sorted(found, key=lambda problem: problem.line or 0):  # stable
        first_of_line.setdefault(problem.line or 0, problem)
    named = list(first_of_line.values())
    wrong_lines = _wrong_line_count(cursor, first_of_line.keys(), [q for q in more if q])
    if wrong_lines == 1:
        raise named[0]
    named = named[:MAX_PROBLEMS]
    raise ImportFileProblems(path, named, stopped=False, more=wrong_lines - len(named))


def _wrong_line_count(cursor, named: Collection[int], queries: list[LinesQuery]) -> int:
    """Return how many distinct lines are wrong: the `named` ones and those the `queries` select.

    Lines refused by the reading are not staged, so they are counted beside the queries' lines.
    """
    if not queries:
        return len(named)
    union = " UNION ".join(
        f"SELECT line FROM ({sql}) AS q{n}" for n, (sql, _) in enumerate(queries)
    )
    listed = ", ".join(["%s"] * len(named))
    cursor.execute(
        f"SELECT COUNT(*), COUNT(CASE WHEN line IN ({listed}) THEN 1 END) FROM ({union}) AS u",
        [*named, *(param for _, params in queries for param in params)],
    )
    selected, selected_named = cursor.fetchone()
    return selected + len(named) - selected_named


def _question_counts(cursor, instruction_ids: set[int]) -> dict[int, int]:
    """Return how many questions each of these instructions has (one query)."""
    if not instruction_ids:
        return {}
    ids = sorted(instruction_ids)
    cursor.execute(
        "SELECT instruction_id, COUNT(*) FROM annotate_question "
        f"WHERE instruction_id IN ({', '.join(['%s'] * len(ids))}) GROUP BY instruction_id",
        ids,
    )
    return dict(cursor.fetchall())


def _unresolved(
    path: str, benchmark: Benchmark, bad: tuple, fields: dict[str, str], questions: dict[int, int]
) -> ImportFileError:
    """Say what a row names that is not stored."""
    line, instruction, system, qindex, instruction_id, system_id, response_id, _ = bad
    if instruction_id is None:
        return ImportFileError(
            path,
            line,
            fields["instruction"],
            f"no instruction {instruction!r} in benchmark {benchmark.name!r}",
        )
    if system_id is None:
        return ImportFileError(
            path,
            line,
            fields["system"],
            f"no system named {system!r}: import its responses first",
        )
    if response_id is None:
        return ImportFileError(
            path,
            line,
            fields["system"],
            f"{system} has no response to {instruction!r}: import its responses first",
        )
    count = questions.get(instruction_id, 0)
    valid = fields["questions"].format(count=count, last=count - 1)
    return ImportFileError(
        path,
        line,
        fields["question"].format(position=(qindex or 1) - 1),
        f"instruction {instruction!r} has {count} question{'' if count == 1 else 's'} "
        f"({valid}); there is no question {qindex}",
    )


def _annotators_checked(
    cursor, path: str, fields: dict[str, str], default_kind: str
) -> tuple[dict[str, str], list[ImportFileError], LinesQuery | None]:
    """Return the annotators the file names for the first time (name: kind), the problems (a
    kind that contradicts, or none for a new annotator) and, if more lines give a second kind
    than are named, the query of them all. One query over the file, and one more if an
    annotator has two kinds.

    A line without a kind stands for the stored kind of a stored annotator, and for
    `default_kind` (--kind) of a new one: --kind is the kind of annotators that are new.
    """
    # MIN(kind) is '' when some line gives no kind ('' sorts before every kind).
    cursor.execute(
        f"SELECT annotator, MIN(NULLIF(kind, '')), MAX(NULLIF(kind, '')), MIN(line), "
        f"MIN(CASE WHEN kind <> '' THEN line END), MIN(kind) FROM {STAGE} GROUP BY annotator"
    )
    rows = cursor.fetchall()
    stored = dict(
        Annotator.objects.filter(name__in=[r[0] for r in rows]).values_list("name", "kind")
    )
    new, problems, two_kinds = {}, [], False
    for name, low, high, line, kind_line, lowest in rows:
        if name not in stored and default_kind and lowest == "":
            low, high = (
                min(low or default_kind, default_kind),
                max(high or default_kind, default_kind),
            )
        if low != high:
            two_kinds = True
            continue
        kind = low or ""
        if name in stored:
            if kind and stored[name] != kind:
                problems.append(
                    ImportFileError(
                        path,
                        kind_line,
                        fields["kind"],
                        f"annotator {name!r} is stored as {stored[name]}, the file says {kind}",
                    )
                )
            continue
        if not kind:
            problems.append(
                ImportFileError(
                    path,
                    line,
                    "annotator",
                    f"annotator {name!r} is new: give its kind, expert, crowd or llm ({NEW_KIND_WAYS}"
                    f", or an {KIND_COLUMN} column)",
                )
            )
            continue
        new[name] = kind
    if not two_kinds:
        return new, problems, None
    second_kinds, more = _second_kinds(cursor, path, fields, default_kind)
    return new, [*problems, *second_kinds], more


def _second_kinds(
    cursor, path: str, fields: dict[str, str], default_kind: str
) -> tuple[list[ImportFileError], LinesQuery | None]:
    """Return the lines giving an annotator another kind than its first line with a kind gave
    (the first MAX_PROBLEMS, in file order), and the query of them all if there are more.

    Each is named, not only the annotator's first: the line to correct is the one whose kind
    differs, and a file that gives a second kind on many lines is fixed in one attempt. A line
    without a kind gives `default_kind` to a new annotator and nothing to a stored one.
    """
    given = (
        "SELECT s.line, s.annotator, CASE WHEN s.kind = '' THEN 1 ELSE 0 END AS defaulted, "
        "COALESCE(NULLIF(s.kind, ''), CASE WHEN a.id IS NULL THEN %s END, '') AS kind "
        f"FROM {STAGE} s LEFT JOIN annotate_annotator a ON a.name = s.annotator"
    )
    kinds = (
        "SELECT line, annotator, kind, defaulted, FIRST_VALUE(line) OVER earlier AS first_line, "
        "FIRST_VALUE(kind) OVER earlier AS first_kind, "
        f"FIRST_VALUE(defaulted) OVER earlier AS first_defaulted FROM ({given}) g WHERE kind <> '' "
        "WINDOW earlier AS (PARTITION BY annotator ORDER BY line)"
    )
    cursor.execute(
        "SELECT DISTINCT line, annotator, kind, defaulted + first_defaulted, first_line, "
        f"first_kind FROM ({kinds}) k WHERE kind <> first_kind ORDER BY line LIMIT {MAX_PROBLEMS}",
        [default_kind],
    )
    problems = []
    for line, name, kind, defaulted, first_line, first_kind in cursor.fetchall():
        by_default = (
            f" (--kind {default_kind} stands for a line that gives none)" if defaulted else ""
        )
        problems.append(
            ImportFileError(
                path,
                line,
                fields["kind"],
                f"{kind!r} but line {first_line} gave {first_kind!r} for annotator {name!r}"
                f"{by_default}: an annotator has one kind",
            )
        )
    every_line = f"SELECT line FROM ({kinds}) k WHERE kind <> first_kind"
    return problems, _if_more(problems, every_line, [default_kind])


def _annotators_create(new: dict[str, str]) -> None:
    """Create the annotators the file names for the first time."""
    for name, kind in new.items():
        Annotator.objects.create(
            name=name, kind=kind, judge_config=name if kind == AnnotatorKind.LLM else ""
        )


def _keys(target: _Target, alias: str, annotator: str) -> str:
    question = f"{alias}.question_id = r.question_id AND " if target.per_question else ""
    return f"{question}{alias}.response_id = r.response_id AND {alias}.annotator_id = {annotator}"


def _group(target: _Target) -> str:
    return (
        "question_id, response_id, annotator" if target.per_question else "response_id, annotator"
    )


def _value_field(target: _Target, fields: dict[str, str], qindex: int | None) -> str:
    """Name the file's field holding a row's value: a CSV's label or score column, in the
    evaluation JSON Lines `eval[i]`."""
    named = fields.get("value", "label" if target.per_question else target.value_column)
    return named.format(position=(qindex or 1) - 1)


def _file_conflicts(
    cursor, path: str, target: _Target, fields: dict[str, str]
) -> tuple[list[ImportFileError], LinesQuery | None]:
    """Return the rows giving a key another value than the key's first row in the file gave
    (the first MAX_PROBLEMS lines, in file order), and the query of all their lines if there
    are more.

    Rows naming what is not stored are left out: they have no key.
    """
    resolved = "response_id IS NOT NULL AND question_id IS NOT NULL"
    # Grouping finds whether there is any at all faster than the ordered scan that names them.
    cursor.execute(
        f"SELECT 1 FROM {RESOLVED} WHERE {resolved} GROUP BY {_group(target)} "
        "HAVING MIN(value) <> MAX(value) LIMIT 1"
    )
    if cursor.fetchone() is None:
        return [], None
    keyed = (
        "SELECT line, qindex, value, FIRST_VALUE(line) OVER earlier AS first_line, "
        f"FIRST_VALUE(value) OVER earlier AS first_value FROM {RESOLVED} WHERE {resolved} "
        f"WINDOW earlier AS (PARTITION BY {_group(target)} ORDER BY line)"
    )
    cursor.execute(
        "SELECT line, qindex, first_line FROM (SELECT line, qindex, first_line, "
        "ROW_NUMBER() OVER (PARTITION BY line ORDER BY qindex) AS nth "
        f"FROM ({keyed}) k WHERE value <> first_value) d "
        f"WHERE nth = 1 ORDER BY line LIMIT {MAX_PROBLEMS}"
    )
    problems = [
        ImportFileError(
            path,
            line,
            _value_field(target, fields, qindex),
            f"the same {target.what[:-1]} appears on line {first_line} with a different value",
        )
        for line, qindex, first_line in cursor.fetchall()
    ]
    every_line = f"SELECT line FROM ({keyed}) k WHERE value <> first_value"
    return problems, _if_more(problems, every_line)


def _stored_conflicts(
    cursor, path: str, target: _Target, fields: dict[str, str]
) -> tuple[int, list[ImportFileError], LinesQuery | None]:
    """Return how many rows are stored already, the rows that contradict a stored value (the
    first MAX_PROBLEMS lines, in file order), and the query of all their lines if there are
    more."""
    joined = (
        f"FROM {RESOLVED} r JOIN annotate_annotator a ON a.name = r.annotator "
        f"JOIN {target.table} t ON {_keys(target, 't', 'a.id')}"
    )
    differs = f"t.{target.value_column} <> r.value"
    cursor.execute(f"SELECT COUNT(*), MIN(CASE WHEN {differs} THEN r.line END) {joined}")
    overlapping, first_clash = cursor.fetchone()
    if first_clash is None:
        return overlapping, [], None
    cursor.execute(
        "SELECT line, qindex, stored, new FROM (SELECT r.line, r.qindex, "
        f"t.{target.value_column} AS stored, r.value AS new, "
        f"ROW_NUMBER() OVER (PARTITION BY r.line ORDER BY r.qindex) AS nth {joined} "
        f"WHERE {differs}) c WHERE nth = 1 ORDER BY line LIMIT {MAX_PROBLEMS}"
    )
    names = {v: k for k, v in LABEL_NAMES.items()} if target.per_question else {}
    problems = [
        ImportFileError(
            path,
            line,
            _value_field(target, fields, qindex),
            f"a stored {target.what[:-1]} says {names.get(stored, stored)}, the file says "
            f"{names.get(new, new)}; nothing was overwritten",
        )
        for line, qindex, stored, new in cursor.fetchall()
    ]
    every_line = f"SELECT r.line AS line {joined} WHERE {differs}"
    return overlapping, problems, _if_more(problems, every_line)


def _insert(cursor, target: _Target, skip_stored: bool, distinct: bool = True) -> int:
    """Insert the rows not yet stored; return how many.

    Without `distinct`, a row the file repeats word for word is inserted twice (and refused by
    the unique constraint): for when the indexes are built after the insert, where neither the
    sort nor the key order buys anything.
    """
    question = "r.question_id, " if target.per_question else ""
    question_column = "question_id, " if target.per_question else ""
    not_stored = (
        f"WHERE NOT EXISTS (SELECT 1 FROM {target.table} t WHERE {_keys(target, 't', 'a.id')})"
        if skip_stored
        else ""
    )
    # In key order: the unique index then grows at its end instead of at random pages.
    order = " ORDER BY 1, 2, 3" if distinct else ""
    # imported: the row counts without an assignment even for a platform's worker (a raw export
    # read back holds only the work that counted; annotate.selectors.results).
    cursor.execute(
        f"INSERT INTO {target.table} "
        f"({question_column}response_id, annotator_id, {target.value_column}, imported, "
        "created_at) "
        f"SELECT {'DISTINCT ' if distinct else ''}{question}r.response_id, a.id, r.value, %s, %s "
        f"FROM {RESOLVED} r JOIN annotate_annotator a ON a.name = r.annotator {not_stored}{order}",
        [True, timezone.now()],
    )
    return cursor.rowcount


def _insert_new(
    cursor, path: str, target: _Target, fields: dict[str, str], new_rows: int, skip_stored: bool
) -> int:
    """Insert the rows not yet stored, refusing in-file conflicts; return how many."""
    rebuild = _rebuild_pays(cursor, new_rows, target)
    try:
        with transaction.atomic(), _indexes_rebuilt(cursor, rebuild):
            return _insert(cursor, target, skip_stored, distinct=not rebuild)
    except IntegrityError:
        # Two rows of the file give one key different values (and the file has no other
        # problem: _check_rows looked for these too if it had); find them for the message.
        in_file, more = _file_conflicts(cursor, path, target, fields)
        _raise_problems(cursor, path, in_file, [more])
        if not rebuild:
            raise
    # No conflict: the file repeats some rows word for word, and each goes in once.
    with transaction.atomic(), _indexes_rebuilt(cursor, rebuild):
        return _insert(cursor, target, skip_stored, distinct=True)


def _distinct_keys(cursor, target: _Target) -> int:
    cursor.execute(f"SELECT COUNT(*) FROM (SELECT DISTINCT {_group(target)} FROM {RESOLVED}) AS k")
    return cursor.fetchone()[0]


def _label_foreign_keys(cursor) -> list[tuple[str, str, str]]:
    """Return (constraint, column, referenced table) of the label table's foreign keys."""
    constraints = connection.introspection.get_constraints(cursor, LABELS.table)
    return [
        (name, info["columns"][0], info["foreign_key"][0])
        for name, info in sorted(constraints.items())
        if info["foreign_key"] and info["columns"][0] in BULK_CHECKED_COLUMNS
    ]


def _check_deferred_constraints_now(cursor) -> None:
    """Run the foreign key checks this transaction has deferred so far, and defer later ones.

    PostgreSQL refuses to alter a table (or one its foreign keys refer to) while checks on it
    wait for the commit, as they do after the annotators this import creates. Every deferrable
    constraint of the schema is initially deferred (Django makes them so), so deferring them all
    again afterwards restores the transaction's setting.
    """
    cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    cursor.execute("SET CONSTRAINTS ALL DEFERRED")


@contextmanager
def _foreign_keys_checked_once(cursor, new_rows: int, target: _Target) -> Iterator[None]:
    """For a label import with many new rows on PostgreSQL, check the foreign keys once, as a set.

    PostgreSQL checks a foreign key with one trigger call per inserted row, which is half the
    time of a million-label import. Inside the import's transaction the constraints are dropped,
    the rows inserted, and the constraints added back and validated in one scan each; the table
    is locked meanwhile (readers of labels wait too), and a failure rolls everything back.
    Without the right to alter the table (not its owner), the import simply runs the slower way.
    """
    if connection.vendor != "postgresql" or not target.per_question or new_rows < BULK_ROWS:
        yield
        return
    foreign_keys = _label_foreign_keys(cursor)
    try:
        with transaction.atomic():
            _check_deferred_constraints_now(cursor)
            for name, _, _ in foreign_keys:
                cursor.execute(f'ALTER TABLE {LABELS.table} DROP CONSTRAINT "{name}"')
    except DatabaseError:
        yield
        return
    yield
    for name, column, table in foreign_keys:
        cursor.execute(
            f'ALTER TABLE {LABELS.table} ADD CONSTRAINT "{name}" FOREIGN KEY ({column}) '
            f"REFERENCES {table} (id) DEFERRABLE INITIALLY DEFERRED NOT VALID"
        )
        cursor.execute(f'ALTER TABLE {LABELS.table} VALIDATE CONSTRAINT "{name}"')


def _rebuilt_indexes(cursor) -> list[tuple[str, str, str]]:
    """Return (name, constraint or index, definition) of the label indexes worth rebuilding.

    Not the primary key (other tables refer to it) nor the partial index on assignment
    (imported rows do not enter it); the partial one on labels without an assignment is, as
    every imported row enters it.
    """
    cursor.execute(
        "SELECT c.relname, con.conname IS NOT NULL, "
        "COALESCE(pg_get_constraintdef(con.oid), pg_get_indexdef(i.indexrelid)) "
        "FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "LEFT JOIN pg_constraint con ON con.conindid = i.indexrelid AND con.conrelid = i.indrelid "
        "WHERE i.indrelid = %s::regclass AND NOT i.indisprimary "
        "AND (i.indpred IS NULL OR c.relname = %s) ORDER BY c.relname",
        [LABELS.table, LABEL_UNASSIGNED_INDEX],
    )
    return [
        (name, "constraint" if is_constraint else "index", definition)
        for name, is_constraint, definition in cursor.fetchall()
    ]


def _stored_labels(cursor) -> float:
    cursor.execute("SELECT reltuples FROM pg_class WHERE oid = %s::regclass", [LABELS.table])
    (estimate,) = cursor.fetchone()
    if estimate < 0:  # never analysed: count
        cursor.execute(f"SELECT COUNT(*) FROM {LABELS.table}")
        (estimate,) = cursor.fetchone()
    return estimate


def _rebuild_pays(cursor, new_rows: int, target: _Target) -> bool:
    """Tell whether building the label indexes after the insert beats growing them row by row."""
    return (
        connection.vendor == "postgresql"
        and target.per_question
        and new_rows >= BULK_ROWS
        and _stored_labels(cursor) <= REBUILD_STORED_PER_NEW * new_rows
    )


@contextmanager
def _indexes_rebuilt(cursor, rebuild: bool) -> Iterator[None]:
    """If `rebuild`, drop the label indexes for the block and build them again at its end.

    Growing a B-tree one row at a time costs several times what building it from the whole
    table does, so for a label import large next to the stored labels, the unique and the lookup
    index are dropped inside the import's transaction and built again after the insert. The
    unique index is the unique constraint, so building it refuses duplicate keys with the same
    IntegrityError the row-by-row insert raises; any failure rolls the drop back. Without the
    right to alter the table (not its owner), the import simply runs the slower way.
    """
    if not rebuild:
        yield
        return
    indexes = _rebuilt_indexes(cursor)
    try:
        with transaction.atomic():
            _check_deferred_constraints_now(cursor)
            for name, kind, _ in indexes:
                drop = f'ALTER TABLE {LABELS.table} DROP CONSTRAINT "{name}"'
                cursor.execute(drop if kind == "constraint" else f'DROP INDEX "{name}"')
    except DatabaseError:
        yield
        return
    yield
    _check_deferred_constraints_now(cursor)
    # Building each index sorts the whole table: in memory, not in temporary files.
    cursor.execute("SET LOCAL maintenance_work_mem = '256MB'")
    for name, kind, definition in indexes:
        add = f'ALTER TABLE {LABELS.table} ADD CONSTRAINT "{name}" {definition}'
        cursor.execute(add if kind == "constraint" else definition)


def _check_rows(
    cursor,
    path: str,
    benchmark: Benchmark,
    target: _Target,
    problems: ImportProblems,
    fields: dict[str, str],
    default_kind: str,
) -> tuple[dict[str, str], int]:
    """Refuse the file if any row is wrong; return the annotators it names for the first time
    (name: kind) and how many of its rows are stored already.

    One attempt names every wrong line, up to MAX_PROBLEMS in file order and the rest counted:
    the lines the reading refused (`problems`), then, of the rows it took, those giving an
    annotator a second kind or one contradicting the stored kind, those naming what is not
    stored, and those contradicting a stored value or an earlier row of the file. Rows of the
    file contradicting each other are looked for here only when something else is wrong: in a
    good file the insert's unique constraint finds them for nothing.
    """
    new_annotators, kinds, kinds_more = _annotators_checked(cursor, path, fields, default_kind)
    unresolved, unresolved_more = _unresolved_problems(cursor, path, benchmark, fields)
    overlapping, clashes, clashes_more = _stored_conflicts(cursor, path, target, fields)
    found = [*problems.found, *kinds, *unresolved, *clashes]
    if found:
        # After the clashes: a line contradicting a stored value is named for that alone, as
        # the earlier line of the file it differs from is then, most likely, the stored value.
        in_file, in_file_more = _file_conflicts(cursor, path, target, fields)
        more = [kinds_more, unresolved_more, clashes_more, in_file_more]
        _raise_problems(cursor, path, [*found, *in_file], more)
    return new_annotators, overlapping


def _import_staged(
    path: str,
    benchmark_name: str,
    target: _Target,
    rows: Iterator[StageRow],
    problems: ImportProblems,
    blocks: CopyBlocks | None = None,
    fields: dict[str, str] = CSV_FIELDS,
    default_kind: str = "",
) -> ImportSummary:
    benchmark = benchmark_get_for_import(path, benchmark_name)
    summary = ImportSummary(path=path, what=target.what)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # Sorting and hashing a million staged rows in memory, not in temporary files.
            cursor.execute("SET LOCAL work_mem = '256MB'")
        summary.rows = _stage(cursor, rows, blocks)
        if summary.rows == 0:
            problems.raise_found()
            raise ImportFileError(path, None, None, f"the file holds no {target.what}")
        _resolve(cursor, benchmark, target)
        new_annotators, overlapping = _check_rows(
            cursor, path, benchmark, target, problems, fields, default_kind
        )
        _annotators_create(new_annotators)
        new_rows = summary.rows - overlapping
        with _foreign_keys_checked_once(cursor, new_rows, target):
            summary.created = _insert_new(
                cursor, path, target, fields, new_rows, skip_stored=overlapping > 0
            )
        summary.unchanged = _distinct_keys(cursor, target) - summary.created if overlapping else 0
        if connection.vendor != "postgresql":
            cursor.execute(f"DROP TABLE IF EXISTS {STAGE}")
            cursor.execute(f"DROP TABLE IF EXISTS {RESOLVED}")
    summary.details = {"benchmark": benchmark.name}
    return summary


@transaction.atomic
def labels_import(
    *,
    path: str,
    benchmark_name: str,
    system_name: str = "",
    annotator_name: str = "",
    kind: str = "",
) -> ImportSummary:
    """Import YES/NO/UNKNOWN labels from a long CSV or the official evaluation JSON Lines.

    CSV (by the .csv suffix): header instruction_id,system,annotator,question_index,label
    (question_index from 1; an optional annotator_kind column). JSON Lines: `id` and `eval`, a
    list of true/false/null per question in order (null = UNKNOWN; a shorter list leaves the rest
    unlabelled), for the system and annotator named by the arguments (or per-line `system`,
    `annotator`, `kind` fields, as export_labels writes them). `kind` is the kind of annotators
    that are new, for their lines that give none; a stored annotator's lines keep its kind.
    """
    kind = _kind(path, 0, "--kind", kind) if kind else ""
    problems = ImportProblems(path)
    if Path(path).suffix.lower() == ".csv":
        rows = _label_csv_rows(path, problems)
        blocks = partial(_label_csv_copy_blocks, path)
        return _import_staged(
            path, benchmark_name, LABELS, rows, problems, blocks, default_kind=kind
        )
    system_name = system_name.strip()
    if system_name and not System.objects.filter(name=system_name).exists():
        # Said once for the file: every line would otherwise repeat it.
        raise ImportFileError(
            path, None, "--system", f"no system named {system_name!r}: import its responses first"
        )
    rows = _label_jsonl_rows(path, system_name, annotator_name.strip(), problems)
    fields = _jsonl_fields(system_argument=bool(system_name))
    return _import_staged(
        path, benchmark_name, LABELS, rows, problems, fields=fields, default_kind=kind
    )


@transaction.atomic
def scores_import(*, path: str, benchmark_name: str, kind: str = "") -> ImportSummary:
    """Import 1–5 direct scores from a long CSV: instruction_id,system,annotator,score."""
    kind = _kind(path, 0, "--kind", kind) if kind else ""
    problems = ImportProblems(path)
    rows = _score_csv_rows(path, problems)
    return _import_staged(path, benchmark_name, SCORES, rows, problems, default_kind=kind)
