"""The paper's Figures 2-5 drawn from a verbalizer report, with people beside the models.

Each model is drawn on every prompt of the set it answered and, beside the people, once more on
exactly the prompts the people answered ("gpt-4, on people's prompts"), so bars that stand
side by side share their prompts; a dotted line parts the two.

Bars are accuracy under the lenient rule (invalid replies not counted) with 95 % item-bootstrap
intervals; the dashed line is random guessing (50 %); the share of invalid replies is printed
just above the interval of each bar that has any ("inv 12%", "inv <1%"; a bar with none has no
note: "inv 0%" over every bar of a clean run was noise) and "n/a, inv 100%" at the foot of a
cell where no reply was valid. A bar too low to see (0 %) is a stroke of its colour on the
baseline, its note saying "0%" ("0%, inv 19%"): it was drawn as nothing, like a cell never
asked, which stays an empty slot.
Same matplotlib conventions as evaluation.figures (Agg canvas, no pyplot, deterministic output)
and the same size rule: each system gets a fixed width, and systems that would make a figure
wider than `MAX_WIDTH` go on further rows of plots (Figure 3's six verbalizers per system grew
it past any page or paper).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from evaluation.caching import cache_get_or_build
from evaluation.figures import (
    AXIS_MARGIN,
    MAX_WIDTH,
    MIN_FONT_SIZE,
    PALETTE,
    _text,
    figure_bytes,
    figure_request_check,
    fit_tick_labels,
    legend_that_fits,
    new_figure,
    rows_of_plots,
)
from evaluation.verbalizer.report import (
    CACHE_SECONDS,
    FLIPPED_CONDITIONS,
    report_version,
    row_order,
    system_label,
    verbalizer_report_cached,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from matplotlib.text import Text

FIGURES = {
    "groups": "Figure 2: accuracy under natural, neutral and unnatural instructions",
    "mappings": "Figure 3: accuracy per verbalizer, natural and unnatural",
    "flipped": "Figure 4: golden vs flipped golden, direct and chain of thought",
    "flipped_by_dataset": "Figure 5: golden vs flipped golden per dataset",
}
RULE = "lenient"
# Inches per bar (at least three bars a system): Figures 2-4 alone on their plot, Figure 5 in a
# plot per dataset, three datasets abreast.
BAR_WIDTH = {"single": 0.35, "per_dataset": 0.25}
ROW_HEIGHT = 3.0
NOTE_GAP = 2  # points between the top of a bar's whisker and its "inv N%" note
# Accuracy (%) under which a bar is too low to see: it gets a stroke on the baseline and a note
# saying its value (a bar under half a percent is under a pixel tall).
ZERO_BELOW = 0.5
# Part of a drawn figure's cache key: raise it when the drawing changes, so no figure drawn by
# the old code is served from the cache.
DRAWING_VERSION = 2


def _series(name: str, report: dict, rows: list[dict]) -> tuple[str, list[str]]:
    if name == "groups":
        return "group", [
            g for g in ("natural", "neutral", "unnatural") if any(r["group"] == g for r in rows)
        ]
    if name == "mappings":
        order = list(dict.fromkeys(r["mapping"] for r in rows))
        natural = [
            m for m in order if any(r["mapping"] == m and r["group"] == "natural" for r in rows)
        ]
        return "mapping", natural + [m for m in order if m not in natural]
    present = {r["condition"] for r in rows}
    return "condition", [c[0] for c in FLIPPED_CONDITIONS if c[0] in present]


def _draw_bars(
    axes,
    rows: list[dict],
    systems: list[str],
    key: str,
    series: list[str],
    *,
    blocks: Sequence[int] = (),
) -> list[tuple[Text, float]]:
    """Draw the bars and return each "inv N%" note above a bar with the height it stands on."""
    width = 0.8 / max(len(series), 1)
    values = {(system_label(r["system"], r["prompts"]), r[key]): r for r in rows}
    notes = []
    for s_index, name in enumerate(series):
        for x, system in enumerate(systems):
            row = values.get((system, name))
            if row is None:
                continue
            position = x - 0.4 + width * (s_index + 0.5)
            color = PALETTE[s_index % len(PALETTE)]
            if row[f"accuracy_{RULE}"] is None:
                # Asked, and no reply valid: a note, not the empty slot of a cell never asked.
                axes.text(
                    position, 1, f"n/a, inv {100 * row['invalid']:.0f}%", rotation=90,
                    ha="center", va="bottom", fontsize=MIN_FONT_SIZE, color="black",
                )  # fmt: skip
                continue
            value = 100 * row[f"accuracy_{RULE}"]
            low, high = row[f"ci_{RULE}"]
            yerr, top = None, value
            if low is not None:
                yerr = [[max(value - 100 * low, 0)], [max(100 * high - value, 0)]]
                top = max(value, 100 * high)
            axes.bar(position, value, width, yerr=yerr, capsize=2, color=color)
            if value < ZERO_BELOW:
                _mark_baseline(axes, position, width, color)
            text = _bar_note(value, row["invalid"])
            if not text:
                continue
            # Above the top whisker: at the bar's foot the interval's line ran through the note
            # whenever the lower end was under the note's top (a low or wide interval).
            note = axes.annotate(
                text, (position, top), xytext=(0, NOTE_GAP), textcoords="offset points",
                rotation=90, ha="center", va="bottom", fontsize=MIN_FONT_SIZE, color="black",
            )  # fmt: skip
            notes.append((note, top))
    for start in blocks:  # where the bars on people's prompts begin
        axes.axvline(start - 0.5, color="grey", linestyle=":", linewidth=0.8)
    axes.axhline(50, color="black", linestyle="--", linewidth=0.8)
    # "gpt-4, on people's prompts" on two lines: one line ran far below the axis.
    ticks = [_text(s).replace(", on ", ",\non ") for s in systems]
    axes.set_xticks(range(len(systems)), ticks)
    axes.set_xlim(-0.5, len(systems) - 0.5)
    axes.set_ylim(0, 105)
    axes.set_yticks(range(0, 101, 20))
    axes.set_ylabel("accuracy (%)")
    return notes


def _mark_baseline(axes, position: float, width: float, color) -> None:
    """Draw a bar too low to see as a stroke of its colour on the baseline: a 0% bar was drawn
    as nothing, the same empty slot as a cell never asked."""
    axes.plot(
        [position - width / 2, position + width / 2], [0, 0], color=color, linewidth=3,
        solid_capstyle="butt", clip_on=False, zorder=3,
    )  # fmt: skip


def _bar_note(value: float, invalid: float) -> str:
    """The note over a bar: its accuracy when the bar is too low to see ("0%", "<1%"), then its
    share of invalid replies when it has any; "" for a visible bar with none."""
    said = [_share(value / 100)] if value < ZERO_BELOW else []
    if invalid:
        said.append(f"inv {_share(invalid)}")
    return ", ".join(said)


def _share(share: float) -> str:
    """A share (of invalid replies, or a bar's accuracy) as a note reads it: "<1%" for one that
    rounds to 0 but is not, so a note never says 0 where there was something."""
    percent = 100 * share
    return "<1%" if 0 < percent < 0.5 else f"{percent:.0f}%"


def _room_for_notes(figure: Figure, notes: list[tuple[object, list[tuple[Text, float]]]]) -> None:
    """Raise the top of every plot's y axis, all to one height (rows of plots compare), until
    every note fits under it.

    A note of length L pixels standing at height y ends at y + L·t/H on an axis from 0 to t that
    is H pixels tall, which is at most t when t ≥ y / (1 - L/H); a few pixels of margin. One
    layout is enough: the y ticks stay 0-100, so a taller axis moves nothing else.
    """
    figure.draw_without_rendering()
    need = 105.0
    for axes, standing in notes:
        for note, base in standing:
            length = note.get_window_extent().height + NOTE_GAP * figure.dpi / 72 + 2
            need = max(need, base / max(1 - length / axes.bbox.height, 0.1))
    for axes, _ in notes:
        axes.set_ylim(0, math.ceil(need))


def figure_available(report: dict, name: str) -> bool:
    return name in FIGURES and any(r[f"accuracy_{RULE}"] is not None for r in report[name])


def render_figure(report: dict, name: str, fmt: str) -> bytes:
    """Draw figure `name` (groups, mappings, flipped, flipped_by_dataset) as SVG, PNG or PDF."""
    from matplotlib.patches import Patch  # matplotlib on the first figure only, as new_figure

    figure_request_check(name, fmt, names=FIGURES, available=figure_available(report, name))
    rows = report[name]
    pairs = row_order(rows)
    systems = [system_label(*pair) for pair in pairs]
    starts = [i for i in range(1, len(pairs)) if pairs[i][1] != pairs[i - 1][1]]
    key, series = _series(name, report, rows)
    per_dataset = name == "flipped_by_dataset"
    bar = BAR_WIDTH["per_dataset" if per_dataset else "single"]
    per_system = bar * max(3, len(series))
    groups = rows_of_plots(len(systems), per_system)
    datasets = list(dict.fromkeys(r["dataset"] for r in rows)) if per_dataset else [None]
    plot_width = AXIS_MARGIN + per_system * max(len(group) for group in groups)
    columns = max(1, min(3, len(datasets), int(MAX_WIDTH // plot_width)))
    plots = [(dataset, group) for dataset in datasets for group in groups]
    lines = math.ceil(len(plots) / columns)
    width = min(MAX_WIDTH, max(6.0, columns * plot_width))
    with new_figure(width, ROW_HEIGHT * lines + 1.2) as figure:
        notes = []
        for index, (dataset, group) in enumerate(plots):
            axes = figure.add_subplot(lines, columns, index + 1)
            chosen = [r for r in rows if dataset is None or r["dataset"] == dataset]
            blocks = [start - group.start for start in starts if start in group[1:]]
            shown = [systems[i] for i in group]
            notes.append((axes, _draw_bars(axes, chosen, shown, key, series, blocks=blocks)))
            if dataset is not None:
                axes.set_title(_text(dataset))
        figure.suptitle(_text(FIGURES[name] + f" - set {report['set']}"), fontsize=9)
        handles = [Patch(color=PALETTE[i % len(PALETTE)]) for i in range(len(series))]
        legend_that_fits(figure, handles, series, ncols=min(len(series), 3))
        for axes in figure.axes:
            fit_tick_labels(figure, axes)
        _room_for_notes(figure, notes)
        return figure_bytes(figure, fmt)


def figure_cached(*, evaluation_set, name: str, fmt: str) -> bytes | None:
    """Return figure `name` of the set's report as `fmt` bytes, drawn once per state of the set's
    answers (report_version), or None when the report has nothing to draw in it. Drawn, it is
    stored under the version its report was read at (cache_get_or_build: the report is looked
    up, or built, in the snapshot that version is read in)."""

    def read_key() -> str:
        version = report_version(evaluation_set)
        return f"verbalizer-figure:{DRAWING_VERSION}:{version}:{name}:{fmt}"

    def draw() -> bytes | None:
        report = verbalizer_report_cached(evaluation_set=evaluation_set)
        return render_figure(report, name, fmt) if figure_available(report, name) else None

    return cache_get_or_build(key=read_key(), read_key=read_key, build=draw, timeout=CACHE_SECONDS)
