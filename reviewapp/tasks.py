"""Celery tasks: thin wrappers over functions that are called and tested without a broker."""

from reviewapp.celery import app


@app.task(acks_late=True, reject_on_worker_lost=True)
def ingest_batch_task(batch_id: int) -> dict[str, int]:
    from reviewapp.ingest.pipeline import ingest_stored_batch

    return ingest_stored_batch(batch_id).as_dict()


@app.task(acks_late=True, reject_on_worker_lost=True)
def ingest_part_task(batch_id: int, index: int) -> None:
    from reviewapp.ingest.parts import ingest_part

    ingest_part(batch_id, index)


@app.task(acks_late=True, reject_on_worker_lost=True)
def label_settled_tickets_task(version_id: int) -> int:
    from reviewapp.models import PolicyVersion
    from reviewapp.policy.settlements import settlements_label

    return settlements_label(PolicyVersion.objects.get(pk=version_id))


@app.task
def finish_lost_labellings_task() -> list[int]:
    """Periodic (beat): label the settlements of versions whose labelling task was lost."""
    from datetime import timedelta

    from reviewapp.policy.settlements import labellings_finish

    return labellings_finish(older_than=timedelta(minutes=5))


@app.task
def resume_stalled_batches_task() -> int:
    """Periodic (beat): send again batches whose worker died, whose message was lost, or
    that failed with tries left; delete the kept bodies of those with none left, after a
    while."""
    from datetime import timedelta

    from django.conf import settings

    from reviewapp.ingest.batches import failed_bodies_delete, send_to_worker, stalled_batches

    failed_bodies_delete(
        kept_for=timedelta(seconds=settings.INGEST_FAILED_KEEP_SECONDS),
        max_attempts=settings.INGEST_MAX_ATTEMPTS,
    )
    stalled = stalled_batches(
        running=timedelta(seconds=settings.INGEST_STALL_SECONDS),
        queued=timedelta(seconds=settings.INGEST_REQUEUE_SECONDS),
        failed=timedelta(seconds=settings.INGEST_RETRY_SECONDS),
        max_attempts=settings.INGEST_MAX_ATTEMPTS,
    )
    for batch in stalled:
        send_to_worker(batch)
    return len(stalled)


@app.task
def canary_task() -> None:
    """Periodic (beat): a worker that runs it shows it is consuming tasks."""
    from reviewapp.ingest.workers import record_pulse

    record_pulse("worker")


@app.task
def fold_kept_counts_task() -> None:
    """Periodic (beat): fold the queue's kept counts (see reviewapp.review.counts)."""
    from reviewapp.review.counts import fold_kept_counts

    fold_kept_counts()


@app.task(acks_late=True, reject_on_worker_lost=True)
def shadow_judge_batch_task(batch_id: int) -> int:
    """Judge an ingested delivery's runs under the candidates in shadow (sent by ingest)."""
    from reviewapp.shadow.judging import shadow_judge_batch

    done = shadow_judge_batch(batch_id)
    return done.judgements if done else 0


@app.task(acks_late=True, reject_on_worker_lost=True)
def shadow_backfill_task(backfill_id: int) -> bool:
    """One chunk of a shadow backfill; it sends the next."""
    from reviewapp.shadow.backfill import backfill_step

    return backfill_step(backfill_id)


@app.task
def shadow_catch_up_task() -> int:
    """Periodic (beat): send again deliveries not judged in shadow and stalled backfills."""
    from reviewapp.shadow.backfill import backfills_resume
    from reviewapp.shadow.judging import shadow_catch_up

    return shadow_catch_up() + backfills_resume()


@app.task
def tallies_refresh_task() -> int:
    """Bring the tallies up to date: sent by the tallies page when that is more than a page
    should do while somebody waits (reviewapp.reports.entries)."""
    from reviewapp.reports.entries import tallies_refresh

    return tallies_refresh()


@app.task
def close_tally_months_task() -> list[str]:
    """Periodic (beat): bring the tallies up to date and close the months that are due
    (see reviewapp.reports.months)."""
    from reviewapp.reports.calendar import month_key
    from reviewapp.reports.months import close_due_months

    return [month_key(month) for month in close_due_months()]


@app.task(acks_late=True, reject_on_worker_lost=True)
def replay_job_task(job_id: int) -> int:
    """Work on a replay job's items (reviewapp.replay.jobs: the database holds its state,
    so a task delivered twice or redelivered after its worker died is harmless)."""
    from reviewapp.replay.jobs import job_work

    return job_work(job_id)


@app.task
def reconcile_replay_jobs_task() -> int:
    """Periodic (beat): send again replay jobs nobody works on, end those left unended."""
    from reviewapp.replay.jobs import jobs_reconcile

    return jobs_reconcile()
