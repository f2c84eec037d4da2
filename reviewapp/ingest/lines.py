"""Lines as they arrive: decoded and hashed (no database), then stored once each.

A line's identity (128 bits of a SHA-256) makes re-delivery a no-op: for an accepted
line, its run ids, the hash of its bytes (of its spans' trace and span ids, for an
external format: a re-export is the same line whatever its formatting) and which
occurrence of those it is in the file; for a native line with `seq`, its run and that
position alone, which holds one record: the same bytes again are a re-delivery, other
bytes are refused (spec/traces.md, "Delivery in pieces, and `seq`"); for a rejected line,
its batch, the line's hash and its occurrence in that batch, so that a file sent again
reports its bad lines again. A span stored once is not stored again (drop_stored_spans),
even inside a document that also brings new ones.

Without `seq`, a record with no id of its own (an action, a resolution, a run's start)
identical to one its run holds from an earlier delivery may be a repeated event, not a
re-delivery: such lines are stored once, like any duplicate, and counted apart
(count_identical_to_stored)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import Any

from reviewapp.engine import (
    AgentAction,
    Observation,
    Record,
    RecordError,
    Resolution,
    RunStarted,
    ToolCall,
    line_payload,
    seq_taken_reason,
)
from reviewapp.infra.bulk import bound_cursor, insert_rows
from reviewapp.ingest.files import RawLine
from reviewapp.ingest.formats import NATIVE, RUN_STARTED_ORIGIN, DecodedUnit, decode_unit
from reviewapp.ingest.occurrences import OccurrenceCounter
from reviewapp.ingest.redaction import LineRedaction
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
    # Known to add nothing before its insert: every span it brings is stored already (its
    # bytes are new), or the same bytes hold the position its `seq` names
    # (_settle_positions).
    duplicate: bool = False
    # Set by prepare_chunk, in the reading thread, so that the writer only writes: the
    # identity, the line's row (LINE_COLUMNS) and, for a native line, its record's row
    # without the run and line ids (type, key, source, data).
    identity: str = ""
    row: tuple[Any, ...] = ()
    record_row: tuple[Any, ...] = ()
    # Redaction (ingest.redaction): the bytes stored for the line when they are not the
    # bytes that arrived, and (token, rule, ciphertext) of the raw values its rules keep.
    redacted: bytes | None = None
    protected: list[tuple[str, str, bytes]] = field(default_factory=list)

    @property
    def stored(self) -> bytes:
        """The line's bytes as stored (its identity is the arrival's)."""
        return self.raw_line.raw if self.redacted is None else self.redacted

    @property
    def seq(self) -> int | None:
        """The position in its run a native line names, if it names one."""
        unit = self.unit
        return unit.records[0].seq if unit is not None and unit.format == NATIVE else None


def _prepare(batch: IngestBatch, raw_line: RawLine, redaction: LineRedaction | None) -> Line:
    unit, reason, redacted = None, "", None
    if raw_line.error:
        reason = raw_line.error
    else:
        try:
            unit = raw_line.decoded or decode_unit(raw_line.payload)
            if redaction is not None:
                unit, redacted = redaction.unit(raw_line.payload, unit)
        except RecordError as exc:
            unit, reason = None, str(exc)
    if unit is None and redaction is not None:
        redacted = redaction.rejected(raw_line.raw)
    record_row: tuple[Any, ...] = ()
    if unit is None:
        owner, content = f"batch:{batch.pk}", raw_line.raw
    elif unit.format == NATIVE:
        owner, content = "run:" + unit.records[0].run_id, raw_line.raw
        # One record, decoded from the line itself: the line is its data, kept once (as
        # the line's bytes; models.TraceRecord.document reads it back).
        key, source = _record_key(unit.records[0])
        record_row = (unit.documents[0]["type"], key, source, None)
    else:
        owner = "run:" + "\x1f".join(unit.run_ids)
        spans = unit.span_keys
        content = ("spans:" + "\x1f".join(spans)).encode() if spans else raw_line.raw
    line_hash = hashlib.sha256(content).hexdigest()
    line = Line(raw_line, unit, reason, owner, line_hash, record_row=record_row, redacted=redacted)
    if redaction is not None:
        line.protected = redaction.kept()
    return line


def prepare_chunk(
    batch: IngestBatch,
    raw_lines: list[RawLine],
    occurrences: OccurrenceCounter,
    redaction: LineRedaction | None = None,
) -> list[Line]:
    """Decode, redact and hash a chunk's lines (no database): identical bytes of one
    owner are numbered as occurrences within the whole file; a line with `seq` is known by
    its run and position instead (what else holds that position is settled as it is
    stored: insert_new_lines)."""
    lines = [_prepare(batch, raw_line, redaction) for raw_line in raw_lines]
    numbered = []
    for line in lines:
        seq = line.seq
        if seq is None:
            numbered.append(line)
            continue
        # The digits first, the owner after them: no two positions spell one text.
        position = b"seq:%d\x1f%b" % (seq, line.owner.encode())
        line.identity = hashlib.sha256(position).hexdigest()[:32]
        line.row = _line_row(batch.pk, line)
    owned = [f"{line.owner}\x1f{line.line_hash}".encode() for line in numbered]
    keys = [hashlib.sha256(text).digest()[:16] for text in owned]
    for line, text, occurrence in zip(numbered, owned, occurrences.number(keys), strict=True):
        line.occurrence = occurrence
        # 128 bits of it (TraceLine.identity is a UUID column), as 32 hex digits.
        line.identity = hashlib.sha256(b"%b\x1f%d" % (text, occurrence)).hexdigest()[:32]
        line.row = _line_row(batch.pk, line)
    return lines


def _same_bytes(held: bytes | str, arrived: bytes) -> bool:
    """Whether two lines are the same record's bytes (a line ending's carriage return and
    a file's byte order mark are not the record's). `held` as a str is the SHA-256 of an
    expired line's bytes (its tombstone, privacy/retention.py): the very bytes match it."""
    if isinstance(held, str):
        return hashlib.sha256(arrived).hexdigest() == held
    return line_payload(held, first=True) == line_payload(arrived, first=True)


def _refuse_position(batch_pk: int, line: Line) -> None:
    """Reject a line whose run holds its `seq` with another record. Its identity is its
    batch and line number: stored once however often the batch is read, and reported
    again by any later delivery."""
    assert line.unit is not None
    record = line.unit.records[0]
    assert record.seq is not None
    line.unit, line.reason, line.record_row = None, seq_taken_reason(record.run_id, record.seq), ()
    line.owner = f"batch:{batch_pk}"
    text = b"batch:%d\x1fline:%d" % (batch_pk, line.raw_line.number)
    line.identity = hashlib.sha256(text).hexdigest()[:32]
    line.row = _line_row(batch_pk, line)


def drop_stored_spans(lines: list[Line], runs: dict[str, RunInfo]) -> None:
    """Take out of external units the records of spans stored already (by an earlier
    delivery or chunk) or brought earlier in this chunk, and the run_started of a run that
    has one; a unit whose records all go is a duplicate line."""
    external = [
        line for line in lines if line.unit and line.unit.format != NATIVE and line.unit.records
    ]
    if not external:
        return
    old_runs = {
        runs[run_id].pk
        for line in external
        for run_id in line.unit.run_ids  # type: ignore[union-attr]
        if not runs[run_id].born
    }
    stored: set[tuple[int, str]] = set()
    if old_runs:
        keys = {key for line in external for key in line.unit.span_keys}  # type: ignore[union-attr]
        stored.update(
            TraceRecord.objects.filter(
                run_id__in=old_runs, type=TraceRecord.Type.TOOL_OBSERVATION, key__in=keys
            ).values_list("run_id", "key")
        )
        stored.update(
            (run_pk, RUN_STARTED_ORIGIN)
            for run_pk in TraceRecord.objects.filter(
                run_id__in=old_runs, type=TraceRecord.Type.RUN_STARTED
            ).values_list("run_id", flat=True)
        )
    for line in external:
        unit = line.unit
        assert unit is not None
        kept = []
        for index, (record, origin) in enumerate(zip(unit.records, unit.origins, strict=True)):
            key = (runs[record.run_id].pk, origin)
            if key not in stored:
                kept.append(index)
        for index in kept:
            stored.add((runs[unit.records[index].run_id].pk, unit.origins[index]))
        if len(kept) == len(unit.records):
            continue
        if not kept:
            line.duplicate = True
        line.unit = replace(
            unit,
            records=[unit.records[i] for i in kept],
            documents=[unit.documents[i] for i in kept],
            origins=tuple(unit.origins[i] for i in kept),
        )


def insert_new_lines(
    batch: IngestBatch, lines: list[Line], runs: dict[str, RunInfo]
) -> dict[int, int]:
    """Insert lines not stored yet; {index in chunk: new line id}.

    Lines with `seq` are settled first, against the lines stored at their positions and
    each other (_settle_positions). Lines of runs born in this chunk are new by
    construction and go straight in. For the others, the identities already stored are
    looked up first: a held identity is a line delivered before (or stored by an earlier
    try of this batch). The rest are inserted; one that another delivery stored meanwhile
    is not returned, and is a duplicate too, unless it is a line with `seq` whose position
    came with other bytes (then it is rejected)."""
    inserted: dict[int, int] = {}
    positioned = [i for i, line in enumerate(lines) if line.seq is not None]
    if positioned:
        _settle_positions(batch, lines, positioned, runs)
    direct = [
        i
        for i, line in enumerate(lines)
        if line.unit
        and line.unit.run_ids
        and not line.duplicate
        and all(runs[run_id].born for run_id in line.unit.run_ids)
    ]
    if direct:
        ids = insert_rows(TraceLine, LINE_COLUMNS, [lines[i].row for i in direct], return_ids=True)
        inserted.update(zip(direct, ids, strict=True))
    pending = [i for i in range(len(lines)) if i not in inserted and not lines[i].duplicate]
    if pending:
        # A line with `seq` left here holds its position: _settle_positions found it free.
        held = _held([lines[i].identity for i in pending if lines[i].seq is None])
        fresh = [i for i in pending if lines[i].identity not in held]
        inserted.update(_insert_fresh(lines, fresh))
        # Its position taken meanwhile by another delivery: settled by the bytes there.
        lost = [i for i in fresh if i not in inserted and lines[i].seq is not None]
        if lost:
            _settle_positions(batch, lines, lost, runs)
            inserted.update(_insert_fresh(lines, [i for i in lost if lines[i].unit is None]))
    return inserted


def _insert_fresh(lines: list[Line], fresh: list[int]) -> dict[int, int]:
    """Insert these lines unless their identity is held; {index: new line id}."""
    if not fresh:
        return {}
    # Sorted: two deliveries inserting the same lines take their locks in one order.
    fresh = sorted(fresh, key=lambda i: lines[i].identity)
    returned = _insert_returning([lines[i] for i in fresh])
    return {i: returned[lines[i].identity] for i in fresh if lines[i].identity in returned}


def _settle_positions(
    batch: IngestBatch, lines: list[Line], positioned: list[int], runs: dict[str, RunInfo]
) -> None:
    """Lines with `seq`, in file order: the first at a position no stored line holds holds
    it; any other at a held position is a duplicate when the line holding it has the same
    bytes, and is rejected (_refuse_position) when it has not."""
    holders = _holding(
        [
            lines[i].identity
            for i in positioned
            if not runs[lines[i].unit.records[0].run_id].born  # type: ignore[union-attr]
        ]
    )
    for i in positioned:
        line = lines[i]
        held = holders.get(line.identity)
        if held is None:
            holders[line.identity] = line.stored
        elif _same_bytes(held, line.stored):
            line.duplicate = True
        else:
            _refuse_position(batch.pk, line)


def _holding(identities: list[str]) -> dict[str, bytes | str]:
    """The bytes of the stored lines of these identities, by identity (of an expired line,
    the SHA-256 of its bytes its tombstone keeps)."""
    if not identities:
        return {}
    stored = TraceLine.objects.filter(identity__in=identities).values_list(
        "identity", "raw", "raw_sha256"
    )
    return {
        identity.hex: bytes(raw) if sha256 is None else sha256 for identity, raw, sha256 in stored
    }


def count_identical_to_stored(
    batch: IngestBatch, lines: list[Line], inserted: dict[int, int]
) -> int:
    """How many of these lines, not stored, bring a record with no id and no `seq` (an
    action, a resolution, a run's start) identical to one its run holds from an earlier
    delivery: each is a re-delivery, or a repeated event that only `seq` would have kept,
    and the summary says so. One stored by an earlier try of this batch is its own line."""
    unkeyed = [
        line
        for i, line in enumerate(lines)
        if i not in inserted
        and line.unit is not None
        and line.unit.format == NATIVE
        and not line.duplicate
        and type(line.unit.records[0]) in _WITHOUT_ID
        and line.unit.records[0].seq is None
    ]
    if not unkeyed:
        return 0
    earlier = (
        TraceLine.objects.filter(identity__in=[line.identity for line in unkeyed])
        .exclude(batch=batch)
        .values_list("identity", flat=True)
    )
    delivered = {identity.hex for identity in earlier}
    return sum(1 for line in unkeyed if line.identity in delivered)


# Record types that carry no id of their own (spec/traces.md).
_WITHOUT_ID = (AgentAction, Resolution, RunStarted)


def _held(identities: list[str]) -> set[str]:
    """Which of these identities are stored already."""
    held = TraceLine.objects.filter(identity__in=identities).values_list("identity", flat=True)
    return {identity.hex for identity in held}


LINE_COLUMNS = (
    "batch_id",
    "identity",
    "line_number",
    "raw",
    "accepted",
    "reason",
    "format",
    "ignored",
    "span_report",
)


def _line_row(batch_pk: int, line: Line) -> tuple[Any, ...]:
    return (
        batch_pk,
        line.identity,
        line.raw_line.number,
        line.stored,
        line.unit is not None,
        line.reason,
        line.unit.format if line.unit else "",
        line.unit.ignored if line.unit else 0,
        line.unit.span_report.as_json() if line.unit and line.unit.span_report else None,
    )


def _insert_returning(lines: list[Line]) -> dict[str, int]:
    """INSERT … ON CONFLICT DO NOTHING RETURNING, so that only new lines come back."""
    table = TraceLine._meta.db_table
    columns = ", ".join(LINE_COLUMNS)
    values = [list(column) for column in zip(*(line.row for line in lines), strict=True)]
    values[-1] = [None if report is None else json.dumps(report) for report in values[-1]]
    sql = f"INSERT INTO {table} ({columns}) {{rows}} ON CONFLICT (identity) DO NOTHING RETURNING identity, id"
    # Nine array parameters instead of nine per line, bound apart from the statement:
    # quoting the raw bytes into its text would cost more than the insert.
    rows = "SELECT * FROM unnest(%s::bigint[], %s::text[]::uuid[], %s::integer[], %s::bytea[], %s::boolean[], %s::text[], %s::text[], %s::integer[], %s::text[]::jsonb[])"
    with bound_cursor() as cursor:
        cursor.execute(sql.format(rows=rows), values, binary=True)
        return {identity.hex: line_id for identity, line_id in cursor.fetchall()}


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
        if line.record_row:
            run_pk = runs[line.unit.records[0].run_id].pk
            rows.append((run_pk, line_id, *line.record_row))
            records.append((run_pk, line.unit.records[0]))
            continue
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
