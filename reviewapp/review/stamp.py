"""Naming the data a page shows, so that what is cached under the name is never stale.

The review desk caches counts and page fragments (per process, or in Redis with CACHE_URL)
under a DataStamp of the tickets, judgements and policy versions they were computed from."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.core.cache import cache
from django.db import connection

from reviewapp.models import AuditEvent, Judgement, PolicyVersion, Ticket
from reviewapp.review.errors import TicketActionError

CACHE_SECONDS = 60


@dataclass(frozen=True)
class DataStamp:
    """The tickets, judgements and policy versions as they are now, named in one short
    statement.

    Its text changes whenever a ticket is opened (a new id) or changed (every change
    appends an audit event), a run is judged again (what a ticket's row says of it), or a
    policy version is published: what is cached under it is never stale. A row committed
    out of id order (two ingest workers at once) is the only miss, and CACHE_SECONDS bounds
    it. A page's forms send it back, so that a bulk change applies to the tickets as that
    page showed them (see revisions_as_seen)."""

    newest_ticket: int
    newest_event: int
    newest_judgement: int
    # 0 until a version is published; only tickets judged under an older one can be settled.
    newest_policy_number: int

    @property
    def text(self) -> str:
        return "-".join(
            str(n)
            for n in (
                self.newest_ticket,
                self.newest_event,
                self.newest_judgement,
                self.newest_policy_number,
            )
        )

    @classmethod
    def from_text(cls, text: str) -> DataStamp:
        parts = text.split("-")
        if len(parts) != 4 or not all(part.isascii() and part.isdecimal() for part in parts):
            raise TicketActionError("the page was too old or damaged: load it again and retry")
        return cls(*(int(part) for part in parts))


def data_stamp() -> DataStamp:
    newest = ", ".join(
        f"(SELECT MAX({column}) FROM {model._meta.db_table})"
        for model, column in (
            (Ticket, "id"),
            (AuditEvent, "id"),
            (Judgement, "id"),
            (PolicyVersion, "number"),
        )
    )
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {newest}")
        return DataStamp(*(value or 0 for value in cursor.fetchone()))


def cached(key: str, compute: Callable[[], Any]) -> Any:
    # Counting reads every filtered ticket, the slow part of the queue at 100,000 tickets.
    found = cache.get(key)
    if found is None:
        found = compute()
        cache.set(key, found, CACHE_SECONDS)
    return found
