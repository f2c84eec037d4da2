"""Lines as they arrive: decoded and hashed (no database), then stored once each.

A line's identity makes re-delivery a no-op: for an accepted line, its run ids, the hash
of its bytes and which occurrence of those bytes it is in the file; for a rejected line,
the delivery's content hash, the line's hash and its occurrence in that delivery."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from django.db import connection

from reviewapp.engine import AgentAction, Observation, Record, RecordError, Resolution, ToolCall
from reviewapp.infra.bulk import bound_cursor, insert_rows
from reviewapp.ingest.files import RawLine
from reviewapp.ingest.formats import DecodedUnit, decode_unit
from reviewapp.ingest.occurrences import OccurrenceCounter
from reviewapp.ingest.runs import RunInfo
from reviewapp.models import IngestBatch, TraceLine, TraceRecord


@dataclass(slots=True)
class Line:
    raw_line: RawLine
    unit: DecodedUnit | None
    reason: str
    owner: str  # what the identity is relative to: the run ids, or the delivery
    line_hash: str
    occurrence: int = 1

    @property
    def identity(self) -> str:
        text = f"{self.owner}\x1f{self.line_hash}\x1f{self.occurrence}"
        return hashlib.sha256(text.encode()).hexdigest()


def _prepare(batch: IngestBatch, raw_line: RawLine) -> Line:
    unit, reason = None, ""
    if raw_line.error:
        reason = raw_line.error
    else:
        try:
            unit = decode_unit(raw_line.payload)
        except RecordError as exc:
            reason = str(exc)
    owner = "run:" + "\x1f".join(unit.run_ids) if unit else "batch:" + batch.content_sha256
    return Line(raw_line, unit, reason, owner, hashlib.sha256(raw_line.raw).hexdigest())


def prepare_chunk(
    batch: IngestBatch, raw_lines: list[RawLine], occurrences: OccurrenceCounter
) -> list[Line]:
    """Decode and hash a chunk's lines (no database): identical bytes of one owner are
    numbered as occurrences within the whole file."""
    lines = [_prepare(batch, raw_line) for raw_line in raw_lines]
    keys = [
        hashlib.sha256(f"{line.owner}\x1f{line.line_hash}".encode()).digest()[:16] for line in lines
    ]
    for line, occurrence in zip(lines, occurrences.number(keys), strict=True):
        line.occurrence = occurrence
    return lines


def insert_new_lines(
    batch: IngestBatch, lines: list[Line], runs: dict[str, RunInfo]
) -> dict[int, int]:
    """Insert lines not stored yet; {index in chunk: new line id}.

    Lines of runs born in this chunk are new by construction and go straight in. For the
    others, the identities already stored are looked up first: a held identity is a line
    delivered before (or stored by an earlier try of this batch). The rest are inserted;
    one that another delivery stored meanwhile is not returned, and is a duplicate too."""
    inserted: dict[int, int] = {}
    direct = [
        i
        for i, line in enumerate(lines)
        if line.unit and all(runs[run_id].born for run_id in line.unit.run_ids)
    ]
    if direct:
        ids = insert_rows(
            TraceLine, LINE_COLUMNS, [_line_row(batch, lines[i]) for i in direct], return_ids=True
        )
        inserted.update(zip(direct, ids, strict=True))
    pending = [i for i in range(len(lines)) if i not in inserted]
    if pending:
        held = _held([lines[i].identity for i in pending])
        # Sorted: two deliveries inserting the same lines take their locks in one order.
        fresh = sorted(
            (i for i in pending if lines[i].identity not in held),
            key=lambda i: lines[i].identity,
        )
        returned = _insert_returning(batch, [lines[i] for i in fresh]) if fresh else {}
        inserted.update(
            (i, returned[lines[i].identity]) for i in fresh if lines[i].identity in returned
        )
    return inserted


def _held(identities: list[str]) -> set[str]:
    """Which of these identities are stored already."""
    return set(TraceLine.objects.filter(identity__in=identities).values_list("identity", flat=True))


LINE_COLUMNS = ("batch_id", "identity", "line_number", "raw", "accepted", "reason", "format")


def _line_row(batch: IngestBatch, line: Line) -> tuple[Any, ...]:
    return (
        batch.pk,
        line.identity,
        line.raw_line.number,
        line.raw_line.raw,
        line.unit is not None,
        line.reason,
        line.unit.format if line.unit else "",
    )


def _insert_returning(batch: IngestBatch, lines: list[Line]) -> dict[str, int]:
    """INSERT … ON CONFLICT DO NOTHING RETURNING, so that only new lines come back."""
    table = TraceLine._meta.db_table
    columns = ", ".join(LINE_COLUMNS)
    values = [
        list(column) for column in zip(*(_line_row(batch, line) for line in lines), strict=True)
    ]
    sql = f"INSERT INTO {table} ({columns}) {{rows}} ON CONFLICT (identity) DO NOTHING RETURNING identity, id"
    if connection.vendor == "postgresql":
        # Seven array parameters instead of seven per line, bound apart from the statement:
        # quoting the raw bytes into its text would cost more than the insert.
        rows = "SELECT * FROM unnest(%s::bigint[], %s::text[], %s::integer[], %s::bytea[], %s::boolean[], %s::text[], %s::text[])"
        with bound_cursor() as cursor:
            cursor.execute(sql.format(rows=rows), values, binary=True)
            return dict(cursor.fetchall())
    rows = "VALUES " + ", ".join(["(%s, %s, %s, %s, %s, %s, %s)"] * len(lines))
    with connection.cursor() as cursor:
        cursor.execute(
            sql.format(rows=rows), [value for row in zip(*values, strict=True) for value in row]
        )
        return dict(cursor.fetchall())


def _record_key(record: Any) -> tuple[str, str]:
    if isinstance(record, ToolCall):
        return record.tool_call_id, ""
    if isinstance(record, Observation):
        return record.observation_id, record.source
    if isinstance(record, AgentAction):
        return record.name, ""
    if isinstance(record, Resolution):
        return record.kind or "", ""
    return "", ""


def store_records(
    fresh: list[tuple[Line, int]], runs: dict[str, RunInfo]
) -> list[tuple[int, int, Record]]:
    """Store the records of new lines; (run pk, record id, record) in recording order."""
    rows: list[tuple[Any, ...]] = []
    records: list[tuple[int, Record]] = []
    for line, line_id in fresh:
        assert line.unit is not None  # only accepted lines have records
        for record, document in zip(line.unit.records, line.unit.documents, strict=True):
            key, source = _record_key(record)
            run_pk = runs[record.run_id].pk
            rows.append((run_pk, line_id, document["type"], key, source, document))
            records.append((run_pk, record))
    ids = insert_rows(
        TraceRecord, ("run_id", "line_id", "type", "key", "source", "data"), rows, return_ids=True
    )
    return [
        (run_pk, record_id, record)
        for record_id, (run_pk, record) in zip(ids, records, strict=True)
    ]
