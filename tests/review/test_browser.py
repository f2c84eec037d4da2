"""The review desk in real headless Chromium: filter the queue, read a ticket, close it, see
the queue change; and the same work done with the keyboard alone."""

import re

import pytest
from axe_playwright_python.sync_playwright import Axe
from django.core.cache import cache

from reviewapp.accounts.roles import account_raw_access_set
from reviewapp.models import AuditEvent, Ticket
from reviewapp.review import changes
from tests.browser import watched_page
from tests.seeding import desk_lines, ingest_lines

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def page(browser, live_server, reviewer):
    clipboard = ["clipboard-read", "clipboard-write"]
    with watched_page(browser, live_server.url, "rita", permissions=clipboard) as page:
        yield page


def shown_ids(page) -> set[int]:
    urls = page.eval_on_selector_all(
        "tr[data-ticket-url]", "rows => rows.map(r => r.dataset.ticketUrl)"
    )
    return {int(re.search(r"/tickets/(\d+)/", url).group(1)) for url in urls}


def test_filter_open_read_close_and_see_the_queue_change(page, live_server, desk, admin_user):
    account_raw_access_set("rita", True, actor=admin_user, reason="reads envelopes")
    stale = desk["run-stale"]
    page.click("nav.mainnav >> text=Tickets")
    page.wait_for_selector("#queue-total >> text=4 tickets")
    # Filtering swaps the results in place and keeps the filter in the address.
    # The filters are one line; the form opens from it.
    page.click("details.more-filters > summary")
    page.select_option("select[name=unsafe]", "yes")
    page.wait_for_selector("#queue-total >> text=2 tickets")
    assert "unsafe=yes" in page.url
    # The active filter is a chip beside the folded form (swapped with the results).
    page.wait_for_selector("#filter-chips >> text=Unsafe: yes")
    assert shown_ids(page) == {stale.pk, desk["run-mismatch"].pk}
    page.fill("input[name=source]", "search-index")
    page.press("input[name=source]", "Enter")
    page.wait_for_selector("#queue-total >> text=1 ticket")
    assert shown_ids(page) == {stale.pk}

    page.click(f"a[href^='/tickets/{stale.pk}/?queue=']")
    page.wait_for_selector("#observations-title")
    columns = page.locator("article.observation")
    assert columns.count() == 2
    assert columns.nth(0).locator(".source").inner_text() == "refund-service"
    assert columns.nth(0).locator(".source-revision").inner_text() == "42"
    assert columns.nth(1).locator(".source-revision").inner_text() == "105"
    assert columns.nth(1).locator(".revision-domain").inner_text() == "search"
    assert columns.nth(0).locator(".errors").inner_text() == "none"
    assert "STALE_READ" in columns.nth(1).locator(".errors").inner_text()
    # The raw envelopes are read on purpose, with a reason (rita has the raw data
    # permission), and show the markup as text.
    raw_section = page.locator("#raw-envelopes")
    assert raw_section.locator("pre.raw").count() == 0
    reveal = raw_section.locator("form[hx-post]")
    reveal.locator("input[name=reason]").fill("the search index's line, as sent")
    reveal.locator("button[type=submit]").click()
    envelope = raw_section.locator("section.envelope", has_text="observation obs-search")
    raw = envelope.locator("pre.raw").inner_text()
    assert "<script>alert(1)</script>" in raw
    envelope.locator("button.copy").click()
    page.wait_for_selector("#raw-envelopes >> text=Copied")
    assert page.evaluate("navigator.clipboard.readText()") == raw

    page.select_option("#close-cause", "replica-lag")
    page.click("#close-explained button[type=submit]")
    page.wait_for_selector("#ticket-state >> text=closed")
    assert page.is_visible("text=Closed as explained (replica lag) by rita.")
    assert page.is_visible("#audit-trail >> text=closed it as explained (replica lag)")

    # Back to the queue it came from, filters kept: the closed ticket has left it.
    page.click("#back-to-queue")
    page.wait_for_selector("#queue-total >> text=0 tickets")
    assert "unsafe=yes" in page.url and "source=search-index" in page.url
    # Removing both chips shows every open ticket again.
    page.click("#filter-chips a.chip >> nth=0")
    page.wait_for_selector("#queue-total >> text=1 ticket")
    page.click("#filter-chips a.chip >> nth=0")
    page.wait_for_selector("#queue-total >> text=3 tickets")
    assert stale.pk not in shown_ids(page)
    stale.refresh_from_db()
    assert (stale.state, stale.cause, stale.closed_by.username) == ("closed", "replica-lag", "rita")


def test_the_keyboard_alone_claims_and_closes_tickets(page, live_server, desk):
    page.goto(f"{live_server.url}/tickets/?unsafe=yes")
    page.wait_for_selector("#queue-total >> text=2 tickets")
    first, second = page.eval_on_selector_all(
        "tr[data-ticket-url]", "rows => rows.map(r => r.dataset.ticketUrl)"
    )

    page.keyboard.press("?")
    page.wait_for_selector("#keys-help[open]")
    page.keyboard.press("Escape")
    page.wait_for_selector("#keys-help:not([open])", state="attached")

    # c on the queue claims the highlighted ticket and comes back to the same queue.
    page.keyboard.press("j")
    assert page.get_attribute("tr.current", "data-ticket-url") == first
    page.keyboard.press("c")
    page.wait_for_selector(f"tr[data-ticket-url='{first}'] >> text=rita")
    assert page.url.endswith("/tickets/?unsafe=yes")

    page.keyboard.press("j")
    page.keyboard.press("j")
    assert page.get_attribute("tr.current", "data-ticket-url") == second
    page.keyboard.press("Enter")
    page.wait_for_url(f"**{second}")
    ticket = Ticket.objects.get(pk=ticket_id_of(second))

    page.keyboard.press("c")
    page.wait_for_selector("#ticket-holder >> text=Held by rita")
    page.keyboard.press("e")
    assert page.evaluate("document.activeElement.id") == "close-cause"
    page.keyboard.press("ArrowDown")  # the first cause: replica lag
    page.keyboard.press("ArrowDown")  # the second: partial result
    page.keyboard.press("Enter")
    page.wait_for_selector("#ticket-state >> text=closed")

    ticket.refresh_from_db()
    assert (ticket.state, ticket.resolution, ticket.cause) == (
        "closed",
        "explained",
        "partial-result",
    )
    verbs = AuditEvent.objects.filter(ticket=ticket).order_by("id").values_list("verb", flat=True)
    assert list(verbs) == ["claimed", "closed"]
    claimed_first = Ticket.objects.get(pk=ticket_id_of(first))
    assert (claimed_first.assignee.username, claimed_first.state) == ("rita", "open")


# What fits above the fold: the rows whose bottom is inside the window, and whether any
# element of the page is wider than the window.
ROWS_ABOVE_THE_FOLD = """() => Array.from(document.querySelectorAll('tr[data-ticket-url]'))
    .filter(row => row.getBoundingClientRect().bottom <= window.innerHeight).length"""
# An element cut by a narrower box that hides (or scrolls) what overflows it is not wider.
WIDER_THAN_THE_WINDOW = """() => {
    const width = document.documentElement.clientWidth;
    const scroller = document.documentElement.scrollWidth > width;
    const clipped = (element) => {
        for (let box = element.parentElement; box; box = box.parentElement) {
            if (getComputedStyle(box).overflowX !== 'visible'
                && box.getBoundingClientRect().right <= width + 1) return true;
        }
        return false;
    };
    const wide = Array.from(document.querySelectorAll('body *'))
        .filter(element => element.getBoundingClientRect().right > width + 1 && !clipped(element))
        .map(element => element.tagName + '.' + element.className);
    return scroller ? ['the page scrolls sideways', ...wide] : wide;
}"""


@pytest.mark.parametrize("width", [1366, 1280])
def test_the_queue_shows_fifteen_rows_above_the_fold_with_no_sideways_scroll(
    page, live_server, tmp_path, width
):
    cache.clear()
    ingest_lines(tmp_path, desk_lines(30, prefix="dense"))
    # A long entity and a long value are cut in their cells, not widening the table.
    ticket = Ticket.objects.filter(kind="conflict").order_by("-id").first()
    Ticket.objects.filter(pk=ticket.pk).update(
        entity="order-" + "9" * 150, disputed=[["search-index", "x" * 60], ["erp", "paid"]]
    )
    page.set_viewport_size({"width": width, "height": 768})
    page.goto(f"{live_server.url}/tickets/")
    page.wait_for_selector("#queue-total")
    assert Ticket.objects.filter(state="open").count() >= 20
    assert page.evaluate(ROWS_ABOVE_THE_FOLD) >= 15
    assert page.evaluate(WIDER_THAN_THE_WINDOW) == []
    results = page.locator("section.results")
    assert results.evaluate("e => e.scrollWidth <= e.clientWidth")
    # Each row has the disputed values side by side, sources, action, holder and age.
    row = page.locator(f"tr[data-ticket-url^='/tickets/{ticket.pk}/?']")
    assert row.locator("td.values").inner_text().startswith("x")
    assert " vs paid" in row.locator("td.values").inner_text()
    other = page.locator("tr[data-ticket-url]").nth(1)
    assert other.locator("td.values").inner_text() in ("refunded vs paid", "paid vs refunded")
    assert "search-index" in other.locator("td.sources").inner_text()
    assert other.locator("td.action").inner_text() == "issue_refund"
    assert other.locator("td.holder").inner_text() == "unassigned"
    assert re.fullmatch(r"\d+[smhd]", other.locator("td.age").inner_text())


def ticket_id_of(url: str) -> int:
    return int(re.search(r"/tickets/(\d+)/", url).group(1))


def test_a_keyboard_only_session_closes_one_ticket_after_another(page, live_server, tmp_path):
    cache.clear()
    ingest_lines(tmp_path, desk_lines(8, prefix="keys"))
    page.goto(f"{live_server.url}/tickets/?sort=oldest")
    page.wait_for_selector("#queue-total")
    order = [
        ticket_id_of(url)
        for url in page.eval_on_selector_all(
            "tr[data-ticket-url]", "rows => rows.map(r => r.dataset.ticketUrl)"
        )
    ]
    assert len(order) >= 4
    # After j j j k one row only is the current one.
    for key in "jjjk":
        page.keyboard.press(key)
    assert page.eval_on_selector_all("tr[aria-current]", "rows => rows.length") == 1
    assert ticket_id_of(page.get_attribute("tr[aria-current]", "data-ticket-url")) == order[1]
    page.keyboard.press("k")

    page.keyboard.press("Enter")
    page.wait_for_url(f"**/tickets/{order[0]}/?queue=sort%3Doldest")
    # The ticket moves through the queue it came from, keeping its filters.
    assert page.get_attribute("#back-to-queue", "href") == "/tickets/?sort=oldest"
    page.keyboard.press("j")
    page.wait_for_url(f"**/tickets/{order[1]}/?queue=sort%3Doldest")
    page.keyboard.press("k")
    page.wait_for_url(f"**/tickets/{order[0]}/?queue=sort%3Doldest")
    assert page.locator("#previous-ticket").count() == 0

    # Auto-advance on: closing as explained lands on the next ticket of the queue.
    page.keyboard.press("a")
    assert page.is_checked("#auto-advance")
    page.keyboard.press("e")
    assert page.evaluate("document.activeElement.id") == "close-cause"
    page.keyboard.press("ArrowDown")  # the first cause: replica lag
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/tickets/{order[1]}/?queue=sort%3Doldest")
    assert page.is_checked("#auto-advance")  # remembered
    closed = Ticket.objects.get(pk=order[0])
    assert (closed.state, closed.resolution, closed.cause) == ("closed", "explained", "replica-lag")

    # Back in the queue, the ticket just opened is the current row; u Enter closes it.
    page.keyboard.press("q")
    page.wait_for_url("**/tickets/?sort=oldest")
    page.wait_for_selector("tr[aria-current]")
    assert ticket_id_of(page.get_attribute("tr[aria-current]", "data-ticket-url")) == order[1]
    page.keyboard.press("u")
    page.wait_for_url(f"**/tickets/{order[1]}/**#close-unexplained-button")
    page.wait_for_load_state("load")
    page.wait_for_function("() => document.activeElement.id === 'close-unexplained-button'")
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/tickets/{order[2]}/?queue=sort%3Doldest")
    second = Ticket.objects.get(pk=order[1])
    assert (second.state, second.resolution) == ("closed", "unexplained")
    assert Ticket.objects.get(pk=order[2]).state == "open"


def test_the_search_box_finds_the_tickets_of_an_entity(page, live_server, desk):
    stale = desk["run-stale"]
    expected = set(Ticket.objects.filter(entity=stale.entity).values_list("pk", flat=True))
    page.fill("form.search input[name=q]", stale.entity)
    page.press("form.search input[name=q]", "Enter")
    page.wait_for_selector("#queue-total")
    assert shown_ids(page) == expected
    assert page.is_visible(f"#filter-chips >> text=Search: {stale.entity}")
    # From a ticket, its run id leads to the run's page: its timeline and every ticket.
    page.click(f"a[href^='/tickets/{stale.pk}/']")
    page.click("#run-link")
    page.wait_for_selector("#run-timeline")
    linked = page.eval_on_selector_all("#run-tickets a", "links => links.map(a => a.textContent)")
    assert linked == [
        f"#{pk}"
        for pk in Ticket.objects.filter(run=stale.run).order_by("id").values_list("pk", flat=True)
    ]


def test_a_bulk_close_names_a_held_ticket_asks_and_can_be_undone(
    page, live_server, desk, second_reviewer
):
    stale, mismatch = desk["run-stale"], desk["run-mismatch"]
    changes.ticket_claim(mismatch, revision=1, actor=second_reviewer)
    page.goto(f"{live_server.url}/tickets/?unsafe=yes")
    page.wait_for_selector("#queue-total >> text=2 tickets")
    page.check(f"input[name=selected][value='{stale.pk}:1']")
    page.check(f"input[name=selected][value='{mismatch.pk}:2']")
    page.select_option("fieldset.bulk select[name=resolution]", "unexplained")
    page.click("fieldset.bulk button[value=close]")
    page.wait_for_selector("#held-warning")
    assert f"#{mismatch.pk} (ravi)" in page.inner_text("#held-warning")
    assert page.locator("#bulk-tickets tbody tr").count() == 2
    assert Ticket.objects.filter(state="closed").count() == 0
    page.click("#confirm-bulk")
    page.wait_for_selector("#undo-bulk")
    assert set(Ticket.objects.filter(state="closed").values_list("pk", flat=True)) == {
        stale.pk,
        mismatch.pk,
    }
    page.click("#undo-bulk button")
    page.wait_for_selector("text=2 tickets reopened.")
    assert not Ticket.objects.filter(state="closed").exists()
    assert page.locator("#undo-bulk").count() == 0


def desk_pages(desk) -> list[str]:
    """The pages a reviewer's day goes through, for the phone and accessibility passes."""
    stale = desk["run-stale"]
    return [
        "/",
        "/tickets/",
        "/tickets/?unsafe=yes&q=order-204&state=any",
        f"/tickets/{stale.pk}/?queue=unsafe%3Dyes",
        f"/runs/{stale.run_id}/",
        "/ingest/",
        f"/ingest/batches/{stale.batch.public_id}/",
        "/policy/",
    ]


def serious_violations(page) -> list[str]:
    results = Axe().run(page)
    return [
        f"{violation['id']} ({violation['impact']}): "
        + "; ".join(node["target"][0] for node in violation["nodes"][:3])
        for violation in results.response["violations"]
        if violation["impact"] in ("serious", "critical")
    ]


# A laptop and a phone: axe runs on every page at both.
VIEWPORTS = [
    pytest.param({"width": 1366, "height": 768}, id="laptop"),
    pytest.param({"width": 390, "height": 844}, id="phone"),
]


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_axe_finds_no_serious_or_critical_violation_on_the_desk(page, live_server, desk, viewport):
    page.set_viewport_size(viewport)
    found = {}
    for path in desk_pages(desk):
        page.goto(f"{live_server.url}{path}")
        page.wait_for_load_state("load")
        if path.startswith("/tickets/?"):
            page.click("details.more-filters > summary")  # the folded form too
        found[path] = serious_violations(page)
    assert found == {path: [] for path in found}


# The pages of the other browser tests (tallies, shadow, replay, policy), as a reviewer sees them.
OTHER_PAGES = [
    "/tallies/",
    "/shadow/",
    "/gate/",
    "/replay/",
    "/replay/fixtures/",
    "/policy/propose/",
    "/policy/draft/",
    "/policy/diff/",
    "/policy/proposals/",
    "/policy/suggestions/",
    "/glossary/",
    "/tokens/",
]


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_axe_finds_no_serious_or_critical_violation_on_the_other_pages(
    page, live_server, desk, viewport
):
    page.set_viewport_size(viewport)
    found = {}
    for path in OTHER_PAGES:
        page.goto(f"{live_server.url}{path}")
        page.wait_for_load_state("load")
        found[path] = serious_violations(page)
    assert found == {path: [] for path in found}


# An admin's pages, the raw data permission given: the privacy screens (issue 30), people
# and alerts (issues 28 and 29).
ADMIN_PAGES = ["/privacy/redaction/", "/privacy/erasure/", "/raw/values/", "/people/", "/alerts/"]


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_axe_finds_no_serious_or_critical_violation_on_the_privacy_pages(
    browser, live_server, admin_user, viewport
):
    account_raw_access_set("ada", True, actor=admin_user, reason="the accessibility pass")
    found = {}
    with watched_page(browser, live_server.url, "ada", viewport=viewport) as admin_page:
        for path in ADMIN_PAGES:
            admin_page.goto(f"{live_server.url}{path}")
            admin_page.wait_for_load_state("load")
            found[path] = serious_violations(admin_page)
    assert found == {path: [] for path in found}


def test_a_phone_shows_every_page_within_its_width(page, live_server, desk):
    page.set_viewport_size({"width": 390, "height": 844})
    wide = {}
    for path in desk_pages(desk):
        page.goto(f"{live_server.url}{path}")
        page.wait_for_load_state("load")
        wide[path] = page.evaluate(WIDER_THAN_THE_WINDOW)
    assert wide == {path: [] for path in wide}
    # The header wraps: every link of it is within the window, on more than one line.
    tops = page.eval_on_selector_all(
        "header.topbar a", "links => links.map(a => a.getBoundingClientRect().top)"
    )
    assert len(set(tops)) > 1
    # A skip link is the first thing a keyboard reaches, and leads to the content.
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.getAttribute('href')") == "#main"
    assert page.is_visible("a.skip-link")


def test_a_ticket_shows_its_verdict_values_and_work_above_the_fold_on_a_laptop(
    page, live_server, desk
):
    stale = desk["run-stale"]
    page.set_viewport_size({"width": 1366, "height": 768})
    page.goto(f"{live_server.url}/tickets/{stale.pk}/")
    page.wait_for_selector("#ticket-work")
    below = page.evaluate(
        """() => ['#verdict-title', '.verdict .kind', '#disputed-values', '#claim-form',
                  '#close-explained', '#close-unexplained']
            .filter(s => {
                const box = document.querySelector(s).getBoundingClientRect();
                return box.height === 0 || box.bottom > window.innerHeight;
            })"""
    )
    assert below == []
    assert "Refunded" in page.inner_text("#disputed-values")
    assert page.evaluate(WIDER_THAN_THE_WINDOW) == []
