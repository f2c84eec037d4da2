"""Impact before approval: what a candidate (a proposal applied to the active version, or
the draft) would change against the active version, on the same runs, shown on its page
before anyone decides. An impact measured against a version no longer active is shown as
out of date, never as current, and measured again on the events below.

Two kinds of replay, started by the event that calls for them, never by a page being read:
a proposal made (its own), a proposal approved (the draft's), a version published (each
pending proposal's, applied to the new draft); or by hand, from the page, by someone who
may start replays. Over every open ticket (a snapshot of the desk: each run with an open
ticket, where its current judgement stands; not a sample), and every fixture set in the
regression suite. A
snapshot is reused while the desk is unchanged (no ticket opened or changed, no record
arrived, no version published) and younger than REPLAY_SNAPSHOT_SECONDS; the suite's jobs
while the candidate is the same. The count of open tickets a candidate would settle is the
replay's, and it is what publishing that document then labels: both count with
policy.settlements (settles, current_pins)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from reviewapp.engine import PolicyError
from reviewapp.models import (
    AuditEvent,
    FixtureSet,
    PolicyCandidate,
    PolicyVersion,
    ReplayJob,
    RuleProposal,
    Ticket,
    TraceRecord,
)
from reviewapp.policy.candidates import (
    candidate_of_draft,
    candidate_of_proposal,
    candidate_of_version,
)
from reviewapp.policy.versions import superseded
from reviewapp.replay.fixtures import FixtureError, freeze_open_tickets, suite_sets
from reviewapp.replay.jobs import ReplayError, job_start

LIVE = (ReplayJob.State.QUEUED, ReplayJob.State.RUNNING, ReplayJob.State.DONE)
# A version published changes the draft every pending proposal applies to: the newest this
# many are measured again at once, any other when someone asks on its page.
PENDING_MEASURED_ON_PUBLISH = 10


def desk_stamp() -> str:
    """The open tickets and what they were judged from, as they are now, in a few numbers:
    the newest ticket, audit event (every ticket change has one), record and version."""
    newest = ", ".join(
        f"(SELECT MAX({column}) FROM {model._meta.db_table})"
        for model, column in (
            (Ticket, "id"),
            (AuditEvent, "id"),
            (TraceRecord, "id"),
            (PolicyVersion, "number"),
        )
    )
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {newest}")
        return "-".join(str(value or 0) for value in cursor.fetchone())


@dataclass
class Impact:
    candidate: PolicyCandidate
    # Over every open ticket; None when none was started (no open ticket, or not allowed).
    open_tickets: ReplayJob | None = None
    # The snapshot is older than the desk: the page says so and offers to replay again.
    stale: bool = False
    suite: list[tuple[FixtureSet, ReplayJob | None]] = field(default_factory=list)
    note: str = ""
    # Measured against a version no longer active, in words ("" while it is the active one).
    out_of_date: str = ""

    @property
    def baseline_name(self) -> str:
        return self.candidate.base_label

    @property
    def jobs(self) -> list[ReplayJob]:
        found = [job for _, job in self.suite if job is not None]
        return ([self.open_tickets] if self.open_tickets else []) + found

    @property
    def finished(self) -> bool:
        return all(job.is_finished for job in self.jobs)


def _latest(candidate: PolicyCandidate, **filters: Any) -> ReplayJob | None:
    return (
        ReplayJob.objects.filter(candidate=candidate, state__in=LIVE, **filters)
        .select_related("fixture_set", "candidate", "started_by")
        .order_by("-created_at", "-id")
        .first()
    )


def _fresh(job: ReplayJob, stamp: str, now: datetime) -> bool:
    young = now - job.fixture_set.created_at < timedelta(seconds=settings.REPLAY_SNAPSHOT_SECONDS)
    return job.fixture_set.stamp == stamp and young


def _snapshot(stamp: str, now: datetime) -> FixtureSet | None:
    """A snapshot of the desk as it is now that another candidate's impact took already:
    every proposal and the draft are then compared on the same runs."""
    return (
        FixtureSet.objects.filter(
            origin=FixtureSet.Origin.OPEN_TICKETS,
            stamp=stamp,
            created_at__gte=now - timedelta(seconds=settings.REPLAY_SNAPSHOT_SECONDS),
        )
        .order_by("-id")
        .first()
    )


def impact_superseded(
    kind: str, proposal: RuleProposal | None = None, active_number: int = 0
) -> Impact | None:
    """The newest impact of the draft or of a proposal measured against a version before
    `active_number` (the active one), when none was measured against the active one yet:
    shown as out of date, with what measures it again."""
    older = PolicyCandidate.objects.filter(
        kind=PolicyCandidate.Kind.PROPOSAL if proposal is not None else PolicyCandidate.Kind.DRAFT,
        proposal=proposal,
        base_number__lt=active_number,
        replay_jobs__isnull=False,
    ).order_by("-base_number", "-id")
    candidate = older.first()
    return None if candidate is None else impact(candidate)


def replay_open_tickets(
    candidate: PolicyCandidate, *, user: Any = None, send: bool = True, reason: str = ""
) -> ReplayJob:
    """A replay of every open ticket (a snapshot of the desk as it is now, shared with any
    taken since it last changed) under the candidate; FixtureError when none is open."""
    stamp, now = desk_stamp(), timezone.now()
    snapshot = _snapshot(stamp, now) or freeze_open_tickets(user=user, stamp=stamp)
    return job_start(snapshot, candidate, user=user, send=send, reason=reason)


def impact(
    candidate: PolicyCandidate, *, user: Any = None, start: bool = False, again: bool = False
) -> Impact:
    """The candidate's replays over every open ticket and the regression suite: the latest
    ones, started now when missing or out of date if `start` (a new snapshot if `again`)."""
    found = Impact(
        candidate, out_of_date=superseded(candidate.base_number, made="measured against")
    )
    reason = f"impact of {candidate.label}"
    latest = _latest(candidate, fixture_set__origin=FixtureSet.Origin.OPEN_TICKETS)
    stamp, now = desk_stamp(), timezone.now()
    if latest is not None and _fresh(latest, stamp, now) and not again:
        found.open_tickets = latest
    elif start and not Ticket.objects.filter(state=Ticket.State.OPEN).exists():
        found.note = "No ticket is open: there is nothing on the desk to settle."
    elif start:
        try:
            snapshot = None if again else _snapshot(stamp, now)
            snapshot = snapshot or freeze_open_tickets(user=user, stamp=stamp)
        except FixtureError as exc:  # more runs than a fixture set holds, say
            found.note = f"Every open ticket cannot be replayed: {exc}."
        else:
            found.open_tickets = job_start(snapshot, candidate, user=user, reason=reason)
    else:
        found.open_tickets, found.stale = latest, latest is not None
    for fixture_set in suite_sets():
        job = _latest(candidate, fixture_set=fixture_set)
        if job is None and start:
            job = job_start(fixture_set, candidate, user=user, reason=f"regression suite, {reason}")
        found.suite.append((fixture_set, job))
    return found


def proposal_impact_start(proposal: RuleProposal, *, user: Any) -> Impact:
    """A proposal just made: its impact, started in its proposer's name, for whoever
    decides it."""
    return impact(candidate_of_proposal(proposal, user=user), user=user, start=True)


def draft_impact_start(*, user: Any) -> Impact:
    """The draft just changed (a proposal approved): its impact, for whoever publishes it."""
    return impact(candidate_of_draft(user=user), user=user, start=True)


def pending_impacts_start(*, user: Any) -> list[Impact]:
    """A version just published: the pending proposals (the newest
    PENDING_MEASURED_ON_PUBLISH) now apply to a new draft, each measured again. One that no
    longer applies to it is left: its page says why."""
    started = []
    pending = RuleProposal.objects.filter(state=RuleProposal.State.PENDING).order_by("-id")
    for proposal in pending[:PENDING_MEASURED_ON_PUBLISH]:
        try:
            started.append(proposal_impact_start(proposal, user=user))
        except (PolicyError, ValueError):
            continue
    return started


def candidate_for(kind: str, number: int | None = None, *, user: Any = None) -> PolicyCandidate:
    """The candidate a replay is asked for: "draft", ("version", N) or ("proposal", id);
    ReplayError when there is no such thing."""
    if kind == "draft":
        return candidate_of_draft(user=user)
    if kind == "version" and number is not None:
        version = PolicyVersion.objects.filter(number=number).first()
        if version is None:
            raise ReplayError(f"no version v{number}")
        return candidate_of_version(version, user=user)
    if kind == "proposal" and number is not None:
        proposal = RuleProposal.objects.filter(pk=number).first()
        if proposal is None:
            raise ReplayError(f"no proposal #{number}")
        return candidate_of_proposal(proposal, user=user)
    raise ReplayError(f"cannot replay under {kind}")
