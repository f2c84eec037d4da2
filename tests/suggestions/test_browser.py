"""From marks to a published rule, in real headless Chromium with a real Celery worker: a
reviewer marks the right observation on five tickets of one family as she closes them, the
worker suggests the rule with those five as evidence and replays its impact, she proposes
it, and an approver approves and publishes it."""

import pytest
from django.core.cache import cache

from reviewapp.models import PolicyVersion, RuleProposal, RuleSuggestion, Ticket, TicketMark
from tests.browser import log_in, watched_page
from tests.seeding import ingest_lines, owned_run
from tests.workers import celery_worker, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_five_marks_make_a_suggestion_that_becomes_a_published_rule(
    browser, live_server, tmp_path, reviewer, approver, django_db_blocker
):
    cache.clear()
    lines = []
    for number in range(7):
        lines += owned_run(f"family-{number}", "order-ledger", "search-index")
    ingest_lines(tmp_path, lines)
    family = list(Ticket.objects.filter(kind="conflict").order_by("id"))
    marked, still_open = family[:5], family[5:]
    base = live_server.url
    with (
        celery_worker(django_db_blocker, tmp_path / "worker.log", concurrency=2),
        watched_page(browser, base, "rita") as page,
    ):
        for number, ticket in enumerate(marked):
            page.goto(f"{base}/tickets/{ticket.pk}/")
            cards = page.locator("article.observation")
            sources = [cards.nth(i).locator(".source").inner_text() for i in range(cards.count())]
            if number < 4:
                # One click on the card that was right: it is picked in the close form.
                card = page.locator("article.observation", has_text="order-ledger")
                card.locator("button[data-mark-right]").click()
            else:
                # Or its key: the number of its column.
                page.keyboard.press(str(sources.index("order-ledger") + 1))
            picked = page.locator("#mark-right-choices input[name=right]:checked")
            assert picked.get_attribute("value") == f"{ticket.run.run_id}-o0"
            page.select_option("#close-cause", "replica-lag")
            page.click("#close-explained button[type=submit]")
            page.wait_for_selector("#ticket-state >> text=closed")
            assert "order-ledger" in page.locator("#ticket-mark").inner_text()
            assert page.is_visible("#audit-trail >> text=order-ledger was right")
        assert TicketMark.objects.filter(source="order-ledger").count() == 5

        # The worker computes the suggestion after the closes; the page lists it.
        wait_for(RuleSuggestion.objects.exists, 60, "the worker to suggest a rule")
        page.click("nav.mainnav >> text=Suggestions")
        page.click("table.suggestions a >> text=order-ledger")
        page.wait_for_selector("#suggestion-sentence >> text=order-ledger owns status")
        assert page.locator("#suggestion-share").inner_text() == "5 of 5"
        evidence = page.locator("#suggestion-evidence li")
        shown = {int(evidence.nth(i).get_attribute("data-ticket")) for i in range(5)}
        assert shown == {t.pk for t in marked}
        assert "decided by rita" in evidence.nth(0).inner_text()
        assert page.is_visible("#no-counter")
        # Its impact, replayed by the worker: the two open tickets of the family settle.
        page.wait_for_selector("#impact-settled", timeout=60_000)
        assert page.locator("#impact-settled").inner_text().startswith(str(len(still_open)))

        page.click("#propose")
        page.wait_for_selector("text=it now needs another person's approval")
        proposal = RuleProposal.objects.get()
        assert (proposal.state, proposal.proposed_by.username) == ("pending", "rita")
        assert proposal.change["source"] == "order-ledger"

    approver_page = browser.new_page()
    log_in(approver_page, base, "abel")
    approver_page.goto(f"{base}/policy/proposals/{proposal.pk}/")
    approver_page.fill("#id_reason", "Five reviewers agreed.")
    approver_page.click("#approve")
    approver_page.wait_for_selector("#proposal-state >> text=approved")
    approver_page.goto(f"{base}/policy/draft/")
    approver_page.fill("#id_reason", "order-ledger owns status.")
    approver_page.click("#publish")
    approver_page.wait_for_selector("h1 >> text=Policy v1")
    version = PolicyVersion.objects.get()
    assert any(rule.get("source") == "order-ledger" for rule in version.document["rules"])
    approver_page.close()
