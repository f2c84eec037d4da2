"""The queue's search box (review/search.py): what it finds, and that every kind of
search is answered from an index, never by reading every ticket."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from reviewapp.models import Ticket
from reviewapp.review import search as search_module
from reviewapp.review.changes import ticket_close
from reviewapp.review.queue import filtered_tickets, queue_filters, queue_tickets
from reviewapp.review.search import KEPT_AT_MOST, found_ids
from tests.seeding import seed_tickets

pytestmark = pytest.mark.django_db


def found(text: str) -> set[int]:
    filters = queue_filters({"q": text, "state": "any"})
    return set(filtered_tickets(filters, None).values_list("pk", flat=True))


def tickets_where(**lookup) -> set[int]:
    return set(Ticket.objects.filter(**lookup).values_list("pk", flat=True))


@pytest.fixture
def seeded():
    seed_tickets(200)
    return Ticket.objects.filter(kind="conflict").select_related("run").order_by("pk")[50]


def test_a_fragment_of_an_order_id_finds_its_tickets_whatever_the_case(seeded):
    digits = seeded.entity[9:15]
    assert found(digits) == tickets_where(entity__contains=digits) and seeded.pk in found(digits)
    assert found(f"DER-{seeded.entity[6:12]}") == tickets_where(
        entity__contains=f"der-{seeded.entity[6:12]}"
    )
    # An order id whole finds that order's tickets alone, as before.
    Ticket.objects.filter(pk=seeded.pk + 1).update(entity=f"{seeded.entity}-2")
    assert found(seeded.entity) == tickets_where(entity=seeded.entity)
    assert found(seeded.entity[1:]) == tickets_where(entity__contains=seeded.entity)


def test_a_fragment_of_a_run_id_finds_the_run_and_its_tickets(seeded):
    run_id = seeded.run.run_id
    assert found(run_id) == tickets_where(run__run_id=run_id) and seeded.pk in found(run_id)
    assert found(run_id[4:].upper()) == tickets_where(run__run_id__contains=run_id[4:])
    # A run id whole finds that run's tickets alone, though it begins other runs' ids.
    first = f"{run_id.rsplit('-', 1)[0]}-1"
    assert found(first) == tickets_where(run__run_id=first)
    assert tickets_where(run__run_id__startswith=f"{first}1") - found(first)


def test_a_number_finds_its_ticket(seeded):
    assert found(f"#{seeded.pk}") == {seeded.pk}
    assert seeded.pk in found(str(seeded.pk))
    assert found(f"#{10**9}") == set()


def test_text_in_the_agent_sources_and_family_label_is_found(seeded):
    assert found("STOCK-AG") == tickets_where(agent="stock-agent")
    assert found("rp") == set()  # shorter than three: only a whole value
    assert found("erp") == tickets_where(sources__contains="erp")
    assert found("family 17") == tickets_where(fingerprint_label__startswith="seeded family 17")
    assert found(seeded.fingerprint) == tickets_where(fingerprint=seeded.fingerprint)


def test_a_value_shorter_than_three_characters_is_matched_whole(seeded):
    Ticket.objects.filter(pk=seeded.pk).update(entity="A7")
    Ticket.objects.filter(pk=seeded.pk + 1).update(entity="a77")
    assert found("a7") == {seeded.pk}


def test_wildcards_are_taken_as_they_are(seeded):
    assert found("order-") == tickets_where(entity__isnull=False)
    assert found("order_") == set()
    assert found("%") == set() and found("_") == set() and found("%%%") == set()


def test_the_search_box_says_what_it_matches(client, reviewer, seeded):
    client.force_login(reviewer)
    body = client.get(reverse("ticket-queue")).content.decode()
    header = re.search(r'<input type="search" name="q"[^>]*>', body).group(0)
    assert (
        "A ticket number (#42), a run id or an order id, whole; else text in the run id" in header
    )
    assert "Three characters or more match anywhere in them; fewer match a whole value" in header


SEARCHED_BY = {
    # what is typed -> the index that must answer it
    "number": ("{pk}", "reviewapp_ticket_pkey"),
    "hash": ("#{pk}", "reviewapp_ticket_pkey"),
    "run": ("{run_id}", "run_id_unique"),
    "run fragment": ("{run_tail}", "run_id_trigrams"),
    "order": ("{entity}", "ticket_entity"),
    "order fragment": ("{entity_middle}", "ticket_search_text"),
    "short whole value": ("ab", "ticket_search_text"),
}


def test_every_kind_of_search_is_an_index_hit(reviewer):
    seed_tickets(10_000, assignees=[reviewer])
    ticket = Ticket.objects.filter(kind="conflict").select_related("run").order_by("pk")[5_000]
    values = {
        "pk": ticket.pk,
        "run_id": ticket.run.run_id,
        "run_tail": ticket.run.run_id[-6:],
        "entity": ticket.entity,
        "entity_middle": ticket.entity[9:16],
    }
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE reviewapp_ticket")
        cursor.execute("ANALYZE reviewapp_run")
        # Ten thousand tickets are read faster whole than from an index; a million are not.
        # Without the sequential scan, the plan shows whether an index can answer at all.
        cursor.execute("SET LOCAL enable_seqscan = off")
    for name, (typed, index) in SEARCHED_BY.items():
        text = typed.format(**values)
        for params in ({"state": "any"}, {"unsafe": "yes", "source": "erp"}):
            filters = queue_filters(params)
            # The search kept (its ids), and the queue with a search not kept (its query).
            finding = Ticket.objects.filter(pk__any=found_ids(text, at_most=KEPT_AT_MOST + 1))
            page = queue_tickets(filters, reviewer).filter(pk__any=found_ids(text))[:50]
            counted = filtered_tickets(filters, reviewer).filter(pk__any=found_ids(text))
            for query in (finding.order_by(), page, counted.values("reason").order_by()):
                plan = query.explain(analyze=True)
                assert "Seq Scan" not in plan, (name, plan)
                # What the executed plan did, not its shape (at this size, and with the
                # statistics ANALYZE gathers, PostgreSQL picks among several good ones): the
                # index made for it was read, or another exact id's index answered it.
                assert re.search(rf"(Index Scan on|Scan using) {index}\b", plan) or (
                    index == "reviewapp_ticket_pkey" and "Index Scan" in plan
                ), (name, plan)
            # The queue with the search kept selects the tickets found by their ids, from an
            # index (at this size PostgreSQL sometimes walks the queue's order's index with
            # the ids as a filter: a cost choice; at 1,000,000 tickets it reads them by id).
            searched = queue_filters({**params, "q": text})
            plan = queue_tickets(searched, reviewer)[:50].explain(analyze=True)
            assert "Seq Scan" not in plan, (name, plan)
            assert re.search(r"(Index Cond|Filter): .*\bid = ANY", plan), (name, plan)

        assert ticket.pk in found(text) or name == "short whole value"


def reads_a_trigram(queries) -> bool:
    return any(" LIKE " in query["sql"] for query in queries)


def test_a_search_is_kept_until_a_ticket_is_opened(seeded, reviewer):
    fragment = seeded.entity[9:16]
    with CaptureQueriesContext(connection) as first:
        assert found(fragment) == {seeded.pk}
    with CaptureQueriesContext(connection) as again:
        assert found(fragment) == {seeded.pk}
    assert reads_a_trigram(first.captured_queries)
    assert not reads_a_trigram(again.captured_queries)
    # Work on tickets changes no text a search reads: the search is not made again.
    ticket_close(seeded, revision=seeded.revision, actor=reviewer, resolution="unexplained")
    with CaptureQueriesContext(connection) as after_a_close:
        assert found(fragment) == {seeded.pk}
    assert not reads_a_trigram(after_a_close.captured_queries)
    # A ticket opened is: it is found at once.
    opened = Ticket.objects.get(pk=seeded.pk)
    opened.pk, opened.entity, opened.state = None, f"{seeded.entity}-b", Ticket.State.OPEN
    opened.key = seeded.key[:-2] + "-b"
    opened.save()
    with CaptureQueriesContext(connection) as after_an_open:
        assert found(fragment) == {seeded.pk, opened.pk}
    assert reads_a_trigram(after_an_open.captured_queries)


def test_a_search_finding_more_than_is_kept_is_made_each_time(seeded, monkeypatch):
    monkeypatch.setattr(search_module, "KEPT_AT_MOST", 3)
    common = seeded.entity[:9]  # "order-000": the start of many order ids
    assert len(tickets_where(entity__contains=common)) > 3
    for _ in range(2):
        with CaptureQueriesContext(connection) as searched:
            assert found(common) == tickets_where(entity__contains=common)
        assert reads_a_trigram(searched.captured_queries)


def test_an_exact_id_reads_no_trigram(reviewer):
    """Common trigrams ("ord" of every order id) are in most tickets: an id found whole is
    all that is read."""
    seed_tickets(2_000)
    ticket = Ticket.objects.filter(kind="conflict").order_by("pk")[500]
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE reviewapp_ticket")
        cursor.execute("SET LOCAL enable_seqscan = off")  # as on a large desk
    for typed in (ticket.entity, f"#{ticket.pk}"):
        plan = Ticket.objects.filter(pk__any=found_ids(typed)).explain(analyze=True)
        assert re.search(r"Bitmap Index Scan on ticket_search_text .*\(never executed\)", plan)
    plan = Ticket.objects.filter(pk__any=found_ids(ticket.entity[3:])).explain(analyze=True)
    assert "(never executed)" not in plan.split("ticket_search_text")[1]
