"""Trace protection: the versioned redaction rules ingest applies, and the raw values a rule
keeps (encrypted) behind their tokens (docs/security.md, "Redaction")."""

from __future__ import annotations

from django.conf import settings
from django.db import models
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
