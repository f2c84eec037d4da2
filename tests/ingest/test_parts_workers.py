"""A delivery split into parts on real Celery workers (two pool processes, the real Redis
broker, the test database): the parts are stored at once, and the batch ends equal to a
serial ingest of the same file."""

import json
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command

from benchmarks.engine import generate_lines
from reviewapp.ingest.pipeline import ingest_file
from reviewapp.ingest.tokens import create_token
from reviewapp.models import IngestBatch, IngestPart
from tests.ingest.test_parts import empty_database, mixed_trace, snapshot
from tests.ingest.test_worker import post_api
from tests.uploads import is_kept
from tests.workers import celery_worker, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def workers(django_db_setup, django_db_blocker, tmp_path_factory):
    """Two pool processes, on the test database (made before them)."""
    log_path = tmp_path_factory.mktemp("workers") / "worker.log"
    extra = {"UPLOAD_DIR": str(settings.UPLOAD_DIR)}
    with celery_worker(django_db_blocker, log_path, concurrency=2, env=extra) as process:
        yield process, log_path


def generated_trace(path: Path, runs: int) -> Path:
    path.write_bytes(b"\n".join(generate_lines(runs, seed=11)) + b"\n")
    return path


def test_the_command_splits_a_file_across_workers_and_ends_as_a_serial_ingest(
    workers, tmp_path, capsys
):
    trace = tmp_path / "trace.jsonl"
    trace.write_bytes(
        mixed_trace(seed=5) + generated_trace(tmp_path / "more.jsonl", 300).read_bytes()
    )
    serial = ingest_file(trace, channel=IngestBatch.Channel.CLI)
    expected = snapshot(IngestBatch.objects.get(pk=max(serial.batch_pks)))
    empty_database()
    capsys.readouterr()

    call_command("ingest", str(trace), "--parts", "2", "--json", "--stages")

    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    batch = IngestBatch.objects.get()
    got = snapshot(batch)
    for key in expected:
        assert got[key] == expected[key], key
    assert printed["lines"] == batch.lines == serial.lines
    assert set(printed["stages"]) >= {"decode", "judge", "write", "commit"}
    parts = list(IngestPart.objects.filter(batch=batch).order_by("index"))
    assert [part.state for part in parts] == ["done", "done"]
    assert all(part.lines > 1000 for part in parts), "both parts had a share of the runs"
    # At once: each part started before the other ended.
    assert parts[0].started_at < parts[1].finished_at and parts[1].started_at < parts[0].finished_at


def test_a_large_posted_body_is_ingested_in_parts(workers, client, reviewer, tmp_path, settings):
    settings.INGEST_PARTS, settings.INGEST_PARTS_MIN_BYTES = 2, 1024
    settings.INGEST_INLINE_MAX_BYTES = 0  # what is ingested while the client waits is never split
    body = generated_trace(tmp_path / "body.jsonl", 200).read_bytes()
    _, token = create_token(user=reviewer, name="ci")
    batch_id = post_api(client, body, token).json()["id"]
    batch = wait_for(
        lambda: IngestBatch.objects.filter(public_id=batch_id, state="done").first(),
        120,
        "the batch to finish",
    )
    assert batch.parts == 2 and batch.bytes_done == batch.size_bytes
    assert batch.lines == batch.accepted == body.count(b"\n") and batch.runs == 200
    assert list(batch.part_rows.values_list("state", flat=True)) == ["done", "done"]
    assert not is_kept(batch), "the kept body is deleted once stored"


def test_the_command_refuses_fewer_than_one_part(tmp_path, capsys):
    trace = generated_trace(tmp_path / "t.jsonl", 1)
    with pytest.raises(SystemExit):
        call_command("ingest", str(trace), "--parts", "0")
    assert "--parts must be at least 1" in capsys.readouterr().err
    assert not IngestBatch.objects.exists()
