"""Judging what a delivery stored, under the active policy: runs born in it from memory as
the file moves past them, the rest from the database at the end. Each judgement is stored
as ACTIVE and, where it became its run's current one, opens its tickets."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from django.db import connection
from django.db.models import Count, OuterRef, Subquery

from reviewapp.engine import Record
from reviewapp.ingest.batches import RUNS_OF_BATCHES
from reviewapp.ingest.runs import RunInfo
from reviewapp.ingest.stages import atomic_write, stage
from reviewapp.judging.core import RunToJudge, judge, stored_runs
from reviewapp.judging.policies import ActivePolicy
from reviewapp.judging.store import ACTIVE, PolicyRef, covers, judgements_store
from reviewapp.models import IngestBatch, Judgement, Run, TraceRecord
from reviewapp.review.opening import tickets_open

RUNS_PER_BLOCK = 500


def judge_and_open(
    runs: list[RunToJudge], *, active: ActivePolicy, batch: IngestBatch, first: bool = False
) -> int:
    """Judge these runs under the active policy, store it, and open the tickets of the
    judgements that became current (how many: tickets_open); `first`: none of them was
    judged before."""
    if not runs:
        return 0
    policy = PolicyRef(active.number, active.version.pk if active.version else None)
    with stage("judge"):
        judged = judge(runs, active.policy)
    stored = judgements_store(judged, purpose=ACTIVE, policy=policy)
    return tickets_open(
        stored, policy=active.policy, policy_number=active.number, batch_id=batch.pk, first=first
    )


def judge_stored_runs(
    run_pks: Iterable[int],
    *,
    active: ActivePolicy,
    batch: IngestBatch,
    heartbeat: Callable[[], None] = lambda: None,
) -> None:
    """Judge these runs from their stored records unless their current judgement already
    covers them under the active policy. `heartbeat` is called before each block: long
    work shows it is alive."""
    pks = sorted(set(run_pks))
    for start in range(0, len(pks), RUNS_PER_BLOCK):
        heartbeat()
        block = pks[start : start + RUNS_PER_BLOCK]
        with atomic_write():
            # Two deliveries of the same runs may judge them at once: each locks the runs
            # first (in one order), so the second reads the first's judgement once it is
            # committed and finds it covers them, instead of judging the same records again
            # and being refused by judgement_once_per_state. FOR NO KEY UPDATE, the lock
            # making them current takes anyway: ingest's foreign key checks (FOR KEY SHARE)
            # go on beside it.
            list(
                Run.objects.filter(pk__in=block)
                .order_by("pk")
                .select_for_update(no_key=True)
                .values_list("pk", flat=True)
            )
            current = {
                run.pk: run.current_judgement
                for run in Run.objects.filter(pk__in=block).select_related("current_judgement")
            }
            due = [
                run
                for run in stored_runs(block)
                if not covers(
                    current.get(run.stored_pk),
                    through_record_id=run.through_record_id,
                    policy_number=active.number,
                )
            ]
            judge_and_open(due, active=active, batch=batch)


class RunsInFlight:
    """Runs born in this ingest, held with their records until the file moves past them
    (a chunk that does not touch them), then judged from memory: reading them back would
    cost more than storing them did. Memory stays bounded by what two chunks hold."""

    def __init__(self, active: ActivePolicy, batch: IngestBatch):
        self.active, self.batch = active, batch
        self.held: dict[int, RunToJudge] = {}

    def take(self, stored: list[tuple[int, int, Record]], runs: dict[str, RunInfo]) -> int:
        """Hold these records of runs born here; judge the runs the chunk passed by. How many
        tickets that opened."""
        by_pk = {info.pk: (run_id, info) for run_id, info in runs.items()}
        touched: set[int] = set()
        for run_pk, record_id, record in stored:
            run = self.held.get(run_pk)
            if run is None:
                run_id, info = by_pk[run_pk]
                if not info.born:
                    continue  # stored before this ingest: the final sweep judges it
                run = self.held[run_pk] = RunToJudge(run_pk, run_id, info.agent, [])
            run.agent = by_pk[run_pk][1].agent
            run.records.append((record_id, record))
            touched.add(run_pk)
        passed = [run for run_pk, run in self.held.items() if run_pk not in touched]
        for run in passed:
            del self.held[run.stored_pk]
        return self._judge(passed)

    def judge_rest(self) -> None:
        self._judge(list(self.held.values()))
        self.held.clear()

    def _judge(self, runs: list[RunToJudge]) -> int:
        if not runs:
            return 0
        # Another delivery may have added lines to a run born here; such a run is left to
        # the final sweep, which reads all of it. Counted run by run (an index probe each):
        # a grouped count over the records may be planned as a scan of them all.
        records = (
            TraceRecord.objects.filter(run_id=OuterRef("pk"))
            .order_by()
            .values("run_id")
            .annotate(records=Count("id"))
            .values("records")
        )
        stored = dict(
            Run.objects.filter(pk__in=[run.stored_pk for run in runs])
            .order_by()
            .annotate(stored_records=Subquery(records))
            .values_list("pk", "stored_records")
        )
        whole = [run for run in runs if stored.get(run.stored_pk) == len(run.records)]
        return judge_and_open(whole, active=self.active, batch=self.batch, first=True)


def runs_to_judge(batch: IngestBatch, active: ActivePolicy) -> list[int]:
    """The runs this batch stored records for whose current judgement does not cover their
    last record under the active policy (counted in the database: memory stays flat)."""
    runs, judged = Run._meta.db_table, Judgement._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT r.id FROM {runs} r LEFT JOIN {judged} j ON j.id = r.current_judgement_id "
            f"WHERE r.id IN ({RUNS_OF_BATCHES.format(placeholders='%s')}) "
            "AND (j.id IS NULL OR j.policy_number <> %s OR j.through_record_id < "
            f"(SELECT max(last.id) FROM {TraceRecord._meta.db_table} last WHERE last.run_id = r.id))",
            [batch.pk, active.number],
        )
        return [run_pk for (run_pk,) in cursor.fetchall()]
