import json
import re
from unittest import mock

import pytest
from django.core import checks
from django.core.management import ManagementUtility, call_command

from annotate.models import Annotator, System
from annotate.verbalizer.models import SystemRun
from annotate.verbalizer.services.sets import evaluation_set_create
from evaluation.report_formats import markdown_escape
from evaluation.stats.kappa import NO_INTERVAL_NO_SPREAD
from evaluation.verbalizer.formats import report_as
from evaluation.verbalizer.report import NO_KAPPA_INTERVAL, verbalizer_report
from tests.annotate.verbalizer.helpers import fill
from tests.evaluation.verbalizer.conftest import answer
from tests.latex import assert_latex_compiles, needs_pdflatex

pytestmark = pytest.mark.django_db

NO_SPREAD = NO_KAPPA_INTERVAL[NO_INTERVAL_NO_SPREAD]


def row(rows, **match):
    found = [r for r in rows if all(r[k] == v for k, v in match.items())]
    assert len(found) == 1, (match, found)
    return found[0]


def test_rows_per_mapping_and_mode_by_hand(small_set):
    report = verbalizer_report(evaluation_set=small_set)
    rows = report["rows"]
    golden = row(rows, system="m1", mapping="golden", mode="direct")
    assert (golden["group"], golden["n"], golden["accuracy_strict"], golden["accuracy_lenient"]) == (
        "natural", 2, 1.0, 1.0,
    )  # fmt: skip
    # Right on both items in every resample: no spread measured, no interval (was [1, 1]).
    assert golden["ci_lenient"] == (None, None)
    flipped = row(rows, system="m1", mapping="flipped-golden", mode="direct")
    # One wrong, one invalid: accuracy 0/1 under both rules, invalid 1/2.
    assert (flipped["accuracy_strict"], flipped["accuracy_lenient"]) == (0.0, 0.0)
    assert (flipped["invalid_strict"], flipped["invalid"]) == (0.5, 0.5)
    foo = row(rows, system="m1", mapping="foo|bar", mode="direct")
    # strict: "The answer is foo" invalid, "foo" on item 2 wrong -> 0/1, invalid 1/2
    # lenient: both valid, 1 right -> 1/2, invalid 0
    assert (foo["accuracy_strict"], foo["invalid_strict"]) == (0.0, 0.5)
    assert (foo["accuracy_lenient"], foo["invalid"]) == (0.5, 0.0)
    cot = row(rows, system="m1", mapping="flipped-golden", mode="cot")
    assert (cot["accuracy_strict"], cot["invalid_strict"]) == (None, 1.0)
    assert (cot["accuracy_lenient"], cot["invalid"]) == (0.5, 0.0)
    assert cot["ci_strict"] == (None, None)
    # Rows without answers do not appear (golden cot, foo|bar cot).
    assert len([r for r in rows if r["system"] == "m1"]) == 4


def test_groups_pool_datasets_and_mappings_direct_only(small_set):
    groups = verbalizer_report(evaluation_set=small_set)["groups"]
    natural = row(groups, system="m1", group="natural")
    assert (natural["n"], natural["accuracy_lenient"]) == (2, 1.0)
    neutral = row(groups, system="m1", group="neutral")
    assert (neutral["accuracy_strict"], neutral["accuracy_lenient"]) == (0.0, 0.5)
    unnatural = row(groups, system="m1", group="unnatural")
    assert (unnatural["n"], unnatural["accuracy_lenient"], unnatural["invalid"]) == (2, 0.0, 0.5)
    low, high = neutral["ci_lenient"]
    assert 0.0 <= low <= 0.5 <= high <= 1.0


def test_flipped_conditions_fig4_and_fig5(small_set):
    report = verbalizer_report(evaluation_set=small_set)
    flipped = {r["condition"]: r["accuracy_lenient"] for r in report["flipped"]}
    assert flipped == {
        "natural golden, direct": 1.0,
        "unnatural flipped golden, direct": 0.0,
        "unnatural flipped golden, CoT": 0.5,
    }
    assert [r["condition"] for r in report["flipped_by_dataset"]] == list(flipped)
    assert {r["dataset"] for r in report["flipped_by_dataset"]} == {"SST-2"}


def test_humans_all_answers_majority_and_kappa(with_humans):
    report = verbalizer_report(evaluation_set=with_humans)
    human = row(report["rows"], system="human", mapping="flipped-golden", mode="direct")
    # 6 answers: item 1 (expects "negative") two right, item 2 (expects "positive") one right.
    assert (human["n"], human["accuracy_lenient"], human["invalid"]) == (6, 3 / 6, 0.0)
    # Majorities: "negative" on both -> right on item 1, wrong on item 2.
    majority = row(report["rows"], system="human-majority", mapping="flipped-golden")
    assert (majority["n"], majority["accuracy_lenient"]) == (2, 0.5)
    assert [s["system"] for s in report["systems"]] == ["m1", "human", "human-majority"]
    # Fleiss: both items have counts (neg 2, pos 1) -> P_i = (4 + 1 - 3) / 6 = 1/3 = P_bar;
    # p_neg = 4/6, p_pos = 2/6 -> P_e = 4/9 + 1/9 = 5/9; kappa = (1/3 - 5/9) / (4/9) = -1/2.
    overall = row(report["agreement"], dataset="all")
    assert overall["kappa"] == pytest.approx(-0.5)
    assert (overall["source"], overall["items"], overall["raters"]) == ("human", 2, 3)
    # Both items have the same counts, so every bootstrap resample of items has kappa -1/2:
    # no spread measured, no interval (it read [-0.5, -0.5]), and the note says why.
    assert (overall["ci_low"], overall["ci_high"]) == (None, None)
    assert overall["note"] == f"95% CI n/a: {NO_SPREAD}"
    # In-house people only: no crowd rows.
    assert {a["source"] for a in report["agreement"]} == {"human"}


def test_agreement_interval_resamples_items_seeded(with_humans):
    """Three items: the two flipped-golden prompts split 2-1 as above, and golden item 2 where
    all three say "negative". Categories are the first and the second word of each prompt: under
    flipped golden "negative" is the first word, under golden the second.

    Point estimate by hand: counts (second, first) = (1, 2), (1, 2), (3, 0); P_i = 1/3, 1/3, 1
    -> P̄ = 5/9; p_second = 5/9, p_first = 4/9 -> P_e = 41/81;
    kappa = (45/81 - 41/81) / (40/81) = 1/10.
    The interval comes from the same seeded resamples on every read.
    """
    from annotate.models import Annotator
    from annotate.verbalizer.models import HumanAnswer, HumanStudy, Prompt

    study = HumanStudy.objects.get(name="h")
    golden = Prompt.objects.get(
        evaluation_set=with_humans, mapping__name="golden", mode="direct", item__position=2
    )
    study.prompts.add(golden)
    for person in Annotator.objects.filter(name__in=["p0", "p1", "p2"]):
        HumanAnswer.objects.create(study=study, prompt=golden, annotator=person, word="negative")
    first = row(verbalizer_report(evaluation_set=with_humans)["agreement"], dataset="all")
    assert first["kappa"] == pytest.approx(0.1)
    assert first["items"] == 3
    assert first["ci_low"] <= first["kappa"] <= first["ci_high"]
    # Resamples drawing only the agreeing item have P_e = 1 (undefined, skipped); those with
    # only split items (probability (2/3)^3 = 8/27, well above 2.5 %) give -1/2, the lowest
    # value any resample takes.
    assert first["ci_low"] == pytest.approx(-0.5)
    again = row(verbalizer_report(evaluation_set=with_humans)["agreement"], dataset="all")
    assert (again["ci_low"], again["ci_high"]) == (first["ci_low"], first["ci_high"])


def test_agreement_formats(with_humans, capsys):
    report = verbalizer_report(evaluation_set=with_humans)
    rows = json.loads(report_as(report, "json", "agreement"))
    assert [(r["source"], r["dataset"]) for r in rows] == [("human", "SST-2"), ("human", "all")]
    assert (rows[1]["ci_low"], rows[1]["ci_high"]) == (None, None)
    assert rows[1]["note"] == f"95% CI n/a: {NO_SPREAD}"
    csv_lines = report_as(report, "csv", "agreement").splitlines()
    assert csv_lines[0] == "source,dataset,kappa,ci_low,ci_high,items,raters,raw_agreement,note"
    # Every resample split alike: an interval n/a, not a zero-width "-0.500 to -0.500", with
    # why beside it (the note column; under the LaTeX table, which has none) and under it.
    assert csv_lines[2].startswith("human,all,-0.5")
    assert csv_lines[2].endswith(f',,,2,3,0.0,"95% CI n/a: {NO_SPREAD}"')
    md = report_as(report, "md", "agreement")
    assert f"| human | all | -0.500 | n/a | 2 | 3 | 95% CI n/a: {NO_SPREAD} |" in md
    latex = report_as(report, "latex", "agreement")
    assert "human & all & -0.500 & n/a & 2 & 3 \\\\" in latex
    assert "human, SST-2; human, all: 95\\% CI n/a: every resample gives the same kappa" in latex
    for document in (md, latex):
        assert "every resample gave the same value" in document
        assert "-0.500 to -0.500" not in document and "[-0.500, -0.500]" not in document
    # The rows documents in LaTeX and Markdown end with the agreement table.
    assert "Fleiss' kappa" in report_as(report, "md") and "$\\kappa$" in report_as(report, "latex")
    call_command("verbalizer_report", "--set", "small", "--format", "csv", "--table", "agreement")
    assert capsys.readouterr().out.splitlines()[0].startswith("source,dataset,kappa")


def test_command_prints_without_the_system_checks(small_set, capsys):
    # The checks import every page's module: seconds of CPU for a report of a fraction of one.
    # Run as `manage.py` runs it (call_command skips the checks of any command).
    failing = [checks.Error("a page's module is broken", id="test.E001")]
    argv = ["manage.py", "verbalizer_report", "--set", "small", "--format", "csv"]
    with mock.patch("django.core.management.base.checks.run_checks", return_value=failing) as run:
        ManagementUtility(argv).execute()
    assert not run.called
    assert capsys.readouterr().out.startswith("system,dataset,group,mapping,mode,n,")


def test_formats(small_set, capsys):
    report = verbalizer_report(evaluation_set=small_set)
    rows = json.loads(report_as(report, "json"))
    first = rows[0]
    assert set(first) >= {"system", "dataset", "group", "mapping", "mode", "accuracy_strict",
                          "accuracy_lenient", "invalid", "n"}  # fmt: skip
    assert (first["mapping"], first["mode"]) == ("golden", "direct")
    csv_text = report_as(report, "csv").splitlines()
    assert csv_text[0].startswith("system,dataset,group,mapping,mode,n,accuracy_strict")
    assert "m1,SST-2,unnatural,flipped-golden,cot,2,,0.5,0.0,1.0,0.0,,,0.0,1.0,set" in csv_text
    md = report_as(report, "md")
    assert "| m1 | SST-2 | neutral | foo\\|bar | direct | 2 | 0.0 | 50.0 |" in md
    latex = report_as(report, "latex")
    assert "m1 & 100.0 & 50.0 & 0.0 & 0.0 & 0.0 & 50.0 \\\\" in latex  # then invalid %
    call_command("verbalizer_report", "--set", "small", "--format", "json")
    assert json.loads(capsys.readouterr().out) == rows


@pytest.mark.parametrize("name", ["groups", "mappings", "flipped", "flipped_by_dataset"])
def test_every_figure_in_every_format_shows_models_and_people(with_humans, name):
    from evaluation.verbalizer.figures import render_figure

    report = verbalizer_report(evaluation_set=with_humans)
    svg = render_figure(report, name, "svg").decode()
    # Models and people on the axis; m1's flipped-golden direct bar has half its replies invalid.
    assert "m1" in svg and "human-majority" in svg
    assert "inv 50%" in svg
    assert render_figure(report, name, "png").startswith(b"\x89PNG")
    assert render_figure(report, name, "pdf").startswith(b"%PDF")


def test_systems_are_ordered_by_size_then_name_unknown_sizes_last(small_set):
    from annotate.models import System
    from annotate.verbalizer.models import ModelAnswer, Prompt, SystemRun

    prompt = Prompt.objects.filter(evaluation_set=small_set).first()
    for name, size in (("big", 70.0), ("a-unsized", None), ("tiny", 0.08)):
        run = SystemRun.objects.create(
            evaluation_set=small_set, system=System.objects.create(name=name),
            endpoint_name="e", model_size_b=size,
        )  # fmt: skip
        ModelAnswer.objects.create(prompt=prompt, system=run.system, run=run, reply="positive")
    systems = verbalizer_report(evaluation_set=small_set)["systems"]
    assert [(s["system"], s["size_b"]) for s in systems] == [
        ("tiny", 0.08), ("m1", 7.0), ("big", 70.0), ("a-unsized", None),
    ]  # fmt: skip


def test_csv_rows_keep_a_formula_in_a_system_name_as_text(small_set):
    from annotate.models import System

    System.objects.filter(name="m1").update(name="=HYPERLINK(1)")
    text = report_as(verbalizer_report(evaluation_set=small_set), "csv")
    assert "\n'=HYPERLINK(1),SST-2," in text


def test_a_new_accounts_answers_count_once_a_researcher_decides_its_kind(with_humans):
    """A web account is undecided until a researcher says expert or crowd: its answers count in
    no human row, majority or agreement, and the raw export says why; then they count."""
    from django.utils import timezone

    from annotate.models import Annotator
    from annotate.services.annotators import annotator_kind_set
    from annotate.verbalizer.models import HumanAnswer, HumanStudy
    from evaluation.verbalizer.report import human_answers_raw

    study = HumanStudy.objects.get(name="h")
    # A place for a fourth person in-house: a kind decided into a full channel would make the
    # newcomer's answers wait (tests/annotate/verbalizer/test_places_handed_on.py).
    HumanStudy.objects.filter(pk=study.pk).update(answers_per_prompt=4)
    newcomer = Annotator.objects.create(name="newcomer", kind="undecided")
    for prompt in study.prompts.all():  # the expected word on both items: all right
        HumanAnswer.objects.create(
            study=study, prompt=prompt, annotator=newcomer, word=prompt.expected_word
        )
    report = verbalizer_report(evaluation_set=with_humans)
    human = row(report["rows"], system="human", mapping="flipped-golden", mode="direct")
    assert (human["n"], human["accuracy_lenient"]) == (6, 3 / 6)  # as without the newcomer
    assert row(report["agreement"], dataset="all")["raters"] == 3
    header, *rows = list(human_answers_raw(evaluation_set=with_humans))
    status = header.index("work_status")
    mine = [r for r in rows if r[header.index("annotator")] == "newcomer"]
    assert [r[status] for r in mine] == ["annotator's kind not decided"] * 2
    annotator_kind_set(annotator=newcomer, kind="expert", now=timezone.now())
    report = verbalizer_report(evaluation_set=with_humans)
    human = row(report["rows"], system="human", mapping="flipped-golden", mode="direct")
    assert (human["n"], human["accuracy_lenient"]) == (8, 5 / 8)


@pytest.mark.parametrize("name", ["groups", "mappings", "flipped", "flipped_by_dataset"])
def test_every_figures_legend_lies_within_the_figure(with_humans, name, drawn_figure):
    """Figure 4's long series names ran off both sides of a three-column legend."""
    from evaluation.verbalizer import figures

    report = verbalizer_report(evaluation_set=with_humans)
    figure = drawn_figure(figures, figures.render_figure, report, name, "png")
    (legend,) = figure.legends
    box, page = legend.get_window_extent(), figure.bbox
    assert page.x0 <= box.x0 and box.x1 <= page.x1, (name, box, page)
    assert len(legend.get_texts()) >= 2


def test_an_undefined_interval_reads_n_a_once_and_kappa_intervals_read_low_to_high(small_set):
    """A cell with no valid reply has no interval: "n/a", not "n/a–n/a" (Markdown) or
    "[n/a, n/a]" (LaTeX); a kappa interval reads "-0.500 to 0.200", as on the page, since an
    en dash before a minus sign ("-0.500–-0.200") is hard to read."""
    from annotate.verbalizer.models import ModelAnswer

    ModelAnswer.objects.filter(prompt__mapping__name="foo|bar").update(reply="I cannot tell")
    report = verbalizer_report(evaluation_set=small_set)
    md = report_as(report, "md")
    assert "| invalid % (lenient) |" in next(x for x in md.splitlines() if x.startswith("|"))
    assert "| m1 | SST-2 | neutral | foo\\|bar | direct | 2 | n/a | n/a | n/a | 100.0 |" in md
    # Asked with no valid reply: n/a; a cell never asked reads "--" (test_same_prompts.py).
    assert "m1 & 100.0 & n/a & 0.0 & 0.0 & 100.0 & 50.0 \\\\" in report_as(report, "latex")
    people = {
        "set": "small",
        "agreement": [
            {"source": "human", "dataset": "all", "kappa": None, "ci_low": None,
             "ci_high": None, "items": 0, "raters": 0, "note": "n"},
            {"source": "human", "dataset": "SST-2", "kappa": -0.1, "ci_low": -0.5,
             "ci_high": 0.2, "items": 4, "raters": 2, "note": ""},
        ]
    }  # fmt: skip
    md = report_as(people, "md", "agreement")
    assert "| human | all | n/a | n/a | 0 | 0 | n |" in md
    assert "| human | SST-2 | -0.100 | -0.500 to 0.200 | 4 | 2 |  |" in md
    latex = report_as(people, "latex", "agreement")
    assert "human & all & n/a & n/a & 0 & 0 \\\\" in latex
    assert "human & SST-2 & -0.100 & [-0.500, 0.200] & 4 & 2 \\\\" in latex


def test_an_n_a_interval_is_explained_under_its_table_in_markdown_and_latex(small_set):
    """An accuracy or a kappa without an interval showed "n/a" without saying why (the KIWI
    report says it): a note under the table says so, only where an interval is missing."""
    from annotate.verbalizer.models import ModelAnswer
    from evaluation.verbalizer.formats import INTERVAL_NA_NOTE

    # flipped-golden direct: one valid reply of two, so one item takes part.
    md = report_as(verbalizer_report(evaluation_set=small_set), "md")
    assert "| flipped-golden | direct | 2 | 0.0 | 0.0 | n/a | 50.0 |" in md
    assert md.count(INTERVAL_NA_NOTE) == 1
    ModelAnswer.objects.filter(
        prompt__mapping__name="flipped-golden", prompt__mode="direct", reply="I cannot tell"
    ).update(reply="positive")
    md = report_as(verbalizer_report(evaluation_set=small_set), "md")
    assert "| flipped-golden | direct | 2 | 50.0 | 50.0 | 0.0–100.0 | 0.0 |" in md
    # golden direct, right on both items in every resample, has none: said once all the same.
    assert md.count(INTERVAL_NA_NOTE) == 1
    people = {
        "set": "small",
        "agreement": [
            {"source": "human", "dataset": "all", "kappa": 0.1, "ci_low": None,
             "ci_high": None, "items": 3, "raters": 2, "note": ""},
        ]
    }  # fmt: skip
    assert INTERVAL_NA_NOTE in report_as(people, "md", "agreement")
    latex = report_as(people, "latex", "agreement")
    assert "fewer than half of the resamples define it" in latex
    assert latex.index("\\end{tabular}") < latex.index("has no interval")
    people["agreement"][0].update(ci_low=-0.5, ci_high=0.2)
    for fmt in ("md", "latex"):
        assert "has no interval" not in report_as(people, fmt, "agreement")


def test_agreement_of_one_answer_per_prompt_says_why_there_is_no_kappa(with_humans):
    """One person per prompt: the note said "no items" though the prompts are there; kappa
    needs two answers or more to a prompt."""
    from annotate.verbalizer.models import HumanAnswer

    HumanAnswer.objects.filter(annotator__name__in=["p1", "p2"]).delete()
    agreement = verbalizer_report(evaluation_set=with_humans)["agreement"]
    found = row(agreement, dataset="all")
    assert (found["kappa"], found["items"]) == (None, 0)
    assert found["note"] == "no prompt has two answers or more"


def test_a_figure_cell_with_answers_but_no_valid_reply_says_so_and_keeps_its_legend(small_set):
    """m1's only neutral prompts (foo|bar, direct) get no valid reply: the figure drew nothing
    there, an empty slot that read as "not asked", and the legend lost "neutral" (it was only
    labelled on the first system's bar)."""
    import re

    from annotate.verbalizer.models import ModelAnswer
    from evaluation.verbalizer.figures import render_figure
    from tests.evaluation.verbalizer.conftest import answer

    for old in ModelAnswer.objects.filter(prompt__mapping__name="foo|bar"):
        old.delete()
        answer(old.run, old.prompt, "I cannot tell")
    report = verbalizer_report(evaluation_set=small_set)
    assert row(report["groups"], group="neutral")["accuracy_lenient"] is None
    svg = render_figure(report, "groups", "svg").decode()
    assert "n/a, inv 100%" in svg
    assert re.findall(r">\s*(natural|neutral|unnatural)\s*<", svg) == [
        "natural", "neutral", "unnatural",
    ]  # fmt: skip


def test_a_zero_bar_is_marked_on_the_baseline_and_a_cell_never_asked_stays_empty(
    with_humans, drawn_figure
):
    """A 0% bar was drawn as nothing, the same empty slot as a cell never asked (a crowd row of
    one answer, 0.0, was blank in Figure 2): it is now a stroke of its colour on the baseline
    with a "0%" note, and a cell never asked (m1 on people's prompts, natural) stays empty."""
    from matplotlib.colors import to_hex
    from matplotlib.text import Text

    from evaluation.figures import PALETTE
    from evaluation.verbalizer import figures
    from tests.evaluation.figure_layout import overlapping_texts, texts_on_error_bars

    report = verbalizer_report(evaluation_set=with_humans)
    # m1's unnatural bars are 0 with half their replies invalid; the majority's, as one
    # crowd answer that was wrong: 0, no interval, nothing invalid.
    row(report["groups"], system="human-majority", group="unnatural").update(
        accuracy_lenient=0.0, ci_lenient=(None, None), invalid=0.0
    )
    figure = drawn_figure(figures, figures.render_figure, report, "groups", "png")
    notes = sorted(t.get_text() for t in figure.findobj(Text) if t.get_text().startswith("0%"))
    assert notes == ["0%", "0%, inv 50%", "0%, inv 50%"]
    strokes = [
        line for axes in figure.axes for line in axes.get_lines()
        if list(line.get_ydata()) == [0, 0]
    ]  # fmt: skip
    unnatural = to_hex(PALETTE[2 % len(PALETTE)])
    assert [to_hex(line.get_color()) for line in strokes] == [unnatural] * 3
    assert overlapping_texts(figure) == [] and texts_on_error_bars(figure) == []


PAPER_MODELS = [
    "flan-t5-xxl", "llama-2-70b-chat", "vicuna-13b-v1.5", "gpt-3.5-turbo-0613",
    "gpt-4-0613", "claude-2", "falcon-40b-instruct", "mpt-30b-chat",
]  # fmt: skip


def _paper_sized(report: dict) -> dict:
    """The report with eight models where m1 stood (each also on the people's prompts), beside
    the people: as many bars as the paper's figures, Figure 3 six of them per system."""
    from evaluation.verbalizer.figures import FIGURES

    for name in FIGURES:
        models = [r for r in report[name] if r["system"] == "m1"]
        people = [r for r in report[name] if r["system"] != "m1"]
        report[name] = [
            {**r, "system": model}
            for prompts in dict.fromkeys(r["prompts"] for r in models)
            for model in PAPER_MODELS
            for r in models
            if r["prompts"] == prompts
        ] + people
    return report


@pytest.mark.parametrize("paper_sized", [False, True], ids=["one model", "eight models"])
@pytest.mark.parametrize("name", ["groups", "mappings", "flipped", "flipped_by_dataset"])
def test_every_figure_is_readable_at_the_size_it_is_drawn(
    with_humans, name, paper_sized, drawn_figure
):
    """Figure 3 grew 2.4 inches a system, and the report page showed it squeezed into 700
    pixels: its text was a third smaller than drawn, its 6-point "inv" notes unreadable. Now
    every figure is at most MAX_WIDTH inches (more systems go on further rows of plots), no
    text is under MIN_FONT_SIZE points and no two texts overlap."""
    from evaluation import figures as shared
    from evaluation.verbalizer import figures
    from evaluation.verbalizer.report import row_order, system_label
    from tests.evaluation.figure_layout import (
        drawn_texts,
        legends_off_the_plots,
        overlapping_texts,
        smallest_font,
    )

    report = verbalizer_report(evaluation_set=with_humans)
    if paper_sized:
        report = _paper_sized(report)
    figure = drawn_figure(figures, figures.render_figure, report, name, "png")
    assert figure.get_figwidth() <= shared.MAX_WIDTH
    assert smallest_font(figure) >= shared.MIN_FONT_SIZE
    assert overlapping_texts(figure) == []
    assert legends_off_the_plots(figure) == []
    shown = {t.get_text().replace(",\non ", ", on ") for t in drawn_texts(figure)}
    assert {system_label(*pair) for pair in row_order(report[name])} <= shown


@pytest.mark.parametrize("name", ["groups", "mappings", "flipped", "flipped_by_dataset"])
@pytest.mark.parametrize("paper_sized", [False, True], ids=["one model", "eight models"])
def test_no_inv_note_is_crossed_by_an_error_bar(with_humans, name, paper_sized, drawn_figure):
    """The "inv N%" notes stood at each bar's foot, so a low bar's interval (here 30 %, from 5
    to 60) ran through its note, and its lower cap crossed it; a note now stands just above its
    bar's top whisker, and the y axis grows to hold the notes over a whisker that reaches 100."""
    from matplotlib.text import Text

    from evaluation.verbalizer import figures
    from tests.evaluation.figure_layout import overlapping_texts, texts_on_error_bars

    report = verbalizer_report(evaluation_set=with_humans)
    if paper_sized:  # rows of plots
        report = _paper_sized(report)
    for index, found in enumerate(r for r in report[name] if r["accuracy_lenient"] is not None):
        low, high = [(0.05, 0.6), (0.0, 1.0), (0.8, 1.0)][index % 3]
        found.update(accuracy_lenient=(low + high) / 2, ci_lenient=(low, high), invalid=0.25)
    figure = drawn_figure(figures, figures.render_figure, report, name, "png")
    notes = [t for t in figure.findobj(Text) if t.get_text().startswith("inv ")]
    assert notes and texts_on_error_bars(figure) == []
    assert overlapping_texts(figure) == []
    for note in notes:  # every note inside its plot, nothing cut at the top
        assert note.get_window_extent().y1 <= note.axes.bbox.y1 + 0.5, note.get_text()
    # Rows of plots keep one y scale, so bars in different rows still compare by height.
    assert len({axes.get_ylim() for axes in figure.axes}) == 1


def test_agreement_says_how_many_answered_prompts_it_left_out(with_humans):
    """A fourth person answered one of the two prompts: kappa kept the prompt with three answers
    (a tie between 3 and 4 keeps the smaller) and read "prompts 1" with an empty note, though
    people answered 2."""
    from annotate.models import Annotator
    from annotate.verbalizer.models import HumanAnswer, HumanStudy

    study = HumanStudy.objects.get(name="h")
    late = Annotator.objects.create(name="p3", kind="expert")
    HumanAnswer.objects.create(
        study=study, prompt=study.prompts.order_by("pk").first(), annotator=late, word="negative"
    )
    found = row(verbalizer_report(evaluation_set=with_humans)["agreement"], dataset="all")
    assert (found["items"], found["raters"]) == (1, 3)
    assert found["note"] == (
        "1 of the 2 prompts answered left out: kappa reads those with 3 answers each, the most "
        "common number; 95% CI n/a: its prompts are all of one item, which every resample draws"
    )


def test_markdown_shows_imported_names_as_text_not_html(with_humans):
    """System, dataset and study names come from outside (an import, a researcher's form): the
    Markdown tables and notes show them as written, as the InFoBench report's Markdown does,
    so a viewer that renders Markdown (with its inline HTML) runs no tag of them."""
    from annotate.models import System
    from annotate.verbalizer.models import ClassificationDataset, HumanStudy

    tag = '<img src=x onerror="alert(1)">'
    System.objects.filter(name="m1").update(name=f"m1{tag}")
    ClassificationDataset.objects.filter(name="SST-2").update(name=f"SST-2{tag}")
    HumanStudy.objects.filter(name="h").update(name=f"h{tag}")
    report = verbalizer_report(evaluation_set=with_humans)
    documents = [report_as(report, "md", table) for table in ("rows", "agreement", "slices")]
    assert not any(re.search(r"(?<!\\)<", md) for md in documents)  # every < escaped
    escaped = '\\<img src=x onerror="alert(1)"\\>'
    rows, agreement, slices = documents
    assert f"| m1{escaped} | SST-2{escaped} |" in rows and f"h{escaped}" in rows
    assert f"| human | SST-2{escaped} |" in agreement
    assert f"h{escaped}" in slices


def test_the_markdown_of_a_set_without_answers_says_no_data_as_the_kiwi_report(db):
    """It was a header row alone, which reads as a file cut short."""
    from annotate.verbalizer.services.sets import evaluation_set_create
    from evaluation.verbalizer.formats import report_as
    from evaluation.verbalizer.report import verbalizer_report
    from tests.annotate.verbalizer.helpers import fill

    fill("SST-2", [True])
    empty = evaluation_set_create(name="empty", datasets=["SST-2"], items=1, seed=1)
    report = verbalizer_report(evaluation_set=empty.evaluation_set)
    rows = report_as(report, "md")
    assert "\n## Accuracy\n\n(no data)\n" in rows and "| system |" not in rows
    assert report_as(report, "md", "agreement").endswith("\n## Agreement of people\n\n(no data)\n")


def test_a_changed_answer_counts_as_changed_and_the_export_keeps_the_first(with_humans):
    """An in-house annotator's slip, changed: the report (cached by the set's state) measures
    the corrected word, and human-answers.csv keeps the first word and the time of change."""
    from django.utils import timezone

    from annotate.verbalizer.models import HumanAnswer, HumanStudy
    from annotate.verbalizer.services.humans import human_answer_change
    from evaluation.verbalizer.report import human_answers_raw, verbalizer_report_cached

    before = verbalizer_report_cached(evaluation_set=with_humans)
    human = row(before["rows"], system="human", mapping="flipped-golden", mode="direct")
    assert human["accuracy_lenient"] == 3 / 6
    # p2's last answer: item 2 (expects "positive"), "negative" -> "positive" (key 1 under
    # flipped golden names "negative" first, so the positive word is key 2).
    study = HumanStudy.objects.get(name="h")
    slip = HumanAnswer.objects.filter(annotator__name="p2").order_by("-id").first()
    assert (slip.prompt.item.position, slip.word) == (2, "negative")
    key = 1 if slip.prompt.positive_word == "positive" else 2
    human_answer_change(
        study=study, annotator=slip.annotator, prompt_id=slip.prompt_id, key=key,
        now=timezone.now(),
    )  # fmt: skip
    after = verbalizer_report_cached(evaluation_set=with_humans)
    human = row(after["rows"], system="human", mapping="flipped-golden", mode="direct")
    # Item 1 (expects "negative"): negative, negative, positive -> 2 right; item 2 (expects
    # "positive"): negative, positive, positive (changed) -> 2 right: 4 of 6, as many answers.
    assert (human["n"], human["accuracy_lenient"]) == (6, 4 / 6)
    majority = row(after["rows"], system="human-majority", mapping="flipped-golden")
    assert (majority["n"], majority["accuracy_lenient"]) == (2, 1.0)  # negative, positive
    header, *rows = list(human_answers_raw(evaluation_set=with_humans))
    changed = [r for r in rows if r[header.index("changed_from")]]
    assert len(changed) == 1
    assert changed[0][header.index("word")] == "positive"
    assert changed[0][header.index("changed_from")] == "negative"
    assert changed[0][header.index("changed_at")].startswith(str(timezone.now().year))
    assert changed[0][header.index("seconds")] == 3.0  # the time to the first answer, once


@pytest.mark.parametrize("name", ["groups", "mappings", "flipped", "flipped_by_dataset"])
def test_only_bars_with_invalid_replies_carry_an_inv_note(with_humans, name, drawn_figure):
    """ "inv 0%" stood over every bar of a run with no invalid reply: noise that hid the bars
    that had some. A bar with none has no note; a share that rounds to 0 reads "<1%"."""
    from matplotlib.text import Text

    from evaluation.verbalizer import figures

    report = verbalizer_report(evaluation_set=with_humans)
    bars = [r for r in report[name] if r["accuracy_lenient"] is not None]
    assert len(bars) >= 2
    for index, found in enumerate(bars):
        found.update(invalid=[0.0, 0.004, 0.25][index % 3])
    figure = drawn_figure(figures, figures.render_figure, report, name, "png")
    # A bar too low to see says its value first ("0%, inv 25%"); a cell with no valid reply
    # ("n/a, inv 100%") is no bar.
    said = [t.get_text() for t in figure.findobj(Text) if not t.get_text().startswith("n/a")]
    notes = sorted(part for text in said for part in text.split(", ") if part.startswith("inv "))
    expected = sorted(
        {0.004: "inv <1%", 0.25: "inv 25%"}[r["invalid"]] for r in bars if r["invalid"]
    )
    assert notes == expected and "inv 0%" not in notes


def test_a_person_answering_a_prompt_in_two_studies_counts_once(with_humans):
    """Two studies of a set may share a prompt, and a person may answer it in both: counted
    twice, they weighed double in the accuracy and the majority and sat as two raters in kappa.
    The first answer that counts is measured; human-answers.csv keeps the other and says why."""
    from annotate.models import AssignmentStatus
    from annotate.verbalizer.models import HumanAnswer, HumanStudy
    from evaluation.verbalizer.report import human_answers_raw

    first = HumanStudy.objects.get(name="h")
    again = HumanStudy.objects.create(
        name="h again", evaluation_set=with_humans, answers_per_prompt=3
    )
    again.prompts.set(first.prompts.all())
    p0 = HumanAnswer.objects.filter(study=first, annotator__name="p0").select_related("prompt")
    for earlier in p0:  # p0 now gives the expected word on both items (was right on item 1)
        HumanAnswer.objects.create(
            study=again, prompt=earlier.prompt, annotator=earlier.annotator,
            word=earlier.prompt.expected_word,
        )  # fmt: skip
    report = verbalizer_report(evaluation_set=with_humans)
    human = row(report["rows"], system="human", mapping="flipped-golden", mode="direct")
    assert (human["n"], human["accuracy_lenient"]) == (6, 3 / 6)  # as with study "h" alone
    majority = row(report["rows"], system="human-majority", mapping="flipped-golden")
    assert (majority["n"], majority["accuracy_lenient"]) == (2, 0.5)
    overall = row(report["agreement"], dataset="all")
    assert (overall["raters"], overall["kappa"]) == (3, pytest.approx(-0.5))
    header, *rows = list(human_answers_raw(evaluation_set=with_humans))
    statuses = {
        (r[header.index("study")], r[header.index("annotator")]): r[header.index("work_status")]
        for r in rows
    }
    assert statuses["h again", "p0"] == "the same person's earlier answer to this prompt counts"
    assert statuses["h", "p0"] == "counted"
    # The first answers rejected, the later ones count in their place: p0 right on both items
    # now, p1 on item 1 ("negative") and item 2 ("positive"), p2 on neither: 4 of 6.
    p0.update(status=AssignmentStatus.REJECTED)
    human = row(
        verbalizer_report(evaluation_set=with_humans)["rows"],
        system="human", mapping="flipped-golden", mode="direct",
    )  # fmt: skip
    assert (human["n"], human["accuracy_lenient"]) == (6, 4 / 6)


def test_an_answer_given_while_the_human_answers_csv_starts_is_exported_with_its_status(
    with_humans, monkeypatch
):
    """The raw export reads the answers' statuses first and the answers after: an answer that
    committed in between stopped the download half-way with a KeyError."""
    import evaluation.verbalizer.report as report_module
    from annotate.models import Annotator
    from annotate.verbalizer.models import HumanAnswer, HumanStudy

    read_statuses = report_module.human_answer_statuses
    given = []

    def statuses_then_an_answer(queryset):
        statuses = read_statuses(queryset)
        if not given:
            study = HumanStudy.objects.get(name="h")
            late = Annotator.objects.create(name="late", kind="expert")
            prompt = study.prompts.first()
            given.append(
                HumanAnswer.objects.create(
                    study=study, prompt=prompt, annotator=late, word=prompt.expected_word
                )
            )
        return statuses

    monkeypatch.setattr(report_module, "human_answer_statuses", statuses_then_an_answer)
    header, *rows = list(report_module.human_answers_raw(evaluation_set=with_humans))
    assert len(rows) == 6 + 1
    (late,) = [r for r in rows if r[header.index("annotator")] == "late"]
    assert late[header.index("work_status")] == "counted"


@pytest.mark.parametrize(
    ("model", "current", "renamed"),
    [("system", "m1", "m1-instruct"), ("classificationdataset", "SST-2", "SST-2 (GLUE)")],
)
def test_a_name_corrected_in_the_admin_is_in_the_report_read_from_the_cache(
    superuser_client, with_humans, model, current, renamed
):
    """The report is cached by the state of the set's answers; a system or dataset renamed on
    its admin page (each editable after the answers came in) is reported by its new name."""
    from annotate.models import System
    from annotate.verbalizer.models import ClassificationDataset
    from evaluation.verbalizer.report import verbalizer_report_cached

    assert current in repr(verbalizer_report_cached(evaluation_set=with_humans))
    row_of = {"system": System, "classificationdataset": ClassificationDataset}[model]
    renaming = row_of.objects.get(name=current)
    app = row_of._meta.app_label
    url = f"/admin/{app}/{model}/{renaming.pk}/change/"
    form = superuser_client.get(url).context["adminform"].form
    data = {name: form.initial.get(name, field.initial) for name, field in form.fields.items()}
    data = {name: value for name, value in data.items() if value is not None}
    assert superuser_client.post(url, {**data, "name": renamed}).status_code == 302

    report = repr(verbalizer_report_cached(evaluation_set=with_humans))
    assert renamed in report


def test_a_human_study_renamed_in_the_admin_names_its_slice_in_the_cached_report(
    superuser_client, with_humans
):
    from annotate.verbalizer.models import HumanStudy
    from evaluation.verbalizer.report import verbalizer_report_cached

    slices = verbalizer_report_cached(evaluation_set=with_humans)["slices"]
    assert "h" in repr(slices) and "pilot-h" not in repr(slices)
    study = HumanStudy.objects.get(name="h")
    url = f"/admin/verbalizer/humanstudy/{study.pk}/change/"
    form = {"name": "pilot-h", "active": "on" if study.active else ""}
    assert superuser_client.post(url, form).status_code == 302

    assert "pilot-h" in repr(verbalizer_report_cached(evaluation_set=with_humans)["slices"])


def test_three_answers_rejected_as_three_others_start_counting_are_in_the_cached_report(
    with_humans,
):
    """Seven more people answer item 1 (ids in a row); the 1st, 5th and 6th, right, count, the
    others, wrong, were rejected. Between two reads the three are rejected and the others'
    rejections undone: as many answers count, the same sum and sum of squares of their ids
    (1+5+6 = 2+3+7, 1+25+36 = 4+9+49). The report read from the cache must count the new ones."""
    from annotate.models import Annotator, AssignmentStatus
    from annotate.verbalizer.models import HumanAnswer, HumanStudy
    from evaluation.verbalizer.report import verbalizer_report_cached

    study = HumanStudy.objects.get(name="h")
    prompt = study.prompts.get(item__position=1)
    right = (0, 4, 5)
    wrong = {"negative": "positive", "positive": "negative"}[prompt.expected_word]
    answers = [
        HumanAnswer.objects.create(
            study=study,
            prompt=prompt,
            annotator=Annotator.objects.create(name=f"swap-{n}", kind="expert"),
            word=prompt.expected_word if n in right else wrong,
            status=AssignmentStatus.SUBMITTED if n in right else AssignmentStatus.REJECTED,
        ).pk
        for n in range(7)
    ]
    assert answers == list(range(answers[0], answers[0] + 7))

    def human_n_and_right():
        report = verbalizer_report_cached(evaluation_set=with_humans)
        human = row(report["rows"], system="human", mapping="flipped-golden", mode="direct")
        return human["n"], round(human["n"] * human["accuracy_lenient"])

    assert human_n_and_right() == (9, 6)  # the six of with_humans (3 right) and three more
    HumanAnswer.objects.filter(pk__in=[answers[n] for n in right]).update(
        status=AssignmentStatus.REJECTED
    )
    HumanAnswer.objects.filter(pk__in=[answers[n] for n in (1, 2, 6)]).update(
        status=AssignmentStatus.SUBMITTED
    )
    assert human_n_and_right() == (9, 3)


def test_an_n_a_accuracy_in_markdown_says_why_only_where_one_is(small_set):
    """A strict accuracy with no valid reply (every chain-of-thought reply) showed "n/a" in the
    Markdown rows without a reason; the note says it, and only under a table that has one."""
    from annotate.verbalizer.models import ModelAnswer
    from evaluation.verbalizer.formats import ACCURACY_NA_NOTE

    md = report_as(verbalizer_report(evaluation_set=small_set), "md")
    assert "| m1 | SST-2 | unnatural | flipped-golden | cot | 2 | n/a | 50.0 |" in md
    assert md.count(markdown_escape(ACCURACY_NA_NOTE)) == 1
    assert "never a bare label word" in md

    ModelAnswer.objects.filter(prompt__mode="cot").delete()
    md = report_as(verbalizer_report(evaluation_set=small_set), "md")
    assert "n/a" not in [cell for row in _markdown_rows(md) for cell in row[6:8]]
    assert markdown_escape(ACCURACY_NA_NOTE) not in md


def _markdown_rows(md: str) -> list[list[str]]:
    """The cells of each body row of the Markdown rows table (an escaped bar is in a cell)."""
    return [
        [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
        for line in md.splitlines()
        if line.startswith("| m1")
    ]


def test_the_interval_note_names_a_dataset_of_a_single_item(small_set):
    """An interval over one item is n/a: the general note's "fewer than two items take part"
    did not say that a dataset of one item in the set never has one. Named where it happens
    (MR, one item), not for SST-2 (two items), whose n/a interval has other reasons."""
    from annotate.verbalizer.models import Prompt
    from tests.annotate.verbalizer.helpers import fill

    fill("MR", [True])
    one = evaluation_set_create(
        name="one item", datasets=["SST-2", "MR"], items=2, seed=1, mappings="golden",
        modes=["direct"],
    ).evaluation_set  # fmt: skip
    run = SystemRun.objects.create(
        evaluation_set=one, system=System.objects.get(name="m1"), endpoint_name="stub"
    )
    for prompt in Prompt.objects.filter(evaluation_set=one):
        answer(run, prompt, prompt.expected_word)
    report = verbalizer_report(evaluation_set=one)
    assert report["dataset_items"] == {"MR": 1, "SST-2": 2}
    md = report_as(report, "md")
    assert "| m1 | MR | natural | golden | direct | 1 | 100.0 | 100.0 | n/a | 0.0 |" in md
    assert (
        "MR holds a single item: an interval over one item is n/a (every resample would draw "
        "that item)."
    ) in md
    assert "SST-2 holds" not in md

    # SST-2's flipped-golden direct interval is n/a (one valid reply): no single-item note.
    md = report_as(verbalizer_report(evaluation_set=small_set), "md")
    assert "| flipped-golden | direct | 2 | 0.0 | 0.0 | n/a | 50.0 |" in md
    assert "single item" not in md


def test_the_intervals_state_the_bootstrap_resamples_and_seed_from_the_settings(
    with_humans, settings
):
    """The exports showed 95% intervals without their resamples and seed, so nobody could draw
    them again; they are the settings' (REPORT_BOOTSTRAP_RESAMPLES, _SEED), as in the InFoBench
    and KIWI reports, and the Markdown and LaTeX say them under each table with intervals."""
    report = verbalizer_report(evaluation_set=with_humans)
    assert report["bootstrap"] == {"resamples": 1000, "seed": 0, "level": 0.95}
    rows_note = (
        "95% CI: percentile bootstrap over items, drawn within their dataset (1,000 resamples, "
        "seed 0)."
    )
    agreement_note = (
        "95% CI: percentile bootstrap over items, an item's prompts drawn together (1,000 "
        "resamples, seed 0)."
    )
    md = report_as(report, "md")
    assert markdown_escape(rows_note) in md and markdown_escape(agreement_note) in md
    latex = report_as(report, "latex", "agreement")
    assert "{\\footnotesize 95\\% CI: percentile bootstrap over items, an item's" in latex

    settings.REPORT_BOOTSTRAP_RESAMPLES, settings.REPORT_BOOTSTRAP_SEED = 200, 7
    report = verbalizer_report(evaluation_set=with_humans)
    assert report["bootstrap"] == {"resamples": 200, "seed": 7, "level": 0.95}
    assert "(200 resamples, seed 7)" in report_as(report, "md")
    assert "(200 resamples, seed 7)" in report_as(report, "latex", "agreement")


def _intervals(evaluation_set) -> tuple[list, list]:
    """The accuracy intervals of every row and the kappa intervals of the set's report."""
    report = verbalizer_report(evaluation_set=evaluation_set)
    rows = [(r["ci_strict"], r["ci_lenient"]) for r in report["rows"] + report["groups"]]
    kappas = [(r["ci_low"], r["ci_high"]) for r in report["agreement"]]
    return rows, kappas


def test_the_intervals_are_drawn_with_the_bootstrap_seed_and_resamples_of_the_settings(
    db, settings
):
    """The report printed the settings' seed and resamples beside intervals it could have drawn
    otherwise: its accuracy and kappa intervals change with REPORT_BOOTSTRAP_SEED and
    REPORT_BOOTSTRAP_RESAMPLES. Forty items, a model right on two in three and three people
    who often disagree, so that the 2.5th and 97.5th percentiles depend on the draws."""
    from annotate.verbalizer.models import HumanAnswer, HumanStudy, Prompt

    fill("SST-2", [position % 2 == 0 for position in range(1, 41)])
    wide = evaluation_set_create(
        name="wide", datasets=["SST-2"], items=40, seed=1, mappings="golden"
    ).evaluation_set
    run = SystemRun.objects.create(
        evaluation_set=wide, system=System.objects.create(name="m1"), endpoint_name="stub"
    )
    study = HumanStudy.objects.create(name="h", evaluation_set=wide, answers_per_prompt=3)
    people = [Annotator.objects.create(name=f"p{k}", kind="expert") for k in range(3)]
    for prompt in Prompt.objects.filter(evaluation_set=wide).select_related("item"):
        position, right = prompt.item.position, prompt.item.is_positive
        answer(run, prompt, "positive" if right == (position % 3 != 0) else "negative")
        study.prompts.add(prompt)
        for k, person in enumerate(people):
            word = "positive" if (position * (k + 2)) % 5 < 2 else "negative"
            HumanAnswer.objects.create(
                study=study, prompt=prompt, annotator=person, word=word, seconds=3.0
            )

    settings.REPORT_BOOTSTRAP_RESAMPLES, settings.REPORT_BOOTSTRAP_SEED = 1000, 0
    rows, kappas = _intervals(wide)
    assert rows and kappas and _intervals(wide) == (rows, kappas)  # the same draws each read
    settings.REPORT_BOOTSTRAP_SEED = 7
    rows_7, kappas_7 = _intervals(wide)
    assert rows_7 != rows and kappas_7 != kappas
    settings.REPORT_BOOTSTRAP_RESAMPLES = 200
    rows_200, kappas_200 = _intervals(wide)
    assert rows_200 != rows_7 and kappas_200 != kappas_7


def test_an_n_a_kappa_in_latex_says_why(with_humans):
    """The LaTeX agreement table printed an undefined kappa as n/a with no reason (the Markdown
    has a note column, the LaTeX none): a note under it gives the reason, only where one is."""
    from annotate.verbalizer.models import HumanAnswer

    assert "Kappa n/a" not in report_as(verbalizer_report(evaluation_set=with_humans), "latex")
    HumanAnswer.objects.filter(annotator__name__in=["p1", "p2"]).delete()
    latex = report_as(verbalizer_report(evaluation_set=with_humans), "latex", "agreement")
    assert "human & all & n/a & n/a & 0 & 0 \\\\" in latex
    reason = "Kappa n/a (human, SST-2; human, all): no prompt has two answers or more."
    assert f"{{\\footnotesize {reason}}}" in latex
    assert latex.index("\\end{tabular}") < latex.index(reason)
    # The interval of an undefined kappa is n/a for that reason alone.
    assert "has no interval" not in latex


def test_the_latex_groups_table_says_what_n_a_and_dashes_mean_where_they_are(with_humans):
    """The LaTeX groups table explained n/a ("asked, no reply valid") and -- ("not asked") in a
    comment only, which a pasted table does not typeset: a note under it says each where the
    table shows one."""
    from annotate.verbalizer.models import HumanAnswer, ModelAnswer

    na = "n/a: asked, and no reply valid under the lenient rule"
    dash = "--: not asked (no prompt of that group)"
    latex = report_as(verbalizer_report(evaluation_set=with_humans), "latex")
    assert "human & -- & -- & 50.0 & -- & -- & 0.0 \\\\" in latex
    assert f"; {dash}.}}" in latex and na not in latex

    ModelAnswer.objects.filter(prompt__mapping__name="foo|bar").update(reply="I cannot tell")
    HumanAnswer.objects.all().delete()
    latex = report_as(verbalizer_report(evaluation_set=with_humans), "latex")
    assert "m1 & 100.0 & n/a & 0.0 & 0.0 & 100.0 & 50.0 \\\\" in latex
    assert f"; {na}.}}" in latex and dash not in latex
    assert latex.index("\\end{tabular}") < latex.index(na)


@needs_pdflatex
@pytest.mark.parametrize("people", ["kappa", "no kappa"])
def test_every_latex_table_compiles_with_hostile_names_and_n_a_cells(with_humans, tmp_path, people):
    """A researcher pastes the LaTeX as it comes: names with LaTeX's special characters, the
    notes under the tables (n/a reasons, the bootstrap line) and every table must typeset."""
    from annotate.verbalizer.models import HumanAnswer, ModelAnswer

    System.objects.filter(name="m1").update(name="m&1_x%$#{}~^\\")
    ModelAnswer.objects.filter(prompt__mapping__name="foo|bar").update(reply="I cannot tell")
    if people == "no kappa":
        HumanAnswer.objects.filter(annotator__name__in=["p1", "p2"]).delete()
    report = verbalizer_report(evaluation_set=with_humans)
    tables = "\n".join(report_as(report, "latex", table) for table in ("rows", "slices"))
    assert "n/a" in tables
    assert_latex_compiles(tmp_path, tables)


def test_the_latex_groups_table_shows_the_invalid_share_beside_each_accuracy(with_humans):
    """The majority's 100.0 was pasted without its ties: with two people per prompt, one of the
    two prompts is a tie (invalid), and the accuracy reads the other alone. The page shows an
    Invalid % column; the LaTeX now has one per group, explained under the table, and the
    Markdown keeps its column."""
    from annotate.verbalizer.models import HumanAnswer

    HumanAnswer.objects.filter(annotator__name="p2").delete()
    report = verbalizer_report(evaluation_set=with_humans)
    majority = row(report["groups"], system="human-majority", group="unnatural")
    assert (majority["accuracy_lenient"], majority["invalid"]) == (1.0, 0.5)
    latex = report_as(report, "latex")
    assert "System & Natural & Neutral & Unnatural & Natural & Neutral & Unnatural \\\\" in latex
    assert "\\multicolumn{3}{c}{Invalid (\\%)}" in latex
    assert "human-majority & -- & -- & 100.0 & -- & -- & 50.0 \\\\" in latex
    assert latex.index("\\end{tabular}") < latex.index(
        "(for a majority row, prompts whose people tie)"
    )
    md = report_as(report, "md")
    assert (
        "| human-majority | SST-2 | unnatural | flipped-golden | direct | 2 | 100.0 | 100.0 |" in md
    )
    assert "| 50.0 |\n" in md.split("| human-majority |", 1)[1]


def test_the_markdown_report_has_a_heading_naming_the_set_and_says_each_note_once(
    with_humans, capsys
):
    """`verbalizer_report --format md` began with a bare table, and the n/a note stood under the
    accuracy table and again under the agreement table when both had an n/a interval: the
    document now opens with the set's name, as the InFoBench and KIWI Markdown do, a heading
    over each table, and says each note once."""
    from evaluation.verbalizer.formats import INTERVAL_NA_NOTE

    report = verbalizer_report(evaluation_set=with_humans)
    assert any(r["ci_lenient"] == (None, None) for r in report["rows"])  # m1, flipped-golden
    row(report["agreement"], dataset="SST-2").update(ci_low=None, ci_high=None)
    with mock.patch(
        "evaluation.management.commands.verbalizer_report.verbalizer_report", return_value=report
    ):
        call_command("verbalizer_report", "--set", "small", "--format", "md")
    md = capsys.readouterr().out
    assert md.count(INTERVAL_NA_NOTE) == 1
    assert md.startswith("# Verbalizer report: small\n\n## Accuracy\n\n| system |")
    assert md.index("## Accuracy") < md.index("## Agreement of people") < md.index("Fleiss")
    # A table alone still says it where its own table has an n/a interval.
    agreement = report_as(report, "md", "agreement")
    assert agreement.startswith("# Verbalizer report: small\n\n## Agreement of people\n")
    assert agreement.count(INTERVAL_NA_NOTE) == 1
