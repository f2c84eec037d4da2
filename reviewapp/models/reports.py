"""Monthly tallies: the discrepancies of every run's current judgement, kept where they are
cheap to count (derived, rebuilt at will), and the months closed into frozen figures with
the discrepancies they counted (append-only, never rebuilt).

TallyRun and TallyEntry are a reporting copy of what the verdicts, findings and tickets
say: reviewapp.reports.entries brings them up to date from those tables (before every
read, and in full by beat) and is their only writer."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from reviewapp.models import guards


class TallyRun(models.Model):
    """What the tallies last read of a judged run: its current judgement, clock and agent,
    and so its month. A run whose judgement, clock or agent differs is read again."""

    run = models.OneToOneField(
        "Run",
        primary_key=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
    )
    judgement_id = models.BigIntegerField()
    started_at = models.DateTimeField()
    agent = models.CharField(max_length=200, blank=True)
    # The first day of the month of started_at, in TallyState.time_zone.
    month = models.DateField()
    # Verdict groups of the judgement, confirmed ones too: what the discrepancies are out of.
    groups = models.PositiveIntegerField(default=0)

    class Meta:
        # Runs and groups a month, from the index alone.
        indexes = [models.Index(fields=["month", "groups"], name="tally_run_month")]

    def __str__(self) -> str:
        return f"run {self.run_id} in {self.month:%Y-%m}"


class TallyEntry(models.Model):
    """One discrepancy of a run's current judgement: a verdict group that was not confirmed
    (resolved by a rule, or a conflict) or a finding, with what the tallies break it down by,
    and for a conflict or a finding its ticket, and its outcome as of the last refresh."""

    class Origin(models.TextChoices):
        RESOLVED = "resolved", "resolved by a rule"
        CONFLICT = "conflict"
        FINDING = "finding"

    class Outcome(models.TextChoices):
        RULE = "rule", "resolved by a rule"
        REVIEWER = "reviewer", "explained by a reviewer"
        CLOSED_UNEXPLAINED = "closed_unexplained", "closed as unexplained"
        OPEN = "open", "open: needs a human"
        UNTRACKED = "untracked", "without a ticket"

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
        related_name="+",
    )
    # From the ticket's state, resolution and cause (a rule's for RESOLVED).
    outcome = models.CharField(max_length=20, choices=Outcome.choices)
    cause = models.CharField(max_length=30, blank=True)

    class Meta:
        indexes = [
            # Months' counts from the index alone; a month's entries for its breakdowns and
            # the queue's tally month.
            models.Index(fields=["month", "outcome"], name="tally_entry_month"),
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
    computes them all again), and how far the refreshes have surely read: the judgements
    and audit events up to these ids (only later ones can change an entry)."""

    time_zone = models.CharField(max_length=64)
    judgements_seen = models.BigIntegerField(default=0)
    events_seen = models.BigIntegerField(default=0)

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
    # Whether the discrepancies this closing counted were kept with it (FrozenDiscrepancy):
    # every closing is since they are; one made before is not, and says its links are today's.
    discrepancies_kept = models.BooleanField(default=False)

    class Meta:
        triggers = guards.append_only()
        ordering = ["month", "id"]
        indexes = [models.Index(fields=["month", "-id"], name="month_closing_newest")]
        permissions = [("close_month", "Can close (freeze) and reopen monthly tallies")]

    def __str__(self) -> str:
        return f"{self.month:%Y-%m} {self.action}"


class FrozenDiscrepancy(models.Model):
    """A discrepancy a closing counted, as the month's TallyEntry said when it was frozen
    (its outcome then): what a frozen figure opens. Append-only, like the closing."""

    closing = models.ForeignKey(
        MonthClosing, on_delete=models.PROTECT, db_index=False, related_name="+"
    )
    # Unchecked, as a TallyEntry's: runs, verdicts, findings and tickets are never deleted.
    run = models.ForeignKey(
        "Run", on_delete=models.PROTECT, db_constraint=False, db_index=False, related_name="+"
    )
    origin = models.CharField(max_length=10, choices=TallyEntry.Origin.choices)
    field = models.TextField(blank=True)
    entity = models.TextField(null=True, blank=True)
    sources = models.TextField(blank=True)
    rule = models.TextField(blank=True)
    policy_number = models.PositiveIntegerField()
    agent = models.CharField(max_length=200, blank=True)
    finding_kind = models.CharField(max_length=60, blank=True)
    verdict = guards.unchecked_reference("Verdict")
    finding = guards.unchecked_reference("Finding")
    ticket = guards.unchecked_reference("Ticket")
    outcome = models.CharField(max_length=20, choices=TallyEntry.Outcome.choices)
    cause = models.CharField(max_length=30, blank=True)

    class Meta:
        triggers = guards.append_only()
        # A frozen figure's list: a closing's discrepancies of some outcomes.
        indexes = [models.Index(fields=["closing", "outcome"], name="frozen_discrepancy_list")]

    def __str__(self) -> str:
        return f"{self.origin} {self.field or self.finding_kind} of run {self.run_id} (frozen)"
