"""A reviewer's day on one ticket, second pass (issue 28), in real headless Chromium:
auto-advance moves on only after a close, the propose form arrives with its preview and
the ticket's sources to choose from, the pages speak plainly (with a glossary for the words
that stay), and a phone shows the verdict and the work panel first."""

import re

import pytest

from reviewapp.models import RuleProposal, Ticket
from reviewapp.policy.settlements import settlements_label
from reviewapp.policy.versions import policy_version_publish, proposal_create, proposal_decide
from reviewapp.replay.fixtures import freeze_ticket
from tests.browser import watched_page
from tests.review.test_browser import WIDER_THAN_THE_WINDOW, serious_violations
from tests.seeding import desk_lines, ingest_lines

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def page(browser, live_server, reviewer):
    with watched_page(browser, live_server.url, "rita") as page:
        yield page


def ticket_id_of(url: str) -> int:
    return int(re.search(r"/tickets/(\d+)/", url).group(1))


def test_auto_advance_moves_on_after_a_close_never_after_a_claim_or_comment(
    page, live_server, tmp_path
):
    ingest_lines(tmp_path, desk_lines(4, prefix="advance"))
    page.goto(f"{live_server.url}/tickets/?sort=oldest")
    page.wait_for_selector("#queue-total")
    order = [
        ticket_id_of(url)
        for url in page.eval_on_selector_all(
            "tr[data-ticket-url]", "rows => rows.map(r => r.dataset.ticketUrl)"
        )
    ]
    first = f"{live_server.url}/tickets/{order[0]}/?queue=sort%3Doldest"
    page.goto(first)
    page.keyboard.press("a")
    assert page.is_checked("#auto-advance")

    # c claims and stays: the reviewer reads the ticket they now hold.
    page.keyboard.press("c")
    page.wait_for_selector("#ticket-holder >> text=Held by rita")
    assert page.url == first
    claimed = Ticket.objects.get(pk=order[0])
    assert (claimed.assignee.username, claimed.state) == ("rita", "open")

    # A comment stays too.
    page.fill("#comment-text", "looking at the search index's lag")
    page.click("#comment-form button[type=submit]")
    page.wait_for_selector("#ticket-work >> text=Comment added.")
    assert page.url == first

    # Closing it opens the next ticket of the queue.
    page.keyboard.press("u")
    page.wait_for_function("() => document.activeElement.id === 'close-unexplained-button'")
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/tickets/{order[1]}/?queue=sort%3Doldest")
    assert Ticket.objects.get(pk=order[0]).state == "closed"
    assert Ticket.objects.get(pk=order[1]).state == "open"


def test_the_propose_form_arrives_with_its_preview_and_the_tickets_sources(page, live_server, desk):
    stale = desk["run-stale"]
    response = page.goto(f"{live_server.url}/policy/propose/?ticket={stale.pk}")
    # Rendered with the page, before any typing or request of htmx's.
    assert "In a sentence:" in response.text()
    assert "Fill in the decision" not in response.text()
    preview = page.locator("#proposal-preview")
    assert "refund-service owns status" in preview.inner_text()

    assert serious_violations(page) == []
    choices = page.eval_on_selector_all(
        "input[name=source_choice]", "inputs => inputs.map(i => [i.value, i.checked])"
    )
    assert choices == [["refund-service", True], ["search-index", False], ["", False]]
    # The free text is for another source only.
    assert not page.is_visible("#id_source")
    page.check("input[name=source_choice][value='search-index']")
    page.wait_for_selector("#proposal-preview >> text=search-index owns status")
    page.check("#source-another")
    assert page.is_visible("#id_source")
    page.fill("#id_source", "erp")
    page.wait_for_selector("#proposal-preview >> text=erp owns status")

    page.check("input[name=source_choice][value='search-index']")
    assert not page.is_visible("#id_source")
    page.fill("#id_rationale", "The search index is the system of record here.")
    page.click("#propose")
    page.wait_for_selector("text=someone else must approve or reject it")
    assert RuleProposal.objects.get().change["source"] == "search-index"


JARGON = re.compile(r"pinned|prospective|\(none\)", re.IGNORECASE)


def test_the_pages_speak_plainly_and_link_the_glossary(page, live_server, desk, reviewer, approver):
    stale = desk["run-stale"]
    change = {"field": "status", "source": "refund-service"}
    proposal = proposal_create(
        user=reviewer, kind="authoritative-source", change=change, rationale="x"
    )
    proposal_decide(proposal=proposal, user=approver, approve=True, reason="")
    version = policy_version_publish(user=approver, reason="owners")
    assert settlements_label(version) >= 1
    fixture = freeze_ticket(stale, user=reviewer)
    paths = [
        f"/tickets/{stale.pk}/",
        f"/policy/propose/?ticket={stale.pk}",
        f"/policy/v/{version.number}/",
        f"/policy/v/{version.number}/settled/",
        "/replay/",
        f"/replay/fixtures/{fixture.pk}/",
        "/shadow/",
        "/tickets/",
    ]
    said = {}
    for path in paths:
        page.goto(f"{live_server.url}{path}")
        page.wait_for_load_state("load")
        said[path] = JARGON.findall(page.inner_text("body"))
    assert said == {path: [] for path in paths}

    # The ticket says what the label means and links the glossary's entry.
    page.goto(f"{live_server.url}/tickets/{stale.pk}/")
    settled = page.locator("p.settled")
    assert "this ticket's verdict stays as it was made" in settled.inner_text()
    glossary = settled.locator("a[href^='/glossary/#']")
    assert glossary.count() == 1
    glossary.click()
    page.wait_for_selector("h1 >> text=Glossary")
    anchor = page.url.split("#", 1)[1]
    assert page.locator(f"[id='{anchor}']").is_visible()


def test_a_phone_shows_the_verdict_and_work_first_and_stacks_the_observations(
    page, live_server, desk
):
    stale = desk["run-stale"]
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{live_server.url}/tickets/{stale.pk}/?queue=")
    page.wait_for_selector("#ticket-work")
    top = page.evaluate(
        "s => document.querySelector(s).getBoundingClientRect().top", "#ticket-work"
    )
    assert top < 844
    verdict = page.evaluate(
        "s => document.querySelector(s).getBoundingClientRect().top", "#verdict-title"
    )
    assert verdict < 844
    lefts = page.eval_on_selector_all(
        "article.observation", "items => items.map(i => i.getBoundingClientRect().left)"
    )
    assert len(lefts) == 2 and lefts[0] == lefts[1]
    assert page.evaluate(WIDER_THAN_THE_WINDOW) == []
    # Every button, link-as-button and form control is at least 24 by 24 pixels (WCAG 2.2).
    small = page.evaluate(
        """() => Array.from(document.querySelectorAll(
                '#ticket-work button, #ticket-work select, #ticket-work input:not([type=hidden]),'
                + ' .ticket-moves a, .ticket-moves input, a.button, button'))
            .filter(e => e.offsetParent !== null)
            .map(e => [e.id || e.textContent.trim() || e.name, e.getBoundingClientRect()])
            .filter(([, box]) => box.width < 24 || box.height < 24)
            .map(([name, box]) => `${name} ${Math.round(box.width)}x${Math.round(box.height)}`)"""
    )
    assert small == []
    assert serious_violations(page) == []
