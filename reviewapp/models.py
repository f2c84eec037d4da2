"""Crosscheck's stored facts.

Lines, records, judgements, verdicts and findings are written once and never changed:
a run judged again gets a new judgement beside the old one. Tickets are the work items
that move; every move of a ticket is an AuditEvent.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q


class PolicyVersion(models.Model):
    """A published, numbered, immutable policy document (the database refuses UPDATE and
    DELETE of its rows)."""

    number = models.PositiveIntegerField(unique=True)
    name = models.CharField(max_length=200, blank=True)
    document = models.JSONField()
    reason = models.TextField(blank=True)
    based_on = models.PositiveIntegerField(default=0, help_text="the version it was drafted from")
    published_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    published_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-number"]

    def __str__(self) -> str:
        return f"v{self.number}"


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
    lines = models.PositiveIntegerField(default=0)
    accepted = models.PositiveIntegerField(default=0)
    duplicates = models.PositiveIntegerField(default=0)
    rejected = models.PositiveIntegerField(default=0)
    runs = models.PositiveIntegerField(default=0)
    tickets = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    # How many times a worker has started on it: a failed batch is tried again a few times.
    attempts = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    # Set when sent to a worker, then moved by every committed chunk and judging step: a
    # running batch whose heartbeat stops has lost its worker.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
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


class ServicePulse(models.Model):
    """When a background service last showed it was alive (the worker answering beat's
    canary task, say): the pages warn when it has been silent too long."""

    name = models.CharField(max_length=40, unique=True)
    seen_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.name} at {self.seen_at:%Y-%m-%d %H:%M:%S}"


class Run(models.Model):
    run_id = models.TextField()
    agent = models.CharField(max_length=200, blank=True)
    subject = models.JSONField(null=True, blank=True)
    # The run's own clock (run_started) when it gives one, else when it first arrived;
    # used for monthly tallies, never to order evidence.
    started_at = models.DateTimeField(db_index=True)
    first_ingested_at = models.DateTimeField(auto_now_add=True)
    current_judgement = models.ForeignKey(
        "Judgement", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    class Meta:
        ordering = ["-started_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["run_id"], name="run_id_unique")]

    def __str__(self) -> str:
        return self.run_id


class TraceLine(models.Model):
    """A received line, byte for byte, accepted or rejected with its reason.

    `identity` makes re-delivery a no-op: for an accepted line, its run ids, the hash of its
    bytes and which occurrence of those bytes it is in the run; for a rejected line, the
    delivery's content hash, the line's hash and its occurrence in that delivery."""

    # Indexed by trace_line_batch_state (batch first); ingest writes millions of these rows,
    # so no index is kept twice here or below.
    batch = models.ForeignKey(
        IngestBatch, on_delete=models.PROTECT, related_name="trace_lines", db_index=False
    )
    identity = models.CharField(max_length=64)
    line_number = models.PositiveIntegerField()
    raw = models.BinaryField()
    accepted = models.BooleanField()
    reason = models.TextField(blank=True)
    format = models.CharField(max_length=20, default="native")

    class Meta:
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
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="records", db_index=False)
    line = models.ForeignKey(TraceLine, on_delete=models.PROTECT, related_name="records")
    type = models.CharField(max_length=30, choices=Type.choices)
    # toolCallId for calls, observationId for observations, name for actions.
    key = models.TextField(blank=True)
    source = models.TextField(blank=True)
    data = models.JSONField()

    class Meta:
        indexes = [models.Index(fields=["run", "id"], name="trace_record_run_order")]

    def __str__(self) -> str:
        return f"{self.type} {self.key}"


class Judgement(models.Model):
    """The engine's output for one run, under one policy version, at one point of its lines."""

    class Purpose(models.TextChoices):
        ACTIVE = "active"
        SHADOW = "shadow"
        REPLAY = "replay"

    # Indexed by judgement_once_per_state (run first).
    run = models.ForeignKey(
        Run, on_delete=models.PROTECT, related_name="judgements", db_index=False
    )
    purpose = models.CharField(max_length=10, choices=Purpose.choices, default=Purpose.ACTIVE)
    policy_version = models.ForeignKey(
        PolicyVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="judgements"
    )
    # 0 is the built-in default policy, used until a version is published.
    policy_number = models.PositiveIntegerField()
    through_record_id = models.BigIntegerField()
    verdict_count = models.PositiveIntegerField(default=0)
    conflict_count = models.PositiveIntegerField(default=0)
    unsafe_count = models.PositiveIntegerField(default=0)
    finding_count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["run", "purpose", "policy_number", "through_record_id"],
                name="judgement_once_per_state",
            )
        ]

    def __str__(self) -> str:
        return f"{self.run} under v{self.policy_number}"


class Verdict(models.Model):
    judgement = models.ForeignKey(Judgement, on_delete=models.PROTECT, related_name="verdicts")
    # Verdicts are looked up by judgement only.
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="+", db_index=False)
    position = models.PositiveIntegerField()
    entity = models.TextField(null=True, blank=True)
    field = models.TextField()
    action = models.TextField(null=True, blank=True)
    kind = models.CharField(max_length=20)
    reason = models.CharField(max_length=40, null=True, blank=True)
    rule = models.TextField(null=True, blank=True)
    value = models.JSONField(null=True, blank=True)
    evidence = models.JSONField()
    unsafe = models.BooleanField()

    class Meta:
        ordering = ["judgement", "position"]

    def __str__(self) -> str:
        return f"{self.field}: {self.kind}"


class Finding(models.Model):
    judgement = models.ForeignKey(Judgement, on_delete=models.PROTECT, related_name="findings")
    # Findings are looked up by judgement only.
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="+", db_index=False)
    position = models.PositiveIntegerField()
    kind = models.CharField(max_length=60)
    evidence = models.JSONField()

    class Meta:
        ordering = ["judgement", "position"]

    def __str__(self) -> str:
        return self.kind


class Ticket(models.Model):
    """Work for a reviewer: an unresolved conflict (one per run, entity and field) or a run
    finding (one per run and kind)."""

    class Kind(models.TextChoices):
        CONFLICT = "conflict"
        FINDING = "finding"

    class State(models.TextChoices):
        OPEN = "open"
        CLOSED = "closed"

    class Resolution(models.TextChoices):
        EXPLAINED = "explained"
        UNEXPLAINED = "unexplained"

    class Cause(models.TextChoices):
        REPLICA_LAG = "replica-lag", "replica lag"
        PARTIAL_RESULT = "partial-result", "partial result"
        DUPLICATE_DELIVERY = "duplicate-delivery", "duplicate delivery"
        NORMALIZATION = "normalization", "normalization"
        WRONG_JOIN = "wrong-join", "wrong join"
        RESERVATION = "reservation", "reservation or quarantine"
        POLICY = "policy", "settled by a newer policy version"
        OTHER = "other", "other"

    # Indexed by ticket_once_per_run_key (run first).
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="tickets", db_index=False)
    key = models.CharField(max_length=64)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    entity = models.TextField(null=True, blank=True)
    field = models.TextField(blank=True)
    finding_kind = models.CharField(max_length=60, blank=True)
    reason = models.CharField(max_length=60)
    action = models.TextField(blank=True)
    unsafe = models.BooleanField(default=False)
    sources = models.TextField(blank=True)
    agent = models.CharField(max_length=200, blank=True)
    # Indexed by ticket_family_created (fingerprint first).
    fingerprint = models.CharField(max_length=16)
    fingerprint_label = models.TextField()
    # Followed from the ticket, never looked up by: no index.
    verdict = models.ForeignKey(
        Verdict, null=True, blank=True, on_delete=models.PROTECT, related_name="+", db_index=False
    )
    finding = models.ForeignKey(
        Finding, null=True, blank=True, on_delete=models.PROTECT, related_name="+", db_index=False
    )
    # The judgement whose verdict or finding opened the ticket: when it is no longer its
    # run's current one, the ticket says what the newer judgement says. Never looked up by.
    judgement = models.ForeignKey(
        Judgement,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        db_index=False,
    )
    policy_number = models.PositiveIntegerField()
    batch = models.ForeignKey(IngestBatch, on_delete=models.PROTECT, related_name="opened_tickets")
    state = models.CharField(max_length=10, choices=State.choices, default=State.OPEN)
    resolution = models.CharField(max_length=12, choices=Resolution.choices, blank=True)
    cause = models.CharField(max_length=30, choices=Cause.choices, blank=True)
    cause_text = models.TextField(blank=True)
    # Indexed by ticket_assignee_created (assignee first).
    assignee = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="assigned_tickets",
        db_index=False,
    )
    # Followed from the ticket, never looked up by.
    closed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        db_index=False,
    )
    # Optimistic concurrency: every change bumps it, and a change made from a stale copy fails.
    revision = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)
    closed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["run", "key"], name="ticket_once_per_run_key")
        ]
        indexes = [
            # The queue's order in full: tickets opened in the same instant (one delivery)
            # would otherwise all be read and sorted by id to find a page's first rows.
            models.Index(fields=["state", "-created_at", "-id"], name="ticket_state_newest"),
            # A family's or a reviewer's newest tickets without walking every ticket: small
            # families and new reviewers are where a plain index on created_at is slowest.
            models.Index(fields=["fingerprint", "-created_at"], name="ticket_family_created"),
            models.Index(fields=["assignee", "-created_at"], name="ticket_assignee_created"),
            # The queue filtered by reason (a reviewer's first filter), newest first. Its
            # counts are kept by triggers (TicketFacetDelta, TicketCombinationDelta).
            models.Index(
                fields=["state", "reason", "-created_at", "-id"], name="ticket_reason_newest"
            ),
        ]
        # The app's capabilities; roles (groups) are made of them in reviewapp/roles.py.
        permissions = [
            ("ingest_traces", "Can upload traces and manage API tokens"),
            ("work_ticket", "Can claim, assign, comment on and close tickets"),
            ("propose_rule", "Can propose authority decisions"),
            ("approve_rule", "Can approve proposals and publish policy versions"),
        ]

    def __str__(self) -> str:
        subject = self.field if self.kind == self.Kind.CONFLICT else self.finding_kind
        return f"#{self.pk} {subject} in {self.run}"


class TicketFacetDelta(models.Model):
    """How many tickets have each value of each counted queue filter, per state: the sum of
    a (state, dimension, value)'s rows is its count. Written only by PostgreSQL triggers on
    Ticket (migration 0007), which append a row per change instead of updating a total: two
    transactions never wait for each other here. Reading folds the rows together now and
    then (reviewapp/tickets.py). Values are stored as the queue shows them, except the
    assignee, kept as a user id ("" for nobody)."""

    state = models.CharField(max_length=10)
    dimension = models.CharField(max_length=20)
    value = models.TextField()
    tickets = models.IntegerField()

    def __str__(self) -> str:
        return f"{self.state} {self.dimension}={self.value}: {self.tickets:+d}"


class TicketCombinationDelta(models.Model):
    """How many tickets have one combination of the counted queue filters' values: the sum
    of a combination's rows is its count. The queue filtered on these dimensions (a reason,
    a source, unsafe only...) sums the combinations its filters select, far fewer than the
    tickets they select. Written only by PostgreSQL triggers on Ticket (migration 0008),
    which append a row per change like TicketFacetDelta's; reading folds them now and then
    (reviewapp/tickets.py). Field names are Ticket's, so the queue's filters apply to both."""

    state = models.CharField(max_length=10)
    reason = models.CharField(max_length=60)
    finding_kind = models.CharField(max_length=60)
    field = models.TextField()
    action = models.TextField()
    sources = models.TextField()
    unsafe = models.BooleanField()
    # A plain column to join on: a delta row may outlive every ticket the user held.
    assignee = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
    )
    agent = models.CharField(max_length=200)
    tickets = models.IntegerField()

    class Meta:
        # The queue filtered by reason (a reviewer's first filter) reads its combinations only.
        indexes = [models.Index(fields=["state", "reason"], name="combination_state_reason")]

    def __str__(self) -> str:
        return f"{self.state} {self.reason} {self.field or self.finding_kind}: {self.tickets:+d}"


class AuditEvent(models.Model):
    """Append-only: the database refuses UPDATE and DELETE (see the migration's triggers)."""

    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    verb = models.CharField(max_length=40)
    ticket = models.ForeignKey(
        Ticket, null=True, blank=True, on_delete=models.PROTECT, related_name="audit_events"
    )
    target = models.CharField(max_length=200, blank=True)
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.verb} {self.target}"


class TicketComment(models.Model):
    """Append-only, like the audit trail: the database refuses UPDATE and DELETE."""

    ticket = models.ForeignKey(Ticket, on_delete=models.PROTECT, related_name="comments")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    text = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"comment on #{self.ticket_id}"


class RuleProposal(models.Model):
    """An authority decision a reviewer proposes; a second person approves or rejects it,
    and approved proposals are published together as the next policy version.

    Four eyes are enforced by the database: the CHECK constraint refuses a row decided by
    its proposer, and a trigger refuses any change to a decision once made."""

    class Kind(models.TextChoices):
        AUTHORITATIVE_SOURCE = "authoritative-source", "a source owns a field"
        HIGHER_SOURCE_REVISION = "higher-source-revision", "the highest revision wins"
        REQUIRE_REVIEW = "require-review", "always ask a person"
        NORMALIZER = "normalizer", "compare a field's values normalized"
        HARMLESS_ERROR = "harmless-error", "an error that does not matter for a field"
        DOCUMENT = "document", "an imported policy document"

    class State(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        REJECTED = "rejected"

    kind = models.CharField(max_length=30, choices=Kind.choices)
    change = models.JSONField()
    sentence = models.TextField()
    rationale = models.TextField()
    proposed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    base_number = models.PositiveIntegerField(help_text="the active version when proposed")
    tickets = models.ManyToManyField(Ticket, blank=True, related_name="proposals")
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_reason = models.TextField(blank=True)
    published_in = models.ForeignKey(
        PolicyVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="proposals"
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(decided_by__isnull=True) | ~Q(decided_by=models.F("proposed_by")),
                name="proposal_four_eyes",
            ),
            models.CheckConstraint(
                condition=(Q(state="pending") & Q(decided_by__isnull=True))
                | (~Q(state="pending") & Q(decided_by__isnull=False)),
                name="proposal_decided_by_someone",
            ),
            models.CheckConstraint(
                condition=Q(published_in__isnull=True) | Q(state="approved"),
                name="proposal_published_only_if_approved",
            ),
        ]

    def __str__(self) -> str:
        return f"proposal #{self.pk}: {self.sentence}"


class ProspectiveSettlement(models.Model):
    """An open ticket that a published version would settle, computed after the publish:
    a label for reviewers, never a change to the ticket or its verdict."""

    ticket = models.ForeignKey(Ticket, on_delete=models.PROTECT, related_name="settlements")
    policy_version = models.ForeignKey(
        PolicyVersion, on_delete=models.PROTECT, related_name="settlements"
    )
    kind = models.CharField(max_length=20)
    rule = models.TextField(blank=True)
    value = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["ticket", "policy_version"], name="settlement_once_per_version"
            )
        ]

    def __str__(self) -> str:
        return f"#{self.ticket_id} would be {self.kind} under v{self.policy_version.number}"
