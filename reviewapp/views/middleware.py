"""Middleware of the web entry point.

AuditChannelMiddleware: the audit trail says whether the web pages or the API did it.
NoStoreMiddleware: no response of the app may be kept by a browser or a proxy (pages behind
a sign-in, the API, downloads): `Cache-Control: no-store` on every response that is not a
static file (WhiteNoise answers those before this runs).
ApiErrorsAsJsonMiddleware: every error of an /api/ URL is JSON, those Django answers itself
included."""

from __future__ import annotations

import json
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils.cache import add_never_cache_headers

from reviewapp.accounts.audit import Channel, audit_channel

Handler = Callable[[HttpRequest], HttpResponse]
API_PATH = "/api/"
JSON = "application/json"


class ApiErrorsAsJsonMiddleware:
    """An API client reads {"error": ...} from every error of an /api/ URL, as the API's
    views answer: also from those Django answers with an HTML page (a URL no route matches,
    a method not allowed, a 500). Changed in place, so that the headers set by the other
    middleware (the CSP, Allow) stay."""

    def __init__(self, get_response: Handler):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (
            request.path.startswith(API_PATH)
            and response.status_code >= 400
            and not response.streaming
            and not response.get("Content-Type", "").startswith(JSON)
        ):
            response.content = json.dumps({"error": _error_text(request, response)}).encode()
            response["Content-Type"] = JSON
            if response.has_header("Content-Length"):
                response["Content-Length"] = str(len(response.content))
        return response


def _error_text(request: HttpRequest, response: HttpResponse) -> str:
    if response.status_code == 404:
        return f"no such API URL: {request.path}"
    if response.status_code == 405:
        return f"{request.method} is not allowed here; allowed: {response.get('Allow', '')}"
    return response.reason_phrase.lower()


class NoStoreMiddleware:
    def __init__(self, get_response: Handler):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        add_never_cache_headers(response)
        return response


class AuditChannelMiddleware:
    """What a request changes is recorded in the audit trail as done through the web pages,
    or through the API for its paths (the command line says so itself)."""

    def __init__(self, get_response: Handler):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        channel = Channel.API if request.path.startswith(API_PATH) else Channel.WEB
        with audit_channel(channel):
            return self.get_response(request)
