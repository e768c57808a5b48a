"""Read one benchmark's labels, scores and assignments into numpy arrays for the report.

A report over a million labels must never build a Python object per label: on PostgreSQL each label
column arrives as one binary array decoded by numpy in a single call; elsewhere (SQLite) through the
DB-API cursor. Everything else (instructions, questions, responses, annotators) is small.

The item space is every (response, question of that response's instruction) pair; `item_*` arrays
describe it, `label_*` arrays hold one entry per stored label, already mapped to item indices.
Items are laid out instruction by instruction (and within one, response by response in id order,
question by question), so the items of a range of instructions are one slice: the report is
computed in pieces of instructions (evaluation.services.reports).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Generic, Protocol, TypeVar

import numpy as np
import psycopg
from django.db import connection
from django.db.models import TextField, Value
from django.db.models.functions import Cast, Length, Replace
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
    System,
)
from annotate.selectors.annotator_kinds import annotators_counted
from annotate.selectors.results import counted_work, counted_work_sql
from evaluation.selectors.snapshot import exported_snapshot, read_in_snapshot

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
SUBSET_CODES = {Subset.EASY.value: 0, Subset.HARD.value: 1}
KIND_CODES = {"expert": 0, "crowd": 1, "llm": 2}
ANNOTATOR_SOURCE = "annotator:"


def annotator_source(annotator_id: int) -> str:
    """Return the key of one annotator's label source in a computed report: `annotator:<id>`.

    A report is computed (and cached) once for every viewer, so it names an annotator's source
    by id; evaluation.services.reports.report_named puts the names in for one viewer.
    """
    return f"{ANNOTATOR_SOURCE}{annotator_id}"


@dataclass
class BenchmarkArrays:
    """Everything the report computes from, as arrays indexed by position (not database id)."""

    benchmark: Benchmark
    systems: list[str]
    domains: list[str]  # full categories ("Natural Sciences: Biology", "Gmail", ...)
    principal_domains: list[str]  # the part of a category before ':' (paper Figure 4)
    instruction_external_ids: list[str]
    annotator_names: list[str]
    annotator_ids: list[int]  # database id per annotator, same order
    annotator_kinds: np.ndarray  # int8 per annotator: KIND_CODES
    instruction_subset: np.ndarray  # int8 per instruction: 0 easy, 1 hard
    instruction_domain: np.ndarray  # int per instruction: index into domains
    instruction_principal: np.ndarray  # int per instruction: index into principal_domains
    instruction_words: np.ndarray  # int per instruction: INSTRUCTION_WORDS (paper Table 2)
    questions_per_instruction: np.ndarray  # int per instruction
    instruction_first_item: np.ndarray  # int per instruction and one more: its items' slice
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
    # The kind read for every annotator with a counted label or score: the decided kind, None
    # for one not decided (counted nowhere). The report's costs go by these same kinds
    # (source_costs(kinds=...)), so a kind changed while the report is read moves both or none.
    kinds_read: dict[int, str | None] = field(default_factory=dict)

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


# Packing the value (0..2) with the annotator saves the server a column of a million. The
# assignment (0 for none) is read with them only when the benchmark has assignments at all: the
# labels given through one are then read in the same pass, not by a second query that would
# select them and apply the counting rule to them again.
_LABEL_COLUMNS = (
    "CAST(l.question_id AS INTEGER), CAST(l.response_id AS INTEGER), "
    "CAST(l.annotator_id * 4 + l.value AS INTEGER)"
)
_ASSIGNMENT_COLUMN = "CAST(COALESCE(l.assignment_id, 0) AS INTEGER)"
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


def _columns_from_postgresql(sql: str, params: tuple, n_columns: int) -> list[np.ndarray]:
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
        arrays = list(cursor.fetchone())
    columns = []
    while arrays:  # let go of each column's bytes as soon as it is decoded
        columns.append(_decode_int4_array(arrays.pop(0)).astype(np.int64))
    return columns


def _columns_from_cursor(sql: str, params: tuple, n_columns: int) -> list[np.ndarray]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    table = np.array(rows, dtype=np.int64).reshape(-1, n_columns)
    return [np.ascontiguousarray(table[:, i]) for i in range(n_columns)]


def _fetch_columns(query: tuple[str, tuple], n_columns: int) -> list[np.ndarray]:
    sql, params = query
    if connection.vendor == "postgresql":
        return _columns_from_postgresql(sql, params, n_columns)
    return _columns_from_cursor(sql, params, n_columns)


@dataclass
class LabelColumns:
    """The benchmark's counted labels, one int64 array per column (database ids, value 0..2).

    `assignment` is the assignment each label was given through (0: none), or None when the
    benchmark has no assignment, so that no label of it was given through one."""

    question: np.ndarray
    response: np.ndarray
    annotator: np.ndarray
    value: np.ndarray
    assignment: np.ndarray | None = None


def _benchmark_has_assignments(benchmark_id: int) -> bool:
    return Assignment.objects.filter(task__instruction__benchmark_id=benchmark_id).exists()


def fetch_label_columns(benchmark_id: int) -> LabelColumns:
    """Return the benchmark's counted labels as columns, the cheapest way the database allows
    (with their assignments when the benchmark has any)."""
    if not _benchmark_has_assignments(benchmark_id):
        columns = _label_columns_sql(benchmark_id, _LABEL_COLUMNS)
        question, response, packed = _fetch_columns(columns, 3)
        return LabelColumns(question, response, packed >> 2, packed & 3)
    columns = _label_columns_sql(benchmark_id, f"{_LABEL_COLUMNS}, {_ASSIGNMENT_COLUMN}")
    question, response, packed, assignment = _fetch_columns(columns, 4)
    return LabelColumns(question, response, packed >> 2, packed & 3, assignment)


def _read_alone(read: Callable[[], T]) -> T:
    """Run `read` on this thread's own connection, and close it."""
    try:
        return read()
    finally:
        connection.close()


class Pending(Protocol[T_co]):
    """A read under way: `result()` waits for it, `done()` tells whether it would wait."""

    def result(self) -> T_co: ...

    def done(self) -> bool: ...


PendingLabels = Pending[LabelColumns]


@dataclass
class _ReadWhenAsked(Generic[T]):
    """A read done by `result()` itself, on the caller's connection."""

    read: Callable[[], T]

    def result(self) -> T:
        return self.read()

    def done(self) -> bool:
        return True  # nothing is being read meanwhile, so nothing to wait for


def read_meanwhile(read: Callable[[], T], name: str) -> Pending[T]:
    """Start `read` (database reads only); return its result pending.

    On PostgreSQL in autocommit mode, or in a read_snapshot block, a thread (named `name`) runs
    it on a connection of its own, so the server works on it (on a core of its own) while this
    thread goes on; in the block it reads the block's snapshot (exported_snapshot), so ask for
    the result before the block ends. Inside another transaction it runs when its result is
    asked for, on the caller's connection: another connection would not see the transaction's
    rows.
    """
    if connection.vendor != "postgresql":
        return _ReadWhenAsked(read)
    snapshot = exported_snapshot()
    if snapshot is not None:
        read = partial(read_in_snapshot, snapshot, read)
    elif connection.in_atomic_block:
        return _ReadWhenAsked(read)
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
    future = executor.submit(_read_alone, read)
    executor.shutdown(wait=False)
    return future


def label_columns_meanwhile(benchmark_id: int) -> PendingLabels:
    """Start reading the benchmark's labels; return them pending (read_meanwhile): on
    PostgreSQL the server aggregates them (the longest query of a report) while this thread
    reads the instructions, questions and responses."""
    return read_meanwhile(partial(fetch_label_columns, benchmark_id), "report-labels")


def fetch_label_rows(benchmark_id: int) -> np.ndarray:
    """Return the benchmark's labels as an int64 array of rows (question, response, annotator,
    value)."""
    c = fetch_label_columns(benchmark_id)
    return np.column_stack([c.question, c.response, c.annotator, c.value])


def fetch_shown_label_rows(benchmark_id: int) -> np.ndarray:
    """Return the labels given through an assignment as rows (response, annotator, value,
    assignment)."""
    query = _label_columns_sql(benchmark_id, _SHOWN_LABEL_COLUMNS, "l.assignment_id IS NOT NULL")
    response, packed, assignment = _fetch_columns(query, 3)
    return np.column_stack([response, packed >> 2, packed & 3, assignment])


class _Positions:
    """Map database ids to their positions in a sorted array of ids (or to `values` given per
    sorted id); -1 for an id not in it.

    A table indexed by id when the ids are dense enough (one gather per lookup, which matters
    for ten million labels), else a binary search.
    """

    def __init__(self, sorted_ids: np.ndarray, values: np.ndarray | None = None):
        self.sorted_ids = sorted_ids
        self.values = np.arange(len(sorted_ids)) if values is None else values
        self.table = None
        if len(sorted_ids) == 0:
            return
        # The table starts one before the lowest id and ends one after the highest, both -1, so
        # that a clipped lookup sends every id out of range to -1.
        self.low = int(sorted_ids[0]) - 1
        if self.low > 0 and int(sorted_ids[-1]) + 2 <= 4 * len(sorted_ids) + 1024:
            self.low = 0  # dense from id 0 too: the lookups need not shift the ids
        span = int(sorted_ids[-1]) - self.low + 2
        if span <= 4 * len(sorted_ids) + 1024:
            self.table = np.full(span, -1, dtype=np.int64)
            self.table[sorted_ids - self.low] = self.values

    def __call__(self, ids: np.ndarray) -> np.ndarray:
        if self.table is not None:
            return self.table.take(ids - self.low if self.low else ids, mode="clip")
        if len(self.sorted_ids) == 0:
            return np.full(len(ids), -1, dtype=np.int64)
        found = np.minimum(np.searchsorted(self.sorted_ids, ids), len(self.sorted_ids) - 1)
        return np.where(self.sorted_ids[found] == ids, self.values[found], -1)


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


def _instruction_rows(benchmark_id: int) -> list[tuple]:
    """(id, subset, category, external id, words) of each instruction, in id order."""
    return list(
        Instruction.objects.filter(benchmark_id=benchmark_id)
        .order_by("id")
        .annotate(words=INSTRUCTION_WORDS)
        .values_list("id", "subset", "category", "external_id", "words")
    )


def _instruction_arrays(benchmark: Benchmark) -> _InstructionColumns:
    rows = _instruction_rows(benchmark.pk)
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


def _questions_query(benchmark_id: int) -> tuple[str, tuple]:
    """(id, instruction id, constraint mask, position) of the benchmark's questions."""
    return (
        f"SELECT CAST(q.id AS INTEGER) AS q_id, CAST(q.instruction_id AS INTEGER) AS q_instruction, "
        f"CAST(q.constraint_mask AS INTEGER) AS q_mask, CAST(q.position AS INTEGER) AS q_position "
        f"FROM {Question._meta.db_table} q JOIN {Instruction._meta.db_table} i "
        f"ON i.id = q.instruction_id WHERE i.benchmark_id = %s",
        (benchmark_id,),
    )


def _responses_query(benchmark_id: int) -> tuple[str, tuple]:
    """(id, instruction id, system id) of the benchmark's responses."""
    return (
        f"SELECT CAST(r.id AS INTEGER) AS r_id, CAST(r.instruction_id AS INTEGER) AS r_instruction, "
        f"CAST(r.system_id AS INTEGER) AS r_system FROM {Response._meta.db_table} r "
        f"JOIN {Instruction._meta.db_table} i ON i.id = r.instruction_id "
        f"WHERE i.benchmark_id = %s",
        (benchmark_id,),
    )


# Row hashes summed by the database (layout_fingerprint): a prime below 2**31 and coefficients
# below 2**20, so every product fits a signed 64-bit integer (PostgreSQL bigint, SQLite).
_PRIME = 2_147_483_647
_COEFFICIENTS = (1_000_003, 999_983, 998_617, 997_141)


def _rows_hash_sql(query: tuple[str, tuple], columns: list[str]) -> tuple[str, tuple]:
    """Count the rows of `query` and sum a hash of each: a linear form of its integer `columns`
    (the first its id) times its id plus one, modulo a prime. A change to one row moves the
    sum; so do rows trading values, the change weighed by each one's id (d * id_a - d * id_b is
    no multiple of the prime); other coincidences have about one chance in 2**31."""
    sql, params = query  # '%%': the modulo, in a query with parameters
    form = " + ".join(
        f"(CAST({c} AS BIGINT) %% {_PRIME}) * {k}"
        for c, k in zip(columns, _COEFFICIENTS, strict=False)
    )
    row_hash = (
        f"(({form}) %% {_PRIME}) * (CAST({columns[0]} AS BIGINT) %% {_PRIME} + 1) %% {_PRIME}"
    )
    return f"SELECT COUNT(*), SUM({row_hash}) FROM ({sql}) rows_hashed", params


def layout_fingerprint(benchmark_id: int) -> str:
    """Summarise everything but the work that a report reads about the benchmark: its
    instructions (subset, domain, id, length), questions (instruction, position, constraint
    types), responses (instruction, system) and their systems' names, as the report reads them.

    From the rows, not their counts or plain sums, so any write (an admin edit, a response
    moved to a retired system, a queryset update) names a new report: the labels' fingerprint
    cannot see a label's response move to another system or its instruction to another subset,
    since the label row itself is unchanged. Instructions and names are few and hashed here;
    questions and responses, tens of thousands, are hashed and summed by the database.
    """
    digest = hashlib.sha256(repr(_instruction_rows(benchmark_id)).encode())
    with connection.cursor() as cursor:
        for query, columns in (
            (_questions_query(benchmark_id), ["q_id", "q_instruction", "q_mask", "q_position"]),
            (_responses_query(benchmark_id), ["r_id", "r_instruction", "r_system"]),
        ):
            cursor.execute(*_rows_hash_sql(query, columns))
            digest.update(repr(cursor.fetchone()).encode())
    systems = Response.objects.filter(instruction__benchmark_id=benchmark_id).values("system_id")
    names = System.objects.filter(pk__in=systems).order_by("id").values_list("id", "name")
    digest.update(repr(list(names)).encode())
    return digest.hexdigest()[:24]


def _question_arrays(benchmark: Benchmark, instruction_ids: np.ndarray):
    # Tens of thousands of rows: read as arrays (one int4[] per column on PostgreSQL) rather than
    # a Python tuple per question, then put in (instruction id, position) order here.
    ids, instruction, mask, position = _fetch_columns(_questions_query(benchmark.pk), 4)
    order = np.lexsort((position, instruction))
    # Questions are ordered by (instruction id, position), which is also instruction index order.
    instruction = _index_of(instruction_ids, instruction[order])
    return ids[order], instruction, mask[order], position[order]


@dataclass
class _ResponseColumns:
    ids: np.ndarray  # sorted
    instruction: np.ndarray  # instruction index per response
    system: np.ndarray  # system index per response (systems in name order)
    systems: list[str]
    system_ids: dict[int, int]  # system id: system index


def _response_arrays(benchmark: Benchmark, instruction_ids: np.ndarray) -> _ResponseColumns:
    ids, instruction, system = _fetch_columns(_responses_query(benchmark.pk), 3)
    order = np.argsort(ids)
    ids, instruction, system = ids[order], instruction[order], system[order]
    names = dict(System.objects.filter(pk__in=np.unique(system).tolist()).values_list("id", "name"))
    systems = sorted(set(names.values()))
    system_ids = {pk: systems.index(name) for pk, name in names.items()}
    system_index = np.zeros(max(system_ids, default=0) + 1, dtype=np.int64)
    for pk, index in system_ids.items():
        system_index[pk] = index
    return _ResponseColumns(
        ids=ids,
        instruction=_index_of(instruction_ids, instruction),
        system=system_index[system],
        systems=systems,
        system_ids=system_ids,
    )


@dataclass
class _Items:
    offset: np.ndarray  # per response: its first item
    response: np.ndarray
    question: np.ndarray
    instruction: np.ndarray
    system: np.ndarray
    instruction_first: np.ndarray  # per instruction and one more: its first item


def _item_arrays(responses: _ResponseColumns, per_instruction, first_question) -> _Items:
    """Lay out items instruction by instruction, each response's questions together, responses
    of one instruction in id order: item = offset[response] + question rank."""
    by_instruction = np.argsort(responses.instruction, kind="stable")
    per_response = per_instruction[responses.instruction]
    ordered = per_response[by_instruction]
    offset = np.empty(len(per_response), dtype=np.int64)
    offset[by_instruction] = np.cumsum(ordered) - ordered
    n_items = int(per_response.sum())
    item_response = np.repeat(by_instruction, ordered)
    rank = np.arange(n_items) - offset[item_response]
    item_instruction = responses.instruction[item_response]
    items_per_instruction = np.bincount(
        responses.instruction, weights=per_response, minlength=len(per_instruction)
    ).astype(np.int64)
    return _Items(
        offset=offset,
        response=item_response,
        question=first_question[item_instruction] + rank,
        instruction=item_instruction,
        system=responses.system[item_response],
        instruction_first=np.concatenate([[0], np.cumsum(items_per_instruction)]),
    )


def _display_positions(
    benchmark: Benchmark, system_ids: dict[int, int]
) -> tuple[np.ndarray, np.ndarray]:
    """Return the ids of the benchmark's assignments (sorted) and, per assignment in that order,
    each system index's display position (-1 when not shown): an int8 table.

    Tens of thousands of assignments in a crowd-sized benchmark: their display orders are read
    as JSON text and decoded in one call, then placed by numpy, with no Django converter and no
    small array per assignment."""
    rows = list(
        Assignment.objects.filter(task__instruction__benchmark=benchmark)
        .order_by()
        .values_list("id", Cast("display_order", TextField()))
    )
    rows.sort()
    ids = np.array([row[0] for row in rows], dtype=np.int64)
    # An order left empty (SQL or JSON null) shows nothing.
    orders = json.loads("[" + ",".join(row[1] or "null" for row in rows) + "]")
    table = np.full((len(ids), len(system_ids)), -1, dtype=np.int8)
    assignment, system, position = _display_entries(orders, system_ids)
    if len(assignment):
        # A system listed twice is at its last position, as a loop writing them in order leaves
        # it: keep each (assignment, system)'s last entry only.
        cell = assignment * len(system_ids) + system
        last = len(cell) - 1 - np.unique(cell[::-1], return_index=True)[1]
        table.reshape(-1)[cell[last]] = position[last]
    return ids, table


def _display_entries(orders: list, system_ids: dict[int, int]) -> tuple[np.ndarray, ...]:
    """Return (assignment index, system index, position) of every entry of the display orders
    that names one of the systems, in order."""
    lengths = [len(order) if type(order) is list else -1 for order in orders]
    flat = [system_id for order in orders if type(order) is list for system_id in order]
    if min(lengths, default=0) < 0 or any(type(system_id) is not int for system_id in flat):
        return _display_entries_one_by_one(orders, system_ids)  # not as the app writes them
    counts = np.array(lengths, dtype=np.int64)
    assignment = np.repeat(np.arange(len(orders)), counts)
    position = np.arange(len(flat)) - np.repeat(np.cumsum(counts) - counts, counts)
    known = np.array(sorted(system_ids), dtype=np.int64)
    system = _Positions(known, np.array([system_ids[pk] for pk in known.tolist()], np.int64))(
        np.array(flat, dtype=np.int64)
    )
    shown = system >= 0
    return assignment[shown], system[shown], position[shown]


def _display_entries_one_by_one(orders: list, system_ids: dict[int, int]) -> tuple[np.ndarray, ...]:
    """_display_entries for orders holding anything else than lists of integers: each entry
    matched as a dictionary lookup matches it (3.0 names system 3)."""
    entries = [
        (row, system_ids[system_id], position)
        for row, order in enumerate(orders)
        for position, system_id in enumerate(order or [])
        if system_id in system_ids
    ]
    columns = np.array(entries, dtype=np.int64).reshape(-1, 3)
    return columns[:, 0], columns[:, 1], columns[:, 2]


def _distinct(ids: np.ndarray) -> np.ndarray:
    """Return the sorted distinct values of a large array holding few of them (annotator ids)."""
    if len(ids) == 0:
        return np.zeros(0, dtype=np.int64)
    low, high = int(ids.min()), int(ids.max())
    if high - low > 1 << 22:
        return np.unique(ids)
    return np.flatnonzero(np.bincount(ids - low, minlength=high - low + 1)) + low


@dataclass
class _Annotators:
    names: list[str]  # in name order: "the first n raters" means the first n by name
    ids: list[int]  # same order
    kinds: np.ndarray  # KIND_CODES per annotator, same order
    positions: _Positions  # annotator id -> index in name order, -1 when not counted
    kinds_read: dict[int, str | None]  # every annotator present: its kind, None if undecided


def _annotators(benchmark: Benchmark, label_annotator_ids: np.ndarray) -> _Annotators:
    scored = _counted_scores(benchmark).values_list("annotator_id", flat=True).distinct()
    present = np.union1d(_distinct(label_annotator_ids), np.array(list(scored), dtype=np.int64))
    # Only annotators whose kind is decided count: a new account's labels are in no result.
    kinds = annotators_counted(benchmark_id=benchmark.pk, annotator_ids=present.tolist())
    sorted_ids = np.array(sorted(kinds), dtype=np.int64)
    names = dict(Annotator.objects.filter(pk__in=sorted_ids.tolist()).values_list("id", "name"))
    in_name_order = sorted(sorted_ids.tolist(), key=lambda pk: names[pk])
    by_name = np.empty(len(in_name_order), dtype=np.int64)
    by_name[np.searchsorted(sorted_ids, in_name_order)] = np.arange(len(in_name_order))
    return _Annotators(
        names=[names[pk] for pk in in_name_order],
        ids=in_name_order,
        kinds=np.array([KIND_CODES[kinds[pk]] for pk in in_name_order], dtype=np.int8),
        positions=_Positions(sorted_ids, by_name),
        kinds_read={pk: kinds.get(pk) for pk in present.tolist()},
    )


def benchmark_arrays(
    *,
    benchmark: Benchmark,
    meanwhile: Callable[[np.ndarray, Callable[[], bool]], None] | None = None,
) -> BenchmarkArrays:
    """Load everything a report needs about one benchmark.

    `meanwhile(instruction_subset, labels_read)` runs while the labels are being read (on
    PostgreSQL by another connection), for work that needs only the instructions: it gets each
    instruction's subset code and a function telling whether the labels are in, to stop then.
    """
    pending = label_columns_meanwhile(benchmark.pk)
    columns = _instruction_arrays(benchmark)
    question_ids, question_instruction, question_mask, question_position = _question_arrays(
        benchmark, columns.ids
    )
    per_instruction = np.bincount(question_instruction, minlength=len(columns.ids))
    first_question = np.concatenate([[0], np.cumsum(per_instruction)[:-1]]).astype(np.int64)
    responses = _response_arrays(benchmark, columns.ids)
    items = _item_arrays(responses, per_instruction, first_question)
    if meanwhile is not None:
        meanwhile(columns.subset, pending.done)

    labels = pending.result()
    annotators = _annotators(benchmark, labels.annotator)
    annotator_index = annotators.positions(labels.annotator)  # per label, -1: not counted
    label_item, label_annotator, label_value = _place_labels(
        labels,
        question_ids,
        question_instruction,
        first_question,
        responses,
        items,
        annotator_index,
    )
    shown_annotator, shown_value, shown_position = _shown_labels(
        benchmark, responses, labels, annotator_index
    )

    arrays = BenchmarkArrays(
        benchmark=benchmark,
        systems=responses.systems,
        domains=columns.domains,
        principal_domains=columns.principal_domains,
        instruction_external_ids=columns.external_ids,
        annotator_names=annotators.names,
        annotator_ids=annotators.ids,
        annotator_kinds=annotators.kinds,
        kinds_read=annotators.kinds_read,
        instruction_subset=columns.subset,
        instruction_domain=columns.domain,
        instruction_principal=columns.principal,
        instruction_words=columns.words,
        questions_per_instruction=per_instruction,
        instruction_first_item=items.instruction_first,
        question_instruction=question_instruction,
        question_mask=question_mask,
        question_position=question_position,
        item_response=items.response,
        item_question=items.question,
        item_instruction=items.instruction,
        item_system=items.system,
        response_instruction=responses.instruction,
        response_system=responses.system,
        label_item=label_item,
        label_annotator=label_annotator,
        label_value=label_value,
        shown_annotator=shown_annotator,
        shown_value=shown_value,
        shown_position=shown_position,
    )
    _add_scores(arrays, benchmark, responses, annotators)
    return arrays


def _place_labels(
    labels, question_ids, question_instruction, first_question, responses, items, annotator
):
    """Return (item, annotator index, value) of each label of a counted annotator (`annotator`:
    each label's annotator index, -1 for one not counted).

    Ten million labels make every gather count, so each id lookup answers with what the label
    needs and what checks it at once, packed in bit fields: a question id gives its instruction
    and its rank in that instruction, a response id its first item and its instruction. A label
    whose question belongs to another instruction than its response cannot be placed: left out.
    """
    rank = np.arange(len(question_ids)) - first_question[question_instruction]
    rank_bits = _bits(int(rank.max()) if len(rank) else 0)
    instruction_bits = _bits(len(first_question) - 1)
    by_id = np.argsort(question_ids)
    question = _Positions(question_ids[by_id], ((question_instruction << rank_bits) | rank)[by_id])(
        labels.question
    )
    response = _Positions(
        responses.ids, (items.offset << instruction_bits) | responses.instruction
    )(labels.response)
    # An unknown question (-1) has instruction -1, which no response has.
    kept = (question >> rank_bits) == (response & ((1 << instruction_bits) - 1))
    kept &= response >= 0
    kept &= annotator >= 0
    value = labels.value
    if not kept.all():
        annotator, question, response, value = (
            annotator[kept],
            question[kept],
            response[kept],
            value[kept],
        )
    item = response >> instruction_bits
    item += question & ((1 << rank_bits) - 1)
    return item, annotator, value.astype(np.int8)


def _bits(highest: int) -> int:
    """Return how many bits hold every number from 0 to `highest`."""
    return max(int(highest), 0).bit_length()


def _shown_labels(
    benchmark, responses: _ResponseColumns, labels: LabelColumns, annotator: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return (annotator index, value, display position) of each label of a counted annotator
    given through one of the benchmark's assignments, in the labels' order (`annotator`: each
    label's annotator index, -1 for one not counted).

    Column by column, with no copy of a column when every label is kept (a crowd benchmark's
    labels all come through assignments): no table of rows over the million labels."""
    # Asked always (fixed queries), and in place of the labels' second read.
    assignment_ids, table = _display_positions(benchmark, responses.system_ids)
    if labels.assignment is None or len(assignment_ids) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int8), np.zeros(0, np.int8)
    found = _Positions(assignment_ids)(labels.assignment)
    kept = (annotator >= 0) & (found >= 0) & (labels.assignment != 0)
    response, value = labels.response, labels.value
    if not kept.all():
        annotator, found, response, value = (
            annotator[kept],
            found[kept],
            response[kept],
            value[kept],
        )
    system = _Positions(responses.ids, responses.system)(response)
    position = table.reshape(-1).take(found * table.shape[1] + system)
    return annotator, value.astype(np.int8), position


def _counted_scores(benchmark: Benchmark):
    return counted_work(DirectScore.objects.filter(response__instruction__benchmark=benchmark))


def _add_scores(arrays, benchmark, responses: _ResponseColumns, annotators: _Annotators) -> None:
    rows = np.array(
        list(_counted_scores(benchmark).values_list("response_id", "annotator_id", "score")),
        dtype=np.int64,
    ).reshape(-1, 3)
    annotator = annotators.positions(rows[:, 1])
    rows, annotator = rows[annotator >= 0], annotator[annotator >= 0]
    response = _index_of(responses.ids, rows[:, 0])
    arrays.score_instruction = arrays.response_instruction[response]
    arrays.score_system = arrays.response_system[response]
    arrays.score_annotator = annotator
    arrays.score_value = rows[:, 2].astype(np.int8)
