"""Deploying behind HTTPS (issue 15, defect 8): check --deploy passes on the settings
.env.example documents, cookies carry the __Host- prefix, HSTS covers subdomains, nothing
the app answers is stored by a browser, and the API takes what clients really send."""

import gzip
import io
import os
import secrets
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.handlers.wsgi import WSGIRequest
from django.urls import reverse
from django.utils import timezone

from reviewapp.ingest import pipeline
from reviewapp.ingest.batches import create_batch, failed_bodies_delete, retry_batch
from reviewapp.ingest.kept import kept_bytes_store
from reviewapp.ingest.tokens import create_token
from reviewapp.models import IngestBatch, TraceLine
from reviewapp.views.ingest_api import post_traces
from tests.ingest.test_worker import trace_body
from tests.paths import ROOT
from tests.uploads import is_kept, kept_body

pytestmark = pytest.mark.django_db


def env_example() -> dict[str, str]:
    values = {}
    for line in (ROOT / ".env.example").read_text().splitlines():
        if line.strip() and not line.startswith("#") and "=" in line:
            name, _, value = line.partition("=")
            values[name.strip()] = value.strip()
    return values


def production_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    documented = env_example()
    # The one value .env.example leaves to fill in.
    documented["SECRET_KEY"] = documented.get("SECRET_KEY") or secrets.token_urlsafe(64)
    keep = {"PATH", "HOME", "LANG"}
    return {
        **{name: value for name, value in os.environ.items() if name in keep},
        **documented,
        "DJANGO_SETTINGS_MODULE": "reviewapp.settings",
        "CROSSCHECK_VAR_DIR": str(tmp_path / "var"),
        # The test's own PostgreSQL (checks read what its version supports).
        "DATABASE_URL": os.environ["DATABASE_URL"],
        **extra,
    }


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_passes_with_the_settings_env_example_documents(tmp_path):
    done = manage(production_env(tmp_path), "check", "--deploy", "--fail-level", "WARNING")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no issues (0 silenced)" in done.stdout


def test_the_production_settings_are_what_browsers_need(tmp_path):
    script = (
        "from django.conf import settings as s; "
        "print(s.SESSION_COOKIE_NAME, s.CSRF_COOKIE_NAME, s.SESSION_COOKIE_SECURE, "
        "s.CSRF_COOKIE_SECURE, s.SECURE_HSTS_INCLUDE_SUBDOMAINS, s.SECURE_SSL_REDIRECT, "
        "s.SECURE_HSTS_SECONDS >= 31536000, s.DEBUG)"
    )
    done = manage(production_env(tmp_path), "shell", "-v", "0", "-c", script)
    assert done.stdout.split() == (
        "__Host-sessionid __Host-csrftoken True True True True True False".split()
    ), done.stderr


def test_cookies_of_a_https_sign_in_are_host_only_and_secure(client, reviewer, settings):
    settings.SESSION_COOKIE_SECURE = settings.CSRF_COOKIE_SECURE = True
    settings.SESSION_COOKIE_NAME, settings.CSRF_COOKIE_NAME = "__Host-sessionid", "__Host-csrftoken"
    client.get(reverse("login"), secure=True)
    response = client.post(
        reverse("login"), {"username": "rita", "password": "pw-rita-123"}, secure=True
    )
    assert response.status_code == 302
    for name in ("__Host-sessionid", "__Host-csrftoken"):
        cookie = response.cookies.get(name) or client.cookies[name]
        assert cookie["secure"] and cookie["path"] == "/" and not cookie["domain"], name


def test_hsts_covers_subdomains(client, settings):
    settings.SECURE_HSTS_SECONDS = 31536000
    response = client.get(reverse("login"), secure=True)
    assert response["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains"


def test_nothing_the_app_answers_is_stored_by_a_browser(client, reviewer, desk):
    token = create_token(user=reviewer, name="ci")[1]
    ticket = next(iter(desk.values()))
    client.force_login(reviewer)
    responses = {
        "page": client.get(reverse("ticket-queue")),
        "htmx": client.get(
            reverse("ticket-detail", args=[ticket.pk]), headers={"HX-Request": "true"}
        ),
        "download": client.get(reverse("ticket-handoff", args=[ticket.pk])),
        "404": client.get("/no/such/page/"),
        "api": client.get(
            reverse("api-batch", args=["00000000-0000-0000-0000-000000000000"]),
            headers={"Authorization": f"Bearer {token}"},
        ),
        "api-401": client.post(reverse("api-traces"), data=b"x", content_type="text/plain"),
    }
    client.logout()
    responses["login"] = client.get(reverse("login"))
    for name, response in responses.items():
        assert "no-store" in response.get("Cache-Control", ""), name


def _chunked_post(body: bytes, token: str, **headers: str):
    """A request as gunicorn hands one over with Transfer-Encoding: chunked: no
    Content-Length, and an input stream that gives the dechunked body."""
    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": reverse("api-traces"),
        "SERVER_NAME": "localhost",
        "SERVER_PORT": "80",
        "HTTP_HOST": "localhost",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "CONTENT_TYPE": "application/x-ndjson",
        "HTTP_TRANSFER_ENCODING": "chunked",
        "HTTP_AUTHORIZATION": f"Bearer {token}",
        **headers,
    }
    return post_traces(WSGIRequest(environ)).status_code


def test_a_chunked_body_is_taken_whole(reviewer, django_capture_on_commit_callbacks):
    token = create_token(user=reviewer, name="ci")[1]
    body = trace_body(3)
    with django_capture_on_commit_callbacks(execute=False):
        status = _chunked_post(body, token)
    assert status == 202
    batch = IngestBatch.objects.get()
    assert batch.size_bytes == len(body)
    pipeline.ingest_stored_batch(batch.pk)
    assert TraceLine.objects.count() == body.count(b"\n")


def test_a_file_name_in_utf8_is_kept_as_written(client, reviewer):
    token = create_token(user=reviewer, name="ci")[1]
    name = "träce-日本.jsonl"
    as_wsgi_gives_it = name.encode("utf-8").decode("latin-1")
    response = client.post(
        reverse("api-traces"),
        data=trace_body(1),
        content_type="application/x-ndjson",
        HTTP_AUTHORIZATION=f"Bearer {token}",
        HTTP_X_FILE_NAME=as_wsgi_gives_it,
    )
    assert response.status_code == 202
    assert response.json()["file"] == name == IngestBatch.objects.get().file_name


def _failed(tmp_path: Path, name: str, attempts: int, ago: timedelta) -> IngestBatch:
    path = tmp_path / name
    path.write_bytes(trace_body(1))
    batch = create_batch(channel=IngestBatch.Channel.API, path=path, file_name=name)
    IngestBatch.objects.filter(pk=batch.pk).update(
        state="failed", attempts=attempts, finished_at=timezone.now() - ago
    )
    batch.refresh_from_db()
    return batch


def test_kept_bodies_of_failed_batches_are_deleted_once_out_of_tries(tmp_path):
    week = timedelta(days=7)
    gone = _failed(tmp_path, "gone", 3, week + timedelta(hours=1))
    recent = _failed(tmp_path, "recent", 3, timedelta(days=1))
    retrying = _failed(tmp_path, "retrying", 1, week + timedelta(hours=1))
    cli = _failed(tmp_path, "mine", 3, week + timedelta(hours=1))
    IngestBatch.objects.filter(pk=cli.pk).update(channel="cli")
    assert failed_bodies_delete(kept_for=week, max_attempts=3) == 1
    assert not is_kept(gone)
    assert all(is_kept(b) for b in (recent, retrying, cli))
    gone.refresh_from_db()
    assert gone.stored_path == "" and "deleted" in gone.error
    assert failed_bodies_delete(kept_for=week, max_attempts=3) == 0
    # Sent again by its client, the body is kept anew and the batch tried again.
    again = kept_bytes_store(trace_body(1))
    retry_batch(gone, body=again)
    gone.refresh_from_db()
    assert (gone.state, gone.stored_path) == ("queued", again)
    assert kept_body(gone) == trace_body(1)


def test_a_gzip_batch_shows_progress_while_it_inflates(tmp_path, monkeypatch):
    # Alike lines compress a thousandfold: the compressed file is read in one go, long
    # before its lines are inflated and stored.
    body = gzip.compress(trace_body(400))
    path = tmp_path / "t.jsonl.gz"
    path.write_bytes(body)
    monkeypatch.setattr(pipeline, "CHUNK_LINES", 300)
    batch = create_batch(channel=IngestBatch.Channel.UPLOAD, path=path, file_name=path.name)
    seen: list[int] = []
    pipeline.ingest_batch(batch, progress=lambda done, size: seen.append(done * 100 // size))
    assert len(seen) >= 5
    assert seen == sorted(seen) and seen[0] < 25, seen
