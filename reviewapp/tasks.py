"""Celery tasks: thin wrappers over functions that are called and tested without a broker."""

from reviewapp.celery import app


@app.task(acks_late=True, reject_on_worker_lost=True)
def ingest_batch_task(batch_id: int) -> dict[str, int]:
    from reviewapp.ingestion import ingest_stored_batch

    return ingest_stored_batch(batch_id).as_dict()
