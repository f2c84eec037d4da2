"""The queue in real headless Chromium (issue 28, second pass): what a finding's row says,
cut text read whole from the keyboard, the bulk bar and "all matching", the queue on a phone."""

import re

import pytest
from django.core.cache import cache

from reviewapp.models import AuditEvent, Ticket
from reviewapp.policy.versions import (
    policy_document_import,
    policy_version_publish,
    proposal_decide,
)
from tests.browser import watched_page
from tests.paths import SPEC
from tests.seeding import desk_lines, ingest_lines, line

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def page(browser, live_server, reviewer):
    with watched_page(browser, live_server.url, "rita") as page:
        yield page


def row_of(page, ticket: Ticket):
    return page.locator(f"tr[data-ticket-url^='/tickets/{ticket.pk}/?']")


def test_a_finding_row_says_what_it_found(page, live_server, reviewer, approver, tmp_path):
    import json

    proposal = policy_document_import(
        user=reviewer,
        document=json.loads((SPEC / "refund-trajectory.policy.json").read_text()),
        rationale="the trajectory rules",
    )
    proposal_decide(proposal=proposal, user=approver, approve=True, reason="")
    policy_version_publish(user=approver, reason="the trajectory rules")
    lines = (SPEC / "refund-trajectory.jsonl").read_text().splitlines()
    # A tool named with markup: trace content, shown as text.
    lines += [
        line(
            runId="run-odd", type="run_started", agent="refund-agent", subject={"customerId": "c1"}
        ),
        line(
            runId="run-odd",
            type="tool_call",
            toolCallId="o1",
            tool="<i>odd</i>",
            arguments={},
            ok=True,
        ),
    ]
    ingest_lines(tmp_path, lines)
    page.goto(f"{live_server.url}/tickets/")
    page.wait_for_selector("#queue-total")

    retry = Ticket.objects.get(finding_kind="retry-without-idempotency-key")
    row = row_of(page, retry)
    assert row.locator("td.found").inner_text() == (
        "create_refund ×3 in refund-123, no idempotency key: b3, b4, b5"
    )
    # Its kind said once, not as its reason and again as its subject.
    assert row.locator("td.what").inner_text().count("retry-without-idempotency-key") == 1
    # What it found takes the cells a finding has nothing for: no "—" for sources and action.
    assert row.locator("td.sources, td.action").count() == 0
    assert row.locator("td").filter(has_text=re.compile(r"^—$")).count() == 0

    outside = row_of(
        page, Ticket.objects.get(finding_kind="tool-outside-allowlist", run__run_id="run-b")
    )
    assert outside.locator("td.found").inner_text() == "search_customers: b2"
    budget = row_of(page, Ticket.objects.get(finding_kind="mutation-budget-exceeded"))
    assert budget.locator("td.found").inner_text() == (
        "create_refund ×3 in refund-123, over the mutation budget: b3, b4, b5"
    )
    odd = row_of(
        page, Ticket.objects.get(finding_kind="tool-outside-allowlist", run__run_id="run-odd")
    )
    assert odd.locator("td.found").inner_text() == "<i>odd</i>: o1"
    assert odd.locator("td.found i").count() == 0


# Whether a cell shows all its text: its text within the cell's box (nothing cut), or laid
# over the rows below, whole and in the window.
WHOLE = """cell => {
    const text = cell.querySelector('.cell-text'), box = text.getBoundingClientRect();
    if (getComputedStyle(text).position !== 'absolute') return cell.scrollWidth <= cell.clientWidth + 1;
    return text.scrollWidth <= text.clientWidth + 1 && text.scrollHeight <= text.clientHeight + 1
        && box.bottom <= window.innerHeight && box.right <= window.innerWidth;
}"""


def test_cut_text_is_whole_on_focus_and_hover(page, live_server, desk):
    stale = desk["run-stale"]
    long_entity = "order-" + "9" * 150
    Ticket.objects.filter(pk=stale.pk).update(
        entity=long_entity, sources="refund-service,search-index," + "mirror-" * 20
    )
    cache.clear()
    page.set_viewport_size({"width": 1366, "height": 768})
    page.goto(f"{live_server.url}/tickets/")
    page.wait_for_selector("#queue-total")
    row = row_of(page, stale)
    what, sources = row.locator("td.what"), row.locator("td.sources")
    assert not what.evaluate(WHOLE)  # one line in a dense row: cut
    # The keyboard reaches the row's link; while the row holds the focus, nothing is cut.
    page.focus(f"tr[data-ticket-url^='/tickets/{stale.pk}/?'] td.id a")
    assert what.evaluate(WHOLE) and sources.evaluate(WHOLE)
    assert long_entity in what.inner_text()
    # The link's description is the cell, whole, for a screen reader too.
    described = row.locator("td.id a").get_attribute("aria-describedby")
    assert long_entity in page.locator(f"#{described}").text_content()
    page.locator("body").click(position={"x": 5, "y": 5})
    page.mouse.move(5, 5)
    assert not what.evaluate(WHOLE)
    what.hover()
    assert what.evaluate(WHOLE)


def test_the_bulk_bar_stays_in_view_and_acts_on_all_matching(page, live_server, tmp_path, reviewer):
    cache.clear()
    # 77 tickets; 52 of them (order-ledger against search-index) match the filter.
    ingest_lines(tmp_path, desk_lines(90, prefix="bulk"))
    matching = Ticket.objects.filter(sources__contains="order-ledger", state="open")
    assert (matching.count(), Ticket.objects.count()) == (52, 77)
    page.set_viewport_size({"width": 1366, "height": 768})
    page.goto(f"{live_server.url}/tickets/?source=order-ledger")
    page.wait_for_selector("#queue-total >> text=52 tickets")
    bar = page.locator("#bulk-bar")

    # Nothing selected: the bar in its place above the rows, not following the page.
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
    assert bar.bounding_box()["y"] < 0
    page.evaluate("window.scrollTo(0, 0)")
    page.locator("input[name=selected]").first.check()
    assert page.inner_text("#bulk-selected") == "1 selected"
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
    box = bar.bounding_box()
    assert box["y"] >= 0 and box["y"] + box["height"] <= 768
    assert page.is_visible("#bulk-bar button[value=assign]")

    # Select all on the page, then all matching: the count the page shows.
    page.check("#select-page")
    assert page.locator("input[name=selected]:checked").count() == 50
    page.check("#select-matching")
    assert page.inner_text("#bulk-selected") == "all 52 matching selected"

    # A ticket opened after the page was seen, matching too, is not in what the page showed.
    ingest_lines(tmp_path, desk_lines(2, prefix="later"), "later.jsonl")
    later = set(
        Ticket.objects.filter(run__run_id__startswith="later-").values_list("pk", flat=True)
    )

    page.select_option("#bulk-bar select[name=assignee]", "rita")
    page.click("#bulk-bar button[value=assign]")
    page.wait_for_selector("#confirm-bulk")
    assert page.inner_text("#confirm-title") == "Assign 52 tickets?"
    assert "rita" in page.inner_text("#bulk-change")
    assert "every ticket matching the queue's filters: 52 now" in page.inner_text("#bulk-matching")
    assert not Ticket.objects.filter(assignee__isnull=False).exists()
    page.click("#confirm-bulk")
    page.wait_for_selector("text=52 tickets assigned.")
    assigned = set(Ticket.objects.filter(assignee=reviewer).values_list("pk", flat=True))
    assert assigned == set(matching.exclude(pk__in=later).values_list("pk", flat=True))
    assert len(assigned) == 52
    assert AuditEvent.objects.filter(ticket__in=assigned, verb="assigned").count() == 52


def test_a_close_of_all_matching_restates_the_resolution_and_cause(page, live_server, tmp_path):
    cache.clear()
    ingest_lines(tmp_path, desk_lines(70, prefix="close"))
    total = Ticket.objects.filter(state="open").count()
    assert total > 50
    page.goto(f"{live_server.url}/tickets/")
    page.wait_for_selector("#queue-total")
    page.check("#select-page")
    page.check("#select-matching")
    page.select_option("#bulk-bar select[name=resolution]", "explained")
    page.select_option("#bulk-bar select[name=cause]", "replica-lag")
    page.fill("#bulk-bar input[name=cause_text]", "the index lags")
    page.click("#bulk-bar button[value=close]")
    page.wait_for_selector("#confirm-bulk")
    change = page.inner_text("#bulk-change")
    assert "explained" in change and "replica lag" in change and "the index lags" in change
    assert page.inner_text("#confirm-title") == f"Close {total} tickets?"
    page.click("#confirm-bulk")
    page.wait_for_selector(f"text={total} tickets closed.")
    assert not Ticket.objects.filter(state="open").exists()
    assert set(Ticket.objects.values_list("cause", flat=True)) == {"replica-lag"}


def test_the_queue_on_a_phone_is_cards_with_the_disputed_values_first(
    page, live_server, tmp_path, desk
):
    ingest_lines(tmp_path, desk_lines(20, prefix="phone"), "phone.jsonl")
    cache.clear()
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{live_server.url}/tickets/")
    page.wait_for_selector("#queue-total")
    first = page.locator("tr[data-ticket-url]").first
    assert first.bounding_box()["y"] < 844
    assert page.evaluate("document.scrollingElement.scrollWidth") <= 390
    # A card: its disputed values in view, within the width.
    values = first.locator("td.values")
    assert values.is_visible() and re.search(r"\S+ vs \S+", values.inner_text())
    box = values.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 390 and box["y"] < 844
    # The filter form behind its button.
    assert not page.is_visible("#queue-filters")
    page.click("details.more-filters > summary")
    assert page.is_visible("#queue-filters")
    for target in ("input[name=selected]", "#select-page"):
        size = page.locator(target).first.bounding_box()
        assert size["width"] >= 24 and size["height"] >= 24, target
