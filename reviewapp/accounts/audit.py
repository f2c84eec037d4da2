"""The audit trail: who did what, through which channel, in a hash chain.

Every service records its events here (audit_record, audit_records). The channel (web
pages, the HTTP API, the command line, or the system) is set by the entry point around what
it runs (audit_channel): the web's middleware, the policy command.

The chain: each event has a place (`position` 1, 2, 3...), the previous event's hash and its
own, the SHA-256 of its content and that previous hash (content_text says exactly what is
hashed). A trigger writes them as the row is inserted, under a lock on the chain's head row
(models.guards.audit_chain), whatever inserts it. audit_verify() recomputes everything in Python and names
the first event where the chain breaks: an edited event no longer matches its hash, a deleted
one leaves a gap, reordered ones no longer link, and the last ones deleted leave the head
pointing past the end. (Whoever can rewrite the whole table can also rewrite the whole
chain: keep the head that `manage.py audit verify` prints somewhere else, and pass it back
with --expect to prove nothing before it changed.)"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from reviewapp.models import AuditChain, AuditEvent

Channel = AuditEvent.Channel
_channel: ContextVar[str] = ContextVar("audit_channel", default=Channel.SYSTEM)


@contextmanager
def audit_channel(channel: str) -> Iterator[None]:
    """Events recorded inside are credited to this channel."""
    token = _channel.set(channel)
    try:
        yield
    finally:
        _channel.reset(token)


def current_channel() -> str:
    return _channel.get()


def audit_record(
    *, actor: Any, verb: str, target: str = "", ticket: Any = None, **data: Any
) -> AuditEvent:
    """Append one event, credited to the current channel."""
    event = AuditEvent(actor=actor, verb=verb, target=target, ticket=ticket, data=data)
    audit_records([event])
    return event


def audit_records(events: Sequence[AuditEvent]) -> None:
    """Append events in this order, each credited to the current channel."""
    if not events:
        return
    now = timezone.now()
    for event in events:
        event.channel = event.channel or current_channel()
        event.created_at = now
    AuditEvent.objects.bulk_create(events)  # the trigger chains them


def content_text(event: AuditEvent, data_text: str) -> str:
    """What an event's hash covers (models.guards.AUDIT_HASHED, in Python): each field as
    "<length>:<text>", the data as the database writes it out, the previous hash last."""
    created = event.created_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    fields = (
        str(event.position),
        created,
        "" if event.actor_id is None else str(event.actor_id),
        event.verb,
        "" if event.ticket_id is None else str(event.ticket_id),
        event.target,
        event.channel,
        data_text,
        event.prev_hash,
    )
    return "".join(f"{len(text)}:{text}" for text in fields)


def event_hash(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


@dataclass
class ChainReport:
    """What audit_verify found: how many events it checked, the head, and each break."""

    events: int = 0
    head_position: int = 0
    head_hash: str = ""
    problems: list[str] = field(default_factory=list)

    @property
    def intact(self) -> bool:
        return not self.problems


def audit_verify(*, expect: tuple[int, str] | None = None, limit: int = 20) -> ChainReport:
    """Walk the chain in order and recompute every hash; name the first `limit` breaks.
    `expect`: a head (position, hash) kept elsewhere earlier, which must still be in it."""
    report = ChainReport()
    previous_hash, previous_position = "", 0
    expected_found = expect is None
    for event, data_text in _events_in_order():
        report.events += 1
        where = f"event #{event.pk} at position {event.position}"
        if event.position is None:
            report.problems.append(f"event #{event.pk} has no place in the chain")
            continue
        if event.position != previous_position + 1:
            report.problems.append(
                f"{where}: expected position {previous_position + 1} (an event is missing "
                "or was moved)"
            )
        if event.prev_hash != previous_hash:
            report.problems.append(f"{where}: does not follow the event before it")
        if event_hash(content_text(event, data_text)) != event.hash:
            report.problems.append(f"{where}: its content no longer matches its hash")
        if expect is not None and event.position == expect[0]:
            expected_found = event.hash == expect[1]
        previous_hash, previous_position = event.hash, event.position
    head = AuditChain.objects.filter(pk=1).first()
    report.head_position, report.head_hash = previous_position, previous_hash
    if head is not None and (head.position, head.last_hash) != (previous_position, previous_hash):
        report.problems.append(
            f"the chain's head is at position {head.position}, its last event at "
            f"{previous_position}: events at its end were deleted or changed"
        )
    if head is None and report.events:
        report.problems.append("the chain's head is missing")
    if not expected_found:
        report.problems.append(
            f"the head kept earlier (position {expect[0]}) is no longer in the chain"  # type: ignore[index]
        )
    report.problems = report.problems[:limit]
    return report


def _events_in_order() -> Iterator[tuple[AuditEvent, str]]:
    table = AuditEvent._meta.db_table
    columns = "id, position, created_at, actor_id, verb, ticket_id, target, channel"
    # The data column as the database writes it out: the text the trigger hashed.
    query = (
        f"SELECT {columns}, prev_hash, hash, data::text FROM {table} "  # noqa: S608 (no input)
        "ORDER BY position NULLS FIRST, id"
    )
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(query)
        while rows := cursor.fetchmany(2000):
            for (
                pk,
                position,
                created,
                actor,
                verb,
                ticket,
                target,
                channel,
                prev,
                own,
                text,
            ) in rows:
                if timezone.is_naive(created):
                    created = timezone.make_aware(created, UTC)
                event = AuditEvent(
                    pk=pk,
                    position=position,
                    created_at=created,
                    actor_id=actor,
                    verb=verb,
                    ticket_id=ticket,
                    target=target,
                    channel=channel,
                    prev_hash=prev,
                    hash=own,
                )
                yield event, text
