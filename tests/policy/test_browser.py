"""Propose -> approve -> publish, in real headless Chromium."""

import pytest

from reviewapp.models import PolicyVersion, RuleProposal
from tests.browser import log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_decision_goes_from_proposal_to_published_version(
    browser, live_server, reviewer, approver
):
    base = live_server.url
    page = browser.new_page()
    log_in(page, base, "rita")
    page.goto(f"{base}/policy/propose/")
    page.select_option("#id_kind", "authoritative-source")
    page.fill("#id_field", "status")
    page.fill("#id_source", "refund-service")
    page.fill("#id_unless_values", "chargeback")
    page.fill("#id_rationale", "The refund service is the system of record.")
    # The htmx preview explains the rule before anything is saved.
    page.wait_for_selector("#proposal-preview >> text=refund-service owns status")
    page.click("#propose")
    page.wait_for_selector("text=someone else must approve or reject it")
    proposal = RuleProposal.objects.get()
    assert proposal.state == "pending"
    page.click("button.link")  # log out
    page.wait_for_url(f"{base}/login/")

    log_in(page, base, "abel")
    page.goto(f"{base}/policy/proposals/{proposal.pk}/")
    page.fill("#id_reason", "Matches the runbook.")
    page.click("#approve")
    page.wait_for_selector("#proposal-state >> text=approved")
    page.goto(f"{base}/policy/draft/")
    page.fill("#id_reason", "Refund ownership decided.")
    page.click("#publish")
    page.wait_for_selector("h1 >> text=Policy v1")
    assert page.is_visible(
        "text=refund-service owns status whatever the agent does next, unless a value is chargeback."
    )
    assert PolicyVersion.objects.get().number == 1
    page.close()


def test_the_propose_form_shows_only_the_chosen_kinds_inputs(browser, live_server, reviewer):
    page = browser.new_page()
    log_in(page, live_server.url, "rita")
    page.goto(f"{live_server.url}/policy/propose/")
    page.select_option("#id_kind", "authoritative-source")
    assert page.is_visible("#id_source") and page.is_visible("#id_unless_values")
    assert not page.is_visible("#id_error_code") and not page.is_visible("#id_normalize_kind")
    page.select_option("#id_kind", "normalizer")
    assert page.is_visible("#id_normalize_kind") and page.is_visible("#id_aliases")
    assert not page.is_visible("#id_source") and not page.is_visible("#id_actions")
    page.select_option("#id_kind", "harmless-error")
    assert page.is_visible("#id_error_code") and not page.is_visible("#id_normalize_kind")
    # The inputs every kind has stay.
    assert page.is_visible("#id_field") and page.is_visible("#id_rationale")
