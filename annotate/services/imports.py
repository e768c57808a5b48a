"""Import a benchmark (the official InFoBench JSON Lines format) and systems' responses.

Each import is one transaction: every wrong line (up to MAX_PROBLEMS) is named in one
ImportFileError with the file, line and field, and nothing is written. Importing the same file again adds nothing and says so; a row
that contradicts what is stored is an error, never a silent overwrite.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import Max

from annotate.errors import ImportFileError
from annotate.models import (
    Benchmark,
    ConstraintType,
    Instruction,
    Question,
    Response,
    Subset,
    System,
)
from annotate.services.files import JSON_TYPES, ImportProblems, json_type, read_jsonl

BATCH_SIZE = 1000
# Question.position is a small integer: PostgreSQL stores no larger one (SQLite would).
MAX_QUESTIONS = 32_767
SUBSETS = {
    "easy_set": Subset.EASY,
    "hard_set": Subset.HARD,
    "easy": Subset.EASY,
    "hard": Subset.HARD,
}
CONSTRAINT_BITS = {choice.label.lower(): choice.value for choice in ConstraintType}


@dataclass
class ImportSummary:
    """What an import did: rows read, rows written, rows already stored."""

    path: str
    what: str
    rows: int = 0
    created: int = 0
    unchanged: int = 0
    details: dict[str, Any] = field(default_factory=dict)
    skipped: int = 0  # lines left out on purpose, as `skipped_why` says
    skipped_why: str = ""
    note: str = ""  # said after the summary: what the import leaves to do
    changes: list[str] = field(default_factory=list)  # other writes, each a sentence said
    unchanged_why: str = "already stored, left as they were"  # said after the unchanged count

    def _counted(self, count: int) -> str:
        """`count` rows named as `what` says ("questions"), in the singular for one."""
        what = self.what[:-1] if count == 1 and self.what.endswith("s") else self.what
        return f"{count:,} {what}"

    @property
    def message(self) -> str:
        changes = "".join(f" {change}" for change in self.changes)
        return (
            self._message()
            + changes
            + self._skipped_note()
            + (f" {self.note}" if self.note else "")
        )

    def _message(self) -> str:
        if self.created == 0:
            if self.unchanged == 0 and self.skipped:
                return f"Nothing imported from {self.path}."
            # Not "Nothing new" when the import changed something else (a study's system).
            head = f"No new {self.what}" if self.changes else "Nothing new"
            if self.unchanged == 1:
                return f"{head}: the {self._counted(1)} in {self.path} is already stored."
            return f"{head}: all {self._counted(self.unchanged)} in {self.path} are already stored."
        text = f"Imported {self._counted(self.created)} from {self.path}"
        if self.unchanged:
            text += f" ({self.unchanged:,} {self.unchanged_why})"
        return text + "."

    def _skipped_note(self) -> str:
        if not self.skipped:
            return ""
        lines = "1 line" if self.skipped == 1 else f"{self.skipped:,} lines"
        return f" {lines} skipped: {self.skipped_why}."


@dataclass(frozen=True)
class _InstructionRow:
    external_id: str
    subset: str
    category: str
    text: str
    input_text: str
    questions: tuple[tuple[str, int], ...]


def _field(path: str, line: int, row: dict, name: str, kind: type) -> Any:
    if name not in row:
        raise ImportFileError(path, line, name, "this field is missing")
    value = row[name]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ImportFileError(
            path, line, name, f"expected {JSON_TYPES[kind]}, found {json_type(value)}"
        )
    return value


def _list_item(name: str, index: int) -> tuple[str, str]:
    """Name an entry of a per-question JSON list: its field path, indexed from 0 as JSON tools
    do, and the question, counted from 1 as the pages and a label CSV's question_index do."""
    return f"{name}[{index}]", f"question {index + 1}"


def _constraint_mask(path: str, line: int, labels: Any, index: int) -> int:
    where, question = _list_item("question_label", index)
    if not isinstance(labels, list) or not 1 <= len(labels) <= 3:
        raise ImportFileError(
            path, line, where, f"{question}: expected a list of one to three constraint types"
        )
    mask = 0
    for name in labels:
        bit = CONSTRAINT_BITS.get(str(name).strip().lower()) if isinstance(name, str) else None
        if bit is None:
            known = ", ".join(choice.label for choice in ConstraintType)
            raise ImportFileError(
                path, line, where, f"{question}: unknown constraint type {name!r} ({known})"
            )
        mask |= bit
    return mask


def _parse_instruction(path: str, line: int, row: dict) -> _InstructionRow:
    external_id = _field(path, line, row, "id", str).strip()
    if not external_id:
        raise ImportFileError(path, line, "id", "the id is empty")
    subset_name = _field(path, line, row, "subset", str)
    subset = SUBSETS.get(subset_name.strip().lower())
    if subset is None:
        raise ImportFileError(
            path, line, "subset", f"expected Easy_set or Hard_set, found {subset_name!r}"
        )
    text = _field(path, line, row, "instruction", str)
    if not text.strip():
        raise ImportFileError(path, line, "instruction", "the instruction is empty")
    questions = _field(path, line, row, "decomposed_questions", list)
    labels = _field(path, line, row, "question_label", list)
    if not questions:
        raise ImportFileError(
            path, line, "decomposed_questions", "an instruction needs at least one question"
        )
    if len(questions) > MAX_QUESTIONS:
        raise ImportFileError(
            path,
            line,
            "decomposed_questions",
            f"{len(questions):,} questions; an instruction has at most {MAX_QUESTIONS:,} questions",
        )
    if len(labels) != len(questions):
        raise ImportFileError(
            path,
            line,
            "question_label",
            f"{len(labels)} label lists for {len(questions)} questions: one list per question",
        )
    parsed = []
    for index, question in enumerate(questions):
        if not isinstance(question, str) or not question.strip():
            where, number = _list_item("decomposed_questions", index)
            raise ImportFileError(path, line, where, f"{number}: expected a non-empty text")
        parsed.append((question, _constraint_mask(path, line, labels[index], index)))
    return _InstructionRow(
        external_id=external_id,
        subset=subset,
        category=_field(path, line, row, "category", str),
        text=text,
        input_text=_field(path, line, row, "input", str),
        questions=tuple(parsed),
    )


def _stored_instructions(benchmark: Benchmark) -> dict[str, _InstructionRow]:
    questions: dict[int, list[tuple[str, int]]] = {}
    for instruction_id, text, mask in (
        Question.objects.filter(instruction__benchmark=benchmark)
        .values_list("instruction_id", "text", "constraint_mask")
        .order_by("instruction_id", "position")
    ):
        questions.setdefault(instruction_id, []).append((text, mask))
    return {
        external_id: _InstructionRow(
            external_id, subset, category, text, input_text, tuple(questions.get(pk, []))
        )
        for pk, external_id, subset, category, text, input_text in Instruction.objects.filter(
            benchmark=benchmark
        ).values_list("pk", "external_id", "subset", "category", "text", "input_text")
    }


def _differing_field(stored: _InstructionRow, new: _InstructionRow) -> str:
    for name, label in [
        ("subset", "subset"),
        ("category", "category"),
        ("text", "instruction"),
        ("input_text", "input"),
        ("questions", "decomposed_questions"),
    ]:
        if getattr(stored, name) != getattr(new, name):
            return label
    return ""


def _create_instructions(
    benchmark: Benchmark, rows: list[_InstructionRow], first_position: int
) -> int:
    instructions = Instruction.objects.bulk_create(
        Instruction(
            benchmark=benchmark,
            external_id=row.external_id,
            subset=row.subset,
            category=row.category,
            text=row.text,
            input_text=row.input_text,
            position=first_position + offset,
        )
        for offset, row in enumerate(rows)
    )
    Question.objects.bulk_create(
        (
            Question(instruction=instruction, position=index, text=text, constraint_mask=mask)
            for instruction, row in zip(instructions, rows, strict=True)
            for index, (text, mask) in enumerate(row.questions, start=1)
        ),
        batch_size=BATCH_SIZE,
    )
    return len(instructions)


@transaction.atomic
def instructions_import(*, path: str, benchmark_name: str, description: str = "") -> ImportSummary:
    """Import instructions and their decomposed questions from an InFoBench JSON Lines file.

    Fields per line: id, input, category, instruction, decomposed_questions, subset (Easy_set or
    Hard_set), question_label (a list of one to three constraint types per question).
    """
    benchmark, _ = Benchmark.objects.get_or_create(
        name=benchmark_name, defaults={"description": description}
    )
    stored = _stored_instructions(benchmark)
    next_position = (benchmark.instructions.aggregate(top=Max("position"))["top"] or 0) + 1
    summary = ImportSummary(path=path, what="instructions")
    seen: dict[str, tuple[int, _InstructionRow]] = {}
    pending: list[_InstructionRow] = []
    problems = ImportProblems(path)
    for line, raw in read_jsonl(path, problems):
        summary.rows += 1
        with problems.line():
            row = _parse_instruction(path, line, raw)
            if row.external_id in seen:
                first_line, first = seen[row.external_id]
                if first != row:
                    raise ImportFileError(
                        path,
                        line,
                        _differing_field(first, row),
                        f"id {row.external_id!r} appears again (first on line {first_line}) with different content",
                    )
                continue
            seen[row.external_id] = (line, row)
            if row.external_id in stored:
                differs = _differing_field(stored[row.external_id], row)
                if differs:
                    raise ImportFileError(
                        path,
                        line,
                        differs,
                        f"instruction {row.external_id!r} is already in benchmark {benchmark_name!r} "
                        "with different content; nothing was overwritten (import into a new benchmark)",
                    )
                summary.unchanged += 1
                continue
            pending.append(row)
        if len(pending) >= BATCH_SIZE and not problems:
            summary.created += _create_instructions(benchmark, pending, next_position)
            next_position += len(pending)
            pending = []
    problems.raise_found()
    if pending:
        summary.created += _create_instructions(benchmark, pending, next_position)
    if summary.rows == 0:
        raise ImportFileError(path, None, None, "the file holds no instructions")
    summary.details = {"benchmark": benchmark.name}
    return summary


def benchmark_get_for_import(path: str, name: str) -> Benchmark:
    try:
        return Benchmark.objects.get(name=name)
    except Benchmark.DoesNotExist:
        raise ImportFileError(
            path, None, None, f"no benchmark named {name!r}: import its instructions first"
        ) from None


@transaction.atomic
def responses_import(*, path: str, benchmark_name: str, system_name: str) -> ImportSummary:
    """Import one system's responses: JSON Lines with `id` (instruction id) and `output` (text).

    Other fields are ignored, so a file of dataset rows with an added `output` works too. A new
    system is created with its first response: an import that writes none leaves none behind.
    """
    benchmark = benchmark_get_for_import(path, benchmark_name)
    system_name = system_name.strip()
    if not system_name:
        raise ImportFileError(path, None, None, "the system name is empty")
    system = System.objects.filter(name=system_name).first()
    if system is not None and system.generation_endpoint_id is not None:
        raise ImportFileError(
            path,
            None,
            None,
            f"system {system.name!r} generates its responses in the app; "
            "import under a new system name",
        )
    instruction_ids = dict(benchmark.instructions.values_list("external_id", "pk"))
    stored = {}
    if system is not None:
        stored = dict(
            Response.objects.filter(instruction__benchmark=benchmark, system=system).values_list(
                "instruction_id", "text"
            )
        )
    summary = ImportSummary(path=path, what="responses")
    seen: dict[int, tuple[int, str]] = {}
    pending: dict[int, str] = {}  # instruction id → output, not written yet
    problems = ImportProblems(path)
    for line, row in read_jsonl(path, problems):
        summary.rows += 1
        with problems.line():
            external_id = _field(path, line, row, "id", str)
            instruction_id = instruction_ids.get(external_id)
            if instruction_id is None:
                raise ImportFileError(
                    path,
                    line,
                    "id",
                    f"no instruction {external_id!r} in benchmark {benchmark_name!r}",
                )
            if isinstance(row, dict) and "output" in row and row["output"] is None:
                # Not generated yet: the official evaluation script skips these lines too.
                summary.skipped += 1
                continue
            output = _field(path, line, row, "output", str)
            if instruction_id in seen:
                first_line, first_output = seen[instruction_id]
                if first_output != output:
                    raise ImportFileError(
                        path,
                        line,
                        "output",
                        f"id {external_id!r} appears again (first on line {first_line}) with a different output",
                    )
                continue
            seen[instruction_id] = (line, output)
            if instruction_id in stored:
                if stored[instruction_id] != output:
                    raise ImportFileError(
                        path,
                        line,
                        "output",
                        f"{system_name} already has a different response to {external_id!r}; "
                        "nothing was overwritten (import under a new system name)",
                    )
                summary.unchanged += 1
                continue
            pending[instruction_id] = output
        if len(pending) >= BATCH_SIZE and not problems:
            system = _responses_create(system=system, system_name=system_name, outputs=pending)
            summary.created += len(pending)
            pending = {}
    problems.raise_found()
    if pending:
        system = _responses_create(system=system, system_name=system_name, outputs=pending)
        summary.created += len(pending)
    if summary.rows == 0:
        raise ImportFileError(path, None, None, "the file holds no responses")
    summary.details = {"benchmark": benchmark.name, "system": system_name}
    summary.skipped_why = (
        '"output" is null (not generated yet; the official script skips these too)'
    )
    return summary


def _responses_create(
    *, system: System | None, system_name: str, outputs: dict[int, str]
) -> System:
    """Write the responses (instruction id → text), creating their system first when it is new
    (None); return the system."""
    if system is None:
        system, _ = System.objects.get_or_create(name=system_name)
    Response.objects.bulk_create(
        Response(instruction_id=instruction_id, system=system, text=text)
        for instruction_id, text in outputs.items()
    )
    return system
