"""Real traces for the tallies' tests: runs whose own clock started in a given month,
ingested through the pipeline (so their verdicts, findings and tickets are the engine's)."""

from __future__ import annotations

import json
from pathlib import Path

from reviewapp.models import Ticket
from tests.seeding import conflict_run, ingest_lines


def started(lines: list[str], when: str) -> list[str]:
    """The run's lines with its run_started giving its own clock."""
    first = json.loads(lines[0])
    assert first["type"] == "run_started"
    return [json.dumps({**first, "startedAt": when}), *lines[1:]]


def month_runs(
    directory: Path, plan: dict[str, int], *, agent: str = "refund-agent", tag: str = "a"
) -> None:
    """`plan[month]` runs of one conflict each (an unsafe no-approved-precedence ticket)
    started in each month ("YYYY-MM"), ingested in one delivery."""
    lines = []
    for month, count in plan.items():
        for number in range(count):
            run_id = f"run-{month}-{number}-{tag}"
            lines += started(conflict_run(run_id, agent=agent), f"{month}-10T12:00:00Z")
    ingest_lines(directory, lines, name=f"{tag}-{len(lines)}.jsonl")


def tickets_of(month: str) -> list[Ticket]:
    return list(Ticket.objects.filter(run__run_id__startswith=f"run-{month}-").order_by("pk"))
