"""Backfilling a candidate in shadow: the runs of a chosen past window (by their own day)
judged under it, prospectively, as if it had been in shadow then. History is not
rewritten: each run keeps its current judgement and tickets; the candidate's judgements are
SHADOW ones, pinned at the record the current judgement covers.

A backfill is a job in chunks of runs (in primary key order, after a cursor), one Celery
message each: a chunk commits its judgements and moves the cursor, then sends the next.
Judging is idempotent per run, candidate and last record, so a chunk done twice (a worker
killed, a message sent again by beat) adds nothing. This is the shape of the replay jobs
(replay of fixture sets, issue 10): once they exist, a backfill can become one of them,
whose items are the window's runs at their current record and whose purpose is SHADOW."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from reviewapp.celery import app
from reviewapp.infra.days import Window
from reviewapp.models import AuditEvent, Run, ShadowBackfill, ShadowDesignation
from reviewapp.shadow.designations import ShadowError
from reviewapp.shadow.judging import shadow_judge_runs

log = logging.getLogger(__name__)
BACKFILL_TASK = "reviewapp.tasks.shadow_backfill_task"
RUNS_PER_CHUNK = 2000
# The first key of every advisory lock on a backfill (the second is its id).
BACKFILL_LOCK_SPACE = 0x5AD0


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
            heartbeat_at=timezone.now(),
        )
        AuditEvent.objects.create(
            actor=backfill.requested_by,
            verb="shadow.backfill",
            target=f"{designation.candidate.label} in shadow",
            data={"backfill": backfill.pk, "since": str(since), "until": str(until)},
        )
        _send(backfill.pk)
    return backfill


def _send(backfill_pk: int) -> None:
    # robust: a broker that is down must not fail the request; beat sends it again.
    transaction.on_commit(lambda: app.send_task(BACKFILL_TASK, args=[backfill_pk]), robust=True)


def backfill_step(backfill_pk: int) -> bool:
    """Judge the next chunk of a backfill; whether there is more (then the next chunk is
    sent, once this one's lock is let go)."""
    more = _step(backfill_pk)
    if more:
        try:
            app.send_task(BACKFILL_TASK, args=[backfill_pk])
        except Exception:  # the broker is down: beat sends it again once it is back
            log.exception("backfill %s: the next chunk could not be sent", backfill_pk)
    return more


def _step(backfill_pk: int) -> bool:
    with _locked(backfill_pk) as taken:
        if not taken:
            return False  # another worker has it
        backfill = (
            ShadowBackfill.objects.select_related("designation__candidate")
            .filter(pk=backfill_pk)
            .first()
        )
        if backfill is None or backfill.is_finished:
            return False  # done, or of another database
        try:
            return _chunk(backfill)
        except Exception as exc:
            log.exception("backfill %s failed", backfill_pk)
            ShadowBackfill.objects.filter(pk=backfill_pk).update(
                state=ShadowBackfill.State.FAILED,
                finished_at=timezone.now(),
                error=f"stopped by an internal error ({type(exc).__name__}); the server log "
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
    beat = ShadowBackfill.objects.filter(pk=backfill.pk)
    beat.update(state=ShadowBackfill.State.RUNNING, heartbeat_at=timezone.now())
    judged = shadow_judge_runs(
        chunk,
        [backfill.designation.candidate],
        heartbeat=lambda: beat.update(heartbeat_at=timezone.now()),
    )
    more = len(chunk) == RUNS_PER_CHUNK
    done = {} if more else {"state": ShadowBackfill.State.DONE, "finished_at": timezone.now()}
    beat.update(
        after_run=chunk[-1] if chunk else backfill.after_run,
        runs_done=F("runs_done") + len(chunk),
        judgements=F("judgements") + judged,
        heartbeat_at=timezone.now(),
        **done,
    )
    return more


@contextmanager
def _locked(backfill_pk: int) -> Iterator[bool]:
    """An advisory lock on the backfill while this connection holds it."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [BACKFILL_LOCK_SPACE, backfill_pk])
        taken = cursor.fetchone()[0]
    try:
        yield taken
    finally:
        if taken:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_advisory_unlock(%s, %s)", [BACKFILL_LOCK_SPACE, backfill_pk]
                )


def backfills_resume() -> int:
    """Beat: send again backfills whose worker died (silent past INGEST_STALL_SECONDS) or
    whose message was lost (queued past SHADOW_REQUEUE_SECONDS)."""
    now = timezone.now()
    stalled = ShadowBackfill.objects.filter(
        Q(
            state=ShadowBackfill.State.RUNNING,
            heartbeat_at__lt=now - timedelta(seconds=settings.INGEST_STALL_SECONDS),
        )
        | Q(
            state=ShadowBackfill.State.QUEUED,
            heartbeat_at__lt=now - timedelta(seconds=settings.SHADOW_REQUEUE_SECONDS),
        )
    ).values_list("pk", flat=True)
    pks = list(stalled[:50])
    for pk in pks:
        app.send_task(BACKFILL_TASK, args=[pk])
    return len(pks)
