"""The queue: the reviewer's filters (each defined in review/filters.py) as the URL gives
them, which tickets they select, in which order, and their families (tickets of alike
conflicts). Every filter lives in the URL."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any

from django.db.models import Count, Max, Q, QuerySet, Subquery

from reviewapp.models import Ticket
from reviewapp.review import filters as defined
from reviewapp.review.filters import ASSIGNEE_ME, QueueFilter
from reviewapp.review.stamp import DataStamp, cached, data_stamp

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

# How the queue is shown, beside what it selects: its order, and tickets or their families.
SHOWN = {"sort": "newest", "group": ""}


def _defaults() -> dict[str, Any]:
    return {**{item.name: item.default for item in defined.FILTERS}, **SHOWN}


class QueueFilters:
    """What the queue shows: a value for every filter of review/filters.py (FILTERS; ""
    or None for any), the sort and the grouping ("family": families with their sizes
    instead of tickets). Every value comes from the URL; read them as attributes."""

    __slots__ = ("_values",)
    _values: dict[str, Any]

    def __init__(self, **values: Any) -> None:
        defaults = _defaults()
        unknown = set(values) - set(defaults)
        if unknown:
            raise TypeError(f"the queue has no filter {', '.join(sorted(unknown))}")
        object.__setattr__(self, "_values", {**defaults, **values})

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("QueueFilters are read only: replace() makes others")

    def __getstate__(self) -> dict[str, Any]:
        return self._values

    def __setstate__(self, values: dict[str, Any]) -> None:
        object.__setattr__(self, "_values", values)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, QueueFilters) and self._values == other._values

    def __hash__(self) -> int:
        return hash(tuple(self._values.items()))

    def __repr__(self) -> str:
        return f"QueueFilters({self.as_params()!r})"

    def replace(self, **changes: Any) -> QueueFilters:
        return QueueFilters(**{**self._values, **changes})

    def selecting(self) -> QueueFilters:
        """The same filters, shown the default way: what they select, alone."""
        return self.replace(**SHOWN)

    def as_params(self) -> dict[str, str]:
        """The URL parameters that give these filters back (defaults left out)."""
        params = {}
        for name, default in _defaults().items():
            value = self._values[name]
            if value != default:
                # An explicit "any" must survive the round trip where it is not the
                # default (the state: open by default).
                params[name] = (
                    value.isoformat() if isinstance(value, date) else str(value) if value else "any"
                )
        return params


def queue_filters(params: Mapping[str, str]) -> QueueFilters:
    """Read filters from URL parameters; a value that cannot be understood is ignored (a NUL
    character, which no stored value holds and PostgreSQL refuses in a query, included)."""
    values: dict[str, Any] = {}
    for name, default in _defaults().items():
        raw = (params.get(name) or "").strip()
        if not raw or "\x00" in raw:
            continue
        if name == "sort":
            if raw in SORTS:
                values[name] = raw
        elif name == "group":
            if raw == "family":
                values[name] = raw
        elif raw == "any" and default:
            values[name] = ""
        else:
            value = defined.named(name).read(raw)
            if value is not None:
                values[name] = value
    return QueueFilters(**values)


def filtered_tickets(filters: QueueFilters, user) -> QuerySet[Ticket]:
    """The tickets the filters select, unordered."""
    return Ticket.objects.filter(selection(filters, user))


def selection(filters: QueueFilters, user, *, among: Iterable[QueueFilter] = ()) -> Q:
    """What the filters set (among `among`, or all) select, for the user looking."""
    query = Q()
    for item in among or defined.FILTERS:
        value = getattr(filters, item.name)
        if value not in ("", None):
            query &= item.select(value, user)
    return query


def queue_tickets(filters: QueueFilters, user) -> QuerySet[Ticket]:
    """The filtered queue, sorted (read when used: page it, and ask for the columns shown)."""
    return filtered_tickets(filters, user).order_by(*SORTS[filters.sort])


def queue_version(filters: QueueFilters, user, *, stamp: DataStamp | None = None) -> str:
    """A name for the tickets these filters select, as they are now: it changes whenever
    any ticket is opened or changed, so nothing cached under it is ever stale. `stamp`: the
    data stamp read already, if it was."""
    who = user.pk if filters.assignee == ASSIGNEE_ME else None
    selected = filters.selecting().as_params()
    # What changes the tickets a filter selects without any ticket changing (its `newest`).
    besides = [
        item.newest()
        for item in defined.FILTERS
        if item.newest is not None and getattr(filters, item.name) not in ("", None)
    ]
    identity = repr(((stamp or data_stamp()).text, who, besides, sorted(selected.items())))
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
