"""The tallies page, its drill-downs, downloads and the closing of months, through the
views: signed-in only, permissions on the server, CSRF, escaping, a bounded number of
queries whatever the number of runs, and every number leading to as many tickets."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from reviewapp.models import AuditEvent, MonthClosing, ServicePulse
from reviewapp.reports.calendar import current_month
from reviewapp.reports.entries import tallies_refresh
from reviewapp.review.changes import ticket_close
from reviewapp.tasks import tallies_refresh_task
from tests.reports.traces import month_runs, tickets_of

pytestmark = pytest.mark.django_db

# Session, user, the data stamp, the refresh (lock, time zone, changed runs, tickets to
# pair: 6 with its transaction), the months (two), their closings, one month's months,
# closings and breakdowns (four), the permissions (two).
PAGE_QUERIES = 18
# When runs were judged since: the refresh reads them again (entries and runs deleted,
# runs written, entries written from verdicts and from findings), whatever their number.
PAGE_QUERIES_AFTER_CHANGES = PAGE_QUERIES + 5


@pytest.fixture
def months(tmp_path):
    month_runs(tmp_path, {"2026-08": 2, "2026-09": 3, "2026-10": 1})


def body(response) -> str:
    return response.content.decode()


def counts_in(html: str, row_id: str) -> dict[str, tuple[int, str]]:
    """{outcome group: (number, link)} of the table row with this id."""
    row = re.search(rf'<tr id="{row_id}".*?</tr>', html, re.S).group(0)
    return {
        group: (int(number), url.replace("&amp;", "&"))
        for url, group, number in re.findall(
            r'<a href="([^"]+)" data-count="([a-z_]+)">(\d+)</a>', row
        )
    }


def test_every_page_needs_a_sign_in(client, months):
    for url in (
        reverse("tallies"),
        reverse("tallies-csv") + "?month=2026-09",
        reverse("tallies-json") + "?month=2026-09",
        reverse("tally-discrepancies", args=["2026-09"]),
        reverse("tallies-status"),
    ):
        response = client.get(url)
        assert response.status_code == 302 and "/login/" in response["Location"], url
    response = client.post(reverse("tally-close", args=["2026-09"]))
    assert response.status_code == 302 and "/login/" in response["Location"]
    assert not MonthClosing.objects.exists()


def test_a_viewer_reads_but_only_an_approver_closes_and_reopens(client, months, viewer, approver):
    client.force_login(viewer)
    page = body(client.get(reverse("tallies"), {"until": "2026-11", "month": "2026-09"}))
    assert "Close 2026-09" not in page
    assert client.post(reverse("tally-close", args=["2026-09"])).status_code == 403
    assert (
        client.post(reverse("tally-reopen", args=["2026-09"]), {"reason": "x"}).status_code == 403
    )
    assert not MonthClosing.objects.exists()

    client.force_login(approver)
    page = body(client.get(reverse("tallies"), {"until": "2026-11", "month": "2026-09"}))
    assert "Close 2026-09 and freeze its tally" in page
    response = client.post(reverse("tally-close", args=["2026-09"]), {"reason": "Q3"}, follow=True)
    assert "is closed: its tally is frozen" in body(response)
    assert "frozen on" in body(response)
    # Reopening without a reason is refused, and says so.
    response = client.post(reverse("tally-reopen", args=["2026-09"]), {"reason": ""}, follow=True)
    assert "Not reopened: reopening a month needs a reason." in body(response)
    response = client.post(
        reverse("tally-reopen", args=["2026-09"]), {"reason": "late traces"}, follow=True
    )
    assert "is open again" in body(response)
    assert list(AuditEvent.objects.values_list("verb", flat=True)) == [
        "month closed",
        "month reopened",
    ]
    # No month of the future; nothing that is no month.
    response = client.post(reverse("tally-close", args=["2999-01"]), follow=True)
    assert "has not ended yet" in body(response)
    assert client.post(reverse("tally-close", args=["2026-13"])).status_code == 404


def test_posts_need_the_csrf_token(months, approver):
    client = Client(enforce_csrf_checks=True)
    client.force_login(approver)
    assert client.post(reverse("tally-close", args=["2026-09"])).status_code == 403
    page = body(client.get(reverse("tallies"), {"until": "2026-11", "month": "2026-09"}))
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    response = client.post(reverse("tally-close", args=["2026-09"]), {"csrfmiddlewaretoken": token})
    assert response.status_code == 302
    assert MonthClosing.objects.get().month.isoformat() == "2026-09-01"


def test_what_runs_say_is_escaped(client, tmp_path, viewer):
    month_runs(tmp_path, {"2026-09": 1}, agent="<script>alert(1)</script>", tag="x")
    client.force_login(viewer)
    page = body(client.get(reverse("tallies"), {"until": "2026-11", "month": "2026-09"}))
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<script>alert(1)" not in page


def test_the_page_runs_a_fixed_number_of_queries(
    client, tmp_path, viewer, django_assert_max_num_queries
):
    client.force_login(viewer)
    month_runs(tmp_path, {"2026-09": 1})
    tallies_refresh()
    for plan in ({"2026-09": 1}, {"2026-07": 10, "2026-08": 20, "2026-09": 30}):
        month_runs(tmp_path, plan, tag=f"t{len(plan)}")
        cache.clear()
        with django_assert_max_num_queries(PAGE_QUERIES_AFTER_CHANGES):
            response = client.get(reverse("tallies"), {"until": "2026-11"})
        assert response.status_code == 200
        cache.clear()
        with django_assert_max_num_queries(PAGE_QUERIES):
            response = client.get(reverse("tallies"), {"until": "2026-11"})
        assert response.status_code == 200
    # Seen again: from the cache, named by the data stamp.
    with django_assert_max_num_queries(5):
        assert client.get(reverse("tallies"), {"until": "2026-11"}).status_code == 200


def test_too_far_behind_the_page_shows_the_last_count_and_reloads_once_counted(
    client, tmp_path, viewer, settings
):
    month_runs(tmp_path, {"2026-09": 2})
    tallies_refresh()
    client.force_login(viewer)
    shown = {"until": "2026-11", "month": "2026-09"}
    page = body(client.get(reverse("tallies"), shown))
    assert "tallies-catching-up" not in page
    before = counts_in(page, "month-2026-09")
    assert before["unexplained"][0] == 2

    # Three runs judged since: more than the page may count while somebody waits.
    month_runs(tmp_path, {"2026-09": 3}, tag="more")
    settings.TALLY_PAGE_REFRESH_RUNS = 2
    cache.clear()
    page = body(client.get(reverse("tallies"), shown))
    assert 'id="tallies-catching-up"' in page and 'hx-get="/tallies/status/"' in page
    assert counts_in(page, "month-2026-09") == before  # as last counted
    assert "No worker has answered" not in page
    # Its poll answers the same notice, and counts nothing itself, while it is too much;
    # with the worker silent, it says so.
    ServicePulse.objects.create(name="worker", seen_at=timezone.now() - timedelta(hours=1))
    for _ in range(2):
        status = client.get(reverse("tallies-status"), headers={"HX-Request": "true"})
        assert status.status_code == 200 and "HX-Refresh" not in status
        assert 'id="tallies-catching-up"' in body(status)
        assert "No worker has answered for\n    1\xa0hour: the tallies are counted" in body(status)
    # The stale figures were not kept under the data stamp: once a worker has counted (the
    # task's own function, here), the poll reloads the page and the page has the new ones.
    assert tallies_refresh_task() == 3
    status = client.get(reverse("tallies-status"), headers={"HX-Request": "true"})
    assert status["HX-Refresh"] == "true"
    page = body(client.get(reverse("tallies"), shown))
    assert "tallies-catching-up" not in page
    assert counts_in(page, "month-2026-09")["unexplained"][0] == 5


def test_a_few_runs_behind_the_poll_counts_them_itself(client, tmp_path, viewer, settings):
    month_runs(tmp_path, {"2026-09": 3})
    client.force_login(viewer)
    settings.TALLY_PAGE_REFRESH_RUNS = 2
    assert "tallies-catching-up" in body(client.get(reverse("tallies"), {"until": "2026-11"}))
    settings.TALLY_PAGE_REFRESH_RUNS = 3
    status = client.get(reverse("tallies-status"), headers={"HX-Request": "true"})
    assert status["HX-Refresh"] == "true"
    assert tallies_refresh() == 0  # nothing left to read


def test_every_number_leads_to_as_many_tickets_or_discrepancies(client, months, viewer, reviewer):
    first, second = tickets_of("2026-09")[:2]
    ticket_close(first, revision=1, actor=reviewer, resolution="explained", cause="wrong-join")
    ticket_close(second, revision=1, actor=reviewer, resolution="unexplained")
    client.force_login(viewer)
    page = body(client.get(reverse("tallies"), {"until": "2026-11", "month": "2026-09"}))
    september = counts_in(page, "month-2026-09")
    assert {group: n for group, (n, _) in september.items()} == {
        "reviewer": 1,
        "closed_unexplained": 1,
        "open": 1,
        "explained": 1,
        "unexplained": 2,
        "all": 3,
    }
    for group, (number, url) in september.items():
        target = body(client.get(url))
        if url.startswith(reverse("ticket-queue")):
            assert f'id="queue-total">{number} ticket' in target, group
            assert target.count("data-ticket-url=") == number
        else:
            assert re.search(rf'id="discrepancy-total">{number} discrepanc', target), group
    # The queue says when each ticket was closed (its age cell's title).
    queue = body(client.get(september["reviewer"][1]))
    closed_on = re.findall(r'title="opened [^"]*, closed (\d{4}-\d\d-\d\d \d\d:\d\d)"', queue)
    assert len(closed_on) == 1


def test_the_csv_download_reads_back_and_neutralises_formulas(client, tmp_path, viewer):
    month_runs(tmp_path, {"2026-09": 2}, agent='=HYPERLINK("http://evil")', tag="f")
    client.force_login(viewer)
    response = client.get(reverse("tallies-csv"), {"from": "2026-09", "to": "2026-10"})
    assert response.status_code == 200 and response.streaming
    assert response["Content-Disposition"] == (
        'attachment; filename="crosscheck-tallies-2026-09_2026-10.csv"'
    )
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    months = [row for row in rows if row["dimension"] == "month"]
    assert [(r["month"], r["runs"], r["open"], r["unexplained"]) for r in months] == [
        ("2026-09", "2", "2", "2"),
        # No run: no figures (empty), not zeros.
        ("2026-10", "", "", ""),
    ]
    agents = [row["value"] for row in rows if row["dimension"] == "agent"]
    assert agents == ['\'=HYPERLINK("http://evil")']
    # The command writes the same bytes.
    out = io.StringIO()
    call_command("tallies", "--month", "2026-09", "--to", "2026-10", "--csv", stdout=out)
    response = client.get(reverse("tallies-csv"), {"from": "2026-09", "to": "2026-10"})
    assert out.getvalue() == b"".join(response.streaming_content).decode()


def test_the_json_download_and_the_command(client, months, viewer, approver):
    client.force_login(approver)
    client.post(reverse("tally-close", args=["2026-09"]))
    response = client.get(reverse("tallies-json"), {"month": "2026-09"})
    document = json.loads(b"".join(response.streaming_content))
    (september,) = document["months"]
    assert september["status"] == "frozen" and september["counts"]["open"] == 3
    assert september["drift"] == {
        "runs": 0,
        "counts": {
            "resolved_by_rule": 0,
            "explained_by_reviewer": 0,
            "explained": 0,
            "closed_unexplained": 0,
            "open": 0,
            "without_ticket": 0,
            "unexplained": 0,
            "total": 0,
        },
    }
    assert september["breakdowns"]["agent"][0]["label"] == "refund-agent"
    out = io.StringIO()
    call_command("tallies", "--month", "2026-09", stdout=out)
    assert "Sep 2026 (frozen on" in out.getvalue()
    assert "unexplained 3 (closed 0, open 3, without a ticket 0)" in out.getvalue()
    with pytest.raises(CommandError, match="YYYY-MM"):
        call_command("tallies", "--month", "September")
    for params in (
        {"from": "2026-13"},
        {"from": "2026-10", "to": "2026-09"},
        {"from": "2016-01", "to": "2026-09"},
    ):
        assert client.get(reverse("tallies-json"), params).status_code == 404
    # No month named: this month's.
    this_month = client.get(reverse("tallies-json"))
    assert this_month.status_code == 200
    assert current_month().strftime("%Y-%m") in this_month["Content-Disposition"]


def test_the_queue_reads_its_new_filters_and_ignores_what_it_cannot(client, months, reviewer):
    first, second = tickets_of("2026-09")[:2]
    ticket_close(first, revision=1, actor=reviewer, resolution="explained", cause="wrong-join")
    ticket_close(second, revision=1, actor=reviewer, resolution="unexplained")
    tallies_refresh()
    client.force_login(reviewer)
    queue = reverse("ticket-queue")
    for params, expected in (
        ({"state": "any", "closed_cause": "wrong-join"}, {first.pk}),
        ({"state": "any", "outcome": "explained"}, {first.pk}),
        ({"state": "closed", "outcome": "unexplained"}, {second.pk}),
        (
            {"state": "any", "closed_from": "2026-01-01", "closed_to": "2999-12-31"},
            {first.pk, second.pk},
        ),
        ({"state": "any", "closed_to": "2020-01-01"}, set()),
        ({"state": "any", "month": "2026-08"}, {t.pk for t in tickets_of("2026-08")}),
    ):
        page = body(client.get(queue, params))
        shown = {int(pk) for pk in re.findall(r'data-ticket-url="/tickets/(\d+)/[?"]', page)}
        assert shown == expected, params
    # What cannot be read is ignored, never an error.
    for params in (
        {"outcome": "maybe"},
        {"month": "0000-01"},
        {"month": "2026-13"},
        {"closed_from": "yesterday"},
        {"closed_cause": "<script>"},
    ):
        assert client.get(queue, params).status_code == 200, params
