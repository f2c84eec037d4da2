"""A candidate in shadow, side by side with the active version: for each run judged under
both up to the same record, its blocked actions (judging.blocking) under each, matched by
identity. Blocked under the candidate only: it would newly block; under the active one
only: it would unblock; under both: unchanged. Counted per day, week and action, over the
runs' own days, in one SQL statement; each count drills down to its runs."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from django.db import connection

from reviewapp.infra.days import Window
from reviewapp.judging.blocking import ItemFilter, RunsFound, blocked_items_sql
from reviewapp.judging.store import SHADOW
from reviewapp.models import Judgement, Run, ShadowDesignation

NEW, UNBLOCKED, UNCHANGED = "new", "unblocked", "unchanged"
STATUSES = (NEW, UNBLOCKED, UNCHANGED)
RUNS, JUDGEMENTS = Run._meta.db_table, Judgement._meta.db_table
FAR_FUTURE = datetime(9999, 1, 1, tzinfo=UTC)


@dataclass
class Counts:
    new: int = 0
    unblocked: int = 0
    unchanged: int = 0

    @property
    def candidate(self) -> int:
        """Blocked under the candidate."""
        return self.new + self.unchanged

    @property
    def active(self) -> int:
        """Blocked under the active version."""
        return self.unblocked + self.unchanged


@dataclass
class Comparison:
    window: Window
    total: Counts = field(default_factory=Counts)
    runs_compared: int = 0
    runs_pending: int = 0
    by_day: list[tuple[date, Counts]] = field(default_factory=list)
    by_week: list[tuple[date, Counts]] = field(default_factory=list)
    by_action: list[tuple[str, Counts]] = field(default_factory=list)

    def rows(self) -> list[tuple[str, str, int, int, int]]:
        """(grouping, value, new, unblocked, unchanged) for exports."""
        rows = [("all", "", self.total.new, self.total.unblocked, self.total.unchanged)]
        for grouping, series in (("day", self.by_day), ("week", self.by_week)):
            rows += [(grouping, d.isoformat(), c.new, c.unblocked, c.unchanged) for d, c in series]
        rows += [("action", a, c.new, c.unblocked, c.unchanged) for a, c in self.by_action]
        return rows


def _with_items(candidate_id: int, window: Window) -> tuple[str, list[Any]]:
    """WITH pairs (runs of the window judged under both, up to the same record) and items
    (each blocked item of either, once, with its status)."""
    passed = ("agent", "started_at")
    sql = (
        "WITH pairs AS (SELECT r.id AS run_pk, r.agent AS agent, r.started_at AS started_at, "
        "a.id AS a_id, s.id AS s_id, a.unsafe_count + a.finding_count AS a_n, "
        f"s.unsafe_count + s.finding_count AS s_n FROM {RUNS} r "
        f"JOIN {JUDGEMENTS} a ON a.id = r.current_judgement_id "
        f"JOIN {JUDGEMENTS} s ON s.run_id = r.id AND s.purpose = '{SHADOW}' "
        "AND s.candidate_id = %s AND s.through_record_id = a.through_record_id "
        "WHERE r.started_at >= %s AND r.started_at < %s), "
        "sel_a AS (SELECT a_id AS judgement_id, run_pk, agent, started_at FROM pairs "
        "WHERE a_n > 0), "
        "sel_s AS (SELECT s_id AS judgement_id, run_pk, agent, started_at FROM pairs "
        "WHERE s_n > 0), "
        "sides AS ("
        f"SELECT 'a' AS side, x.* FROM ({blocked_items_sql('sel_a', passed)}) x "
        f"UNION ALL SELECT 's', y.* FROM ({blocked_items_sql('sel_s', passed)}) y), "
        "keyed AS (SELECT sides.*, CASE WHEN kind = 'finding' THEN reason ELSE '' END "
        "AS finding_kind FROM sides), "
        "items AS (SELECT run_pk, max(agent) AS agent, max(started_at) AS started_at, "
        "kind, entity, field, action, call, "
        "COALESCE(max(CASE WHEN side = 's' THEN ref_id END), max(ref_id)) AS ref_id, "
        "COALESCE(max(CASE WHEN side = 's' THEN reason END), max(reason)) AS reason, "
        "max(sources) AS sources, "
        f"CASE WHEN max(CASE WHEN side = 'a' THEN 1 ELSE 0 END) = 0 THEN '{NEW}' "
        f"WHEN max(CASE WHEN side = 's' THEN 1 ELSE 0 END) = 0 THEN '{UNBLOCKED}' "
        f"ELSE '{UNCHANGED}' END AS status "
        "FROM keyed GROUP BY run_pk, kind, entity, field, action, call, finding_kind) "
    )
    return sql, [candidate_id, window.start, window.end]


def comparison(designation: ShadowDesignation, window: Window) -> Comparison:
    """Every count of the candidate against the active version over the window."""
    with_items, params = _with_items(designation.candidate_id, window)
    groupings = [
        ("day", "CAST((started_at AT TIME ZONE 'UTC')::date AS TEXT)"),
        ("week", "CAST(date_trunc('week', started_at AT TIME ZONE 'UTC')::date AS TEXT)"),
        ("action", "action"),
    ]
    selects = [
        "SELECT 'all' AS grouping, '' AS value, status, count(*) AS n FROM items GROUP BY status"
    ]
    selects += [
        f"SELECT '{name}', {expression}, status, count(*) FROM items GROUP BY {expression}, status"
        for name, expression in groupings
    ]
    selects.append("SELECT 'runs', '', 'compared', count(*) FROM pairs")
    selects.append(
        f"SELECT 'runs', '', 'pending', count(*) FROM {RUNS} r "
        f"JOIN {JUDGEMENTS} a ON a.id = r.current_judgement_id "
        "WHERE r.started_at >= %s AND r.started_at < %s AND a.created_at >= %s "
        "AND a.created_at <= %s AND NOT EXISTS ("
        f"SELECT 1 FROM {JUDGEMENTS} s WHERE s.run_id = r.id AND s.purpose = '{SHADOW}' "
        "AND s.candidate_id = %s AND s.through_record_id = a.through_record_id)"
    )
    period_end = designation.ended_at or FAR_FUTURE
    pending_params = [
        *params[1:],
        designation.started_at,
        period_end,
        designation.candidate_id,
    ]
    found: dict[str, dict[str, Counts]] = defaultdict(lambda: defaultdict(Counts))
    runs: dict[str, int] = {}
    with connection.cursor() as cursor:
        cursor.execute(with_items + " UNION ALL ".join(selects), [*params, *pending_params])
        for grouping, value, status, count in cursor.fetchall():
            if grouping == "runs":
                runs[status] = int(count)
            else:
                setattr(found[grouping][value or ""], status, int(count))
    by_day = {date.fromisoformat(day): counts for day, counts in found["day"].items()}
    by_week = {date.fromisoformat(week): counts for week, counts in found["week"].items()}
    return Comparison(
        window=window,
        total=found["all"].get("", Counts()),
        runs_compared=runs.get("compared", 0),
        runs_pending=runs.get("pending", 0),
        by_day=[(day, by_day.get(day, Counts())) for day in window.days],
        by_week=[(week, by_week.get(week, Counts())) for week in window.weeks],
        by_action=sorted(
            found["action"].items(), key=lambda pair: (-pair[1].new, -pair[1].unblocked, pair[0])
        ),
    )


def comparison_runs(
    designation: ShadowDesignation,
    window: Window,
    item_filter: ItemFilter,
    *,
    status: str | None = None,
) -> RunsFound:
    """The runs behind a count of the comparison, newest first, with their items (read as
    they are paged through)."""
    with_items, params = _with_items(designation.candidate_id, window)
    where, where_params = item_filter.where(window)
    if status in STATUSES:
        where, where_params = f"{where} AND status = %s", [*where_params, status]
    return RunsFound(with_items, params, where, where_params, status=True)
