"""The verbalizer report as JSON rows, CSV, LaTeX and Markdown (numbers as fractions; LaTeX and
Markdown show percentages with one decimal). Two tables: `rows` (accuracy) and `agreement` (Fleiss'
kappa of people with its bootstrap interval); the LaTeX and Markdown documents of `rows` end with
the agreement table too."""

from __future__ import annotations

import io
import json

from annotate.services.files import csv_writer
from evaluation.report_formats import _csv_cell, _fixed, latex_escape

FORMATS = ("json", "csv", "latex", "md")
TABLES = ("rows", "agreement")
AGREEMENT_COLUMNS = [
    "source", "dataset", "kappa", "ci_low", "ci_high", "items", "raters", "raw_agreement", "note",
]  # fmt: skip
# The JSON rows' keys, in the documented order: CSV carries every one (docs/verbalizer.md).
ROW_COLUMNS = [
    "system", "dataset", "group", "mapping", "mode", "n",
    "accuracy_strict", "accuracy_lenient", "invalid", "invalid_strict", "invalid_lenient",
    "ci_strict_low", "ci_strict_high", "ci_lenient_low", "ci_lenient_high",
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


def _pct(value) -> str:
    return _fixed(value, scale=100, digits=1)


def _interval(low, high, show, between: str) -> str:
    """Show an interval as low and high joined by `between`; "n/a" once when there is none (no
    valid reply, too few answers)."""
    if low is None or high is None:
        return "n/a"
    return f"{show(low)}{between}{show(high)}"


def rows_markdown(report: dict) -> str:
    head = ["system", "dataset", "group", "mapping", "mode", "n", "strict %", "lenient %",
            "95% CI (lenient)", "invalid % (lenient)"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in flat_rows(report):
        cells = [
            *(str(row[k]).replace("|", "\\|") for k in ("system", "dataset", "group", "mapping")),
            row["mode"], str(row["n"]), _pct(row["accuracy_strict"]),
            _pct(row["accuracy_lenient"]),
            _interval(row["ci_lenient_low"], row["ci_lenient_high"], _pct, "–"),
            _pct(row["invalid"]),
        ]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def rows_latex(report: dict) -> str:
    """A booktabs table: accuracy (lenient, %) per system and group, then per mapping."""
    groups = ["natural", "neutral", "unnatural"]
    lines = [
        "% Verbalizer manipulation, set " + latex_escape(report["set"]).replace("\n", " "),
        "% accuracy (lenient rule, %), direct prompting; invalid replies are not counted",
        "\\begin{tabular}{l" + "r" * len(groups) + "}",
        "\\toprule",
        "System & " + " & ".join(g.capitalize() for g in groups) + " \\\\",
        "\\midrule",
    ]
    values = {(r["system"], r["group"]): r["accuracy_lenient"] for r in report["groups"]}
    for system in report["systems"]:
        name = system["system"]
        cells = [_pct(values.get((name, group))) for group in groups]
        lines.append(latex_escape(name) + " & " + " & ".join(cells) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}", ""]
    return "\n".join(lines)


def agreement_json(report: dict) -> str:
    return json.dumps(report["agreement"], indent=1)


def agreement_csv(report: dict) -> str:
    output = io.StringIO()
    writer = csv_writer(output)
    writer.writerow(AGREEMENT_COLUMNS)
    for row in report["agreement"]:
        writer.writerow([_csv_cell(row.get(column)) for column in AGREEMENT_COLUMNS])
    return output.getvalue()


def _kappa(value) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def agreement_markdown(report: dict) -> str:
    head = ["people", "dataset", "Fleiss' kappa", "95% CI", "prompts", "raters each", "note"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in report["agreement"]:
        cells = [
            row["source"], str(row["dataset"]).replace("|", "\\|"), _kappa(row["kappa"]),
            _interval(row["ci_low"], row["ci_high"], _kappa, " to "), str(row["items"]),
            str(row["raters"]), row["note"],
        ]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _latex_interval(low, high) -> str:
    return "n/a" if low is None or high is None else f"[{_kappa(low)}, {_kappa(high)}]"


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
            latex_escape(row["source"]), latex_escape(str(row["dataset"])), _kappa(row["kappa"]),
            _latex_interval(row["ci_low"], row["ci_high"]), str(row["items"]),
            str(row["raters"]),
        ]  # fmt: skip
        lines.append(" & ".join(cells) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}", ""]
    return "\n".join(lines)


def report_as(report: dict, fmt: str, table: str = "rows") -> str:
    """Return the report's `table` (rows or agreement) in `fmt` (json, csv, latex, md)."""
    writers = {
        "rows": {
            "json": rows_json,
            "csv": rows_csv,
            "latex": lambda r: rows_latex(r) + _if_people(r, agreement_latex),
            "md": lambda r: rows_markdown(r) + _if_people(r, agreement_markdown),
        },
        "agreement": {
            "json": agreement_json,
            "csv": agreement_csv,
            "latex": agreement_latex,
            "md": agreement_markdown,
        },
    }
    if table not in writers:
        raise ValueError(f"unknown table {table!r}: expected one of {', '.join(TABLES)}")
    if fmt not in writers[table]:
        raise ValueError(f"unknown format {fmt!r}: expected one of {', '.join(FORMATS)}")
    return writers[table][fmt](report)


def _if_people(report: dict, writer) -> str:
    return "\n" + writer(report) if report["agreement"] else ""
