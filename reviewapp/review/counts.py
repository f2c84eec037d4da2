"""How many tickets the queue's filters select, per value of every filter dimension.

The one module that knows the delta tables: PostgreSQL triggers (migrations 0007, 0008)
append a row per ticket change to TicketFacetDelta (counts per value, for the queue
filtered by state alone) and TicketCombinationDelta (counts per combination of the counted
dimensions' values, for any filter on those dimensions); reading sums them, and folds them
now and then. Other filters (queue.UNCOUNTED: a family, dates, a resolution...) count the
tickets."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, replace

from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.db.models import Count, QuerySet, Sum

from reviewapp.models import Ticket, TicketCombinationDelta, TicketFacetDelta
from reviewapp.review.queue import (
    ASSIGNEE_NONE,
    FACETS,
    UNCOUNTED,
    QueueFilters,
    counted_selection,
    filtered_tickets,
    queue_version,
)
from reviewapp.review.stamp import cached


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


# Measuring: every count from a plain GROUP BY over the tickets, none from the kept deltas.
GROUP_BY_ONLY = True


def facet_counts(filters: QueueFilters, user) -> Facets:
    """Counts per value of every filter dimension, within the current filters."""
    version = queue_version(filters, user)

    def count() -> Facets:
        if GROUP_BY_ONLY:
            return replace(_count_facets(filtered_tickets(filters, user)), version=version)
        if _counted_by_the_database(filters):
            return replace(_kept_facets(filters.state), version=version)
        if _combinations_kept_by_the_database(filters):
            return replace(_combined_facets(filters, user), version=version)
        return replace(_count_facets(filtered_tickets(filters, user)), version=version)

    return cached(f"tickets:facets:{version}", count)


def _counted_by_the_database(filters: QueueFilters) -> bool:
    """The database keeps the counts of the queue filtered by state alone (the desk's home),
    as tickets change (see TicketFacetDelta).

    Still needed beside the combinations: counting the desk's home from them instead took
    the queue right after a change from 13.6 to 41.3 ms at p95 (benchmarks/pages.py
    --n 100000, 2026-12-01), five times the trivial page against a goal of three."""
    only_state = replace(filters, state=QueueFilters.state, sort="newest", group="")
    return only_state == QueueFilters()


def _combinations_kept_by_the_database(filters: QueueFilters) -> bool:
    """The database keeps how many tickets have each combination of the counted dimensions'
    values (see TicketCombinationDelta): filters on those alone are counted from them. A
    family, a date range, a resolution, a cause or a tally month is no dimension of theirs
    (queue.UNCOUNTED): with one of those, the tickets selected are counted."""
    return not any(getattr(filters, name) for name in UNCOUNTED)


# Past this many rows making up the kept counts, reading folds them into one row per value.
FOLD_FACET_ROWS_AFTER = 1000


def _kept_facets(state: str) -> Facets:
    """The counts the database keeps for the tickets in `state` ("" for any), one short read."""
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
    """Periodic (beat): keep the counts the database keeps compact, so that a queue read
    seldom has to fold them itself; while an ingest opens tickets it would, often."""
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
        TicketCombinationDelta.objects.filter(counted_selection(filters, user))
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
    statement that reads the filtered tickets once: every dimension is counted in that one
    pass (GROUPING SETS, twice as fast at 100,000 tickets as a pass per dimension)."""
    inner, params = tickets.order_by().values_list(*FACETS.values()).query.sql_with_params()
    grouped = _per_dimension(inner, params, aggregates="COUNT(*)")
    return [(index, value, n) for index, value, (n,) in grouped]


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
    """Counts per value of every dimension of FACETS, from one plain GROUP BY over the
    tickets: one row per combination of their values, summed per dimension here."""
    columns = [FACETS[name] if name != "assignee" else "assignee_id" for name in FACETS]
    grouped = tickets.order_by().values_list(*columns).annotate(n=Count("pk"))
    rows: list[tuple[int, str | None, int]] = []
    for *values, n in grouped:
        for index, value in enumerate(values):
            if isinstance(value, bool):
                value = "true" if value else "false"
            rows.append((index, None if value is None else str(value), n))
    return _facets_of_rows(rows)


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

    return cached(f"tickets:usernames:{key}", read)


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
