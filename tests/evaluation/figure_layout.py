"""Where a drawn figure's text and legend sit, measured by the renderer: for tests that a figure
is readable (no text under the minimum size, no two texts overlapping, legends off the plots)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations
from unittest.mock import patch

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text


@dataclass(frozen=True)
class TextBox:
    """The rectangle a drawn text covers, turned by its rotation (display pixels)."""

    text: str
    centre: tuple[float, float]
    width: float
    height: float
    angle: float  # radians

    def corners(self) -> list[tuple[float, float]]:
        cos, sin = math.cos(self.angle), math.sin(self.angle)
        x, y = self.centre
        return [
            (x + dx * cos - dy * sin, y + dx * sin + dy * cos)
            for dx in (-self.width / 2, self.width / 2)
            for dy in (-self.height / 2, self.height / 2)
        ]

    def overlaps(self, other: TextBox, tolerance: float = 0.5) -> bool:
        """Separating-axis test of two turned rectangles: apart if some edge direction of either
        separates them by more than `tolerance` pixels."""
        for angle in (self.angle, other.angle):
            for axis in ((math.cos(angle), math.sin(angle)), (-math.sin(angle), math.cos(angle))):
                mine = [x * axis[0] + y * axis[1] for x, y in self.corners()]
                theirs = [x * axis[0] + y * axis[1] for x, y in other.corners()]
                if max(mine) - tolerance <= min(theirs) or max(theirs) - tolerance <= min(mine):
                    return False
        return True


def drawn_texts(figure: Figure) -> list[Text]:
    """Draw the figure on an Agg canvas and return the text artists it really drew (a tick label
    outside the axis' range is never drawn), each once, in drawing order."""
    renderer = FigureCanvasAgg(figure).get_renderer()
    drawn: list[Text] = []
    draw = Text.draw

    def record(text, *args, **kwargs):
        if text.get_visible() and text.get_text().strip() and text not in drawn:
            drawn.append(text)
        return draw(text, *args, **kwargs)

    # Text.draw, not the renderer's draw_text: that one is not told which Text a line of a
    # multi-line label belongs to.
    with patch.object(Text, "draw", record):
        figure.draw(renderer)
    return drawn


def text_box(text: Text) -> TextBox:
    renderer = text.figure.canvas.get_renderer()
    turned = text.get_window_extent(renderer)
    rotation = text.get_rotation()
    text.set_rotation(0)
    flat = text.get_window_extent(renderer)  # its unturned size; the centre does not move
    text.set_rotation(rotation)
    return TextBox(
        text.get_text(),
        ((turned.x0 + turned.x1) / 2, (turned.y0 + turned.y1) / 2),
        flat.width,
        flat.height,
        math.radians(rotation),
    )


def overlapping_texts(figure: Figure) -> list[tuple[str, str]]:
    """Every pair of drawn texts of the figure that overlap."""
    boxes = [text_box(text) for text in drawn_texts(figure)]
    return [(a.text, b.text) for a, b in combinations(boxes, 2) if a.overlaps(b)]


def smallest_font(figure: Figure) -> float:
    """The size in points of the smallest drawn text."""
    return min(text.get_fontsize() for text in drawn_texts(figure))


def legends_off_the_plots(figure: Figure) -> list[str]:
    """What is wrong with where the figure's legends are: on a plot, on a text that is not
    theirs, or past the figure's edge."""
    problems = []
    texts = drawn_texts(figure)
    legends = [*figure.legends, *(a.get_legend() for a in figure.axes if a.get_legend())]
    for legend in legends:
        box, page = legend.get_window_extent(), figure.bbox
        if (
            box.x0 < page.x0 - 1
            or box.y0 < page.y0 - 1
            or box.x1 > page.x1 + 1
            or box.y1 > page.y1 + 1
        ):
            problems.append(f"legend {box} runs past the figure {page}")
        for axes in figure.axes:
            if box.overlaps(axes.bbox):
                problems.append(f"legend {box} lies on the plot {axes.bbox}")
        own = [*legend.get_texts(), legend.get_title()]
        for text in texts:
            if text not in own and box.overlaps(text.get_window_extent()):
                problems.append(f"legend {box} lies on the text {text.get_text()!r}")
    return problems


def texts_on_error_bars(figure: Figure) -> list[str]:
    """Every drawn text of a plot that an error bar of its bars crosses: the interval's vertical
    line or a cap (a horizontal tick `capsize` points wide at either end)."""
    crossed = []
    texts = drawn_texts(figure)
    for axes in figure.axes:
        marks = []  # (x0, y0, x1, y1) in display pixels
        for container in axes.containers:
            errorbar = getattr(container, "errorbar", None)
            if errorbar is None:
                continue
            _, caps, whiskers = errorbar.lines
            for collection in whiskers:
                for segment in collection.get_segments():
                    (x0, y0), (x1, y1) = axes.transData.transform(segment)
                    marks.append((x0, min(y0, y1), x1, max(y0, y1)))
            for cap in caps:
                half = cap.get_markersize() / 2 * figure.dpi / 72
                for x, y in axes.transData.transform(cap.get_xydata()):
                    marks.append((x - half, y, x + half, y))
        for text in texts:
            if text.axes is not axes:
                continue
            box = text.get_window_extent()
            if any(
                box.x0 <= x1 and x0 <= box.x1 and box.y0 <= y1 and y0 <= box.y1
                for x0, y0, x1, y1 in marks
            ):
                crossed.append(text.get_text())
    return crossed
