"""Celery tasks: thin wrappers over functions that are called and tested without a broker,
each registered under its name in reviewapp.celery.Tasks. Every task is acks_late and
rejected when its worker is lost (settings), so it runs again when its worker dies: the
work is durable (reviewapp.durable) and a task delivered twice harmless."""

from reviewapp.celery import Tasks, app


@app.task(name=Tasks.INGEST_BATCH)
def ingest_batch_task(batch_id: int) -> dict[str, int]:
    from reviewapp.ingest.pipeline import ingest_stored_batch

    return ingest_stored_batch(batch_id).as_dict()


@app.task(name=Tasks.INGEST_IN_PARTS)
def ingest_in_parts_task(batch_id: int) -> None:
    from reviewapp.ingest.parts import parts_start

    parts_start(batch_id)


@app.task(name=Tasks.INGEST_PART)
def ingest_part_task(batch_id: int, index: int) -> None:
    from reviewapp.ingest.parts import ingest_part

    ingest_part(batch_id, index)


@app.task(name=Tasks.ERASE)
def erase_task(request_id: int) -> dict:
    """Run an approved erasure (sent when it is approved on its page)."""
    from reviewapp.privacy.erasure import run_erasure

    return run_erasure(request_id)


@app.task(name=Tasks.LABEL_SETTLEMENTS)
def label_settled_tickets_task(version_id: int) -> int:
    from reviewapp.policy.settlements import label_settled

    return label_settled(version_id)


@app.task(name=Tasks.SHADOW_JUDGE_BATCH)
def shadow_judge_batch_task(batch_id: int) -> int:
    """Judge an ingested delivery's runs under the candidates in shadow (sent by ingest)."""
    from reviewapp.shadow.judging import shadow_judge_batch

    done = shadow_judge_batch(batch_id)
    return done.judgements if done else 0


@app.task(name=Tasks.SHADOW_BACKFILL)
def shadow_backfill_task(backfill_id: int) -> bool:
    """One chunk of a shadow backfill; it sends the next."""
    from reviewapp.shadow.backfill import backfill_step

    return backfill_step(backfill_id)


@app.task(name=Tasks.REPLAY_JOB)
def replay_job_task(job_id: int) -> int:
    """Work on a replay job's items (reviewapp.replay.jobs: the database holds its state,
    so a task delivered twice or redelivered after its worker died is harmless)."""
    from reviewapp.replay.jobs import job_work

    return job_work(job_id)


@app.task(name=Tasks.TALLIES_REFRESH)
def tallies_refresh_task() -> int:
    """Bring the tallies up to date: sent by the tallies page when that is more than a page
    should do while somebody waits (reviewapp.reports.entries)."""
    from reviewapp.reports.entries import tallies_refresh

    return tallies_refresh()


@app.task(name=Tasks.SUGGESTIONS_REFRESH)
def suggestions_refresh_task() -> int:
    """Compute the suggested rules again from the marks (sent after a marked close, and by
    beat); how many are ready for a person to look at."""
    from reviewapp.suggestions.work import suggestions_refresh

    return suggestions_refresh()


@app.task(name=Tasks.RECONCILE)
def reconcile_task() -> dict[str, int]:
    """Periodic (beat, every RECONCILE_SECONDS): the one reconciler of durable work
    (reviewapp.durable). It sends again, of every kind, the work whose worker died, whose
    message was lost, or that failed with tries left; a worker that runs it shows that the
    workers take tasks. It deletes, too, what was kept of the batches that failed for good,
    once INGEST_FAILED_KEEP_SECONDS have passed."""
    from datetime import timedelta

    from django.conf import settings

    from reviewapp.alerts.delivery import DELIVERIES as ALERT_DELIVERIES
    from reviewapp.durable import reconcile, worker_seen
    from reviewapp.ingest.batches import BATCHES, failed_bodies_delete
    from reviewapp.ingest.parts import PARTS
    from reviewapp.policy.settlements import LABELLINGS
    from reviewapp.privacy.erasure import ERASURES
    from reviewapp.replay.jobs import ITEMS
    from reviewapp.shadow.backfill import BACKFILLS
    from reviewapp.shadow.judging import DELIVERIES

    worker_seen()
    failed_bodies_delete(
        kept_for=timedelta(seconds=settings.INGEST_FAILED_KEEP_SECONDS),
        max_attempts=settings.INGEST_MAX_ATTEMPTS,
    )
    return reconcile(
        [BATCHES, PARTS, ITEMS, BACKFILLS, DELIVERIES, LABELLINGS, ERASURES, ALERT_DELIVERIES]
    )


@app.task(name=Tasks.FOLD_KEPT_COUNTS)
def fold_kept_counts_task() -> None:
    """Periodic (beat): fold the queue's kept counts (see reviewapp.review.counts)."""
    from reviewapp.review.counts import fold_kept_counts

    fold_kept_counts()


@app.task(name=Tasks.CLOSE_TALLY_MONTHS)
def close_tally_months_task() -> list[str]:
    """Periodic (beat): bring the tallies up to date and close the months that are due
    (see reviewapp.reports.months)."""
    from reviewapp.reports.calendar import month_key
    from reviewapp.reports.months import close_due_months

    return [month_key(month) for month in close_due_months()]


@app.task(name=Tasks.EXPIRE_RAW_PAYLOADS)
def expire_raw_payloads_task() -> dict[str, int]:
    """Periodic (beat, hourly): raw payloads past TRACE_RETENTION_DAYS become tombstones
    (see reviewapp.privacy.retention)."""
    from reviewapp.privacy.retention import expire_raw_payloads

    done = expire_raw_payloads()
    return {"lines": done.lines, "records": done.records, "runs": done.runs}


@app.task(name=Tasks.ALERT_DELIVER)
def alert_deliver_task(delivery_id: int) -> str:
    """Send one alert to one destination (reviewapp.alerts.delivery), at most once."""
    from reviewapp.alerts.delivery import deliver

    return deliver(delivery_id)


@app.task(name=Tasks.DETECT_ALERTS)
def detect_alerts_task() -> list[str]:
    """Periodic (beat, every ALERT_DETECT_SECONDS): look for what admins are alerted of
    (reviewapp.watch); each alert is raised once and its deliveries sent to workers."""
    from reviewapp.watch.detect import detect_alerts

    return [alert.key for alert in detect_alerts()]
