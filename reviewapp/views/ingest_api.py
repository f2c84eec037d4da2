"""The ingest API: POST /api/v1/traces with a bearer token; GET /api/v1/batches/<id>."""

from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, JsonResponse
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from reviewapp.accounts.roles import INGEST
from reviewapp.ingest.otel import SpanReport
from reviewapp.ingest.receive import DeliveryRefused, api_body_receive, file_name_header
from reviewapp.ingest.streams import Readable
from reviewapp.ingest.tokens import authenticate_bearer
from reviewapp.models import ApiToken, IngestBatch


def _error(status: int, message: str) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)


def token_or_error(request: HttpRequest) -> ApiToken | JsonResponse:
    """The request's bearer token, or the 401 or 403 to answer with: for every API view
    that takes a token with the ingest permission (traces, batches, the gate)."""
    token = authenticate_bearer(request.headers.get("Authorization"))
    if token is None:
        response = _error(401, "a valid bearer token is required")
        response["WWW-Authenticate"] = 'Bearer realm="crosscheck"'
        return response
    if not token.user.has_perm(INGEST):
        return _error(403, "this token's user may not ingest traces")
    return token


def _body(request: HttpRequest) -> Readable:
    """The body as a stream. A chunked body has no Content-Length, so Django reads nothing
    of it (a length of 0): read it from the server's own input, which removes the chunking
    (gunicorn does), up to the limit like any other."""
    chunked = "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower()
    if chunked and not request.META.get("CONTENT_LENGTH"):
        return request.META["wsgi.input"]
    return request


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
        "identical": batch.identical,
        "rejected": batch.rejected,
        "ignored": batch.ignored,
        # An external format's spans: read, tool calls, dropped by reason (null: none).
        "spans": _span_report_json(batch),
        "runs": batch.runs,
        "tickets": batch.tickets,
        "error": batch.error or None,
        "url": reverse("api-batch", args=[batch.public_id]),
    }


def _span_report_json(batch: IngestBatch) -> dict | None:
    if not batch.span_report:
        return None
    return SpanReport.of_json(batch.span_report).summary_json()


@csrf_exempt  # a bearer token, not a cookie, authenticates these requests
@login_not_required
@require_POST
def post_traces(request: HttpRequest) -> JsonResponse:
    token = token_or_error(request)
    if isinstance(token, JsonResponse):
        return token
    try:
        received = api_body_receive(
            _body(request),
            token=token,
            declared_length=request.headers.get("Content-Length", ""),
            idempotency_key=request.headers.get("Idempotency-Key") or None,
            file_name=file_name_header(request.headers.get("X-File-Name", "")),
        )
    except DeliveryRefused as refused:
        return _error(refused.status, str(refused))
    # 202 again for the same body under the same Idempotency-Key: the first answer.
    return JsonResponse(_batch_json(received.batch), status=202)


@login_not_required
@require_GET
def get_batch(request: HttpRequest, public_id) -> JsonResponse:
    token = token_or_error(request)
    if isinstance(token, JsonResponse):
        return token
    batch = IngestBatch.objects.filter(public_id=public_id, created_by=token.user).first()
    if batch is None:
        return _error(404, "no such batch for this token's user")
    return JsonResponse(_batch_json(batch))
