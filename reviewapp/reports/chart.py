"""The tallies chart's geometry: a bar a month, explained stacked under unexplained, in
SVG user units. Drawn by the template as server-side SVG (no script, no library)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from reviewapp.reports.calendar import month_label
from reviewapp.reports.months import MonthView

WIDTH, HEIGHT = 720, 240
LEFT, RIGHT, TOP, BOTTOM = 44, 8, 16, 36


@dataclass(frozen=True)
class Bar:
    view: MonthView
    x: float
    width: float
    # Explained from the baseline up, unexplained on top of it.
    explained_y: float
    explained_height: float
    unexplained_y: float
    unexplained_height: float

    @property
    def label(self) -> str:
        return month_label(self.view.shown.month)

    @property
    def short_label(self) -> str:
        return self.view.shown.month.strftime("%b")

    @property
    def center(self) -> float:
        return self.x + self.width / 2

    @property
    def top(self) -> float:
        return self.unexplained_y


@dataclass(frozen=True)
class Tick:
    value: int
    y: float


@dataclass(frozen=True)
class Chart:
    bars: list[Bar]
    ticks: list[Tick]
    width: int = WIDTH
    height: int = HEIGHT

    @property
    def baseline(self) -> float:
        return self.height - BOTTOM

    @property
    def left(self) -> int:
        return LEFT

    @property
    def right(self) -> int:
        return self.width - RIGHT

    @property
    def label_y(self) -> float:
        return self.baseline + 16

    @property
    def year_y(self) -> float:
        return self.baseline + 30


def _nice_top(largest: int) -> int:
    """The axis' top, at least `largest`: four quarters, each a round number (1, 1.5, 2,
    2.5, 3, 4, 5, 6 or 8 times a power of ten)."""
    quarter = max(math.ceil(largest / 4), 1)
    power = 10 ** int(math.floor(math.log10(quarter)))
    steps = [s * power for s in (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10) if (s * power).is_integer()]
    return 4 * int(next(step for step in steps if step >= quarter))


def stacked_bars(views: list[MonthView]) -> Chart:
    top = _nice_top(max((view.shown.counts.total for view in views), default=0))
    plot_height = HEIGHT - TOP - BOTTOM
    slot = (WIDTH - LEFT - RIGHT) / max(len(views), 1)
    bars = []
    for index, view in enumerate(views):
        counts = view.shown.counts
        explained = plot_height * counts.explained / top
        unexplained = plot_height * counts.unexplained / top
        baseline = HEIGHT - BOTTOM
        bars.append(
            Bar(
                view,
                x=round(LEFT + index * slot + slot * 0.15, 1),
                width=round(slot * 0.7, 1),
                explained_y=round(baseline - explained, 1),
                explained_height=round(explained, 1),
                unexplained_y=round(baseline - explained - unexplained, 1),
                unexplained_height=round(unexplained, 1),
            )
        )
    ticks = [
        Tick(value=top * part // 4, y=round(HEIGHT - BOTTOM - plot_height * part / 4, 1))
        for part in range(5)
    ]
    return Chart(bars, ticks)
