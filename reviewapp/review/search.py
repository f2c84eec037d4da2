"""The queue's search box: which tickets one search finds, from indexes, never by reading
every ticket; and kept, since finding them is most of what a searched queue costs.

What a search finds changes only when a ticket is opened. The text it reads (a ticket's
number, run, entity, agent, sources and family) is written when the ticket opens and never
changed after, save by an audited erasure, which clears the cache (privacy/erasure.py).
So the tickets found are kept under the newest ticket's id, for stamp.CACHE_SECONDS at most
(a ticket committed out of id order is found then, as with the data stamp): a reviewer
closing, claiming or assigning tickets does not make the next search read a trigram index
again, which at 1,000,000 tickets costs more than the rest of the page's queries together
(benchmarks/pages.py). A search that finds more than KEPT_AT_MOST tickets is not kept: its
query is used as it is."""

from __future__ import annotations

import hashlib

from django.contrib.postgres.expressions import ArraySubquery
from django.contrib.postgres.fields import ArrayField
from django.core.cache import cache
from django.db.models import Exists, Func, IntegerField, Max, Q
from django.db.models.functions import Lower
from django.db.models.lookups import Contains

from reviewapp.models import Run, Ticket
from reviewapp.models.review import SearchText
from reviewapp.review.stamp import CACHE_SECONDS

# A fragment shorter than this is matched whole: no trigram of it could find it in an index.
FRAGMENT = 3
# More tickets found than this are not kept: a list that long costs more to send than the
# search it saves.
KEPT_AT_MOST = 5_000
# What the cache holds for a search that found more (it cannot hold None).
_MANY = "many"


def search(found: str) -> Q:
    """The tickets one search box finds (see found_ids), kept while no ticket is opened."""
    kept = _kept(found.strip())
    return Q(pk__any=kept if kept is not None else found_ids(found))


def found_ids(found: str, *, at_most: int | None = None) -> Func:
    """The tickets one search finds, as one array. An exact id first: a ticket's number
    ("#42", or "42"), a run id or an entity (an order id, say), each whole, from their
    indexes. When none is, text in the run id, entity, agent, sources or family (its
    fingerprint or label), whatever the case: any fragment of three characters or more, a
    shorter one whole, from the trigram indexes (models: ticket_search_text,
    run_id_trigrams). `at_most`: each kind of match stops there."""
    found = found.strip()
    ticket = found.removeprefix("#")
    number = int(ticket) if ticket.isdigit() and int(ticket) < 2**31 else None
    if number is not None and found.startswith("#"):
        exact = Q(pk=number)  # "#42" names a ticket, and nothing else
    else:
        runs = Run.objects.filter(run_id=found).order_by()
        exact = Q(entity=found) | Q(run__any=ArraySubquery(runs.values("pk")))
        if number is not None:
            exact |= Q(pk=number)
    exactly = Ticket.objects.filter(exact).order_by()
    lowered = found.lower()
    fragment = len(found) >= FRAGMENT
    text = Q(Contains(SearchText(), lowered if fragment else f"|{lowered}|"))
    if fragment:
        runs = Run.objects.filter(Contains(Lower("run_id"), lowered)).order_by()
        text |= Q(run__any=ArraySubquery(runs.values("pk")))
    # Only when nothing is found whole: PostgreSQL checks that once, before reading any
    # trigram (a common one, "ord" of every order id, is in most tickets).
    by_text = Ticket.objects.filter(text).exclude(Exists(exactly)).order_by()
    exact_ids, text_ids = exactly.values("pk")[:at_most], by_text.values("pk")[:at_most]
    # The tickets found, first and alone, as one array the planner has before it reads any
    # other ticket (else, with the queue's order and page, it may walk every ticket).
    return Func(
        ArraySubquery(exact_ids),
        ArraySubquery(text_ids),
        function="array_cat",
        output_field=ArrayField(IntegerField()),
    )


def _kept(found: str) -> list[int] | None:
    """The ids `found` finds, kept under the newest ticket; None when more than
    KEPT_AT_MOST."""
    newest = Ticket.objects.aggregate(newest=Max("pk"))["newest"] or 0
    key = f"search:{newest}:{hashlib.sha256(found.encode()).hexdigest()}"
    kept = cache.get(key)
    if kept is None:
        ids = list(
            Ticket.objects.filter(pk__any=found_ids(found, at_most=KEPT_AT_MOST + 1))
            .order_by()
            .values_list("pk", flat=True)
        )
        kept = ids if len(ids) <= KEPT_AT_MOST else _MANY
        cache.set(key, kept, CACHE_SECONDS)
    return None if kept == _MANY else kept
