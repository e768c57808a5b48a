"""Figure 2 of the KIWI paper from a revision report: ratings per system and instruction type
(top) and instruction type by turn position (bottom), as SVG, PNG or PDF.

Same conventions as evaluation.figures: a fresh Figure on the Agg canvas per call, no pyplot,
deterministic output, colour-blind-safe palette.
"""

from __future__ import annotations

import numpy as np
from matplotlib import rc_context
from matplotlib.figure import Figure

from evaluation.figures import PALETTE, RC, _text, figure_bytes, figure_request_check

FIGURES = {
    "ratings": "Rating distribution per system: stylistic, information-seeking and all instructions",
    "positions": "Instruction type by turn position",
}
RATING_COLOURS = {"good": PALETTE[2], "neutral": PALETTE[3], "bad": PALETTE[1]}
# Under each bar, below the system's name (the paper's s / i / o, spelled out).
KIND_LABEL = {"stylistic": "stylistic", "information-seeking": "info-seeking", "all": "all"}


def figure_available(report: dict, name: str) -> bool:
    if name == "ratings":
        return any(row["turns"] for row in report["figure2_ratings"])
    return bool(report["figure2_positions"])


def _ratings(figure: Figure, report: dict) -> None:
    rows = [row for row in report["figure2_ratings"] if row["turns"]]
    axes = figure.add_subplot()
    labels = [f"{_text(row['system'])}\n{KIND_LABEL[row['instruction_type']]}" for row in rows]
    x = np.arange(len(rows))
    bottom = np.zeros(len(rows))
    for rating, colour in RATING_COLOURS.items():
        values = np.array([100 * (row[rating] or 0) for row in rows])
        axes.bar(x, values, bottom=bottom, color=colour, label=rating, width=0.7)
        bottom += values
    axes.set_xticks(x, labels, fontsize="small")
    axes.set_ylabel("% of turns")
    axes.set_ylim(0, 100)
    figure.legend(frameon=False, ncols=3, loc="outside upper center")


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
    with rc_context(RC):
        bars = len(report["figure2_ratings"]) if name == "ratings" else 0
        figure = Figure(figsize=(max(7.0, 1.15 * bars), 4.0), layout="constrained")
        DRAWERS[name](figure, report)
        return figure_bytes(figure, fmt)
