"""Trace protection: the versioned redaction rules ingest applies, the raw values a rule
keeps (encrypted) behind their tokens (docs/security.md, "Redaction"), and erasure
requests: a value to be purged from everything stored, asked for by one person and
approved by another (models.guards.erasure_guard), then run once (privacy/erasure.py)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import Now

from reviewapp.models import guards


class RedactionRuleSet(models.Model):
    """A numbered, immutable version of the redaction rules (privacy.rules validates the
    document); the highest number is the one ingest applies. Made only by
    privacy.versions.redaction_set, which refuses rules that would change a verdict."""

    number = models.PositiveIntegerField(unique=True)
    document = models.JSONField()
    reason = models.TextField()
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        triggers = guards.append_only()
        ordering = ["-number"]
        permissions = [("manage_redaction", "Can set the redaction rules applied at ingest")]

    def __str__(self) -> str:
        return f"redaction v{self.number}"


class ProtectedValue(models.Model):
    """A raw value a rule keeps (keep_raw), once per token: Fernet ciphertext under
    PROTECTED_VALUES_KEY, never the value itself. Not append-only: erasing a person's
    data deletes their rows here."""

    token = models.CharField(max_length=40, unique=True)
    rule = models.CharField(max_length=100)
    ciphertext = models.BinaryField()
    created_at = models.DateTimeField(db_default=Now())

    def __str__(self) -> str:
        return self.token


class ErasureRequest(models.Model):
    """The value is kept encrypted (Fernet under PROTECTED_VALUES_KEY) only until the
    erasure is done: a done request holds its token alone, which shows which value went
    without holding it."""

    class State(models.TextChoices):
        REQUESTED = "requested"
        APPROVED = "approved"
        DONE = "done"
        REFUSED = "refused"

    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    requested_at = models.DateTimeField()
    reason = models.TextField()
    value_encrypted = models.BinaryField(blank=True)
    token = models.CharField(max_length=40)
    state = models.CharField(max_length=10, choices=State.choices, default=State.REQUESTED)
    # Who approved or refused it (never its requester), and when.
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # What the erasure touched: {"tables": [[table, column, rows]], "files": [...], ...}.
    report = models.JSONField(default=dict, blank=True)

    class Meta:
        triggers = guards.erasure_guard()
        ordering = ["-requested_at", "-id"]
        permissions = [("erase_values", "Can request and approve the erasure of a value")]
        constraints = [
            models.CheckConstraint(
                condition=Q(decided_by__isnull=True) | ~Q(decided_by=models.F("requested_by")),
                name="erasure_four_eyes",
            ),
            models.CheckConstraint(
                condition=(
                    Q(state="requested") & Q(decided_by__isnull=True) & Q(decided_at__isnull=True)
                )
                | (
                    ~Q(state="requested")
                    & Q(decided_by__isnull=False)
                    & Q(decided_at__isnull=False)
                ),
                name="erasure_decided_by_someone",
            ),
            models.CheckConstraint(
                condition=~Q(state="done")
                | (Q(value_encrypted=b"") & Q(finished_at__isnull=False)),
                name="erasure_done_keeps_no_value",
            ),
        ]

    def __str__(self) -> str:
        return f"erasure #{self.pk} of {self.token} ({self.state})"
