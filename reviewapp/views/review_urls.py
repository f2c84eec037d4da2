"""The queue's URLs with its filters, shared by the desk's views."""

from __future__ import annotations

from django.urls import reverse
from django.utils.http import urlencode

from reviewapp.review import queue


def queue_url(filters: queue.QueueFilters, **overrides: str) -> str:
    return url_with(reverse("ticket-queue"), filters.as_params(), overrides)


def url_with(base: str, params: dict[str, str], overrides: dict[str, str]) -> str:
    """`base` with the filters' `params`, some of them set or, given "", cleared."""
    params = {name: value for name, value in {**params, **overrides}.items() if value}
    return base + (f"?{urlencode(params)}" if params else "")
