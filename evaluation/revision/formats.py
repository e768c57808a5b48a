"""Turn a revision report (evaluation.revision.reports) into CSV, JSON, LaTeX and Markdown.

Every table is a list of flat rows; columns are the union of the rows' keys in first-seen
order, so per-system columns (`good:gpt-4`) follow the study's systems.
"""

from __future__ import annotations

import io
from collections.abc import Iterable

from annotate.services.files import csv_writer
from evaluation.report_formats import (
    _csv_cell,
    _fixed,
    latex_escape,
    markdown_escape,
    no_interval_note,
    report_json,
)
from evaluation.stats.revision import METRICS

TABLES = {
    "table2": "Table 2: sessions per system",
    "figure2_ratings": "Figure 2 (top): rating distribution",
    "figure2_positions": "Figure 2 (bottom): instruction type by turn position",
    "table3": "Table 3: fine-grained instruction types",
    "table4": "Table 4: error categories of neutral and bad turns",
    "table5": "Table 5: automatic evaluation of instruction following (judges and baselines on "
    "the test split)",
}
# Every table's columns, rows or not (an empty table's CSV keeps its header, which scripts read);
# rows add their per-system columns (`good:gpt-4`) after these.
COLUMNS = {
    "table2": [
        "system", "sessions", "turns", "edited", "turns_per_session", "information_seeking",
        "stylistic",
    ],
    "figure2_ratings": ["system", "instruction_type", "turns", "good", "neutral", "bad"],
    "figure2_positions": ["position", "turns", "information_seeking", "stylistic"],
    "table3": ["category", "turns", "share", "information_seeking", "stylistic"],
    "table4": ["category", "turns", "share"],
    "table5": [
        "model", "run", "split", "seed", "mode", "shots", "n",
        *(f"{metric}{part}" for metric in METRICS for part in ("", "_ci_low", "_ci_high")),
        "unparsed", "three_way_agreement",
    ],
    "table3_agreement": ["run", "compared", "agreement"],
    "table4_agreement": ["run", "compared", "agreement"],
    "table3_sources": ["source", "turns"],
    "table5_splits": ["split", "seed", "runs", "turns", "train", "dev", "test"],
    "table5_human": ["model", "turns", "evaluated_on"],
    "waiting_for_kind": ["sessions", "annotators", "reratings", "raters"],
    "blocked": ["sessions", "annotators", "reratings", "raters"],
}  # fmt: skip
# Said under every LaTeX table: which columns are percentages, and why they need not add to 100.
LATEX_NOTE = (
    "Shares, \\% good and \\% predicted good or bad are percentages, each rounded on its own; "
    "accuracy, precision, recall and F1 are fractions."
)
# Digits of what people read (the page, LaTeX, Markdown), as the paper's tables show them:
# shares as whole percentages, other fractions (turns per session, F1...) to two digits. The page
# showed more ("32.0", "3.506") than the tables a researcher copies ("32", "3.51").
PERCENT_DIGITS, DIGITS = 0, 2
# Shares shown as percentages on the page, in LaTeX and in Markdown, as in the paper.
PERCENT_SUFFIXES = ("good", "neutral", "bad", "information_seeking", "stylistic", "share")
# What people read above a column (the page, LaTeX, Markdown); CSV and JSON keep the field names.
HEADERS = {
    "system": "System",
    "sessions": "Sessions",
    "turns": "Turns",
    "edited": "Turns edited",
    "turns_per_session": "Turns per session",
    "information_seeking": "% information-seeking",
    "stylistic": "% stylistic",
    "instruction_type": "Instruction type",
    "good": "% good",
    "neutral": "% neutral",
    "bad": "% bad",
    "position": "Turn",
    "category": "Category",
    "share": "% of turns",
    "model": "Model",
    "mode": "Mode",
    "shots": "Shots",
    "n": "Turns",
    "accuracy": "Accuracy",
    "precision": "Precision",
    "recall": "Recall",
    "f1": "F1",
    "predicted_good": "% predicted good",
    "predicted_bad": "% predicted bad",
    "unparsed": "Unparsed",
    "three_way_agreement": "3-way agreement",
    "run": "Run",
    "split": "Split",
    "seed": "Seed",
}


def column_title(column: str) -> str:
    """The header of a column: `good:gpt-4` reads "% good (gpt-4)"."""
    base, _, system = column.partition(":")
    title = HEADERS.get(base, base)
    return f"{title} ({system})" if system else title


def is_percent(column: str) -> bool:
    return column.split(":")[0].endswith(PERCENT_SUFFIXES) and "_ci_" not in column


def table_rows(report: dict, table: str) -> list[dict]:
    value = report[table]
    return value["rows"] if isinstance(value, dict) else value


def others_merged(report: dict, table: str) -> list[str]:
    """The categories a table merged into "others" (Tables 3 and 4; none for the others)."""
    value = report[table]
    return value.get("others_rule", {}).get("merged", []) if isinstance(value, dict) else []


def table_notes(report: dict, table: str) -> list[str]:
    """The figures of a table that are not rows, as sentences: the classifier's agreement with
    the human labels (Tables 3 and 4), where the labels came from (Table 3), the seeded splits,
    the turns of the Human row and the bootstrap intervals (Table 5)."""
    value = report[table]
    untyped = _untyped_note(report, table)
    notes = [untyped] if untyped else []
    if table == "table2" and report.get("sessions_without_turns"):
        notes.append(_sessions_without_turns_note(report))
    if table != "table5" and any(
        v is None for row in table_rows(report, table) for v in row.values()
    ):
        notes.append(SHARE_UNDEFINED_NOTE)
    if not isinstance(value, dict):
        return notes
    agreement = value.get("agreement")
    if agreement is not None:
        run = f"run #{agreement['run']}"
        if agreement["run"] is None:
            notes.append("Classifier agreement with the human labels: no classifier run yet.")
        elif agreement["compared"]:
            share = _fixed(agreement["agreement"], scale=100, digits=PERCENT_DIGITS, minus="-")
            compared = agreement["compared"]
            notes.append(
                f"Classifier agreement with the human labels: {share}% on the {compared} "
                f"turn{'' if compared == 1 else 's'} having both ({run})."
            )
        else:
            notes.append(f"Classifier agreement with the human labels: no turn has both ({run}).")
    sources = value.get("sources")
    if sources:
        counts = ", ".join(f"{sources.get(name, 0)} {name}" for name in SOURCES)
        notes.append(f"Category labels: {counts}.")
    if value.get("unlabelled"):
        turns = "neutral or bad turn" if table == "table4" else "rated turn"
        notes.append(_unlabelled_note(value, turns=turns))
    for split in value.get("splits", []):
        notes.append(
            f"Split {split['split']} of seed {split['seed']} ({_runs_named(split['runs'])}, "
            f"{split['turns']} turns): {split['train']} train, {split['dev']} dev, "
            f"{split['test']} test turns."
        )
    human = _human_row(report) if table == "table5" else None
    if human is not None:
        turns = f"{human['n']} re-rated turn{'' if human['n'] == 1 else 's'}"
        notes.append(
            "The Human row is not on the test split: it compares the first rating of each of "
            f"the {turns} with its re-rating (every finished re-rating of the study, in any "
            "split, but none by the annotator who did the session)."
        )
    if table == "table5" and value.get("rows"):
        bootstrap = report.get("bootstrap", {})
        notes.append(
            "95% percentile bootstrap intervals "
            f"({bootstrap.get('resamples', '?')} resamples over turns, seed "
            f"{bootstrap.get('seed', '?')}) follow each figure in brackets."
        )
        if _has_undefined(value["rows"]):
            notes.append(UNDEFINED_NOTE)
    return notes


# Said under Tables 2-4 and Figure 2's tables when a share has no turn to be a share of
# (evaluation.revision.reports._share), as UNDEFINED_NOTE under Table 5.
SHARE_UNDEFINED_NOTE = (
    "A figure shown as – is undefined, not 0: a share of no turn (say, % good of a system "
    "none of whose turns is in the category, or % information-seeking of turns none of which "
    "has a type); null in JSON, empty in CSV."
)


# Said under Table 5 when a figure or an interval is undefined (evaluation.stats.revision).
UNDEFINED_NOTE = (
    "A figure shown as – is undefined, not 0: a ratio of 0 to 0 (precision when a model "
    "predicts no turn good, recall when no turn is good, F1 when neither a turn is good nor "
    "one predicted good); "
    "null in JSON, empty in CSV. " + no_interval_note("A figure without brackets", "turns")
)


def _sessions_without_turns_note(report: dict) -> str:
    """Say which sessions Table 2 counts with no turn, and what that does to turns per session
    (evaluation.revision.reports.table2: the paper counts every finished session)."""
    counts = report["sessions_without_turns"]
    total, sessions = sum(counts.values()), sum(row["sessions"] for row in report["table2"])
    systems = ", ".join(f"{system}: {count}" for system, count in counts.items())
    return (
        f"{total} of the {_plural(sessions, 'finished session')} ({systems}) ended "
        "(“I am satisfied”) before any rated turn: each counts as a session of 0 turns in "
        "Sessions and Turns per session, which it lowers."
    )


def _unlabelled_note(table: dict, *, turns: str = "rated turn") -> str:
    """Say how many turns Table 3 (or Table 4, of the failed turns) leaves out for having no
    category yet, and of what its shares are instead (evaluation.revision.reports.table3,
    table4)."""
    unlabelled = table["unlabelled"]
    categorised = sum(row["turns"] for row in table["rows"])
    return (
        f"{_plural(unlabelled, turns)} {'has' if unlabelled == 1 else 'have'} no "
        "category yet (neither a human label nor a classifier's): left out of the table, "
        f"its shares and the 5% “others” rule, which are of the {categorised} categorised "
        f"turn{'' if categorised == 1 else 's'}."
    )


def _runs_named(runs: list[int]) -> str:
    """The judge runs on a split, "run #3" or "runs #3, #5", as the Run column numbers them."""
    return f"run{'' if len(runs) == 1 else 's'} " + ", ".join(f"#{run}" for run in runs)


def _has_undefined(rows: list[dict]) -> bool:
    """Whether a Table 5 row lacks a figure or an interval (the Human row's extra columns and a
    baseline's mode or shots are not figures)."""
    names = [f"{metric}{part}" for metric in METRICS for part in ("", "_ci_low", "_ci_high")]
    return any(row.get(name) is None for row in rows for name in names)


def _untyped_note(report: dict, table: str) -> str:
    """Say which turns the instruction-type shares leave out, when an import left some
    without a type (the app's own turns always have one)."""
    untyped, turns = report.get("untyped_turns", 0), report.get("turns", 0)
    if not untyped:
        return ""
    counted = f"{untyped} of the {turns} rated turns have no instruction type"
    if table == "figure2_ratings":
        return f"{counted}: they count under “all” only."
    if table in ("table2", "figure2_positions", "table3"):
        return f"{counted}: % information-seeking and % stylistic are of the others."
    return ""


HUMAN_TURNS = "re-rated turns: first rating against re-rating; not the test split"


def _human_row(report: dict) -> dict | None:
    """Table 5's Human row (the only one with a three-way agreement; a judge's endpoint may be
    called anything), or None before any re-rating."""
    return next((r for r in report["table5"]["rows"] if "three_way_agreement" in r), None)


# Table 3's label sources, in the order a note names them.
SOURCES = ("human", "classifier", "none")


def notes_rows(report: dict) -> dict[str, list[dict]]:
    """The figures beside the tables as CSV tables of their own (`# table3_agreement`...)."""
    extra: dict[str, list[dict]] = {}
    for table in ("table3", "table4"):
        extra[f"{table}_agreement"] = [dict(report[table]["agreement"])]
    extra["table3_sources"] = [
        {"source": name, "turns": report["table3"]["sources"].get(name, 0)} for name in SOURCES
    ]
    # A split's runs in one cell, "3 5": a CSV cell holds no list.
    extra["table5_splits"] = [
        {**split, "runs": " ".join(map(str, split["runs"]))} for split in report["table5"]["splits"]
    ]
    # What the Human row is computed on, as the notes under Table 5 say: not the test split.
    human = _human_row(report)
    row = {"model": "Human", "turns": human["n"], "evaluated_on": HUMAN_TURNS} if human else None
    extra["table5_human"] = [row] if row else []
    # Always one row, zeros included: a script reads how much was left out, nothing or not.
    extra["waiting_for_kind"] = [dict(report.get("waiting_for_kind") or {})]
    extra["blocked"] = [dict(report.get("blocked") or {})]
    return extra


def _plural(count: int, one: str, many: str | None = None) -> str:
    return f"{count} {one if count == 1 else many or one + 's'}"


def waiting_note(report: dict) -> str:
    """Say what the report leaves out until a researcher decides some accounts' kind, as the
    InFoBench and verbalizer reports do; "" when nothing is left out."""
    work, verb = _left_out_work(report.get("waiting_for_kind") or {})
    if not work:
        return ""
    return (
        f"{work} whose kind is not decided yet {verb} left out of every table and figure; they "
        "count once a researcher decides the kind on the Annotators page."
    )


def blocked_note(report: dict) -> str:
    """Say what the report leaves out because an admin blocked the accounts that did it; ""
    when nothing is left out."""
    work, verb = _left_out_work(report.get("blocked") or {})
    if not work:
        return ""
    return (
        f"{work} whose account an admin blocked {verb} left out of every table and figure; "
        "they count again once the account is unblocked."
    )


def left_out_notes(report: dict) -> list[str]:
    """Every note on work the report leaves out, as the page and each file say it."""
    return [note for note in (waiting_note(report), blocked_note(report)) if note]


def _left_out_work(counts: dict) -> tuple[str, str]:
    """("3 finished sessions by 2 annotators and 1 re-rating by 1 annotator", "are") of a
    LeftOut's counts; ("", "") when they are all zero."""
    parts = []
    if counts.get("sessions"):
        parts.append(
            f"{_plural(counts['sessions'], 'finished session')} by "
            f"{_plural(counts['annotators'], 'annotator')}"
        )
    if counts.get("reratings"):
        parts.append(
            f"{_plural(counts['reratings'], 're-rating')} by "
            f"{_plural(counts['raters'], 'annotator')}"
        )
    if not parts:
        return "", ""
    count = counts.get("sessions", 0) + counts.get("reratings", 0)
    return " and ".join(parts), "is" if count == 1 else "are"


def _columns(rows: list[dict], known: Iterable[str] = ()) -> list[str]:
    columns: list[str] = list(known)
    for row in rows:
        columns += [key for key in row if key not in columns]
    return columns


def revision_json(report: dict) -> str:
    return report_json(report)


def revision_csv(report: dict) -> str:
    """Every table as CSV, each after a `# <table>` line and followed by a blank line; a table
    without rows keeps its header."""
    out = io.StringIO()
    extra = notes_rows(report)
    sections = [(table, table_rows(report, table)) for table in TABLES]
    sections += [(name, rows) for name, rows in extra.items()]
    for table, rows in sections:
        columns = _columns(rows, COLUMNS[table])
        out.write(f"# {table}\r\n")
        writer = csv_writer(out, lineterminator="\r\n")
        writer.writerow(columns)
        for row in rows:
            writer.writerow([_csv_cell(row.get(column)) for column in columns])
        out.write("\r\n")
    return out.getvalue()


def display(column: str, value: object) -> str:
    """A cell as people read it, on the page as in the paper tables: shares as whole
    percentages, other fractions to two digits, halves up as everywhere else (Python's own
    formatting shows 0.125 as 12)."""
    if value is None:
        return "–"
    if isinstance(value, float):
        if is_percent(column):
            return _fixed(value, scale=100, digits=PERCENT_DIGITS, minus="-")
        return _fixed(value, digits=DIGITS, minus="-")
    return str(value)


def interval(row: dict, column: str) -> str:
    """The bootstrap interval of a cell as "[low, high]", in the cell's own units; "" for a
    column without one (`<column>_ci_low` / `_ci_high` in the row, Table 5's figures)."""
    low, high = row.get(f"{column}_ci_low"), row.get(f"{column}_ci_high")
    if low is None or high is None:
        return ""
    shown = (display(column, bound) for bound in (low, high))
    return "[{}, {}]".format(*shown)


def _with_interval(row: dict, column: str) -> str:
    text = display(column, row.get(column))
    bounds = interval(row, column)
    return f"{text} {bounds}" if bounds else text


def _shown_columns(rows: list[dict]) -> list[str]:
    """The columns of a paper table: no intervals, and the run, split and split seed only where
    rows would otherwise look alike (Majority and Random of two splits, two runs of one judge)."""
    columns = [c for c in _columns(rows) if "_ci_" not in c]
    for name in ("run", "split", "seed"):
        if (
            name in columns
            and len({row.get(name) for row in rows if row.get(name) is not None}) < 2
        ):
            columns.remove(name)
    return columns


def revision_markdown(report: dict) -> str:
    parts = [f"# Revision report: {markdown_escape(report['study'])}\n"]
    for note in left_out_notes(report):
        parts.append(f"\n{note}\n")
    for table, title in TABLES.items():
        rows = table_rows(report, table)
        columns = _shown_columns(rows)
        parts.append(f"\n## {title}\n")
        if not rows:
            parts.append("\n(no data)\n")
            continue
        titles = [markdown_escape(column_title(c)) for c in columns]
        parts.append("\n| " + " | ".join(titles) + " |\n|" + "---|" * len(columns) + "\n")
        for row in rows:
            cells = [_markdown_cell(row, c) for c in columns]
            parts.append("| " + " | ".join(cells) + " |\n")
        merged = others_merged(report, table)
        if merged:
            parts.append(
                "\nMerged into others (under 5%, KIWI appendix A.3): "
                f"{', '.join(map(markdown_escape, merged))}.\n"
            )
        notes = table_notes(report, table)
        if notes:
            parts.append("\n" + "\n".join(notes) + "\n")
    parts.append(
        "\nShares, % good and % predicted good/bad are percentages; accuracy, precision, recall and F1 are fractions.\n"
        "Each is rounded on its own (halves up), so the percentages of a row need not add up to 100.\n"
    )
    return "".join(parts)


def _markdown_cell(row: dict, column: str) -> str:
    """A cell of a Markdown table: a name (a system, a category) as text, a figure as shown."""
    if isinstance(row.get(column), str):
        return markdown_escape(row[column])
    return _with_interval(row, column)


def revision_latex(report: dict) -> str:
    # What the tables leave out, as comments above them: said in the file, not in the paper.
    left_out = left_out_notes(report)
    parts = ["".join(f"% {note}\n" for note in left_out)] if left_out else []
    for table, title in TABLES.items():
        rows = table_rows(report, table)
        columns = _shown_columns(rows)
        if not rows:
            continue
        header = " & ".join(latex_escape(column_title(c)) for c in columns)
        notes = "".join(f" {latex_escape(note)}" for note in table_notes(report, table))
        body = "".join(" & ".join(_latex_cell(row, c) for c in columns) + " \\\\\n" for row in rows)
        parts.append(
            "\\begin{table}[t]\n\\centering\n\\small\n"
            f"\\begin{{tabular}}{{l{'r' * (len(columns) - 1)}}}\n\\toprule\n{header} \\\\\n"
            f"\\midrule\n{body}\\bottomrule\n\\end{{tabular}}\n"
            f"\\caption{{{latex_escape(title)} ({latex_escape(report['study'])}).{notes} {LATEX_NOTE}}}\n"
            "\\end{table}\n"
        )
    return "\n".join(parts)


def _latex_cell(row: dict, column: str) -> str:
    text = latex_escape(display(column, row.get(column)))
    # "[low, high]" of two figures as display() writes them (digits, a point, a minus, a
    # dash): nothing LaTeX reads specially, and never at a row's start, where latex_escape
    # would brace its "[".
    bounds = interval(row, column)
    return f"{text} {{\\scriptsize {bounds}}}" if bounds else text


FORMATS = {
    "json": revision_json,
    "csv": revision_csv,
    "latex": revision_latex,
    "md": revision_markdown,
}
