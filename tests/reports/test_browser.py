"""The tallies in real headless Chromium: read a month's unexplained count, follow it to the
queue and find as many tickets there, then download the month's CSV; a page too far behind
to count itself, reloaded once a real worker has counted; a backfilled export, counted in
the month its spans ran."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.utils import timezone

from reviewapp.models import Run
from reviewapp.reports.entries import tallies_refresh
from reviewapp.review.changes import ticket_close
from tests.browser import watched_page
from tests.ingest.test_run_start import (
    AGENT_START,
    ingest_text,
    json_agent_span,
    json_conflict_tools,
    otlp_json,
)
from tests.reports.traces import month_runs, tickets_of
from tests.workers import celery_worker

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


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


def test_a_page_too_far_behind_reloads_itself_once_a_worker_has_counted(
    page, tmp_path, settings, django_db_blocker
):
    cache.clear()
    month_runs(tmp_path, {"2026-09": 2})
    tallies_refresh()
    month_runs(tmp_path, {"2026-09": 3}, tag="more")
    # More runs to read again than the page counts itself: a worker counts them, and the
    # page's poll reloads it once they are counted.
    settings.TALLY_PAGE_REFRESH_RUNS = 2
    with celery_worker(django_db_blocker, tmp_path / "worker.log", concurrency=1):
        page.click("nav.mainnav >> text=Tallies")
        page.wait_for_selector("#tallies-catching-up >> text=Counting")
        page.wait_for_selector("#tallies-catching-up", state="detached", timeout=30_000)
    september = page.locator("#month-2026-09 [data-count=unexplained]")
    assert int(september.inner_text()) == 5


def test_a_backfilled_otlp_export_is_counted_in_the_month_its_spans_ran(
    page, live_server, tmp_path
):
    """Spans of June 2025 sent in December 2026: the run page says it started in June 2025
    and leads to that month of the tallies, where it is counted; not in its arrival's."""
    cache.clear()
    spans = [*json_conflict_tools(AGENT_START + timedelta(seconds=3)), json_agent_span()]
    ingest_text(tmp_path, otlp_json(spans), "june-2025.json")
    run = Run.objects.get()

    page.goto(f"{live_server.url}/runs/{run.pk}/")
    assert page.locator("#run-started").inner_text() == "2025-06-14 09:30"
    assert "from its earliest span or record" in page.locator(".ticket-head").inner_text()
    page.click("#run-tally-month")
    june = page.locator("#month-2025-06")
    june.wait_for()
    assert june.locator("td.num").first.inner_text() == "1"  # runs
    assert int(june.locator("[data-count=unexplained]").inner_text()) == 1
    assert page.locator("#month-detail h2").inner_text() == "Jun 2025"

    page.click("nav.mainnav >> text=Tallies")
    arrival = page.locator(f"#month-{timezone.now():%Y-%m}")
    assert "no runs" in arrival.inner_text()
