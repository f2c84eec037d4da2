"""Data safety under overlap and repetition: deliveries of the same new runs arriving
together, one batch sent to two workers, lines repeated thousands of times, and failed
batches tried again (issue: hardening, defects 1 and 2)."""

import json
import threading
from contextlib import contextmanager, suppress
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from reviewapp.durable import Send, due
from reviewapp.infra.locks import Space
from reviewapp.ingest import judge as judge_module
from reviewapp.ingest import pipeline as ingestion
from reviewapp.ingest.batches import BATCHES, create_batch
from reviewapp.ingest.pipeline import ingest_batch, ingest_file, ingest_stored_batch
from reviewapp.ingest.tokens import create_token
from reviewapp.judging.policies import ActivePolicy, default_policy
from reviewapp.models import IngestBatch, Judgement, Run, Ticket, TraceLine
from tests.uploads import is_kept

pytestmark = pytest.mark.django_db


def line(**record) -> bytes:
    return json.dumps(record, separators=(",", ":")).encode()


def trace(runs: range, *, prefix: str = "run") -> bytes:
    """Two disagreeing observations and an action per run: one conflict ticket each."""
    out = []
    for i in runs:
        run = f"{prefix}-{i}"
        out.append(line(runId=run, type="run_started", agent=f"agent-{i % 3}"))
        out.append(
            line(
                runId=run,
                type="tool_observation",
                observationId=f"{run}-a",
                source="refund-service",
                status="refunded",
            )
        )
        out.append(
            line(
                runId=run,
                type="tool_observation",
                observationId=f"{run}-b",
                source="order-ledger",
                status="paid",
            )
        )
        out.append(line(runId=run, type="agent_action", name="issue_store_credit"))
    return b"\n".join(out) + b"\n"


def stored_state(prefix: str) -> dict:
    """What ingest left of the runs named with this prefix, independent of ids and of which
    delivery stored what."""
    runs = {}
    for run in Run.objects.filter(run_id__startswith=prefix).select_related("current_judgement"):
        last = run.records.order_by("-id").values_list("id", flat=True).first()
        runs[run.run_id.removeprefix(prefix)] = (
            run.agent,
            run.records.count(),
            run.current_judgement is not None and run.current_judgement.through_record_id == last,
            sorted(run.tickets.values_list("key", flat=True)),
        )
    lines = TraceLine.objects.filter(records__run__run_id__startswith=prefix).distinct()
    return {
        "lines": sorted(
            bytes(raw).replace(prefix.encode(), b"") for raw in lines.values_list("raw", flat=True)
        ),
        "runs": runs,
    }


def run_together(*calls):
    """Start the calls in threads at the same instant; re-raise the first failure."""
    barrier = threading.Barrier(len(calls))
    errors = []

    def start(call):
        try:
            barrier.wait()
            call()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=start, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("trial", range(4))
def test_overlapping_deliveries_arriving_together_end_equal_to_a_serial_ingest(
    tmp_path, trial, monkeypatch
):
    monkeypatch.setattr(ingestion, "CHUNK_LINES", 40)

    def files(prefix: str) -> list[Path]:
        # Two files sharing runs 20-59, in opposite orders, each with runs of its own.
        return [
            _written(tmp_path, f"{prefix}-1.jsonl", trace(range(0, 60), prefix=prefix)),
            _written(
                tmp_path,
                f"{prefix}-2.jsonl",
                trace(range(59, 19, -1), prefix=prefix) + trace(range(60, 80), prefix=prefix),
            ),
        ]

    for path in files("serial"):
        ingest_file(path, channel=IngestBatch.Channel.CLI)
    batches = [
        create_batch(channel=IngestBatch.Channel.API, path=path, file_name=path.name)
        for path in files("together")
    ]
    run_together(*(lambda b=b: ingest_batch(b) for b in batches))
    assert set(IngestBatch.objects.values_list("state", flat=True)) == {"done"}
    together = stored_state("together")
    assert len(together["runs"]) == 80 and all(r[2] for r in together["runs"].values())
    assert Ticket.objects.filter(run__run_id__startswith="together").count() == 80
    assert together == stored_state("serial")


@pytest.mark.django_db(transaction=True)
def test_two_deliveries_judging_the_same_runs_at_once_store_one_judgement_each(
    tmp_path, monkeypatch
):
    """Two final sweeps due to judge the same runs in the same state: the second waits for
    the first (its lock on the runs) and finds them covered. Without the lock both judge,
    and the second judgement of the same state is refused (judgement_once_per_state)."""
    ingest_file(_written(tmp_path, "t.jsonl", trace(range(3))), channel="cli")
    batches = [
        create_batch(channel=IngestBatch.Channel.API, path=tmp_path / "t.jsonl", file_name=name)
        for name in ("a", "b")
    ]
    # A newer policy: every run is due again.
    active = ActivePolicy(default_policy(), 7, None)
    runs = list(Run.objects.values_list("pk", flat=True))
    # Each sweep, once it has decided what is due, waits (a while) for the other to
    # have decided too: without the lock both decide before either stores.
    both_decided = threading.Barrier(2, timeout=3)
    judge_and_open = judge_module.judge_and_open

    def decided_then_judged(due, **kwargs):
        # Broken: the other sweep waits on the lock, and decides after this one stored.
        with suppress(threading.BrokenBarrierError):
            if due:
                both_decided.wait()
        return judge_and_open(due, **kwargs)

    monkeypatch.setattr(judge_module, "judge_and_open", decided_then_judged)
    run_together(
        *(lambda b=b: judge_module.judge_stored_runs(runs, active=active, batch=b) for b in batches)
    )
    assert Judgement.objects.filter(policy_number=7).count() == 3
    assert set(Run.objects.values_list("current_judgement__policy_number", flat=True)) == {7}


@pytest.mark.django_db(transaction=True)
def test_one_batch_sent_to_two_workers_at_once_is_ingested_once(tmp_path, monkeypatch):
    monkeypatch.setattr(ingestion, "CHUNK_LINES", 25)
    path = tmp_path / "t.jsonl"
    path.write_bytes(trace(range(50)))
    batch = create_batch(channel=IngestBatch.Channel.API, path=path, file_name="t.jsonl")
    run_together(lambda: ingest_batch(batch), lambda: ingest_batch(batch))
    batch.refresh_from_db()
    assert (batch.state, batch.lines, batch.accepted, batch.duplicates) == ("done", 200, 200, 0)
    assert TraceLine.objects.count() == 200 and Ticket.objects.count() == 50


def test_a_line_repeated_thousands_of_times_costs_the_same_queries_per_chunk(
    tmp_path, monkeypatch, django_assert_max_num_queries
):
    monkeypatch.setattr(ingestion, "CHUNK_LINES", 500)
    ingest_file(_written(tmp_path, "first.jsonl", trace(range(1))), channel="cli")
    # A known run that repeats one line 5,000 times, and 5,000 identical bad lines.
    repeated = line(runId="run-0", type="agent_action", name="poll") + b"\n"
    content = repeated * 5000 + b"x\n" * 5000
    # Ten chunks each of repeats and of bad lines; before, each chunk looked its lines up
    # once per earlier occurrence: tens of thousands of queries.
    with django_assert_max_num_queries(400):
        summary = ingest_file(_written(tmp_path, "again.jsonl", content), channel="cli")
    assert (summary.lines, summary.accepted, summary.rejected) == (10000, 5000, 5000)
    again = ingest_file(_written(tmp_path, "third.jsonl", content), channel="cli")
    # A file sent again reports its bad lines again: they are rejected, not duplicates.
    assert (again.duplicates, again.accepted, again.rejected) == (5000, 0, 5000)


def test_a_line_repeated_in_a_later_chunk_of_another_file_is_a_new_occurrence(
    tmp_path, monkeypatch
):
    """File one holds a line once; file two holds it twice, a chunk apart: its second copy
    is a line file one never had, and is kept."""
    monkeypatch.setattr(ingestion, "CHUNK_LINES", 2)
    poll = line(runId="run-0", type="agent_action", name="poll")
    ingest_file(_written(tmp_path, "one.jsonl", trace(range(1)) + poll + b"\n"), channel="cli")
    filler = [line(runId="run-0", type="agent_action", name=f"f{i}") for i in range(3)]
    two = b"\n".join([poll, *filler, poll]) + b"\n"
    summary = ingest_file(_written(tmp_path, "two.jsonl", two), channel="cli")
    assert (summary.accepted, summary.duplicates) == (4, 1)
    assert Run.objects.get(run_id="run-0").records.filter(key="poll").count() == 2


def test_occurrences_stay_exact_when_their_counts_leave_memory():
    from reviewapp.ingest.occurrences import OccurrenceCounter

    counter = OccurrenceCounter(in_memory=3)
    keys = [bytes([i % 5]) for i in range(40)]
    numbers = []
    for start in range(0, 40, 4):
        numbers += counter.number(keys[start : start + 4])
    counter.close()
    assert numbers == [i // 5 + 1 for i in range(40)]


def test_occurrences_of_digests_stay_exact_across_many_moves_out_of_memory():
    import hashlib
    import random

    from reviewapp.ingest.occurrences import OccurrenceCounter

    chooser = random.Random(5)
    keys = [hashlib.sha256(str(chooser.randrange(900)).encode()).digest()[:16] for _ in range(3000)]
    counter = OccurrenceCounter(in_memory=100)
    numbers = []
    for start in range(0, len(keys), 64):
        numbers += counter.number(keys[start : start + 64])
    counter.close()
    seen: dict[bytes, int] = {}
    expected = []
    for key in keys:
        seen[key] = seen.get(key, 0) + 1
        expected.append(seen[key])
    assert numbers == expected and max(expected) > 3


def _written(tmp_path: Path, name: str, content: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(content)
    return path


def test_batches_to_send_again_are_running_lost_or_silent_queued_unclaimed_or_failed_with_tries_left(
    tmp_path, settings
):
    """Running: lost when no session holds its lock any more (its worker died with its
    connection) after a few seconds' silence, or silent for INGEST_STALL_SECONDS whatever
    the locks."""
    settings.INGEST_STALL_SECONDS, settings.INGEST_REQUEUE_SECONDS = 60, 300
    settings.INGEST_RETRY_SECONDS, settings.INGEST_MAX_ATTEMPTS = 60, 3
    path = _written(tmp_path, "t.jsonl", trace(range(1)))
    now = timezone.now()
    made = {}
    for name, state, beat, attempts, finished in [
        ("silent", "running", now - timedelta(seconds=90), 1, None),
        ("worked-on", "running", now - timedelta(seconds=10), 1, None),
        ("worker-gone", "running", now - timedelta(seconds=10), 1, None),
        ("just-started", "running", now - timedelta(seconds=1), 1, None),
        ("unclaimed", "queued", now - timedelta(minutes=10), 0, None),
        ("waiting", "queued", now - timedelta(minutes=1), 0, None),
        ("failed-once", "failed", now, 1, now - timedelta(minutes=2)),
        ("failed-just-now", "failed", now, 1, now - timedelta(seconds=5)),
        ("failed-for-good", "failed", now, 3, now - timedelta(hours=1)),
    ]:
        batch = create_batch(channel=IngestBatch.Channel.API, path=path, file_name=name)
        IngestBatch.objects.filter(pk=batch.pk).update(
            state=state, heartbeat_at=beat, attempts=attempts, finished_at=finished
        )
        made[name] = batch
    # A worker's own connection holds the lock of the batch it works on, and of the silent one.
    with _session_holding(made["worked-on"].pk, made["silent"].pk):
        found = due(BATCHES)
    names = {batch.pk: name for name, batch in made.items()}
    assert {names[sent.args[0]] for sent in found} == {
        "silent",
        "worker-gone",
        "unclaimed",
        "failed-once",
    }
    # A batch in parts is sent again whole to a worker that sends its parts (ingest.parts).
    assert {sent.task for sent in found} == {"reviewapp.tasks.ingest_batch_task"}
    IngestBatch.objects.filter(pk=made["unclaimed"].pk).update(parts=2)
    assert Send("reviewapp.tasks.ingest_in_parts_task", (made["unclaimed"].pk,)) in due(BATCHES)


@contextmanager
def _session_holding(*batch_pks: int):
    """Another session of the test database (a worker's) holding the batches' locks."""
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    with psycopg.connect(**params, autocommit=True) as other:
        for pk in batch_pks:
            other.execute("SELECT pg_advisory_lock(%s, %s)", [int(Space.BATCH), pk])
        yield


def test_a_failed_batch_is_tried_again_from_the_api_and_the_page(
    client, reviewer, tmp_path, monkeypatch, django_capture_on_commit_callbacks
):
    raw_token = create_token(user=reviewer, name="ci")[1]
    body = trace(range(3))
    headers = {"Authorization": f"Bearer {raw_token}", "Idempotency-Key": "k-1"}
    with django_capture_on_commit_callbacks():
        first = client.post(
            reverse("api-traces"), data=body, content_type="application/x-ndjson", headers=headers
        )
    batch = IngestBatch.objects.get()
    real = ingestion._store_chunk
    monkeypatch.setattr(ingestion, "_store_chunk", _raising)
    with pytest.raises(RuntimeError):
        ingest_batch(batch)
    batch.refresh_from_db()
    assert batch.state == "failed" and batch.attempts == 1
    assert is_kept(batch)  # kept for the next try

    # The client posts again with the same key: the failed batch is queued again.
    with django_capture_on_commit_callbacks() as callbacks:
        again = client.post(
            reverse("api-traces"), data=body, content_type="application/x-ndjson", headers=headers
        )
    assert (again.status_code, again.json()["id"], again.json()["state"]) == (
        202,
        first.json()["id"],
        "queued",
    )
    assert len(callbacks) == 1 and IngestBatch.objects.count() == 1
    monkeypatch.setattr(ingestion, "_store_chunk", real)
    ingest_batch(batch)
    batch.refresh_from_db()
    assert (batch.state, batch.accepted, batch.attempts) == ("done", 12, 2)

    # A failed upload is sent again from its page by someone who may ingest.
    monkeypatch.setattr(ingestion, "_store_chunk", _raising)
    failed = create_batch(
        channel=IngestBatch.Channel.UPLOAD,
        path=_written(tmp_path, "up.jsonl", trace(range(5, 6))),
        file_name="up.jsonl",
    )
    with pytest.raises(RuntimeError):
        ingest_batch(failed)
    client.force_login(reviewer)
    page = client.get(reverse("batch-detail", args=[failed.public_id]))
    assert b"Try again" in page.content
    with django_capture_on_commit_callbacks() as callbacks:
        client.post(reverse("batch-retry", args=[failed.public_id]))
    failed.refresh_from_db()
    assert failed.state == "queued" and len(callbacks) == 1


def test_a_viewer_cannot_send_a_batch_again(client, viewer, tmp_path):
    batch = create_batch(
        channel=IngestBatch.Channel.UPLOAD,
        path=_written(tmp_path, "up.jsonl", trace(range(1))),
        file_name="up.jsonl",
    )
    IngestBatch.objects.filter(pk=batch.pk).update(state="failed")
    client.force_login(viewer)
    assert b"Try again" not in client.get(reverse("batch-detail", args=[batch.public_id])).content
    assert client.post(reverse("batch-retry", args=[batch.public_id])).status_code == 403
    assert IngestBatch.objects.get().state == "failed"


def _raising(*args, **kwargs):
    raise RuntimeError("worker lost")


def test_a_batch_whose_worker_died_in_every_try_fails_instead_of_looping(tmp_path, settings):
    """A poison batch (it kills its worker: a crash, the memory limit) is delivered again by
    the broker each time; after INGEST_MAX_ATTEMPTS tries it is failed, not tried again."""
    batch = create_batch(
        channel=IngestBatch.Channel.API,
        path=_written(tmp_path, "poison.jsonl", trace(range(2))),
        file_name="poison.jsonl",
    )
    IngestBatch.objects.filter(pk=batch.pk).update(state="running", attempts=3)
    summary = ingest_stored_batch(batch.pk)
    batch.refresh_from_db()
    assert (batch.state, batch.attempts, summary.lines) == ("failed", 3, 0)
    assert "died in each of 3 tries" in batch.error
    assert "every chunk stored before is kept" in batch.error
    assert not TraceLine.objects.exists()
    settings.INGEST_STALL_SECONDS = settings.INGEST_REQUEUE_SECONDS = 0
    settings.INGEST_RETRY_SECONDS, settings.INGEST_MAX_ATTEMPTS = 0, 3
    assert due(BATCHES) == []
