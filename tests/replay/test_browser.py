"""In real headless Chromium, with a real worker: a reviewer freezes a family as a fixture
set, replays it against the draft, watches the progress bar finish and opens a group that
changed."""

from __future__ import annotations

import pytest

from reviewapp.models import FixtureSet, ReplayJob, Ticket
from reviewapp.policy.versions import proposal_decide
from reviewapp.replay.impact import proposal_impact_start
from tests.browser import log_in
from tests.replay.conftest import propose_owner
from tests.replay.test_own_impact import address_compared, owner_proposal, publish, two_field_run
from tests.seeding import ingest_lines

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_freeze_a_family_replay_it_against_the_draft_and_open_a_changed_group(
    browser, worker, live_server, small_desk, reviewer, approver
):
    # The draft: the active policy with the ledger owning status, approved.
    proposal_decide(proposal=propose_owner(reviewer), user=approver, approve=True, reason="")
    ticket = Ticket.objects.get(run__run_id="run-1")
    base = live_server.url
    page = browser.new_page()
    errors: list[str] = []
    page.on(
        "console", lambda message: errors.append(message.text) if message.type == "error" else None
    )
    failed: list[str] = []
    page.on(
        "response",
        lambda r: failed.append(r.url) if r.status >= 400 and "favicon" not in r.url else None,
    )
    log_in(page, base, "rita")

    page.goto(f"{base}/tickets/{ticket.pk}/")
    page.click("#freeze-family")
    page.wait_for_selector("text=Frozen:")
    fixture_set = FixtureSet.objects.get(origin="family")
    assert page.url == f"{base}/replay/fixtures/{fixture_set.pk}/"
    assert (
        fixture_set.run_count == Ticket.objects.filter(fingerprint=ticket.fingerprint).count() > 1
    )

    page.select_option("#id_policy", "draft")
    page.click("#start-replay")
    page.wait_for_url(f"{base}/replay/jobs/*/")
    job = ReplayJob.objects.get()
    assert page.is_visible("text=as if under the draft on the built-in default")
    # The worker takes it; the bar, polled every second, fills and then stops polling.
    page.wait_for_selector("#job-state >> text=done", timeout=60_000)
    assert page.get_attribute("#job-progress progress", "value") == "100"
    assert page.get_attribute("#job-progress", "hx-trigger") is None

    page.click("#count-changed")
    page.wait_for_selector("#replay-changes")
    job.refresh_from_db()
    assert page.locator(".open-group").count() == job.changed_groups > 0
    page.locator(".open-group").first.click()
    page.wait_for_selector("#prospective")
    assert page.inner_text("#recorded h2") == "Recorded under the built-in default"
    assert page.inner_text("#prospective h2") == "As if under the draft on the built-in default"
    assert "conflict" in page.inner_text("#recorded") and "resolved" in page.inner_text(
        "#prospective"
    )
    assert "order-ledger" in page.inner_text("body")
    # No request failed and no script was refused (the CSP allows no inline code).
    assert failed == []
    assert [e for e in errors if "favicon" not in e and "404" not in e] == []
    page.close()


def test_an_approver_sees_the_impact_of_a_proposal_before_deciding(
    browser, worker, live_server, small_desk, reviewer, approver
):
    proposal = propose_owner(reviewer)
    # Measured as it is proposed (views.policy.propose_view), in the proposer's name.
    proposal_impact_start(proposal, user=reviewer)
    started = set(ReplayJob.objects.values_list("pk", flat=True))
    base = live_server.url
    page = browser.new_page()
    log_in(page, base, "abel")
    page.goto(f"{base}/policy/proposals/{proposal.pk}/")
    # Polled until the worker is done with every open ticket.
    page.wait_for_selector("#impact-settled", timeout=60_000)
    assert page.inner_text("#impact-settled") == "17 open tickets"
    assert page.inner_text("#impact-newly_unsafe") == "0"
    assert page.is_visible(f"text=as if under the built-in default + proposal #{proposal.pk}")
    job = ReplayJob.objects.get()
    assert (job.started_by, job.reason) == (reviewer, f"impact of {job.candidate.label}")
    assert page.is_visible("#approve")
    # Reading the page, and polling it, started nothing.
    assert set(ReplayJob.objects.values_list("pk", flat=True)) == started
    page.close()


def test_a_proposal_measured_before_a_publish_is_out_of_date_then_counts_its_own_rule(
    browser, worker, live_server, tmp_path, reviewer, approver
):
    """Issue 26.1 in the browser: the second proposal's impact against v1 is shown out of
    date once v2 is published; measured again, it is against v2 and counts its rule only."""
    publish(address_compared(reviewer), approver, "v1")
    lines = []
    for number in range(12):
        lines += two_field_run(f"b-{number}", address_disputed=number % 3 == 0)
    ingest_lines(tmp_path, lines)
    ledger = owner_proposal(reviewer, "order-ledger", "status")
    address = owner_proposal(reviewer, "search-index", "address")
    proposal_impact_start(address, user=reviewer)
    publish(ledger, approver, "v2: the ledger owns status")
    base = live_server.url
    page = browser.new_page()
    log_in(page, base, "abel")
    page.goto(f"{base}/policy/proposals/{address.pk}/")
    page.wait_for_selector("#impact-out-of-date", timeout=60_000)
    assert "measured against v1; v2 is active since" in page.inner_text("#impact-out-of-date")
    page.click("#impact-measure")
    page.wait_for_selector("#impact-settled", timeout=60_000)
    page.wait_for_selector("#impact-baseline")
    assert "Against v2, the active version" in page.inner_text("#impact-baseline")
    assert page.is_visible(f"text=as if under v2 + proposal #{address.pk}")
    # Four address tickets: the proposal's own; the twelve status tickets are v2's.
    assert page.inner_text("#impact-settled") == "4 open tickets"
    assert page.inner_text("#impact-newly_resolved") == "4"
    page.close()
