"""A queue filter is defined in one place (reviewapp/review/filters.py). Defined there alone,
a new one is read from the URL, selects its tickets, is offered on the filter form and as a
chip, shows its cell in every row and, when counted, is counted per value: by a GROUP BY,
and by the database too once migrate has made its trigger again (counts.keep_counting)."""

import re

import pytest
from django.db.models import Q
from django.urls import reverse

from reviewapp.infra.roles import as_owner
from reviewapp.models import Ticket
from reviewapp.review import changes, counts, filters, queue

# The database's trigger is made again twice here: the tests commit.
pytestmark = pytest.mark.django_db(transaction=True)

KIND = filters.Counted(
    name="kind",
    label="Kind",
    column="kind",
    cell=filters.Cell(heading="Kind", css="kind", column="kind"),
)
ENTITY = filters.QueueFilter(
    name="entity", label="Entity", where=lambda entity, user: Q(entity=entity)
)


@pytest.fixture
def two_more_filters(monkeypatch):
    """The kind of a ticket (counted, with a cell) and its entity (not counted), defined
    beside the others and nowhere else; the trigger made again, as migrate does."""
    monkeypatch.setattr(filters, "FILTERS", (*filters.FILTERS, KIND, ENTITY))
    with as_owner():
        assert counts.keep_counting(), "a new counted filter makes the trigger again"
    yield
    monkeypatch.undo()
    with as_owner():
        assert counts.keep_counting()


def test_a_filter_defined_once_is_read_selected_offered_and_shown(
    two_more_filters, client, reviewer, desk
):
    finding = Ticket.objects.get(kind="finding")
    client.force_login(reviewer)
    url = reverse("ticket-queue")
    body = client.get(url, {"kind": "finding"}).content.decode()
    assert re.findall(r'data-ticket-url="/tickets/(\d+)/', body) == [str(finding.pk)]
    assert "Kind: <strong>finding</strong>" in body
    assert 'name="kind"' in body and 'list="values-kind"' in body
    assert re.search(
        r'<td class="kind"\s+title="finding"><span class="cell-text">finding</span></td>', body
    )
    assert '<th class="kind">Kind</th>' in body
    assert re.search(r'data-facet="kind">finding</a>\s*<span class="count">1</span>', body)
    entity = client.get(url, {"entity": "order-204", "state": "any"}).content.decode()
    assert "Entity: <strong>order-204</strong>" in entity
    shown = {int(pk) for pk in re.findall(r'data-ticket-url="/tickets/(\d+)/', entity)}
    assert shown == set(Ticket.objects.filter(entity="order-204").values_list("pk", flat=True))


def test_a_counted_filter_defined_once_is_kept_by_the_database(two_more_filters, reviewer, desk):
    def kept_and_counted(params):
        chosen = queue.queue_filters(params)
        counted = counts._count_facets(queue.filtered_tickets(chosen, reviewer))
        if counts._counted_by_the_database(chosen):
            return counts._kept_facets(chosen.state), counted
        assert counts._combinations_kept_by_the_database(chosen)
        return counts._combined_facets(chosen, reviewer), counted

    kept, counted = kept_and_counted({})
    assert kept.counts == counted.counts
    assert dict(kept.values("kind")) == {"conflict": 3, "finding": 1}
    kept, counted = kept_and_counted({"kind": "finding", "state": "any"})
    assert kept.counts == counted.counts and kept.total == 1
    ticket = desk["run-partial"]
    changes.ticket_close(ticket, revision=ticket.revision, actor=reviewer, resolution="unexplained")
    kept, counted = kept_and_counted({})
    assert kept.counts == counted.counts
    assert dict(kept.values("kind")) == {"conflict": 2, "finding": 1}
    assert not counts._combinations_kept_by_the_database(queue.queue_filters({"entity": "x"}))
