"""Streaming readers for the files researchers import: JSON Lines and CSV, line by line.

Every problem is an ImportFileError naming the file, the line and the field, so a person can find
and fix it. Files are never read whole.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from operator import methodcaller
from typing import IO, Any

from annotate.errors import ImportFileError, ImportFileProblems

# A line longer than this is refused instead of being parsed (a runaway line is a broken file).
MAX_LINE_CHARS = 10_000_000
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
NUL_PROBLEM = "contains a NUL character, which no text field may hold"
# A CSV field longer than this is refused (the csv module's own default is only 128 KB).
csv.field_size_limit(MAX_LINE_CHARS)
# No number in our files needs more digits; Python itself refuses to read over 4,300.
MAX_INTEGER_DIGITS = 18
LONG_DIGITS = re.compile(r"[0-9]{19}")
# A \uD800-\uDFFF escape: JSON may spell half of a UTF-16 pair that no text may hold alone.
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
# A byte that is not UTF-8, as text decoded with errors="surrogateescape" holds it.
ESCAPED_BYTE = re.compile("[\udc80-\udcff]")
# Name the field of a line (its number, its bytes) that holds the first byte not UTF-8, or None.
FieldNotUtf8 = Callable[[int, bytes], str | None]


# An import names at most this many wrong lines at once (a wrong separator makes every line wrong).
MAX_PROBLEMS = 20


def upload_size_problem(size: int) -> str:
    """Why an upload of `size` bytes is refused (over IMPORT_MAX_UPLOAD_BYTES), or ""."""
    from django.conf import settings

    limit = settings.IMPORT_MAX_UPLOAD_BYTES
    if size <= limit:
        return ""
    return f"The file is larger than the upload limit ({limit:,} bytes)."


class ImportProblems:
    """The wrong lines of one file, collected so that one attempt names them all.

    Wrap the work on each line in `with problems.line():`: a problem of that line is kept and
    the import goes on with the next. `raise_found()` after the last line raises them (one as
    it is, several as one ImportFileProblems); nothing may be written once `problems` is true.
    A problem of the whole file (missing, not UTF-8, a wrong header) is raised at once, and
    so is the MAX_PROBLEMS-th.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.found: list[ImportFileError] = []

    def __bool__(self) -> bool:
        return bool(self.found)

    @contextmanager
    def line(self) -> Iterator[None]:
        try:
            yield
        except ImportFileError as error:
            if error.line is None:
                raise
            self.add(error)

    def add(self, error: ImportFileError) -> None:
        self.found.append(error)
        if len(self.found) >= MAX_PROBLEMS:
            raise ImportFileProblems(self.path, self.found, stopped=True)

    def raise_found(self, also: ImportFileError | None = None) -> None:
        """Raise what was found (and `also`, a problem that ended the reading)."""
        found = [*self.found, also] if also is not None else self.found
        if len(found) == 1:
            raise found[0]
        if found:
            raise ImportFileProblems(self.path, found, stopped=False)


JSON_TYPES = {
    str: "a string",
    list: "a list",
    dict: "an object",
    int: "a number",
    float: "a number",
}


def json_type(value: Any) -> str:
    """How a JSON file spells the type of a parsed value, for messages: "null", not NoneType."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return JSON_TYPES.get(type(value), type(value).__name__)


def _kept_or_raised(error: ImportFileError, problems: ImportProblems | None) -> None:
    """A line's problem: kept to be named with the others, or, for a reader called without
    `problems`, raised at once."""
    if problems is None:
        raise error
    problems.add(error)


class _HugeInteger(str):
    """A JSON integer of more than MAX_INTEGER_DIGITS digits, kept as its text to be named."""


def _open_text(path: str) -> IO[str]:
    try:
        handle = open(path, encoding="utf-8-sig", newline="")  # noqa: SIM115 - closed by callers
    except FileNotFoundError:
        raise ImportFileError(path, None, None, "the file does not exist") from None
    except IsADirectoryError:
        raise ImportFileError(path, None, None, "this is a folder, not a file") from None
    except OSError as error:
        raise ImportFileError(
            path, None, None, f"cannot open the file ({error.strerror})"
        ) from None
    return handle


def _lines(
    path: str,
    handle: IO[str],
    problems: ImportProblems | None = None,
    field_at: FieldNotUtf8 | None = None,
) -> Iterator[tuple[int, str]]:
    line_number = 0
    try:
        for line_number, line in enumerate(handle, start=1):  # noqa: B007 - used after the loop
            if len(line) > MAX_LINE_CHARS:
                problem = f"the line is longer than {MAX_LINE_CHARS:,} characters"
            elif "\x00" in line:
                problem = NUL_PROBLEM
            else:
                yield line_number, line
                continue
            _kept_or_raised(ImportFileError(path, line_number, None, problem), problems)
    except UnicodeDecodeError:
        raise _not_utf8(path, field_at) from None


def _not_utf8(path: str, field_at: FieldNotUtf8 | None = None) -> ImportFileError:
    """Name the first line whose bytes are not UTF-8 (the text reader decodes whole blocks, so
    where it failed says nothing about the line), and with `field_at` the field there."""
    with open(path, "rb") as handle:
        for line_number, raw in enumerate(handle, start=1):
            try:
                raw.decode("utf-8-sig" if line_number == 1 else "utf-8")
            except UnicodeDecodeError as error:
                found = f"byte {error.start + 1} of the line is {raw[error.start]:#04x}"
                field = None
                if line_number == 1 and raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
                    found = "it begins with a UTF-16 byte order mark"  # Excel's "Unicode text"
                elif field_at is not None:
                    field = field_at(line_number, raw)
                return ImportFileError(
                    path, line_number, field, f"not UTF-8 text ({found}): save the file as UTF-8"
                )
    return ImportFileError(path, None, None, "not UTF-8 text: save the file as UTF-8")


def _json_field_not_utf8(line_number: int, raw: bytes) -> str | None:
    """Name the field of a JSON line whose key or value holds a byte that is not UTF-8."""
    try:
        row = json.loads(raw.decode("utf-8", "surrogateescape"))
    except (ValueError, RecursionError):
        return None
    found = _find(row, lambda value: isinstance(value, str) and ESCAPED_BYTE.search(value))
    return (found[0] or None) if found is not None else None


def _csv_field_not_utf8(path: str, line_number: int) -> str | None:
    """Name the column of the CSV row on `line_number` whose cell holds a byte that is not
    UTF-8 (a row may run over several lines; the header's own bytes name no column)."""
    with open(path, encoding="utf-8-sig", errors="surrogateescape", newline="") as handle:
        reader = csv.reader(handle)
        try:
            header = [name.strip() for name in next(reader, [])]
            end = reader.line_num
            for values in reader:
                start, end = end + 1, reader.line_num
                if start <= line_number <= end:
                    cells = zip(header, values, strict=False)
                    return next((n for n, v in cells if ESCAPED_BYTE.search(v)), None)
                if start > line_number:
                    break
        except csv.Error:
            pass
    return None


def tab_field_not_utf8(header: Sequence[str]) -> FieldNotUtf8:
    """Return the namer of the column of a tab-separated line that holds a byte not UTF-8
    (the header line's own bytes name no column)."""

    def field_at(line_number: int, raw: bytes) -> str | None:
        if line_number == 1:
            return None
        for name, cell in zip(header, raw.split(b"\t"), strict=False):
            try:
                cell.decode("utf-8")
            except UnicodeDecodeError:
                return name
        return None

    return field_at


def _parse_int(text: str) -> int | str:
    return _HugeInteger(text) if len(text.lstrip("-")) > MAX_INTEGER_DIGITS else int(text)


def _find(value: Any, wanted, where: str = "") -> tuple[str, Any] | None:
    """Return (field path, value) of the first value in a parsed JSON object that `wanted` picks."""
    if isinstance(value, dict):
        for key in value:
            if wanted(key):  # a key can be as broken as a value
                return (f"{where}.{key!a}" if where else ascii(key), key)
        items = ((f"{where}.{key}" if where else str(key), item) for key, item in value.items())
    elif isinstance(value, list):
        items = ((f"{where}[{index}]", item) for index, item in enumerate(value))
    else:
        return (where, value) if wanted(value) else None
    for path, item in items:
        found = _find(item, wanted, path)
        if found is not None:
            return found
    return None


def _has_lone_surrogate(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _parse_json_line(path: str, line_number: int, line: str) -> Any:
    try:
        # Only a line with a long run of digits pays for the check of every integer.
        long_digits = LONG_DIGITS.search(line) is not None
        # Without its line break: an error at the end of the line is then placed there, not
        # at "column 1" of a second line.
        text = line.rstrip("\r\n")
        row = json.loads(text, parse_int=_parse_int) if long_digits else json.loads(text)
    except json.JSONDecodeError as error:
        # Some of json's messages end in "at" ("Unterminated string starting at").
        message = error.msg.removesuffix(" at")
        raise ImportFileError(
            path, line_number, None, f"not valid JSON ({message} at column {error.colno})"
        ) from None
    except RecursionError:
        raise ImportFileError(
            path, line_number, None, "not valid JSON here: values nested more than about 900 deep"
        ) from None
    huge = _find(row, lambda value: isinstance(value, _HugeInteger)) if long_digits else None
    if huge is not None:
        raise ImportFileError(
            path,
            line_number,
            huge[0] or None,
            f"a {len(huge[1].lstrip('-')):,}-digit number; no value here needs more than "
            f"{MAX_INTEGER_DIGITS}",
        )
    lone = _find(row, _has_lone_surrogate) if SURROGATE_ESCAPE.search(line) else None
    if lone is not None:
        raise ImportFileError(
            path,
            line_number,
            lone[0] or None,
            "holds a lone surrogate (\\ud800-\\udfff): half of a UTF-16 pair, not text",
        )
    return row


def read_jsonl(
    path: str, problems: ImportProblems | None = None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line number, object) for each non-blank line of a JSON Lines file.

    With `problems`, a line that is not a JSON object is kept there and skipped.
    """
    with _open_text(path) as handle:
        for line_number, line in _lines(path, handle, problems, _json_field_not_utf8):
            if not line.strip():
                continue
            try:
                if "\\u0000" in line:
                    raise ImportFileError(path, line_number, None, NUL_PROBLEM)
                row = _parse_json_line(path, line_number, line)
                if not isinstance(row, dict):
                    raise ImportFileError(
                        path, line_number, None, "each line must be a JSON object {...}"
                    )
            except ImportFileError as error:
                _kept_or_raised(error, problems)
                continue
            yield line_number, row


def _header_problem(header: list[str], required: list[str], optional: Sequence[str]) -> str | None:
    """Say what a CSV header lacks or has too many of, in words (None when it is right):
    "(missing: [], unknown: ['extra'])" read as Python, and never named the optional columns."""
    expected = f"the header must be {','.join(required)}"
    if optional:
        expected += f", optionally with {','.join(optional)}"
    missing = [name for name in required if name not in header]
    unknown = [name for name in header if name not in required and name not in optional]
    if not missing and not unknown:
        return None
    found = []
    if missing:
        found.append(f"missing {', '.join(repr(name) for name in missing)}")
    if unknown:
        column = "column" if len(unknown) == 1 else "columns"
        found.append(f"unknown {column} {', '.join(repr(name) for name in unknown)}")
    separator = next((c for c in (";", "\t", "|") if len(header) == 1 and c in header[0]), None)
    if separator:
        found.append(f"is the file separated by {separator!r}? it must be by commas")
    return f"{expected}; {'; '.join(found)}"


def read_csv(
    path: str,
    *,
    required: list[str],
    optional: list[str] = (),
    problems: ImportProblems | None = None,
) -> Iterator[tuple[int, dict]]:
    """Yield (line number, row) for each data row of a CSV file with a header line.

    The header must name every required column; optional columns may be absent, others are
    refused so that a typo in a column name is not silently ignored. With `problems`, a row of
    the wrong width is kept there and skipped.
    """
    with _open_text(path) as handle:
        reader = csv.reader(handle)
        try:
            header = [name.strip() for name in next(reader)]
            problem = _header_problem(header, required, optional)
            if problem:
                raise ImportFileError(path, 1, None, problem)
            width = len(header)
            end = reader.line_num
            for values in reader:
                # A quoted cell may hold line breaks: a row is named by its first line, and a
                # row that ran over several lines to a wrong width most likely opened a quote
                # it never closed.
                start, end = end + 1, reader.line_num
                if len(values) != width:
                    if not values or all(not value.strip() for value in values):
                        continue
                    problem = f"expected {width} columns, found {len(values)}"
                    if end > start:
                        problem += (
                            f" (a quote opened on this line runs to line {end}: is a closing"
                            ' " missing?)'
                        )
                    _kept_or_raised(ImportFileError(path, start, None, problem), problems)
                    continue
                joined = "".join(values)  # one scan in C instead of one per field
                if "\x00" in joined:
                    _kept_or_raised(ImportFileError(path, start, None, NUL_PROBLEM), problems)
                    continue
                if "'" in joined:
                    values = [csv_unescape(value) for value in values]
                yield start, dict(zip(header, values, strict=True))
        except StopIteration:
            raise ImportFileError(path, None, None, "the file is empty") from None
        except csv.Error as error:
            broken = ImportFileError(path, reader.line_num, None, f"not valid CSV ({error})")
            if problems is not None:
                problems.raise_found(also=broken)
            raise broken from None
        except UnicodeDecodeError:
            raise _not_utf8(path, lambda line, raw: _csv_field_not_utf8(path, line)) from None


# Text that a spreadsheet reads as a number (a negative kappa "-0.12", "+3"), not as a formula.
NUMBER_TEXT = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


class _SpreadsheetSafeWriter:
    """csv.writer whose text cells are spreadsheet-safe (spreadsheet_safe)."""

    def __init__(self, output: IO[str], lineterminator: str) -> None:
        self._writer = csv.writer(output, lineterminator=lineterminator)

    def writerow(self, row) -> Any:
        return self._writer.writerow(
            [spreadsheet_safe(cell) if isinstance(cell, str) else cell for cell in row]
        )

    def writerows(self, rows) -> None:
        for row in rows:
            self.writerow(row)


def csv_writer(output: IO[str], *, lineterminator: str = "\n") -> _SpreadsheetSafeWriter:
    """Return the writer of every CSV file the app writes: a csv.writer that neutralises
    formulas in text cells, since names and ids in these files come from outside (an imported
    benchmark, a self-hosted worker id) and a spreadsheet would run `=HYPERLINK(...)`."""
    return _SpreadsheetSafeWriter(output, lineterminator)


def spreadsheet_safe(value: str) -> str:
    """Return text a spreadsheet shows as text: a would-be formula gets a leading apostrophe.

    A cell starting with = + - @, a tab or a carriage return is run as a formula by Excel and
    LibreOffice (CSV injection). Numbers written as text, such as a negative kappa "-0.12" or
    "+3", are left alone so that they stay numbers.
    """
    return value if NUMBER_TEXT.fullmatch(value) else csv_escape(value)


def csv_escape(value: object) -> str:
    """Return a cell a spreadsheet will show as text: a leading formula character gets a quote.

    Text already starting with quotes before a formula character gets one more, so that
    csv_unescape, which takes exactly one off, gives back what was written.
    """
    text = "" if value is None else str(value)
    if text.lstrip("'").startswith(FORMULA_PREFIXES):
        return "'" + text
    return text


def csv_unescape(value: str) -> str:
    """Undo csv_escape, so that an exported file imports back unchanged."""
    if value.startswith("'") and value.lstrip("'").startswith(FORMULA_PREFIXES):
        return value[1:]
    return value


class NeedsRowReader(Exception):
    """The column reader met something only the row-by-row reader judges (and names) exactly."""


def read_csv_columns(
    path: str, *, required: list[str], optional: list[str] = (), chars: int = 1_000_000
) -> Iterator[tuple[int, dict[str, list[str]]]]:
    """Yield (first line number, {column: values}) for blocks of a plain CSV file's data rows.

    The fast way through a large, well-formed file whose values need no quoting: a block of
    lines is split into columns by a few string operations in C, and each check runs once per
    block. Anything else (a bad header, a quote, a blank or short row, a NUL, a lone carriage
    return, a decoding error) raises NeedsRowReader, so that read_csv goes through the file
    again, parsing every quirk the csv module knows and naming the line of a problem.
    """
    allowed = [*required, *optional]
    with _open_text(path) as handle:
        try:
            header = [name.strip() for name in _plain_lines(handle.readline())[0].split(",")]
            if (
                len(set(header)) != len(header)
                or any(name not in header for name in required)
                or any(name not in allowed for name in header)
            ):
                raise NeedsRowReader
            line = 2
            while text := handle.read(chars):
                lines = _plain_lines(text + handle.readline())
                yield line, _columns(header, lines)
                line += len(lines)
        except UnicodeDecodeError:
            raise NeedsRowReader from None


def _plain_lines(text: str) -> list[str]:
    """Split text into lines, if the csv module would read it the same way without quoting."""
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    if not text or any(char in text for char in '"\r\x00'):
        raise NeedsRowReader
    return text.removesuffix("\n").split("\n")


def _columns(header: list[str], lines: list[str]) -> dict[str, list[str]]:
    """Split lines into columns, unescaped as read_csv does row by row."""
    width = len(header)
    if set(map(methodcaller("count", ","), lines)) != {width - 1}:
        raise NeedsRowReader  # a blank row or a wrong number of columns
    if max(map(len, lines)) > MAX_LINE_CHARS:
        raise NeedsRowReader  # a field may be over the csv module's limit
    joined = ",".join(lines)
    values = joined.split(",")
    columns = {name: values[position::width] for position, name in enumerate(header)}
    if "'" in joined:
        columns = {name: list(map(csv_unescape, column)) for name, column in columns.items()}
    return columns
