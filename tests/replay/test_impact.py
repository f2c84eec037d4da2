"""Impact before approval: a proposal's (and the draft's) replay over every open ticket and
the regression suite. What it says would be settled is what publishing then labels."""

from __future__ import annotations

import pytest

from reviewapp.models import (
    FixtureSet,
    ProspectiveSettlement,
    ReplayJob,
    ReplayResult,
    Ticket,
)
from reviewapp.policy.candidates import candidate_of_draft, candidate_of_proposal
from reviewapp.policy.settlements import settlements_label
from reviewapp.policy.versions import policy_version_publish, proposal_decide
from reviewapp.replay.fixtures import freeze_ticket, suite_mark
from reviewapp.replay.impact import impact
from reviewapp.replay.jobs import job_work
from reviewapp.review.changes import ticket_claim
from tests.replay.conftest import propose_owner
from tests.seeding import desk_lines, ingest_lines

pytestmark = pytest.mark.django_db


def settled_by(job: ReplayJob) -> set[int]:
    return set(
        ReplayResult.objects.filter(job=job, settles_ticket=True).values_list(
            "ticket_id", flat=True
        )
    )


def run_all(found) -> None:
    for job in found.jobs:
        job_work(job.pk, budget=300)
        job.refresh_from_db()


def test_the_preview_count_is_what_publishing_settles_on_a_desk_of_2000(
    tmp_path, reviewer, approver, settings
):
    settings.REPLAY_CHUNK_RUNS = 250
    ingest_lines(tmp_path, desk_lines(2400))
    open_tickets = Ticket.objects.filter(state="open")
    assert open_tickets.count() >= 2000
    proposal = propose_owner(reviewer)

    # The approver opens the proposal: its impact over every open ticket, not a sample.
    preview = impact(candidate_of_proposal(proposal, user=approver), user=approver, start=True)
    run_all(preview)
    job = preview.open_tickets
    assert job.state == "done"
    assert job.run_count == open_tickets.values("run").distinct().count()
    promised = job.counts["tickets_settled"]
    assert promised == len(settled_by(job)) > 1000

    proposal_decide(proposal=proposal, user=approver, approve=True, reason="the ledger owns it")
    draft = impact(candidate_of_draft(user=approver), user=approver, start=True)
    run_all(draft)
    assert draft.open_tickets.counts["tickets_settled"] == promised

    version = policy_version_publish(user=approver, reason="ledger owns status")
    assert settlements_label(version) == promised
    labelled = set(
        ProspectiveSettlement.objects.filter(policy_version=version).values_list(
            "ticket_id", flat=True
        )
    )
    assert labelled == settled_by(job) == settled_by(draft.open_tickets)


def test_a_snapshot_is_reused_until_the_desk_changes(small_desk, reviewer):
    candidate = candidate_of_draft(user=reviewer)
    first = impact(candidate, user=reviewer, start=True)
    assert impact(candidate, user=reviewer, start=True).open_tickets == first.open_tickets
    ticket = Ticket.objects.filter(state="open").first()
    ticket_claim(ticket, actor=reviewer, revision=ticket.revision)
    # Read without starting anything, the old one is shown as out of date.
    stale = impact(candidate, user=reviewer)
    assert stale.open_tickets == first.open_tickets and stale.stale
    fresh = impact(candidate, user=reviewer, start=True)
    assert fresh.open_tickets != first.open_tickets and not fresh.stale
    assert impact(candidate, user=reviewer, start=True, again=True).open_tickets not in (
        first.open_tickets,
        fresh.open_tickets,
    )


def test_the_regression_suite_is_replayed_and_its_changes_counted(small_desk, reviewer):
    unchanged = freeze_ticket(Ticket.objects.get(run__run_id="run-3"), name="ledger-free")
    changing = freeze_ticket(Ticket.objects.get(run__run_id="run-4"), name="ledger owned")
    for fixture_set in (unchanged, changing):
        suite_mark(fixture_set, in_suite=True, user=reviewer)
    found = impact(candidate_of_proposal(propose_owner(reviewer)), user=reviewer, start=True)
    assert [fixture_set for fixture_set, _ in found.suite] == [unchanged, changing]
    assert not found.finished
    run_all(found)
    found = impact(found.candidate, user=reviewer)
    assert found.finished
    assert [job.changed_groups for _, job in found.suite] == [0, 1]
    assert [job.reason for _, job in found.suite] == [
        f"regression suite, impact of {found.candidate.label}"
    ] * 2


def test_nothing_open_nothing_to_settle(small_desk, reviewer):
    Ticket.objects.update(state="closed")
    found = impact(candidate_of_draft(), user=reviewer, start=True)
    assert found.open_tickets is None and "No ticket is open" in found.note


def test_candidates_share_the_snapshot_of_an_unchanged_desk(small_desk, reviewer):
    proposal = candidate_of_proposal(propose_owner(reviewer))
    draft = candidate_of_draft(user=reviewer)
    first = impact(proposal, user=reviewer, start=True).open_tickets
    second = impact(draft, user=reviewer, start=True).open_tickets
    assert first != second and first.fixture_set == second.fixture_set
    assert FixtureSet.objects.filter(origin="open-tickets").count() == 1
