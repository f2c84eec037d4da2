"""Replay: fixture sets (runs frozen at a record), the jobs that judge them again under a
candidate policy on background workers, and what each job found, group by group.

Fixture sets, their pinned runs, their suite marks and finished results are written once
and never changed (the database refuses it). Jobs and their items are work in progress:
their state moves (queued, running, done...), in the database, which is the record of
what is done; the broker only says that there is work."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from reviewapp.models import guards


class FixtureSet(models.Model):
    """A named, immutable set of runs, each pinned at the record it had when frozen:
    records are never changed or removed, so later ingests cannot change what it holds."""

    class Origin(models.TextChoices):
        TICKET = "ticket", "a ticket"
        FAMILY = "family", "a family"
        QUEUE = "queue", "a queue filter"
        SETTLED = "settled", "a version's settled tickets"
        UPLOAD = "upload", "an uploaded file"
        SHARED = "shared", "shared fixtures"
        IMPORT = "import", "an imported fixture file"
        OPEN_TICKETS = "open-tickets", "every open ticket, as it was"

    name = models.CharField(max_length=200, unique=True)
    description = models.TextField(blank=True)
    origin = models.CharField(max_length=20, choices=Origin.choices)
    # What it was made from, in words: "ticket #12", "family 3f2a… (status · …)", a file name.
    origin_detail = models.TextField(blank=True)
    run_count = models.PositiveIntegerField(default=0)
    record_count = models.PositiveIntegerField(default=0)
    # SHA-256 of its records up to each pin, as canonical JSON Lines, runs in order.
    sha256 = models.CharField(max_length=64)
    # OPEN_TICKETS: the desk when frozen (see replay.impact), so that a snapshot is reused
    # only while nothing changed.
    stamp = models.CharField(max_length=100, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        triggers = guards.append_only()
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["origin", "-created_at"], name="fixture_origin_newest")]

    def __str__(self) -> str:
        return self.name


class FixtureRun(models.Model):
    """One run of a fixture set, pinned at a record, with the ACTIVE judgement that covered
    it then (the recorded verdicts a replay is compared with; none if it was never judged
    at that point)."""

    fixture_set = models.ForeignKey(FixtureSet, on_delete=models.PROTECT, related_name="runs")
    run = models.ForeignKey("Run", on_delete=models.PROTECT, related_name="+", db_index=False)
    through_record_id = models.BigIntegerField()
    recorded_judgement = guards.unchecked_reference("Judgement")

    class Meta:
        triggers = guards.append_only()
        constraints = [
            models.UniqueConstraint(fields=["fixture_set", "run"], name="fixture_run_once")
        ]

    def __str__(self) -> str:
        return f"run {self.run_id} through record {self.through_record_id}"


class FixtureSuiteMark(models.Model):
    """A fixture set put into (or taken out of) the policy's regression suite; the newest
    mark of a set says where it is. Marks are never changed: they are the suite's history."""

    fixture_set = models.ForeignKey(
        FixtureSet, on_delete=models.PROTECT, related_name="suite_marks"
    )
    in_suite = models.BooleanField()
    marked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    marked_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        triggers = guards.append_only()
        ordering = ["-marked_at", "-id"]

    def __str__(self) -> str:
        return f"{self.fixture_set} {'in' if self.in_suite else 'out of'} the suite"


class ReplayJob(models.Model):
    """A fixture set judged again under a candidate policy, in items processed by workers."""

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"
        CANCELLED = "cancelled"

    fixture_set = models.ForeignKey(FixtureSet, on_delete=models.PROTECT, related_name="jobs")
    candidate = models.ForeignKey(
        "PolicyCandidate", on_delete=models.PROTECT, related_name="replay_jobs"
    )
    # What the candidate is compared with: the version it builds on, judged on the same runs
    # (policy.candidates.baseline_of). NULL for a job from before baselines: compared with
    # the verdicts recorded when its runs were frozen.
    baseline = models.ForeignKey(
        "PolicyCandidate",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="baseline_of_jobs",
    )
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    # Why it runs, in words: "impact of proposal #12", "regression suite of the draft"...
    reason = models.CharField(max_length=200, blank=True)
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    item_count = models.PositiveIntegerField(default=0)
    run_count = models.PositiveIntegerField(default=0)
    # Filled in when it ends: how many groups fall in each category (replay.compare.COUNTS).
    counts = models.JSONField(default=dict, blank=True)
    # SHA-256 over its items' result digests, in order: the same replay gives the same one.
    result_sha256 = models.CharField(max_length=64, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # When workers were last told there is work (beat tells them again when it stalls).
    hinted_at = models.DateTimeField(null=True, blank=True)
    cancelled_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(
                fields=["candidate", "fixture_set", "-created_at"], name="replay_job_latest"
            ),
            models.Index(fields=["state"], name="replay_job_state"),
        ]
        permissions = [("run_replay", "Can freeze fixture sets and start replays")]

    def __str__(self) -> str:
        return f"replay #{self.pk}"

    @property
    def is_finished(self) -> bool:
        return self.state in (self.State.DONE, self.State.FAILED, self.State.CANCELLED)

    @property
    def changed_groups(self) -> int:
        """Groups that changed in any way (once done: counts are filled in then)."""
        return int(self.counts.get("groups", 0)) - int(self.counts.get("unchanged", 0))

    @property
    def intended_groups(self) -> int:
        """Changed groups where the candidate's own change reaches (replay.compare)."""
        return int(self.counts.get("intended", 0))

    @property
    def regressions(self) -> int:
        """Changed groups outside the candidate's own change: what it was not meant to do."""
        return self.changed_groups - self.intended_groups


class ReplayItem(models.Model):
    """A chunk of a job: the fixture set's runs with ids first..last. A worker claims it
    (state running, a lease), processes it in one transaction that also marks it done, or
    dies: the lease runs out and it is claimed again. After too many tries it fails."""

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"
        CANCELLED = "cancelled"

    job = models.ForeignKey(ReplayJob, on_delete=models.PROTECT, related_name="items")
    seq = models.PositiveIntegerField()
    first_fixture_run_id = models.BigIntegerField()
    last_fixture_run_id = models.BigIntegerField()
    run_count = models.PositiveIntegerField()
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    attempts = models.PositiveIntegerField(default=0)
    lease_until = models.DateTimeField(null=True, blank=True)
    # Who holds the claim: host, process and a token of this claim.
    claimed_by = models.CharField(max_length=120, blank=True)
    counts = models.JSONField(default=dict, blank=True)
    digest = models.CharField(max_length=64, blank=True)
    error = models.TextField(blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        # By column: ordering by "job" would join the job (and a FOR UPDATE lock it too).
        ordering = ["job_id", "seq"]
        constraints = [models.UniqueConstraint(fields=["job", "seq"], name="replay_item_once")]
        indexes = [models.Index(fields=["job", "state"], name="replay_item_job_state")]

    def __str__(self) -> str:
        return f"item {self.seq} of {self.job}"


class ReplayResult(models.Model):
    """A group of a run that a finished item found changed (or whose open ticket the
    prospective verdict settles): the baseline's verdict (or finding) beside the prospective
    one, and what changed. The `recorded_*` columns hold the baseline's side (ReplayJob.
    baseline): the recorded judgement itself where it was made under the baseline version. Unchanged groups are counted on the item; both sides of every
    group stay in their judgements. Written once per job, run and group (the database
    refuses a second), never changed."""

    class Kind(models.TextChoices):
        VERDICT = "verdict"
        FINDING = "finding"

    job = models.ForeignKey(
        ReplayJob, on_delete=models.PROTECT, related_name="results", db_index=False
    )
    # What the references below point at is never deleted (append-only rows; runs and
    # tickets are kept for good), so the database is not asked to check each of the
    # thousands a replay writes: its commit would take longer than writing them.
    run = models.ForeignKey(
        "Run", on_delete=models.PROTECT, related_name="+", db_index=False, db_constraint=False
    )
    # The group's key: its ticket's key (review.opening.ticket_key), for a conflict or a finding.
    key = models.CharField(max_length=64)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    entity = models.TextField(null=True, blank=True)
    field = models.TextField(blank=True)
    finding_kind = models.CharField(max_length=60, blank=True)
    recorded_judgement = guards.unchecked_reference("Judgement")
    recorded_verdict = guards.unchecked_reference("Verdict")
    recorded_finding = guards.unchecked_reference("Finding")
    prospective_judgement = guards.unchecked_reference("Judgement")
    prospective_verdict = guards.unchecked_reference("Verdict")
    prospective_finding = guards.unchecked_reference("Finding")
    changed = models.BooleanField()
    newly_resolved = models.BooleanField()
    newly_conflict = models.BooleanField()
    value_changed = models.BooleanField()
    newly_unsafe = models.BooleanField()
    newly_safe = models.BooleanField()
    finding_gained = models.BooleanField()
    finding_lost = models.BooleanField()
    # A change none of the above names: the reason or rule, or a group only one side has.
    other_changed = models.BooleanField()
    # Changed where the candidate's own change reaches (its rules' fields and actions, its
    # fields' settings: replay.scope); a change elsewhere is a regression.
    intended = models.BooleanField(default=False)
    # The group's ticket when replayed, and whether the prospective verdict settles it.
    ticket = guards.unchecked_reference("Ticket")
    settles_ticket = models.BooleanField()

    class Meta:
        triggers = guards.append_only()
        constraints = [
            models.UniqueConstraint(fields=["job", "run", "key"], name="replay_result_once")
        ]

    def __str__(self) -> str:
        return f"{self.field or self.finding_kind} of run {self.run_id} in {self.job}"
