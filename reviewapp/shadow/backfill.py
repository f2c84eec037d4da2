"""Backfilling a candidate in shadow: the runs of a chosen past window (by their own day)
judged under it, prospectively, as if it had been in shadow then. History is not
rewritten: each run keeps its current judgement and tickets; the candidate's judgements are
SHADOW ones, pinned at the record the current judgement covers.

A backfill is a job in chunks of runs (in primary key order, after a cursor), one Celery
message each: a chunk commits its judgements and moves the cursor, then sends the next.
Judging is idempotent per run, candidate and last record, so a chunk done twice (a worker
killed, a message sent again by the reconciler) adds nothing. A backfill is a unit of
durable work (reviewapp.durable, BACKFILLS), each chunk a claim of it. This is the shape of the replay jobs
(replay of fixture sets, issue 10): once they exist, a backfill can become one of them,
whose items are the window's runs at their current record and whose purpose is SHADOW."""

from __future__ import annotations

import logging
from datetime import date
from typing import Any

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from reviewapp import durable
from reviewapp.celery import Tasks
from reviewapp.durable import Durable
from reviewapp.infra.days import Window
from reviewapp.infra.locks import Space
from reviewapp.models import AuditEvent, Run, ShadowBackfill, ShadowDesignation
from reviewapp.shadow.designations import ShadowError
from reviewapp.shadow.judging import shadow_judge_runs

log = logging.getLogger(__name__)
RUNS_PER_CHUNK = 2000
BACKFILLS = Durable(
    name="shadow backfill",
    model=ShadowBackfill,
    task=Tasks.SHADOW_BACKFILL,
    lock=Space.BACKFILL,
    # Running between its chunks too (each sends the next), with its lock free: silence,
    # not a free lock, tells that its worker died.
    stalled_after="INGEST_STALL_SECONDS",
    requeue_after="SHADOW_REQUEUE_SECONDS",
    # Tries of one chunk: a chunk done counts them afresh.
    max_attempts=3,
    keeps="the runs judged before are kept",
)


def _runs(window: Window):
    return Run.objects.filter(
        started_at__gte=window.start, started_at__lt=window.end, current_judgement__isnull=False
    )


def backfill_start(
    designation: ShadowDesignation, *, since: date, until: date, user: Any
) -> ShadowBackfill:
    """Queue the judging of the window's runs under a candidate in shadow."""
    if not designation.is_open:
        raise ShadowError("only a candidate in shadow is backfilled: put it in shadow first")
    if until < since:
        raise ShadowError(f"{since} is after {until}")
    window = Window(since, until)
    if len(window.days) > 366:
        raise ShadowError("a backfill covers at most 366 days")
    with transaction.atomic():
        backfill = ShadowBackfill.objects.create(
            designation=designation,
            since=since,
            until=until,
            runs_total=_runs(window).count(),
            requested_by=user if user is not None and user.is_authenticated else None,
        )
        AuditEvent.objects.create(
            actor=backfill.requested_by,
            verb="shadow.backfill",
            target=f"{designation.candidate.label} in shadow",
            data={"backfill": backfill.pk, "since": str(since), "until": str(until)},
        )
        durable.dispatch(BACKFILLS, backfill)
    return backfill


def backfill_step(backfill_pk: int) -> bool:
    """Judge the next chunk of a backfill; whether there is more (then the next chunk is
    sent, once this one's claim is let go)."""
    more = _step(backfill_pk)
    if more:
        durable.send(Tasks.SHADOW_BACKFILL, backfill_pk)
    return more


def _step(backfill_pk: int) -> bool:
    active = Q(state__in=(ShadowBackfill.State.QUEUED, ShadowBackfill.State.RUNNING))
    with durable.claim(BACKFILLS, backfill_pk, when=active) as backfill:
        if backfill is None:
            return False  # another worker has it, it has ended, or it is of another database
        try:
            return _chunk(backfill)
        except Exception as exc:
            log.exception("backfill %s failed", backfill_pk)
            durable.fail(
                BACKFILLS,
                backfill_pk,
                f"stopped by an internal error ({type(exc).__name__}); the server log "
                f"has the details under backfill {backfill_pk}",
            )
            raise


def _chunk(backfill: ShadowBackfill) -> bool:
    window = Window(backfill.since, backfill.until)
    chunk = list(
        _runs(window)
        .filter(pk__gt=backfill.after_run)
        .order_by("pk")
        .values_list("pk", flat=True)[:RUNS_PER_CHUNK]
    )
    judged = shadow_judge_runs(
        chunk,
        [backfill.designation.candidate],
        heartbeat=lambda: durable.beat(BACKFILLS, backfill.pk),
    )
    more = len(chunk) == RUNS_PER_CHUNK
    done = {} if more else {"state": ShadowBackfill.State.DONE, "finished_at": timezone.now()}
    ShadowBackfill.objects.filter(pk=backfill.pk).update(
        after_run=chunk[-1] if chunk else backfill.after_run,
        runs_done=F("runs_done") + len(chunk),
        judgements=F("judgements") + judged,
        attempts=0,
        **durable.pulse(BACKFILLS),
        **done,
    )
    return more
