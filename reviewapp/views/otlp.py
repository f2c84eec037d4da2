"""The OTLP/HTTP traces receiver: POST /v1/traces with an ingest API bearer token, so that
an agent framework exports straight to Crosscheck (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from reviewapp.accounts.roles import INGEST
from reviewapp.ingest.otlp import Answer, encoding_of, otlp_receive, refusal
from reviewapp.ingest.tokens import authenticate_bearer


def _respond(answer: Answer) -> HttpResponse:
    return HttpResponse(answer.body, status=answer.status, content_type=answer.content_type)


@csrf_exempt  # a bearer token, not a cookie, authenticates these requests
@login_not_required
def traces(request: HttpRequest) -> HttpResponse:
    encoding = encoding_of(request.headers.get("Content-Type", ""))
    if request.method != "POST":
        response = _respond(refusal(405, "POST OTLP trace export requests here", encoding))
        response["Allow"] = "POST"
        return response
    token = authenticate_bearer(request.headers.get("Authorization"))
    if token is None:
        response = _respond(refusal(401, "a valid bearer token is required", encoding))
        response["WWW-Authenticate"] = 'Bearer realm="crosscheck"'
        return response
    if not token.user.has_perm(INGEST):
        return _respond(refusal(403, "this token's user may not ingest traces", encoding))
    return _respond(
        otlp_receive(
            request,
            token=token,
            content_type=request.headers.get("Content-Type", ""),
            content_encoding=request.headers.get("Content-Encoding", ""),
            declared_length=request.headers.get("Content-Length", ""),
        )
    )
