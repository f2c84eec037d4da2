"""Which observation was right, as a reviewer marked it when closing a conflict ticket, and
the rules suggested from those marks (reviewapp/suggestions).

A mark is a decision like a close: attributed, audited, append-only. It belongs to the close
that made it (the ticket's revision after that close): a ticket reopened has moved past it,
and closed again with another mark, that one counts."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from reviewapp.models import guards


class TicketMark(models.Model):
    """The observation a reviewer marked right when closing a conflict ticket (none of them:
    `observation_id` empty), and what the suggestions group it by: the right source, the
    revision domain every observation shares (empty when they do not share one), and whether
    the right observation had the unique highest revision of that domain."""

    # Indexed by mark_once_per_close (ticket first).
    ticket = models.ForeignKey(
        "Ticket", on_delete=models.PROTECT, related_name="marks", db_index=False
    )
    # The ticket's revision after the close that made the mark.
    ticket_revision = models.PositiveIntegerField()
    observation_id = models.TextField(blank=True)
    source = models.TextField(blank=True)
    domain = models.TextField(blank=True)
    # Null: not comparable (domains differ, a revision is missing, or nothing was right).
    right_is_higher = models.BooleanField(null=True)
    cause = models.CharField(max_length=30, blank=True)
    marked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+", db_index=False
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        triggers = guards.append_only()
        constraints = [
            models.UniqueConstraint(
                fields=["ticket", "ticket_revision"], name="mark_once_per_close"
            )
        ]

    def __str__(self) -> str:
        right = self.observation_id or "none of them"
        return f"#{self.ticket_id}: {right} was right"

    @property
    def none_right(self) -> bool:
        return not self.observation_id


class RuleSuggestion(models.Model):
    """A rule the marks suggest, as the worker last computed it (reviewapp/suggestions/work.py
    replaces these rows each time: they are derived, never decided). `evidence_stamp` changes
    whenever the family's marks do: a dismissal holds while it is the same."""

    class Kind(models.TextChoices):
        AUTHORITATIVE_SOURCE = "authoritative-source", "a source owns a field"
        HIGHER_SOURCE_REVISION = "higher-source-revision", "the highest revision wins"

    key = models.CharField(max_length=300, unique=True)
    kind = models.CharField(max_length=30, choices=Kind.choices)
    fingerprint = models.CharField(max_length=16)
    family_label = models.TextField()
    field = models.TextField()
    action = models.TextField(blank=True)
    # The source suggested as owner (authoritative-source), or the domain (higher revision).
    source = models.TextField(blank=True)
    domain = models.TextField(blank=True)
    change = models.JSONField()
    sentence = models.TextField()
    # Marks agreeing with the suggestion, and every mark it was weighed against.
    agreeing = models.PositiveIntegerField()
    decisions = models.PositiveIntegerField()
    evidence_stamp = models.CharField(max_length=100)
    # The suggested policy (the active version with the change) whose impact is replayed.
    candidate = models.ForeignKey(
        "PolicyCandidate", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    # A pending (or approved, unpublished) proposal that covers it, made from it or not.
    proposal = models.ForeignKey(
        "RuleProposal", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    computed_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-agreeing", "key"]

    def __str__(self) -> str:
        return self.sentence

    @property
    def share(self) -> float:
        return self.agreeing / self.decisions if self.decisions else 0.0


class SuggestionDismissal(models.Model):
    """A suggestion dismissed, by whom and why, for the evidence it had then: append-only.
    The same suggestion on other evidence (a mark more, a ticket reopened) is shown again."""

    key = models.CharField(max_length=300)
    evidence_stamp = models.CharField(max_length=100)
    reason = models.TextField()
    dismissed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        triggers = guards.append_only()
        indexes = [models.Index(fields=["key", "evidence_stamp"], name="dismissal_key_evidence")]

    def __str__(self) -> str:
        return f"{self.key} dismissed"
