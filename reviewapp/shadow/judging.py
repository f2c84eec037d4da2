"""Judging in shadow: once a delivery's ingest has committed, a worker judges the runs it
touched under every candidate that was in shadow when it finished (shadow_judge_batch,
sent by name from ingest), pinned at the record their current judgement covers, so that
the two judgements of a run compare record for record (shadow.compare). Those are SHADOW
judgements (judging.store): never a run's current one, never a ticket (the database
refuses both). A ShadowBatch row says a delivery is done; the reconciler
(reviewapp.durable, DELIVERIES) sends again any that is not. Judging is idempotent per run,
candidate and last record, so a backfill (shadow.backfill) judges its window's runs the
same way."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import timedelta
from functools import lru_cache

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from reviewapp.celery import Tasks
from reviewapp.durable import Durable, Send
from reviewapp.engine import Policy
from reviewapp.ingest.batches import RUNS_OF_BATCHES
from reviewapp.judging.core import RunToJudge, judge, stored_runs
from reviewapp.judging.store import SHADOW, judgements_store
from reviewapp.models import (
    IngestBatch,
    Judgement,
    PolicyCandidate,
    Run,
    ShadowBatch,
    ShadowDesignation,
)
from reviewapp.policy.candidates import candidate_ref, policy_of_candidate
from reviewapp.shadow.designations import designations_at

RUNS_PER_BLOCK = 500


def shadow_judge_batch(batch_id: int) -> ShadowBatch | None:
    """What the worker runs once a delivery is ingested: judge the runs it touched under
    every candidate in shadow when it finished. Safe to run again, and twice at once."""
    batch = IngestBatch.objects.filter(pk=batch_id).first()
    if batch is None or batch.state != IngestBatch.State.DONE or batch.finished_at is None:
        return None  # a batch not (yet) ingested, or from another database
    done = ShadowBatch.objects.filter(batch=batch).first()
    if done is not None:
        return done
    designations = designations_at(batch.finished_at)
    if not designations:
        return None
    run_pks = runs_of_batch(batch.pk)
    judged = shadow_judge_runs(run_pks, [d.candidate for d in designations])
    try:
        with transaction.atomic():
            return ShadowBatch.objects.create(batch=batch, runs=len(run_pks), judgements=judged)
    except IntegrityError:  # another worker finished it a moment ago
        return ShadowBatch.objects.get(batch=batch)


def runs_of_batch(batch_pk: int) -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute(RUNS_OF_BATCHES.format(placeholders="%s"), [batch_pk])
        return sorted(run_pk for (run_pk,) in cursor.fetchall())


def shadow_judge_runs(
    run_pks: Iterable[int],
    candidates: list[PolicyCandidate],
    *,
    heartbeat: Callable[[], object] = lambda: None,
) -> int:
    """Judge these runs under each candidate, each pinned at the last record its current
    judgement covers, unless that is done already; how many judgements were stored."""
    pks, stored = sorted(set(run_pks)), 0
    for start in range(0, len(pks), RUNS_PER_BLOCK):
        heartbeat()
        block = pks[start : start + RUNS_PER_BLOCK]
        through = dict(
            Run.objects.filter(pk__any=block, current_judgement__isnull=False).values_list(
                "pk", "current_judgement__through_record_id"
            )
        )
        due = {candidate.pk: _not_judged(candidate, through) for candidate in candidates}
        wanted = set().union(*due.values()) if due else set()
        if not wanted:
            continue
        runs = stored_runs(wanted, through={pk: through[pk] for pk in wanted})
        for candidate in candidates:
            stored += _store(candidate, [run for run in runs if run.stored_pk in due[candidate.pk]])
    return stored


def _not_judged(candidate: PolicyCandidate, through: dict[int, int]) -> set[int]:
    """The runs (of `through`: run -> last record to judge) the candidate has not judged up
    to that record."""
    done = set(
        Judgement.objects.filter(purpose=SHADOW, candidate=candidate, run_id__any=through)
        .values_list("run_id", "through_record_id")
        .order_by()
    )
    return {pk for pk, last in through.items() if (pk, last) not in done}


def _store(candidate: PolicyCandidate, runs: list[RunToJudge]) -> int:
    if not runs:
        return 0
    judged = judge(runs, candidate_policy(candidate))
    try:
        with transaction.atomic():
            judgements_store(judged, purpose=SHADOW, policy=candidate_ref(candidate))
        return len(judged)
    except IntegrityError:
        # Another worker judged some of them meanwhile: store the rest.
        left = _not_judged(candidate, {r.stored_pk: r.through_record_id for r in runs})
        rest = [item for item in judged if item.run.stored_pk in left]
        with transaction.atomic():
            judgements_store(rest, purpose=SHADOW, policy=candidate_ref(candidate))
        return len(rest)


def candidate_policy(candidate: PolicyCandidate) -> Policy:
    """A candidate's policy, loaded once per process (candidates never change)."""
    return _candidate_policy(candidate.pk, candidate.sha256, candidate)


@lru_cache(maxsize=32)
def _candidate_policy(pk: int, sha256: str, candidate: PolicyCandidate) -> Policy:
    return policy_of_candidate(candidate)


# --- deliveries no worker judged in shadow ------------------------------------------------


def deliveries_due(*, limit: int = 100) -> list[Send]:
    """The deliveries that finished while a candidate was in shadow, longer ago than
    SHADOW_REQUEUE_SECONDS, and are not judged in shadow yet (the message was lost, or the
    worker died): the reconciler sends them again (judging them twice is harmless)."""
    now = timezone.now()
    recent = ShadowDesignation.objects.filter(
        Q(ended_at__isnull=True) | Q(ended_at__gte=now - timedelta(days=1))
    ).values_list("started_at", "ended_at")
    periods = list(recent)
    if not periods:
        return []
    waiting = (
        IngestBatch.objects.filter(
            state=IngestBatch.State.DONE,
            finished_at__gte=min(start for start, _ in periods),
            finished_at__lte=now - timedelta(seconds=settings.SHADOW_REQUEUE_SECONDS),
        )
        .exclude(pk__in=ShadowBatch.objects.values("batch_id"))
        .order_by("finished_at")
        .values_list("pk", "finished_at")
    )
    due = []
    for batch_pk, finished in waiting[: limit * 4]:
        if finished is None:
            continue
        if any(start <= finished and (end is None or finished <= end) for start, end in periods):
            due.append(Send(Tasks.SHADOW_JUDGE_BATCH, (batch_pk,)))
            if len(due) == limit:
                break
    return due


# A delivery judged in shadow, as durable work: sent when its ingest ends (ingest.batches),
# idempotent, so never claimed; the reconciler reads what is due from the deliveries.
DELIVERIES = Durable(
    name="delivery judged in shadow",
    model=ShadowBatch,
    task=Tasks.SHADOW_JUDGE_BATCH,
    due=deliveries_due,
)


def batches_waiting(designation: ShadowDesignation) -> int:
    """Deliveries that finished while the candidate was in shadow and wait for the shadow
    worker (the page shows whether it keeps up)."""
    batches = IngestBatch.objects.filter(
        state=IngestBatch.State.DONE, finished_at__gte=designation.started_at
    ).exclude(pk__in=ShadowBatch.objects.values("batch_id"))
    if designation.ended_at is not None:
        batches = batches.filter(finished_at__lte=designation.ended_at)
    return batches.count()
