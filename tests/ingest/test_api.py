"""POST /api/v1/traces and GET /api/v1/batches/<id>, with bearer tokens."""

import gzip
import json

import pytest
from django.urls import reverse

from reviewapp.ingest.pipeline import ingest_stored_batch
from reviewapp.ingest.tokens import create_token, revoke_token
from reviewapp.models import ApiToken, AuditEvent, IngestBatch, TraceLine
from tests.paths import SPEC as SPEC_DIR
from tests.uploads import files_under, is_kept, kept_body, uploads_in

pytestmark = pytest.mark.django_db
SPEC = SPEC_DIR
BODY = (SPEC / "order-status.jsonl").read_bytes()


@pytest.fixture
def token(reviewer):
    return create_token(user=reviewer, name="ci")[1]


def post(client, body: bytes, token: str | None, **headers):
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return client.post(
        reverse("api-traces"), data=body, content_type="application/x-ndjson", headers=headers
    )


def test_tokens_are_stored_only_as_a_hash_and_audited(reviewer):
    stored, raw = create_token(user=reviewer, name="ci")
    assert raw.startswith("cc_") and raw not in stored.token_hash
    assert ApiToken.objects.filter(token_hash__contains=raw).count() == 0
    revoke_token(stored)
    revoke_token(stored)  # once revoked, nothing more happens
    events = AuditEvent.objects.order_by("id").values_list("actor", "verb", "target")
    assert list(events) == [
        (reviewer.pk, "token.created", f"API token {stored.prefix}…"),
        (reviewer.pk, "token.revoked", f"API token {stored.prefix}…"),
    ]
    assert not AuditEvent.objects.filter(data__icontains=raw).exists()


def test_a_post_is_accepted_queued_and_then_ingested(
    client, token, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as callbacks:
        response = post(client, BODY, token, **{"X-File-Name": "order-status.jsonl"})
    assert response.status_code == 202
    payload = response.json()
    assert payload["state"] == "queued" and payload["file"] == "order-status.jsonl"
    assert len(callbacks) == 1  # the worker task is sent only once the batch is committed
    batch = IngestBatch.objects.get()
    assert kept_body(batch) == BODY
    ingest_stored_batch(batch.pk)
    assert not is_kept(batch)  # every line is stored: the kept body is gone
    status = client.get(payload["url"], headers={"Authorization": f"Bearer {token}"}).json()
    assert (status["state"], status["lines"], status["accepted"], status["tickets"]) == (
        "done",
        25,
        25,
        4,
    )


def test_a_gzip_body_is_read_as_the_same_lines(client, token):
    post(client, BODY, token)
    post(client, gzip.compress(BODY), token)
    first, second = IngestBatch.objects.order_by("id")
    ingest_stored_batch(first.pk)
    assert ingest_stored_batch(second.pk).as_dict()["duplicates"] == 25


def test_no_token_a_wrong_token_or_a_revoked_token_is_refused(client, reviewer):
    assert post(client, BODY, None).status_code == 401
    assert post(client, BODY, "cc_nope").status_code == 401
    stored, raw = create_token(user=reviewer, name="old")
    revoke_token(stored)
    response = post(client, BODY, raw)
    assert response.status_code == 401 and response["WWW-Authenticate"].startswith("Bearer")
    assert IngestBatch.objects.count() == 0


def test_a_viewers_token_may_not_ingest(client, viewer):
    _, raw = create_token(user=viewer, name="read only")
    assert post(client, BODY, raw).status_code == 403


def test_an_idempotency_key_reused_with_another_body_gets_422(client, token):
    first = post(client, BODY, token, **{"Idempotency-Key": "k-1"})
    assert first.status_code == 202
    same = post(client, BODY, token, **{"Idempotency-Key": "k-1"})
    # The answer the first request got: 202, not "200 with the state of today".
    assert (same.status_code, same.json()["id"]) == (202, first.json()["id"])
    other = post(client, BODY + b"\n", token, **{"Idempotency-Key": "k-1"})
    assert other.status_code == 422
    assert "different body" in other.json()["error"]
    assert IngestBatch.objects.count() == 1


def test_an_oversized_or_empty_body_is_refused_clearly(client, token, settings, tmp_path):
    uploads_in(settings, tmp_path / "uploads")
    settings.INGEST_MAX_BYTES = 100
    response = post(client, BODY, token)
    assert response.status_code == 413 and "limit" in response.json()["error"]
    settings.INGEST_MAX_BYTES = 10**9
    assert post(client, b"", token).status_code == 400
    long_key = post(client, BODY, token, **{"Idempotency-Key": "k" * 201})
    assert long_key.status_code == 400 and "Idempotency-Key" in long_key.json()["error"]
    assert IngestBatch.objects.count() == 0
    assert files_under(settings.UPLOAD_DIR) == set()  # nothing refused was kept


def test_a_batch_is_visible_only_to_its_owner(client, token, approver):
    batch_id = post(client, BODY, token).json()["id"]
    _, other = create_token(user=approver, name="theirs")
    response = client.get(
        reverse("api-batch", args=[batch_id]), headers={"Authorization": f"Bearer {other}"}
    )
    assert response.status_code == 404


def test_the_api_needs_no_csrf_token_but_the_browser_forms_do(reviewer, token):
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    assert post(strict, BODY, token).status_code == 202
    strict.force_login(reviewer)
    assert strict.post(reverse("token-list"), {"name": "x"}).status_code == 403


def test_rejected_lines_posted_are_stored_with_their_reason(client, token):
    post(client, b'{"runId":"r","type":"agent_action"}\nnot json\n', token)
    summary = ingest_stored_batch(IngestBatch.objects.get().pk)
    assert summary.rejected == 2
    reasons = sorted(TraceLine.objects.values_list("reason", flat=True))
    assert reasons == [
        'agent_action: missing required key "name"',
        "not valid JSON: Expecting value at column 1",
    ]
    assert (
        json.loads(
            client.get(
                reverse("api-batch", args=[IngestBatch.objects.get().public_id]),
                headers={"Authorization": f"Bearer {token}"},
            ).content
        )["rejected"]
        == 2
    )


def test_a_binary_body_is_refused_with_415_and_a_gzip_of_one_too(client, token):
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    response = post(client, png, token)
    assert response.status_code == 415
    assert response.json()["error"].startswith("this is a PNG image, not a trace: send JSON Lines")
    assert post(client, gzip.compress(png), token).status_code == 415
    assert not IngestBatch.objects.exists()


def test_an_api_client_sending_a_file_again_learns_its_rejected_lines_again(client, token):
    body = b"not json\n" + BODY
    post(client, body, token)
    post(client, body, token)
    for batch in IngestBatch.objects.all():
        ingest_stored_batch(batch.pk)
    first, second = IngestBatch.objects.order_by("id")
    assert (first.rejected, second.rejected, second.duplicates) == (1, 1, first.accepted)
    status = client.get(
        reverse("api-batch", args=[second.public_id]), headers={"Authorization": f"Bearer {token}"}
    ).json()
    assert (status["rejected"], status["ignored"]) == (1, 0)


def test_the_scheme_of_the_authorization_header_is_case_insensitive(client, token):
    """RFC 9110, 11.1: `bearer` is the Bearer scheme."""
    for scheme in ("bearer", "BEARER", "beArer"):
        response = client.post(
            reverse("api-traces"),
            data=BODY,
            content_type="application/x-ndjson",
            headers={"Authorization": f"{scheme}  {token}"},
        )
        assert response.status_code == 202, scheme
    for header in (f"Bearer{token}", f"Basic {token}", "bearer", ""):
        assert post(client, BODY, None, Authorization=header).status_code == 401


def test_headers_the_document_limits_are_refused_past_their_limit(client, token):
    name = "ä" * 255  # characters, as the client wrote them in UTF-8
    response = post(client, BODY, token, **{"X-File-Name": name.encode().decode("latin-1")})
    assert response.status_code == 202 and response.json()["file"] == name
    response = post(client, BODY, token, **{"X-File-Name": "a" * 256})
    assert response.status_code == 400
    assert response.json()["error"] == "X-File-Name is longer than 255 characters"
    # A NUL, which PostgreSQL cannot store, in the key that is stored: refused, naming it.
    response = post(client, BODY, token, **{"Idempotency-Key": "k\x00"})
    assert response.status_code == 400
    assert response.json()["error"].startswith("Idempotency-Key contains a NUL character")
    assert IngestBatch.objects.count() == 1


def test_every_error_of_an_api_url_is_json(client, token):
    auth = {"Authorization": f"Bearer {token}"}
    for url in ("/api/v1/batches/null,null", "/api/v1/nothing", "/api/"):
        response = client.get(url, headers=auth)
        assert response.status_code == 404, url
        assert response["Content-Type"] == "application/json"
        assert response.json() == {"error": f"no such API URL: {url}"}
    response = client.get(reverse("api-traces"), headers=auth)
    assert (response.status_code, response["Allow"]) == (405, "POST")
    assert response.json() == {"error": "GET is not allowed here; allowed: POST"}
    # The pages keep their HTML 404.
    assert client.get("/no/such/page/")["Content-Type"].startswith("text/html")
