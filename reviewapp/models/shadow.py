"""Shadow mode and the gate: candidate policies judging beside the active one, and the
answers given to agents asking before a side effect.

A designation puts a candidate in shadow (every change of it is an AuditEvent); what it
judged is kept as SHADOW judgements (models.judging), never current, never ticketed. Gate
modes and gate answers are append-only: a new mode row per change (the latest per action
wins), one answer row per check."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from reviewapp.models import guards


class ShadowDesignation(models.Model):
    """A candidate in shadow from `started_at` until `ended_at`: every run ingested
    meanwhile is also judged under it. A candidate is in shadow at most once at a time."""

    candidate = models.ForeignKey(
        "PolicyCandidate", on_delete=models.PROTECT, related_name="designations"
    )
    reason = models.TextField(blank=True)
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    started_at = models.DateTimeField(auto_now_add=True)
    ended_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["candidate"],
                condition=Q(ended_at__isnull=True),
                name="shadow_designation_open_once",
            ),
            models.CheckConstraint(
                condition=Q(ended_at__isnull=True) | Q(ended_at__gte=F("started_at")),
                name="shadow_designation_ends_after_start",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.candidate} in shadow"

    @property
    def is_open(self) -> bool:
        return self.ended_at is None


class ShadowBatch(models.Model):
    """A delivery whose runs were judged under every candidate in shadow when it finished;
    written once, when that is done (a missing row tells beat to send it again)."""

    batch = models.OneToOneField("IngestBatch", on_delete=models.PROTECT, related_name="+")
    runs = models.PositiveIntegerField(default=0)
    judgements = models.PositiveIntegerField(default=0)
    judged_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        triggers = guards.append_only()

    def __str__(self) -> str:
        return f"batch {self.batch_id} judged in shadow"


class ShadowBackfill(models.Model):
    """Runs of a past window judged under a candidate in shadow, prospectively, in chunks
    by workers; its row moves as they go (a cursor and counts)."""

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    designation = models.ForeignKey(
        ShadowDesignation, on_delete=models.PROTECT, related_name="backfills"
    )
    # Runs whose own clock (Run.started_at) falls on these days, both included.
    since = models.DateField()
    until = models.DateField()
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    runs_total = models.PositiveIntegerField(default=0)
    runs_done = models.PositiveIntegerField(default=0)
    judgements = models.PositiveIntegerField(default=0)
    # The last run done, in primary key order: a chunk starts after it.
    after_run = models.BigIntegerField(default=0)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)
    # Workers that took its current chunk (reviewapp.durable): counted afresh by each chunk done.
    attempts = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(until__gte=F("since")), name="shadow_backfill_window"
            )
        ]

    def __str__(self) -> str:
        return f"backfill {self.since}..{self.until} under {self.designation.candidate}"

    @property
    def is_finished(self) -> bool:
        return self.state in (self.State.DONE, self.State.FAILED)

    @property
    def progress_percent(self) -> int:
        if self.state == self.State.DONE:
            return 100
        if not self.runs_total:
            return 0
        return min(99, self.runs_done * 100 // self.runs_total)


class GateMode(models.Model):
    """How the gate treats one action, as an approver chose: shadow (answer allow, count
    it) or enforce (answer block). Append-only: the latest row per action wins; an action
    with none is in shadow."""

    class Mode(models.TextChoices):
        SHADOW = "shadow", "shadow: count only"
        ENFORCE = "enforce", "enforce: block"

    action = models.CharField(max_length=200)
    mode = models.CharField(max_length=10, choices=Mode.choices)
    reason = models.TextField()
    chosen_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        triggers = guards.append_only()
        ordering = ["-id"]
        indexes = [models.Index(fields=["action", "-id"], name="gate_mode_latest")]

    def __str__(self) -> str:
        return f"{self.action}: {self.mode}"


class GateAnswer(models.Model):
    """One answer of POST /api/v1/check, as given (a check refused as bad input is one
    too, `rejected`, with its reason). Append-only."""

    class Decision(models.TextChoices):
        ALLOW = "allow"
        BLOCK = "block"
        WOULD_BLOCK = "would-block"
        REJECTED = "rejected"

    token = models.ForeignKey(
        "ApiToken",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="gate_answers",
        db_index=False,
    )
    run_id = models.TextField(blank=True)
    action = models.CharField(max_length=200, blank=True)
    decision = models.CharField(max_length=12, choices=Decision.choices)
    mode = models.CharField(max_length=10, blank=True)
    policy_number = models.PositiveIntegerField(null=True, blank=True)
    # The reason codes that blocked (or would have), for counting.
    reasons = models.JSONField(default=list, blank=True)
    # The body answered, verdicts and evidence ids included.
    answer = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    records = models.PositiveIntegerField(default=0)
    server_ms = models.FloatField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        triggers = guards.append_only()
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["created_at"], name="gate_answer_created")]

    def __str__(self) -> str:
        return f"{self.decision} {self.action}"
