"""Deliveries and what they held: batches, API tokens, runs, lines as received and the
records read from them (lines and records are written once and never changed)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

from django.conf import settings
from django.contrib.postgres.indexes import GinIndex, OpClass
from django.db import connection, models
from django.db.models import Q
from django.db.models.functions import Lower

from reviewapp.engine import RecordError, decode_line, line_payload
from reviewapp.models import guards

log = logging.getLogger(__name__)


class ApiToken(models.Model):
    """A bearer token for the ingest API; only its SHA-256 is stored."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=12)
    token_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class IngestBatch(models.Model):
    """One delivery of one file or body, by one way in."""

    class Channel(models.TextChoices):
        CLI = "cli", "command line"
        UPLOAD = "upload", "browser upload"
        API = "api", "HTTP API"
        OTLP = "otlp", "OTLP receiver"

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    channel = models.CharField(max_length=10, choices=Channel.choices)
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    api_token = models.ForeignKey(
        ApiToken, null=True, blank=True, on_delete=models.PROTECT, related_name="batches"
    )
    idempotency_key = models.CharField(max_length=200, null=True, blank=True)
    file_name = models.CharField(max_length=255)
    content_sha256 = models.CharField(max_length=64, db_index=True)
    size_bytes = models.BigIntegerField(default=0)
    stored_path = models.CharField(max_length=500, blank=True)
    bytes_done = models.BigIntegerField(default=0)
    # Counted from what it stored when it ends; while it runs, accepted, rejected and
    # tickets move on with each chunk stored (ingest.pipeline.stored_so_far).
    lines = models.PositiveIntegerField(default=0)
    accepted = models.PositiveIntegerField(default=0)
    duplicates = models.PositiveIntegerField(default=0)
    # Of the duplicates, lines of a record with no id and no `seq` (an action, say)
    # identical to one its run holds from an earlier delivery: each a re-delivery, or a
    # repeated event that `seq` would have kept (spec/traces.md). Counted once done.
    identical = models.PositiveIntegerField(default=0)
    rejected = models.PositiveIntegerField(default=0)
    runs = models.PositiveIntegerField(default=0)
    tickets = models.PositiveIntegerField(default=0)
    # Spans of accepted lines that are not tool calls (an external format's chat spans, say).
    ignored = models.PositiveIntegerField(default=0)
    # Its lines' span reports summed once done (otel.SpanReport.as_json): spans read, tool
    # calls, and the spans dropped by reason with a count and a first example. {}: no spans.
    span_report = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    # How many times a worker has started on it: a failed batch is tried again a few times.
    attempts = models.PositiveIntegerField(default=0)
    # Into how many parts its lines are split, each ingested by a worker of its own
    # (ingest.parts); 1: one worker reads and stores it all.
    parts = models.PositiveSmallIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    # Set when sent to a worker, then moved by every committed chunk and judging step: a
    # running batch whose heartbeat stops has lost its worker.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # When retention had expired every line of it (privacy/retention.py): not read again.
    raw_expired_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        # Lines point at their batch by a hand-made check (see TraceLine.batch).
        triggers = guards.referenced(("reviewapp_traceline", "batch_id"))
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["api_token", "idempotency_key"],
                condition=Q(idempotency_key__isnull=False),
                name="batch_idempotency_key_per_token",
            )
        ]

    def __str__(self) -> str:
        return f"{self.file_name} ({self.get_channel_display()})"

    @property
    def progress_percent(self) -> int:
        if self.state == self.State.DONE:
            return 100
        if not self.size_bytes:
            return 0
        return min(99, int(self.bytes_done * 100 / self.size_bytes))

    @property
    def is_finished(self) -> bool:
        return self.state in (self.State.DONE, self.State.FAILED)

    @property
    def is_read_whole(self) -> bool:
        """Running, with its file read to its end: what is left is the final sweep
        (ingest.pipeline.batch_finish), while its bar stands at 99%."""
        return self.state == self.State.RUNNING and 0 < self.size_bytes <= self.bytes_done


class IngestPart(models.Model):
    """One worker's share of a batch split into parts (ingest.parts)."""

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    batch = models.ForeignKey(IngestBatch, on_delete=models.PROTECT, related_name="part_rows")
    index = models.PositiveSmallIntegerField()
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    # How far through the batch's file this part has read (every part reads all of it).
    bytes_done = models.BigIntegerField(default=0)
    # The units of the file that are this part's.
    lines = models.PositiveIntegerField(default=0)
    # Of them, duplicates that may be repeated events (IngestBatch.identical).
    identical = models.PositiveIntegerField(default=0)
    # Seconds by ingest stage (ingest.stages), as its worker counted them.
    stages = models.JSONField(default=dict, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["batch", "index"]
        constraints = [
            models.UniqueConstraint(fields=["batch", "index"], name="ingest_part_per_batch")
        ]

    def __str__(self) -> str:
        return f"part {self.index + 1} of batch {self.batch_id}"


class ServicePulse(models.Model):
    """When a background service last showed it was alive (the worker answering beat's
    canary task, say): the pages warn when it has been silent too long."""

    name = models.CharField(max_length=40, unique=True)
    seen_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.name} at {self.seen_at:%Y-%m-%d %H:%M:%S}"


class Run(models.Model):
    class Clock(models.TextChoices):
        """Where a run's start comes from (ingest.runs): the first that a run has."""

        RUN_STARTED = "run_started", "from its run_started"
        RECORDS = "records", "from its earliest span or record"
        ARRIVAL = "arrival", "when it arrived: no time in its records"

    run_id = models.TextField()
    agent = models.CharField(max_length=200, blank=True)
    subject = models.JSONField(null=True, blank=True)
    # When the run started (`started_from` says how that is known); its tally month. Used
    # for reports, never to order evidence. The arrival is first_ingested_at (and batches').
    started_at = models.DateTimeField(db_index=True)
    started_from = models.CharField(max_length=12, choices=Clock, db_default=Clock.ARRIVAL)
    # Its start moved after the run was first stored (a later piece held an earlier span):
    # the tallies read it again at their next refresh, which sets this back.
    clock_moved = models.BooleanField(db_default=False)
    first_ingested_at = models.DateTimeField(auto_now_add=True)
    current_judgement = models.ForeignKey(
        "Judgement", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    # When retention first expired raw data of its lines (privacy/retention.py), and the
    # window then: such a run is never judged again (its current judgement stays).
    raw_expired_at = models.DateTimeField(null=True, blank=True)
    retention_days = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        # Records point at their run by a hand-made check (see TraceRecord.run).
        triggers = guards.only_active_current() + guards.referenced(
            ("reviewapp_tracerecord", "run_id")
        )
        ordering = ["-started_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["run_id"], name="run_id_unique")]
        indexes = [
            # The few runs whose start moved, read by every refresh of the tallies.
            models.Index(fields=["id"], condition=Q(clock_moved=True), name="run_clock_moved"),
            # The queue's search box: a fragment of a run id (review/search.py).
            GinIndex(OpClass(Lower("run_id"), name="gin_trgm_ops"), name="run_id_trigrams"),
        ]

    def __str__(self) -> str:
        return self.run_id


class TraceLine(models.Model):
    """A received line, byte for byte, accepted or rejected with its reason.

    `identity` makes re-delivery a no-op: for an accepted line, its run ids, the hash of its
    bytes (of its spans' ids, for an external format) and which occurrence of those it is in
    the file; for a rejected line, its batch, the line's hash and its occurrence in it (a
    file sent again reports its bad lines again)."""

    # Indexed by trace_line_batch_state (batch first); ingest writes millions of these rows,
    # so no index is kept twice here or below.
    # Not a foreign key: checked once per statement (guards.references), as a record's run
    # and line are. Real foreign keys on these three cost the ingest more than 15%
    # (benchmarks/ingest.py --n 100000, median of 7 runs on 2 shared cores: 1,470 lines/s
    # against 1,869, -21%; ingest alone, 13 paired rounds: +17% wall time, +19% processor
    # time, ours and PostgreSQL's), against -6% (1,762 lines/s, 5 runs; +8% and +8% in 17
    # rounds) with the other ten references real and these three kept (issue 25). The
    # batch's alone made real, records kept: +14% wall, +12% processor time in 7 rounds.
    batch = models.ForeignKey(
        IngestBatch,
        on_delete=models.PROTECT,
        related_name="trace_lines",
        db_index=False,
        db_constraint=False,
    )
    # The first 128 bits of the SHA-256 of what identifies the line (ingest.lines): 16
    # bytes in the unique index every ingest probes, not 64 hex characters.
    identity = models.UUIDField()
    line_number = models.PositiveIntegerField()
    raw = models.BinaryField()
    accepted = models.BooleanField()
    reason = models.TextField(blank=True)
    format = models.CharField(max_length=20, default="native")
    # Spans it held that are not tool calls (an external format), counted, not stored apart.
    ignored = models.PositiveIntegerField(default=0)
    # An external format's span report (otel.SpanReport.as_json); NULL for a native line.
    span_report = models.JSONField(null=True, blank=True)
    # The tombstone (privacy/retention.py): when its raw bytes were replaced by nothing, and
    # the SHA-256 (hex) and length of those bytes. NULL while it holds them.
    expired_at = models.DateTimeField(null=True, blank=True)
    raw_sha256 = models.CharField(max_length=64, null=True, blank=True)
    raw_size = models.BigIntegerField(null=True, blank=True)

    class Meta:
        triggers = guards.append_only(
            allowed_update=guards.TRACE_LINE_TOMBSTONE
        ) + guards.references(("batch_id", "reviewapp_ingestbatch"))
        constraints = [
            models.UniqueConstraint(fields=["identity"], name="trace_line_identity_unique")
        ]
        indexes = [models.Index(fields=["batch", "accepted"], name="trace_line_batch_state")]

    def __str__(self) -> str:
        return f"{self.batch.file_name}:{self.line_number}"

    @property
    def text(self) -> str:
        return bytes(self.raw).decode("utf-8", errors="replace")


class TraceRecord(models.Model):
    """One native record (from a native line, or converted from an external span), in
    recording order: the id grows with line order, which is the only order the engine trusts."""

    class Type(models.TextChoices):
        RUN_STARTED = "run_started"
        TOOL_CALL = "tool_call"
        TOOL_OBSERVATION = "tool_observation"
        OBSERVATION_RESOLUTION = "observation_resolution"
        AGENT_ACTION = "agent_action"

    # Indexed by trace_record_run_order (run first).
    # Not foreign keys: checked once per statement (guards.references), as a line's batch
    # is (see TraceLine.batch for the figure).
    run = models.ForeignKey(
        Run, on_delete=models.PROTECT, related_name="records", db_index=False, db_constraint=False
    )
    line = models.ForeignKey(
        TraceLine, on_delete=models.PROTECT, related_name="records", db_constraint=False
    )
    type = models.CharField(max_length=30, choices=Type.choices)
    # toolCallId for calls, observationId for observations, name for actions.
    key = models.TextField(blank=True)
    source = models.TextField(blank=True)
    # The record converted from an external span. A native line's record is the line
    # itself, kept once, as its bytes: here NULL (record_document reads the line).
    data = models.JSONField(null=True, blank=True)

    class Meta:
        triggers = guards.append_only(
            allowed_update=guards.TRACE_RECORD_TOMBSTONE
        ) + guards.references(("run_id", "reviewapp_run"), ("line_id", "reviewapp_traceline"))
        indexes = [models.Index(fields=["run", "id"], name="trace_record_run_order")]

    def __str__(self) -> str:
        return f"{self.type} {self.key}"

    @property
    def document(self) -> dict[str, Any]:
        """The record as the engine reads it (fetch `line` with it: a native record's
        document is its line's). RecordError once its line's raw data expired."""
        return record_document(self.data, None if self.data is not None else self.line.raw)


def stored_documents(run_pks: Iterable[int]) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """(run pk, record id, document) of these runs' records, by run pk and then in
    recording order, read in bounded memory. A native line that no longer decodes (an
    engine grown stricter since) is skipped, loudly, as judging skips a record that no
    longer parses. A run whose raw data expired (Run.raw_expired_at) yields nothing: what
    is left of it is no longer the run, and no one judges it again."""
    pks = sorted(set(run_pks))
    after: tuple[int, int] = (0, 0)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id FROM reviewapp_run WHERE id = ANY(%s) AND raw_expired_at IS NULL", [pks]
        )
        pks = sorted(pk for (pk,) in cursor.fetchall())
        while True:
            # Keyset pages along the (run, id) index. The ids travel as one array
            # parameter: thousands of IN placeholders cost more to build than to run.
            cursor.execute(
                "SELECT run_id, id, data, line_id FROM reviewapp_tracerecord "
                "WHERE run_id = ANY(%s) AND (run_id, id) > (%s, %s) ORDER BY run_id, id LIMIT %s",
                [pks, *after, STORED_DOCUMENTS_CHUNK],
            )
            chunk = cursor.fetchall()
            if not chunk:
                return
            after = (chunk[-1][0], chunk[-1][1])
            # The native records' lines by their ids, a chunk at a time. Not a join: planned
            # on the statistics of tables an ingest has just filled, it can become a scan of
            # every line for each record.
            native = [line_id for _, _, data, line_id in chunk if data is None]
            cursor.execute("SELECT id, raw FROM reviewapp_traceline WHERE id = ANY(%s)", [native])
            raws = dict(cursor.fetchall())
            for run_pk, record_id, data, line_id in chunk:
                try:
                    document = record_document(
                        decode_line(data) if isinstance(data, str) else data, raws.get(line_id)
                    )
                except RecordError:
                    log.warning("stored record %s no longer decodes; skipped", record_id)
                    continue
                yield run_pk, record_id, document


STORED_DOCUMENTS_CHUNK = 5000


def record_document(data: dict[str, Any] | None, raw: bytes | memoryview | None) -> dict[str, Any]:
    """A stored record's document: its own data (converted from an external span), or the
    JSON of its native line's bytes, as ingest decoded them (engine.line_payload: only a
    file's first line can open with a BOM, so any is taken off)."""
    if data is not None:
        return data
    assert raw is not None, "a native record's line is read with it"
    if not raw:
        # A tombstone (privacy/retention.py): an accepted line is never empty.
        raise RecordError(EXPIRED)
    return decode_line(line_payload(bytes(raw), first=True))


EXPIRED = "raw data expired"
