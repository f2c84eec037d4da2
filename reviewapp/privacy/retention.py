"""Retention of raw trace payloads: after TRACE_RETENTION_DAYS (or a source's own window,
TRACE_RETENTION_DAYS_BY_SOURCE), a line's bytes are replaced by a tombstone that keeps their
SHA-256, size, line number and identity (so a re-delivery is still a duplicate), and the
data of the records converted from it go. Runs, judgements, verdicts, findings, tickets,
decisions, policy versions, tallies and the audit trail are kept; a run whose lines expired
is marked (Run.raw_expired_at) and never judged again: it keeps its current judgement.

A line is old by its batch's arrival (IngestBatch.created_at): the time the system has for
every line, whatever its format, and the one its holder controls, not a clock in the trace.

The database lets exactly this change through (models/guards.py: TRACE_LINE_TOMBSTONE,
TRACE_RECORD_TOMBSTONE), and the hash and size it keeps are computed there, from the bytes
being replaced."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from reviewapp.accounts.audit import audit_record
from reviewapp.models import IngestBatch, Run, TraceLine, TraceRecord

LINES = TraceLine._meta.db_table
RECORDS = TraceRecord._meta.db_table
RUNS = Run._meta.db_table


@dataclass(frozen=True)
class Windows:
    """Retention windows in days (0: kept forever): the default, and by source."""

    default: int = 0
    by_source: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def from_settings(cls) -> Windows:
        return cls(settings.TRACE_RETENTION_DAYS, dict(settings.TRACE_RETENTION_DAYS_BY_SOURCE))

    def of_line(self, sources: Iterable[str]) -> int:
        """A line's window: the shortest of its records' sources' (a source not named has
        the default's), the default for a line with no record (a rejected one); 0: none."""
        windows = {self.by_source.get(source, self.default) for source in sources}
        kept = [days for days in windows or {self.default} if days > 0]
        return min(kept, default=0)

    @property
    def shortest(self) -> int:
        return min((d for d in (self.default, *self.by_source.values()) if d > 0), default=0)


@dataclass
class Expired:
    """What one pass expired: lines and their bytes, records whose data went, runs marked."""

    lines: int = 0
    bytes: int = 0
    records: int = 0
    runs: int = 0
    by_window: dict[int, int] = field(default_factory=lambda: defaultdict(int))


def expire_raw_payloads(
    now: datetime | None = None, *, windows: Windows | None = None, chunk: int | None = None
) -> Expired:
    """Replace by tombstones the raw payloads older than their window, a chunk of lines per
    transaction; one audit event when anything expired (how much, the windows, the cut-off)."""
    now = now or timezone.now()
    windows = windows or Windows.from_settings()
    chunk = chunk or settings.TRACE_RETENTION_CHUNK
    done = Expired()
    if not windows.shortest:
        return done
    oldest_due = now - timedelta(days=windows.shortest)
    batches = (
        IngestBatch.objects.filter(created_at__lt=oldest_due, raw_expired_at__isnull=True)
        .order_by("id")
        .values_list("id", "created_at")
    )
    for batch_id, arrived in batches.iterator():
        _batch_expire(batch_id, arrived, now, windows, chunk, done)
    if done.lines:
        audit_record(
            actor=None,
            verb="trace.expired",
            target=f"{done.lines} trace lines",
            lines=done.lines,
            bytes=done.bytes,
            records=done.records,
            runs=done.runs,
            retention_days=windows.default,
            retention_days_by_source=dict(windows.by_source),
            cutoff=(now - timedelta(days=windows.default)).isoformat() if windows.default else None,
            lines_by_window={str(days): count for days, count in sorted(done.by_window.items())},
        )
    return done


def _batch_expire(
    batch_id: int, arrived: datetime, now: datetime, windows: Windows, chunk: int, done: Expired
) -> None:
    after = 0
    age = now - arrived
    while True:
        with transaction.atomic():
            candidates = _candidates(batch_id, after, chunk)
            if not candidates:
                break
            after = candidates[-1][0]
            due: dict[int, list[int]] = defaultdict(list)
            for line_id, sources in candidates:
                days = windows.of_line(sources)
                if days and age >= timedelta(days=days):
                    due[days].append(line_id)
            for days, line_ids in due.items():
                _lines_expire(line_ids, days, now, done)
    with transaction.atomic():
        # Every line gone: the batch is not read again (one under a longer window is).
        IngestBatch.objects.filter(pk=batch_id).exclude(
            pk__in=TraceLine.objects.filter(batch_id=batch_id, expired_at__isnull=True).values(
                "batch_id"
            )
        ).update(raw_expired_at=now)


def _candidates(batch_id: int, after: int, chunk: int) -> list[tuple[int, list[str]]]:
    """The batch's lines still holding their bytes after line id `after`, with the sources
    their records name (none for a rejected line)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT l.id, ARRAY(SELECT DISTINCT r.source FROM {RECORDS} r WHERE r.line_id = l.id) "
            f"FROM {LINES} l WHERE l.batch_id = %s AND l.expired_at IS NULL AND l.id > %s "
            "ORDER BY l.id LIMIT %s",
            [batch_id, after, chunk],
        )
        return [(line_id, list(sources)) for line_id, sources in cursor.fetchall()]


def _lines_expire(line_ids: list[int], days: int, now: datetime, done: Expired) -> None:
    with connection.cursor() as cursor:
        # The tombstone's hash and size are the replaced bytes' (the guard checks them).
        cursor.execute(
            f"UPDATE {LINES} SET expired_at = %s, raw_sha256 = encode(sha256(raw), 'hex'), "
            "raw_size = octet_length(raw), raw = ''::bytea "
            "WHERE id = ANY(%s) AND expired_at IS NULL RETURNING id, raw_size",
            [now, line_ids],
        )
        expired = cursor.fetchall()
        if not expired:
            return
        ids = [line_id for line_id, _ in expired]
        cursor.execute(
            f"UPDATE {RECORDS} SET data = NULL WHERE line_id = ANY(%s) AND data IS NOT NULL", [ids]
        )
        done.records += cursor.rowcount
        cursor.execute(
            f"UPDATE {RUNS} SET raw_expired_at = %s, retention_days = %s "
            f"WHERE raw_expired_at IS NULL AND id IN "
            f"(SELECT DISTINCT run_id FROM {RECORDS} WHERE line_id = ANY(%s))",
            [now, days, ids],
        )
        done.runs += cursor.rowcount
    done.lines += len(expired)
    done.bytes += sum(size for _, size in expired)
    done.by_window[days] += len(expired)
