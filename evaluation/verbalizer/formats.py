"""The verbalizer report as JSON rows, CSV, LaTeX and Markdown (numbers as fractions; LaTeX and
Markdown show percentages with one decimal). Three tables: `rows` (accuracy), `agreement` (Fleiss'
kappa of people with its bootstrap interval) and `slices` (which prompts people answered, where
models are scored a second time); the LaTeX and Markdown documents of `rows` say under the
table which prompts the people answered and end with the agreement table."""

from __future__ import annotations

import io
import json

from annotate.services.files import csv_writer
from evaluation.report_formats import (
    _csv_cell,
    _fixed,
    has_no_interval,
    latex_escape,
    markdown_escape,
    no_interval_note,
)
from evaluation.verbalizer.report import PEOPLE, row_order, system_label
from evaluation.verbalizer.slices import SET_PROMPTS, SLICE_COLUMNS

FORMATS = ("json", "csv", "latex", "md")
TABLES = ("rows", "agreement", "slices")
AGREEMENT_COLUMNS = [
    "source", "dataset", "kappa", "ci_low", "ci_high", "items", "raters", "raw_agreement", "note",
]  # fmt: skip
# The JSON rows' keys, in the documented order: CSV carries every one (docs/verbalizer.md).
ROW_COLUMNS = [
    "system", "dataset", "group", "mapping", "mode", "n",
    "accuracy_strict", "accuracy_lenient", "invalid", "invalid_strict", "invalid_lenient",
    "ci_strict_low", "ci_strict_high", "ci_lenient_low", "ci_lenient_high", "prompts",
]  # fmt: skip


def flat_rows(report: dict, table: str = "rows") -> list[dict]:
    """Return the table's rows with each interval split into `_low` and `_high` columns."""
    out = []
    for row in report[table]:
        flat = {k: v for k, v in row.items() if not k.startswith("ci_")}
        for rule in ("strict", "lenient"):
            flat[f"ci_{rule}_low"], flat[f"ci_{rule}_high"] = row[f"ci_{rule}"]
        out.append(flat)
    return out


def rows_json(report: dict) -> str:
    return json.dumps(flat_rows(report), indent=1)


def rows_csv(report: dict) -> str:
    output = io.StringIO()
    writer = csv_writer(output)
    writer.writerow(ROW_COLUMNS)
    for row in flat_rows(report):
        writer.writerow([_csv_cell(row.get(column)) for column in ROW_COLUMNS])
    return output.getvalue()


NO_DATA = "(no data)"


def _pct(value) -> str:
    return _fixed(value, scale=100, digits=1)


def _interval(low, high, show, between: str) -> str:
    """Show an interval as low and high joined by `between`; "n/a" once when there is none (no
    valid reply, too few answers)."""
    if low is None or high is None:
        return "n/a"
    return f"{show(low)}{between}{show(high)}"


# Said under a table whose 95% CI column shows an n/a: every interval of the report resamples
# whole classification items (evaluation.verbalizer.scoring.cells, _kappa_with_ci).
INTERVAL_NA_NOTE = no_interval_note("A figure whose 95% CI is n/a", "items")
# Said under the rows table where an accuracy is n/a (scoring: no valid reply, no accuracy).
ACCURACY_NA_NOTE = (
    "A strict % or lenient % shown as n/a is undefined, not 0: none of the row's n replies is "
    "valid under that rule (one of the prompt's two label words); a chain-of-thought reply is "
    "never a bare label word, so the strict rule reads none of them."
)


def _bootstrap_note(report: dict, clusters: str) -> str:
    """State the bootstrap behind a table's 95% CI column (its resamples and seed, from the
    settings the report read), so a reader can draw the same intervals again; "" for a report
    that does not record it."""
    bootstrap = report.get("bootstrap")
    if not bootstrap:
        return ""
    return (
        f"95% CI: percentile bootstrap over {clusters} ({bootstrap['resamples']:,} resamples, "
        f"seed {bootstrap['seed']})."
    )


def _single_item_note(report: dict, rows: list[dict], low: str, high: str) -> str:
    """Name the datasets of a single item whose rows have no interval: every resample draws
    that item, which the general note's "fewer than two items" does not make plain; "" when
    there is none."""
    one_item = report.get("dataset_items", {})
    names = sorted(
        {
            row["dataset"]
            for row in rows
            if one_item.get(row["dataset"]) == 1 and has_no_interval([row], low, high)
        }
    )
    if not names:
        return ""
    holds = "holds" if len(names) == 1 else "each hold"
    return (
        f"{', '.join(names)} {holds} a single item: an interval over one item is n/a (every "
        "resample would draw that item)."
    )


def _rows_notes(report: dict, rows: list[dict]) -> list[str]:
    """The notes under the rows table: the people's slices, then why a figure is n/a where one
    is, then the bootstrap behind the intervals."""
    said = [s["note"] for s in report["slices"]]
    if any(row[f"accuracy_{rule}"] is None for row in rows for rule in ("strict", "lenient")):
        said.append(ACCURACY_NA_NOTE)
    # An n/a accuracy has no interval either: the note above says why.
    defined = [row for row in rows if row["accuracy_lenient"] is not None]
    if has_no_interval(defined, "ci_lenient_low", "ci_lenient_high"):
        said.append(INTERVAL_NA_NOTE)
        said.append(_single_item_note(report, defined, "ci_lenient_low", "ci_lenient_high"))
    if rows:
        said.append(_bootstrap_note(report, "items, drawn within their dataset"))
    return [note for note in said if note]


def rows_markdown(report: dict) -> str:
    head = ["system", "dataset", "group", "mapping", "mode", "n", "strict %", "lenient %",
            "95% CI (lenient)", "invalid % (lenient)"]  # fmt: skip
    rows = flat_rows(report)
    # Said in words, as the KIWI report's Markdown does: a header alone looks like a cut file.
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] if rows else [NO_DATA]
    for row in rows:
        shown = [system_label(row["system"], row["prompts"]), row["dataset"], row["group"],
                 row["mapping"]]  # fmt: skip
        cells = [
            *map(markdown_escape, shown),
            row["mode"], str(row["n"]), _pct(row["accuracy_strict"]),
            _pct(row["accuracy_lenient"]),
            _interval(row["ci_lenient_low"], row["ci_lenient_high"], _pct, "–"),
            _pct(row["invalid"]),
        ]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    notes = "".join(f"\n{markdown_escape(note)}\n" for note in _rows_notes(report, rows))
    return "\n".join(lines) + "\n" + notes


GROUPS = ("natural", "neutral", "unnatural")


def rows_latex(report: dict) -> str:
    """A booktabs table per system: accuracy (lenient, %) per group, then the share of the
    group's replies that are invalid: a pasted table of accuracies alone hid that a majority's
    100.0 rested on the prompts people did not tie on (the page has the column)."""
    lines = _groups_latex_head(report["set"])
    values = {(r["system"], r["prompts"], r["group"]): r for r in report["groups"]}
    models = [(s["system"], SET_PROMPTS) for s in report["systems"] if s["system"] not in PEOPLE]
    shown = models + [p for p in row_order(report["groups"]) if p[1] != SET_PROMPTS]
    cells_shown: set[str] = set()
    for index, (name, prompts) in enumerate(shown):
        if index and prompts != shown[index - 1][1]:
            lines.append("\\midrule")  # the models on people's prompts, then the people
        found = [values.get((name, prompts, group)) for group in GROUPS]
        cells = [_group_cell(row, "accuracy_lenient") for row in found]
        cells += [_group_cell(row, "invalid") for row in found]
        cells_shown.update(cells)
        lines.append(
            latex_escape(system_label(name, prompts)) + " & " + " & ".join(cells) + " \\\\"
        )
    lines += ["\\bottomrule", "\\end{tabular}", ""]
    for found in report["slices"]:
        lines += [_latex_note(found["note"]), ""]
    said = [INVALID_LEGEND]
    said += [legend for cell, legend in GROUP_CELL_LEGENDS.items() if cell in cells_shown]
    lines += [_latex_note("; ".join(said) + "."), ""]
    return "\n".join(lines)


def _groups_latex_head(set_name: str) -> list[str]:
    """The groups table's comments and header: the groups twice, under accuracy and invalid."""
    count = len(GROUPS)
    titles = " & ".join(g.capitalize() for g in GROUPS)
    return [
        "% Verbalizer manipulation, set " + latex_escape(set_name).replace("\n", " "),
        "% accuracy (lenient rule, %), direct prompting; invalid replies are not counted in it",
        "% but shown beside it (% of the group's replies);",
        "% a group is the mean of its datasets' and mappings' accuracies (not pooled answers)",
        "\\begin{tabular}{l" + "r" * 2 * count + "}",
        "\\toprule",
        f" & \\multicolumn{{{count}}}{{c}}{{Accuracy (\\%)}}"
        f" & \\multicolumn{{{count}}}{{c}}{{Invalid (\\%)}} \\\\",
        f"\\cmidrule(lr){{2-{count + 1}}}\\cmidrule(lr){{{count + 2}-{2 * count + 1}}}",
        f"System & {titles} & {titles} \\\\",
        "\\midrule",
    ]


def _group_cell(row: dict | None, field: str) -> str:
    """A percentage of the groups table; "--" for a cell never asked (people on golden prompts
    only, say), which is not one with no valid reply ("n/a")."""
    return "--" if row is None else _pct(row[field])


# Said under the LaTeX table of groups, always: what the invalid columns count, and that the
# accuracy leaves them out (a majority's tie is invalid: evaluation.verbalizer.scoring).
INVALID_LEGEND = (
    "Invalid: the share of the group's replies that are neither of the prompt's two label "
    "words under the lenient rule (for a majority row, prompts whose people tie), left out of "
    "the accuracy"
)


# Said under the LaTeX table of groups where such a cell is: a pasted table keeps it typeset,
# where a comment would not reach the paper.
GROUP_CELL_LEGENDS = {
    "n/a": "n/a: asked, and no reply valid under the lenient rule",
    "--": "--: not asked (no prompt of that group)",
}


def _latex_text(text: str) -> str:
    return latex_escape(text).replace("\u201c", "``").replace("\u201d", "''")


def _latex_note(text: str) -> str:
    """A note under a table, in small type."""
    return f"\\par\\smallskip\\noindent{{\\footnotesize {_latex_text(text)}}}"


def agreement_json(report: dict) -> str:
    return json.dumps(report["agreement"], indent=1)


def agreement_csv(report: dict) -> str:
    output = io.StringIO()
    writer = csv_writer(output)
    writer.writerow(AGREEMENT_COLUMNS)
    for row in report["agreement"]:
        writer.writerow([_csv_cell(row.get(column)) for column in AGREEMENT_COLUMNS])
    return output.getvalue()


def kappa_text(value) -> str:
    """Show a kappa with three decimals, halves rounded up, as the report page shows it (the
    page's filter is this function): Python's own formatting made 0.0625 "0.062" here and
    "0.063" on the page; "n/a" when undefined."""
    return _fixed(value, digits=3, minus="-")


def kappa_interval_text(low, high) -> str:
    """Show a kappa interval as "low to high" (an en dash before a minus sign is hard to read)."""
    return _interval(low, high, kappa_text, " to ")


def agreement_markdown(report: dict, said: tuple[str, ...] = ()) -> str:
    """The agreement table in Markdown, with its notes but those in `said` (already under the
    rows table of the same document: the n/a note twice read as two different reasons)."""
    head = ["people", "dataset", "Fleiss' kappa", "95% CI", "prompts", "raters each", "note"]
    if not report["agreement"]:
        return NO_DATA + "\n"
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in report["agreement"]:
        cells = [
            markdown_escape(row["source"]), markdown_escape(row["dataset"]),
            kappa_text(row["kappa"]), kappa_interval_text(row["ci_low"], row["ci_high"]),
            str(row["items"]), str(row["raters"]), markdown_escape(row["note"]),
        ]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    for note in _agreement_notes(report):
        if note not in said:
            lines += ["", markdown_escape(note)]
    return "\n".join(lines) + "\n"


def _agreement_notes(report: dict) -> list[str]:
    """The notes under the agreement table: why an interval is n/a where one is, then the
    bootstrap behind the intervals."""
    # An n/a kappa has no interval either: its note says why.
    defined = [row for row in report["agreement"] if row["kappa"] is not None]
    said = []
    if has_no_interval(defined):
        said += [INTERVAL_NA_NOTE, _single_item_note(report, defined, "ci_low", "ci_high")]
    said.append(_bootstrap_note(report, "items, an item's prompts drawn together"))
    return [note for note in said if note]


def _kappa_na_notes(rows: list[dict]) -> list[str]:
    """Say why each n/a kappa is undefined, and why a defined one's interval is n/a, as the
    Markdown's note column does: the LaTeX table has no room for that column, and a pasted
    table must keep the reason."""
    cells: dict[str, list[str]] = {}
    intervals: dict[str, list[str]] = {}
    for row in rows:
        if row["kappa"] is None:
            cells.setdefault(row["note"], []).append(f"{row['source']}, {row['dataset']}")
        elif row["ci_low"] is None and row["note"]:
            intervals.setdefault(row["note"], []).append(f"{row['source']}, {row['dataset']}")
    return [f"Kappa n/a ({'; '.join(found)}): {why}." for why, found in cells.items()] + [
        f"{'; '.join(found)}: {why}." for why, found in intervals.items()
    ]


def _latex_interval(low, high) -> str:
    return "n/a" if low is None or high is None else f"[{kappa_text(low)}, {kappa_text(high)}]"


def agreement_latex(report: dict) -> str:
    lines = [
        "% Agreement of people: Fleiss' kappa over prompts, 95% bootstrap CI over items",
        "\\begin{tabular}{llrrrr}",
        "\\toprule",
        "People & Dataset & $\\kappa$ & 95\\% CI & Prompts & Raters \\\\",
        "\\midrule",
    ]
    for row in report["agreement"]:
        cells = [
            latex_escape(row["source"]), latex_escape(str(row["dataset"])),
            kappa_text(row["kappa"]), _latex_interval(row["ci_low"], row["ci_high"]),
            str(row["items"]), str(row["raters"]),
        ]  # fmt: skip
        lines.append(" & ".join(cells) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}", ""]
    for note in _kappa_na_notes(report["agreement"]) + _agreement_notes(report):
        lines += [_latex_note(note), ""]
    return "\n".join(lines)


def slices_json(report: dict) -> str:
    return json.dumps(report["slices"], indent=1)


def _slice_cell(found: dict, column: str) -> str:
    """A slice's field as one CSV cell: lists joined by "; ", items as "SST-2: 8 of 100",
    models as "gpt-4: 24" (the number of the slice's prompts it answered)."""
    value = found[column]
    if column == "items":
        return "; ".join(f"{d}: {k} of {found['set_items'][d]}" for d, k in value.items())
    if column == "models":
        return "; ".join(f"{m}: {k}" for m, k in value.items())
    if isinstance(value, list):
        return "; ".join(value)
    return _csv_cell(value)


def slices_csv(report: dict) -> str:
    output = io.StringIO()
    writer = csv_writer(output)
    writer.writerow(SLICE_COLUMNS)
    for found in report["slices"]:
        writer.writerow([_slice_cell(found, column) for column in SLICE_COLUMNS])
    return output.getvalue()


def slices_markdown(report: dict) -> str:
    if not report["slices"]:
        return "No person's answer counts yet: every row is on the set's prompts.\n"
    return "".join(
        f"- **{markdown_escape(s['label'])}**: {markdown_escape(s['note'])}\n"
        for s in report["slices"]
    )


def slices_latex(report: dict) -> str:
    if not report["slices"]:
        return "% No person's answer counts yet: every row is on the set's prompts.\n"
    return "\n".join(f"\\paragraph{{{latex_escape(s['label'].capitalize())}}} "
                     f"{_latex_text(s['note'])}\n" for s in report["slices"])  # fmt: skip


def report_as(report: dict, fmt: str, table: str = "rows") -> str:
    """Return the report's `table` (rows, agreement or slices) in `fmt` (json, csv, latex,
    md)."""
    writers = {
        "rows": {
            "json": rows_json,
            "csv": rows_csv,
            "latex": lambda r: rows_latex(r) + _if_people(r, agreement_latex),
            "md": lambda r: _markdown_document(r, "rows"),
        },
        "agreement": {
            "json": agreement_json,
            "csv": agreement_csv,
            "latex": agreement_latex,
            "md": lambda r: _markdown_document(r, "agreement"),
        },
        "slices": {
            "json": slices_json,
            "csv": slices_csv,
            "latex": slices_latex,
            "md": lambda r: _markdown_document(r, "slices"),
        },
    }
    if table not in writers:
        raise ValueError(f"unknown table {table!r}: expected one of {', '.join(TABLES)}")
    if fmt not in writers[table]:
        raise ValueError(f"unknown format {fmt!r}: expected one of {', '.join(FORMATS)}")
    return writers[table][fmt](report)


# The Markdown documents' section headings, under one naming the set (as the InFoBench and
# KIWI reports' Markdown name their benchmark and study).
MARKDOWN_TITLES = {
    "rows": "Accuracy",
    "agreement": "Agreement of people",
    "slices": "Which prompts people answered",
}


def _markdown_document(report: dict, table: str) -> str:
    """The table's Markdown under a heading naming the set; the rows document goes on to the
    agreement table where people answered, each note said once."""
    parts = [f"# Verbalizer report: {markdown_escape(report['set'])}\n"]
    if table == "rows":
        parts.append(_markdown_section("rows", rows_markdown(report)))
        if report["agreement"]:
            said = tuple(_rows_notes(report, flat_rows(report)))
            parts.append(_markdown_section("agreement", agreement_markdown(report, said)))
    else:
        writer = agreement_markdown if table == "agreement" else slices_markdown
        parts.append(_markdown_section(table, writer(report)))
    return "".join(parts)


def _markdown_section(table: str, text: str) -> str:
    return f"\n## {MARKDOWN_TITLES[table]}\n\n{text}"


def _if_people(report: dict, writer) -> str:
    return "\n" + writer(report) if report["agreement"] else ""
