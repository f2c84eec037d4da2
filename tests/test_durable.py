"""The one pattern of durable work (reviewapp/durable.py), in process: a claim holds its
unit's lock and counts a try, a unit whose workers all died is given up with its reason,
a message the broker did not take is due at the reconciler's next round, the reconciler
sends each task once and shows the worker alive, every task name is written once and every
advisory lock is taken in infra/locks.py (the fault tests, tests/reliability/, show the
same with real processes killed)."""

from __future__ import annotations

import re
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone

from reviewapp import durable
from reviewapp.celery import Tasks, app
from reviewapp.durable import Send, due
from reviewapp.infra.locks import Space, locks_held
from reviewapp.ingest.batches import BATCHES, create_batch, send_to_worker
from reviewapp.ingest.parts import PARTS, parts_create
from reviewapp.ingest.pipeline import ingest_stored_batch
from reviewapp.models import IngestBatch, IngestPart, ServicePulse
from tests.paths import ROOT

pytestmark = pytest.mark.django_db


@pytest.fixture
def batch(tmp_path) -> IngestBatch:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"runId": "r", "type": "run_started"}\n')
    return create_batch(channel=IngestBatch.Channel.API, path=path, file_name="t.jsonl")


@contextmanager
def another_worker_holding(space: Space, key: int):
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    with psycopg.connect(**params, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s, %s)", [int(space), key])
        yield


def test_a_claim_holds_its_units_lock_counts_a_try_and_leaves_a_held_unit_alone(batch):
    with another_worker_holding(Space.BATCH, batch.pk), durable.claim(BATCHES, batch.pk) as held:
        assert held is None
    batch.refresh_from_db()
    assert (batch.state, batch.attempts) == ("queued", 0)
    with durable.claim(BATCHES, batch.pk) as claimed:
        assert (claimed.state, claimed.attempts) == ("running", 1)
        assert claimed.heartbeat_at > timezone.now() - timedelta(seconds=5)
        assert batch.pk in locks_held(Space.BATCH)
    assert batch.pk not in locks_held(Space.BATCH)


def test_a_unit_whose_worker_died_in_each_of_its_tries_is_given_up_with_why(batch, settings):
    settings.INGEST_MAX_ATTEMPTS = 2
    IngestBatch.objects.filter(pk=batch.pk).update(state="running", attempts=2)
    with durable.claim(BATCHES, batch.pk) as claimed:
        assert claimed is None
    batch.refresh_from_db()
    assert (batch.state, batch.attempts) == ("failed", 2)
    assert batch.error == (
        "its worker died in each of 2 tries (a crash, or a memory limit); every chunk "
        "stored before is kept. It is not tried again by itself."
    )
    # Failed for good: not due again, whatever the waits, and a message delivered again (or
    # sent by the reconciler beside the one redelivered) finds nothing to do.
    settings.INGEST_RETRY_SECONDS = 0
    assert due(BATCHES) == []
    ingest_stored_batch(batch.pk)
    batch.refresh_from_db()
    assert (batch.state, batch.attempts) == ("failed", 2)


def test_a_message_the_broker_did_not_take_is_due_at_the_reconcilers_next_round(
    batch, monkeypatch, django_capture_on_commit_callbacks
):
    def broker_down(*args, **kwargs):
        raise OSError("connection refused")

    monkeypatch.setattr(app, "send_task", broker_down)
    with django_capture_on_commit_callbacks(execute=True):
        send_to_worker(batch)
    assert due(BATCHES) == [Send(Tasks.INGEST_BATCH, (batch.pk,))]


def test_the_reconciler_sends_each_task_once_and_shows_a_worker_is_alive(batch, monkeypatch):
    from reviewapp.tasks import reconcile_task

    # A batch in parts: one part done, the other running with no worker holding it, and
    # the batch silent past INGEST_STALL_SECONDS: due as a batch and as a lost part.
    IngestBatch.objects.filter(pk=batch.pk).update(
        parts=2,
        state="running",
        attempts=1,
        heartbeat_at=timezone.now() - timedelta(seconds=settings.INGEST_STALL_SECONDS + 5),
    )
    parts_create(batch)
    IngestPart.objects.filter(batch=batch, index=0).update(state="running", attempts=1)
    IngestPart.objects.filter(batch=batch, index=1).update(state="done")
    again = Send(Tasks.INGEST_IN_PARTS, (batch.pk,))
    assert due(BATCHES) == due(PARTS) == [again]
    sent = []
    monkeypatch.setattr(app, "send_task", lambda name, args: sent.append(Send(name, tuple(args))))
    assert reconcile_task()["batch"] == 1
    assert sent == [again]
    assert ServicePulse.objects.get(name="worker").seen_at > timezone.now() - timedelta(seconds=5)
    assert durable.worker_silent_since() is None


def test_every_task_name_is_written_once_and_beat_sends_five():
    import reviewapp.tasks  # noqa: F401 (registers the tasks)

    names = {value for key, value in vars(Tasks).items() if not key.startswith("_")}
    registered = {name for name in app.tasks if name.startswith("reviewapp.")}
    assert names == registered
    schedule = settings.CELERY_BEAT_SCHEDULE
    assert {entry["task"] for entry in schedule.values()} == {
        Tasks.RECONCILE,
        Tasks.FOLD_KEPT_COUNTS,
        Tasks.CLOSE_TALLY_MONTHS,
        Tasks.EXPIRE_RAW_PAYLOADS,
        Tasks.DETECT_ALERTS,
        Tasks.SUGGESTIONS_REFRESH,
    }
    assert schedule["reconcile"]["schedule"] == float(settings.RECONCILE_SECONDS)
    code = ROOT / "reviewapp"
    written = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in code.rglob("*.py")
        if path.name != "celery.py" and "migrations" not in path.parts
        for name in re.findall(r"reviewapp\.tasks\.\w+_task", path.read_text())
    ]
    assert written == []


def test_every_advisory_lock_is_taken_in_infra_locks():
    taken_elsewhere = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "reviewapp").rglob("*.py")
        if "migrations" not in path.parts and path != ROOT / "reviewapp/infra/locks.py"
        if re.search(r"pg_(try_)?advisory", Path(path).read_text())
    ]
    assert taken_elsewhere == []
