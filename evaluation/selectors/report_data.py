"""Read one benchmark's labels, scores and assignments into numpy arrays for the report.

A report over a million labels must never build a Python object per label: on PostgreSQL each label
column arrives as one binary array decoded by numpy in a single call; elsewhere (SQLite) through the
DB-API cursor. Everything else (instructions, questions, responses, annotators) is small.

The item space is every (response, question of that response's instruction) pair; `item_*` arrays
describe it, `label_*` arrays hold one entry per stored label, already mapped to item indices.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import psycopg
from django.db import connection
from django.db.models import Value
from django.db.models.functions import Length, Replace
from psycopg import pq
from psycopg.adapt import Loader

from annotate.models import (
    Annotator,
    Assignment,
    Benchmark,
    DirectScore,
    Instruction,
    Label,
    Question,
    Response,
    Subset,
)
from annotate.selectors.annotator_kinds import annotators_counted
from annotate.selectors.results import counted_work, counted_work_sql

SUBSET_CODES = {Subset.EASY.value: 0, Subset.HARD.value: 1}
KIND_CODES = {"expert": 0, "crowd": 1, "llm": 2}


@dataclass
class BenchmarkArrays:
    """Everything the report computes from, as arrays indexed by position (not database id)."""

    benchmark: Benchmark
    systems: list[str]
    domains: list[str]  # full categories ("Natural Sciences: Biology", "Gmail", ...)
    principal_domains: list[str]  # the part of a category before ':' (paper Figure 4)
    instruction_external_ids: list[str]
    annotator_names: list[str]
    annotator_kinds: np.ndarray  # int8 per annotator: KIND_CODES
    instruction_subset: np.ndarray  # int8 per instruction: 0 easy, 1 hard
    instruction_domain: np.ndarray  # int per instruction: index into domains
    instruction_principal: np.ndarray  # int per instruction: index into principal_domains
    instruction_words: np.ndarray  # int per instruction: INSTRUCTION_WORDS (paper Table 2)
    questions_per_instruction: np.ndarray  # int per instruction
    question_instruction: np.ndarray  # int per question
    question_mask: np.ndarray  # int per question: constraint-type bits
    question_position: np.ndarray  # int per question: 1-based position in its instruction
    item_response: np.ndarray  # int per item
    item_question: np.ndarray  # int per item
    item_instruction: np.ndarray  # int per item
    item_system: np.ndarray  # int per item
    response_instruction: np.ndarray  # int per response
    response_system: np.ndarray  # int per response
    label_item: np.ndarray  # int per label
    label_annotator: np.ndarray  # int per label
    label_value: np.ndarray  # int8 per label: 0 NO, 1 YES, 2 UNKNOWN
    shown_annotator: np.ndarray  # per label given through an assignment: its annotator
    shown_value: np.ndarray  # its value
    shown_position: np.ndarray  # where its response was shown: 0 = System A, -1 not shown
    score_instruction: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    score_system: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    score_annotator: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    score_value: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int8))

    @property
    def n_instructions(self) -> int:
        return len(self.instruction_subset)

    @property
    def n_systems(self) -> int:
        return len(self.systems)

    @property
    def n_items(self) -> int:
        return len(self.item_response)


def _index_of(sorted_ids: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Map database ids to positions in `sorted_ids` (all ids must be present)."""
    return np.searchsorted(sorted_ids, ids)


def _label_columns_sql(
    benchmark_id: int, columns: str, condition: str = "TRUE"
) -> tuple[str, tuple]:
    """Select integer columns of the benchmark's counted labels (l) that meet `condition`.

    Only labels that count in results are read (annotate.selectors.results: no rejected work,
    no blocked worker, no crowd work the platform has not confirmed).
    """
    counted, params = counted_work_sql("l")
    # The semi-join on the benchmark's responses is cheaper than joining each label's instruction.
    sql = (
        f"SELECT {columns} FROM {Label._meta.db_table} l WHERE {condition} AND {counted} "
        f"AND l.response_id IN (SELECT r.id FROM {Response._meta.db_table} r "
        f"JOIN {Instruction._meta.db_table} i ON i.id = r.instruction_id "
        f"WHERE i.benchmark_id = {int(benchmark_id)})"
    )
    return sql, params


# Packing the value (0..2) with the annotator saves the server a column of a million; the
# assignment is fetched only for the labels that have one (a partial index finds them).
_LABEL_COLUMNS = (
    "CAST(l.question_id AS INTEGER), CAST(l.response_id AS INTEGER), "
    "CAST(l.annotator_id * 4 + l.value AS INTEGER)"
)
_SHOWN_LABEL_COLUMNS = (
    "CAST(l.response_id AS INTEGER), CAST(l.annotator_id * 4 + l.value AS INTEGER), "
    "CAST(l.assignment_id AS INTEGER)"
)


class _RawBytes(Loader):
    """Hand a value over as the bytes PostgreSQL sent, for numpy to decode."""

    format = pq.Format.BINARY

    def load(self, data) -> bytes:
        return bytes(data)


_INT4_ARRAY_OID = 1007
# A one-dimensional binary int4[]: ndim, has-null flag, element type, size, lower bound; then
# each element as (length = 4, value), all big-endian.
_ARRAY_HEADER_BYTES = 20
_ARRAY_ELEMENT = np.dtype([("length", ">i4"), ("value", ">i4")])


def _decode_int4_array(data: bytes | None) -> np.ndarray:
    if not data:
        return np.zeros(0, dtype=np.int64)
    return np.frombuffer(data, dtype=_ARRAY_ELEMENT, offset=_ARRAY_HEADER_BYTES)["value"]


def _columns_from_postgresql(sql: str, params: tuple, n_columns: int) -> np.ndarray:
    """Fetch each label column as one binary int4[] (array_agg) and decode it in one numpy call.

    Rows of a COPY or a SELECT reach Python one at a time, which costs seconds for a million
    labels; one array per column costs the server an aggregate and Python nothing per row.
    """
    names = [f"c{i}" for i in range(n_columns)]
    columns = ", ".join(f"array_agg({name})" for name in names)
    aggregated = f"SELECT {columns} FROM ({sql}) AS labels ({', '.join(names)})"
    connection.ensure_connection()
    with psycopg.Cursor(connection.connection) as cursor:
        cursor.adapters.register_loader(_INT4_ARRAY_OID, _RawBytes)
        cursor.execute(aggregated, params, binary=True)
        arrays = cursor.fetchone()
    return np.stack([_decode_int4_array(a).astype(np.int64) for a in arrays], axis=1)


def _columns_from_cursor(sql: str, params: tuple, n_columns: int) -> np.ndarray:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return np.array(rows, dtype=np.int64).reshape(-1, n_columns)


def _fetch_columns(query: tuple[str, tuple], n_columns: int) -> np.ndarray:
    sql, params = query
    if connection.vendor == "postgresql":
        return _columns_from_postgresql(sql, params, n_columns)
    return _columns_from_cursor(sql, params, n_columns)


def fetch_label_rows(benchmark_id: int) -> np.ndarray:
    """Return the benchmark's labels as an int64 array of rows (question, response, annotator,
    value), the cheapest way the database allows."""
    packed = _fetch_columns(_label_columns_sql(benchmark_id, _LABEL_COLUMNS), 3)
    annotator, value = np.divmod(packed[:, 2], 4)
    return np.column_stack([packed[:, 0], packed[:, 1], annotator, value])


def fetch_shown_label_rows(benchmark_id: int) -> np.ndarray:
    """Return the labels given through an assignment as rows (response, annotator, value,
    assignment)."""
    query = _label_columns_sql(benchmark_id, _SHOWN_LABEL_COLUMNS, "l.assignment_id IS NOT NULL")
    packed = _fetch_columns(query, 3)
    annotator, value = np.divmod(packed[:, 1], 4)
    return np.column_stack([packed[:, 0], annotator, value, packed[:, 2]])


def principal_domain(category: str) -> str:
    """Return a category's principal domain: its part before the first ':' (paper Figure 4)."""
    return category.split(":", 1)[0].strip() or "(none)"


# An instruction's words counted as `len(text.split(" "))` (spaces + 1), the rule that gives the
# paper's Table 2 lengths exactly on the official data (docs/reports.md); in SQL so that the
# texts never leave the database.
INSTRUCTION_WORDS = Length("text") - Length(Replace("text", Value(" "), Value(""))) + 1


def _index(names: list[str]) -> tuple[list[str], np.ndarray]:
    distinct = sorted(set(names))
    position = {name: i for i, name in enumerate(distinct)}
    return distinct, np.array([position[name] for name in names], dtype=np.int64)


@dataclass
class _InstructionColumns:
    ids: np.ndarray
    subset: np.ndarray
    domains: list[str]
    domain: np.ndarray
    principal_domains: list[str]
    principal: np.ndarray
    words: np.ndarray
    external_ids: list[str]


def _instruction_arrays(benchmark: Benchmark) -> _InstructionColumns:
    rows = list(
        Instruction.objects.filter(benchmark=benchmark)
        .order_by("id")
        .annotate(words=INSTRUCTION_WORDS)
        .values_list("id", "subset", "category", "external_id", "words")
    )
    categories = [r[2] or "(none)" for r in rows]
    domains, domain = _index(categories)
    principal_domains, principal = _index([principal_domain(c) for c in categories])
    return _InstructionColumns(
        ids=np.array([r[0] for r in rows], dtype=np.int64),
        subset=np.array([SUBSET_CODES[r[1]] for r in rows], dtype=np.int8),
        domains=domains,
        domain=domain,
        principal_domains=principal_domains,
        principal=principal,
        words=np.array([r[4] for r in rows], dtype=np.int64),
        external_ids=[r[3] for r in rows],
    )


def _question_arrays(benchmark: Benchmark, instruction_ids: np.ndarray):
    # Tens of thousands of rows: read as arrays (one int4[] per column on PostgreSQL) rather than
    # a Python tuple per question, then put in (instruction id, position) order here.
    rows = _fetch_columns(
        (
            f"SELECT CAST(q.id AS INTEGER), CAST(q.instruction_id AS INTEGER), "
            f"CAST(q.constraint_mask AS INTEGER), CAST(q.position AS INTEGER) "
            f"FROM {Question._meta.db_table} q JOIN {Instruction._meta.db_table} i "
            f"ON i.id = q.instruction_id WHERE i.benchmark_id = %s",
            (benchmark.pk,),
        ),
        4,
    )
    rows = rows[np.lexsort((rows[:, 3], rows[:, 1]))]
    instruction = _index_of(instruction_ids, rows[:, 1])
    # Questions are ordered by (instruction id, position), which is also instruction index order.
    return rows[:, 0], instruction, rows[:, 2], rows[:, 3]


def _response_arrays(benchmark: Benchmark, instruction_ids: np.ndarray):
    rows = list(
        Response.objects.filter(instruction__benchmark=benchmark)
        .order_by("id")
        .values_list("id", "instruction_id", "system_id", "system__name")
    )
    system_names = sorted({r[3] for r in rows})
    system_index = {name: i for i, name in enumerate(system_names)}
    ids = np.array([r[0] for r in rows], dtype=np.int64)
    instruction = _index_of(instruction_ids, np.array([r[1] for r in rows], dtype=np.int64))
    system = np.array([system_index[r[3]] for r in rows], dtype=np.int64)
    system_ids = {r[2]: system_index[r[3]] for r in rows}
    return ids, instruction, system, system_names, system_ids


def _item_arrays(response_instruction, response_system, questions_per_instruction, first_question):
    """Lay out items response by response: item = item_offset[response] + question rank."""
    per_response = questions_per_instruction[response_instruction]
    item_offset = np.concatenate([[0], np.cumsum(per_response)[:-1]]).astype(np.int64)
    n_items = int(per_response.sum())
    item_response = np.repeat(np.arange(len(response_instruction)), per_response)
    rank = np.arange(n_items) - item_offset[item_response]
    item_instruction = response_instruction[item_response]
    item_question = first_question[item_instruction] + rank
    return (
        item_offset,
        item_response,
        item_question,
        item_instruction,
        response_system[item_response],
    )


def _display_positions(benchmark: Benchmark, system_ids: dict[int, int]) -> dict[int, np.ndarray]:
    """Return, per assignment id, each system index's display position (-1 when not shown)."""
    positions: dict[int, np.ndarray] = {}
    orders = Assignment.objects.filter(task__instruction__benchmark=benchmark).values_list(
        "id", "display_order"
    )
    for assignment_id, order in orders:
        shown = np.full(len(system_ids), -1, dtype=np.int8)
        for position, system_id in enumerate(order or []):
            if system_id in system_ids:
                shown[system_ids[system_id]] = position
        positions[assignment_id] = shown
    return positions


def benchmark_arrays(*, benchmark: Benchmark) -> BenchmarkArrays:
    """Load everything a report needs about one benchmark."""
    columns = _instruction_arrays(benchmark)
    instruction_ids = columns.ids
    question_ids, question_instruction, question_mask, question_position = _question_arrays(
        benchmark, instruction_ids
    )
    per_instruction = np.bincount(question_instruction, minlength=len(instruction_ids))
    first_question = np.concatenate([[0], np.cumsum(per_instruction)[:-1]]).astype(np.int64)
    response_ids, response_instruction, response_system, systems, system_ids = _response_arrays(
        benchmark, instruction_ids
    )
    item_offset, item_response, item_question, item_instruction, item_system = _item_arrays(
        response_instruction, response_system, per_instruction, first_question
    )

    rows = fetch_label_rows(benchmark.pk)
    present = np.unique(
        np.concatenate(
            [
                rows[:, 2],
                np.array(
                    _counted_scores(benchmark).values_list("annotator_id", flat=True).distinct(),
                    dtype=np.int64,
                ),
            ]
        )
    )
    # Only annotators whose kind is decided count: a new account's labels are in no result.
    kinds = annotators_counted(benchmark_id=benchmark.pk, annotator_ids=present.tolist())
    annotator_ids = np.array(sorted(kinds), dtype=np.int64)
    rows = rows[np.isin(rows[:, 2], annotator_ids)]
    annotators = {
        a.pk: a for a in Annotator.objects.filter(pk__in=annotator_ids.tolist()).only("name")
    }
    # Annotators are indexed in name order, so "the first n raters" means the first n by name.
    by_name = sorted(annotator_ids.tolist(), key=lambda pk: annotators[pk].name)
    annotator_index = np.empty(len(by_name), dtype=np.int64)
    sorted_ids = np.array(sorted(by_name), dtype=np.int64)
    for position, pk in enumerate(by_name):
        annotator_index[np.searchsorted(sorted_ids, pk)] = position

    question_sort = np.argsort(question_ids)
    question = question_sort[np.searchsorted(question_ids[question_sort], rows[:, 0])]
    response = _index_of(response_ids, rows[:, 1])
    # A label whose question belongs to another instruction than its response cannot be placed.
    same_instruction = question_instruction[question] == response_instruction[response]
    question, response, rows = (
        question[same_instruction],
        response[same_instruction],
        rows[same_instruction],
    )
    label_item = item_offset[response] + (question - first_question[question_instruction[question]])
    shown = _shown_labels(benchmark, response_ids, response_system, system_ids, sorted_ids)

    arrays = BenchmarkArrays(
        benchmark=benchmark,
        systems=systems,
        domains=columns.domains,
        principal_domains=columns.principal_domains,
        instruction_external_ids=columns.external_ids,
        annotator_names=[annotators[pk].name for pk in by_name],
        annotator_kinds=np.array([KIND_CODES[kinds[pk]] for pk in by_name], dtype=np.int8),
        instruction_subset=columns.subset,
        instruction_domain=columns.domain,
        instruction_principal=columns.principal,
        instruction_words=columns.words,
        questions_per_instruction=per_instruction,
        question_instruction=question_instruction,
        question_mask=question_mask,
        question_position=question_position,
        item_response=item_response,
        item_question=item_question,
        item_instruction=item_instruction,
        item_system=item_system,
        response_instruction=response_instruction,
        response_system=response_system,
        label_item=label_item,
        label_annotator=annotator_index[np.searchsorted(sorted_ids, rows[:, 2])],
        label_value=rows[:, 3].astype(np.int8),
        shown_annotator=annotator_index[np.searchsorted(sorted_ids, shown[:, 1])],
        shown_value=shown[:, 2].astype(np.int8),
        shown_position=shown[:, 3].astype(np.int8),
    )
    _add_scores(arrays, benchmark, response_ids, sorted_ids, annotator_index)
    return arrays


def _shown_labels(
    benchmark, response_ids, response_system, system_ids, annotator_sorted_ids
) -> np.ndarray:
    """Return rows (response, annotator id, value, display position) of labels with assignment."""
    rows = fetch_shown_label_rows(benchmark.pk)
    rows = rows[np.isin(rows[:, 1], annotator_sorted_ids)]
    shown = _display_positions(benchmark, system_ids)  # asked always: a fixed number of queries
    if len(rows) == 0 or not shown:
        return np.zeros((0, 4), dtype=np.int64)
    assignment_ids = np.array(sorted(shown), dtype=np.int64)
    table = np.stack([shown[a] for a in assignment_ids.tolist()])
    found = np.minimum(_index_of(assignment_ids, rows[:, 3]), len(assignment_ids) - 1)
    known = assignment_ids[found] == rows[:, 3]
    rows, found = rows[known], found[known]
    system = response_system[_index_of(response_ids, rows[:, 0])]
    return np.column_stack([rows[:, :3], table[found, system]])


def _counted_scores(benchmark: Benchmark):
    return counted_work(DirectScore.objects.filter(response__instruction__benchmark=benchmark))


def _add_scores(arrays, benchmark, response_ids, annotator_sorted_ids, annotator_index) -> None:
    rows = np.array(
        list(_counted_scores(benchmark).values_list("response_id", "annotator_id", "score")),
        dtype=np.int64,
    ).reshape(-1, 3)
    rows = rows[np.isin(rows[:, 1], annotator_sorted_ids)]
    response = _index_of(response_ids, rows[:, 0])
    arrays.score_instruction = arrays.response_instruction[response]
    arrays.score_system = arrays.response_system[response]
    arrays.score_annotator = annotator_index[np.searchsorted(annotator_sorted_ids, rows[:, 1])]
    arrays.score_value = rows[:, 2].astype(np.int8)
