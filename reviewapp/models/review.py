"""Work for reviewers: tickets, their comments and audit trail (append-only), and the
counts the database keeps for the queue."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.indexes import GinIndex, OpClass
from django.db import models
from django.utils import timezone

from reviewapp.models import guards


class SearchText(models.Func):
    """What the queue's search box reads of a ticket besides its number and run: its entity,
    agent, sources, family fingerprint and family label, lowercased, each between "|" (so
    that a whole value is "|value|"). An expression of the ticket's row with no parameter,
    so that the trigram index on it (ticket_search_text) serves a search that uses it.
    Migration 0046 makes that index from this class: a change here needs a new index under
    another name (and a migration that drops the old one)."""

    template = "LOWER('|' || %(expressions)s || '|')"
    arg_joiner = " || '|' || "
    output_field = models.TextField()

    def __init__(self) -> None:
        def sql(template: str, column: str) -> models.Func:
            return models.Func(models.F(column), template=template, output_field=models.TextField())

        super().__init__(
            sql("COALESCE(%(expressions)s, '')", "entity"),
            models.F("agent"),
            sql("REPLACE(%(expressions)s, ',', '|')", "sources"),
            models.F("fingerprint"),
            models.F("fingerprint_label"),
        )


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
    run = models.ForeignKey("Run", on_delete=models.PROTECT, related_name="tickets", db_index=False)
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
    # [source, value] of each observation a conflict names, shortened, with the errors that
    # make a partial result: the queue row shows them side by side without reading the run
    # (review/disputed.py).
    disputed = models.JSONField(default=list, blank=True)
    # Indexed by ticket_family_created (fingerprint first).
    fingerprint = models.CharField(max_length=16)
    fingerprint_label = models.TextField()
    # Followed from the ticket, never looked up by: no index (what they name is append-only,
    # so no delete has to look for the tickets pointing at it).
    verdict = models.ForeignKey(
        "Verdict", null=True, blank=True, on_delete=models.PROTECT, related_name="+", db_index=False
    )
    finding = models.ForeignKey(
        "Finding", null=True, blank=True, on_delete=models.PROTECT, related_name="+", db_index=False
    )
    # The judgement whose verdict or finding opened the ticket: when it is no longer its
    # run's current one, the ticket says what the newer judgement says. Never looked up by.
    judgement = models.ForeignKey(
        "Judgement",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        db_index=False,
    )
    policy_number = models.PositiveIntegerField()
    batch = models.ForeignKey(
        "IngestBatch", on_delete=models.PROTECT, related_name="opened_tickets"
    )
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
        triggers = guards.only_active_tickets()
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
            # counts are kept (TicketFacetDelta, TicketCombinationDelta).
            models.Index(
                fields=["state", "reason", "-created_at", "-id"], name="ticket_reason_newest"
            ),
            # The search box (review/search.py): an entity (an order id) whole, and
            # a fragment of three characters or more, or a whole value, of the text it reads.
            models.Index(fields=["entity"], name="ticket_entity"),
            GinIndex(OpClass(SearchText(), name="gin_trgm_ops"), name="ticket_search_text"),
        ]
        # The app's capabilities; roles (groups) are made of them in reviewapp/accounts/roles.py.
        permissions = [
            ("ingest_traces", "Can upload traces and manage API tokens"),
            ("work_ticket", "Can claim, assign, comment on and close tickets"),
            ("propose_rule", "Can propose authority decisions"),
            ("approve_rule", "Can approve proposals and publish policy versions"),
            # Given beside a role, never by one (accounts/roles.py: account_raw_access_set).
            ("see_raw_data", "Can read raw trace lines and envelopes, each time with a reason"),
            # Admins only: add people, set their roles, deactivate them (accounts/people.py).
            ("manage_people", "Can add people, set their roles and deactivate them"),
        ]

    def __str__(self) -> str:
        subject = self.field if self.kind == self.Kind.CONFLICT else self.finding_kind
        return f"#{self.pk} {subject} in {self.run}"


class TicketFacetDelta(models.Model):
    """How many tickets have each value of each counted queue filter, per state: the sum of
    a (state, dimension, value)'s rows is its count. Written only by the PostgreSQL trigger
    that reviewapp/review/counts.py makes, which appends a row per change instead of
    updating a total: two transactions never wait for each other here. Reading folds the
    rows together now and then. Values are kept as the queue shows them, but a person's,
    kept as a user id ("" for nobody)."""

    state = models.CharField(max_length=10)
    dimension = models.CharField(max_length=20)
    value = models.TextField()
    tickets = models.IntegerField()

    def __str__(self) -> str:
        return f"{self.state} {self.dimension}={self.value}: {self.tickets:+d}"


class TicketCombinationDelta(models.Model):
    """How many tickets have one combination of the counted queue filters' values
    (`combination`: filter name -> the value kept, as TicketFacetDelta keeps it; a list for
    a filter that counts several values a ticket): the sum of a combination's rows is its
    count. The queue filtered on counted filters alone sums the combinations its filters
    select (JSON containment), far fewer than the tickets they select. Written by the same
    trigger as TicketFacetDelta (reviewapp/review/counts.py), a row per change."""

    combination = models.JSONField(default=dict)
    tickets = models.IntegerField()
    # Written by a fold (or a recount), which writes every row again; not by the trigger.
    folded = models.BooleanField(db_default=False)

    class Meta:
        indexes = [
            GinIndex(
                fields=["combination"], opclasses=["jsonb_path_ops"], name="combination_contains"
            )
        ]

    def __str__(self) -> str:
        return f"{self.combination}: {self.tickets:+d}"


class AuditEvent(models.Model):
    """Append-only (the database refuses UPDATE, DELETE and TRUNCATE), and hash-chained:
    each event has its place in the chain (`position`, 1, 2, 3...), the hash of the event
    before it and its own hash over its content and that one, so that an edited, deleted
    or reordered event breaks the chain where it was (reviewapp/accounts/audit.py checks
    it: `manage.py audit verify`). A trigger writes the three under a lock on the chain's
    head (AuditChain)."""

    class Channel(models.TextChoices):
        WEB = "web", "web pages"
        API = "api", "HTTP API"
        CLI = "cli", "command line"
        SYSTEM = "system", "the system (a worker, a migration)"

    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    verb = models.CharField(max_length=40)
    ticket = models.ForeignKey(
        Ticket, null=True, blank=True, on_delete=models.PROTECT, related_name="audit_events"
    )
    target = models.CharField(max_length=200, blank=True)
    data = models.JSONField(default=dict, blank=True)
    # Set by whoever records the event (not auto_now_add, which no caller could give).
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    # How the person acted ("" for events recorded before channels were).
    channel = models.CharField(max_length=10, choices=Channel.choices, blank=True)
    position = models.PositiveBigIntegerField(null=True, unique=True, editable=False)
    prev_hash = models.CharField(max_length=64, blank=True, editable=False)
    hash = models.CharField(max_length=64, blank=True, editable=False)

    class Meta:
        triggers = [*guards.append_only(erasable=False), guards.audit_chain()]
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.verb} {self.target}"


class AuditChain(models.Model):
    """The head of the audit chain, one row: the last event's position and hash. Taking it
    FOR UPDATE serialises appends, so that concurrent events line up one after another;
    deleting the last events would leave it pointing past them."""

    position = models.PositiveBigIntegerField(default=0)
    last_hash = models.CharField(max_length=64, blank=True)

    def __str__(self) -> str:
        return f"audit chain at {self.position}"


class TicketComment(models.Model):
    """Append-only, like the audit trail: the database refuses UPDATE and DELETE."""

    ticket = models.ForeignKey(Ticket, on_delete=models.PROTECT, related_name="comments")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    text = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        triggers = guards.append_only()
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"comment on #{self.ticket_id}"
