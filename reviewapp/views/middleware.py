"""Middleware of the web entry point.

NoStoreMiddleware: no response of the app may be kept by a browser or a proxy (pages behind
a sign-in, the API, downloads): `Cache-Control: no-store` on every response that is not a
static file (WhiteNoise answers those before this runs)."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils.cache import add_never_cache_headers

Handler = Callable[[HttpRequest], HttpResponse]


class NoStoreMiddleware:
    def __init__(self, get_response: Handler):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        add_never_cache_headers(response)
        return response
