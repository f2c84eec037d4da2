"""Broker, cache and worker outages against a live stack (issue: hardening, defect 3):
the web degrades without a 500, the worker reconnects, and a lost batch is noticed and
finished within a minute, every line stored exactly once."""

from __future__ import annotations

import json
import signal
import time
from functools import partial

import pytest

from reviewapp.ingest.tokens import create_token
from reviewapp.models import IngestBatch, Ticket, TraceLine
from tests.ingest.test_worker import trace_body
from tests.reliability.conftest import Browser
from tests.reliability.stack import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]
RUNS = 6000  # 36,000 lines: several seconds of work, long enough to be hit mid-way


def post(stack, body: bytes, token: str) -> dict:
    response = stack.request(
        "/api/v1/traces",
        data=body,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/x-ndjson"},
    )
    assert response.status == 202
    return json.loads(response.read())


def batch_done(public_id: str, timeout: float) -> IngestBatch:
    return wait_for(
        lambda: IngestBatch.objects.filter(public_id=public_id, state="done").first(),
        timeout,
        f"batch {public_id} to finish",
    )


def assert_every_line_once(batch: IngestBatch, lines: int) -> None:
    assert (batch.lines, batch.accepted, batch.duplicates, batch.rejected) == (lines, lines, 0, 0)
    assert TraceLine.objects.filter(batch=batch).count() == lines


def started(public_id: str) -> bool:
    return IngestBatch.objects.filter(public_id=public_id, bytes_done__gt=0).exists()


def test_redis_restarted_five_times_under_a_pool_of_two_the_worker_stays(stack, reviewer):
    """A worker of two pool processes, tasks in flight (acks late) at each Redis restart:
    celery 5.7.0 died here ("Unrecoverable error", see requirements.txt)."""
    token = create_token(user=reviewer, name="faults")[1]
    for round_ in range(5):
        body = trace_body(RUNS).replace(b"run-", f"r{round_}-".encode())
        public_id = post(stack, body, token)["id"]
        wait_for(partial(started, public_id), 60, "the worker to start on the batch")
        stack.processes["redis"].kill()
        time.sleep(3)
        stack.start_redis()
        assert_every_line_once(batch_done(public_id, 90), body.count(b"\n"))
        assert stack.processes["worker"].alive, stack.processes["worker"].text()[-3000:]
    assert "Unrecoverable error" not in stack.processes["worker"].text()
    # And it still takes new work.
    again = post(stack, trace_body(3).replace(b"run-", b"after-"), token)
    assert batch_done(again["id"], 60).accepted == 3 * 6


def test_while_redis_is_down_pages_and_the_api_answer_and_the_batch_waits(stack, reviewer, desk):
    token = create_token(user=reviewer, name="faults")[1]
    browser = Browser(stack)
    ticket = Ticket.objects.first()
    stack.processes["redis"].kill()
    assert browser.sign_in("rita", "pw-rita-123") == 200
    for path in ("/", "/tickets/", f"/tickets/{ticket.pk}/", "/ingest/", "/policy/"):
        assert browser.status(path) == 200, path
    response = stack.request(
        "/api/v1/traces",
        data=trace_body(2),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/x-ndjson"},
    )
    assert response.status == 202
    public_id = json.loads(response.read())["id"]
    assert IngestBatch.objects.get(public_id=public_id).state == "queued"
    # Redis back: beat's reconciler sends the batch no worker heard of.
    stack.start_redis()
    assert_every_line_once(batch_done(public_id, 60), 12)


def test_a_whole_worker_killed_mid_batch_is_noticed_and_its_batch_finished(stack, reviewer):
    token = create_token(user=reviewer, name="faults")[1]
    body = trace_body(RUNS)
    batch = post(stack, body, token)
    wait_for(lambda: started(batch["id"]), 60, "the worker to start on the batch")
    stack.processes["worker"].kill(signal.SIGKILL)
    killed_at = time.monotonic()
    stack.start_worker()
    done = batch_done(batch["id"], 60)
    assert time.monotonic() - killed_at < 60
    assert_every_line_once(done, body.count(b"\n"))
