"""Middleware of the web entry point.

AuditChannelMiddleware: the audit trail says whether the web pages or the API did it.
NoStoreMiddleware: no response of the app may be kept by a browser or a proxy (pages behind
a sign-in, the API, downloads): `Cache-Control: no-store` on every response that is not a
static file (WhiteNoise answers those before this runs)."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils.cache import add_never_cache_headers

from reviewapp.accounts.audit import Channel, audit_channel

Handler = Callable[[HttpRequest], HttpResponse]


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
        channel = Channel.API if request.path.startswith("/api/") else Channel.WEB
        with audit_channel(channel):
            return self.get_response(request)
