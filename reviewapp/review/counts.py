"""How many tickets the queue's filters select, per value of every counted filter (the
filters of review/filters.py that are `Counted`): the queue's facets, cached under the
queue's version (its data stamp), so that nothing cached is ever stale.

Filters PostgreSQL keeps no counts for (a family, dates, a resolution, a search...) are
counted by a plain GROUP BY over the tickets they select. The others are summed from
counts PostgreSQL keeps as tickets change, the one module that knows them:

- TicketFacetDelta: per state, counted filter and value, for the queue filtered by state
  alone (the desk's home);
- TicketCombinationDelta: per combination of every counted filter's values (JSON), for any
  filter on counted filters alone (far fewer combinations than tickets).

Why keep them, when a plain GROUP BY would do: right after any ticket changes (every few
seconds, with reviewers at work) the data stamp names new data and nothing cached applies,
so the queue counts again, and a GROUP BY reads every ticket the filters select, a cost
that grows with the desk while summing kept counts grows with the combinations. Measured
with benchmarks/pages.py --n 1000000 --rounds 30 (2026-12-02, 2 cores shared with other
work), the queue right after a change, p95: every count from a plain GROUP BY, 12,255 ms
unfiltered and 1,417 ms filtered, against 68 ms for the trivial page (179x; goal 3x);
from the kept counts, 107 ms and 135 ms against 42 ms (3.2x). Hence they stay.

Both are written by one PostgreSQL trigger on the tickets (per statement, with transition
tables), which appends a row per changed count instead of updating a total: two
transactions never wait for each other there. Reading folds the rows together now and then,
and so does beat, every minute. The trigger is made from the counted filters' definitions
(each says how its value is kept: `Counted.kept_sql`), after every `manage.py migrate`
(keep_counting); when the definitions change, every ticket is counted again there.

A filtered queue's sums are kept and brought up to date from the rows appended since (a
change to tickets it selects is a row or two; one to other tickets, none), where the data
stamp would have them summed again after any change (_combined_facets_kept)."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import cast

import msgspec
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.models import Count, Field, QuerySet, Sum, TextField
from django.db.models.functions import Cast

from reviewapp.infra.locks import transaction_lock
from reviewapp.models import Ticket, TicketCombinationDelta, TicketFacetDelta
from reviewapp.review import filters as defined
from reviewapp.review.filters import ASSIGNEE_NONE
from reviewapp.review.queue import QueueFilters, filtered_tickets, queue_version
from reviewapp.review.stamp import CACHE_SECONDS, cached, data_stamp

# The tables the counts are kept in (a bulk load vacuums them, as autovacuum would).
KEPT = (TicketFacetDelta, TicketCombinationDelta)


def _whole() -> str:
    """A counted filter every ticket has one value of: its counts sum up to the tickets."""
    return next(item.name for item in defined.counted() if not item.many)


@dataclass(frozen=True)
class Facets:
    """How many of the filtered tickets have each value of each counted filter."""

    total: int
    counts: dict[str, list[tuple[str, int]]]
    # Names the filtered tickets as they are now (see queue_version): what is cached, here
    # and in the queue's template, is cached under it.
    version: str = ""
    # The data stamp the counts were read under (stamp.DataStamp's text): a bulk change of
    # "every ticket shown" acts on the tickets as they were then (changes.revisions_as_seen).
    seen: str = ""
    # Names the counts themselves: the page's parts made of them alone (the counts per value,
    # the values suggested) are cached under it. The version, or for counts summed from the
    # kept combinations, what those were (_combined_facets_kept).
    counted_as: str = ""

    def values(self, name: str) -> list[tuple[str, int]]:
        return self.counts.get(name, [])


def facet_counts(filters: QueueFilters, user) -> Facets:
    """Counts per value of every counted filter, within the current filters."""
    now = data_stamp()
    version = queue_version(filters, user, stamp=now)

    if _combinations_kept_by_the_database(filters) and not _counted_by_the_database(filters):
        return replace(_combined_facets_kept(filters, user), version=version, seen=now.text)

    def count() -> Facets:
        if _counted_by_the_database(filters):
            facets = _kept_facets(filters.state)
        else:
            facets = _count_facets(filtered_tickets(filters, user))
        return replace(facets, version=version, counted_as=version)

    return replace(cached(f"tickets:facets:{version}", count), seen=now.text)


def _combined_facets_kept(filters: QueueFilters, user) -> Facets:
    """_combined_facets, kept and brought up to date from the rows appended since, where the
    data stamp would have them summed again after any change: a change to tickets these
    filters select adds a row or two to what is kept, one to other tickets adds nothing.

    Rows are only ever appended, by the trigger, or written again whole, by a fold (marked
    `folded`): one of those among the rows appended has them summed again. So does a change
    of what is counted (the trigger made again: its own name is in the key). A row committed
    out of id order is counted after CACHE_SECONDS, as with the data stamp."""
    wanted = _wanted(filters, user)
    named = hashlib.sha256(msgspec.json.encode([_trigger_name(), sorted(wanted.items())]))
    key = f"tickets:combined:{named.hexdigest()}"
    kept = cache.get(key)
    added = _appended_since(kept["newest"], wanted) if kept else []
    if kept is None or any(folded for *_, folded in added):
        tallies, newest = _sum_combinations(wanted)
        kept = {"tallies": tallies, "newest": newest, "appended": 0}
        cache.set(key, kept, CACHE_SECONDS)
    elif added:
        for row, combination, tickets, _ in added:
            _tally(kept["tallies"], msgspec.json.decode(combination), tickets)
            kept["newest"] = max(kept["newest"], row)
        kept["appended"] += len(added)
        cache.set(key, kept, CACHE_SECONDS)
        if kept["appended"] > FOLD_COMBINATION_ROWS_AFTER:
            fold_combination_deltas()  # the next read sums them again
    tallies = {name: +tally for name, tally in kept["tallies"].items()}  # the counts above 0
    return replace(_facets(tallies), counted_as=f"{key}:{kept['newest']}")


def _appended_since(newest: int, wanted: dict) -> list[tuple[int, str, int, bool]]:
    """The kept rows with these values appended after row `newest`."""
    table = TicketCombinationDelta._meta.db_table
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        # OFFSET 0: the rows after `newest` first, from the primary key (few); else
        # PostgreSQL may read every row with these values from the containment index.
        cursor.execute(
            f"SELECT id, combination::text, tickets, folded FROM (SELECT * FROM {table} "
            f"WHERE id > %s OFFSET 0) AS added WHERE added.combination @> %s::jsonb",
            [newest, msgspec.json.encode(wanted).decode()],
        )
        return cursor.fetchall()


def _wanted(filters: QueueFilters, user) -> dict:
    """Each counted filter set, as the kept combinations hold its value."""
    return {
        item.name: item.wanted(getattr(filters, item.name), user)
        for item in defined.counted()
        if getattr(filters, item.name) not in ("", None)
    }


def _counted_by_the_database(filters: QueueFilters) -> bool:
    """The database keeps the counts of the queue filtered by state alone (the desk's home),
    as tickets change (TicketFacetDelta).

    Still needed beside the combinations: counting the desk's home from them instead took
    the queue right after a change from 13.6 to 41.3 ms at p95 (benchmarks/pages.py
    --n 100000, 2026-12-01), five times the trivial page against a goal of three."""
    return filters.selecting().replace(state=QueueFilters().state) == QueueFilters()


def _combinations_kept_by_the_database(filters: QueueFilters) -> bool:
    """The database keeps how many tickets have each combination of the counted filters'
    values (TicketCombinationDelta): filters on those alone are counted from them."""
    return not any(
        getattr(filters, item.name) not in ("", None)
        for item in defined.FILTERS
        if not item.counted
    )


# --- counting the tickets: a plain GROUP BY ----------------------------------------------


def _count_facets(tickets: QuerySet[Ticket]) -> Facets:
    """The counts of `tickets` from one GROUP BY over every counted column: a row per
    combination of their values, summed per filter here."""
    counted = defined.counted()
    tallies = _tallies()
    columns = [item.column for item in counted]
    for *values, n in tickets.order_by().values_list(*columns).annotate(n=Count("pk")):
        for item, value in zip(counted, values, strict=True):
            for kept in item.stored(value):
                tallies[item.name][kept] += n
    return _facets(tallies)


# --- summing the counts PostgreSQL keeps ----------------------------------------------


# Past this many rows making up the kept counts, reading folds them into one row per value.
FOLD_FACET_ROWS_AFTER = 1000


def _kept_facets(state: str) -> Facets:
    """The counts the database keeps for the tickets in `state` ("" for any), one short read."""
    kept = TicketFacetDelta.objects.filter(state__in=[state] if state else Ticket.State.values)
    found = list(
        kept.values_list("dimension", "value").annotate(n=Sum("tickets"), rows=Count("pk"))
    )
    if sum(rows for *_, rows in found) > FOLD_FACET_ROWS_AFTER:
        fold_facet_deltas()
    tallies = _tallies()
    for dimension, value, n, _ in found:
        if n and dimension in tallies:
            tallies[dimension][value] += n
    return _facets(tallies)


# Past this many rows read beyond the combinations they add up to, reading folds them.
FOLD_COMBINATION_ROWS_AFTER = 1000


def _combined_facets(filters: QueueFilters, user) -> Facets:
    """The counts within `filters` (on counted filters only), summed from the kept
    combinations they select (JSON containment: each filter's `wanted` value)."""
    return _facets(_sum_combinations(_wanted(filters, user))[0])


def _sum_combinations(wanted: dict) -> tuple[dict[str, Counter[str]], int]:
    """The counts per value of the kept combinations holding `wanted`, and the newest row
    summed. The rows are read as they are and summed here: PostgreSQL sorting them by
    combination and taking each apart took twice as long (benchmarks/pages.py)."""
    kept = TicketCombinationDelta.objects.filter(combination__contains=wanted)
    # Each combination as jsonb's own text (the same combination, the same text), as it is:
    # psycopg would parse every row's JSON, and a combination's rows are summed first.
    rows = kept.annotate(text=Cast("combination", TextField())).values_list("pk", "text", "tickets")
    net: Counter[str] = Counter()
    newest = 0
    for row, combination, tickets in rows:
        net[combination] += tickets
        newest = max(newest, row)
    alive = [(combination, n) for combination, n in net.items() if n]
    if len(rows) - len(alive) > FOLD_COMBINATION_ROWS_AFTER:
        fold_combination_deltas()
    tallies = _tallies()
    # A filter set to one value counts every ticket there: only the others are summed.
    single = {name for name, value in wanted.items() if isinstance(value, str)}
    total = sum(n for _, n in alive)
    for name in single:
        if total:
            tallies[name][wanted[name]] = total
    summed = {name: tally for name, tally in tallies.items() if name not in single}
    combinations = _decode_combinations(f"[{','.join(text for text, _ in alive)}]")
    for combination, (_, n) in zip(combinations, alive, strict=True):
        _tally(summed, combination, n)
    return tallies, newest


def _tally(tallies: dict[str, Counter[str]], combination: dict, n: int) -> None:
    """Count `n` tickets of `combination` in the tallies of its filters (those given)."""
    for name, values in combination.items():
        tally = tallies.get(name)
        if tally is None:
            continue
        if isinstance(values, str):
            tally[values] += n
        else:
            for value in values:
                tally[value] += n


_decode_combinations = msgspec.json.Decoder(list[dict[str, str | list[str]]]).decode


def fold_kept_counts() -> None:
    """Periodic (beat): keep the counts the database keeps compact, so that a queue read
    seldom has to fold them itself; while an ingest opens tickets it would, often."""
    fold_facet_deltas()
    fold_combination_deltas()


def fold_facet_deltas() -> None:
    """Replace the rows of the kept counts by one row per value with their sum. The rows of
    transactions still running are not seen, so not folded: they are summed later."""
    _fold(TicketFacetDelta, "state, dimension, value", analyze=False)


def fold_combination_deltas() -> None:
    """Replace the rows of the kept combinations by one row per combination with their sum
    (as fold_facet_deltas does for the counts per value)."""
    # Every row is rewritten: the planner is told at once, so the next reads use the
    # index, not what an empty table once looked like.
    # Marked: a reader bringing counts up to date from the rows appended since must sum
    # them again (_combined_facets_kept).
    _fold(TicketCombinationDelta, "combination", analyze=True, marked=True)


def _fold(model, key: str, *, analyze: bool, marked: bool = False) -> None:
    """`marked`: the rows written say so (their `folded` column)."""
    table = model._meta.db_table
    folded = ", folded" if marked else ""
    with transaction.atomic(), connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        # One fold at a time; one already running does the work.
        if not transaction_lock(f"fold {table}", wait=False):
            return
        cursor.execute(
            f"WITH folded AS (DELETE FROM {table} RETURNING {key}, tickets) "
            f"INSERT INTO {table} ({key}, tickets{folded}) "
            f"SELECT {key}, SUM(tickets){folded and ', true'} FROM folded GROUP BY {key} "
            f"HAVING SUM(tickets) <> 0"
        )
        if analyze:
            cursor.execute(f"ANALYZE {table}")


# --- as the queue shows them ------------------------------------------------------------


def _tallies() -> dict[str, Counter[str]]:
    return {item.name: Counter() for item in defined.counted()}


def _facets(tallies: dict[str, Counter[str]]) -> Facets:
    """Facets from counts per kept value of each counted filter, as the queue shows them:
    a person by username ("unassigned" for nobody), most tickets first."""
    for item in defined.counted():
        if item.people:
            tallies[item.name] = _named(tallies[item.name])
    return Facets(
        total=sum(tallies[_whole()].values()),
        counts={
            name: sorted(tally.items(), key=lambda pair: (-pair[1], pair[0]))
            for name, tally in tallies.items()
        },
    )


def _named(by_user_id: Counter[str]) -> Counter[str]:
    usernames = _usernames(int(v) for v in by_user_id if v.isdigit())
    named: Counter[str] = Counter()
    for user_id, n in by_user_id.items():
        if not user_id:
            named[ASSIGNEE_NONE] += n
        else:
            named[usernames.get(int(user_id), user_id) if user_id.isdigit() else user_id] += n
    return named


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


# --- the trigger that keeps them ---------------------------------------------------------


def _counting_sql(changed: str) -> str:
    """One statement that appends, for the tickets of `changed` (a query of ticket rows,
    each with its `sign`: +1 counted in, -1 counted out), a row per combination and one
    per state, filter and value whose count they change, with the difference."""
    combination = ", ".join(f"'{item.name}', {item.kept_sql('c')}" for item in defined.counted())
    combinations = TicketCombinationDelta._meta.db_table
    facets = TicketFacetDelta._meta.db_table
    return f"""
WITH kept AS (
    INSERT INTO {combinations} (combination, tickets)
    SELECT jsonb_build_object({combination}), SUM(c.sign) FROM ({changed}) AS c
    GROUP BY 1 HAVING SUM(c.sign) <> 0
    RETURNING combination, tickets
)
INSERT INTO {facets} (state, dimension, value, tickets)
SELECT kept.combination ->> 'state', counted.key, counted_value, SUM(kept.tickets)
FROM kept
CROSS JOIN LATERAL jsonb_each(kept.combination) AS counted
CROSS JOIN LATERAL jsonb_array_elements_text(CASE jsonb_typeof(counted.value)
    WHEN 'array' THEN counted.value ELSE jsonb_build_array(counted.value) END) AS counted_value
GROUP BY 1, 2, 3 HAVING SUM(kept.tickets) <> 0;"""


def _trigger_function() -> str:
    """The function the trigger runs, made from the counted filters' definitions."""
    # The database's column of each counted field (a foreign key's id).
    columns = [
        cast(Field, Ticket._meta.get_field(item.column)).column for item in defined.counted()
    ]
    new = ", ".join(f"n.{column}" for column in columns)
    old = ", ".join(f"o.{column}" for column in columns)
    # Most updates change no counted column (a revision, a date): those rows are left out.
    updated = (
        f"SELECT n.*, 1 AS sign FROM new_rows AS n JOIN old_rows AS o USING (id) "
        f"WHERE ({new}) IS DISTINCT FROM ({old}) UNION ALL "
        f"SELECT o.*, -1 AS sign FROM old_rows AS o JOIN new_rows AS n USING (id) "
        f"WHERE ({new}) IS DISTINCT FROM ({old})"
    )
    return f"""
CREATE OR REPLACE FUNCTION {_FUNCTION}() RETURNS trigger AS $counting$
BEGIN
    IF TG_OP = 'INSERT' THEN
        {_counting_sql("SELECT n.*, 1 AS sign FROM new_rows AS n")}
    ELSIF TG_OP = 'DELETE' THEN
        {_counting_sql("SELECT o.*, -1 AS sign FROM old_rows AS o")}
    ELSE
        {_counting_sql(updated)}
    END IF;
    RETURN NULL;
END
$counting$ LANGUAGE plpgsql"""


def _trigger_name() -> str:
    """Names what the trigger counts, as the counted filters define it now (a few dozen
    microseconds: made each time, as a test may define another counted filter)."""
    return hashlib.sha256(_trigger_function().encode()).hexdigest()


_FUNCTION = "crosscheck_count_tickets"
# A trigger with transition tables fires on one kind of statement: three of them.
_TRIGGERS = {
    "INSERT": "REFERENCING NEW TABLE AS new_rows",
    "UPDATE": "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows",
    "DELETE": "REFERENCING OLD TABLE AS old_rows",
}


def keep_counting(using: str = DEFAULT_DB_ALIAS) -> bool:
    """After every migrate (as the owner of the tables): make the trigger that keeps the
    counts from the counted filters as they are defined now, unless it is made so already.
    When it changes, every ticket is counted again, the tickets locked against changes
    meanwhile. True when it did. Nothing before migration 0037 (the combinations' JSON)."""
    function = _trigger_function()
    made_from = _trigger_name()
    tickets = Ticket._meta.db_table
    connection = connections[using]
    with connection.cursor() as cursor:
        table = TicketCombinationDelta._meta.db_table
        described = connection.introspection.get_table_description(cursor, table)
        if "combination" not in {column.name for column in described}:
            return False
    with transaction.atomic(using=using), connection.cursor() as cursor:
        cursor.execute(
            "SELECT obj_description(oid, 'pg_proc') FROM pg_proc WHERE proname = %s", [_FUNCTION]
        )
        found = cursor.fetchone()
        if found and found[0] == made_from:
            return False
        cursor.execute(f"LOCK TABLE {tickets} IN SHARE ROW EXCLUSIVE MODE")
        cursor.execute(function)
        for event, referencing in _TRIGGERS.items():
            name = f"{tickets}_counted_{event.lower()}"
            cursor.execute(f"DROP TRIGGER IF EXISTS {name} ON {tickets}")
            cursor.execute(
                f"CREATE TRIGGER {name} AFTER {event} ON {tickets} {referencing} "
                f"FOR EACH STATEMENT EXECUTE FUNCTION {_FUNCTION}()"
            )
        for model in KEPT:
            cursor.execute(f"DELETE FROM {model._meta.db_table}")
        cursor.execute(_counting_sql(f"SELECT t.*, 1 AS sign FROM {tickets} AS t"))
        if "folded" in {column.name for column in described}:
            # Written again whole, as a fold writes them (see _combined_facets_kept).
            cursor.execute(f"UPDATE {table} SET folded = true")
        cursor.execute(f"COMMENT ON FUNCTION {_FUNCTION}() IS '{made_from}'")
    return True
