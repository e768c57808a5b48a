"""The paper's Figures 2-5 drawn from a verbalizer report, with people beside the models.

Each model is drawn on every prompt of the set it answered and, beside the people, once more on
exactly the prompts the people answered ("gpt-4, on people's prompts"), so bars that stand
side by side share their prompts; a dotted line parts the two.

Bars are accuracy under the lenient rule (invalid replies not counted) with 95 % item-bootstrap
intervals; the dashed line is random guessing (50 %); the share of invalid replies is printed
on each bar ("n/a, inv 100%" where no reply was valid). Same matplotlib conventions as
evaluation.figures (Agg canvas, no pyplot, deterministic output).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")

from matplotlib.figure import Figure  # noqa: E402

from evaluation.figures import (  # noqa: E402
    PALETTE,
    RC,
    _text,
    figure_bytes,
    figure_request_check,
)
from evaluation.verbalizer.report import (  # noqa: E402
    FLIPPED_CONDITIONS,
    row_order,
    system_label,
)

FIGURES = {
    "groups": "Figure 2: accuracy under natural, neutral and unnatural instructions",
    "mappings": "Figure 3: accuracy per verbalizer, natural and unnatural",
    "flipped": "Figure 4: golden vs flipped golden, direct and chain of thought",
    "flipped_by_dataset": "Figure 5: golden vs flipped golden per dataset",
}
RULE = "lenient"


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
    legend: bool = True,
    blocks: Sequence[int] = (),
) -> None:
    width = 0.8 / max(len(series), 1)
    values = {(system_label(r["system"], r["prompts"]), r[key]): r for r in rows}
    for s_index, name in enumerate(series):
        labelled = not legend
        for x, system in enumerate(systems):
            row = values.get((system, name))
            if row is None:
                continue
            position = x - 0.4 + width * (s_index + 0.5)
            label = None if labelled else _text(name)
            labelled = True
            color = PALETTE[s_index % len(PALETTE)]
            if row[f"accuracy_{RULE}"] is None:
                # Asked, and no reply valid: a bar of height 0 (it keeps the series in the
                # legend) and a note, not the empty slot of a cell never asked.
                axes.bar(position, 0, width, color=color, label=label)
                axes.text(
                    position, 1, f"n/a, inv {100 * row['invalid']:.0f}%", rotation=90,
                    ha="center", va="bottom", fontsize=6, color="black",
                )  # fmt: skip
                continue
            value = 100 * row[f"accuracy_{RULE}"]
            low, high = row[f"ci_{RULE}"]
            yerr = None
            if low is not None:
                yerr = [[max(value - 100 * low, 0)], [max(100 * high - value, 0)]]
            axes.bar(position, value, width, yerr=yerr, capsize=2, color=color, label=label)
            axes.text(
                position, 1, f"inv {100 * row['invalid']:.0f}%", rotation=90, ha="center",
                va="bottom", fontsize=6, color="white" if value > 25 else "black",
            )  # fmt: skip
    for start in blocks:  # where the bars on people's prompts begin
        axes.axvline(start - 0.5, color="grey", linestyle=":", linewidth=0.8)
    axes.axhline(50, color="black", linestyle="--", linewidth=0.8)
    # "gpt-4, on people's prompts" on two lines: one line ran far below the axis.
    ticks = [_text(s).replace(", on ", ",\non ") for s in systems]
    axes.set_xticks(range(len(systems)), ticks, rotation=30, ha="right")
    axes.set_ylim(0, 105)
    axes.set_ylabel("accuracy (%)")


def figure_available(report: dict, name: str) -> bool:
    return name in FIGURES and any(r[f"accuracy_{RULE}"] is not None for r in report[name])


def render_figure(report: dict, name: str, fmt: str) -> bytes:
    """Draw figure `name` (groups, mappings, flipped, flipped_by_dataset) as SVG, PNG or PDF."""
    figure_request_check(name, fmt, names=FIGURES, available=figure_available(report, name))
    rows = report[name]
    pairs = row_order(rows)
    systems = [system_label(*pair) for pair in pairs]
    blocks = [i for i in range(1, len(pairs)) if pairs[i][1] != pairs[i - 1][1]]
    key, series = _series(name, report, rows)
    with matplotlib.rc_context(RC):
        if name == "flipped_by_dataset":
            datasets = list(dict.fromkeys(r["dataset"] for r in rows))
            columns = min(3, len(datasets))
            lines = math.ceil(len(datasets) / columns)
            figure = Figure(figsize=(3.6 * columns, 3.2 * lines + 0.6), layout="constrained")
            for index, dataset in enumerate(datasets):
                axes = figure.add_subplot(lines, columns, index + 1)
                subset = [r for r in rows if r["dataset"] == dataset]
                _draw_bars(axes, subset, systems, key, series, legend=index == 0, blocks=blocks)
                axes.set_title(_text(dataset))
        else:
            figure = Figure(figsize=(max(6.0, 1.2 * len(systems) * max(1, len(series) / 3)), 4.2),
                            layout="constrained")  # fmt: skip
            axes = figure.add_subplot()
            _draw_bars(axes, rows, systems, key, series, blocks=blocks)
        figure.suptitle(_text(FIGURES[name] + f" - set {report['set']}"), fontsize=9)
        _legend_that_fits(figure, min(len(series), 3))
        return figure_bytes(figure, fmt)


def _legend_that_fits(figure: Figure, ncols: int) -> None:
    """The figure's legend below it, in as many columns (up to `ncols`) as fit its width: long
    series names in three columns ran off both sides of the figure."""
    for columns in range(ncols, 1, -1):
        legend = figure.legend(loc="outside lower center", ncols=columns, frameon=False)
        figure.draw_without_rendering()
        if legend.get_window_extent().width <= figure.bbox.width:
            return
        legend.remove()
    figure.legend(loc="outside lower center", ncols=1, frameon=False)
