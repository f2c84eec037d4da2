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
import json
import logging
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import IO, Any

import psycopg
from django.conf import settings
from django.db import OperationalError, connection, transaction
from django.db.models import Count, F, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from reviewapp.engine import (
    AgentAction,
    Observation,
    Record,
    RecordError,
    Resolution,
    RunStarted,
    ToolCall,
)
from reviewapp.infra.bulk import bound_cursor, insert_rows
from reviewapp.ingest.files import RawLine, iter_raw_lines
from reviewapp.ingest.formats import DecodedUnit, decode_unit, parse_timestamp
from reviewapp.ingest.occurrences import OccurrenceCounter
from reviewapp.judging.policies import ActivePolicy, active_policy
from reviewapp.judging.store import RunToJudge, judge_stored_runs, record_judgements
from reviewapp.models import IngestBatch, Judgement, Run, Ticket, TraceLine, TraceRecord

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


# A deadlock or serialization failure between two deliveries of the same runs rolls back
# one chunk; the batch starts again (re-reading is safe) this many times before it fails.
TRANSIENT_TRIES = 4


def ingest_batch(batch: IngestBatch, *, progress: Progress | None = None) -> IngestSummary:
    """Read, store and judge one batch; safe to call again on the same batch, and from two
    workers at once (the second finds it taken and leaves it to the first)."""
    with _batch_lock(batch.pk) as taken:
        if not taken:
            log.info("batch %s is being ingested elsewhere; left to that worker", batch.pk)
            return IngestSummary.of(IngestBatch.objects.get(pk=batch.pk))
        IngestBatch.objects.filter(pk=batch.pk).update(
            state=IngestBatch.State.RUNNING,
            started_at=batch.started_at or timezone.now(),
            heartbeat_at=timezone.now(),
            error="",
            attempts=F("attempts") + 1,
        )
        tries_left = TRANSIENT_TRIES
        while True:
            tries_left -= 1
            try:
                return _ingest_locked(batch, progress)
            except OperationalError as exc:
                if tries_left and _is_transient(exc):
                    log.warning("batch %s: %s; starting it again", batch.pk, exc.__cause__)
                    continue
                _mark_failed(batch, exc)
                raise
            except Exception as exc:
                _mark_failed(batch, exc)
                raise


@contextmanager
def _batch_lock(batch_pk: int) -> Iterator[bool]:
    """A PostgreSQL advisory lock on the batch for as long as this connection holds it
    (a killed worker's connection ends, and the lock with it). SQLite serialises writers
    by itself: there, every caller takes it."""
    if connection.vendor != "postgresql":
        yield True
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [BATCH_LOCK_SPACE, batch_pk])
        taken = cursor.fetchone()[0]
    try:
        yield taken
    finally:
        if taken:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [BATCH_LOCK_SPACE, batch_pk])


# The first key of every advisory lock on a batch (the second is its id).
BATCH_LOCK_SPACE = 0x1B47C4


def _is_transient(exc: OperationalError) -> bool:
    return isinstance(exc.__cause__, psycopg.errors.TransactionRollback)


def _ingest_locked(batch: IngestBatch, progress: Progress | None) -> IngestSummary:
    active = active_policy()
    in_flight = _RunsInFlight(active, batch)
    lines = _store_file(batch, progress, in_flight)
    with transaction.atomic():
        in_flight.judge_rest()
    judge_stored_runs(
        _runs_to_judge(batch, active),
        active=active,
        batch=batch,
        heartbeat=lambda: _beat(batch.pk),
    )
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


def _mark_failed(batch: IngestBatch, exc: BaseException) -> None:
    # What the batch page and the API show: no server detail (SQL, paths, trace data).
    log.exception("batch %s failed", batch.pk)
    IngestBatch.objects.filter(pk=batch.pk).update(
        state=IngestBatch.State.FAILED,
        error=(
            f"stopped by an internal error ({type(exc).__name__}); every chunk stored "
            f"before it is kept, and it is tried again. The server log has the details "
            f"under batch {batch.pk}."
        ),
        finished_at=timezone.now(),
    )


def _beat(batch_pk: int) -> None:
    IngestBatch.objects.filter(pk=batch_pk).update(heartbeat_at=timezone.now())


def send_to_worker(batch: IngestBatch) -> None:
    """Queue the batch for a worker once the current transaction commits; its heartbeat
    starts now, so that a message lost on the way is noticed (see stalled_batches)."""
    from reviewapp.tasks import ingest_batch_task

    IngestBatch.objects.filter(pk=batch.pk).update(heartbeat_at=timezone.now())
    # robust: a broker that is down must not fail the request that stored the batch.
    transaction.on_commit(lambda: ingest_batch_task.delay(batch.pk), robust=True)


class BatchNotRetryable(Exception):
    """A batch that cannot be sent again: not failed, or its kept file is gone."""


def retry_batch(batch: IngestBatch, *, body: Path | None = None) -> None:
    """Send a failed batch to a worker again. `body`: the same content received again
    (an API client re-posting), kept in place of a file that is gone."""
    if batch.state != IngestBatch.State.FAILED:
        raise BatchNotRetryable(f"the batch is {batch.state}, not failed")
    if body is not None and not Path(batch.stored_path).exists():
        body.replace(batch.stored_path)
    if not Path(batch.stored_path).exists():
        raise BatchNotRetryable("its file is no longer kept; send the traces again")
    IngestBatch.objects.filter(pk=batch.pk, state=IngestBatch.State.FAILED).update(
        state=IngestBatch.State.QUEUED, error=""
    )
    send_to_worker(batch)


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
    occurrences = OccurrenceCounter()
    with open(batch.stored_path, "rb") as stream, closing(occurrences):
        chunk: list[RawLine] = []
        lines = iter_raw_lines(
            stream, batch.file_name, max_decompressed=settings.INGEST_MAX_DECOMPRESSED_BYTES
        )
        for raw_line in lines:
            chunk.append(raw_line)
            if len(chunk) >= CHUNK_LINES:
                count += _store_chunk(batch, _prepare_chunk(batch, chunk, occurrences), in_flight)
                chunk = []
                _report(batch, stream.tell(), progress)
        count += _store_chunk(batch, _prepare_chunk(batch, chunk, occurrences), in_flight)
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


def _prepare_chunk(
    batch: IngestBatch, raw_lines: list[RawLine], occurrences: OccurrenceCounter
) -> list[_Line]:
    """Decode and hash a chunk's lines (no database): identical bytes of one owner are
    numbered as occurrences within the whole file."""
    lines = [_prepare(batch, raw_line) for raw_line in raw_lines]
    keys = [
        hashlib.sha256(f"{line.owner}\x1f{line.line_hash}".encode()).digest()[:16] for line in lines
    ]
    for line, occurrence in zip(lines, occurrences.number(keys), strict=True):
        line.occurrence = occurrence
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
        # In one order everywhere: two deliveries creating the same runs never deadlock.
        rows = [_new_run(run_id, starts.get(run_id), now) for run_id in sorted(missing)]
        born = _insert_runs(rows)
        for run_id, agent, *_ in rows:
            if run_id in born:
                runs[run_id] = _RunInfo(born[run_id], agent, True)
        # Those another delivery created meanwhile are known, not born, here.
        runs.update(_known_runs([run_id for run_id in missing if run_id not in born]))
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


def _insert_runs(rows: list[tuple[Any, ...]]) -> dict[str, int]:
    """Create these runs (RUN_COLUMNS rows) unless they exist; {run id: pk} of those this
    call created. Two deliveries of one new run at once: one creates it, the other waits for
    that commit and then finds it made."""
    if connection.vendor != "postgresql":
        # SQLite takes the write lock when the chunk's transaction begins: nobody else can
        # create a run between the lookup and this insert.
        ids = insert_rows(Run, RUN_COLUMNS, rows, return_ids=True)
        return {row[0]: pk for pk, row in zip(ids, rows, strict=True)}
    columns = [list(column) for column in zip(*rows, strict=True)]
    columns[2] = [None if subject is None else json.dumps(subject) for subject in columns[2]]
    with bound_cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {Run._meta.db_table} (run_id, agent, subject, started_at, "
            "first_ingested_at) SELECT r.*, now() FROM unnest(%s::text[], %s::text[], "
            "%s::jsonb[], %s::timestamptz[]) r ON CONFLICT (run_id) DO NOTHING "
            "RETURNING run_id, id",
            columns,
        )
        return dict(cursor.fetchall())


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


def stalled_batches(
    *, running: timedelta, queued: timedelta, failed: timedelta, max_attempts: int
) -> list[IngestBatch]:
    """Batches to send to a worker again (re-ingesting is safe, see the module docstring):
    running ones whose heartbeat stopped (their worker died), queued ones no worker took
    (the message was lost), and failed ones with tries left, after a pause that grows with
    each try."""
    now = timezone.now()
    silent_since = Coalesce("heartbeat_at", "created_at")
    return list(
        IngestBatch.objects.exclude(channel=IngestBatch.Channel.CLI)
        .alias(silent_since=silent_since)
        .filter(
            Q(state=IngestBatch.State.RUNNING, silent_since__lt=now - running)
            | Q(state=IngestBatch.State.QUEUED, silent_since__lt=now - queued)
            | Q(
                state=IngestBatch.State.FAILED,
                attempts__lt=max_attempts,
                finished_at__lt=now - failed * F("attempts"),
            )
        )
        .order_by("created_at")
    )
