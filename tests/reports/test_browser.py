"""The tallies in real headless Chromium: read a month's unexplained count, follow it to the
queue and find as many tickets there, then download the month's CSV."""

from __future__ import annotations

import csv
import io

import pytest
from django.core.cache import cache

from reviewapp.review.changes import ticket_close
from tests.browser import chromium, watched_page
from tests.reports.traces import month_runs, tickets_of

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def browser():
    with chromium() as browser:
        yield browser


@pytest.fixture
def page(browser, live_server, viewer):
    with watched_page(browser, live_server.url, "vera", accept_downloads=True) as page:
        yield page


def test_a_months_unexplained_count_is_its_tickets_in_the_queue_and_in_the_csv(
    page, tmp_path, reviewer
):
    cache.clear()
    month_runs(tmp_path, {"2026-08": 2, "2026-09": 4})
    explained, unexplained = tickets_of("2026-09")[:2]
    ticket_close(explained, revision=1, actor=reviewer, resolution="explained", cause="wrong-join")
    ticket_close(unexplained, revision=1, actor=reviewer, resolution="unexplained")

    page.click("nav.mainnav >> text=Tallies")
    page.wait_for_selector("svg.tally-chart rect.unexplained")
    september = page.locator("#month-2026-09")
    count = int(september.locator("[data-count=unexplained]").inner_text())
    assert count == 3  # one closed as unexplained, two still open

    september.locator("[data-count=unexplained]").click()
    page.wait_for_selector(f"#queue-total >> text={count} tickets")
    assert page.locator("tr[data-ticket-url]").count() == count
    assert "month=2026-09" in page.url and "outcome=unexplained" in page.url

    page.go_back()
    page.click("#month-2026-09 th a")
    with page.expect_download() as download:
        page.click("#month-detail >> text=CSV of 2026-09")
    assert download.value.suggested_filename == "crosscheck-tallies-2026-09.csv"
    text = download.value.path().read_text(encoding="utf-8")
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    (month,) = [row for row in rows if row["dimension"] == "month"]
    assert (month["month"], int(month["unexplained"]), int(month["explained"])) == (
        "2026-09",
        count,
        1,
    )
