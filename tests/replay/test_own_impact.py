"""A proposal's impact is its own (issue 26.1): the active version with the proposal, against
the active version, on the same runs. A walk of propose → approve → publish → a second
proposal, every count recounted by brute force: the runs read again from the database and
judged again by the engine under both documents."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from django.core.management import call_command
from django.urls import reverse

from reviewapp.engine import load_policy
from reviewapp.judging.core import judge, stored_runs
from reviewapp.models import (
    FixtureRun,
    PolicyCandidate,
    ProspectiveSettlement,
    ReplayJob,
    ReplayResult,
    Ticket,
)
from reviewapp.policy.candidates import candidate_of_draft, candidate_of_proposal
from reviewapp.policy.settlements import settled_before, settlement_preview, settlements_label
from reviewapp.policy.versions import policy_version_publish, proposal_create, proposal_decide
from reviewapp.replay.impact import impact, impact_superseded, pending_impacts_start
from reviewapp.replay.jobs import job_work
from tests.seeding import ingest_lines, observed_run

pytestmark = pytest.mark.django_db

RUNS = 24


def two_field_run(run_id: str, *, address_disputed: bool) -> list[str]:
    """`status` from the ledger and the search index (disagreeing), `address` from the
    search index and the CRM (disagreeing in one run of three), then a refund."""
    crm_address = "2 Side St" if address_disputed else "1 Main St"
    return observed_run(
        run_id,
        [
            ("order-ledger", "payments", 40, {"status": "refunded"}),
            ("search-index", "search", 105, {"status": "paid", "address": "1 Main St"}),
            ("crm", "crm", 7, {"address": crm_address}),
        ],
    )


def owner_proposal(user, source: str, field: str):
    return proposal_create(
        user=user,
        kind="authoritative-source",
        change={"field": field, "source": source},
        rationale=f"{source} owns {field}",
    )


def address_compared(user):
    """v1's change: `address` becomes a decision field, compared as text."""
    return proposal_create(
        user=user,
        kind="normalizer",
        change={"field": "address", "normalize": {"kind": "text", "collapseWhitespace": True}},
        rationale="addresses are compared",
    )


def publish(proposal, approver, reason: str):
    proposal_decide(proposal=proposal, user=approver, approve=True, reason="checked")
    return policy_version_publish(user=approver, reason=reason)


@dataclass
class Recount:
    newly_resolved: int
    settled: set[int]
    changed: int


def brute_force(job: ReplayJob) -> Recount:
    """The job's fixture set read again from the database, every run judged again by the
    engine under the candidate's and the baseline's documents, and compared group by group."""
    pins = dict(
        FixtureRun.objects.filter(fixture_set=job.fixture_set).values_list(
            "run_id", "through_record_id"
        )
    )
    runs = stored_runs(pins, through=pins)

    def verdicts(candidate: PolicyCandidate):
        policy = load_policy({**candidate.document, "version": candidate.number})
        return {
            (judged.run.stored_pk, v.entity, v.field): v.kind
            for judged in judge(runs, policy)
            for v in judged.result.verdicts
        }

    before, after = verdicts(job.baseline), verdicts(job.candidate)
    settled_kinds = ("confirmed", "resolved")
    newly = {
        g for g, kind in after.items() if before.get(g) == "conflict" and kind in settled_kinds
    }
    changed = {g for g in before.keys() | after.keys() if before.get(g) != after.get(g)}
    settled = {
        ticket.pk
        for ticket in Ticket.objects.filter(run_id__in=list(pins), state="open", kind="conflict")
        if (ticket.run_id, ticket.entity, ticket.field) in newly
    }
    return Recount(len(newly), settled, len(changed))


def finished(found):
    for job in found.jobs:
        job_work(job.pk, budget=300)
        job.refresh_from_db()
    return found.open_tickets


def settled_by(job: ReplayJob) -> set[int]:
    return set(
        ReplayResult.objects.filter(job=job, settles_ticket=True).values_list(
            "ticket_id", flat=True
        )
    )


def assert_recounted(job: ReplayJob) -> Recount:
    recount = brute_force(job)
    assert job.counts["newly_resolved"] == recount.newly_resolved
    assert job.counts["tickets_settled"] == len(recount.settled)
    assert settled_by(job) == recount.settled
    assert job.changed_groups == recount.changed
    return recount


def test_the_walk_from_a_proposal_to_a_second_one_counts_each_change_as_its_own(
    client, tmp_path, reviewer, approver
):
    # v1 judges the desk: `address` is compared too.
    publish(address_compared(reviewer), approver, "v1")
    lines = []
    for number in range(RUNS):
        lines += two_field_run(f"desk-{number}", address_disputed=number % 3 == 0)
    ingest_lines(tmp_path, lines)
    status_tickets = set(
        Ticket.objects.filter(field="status", state="open").values_list("pk", flat=True)
    )
    address_tickets = set(
        Ticket.objects.filter(field="address", state="open").values_list("pk", flat=True)
    )
    assert (len(status_tickets), len(address_tickets)) == (RUNS, RUNS // 3)

    # The first proposal, measured against v1: it settles every status ticket.
    ledger = owner_proposal(reviewer, "order-ledger", "status")
    first = finished(
        impact(candidate_of_proposal(ledger, user=approver), user=approver, start=True)
    )
    assert first.baseline.label == "v1" and first.candidate.label == f"v1 + proposal #{ledger.pk}"
    assert assert_recounted(first).settled == status_tickets
    preview, _ = settlement_preview(ledger.kind, ledger.change)
    assert {s.ticket.pk for s in preview} == status_tickets

    # A second proposal made meanwhile, measured against v1 too: its own rule only.
    address = owner_proposal(reviewer, "search-index", "address")
    early = finished(
        impact(candidate_of_proposal(address, user=approver), user=approver, start=True)
    )
    assert assert_recounted(early).settled == address_tickets

    # Approved: the draft's impact is the first proposal's.
    proposal_decide(proposal=ledger, user=approver, approve=True, reason="checked")
    draft = finished(impact(candidate_of_draft(user=approver), user=approver, start=True))
    assert assert_recounted(draft).settled == status_tickets == settled_by(first)

    # Published as v2: it labels what its preview and replays said, and rewrites nothing.
    version = policy_version_publish(user=approver, reason="the ledger owns status")
    settlements_label(version)
    labelled = set(
        ProspectiveSettlement.objects.filter(policy_version=version).values_list(
            "ticket_id", flat=True
        )
    )
    assert labelled == status_tickets
    assert Ticket.objects.filter(pk__in=status_tickets, state="open").count() == RUNS

    # The second proposal's impact against v1 is now out of date: shown so, never as current.
    stale = impact_superseded("proposal", address, version.number)
    assert stale is not None and stale.open_tickets == early
    assert stale.out_of_date.startswith("measured against v1; v2 is active since ")

    # Measured again on publishing: v2 with it, against v2. The status tickets v2 settles
    # (still open, only labelled) are v2's, not the proposal's.
    [again] = [
        found
        for found in pending_impacts_start(user=approver)
        if found.candidate.proposal == address
    ]
    second = finished(again)
    assert (second.candidate.label, second.baseline.label) == (f"v2 + proposal #{address.pk}", "v2")
    assert not again.out_of_date
    recount = assert_recounted(second)
    assert recount.settled == address_tickets
    assert second.counts["newly_resolved"] == len(address_tickets)
    assert second.counts["intended"] == second.changed_groups
    preview, _ = settlement_preview(address.kind, address.change)
    assert {s.ticket.pk for s in preview} == address_tickets

    # Published as v3: it labels both kinds of ticket (all are resolved under it), and its
    # page says which v2 settles already, so its own change's count is the impact's.
    v3 = publish(address, approver, "search-index owns address")
    settlements_label(v3)
    assert settled_before(v3) == RUNS
    client.force_login(approver)
    page = client.get(reverse("policy-version", args=[3])).content.decode()
    assert f"{RUNS + len(address_tickets)} open tickets would be resolved under" in page
    assert f"its own change settles {len(address_tickets)}." in page


def test_the_command_line_counts_a_proposal_s_own_effect(capsys, tmp_path, reviewer, approver):
    publish(address_compared(reviewer), approver, "v1")
    lines = []
    for number in range(RUNS):
        lines += two_field_run(f"cli-{number}", address_disputed=number % 3 == 0)
    ingest_lines(tmp_path, lines)
    publish(owner_proposal(reviewer, "order-ledger", "status"), approver, "v2")
    address = owner_proposal(reviewer, "search-index", "address")

    call_command("replay", "--open-tickets", "--policy", f"proposal-{address.pk}", "--json")
    [job] = json.loads(capsys.readouterr().out)["jobs"]
    own = RUNS // 3
    assert job["counts"]["newly_resolved"] == own
    assert job["counts"]["tickets_settled"] == own
    assert job["baseline"]["label"] == "v2"
    assert job["against"] == "against v2, the active version"
