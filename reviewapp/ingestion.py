"""The one ingest pipeline behind every way in (command, upload, API).

A delivery becomes an IngestBatch whose file is read in chunks: every non-blank line is
stored byte for byte, accepted (and turned into records) or rejected with its reason, or
recognised as already stored. Then every run that got new lines is judged.

Re-running a batch (a worker killed mid-way, say) loses and doubles nothing: each chunk
commits whole, line identities are unique, and the counts are read back from the database.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import IO, Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, Q
from django.utils import timezone

from reviewapp.bulk import insert_values
from reviewapp.engine import (
    AgentAction,
    Observation,
    RecordError,
    Resolution,
    RunStarted,
    ToolCall,
)
from reviewapp.judging import judge_stored_runs
from reviewapp.models import IngestBatch, Run, Ticket, TraceLine, TraceRecord
from reviewapp.policies import active_policy
from reviewapp.trace_files import RawLine, iter_raw_lines
from reviewapp.trace_formats import DecodedUnit, decode_unit, parse_timestamp

log = logging.getLogger(__name__)
CHUNK_LINES = 2000
Progress = Callable[[int, int], None]


@dataclass
class IngestSummary:
    lines: int = 0
    accepted: int = 0
    duplicates: int = 0
    rejected: int = 0
    runs: int = 0
    tickets: int = 0
    # Which runs were touched, so that summaries of several files count each run once.
    run_pks: set[int] = field(default_factory=set, repr=False, compare=False)

    def add(self, other: IngestSummary) -> None:
        for name in ("lines", "accepted", "duplicates", "rejected", "tickets"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.run_pks |= other.run_pks
        self.runs = len(self.run_pks)

    def as_dict(self) -> dict[str, int]:
        return {
            name: getattr(self, name)
            for name in ("lines", "accepted", "duplicates", "rejected", "runs", "tickets")
        }

    @classmethod
    def of(cls, batch: IngestBatch) -> IngestSummary:
        return cls(
            lines=batch.lines,
            accepted=batch.accepted,
            duplicates=batch.duplicates,
            rejected=batch.rejected,
            runs=batch.runs,
            tickets=batch.tickets,
        )


# --- batches ----------------------------------------------------------------------


def file_digest(path: Path) -> tuple[str, int]:
    digest, size = hashlib.sha256(), 0
    with path.open("rb") as stream:
        while block := stream.read(1 << 20):
            digest.update(block)
            size += len(block)
    return digest.hexdigest(), size


def upload_dir() -> Path:
    path = Path(settings.UPLOAD_DIR)
    path.mkdir(parents=True, exist_ok=True)
    return path


def keep_upload(source: IO[bytes]) -> tuple[Path, str, int]:
    """Copy an uploaded stream into the upload folder, hashing it on the way."""
    target = upload_dir() / uuid.uuid4().hex
    digest, size = hashlib.sha256(), 0
    with target.open("wb") as out:
        while block := source.read(1 << 20):
            digest.update(block)
            size += len(block)
            out.write(block)
    return target, digest.hexdigest(), size


def create_batch(
    *,
    channel: str,
    path: Path,
    file_name: str,
    digest: tuple[str, int] | None = None,
    user: Any = None,
    token: Any = None,
    idempotency_key: str | None = None,
) -> IngestBatch:
    sha256, size = digest or file_digest(path)
    return IngestBatch.objects.create(
        channel=channel,
        file_name=file_name[:255],
        content_sha256=sha256,
        size_bytes=size,
        stored_path=str(path),
        created_by=user if user is not None and user.is_authenticated else None,
        api_token=token,
        idempotency_key=idempotency_key,
    )


def ingest_batch(batch: IngestBatch, *, progress: Progress | None = None) -> IngestSummary:
    """Read, store and judge one batch; safe to call again on the same batch."""
    IngestBatch.objects.filter(pk=batch.pk).update(
        state=IngestBatch.State.RUNNING,
        started_at=batch.started_at or timezone.now(),
        heartbeat_at=timezone.now(),
        error="",
    )
    try:
        lines = _store_file(batch, progress)
        touched = list(
            Run.objects.filter(records__line__batch=batch).values_list("pk", flat=True).distinct()
        )
        judge_stored_runs(touched, active=active_policy(), batch=batch)
    except Exception as exc:
        IngestBatch.objects.filter(pk=batch.pk).update(
            state=IngestBatch.State.FAILED,
            error=f"{type(exc).__name__}: {exc}"[:2000],
            finished_at=timezone.now(),
        )
        raise
    stored = Counter(
        dict(
            TraceLine.objects.filter(batch=batch)
            .order_by()
            .values_list("accepted")
            .annotate(lines=Count("id"))
        )
    )
    summary = IngestSummary(
        lines=lines,
        accepted=stored[True],
        rejected=stored[False],
        duplicates=lines - stored[True] - stored[False],
        runs=len(touched),
        tickets=Ticket.objects.filter(batch=batch).count(),
        run_pks=set(touched),
    )
    IngestBatch.objects.filter(pk=batch.pk).update(
        state=IngestBatch.State.DONE,
        finished_at=timezone.now(),
        bytes_done=batch.size_bytes,
        **summary.as_dict(),
    )
    batch.refresh_from_db()
    return summary


def ingest_stored_batch(batch_id: int) -> IngestSummary:
    """What the worker runs: a batch that is already done is not read again."""
    batch = IngestBatch.objects.get(pk=batch_id)
    if batch.state == IngestBatch.State.DONE:
        return IngestSummary.of(batch)
    return ingest_batch(batch)


def ingest_file(
    path: Path, *, channel: str, user: Any = None, progress: Progress | None = None
) -> IngestSummary:
    """Ingest a file where it lies (the command line): nothing is copied."""
    batch = create_batch(channel=channel, path=path.resolve(), file_name=str(path), user=user)
    return ingest_batch(batch, progress=progress)


# --- lines ------------------------------------------------------------------------


@dataclass(slots=True)
class _Line:
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


def _store_file(batch: IngestBatch, progress: Progress | None) -> int:
    """Store every line of the batch's file in chunks; return how many lines were read."""
    count = 0
    with open(batch.stored_path, "rb") as stream:
        chunk: list[RawLine] = []
        for raw_line in iter_raw_lines(stream, batch.file_name):
            chunk.append(raw_line)
            if len(chunk) >= CHUNK_LINES:
                count += _store_chunk(batch, chunk)
                chunk = []
                _report(batch, stream.tell(), progress)
        count += _store_chunk(batch, chunk)
    return count


def _report(batch: IngestBatch, done: int, progress: Progress | None) -> None:
    IngestBatch.objects.filter(pk=batch.pk).update(bytes_done=done, heartbeat_at=timezone.now())
    if progress:
        progress(done, batch.size_bytes)


def _prepare(batch: IngestBatch, raw_line: RawLine) -> _Line:
    unit, reason = None, ""
    if raw_line.error:
        reason = raw_line.error
    else:
        try:
            unit = decode_unit(raw_line.payload)
        except RecordError as exc:
            reason = str(exc)
    owner = "run:" + "\x1f".join(unit.run_ids) if unit else "batch:" + batch.content_sha256
    return _Line(raw_line, unit, reason, owner, hashlib.sha256(raw_line.raw).hexdigest())


def _store_chunk(batch: IngestBatch, raw_lines: list[RawLine]) -> int:
    if not raw_lines:
        return 0
    lines = [_prepare(batch, raw_line) for raw_line in raw_lines]
    seen: Counter[tuple[str, str]] = Counter()
    for line in lines:
        seen[(line.owner, line.line_hash)] += 1
        line.occurrence = seen[(line.owner, line.line_hash)]
    with transaction.atomic():
        new_line_ids = _insert_new_lines(batch, lines)
        fresh = [
            (lines[i], line_id) for i, line_id in sorted(new_line_ids.items()) if lines[i].unit
        ]
        if fresh:
            _store_records(fresh)
    return len(lines)


def _insert_new_lines(batch: IngestBatch, lines: list[_Line]) -> dict[int, int]:
    """Insert lines not stored yet; {index in chunk: new line id}.

    A conflict with a line of this same batch at another line number means identical bytes
    seen earlier in the file: that makes this one a later occurrence, so it is tried again
    as such. Any other conflict is a line delivered before."""
    inserted: dict[int, int] = {}
    pending = list(range(len(lines)))
    while pending:
        returned = _insert_returning(batch, [lines[i] for i in pending])
        conflicted = []
        for i in pending:
            line_id = returned.get(lines[i].identity)
            if line_id is None:
                conflicted.append(i)
            else:
                inserted[i] = line_id
        if not conflicted:
            break
        holders = {
            identity: (batch_id, number)
            for identity, batch_id, number in TraceLine.objects.filter(
                identity__in=[lines[i].identity for i in conflicted]
            ).values_list("identity", "batch_id", "line_number")
        }
        pending = []
        for i in conflicted:
            holder = holders.get(lines[i].identity)
            if holder and holder[0] == batch.pk and holder[1] != lines[i].raw_line.number:
                lines[i].occurrence += 1
                pending.append(i)
    return inserted


def _insert_returning(batch: IngestBatch, lines: list[_Line]) -> dict[str, int]:
    """INSERT … ON CONFLICT DO NOTHING RETURNING, so that only new lines come back."""
    table = TraceLine._meta.db_table
    columns = "batch_id, identity, line_number, raw, accepted, reason, format"
    values = [
        [batch.pk] * len(lines),
        [line.identity for line in lines],
        [line.raw_line.number for line in lines],
        [line.raw_line.raw for line in lines],
        [line.unit is not None for line in lines],
        [line.reason for line in lines],
        [line.unit.format if line.unit else "" for line in lines],
    ]
    if connection.vendor == "postgresql":
        # Seven array parameters instead of seven per line: far less to send and to parse.
        rows = "SELECT * FROM unnest(%s::bigint[], %s::text[], %s::integer[], %s::bytea[], %s::boolean[], %s::text[], %s::text[])"
        params: list[Any] = values
    else:
        rows = "VALUES " + ", ".join(["(%s, %s, %s, %s, %s, %s, %s)"] * len(lines))
        params = [value for row in zip(*values, strict=True) for value in row]
    sql = f"INSERT INTO {table} ({columns}) {rows} ON CONFLICT (identity) DO NOTHING RETURNING identity, id"
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
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


def _store_records(fresh: list[tuple[_Line, int]]) -> None:
    starts: dict[str, RunStarted] = {}
    run_ids: dict[str, None] = {}
    for line, _ in fresh:
        for record in line.unit.records:
            run_ids.setdefault(record.run_id)
            if isinstance(record, RunStarted):
                starts.setdefault(record.run_id, record)
    runs = _runs_by_id(list(run_ids), starts)
    rows = []
    for line, line_id in fresh:
        for record, document in zip(line.unit.records, line.unit.documents, strict=True):
            key, source = _record_key(record)
            rows.append((runs[record.run_id].pk, line_id, document["type"], key, source, document))
    insert_values(TraceRecord, ("run_id", "line_id", "type", "key", "source", "data"), rows)


def _runs_by_id(run_ids: list[str], starts: dict[str, RunStarted]) -> dict[str, Run]:
    runs = {run.run_id: run for run in Run.objects.filter(run_id__in=run_ids)}
    now = timezone.now()
    missing = [
        Run(
            run_id=run_id,
            agent=(starts[run_id].agent or "")[:200] if run_id in starts else "",
            subject=dict(starts[run_id].subject) if run_id in starts else None,
            started_at=(parse_timestamp(starts[run_id].started_at) if run_id in starts else None)
            or now,
        )
        for run_id in run_ids
        if run_id not in runs
    ]
    if missing:
        Run.objects.bulk_create(missing, ignore_conflicts=True)
        runs.update(
            {run.run_id: run for run in Run.objects.filter(run_id__in=[r.run_id for r in missing])}
        )
    # A run_started arriving after the run's first lines still names its agent and clock.
    for run_id, start in starts.items():
        run = runs[run_id]
        if run.agent or start.agent is None:
            continue
        run.agent = start.agent[:200]
        run.subject = dict(start.subject)
        run.started_at = parse_timestamp(start.started_at) or run.started_at
        run.save(update_fields=["agent", "subject", "started_at"])
    return runs


def expand_paths(paths: Iterable[str]) -> list[Path]:
    """Files named, and the files inside folders named (hidden ones skipped), in order."""
    files = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            files.extend(
                sorted(
                    p
                    for p in path.rglob("*")
                    if p.is_file()
                    and not any(part.startswith(".") for part in p.relative_to(path).parts)
                )
            )
        else:
            files.append(path)
    return files


def stalled_batches(*, older_than: timedelta) -> list[IngestBatch]:
    """Batches left queued or running without progress: their worker died, or the message
    was lost. Re-ingesting them is safe (see the module docstring)."""
    cutoff = timezone.now() - older_than
    return list(
        IngestBatch.objects.filter(state__in=[IngestBatch.State.QUEUED, IngestBatch.State.RUNNING])
        .exclude(channel=IngestBatch.Channel.CLI)
        .filter(created_at__lt=cutoff)
        .filter(Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=cutoff))
    )
