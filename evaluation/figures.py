"""Draw the report's figures (the paper's Figures 3, 4 and 9, position bias, the leaderboard).

Figure 4 ("domains") is drawn as the paper draws it: the Hard set only, one spoke per principal
domain (the part of a category before ':'); DRFR per full category stays a table ("domains").

Every call builds its own `matplotlib.figure.Figure` on the Agg canvas (`new_figure`): nothing
goes through pyplot, so no figure or state outlives a call. Output is deterministic where
matplotlib allows (fixed SVG id salt, no dates in the metadata), and SVG keeps text as text so a
page that inlines it stays small and its names stay searchable. matplotlib is imported by the
first figure a process draws, not with this module, which the URLconf and the report commands
import: importing it cost about 0.7 s of CPU at every process start, figures drawn or not
(tests/config/test_startup_imports.py keeps it out).

Every report's figures keep to one size rule, so that a page shows them at full size and a paper
scales them down only a little: at most `MAX_WIDTH` inches wide (a wide bar chart wraps its
systems into rows instead of growing), no text under `MIN_FONT_SIZE` points, tick labels turned
only as far as they must be not to overlap (`fit_tick_labels`), legends beside the plot, never
on it.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from itertools import pairwise
from typing import TYPE_CHECKING

import numpy as np

from evaluation.errors import ReportError

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

FIGURES: dict[str, str] = {
    "leaderboard": "DRFR per system and subset, with 95% bootstrap intervals",
    "constraints": "DRFR per constraint type",
    "domains": "DRFR per principal domain of the Hard set",
    "disagreement": "Distribution of disagreement levels",
    "positions": "DRFR by display position (position bias)",
}
# The report table each figure draws, when it is not the table of the figure's name.
FIGURE_TABLES = {"domains": "hard_domains"}  # paper Figure 4: Hard set, principal domains
FORMATS = ("svg", "png", "pdf")
PREFERRED_SOURCES = ("expert-majority", "crowd-majority")
SUBSET_ORDER = ("easy", "hard", "overall")
CONSTRAINT_ORDER = ("Content", "Linguistic", "Style", "Format", "Number")
# Okabe & Ito's palette, told apart with every kind of colour blindness; then line styles.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#E69F00", "#CC79A7", "#56B4E9", "#000000")
LINE_STYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
PNG_DPI = 150
# 10 inches is 960 CSS pixels: the report pages' column holds that at full size in a 1280-pixel
# window, and a paper's 7-inch text width shrinks it by at most a third.
MAX_WIDTH = 10.0
AXIS_MARGIN = 0.8  # inches a plot needs beside its bars: the y axis and its label
MIN_FONT_SIZE = 7
RC = {
    "svg.hashsalt": "infobench-report",
    "svg.fonttype": "none",
    "pdf.fonttype": 42,
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
}
METADATA = {
    "svg": {"Date": None},
    "pdf": {"CreationDate": None, "ModDate": None},
    "png": {"Software": None},
}


def figure_table(name: str) -> str:
    """Return the report table the figure draws (with the report's `systems`, nothing else): a
    figure needs only that table computed (report_cached's `tables`)."""
    _check_name(name)
    return FIGURE_TABLES.get(name, name)


def figure_available(report: dict, name: str) -> bool:
    """Return whether the report has the data the figure needs."""
    table = figure_table(name)
    if name == "disagreement":
        return any(row["questions"] for row in report.get(table) or [])
    return any(row.get("drfr") is not None for row in report.get(table) or [])


def render_figure(report: dict, name: str, fmt: str, *, source: str | None = None) -> bytes:
    """Draw one figure of the report and return it as SVG, PNG or PDF bytes.

    `source` picks the label source of the leaderboard and radar figures; by default the expert
    majority, else the crowd majority, else the first source the report lists.
    """
    figure_request_check(name, fmt, names=FIGURES, available=figure_available(report, name))
    with new_figure(7.0, 4.8) as figure:
        DRAWERS[name](figure, report, source)
        return figure_bytes(figure, fmt)


@contextmanager
def new_figure(width: float, height: float) -> Iterator[Figure]:
    """Make an empty figure of the size in inches, laid out by matplotlib's constrained layout,
    under the `RC` settings until the block ends (draw and save it inside the block).

    matplotlib is imported here, on the first figure a process draws (see the module's
    docstring); Agg is its back-end should anything ever go through pyplot.
    """
    import matplotlib
    from matplotlib.figure import Figure

    matplotlib.use("Agg")
    with matplotlib.rc_context(RC):
        yield Figure(figsize=(width, height), layout="constrained")


def figure_request_check(name: str, fmt: str, *, names, available: bool) -> None:
    """Refuse a figure request (ValueError with a message a person can act on): an unknown
    figure name or format, or a figure the report has no data for. Every report's figures."""
    if name not in names:
        raise ValueError(f"unknown figure {name!r}: expected one of {', '.join(names)}")
    if fmt not in FORMATS:
        raise ValueError(f"unknown figure format {fmt!r}: expected one of {', '.join(FORMATS)}")
    if not available:
        raise ValueError(f"the report has no data for the {name} figure")


def figure_bytes(figure: Figure, fmt: str) -> bytes:
    """Return the drawn figure as SVG, PNG or PDF bytes, with the app's fixed metadata."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(figure)
    output = io.BytesIO()
    figure.savefig(output, format=fmt, dpi=PNG_DPI, metadata=METADATA[fmt])
    return output.getvalue()


def _check_name(name: str) -> None:
    if name not in FIGURES:
        raise ValueError(f"unknown figure {name!r}: expected one of {', '.join(FIGURES)}")


def _text(value: object) -> str:
    """Return user text that matplotlib shows as written: a `$` would start mathtext."""
    return str(value).replace("$", r"\$")


def _in_order(values: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(values))


def _pick_source(rows: list[dict], source: str | None) -> str:
    present = _in_order([row["source"] for row in rows if row.get("drfr") is not None])
    if source is not None:
        if source not in present:
            raise ReportError(f"The report has no data for the label source {source!r}.")
        return source
    return next((s for s in PREFERRED_SOURCES if s in present), present[0])


def _percent(value: float | None) -> float:
    return np.nan if value is None else 100 * value


def _style(index: int) -> dict:
    return {
        "color": PALETTE[index % len(PALETTE)],
        "linestyle": LINE_STYLES[(index // len(PALETTE)) % len(LINE_STYLES)],
        "marker": MARKERS[index % len(MARKERS)],
    }


def legend_that_fits(
    figure: Figure,
    handles: Sequence,
    labels: Sequence[str],
    *,
    ncols: int,
    loc: str = "outside lower center",
) -> None:
    """Put the figure's legend outside the plot (below it by default), in as many columns (up to
    `ncols`) as fit the figure's width: long names in three columns ran off both sides.

    Labels are passed explicitly: a name starting with "_" would otherwise be left out.
    """
    texts = [_text(label) for label in labels]
    for columns in range(max(ncols, 1), 1, -1):
        legend = figure.legend(handles, texts, loc=loc, ncols=columns, frameon=False)
        figure.draw_without_rendering()
        if legend.get_window_extent().width <= figure.bbox.width:
            return
        legend.remove()
    figure.legend(handles, texts, loc=loc, ncols=1, frameon=False)


def ink_on(colour: str) -> str:
    """Return black or white, whichever reads better on `colour` (the higher WCAG contrast):
    white on the palette's orange and sky blue was hard to read."""
    from matplotlib.colors import to_rgb

    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in to_rgb(colour)]
    luminance = 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]
    return "white" if 1.05 / (luminance + 0.05) > (luminance + 0.05) / 0.05 else "black"


def rows_of_plots(count: int, per_item: float) -> list[range]:
    """Split `count` systems of `per_item` inches each into as few rows of plots as keep each
    row within MAX_WIDTH (beside AXIS_MARGIN), the rows as even as can be."""
    fit = max(1, int((MAX_WIDTH - AXIS_MARGIN) // per_item))
    lines = math.ceil(count / fit)
    size = math.ceil(count / lines)
    return [range(start, min(start + size, count)) for start in range(0, count, size)]


def fit_tick_labels(figure: Figure, axes: Axes) -> None:
    """Leave the x tick labels flat when they fit side by side, else turn them 30 degrees (or 90
    when even that is too tight), each ending at its tick, so that no two overlap: long system
    names ran into each other."""
    figure.draw_without_rendering()
    labels = [label for label in axes.get_xticklabels() if label.get_text()]
    if len(labels) < 2:
        return
    ticks = sorted(axes.transData.transform([(x, 0) for x in axes.get_xticks()])[:, 0])
    gap = min(b - a for a, b in pairwise(ticks))
    boxes = [label.get_window_extent() for label in labels]
    room = 1.15  # constrained layout narrows the plot a little once the labels turn
    if all(room * (a.width + b.width) / 2 <= gap for a, b in pairwise(boxes)):
        return
    height = max(box.height for box in boxes)
    angle = 30 if room * height <= gap * math.sin(math.radians(30)) else 90
    for label in labels:
        label.set(rotation=angle, horizontalalignment="right", verticalalignment="center")
        label.set_rotation_mode("anchor")


# --- Radar charts (paper Figures 3 and 4) --------------------------------------------------------


def _draw_radar(figure: Figure, report: dict, source: str | None, *, name: str, axis: str) -> None:
    rows = report[figure_table(name)]
    chosen = _pick_source(rows, source)
    rows = [row for row in rows if row["source"] == chosen]
    categories = _in_order([row[axis] for row in rows])
    if axis == "constraint":
        categories.sort(key=lambda c: CONSTRAINT_ORDER.index(c) if c in CONSTRAINT_ORDER else 99)
    systems = [s for s in report["systems"] if any(row["system"] == s for row in rows)]
    systems += _in_order([row["system"] for row in rows if row["system"] not in systems])
    values = {(row["system"], row[axis]): row["drfr"] for row in rows}
    angles = np.linspace(0, 2 * np.pi, len(categories), endpoint=False)
    closed = np.append(angles, angles[0])
    axes = figure.add_subplot(projection="polar")
    handles = []
    for index, system in enumerate(systems):
        radii = [_percent(values.get((system, category))) for category in categories]
        radii.append(radii[0])
        (line,) = axes.plot(closed, radii, linewidth=1.5, markersize=4, **_style(index))
        if not np.isnan(radii).any():
            axes.fill(closed, radii, color=line.get_color(), alpha=0.08)
        handles.append(line)
    axes.set_xticks(angles, [_text(c) for c in categories])
    axes.set_ylim(0, 100)
    axes.set_yticks([20, 40, 60, 80, 100], ["20%", "40%", "60%", "80%", "100%"], fontsize=7)
    axes.set_theta_offset(np.pi / 2)  # the first category at the top, as in the paper
    axes.set_theta_direction(-1)
    axes.set_rlabel_position(180 / max(len(categories), 1))  # between the first two spokes
    axes.tick_params(axis="x", pad=6)
    _spoke_labels_outward(axes, angles)
    figure.suptitle(_text(f"{FIGURES[name]}, radius DRFR (%) (labels: {chosen})"))
    legend_that_fits(figure, handles, systems, ncols=3)


def _spoke_labels_outward(axes: Axes, angles: np.ndarray) -> None:
    """Align each spoke's name away from the circle: a name centred on its spoke ran into the
    circle and the lines on it ("Engineering and Technology" on the paper's Figure 4)."""
    for label, angle in zip(axes.get_xticklabels(), angles, strict=True):
        across, up = np.sin(angle), np.cos(angle)  # clockwise from the top
        label.set_horizontalalignment(
            "left" if across > 0.01 else "right" if across < -0.01 else "center"
        )
        label.set_verticalalignment("bottom" if up > 0.01 else "top" if up < -0.01 else "center")


def _draw_constraints(figure: Figure, report: dict, source: str | None) -> None:
    _draw_radar(figure, report, source, name="constraints", axis="constraint")


def _draw_domains(figure: Figure, report: dict, source: str | None) -> None:
    _draw_radar(figure, report, source, name="domains", axis="domain")


# --- Bar charts ----------------------------------------------------------------------------------


def _grouped_bars(
    axes: Axes,
    groups: list[str],
    series: list[str],
    heights: Callable[[str], list[float]],
    errors: Callable[[str], np.ndarray] | None = None,
) -> list:
    """Draw one bar per (group, series), series side by side within each group."""
    width = 0.8 / max(len(series), 1)
    positions = np.arange(len(groups))
    containers = []
    for index, name in enumerate(series):
        offset = (index - (len(series) - 1) / 2) * width
        bars = axes.bar(
            positions + offset,
            heights(name),
            width,
            color=PALETTE[index % len(PALETTE)],
            yerr=errors(name) if errors else None,
            capsize=3 if errors else 0,
            error_kw={"elinewidth": 1, "ecolor": "#333333"},
        )
        containers.append(bars)
    axes.set_xticks(positions, [_text(g) for g in groups])
    return containers


def _draw_leaderboard(figure: Figure, report: dict, source: str | None) -> None:
    rows = report["leaderboard"]
    chosen = _pick_source(rows, source)
    rows = {(r["system"], r["subset"]): r for r in rows if r["source"] == chosen}
    systems = [s for s in report["systems"] if any(key[0] == s for key in rows)]
    systems += _in_order([system for system, _ in rows if system not in systems])
    subsets = [s for s in SUBSET_ORDER if any(key[1] == s for key in rows)]

    def heights(subset: str) -> list[float]:
        return [_percent((rows.get((s, subset)) or {}).get("drfr")) for s in systems]

    def errors(subset: str) -> np.ndarray:
        below, above = [], []
        for system in systems:
            row = rows.get((system, subset)) or {}
            drfr, low, high = (_percent(row.get(k)) for k in ("drfr", "ci_low", "ci_high"))
            below.append(max(drfr - low, 0.0))  # nan stays nan: no error bar drawn
            above.append(max(high - drfr, 0.0))
        return np.array([below, above])

    axes = figure.add_subplot()
    containers = _grouped_bars(axes, systems, subsets, heights, errors)
    axes.set_ylim(0, 105)
    axes.set_xlabel("System")
    axes.set_ylabel("DRFR (%)")
    figure.suptitle(_text(f"{FIGURES['leaderboard']} (labels: {chosen})"))
    # Below the plot: inside it, the legend sat on the intervals that reach 100%.
    labels = [f"{s} set" if s != "overall" else s for s in subsets]
    legend_that_fits(figure, containers, labels, ncols=3)
    fit_tick_labels(figure, axes)


def _draw_positions(figure: Figure, report: dict, source: str | None) -> None:
    rows = {(r["kind"], r["position"]): r for r in report["positions"]}
    kinds = _in_order([kind for kind, _ in rows])
    positions = sorted(_in_order([position for _, position in rows]), key=lambda p: (len(p), p))

    def heights(kind: str) -> list[float]:
        return [_percent((rows.get((kind, p)) or {}).get("drfr")) for p in positions]

    axes = figure.add_subplot()
    containers = _grouped_bars(axes, [f"System {p}" for p in positions], kinds, heights)
    for container in containers:
        axes.bar_label(container, fmt="%.1f", fontsize=MIN_FONT_SIZE, padding=2)
    axes.set_ylim(0, 108)  # room for the value over a bar of 100%
    axes.set_yticks(range(0, 101, 20))
    axes.set_xlabel("Position at which the response was shown")
    axes.set_ylabel("DRFR (%)")
    figure.suptitle(FIGURES["positions"])
    labels = [f"{kind} annotators" for kind in kinds]
    legend_that_fits(figure, containers, labels, ncols=len(kinds))
    fit_tick_labels(figure, axes)


def _draw_disagreement(figure: Figure, report: dict, source: str | None) -> None:
    rows = report["disagreement"]
    groups = [g for g in _in_order([r["group"] for r in rows]) if _total(rows, g)]
    levels = list(range(max(r["level"] for r in rows) + 1))
    counts = {(r["group"], r["level"]): r["questions"] for r in rows}

    def heights(group: str) -> list[float]:
        total = _total(rows, group)
        return [100 * counts.get((group, level), 0) / total for level in levels]

    axes = figure.add_subplot()
    containers = _grouped_bars(axes, [str(level) for level in levels], groups, heights)
    for container in containers:
        axes.bar_label(container, fmt="%.1f", fontsize=MIN_FONT_SIZE, padding=2)
    axes.set_xlabel("Disagreement level (number of systems whose output the annotators split on)")
    axes.set_ylabel("Questions (%)")
    axes.set_ylim(0, 108)
    figure.suptitle(FIGURES["disagreement"])
    labels = [f"{group} annotators ({_total(rows, group)} questions)" for group in groups]
    # Below the plot: matplotlib's "best" place inside it still covered a bar.
    legend_that_fits(figure, containers, labels, ncols=len(groups))


def _total(rows: list[dict], group: str) -> int:
    return sum(row["questions"] for row in rows if row["group"] == group)


DRAWERS: dict[str, Callable[[Figure, dict, str | None], None]] = {
    "leaderboard": _draw_leaderboard,
    "constraints": _draw_constraints,
    "domains": _draw_domains,
    "disagreement": _draw_disagreement,
    "positions": _draw_positions,
}
