"""Exports of months' tallies as reported (frozen figures for a closed month, with their
drift): CSV rows, one per month and one per breakdown value, and a JSON document. Both
are produced a year of months at a time, so a long range streams in bounded memory.

A month without a tally has its counts empty (null), not zero; a drift is empty for a
month that is not frozen, and zero for a frozen month nothing changed in since.

A count has one name in both (COUNTS): a CSV column and a JSON key; its drift is the CSV's
drift_NAME and the JSON's drift.counts.NAME (drift_runs and drift.runs for the runs)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import date
from typing import Any

from django.conf import settings

from reviewapp.reports.calendar import month_add, month_key
from reviewapp.reports.months import MonthView, month_views
from reviewapp.reports.tally import DIMENSIONS, Counts, Row

# Longest range one export covers.
MAX_MONTHS = 120

# Each count as exported: its name, the CSV's and the JSON's, and its outcome group
# (tally.OUTCOME_GROUPS); the page's columns, and the conflicts and findings without a ticket.
COUNTS = (
    ("resolved_by_rule", "rule"),
    ("explained_by_reviewer", "reviewer"),
    ("explained", "explained"),
    ("closed_unexplained", "closed_unexplained"),
    ("open", "open"),
    ("without_ticket", "untracked"),
    ("unexplained", "unexplained"),
    ("total", "all"),
)

HEADER = (
    "month",
    "time_zone",
    "status",
    "frozen_on",
    "dimension",
    "value",
    "runs",
    "verdict_groups",
    *(name for name, _ in COUNTS),
    "unexplained_change",
    "spike",
    # A frozen month's: today's figures less the frozen ones.
    "drift_runs",
    *(f"drift_{name}" for name, _ in COUNTS),
)


def export_name(first: date, last: date, extension: str) -> str:
    span = month_key(first) if first == last else f"{month_key(first)}_{month_key(last)}"
    return f"crosscheck-tallies-{span}.{extension}"


def exported_months(first: date, last: date) -> Iterator[MonthView]:
    """The months as reported, with their breakdowns, a year at a time."""
    start = first
    while start <= last:
        end = min(last, month_add(start, 11))
        yield from month_views(start, end, breakdowns=True)
        start = month_add(end, 1)


def csv_rows(first: date, last: date) -> Iterator[list[Any]]:
    """HEADER's columns: a row per month ("month", "all"), then one per breakdown value."""
    for view in exported_months(first, last):
        shown = view.shown
        yield _row(
            view,
            "month",
            "all",
            shown.counts if shown.has_tally else None,
            change=shown.change,
            spike=shown.spike,
            drift=None if view.drift is None else view.drift.counts,
            drift_runs=None if view.drift is None else view.drift.runs,
            runs=shown.runs,
            groups=shown.groups if shown.has_tally else None,
        )
        for name, rows in _rows_with_drift(view):
            for row, drift in rows:
                yield _row(
                    view,
                    name,
                    row.label,
                    row.counts,
                    change=row.change,
                    spike=row.spike,
                    drift=drift,
                )


def _rows_with_drift(view: MonthView) -> Iterator[tuple[str, list[tuple[Row, Counts | None]]]]:
    """Each breakdown's rows as reported, with their drift; a frozen month also lists the
    values that appeared since (reported as zero, all drift)."""
    for name in DIMENSIONS:
        rows = (view.shown.breakdowns or {}).get(name, [])
        if view.drift is None:
            yield name, [(row, None) for row in rows]
            continue
        changed = view.drift.rows.get(name, {})
        shown = {row.key for row in rows}
        new = [Row(name, key, Counts(), None) for key in sorted(changed) if key not in shown]
        yield name, [(row, changed.get(row.key, Counts())) for row in [*rows, *new]]


def _row(
    view: MonthView,
    dimension: str,
    value: str,
    counts: Counts | None,
    *,
    change: int | None,
    spike: bool,
    drift: Counts | None,
    drift_runs: int | None = None,
    runs: int | None = None,
    groups: int | None = None,
) -> list[Any]:
    frozen_at = view.status.frozen_at
    figures = [None if counts is None else counts.of(group) for _, group in COUNTS]
    return [
        view.shown.key,
        _time_zone(view),
        "frozen" if frozen_at else "live",
        frozen_at.date() if frozen_at else None,
        dimension,
        value,
        runs,
        groups,
        *figures,
        change,
        spike if counts is not None else None,
        drift_runs,
        *(None if drift is None else drift.of(group) for _, group in COUNTS),
    ]


def _time_zone(view: MonthView) -> str:
    last = view.status.last
    return last.time_zone if view.status.frozen and last is not None else settings.TALLY_TIME_ZONE


def json_chunks(first: date, last: date) -> Iterator[str]:
    """One JSON document, a month at a time."""
    yield '{"time_zone": ' + json.dumps(settings.TALLY_TIME_ZONE) + ', "months": ['
    for index, view in enumerate(exported_months(first, last)):
        yield ("," if index else "") + json.dumps(month_json(view), ensure_ascii=False)
    yield "]}\n"


def _counts_json(counts: Counts) -> dict[str, int]:
    return {name: counts.of(group) for name, group in COUNTS}


def month_json(view: MonthView) -> dict[str, Any]:
    shown, frozen_at = view.shown, view.status.frozen_at
    breakdowns = {
        name: [
            {
                "key": list(row.key),
                "label": row.label,
                "counts": _counts_json(row.counts),
                "unexplained_change": row.change,
                "spike": row.spike,
                **({} if drift is None else {"drift": _counts_json(drift)}),
            }
            for row, drift in rows
        ]
        for name, rows in _rows_with_drift(view)
    }
    return {
        "month": shown.key,
        "time_zone": _time_zone(view),
        "status": "frozen" if frozen_at else "live",
        "frozen_on": frozen_at.isoformat() if frozen_at else None,
        "runs": shown.runs,
        "verdict_groups": shown.groups if shown.has_tally else None,
        "counts": _counts_json(shown.counts) if shown.has_tally else None,
        "unexplained_change": shown.change,
        "spike": shown.spike,
        "drift": None
        if view.drift is None
        else {"runs": view.drift.runs, "counts": _counts_json(view.drift.counts)},
        "breakdowns": breakdowns,
    }
