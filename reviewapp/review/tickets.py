"""Working tickets: the queue (filters, sorting, counts per filter value, families) and every
change a reviewer makes (claim, assign, comment, close, reopen, one at a time or in bulk).

Concurrency is optimistic: a change names the revision its author saw, and the one guarded
UPDATE (`WHERE id = X AND revision = N`) lets exactly one of two simultaneous changes win.
The loser is told who changed the ticket and how, never silently overwritten. Every change
appends an AuditEvent with the values before and after it.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import date, datetime, time, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.cache import cache
from django.db import connection, transaction
from django.db.models import Count, F, Max, OuterRef, Q, QuerySet, Subquery, Sum
from django.utils import timezone

from reviewapp.accounts.roles import WORK_TICKET
from reviewapp.forms import whole_number
from reviewapp.models import (
    AuditEvent,
    Finding,
    Judgement,
    PolicyVersion,
    Run,
    Ticket,
    TicketCombinationDelta,
    TicketComment,
    TicketFacetDelta,
    Verdict,
)

# The causes a reviewer is offered; POLICY is given when a newer policy version settles tickets.
REVIEWER_CAUSES = [
    (value, label) for value, label in Ticket.Cause.choices if value != Ticket.Cause.POLICY
]
REVIEWER_CAUSE_VALUES = frozenset(value for value, _ in REVIEWER_CAUSES)
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
CACHE_SECONDS = 60


# --- the queue --------------------------------------------------------------------


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
    """Read filters from URL parameters; a value that cannot be understood is ignored."""
    values: dict[str, Any] = {}
    for item in fields(QueueFilters):
        raw = (params.get(item.name) or "").strip()
        if not raw:
            continue
        if item.name in ("created_from", "created_to"):
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
        else:
            values[item.name] = raw[:200]
    return QueueFilters(**values)


def _contains_source(source: str) -> Q:
    # `sources` is a sorted, comma-joined list: match one whole element.
    return (
        Q(sources=source)
        | Q(sources__startswith=f"{source},")
        | Q(sources__endswith=f",{source}")
        | Q(sources__contains=f",{source},")
    )


def _day_start(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min))


def filtered_tickets(filters: QueueFilters, user) -> QuerySet[Ticket]:
    """The tickets the filters select, unordered."""
    query = _counted_selection(filters, user)
    if filters.family:
        query &= Q(fingerprint=filters.family)
    if filters.created_from:
        query &= Q(created_at__gte=_day_start(filters.created_from))
    if filters.created_to:
        query &= Q(created_at__lt=_day_start(filters.created_to + timedelta(days=1)))
    return Ticket.objects.filter(query)


def _counted_selection(filters: QueueFilters, user) -> Q:
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


def queue_page(filters: QueueFilters, user, *, number: int, per_page: int) -> QuerySet[Ticket]:
    """One page of the filtered queue, sorted (read when used: ask for the columns shown)."""
    start = (max(number, 1) - 1) * per_page
    tickets = filtered_tickets(filters, user).order_by(*SORTS[filters.sort])
    return tickets[start : start + per_page]


@dataclass(frozen=True)
class Facets:
    """How many of the filtered tickets have each value of each dimension."""

    total: int
    counts: dict[str, list[tuple[str, int]]]
    # Names the filtered tickets as they are now (see queue_version): what is cached, here
    # and in the queue's template, is cached under it.
    version: str = ""

    def values(self, name: str) -> list[tuple[str, int]]:
        return self.counts.get(name, [])


@dataclass(frozen=True)
class DataStamp:
    """The tickets, judgements and policy versions as they are now, named in one short
    statement.

    Its text changes whenever a ticket is opened (a new id) or changed (every change
    appends an audit event), a run is judged again (what a ticket's row says of it), or a
    policy version is published: what is cached under it is never stale. A row committed
    out of id order (two ingest workers at once) is the only miss, and CACHE_SECONDS bounds
    it. A page's forms send it back, so that a bulk change applies to the tickets as that
    page showed them (see revisions_as_seen)."""

    newest_ticket: int
    newest_event: int
    newest_judgement: int
    # 0 until a version is published; only tickets judged under an older one can be settled.
    newest_policy_number: int

    @property
    def text(self) -> str:
        return "-".join(
            str(n)
            for n in (
                self.newest_ticket,
                self.newest_event,
                self.newest_judgement,
                self.newest_policy_number,
            )
        )

    @classmethod
    def from_text(cls, text: str) -> DataStamp:
        parts = text.split("-")
        if len(parts) != 4 or not all(part.isascii() and part.isdecimal() for part in parts):
            raise TicketActionError("the page was too old or damaged: load it again and retry")
        return cls(*(int(part) for part in parts))


def data_stamp() -> DataStamp:
    newest = ", ".join(
        f"(SELECT MAX({column}) FROM {model._meta.db_table})"
        for model, column in (
            (Ticket, "id"),
            (AuditEvent, "id"),
            (Judgement, "id"),
            (PolicyVersion, "number"),
        )
    )
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {newest}")
        return DataStamp(*(value or 0 for value in cursor.fetchone()))


def queue_version(filters: QueueFilters, user) -> str:
    """A name for the tickets these filters select, as they are now: it changes whenever
    any ticket is opened or changed, so nothing cached under it is ever stale."""
    who = user.pk if filters.assignee == ASSIGNEE_ME else None
    selection = replace(filters, sort="newest", group="").as_params()
    identity = repr((data_stamp().text, who, sorted(selection.items())))
    return hashlib.sha256(identity.encode()).hexdigest()


def _cached(key: str, compute: Callable[[], Any]) -> Any:
    # Counting reads every filtered ticket, the slow part of the queue at 100,000 tickets.
    found = cache.get(key)
    if found is None:
        found = compute()
        cache.set(key, found, CACHE_SECONDS)
    return found


def facet_counts(filters: QueueFilters, user) -> Facets:
    """Counts per value of every filter dimension, within the current filters."""
    version = queue_version(filters, user)

    def count() -> Facets:
        if _counted_by_the_database(filters):
            return replace(_kept_facets(filters.state), version=version)
        if _combinations_kept_by_the_database(filters):
            return replace(_combined_facets(filters, user), version=version)
        return replace(_count_facets(filtered_tickets(filters, user)), version=version)

    return _cached(f"tickets:facets:{version}", count)


def _counted_by_the_database(filters: QueueFilters) -> bool:
    """PostgreSQL keeps the counts of the queue filtered by state alone (the desk's home),
    as tickets change (see TicketFacetDelta)."""
    only_state = replace(filters, state=QueueFilters.state, sort="newest", group="")
    return connection.vendor == "postgresql" and only_state == QueueFilters()


def _combinations_kept_by_the_database(filters: QueueFilters) -> bool:
    """PostgreSQL keeps how many tickets have each combination of the counted dimensions'
    values (see TicketCombinationDelta): filters on those alone are counted from them. A
    family or a date range is no dimension of theirs: those count the tickets selected."""
    return (
        connection.vendor == "postgresql"
        and not filters.family
        and filters.created_from is None
        and filters.created_to is None
    )


# Past this many rows making up the kept counts, reading folds them into one row per value.
FOLD_FACET_ROWS_AFTER = 1000


def _kept_facets(state: str) -> Facets:
    """The counts PostgreSQL keeps for the tickets in `state` ("" for any), one short read."""
    states = [state] if state else list(Ticket.State.values)
    deltas, users = TicketFacetDelta._meta.db_table, get_user_model()._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT d.dimension, COALESCE(MAX(u.username), d.value), SUM(d.tickets), COUNT(*) "
            f"FROM {deltas} AS d LEFT JOIN {users} AS u "
            f"ON d.dimension = 'assignee' AND CAST(u.id AS TEXT) = d.value "
            f"WHERE d.state = ANY(%s) GROUP BY d.dimension, d.value",
            [states],
        )
        found = cursor.fetchall()
    if sum(rows for *_, rows in found) > FOLD_FACET_ROWS_AFTER:
        fold_facet_deltas()
    tallies: dict[str, Counter[str]] = {name: Counter() for name in FACETS}
    for dimension, value, n, _ in found:
        if n and dimension in tallies:
            if dimension == "assignee" and not value:
                value = ASSIGNEE_NONE
            tallies[dimension][value] += n
    return _facets(tallies)


def fold_kept_counts() -> None:
    """Periodic (beat): keep the counts PostgreSQL keeps compact, so that a queue read
    seldom has to fold them itself; while an ingest opens tickets it would, often."""
    if connection.vendor != "postgresql":
        return
    fold_facet_deltas()
    fold_combination_deltas()


def fold_facet_deltas() -> None:
    """Replace the rows of the kept counts by one row per value with their sum. The rows of
    transactions still running are not seen, so not folded: they are summed later."""
    with transaction.atomic(), connection.cursor() as cursor:
        # One fold at a time; one already running does the work.
        cursor.execute("SELECT pg_try_advisory_xact_lock(hashtext('crosscheck_fold_facets'))")
        if not cursor.fetchone()[0]:
            return
        deltas = TicketFacetDelta._meta.db_table
        cursor.execute(
            f"WITH folded AS (DELETE FROM {deltas} RETURNING state, dimension, value, tickets) "
            f"INSERT INTO {deltas} (state, dimension, value, tickets) "
            f"SELECT state, dimension, value, SUM(tickets) FROM folded "
            f"GROUP BY state, dimension, value HAVING SUM(tickets) <> 0"
        )


# Past this many rows read beyond the combinations they add up to, reading folds them.
FOLD_COMBINATION_ROWS_AFTER = 1000


def _combined_facets(filters: QueueFilters, user) -> Facets:
    """The counts within `filters` (on counted dimensions only), summed from the kept
    combinations they select: one statement that reads those combinations once."""
    columns = list(FACETS.values())
    combinations = (
        TicketCombinationDelta.objects.filter(_counted_selection(filters, user))
        .values(*columns)
        .annotate(net=Sum("tickets"), kept_rows=Count("id"))
        .values_list(*columns, "net", "kept_rows")
    )
    inner, params = combinations.query.sql_with_params()
    grouped = _per_dimension(
        inner,
        params,
        more=("net", "kept_rows"),
        # Each combination's count, the rows it was summed from, and whether it is one.
        aggregates="CAST(SUM(net) AS BIGINT), CAST(SUM(kept_rows) AS BIGINT), "
        "COUNT(*) FILTER (WHERE net <> 0)",
    )
    # Every row read is in the first dimension's (state's) groups once.
    read = sum(kept_rows for index, _, (_, kept_rows, _) in grouped if index == 0)
    combined = sum(live for index, _, (_, _, live) in grouped if index == 0)
    if read - combined > FOLD_COMBINATION_ROWS_AFTER:
        fold_combination_deltas()
    return _facets_of_rows([(index, value, net) for index, value, (net, _, _) in grouped if net])


def fold_combination_deltas() -> None:
    """Replace the rows of the kept combinations by one row per combination with their sum
    (as fold_facet_deltas does for the counts per value)."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(hashtext('crosscheck_fold_combinations'))")
        if not cursor.fetchone()[0]:
            return
        deltas = TicketCombinationDelta._meta.db_table
        combination = (
            "state, reason, finding_kind, field, action, sources, unsafe, assignee_id, agent"
        )
        cursor.execute(
            f"WITH folded AS (DELETE FROM {deltas} RETURNING {combination}, tickets) "
            f"INSERT INTO {deltas} ({combination}, tickets) "
            f"SELECT {combination}, SUM(tickets) FROM folded "
            f"GROUP BY {combination} HAVING SUM(tickets) <> 0"
        )
        # Every row was rewritten: the planner's idea of the table is told at once, so the
        # next reads use the index, not what an empty table once looked like.
        cursor.execute(f"ANALYZE {deltas}")


def _facet_rows(tickets: QuerySet[Ticket]) -> list[tuple[int, str | None, int]]:
    """(index in FACETS, value as text, count) for every dimension of FACETS, from one
    statement that reads the filtered tickets once. PostgreSQL counts every dimension in
    that one pass (GROUPING SETS, twice as fast at 100,000 tickets); other databases count
    a materialized copy once per dimension."""
    width = len(FACETS)
    inner, params = tickets.order_by().values_list(*FACETS.values()).query.sql_with_params()
    if connection.vendor == "postgresql":
        grouped = _per_dimension(inner, params, aggregates="COUNT(*)")
        return [(index, value, n) for index, value, (n,) in grouped]
    columns = ", ".join(f"c{i}" for i in range(width))
    counts = " UNION ALL ".join(
        f"SELECT {i}, CAST(c{i} AS TEXT), COUNT(*) FROM filtered GROUP BY c{i}"
        for i in range(width)
    )
    with connection.cursor() as cursor:
        cursor.execute(f"WITH filtered ({columns}) AS MATERIALIZED ({inner}) {counts}", params)
        return cursor.fetchall()


def _per_dimension(
    inner: str, params, *, aggregates: str, more: tuple[str, ...] = ()
) -> list[tuple[int, str | None, tuple]]:
    """(index in FACETS, value as text, `aggregates`) for every value of every dimension of
    FACETS in the rows of `inner` (their columns, then `more`), from one PostgreSQL
    statement that groups them once per dimension (GROUPING SETS)."""
    width = len(FACETS)
    columns = ", ".join([*(f"c{i}" for i in range(width)), *more])
    grouped = ", ".join(f"c{i}" for i in range(width))
    texts = ", ".join(f"CAST(c{i} AS TEXT)" for i in range(width))
    sets = ", ".join(f"(c{i})" for i in range(width))
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT GROUPING({grouped}), {texts}, {aggregates} "
            f"FROM ({inner}) AS selected ({columns}) GROUP BY GROUPING SETS ({sets})",
            params,
        )
        found = cursor.fetchall()
    rows = []
    for grouping, *values in found:
        # GROUPING() clears the bit of the one column this row is grouped by.
        index = next(i for i in range(width) if not grouping & (1 << (width - 1 - i)))
        rows.append((index, values[index], tuple(values[width:])))
    return rows


def _count_facets(tickets: QuerySet[Ticket]) -> Facets:
    return _facets_of_rows(_facet_rows(tickets))


def _facets_of_rows(rows: list[tuple[int, str | None, int]]) -> Facets:
    """Facets from (index in FACETS, value as text, count) rows."""
    names = list(FACETS)
    tallies: dict[str, Counter[str]] = {name: Counter() for name in names}
    for index, value, n in rows:
        tallies[names[index]][value or ""] += n
    tallies["source"] = _each_source(tallies["source"])
    tallies["unsafe"] = Counter(
        {_YES_NO[value]: n for value, n in tallies["unsafe"].items() if value in _YES_NO}
    )
    usernames = _usernames(int(v) for v in tallies["assignee"] if v)
    tallies["assignee"] = Counter(
        {
            (usernames.get(int(v), v) if v else ASSIGNEE_NONE): n
            for v, n in tallies["assignee"].items()
        }
    )
    return _facets(tallies)


def _usernames(user_ids: Iterable[int]) -> dict[int, str]:
    """Usernames by id, kept a minute like the workers: assignees are few and seldom
    renamed, and every count after a ticket change needs them."""
    wanted = sorted(set(user_ids))
    if not wanted:
        return {}
    key = hashlib.sha256(repr(wanted).encode()).hexdigest()

    def read() -> dict[int, str]:
        users = get_user_model().objects.filter(pk__in=wanted)
        return dict(users.values_list("pk", "username"))

    return _cached(f"tickets:usernames:{key}", read)


def _facets(tallies: dict[str, Counter[str]]) -> Facets:
    """Facets from counts per value of each dimension, as the queue shows them."""
    return Facets(
        total=sum(tallies["state"].values()),
        counts={
            name: sorted(tally.items(), key=lambda item: (-item[1], item[0]))
            for name, tally in tallies.items()
        },
    )


# How each database spells a boolean cast to text.
_YES_NO = {"true": "yes", "1": "yes", "false": "no", "0": "no"}


def _each_source(by_combination: Counter[str]) -> Counter[str]:
    """Counts per source from counts per sorted, comma-joined combination of sources."""
    tally: Counter[str] = Counter()
    for combination, n in by_combination.items():
        for source in combination.split(","):
            if source:
                tally[source] += n
    return tally


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

    return _cached(f"tickets:families:{limit}:{version}", count)


@dataclass(frozen=True)
class LaterJudgement:
    """What the run's current judgement says of a ticket opened under an earlier one (its
    run got more lines since, or was judged under a newer policy)."""

    policy_number: int
    # A conflict ticket: the verdict for the same entity and field now (kind "" if none).
    kind: str
    reason: str
    action: str
    # A finding ticket: whether the run is still found to have it.
    still_found: bool


def judged_again(opened_by: int | None, current: int | None) -> bool:
    """Whether a ticket's run has a current judgement other than the one that opened it."""
    return opened_by is not None and current is not None and opened_by != current


def later_judgement(ticket: Ticket) -> LaterJudgement | None:
    """None while the judgement that opened the ticket is its run's current one (`ticket`
    comes with its run)."""
    current = ticket.run.current_judgement_id
    if not judged_again(ticket.judgement_id, current):
        return None
    policy_number = Judgement.objects.values_list("policy_number", flat=True).get(pk=current)
    if ticket.kind == Ticket.Kind.FINDING:
        found = Finding.objects.filter(judgement_id=current, kind=ticket.finding_kind).exists()
        return LaterJudgement(policy_number, "", "", "", found)
    verdict = (
        Verdict.objects.filter(judgement_id=current, entity=ticket.entity, field=ticket.field)
        .values("kind", "reason", "action")
        .first()
    ) or {}
    return LaterJudgement(
        policy_number,
        verdict.get("kind") or "",
        verdict.get("reason") or "",
        verdict.get("action") or "",
        False,
    )


@dataclass(frozen=True)
class RelatedTickets:
    """Other tickets of a ticket's family, newest first, and of its run, by id."""

    family: list[dict[str, Any]]
    same_run: list[dict[str, Any]]


def related_tickets(ticket: Ticket, *, shown: int) -> RelatedTickets:
    """Up to `shown` other tickets of the ticket's run, and of its family one more than
    `shown` (which tells there are more), in one statement."""
    tickets, runs = Ticket._meta.db_table, Run._meta.db_table
    columns = "t.id, t.reason, t.state, t.field, t.finding_kind"
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT * FROM (SELECT 1, {columns}, r.run_id FROM {tickets} t "
            f"JOIN {runs} r ON r.id = t.run_id WHERE t.fingerprint = %s AND t.id <> %s "
            "ORDER BY t.created_at DESC, t.id DESC LIMIT %s) AS family UNION ALL "
            f"SELECT * FROM (SELECT 2, {columns}, '' FROM {tickets} t "
            "WHERE t.run_id = %s AND t.id <> %s ORDER BY t.id LIMIT %s) AS same_run",
            [ticket.fingerprint, ticket.pk, shown + 1, ticket.run_id, ticket.pk, shown],
        )
        rows = cursor.fetchall()
    names = ("pk", "reason", "state", "field", "finding_kind", "run__run_id")
    found = [(group, dict(zip(names, values, strict=True))) for group, *values in rows]
    return RelatedTickets(
        family=[row for group, row in found if group == 1],
        same_run=[row for group, row in found if group == 2],
    )


def ticket_workers() -> list[str]:
    """Usernames of the people who may work tickets, for the assign menus. Kept a minute:
    assigning checks the permission again, so a stale name can grant nothing."""

    def read() -> list[str]:
        app_label, codename = WORK_TICKET.split(".")
        permission = Permission.objects.filter(content_type__app_label=app_label, codename=codename)
        users = (
            get_user_model()
            .objects.filter(is_active=True)
            .filter(
                Q(groups__permissions__in=permission)
                | Q(user_permissions__in=permission)
                | Q(is_superuser=True)
            )
            .distinct()
            .order_by("username")
        )
        return [user.get_username() for user in users]

    return _cached("tickets:workers", read)


# --- changes ----------------------------------------------------------------------


class TicketActionError(ValueError):
    """A change that makes no sense for the ticket as it is (closing a closed ticket)."""


@dataclass(frozen=True)
class Conflict:
    """A change that lost: the ticket moved on since its author saw it."""

    ticket: Ticket
    last_event: AuditEvent | None

    def __str__(self) -> str:
        event = self.last_event
        if event is None:
            return f"Ticket #{self.ticket.pk} changed since you saw it (now revision {self.ticket.revision}); nothing was applied."
        who = event.actor.get_username() if event.actor else "the system"
        when = timezone.localtime(event.created_at).strftime("%H:%M:%S")
        return (
            f"{who} {describe(event)} at {when}: ticket #{self.ticket.pk} is now at revision "
            f"{self.ticket.revision}, so your change was not applied."
        )


class TicketConflict(Exception):
    def __init__(self, conflict: Conflict):
        super().__init__(str(conflict))
        self.conflict = conflict


@dataclass
class Outcome:
    """What a change did to each ticket it named."""

    changed: list[int] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)
    refused: dict[int, str] = field(default_factory=dict)

    def summary(self, verb: str) -> str:
        parts = [f"{len(self.changed)} ticket{'s' if len(self.changed) != 1 else ''} {verb}"]
        if self.conflicts:
            parts.append(f"{len(self.conflicts)} changed by someone else first, left alone")
        if self.refused:
            parts.append(f"{len(self.refused)} skipped ({next(iter(self.refused.values()))})")
        return "; ".join(parts) + "."


def _audited(ticket: Ticket) -> dict[str, Any]:
    """The audited view of a ticket: what an event's "before" and "after" record."""
    return {
        "state": ticket.state,
        "assignee": ticket.assignee.get_username() if ticket.assignee else None,
        "resolution": ticket.resolution,
        "cause": ticket.cause,
        "cause_text": ticket.cause_text,
    }


VERB_TEXT = {
    "claimed": "claimed it",
    "assigned": "assigned it",
    "unassigned": "unassigned it",
    "closed": "closed it",
    "reopened": "reopened it",
    "commented": "commented",
}


def describe(event: AuditEvent) -> str:
    """An audit event in words, e.g. "assigned it to ravi" or "closed it as explained"."""
    after = event.data.get("after", {})
    text = VERB_TEXT.get(event.verb, event.verb)
    if event.verb == "assigned" and after.get("assignee"):
        text += f" to {after['assignee']}"
    if event.verb == "closed" and after.get("resolution"):
        text += f" as {after['resolution']}"
        if after.get("cause"):
            text += f" ({Ticket.Cause(after['cause']).label})"
    return text


Check = Callable[[Ticket], str | None]


def _change(
    expected: Mapping[int, int],
    *,
    actor,
    verb: str,
    changes: dict[str, Any],
    refuse: Check,
) -> Outcome:
    """Apply `changes` to each ticket still at its expected revision and not refused,
    one guarded UPDATE each, and audit every change; in one transaction."""
    outcome = Outcome()
    now = timezone.now()
    with transaction.atomic():
        tickets = (
            Ticket.objects.select_related("assignee").filter(pk__in=list(expected)).order_by("pk")
        )
        events = []
        lost = []
        for ticket in tickets:
            if ticket.revision != expected[ticket.pk]:
                lost.append(ticket.pk)
                continue
            reason = refuse(ticket)
            if reason:
                outcome.refused[ticket.pk] = reason
                continue
            updated = Ticket.objects.filter(pk=ticket.pk, revision=ticket.revision).update(
                **changes, revision=F("revision") + 1, updated_at=now
            )
            if not updated:
                lost.append(ticket.pk)
                continue
            before = _audited(ticket)
            for name, value in changes.items():
                setattr(ticket, name, value)
            events.append(
                AuditEvent(
                    actor=actor,
                    verb=verb,
                    ticket=ticket,
                    target=f"ticket {ticket.pk}",
                    data={
                        "revision": ticket.revision + 1,
                        "before": before,
                        "after": _audited(ticket),
                    },
                )
            )
            outcome.changed.append(ticket.pk)
        AuditEvent.objects.bulk_create(events)
    outcome.conflicts = _conflicts(lost)
    return outcome


def _conflicts(ticket_ids: list[int]) -> list[Conflict]:
    """Who changed these tickets last, read after their change won (so it is committed)."""
    if not ticket_ids:
        return []
    # The change that won, not a comment made since (comments change no revision).
    last_event = (
        AuditEvent.objects.filter(ticket=OuterRef("pk"))
        .exclude(verb="commented")
        .order_by("-id")
        .values("id")[:1]
    )
    tickets = list(
        Ticket.objects.select_related("assignee")
        .filter(pk__in=ticket_ids)
        .annotate(last_event_id=Subquery(last_event))
        .order_by("pk")
    )
    events = AuditEvent.objects.select_related("actor").in_bulk(
        [t.last_event_id for t in tickets if t.last_event_id]
    )
    return [Conflict(ticket, events.get(ticket.last_event_id)) for ticket in tickets]


def _single(ticket: Ticket, outcome: Outcome) -> Ticket:
    """The result of a one-ticket change: the ticket as changed, or why it was not."""
    if outcome.conflicts:
        raise TicketConflict(outcome.conflicts[0])
    if outcome.refused:
        raise TicketActionError(outcome.refused[ticket.pk])
    return Ticket.objects.select_related("assignee", "closed_by").get(pk=ticket.pk)


def _require_open(ticket: Ticket) -> str | None:
    return None if ticket.state == Ticket.State.OPEN else "the ticket is closed"


def claim(ticket: Ticket, *, revision: int, actor) -> Ticket:
    def refuse(current: Ticket) -> str | None:
        if current.assignee_id == actor.pk:
            return "you already hold this ticket"
        if current.assignee_id is not None:
            return f"{current.assignee.get_username()} holds this ticket; assign it to take it over"
        return _require_open(current)

    outcome = _change(
        {ticket.pk: revision},
        actor=actor,
        verb="claimed",
        changes={"assignee": actor},
        refuse=refuse,
    )
    return _single(ticket, outcome)


def _check_assignee(assignee) -> None:
    if assignee is not None and not assignee.has_perm(WORK_TICKET):
        raise TicketActionError(f"{assignee.get_username()} may not work tickets")


def assign_many(expected: Mapping[int, int], *, actor, assignee) -> Outcome:
    """Assign (or, with None, unassign) each ticket still at its expected revision."""
    _check_assignee(assignee)
    assignee_id = assignee.pk if assignee else None

    def refuse(current: Ticket) -> str | None:
        if current.assignee_id == assignee_id:
            return f"already with {assignee.get_username()}" if assignee else "already unassigned"
        return None

    verb = "assigned" if assignee else "unassigned"
    return _change(expected, actor=actor, verb=verb, changes={"assignee": assignee}, refuse=refuse)


def assign(ticket: Ticket, *, revision: int, actor, assignee) -> Ticket:
    return _single(ticket, assign_many({ticket.pk: revision}, actor=actor, assignee=assignee))


def _closing(resolution: str, cause: str, cause_text: str) -> dict[str, Any]:
    cause_text = cause_text.strip()
    if resolution == Ticket.Resolution.EXPLAINED:
        # "Settled by a newer policy version" is recorded only by close_settled_by_policy.
        if cause not in REVIEWER_CAUSE_VALUES:
            raise TicketActionError("closing as explained needs one of the causes offered")
        if cause == Ticket.Cause.OTHER and not cause_text:
            raise TicketActionError("the cause “other” needs a few words saying what it was")
    elif resolution == Ticket.Resolution.UNEXPLAINED:
        cause = ""
    else:
        raise TicketActionError("close as explained or unexplained")
    return {"resolution": resolution, "cause": cause, "cause_text": cause_text}


def close_many(
    expected: Mapping[int, int], *, actor, resolution: str, cause: str = "", cause_text: str = ""
) -> Outcome:
    return _close(expected, actor, _closing(resolution, cause, cause_text))


def close_settled_by_policy(expected: Mapping[int, int], *, actor, version_number: int) -> Outcome:
    """Close as explained by a newer policy version, the one cause no reviewer picks."""
    closing = {
        "resolution": Ticket.Resolution.EXPLAINED,
        "cause": Ticket.Cause.POLICY,
        "cause_text": f"would be resolved under v{version_number}",
    }
    return _close(expected, actor, closing)


def _close(expected: Mapping[int, int], actor, closing: dict[str, Any]) -> Outcome:
    changes = {
        **closing,
        "state": Ticket.State.CLOSED,
        "closed_by": actor,
        "closed_at": timezone.now(),
    }
    return _change(expected, actor=actor, verb="closed", changes=changes, refuse=_require_open)


def close(
    ticket: Ticket, *, revision: int, actor, resolution: str, cause: str = "", cause_text: str = ""
) -> Ticket:
    outcome = close_many(
        {ticket.pk: revision},
        actor=actor,
        resolution=resolution,
        cause=cause,
        cause_text=cause_text,
    )
    return _single(ticket, outcome)


def reopen(ticket: Ticket, *, revision: int, actor) -> Ticket:
    changes = {
        "state": Ticket.State.OPEN,
        "resolution": "",
        "cause": "",
        "cause_text": "",
        "closed_by": None,
        "closed_at": None,
    }

    def refuse(current: Ticket) -> str | None:
        return "the ticket is already open" if current.state == Ticket.State.OPEN else None

    outcome = _change(
        {ticket.pk: revision}, actor=actor, verb="reopened", changes=changes, refuse=refuse
    )
    return _single(ticket, outcome)


def add_comment(ticket: Ticket, *, actor, text: str) -> TicketComment:
    """Comments never conflict: they add to the ticket without changing it."""
    text = text.strip()
    if not text:
        raise TicketActionError("a comment needs some text")
    with transaction.atomic():
        comment = TicketComment.objects.create(ticket=ticket, author=actor, text=text)
        AuditEvent.objects.create(
            actor=actor,
            verb="commented",
            ticket=ticket,
            target=f"ticket {ticket.pk}",
            data={"comment": comment.pk},
        )
    return comment


def revisions_as_seen(selected: QuerySet[Ticket], seen: DataStamp) -> dict[int, int]:
    """The revisions the selected tickets had on a page rendered under `seen`, for a bulk
    change of all of them: one changed since then fails, reported with who changed it, and
    one opened since is left out. Every change bumps the revision and appends one audit
    event (a comment only appends), so the revision seen is today's less the changes since.
    Tickets closed before the page was rendered are not counted in."""
    changes_since = Count(
        "audit_events",
        filter=Q(audit_events__id__gt=seen.newest_event) & ~Q(audit_events__verb="commented"),
    )
    rows = (
        selected.filter(pk__lte=seen.newest_ticket)
        .annotate(changes_since=changes_since)
        .filter(Q(state=Ticket.State.OPEN) | Q(changes_since__gt=0))
        .values_list("pk", "revision", "changes_since")
    )
    return {pk: revision - changes for pk, revision, changes in rows}


def family_revisions(fingerprint: str, seen: DataStamp) -> dict[int, int]:
    """The family's open tickets as a page rendered under `seen` showed them."""
    return revisions_as_seen(Ticket.objects.filter(fingerprint=fingerprint), seen)


def parse_selection(values: Iterable[str]) -> dict[int, int]:
    """Checked rows of the queue, each "id:revision" as it was rendered."""
    selection = {}
    for value in values:
        ticket_id, _, revision = value.partition(":")
        ticket_id, revision = whole_number(ticket_id), whole_number(revision)
        if ticket_id is not None and revision is not None:
            selection[ticket_id] = revision
    return selection
