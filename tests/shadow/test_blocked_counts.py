"""Blocked counts under the active policy equal a brute-force count over the stored
verdicts and findings, for every grouping, every window and every drill-down."""

import json
from datetime import timedelta

import pytest
from django.core.paginator import Paginator

from reviewapp.demo.corpus import DEMO_POLICY
from reviewapp.infra.days import Window
from reviewapp.judging.blocking import ItemFilter
from reviewapp.models import Finding, Ticket
from reviewapp.reports.blocked import blocked_counts, blocked_runs, tickets_attach
from tests.seeding import ingest_lines
from tests.shadow import brute
from tests.shadow.conftest import publish

pytestmark = pytest.mark.django_db


def windows():
    today = brute.today()
    return [Window.last(28), Window(today - timedelta(days=9), today - timedelta(days=3))]


@pytest.mark.parametrize("which", [0, 1])
def test_every_count_equals_the_brute_force_count(demo_desk, which):
    window = windows()[which]
    items = brute.active_items(window.since, window.until)
    expected = brute.counts(items)
    found = blocked_counts(window)
    assert found.total == len(items) > 0
    assert found.runs == len({item.run for item in items})
    assert dict(found.by_day) == {day: expected["day"].get(day, 0) for day in window.days}
    assert dict(found.by_week) == {week: expected["week"].get(week, 0) for week in window.weeks}
    for name in ("action", "field", "sources", "agent", "reason"):
        assert dict(found.by[name]) == dict(expected[name]), name
    # Both kinds of blocked action are there: unsafe verdicts and trajectory calls.
    assert {"no-approved-precedence", "missing-prerequisite"} <= set(expected["reason"])
    assert "create_refund" in expected["action"] and "issue_store_credit" in expected["action"]


def test_each_count_drills_down_to_its_runs_and_tickets(demo_desk):
    window = Window.last(28)
    items = brute.active_items(window.since, window.until)
    for item_filter, expected in [
        (ItemFilter(), items),
        (ItemFilter(action="create_refund"), [i for i in items if i.action == "create_refund"]),
        (ItemFilter(field=""), [i for i in items if i.field == ""]),
        (
            ItemFilter(reason="no-approved-precedence", day=items[0].day),
            [i for i in items if i.reason == "no-approved-precedence" and i.day == items[0].day],
        ),
        (ItemFilter(week=items[-1].day), [i for i in items if i.week == items[-1].week]),
    ]:
        runs = {i.run for i in expected}
        found = blocked_runs(window, item_filter)
        assert (found.count(), found.total_items) == (len(runs), len(expected)), item_filter
        pages = Paginator(found, 10)
        seen = [(run.pk, len(run.items)) for n in pages.page_range for run in pages.page(n)]
        assert sorted(seen) == sorted(
            (run, sum(1 for i in expected if i.run == run)) for run in runs
        )
        newest_first = [run.started_at for run in found[:]]
        assert newest_first == sorted(newest_first, reverse=True)
    # Every unsafe verdict of a current judgement has its ticket, and the drill-down names it.
    page = blocked_runs(window, ItemFilter(reason="no-approved-precedence"))[:50]
    tickets_attach(page)
    linked = [item for run in page for item in run.items]
    assert linked and all(item.ticket_id for item in linked)
    tickets = Ticket.objects.in_bulk([item.ticket_id for item in linked])
    assert all(tickets[item.ticket_id].field == item.field for item in linked)


def test_nothing_judged_counts_nothing(db):
    found = blocked_counts(Window.last(7))
    assert (found.total, found.runs, found.judged) == (0, 0, 0)
    assert [n for _, n in found.by_day] == [0] * 7


def test_a_retried_refund_blocks_its_retries_not_its_first_attempt(tmp_path, reviewer, approver):
    # The demo policy: create_refund mutates, one attempt an operation.
    publish(DEMO_POLICY, reviewer, approver)
    run = {"runId": "retried"}
    lines = [
        {**run, "type": "run_started", "agent": "refund-agent", "subject": {"orderId": "o-1"}},
        {**run, "type": "tool_call", "toolCallId": "c0", "tool": "check_refund_eligibility"},
    ] + [
        {**run, "type": "tool_call", "toolCallId": f"c{i}", "tool": "create_refund", "opId": "op"}
        for i in (1, 2, 3)
    ]
    ingest_lines(tmp_path, [json.dumps(line) for line in lines])
    window = Window.last(7)
    found = blocked_counts(window)
    # Three attempts without a key: the first broke nothing as it was made; the two
    # retries are over the budget, and retried without an idempotency key.
    assert dict(found.by["reason"]) == {
        "mutation-budget-exceeded": 2,
        "retry-without-idempotency-key": 2,
    }
    assert len(brute.active_items(window.since, window.until)) == found.total == 4
    # A finding stored before findings kept their blocked calls blocks its whole evidence.
    kept = Finding.objects.get(kind="retry-without-idempotency-key")
    assert kept.evidence == ["c1", "c2", "c3"] and kept.blocked == ["c2", "c3"]
    Finding.objects.create(
        judgement_id=kept.judgement_id,
        run_id=kept.run_id,
        position=9,
        kind="missing-prerequisite",
        evidence=["c1", "c2"],
    )
    assert dict(blocked_counts(window).by["reason"])["missing-prerequisite"] == 2
