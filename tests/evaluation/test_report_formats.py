"""Report tables as CSV, JSON, LaTeX and Markdown, from a sample report dict (no database)."""

import csv
import io
import json
import re

import pytest

from annotate.services.files import spreadsheet_safe
from evaluation.report_formats import (
    TABLE_TITLES,
    TABLES,
    latex_escape,
    report_csv,
    report_json,
    report_latex,
    report_markdown,
    table_csv,
    table_json,
    table_markdown,
)
from tests.evaluation.report_sample import empty_report, sample_report
from tests.latex import assert_latex_compiles, needs_pdflatex


def _parse(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def _expected_cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def test_sample_rows_have_exactly_the_table_columns():
    report = sample_report()
    for table, columns in TABLES.items():
        assert report[table], table
        for row in report[table]:
            assert list(row) == columns, table


@pytest.mark.parametrize("table", list(TABLES))
def test_table_csv_round_trips_through_csv_reader(table):
    report = sample_report()
    header, *rows = _parse(table_csv(report, table))
    assert header == TABLES[table]
    assert len(rows) == len(report[table])
    for cells, row in zip(rows, report[table], strict=True):
        for cell, column in zip(cells, header, strict=True):
            value = row[column]
            if isinstance(value, float):
                assert float(cell) == value  # full precision: the very same float
            else:
                assert cell == _expected_cell(value)


def test_null_is_an_empty_cell_and_nan_too():
    report = sample_report()
    report["leaderboard"][0]["ci_low"] = float("nan")
    header, *rows = _parse(table_csv(report, "agreement"))
    undefined = next(r for r in rows if r[header.index("undefined_reason")])
    assert undefined[header.index("fleiss_kappa")] == ""
    header, first, *_ = _parse(table_csv(report, "leaderboard"))
    assert first[header.index("ci_low")] == ""


@pytest.mark.parametrize(
    "name",
    ['=HYPERLINK("http://x","y")', "+1+2", "-2+3", "@SUM(A1:A9)", "\tcmd", "\rcmd", "-"],
)
def test_formula_cells_are_neutralised(name):
    report = sample_report()
    report["leaderboard"][0]["system"] = name
    header, first, *_ = _parse(table_csv(report, "leaderboard"))
    assert first[header.index("system")] == "'" + name


def test_negative_numbers_stay_numbers():
    report = sample_report()
    header, *rows = _parse(table_csv(report, "agreement"))
    kappas = [row[header.index("fleiss_kappa")] for row in rows]
    assert "-0.1204" in kappas
    assert not any(k.startswith("'") for k in kappas)


@pytest.mark.parametrize("text", ["-0.12", "+3", "-1e-05", "-.5", "12", "plain", "a=b"])
def test_spreadsheet_safe_leaves_numbers_and_plain_text(text):
    assert spreadsheet_safe(text) == text


@pytest.mark.parametrize("text", ["-1-1", "=1", "+A1", "-0.12)", "@x", "-e5"])
def test_spreadsheet_safe_quotes_formulas(text):
    assert spreadsheet_safe(text) == "'" + text


def test_report_csv_has_every_table_under_its_heading():
    report = sample_report()
    sections = report_csv(report).split("\r\n\r\n")
    assert sections[-1] == ""  # the last table is followed by a blank line too
    assert len(sections) == len(TABLES) + 1
    for table, section in zip(TABLES, sections, strict=False):
        heading, body = section.split("\r\n", 1)
        assert heading == f"# {table}"
        assert body + "\r\n" == table_csv(report, table)


def test_line_breaks_inside_a_name_stay_inside_the_cell():
    report = sample_report()
    report["votes"][0]["source"] = "two\rlines\nhere"
    header, first, *rest = _parse(table_csv(report, "votes"))
    assert first[0] == "two\rlines\nhere"
    assert len(rest) == len(report["votes"]) - 1


def test_report_json_round_trips_and_writes_nan_as_null():
    report = sample_report()
    assert json.loads(report_json(report)) == report
    report["positions"][0]["drfr"] = float("nan")
    report["sources"][0]["cost_usd"] = float("inf")
    text = report_json(report)
    assert "NaN" not in text and "Infinity" not in text
    loaded = json.loads(text)
    assert loaded["positions"][0]["drfr"] is None
    assert loaded["sources"][0]["cost_usd"] is None
    assert text.startswith('{\n  "benchmark": "InFoBench"')  # indent 2


def test_table_json_lists_rows_in_column_order():
    report = sample_report()
    rows = json.loads(table_json(report, "votes"))
    assert rows == report["votes"]
    assert list(rows[0]) == TABLES["votes"]


def test_unknown_table_is_refused():
    with pytest.raises(ValueError, match="unknown table"):
        table_csv(sample_report(), "nope")


# --- LaTeX ---------------------------------------------------------------------------------------


def test_latex_escapes_special_characters_in_names():
    report = sample_report()
    for row in report["leaderboard"]:
        if row["system"] == "claude-2.1":
            row["system"] = "a&b_c%"
    latex = report_latex(report)
    assert r"a\&b\_c\%" in latex
    assert "a&b_c%" not in latex


def test_latex_escape_braces_a_leading_bracket_a_row_would_give_its_last_rows_spacing():
    """A system named "[v2] llama" opened its row right after the previous row's `\\`: LaTeX
    read `\\[v2]` as that row's spacing and stopped ("Illegal unit of measure")."""
    assert latex_escape(" [v2] llama") == "{[}v2] llama"
    assert latex_escape("llama [v2]") == "llama [v2]"


def test_latex_escape_handles_every_special_once():
    assert latex_escape("& % $ # _ { } ~ ^ \\") == (
        r"\& \% \$ \# \_ \{ \} \textasciitilde{} \textasciicircum{} \textbackslash{}"
    )


def test_latex_keeps_a_name_with_line_breaks_on_one_line():
    report = sample_report()
    report["benchmark"] = "Bench\n\n\\input{/etc/passwd}"
    latex = report_latex(report)
    assert latex.splitlines()[0] == (
        r"% Bench \textbackslash{}input\{/etc/passwd\}: unknown answers exclude"
    )
    assert "\n\n\\begin{table}" in latex  # the only blank lines are between tables
    assert latex.count("\n\n") == 4  # five tables


def _table_lines(latex: str, label: str) -> list[str]:
    block = next(b for b in latex.split(r"\begin{table}") if rf"\label{{{label}}}" in b)
    return block.splitlines()


def test_latex_leaderboard_is_drfr_times_100_with_one_decimal():
    latex = report_latex(sample_report())
    lines = _table_lines(latex, "tab:drfr")
    assert "Source & Model & Easy Set & Hard Set & Overall \\\\" in lines
    # expert-majority, gpt-4: 14/18, 36/42, 50/60
    assert r"expert-majority & gpt-4-1106-preview & 77.8 & 85.7 & 83.3 \\" in lines
    assert r"\toprule" in lines and r"\bottomrule" in lines


def test_latex_agreement_has_three_decimals_and_na_for_undefined_kappa():
    lines = _table_lines(report_latex(sample_report()), "tab:kappa")
    assert r"DS & crowd & n/a & $-$0.120 & $-$0.120 \\" in lines
    assert r"DRFR & expert & 0.430 & 0.430 & 0.430 \\" in lines


def test_latex_sources_follow_table_4():
    lines = _table_lines(report_latex(sample_report()), "tab:sources")
    assert any(line.startswith(r" & Source & Cost(\$) & Time(min) & ACC(\%)") for line in lines)
    assert (
        r"\textit{Overall (10)} & alpha & 236.00 & 480.00 & 93.0 & 90.0 & 10.0 & 0.0 & 0.100 \\"
        in lines
    )
    assert r" & gpt-4-0314 judge & n/a & n/a & 81.0 & 65.6 & 34.4 & 0.0 & 0.344 \\" in lines


def test_latex_sources_caption_says_an_expert_is_against_the_other_experts():
    report = sample_report()
    for row in report["sources"]:  # a cost and time for all: no n/a to explain
        row.update(cost_usd=row["cost_usd"] or 1.0, time_min=row["time_min"] or 1.0)
    lines = _table_lines(report_latex(report), "tab:sources")
    caption = next(line for line in lines if line.startswith(r"\caption{"))
    assert caption == (
        r"\caption{Annotation sources against the expert majority"
        r" (an expert against the other experts): cost, time and robustness.}"
    )


def test_latex_environments_are_balanced():
    latex = report_latex(sample_report())
    for environment in ("table", "tabular"):
        opened = len(re.findall(rf"\\begin{{{environment}}}", latex))
        assert opened == 5
        assert opened == len(re.findall(rf"\\end{{{environment}}}", latex))


def test_latex_of_an_empty_report_still_has_the_five_tables():
    latex = report_latex(empty_report())
    assert latex.count(r"\begin{tabular}") == 5


# --- Markdown ------------------------------------------------------------------------------------


def _markdown_tables(text: str) -> dict[str, list[str]]:
    tables, heading = {}, None
    for line in text.splitlines():
        if line.startswith("## "):
            heading = line[3:]
            tables[heading] = []
        elif line.startswith("|") and heading:
            tables[heading].append(line)
    return tables


def _cells(line: str) -> list[str]:
    return re.split(r"(?<!\\)\|", line.strip())[1:-1]


def test_markdown_has_every_table_with_a_heading_and_all_rows():
    report = sample_report()
    tables = _markdown_tables(report_markdown(report))
    assert len(tables) == len(TABLES)
    for lines, table in zip(tables.values(), TABLES, strict=True):
        header, separator, *rows = lines
        assert [c.strip() for c in _cells(header)] == TABLES[table]
        assert len(rows) == len(report[table])


def test_markdown_sources_heading_says_an_expert_is_against_the_other_experts():
    headings = [
        line for line in report_markdown(sample_report()).splitlines() if line.startswith("## ")
    ]
    assert headings[list(TABLES).index("sources")] == (
        "## Annotation sources against the expert majority (an expert against the other experts)"
    )


def test_markdown_escapes_pipes_and_markup_in_names():
    report = sample_report()
    report["votes"][0]["source"] = "a|b <script>*x*"
    lines = _markdown_tables(report_markdown(report))[
        "Majority votes: ties and items without a vote"
    ]
    first_row = lines[2]
    assert len(_cells(first_row)) == len(TABLES["votes"])
    assert r"a\|b \<script\>\*x\*" in first_row


def test_markdown_shows_null_as_na():
    tables = _markdown_tables(report_markdown(sample_report()))
    header, _, *rows = tables["Protocol reliability: pairwise Fleiss' kappa"]
    columns = [c.strip() for c in _cells(header)]
    for row in rows:
        cells = dict(zip(columns, (c.strip() for c in _cells(row)), strict=True))
        if (cells["protocol"], cells["group"], cells["subset"]) == ("ds", "crowd", "easy"):
            assert cells["fleiss_kappa"] == "n/a"
            assert cells["undefined_reason"].startswith("P\\_e = 1")
            break
    else:
        pytest.fail("the undefined kappa row is missing")


def test_latex_escape_maps_characters_ot1_fonts_would_misprint():
    assert latex_escape("a<b>|c") == r"a\textless{}b\textgreater{}\textbar{}c"


@needs_pdflatex
def test_latex_compiles_with_hostile_names(tmp_path):
    report = sample_report()
    report["benchmark"] = "Bench & co_2 100% #1 {x} ~^\\ <a|b>"
    for row in report["leaderboard"]:
        if row["system"] == "claude-2.1":
            row["system"] = "a&b_c%$"
        if row["source"] == "gpt-4-0314 judge" and row["subset"] == "overall":
            row["responses_labelled"] = 3  # a partial DRFR, said in the caption
    judge = report["sources"][-1]
    judge.update(time_min=0.001, pld0=None, pld1=None, pld2=None, wpld=None)
    judge.update(pairs=0, pld_na="source_one_system")  # "<0.01" and a reason in the caption
    assert_latex_compiles(tmp_path, report_latex(report))


def test_latex_and_markdown_name_both_conventions():
    report = sample_report()
    report.update(
        unknown="official",
        unknown_convention="answered questions only, UNKNOWN as NO",
        acc_unknown="wrong",
    )
    assert (
        report_latex(report).splitlines()[0] == "% InFoBench: unknown answers official, ACC wrong"
    )
    heading = report_markdown(report).splitlines()[2]
    assert "unknown answers: official (answered questions only, UNKNOWN as NO); ACC: wrong" in (
        heading
    )


@pytest.mark.parametrize("value", [0.8125, 0.0625, 0.3125, -0.4375, 0.9995])
def test_latex_rounds_halves_as_the_report_page_does(value):
    """A paper's table must not differ from the page in the last digit: the page's floatformat
    rounds halves up (0.8125 -> 0.813), and so do the exports (81.3, not Python's 81.2)."""
    from django.template.defaultfilters import floatformat

    from evaluation.report_formats import _fixed

    page = float(floatformat(value * 100, 1))
    assert _fixed(value, scale=100, digits=1).replace("$-$", "-") == f"{page:.1f}"


@pytest.mark.parametrize(
    ("minutes", "text"),
    [(0.3, "0.30"), (0.04, "0.04"), (0.004, "\\textless{}0.01"), (1451.96, "1,451.96")],
)
def test_latex_minutes_have_two_decimals_and_never_read_as_nothing(minutes, text):
    """Minutes were written with one decimal or none: a judge's 2.4 s (0.04) read "0", as if
    nothing was recorded, beside "2897.1" elsewhere. One rule for the page and every export."""
    report = sample_report()
    alpha = next(
        r for r in report["sources"] if r["source"] == "alpha" and r["subset"] == "overall"
    )
    alpha["time_min"] = minutes
    lines = _table_lines(report_latex(report), "tab:sources")
    assert f"\\textit{{Overall (10)}} & alpha & 236.00 & {text} & 93.0 & 90.0" in "\n".join(lines)


def test_markdown_minutes_follow_the_same_rule_as_latex():
    from evaluation.report_formats import hundredths_text

    assert [hundredths_text(m) for m in (None, 0.0, 0.004, 0.005, 0.04, 2897.1)] == [
        "n/a", "0.00", "<0.01", "0.01", "0.04", "2,897.10",
    ]  # fmt: skip
    report = sample_report()
    report["sources"][0]["time_min"] = 0.004
    rows = _markdown_tables(report_markdown(report))[TABLE_TITLES["sources"]]
    assert "| <0.01 |" in rows[2]


def test_a_possibly_billed_amount_reads_as_an_addition_to_the_cost_and_never_as_nothing():
    from evaluation.report_formats import possibly_billed_text

    assert [possibly_billed_text(v) for v in (None, 0.0, 0.004, 0.005, 1.375, 1234.5)] == [
        "", "", "+<0.01", "+0.01", "+1.38", "+1,234.50",
    ]  # fmt: skip


def _markdown_sections(text: str) -> dict[str, str]:
    """Each table's Markdown by its heading, the lines under it up to the next heading."""
    return {part.split("\n", 1)[0]: part.split("\n", 1)[1] for part in text.split("\n## ")[1:]}


def test_markdown_says_what_an_n_a_interval_means_under_the_table_that_has_one():
    """Kappa with too few instructions has no interval (ci_low and ci_high null): the Markdown
    showed "n/a" in both columns without saying why, where the KIWI report says it."""
    from evaluation.report_formats import INTERVAL_NA_NOTE

    report = sample_report()
    sections = _markdown_sections(report_markdown(report))
    agreement = sections[TABLE_TITLES["agreement"]]
    assert "| n/a | n/a |" in agreement
    assert agreement.count(INTERVAL_NA_NOTE) == 1
    assert INTERVAL_NA_NOTE not in sections[TABLE_TITLES["leaderboard"]]

    report["leaderboard"][0]["ci_high"] = float("nan")  # as a computed report may hold it
    assert (
        INTERVAL_NA_NOTE in _markdown_sections(report_markdown(report))[TABLE_TITLES["leaderboard"]]
    )


def test_markdown_without_a_missing_interval_has_no_note():
    from evaluation.report_formats import INTERVAL_NA_NOTE

    report = sample_report()
    for row in report["agreement"]:
        row["ci_low"], row["ci_high"] = -0.1, 0.2
    assert INTERVAL_NA_NOTE not in report_markdown(report)


def test_every_reports_no_interval_note_gives_the_same_reasons():
    """The InFoBench, verbalizer and KIWI notes share one text; only how each report shows a
    missing interval and what it resamples differ."""
    from evaluation.report_formats import INTERVAL_NA_NOTE
    from evaluation.revision.formats import UNDEFINED_NOTE
    from evaluation.verbalizer.formats import INTERVAL_NA_NOTE as VERBALIZER_NOTE

    reasons = "take part in it (every resample would give the figure itself), every resample "
    no_spread = "the bootstrap measured no spread, which is not certainty), fewer than half "
    for note in (INTERVAL_NA_NOTE, VERBALIZER_NOTE, UNDEFINED_NOTE):
        assert " has no interval: fewer than two " in note and reasons in note
        assert no_spread in note
    assert "two instructions take part" in INTERVAL_NA_NOTE
    assert "two items take part" in VERBALIZER_NOTE
    assert UNDEFINED_NOTE.endswith(
        "A figure without brackets has no interval: fewer than two turns take part in it "
        "(every resample would give the figure itself), every resample gave the same value "
        "(its turns differ in nothing it reads, e.g. all in full agreement or all right: the "
        "bootstrap measured no spread, which is not certainty), fewer than half of the "
        "resamples define it, or none were drawn."
    )


def _latex_caption(latex: str, label: str) -> str:
    """The caption of the LaTeX table labelled `label`."""
    table = next(t for t in latex.split(r"\begin{table}") if rf"\label{{{label}}}" in t)
    return re.search(r"\\caption\{(.*)\}\n\\label", table).group(1)


def test_latex_kappa_caption_says_why_each_n_a_kappa_is_undefined():
    """An undefined kappa was printed "n/a" in the LaTeX Table 3 with no reason (the Markdown
    has the undefined_reason column): the caption names each n/a cell and its reason, escaped
    for LaTeX, and says nothing when every kappa is defined."""
    report = sample_report()
    latex = report_latex(report)
    assert "DS & crowd & n/a &" in latex
    caption = _latex_caption(latex, "tab:kappa")
    assert caption == (
        "Pairwise Fleiss' kappa agreement among annotators. n/a (DS crowd, Easy Set): "
        r"P\_e = 1: every rating fell in one category."
    )

    undefined = next(r for r in report["agreement"] if r["fleiss_kappa"] is None)
    twin = next(r for r in report["agreement"] if r["fleiss_kappa"] is not None)
    twin.update(fleiss_kappa=float("nan"), undefined_reason="50% of {raters} & no_items")
    caption = _latex_caption(report_latex(report), "tab:kappa")
    assert r"n/a (DS crowd, Easy Set): P\_e = 1" in caption
    assert r": 50\% of \{raters\} \& no\_items." in caption

    twin["fleiss_kappa"] = undefined["fleiss_kappa"] = 0.25
    caption = _latex_caption(report_latex(report), "tab:kappa")
    assert caption == "Pairwise Fleiss' kappa agreement among annotators."


def test_latex_drfr_caption_says_why_a_cell_is_n_a():
    """A source with no label of a system in a subset left that cell "n/a" without a reason."""
    from evaluation.report_formats import LEADERBOARD_NA_NOTE

    report = sample_report()
    assert LEADERBOARD_NA_NOTE not in _latex_caption(report_latex(report), "tab:drfr")
    gone = next(r for r in report["leaderboard"] if r["subset"] == "easy")
    report["leaderboard"].remove(gone)
    latex = report_latex(report)
    caption = _latex_caption(latex, "tab:drfr")
    assert caption.endswith(f" {LEADERBOARD_NA_NOTE}")
    assert f" & {latex_escape(gone['system'])} & n/a & " in latex


def test_table_4_says_why_a_cost_time_acc_or_pld_is_n_a_only_where_one_is():
    """Table 4 printed n/a for a cost, time, ACC or PLD with no reason, in LaTeX and Markdown
    alike: its caption (LaTeX) and a note under it (Markdown) say it, for the columns that hold
    an n/a, each ACC and PLD by its own reason, naming its cells."""
    from evaluation.report_formats import COST_NA_NOTE, SOURCES_NA_REASONS

    report = sample_report()  # the judge's labels were imported: no cost or time recorded
    caption = _latex_caption(report_latex(report), "tab:sources")
    markdown = _markdown_sections(report_markdown(report))[TABLE_TITLES["sources"]]
    for text in (caption, markdown):
        assert COST_NA_NOTE in text
        assert "ACC n/a" not in text and "PLD and WPLD n/a" not in text

    judge = [r for r in report["sources"] if r["cost_usd"] is None]
    for row in judge:
        row.update(cost_usd=1.5, time_min=2.0)
    report["sources"][0].update(
        acc=None, compared=0, pld0=None, pld1=None, pld2=None, wpld=None, pairs=0
    )
    report["sources"][0].update(acc_na="no_gold_label", pld_na="no_gold_label")
    for row in judge[1:]:  # labelled one system per instruction: no pair, with a gold
        row.update(pld0=None, pld1=None, pld2=None, wpld=None, pairs=0, pld_na="source_one_system")
    acc_note = f"ACC n/a (alpha, Easy Set): {SOURCES_NA_REASONS['no_gold_label']}."
    pld_notes = [
        f"PLD and WPLD n/a (alpha, Easy Set): {SOURCES_NA_REASONS['no_gold_label']}.",
        "PLD and WPLD n/a (gpt-4-0314 judge, Hard Set; gpt-4-0314 judge, Overall): "
        f"{SOURCES_NA_REASONS['source_one_system']}.",
    ]
    latex = report_latex(report)
    caption = _latex_caption(latex, "tab:sources")
    assert " & n/a & n/a & n/a & n/a & n/a \\\\" in latex
    expected = " ".join(latex_escape(note) for note in [acc_note, *pld_notes])
    assert caption.endswith(f"robustness. {expected}")
    markdown = _markdown_sections(report_markdown(report))[TABLE_TITLES["sources"]]
    assert markdown.endswith("".join(f"\n\n{note}" for note in [acc_note, *pld_notes]) + "\n")
    assert "Cost or time n/a" not in caption + markdown
    # Each cell's code in its row, empty where the figure is there.
    assert "| no\\_gold\\_label | no\\_gold\\_label | 118.00 |" in markdown
    assert "| 0 |  | source\\_one\\_system | 1.50 |" in markdown


@pytest.mark.parametrize(
    ("table", "group"),
    [("constraints", "constraint type"), ("domains", "domain"), ("hard_domains", "domain")],
)
def test_markdown_drfr_breakdowns_say_why_a_drfr_is_n_a_only_where_one_is(table, group):
    """DRFR per constraint type, per domain and per Hard-set domain printed a bare n/a for a
    DRFR with no questions: a note under that table says why, as the LaTeX DRFR caption does."""
    note = (
        f"n/a: the DRFR counted none of the source's answers to the model's questions in that "
        f"{group} (it answered none, or only UNKNOWN where UNKNOWN is left out)."
    )
    report = sample_report()
    for name in ("constraints", "domains", "hard_domains"):  # the sample has one n/a: drop it
        report[name] = [row for row in report[name] if row["drfr"] is not None]
    assert "the DRFR counted none" not in report_markdown(report)

    report[table][0].update(drfr=None, yes=0, questions=0)
    markdown = table_markdown(report, table)
    whole = report_markdown(report)

    assert "| n/a | 0 | 0 |" in markdown
    assert markdown.endswith(f" |\n\n{note}\n")
    assert whole.count("the DRFR counted none") == 1  # under that table only
    assert whole.index(TABLE_TITLES[table]) < whole.index(note)


def test_markdown_numbers_have_the_report_pages_decimals():
    """`report --format md` printed every number with four decimals (12.2500, 3.0000) where the
    page shows 12.25 and 3.00: each column now has the page's decimals, halves rounded up."""
    report = sample_report()
    report["dataset"] = [
        {
            "subset": "overall",
            "instructions": 4,
            "length": 12.25,
            "questions": 12,
            "questions_per_instruction": 3.0,
            "domains": 2,
        }
    ]
    tables = _markdown_tables(report_markdown(report))
    assert tables[TABLE_TITLES["dataset"]][2] == "| overall | 4 | 12.25 | 12 | 3.00 | 2 |"
    alpha = tables[TABLE_TITLES["sources"]][2]
    # acc 0.93 (93.0 % on the page), pld0 90.0, wpld 0.100, cost 118.00, time 240.00
    assert alpha.startswith(
        "| alpha | expert | easy | other-experts | 0.930 | 54 | 90.0 | 10.0 | 0.0 | 0.100 | 12 |"
    )
    assert alpha.endswith("|  |  | 118.00 | n/a | 240.00 |  |")
    leaderboard = tables[TABLE_TITLES["leaderboard"]][2]
    assert (
        leaderboard
        == "| gpt-4-1106-preview | alpha | expert | easy | 0.889 | 0.816 | 0.954 | 16 | 18 | 4 | 4 |  |"
    )


def test_a_partial_source_is_said_so_under_the_leaderboard_in_markdown_and_latex():
    """A judge run stopped after the easy set showed an Overall with nothing marking it as
    over part of the responses alone."""
    report = sample_report()
    assert "Partial" not in report_markdown(report) + report_latex(report)
    for row in report["leaderboard"]:
        if row["source"] == "gpt-4-0314 judge" and row["subset"] != "easy":
            row["responses_labelled"] = {"hard": 0, "overall": 4}[row["subset"]]
    note = (
        "Partial (gpt-4-0314 judge, Hard Set: 0 of 18 responses labelled; gpt-4-0314 judge, "
        "Overall: 12 of 30 responses labelled): a partial DRFR is over the responses its source "
        "labelled alone."
    )
    markdown = _markdown_sections(report_markdown(report))[TABLE_TITLES["leaderboard"]]
    assert f"\n\n{note}" in markdown
    assert "| gpt-4-0314 judge | llm | overall | " in markdown
    assert latex_escape(note) in _latex_caption(report_latex(report), "tab:drfr")
