"""The queue: which tickets the reviewer's filters select, in which order, and their
families (tickets of alike conflicts). Every filter lives in the URL."""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from datetime import date, datetime, time, timedelta
from typing import Any

from django.db.models import Count, Max, Q, QuerySet, Subquery
from django.utils import timezone

from reviewapp.models import ProspectiveSettlement, TallyEntry, Ticket
from reviewapp.review.stamp import cached, data_stamp

ASSIGNEE_ME, ASSIGNEE_NONE = "me", "unassigned"
SORTS: dict[str, tuple[str, ...]] = {
    "newest": ("-created_at", "-id"),
    "oldest": ("created_at", "id"),
    "unsafe": ("-unsafe", "-created_at", "-id"),
    "reason": ("reason", "-created_at", "-id"),
    "field": ("field", "-created_at", "-id"),
}


SORT_LABELS = {
    "newest": "newest first",
    "oldest": "oldest first",
    "unsafe": "unsafe first",
    "reason": "by reason",
    "field": "by field",
}


# Counted filter dimensions: name in the URL -> model field counted.
FACETS = {
    "state": "state",
    "reason": "reason",
    "finding_kind": "finding_kind",
    "field": "field",
    "action": "action",
    "source": "sources",
    "unsafe": "unsafe",
    "assignee": "assignee",
    "agent": "agent",
}


@dataclass(frozen=True)
class QueueFilters:
    """What the queue shows; every value comes from the URL, "" means any."""

    state: str = Ticket.State.OPEN
    reason: str = ""
    finding_kind: str = ""
    field: str = ""
    action: str = ""
    source: str = ""
    unsafe: str = ""  # "yes", "no" or ""
    assignee: str = ""  # a username, ASSIGNEE_ME, ASSIGNEE_NONE or ""
    agent: str = ""
    family: str = ""  # a fingerprint
    created_from: date | None = None
    created_to: date | None = None
    # "explained" (closed as explained) or "unexplained" (closed as unexplained, or still
    # open: the tallies' two halves). Not "resolution" and "cause": the bulk close posts
    # those beside the filters.
    outcome: str = ""
    closed_cause: str = ""
    closed_from: date | None = None
    closed_to: date | None = None
    # "YYYY-MM": the tickets counted in that month's tally (reviewapp.reports).
    month: str = ""
    # The one search box: a ticket number, an entity (an order id), a run id, a source, an
    # agent or a family's fingerprint, each matched whole (see `search`).
    q: str = ""
    # The public id of the ingest batch that opened the tickets.
    batch: str = ""
    # A published version's number: the tickets labelled "would be resolved" under it.
    settled_under: str = ""
    sort: str = "newest"
    group: str = ""  # "family": families with their sizes instead of tickets

    def as_params(self) -> dict[str, str]:
        """The URL parameters that give these filters back (defaults left out)."""
        params = {}
        for item in fields(self):
            value = getattr(self, item.name)
            if value != item.default:
                params[item.name] = value.isoformat() if isinstance(value, date) else str(value)
        # An explicit "any state" must survive the round trip, since open is the default.
        if self.state == "":
            params["state"] = "any"
        return params


def queue_filters(params: Mapping[str, str]) -> QueueFilters:
    """Read filters from URL parameters; a value that cannot be understood is ignored (a NUL
    character, which no stored value holds and PostgreSQL refuses in a query, included)."""
    values: dict[str, Any] = {}
    for item in fields(QueueFilters):
        raw = (params.get(item.name) or "").strip()
        if not raw or "\x00" in raw:
            continue
        if item.name in DATES:
            try:
                values[item.name] = date.fromisoformat(raw)
            except ValueError:
                continue
        elif item.name == "state":
            values["state"] = "" if raw == "any" else raw
        elif item.name == "sort":
            if raw in SORTS:
                values["sort"] = raw
        elif item.name == "unsafe":
            if raw in ("yes", "no"):
                values["unsafe"] = raw
        elif item.name == "group":
            if raw == "family":
                values["group"] = raw
        elif item.name == "outcome":
            if raw in OUTCOMES:
                values["outcome"] = raw
        elif item.name == "month":
            if _a_month(raw):
                values["month"] = raw
        elif item.name == "batch":
            try:
                values["batch"] = str(uuid.UUID(raw))
            except ValueError:
                continue
        elif item.name == "settled_under":
            if raw.isascii() and raw.isdigit() and len(raw) < 10:
                values["settled_under"] = str(int(raw))
        else:
            values[item.name] = raw[:200]
    return QueueFilters(**values)


DATES = ("created_from", "created_to", "closed_from", "closed_to")
OUTCOMES = {
    Ticket.Resolution.EXPLAINED.value: Q(
        state=Ticket.State.CLOSED, resolution=Ticket.Resolution.EXPLAINED
    ),
    Ticket.Resolution.UNEXPLAINED.value: Q(state=Ticket.State.OPEN)
    | Q(state=Ticket.State.CLOSED, resolution=Ticket.Resolution.UNEXPLAINED),
}
_MONTH = re.compile(r"[0-9]{4}-[0-9]{2}")


def _a_month(text: str) -> bool:
    """Whether the text names a month, YYYY-MM."""
    if not _MONTH.fullmatch(text):
        return False
    try:
        date.fromisoformat(f"{text}-01")
    except ValueError:
        return False
    return True


# Filters that are no dimension of the counts PostgreSQL keeps (review.counts): with any
# of them, the tickets selected are counted.
UNCOUNTED = ("family", *DATES, "outcome", "closed_cause", "month", "q", "batch", "settled_under")


def _contains_source(source: str) -> Q:
    # `sources` is a sorted, comma-joined list: match one whole element.
    return (
        Q(sources=source)
        | Q(sources__startswith=f"{source},")
        | Q(sources__endswith=f",{source}")
        | Q(sources__contains=f",{source},")
    )


def search(text: str) -> Q:
    """The tickets one search box finds: by number ("#42" or "42"), entity (an order id,
    say), run id, source, agent or family fingerprint, each matched whole so that an index
    or a short scan answers it."""
    text = text.strip()
    found = (
        Q(entity=text)
        | Q(run__run_id=text)
        | Q(agent=text)
        | Q(fingerprint=text)
        | _contains_source(text)
    )
    number = text.removeprefix("#")
    if number.isdigit() and int(number) < 2**31:
        found |= Q(pk=int(number))
    return found


def _day_start(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min))


def filtered_tickets(filters: QueueFilters, user) -> QuerySet[Ticket]:
    """The tickets the filters select, unordered."""
    query = counted_selection(filters, user)
    if filters.family:
        query &= Q(fingerprint=filters.family)
    if filters.created_from:
        query &= Q(created_at__gte=_day_start(filters.created_from))
    # The last day of the calendar has no day after it: it bounds nothing.
    if filters.created_to and filters.created_to < date.max:
        query &= Q(created_at__lt=_day_start(filters.created_to + timedelta(days=1)))
    if filters.outcome:
        query &= OUTCOMES[filters.outcome]
    if filters.closed_cause:
        query &= Q(cause=filters.closed_cause)
    if filters.closed_from:
        query &= Q(closed_at__gte=_day_start(filters.closed_from))
    if filters.closed_to:
        query &= Q(closed_at__lt=_day_start(filters.closed_to + timedelta(days=1)))
    if filters.q:
        query &= search(filters.q)
    if filters.batch:
        query &= Q(batch__public_id=filters.batch)
    if filters.settled_under:
        labelled = ProspectiveSettlement.objects.filter(
            policy_version__number=int(filters.settled_under)
        )
        query &= Q(pk__in=labelled.values("ticket_id"))
    if filters.month:
        counted = TallyEntry.objects.filter(month=date.fromisoformat(f"{filters.month}-01"))
        query &= Q(pk__in=counted.filter(ticket__isnull=False).values("ticket_id"))
    return Ticket.objects.filter(query)


def counted_selection(filters: QueueFilters, user) -> Q:
    """The filters on the counted dimensions (FACETS): the same Q selects tickets and the
    kept combinations of their values (TicketCombinationDelta has Ticket's field names)."""
    query = Q()
    for name in ("state", "reason", "finding_kind", "field", "action", "agent"):
        value = getattr(filters, name)
        if value:
            query &= Q(**{name: value})
    if filters.source:
        query &= _contains_source(filters.source)
    if filters.unsafe:
        query &= Q(unsafe=filters.unsafe == "yes")
    if filters.assignee == ASSIGNEE_ME:
        query &= Q(assignee=user)
    elif filters.assignee == ASSIGNEE_NONE:
        query &= Q(assignee__isnull=True)
    elif filters.assignee:
        query &= Q(assignee__username=filters.assignee)
    return query


def queue_tickets(filters: QueueFilters, user) -> QuerySet[Ticket]:
    """The filtered queue, sorted (read when used: page it, and ask for the columns shown)."""
    return filtered_tickets(filters, user).order_by(*SORTS[filters.sort])


def queue_version(filters: QueueFilters, user) -> str:
    """A name for the tickets these filters select, as they are now: it changes whenever
    any ticket is opened or changed, so nothing cached under it is ever stale."""
    who = user.pk if filters.assignee == ASSIGNEE_ME else None
    selection = replace(filters, sort="newest", group="").as_params()
    # Labels are added by a worker without any ticket changing: the newest one counts too.
    labels = (
        ProspectiveSettlement.objects.aggregate(newest=Max("pk"))["newest"]
        if filters.settled_under
        else None
    )
    identity = repr((data_stamp().text, who, labels, sorted(selection.items())))
    return hashlib.sha256(identity.encode()).hexdigest()


@dataclass(frozen=True)
class Family:
    fingerprint: str
    label: str
    size: int
    unsafe: int


def families(filters: QueueFilters, user, *, limit: int, version: str) -> list[Family]:
    """The filtered tickets grouped by fingerprint family, largest first; `version` is
    the filters' queue_version."""

    def count() -> list[Family]:
        rows = (
            filtered_tickets(filters, user)
            .order_by()
            .values("fingerprint")
            .annotate(
                size=Count("id"),
                unsafe=Count("id", filter=Q(unsafe=True)),
                label=Max("fingerprint_label"),
            )
            .order_by("-size", "fingerprint")[:limit]
        )
        return [Family(r["fingerprint"], r["label"], r["size"], r["unsafe"]) for r in rows]

    return cached(f"tickets:families:{limit}:{version}", count)


def _beyond(ticket: Ticket, order: tuple[str, ...]) -> Q:
    """The tickets that come after `ticket` in `order` (names as order_by takes them): a
    keyset, with the first key's bound alone first so that an index on it can be used."""
    first = order[0].lstrip("-")
    bound = Q(
        **{f"{first}__{'lte' if order[0].startswith('-') else 'gte'}": getattr(ticket, first)}
    )
    after = Q()
    equal = Q()
    for name in order:
        field = name.lstrip("-")
        step = "lt" if name.startswith("-") else "gt"
        after |= equal & Q(**{f"{field}__{step}": getattr(ticket, field)})
        equal &= Q(**{field: getattr(ticket, field)})
    return bound & after


def _reversed(order: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(name[1:] if name.startswith("-") else f"-{name}" for name in order)


def neighbours(filters: QueueFilters, user, ticket: Ticket) -> tuple[int | None, int | None]:
    """The ids of the tickets just before and just after `ticket` in the queue these
    filters show (whether `ticket` is still in it or not: closed just now, say), in one
    query."""
    order = SORTS[filters.sort]
    backwards = _reversed(order)
    selected = filtered_tickets(filters, user).exclude(pk=ticket.pk)
    preceding = selected.filter(_beyond(ticket, backwards)).order_by(*backwards)
    following = selected.filter(_beyond(ticket, order)).order_by(*order)
    found = (
        Ticket.objects.filter(pk=ticket.pk)
        .annotate(
            preceding=Subquery(preceding.values("pk")[:1]),
            following=Subquery(following.values("pk")[:1]),
        )
        .values_list("preceding", "following")
        .first()
    )
    return found if found else (None, None)
