"""The upload page, batch pages and token management in the browser's terms."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from reviewapp.accounts.roles import account_raw_access_set
from reviewapp.models import ApiToken, IngestBatch, TraceLine
from tests.uploads import files_under

pytestmark = pytest.mark.django_db
GOOD = (
    b'{"runId":"r1","type":"tool_observation","observationId":"o1","source":"a","status":"paid"}\n'
)


def upload(client, *files):
    return client.post(reverse("batch-list"), {"files": list(files)}, follow=True)


def test_small_files_are_ingested_at_once_several_at_a_time(client, reviewer, admin_user):
    client.force_login(reviewer)
    response = upload(
        client,
        SimpleUploadedFile("a.jsonl", GOOD),
        SimpleUploadedFile("b.jsonl", b"<script>alert(1)</script>\n"),
    )
    assert response.status_code == 200
    assert IngestBatch.objects.filter(state="done").count() == 2
    body = response.content.decode()
    a_batch = IngestBatch.objects.get(file_name="a.jsonl")
    assert "a.jsonl: 1 line, 1 accepted, 0 duplicates, 0 rejected; 0 tickets opened." in body
    assert (
        f'<a href="{reverse("batch-detail", args=[a_batch.public_id])}">See the batch</a>' in body
    )
    batch = IngestBatch.objects.get(file_name="b.jsonl")
    detail = client.get(reverse("batch-detail", args=[batch.public_id])).content.decode()
    # A rejected line is not on the page: read on purpose, with the raw data permission.
    assert "alert(1)" not in detail and "raw data permission" in detail
    account_raw_access_set(reviewer.username, True, actor=admin_user, reason="bad lines")
    detail = client.get(reverse("batch-detail", args=[batch.public_id])).content.decode()
    assert "alert(1)" not in detail and 'name="reason"' in detail
    line = TraceLine.objects.get(batch=batch)
    shown = client.post(reverse("line-raw", args=[line.pk]), {"reason": "why rejected"})
    # Trace content is always escaped.
    body = shown.content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body and "<script>alert(1)" not in body


def test_an_empty_file_among_several_is_named_and_the_others_are_ingested(client, reviewer):
    client.force_login(reviewer)
    body = upload(
        client,
        SimpleUploadedFile("empty.jsonl", b""),
        SimpleUploadedFile("a<b>.jsonl", GOOD),
    ).content.decode()
    assert "empty.jsonl: the file is empty; nothing to ingest." in body
    assert "a&lt;b&gt;.jsonl: 1 line, 1 accepted" in body  # a file's name is escaped
    assert list(IngestBatch.objects.values_list("file_name", flat=True)) == ["a<b>.jsonl"]


def test_a_running_batch_shows_what_it_has_stored_so_far(client, reviewer, tmp_path):
    from tests.seeding import desk_lines, ingest_lines

    ingest_lines(tmp_path, desk_lines(3))
    batch = IngestBatch.objects.get()
    # As a worker sees it, half-way through its file.
    IngestBatch.objects.filter(pk=batch.pk).update(
        state="running", bytes_done=batch.size_bytes // 2
    )
    client.force_login(reviewer)
    body = client.get(reverse("batch-progress", args=[batch.public_id])).content.decode()
    accepted = batch.trace_lines.filter(accepted=True).count()
    tickets = batch.opened_tickets.count()
    assert accepted and tickets
    assert f"So far: {accepted} lines accepted,\n    0 rejected · {tickets} tickets opened" in body
    assert 'id="finishing"' not in body
    # Read to its end, it says what it still does while its bar stands at 99%.
    IngestBatch.objects.filter(pk=batch.pk).update(bytes_done=batch.size_bytes)
    body = client.get(reverse("batch-progress", args=[batch.public_id])).content.decode()
    assert "99%" in body and "Every line is read: judging the runs it touched" in body


def test_large_files_go_to_a_worker_with_a_progress_bar(
    client, reviewer, settings, django_capture_on_commit_callbacks
):
    settings.INGEST_INLINE_MAX_BYTES = 10
    client.force_login(reviewer)
    with django_capture_on_commit_callbacks() as callbacks:
        upload(client, SimpleUploadedFile("big.jsonl", GOOD * 5))
    assert len(callbacks) == 1
    batch = IngestBatch.objects.get()
    assert batch.state == "queued"
    progress = client.get(
        reverse("batch-progress", args=[batch.public_id]), headers={"HX-Request": "true"}
    )
    assert b'hx-trigger="every 1s"' in progress.content and b"<html" not in progress.content


def test_a_small_gzip_goes_to_a_worker_whatever_it_inflates_to(
    client, reviewer, django_capture_on_commit_callbacks
):
    import gzip

    client.force_login(reviewer)
    with django_capture_on_commit_callbacks() as callbacks:
        upload(client, SimpleUploadedFile("small.jsonl.gz", gzip.compress(GOOD)))
    assert len(callbacks) == 1
    assert IngestBatch.objects.get().state == "queued"


def test_a_finished_batch_stops_polling(client, reviewer):
    client.force_login(reviewer)
    upload(client, SimpleUploadedFile("a.jsonl", GOOD))
    batch = IngestBatch.objects.get()
    progress = client.get(
        reverse("batch-progress", args=[batch.public_id]), headers={"HX-Request": "true"}
    )
    assert b"hx-trigger" not in progress.content and b"100%" in progress.content


def test_viewers_read_batches_but_may_not_upload_or_hold_tokens(client, viewer):
    client.force_login(viewer)
    assert client.get(reverse("batch-list")).status_code == 200
    assert upload(client, SimpleUploadedFile("a.jsonl", GOOD)).status_code == 403
    assert client.get(reverse("token-list")).status_code == 403
    assert IngestBatch.objects.count() == 0


def test_a_token_is_shown_once_and_can_be_revoked(client, reviewer):
    client.force_login(reviewer)
    response = client.post(reverse("token-list"), {"name": "nightly"})
    assert "no-store" in response["Cache-Control"]  # the one page with the token in it
    created = response.content.decode()
    token = ApiToken.objects.get()
    assert f"{token.prefix}" in created and 'id="new-token"' in created
    assert 'id="new-token"' not in client.get(reverse("token-list")).content.decode()
    client.post(reverse("token-revoke", args=[token.pk]))
    token.refresh_from_db()
    assert token.revoked_at is not None


def test_an_oversized_upload_is_refused_and_the_others_kept(client, reviewer, settings):
    settings.INGEST_MAX_BYTES = 200
    client.force_login(reviewer)
    response = upload(
        client, SimpleUploadedFile("big.jsonl", GOOD * 5), SimpleUploadedFile("ok.jsonl", GOOD)
    )
    assert "big.jsonl: over the 200-byte limit; not ingested." in response.content.decode()
    assert list(IngestBatch.objects.values_list("file_name", flat=True)) == ["ok.jsonl"]


def test_an_oversized_upload_is_refused_as_it_arrives_not_spooled_first(rf, settings, monkeypatch):
    from collections import Counter

    from django.core.files.uploadhandler import TemporaryFileUploadHandler

    from reviewapp.ingest.uploads import refused_uploads

    settings.INGEST_MAX_BYTES = 1000
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 10  # every file goes to a temporary file
    spooled: Counter[str] = Counter()
    real = TemporaryFileUploadHandler.receive_data_chunk

    def counting(self, raw_data, start):
        spooled[self.file_name] += len(raw_data)
        return real(self, raw_data, start)

    monkeypatch.setattr(TemporaryFileUploadHandler, "receive_data_chunk", counting)
    big, small = SimpleUploadedFile("huge.jsonl", GOOD * 100), SimpleUploadedFile("ok.jsonl", GOOD)
    request = rf.post("/ingest/", {"files": [big, small]})
    assert [f.name for f in request.FILES.getlist("files")] == ["ok.jsonl"]
    assert refused_uploads(request) == ["huge.jsonl"]
    assert spooled["huge.jsonl"] <= settings.INGEST_MAX_BYTES < len(GOOD * 100)
    assert spooled["ok.jsonl"] == len(GOOD)


PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4


def test_a_binary_file_is_refused_as_such_and_nothing_is_kept(client, reviewer, settings):
    client.force_login(reviewer)
    kept_before = files_under(settings.UPLOAD_DIR)
    response = upload(
        client, SimpleUploadedFile("chart.png", PNG), SimpleUploadedFile("a.jsonl", GOOD)
    )
    body = response.content.decode()
    assert "chart.png: this is a PNG image, not a trace" in body
    assert list(IngestBatch.objects.values_list("file_name", flat=True)) == ["a.jsonl"]
    noise = bytes(range(256)) * 64  # no magic number: bytes that text never holds
    upload(client, SimpleUploadedFile("noise.jsonl", noise))
    assert not IngestBatch.objects.filter(file_name="noise.jsonl").exists()
    assert files_under(settings.UPLOAD_DIR) == kept_before  # nothing of either was kept
