"""Judging runs under a policy, storing nothing: how the app asks the engine for verdicts
on runs whose records it knows by id (ingest, the proposal preview, settlement labels,
replay jobs, shadow mode and the gate). What is done with them, if anything, is the
caller's matter: judging.store keeps them, for a purpose. Records read from a file and
kept nowhere (`manage.py evaluate`, replay's trace files and golden exports) go to the
engine's own judge_runs, which groups them into runs itself."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from reviewapp.engine import Policy, Record, RecordError, RunJudgement, judge_run, parse_record
from reviewapp.models import Run, stored_documents

log = logging.getLogger(__name__)


@dataclass(slots=True)
class RunToJudge:
    """A run with its engine records in recording order, each with its stored id (a
    record not stored, as `evaluate` reads them, has its position instead); `pk` is None
    for a run not stored."""

    pk: int | None
    run_id: str
    agent: str
    records: list[tuple[int, Record]]

    @property
    def stored_pk(self) -> int:
        """The run's primary key, for a run that is stored."""
        if self.pk is None:
            raise ValueError(f"run {self.run_id} is not stored")
        return self.pk

    @property
    def through_record_id(self) -> int:
        """The last record judged: a judgement covers the run up to it."""
        return self.records[-1][0]


@dataclass(frozen=True, slots=True)
class Judged:
    run: RunToJudge
    result: RunJudgement


def judge(runs: Iterable[RunToJudge], policy: Policy) -> list[Judged]:
    """Judge each run under `policy`; nothing is read or written."""
    return [
        Judged(run, judge_run(run.run_id, [record for _, record in run.records], policy))
        for run in runs
    ]


def stored_runs(
    run_pks: Iterable[int], *, through: Mapping[int, int] | None = None
) -> list[RunToJudge]:
    """Stored runs with their records, ordered by pk; a run with no record (or none up to
    its pin) is left out. `through` pins runs at a record id: what a run held then is what
    it holds now up to that record, since records are never changed or removed."""
    pks = sorted(set(run_pks))
    records: dict[int, list[tuple[int, Record]]] = defaultdict(list)
    for run_pk, record_id, document in stored_documents(pks):
        if through is not None and run_pk in through and record_id > through[run_pk]:
            continue
        try:
            records[run_pk].append((record_id, parse_record(document)))
        except RecordError:
            # Accepted when it arrived; an engine that has grown stricter skips it, loudly.
            log.warning("stored record %s no longer parses; skipped", record_id)
    runs = Run.objects.filter(pk__any=pks).order_by("pk").values_list("pk", "run_id", "agent")
    return [RunToJudge(pk, run_id, agent, records[pk]) for pk, run_id, agent in runs if records[pk]]
