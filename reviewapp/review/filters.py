"""The queue's filters, each defined once: the one place to add a filter.

A definition says what the filter's value in the URL may be, which tickets a value selects,
its label, how the filter form offers it, whether the queue counts the tickets per value
(a facet, `Counted` and its kinds) and, if it has one, its cell in a queue row. Everything
else reads FILTERS: the queue's filters and what they select (review/queue.py), the counts
per value and the counts PostgreSQL keeps (review/counts.py), the queue's view, its form
and its chips (views/review.py), its rows and their columns (views/review_rows.py).

A new filter of a kind that is here is one line of FILTERS; a counted one is counted and
kept from the next `manage.py migrate` on (counts.py: kept counting, counted again then)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any, ClassVar

from django.contrib.auth import get_user_model
from django.db.models import Max, Q
from django.utils import timezone

from reviewapp.models import (
    PolicyVersion,
    ProspectiveSettlement,
    TallyEntry,
    Ticket,
    policy_name,
)
from reviewapp.review.search import search

ASSIGNEE_ME, ASSIGNEE_NONE = "me", "unassigned"


# --- how a value is read from the URL (None: not understood, so no filter) --------------


def text(raw: str) -> str | None:
    return raw[:200]


def day(raw: str) -> date | None:
    try:
        return date.fromisoformat(raw)
    except ValueError:
        return None


def one_of(*allowed: str) -> Callable[[str], str | None]:
    return lambda raw: raw if raw in allowed else None


_MONTH = re.compile(r"[0-9]{4}-[0-9]{2}")


def month(raw: str) -> str | None:
    """YYYY-MM, a month of the calendar."""
    if not _MONTH.fullmatch(raw) or day(f"{raw}-01") is None:
        return None
    return raw


def public_id(raw: str) -> str | None:
    try:
        return str(uuid.UUID(raw))
    except ValueError:
        return None


def number(raw: str) -> str | None:
    if raw.isascii() and raw.isdigit() and len(raw) < 10:
        return str(int(raw))
    return None


# --- how the filter form offers a filter ----------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Input:
    """The filter's control in the queue's filter form (templates/review/queue.html).

    `type`: "text" (suggesting the counted values, for a counted filter), "search", "date",
    "month", "select" (`choices`: (value, label) pairs, or a function that reads them when
    the form is shown) or "hidden" (shown only while the filter is set)."""

    type: str = "text"
    label: str = ""  # the form's label, when it says more or less than the filter's label
    title: str = ""
    size: int = 14
    placeholder: str = ""
    choices: tuple[tuple[str, str], ...] | Callable[[], list[tuple[str, str]]] = ()


TEXT = Input()
DATE = Input(type="date")


def versions() -> list[tuple[str, str]]:
    numbers = PolicyVersion.objects.order_by("-number").values_list("number", flat=True)
    return [(str(n), policy_name(n)) for n in numbers]


# --- a filter's cell in a queue row ---------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Cell:
    """The ticket's value of `column` (as the queue's row query names it) in a cell of
    class `css` under `heading`, whole in its title (the stylesheet cuts what overflows),
    `empty` when it has none (muted with `muted_empty`)."""

    heading: str
    css: str
    column: str
    empty: str = "—"
    title: bool = True
    muted_empty: bool = False


# --- the filters ----------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class QueueFilter:
    """A filter of the queue: `name` in the URL (and on QueueFilters), `label` on its chip
    and its counts. A value "" (or None) selects every ticket; so does one `read` does not
    understand. `where` gives the tickets a value selects, for the user looking."""

    name: str
    label: str
    where: Callable[[Any, Any], Q]
    read: Callable[[str], Any] = text
    default: Any = ""
    input: Input = TEXT
    cell: Cell | None = None
    # What changes the tickets a value selects without any ticket changing: read into the
    # name of what the queue caches (queue.queue_version) while the filter is set.
    newest: Callable[[], Any] | None = None

    counted = False

    def select(self, value: Any, user: Any) -> Q:
        return self.where(value, user)


@dataclass(frozen=True, kw_only=True)
class Counted(QueueFilter):
    """A filter whose tickets the queue counts per value (a facet): per value of the
    ticket's `column`, its text. PostgreSQL keeps the counts (review/counts.py) from
    `kept_sql`, the value of a ticket row as JSON; a plain GROUP BY counts them from
    `stored`, the same value of a ticket read by the ORM. A value is shown as kept, but a
    person's (kept as the user's id, shown as the username)."""

    column: str
    where: Callable[[Any, Any], Q] = lambda value, user: Q()

    counted = True
    # Several values a ticket (a comma-joined list), each counted.
    many = False
    # A user's id, shown as the username.
    people = False
    # Values the form suggests beside those counted.
    suggestions: ClassVar[tuple[str, ...]] = ()

    def select(self, value: Any, user: Any) -> Q:
        return Q(**{self.column: value})

    def kept_sql(self, row: str) -> str:
        return f"to_jsonb(COALESCE(CAST({row}.{self.column} AS TEXT), ''))"

    def stored(self, value: Any) -> list[str]:
        return ["" if value is None else str(value)]

    def wanted(self, value: Any, user: Any) -> Any:
        """What the kept counts hold for the tickets `value` selects (JSON containment)."""
        return value


@dataclass(frozen=True, kw_only=True)
class CountedEach(Counted):
    """A sorted, comma-joined list (a ticket's sources): a value selects the tickets whose
    list holds it whole, and each element is counted."""

    many = True

    def select(self, value: Any, user: Any) -> Q:
        column = self.column
        return (
            Q(**{column: value})
            | Q(**{f"{column}__startswith": f"{value},"})
            | Q(**{f"{column}__endswith": f",{value}"})
            | Q(**{f"{column}__contains": f",{value},"})
        )

    def kept_sql(self, row: str) -> str:
        return f"to_jsonb(array_remove(string_to_array({row}.{self.column}, ','), ''))"

    def stored(self, value: Any) -> list[str]:
        return [element for element in (value or "").split(",") if element]

    def wanted(self, value: Any, user: Any) -> Any:
        return [value]


@dataclass(frozen=True, kw_only=True)
class CountedYesNo(Counted):
    """A boolean, "yes" or "no" in the URL and in the counts."""

    read: Callable[[str], Any] = one_of("yes", "no")
    input: Input = Input(type="select", choices=(("", "any"), ("yes", "yes"), ("no", "no")))

    def select(self, value: Any, user: Any) -> Q:
        return Q(**{self.column: value == "yes"})

    def kept_sql(self, row: str) -> str:
        return f"to_jsonb(CASE WHEN {row}.{self.column} THEN 'yes' ELSE 'no' END)"

    def stored(self, value: Any) -> list[str]:
        return ["yes" if value else "no"]


@dataclass(frozen=True, kw_only=True)
class CountedPerson(Counted):
    """A user (`column` a foreign key): "me", "unassigned" or a username in the URL, the
    user's id in the kept counts, the username shown."""

    people = True
    suggestions = (ASSIGNEE_ME, ASSIGNEE_NONE)

    def select(self, value: Any, user: Any) -> Q:
        if value == ASSIGNEE_ME:
            return Q(**{self.column: user})
        if value == ASSIGNEE_NONE:
            return Q(**{f"{self.column}__isnull": True})
        return Q(**{f"{self.column}__username": value})

    def kept_sql(self, row: str) -> str:
        return f"to_jsonb(COALESCE(CAST({row}.{self.column}_id AS TEXT), ''))"

    def wanted(self, value: Any, user: Any) -> Any:
        if value == ASSIGNEE_ME:
            return str(user.pk)
        if value == ASSIGNEE_NONE:
            return ""
        found = get_user_model().objects.filter(username=value).values_list("pk", flat=True)
        # Nobody of that name: a value no ticket has.
        return str(found.first() or "none")


def _day_start(moment: date) -> datetime:
    return timezone.make_aware(datetime.combine(moment, time.min))


def _before_day_after(column: str) -> Callable[[date, Any], Q]:
    """The tickets whose `column` is before the end of the day."""

    def where(last: date, user: Any) -> Q:
        # The last day of the calendar has no day after it: it bounds nothing.
        if last >= date.max:
            return Q()
        return Q(**{f"{column}__lt": _day_start(last + timedelta(days=1))})

    return where


OUTCOMES = {
    Ticket.Resolution.EXPLAINED.value: Q(
        state=Ticket.State.CLOSED, resolution=Ticket.Resolution.EXPLAINED
    ),
    Ticket.Resolution.UNEXPLAINED.value: Q(state=Ticket.State.OPEN)
    | Q(state=Ticket.State.CLOSED, resolution=Ticket.Resolution.UNEXPLAINED),
}


def _settled_under(version: str, user: Any) -> Q:
    labelled = ProspectiveSettlement.objects.filter(policy_version__number=int(version))
    return Q(pk__in=labelled.values("ticket_id"))


def _newest_label() -> int | None:
    # Labels are added by a worker without any ticket changing.
    return ProspectiveSettlement.objects.aggregate(newest=Max("pk"))["newest"]


def _in_tally(month: str, user: Any) -> Q:
    counted = TallyEntry.objects.filter(month=date.fromisoformat(f"{month}-01"))
    return Q(pk__in=counted.filter(ticket__isnull=False).values("ticket_id"))


SOURCE = CountedEach(
    name="source",
    label="Source",
    column="sources",
    cell=Cell(heading="Sources", css="sources", column="sources"),
)

# In this order on the form, the chips, the counts and in the URL.
FILTERS: tuple[QueueFilter, ...] = (
    Counted(
        name="state",
        label="State",
        column="state",
        default=Ticket.State.OPEN,
        input=Input(type="select", choices=(("open", "open"), ("closed", "closed"), ("", "any"))),
    ),
    Counted(name="reason", label="Reason", column="reason"),
    Counted(name="finding_kind", label="Finding", column="finding_kind"),
    Counted(name="field", label="Field", column="field"),
    SOURCE,
    Counted(
        name="action",
        label="Action",
        column="action",
        cell=Cell(heading="Action", css="action", column="action"),
    ),
    CountedYesNo(
        name="unsafe",
        label="Unsafe",
        column="unsafe",
        input=Input(
            type="select", choices=(("", "any"), ("yes", "unsafe only"), ("no", "safe only"))
        ),
    ),
    CountedPerson(
        name="assignee",
        label="Assignee",
        column="assignee",
        cell=Cell(
            heading="Holder",
            css="holder",
            column="assignee__username",
            empty=ASSIGNEE_NONE,
            title=False,
            muted_empty=True,
        ),
    ),
    Counted(name="agent", label="Agent", column="agent"),
    QueueFilter(
        name="family",
        label="Family",
        where=lambda fingerprint, user: Q(fingerprint=fingerprint),
        input=Input(size=16),
    ),
    QueueFilter(
        name="created_from",
        label="From",
        read=day,
        input=DATE,
        where=lambda first, user: Q(created_at__gte=_day_start(first)),
    ),
    QueueFilter(
        name="created_to", label="To", read=day, input=DATE, where=_before_day_after("created_at")
    ),
    # "explained" (closed as explained) or "unexplained" (closed as unexplained, or still
    # open: the tallies' two halves). Not "resolution" and "cause": the bulk close posts
    # those beside the filters.
    QueueFilter(
        name="outcome",
        label="Resolution",
        read=one_of(*OUTCOMES),
        where=lambda outcome, user: OUTCOMES[outcome],
        input=Input(
            type="select",
            choices=(
                ("", "any"),
                ("explained", "explained"),
                ("unexplained", "unexplained or open"),
            ),
        ),
    ),
    QueueFilter(
        name="closed_cause",
        label="Cause",
        where=lambda cause, user: Q(cause=cause),
        input=Input(type="select", choices=(("", "any"), *Ticket.Cause.choices)),
    ),
    QueueFilter(
        name="closed_from",
        label="Closed from",
        read=day,
        input=DATE,
        where=lambda first, user: Q(closed_at__gte=_day_start(first)),
    ),
    QueueFilter(
        name="closed_to",
        label="Closed to",
        read=day,
        input=DATE,
        where=_before_day_after("closed_at"),
    ),
    # The tickets counted in that month's tally (reviewapp.reports).
    QueueFilter(
        name="month",
        label="Tally month",
        read=month,
        where=_in_tally,
        input=Input(type="month", title="the tickets counted in that month's tally"),
    ),
    # The one search box: a ticket number, a run id or an entity (an order id) whole; else
    # text in the run id, entity, agent, sources or family (see `search`).
    QueueFilter(
        name="q",
        label="Search",
        where=lambda found, user: search(found),
        input=Input(
            type="search",
            size=18,
            placeholder="#, run, entity, agent, source",
            title="a ticket number (#42), a run id or an order id, whole; else text in the "
            "run id, entity, agent, sources or family: three characters or more match "
            "anywhere, fewer match a whole value; any case",
        ),
    ),
    # The public id of the ingest batch that opened the tickets.
    QueueFilter(
        name="batch",
        label="Batch",
        read=public_id,
        where=lambda batch, user: Q(batch__public_id=batch),
        input=Input(type="hidden"),
    ),
    # A published version's number: the tickets labelled "would be resolved" under it.
    QueueFilter(
        name="settled_under",
        label="Would be resolved under version",
        read=number,
        where=_settled_under,
        newest=_newest_label,
        input=Input(
            type="select",
            label="Would be resolved under",
            title="open tickets a published version would settle (a label: their verdicts stay)",
            choices=lambda: [("", "any version"), *versions()],
        ),
    ),
)

# Read from FILTERS each time, so that what is defined there is all there is.


def counted() -> list[Counted]:
    """The filters the queue counts per value, in order."""
    return [item for item in FILTERS if isinstance(item, Counted)]


def cells() -> list[Cell]:
    """The filters' cells in a queue row, in order."""
    return [item.cell for item in FILTERS if item.cell is not None]


def named(name: str) -> QueueFilter:
    return next(item for item in FILTERS if item.name == name)
