"""Report figures: every figure in every format, from a sample report dict (no database)."""

import xml.etree.ElementTree as ET

import matplotlib
import pytest

from evaluation.errors import ReportError
from evaluation.figures import FIGURES, figure_available, render_figure
from tests.evaluation.figure_layout import legends_off_the_plots, overlapping_texts, smallest_font
from tests.evaluation.report_sample import (
    PRINCIPAL_DOMAINS,
    SYSTEMS,
    empty_report,
    sample_report,
)

SVG = "{http://www.w3.org/2000/svg}"
FORMATS = ["svg", "png", "pdf"]
# What each figure must show as text: the systems, or the annotator groups it compares.
SHOWN = {
    "leaderboard": SYSTEMS,
    "constraints": SYSTEMS + ["Content", "Linguistic", "Style", "Format", "Number"],
    "domains": SYSTEMS + list(PRINCIPAL_DOMAINS),
    "disagreement": ["expert annotators (60 questions)", "crowd annotators (60 questions)"],
    "positions": ["System A", "System B", "System C", "expert annotators"],
}


def _svg_texts(svg: bytes) -> list[str]:
    root = ET.fromstring(svg)
    return ["".join(element.itertext()) for element in root.iter(f"{SVG}text")]


def _rename_system(report: dict, old: str, new: str) -> dict:
    report["systems"] = [new if s == old else s for s in report["systems"]]
    for table in ("leaderboard", "constraints", "domains", "hard_domains"):
        for row in report[table]:
            if row["system"] == old:
                row["system"] = new
    return report


@pytest.mark.parametrize("name", list(FIGURES))
@pytest.mark.parametrize("fmt", FORMATS)
def test_every_figure_renders_in_every_format(name, fmt):
    data = render_figure(sample_report(), name, fmt)
    if fmt == "png":
        assert data.startswith(b"\x89PNG\r\n\x1a\n")
    elif fmt == "pdf":
        assert data.startswith(b"%PDF-")
        assert data.rstrip().endswith(b"%%EOF")
    else:
        texts = _svg_texts(data)
        for label in SHOWN[name]:
            assert label in texts, (name, label)
        assert FIGURES[name].split(" (")[0] in " ".join(texts)  # the title


@pytest.mark.parametrize("fmt", FORMATS)
def test_output_is_the_same_bytes_every_time(fmt):
    report = sample_report()
    assert render_figure(report, "constraints", fmt) == render_figure(report, "constraints", fmt)


def test_svg_keeps_text_as_text_and_stays_small():
    svg = render_figure(sample_report(), "leaderboard", "svg")
    assert b"<text" in svg
    assert len(svg) < 60_000


def test_no_figure_is_available_for_an_empty_report():
    report = empty_report()
    for name in FIGURES:
        assert figure_available(report, name) is False
        with pytest.raises(ValueError, match="no data"):
            render_figure(report, name, "svg")


def test_every_figure_is_available_for_the_sample():
    assert all(figure_available(sample_report(), name) for name in FIGURES)


def test_disagreement_with_no_question_is_not_available():
    report = sample_report()
    for row in report["disagreement"]:
        row["questions"] = 0
    assert figure_available(report, "disagreement") is False


def test_unknown_figure_or_format_is_refused():
    with pytest.raises(ValueError, match="unknown figure"):
        render_figure(sample_report(), "pie", "svg")
    with pytest.raises(ValueError, match="unknown figure format"):
        render_figure(sample_report(), "constraints", "gif")
    with pytest.raises(ValueError, match="unknown figure"):
        figure_available(sample_report(), "pie")


def test_source_defaults_to_expert_majority_then_crowd_majority():
    report = sample_report()
    assert "labels: expert-majority" in " ".join(
        _svg_texts(render_figure(report, "leaderboard", "svg"))
    )
    for table in ("leaderboard", "constraints", "domains", "hard_domains"):
        report[table] = [r for r in report[table] if r["source"] != "expert-majority"]
    assert "labels: crowd-majority" in " ".join(_svg_texts(render_figure(report, "domains", "svg")))
    for table in ("leaderboard", "constraints", "domains", "hard_domains"):
        report[table] = [r for r in report[table] if r["source"] != "crowd-majority"]
    assert "labels: alpha" in " ".join(_svg_texts(render_figure(report, "constraints", "svg")))


def test_source_can_be_chosen_and_must_exist():
    report = sample_report()
    svg = render_figure(report, "constraints", "svg", source="gpt-4-0314 judge")
    assert "labels: gpt-4-0314 judge" in " ".join(_svg_texts(svg))
    with pytest.raises(ReportError, match="label source 'nobody'"):
        render_figure(report, "leaderboard", "svg", source="nobody")


def test_a_radar_with_a_null_drfr_still_renders():
    report = sample_report()
    report["hard_domains"][0].update(drfr=None, yes=0, questions=0)
    png = render_figure(report, "domains", "png", source="expert-majority")
    assert png.startswith(b"\x89PNG")


def test_figure_4_has_one_spoke_per_principal_domain_of_the_hard_set():
    # Paper Figure 4: 7 spokes from the hard_domains table, never the per-category table.
    texts = _svg_texts(render_figure(sample_report(), "domains", "svg"))
    assert [t for t in texts if t in PRINCIPAL_DOMAINS] == list(PRINCIPAL_DOMAINS)
    assert not {"Coding", "Marketing", "Education"} & set(texts)
    report = sample_report()
    report["hard_domains"] = []
    assert not figure_available(report, "domains")


def test_a_script_tag_in_a_name_stays_text():
    name = "<script>alert(1)</script>"
    report = _rename_system(sample_report(), "claude-2.1", name)
    svg = render_figure(report, "leaderboard", "svg")
    root = ET.fromstring(svg)
    assert not [e for e in root.iter() if e.tag.split("}")[-1].lower() == "script"]
    assert b"<script" not in svg
    assert name in _svg_texts(svg)


def test_dollar_signs_and_underscores_in_names_are_shown_as_written():
    report = _rename_system(sample_report(), "claude-2.1", "_a$b$c")
    svg = render_figure(report, "constraints", "svg")
    assert "_a$b$c" in _svg_texts(svg)  # not mathtext, and not dropped from the legend


def test_rendering_leaves_no_global_matplotlib_state_behind():
    import matplotlib.pyplot as plt

    before = dict(matplotlib.rcParams)
    render_figure(sample_report(), "positions", "svg")
    assert plt.get_fignums() == []
    assert dict(matplotlib.rcParams) == before
    assert matplotlib.get_backend().lower() == "agg"


# Names as long as the paper's systems, and as many: tick labels that fit three short names
# flat run into each other here.
MANY_SYSTEMS = [
    "gpt-4-1106-preview", "gpt-3.5-turbo-1106", "claude-2.1", "claude-instant-1.2",
    "llama-2-70b-chat", "vicuna-13b-v1.5", "mistral-7b-instruct-v0.2", "zephyr-7b-beta",
    "wizardlm-13b-v1.2", "alpaca-7b", "baize-v2-13b", "koala-13b", "openchat-3.5",
]  # fmt: skip


def _many_systems_report() -> dict:
    report = sample_report()
    for table in ("leaderboard", "constraints", "domains", "hard_domains"):
        model = [row for row in report[table] if row["system"] == "claude-2.1"]
        report[table] = [{**row, "system": name} for name in MANY_SYSTEMS for row in model]
    report["systems"] = list(MANY_SYSTEMS)
    return report


@pytest.mark.parametrize("many", [False, True], ids=["sample", "13 systems"])
@pytest.mark.parametrize("name", list(FIGURES))
def test_every_figure_is_readable_at_the_size_it_is_drawn(name, many, drawn_figure):
    """At most MAX_WIDTH inches (the report page shows it at full size), no text under
    MIN_FONT_SIZE points, no two texts on each other, and the legend beside the plot: the
    leaderboard's and the disagreement figure's legends sat on error bars and bars, and the
    radar's legend on a domain's name."""
    from evaluation import figures

    report = _many_systems_report() if many else sample_report()
    figure = drawn_figure(figures, render_figure, report, name, "png")
    assert figure.get_figwidth() <= figures.MAX_WIDTH
    assert smallest_font(figure) >= figures.MIN_FONT_SIZE
    assert overlapping_texts(figure) == []
    assert legends_off_the_plots(figure) == []


@pytest.mark.parametrize("name", ["constraints", "domains"])
def test_radar_spoke_names_stay_outside_the_circle(name, drawn_figure):
    """Paper Figures 3 and 4: a name centred on its spoke ran into the circle and the systems'
    lines ("Linguistic", "Engineering and Technology")."""
    from evaluation import figures

    figure = drawn_figure(figures, render_figure, sample_report(), name, "png")
    (axes,) = figure.axes
    centre = axes.transAxes.transform((0.5, 0.5))
    radius = axes.transAxes.transform((1.0, 0.5))[0] - centre[0]
    labels = [label for label in axes.get_xticklabels() if label.get_text()]
    assert len(labels) >= 5
    for label in labels:
        box = label.get_window_extent()
        nearest = (min(max(centre[0], box.x0), box.x1), min(max(centre[1], box.y0), box.y1))
        distance = ((nearest[0] - centre[0]) ** 2 + (nearest[1] - centre[1]) ** 2) ** 0.5
        assert distance > radius, (label.get_text(), distance, radius)


def test_long_system_names_turn_only_when_they_would_overlap(drawn_figure):
    from evaluation import figures

    flat = drawn_figure(figures, render_figure, sample_report(), "leaderboard", "png")
    assert {label.get_rotation() for label in flat.axes[0].get_xticklabels()} == {0}
    turned = drawn_figure(figures, render_figure, _many_systems_report(), "leaderboard", "png")
    assert {label.get_rotation() for label in turned.axes[0].get_xticklabels()} == {30}
