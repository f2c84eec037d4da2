"""What the active policy blocked: blocked actions (judging.blocking: unsafe verdicts, and
the calls that break a trajectory check) of each run's current judgement, counted per day,
per ISO week and by action, field, source pair, agent and reason, over a window of the
runs' own days (Run.started_at: when the run started, ingest.runs). Each count drills
down to its runs and their tickets.

Counted in SQL over the stored verdicts and findings: one statement for every count of a
page, three for a page of drill-down (how many, and a page's runs with their items)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from django.db import connection

from reviewapp.infra.days import Window
from reviewapp.judging.blocking import (
    DIMENSIONS,
    ItemFilter,
    RunItems,
    RunsFound,
    blocked_items_sql,
)
from reviewapp.models import Judgement, Run, Ticket
from reviewapp.review.opening import ticket_key

RUNS, JUDGEMENTS = Run._meta.db_table, Judgement._meta.db_table


@dataclass
class BlockedCounts:
    """What the active policy blocked in a window."""

    window: Window
    total: int = 0  # blocked actions
    runs: int = 0  # runs with at least one
    judged: int = 0  # runs judged in the window
    versions: list[tuple[int, int]] = field(default_factory=list)  # (policy number, runs)
    by_day: list[tuple[date, int]] = field(default_factory=list)
    by_week: list[tuple[date, int]] = field(default_factory=list)
    by: dict[str, list[tuple[str, int]]] = field(default_factory=dict)

    def rows(self) -> list[tuple[str, str, int]]:
        """(grouping, value, count) for exports: day, week, then each dimension."""
        rows = [("all", "", self.total), ("runs", "", self.runs), ("runs judged", "", self.judged)]
        rows += [("day", day.isoformat(), n) for day, n in self.by_day]
        rows += [("week", week.isoformat(), n) for week, n in self.by_week]
        rows += [(name, value, n) for name in DIMENSIONS for value, n in self.by[name]]
        return rows


def _with_items(window: Window) -> tuple[str, list[Any]]:
    """The WITH clause of every blocked item of current judgements of runs in the window
    (items: judgement_id, run_pk, agent, started_at, then the item columns)."""
    sql = (
        "WITH sel AS (SELECT j.id AS judgement_id, r.id AS run_pk, r.agent AS agent, "
        f"r.started_at AS started_at FROM {RUNS} r JOIN {JUDGEMENTS} j "
        "ON j.id = r.current_judgement_id WHERE r.started_at >= %s AND r.started_at < %s "
        "AND (j.unsafe_count > 0 OR j.finding_count > 0)), "
        f"items AS ({blocked_items_sql('sel', ('agent', 'started_at'))}) "
    )
    return sql, [window.start, window.end]


def blocked_counts(window: Window) -> BlockedCounts:
    """Every count of the window, in one statement."""
    with_items, params = _with_items(window)
    groupings = [
        ("day", "CAST((started_at AT TIME ZONE 'UTC')::date AS TEXT)"),
        ("week", "CAST(date_trunc('week', started_at AT TIME ZONE 'UTC')::date AS TEXT)"),
        *((name, name) for name in DIMENSIONS),
    ]
    selects = [
        f"SELECT '{name}' AS grouping, {expression} AS value, count(*) AS n "
        f"FROM items GROUP BY {expression}"
        for name, expression in groupings
    ]
    selects.append("SELECT 'runs', '', count(DISTINCT run_pk) FROM items")
    selects.append(
        f"SELECT 'version', CAST(j.policy_number AS TEXT), count(*) FROM {RUNS} r "
        f"JOIN {JUDGEMENTS} j ON j.id = r.current_judgement_id "
        "WHERE r.started_at >= %s AND r.started_at < %s GROUP BY j.policy_number"
    )
    with connection.cursor() as cursor:
        cursor.execute(with_items + " UNION ALL ".join(selects), [*params, *params])
        found: dict[str, dict[str, int]] = defaultdict(dict)
        for grouping, value, count in cursor.fetchall():
            found[grouping][value if value is not None else ""] = int(count)
    by_day = {date.fromisoformat(day): n for day, n in found["day"].items()}
    by_week = {date.fromisoformat(week): n for week, n in found["week"].items()}
    return BlockedCounts(
        window=window,
        total=sum(by_day.values()),
        runs=found["runs"].get("", 0),
        judged=sum(found["version"].values()),
        versions=sorted((int(number), n) for number, n in found["version"].items()),
        by_day=[(day, by_day.get(day, 0)) for day in window.days],
        by_week=[(week, by_week.get(week, 0)) for week in window.weeks],
        by={
            name: sorted(found[name].items(), key=lambda pair: (-pair[1], pair[0]))
            for name in DIMENSIONS
        },
    )


def blocked_runs(window: Window, item_filter: ItemFilter) -> RunsFound:
    """The runs behind a count, newest first, with the blocked items that match (read as
    they are paged through)."""
    with_items, params = _with_items(window)
    where, where_params = item_filter.where(window)
    return RunsFound(with_items, params, where, where_params)


def tickets_attach(runs: Iterable[RunItems]) -> None:
    """Name, on each item, the ticket its run has for it (if any): the run's ticket for the
    conflict (run, entity, field) or the finding kind, whichever judgement opened it."""
    runs = list(runs)
    wanted: dict[tuple[int, str], list[Any]] = defaultdict(list)
    for run in runs:
        for item in run.items:
            wanted[(run.pk, ticket_key(*item.ticket_parts))].append(item)
    if not wanted:
        return
    tickets = Ticket.objects.filter(run_id__in={run.pk for run in runs}).values_list(
        "run_id", "key", "pk"
    )
    for run_pk, key, pk in tickets:
        for item in wanted.get((run_pk, key), ()):
            item.ticket_id = pk
