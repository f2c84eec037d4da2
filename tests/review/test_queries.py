"""The queue and the ticket page run a bounded number of SQL queries, however many tickets
there are and however many observations a ticket has."""

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from reviewapp.models import Ticket
from tests.seeding import conflict_run, ingest_lines, review_desk_trace, seed_tickets

pytestmark = pytest.mark.django_db

# Session, user, two for permissions, two for the counts' data stamp, the page of tickets,
# the people one may assign to; cold, the counts (kept by PostgreSQL for the unfiltered
# queue; counted, with usernames, for the others; and families) too.
QUEUE_QUERIES_WARM = 8
QUEUE_QUERIES_COLD = 11
# A search: the newest ticket, where the tickets it found are kept (review/search.py), read
# once for the counts and once for the page; cold, the tickets it finds too.
SEARCH_QUERIES_WARM = 1
SEARCH_QUERIES_COLD = 3
# Cold, with finding tickets on the page: the stored calls their findings name, in one.
FINDING_CALLS_QUERIES = 1
# Session, user, two for permissions, the ticket, the data stamp, newer versions that
# would settle it; cold, also the ticket's
# judgement, the run's records, its findings, the audit trail (and comments, when it has
# some), family and run neighbours, the people one may assign to.
TICKET_QUERIES_WARM = 7
TICKET_QUERIES_COLD = 14
HANDOFF_QUERIES = 8


QUEUE_VIEWS = [
    {},
    {"reason": "partial-result", "source": "erp", "unsafe": "yes"},
    {"assignee": "me", "sort": "oldest", "page": "3"},
    {"state": "any", "created_from": "2020-01-01", "field": "amount", "page": "40"},
    {"group": "family"},
    {"state": "any", "outcome": "unexplained", "month": "2026-09", "closed_cause": "replica-lag"},
    {"state": "closed", "closed_from": "2026-01-01", "closed_to": "2026-12-31"},
    # The search box: an order id's fragment, then a ticket number beside filters.
    {"state": "any", "q": "ORDER-000"},
    {"q": "#42", "unsafe": "yes", "source": "erp"},
]


def test_the_queue_is_bounded_on_ten_thousand_tickets(
    client, reviewer, second_reviewer, django_assert_max_num_queries
):
    seed_tickets(10_000, assignees=[reviewer, second_reviewer])
    client.force_login(reviewer)
    for params in QUEUE_VIEWS:
        searched = "q" in params
        cache.clear()  # counted cold: the counts are computed, not read from the cache
        cold = QUEUE_QUERIES_COLD + SEARCH_QUERIES_COLD * searched
        with django_assert_max_num_queries(cold):
            response = client.get(reverse("ticket-queue"), params)
        assert response.status_code == 200
        # Warm: the counts come from the cache, so fewer queries still.
        with django_assert_max_num_queries(QUEUE_QUERIES_WARM + SEARCH_QUERIES_WARM * searched):
            assert client.get(reverse("ticket-queue"), params).status_code == 200
    body = client.get(reverse("ticket-queue")).content.decode()
    assert body.count("data-ticket-url=") == 50
    assert f"{Ticket.objects.filter(state='open').count()} tickets" in body


def queries_for(client, url: str) -> int:
    """Queries of a page seen for the first time (nothing cached)."""
    cache.clear()
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200
    return len(captured)


def test_the_ticket_page_is_bounded_whatever_the_number_of_observations(
    client, reviewer, tmp_path, django_assert_max_num_queries
):
    seed_tickets(10_000, assignees=[reviewer])
    lines = conflict_run("run-narrow", observations=2) + conflict_run("run-wide", observations=400)
    ingest_lines(tmp_path, lines + review_desk_trace())
    narrow = Ticket.objects.get(run__run_id="run-narrow", kind="conflict")
    wide = Ticket.objects.get(run__run_id="run-wide", kind="conflict")
    with_finding = Ticket.objects.get(run__run_id="run-stale", kind="conflict")
    assert len(wide.verdict.evidence) == 400
    client.force_login(reviewer)
    with django_assert_max_num_queries(TICKET_QUERIES_COLD):
        body = client.get(reverse("ticket-detail", args=[wide.pk])).content.decode()
    assert "…and 376 more observations" in body
    with django_assert_max_num_queries(TICKET_QUERIES_WARM):
        assert client.get(reverse("ticket-detail", args=[wide.pk])).status_code == 200
    wide_queries = queries_for(client, reverse("ticket-detail", args=[wide.pk]))
    assert wide_queries == queries_for(client, reverse("ticket-detail", args=[narrow.pk]))
    # A judgement with findings reads them: one query more, never one per finding.
    assert queries_for(client, reverse("ticket-detail", args=[with_finding.pk])) == wide_queries + 1
    with django_assert_max_num_queries(HANDOFF_QUERIES):
        assert client.get(reverse("ticket-handoff", args=[wide.pk])).status_code == 200


def test_the_queue_with_findings_reads_their_calls_in_one_query(
    client, reviewer, tmp_path, django_assert_max_num_queries
):
    seed_tickets(200, assignees=[reviewer])
    ingest_lines(tmp_path, review_desk_trace())
    findings = Ticket.objects.filter(kind="finding", finding__isnull=False)
    assert findings.exists()
    client.force_login(reviewer)
    cache.clear()
    with (
        django_assert_max_num_queries(QUEUE_QUERIES_COLD + FINDING_CALLS_QUERIES),
        CaptureQueriesContext(connection) as captured,
    ):
        body = client.get(reverse("ticket-queue"), {"sort": "newest"}).content.decode()
    assert 'class="values found"' in body
    calls = [q for q in captured.captured_queries if "reviewapp_tracerecord" in q["sql"]]
    assert len(calls) == FINDING_CALLS_QUERIES
    # Warm, the rows are kept rendered: the calls are not read again.
    with CaptureQueriesContext(connection) as captured:
        assert client.get(reverse("ticket-queue"), {"sort": "newest"}).status_code == 200
    assert not [q for q in captured.captured_queries if "reviewapp_tracerecord" in q["sql"]]
