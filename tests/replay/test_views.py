"""The replay pages: what they show (labelled prospective, trace content escaped), who may
do what (checked on the server), live progress that stops polling, and bounded queries."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from django.urls import reverse
from django_htmx.http import HTMX_STOP_POLLING

from reviewapp.accounts.roles import account_raw_access_set
from reviewapp.models import (
    FixtureSet,
    PolicyCandidate,
    ReplayJob,
    ReplayResult,
    RuleProposal,
    Ticket,
)
from reviewapp.policy.candidates import candidate_of_proposal
from reviewapp.policy.versions import proposal_decide
from reviewapp.replay.fixtures import freeze_ticket, suite_mark
from reviewapp.replay.jobs import job_start, job_work
from tests.replay.conftest import propose_owner
from tests.seeding import desk_lines, ingest_lines, line

pytestmark = pytest.mark.django_db


@pytest.fixture
def finished(small_desk, reviewer, settings):
    """A finished replay of a family of the desk under a proposal."""
    settings.REPLAY_CHUNK_RUNS = 5
    from reviewapp.replay.fixtures import freeze_family

    ticket = Ticket.objects.get(run__run_id="run-1")
    fixture_set = freeze_family(ticket.fingerprint, user=reviewer, name="ledger family")
    proposal = propose_owner(reviewer)
    job = job_start(fixture_set, candidate_of_proposal(proposal), user=reviewer, send=False)
    job_work(job.pk, budget=60)
    job.refresh_from_db()
    return job


def test_a_job_page_says_as_if_under_what_and_links_each_count(client, viewer, finished):
    client.force_login(viewer)
    body = client.get(reverse("replay-job", args=[finished.pk])).content.decode()
    # The pages say it in plain words (the JSON keeps "prospective under").
    label = f"as if under the built-in default + proposal #{finished.candidate.proposal_id}"
    assert label in body
    assert 'id="job-state">done<' in body
    assert "hx-trigger" not in body  # finished: nothing polls
    changes = reverse("replay-changes", args=[finished.pk])
    assert f'href="{changes}?category=newly_resolved"' in body
    assert f'href="{changes}?category=settled"' in body
    listed = client.get(changes, {"category": "newly_resolved"}).content.decode()
    assert label in listed
    assert listed.count('class="open-group"') == finished.counts["newly_resolved"] > 0
    result = ReplayResult.objects.filter(job=finished, newly_resolved=True).first()
    group = client.get(reverse("replay-group", args=[finished.pk, result.pk])).content.decode()
    assert "recorded under the built-in default" in group.lower() or "Recorded under" in group
    assert label[0].upper() + label[1:] in group
    assert f"#{result.ticket_id}" in group


def test_progress_polls_while_running_and_286_stops_it(client, viewer, small_desk, reviewer):
    fixture_set = freeze_ticket(Ticket.objects.first())
    job = job_start(fixture_set, candidate_of_proposal(propose_owner(reviewer)), send=False)
    client.force_login(viewer)
    running = client.get(reverse("replay-progress", args=[job.pk]))
    assert running.status_code == 200
    assert 'hx-trigger="every 1s"' in running.content.decode()
    job_work(job.pk, budget=30)
    done = client.get(reverse("replay-progress", args=[job.pk]))
    assert done.status_code == HTMX_STOP_POLLING
    assert "hx-trigger" not in done.content.decode()


def test_trace_content_is_escaped_on_the_group_page(client, reviewer, tmp_path):
    hostile = "<script>alert(1)</script>"
    ingest_lines(
        tmp_path,
        [
            line(runId="evil", type="tool_call", toolCallId="c1", tool="t", arguments={}),
            line(runId="evil", type="tool_call", toolCallId="c2", tool="t", arguments={}),
            line(
                runId="evil",
                type="tool_observation",
                observationId="a",
                toolCallId="c1",
                source="order-ledger",
                status=hostile,
                note=hostile,
            ),
            line(
                runId="evil",
                type="tool_observation",
                observationId="b",
                toolCallId="c2",
                source="x",
                status="paid",
            ),
        ],
    )
    fixture_set = freeze_ticket(Ticket.objects.get(run__run_id="evil"))
    job = job_start(fixture_set, candidate_of_proposal(propose_owner(reviewer)), send=False)
    job_work(job.pk, budget=30)
    result = ReplayResult.objects.get(job=job)
    client.force_login(reviewer)
    for url in (
        reverse("replay-group", args=[job.pk, result.pk]),
        reverse("replay-changes", args=[job.pk]) + "?category=changed",
    ):
        body = client.get(url).content.decode()
        assert hostile not in body and "&lt;script&gt;" in body, url


def test_a_value_that_is_an_object_is_shown_as_json_on_the_group_and_changes_pages(
    client, reviewer, tmp_path
):
    chosen = {"code": "refunded", "by": "<b>ledger</b>", "lines": [1, 2]}
    ingest_lines(
        tmp_path,
        [
            line(runId="obj", type="tool_call", toolCallId="c1", tool="t", arguments={}),
            line(runId="obj", type="tool_call", toolCallId="c2", tool="t", arguments={}),
            line(
                runId="obj",
                type="tool_observation",
                observationId="a",
                toolCallId="c1",
                source="order-ledger",
                status=chosen,
            ),
            line(
                runId="obj",
                type="tool_observation",
                observationId="b",
                toolCallId="c2",
                source="x",
                status={"code": "paid"},
            ),
        ],
    )
    fixture_set = freeze_ticket(Ticket.objects.get(run__run_id="obj"))
    job = job_start(fixture_set, candidate_of_proposal(propose_owner(reviewer)), send=False)
    job_work(job.pk, budget=30)
    result = ReplayResult.objects.get(job=job)
    assert result.prospective_verdict.value == chosen
    client.force_login(reviewer)
    group = client.get(reverse("replay-group", args=[job.pk, result.pk])).content.decode()
    changes = client.get(reverse("replay-changes", args=[job.pk]), {"category": "changed"})
    for body in (group, changes.content.decode()):
        # Never Python's spelling of a dict ({'code': ...}), and trace content stays text.
        assert "&#x27;" not in body and "<b>" not in body
    prospective = group[group.index('id="prospective"') :]
    pretty = (
        json.dumps(chosen, indent=2, sort_keys=True).replace('"', "&quot;").replace("<", "&lt;")
    )
    assert f'<pre class="json">{pretty.replace(">", "&gt;")}</pre>' in prospective
    compact = json.dumps(chosen, separators=(",", ":"), sort_keys=True).replace('"', "&quot;")
    assert compact.replace("<", "&lt;").replace(">", "&gt;") in changes.content.decode()


def test_the_jobs_list_says_who_started_what(client, viewer, finished):
    client.force_login(viewer)
    body = client.get(reverse("replay-jobs")).content.decode()
    assert "ledger family" in body and "rita" in body and finished.candidate.label in body
    assert (
        client.get(reverse("replay-jobs"), {"state": "failed"}).content.decode().count("<tr>") == 0
    )


def test_summary_json_and_results_lines_are_labelled(client, viewer, finished):
    client.force_login(viewer)
    summary = client.get(reverse("replay-json", args=[finished.pk])).json()
    assert summary["label"].startswith("prospective under the built-in default + proposal #")
    assert summary["counts"]["newly_resolved"] == finished.counts["newly_resolved"]
    assert summary["resultSha256"] == finished.result_sha256
    lines = b"".join(client.get(reverse("replay-export", args=[finished.pk])).streaming_content)
    rows = [json.loads(row) for row in lines.decode().splitlines()]
    assert len(rows) == finished.changed_groups
    assert all(row["label"] == summary["label"] for row in rows)
    assert (
        rows[0]["baseline"]["kind"] == "conflict" and rows[0]["prospective"]["kind"] == "resolved"
    )
    assert (
        rows[0]["baseline"]["policyVersion"] == 0 and rows[0]["prospective"]["policyVersion"] == 1
    )


def test_reviewers_freeze_replay_cancel_retry_and_export(client, reviewer, small_desk, admin_user):
    client.force_login(reviewer)
    ticket = Ticket.objects.get(run__run_id="run-2")
    page = client.get(reverse("ticket-detail", args=[ticket.pk])).content.decode()
    assert 'id="freeze-family"' in page
    response = client.post(
        reverse("replay-freeze"), {"source": "family", "family": ticket.fingerprint}
    )
    fixture_set = FixtureSet.objects.get(origin="family")
    assert response["Location"] == reverse("replay-fixture", args=[fixture_set.pk])
    detail = client.get(response["Location"]).content.decode()
    assert 'value="draft"' in detail and 'id="start-replay"' in detail
    propose_owner(reviewer)
    started = client.post(reverse("replay-start", args=[fixture_set.pk]), {"policy": "draft"})
    job = ReplayJob.objects.get()
    assert started["Location"] == reverse("replay-job", args=[job.pk])
    assert job.reason == "started by hand" and job.started_by == reviewer
    client.post(reverse("replay-cancel", args=[job.pk]))
    job.refresh_from_db()
    assert job.state == "cancelled" and job.cancelled_by == reviewer
    client.post(reverse("replay-retry", args=[job.pk]))
    job.refresh_from_db()
    assert job.state == "running"
    client.post(reverse("replay-suite", args=[fixture_set.pk]), {"in_suite": "1"})
    assert (
        "regression suite"
        in client.get(reverse("replay-fixture", args=[fixture_set.pk])).content.decode()
    )
    export_url = reverse("replay-fixture-export", args=[fixture_set.pk])
    # The bundle holds the records: the raw data permission, and a reason (recorded).
    assert client.get(export_url, {"part": "bundle", "version": 0}).status_code == 403
    account_raw_access_set(reviewer.username, True, actor=admin_user, reason="golden files")
    asked = client.get(export_url, {"part": "bundle", "version": 0}, follow=True)
    assert "say why you need the raw data" in asked.content.decode()
    bundle = client.get(export_url, {"part": "bundle", "version": 0, "reason": "a golden file"})
    names = zipfile.ZipFile(io.BytesIO(b"".join(bundle.streaming_content))).namelist()
    assert "fixture.json" in names and len(names) == 4
    refused = client.get(
        export_url,
        {"part": "records", "version": 0, "redact": "status", "reason": "a golden file"},
        follow=True,
    )
    assert "cannot redact status" in refused.content.decode()


def test_a_file_and_a_queue_filter_are_frozen_from_the_browser(client, reviewer, small_desk):
    client.force_login(reviewer)
    upload = io.BytesIO(("\n".join(desk_lines(3, prefix="up")) + "\n").encode())
    upload.name = "three.jsonl"
    response = client.post(reverse("replay-upload"), {"file": upload, "name": "three up"})
    made = FixtureSet.objects.get(name="three up")
    assert response["Location"] == reverse("replay-fixture", args=[made.pk])
    assert (made.origin, made.run_count) == ("upload", 3)
    client.post(reverse("replay-freeze"), {"source": "queue", "queue": "source=refund-service"})
    assert FixtureSet.objects.get(origin="queue").run_count == 8


@pytest.mark.parametrize(
    ("name", "args", "data"),
    [
        ("replay-freeze", [], {"source": "ticket", "ticket": "1"}),
        ("replay-upload", [], {}),
        ("replay-shared", [], {"shared": "order-status"}),
        ("replay-suite", ["FIXTURE"], {"in_suite": "1"}),
        ("replay-start", ["FIXTURE"], {"policy": "draft"}),
        ("replay-cancel", ["JOB"], {}),
        ("replay-retry", ["JOB"], {}),
        ("replay-impact-draft", [], {}),
        ("replay-open-tickets", [], {"policy": "draft"}),
    ],
)
def test_viewers_read_and_change_nothing_and_anonymous_visitors_log_in(
    client, viewer, finished, name, args, data
):
    ids = {"FIXTURE": finished.fixture_set_id, "JOB": finished.pk}
    url = reverse(name, args=[ids[arg] for arg in args])
    assert client.post(url, data)["Location"].startswith(reverse("login"))
    client.force_login(viewer)
    jobs, sets = ReplayJob.objects.count(), FixtureSet.objects.count()
    assert client.post(url, data).status_code == 403
    assert (ReplayJob.objects.count(), FixtureSet.objects.count()) == (jobs, sets)


def test_every_replay_page_needs_a_login_and_viewers_read_them(client, viewer, finished):
    result = ReplayResult.objects.filter(job=finished).first()
    pages = [
        reverse("replay-jobs"),
        reverse("replay-job", args=[finished.pk]),
        reverse("replay-progress", args=[finished.pk]),
        reverse("replay-changes", args=[finished.pk]),
        reverse("replay-group", args=[finished.pk, result.pk]),
        reverse("replay-json", args=[finished.pk]),
        reverse("replay-export", args=[finished.pk]),
        reverse("replay-fixtures"),
        reverse("replay-fixture", args=[finished.fixture_set_id]),
        reverse("replay-fixture-export", args=[finished.fixture_set_id]) + "?part=policy&version=0",
        reverse("replay-impact-draft"),
    ]
    for url in pages:
        assert client.get(url)["Location"].startswith(reverse("login")), url
    client.force_login(viewer)
    for url in pages:
        assert client.get(url).status_code in (200, HTMX_STOP_POLLING), url


OWNER_FORM = {
    "kind": "authoritative-source",
    "field": "status",
    "source": "order-ledger",
    "rationale": "order-ledger owns status",
}


def test_a_proposal_s_impact_starts_as_it_is_proposed_not_as_its_page_is_read(
    client, reviewer, approver, viewer, small_desk
):
    suite_mark(freeze_ticket(Ticket.objects.first(), name="suite one"), in_suite=True)
    client.force_login(reviewer)
    client.post(reverse("policy-propose"), OWNER_FORM)
    proposal = RuleProposal.objects.get()
    # Every open ticket, and the suite's one set: in the proposer's name.
    started = list(ReplayJob.objects.select_related("candidate"))
    assert len(started) == 2
    assert {(job.started_by, job.candidate.proposal) for job in started} == {(reviewer, proposal)}
    impact_url = reverse("replay-impact-proposal", args=[proposal.pk])
    for user in (viewer, approver):
        client.force_login(user)
        page = client.get(reverse("proposal-detail", args=[proposal.pk])).content.decode()
        assert f'hx-get="{impact_url}"' in page and 'hx-trigger="every 1s"' in page
        assert "as if under the built-in default + proposal" in page
    for job in started:
        job_work(job.pk, budget=60)
    done = client.get(impact_url)
    assert done.status_code == HTMX_STOP_POLLING
    body = done.content.decode()
    assert 'id="impact-settled"' in body and ">17</a> open tickets" in body
    assert "1 group changed" in body or "unchanged" in body
    assert ReplayJob.objects.count() == 2


def test_reading_a_proposal_or_the_draft_starts_nothing_and_offers_to_measure(
    client, reviewer, approver, viewer, small_desk
):
    proposal = propose_owner(reviewer)  # made without its page: nothing was measured
    proposal_decide(proposal=propose_owner(reviewer, "erp"), user=approver, approve=True, reason="")
    pages = [
        reverse("proposal-detail", args=[proposal.pk]),
        reverse("policy-draft"),
        reverse("replay-impact-proposal", args=[proposal.pk]),
        reverse("replay-impact-draft"),
    ]
    candidates = PolicyCandidate.objects.count()
    for user in (viewer, approver):
        client.force_login(user)
        for url in pages:
            response = client.get(url)
            assert response.status_code in (200, HTMX_STOP_POLLING), url
            body = response.content.decode()
            assert 'id="impact-none"' in body and "every 1s" not in body, url
            assert ('id="impact-measure"' in body) == (user == approver), url
    assert (ReplayJob.objects.count(), PolicyCandidate.objects.count()) == (0, candidates)
    # Measured when asked for, by a POST, in the name of who asked.
    impact_url = reverse("replay-impact-proposal", args=[proposal.pk])
    started = client.post(impact_url).content.decode()
    assert 'hx-trigger="every 1s"' in started
    assert list(ReplayJob.objects.values_list("started_by", flat=True)) == [approver.pk]


def test_approving_measures_the_draft_and_publishing_the_proposals_still_pending(
    client, reviewer, approver, small_desk
):
    waiting, pending = propose_owner(reviewer), propose_owner(reviewer, "erp")
    client.force_login(approver)
    client.post(reverse("proposal-decide", args=[waiting.pk]), {"decision": "approve"})
    draft = ReplayJob.objects.get()
    assert (draft.candidate.kind, draft.started_by) == ("draft", approver)
    assert 'id="impact-none"' not in client.get(reverse("policy-draft")).content.decode()
    client.post(reverse("policy-publish"), {"reason": "the ledger owns status"})
    measured = ReplayJob.objects.exclude(pk=draft.pk).get()
    assert (measured.candidate.proposal, measured.candidate.base_number) == (pending, 1)
    page = client.get(reverse("proposal-detail", args=[pending.pk])).content.decode()
    assert "as if under v1 + proposal" in page


def test_list_and_detail_pages_run_a_bounded_number_of_queries(
    client, viewer, reviewer, tmp_path, settings, django_assert_max_num_queries
):
    settings.REPLAY_CHUNK_RUNS = 50
    ingest_lines(tmp_path, desk_lines(200))
    candidate = candidate_of_proposal(propose_owner(reviewer))
    sets = [freeze_ticket(t, user=reviewer) for t in Ticket.objects.all()[:30]]
    from reviewapp.replay.fixtures import freeze_open_tickets

    big = freeze_open_tickets(user=reviewer)
    jobs = [job_start(s, candidate, user=reviewer, send=False) for s in [*sets, big]]
    for job in jobs[-3:]:
        job_work(job.pk, budget=60)
    job = jobs[-1]
    job.refresh_from_db()
    result = ReplayResult.objects.filter(job=job, changed=True).first()
    client.force_login(viewer)
    # Session, user, two for permissions, then what each page shows (a page of rows at once;
    # a job's page and its groups also read the active version, to name the baseline).
    pages = {
        reverse("replay-jobs"): 6,
        reverse("replay-job", args=[job.pk]): 7,
        reverse("replay-progress", args=[job.pk]): 6,
        reverse("replay-changes", args=[job.pk]) + "?category=changed": 8,
        reverse("replay-changes", args=[job.pk]) + "?category=settled&page=2": 8,
        reverse("replay-group", args=[job.pk, result.pk]): 8,
        reverse("replay-fixtures"): 6,
        reverse("replay-fixtures") + "?origin=all": 6,
        reverse("replay-fixture", args=[big.pk]): 10,
    }
    for url, most in pages.items():
        with django_assert_max_num_queries(most):
            response = client.get(url)
        assert response.status_code in (200, HTMX_STOP_POLLING), url


def test_every_open_ticket_is_replayed_from_the_jobs_page(client, reviewer, small_desk):
    proposal = propose_owner(reviewer)
    client.force_login(reviewer)
    page = client.get(reverse("replay-jobs")).content.decode()
    assert f'value="proposal-{proposal.pk}"' in page and 'id="open-tickets-form"' in page
    response = client.post(reverse("replay-open-tickets"), {"policy": f"proposal-{proposal.pk}"})
    job = ReplayJob.objects.get()
    assert response["Location"] == reverse("replay-job", args=[job.pk])
    assert (job.fixture_set.origin, job.run_count, job.reason) == (
        "open-tickets",
        25,
        "every open ticket",
    )
    refused = client.post(reverse("replay-open-tickets"), {"policy": "v7"}, follow=True)
    assert "Not started: no version v7." in refused.content.decode()
