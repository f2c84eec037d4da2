"""The engine's output, stored: judgements of runs under a policy, with their verdicts
and findings. Written once, never changed: a run judged again gets a new judgement."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from reviewapp.models import guards


class Judgement(models.Model):
    """The engine's output for one run, under one policy, at one point of its lines.

    ACTIVE judgements are made under the active version (policy_number; 0 is the built-in
    default); SHADOW and REPLAY ones under a candidate, never current, never ticketed."""

    class Purpose(models.TextChoices):
        ACTIVE = "active"
        SHADOW = "shadow"
        REPLAY = "replay"

    # Indexed by judgement_once_per_state (run first).
    run = models.ForeignKey(
        "Run", on_delete=models.PROTECT, related_name="judgements", db_index=False
    )
    purpose = models.CharField(max_length=10, choices=Purpose.choices, default=Purpose.ACTIVE)
    policy_version = models.ForeignKey(
        "PolicyVersion", null=True, blank=True, on_delete=models.PROTECT, related_name="judgements"
    )
    # SHADOW and REPLAY: the candidate judged under (its number is policy_number).
    candidate = models.ForeignKey(
        "PolicyCandidate",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="judgements",
        db_index=False,
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
        triggers = guards.append_only()
        constraints = [
            models.UniqueConstraint(
                fields=["run", "purpose", "policy_number", "through_record_id"],
                condition=Q(candidate__isnull=True),
                name="judgement_once_per_state",
            ),
            models.UniqueConstraint(
                fields=["run", "purpose", "candidate", "through_record_id"],
                condition=Q(candidate__isnull=False),
                name="judgement_once_per_candidate",
            ),
            # Active judgements are the active version's; the others name their candidate.
            models.CheckConstraint(
                condition=(Q(purpose="active") & Q(candidate__isnull=True))
                | (~Q(purpose="active") & Q(candidate__isnull=False)),
                name="judgement_candidate_unless_active",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.run} under v{self.policy_number}"


class Verdict(models.Model):
    judgement = models.ForeignKey(Judgement, on_delete=models.PROTECT, related_name="verdicts")
    # Verdicts are looked up by judgement only.
    run = models.ForeignKey("Run", on_delete=models.PROTECT, related_name="+", db_index=False)
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
        triggers = guards.append_only()
        ordering = ["judgement", "position"]

    def __str__(self) -> str:
        return f"{self.field}: {self.kind}"


class Finding(models.Model):
    judgement = models.ForeignKey(Judgement, on_delete=models.PROTECT, related_name="findings")
    # Findings are looked up by judgement only.
    run = models.ForeignKey("Run", on_delete=models.PROTECT, related_name="+", db_index=False)
    position = models.PositiveIntegerField()
    kind = models.CharField(max_length=60)
    evidence = models.JSONField()
    # The calls of its evidence that are blocked actions (engine Finding.blocked); NULL for
    # a finding stored before they were kept, which blocks every call of its evidence
    # (judging.blocking).
    blocked = models.JSONField(null=True, blank=True)

    class Meta:
        triggers = guards.append_only()
        ordering = ["judgement", "position"]

    def __str__(self) -> str:
        return self.kind
