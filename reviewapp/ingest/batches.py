"""Batches: one delivery of one file or body each, its summary, and sending it to a worker.
A batch is a unit of durable work (reviewapp.durable; BATCHES says how): sent again when
its worker died, its message was lost, or it failed with tries left."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Q
from django.utils import timezone

from reviewapp import durable
from reviewapp.celery import Tasks
from reviewapp.durable import Durable, Send
from reviewapp.infra.locks import Space
from reviewapp.ingest.kept import kept_delete, kept_exists
from reviewapp.ingest.otel import SpanReport
from reviewapp.ingest.streams import file_digest
from reviewapp.models import IngestBatch, ShadowDesignation, TraceLine, TraceRecord

log = logging.getLogger(__name__)


def _sent_as(batch: IngestBatch) -> Send:
    """A batch goes to a worker whole (ingest.pipeline), or to one that sends its parts to
    workers of their own (ingest.parts): decided here, by how many parts it was given."""
    return Send(Tasks.INGEST_IN_PARTS if batch.parts > 1 else Tasks.INGEST_BATCH, (batch.pk,))


BATCHES = Durable(
    name="batch",
    model=IngestBatch,
    task=Tasks.INGEST_BATCH,
    sends=_sent_as,
    lock=Space.BATCH,
    # A file named on the command line is stored by the command, never sent to a worker.
    watched=~Q(channel=IngestBatch.Channel.CLI),
    # Its worker died: nobody holds its lock, and it has been silent a few seconds. A batch
    # in parts is worked on under its parts' locks (ingest.parts.PARTS tells when one dies).
    lost_after=5,
    lost_when=Q(parts__lte=1),
    stalled_after="INGEST_STALL_SECONDS",
    requeue_after="INGEST_REQUEUE_SECONDS",
    retry_after="INGEST_RETRY_SECONDS",
    max_attempts="INGEST_MAX_ATTEMPTS",
    keeps="every chunk stored before is kept",
)


# What a summary counts, in the order the command line and the API give it; all but
# `runs` add up across batches (runs two batches share count once).
COUNTED = ("lines", "accepted", "duplicates", "identical", "rejected", "runs", "tickets", "ignored")
SUMMED = tuple(name for name in COUNTED if name != "runs")


@dataclass
class IngestSummary:
    lines: int = 0
    accepted: int = 0
    duplicates: int = 0
    rejected: int = 0
    runs: int = 0
    tickets: int = 0
    # Spans read from accepted lines that are not tool calls (not counted as lines).
    ignored: int = 0
    # Of the duplicates, lines of a record with no id and no `seq` identical to one its run
    # holds from an earlier delivery: a re-delivery, or a repeated event `seq` would keep.
    identical: int = 0
    # Which batches were summed, so that several files count each run they share once.
    batch_pks: set[int] = field(default_factory=set, repr=False, compare=False)
    # Seconds by stage (ingest.stages), of the batches ingested here.
    stages: dict[str, float] = field(default_factory=dict, repr=False, compare=False)
    # External formats: spans read, tool calls, and the spans dropped and why.
    span_report: SpanReport = field(default_factory=SpanReport)

    def add(self, other: IngestSummary) -> None:
        first = not self.batch_pks
        for name in SUMMED:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.batch_pks |= other.batch_pks
        self.span_report.add(other.span_report)
        for stage, seconds in other.stages.items():
            self.stages[stage] = round(self.stages.get(stage, 0.0) + seconds, 6)
        # Runs two batches share count once: counted again, unless there is one batch.
        self.runs = other.runs if first else count_runs_touched(self.batch_pks)

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in COUNTED}

    def as_json(self) -> dict[str, Any]:
        """The counts, and what the spans of an external format came to (when it had any)."""
        shown: dict[str, Any] = dict(self.as_dict())
        if self.span_report.spans:
            shown["spans"] = self.span_report.summary_json()
        return shown

    @classmethod
    def of(cls, batch: IngestBatch) -> IngestSummary:
        return cls(
            lines=batch.lines,
            accepted=batch.accepted,
            duplicates=batch.duplicates,
            identical=batch.identical,
            rejected=batch.rejected,
            runs=batch.runs,
            tickets=batch.tickets,
            ignored=batch.ignored,
            span_report=SpanReport.of_json(batch.span_report),
        )


def identical_note(identical: int) -> str:
    """What a summary says of its duplicates that may be repeated events (identical), and
    what keeps those."""
    return (
        f"{identical:,} of them identical to a record of the run already stored, with no id "
        "or seq to tell a repeated event from a re-delivery; seq keeps repeated events"
    )


def create_batch(
    *,
    channel: str,
    path: Path | str,
    file_name: str,
    digest: tuple[str, int] | None = None,
    user: Any = None,
    token: Any = None,
    idempotency_key: str | None = None,
    parts: int | None = None,
) -> IngestBatch:
    """A batch for the file at `path` (a file of this machine, or a name in the uploads
    storage: ingest.kept, with its `digest`), split into `parts` (by default, as its
    channel, its size and the settings say: _parts_for)."""
    sha256, size = digest or file_digest(Path(path))
    if parts is None:
        parts = _parts_for(channel, size)
    return IngestBatch.objects.create(
        parts=parts,
        channel=channel,
        file_name=file_name[-255:],  # a long path keeps its end: the file's own name
        content_sha256=sha256,
        size_bytes=size,
        stored_path=str(path),
        created_by=user if user is not None and user.is_authenticated else None,
        api_token=token,
        idempotency_key=idempotency_key,
    )


def _parts_for(channel: str, size: int) -> int:
    """Into how many parts (ingest.parts) a delivery is split: INGEST_PARTS from
    INGEST_PARTS_MIN_BYTES on. Never what is ingested while the client waits
    (ingest.receive), nor OTLP spans, an external format that one part would store whole."""
    smallest = max(settings.INGEST_PARTS_MIN_BYTES, settings.INGEST_INLINE_MAX_BYTES + 1)
    if channel == IngestBatch.Channel.OTLP or size < smallest:
        return 1
    return max(1, settings.INGEST_PARTS)


def left_to_do() -> Q:
    """The batches a worker's message may claim: neither done nor given up (failed with no
    tries left). A message delivered again after its batch ended, or sent by the
    reconciler beside it, finds nothing to do."""
    return ~Q(state=IngestBatch.State.DONE) & ~Q(
        state=IngestBatch.State.FAILED, attempts__gte=settings.INGEST_MAX_ATTEMPTS
    )


def send_to_worker(batch: IngestBatch) -> None:
    """Queue the batch for a worker once the current transaction commits; its heartbeat
    starts now, so that a message lost on the way is noticed (reviewapp.durable)."""
    durable.dispatch(BATCHES, batch)


def send_to_shadow(batch: IngestBatch) -> None:
    """Once the ingest commits, have a worker judge the delivery's runs under every
    candidate in shadow (with none in shadow, nothing is sent). Ingest itself neither waits
    for it nor knows what it does."""
    if ShadowDesignation.objects.filter(ended_at__isnull=True).exists():
        durable.send(Tasks.SHADOW_JUDGE_BATCH, batch.pk)


class BatchNotRetryable(Exception):
    """A batch that cannot be sent again: not failed, or its kept file is gone."""


def retry_batch(batch: IngestBatch, *, body: str | None = None) -> None:
    """Send a failed batch to a worker again. `body`: the same content received again
    (an API client re-posting) and kept (its name in the uploads storage), the batch's in
    place of a file that is gone."""
    if batch.state != IngestBatch.State.FAILED:
        raise BatchNotRetryable(f"the batch is {batch.state}, not failed")
    kept = kept_exists(batch.stored_path)
    if body is not None and not kept:
        batch.stored_path = body
        IngestBatch.objects.filter(pk=batch.pk).update(stored_path=body)
        kept = True
    if not kept:
        raise BatchNotRetryable("its file is no longer kept; send the traces again")
    IngestBatch.objects.filter(pk=batch.pk, state=IngestBatch.State.FAILED).update(
        state=IngestBatch.State.QUEUED, error=""
    )
    send_to_worker(batch)


def failed_bodies_delete(*, kept_for: timedelta, max_attempts: int) -> int:
    """Delete what was kept of every upload or API body whose batch failed with no tries
    left, once `kept_for` has passed since (for an operator to look at it or retry it by
    hand); the batch says so. A file named on the command line is the user's own, and
    stays. Returns how many were deleted."""
    expired = IngestBatch.objects.exclude(channel=IngestBatch.Channel.CLI).filter(
        state=IngestBatch.State.FAILED,
        attempts__gte=max_attempts,
        finished_at__lt=timezone.now() - kept_for,
    )
    deleted = 0
    for batch in expired.exclude(stored_path="").only("pk", "stored_path", "error"):
        kept_delete(batch.stored_path)
        IngestBatch.objects.filter(pk=batch.pk, state=IngestBatch.State.FAILED).update(
            stored_path="",
            error=f"{batch.error} Its kept body was deleted after {kept_for.days} days.".strip(),
        )
        deleted += 1
    return deleted


def count_runs_touched(batch_pks: set[int]) -> int:
    """How many runs these batches stored records for."""
    if not batch_pks:
        return 0
    placeholders = ", ".join(["%s"] * len(batch_pks))
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM ({RUNS_OF_BATCHES.format(placeholders=placeholders)}) runs",
            sorted(batch_pks),
        )
        return cursor.fetchone()[0]


RUNS_OF_BATCHES = (
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
