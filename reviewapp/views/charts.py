"""Bar charts drawn on the server as SVG (templates/shadow/_chart.html): no script, no
inline style (the content security policy allows neither), colours from static/css
classes. Each bar is a link: a day's count drills down to that day's runs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date

WIDTH, HEIGHT = 760, 170
LEFT, BOTTOM, TOP = 36, 22, 8


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    css: str
    title: str
    href: str


@dataclass(frozen=True)
class Label:
    x: float
    y: float
    text: str


@dataclass
class Chart:
    title: str
    width: int = WIDTH
    height: int = HEIGHT
    bars: list[Bar] = field(default_factory=list)
    labels: list[Label] = field(default_factory=list)
    grid: list[Label] = field(default_factory=list)  # y of a grid line, and its value
    legend: list[tuple[str, str]] = field(default_factory=list)  # (css class, name)
    empty: bool = True

    @property
    def left(self) -> int:
        return LEFT

    @property
    def right(self) -> int:
        return self.width


def day_chart(
    title: str,
    days: Sequence[tuple[date, Sequence[int]]],
    series: Sequence[tuple[str, str]],
    href: Callable[[date, int], str],
) -> Chart:
    """Bars per day, one per series (css class, name) side by side; `href(day, series)`
    is where a bar leads."""
    chart = Chart(title=title, legend=list(series))
    top = max((value for _, values in days for value in values), default=0)
    chart.empty = top == 0
    scale = (HEIGHT - BOTTOM - TOP) / (top or 1)
    slot = (WIDTH - LEFT) / max(1, len(days))
    bar_width = max(1.0, (slot * 0.8) / max(1, len(series)))
    for line in sorted({top, top // 2} - {0}):
        chart.grid.append(Label(LEFT, round(HEIGHT - BOTTOM - line * scale, 1), str(line)))
    every = max(1, round(len(days) / 8))
    for i, (day, values) in enumerate(days):
        start = LEFT + i * slot + slot * 0.1
        for j, ((css, name), value) in enumerate(zip(series, values, strict=True)):
            if not value:
                continue
            height = max(1.0, value * scale)
            chart.bars.append(
                Bar(
                    x=round(start + j * bar_width, 1),
                    y=round(HEIGHT - BOTTOM - height, 1),
                    width=round(bar_width, 1),
                    height=round(height, 1),
                    css=css,
                    title=f"{day:%a %d %b}: {value} {name}",
                    href=href(day, j),
                )
            )
        if i % every == 0:
            chart.labels.append(
                Label(round(LEFT + i * slot + slot / 2, 1), HEIGHT - 6, f"{day:%d %b}")
            )
    return chart
