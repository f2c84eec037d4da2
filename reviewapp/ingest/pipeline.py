"""The one ingest pipeline behind every way in (command, upload, API).

A delivery becomes an IngestBatch whose file is read in chunks: every non-blank line is
stored byte for byte, accepted (and turned into records) or rejected with its reason, or
recognised as already stored (ingest.lines). Runs born in this delivery are judged from
memory once the file has moved past them; a final sweep judges, from the database, every
run the delivery touched whose current judgement does not cover its last record (runs that
were appended to, and runs of a batch resumed after a crash) (ingest.judge).

Re-running a batch (a worker killed mid-way, say) loses and doubles nothing: each chunk
commits whole, line identities are unique, and the counts are read back from the database.
A worker works on a batch under its claim (reviewapp.durable, ingest.batches.BATCHES).

This module ingests a batch whole; one split into parts is ingested by ingest.parts, which
builds on it (ingest.batches decides which, when it sends the batch).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, closing
from dataclasses import replace
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

import psycopg
from django.conf import settings
from django.db import OperationalError
from django.db.models import Count, F, Q, Sum, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from reviewapp import durable
from reviewapp.ingest.batches import (
    BATCHES,
    IngestSummary,
    count_runs_touched,
    create_batch,
    left_to_do,
    send_to_shadow,
)
from reviewapp.ingest.files import BlankRun, InflateMeter, RawLine, iter_lines_and_blank_runs
from reviewapp.ingest.judge import RunsInFlight, judge_stored_runs, runs_to_judge
from reviewapp.ingest.kept import kept_delete, kept_open
from reviewapp.ingest.lines import (
    Line,
    count_identical_to_stored,
    drop_stored_spans,
    insert_new_lines,
    prepare_chunk,
    store_records,
)
from reviewapp.ingest.occurrences import OccurrenceCounter
from reviewapp.ingest.otel import SpanReport
from reviewapp.ingest.otlp_messages import kept_request_encoding, kept_request_lines
from reviewapp.ingest.redaction import ingest_redaction
from reviewapp.ingest.runs import ensure_runs
from reviewapp.ingest.stages import (
    StageClock,
    atomic_write,
    counting,
    fewer_collections,
    stage,
)
from reviewapp.ingest.writer import ChunkWriter
from reviewapp.judging.policies import ActivePolicy, active_policy
from reviewapp.models import IngestBatch, Ticket, TraceLine
from reviewapp.privacy.protected import protect

log = logging.getLogger(__name__)
CHUNK_LINES = 5000
Progress = Callable[[int, int], None]


class ChunkStored(NamedTuple):
    """What storing one chunk (or a whole file) added: its lines read, and of them the
    lines stored as accepted and as rejected (not the duplicates), the duplicates identical
    to a record without id or `seq` of an earlier delivery (lines.count_identical_to_stored),
    and the tickets it opened."""

    lines: int = 0
    accepted: int = 0
    rejected: int = 0
    tickets: int = 0
    identical: int = 0


# Told, after each chunk commits, how far through the file it ends (in its bytes) and what
# it added: a batch's page shows both while it runs.
Report = Callable[[int, ChunkStored], None]


# A deadlock or serialization failure between two deliveries of the same runs rolls back
# one chunk; the batch starts again (re-reading is safe) this many times before it fails.
TRANSIENT_TRIES = 4


def ingest_batch(
    batch: IngestBatch,
    *,
    progress: Progress | None = None,
    when: Q | None = None,
    decoded: Mapping[int, Any] | None = None,
) -> IngestSummary:
    """Read, store and judge one batch, whole (if it matches `when`); safe to call again
    on the same batch, and from two workers at once (the second finds it claimed and leaves
    it to the first). `decoded`: what lines of it decode to, by line number, known already
    (the OTLP receiver's, from protobuf), so that they are not decoded again."""
    with claim_batch(batch.pk, when=when) as claimed:
        if claimed is None:
            return IngestSummary.of(IngestBatch.objects.get(pk=batch.pk))
        clock = StageClock()
        with counting(clock):
            summary = run_retrying(batch, lambda: _ingest_locked(batch, progress, decoded))
        summary.stages = clock.rounded()
        return summary


def claim_batch(
    batch_pk: int, *, when: Q | None = None
) -> AbstractContextManager[IngestBatch | None]:
    """The batch's claim (reviewapp.durable) for the time inside: its lock, one more
    attempt, running; None when another worker has it, or when it is given up here, its
    worker having died in each of INGEST_MAX_ATTEMPTS tries."""
    return durable.claim(
        BATCHES,
        batch_pk,
        when=when,
        error="",
        started_at=Coalesce(F("started_at"), Value(timezone.now())),
    )


def run_retrying[T](batch: IngestBatch, work: Callable[[], T]) -> T:
    """`work` (storing or judging the batch's lines), started again after a transient
    failure; any other failure marks the batch failed and is raised."""
    tries_left = TRANSIENT_TRIES
    while True:
        tries_left -= 1
        try:
            return work()
        except OperationalError as exc:
            if tries_left and _is_transient(exc):
                log.warning("batch %s: %s; starting it again", batch.pk, exc.__cause__)
                continue
            _mark_failed(batch, exc)
            raise
        except Exception as exc:
            _mark_failed(batch, exc)
            raise


def _is_transient(exc: OperationalError) -> bool:
    return isinstance(exc.__cause__, psycopg.errors.TransactionRollback)


def _ingest_locked(
    batch: IngestBatch, progress: Progress | None, decoded: Mapping[int, Any] | None = None
) -> IngestSummary:
    active = active_policy()
    in_flight = RunsInFlight(active, batch)
    stored = store_file(batch, in_flight, report=_batch_report(batch, progress), decoded=decoded)
    with atomic_write():
        in_flight.judge_rest()
    return batch_finish(batch, lines=stored.lines, identical=stored.identical, active=active)


def batch_finish(
    batch: IngestBatch, *, lines: int, identical: int, active: ActivePolicy
) -> IngestSummary:
    """Once every line of the batch is stored (`lines` read in all, `identical` of them
    duplicates that may be repeated events: ChunkStored): judge the runs it touched that
    were not judged whole as the file went by, count what it holds, mark it done and send
    it on to shadow judging."""
    judge_stored_runs(
        runs_to_judge(batch, active),
        active=active,
        batch=batch,
        heartbeat=lambda: durable.beat(BATCHES, batch.pk),
    )
    stored = Counter(
        dict(
            TraceLine.objects.filter(batch=batch)
            .order_by()
            .values_list("accepted")
            .annotate(lines=Count("id"))
        )
    )
    ignored = TraceLine.objects.filter(batch=batch).aggregate(n=Sum("ignored"))["n"] or 0
    span_report = batch_span_report(batch)
    summary = IngestSummary(
        lines=lines,
        accepted=stored[True],
        rejected=stored[False],
        duplicates=lines - stored[True] - stored[False],
        identical=identical,
        ignored=ignored,
        runs=count_runs_touched({batch.pk}),
        tickets=Ticket.objects.filter(batch=batch).count(),
        batch_pks={batch.pk},
        span_report=span_report,
    )
    IngestBatch.objects.filter(pk=batch.pk).update(
        state=IngestBatch.State.DONE,
        finished_at=timezone.now(),
        bytes_done=batch.size_bytes,
        span_report=span_report.as_json() if span_report.spans else {},
        **summary.as_dict(),
    )
    batch.refresh_from_db()
    send_to_shadow(batch)
    if batch.channel != IngestBatch.Channel.CLI:
        # Every line is stored now: the kept copy of an upload or a body has done its work
        # (a file named on the command line is the user's own, and stays).
        kept_delete(batch.stored_path)
    return summary


def batch_span_report(batch: IngestBatch) -> SpanReport:
    """The span reports of the lines the batch stored, summed in file order (the first
    example of each reason is the file's first)."""
    report = SpanReport()
    stored = (
        TraceLine.objects.filter(batch=batch, span_report__isnull=False)
        .order_by("line_number")
        .values_list("span_report", flat=True)
    )
    for one in stored.iterator():
        report.add(SpanReport.of_json(one))
    return report


def _mark_failed(batch: IngestBatch, exc: BaseException) -> None:
    # What the batch page and the API show: no server detail (SQL, paths, trace data).
    log.exception("batch %s failed", batch.pk)
    durable.fail(
        BATCHES,
        batch.pk,
        f"stopped by an internal error ({type(exc).__name__}); every chunk stored before it "
        f"is kept, and it is tried again. The server log has the details under batch "
        f"{batch.pk}.",
    )


def ingest_stored_batch(batch_id: int) -> IngestSummary:
    """What the worker runs: a batch that is done, or given up, is not read again."""
    batch = IngestBatch.objects.get(pk=batch_id)
    if batch.state == IngestBatch.State.DONE:
        return IngestSummary.of(batch)
    return ingest_batch(batch, when=left_to_do())


def ingest_file(
    path: Path, *, channel: str, user: Any = None, progress: Progress | None = None
) -> IngestSummary:
    """Ingest a file where it lies (the command line), here: nothing is copied, and it is
    not split into parts (ingest.parts.ingest_file_in_parts does that)."""
    batch = create_batch(
        channel=channel, path=path.resolve(), file_name=str(path), user=user, parts=1
    )
    return ingest_batch(batch, progress=progress)


def store_file(
    batch: IngestBatch,
    in_flight: RunsInFlight,
    *,
    report: Report,
    take: Callable[[RawLine], bool] | None = None,
    decoded: Mapping[int, Any] | None = None,
) -> ChunkStored:
    """Store every line of the batch's file (with `take`, only the lines it takes) in
    chunks; return what that added, all chunks together. Each chunk is decoded here while
    the chunk before it is written (ingest.writer); `report` is told, as each chunk is
    written, how far through the file it ends, in its bytes, and what it added.

    A chunk is what is taken of a window of CHUNK_LINES lines of the file, by line number:
    a run is judged from memory once a window passes without it (ingest.judge), and with
    windows fixed by the file, that happens at the same line whoever reads it, however
    many parts share it (ingest.parts)."""
    occurrences = OccurrenceCounter()
    # The redaction rules in force when the file starts apply to all of it.
    redaction = ingest_redaction()
    with (
        fewer_collections(),
        kept_open(batch.stored_path) as stream,
        closing(occurrences),
        ChunkWriter() as writer,
    ):
        meter = InflateMeter.of(stream)
        chunk: list[RawLine] = []
        lines = _lines_of(batch, stream, meter)
        if decoded:
            lines = _with_decoded(lines, decoded)
        window = 0
        for raw_line in lines:
            if isinstance(raw_line, BlankRun):
                # Nothing to store for a while: the batch's progress still moves on.
                done = _position(stream.tell(), meter, batch.size_bytes)
                writer.submit(_report_progress, done, report)
                continue
            line_window = raw_line.number // CHUNK_LINES
            if line_window != window:
                with stage("decode"):
                    prepared = prepare_chunk(batch, chunk, occurrences, redaction)
                done = _position(stream.tell(), meter, batch.size_bytes)
                writer.submit(_store_and_report, batch, prepared, in_flight, done, report)
                if line_window > window + 1:
                    # A window of the file with nothing to store here: every run held
                    # has been passed by it.
                    writer.submit(_store_and_report, batch, [], in_flight, done, report)
                chunk, window = [], line_window
            if take is None or take(raw_line):
                chunk.append(raw_line)
        with stage("decode"):
            prepared = prepare_chunk(batch, chunk, occurrences, redaction)
        done = _position(stream.tell(), meter, batch.size_bytes)
        writer.submit(_store_and_report, batch, prepared, in_flight, done, report)
        # Column by column: every chunk's lines, accepted, and so on, summed.
        return ChunkStored(*map(sum, zip(*writer.results(), strict=True)))


def _lines_of(
    batch: IngestBatch, stream: BinaryIO, meter: InflateMeter | None
) -> Iterator[RawLine | BlankRun]:
    """The lines of the batch's file; an OTLP request kept whole for a worker is decoded
    into its lines here."""
    encoding = (
        kept_request_encoding(batch.stored_path)
        if batch.channel == IngestBatch.Channel.OTLP
        else None
    )
    if encoding is not None:
        return kept_request_lines(stream, batch.file_name, encoding=encoding, meter=meter)
    return iter_lines_and_blank_runs(
        stream,
        batch.file_name,
        max_decompressed=settings.INGEST_MAX_DECOMPRESSED_BYTES,
        meter=meter,
    )


def _with_decoded(
    lines: Iterator[RawLine | BlankRun], decoded: Mapping[int, Any]
) -> Iterator[RawLine | BlankRun]:
    for line in lines:
        unit = decoded.get(line.number) if isinstance(line, RawLine) else None
        yield line if unit is None else replace(line, decoded=unit)


def _store_and_report(
    batch: IngestBatch, lines: list[Line], in_flight: RunsInFlight, done: int, report: Report
) -> ChunkStored:
    stored = _store_chunk(batch, lines, in_flight)
    report(done, stored)
    return stored


def _report_progress(done: int, report: Report) -> ChunkStored:
    stored = ChunkStored()
    report(done, stored)
    return stored


def _position(read: int, meter: InflateMeter | None, size: int) -> int:
    """How far through the file, in its bytes. A gzip's compressed bytes are read far ahead
    of what is inflated (a file of alike lines is all read at once): its position is the
    share inflated so far, when its trailer says what it inflates to."""
    fraction = meter.fraction() if meter is not None else None
    if fraction is None:
        return read
    return int(size * fraction)


def _batch_report(batch: IngestBatch, progress: Progress | None) -> Report:
    def report(done: int, stored: ChunkStored) -> None:
        IngestBatch.objects.filter(pk=batch.pk).update(
            bytes_done=done, **durable.pulse(BATCHES), **stored_so_far(stored)
        )
        if progress:
            progress(done, batch.size_bytes)

    return report


def stored_so_far(stored: ChunkStored) -> dict[str, Any]:
    """A running batch's counts moved on by what a chunk added, in one UPDATE with its
    progress (its page reads them, instead of counting the lines stored so far each time
    it is polled). They are a chunk behind at most: when the batch ends, its counts are
    counted again from what it stored (batch_finish)."""
    return {
        name: F(name) + getattr(stored, name)
        for name in ("accepted", "rejected", "tickets")
        if getattr(stored, name)
    }


def _store_chunk(batch: IngestBatch, lines: list[Line], in_flight: RunsInFlight) -> ChunkStored:
    if not lines:
        if in_flight.held:
            with atomic_write():
                return ChunkStored(tickets=in_flight.take([], {}))
        return ChunkStored()
    with atomic_write():
        runs = ensure_runs([line.unit for line in lines if line.unit])
        drop_stored_spans(lines, runs)
        new_line_ids = insert_new_lines(batch, lines, runs)
        protect([row for line in lines for row in line.protected])
        identical = count_identical_to_stored(batch, lines, new_line_ids)
        fresh = [
            (lines[i], line_id) for i, line_id in sorted(new_line_ids.items()) if lines[i].unit
        ]
        tickets = in_flight.take(store_records(fresh, runs), runs)
    return ChunkStored(
        lines=len(lines),
        accepted=len(fresh),
        rejected=sum(1 for i in new_line_ids if lines[i].unit is None),
        tickets=tickets,
        identical=identical,
    )
