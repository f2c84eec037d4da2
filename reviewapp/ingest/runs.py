"""The runs a chunk's lines belong to: found, or created ("born") by this chunk. A run's
row carries its agent and subject from run_started, whenever that arrives, and when it
started: its run_started's startedAt (the run's own clock), else the earliest time of its
spans (any span of an external format, tool span or not) and records, else when it
arrived. A later piece may hold an earlier span (the agent span ends last, so an exporter
sends it last): the start then moves earlier, never later, and the tallies read the run
again (Run.clock_moved). A run_started's clock is never moved by other times."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
from django.utils import timezone

from reviewapp.engine import Observation, RunStarted, ToolCall
from reviewapp.infra.bulk import bound_cursor
from reviewapp.infra.times import parse_timestamp
from reviewapp.ingest.formats import DecodedUnit
from reviewapp.models import Run

RUN_STARTED, RECORDS, ARRIVAL = Run.Clock.RUN_STARTED, Run.Clock.RECORDS, Run.Clock.ARRIVAL
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(slots=True)
class RunInfo:
    pk: int
    agent: str
    born: bool  # created by this chunk: none of its lines can have been stored before
    started_at: datetime | None = None  # as stored before this chunk (known runs)
    started_from: str = ""


@dataclass(slots=True)
class RunClock:
    """What a chunk says of when a run started: its first run_started's startedAt, and
    the times of its records and spans (read only when they are needed)."""

    declared: datetime | None = None
    times: list[str] = field(default_factory=list)
    span_start: int | None = None  # nanoseconds since the epoch

    def earliest(self) -> datetime | None:
        moments = [moment for moment in map(parse_timestamp, self.times) if moment is not None]
        if self.span_start is not None:
            moments.append(EPOCH + timedelta(microseconds=self.span_start // 1000))
        return min(moments, default=None)


def run_clocks(units: list[DecodedUnit]) -> dict[str, RunClock]:
    """Each run's clock as these units tell it, in the order the runs first appear."""
    clocks: dict[str, RunClock] = {}
    for unit in units:
        for record in unit.records:
            clock = clocks.get(record.run_id)
            if clock is None:
                clock = clocks[record.run_id] = RunClock()
            if isinstance(record, (ToolCall, Observation)):
                if record.started_at:
                    clock.times.append(record.started_at)
                if record.completed_at:
                    clock.times.append(record.completed_at)
            elif isinstance(record, RunStarted) and clock.declared is None:
                clock.declared = parse_timestamp(record.started_at)
        for run_id, nanos in unit.span_starts.items():
            clock = clocks.get(run_id)
            if clock is not None and (clock.span_start is None or nanos < clock.span_start):
                clock.span_start = nanos
    return clocks


def ensure_runs(units: list[DecodedUnit]) -> dict[str, RunInfo]:
    """The runs these units belong to, created when missing ("born"), their starts moved
    earlier when these units know better."""
    starts: dict[str, RunStarted] = {}
    for unit in units:
        for record in unit.records:
            if isinstance(record, RunStarted):
                first = starts.setdefault(record.run_id, record)
                if first.agent is None and record.agent is not None:
                    # The first names no agent (a tool span's line, before the agent span
                    # that ends last): a later one in the chunk still names it.
                    starts[record.run_id] = msgspec.structs.replace(first, agent=record.agent)
    clocks = run_clocks(units)
    runs = _known_runs(list(clocks))
    missing = [run_id for run_id in clocks if run_id not in runs]
    if missing:
        now = timezone.now()
        # In one order everywhere: two deliveries creating the same runs never deadlock.
        rows = [
            _new_run(run_id, starts.get(run_id), clocks[run_id], now) for run_id in sorted(missing)
        ]
        born = _insert_runs(rows)
        for run_id, agent, *_ in rows:
            if run_id in born:
                runs[run_id] = RunInfo(born[run_id], agent, True)
        # Those another delivery created meanwhile are known, not born, here.
        runs.update(_known_runs([run_id for run_id in missing if run_id not in born]))
    # A run_started arriving after the run's first lines still names its agent.
    named: dict[int, RunStarted] = {}
    for run_id, start in starts.items():
        run = runs[run_id]
        if run.born or run.agent or start.agent is None:
            continue
        run.agent = start.agent[:200]
        named[run.pk] = start
    moves = _clock_moves(clocks, runs)
    if named or moves:
        _lock_runs(sorted(named.keys() | moves.keys()))
    for pk, start in sorted(named.items()):
        agent = (start.agent or "")[:200]
        Run.objects.filter(pk=pk).update(agent=agent, subject=dict(start.subject))
    if moves:
        _move_clocks(moves)
    return runs


RUN_COLUMNS = ("run_id", "agent", "subject", "started_at", "started_from")


def _insert_runs(rows: list[tuple[Any, ...]]) -> dict[str, int]:
    """Create these runs (RUN_COLUMNS rows) unless they exist; {run id: pk} of those this
    call created. Two deliveries of one new run at once: one creates it, the other waits for
    that commit and then finds it made."""
    columns = [list(column) for column in zip(*rows, strict=True)]
    columns[2] = [None if subject is None else json.dumps(subject) for subject in columns[2]]
    with bound_cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {Run._meta.db_table} (run_id, agent, subject, started_at, "
            "started_from, first_ingested_at) SELECT r.*, now() FROM unnest(%s::text[], "
            "%s::text[], %s::jsonb[], %s::timestamptz[], %s::text[]) r "
            "ON CONFLICT (run_id) DO NOTHING RETURNING run_id, id",
            columns,
        )
        return dict(cursor.fetchall())


def _new_run(run_id: str, start: RunStarted | None, clock: RunClock, now) -> tuple[Any, ...]:
    """A run's row (RUN_COLUMNS): its agent and subject from run_started, when seen; when it
    started, and how that is known."""
    if clock.declared is not None:
        started_at, started_from = clock.declared, RUN_STARTED
    elif (earliest := clock.earliest()) is not None:
        started_at, started_from = earliest, RECORDS
    else:
        started_at, started_from = now, ARRIVAL
    if start is None:
        return (run_id, "", None, started_at, started_from.value)
    agent = (start.agent or "")[:200]
    return (run_id, agent, dict(start.subject), started_at, started_from.value)


# The start a known run takes from a chunk's clock `m` (at, declared): the run's own clock
# at once; another time when the run had none but its arrival, or when it is earlier.
_MOVED_START = (
    "CASE WHEN m.declared OR r.started_from = 'arrival' THEN m.at "
    "ELSE LEAST(r.started_at, m.at) END"
)


def _clock_moves(
    clocks: dict[str, RunClock], runs: dict[str, RunInfo]
) -> dict[int, tuple[datetime, bool]]:
    """{run pk: (start, from run_started)} of the known runs whose start this chunk knows
    better."""
    moves: dict[int, tuple[datetime, bool]] = {}
    for run_id, clock in clocks.items():
        run = runs[run_id]
        if run.born or run.started_from == RUN_STARTED:
            continue
        if clock.declared is not None:
            moves[run.pk] = (clock.declared, True)
        elif (earliest := clock.earliest()) is not None and (
            run.started_from == ARRIVAL or run.started_at is None or earliest < run.started_at
        ):
            moves[run.pk] = (earliest, False)
    return moves


def _lock_runs(pks: list[int]) -> None:
    """Lock these runs in one order, as they are created: two deliveries changing the same
    runs never deadlock."""
    with bound_cursor() as cursor:
        cursor.execute(
            f"SELECT id FROM {Run._meta.db_table} WHERE id = ANY(%s) ORDER BY id FOR NO KEY UPDATE",
            [pks],
        )


def _move_clocks(moves: dict[int, tuple[datetime, bool]]) -> None:
    """Move these runs' starts (locked). Checked again here: another delivery may have
    moved them since they were read."""
    pks = sorted(moves)
    with bound_cursor() as cursor:
        cursor.execute(
            f"UPDATE {Run._meta.db_table} r SET started_at = {_MOVED_START}, "
            "started_from = CASE WHEN m.declared THEN 'run_started' ELSE 'records' END, "
            "clock_moved = r.clock_moved OR (r.current_judgement_id IS NOT NULL "
            f"AND {_MOVED_START} <> r.started_at) "
            "FROM unnest(%s::bigint[], %s::timestamptz[], %s::boolean[]) m(id, at, declared) "
            "WHERE r.id = m.id AND r.started_from <> 'run_started'",
            [pks, [moves[pk][0] for pk in pks], [moves[pk][1] for pk in pks]],
        )


def _known_runs(run_ids: list[str]) -> dict[str, RunInfo]:
    if not run_ids:
        return {}
    # One array parameter, bound apart from the statement: a chunk names a thousand runs,
    # which Django would quote into the SQL text one by one.
    with bound_cursor() as cursor:
        cursor.execute(
            f"SELECT id, run_id, agent, started_at, started_from FROM {Run._meta.db_table} "
            "WHERE run_id = ANY(%s)",
            [run_ids],
        )
        return {
            run_id: RunInfo(pk, agent, False, started_at, started_from)
            for pk, run_id, agent, started_at, started_from in cursor
        }
