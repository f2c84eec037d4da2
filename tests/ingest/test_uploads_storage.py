"""Work that outgrows one machine: bodies wait for their worker in an S3-compatible bucket.

The tests start an S3-compatible server on this machine (moto's S3 over HTTP, on a free
loopback port). The web process (the Django test client, here) and a real Celery worker
each have a var/ and an upload folder of their own, as on two machines: what the web
receives, the worker reaches only through the bucket (settings: UPLOAD_S3_*)."""

from __future__ import annotations

import gzip
import io
import os
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from moto.server import ThreadedMotoServer

from reviewapp.ingest.kept import kept_bytes_store, kept_open, uploads
from reviewapp.ingest.tokens import create_token
from reviewapp.models import IngestBatch, IngestPart, Run, TraceLine
from reviewapp.settings import uploads_storage
from tests.ingest.test_worker import post_api, trace_body
from tests.uploads import files_under
from tests.workers import celery_worker, wait_for

BUCKET = "crosscheck-uploads"


@pytest.fixture(scope="module")
def s3_env() -> Iterator[dict[str, str]]:
    """An S3-compatible server on a free loopback port, one empty bucket on it, and the
    environment that points the uploads storage at that bucket."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    env = {
        "UPLOAD_S3_BUCKET": BUCKET,
        "UPLOAD_S3_ENDPOINT_URL": f"http://{host}:{port}",
        "UPLOAD_S3_REGION": "us-east-1",
        "UPLOAD_S3_ACCESS_KEY_ID": "crosscheck-test",
        "UPLOAD_S3_SECRET_ACCESS_KEY": "crosscheck-test-secret",
        "UPLOAD_S3_PREFIX": "kept",
    }
    bucket_client(env).create_bucket(Bucket=BUCKET)
    try:
        yield env
    finally:
        server.stop()


def bucket_client(env: dict[str, str]):
    return boto3.client(
        "s3",
        endpoint_url=env["UPLOAD_S3_ENDPOINT_URL"],
        region_name=env["UPLOAD_S3_REGION"],
        aws_access_key_id=env["UPLOAD_S3_ACCESS_KEY_ID"],
        aws_secret_access_key=env["UPLOAD_S3_SECRET_ACCESS_KEY"],
    )


def keys(env: dict[str, str]) -> list[str]:
    listed = bucket_client(env).list_objects_v2(Bucket=BUCKET)
    return sorted(item["Key"] for item in listed.get("Contents", []))


@pytest.fixture
def web_uses_the_bucket(s3_env, settings, tmp_path) -> Path:
    """This process (the web) receives into a folder of its own and keeps in the bucket,
    with the uploads storage the same environment gives a worker."""
    folder = tmp_path / "web" / "uploads"
    settings.UPLOAD_DIR = folder
    settings.STORAGES = {**settings.STORAGES, "uploads": uploads_storage(s3_env, folder)}
    return folder


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_posted_body_is_ingested_by_a_worker_on_another_machine_through_the_bucket(
    s3_env, web_uses_the_bucket, client, reviewer, settings, tmp_path, django_db_blocker
):
    # A body split in two parts, each read from the bucket by a worker of its own; and a
    # gzip body, whose meter reads its trailer (a seek from the end) before its lines.
    settings.INGEST_PARTS, settings.INGEST_PARTS_MIN_BYTES = 2, 64 * 1024
    settings.INGEST_INLINE_MAX_BYTES = 0  # else nothing under it is split
    plain, zipped = trace_body(400), gzip.compress(trace_body(40).replace(b"run-", b"gz-"))
    assert len(plain) > 64 * 1024
    _, token = create_token(user=reviewer, name="ci")
    ids = [post_api(client, body, token).json()["id"] for body in (plain, zipped)]
    batches = [IngestBatch.objects.get(public_id=batch_id) for batch_id in ids]
    assert [batch.parts for batch in batches] == [2, 1]

    # Queued with no worker yet: each body is in the bucket under its batch's name, and
    # nothing of it is left in the web's folder.
    assert all(batch.state == "queued" for batch in batches)
    assert keys(s3_env) == sorted(f"kept/{batch.stored_path}" for batch in batches)
    assert not any(os.path.isabs(batch.stored_path) for batch in batches)
    assert files_under(web_uses_the_bucket) == set()

    # The worker: another var/ and another upload folder, the same database, broker and
    # bucket (DATABASE_URL and REDIS_URL come with this process's environment).
    worker_var = tmp_path / "worker" / "var"
    worker_env = {
        **s3_env,
        "CROSSCHECK_VAR_DIR": str(worker_var),
        "UPLOAD_DIR": str(worker_var / "uploads"),
    }
    log_path = tmp_path / "worker.log"
    with celery_worker(django_db_blocker, log_path, concurrency=2, env=worker_env):
        done = [
            wait_for(
                lambda batch_id=batch_id: IngestBatch.objects.filter(
                    public_id=batch_id, state__in=("done", "failed")
                ).first(),
                180,
                "the worker to ingest the batch",
            )
            for batch_id in ids
        ]
    assert [batch.state for batch in done] == ["done", "done"], log_path.read_text()[-3000:]
    big, small = done
    assert (big.lines, big.accepted, big.runs) == (400 * 6, 400 * 6, 400)
    assert list(IngestPart.objects.filter(batch=big).values_list("state", flat=True)) == [
        "done",
        "done",
    ]
    assert (small.lines, small.accepted, small.runs) == (40 * 6, 40 * 6, 40)
    assert Run.objects.count() == 440
    assert TraceLine.objects.count() == 440 * 6
    # Every line is stored: the kept bodies are deleted from the bucket, and the worker
    # kept nothing in a folder of its own.
    assert keys(s3_env) == []
    assert files_under(worker_var / "uploads") == set()


def test_a_kept_body_is_read_from_the_bucket_as_a_seekable_stream(web_uses_the_bucket):
    body = os.urandom(3 * 1024 * 1024 + 17)
    name = kept_bytes_store(body)
    with kept_open(name) as stream:
        assert stream.read(5) == body[:5]
        assert stream.seek(-4, io.SEEK_END) == len(body) - 4
        assert stream.read() == body[-4:]
        stream.seek(0)
        chunks = iter(lambda: stream.read(1024 * 1024), b"")
        assert b"".join(chunks) == body
        assert stream.tell() == len(body)
        stream.seek(1000)
        assert stream.read(10) == body[1000:1010] and stream.tell() == 1010
    uploads().delete(name)
    with pytest.raises(FileNotFoundError), kept_open(name):
        pass
