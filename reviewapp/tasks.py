"""Celery tasks: thin wrappers over functions that are called and tested without a broker."""

from reviewapp.celery import app


@app.task(acks_late=True, reject_on_worker_lost=True)
def ingest_batch_task(batch_id: int) -> dict[str, int]:
    from reviewapp.ingest.pipeline import ingest_stored_batch

    return ingest_stored_batch(batch_id).as_dict()


@app.task(acks_late=True, reject_on_worker_lost=True)
def label_settled_tickets_task(version_id: int) -> int:
    from reviewapp.models import PolicyVersion
    from reviewapp.policy.settlements import settlements_label

    return settlements_label(PolicyVersion.objects.get(pk=version_id))


@app.task
def resume_stalled_batches_task() -> int:
    """Periodic (beat): send again batches whose worker died, whose message was lost, or
    that failed with tries left."""
    from datetime import timedelta

    from django.conf import settings

    from reviewapp.ingest.batches import send_to_worker, stalled_batches

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
