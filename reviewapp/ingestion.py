"""The one ingest pipeline behind every way in (command, upload, API).

A delivery becomes an IngestBatch whose file is read in chunks: every non-blank line is
stored byte for byte, accepted (and turned into records) or rejected with its reason, or
recognised as already stored. Runs born in this delivery are judged from memory once the
file has moved past them; a final sweep judges, from the database, every run the delivery
touched whose current judgement does not cover its last record (runs that were appended
to, and runs of a batch resumed after a crash).

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
from django.db import IntegrityError, connection, transaction
from django.db.models import Count, Q
from django.utils import timezone

from reviewapp.bulk import bound_cursor, insert_rows
from reviewapp.engine import (
    AgentAction,
    Observation,
    Record,
    RecordError,
    Resolution,
    RunStarted,
    ToolCall,
)
from reviewapp.judging import RunToJudge, judge_stored_runs, record_judgements
from reviewapp.models import IngestBatch, Judgement, Run, Ticket, TraceLine, TraceRecord
from reviewapp.policies import ActivePolicy, active_policy
from reviewapp.trace_files import RawLine, iter_raw_lines
from reviewapp.trace_formats import DecodedUnit, decode_unit, parse_timestamp

log = logging.getLogger(__name__)
CHUNK_LINES = 5000
Progress = Callable[[int, int], None]


@dataclass
class IngestSummary:
    lines: int = 0
    accepted: int = 0
    duplicates: int = 0
    rejected: int = 0
    runs: int = 0
    tickets: int = 0
    # Which batches were summed, so that several files count each run they share once.
    batch_pks: set[int] = field(default_factory=set, repr=False, compare=False)

    def add(self, other: IngestSummary) -> None:
        for name in ("lines", "accepted", "duplicates", "rejected", "tickets"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.batch_pks |= other.batch_pks
        self.runs = count_runs_touched(self.batch_pks)

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
        active = active_policy()
        in_flight = _RunsInFlight(active, batch)
        lines = _store_file(batch, progress, in_flight)
        with transaction.atomic():
            in_flight.judge_rest()
        judge_stored_runs(_runs_to_judge(batch, active), active=active, batch=batch)
    except Exception as exc:
        # What the batch page and the API show: no server detail (SQL, paths, trace data).
        log.exception("batch %s failed", batch.pk)
        IngestBatch.objects.filter(pk=batch.pk).update(
            state=IngestBatch.State.FAILED,
            error=(
                f"stopped by an internal error ({type(exc).__name__}); every chunk stored "
                f"before it is kept, and sending the batch again finishes it. The server log "
                f"has the details under batch {batch.pk}."
            ),
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
        runs=count_runs_touched({batch.pk}),
        tickets=Ticket.objects.filter(batch=batch).count(),
        batch_pks={batch.pk},
    )
    IngestBatch.objects.filter(pk=batch.pk).update(
        state=IngestBatch.State.DONE,
        finished_at=timezone.now(),
        bytes_done=batch.size_bytes,
        **summary.as_dict(),
    )
    batch.refresh_from_db()
    if batch.channel != IngestBatch.Channel.CLI:
        # Every line is stored now: the kept copy of an upload or a body has done its work
        # (a file named on the command line is the user's own, and stays).
        Path(batch.stored_path).unlink(missing_ok=True)
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


def _store_file(batch: IngestBatch, progress: Progress | None, in_flight: _RunsInFlight) -> int:
    """Store every line of the batch's file in chunks; return how many lines were read."""
    count = 0
    with open(batch.stored_path, "rb") as stream:
        chunk: list[RawLine] = []
        lines = iter_raw_lines(
            stream, batch.file_name, max_decompressed=settings.INGEST_MAX_DECOMPRESSED_BYTES
        )
        for raw_line in lines:
            chunk.append(raw_line)
            if len(chunk) >= CHUNK_LINES:
                count += _store_chunk(batch, _prepare_chunk(batch, chunk), in_flight)
                chunk = []
                _report(batch, stream.tell(), progress)
        count += _store_chunk(batch, _prepare_chunk(batch, chunk), in_flight)
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


def _prepare_chunk(batch: IngestBatch, raw_lines: list[RawLine]) -> list[_Line]:
    """Decode and hash a chunk's lines (no database): identical bytes of one owner are
    numbered as occurrences within the chunk."""
    lines = [_prepare(batch, raw_line) for raw_line in raw_lines]
    seen: Counter[tuple[str, str]] = Counter()
    for line in lines:
        seen[(line.owner, line.line_hash)] += 1
        line.occurrence = seen[(line.owner, line.line_hash)]
    return lines


def _store_chunk(batch: IngestBatch, lines: list[_Line], in_flight: _RunsInFlight) -> int:
    if not lines:
        return 0
    with transaction.atomic():
        runs = _ensure_runs([line.unit for line in lines if line.unit])
        new_line_ids = _insert_new_lines(batch, lines, runs)
        fresh = [
            (lines[i], line_id) for i, line_id in sorted(new_line_ids.items()) if lines[i].unit
        ]
        in_flight.take(_store_records(fresh, runs), runs)
    return len(lines)


@dataclass(slots=True)
class _RunInfo:
    pk: int
    agent: str
    born: bool  # created by this chunk: none of its lines can have been stored before


def _insert_new_lines(
    batch: IngestBatch, lines: list[_Line], runs: dict[str, _RunInfo]
) -> dict[int, int]:
    """Insert lines not stored yet; {index in chunk: new line id}.

    Lines of runs born in this chunk are new by construction and go straight in. For the
    others, the identities already stored are looked up first. One held by this same batch
    at another line number means identical bytes seen earlier in the file: this line is a
    later occurrence, and is looked up again as such. Any other holder means the line was
    delivered before. The rest are inserted; one that another delivery stored meanwhile is
    looked up again."""
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
    while pending:
        holders = _holders([lines[i].identity for i in pending])
        again, fresh = [], []
        for i in pending:
            holder = holders.get(lines[i].identity)
            if holder is None:
                fresh.append(i)
            elif holder[0] == batch.pk and holder[1] != lines[i].raw_line.number:
                lines[i].occurrence += 1
                again.append(i)
        returned = _insert_returning(batch, [lines[i] for i in fresh]) if fresh else {}
        for i in fresh:
            line_id = returned.get(lines[i].identity)
            if line_id is None:
                again.append(i)  # stored meanwhile by another delivery: look at it again
            else:
                inserted[i] = line_id
        pending = again
    return inserted


def _holders(identities: list[str]) -> dict[str, tuple[int, int]]:
    """Which batch and line number already hold these identities."""
    return {
        identity: (batch_id, number)
        for identity, batch_id, number in TraceLine.objects.filter(
            identity__in=identities
        ).values_list("identity", "batch_id", "line_number")
    }


LINE_COLUMNS = ("batch_id", "identity", "line_number", "raw", "accepted", "reason", "format")


def _line_row(batch: IngestBatch, line: _Line) -> tuple[Any, ...]:
    return (
        batch.pk,
        line.identity,
        line.raw_line.number,
        line.raw_line.raw,
        line.unit is not None,
        line.reason,
        line.unit.format if line.unit else "",
    )


def _insert_returning(batch: IngestBatch, lines: list[_Line]) -> dict[str, int]:
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


def _store_records(
    fresh: list[tuple[_Line, int]], runs: dict[str, _RunInfo]
) -> list[tuple[int, int, Record]]:
    """Store the records of new lines; (run pk, record id, record) in recording order."""
    rows, records = [], []
    for line, line_id in fresh:
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


def _ensure_runs(units: list[DecodedUnit]) -> dict[str, _RunInfo]:
    """The runs these units belong to, created when missing ("born")."""
    starts: dict[str, RunStarted] = {}
    run_ids: dict[str, None] = {}
    for unit in units:
        for record in unit.records:
            run_ids.setdefault(record.run_id)
            if isinstance(record, RunStarted):
                starts.setdefault(record.run_id, record)
    runs = _known_runs(list(run_ids))
    missing = [run_id for run_id in run_ids if run_id not in runs]
    if missing:
        now = timezone.now()
        rows = [_new_run(run_id, starts.get(run_id), now) for run_id in missing]
        try:
            with transaction.atomic():
                ids = insert_rows(Run, RUN_COLUMNS, rows, return_ids=True)
            for pk, (run_id, agent, *_) in zip(ids, rows, strict=True):
                runs[run_id] = _RunInfo(pk, agent, True)
        except IntegrityError:
            # Another ingest created some of them meanwhile: none counts as born here.
            Run.objects.bulk_create(
                [Run(**dict(zip(RUN_COLUMNS, row, strict=True))) for row in rows],
                ignore_conflicts=True,
            )
            runs.update(_known_runs(missing))
    # A run_started arriving after the run's first lines still names its agent and clock.
    for run_id, start in starts.items():
        run = runs[run_id]
        if run.born or run.agent or start.agent is None:
            continue
        run.agent = start.agent[:200]
        changes: dict[str, Any] = {"agent": run.agent, "subject": dict(start.subject)}
        if started_at := parse_timestamp(start.started_at):
            changes["started_at"] = started_at
        Run.objects.filter(pk=run.pk).update(**changes)
    return runs


RUN_COLUMNS = ("run_id", "agent", "subject", "started_at")


def _new_run(run_id: str, start: RunStarted | None, now) -> tuple[Any, ...]:
    """A run's row (RUN_COLUMNS): its agent, subject and clock from run_started, when seen."""
    if start is None:
        return (run_id, "", None, now)
    started_at = parse_timestamp(start.started_at) or now
    return (run_id, (start.agent or "")[:200], dict(start.subject), started_at)


def _known_runs(run_ids: list[str]) -> dict[str, _RunInfo]:
    return {
        run_id: _RunInfo(pk, agent, False)
        for pk, run_id, agent in Run.objects.filter(run_id__in=run_ids).values_list(
            "pk", "run_id", "agent"
        )
    }


class _RunsInFlight:
    """Runs born in this ingest, held with their records until the file moves past them
    (a chunk that does not touch them), then judged from memory: reading them back would
    cost more than storing them did. Memory stays bounded by what two chunks hold."""

    def __init__(self, active: ActivePolicy, batch: IngestBatch):
        self.active, self.batch = active, batch
        self.held: dict[int, RunToJudge] = {}

    def take(self, stored: list[tuple[int, int, Record]], runs: dict[str, _RunInfo]) -> None:
        by_pk = {info.pk: (run_id, info) for run_id, info in runs.items()}
        touched: set[int] = set()
        for run_pk, record_id, record in stored:
            run = self.held.get(run_pk)
            if run is None:
                run_id, info = by_pk[run_pk]
                if not info.born:
                    continue  # stored before this ingest: the final sweep judges it
                run = self.held[run_pk] = RunToJudge(run_pk, run_id, info.agent, [])
            run.agent = by_pk[run_pk][1].agent
            run.records.append((record_id, record))
            touched.add(run_pk)
        passed = [run for run_pk, run in self.held.items() if run_pk not in touched]
        for run in passed:
            del self.held[run.pk]
        self._judge(passed)

    def judge_rest(self) -> None:
        self._judge(list(self.held.values()))
        self.held.clear()

    def _judge(self, runs: list[RunToJudge]) -> None:
        if not runs:
            return
        # Another delivery may have added lines to a run born here; such a run is left to
        # the final sweep, which reads all of it.
        stored = dict(
            TraceRecord.objects.filter(run_id__in=[run.pk for run in runs])
            .order_by()
            .values_list("run_id")
            .annotate(records=Count("id"))
        )
        whole = [run for run in runs if stored.get(run.pk) == len(run.records)]
        record_judgements(whole, active=self.active, batch=self.batch)


def _runs_to_judge(batch: IngestBatch, active: ActivePolicy) -> list[int]:
    """The runs this batch stored records for whose current judgement does not cover their
    last record under the active policy (counted in the database: memory stays flat)."""
    runs, judged = Run._meta.db_table, Judgement._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT r.id FROM {runs} r LEFT JOIN {judged} j ON j.id = r.current_judgement_id "
            f"WHERE r.id IN ({_RUNS_OF_BATCHES.format(placeholders='%s')}) "
            "AND (j.id IS NULL OR j.policy_number <> %s OR j.through_record_id < "
            f"(SELECT max(last.id) FROM {TraceRecord._meta.db_table} last WHERE last.run_id = r.id))",
            [batch.pk, active.number],
        )
        return [run_pk for (run_pk,) in cursor.fetchall()]


def count_runs_touched(batch_pks: set[int]) -> int:
    """How many runs these batches stored records for."""
    if not batch_pks:
        return 0
    placeholders = ", ".join(["%s"] * len(batch_pks))
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM ({_RUNS_OF_BATCHES.format(placeholders=placeholders)}) runs",
            sorted(batch_pks),
        )
        return cursor.fetchone()[0]


_RUNS_OF_BATCHES = (
    f"SELECT DISTINCT rec.run_id FROM {TraceRecord._meta.db_table} rec "
    f"JOIN {TraceLine._meta.db_table} line ON line.id = rec.line_id "
    "WHERE line.batch_id IN ({placeholders})"
)


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
