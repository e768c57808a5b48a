"""Turn a report (the dict of docs/reports.md) into CSV, JSON, LaTeX and Markdown text.

Plain functions of the dict: no database, no Django. Tables keep the column order of TABLES, so
every format lists the same columns in the same order.
"""

from __future__ import annotations

import io
import json
import math
import re
from collections.abc import Callable, Iterable
from decimal import ROUND_HALF_UP, Decimal

from annotate.services.files import csv_writer

TABLES: dict[str, list[str]] = {
    "dataset": [
        "subset",
        "instructions",
        "length",
        "questions",
        "questions_per_instruction",
        "domains",
    ],
    "constraint_types": [
        "subset",
        "content",
        "format",
        "number",
        "style",
        "linguistic",
        "labels",
    ],
    "leaderboard": [
        "system",
        "source",
        "source_kind",
        "subset",
        "drfr",
        "ci_low",
        "ci_high",
        "yes",
        "questions",
        "responses_labelled",
        "responses",
        "provisional",
    ],
    "agreement": [
        "protocol",
        "group",
        "subset",
        "fleiss_kappa",
        "ci_low",
        "ci_high",
        "p_bar",
        "p_e",
        "raw_agreement",
        "items",
        "dropped",
        "annotators",
        "undefined_reason",
    ],
    "sources": [
        "source",
        "source_kind",
        "subset",
        "gold",
        "acc",
        "compared",
        "pld0",
        "pld1",
        "pld2",
        "wpld",
        "pairs",
        "acc_na",
        "pld_na",
        "cost_usd",
        "possibly_billed_usd",
        "time_min",
        "provisional",
    ],
    "constraints": ["source", "system", "constraint", "drfr", "yes", "questions"],
    "domains": ["source", "system", "domain", "drfr", "yes", "questions"],
    "hard_domains": ["source", "system", "domain", "drfr", "yes", "questions"],
    "disagreement": ["group", "level", "questions"],
    "positions": ["kind", "position", "drfr", "yes", "questions"],
    "votes": ["source", "items", "ties", "no_votes"],
}

TABLE_TITLES = {
    "dataset": "The benchmark: instructions, length, questions, domains (paper Table 2)",
    "constraint_types": "Questions per constraint type (paper Table 6)",
    "leaderboard": "Leaderboard: DRFR per system, subset and label source",
    "agreement": "Protocol reliability: pairwise Fleiss' kappa",
    "sources": (
        "Annotation sources against the expert majority (an expert against the other experts)"
    ),
    "constraints": "DRFR per constraint type",
    "domains": "DRFR per domain (full category)",
    "hard_domains": "DRFR per principal domain of the Hard set (paper Figure 4)",
    "disagreement": "Disagreement levels",
    "positions": "DRFR by display position",
    "votes": "Majority votes: ties and items without a vote",
}

SUBSET_ORDER = ("easy", "hard", "overall")


# --- Cells ---------------------------------------------------------------------------------------


def _finite(value: object) -> object:
    """Return None for NaN and infinities, which no format here may emit."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _csv_cell(value: object) -> str:
    value = _finite(value)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)  # the shortest text that reads back as the same float
    if isinstance(value, int):
        return str(value)
    return str(value)  # the writer makes it spreadsheet-safe


def _columns(table: str) -> list[str]:
    if table not in TABLES:
        raise ValueError(f"unknown table {table!r}: expected one of {', '.join(TABLES)}")
    return TABLES[table]


def _rows(report: dict, table: str) -> list[list[object]]:
    columns = _columns(table)
    return [[row.get(column) for column in columns] for row in report.get(table) or []]


# --- CSV and JSON --------------------------------------------------------------------------------


def table_csv(report: dict, table: str) -> str:
    """Return one table as CSV: a header, then one line per row; null is an empty cell."""
    output = io.StringIO()
    # RFC 4180 line ends: with "\n" alone the writer would leave a "\r" in a name unquoted.
    writer = csv_writer(output, lineterminator="\r\n")
    writer.writerow(_columns(table))
    writer.writerows([_csv_cell(value) for value in row] for row in _rows(report, table))
    return output.getvalue()


def report_csv(report: dict) -> str:
    """Return every table as CSV, each preceded by a `# <table>` line and followed by a blank line;
    first, a `# note: ...` line for each source whose figures are provisional (the rows of the
    leaderboard and of the sources say which: their `provisional` column)."""
    notes = "".join(f"# note: {note}\r\n" for note in provisional_notes(report))
    return notes + "".join(f"# {table}\r\n{table_csv(report, table)}\r\n" for table in TABLES)


def _without_nan(value: object) -> object:
    if isinstance(value, dict):
        return {key: _without_nan(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_without_nan(item) for item in value]
    return _finite(value)


def report_json(report: dict) -> str:
    """Return the report as indented JSON; NaN and infinities are written as null."""
    return json.dumps(_without_nan(report), indent=2, ensure_ascii=False, allow_nan=False)


def table_json(report: dict, table: str) -> str:
    """Return one table as a JSON list of objects, keys in the table's column order."""
    columns = _columns(table)
    rows = [dict(zip(columns, row, strict=True)) for row in _rows(report, table)]
    return json.dumps(_without_nan(rows), indent=2, ensure_ascii=False, allow_nan=False)


# --- LaTeX ---------------------------------------------------------------------------------------

_LATEX_SPECIALS = {
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "\\": r"\textbackslash{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
}
_LATEX_TRANSLATION = str.maketrans(_LATEX_SPECIALS)


def latex_escape(text: str) -> str:
    r"""Return text that LaTeX typesets as written (one pass, so escapes are never escaped).

    Line breaks become spaces: a newline would end a `%` comment early, and a blank line inside
    a tabular is an error. A leading "[" is braced: a table row (a name in its first cell)
    follows the last row's `\\`, which would read "[v2] llama" as its spacing, `\\[v2]`.
    """
    text = " ".join(str(text).split()).translate(_LATEX_TRANSLATION)
    return "{[}" + text[1:] if text.startswith("[") else text


def hundredths_text(value: object) -> str:
    """A figure that must not read as nothing when small, as the report page and every export
    write it: two decimals, thousands grouped, "<0.01" for less than half a hundredth that is
    not 0; "n/a" for None. Table 4's Time (a judge's 0.24 s of calls is "<0.01", never "0",
    nothing recorded) and a judge's possibly billed amount."""
    value = _finite(value)
    if value is None:
        return "n/a"
    if 0 < abs(value) < 0.005:
        return "<0.01"
    return _fixed(value, digits=2, grouped=True, minus="-")


def _fixed(
    value: object, *, scale: float = 1, digits: int, grouped: bool = False, minus: str = "$-$"
) -> str:
    value = _finite(value)
    if value is None:
        return "n/a"
    # Halves round up, as the report page's floatformat does: 0.8125 is 0.813 there, so 81.3
    # here (Python's own formatting gave 81.2, and a paper's table disagreed with the page).
    # Scaled as decimals: 0.285 × 100 in binary is 28.499999999999996, which would round down.
    number = Decimal(repr(float(value))) if isinstance(value, float) else Decimal(value)
    exact = (number * Decimal(repr(scale))).quantize(Decimal(1).scaleb(-digits), ROUND_HALF_UP)
    text = f"{exact:{',' if grouped else ''}.{digits}f}"
    # LaTeX's minus sign by default, not a hyphen; pages and Markdown pass "-".
    return minus + text[1:] if text.startswith("-") else text


def _latex_table(
    *, columns: str, header: list[str], body: list[list[str]], caption: str, label: str
) -> str:
    lines = [
        r"\begin{table}[t]",
        r"\centering",
        rf"\begin{{tabular}}{{{columns}}}",
        r"\toprule",
        " & ".join(header) + r" \\",
        r"\midrule",
        *(line if line == r"\midrule" else " & ".join(line) + r" \\" for line in body),
        r"\bottomrule",
        r"\end{tabular}",
        rf"\caption{{{caption}}}",
        rf"\label{{{label}}}",
        r"\end{table}",
    ]
    return "\n".join(lines) + "\n"


def _in_order(values: Iterable[str]) -> list[str]:
    """Return the distinct values in first-seen order."""
    return list(dict.fromkeys(values))


def drfr_na_note(group: str) -> str:
    """Why a DRFR is n/a: it counted none of the source's answers to the model's questions in
    that `group` (a set, a constraint type, a domain): none given, or only UNKNOWN under the
    "exclude" convention, so the ratio has no denominator. One sentence for the LaTeX
    leaderboard's caption and the notes under the Markdown DRFR breakdowns."""
    return (
        f"n/a: the DRFR counted none of the source's answers to the model's questions in that "
        f"{group} (it answered none, or only UNKNOWN where UNKNOWN is left out)."
    )


# Said in the DRFR table's caption where a cell is n/a: the leaderboard has a row only where the
# report's UNKNOWN convention counted some label of the source on the system in that subset
# (evaluation.services.reports): under "exclude", the default, a source that answered only
# UNKNOWN there has no row either, so "answered none" alone was untrue of it.
LEADERBOARD_NA_NOTE = drfr_na_note("set")

# The Markdown tables of DRFR per group, by what their rows group by, for the note under one
# that holds an n/a DRFR (a row with no questions counted).
DRFR_NA_GROUPS = {
    "constraints": "constraint type",
    "domains": "domain",
    "hard_domains": "domain",
}


def _latex_leaderboard(report: dict) -> str:
    by_key = {(r["source"], r["system"], r["subset"]): r["drfr"] for r in report["leaderboard"]}
    body: list = []
    missing = False
    for source in _in_order(r["source"] for r in report["leaderboard"]):
        if body:
            body.append(r"\midrule")
        systems = _in_order(r["system"] for r in report["leaderboard"] if r["source"] == source)
        for index, system in enumerate(systems):
            cells = [
                _fixed(by_key.get((source, system, s)), scale=100, digits=1) for s in SUBSET_ORDER
            ]
            missing = missing or "n/a" in cells
            body.append([latex_escape(source) if index == 0 else "", latex_escape(system), *cells])
    note = f" {LEADERBOARD_NA_NOTE}" if missing else ""  # said only where an n/a is
    note += "".join(f" {text}" for text in partial_notes(report["leaderboard"]))
    note += "".join(f" {text}" for text in provisional_notes(report))
    return _latex_table(
        columns="llrrr",
        header=["Source", "Model", "Easy Set", "Hard Set", "Overall"],
        body=body,
        caption=latex_escape(f"DRFR (%) on {report['benchmark']} per label source.{note}"),
        label="tab:drfr",
    )


def is_partial(row: dict) -> bool:
    """Whether a leaderboard row's source labelled only some of the system's responses in the
    set (a judge run stopped part-way): its DRFR is then over those alone."""
    return row["responses_labelled"] < row["responses"]


def partial_notes(rows: list[dict]) -> list[str]:
    """Say which leaderboard figures are partial (is_partial), per source and set with its
    systems' responses added up: "Partial (judge, Overall: 16 of 40 responses labelled): ...";
    [] when none is."""
    counts: dict[tuple[str, str], list[int]] = {}
    for row in rows:
        pair = counts.setdefault((row["source"], row["subset"]), [0, 0])
        pair[0] += row["responses_labelled"]
        pair[1] += row["responses"]
    found = "; ".join(
        f"{source}, {_SUBSET_TITLES[subset]}: {labelled} of {total} responses labelled"
        for (source, subset), (labelled, total) in counts.items()
        if labelled < total
    )
    if not found:
        return []
    return [f"Partial ({found}): a partial DRFR is over the responses its source labelled alone."]


def provisional_notes(report: dict, *, escape: Callable[[str], str] = str) -> list[str]:
    """Say which judges' figures are provisional, each with why and what to do: "Provisional
    (judge): labels from 2 runs: #12 (stopped, 40 of 90 responses) replaced #9 on 40
    responses; resume run #12 to finish. ..."; [] when none is (or a report cached before the
    report said so). `escape`: the format's, for the source's name."""
    return [
        f"Provisional ({escape(entry['source'])}): {entry['note']}"
        for entry in report.get("provisional") or []
    ]


def _latex_agreement(report: dict) -> str:
    by_key = {(r["group"], r["protocol"], r["subset"]): r for r in report["agreement"]}
    body = []
    for group in _in_order(r["group"] for r in report["agreement"]):
        for protocol in ("ds", "drfr"):
            rows = [by_key.get((group, protocol, subset)) for subset in SUBSET_ORDER]
            if not any(rows):
                continue
            kappas = [_fixed(row and row["fleiss_kappa"], digits=3) for row in rows]
            body.append([protocol.upper(), latex_escape(group), *kappas])
    reasons = _kappa_na_reasons(report["agreement"])
    return _latex_table(
        columns="llrrr",
        header=["Protocol", "Annotators", "Easy Set", "Hard Set", "Overall"],
        body=body,
        caption=latex_escape(f"Pairwise Fleiss' kappa agreement among annotators.{reasons}"),
        label="tab:kappa",
    )


_SUBSET_TITLES = {"easy": "Easy Set", "hard": "Hard Set", "overall": "Overall"}


def _kappa_na_reasons(rows: list[dict]) -> str:
    """Say why each n/a kappa of the LaTeX table is undefined (its undefined_reason, the cells
    it holds for named), as the Markdown's undefined_reason column does: a table pasted into a
    paper keeps its caption. "" when every kappa is defined."""
    cells: dict[str, list[str]] = {}
    for row in rows:
        if _finite(row["fleiss_kappa"]) is None:
            cell = f"{row['protocol'].upper()} {row['group']}, {_SUBSET_TITLES[row['subset']]}"
            cells.setdefault(row["undefined_reason"], []).append(cell)
    return "".join(f" n/a ({'; '.join(found)}): {why}." for why, found in cells.items())


def no_interval_note(figure: str, clusters: str) -> str:
    """Say why `figure` (how a report shows a figure without a bootstrap interval: "A figure
    without brackets") has none, the resamples drawing whole `clusters` (turns, instructions):
    the reasons evaluation.stats.bootstrap gives no interval (too_few_clusters, no_spread,
    fewer than half of the resamples defined, no resample). One text for every report, so they
    say it alike."""
    return (
        f"{figure} has no interval: fewer than two {clusters} take part in it (every resample "
        f"would give the figure itself), every resample gave the same value (its {clusters} "
        "differ in nothing it reads, e.g. all in full agreement or all right: the bootstrap "
        "measured no spread, which is not certainty), fewer than half of the resamples define "
        "it, or none were drawn."
    )


def has_no_interval(rows: Iterable[dict], low: str = "ci_low", high: str = "ci_high") -> bool:
    """Whether a row of a table with bootstrap intervals lacks one."""
    return any(_finite(row.get(low)) is None or _finite(row.get(high)) is None for row in rows)


# InFoBench's Markdown shows a missing interval as n/a in both its columns; each interval
# resamples whole instructions (evaluation.services.reports.Bootstrap).
INTERVAL_NA_NOTE = no_interval_note("A row whose ci_low and ci_high are n/a", "instructions")


POSSIBLY_BILLED_NOTE = (
    "(+x): an LLM judge's failed attempts (a timeout after sending, a broken stream, a server "
    "error) that the provider may have billed, estimated and not in the cost."
)


def possibly_billed_text(value: object) -> str:
    """A judge's possibly billed amount as the page and LaTeX put it beside its cost: "+0.03",
    "+<0.01" for less than half a cent (written as 0.00 it would read as nothing); "" when
    there is none, or the source is not a judge (None)."""
    value = _finite(value)
    return "+" + hundredths_text(value) if value else ""


def _possibly_billed(value: object, *, escape) -> str:
    text = possibly_billed_text(value)
    return f" ({escape(text)})" if text else ""


# Why a cost or time of Table 4 is n/a (null in the report), said under the table (Markdown) or
# in its caption (LaTeX) where one is.
COST_NA_NOTE = (
    "Cost or time n/a: nothing was recorded for the source in that set (no assignment or model "
    "call behind its labels, e.g. imported labels)."
)

# Why an ACC, or a PLD and WPLD, of Table 4 is n/a, by the row's reason code (acc_na, pld_na:
# evaluation.services.reports._against_gold), each said with the cells it holds for.
SOURCES_NA_REASONS = {
    "no_gold_label": "no question of that set has a YES or NO of the source's gold (the expert "
    "majority; for an expert, the other experts' majority)",
    "no_common_question": "the source answered (as ACC counts) none of the questions of that "
    "set its gold has a YES or NO for",
    "source_one_system": "the source labelled fewer than two systems on every instruction of "
    "that set, so it ranks no pair of systems",
    "gold_one_system": "the source's gold labelled fewer than two systems on every instruction "
    "of that set, so it ranks no pair of systems",
    "no_common_pair": "the source and its gold rank pairs of systems in that set, but never the "
    "same pair on the same instruction",
}
_NA_FIGURES = (("acc_na", "ACC"), ("pld_na", "PLD and WPLD"))
REASON_COLUMNS = {column for column, _ in _NA_FIGURES}


def _sources_na_notes(rows: list[dict]) -> list[str]:
    """Why each n/a of Table 4 is: the cost note where a cost or time is n/a, then each reason
    an ACC or a PLD is n/a with the cells (source, set) it holds for."""
    notes = []
    if any(_finite(row.get(c)) is None for row in rows for c in ("cost_usd", "time_min")):
        notes.append(COST_NA_NOTE)
    for column, figure in _NA_FIGURES:
        cells: dict[str, list[str]] = {}
        for row in rows:
            if row.get(column):
                cell = f"{row['source']}, {_SUBSET_TITLES[row['subset']]}"
                cells.setdefault(row[column], []).append(cell)
        notes += [
            f"{figure} n/a ({'; '.join(found)}): {SOURCES_NA_REASONS[why]}."
            for why, found in cells.items()
        ]
    return notes


def _latex_sources(report: dict) -> str:
    body: list = []
    for subset in SUBSET_ORDER:
        rows = [r for r in report["sources"] if r["subset"] == subset]
        if not rows:
            continue
        if body:
            body.append(r"\midrule")
        name = f"{subset.capitalize()} ({report['subsets'].get(subset, 0)})"
        for index, row in enumerate(rows):
            body.append(
                [
                    rf"\textit{{{name}}}" if index == 0 else "",
                    latex_escape(row["source"]),
                    _fixed(row["cost_usd"], digits=2, grouped=True)
                    + _possibly_billed(row.get("possibly_billed_usd"), escape=latex_escape),
                    latex_escape(hundredths_text(row["time_min"])),
                    _fixed(row["acc"], scale=100, digits=1),
                    *(_fixed(row[k], digits=1) for k in ("pld0", "pld1", "pld2")),
                    _fixed(row["wpld"], digits=3),
                ]
            )
    billed = any(possibly_billed_text(r.get("possibly_billed_usd")) for r in report["sources"])
    notes = [POSSIBLY_BILLED_NOTE] if billed else []  # said only where a "(+x)" is
    notes += _sources_na_notes(report["sources"])
    notes += provisional_notes(report)
    note = "".join(f" {text}" for text in notes)
    header = ["", "Source", r"Cost(\$)", "Time(min)", r"ACC(\%)"]
    header += [rf"PLD{i}(\%)" for i in range(3)] + ["WPLD"]
    return _latex_table(
        columns="llrrrrrrr",
        header=header,
        body=body,
        caption=latex_escape(f"{TABLE_TITLES['sources']}: cost, time and robustness.{note}"),
        label="tab:sources",
    )


def _subset_name(subset: str) -> str:
    return rf"\textit{{{subset.capitalize()} Set}}" if subset != "overall" else "Overall"


def _latex_dataset(report: dict) -> str:
    body = [
        [
            _subset_name(row["subset"]),
            str(row["instructions"]),
            _fixed(row["length"], digits=2),
            str(row["questions"]),
            _fixed(row["questions_per_instruction"], digits=2),
            str(row["domains"]),
        ]
        for row in report.get("dataset") or []
    ]
    return _latex_table(
        columns="lrrrrr",
        header=["", r"\#Inst.", "Len.", r"\#Req.", r"\#R/I", r"\#Dom."],
        body=body,
        caption=latex_escape(
            f"Statistics of {report['benchmark']}: instructions, mean instruction length in "
            'words (split on " "), decomposed questions, questions per instruction, domains.'
        ),
        label="tab:dataset",
    )


def _latex_constraint_types(report: dict) -> str:
    keys = TABLES["constraint_types"][1:]
    body = [
        [_subset_name(row["subset"]), *(str(row[key]) for key in keys)]
        for row in report.get("constraint_types") or []
    ]
    return _latex_table(
        columns="lrrrrrr",
        header=["", "Content", "Format", "Number", "Style", "Linguistic", r"\#Labels"],
        body=body,
        caption="Questions per constraint type; a question counts under each of its types.",
        label="tab:constraint-types",
    )


def report_latex(report: dict) -> str:
    """Return the paper's tables 2, 6, 5, 3 and 4 as booktabs LaTeX (needs booktabs)."""
    return "\n".join(
        [
            f"% {latex_escape(report['benchmark'])}: unknown answers {report['unknown']}"
            + (f", ACC {report['acc_unknown']}" if report.get("acc_unknown") else ""),
            *(f"% {latex_escape(note)}" for note in provisional_notes(report)),
            _latex_dataset(report),
            _latex_constraint_types(report),
            _latex_leaderboard(report),
            _latex_agreement(report),
            _latex_sources(report),
        ]
    )


# --- Markdown ------------------------------------------------------------------------------------

_MARKDOWN_SPECIALS = re.compile(r"([\\`*_\[\]|<>#])")


def markdown_escape(text: object) -> str:
    """Return text that Markdown shows as written, on one line (a newline would end a table
    row): HTML tags, links, emphasis and table bars backslash-escaped, so names from an import
    read as text in any viewer that renders Markdown."""
    return _MARKDOWN_SPECIALS.sub(r"\\\1", " ".join(str(text).split()))


# Decimals of each number column as the report page shows it (templates/evaluation/report.html's
# floatformat), so Markdown reads 12.25 where the page does, not 12.2500. ACC is a share here
# and a percentage with one decimal there: three decimals of the share are the same digits.
# Time and possibly billed amounts go by hundredths_text, as on the page.
PAGE_DECIMALS = {
    "length": 2,
    "questions_per_instruction": 2,
    "drfr": 3,
    "ci_low": 3,
    "ci_high": 3,
    "fleiss_kappa": 3,
    "p_bar": 3,
    "p_e": 3,
    "raw_agreement": 3,
    "acc": 3,
    "pld0": 1,
    "pld1": 1,
    "pld2": 1,
    "wpld": 3,
    "cost_usd": 2,
}
# Columns the page writes by hundredths_text, so that a small figure never reads as 0.
HUNDREDTHS_COLUMNS = {"time_min", "possibly_billed_usd"}


def _markdown_cell(column: str, value: object) -> str:
    if column == "provisional":
        return "yes" if value else ""
    value = _finite(value)
    if value is None:
        # A reason column is null where its figure is there: nothing to say, not "n/a".
        return "" if column in REASON_COLUMNS else "n/a"
    if column in HUNDREDTHS_COLUMNS:
        return hundredths_text(value)
    if isinstance(value, float):
        return _fixed(value, digits=PAGE_DECIMALS.get(column, 4), minus="-")
    return markdown_escape(value)


def _markdown_notes(report: dict, table: str) -> list[str]:
    """The notes said under a table that is not empty: why an interval or a figure is n/a,
    which DRFRs are partial."""
    rows = report[table]
    notes = [INTERVAL_NA_NOTE] if "ci_low" in _columns(table) and has_no_interval(rows) else []
    if table in DRFR_NA_GROUPS and any(_finite(row["drfr"]) is None for row in rows):
        notes.append(drfr_na_note(DRFR_NA_GROUPS[table]))
    if table == "leaderboard":
        notes += partial_notes(rows)
    if table == "sources":
        notes += _sources_na_notes(rows)
    if table in ("leaderboard", "sources"):
        notes += provisional_notes(report, escape=markdown_escape)
    return notes


def table_markdown(report: dict, table: str) -> str:
    """Return one table as a GitHub markdown table under a heading."""
    columns = _columns(table)
    lines = [
        f"## {TABLE_TITLES[table]}",
        "",
        "| " + " | ".join(columns) + " |",
        "| " + " | ".join("---" for _ in columns) + " |",
        *(
            "| " + " | ".join(map(_markdown_cell, columns, row)) + " |"
            for row in _rows(report, table)
        ),
    ]
    if not report.get(table):
        lines.append("")
        lines.append("_No data._")
    else:
        for note in _markdown_notes(report, table):
            lines += ["", note]
    return "\n".join(lines) + "\n"


def report_markdown(report: dict) -> str:
    """Return every table as a GitHub markdown table, each under its own heading."""
    heading = (
        f"# Report: {markdown_escape(report['benchmark'])}\n\n"
        f"Generated {report['generated_at']}; unknown answers: {report['unknown']}"
        + (f" ({report['unknown_convention']})" if report.get("unknown_convention") else "")
        + (f"; ACC: {report['acc_unknown']}" if report.get("acc_unknown") else "")
        + "; "
        f"bootstrap: {report['n_resamples']} resamples, seed {report['seed']}.\n"
    )
    return "\n".join([heading, *(table_markdown(report, table) for table in TABLES)])
