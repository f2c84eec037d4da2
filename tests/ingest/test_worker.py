"""A real Celery worker, on the real Redis broker, against the test database: background
ingestion, a worker killed mid-ingest, and one content re-delivered through every way in."""

import json
import os
import signal
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from reviewapp.ingest.pipeline import ingest_file
from reviewapp.ingest.tokens import create_token
from reviewapp.models import IngestBatch, Run, Ticket, TraceLine
from tests.workers import celery_worker, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def worker(django_db_blocker, tmp_path_factory):
    """A worker with one pool process, like a small deployment."""
    log_path = tmp_path_factory.mktemp("worker") / "worker.log"
    extra = {"UPLOAD_DIR": str(settings.UPLOAD_DIR)}
    with celery_worker(django_db_blocker, log_path, concurrency=1, env=extra) as process:
        yield process, log_path


def pool_children(pid: int) -> list[int]:
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [int(child) for child in children]


def trace_body(runs: int) -> bytes:
    lines = []
    for number in range(runs):
        run = f"run-{number}"
        lines.append(
            {
                "runId": run,
                "type": "run_started",
                "agent": "bulk-agent",
                "subject": {"orderId": run},
            }
        )
        for index, (source, status) in enumerate(
            (("ledger", "paid"), ("refunds", "refunded" if number % 3 else "paid"))
        ):
            lines.append(
                {
                    "runId": run,
                    "type": "tool_call",
                    "toolCallId": f"{run}-c{index}",
                    "tool": "lookup",
                    "arguments": {"orderId": run},
                }
            )
            lines.append(
                {
                    "runId": run,
                    "type": "tool_observation",
                    "observationId": f"{run}-o{index}",
                    "toolCallId": f"{run}-c{index}",
                    "source": source,
                    "status": status,
                }
            )
        lines.append({"runId": run, "type": "agent_action", "name": "send_status_message"})
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def post_api(client, body: bytes, token: str):
    return client.post(
        reverse("api-traces"),
        data=body,
        content_type="application/x-ndjson",
        headers={"Authorization": f"Bearer {token}"},
    )


def test_the_worker_ingests_a_posted_batch(worker, client, reviewer):
    _, token = create_token(user=reviewer, name="ci")
    batch_id = post_api(client, trace_body(30), token).json()["id"]
    batch = wait_for(
        lambda: IngestBatch.objects.filter(public_id=batch_id, state="done").first(),
        60,
        "the batch to finish",
    )
    assert (batch.lines, batch.accepted, batch.runs, batch.tickets) == (180, 180, 30, 20)


def test_a_worker_killed_mid_ingest_loses_and_doubles_nothing(worker, client, reviewer):
    process, log_path = worker
    _, token = create_token(user=reviewer, name="ci")
    runs = 4000
    batch_id = post_api(client, trace_body(runs), token).json()["id"]
    wait_for(
        lambda: IngestBatch.objects.filter(public_id=batch_id, bytes_done__gt=0).exists(),
        60,
        "some chunks to be committed",
    )
    [child] = pool_children(process.pid)
    os.kill(child, signal.SIGKILL)
    assert TraceLine.objects.count() < runs * 6, "the kill came too late to prove anything"
    batch = wait_for(
        lambda: IngestBatch.objects.filter(public_id=batch_id, state="done").first(),
        120,
        "the retried batch to finish",
    )
    assert "WorkerLostError" in log_path.read_text() or "SIGKILL" in log_path.read_text()
    assert (batch.lines, batch.accepted, batch.duplicates, batch.rejected) == (
        runs * 6,
        runs * 6,
        0,
        0,
    )
    assert TraceLine.objects.count() == runs * 6
    assert Run.objects.count() == runs
    expected_tickets = sum(1 for number in range(runs) if number % 3)
    assert Ticket.objects.count() == batch.tickets == expected_tickets


def test_the_same_content_through_every_way_in_is_stored_once(worker, client, reviewer, tmp_path):
    body = trace_body(10)
    path = tmp_path / "trace.jsonl"
    path.write_bytes(body)
    first = ingest_file(path, channel=IngestBatch.Channel.CLI)
    assert first.accepted == 60
    counts = (TraceLine.objects.count(), Run.objects.count(), Ticket.objects.count())

    client.force_login(reviewer)
    client.post(reverse("batch-list"), {"files": [SimpleUploadedFile("again.jsonl", body)]})
    uploaded = IngestBatch.objects.get(channel="upload")
    assert (uploaded.accepted, uploaded.duplicates) == (0, 60)

    _, token = create_token(user=reviewer, name="ci")
    batch_id = post_api(client, body, token).json()["id"]
    posted = wait_for(
        lambda: IngestBatch.objects.filter(public_id=batch_id, state="done").first(),
        60,
        "the posted batch",
    )
    assert (posted.accepted, posted.duplicates, posted.runs, posted.tickets) == (0, 60, 0, 0)
    assert (TraceLine.objects.count(), Run.objects.count(), Ticket.objects.count()) == counts
