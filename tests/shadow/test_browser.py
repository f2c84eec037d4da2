"""Shadow mode in real headless Chromium, with a real worker: an approver puts the draft in
shadow, uploads a trace, reads "would newly block N" with N the brute-force count once the
shadow worker has judged it, and drills down to one run."""

from datetime import UTC, datetime

import pytest

from reviewapp.demo.corpus import DEMO_POLICY, demo_lines
from reviewapp.infra.days import Window
from reviewapp.models import ShadowBatch, ShadowDesignation
from reviewapp.policy.versions import policy_document_import, proposal_decide
from tests.browser import watched_page
from tests.shadow import brute
from tests.shadow.conftest import demo_month, publish, shadow_document

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def page(browser, live_server, approver):
    with watched_page(browser, live_server.url, "abel", timeout_ms=15000) as page:
        yield page


def test_a_draft_in_shadow_counts_what_it_would_newly_block(
    page, live_server, worker, reviewer, approver, tmp_path
):
    base = live_server.url
    publish(DEMO_POLICY, reviewer, approver)
    demo_month(tmp_path, runs=40)
    proposal = policy_document_import(
        user=reviewer, document=shadow_document(), rationale="what if the ledger owned it"
    )
    proposal_decide(proposal=proposal, user=approver, approve=True, reason="try it in shadow")

    page.goto(f"{base}/shadow/")
    assert page.locator("details.start[open]").count() == 1  # nothing in shadow yet: open
    page.select_option("#id_candidate", "draft")
    page.fill("#id_reason", "A week in shadow before publishing.")
    page.click("#put-in-shadow")
    page.wait_for_selector("text=the draft on v1 is in shadow")
    designation = ShadowDesignation.objects.get()
    assert designation.started_by == approver and designation.candidate.kind == "draft"

    trace = tmp_path / "this-week.jsonl"
    lines = demo_lines(runs=60, months=1, seed=5, until=datetime.now(UTC))
    trace.write_text("\n".join(line.replace('"demo-', '"week-') for line in lines) + "\n")
    page.goto(f"{base}/ingest/")
    page.set_input_files("input[type=file]", str(trace))
    page.click("text=Upload and ingest")
    page.wait_for_selector("text=this-week.jsonl: ")

    # The page refreshes the comparison until the shadow worker is done.
    page.goto(f"{base}/shadow/")
    page.wait_for_selector("#comparison:not([hx-trigger])", timeout=60_000)
    assert ShadowBatch.objects.count() == 1
    window = Window.last(28)
    expected = brute.comparison(designation.candidate_id, window.since, window.until)
    newly = len(expected["new"])
    assert newly > 0
    assert page.inner_text("#would-newly-block") == f"would newly block {newly}"
    assert page.inner_text("#would-unblock") == f"would unblock {len(expected['unblocked'])}"

    page.click("#would-newly-block")
    page.wait_for_selector("#drill-down-summary")
    runs = {item.run for item in expected["new"]}
    assert page.inner_text("#drill-down-summary").startswith(
        f"{newly} blocked action{'s' if newly != 1 else ''} in {len(runs)} run"
    )
    first = page.locator(".run-link").first
    run_id = first.inner_text()
    first.click()
    page.wait_for_selector("text=one run")
    assert page.locator(".run-items").count() == 1
    assert page.inner_text(".run-items h2 code") == run_id
    assert run_id.startswith("week-")
    assert {c.strip() for c in page.locator(".change").all_inner_texts()} == {"new"}
