"""The ingest API: POST /api/v1/traces with a bearer token; GET /api/v1/batches/<id>."""

from __future__ import annotations

import hashlib
import uuid
from contextlib import suppress

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.db import IntegrityError, transaction
from django.http import HttpRequest, JsonResponse
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from reviewapp.accounts.roles import INGEST
from reviewapp.ingest.pipeline import (
    BatchNotRetryable,
    create_batch,
    retry_batch,
    send_to_worker,
    upload_dir,
)
from reviewapp.ingest.tokens import authenticate_bearer
from reviewapp.models import ApiToken, IngestBatch


class BodyTooLarge(Exception):
    pass


def _error(status: int, message: str) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)


def _token_or_error(request: HttpRequest) -> ApiToken | JsonResponse:
    token = authenticate_bearer(request.headers.get("Authorization"))
    if token is None:
        response = _error(401, "a valid bearer token is required")
        response["WWW-Authenticate"] = 'Bearer realm="crosscheck"'
        return response
    if not token.user.has_perm(INGEST):
        return _error(403, "this token's user may not ingest traces")
    return token


def _batch_json(batch: IngestBatch) -> dict:
    return {
        "id": str(batch.public_id),
        "state": batch.state,
        "file": batch.file_name,
        "bytes": batch.size_bytes,
        "progress": batch.progress_percent,
        "lines": batch.lines,
        "accepted": batch.accepted,
        "duplicates": batch.duplicates,
        "rejected": batch.rejected,
        "runs": batch.runs,
        "tickets": batch.tickets,
        "error": batch.error or None,
        "url": reverse("api-batch", args=[batch.public_id]),
    }


def _save_body(request: HttpRequest):
    """Stream the body to the upload folder, hashing it; never more than the limit."""
    target = upload_dir() / uuid.uuid4().hex
    digest, size = hashlib.sha256(), 0
    try:
        with target.open("wb") as out:
            while block := request.read(1 << 20):
                size += len(block)
                if size > settings.INGEST_MAX_BYTES:
                    raise BodyTooLarge
                digest.update(block)
                out.write(block)
    except BodyTooLarge:
        target.unlink(missing_ok=True)
        raise
    return target, digest.hexdigest(), size


@csrf_exempt  # a bearer token, not a cookie, authenticates these requests
@login_not_required
@require_POST
def post_traces(request: HttpRequest) -> JsonResponse:
    token = _token_or_error(request)
    if isinstance(token, JsonResponse):
        return token
    declared = request.headers.get("Content-Length", "")
    if declared.isascii() and declared.isdecimal() and int(declared) > settings.INGEST_MAX_BYTES:
        return _error(413, f"body is over the {settings.INGEST_MAX_BYTES:,}-byte limit")
    # Checked before the body is kept: a refused request leaves nothing on disk.
    key = request.headers.get("Idempotency-Key") or None
    if key is not None and len(key) > 200:
        return _error(400, "Idempotency-Key is longer than 200 characters")
    try:
        path, sha256, size = _save_body(request)
    except BodyTooLarge:
        return _error(413, f"body is over the {settings.INGEST_MAX_BYTES:,}-byte limit")
    if size == 0:
        path.unlink(missing_ok=True)
        return _error(400, "empty body: send JSON Lines (optionally gzip-compressed)")
    name = request.headers.get("X-File-Name") or f"api-{sha256[:12]}.jsonl"
    try:
        with transaction.atomic():
            batch = create_batch(
                channel=IngestBatch.Channel.API,
                path=path,
                file_name=name,
                digest=(sha256, size),
                user=token.user,
                token=token,
                idempotency_key=key,
            )
            send_to_worker(batch)
    except IntegrityError:
        earlier = IngestBatch.objects.get(api_token=token, idempotency_key=key)
        if earlier.content_sha256 != sha256:
            path.unlink(missing_ok=True)
            return _error(422, "this Idempotency-Key was used with a different body")
        if earlier.state == IngestBatch.State.FAILED:
            with suppress(BatchNotRetryable):
                retry_batch(earlier, body=path)
        path.unlink(missing_ok=True)
        earlier.refresh_from_db()
        # The answer the first request got: accepted, with where to follow it.
        return JsonResponse(_batch_json(earlier), status=202)
    return JsonResponse(_batch_json(batch), status=202)


@login_not_required
@require_GET
def get_batch(request: HttpRequest, public_id) -> JsonResponse:
    token = _token_or_error(request)
    if isinstance(token, JsonResponse):
        return token
    batch = IngestBatch.objects.filter(public_id=public_id, created_by=token.user).first()
    if batch is None:
        return _error(404, "no such batch for this token's user")
    return JsonResponse(_batch_json(batch))
