"""The runs a chunk's lines belong to: found, or created ("born") by this chunk. A run's
row carries its agent, subject and clock from run_started, whenever that arrives."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.utils import timezone

from reviewapp.engine import RunStarted
from reviewapp.infra.bulk import bound_cursor
from reviewapp.infra.times import parse_timestamp
from reviewapp.ingest.formats import DecodedUnit
from reviewapp.models import Run


@dataclass(slots=True)
class RunInfo:
    pk: int
    agent: str
    born: bool  # created by this chunk: none of its lines can have been stored before


def ensure_runs(units: list[DecodedUnit]) -> dict[str, RunInfo]:
    """The runs these units belong to, created when missing ("born")."""
    starts: dict[str, RunStarted] = {}
    run_ids: dict[str, None] = {}
    for unit in units:
        for record in unit.records:
            run_ids.setdefault(record.run_id)
            if isinstance(record, RunStarted):
                starts.setdefault(record.run_id, record)
    runs = _known_runs(list(run_ids))
    missing = [run_id for run_id in run_ids if run_id not in runs]
    if missing:
        now = timezone.now()
        # In one order everywhere: two deliveries creating the same runs never deadlock.
        rows = [_new_run(run_id, starts.get(run_id), now) for run_id in sorted(missing)]
        born = _insert_runs(rows)
        for run_id, agent, *_ in rows:
            if run_id in born:
                runs[run_id] = RunInfo(born[run_id], agent, True)
        # Those another delivery created meanwhile are known, not born, here.
        runs.update(_known_runs([run_id for run_id in missing if run_id not in born]))
    # A run_started arriving after the run's first lines still names its agent and clock.
    for run_id, start in starts.items():
        run = runs[run_id]
        if run.born or run.agent or start.agent is None:
            continue
        run.agent = start.agent[:200]
        changes: dict[str, Any] = {"agent": run.agent, "subject": dict(start.subject)}
        if started_at := parse_timestamp(start.started_at):
            changes["started_at"] = started_at
        Run.objects.filter(pk=run.pk).update(**changes)
    return runs


RUN_COLUMNS = ("run_id", "agent", "subject", "started_at")


def _insert_runs(rows: list[tuple[Any, ...]]) -> dict[str, int]:
    """Create these runs (RUN_COLUMNS rows) unless they exist; {run id: pk} of those this
    call created. Two deliveries of one new run at once: one creates it, the other waits for
    that commit and then finds it made."""
    columns = [list(column) for column in zip(*rows, strict=True)]
    columns[2] = [None if subject is None else json.dumps(subject) for subject in columns[2]]
    with bound_cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {Run._meta.db_table} (run_id, agent, subject, started_at, "
            "first_ingested_at) SELECT r.*, now() FROM unnest(%s::text[], %s::text[], "
            "%s::jsonb[], %s::timestamptz[]) r ON CONFLICT (run_id) DO NOTHING "
            "RETURNING run_id, id",
            columns,
        )
        return dict(cursor.fetchall())


def _new_run(run_id: str, start: RunStarted | None, now) -> tuple[Any, ...]:
    """A run's row (RUN_COLUMNS): its agent, subject and clock from run_started, when seen."""
    if start is None:
        return (run_id, "", None, now)
    started_at = parse_timestamp(start.started_at) or now
    return (run_id, (start.agent or "")[:200], dict(start.subject), started_at)


def _known_runs(run_ids: list[str]) -> dict[str, RunInfo]:
    if not run_ids:
        return {}
    # One array parameter, bound apart from the statement: a chunk names a thousand runs,
    # which Django would quote into the SQL text one by one.
    with bound_cursor() as cursor:
        cursor.execute(
            f"SELECT id, run_id, agent FROM {Run._meta.db_table} WHERE run_id = ANY(%s)",
            [run_ids],
        )
        return {run_id: RunInfo(pk, agent, False) for pk, run_id, agent in cursor}
