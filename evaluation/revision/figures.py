"""Figure 2 of the KIWI paper from a revision report: ratings per system and instruction type
(top) and instruction type by turn position (bottom), as SVG, PNG or PDF.

Same conventions as evaluation.figures: a fresh Figure on the Agg canvas per call, no pyplot,
deterministic output, colour-blind-safe palette, and the same size rule: the ratings give each bar
a fixed width, and systems that would make the figure wider than `MAX_WIDTH` go on further rows
(seven systems' 21 bars made it 24 inches wide, a third of its size on the page).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from annotate.revision.models import Study
from evaluation.caching import cache_get_or_build, computation_version
from evaluation.figures import (
    AXIS_MARGIN,
    MAX_WIDTH,
    PALETTE,
    _text,
    figure_bytes,
    figure_request_check,
    fit_tick_labels,
    new_figure,
    rows_of_plots,
)
from evaluation.revision.report_data import figure_fingerprint
from evaluation.revision.reports import revision_report_build

if TYPE_CHECKING:
    from matplotlib.figure import Figure

FIGURES = {
    "ratings": "Rating distribution per system: stylistic, information-seeking and all instructions",
    "positions": "Instruction type by turn position",
}
RATING_COLOURS = {"good": PALETTE[2], "neutral": PALETTE[3], "bad": PALETTE[1]}
# Under each bar, below the system's name (the paper's s / i / o, spelled out).
KIND_LABEL = {"stylistic": "stylistic", "information-seeking": "info-seeking", "all": "all"}
CACHE_SECONDS = 3600
# Part of a drawn figure's cache key: raise it when the drawing changes, so no figure drawn by
# the old code is served from the cache.
DRAWING_VERSION = 1
BAR_WIDTH = 0.95  # inches: room for "info-seeking" and a model's name under each bar
ROW_HEIGHT = 3.2


def figure_available(report: dict, name: str) -> bool:
    """Whether the figure has a bar to draw. The positions' bars are type shares: turns without
    an instruction type (only an import leaves them so) leave their shares undefined, so a study
    of such turns alone has nothing to draw there, only empty axes."""
    if name == "ratings":
        return any(row["turns"] for row in report["figure2_ratings"])
    return any(row["information_seeking"] is not None for row in report["figure2_positions"])


def _ratings(figure: Figure, report: dict) -> None:
    lines = _ratings_lines(report)
    for index, rows in enumerate(lines):
        axes = figure.add_subplot(len(lines), 1, index + 1)
        labels = [f"{_text(row['system'])}\n{KIND_LABEL[row['instruction_type']]}" for row in rows]
        x = np.arange(len(rows))
        bottom = np.zeros(len(rows))
        for rating, colour in RATING_COLOURS.items():
            values = np.array([100 * (row[rating] or 0) for row in rows])
            axes.bar(x, values, bottom=bottom, color=colour, label=rating, width=0.7)
            bottom += values
        axes.set_xticks(x, labels, fontsize="small")
        axes.set_xlim(-0.5, max(len(line) for line in lines) - 0.5)  # bars as wide on every row
        axes.set_ylabel("% of turns")
        axes.set_ylim(0, 100)
    figure.legend(
        *figure.axes[0].get_legend_handles_labels(), frameon=False, ncols=3,
        loc="outside upper center",
    )  # fmt: skip
    for axes in figure.axes:
        fit_tick_labels(figure, axes)


def _ratings_lines(report: dict) -> list[list[dict]]:
    """The ratings' bars in rows of whole systems, each row within MAX_WIDTH, as even as can be."""
    rows = [row for row in report["figure2_ratings"] if row["turns"]]
    systems = list(dict.fromkeys(row["system"] for row in rows))
    bars = max(sum(row["system"] == system for row in rows) for system in systems)
    lines = rows_of_plots(len(systems), BAR_WIDTH * bars)
    groups = [[systems[i] for i in line] for line in lines]
    return [[row for row in rows if row["system"] in group] for group in groups]


def _positions(figure: Figure, report: dict) -> None:
    rows = report["figure2_positions"]
    axes = figure.add_subplot()
    x = np.array([row["position"] for row in rows])
    info = np.array([100 * (row["information_seeking"] or 0) for row in rows])
    style = np.array([100 * (row["stylistic"] or 0) for row in rows])
    axes.bar(x, info, color=PALETTE[0], label="information-seeking", width=0.7)
    axes.bar(x, style, bottom=info, color=PALETTE[4], label="stylistic", width=0.7)
    axes.set_xticks(x)
    axes.set_xlabel("turn")
    axes.set_ylabel("% of instructions")
    axes.set_ylim(0, 100)
    figure.legend(frameon=False, ncols=2, loc="outside upper center")  # never over a bar


DRAWERS = {"ratings": _ratings, "positions": _positions}


def render_revision_figure(report: dict, name: str, fmt: str) -> bytes:
    """Draw one figure of the revision report and return its bytes in the format."""
    figure_request_check(name, fmt, names=FIGURES, available=figure_available(report, name))
    width, height = 7.0, 4.0
    if name == "ratings":
        lines = _ratings_lines(report)
        bars = max(len(rows) for rows in lines)
        width = min(MAX_WIDTH, max(width, AXIS_MARGIN + BAR_WIDTH * bars))
        height = ROW_HEIGHT * len(lines) + 0.8
    with new_figure(width, height) as figure:
        DRAWERS[name](figure, report)
        return figure_bytes(figure, fmt)


def revision_figure_cached(*, study: Study, name: str, fmt: str) -> bytes | None:
    """Return figure `name` of the study's report as `fmt` bytes, drawn once per state of its rated
    turns (figure_fingerprint), or None when the report has nothing to draw in it. Drawn, it is
    stored under the fingerprint read in the snapshot of its report's reads
    (cache_get_or_build)."""

    def draw() -> bytes | None:
        report = revision_report_build(study=study)
        return render_revision_figure(report, name, fmt) if figure_available(report, name) else None

    def read_key() -> str:
        fingerprint = figure_fingerprint(study=study)
        return (
            f"revision-figure:{DRAWING_VERSION}:{computation_version()}:{fingerprint}:{name}:{fmt}"
        )

    return cache_get_or_build(key=read_key(), read_key=read_key, build=draw, timeout=CACHE_SECONDS)
