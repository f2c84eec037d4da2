"""Frozen months say what they froze: a frozen figure opens the discrepancies the freeze
counted (kept with it), and where today's figure differs it says so in words, "44 today (7
fewer than when frozen)", opening today's list. A closing made before the freeze kept its
discrepancies says its links open today's lists. The exports carry the same drift, under
the same names in the CSV and the JSON."""

from __future__ import annotations

import csv
import html
import io
import json
import re

import pytest
from django.core.management import call_command
from django.urls import reverse

from reviewapp.models import MonthClosing
from reviewapp.reports.calendar import month_parse
from reviewapp.reports.entries import tallies_refresh
from reviewapp.reports.months import month_close, month_reopen
from reviewapp.reports.tally import month_tally
from reviewapp.review.changes import ticket_close
from tests.reports.test_views import PAGE_QUERIES
from tests.reports.traces import month_runs, tickets_of

pytestmark = pytest.mark.django_db

SEPTEMBER = month_parse("2026-09")
SHOWN = {"until": "2026-11", "month": "2026-09"}


def page_of(client, params=SHOWN) -> str:
    return client.get(reverse("tallies"), params).content.decode()


def cells_in(page: str, row: str) -> dict[str, dict]:
    """{column: what its cell says} of a table row: `row` is a regex of the row's start."""
    found = re.search(rf"<tr{row}.*?</tr>", page, re.S).group(0)
    cells = {}
    for group, content in re.findall(r'<td class="num cell-([a-z_]+)">(.*?)</td>', found, re.S):
        linked = re.search(r'<a href="([^"]+)" data-count="[a-z_]+">(\d+)</a>', content)
        today = re.search(r'<span class="drift">(.*?)</span>', content, re.S)
        today_link = re.search(r'<a href="([^"]+)" data-today="[a-z_]+">', content)
        cells[group] = {
            "value": int(re.sub(r"<[^>]+>", "", content.split('<span class="drift">')[0])),
            "url": html.unescape(linked.group(1)) if linked else "",
            "today": " ".join(re.sub(r"<[^>]+>", "", today.group(1)).split()) if today else "",
            "today_url": html.unescape(today_link.group(1)) if today_link else "",
        }
    return cells


def listed(client, url: str) -> tuple[int, str]:
    """How many tickets or discrepancies a link opens, and the page."""
    target = client.get(url).content.decode()
    if url.startswith(reverse("ticket-queue")):
        number = int(re.search(r'id="queue-total">(\d+) ticket', target).group(1))
        assert target.count("data-ticket-url=") == number
        return number, target
    return int(re.search(r'id="discrepancy-total">(\d+) discrepanc', target).group(1)), target


@pytest.fixture
def frozen_with_drift(tmp_path, approver, reviewer):
    """September: three open tickets when frozen; since, two closed as explained and one
    run more (of another agent) with an open ticket."""
    month_runs(tmp_path, {"2026-09": 3, "2026-10": 1})
    closing = month_close(SEPTEMBER, actor=approver)
    for ticket in tickets_of("2026-09")[:2]:
        ticket_close(ticket, revision=1, actor=reviewer, resolution="explained", cause="wrong-join")
    month_runs(tmp_path, {"2026-09": 1}, agent="late-agent", tag="late")
    return closing


def test_a_frozen_figure_opens_what_the_freeze_counted_and_says_today_s_in_words(
    client, viewer, frozen_with_drift
):
    client.force_login(viewer)
    page = page_of(client)
    for row in (' id="month-2026-09"', r"><td>3 \("):  # the months' table, then the month's own
        if row != ' id="month-2026-09"':
            page = re.search(r'<table class="grid tally" id="month-counts">.*?</table>', page, re.S)
            page = page.group(0)
        september = cells_in(page, row)
        # Open: 3 when frozen, opening the three the freeze counted, as they were then.
        assert september["open"]["value"] == 3
        number, frozen_list = listed(client, september["open"]["url"])
        assert number == 3
        assert f"frozen={frozen_with_drift.pk}" in september["open"]["url"]
        assert frozen_list.count("<td>open: needs a human</td>") == 3 and "late" not in frozen_list
        assert "as counted when the month was frozen on" in " ".join(frozen_list.split())
        # Beside it, in words, today's figure, opening today's list.
        assert september["open"]["today"] == "2 today (1 fewer than when frozen)"
        assert listed(client, september["open"]["today_url"])[0] == 2
        assert september["reviewer"]["value"] == 0 and not september["reviewer"]["url"]
        assert september["reviewer"]["today"] == "2 today (2 more than when frozen)"
        assert listed(client, september["reviewer"]["today_url"])[0] == 2
        # What did not change says nothing more; no signed number reads like arithmetic.
        assert september["closed_unexplained"]["today"] == ""
        assert september["all"]["today"] == "4 today (1 more than when frozen)"
        assert "−" not in " ".join(cell["today"] for cell in september.values())
    page = page_of(client)
    runs = re.search(r'<tr id="month-2026-09"[^>]*>.*?<td class="num">(.*?)</td>', page, re.S)
    assert " ".join(re.sub(r"<[^>]+>", "", runs.group(1)).split()) == (
        "3 4 today (1 more than when frozen)"
    )
    # The chart's bars open the same frozen list.
    bar = re.search(r'<a href="([^"]+)"><rect class="unexplained"[^>]*>.*?Sep 2026', page, re.S)
    assert listed(client, html.unescape(bar.group(1)))[0] == 3


def test_a_frozen_breakdown_opens_what_the_freeze_counted_and_a_new_value_today_s(
    client, viewer, frozen_with_drift
):
    client.force_login(viewer)
    page = page_of(client)
    agents = re.search(r'<table class="grid tally" id="by-agent">.*?</table>', page, re.S).group(0)
    refund = cells_in(agents, r"><td>refund-agent</td")
    number, frozen_list = listed(client, refund["open"]["url"])
    assert number == 3 and "by=agent" in refund["open"]["url"]
    assert refund["open"]["today"] == "1 today (2 fewer than when frozen)"
    assert listed(client, refund["open"]["today_url"])[0] == 1
    new = re.search(r'<tr class="muted"><td>late-agent</td>(.*?)</tr>', agents, re.S).group(1)
    assert "new since the month was frozen" in new
    link = re.search(r'<a href="([^"]+)"[^>]*>1 today</a>', new)
    assert listed(client, html.unescape(link.group(1)))[0] == 1


def test_the_freeze_keeps_what_it_counted_through_a_reopening(client, tmp_path, viewer, approver):
    from reviewapp.models import FrozenDiscrepancy  # made by this change: the others fail on

    month_runs(tmp_path, {"2026-09": 2})
    first = month_close(SEPTEMBER, actor=approver)
    assert first.discrepancies_kept
    kept = list(
        FrozenDiscrepancy.objects.filter(closing=first).values_list("run__run_id", "outcome")
    )
    assert sorted(kept) == [("run-2026-09-0-a", "open"), ("run-2026-09-1-a", "open")]
    assert len(kept) == first.figures["counts"]["open"]
    month_reopen(SEPTEMBER, actor=approver, reason="late traces")
    month_runs(tmp_path, {"2026-09": 1}, tag="late")
    second = month_close(SEPTEMBER, actor=approver)
    assert FrozenDiscrepancy.objects.filter(closing=second).count() == 3
    # The first freeze's list still says what it counted.
    client.force_login(viewer)
    items = reverse("tally-discrepancies", args=["2026-09"])
    assert listed(client, f"{items}?outcome=all&frozen={first.pk}")[0] == 2
    assert listed(client, f"{items}?outcome=all&frozen={second.pk}")[0] == 3
    # A closing of another month, a reopening, or no closing at all: no such list.
    reopened = MonthClosing.objects.get(action="reopened").pk
    for frozen in (second.pk + 1, "x", "9" * 30, reopened):
        assert client.get(items, {"frozen": frozen}).status_code == 404
    other = reverse("tally-discrepancies", args=["2026-10"])
    assert client.get(other, {"frozen": first.pk}).status_code == 404


def test_a_closing_that_did_not_keep_its_list_says_the_links_are_today_s(
    client, tmp_path, viewer, reviewer
):
    month_runs(tmp_path, {"2026-09": 2})
    tallies_refresh()
    # As months were closed before the freeze kept what it counted.
    MonthClosing.objects.create(
        month=SEPTEMBER,
        action="closed",
        figures=month_tally(SEPTEMBER).as_dict(),
        time_zone="UTC",
    )
    first = tickets_of("2026-09")[0]
    ticket_close(first, revision=1, actor=reviewer, resolution="explained", cause="wrong-join")
    client.force_login(viewer)
    page = page_of(client)
    september = cells_in(page, ' id="month-2026-09"')
    # The frozen figure is not a link to something else; today's, in words, is.
    assert september["open"]["value"] == 2 and not september["open"]["url"]
    assert september["open"]["today"] == "1 today (1 fewer than when frozen)"
    assert listed(client, september["open"]["today_url"])[0] == 1
    assert september["all"]["today"] == "2 today (as many as when frozen)"
    assert listed(client, september["all"]["today_url"])[0] == 2
    assert "which discrepancies it counted was not kept: its links open today" in " ".join(
        page.split()
    )


def test_a_frozen_month_costs_the_page_no_query_more(
    client, viewer, frozen_with_drift, django_assert_max_num_queries
):
    client.force_login(viewer)
    tallies_refresh()
    with django_assert_max_num_queries(PAGE_QUERIES):
        assert client.get(reverse("tallies"), SHOWN).status_code == 200


def csv_of(client, params) -> list[dict]:
    response = client.get(reverse("tallies-csv"), params)
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))


def json_of(client, params) -> dict:
    return json.loads(b"".join(client.get(reverse("tallies-json"), params).streaming_content))


def test_the_csv_carries_the_drift_the_page_shows(client, viewer, frozen_with_drift):
    client.force_login(viewer)
    rows = csv_of(client, {"month": "2026-09"})
    (month,) = [row for row in rows if row["dimension"] == "month"]
    assert month["status"] == "frozen" and month["open"] == "3" and month["runs"] == "3"
    drift = {name: value for name, value in month.items() if name.startswith("drift_")}
    assert drift == {
        "drift_runs": "1",
        "drift_resolved_by_rule": "0",
        "drift_explained_by_reviewer": "2",
        "drift_explained": "2",
        "drift_closed_unexplained": "0",
        "drift_open": "-1",
        "drift_without_ticket": "0",
        "drift_unexplained": "-1",
        "drift_total": "1",
    }
    (refund,) = [r for r in rows if r["dimension"] == "agent" and r["value"] == "refund-agent"]
    assert (refund["open"], refund["drift_open"], refund["drift_explained_by_reviewer"]) == (
        "3",
        "-2",
        "2",
    )
    (late,) = [r for r in rows if r["dimension"] == "agent" and r["value"] == "late-agent"]
    assert (late["open"], late["drift_open"]) == ("0", "1")


def test_csv_and_json_name_the_same_counts_the_same(client, viewer, frozen_with_drift):
    client.force_login(viewer)
    header = list(csv_of(client, {"month": "2026-09"})[0])
    (september,) = json_of(client, {"month": "2026-09"})["months"]
    counts = list(september["counts"])
    assert counts == [
        "resolved_by_rule",
        "explained_by_reviewer",
        "explained",
        "closed_unexplained",
        "open",
        "without_ticket",
        "unexplained",
        "total",
    ]
    # Every count of the JSON is a column of the CSV, and its drift a drift_ column.
    assert [name for name in header if name in counts] == counts
    assert [name for name in header if name.startswith("drift_")] == [
        "drift_runs",
        *(f"drift_{name}" for name in september["drift"]["counts"]),
    ]
    assert list(september["drift"]["counts"]) == counts
    assert september["drift"]["counts"]["open"] == -1 and september["drift"]["runs"] == 1
    for key in ("month", "time_zone", "status", "runs", "verdict_groups", "spike"):
        assert key in header and key in september, key
    row = september["breakdowns"]["agent"][0]
    assert list(row["counts"]) == counts and list(row["drift"]) == counts
    # The command's JSON is the download's, byte for byte.
    out = io.StringIO()
    call_command("tallies", "--month", "2026-09", "--json", stdout=out)
    download = client.get(reverse("tallies-json"), {"month": "2026-09"})
    assert out.getvalue() == b"".join(download.streaming_content).decode()


def test_the_command_says_today_s_figures_in_words(frozen_with_drift):
    out = io.StringIO()
    call_command("tallies", "--month", "2026-09", stdout=out)
    said = out.getvalue()
    assert "explained 0 (by a rule 0, by a reviewer 0)" in said  # as frozen
    assert (
        "  today: 4 runs (1 more than when frozen); explained 2 (2 more than when frozen), "
        "unexplained 2 (1 fewer than when frozen)"
    ) in said
