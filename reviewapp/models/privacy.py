"""Erasure requests: a value to be purged from everything stored, asked for by one person
and approved by another (models.guards.erasure_guard), then run once (privacy/erasure.py)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from reviewapp.models import guards


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
