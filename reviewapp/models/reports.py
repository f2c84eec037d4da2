"""Monthly tallies: the discrepancies of every run's current judgement, kept where they are
cheap to count (derived, rebuilt at will), and the months closed into frozen figures
(append-only, never rebuilt).

TallyRun and TallyEntry are a reporting copy of what the verdicts, findings and tickets
say: reviewapp.reports.entries brings them up to date from those tables and is the only
writer. A ticket's state is never copied: reading joins the ticket, so a ticket closed a
second ago is counted as closed."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from reviewapp.models import guards


class TallyRun(models.Model):
    """What the tallies last read of a run: its current judgement, clock and agent, and so
    its month. A run whose judgement, clock or agent differs from these is read again."""

    run = models.OneToOneField(
        "Run",
        primary_key=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
    )
    judgement_id = models.BigIntegerField(null=True)
    started_at = models.DateTimeField()
    agent = models.CharField(max_length=200, blank=True)
    # The first day of the month of started_at, in TallyState.time_zone.
    month = models.DateField()
    # Verdict groups of the judgement, confirmed ones too: what the discrepancies are out of.
    groups = models.PositiveIntegerField(default=0)

    class Meta:
        indexes = [models.Index(fields=["month"], name="tally_run_month")]

    def __str__(self) -> str:
        return f"run {self.run_id} in {self.month:%Y-%m}"


class TallyEntry(models.Model):
    """One discrepancy of a run's current judgement: a verdict group that was not confirmed
    (resolved by a rule, or a conflict) or a finding, with what the tallies break it down by
    and, for a conflict or a finding, its ticket (whose state is read when counting)."""

    class Origin(models.TextChoices):
        RESOLVED = "resolved", "resolved by a rule"
        CONFLICT = "conflict"
        FINDING = "finding"

    # Plain columns: a derived row never holds up its source rows.
    run = models.ForeignKey(
        "Run", on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )
    month = models.DateField()
    origin = models.CharField(max_length=10, choices=Origin.choices)
    field = models.TextField(blank=True)
    entity = models.TextField(null=True, blank=True)
    # The sources of the observations in the evidence, sorted and comma-joined (as a
    # ticket's are): the pair that disagreed.
    sources = models.TextField(blank=True)
    rule = models.TextField(blank=True)
    policy_number = models.PositiveIntegerField()
    agent = models.CharField(max_length=200, blank=True)
    finding_kind = models.CharField(max_length=60, blank=True)
    verdict = models.ForeignKey(
        "Verdict",
        null=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        related_name="+",
    )
    finding = models.ForeignKey(
        "Finding",
        null=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        related_name="+",
    )
    ticket = models.ForeignKey(
        "Ticket",
        null=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        related_name="+",
    )

    class Meta:
        indexes = [
            # A month's entries, for its breakdowns and for the queue's month filter.
            models.Index(fields=["month", "origin"], name="tally_entry_month"),
            # Conflicts and findings whose ticket is not attached yet: few, found at once.
            models.Index(
                fields=["run"],
                name="tally_entry_unticketed",
                condition=Q(ticket__isnull=True) & ~Q(origin="resolved"),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.origin} {self.field or self.finding_kind} of run {self.run_id}"


class TallyState(models.Model):
    """One row: the time zone the kept months were computed in (a new TALLY_TIME_ZONE
    computes them all again)."""

    time_zone = models.CharField(max_length=64)

    def __str__(self) -> str:
        return f"tallies in {self.time_zone}"


class MonthClosing(models.Model):
    """A month closed, with its tally frozen (CLOSED, `figures`), or reopened (REOPENED,
    with the reason): the newest row of a month says whether it is closed. Append-only:
    what a closed month said stays on record after a reopening and a new closing."""

    class Action(models.TextChoices):
        CLOSED = "closed"
        REOPENED = "reopened"

    month = models.DateField()
    action = models.CharField(max_length=10, choices=Action.choices)
    # The month's tally as frozen (reviewapp.reports.tally), in time_zone; {} on a reopening.
    figures = models.JSONField(default=dict, blank=True)
    time_zone = models.CharField(max_length=64)
    # Nobody: closed by the periodic job.
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        triggers = guards.append_only()
        ordering = ["month", "id"]
        indexes = [models.Index(fields=["month", "-id"], name="month_closing_newest")]
        permissions = [("close_month", "Can close (freeze) and reopen monthly tallies")]

    def __str__(self) -> str:
        return f"{self.month:%Y-%m} {self.action}"
