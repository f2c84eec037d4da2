"""Policy: numbered immutable versions, the proposals that make them, and the open tickets
a version would settle."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q

from reviewapp.models import guards

DEFAULT_NAME = "the built-in default"


def policy_name(policy: PolicyVersion | PolicyCandidate | int | None) -> str:
    """The one name of a policy, on every page, export and command: "v2" for a version (or
    its number), "the built-in default" for number 0, and a candidate by what it is made
    of, which never changes: "v2 + proposal #5", "the draft on v2", "policy file 3f2a… on
    v2" (never the number it would get if published, which goes stale when another is)."""
    if policy is None or isinstance(policy, int):
        return f"v{policy}" if policy else DEFAULT_NAME
    if isinstance(policy, PolicyVersion):
        return policy_name(policy.number)
    kind, base = policy.kind, policy.base_number
    if kind == PolicyCandidate.Kind.PROPOSAL:
        return proposal_name(base, policy.proposal_id)
    if kind == PolicyCandidate.Kind.DRAFT:
        return draft_name(base)
    if kind == PolicyCandidate.Kind.FILE:
        return f"policy file {policy.sha256[:12]} on {policy_name(base)}"
    return policy_name(policy.number)


def proposal_name(base_number: int, proposal_id: int | None) -> str:
    """policy_name of a proposal's candidate, before one is made (a choice in a form)."""
    return f"{policy_name(base_number)} + proposal #{proposal_id}"


def draft_name(base_number: int) -> str:
    """policy_name of the draft's candidate, before one is made."""
    return f"the draft on {policy_name(base_number)}"


class PolicyVersion(models.Model):
    """A published, numbered, immutable policy document (the database refuses UPDATE and
    DELETE of its rows, and a version that publishes no proposal someone other than its
    proposer approved)."""

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
        triggers = [*guards.append_only(), *guards.published_with_approval()]
        ordering = ["-number"]

    def __str__(self) -> str:
        return policy_name(self)


class PolicyCandidate(models.Model):
    """A policy some runs are judged under beside the active one, prospectively: a published
    version, the built-in default, the draft (the active version with every approved,
    unpublished proposal), the active version with one proposal applied, or a policy file
    (`manage.py replay --policy FILE`). Immutable, like what it is made from: the draft
    changing makes a new candidate. One row per kind and document (its SHA-256).

    Each is measured against the version it builds on (`base_number`): a candidate's impact
    is its own change (replay.impact)."""

    class Kind(models.TextChoices):
        VERSION = "version", "published version"
        DEFAULT = "default", "the built-in default"
        DRAFT = "draft", "draft"
        PROPOSAL = "proposal", "the active version with a proposal applied"
        FILE = "file", "a policy file"

    kind = models.CharField(max_length=10, choices=Kind.choices)
    document = models.JSONField()
    sha256 = models.CharField(max_length=64)
    # The number it has (a version) or would get if published now (the draft, a proposal).
    number = models.PositiveIntegerField()
    # The version it builds on, and is measured against: the active one when it was made
    # (a published version's: the one it was drafted from).
    base_number = models.PositiveIntegerField()
    version = models.ForeignKey(
        PolicyVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="candidates"
    )
    proposal = models.ForeignKey(
        "RuleProposal", null=True, blank=True, on_delete=models.PROTECT, related_name="candidates"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        triggers = guards.append_only()
        ordering = ["-created_at", "-id"]
        constraints = [
            # One per kind and document, and per version or proposal where it names one
            # (partial indexes).
            models.UniqueConstraint(
                fields=["kind", "sha256"],
                condition=Q(version__isnull=True, proposal__isnull=True),
                name="candidate_once_per_document",
            ),
            models.UniqueConstraint(
                fields=["kind", "sha256", "version"],
                condition=Q(version__isnull=False),
                name="candidate_once_per_version",
            ),
            models.UniqueConstraint(
                fields=["kind", "sha256", "proposal"],
                condition=Q(proposal__isnull=False),
                name="candidate_once_per_proposal",
            ),
            models.CheckConstraint(
                condition=(Q(kind="version") & Q(version__isnull=False) & Q(proposal__isnull=True))
                | (Q(kind="default") & Q(version__isnull=True) & Q(proposal__isnull=True))
                | (Q(kind="draft") & Q(version__isnull=True) & Q(proposal__isnull=True))
                | (Q(kind="proposal") & Q(version__isnull=True) & Q(proposal__isnull=False))
                | (Q(kind="file") & Q(version__isnull=True) & Q(proposal__isnull=True)),
                name="candidate_names_what_it_is",
            ),
        ]

    def __str__(self) -> str:
        return self.label

    @property
    def label(self) -> str:
        """How screens and exports name it (policy_name): "prospective under {label}"."""
        return policy_name(self)

    @property
    def base_label(self) -> str:
        return policy_name(self.base_number)


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
    tickets: models.ManyToManyField[Any, Any] = models.ManyToManyField(
        "Ticket", blank=True, related_name="proposals"
    )
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
        triggers = guards.proposal_guard()
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

    @property
    def decision_note(self) -> str:
        """The decider's reason, if they gave one (approvals before 2026-12 stored the word
        "approved" in its place)."""
        reason = self.decision_reason.strip()
        return "" if reason == self.state else reason


class ProspectiveSettlement(models.Model):
    """An open ticket that a published version would settle, computed after the publish:
    a label for reviewers, never a change to the ticket or its verdict."""

    ticket = models.ForeignKey("Ticket", on_delete=models.PROTECT, related_name="settlements")
    policy_version = models.ForeignKey(
        PolicyVersion, on_delete=models.PROTECT, related_name="settlements"
    )
    kind = models.CharField(max_length=20)
    rule = models.TextField(blank=True)
    value = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        triggers = guards.append_only()
        constraints = [
            models.UniqueConstraint(
                fields=["ticket", "policy_version"], name="settlement_once_per_version"
            )
        ]

    def __str__(self) -> str:
        return f"#{self.ticket_id} would be {self.kind} under v{self.policy_version.number}"


class SettlementLabelling(models.Model):
    """Whether a worker has labelled the open tickets a published version would settle:
    made with the version (unfinished), finished by the worker. Until then the version's
    pages say that labelling is under way rather than show a count still growing."""

    version = models.OneToOneField(
        PolicyVersion, on_delete=models.PROTECT, primary_key=True, related_name="labelling"
    )
    finished_at = models.DateTimeField(null=True, blank=True)
    labelled = models.PositiveIntegerField(default=0)
    # Workers that took it (reviewapp.durable), and why it was given up, if it was.
    attempts = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)

    def __str__(self) -> str:
        state = "labelled" if self.finished_at else "labelling"
        return f"{self.version} {state}"
