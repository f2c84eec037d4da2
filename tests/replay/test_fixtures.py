"""Fixture sets: frozen from a ticket, a family, a queue filter, a version's settled list,
files; each run pinned where its current judgement stands, unchanged by later ingests."""

from __future__ import annotations

import pytest

from reviewapp.judging.core import judge, stored_runs
from reviewapp.judging.policies import active_policy
from reviewapp.models import FixtureRun, FixtureSet, PolicyCandidate, Run, Ticket, TraceRecord
from reviewapp.policy.candidates import candidate_of_file
from reviewapp.policy.settlements import settlements_label
from reviewapp.policy.versions import policy_version_publish, proposal_decide
from reviewapp.replay.fixtures import (
    FixtureError,
    freeze_family,
    freeze_queue,
    freeze_settled,
    freeze_ticket,
    in_suite,
    records_digest,
    suite_mark,
    suite_sets,
)
from reviewapp.replay.jobs import job_start, job_work
from reviewapp.review.queue import queue_filters
from tests.replay.conftest import propose_owner
from tests.seeding import ingest_lines, line, owned_run

pytestmark = pytest.mark.django_db


def pins(fixture_set: FixtureSet) -> dict[str, tuple[int, int | None]]:
    return {
        run_id: (through, judged)
        for run_id, through, judged in FixtureRun.objects.filter(
            fixture_set=fixture_set
        ).values_list("run__run_id", "through_record_id", "recorded_judgement_id")
    }


def test_a_ticket_freezes_its_run_where_its_current_judgement_stands(small_desk, reviewer):
    ticket = Ticket.objects.get(run__run_id="run-4")
    fixture_set = freeze_ticket(ticket, user=reviewer)
    run = ticket.run
    last = TraceRecord.objects.filter(run=run).order_by("-id").first()
    assert pins(fixture_set) == {"run-4": (last.pk, run.current_judgement_id)}
    assert (fixture_set.origin, fixture_set.origin_detail) == ("ticket", f"ticket #{ticket.pk}")
    assert (fixture_set.run_count, fixture_set.record_count) == (1, 6)
    assert fixture_set.sha256 == records_digest({run.pk: last.pk})[0]
    assert fixture_set.created_by == reviewer


def test_later_lines_of_a_frozen_run_change_nothing_it_holds(small_desk, reviewer, tmp_path):
    ticket = Ticket.objects.get(run__run_id="run-4")
    fixture_set = freeze_ticket(ticket, user=reviewer)
    before = pins(fixture_set)
    # The run goes on: the search index now agrees, and the run's current judgement moves.
    more = [
        line(runId="run-4", type="tool_call", toolCallId="late", tool="lookup", arguments={}),
        line(
            runId="run-4",
            type="tool_observation",
            observationId="late-o",
            toolCallId="late",
            source="search-index",
            revisionDomain="search",
            sourceRevision=99,
            status="refunded",
        ),
    ]
    ingest_lines(tmp_path, more, name="later.jsonl")
    run = Run.objects.get(run_id="run-4")
    assert run.current_judgement_id != before["run-4"][1]
    assert pins(fixture_set) == before
    # Replayed, it is judged as it was when frozen.
    through = before["run-4"][0]
    [as_frozen] = judge(stored_runs([run.pk], through={run.pk: through}), active_policy().policy)
    assert [v.kind for v in as_frozen.result.verdicts] == ["conflict"]
    assert as_frozen.run.through_record_id == through


def test_a_family_a_queue_filter_and_a_versions_settled_list(small_desk, reviewer, approver):
    ticket = Ticket.objects.get(run__run_id="run-1")
    family = freeze_family(ticket.fingerprint, user=reviewer)
    alike = Ticket.objects.filter(fingerprint=ticket.fingerprint)
    assert set(pins(family)) == {t.run.run_id for t in alike}
    assert family.origin_detail.startswith(f"family {ticket.fingerprint}: status")

    queue = freeze_queue(queue_filters({"source": "refund-service"}), reviewer)
    assert set(pins(queue)) == {f"run-{n}" for n in range(0, 30, 3) if n % 7}
    assert queue.origin_detail == "queue ?source=refund-service"

    proposal_decide(proposal=propose_owner(reviewer), user=approver, approve=True, reason="")
    version = policy_version_publish(user=approver, reason="ledger owns status")
    settlements_label(version)
    settled = freeze_settled(version, user=approver)
    assert set(pins(settled)) == {f"run-{n}" for n in range(30) if n % 3 and n % 7}


def test_names_are_unique_and_something_must_be_frozen(small_desk, reviewer):
    ticket = Ticket.objects.first()
    freeze_ticket(ticket, name="golden orders")
    with pytest.raises(FixtureError, match="exists already"):
        freeze_ticket(ticket, name="  golden   orders ")
    with pytest.raises(FixtureError, match="no ticket in family"):
        freeze_family("0" * 16)
    with pytest.raises(FixtureError, match="nothing selected"):
        freeze_queue(queue_filters({"agent": "nobody"}), reviewer)


def test_the_regression_suite_is_the_newest_mark_of_each_set(small_desk, reviewer):
    first = freeze_ticket(Ticket.objects.first(), name="first")
    second = freeze_ticket(Ticket.objects.last(), name="second")
    assert suite_sets() == [] and not in_suite(first)
    suite_mark(first, in_suite=True, user=reviewer)
    suite_mark(second, in_suite=True, user=reviewer)
    suite_mark(first, in_suite=False, user=reviewer)
    assert suite_sets() == [second]
    assert (in_suite(first), in_suite(second)) == (False, True)


def test_a_policy_file_is_a_candidate_of_its_own(small_desk, reviewer):
    document = {"fields": {"status": {}}, "rules": []}
    candidate = candidate_of_file(document, user=reviewer)
    assert candidate_of_file(dict(document)) == candidate
    assert (candidate.kind, candidate.number, candidate.version, candidate.proposal) == (
        "file",
        1,
        None,
        None,
    )
    assert candidate.label == f"policy file {candidate.sha256[:12]} on the built-in default"
    fixture_set = freeze_ticket(Ticket.objects.first())
    job = job_start(fixture_set, candidate, send=False)
    job_work(job.pk, budget=30)
    job.refresh_from_db()
    assert job.state == "done"
    assert PolicyCandidate.objects.filter(kind="file").count() == 1


def test_a_run_never_judged_is_pinned_at_its_last_record_with_nothing_recorded(tmp_path):
    # A line of a run whose only record is its start: judged, but worth no verdict.
    ingest_lines(tmp_path, owned_run("lonely", "a", "b"))
    run = Run.objects.get(run_id="lonely")
    Run.objects.filter(pk=run.pk).update(current_judgement=None)
    from reviewapp.replay.fixtures import pins_where_judged

    last = TraceRecord.objects.filter(run=run).order_by("-id").first()
    assert pins_where_judged([run.pk]) == {run.pk: (last.pk, None)}
