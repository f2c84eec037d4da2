"""Keeping the tallies' reporting copy up to date: one TallyEntry per discrepancy of every
run's current judgement, and one TallyRun per judged run saying what was read of it.

What counts (a run's CURRENT judgement only, so never a shadow or replay one):
- each verdict group that was not confirmed: resolved by a rule (its rule, and the policy
  version in force) or a conflict, with the sources of its evidence;
- each finding (the engine makes at most one per kind and run).
A conflict or a finding is paired with its ticket, the one of its run and key (entity and
field, or finding kind), whichever judgement opened it, and takes its outcome from it:
explained by a reviewer (with the ticket's cause), closed as unexplained, open; without a
ticket, untracked (reviewapp.reports.tally says how each is counted).

A refresh reads again the runs whose current judgement, clock or agent is not what their
TallyRun says, among those judged since the judgements it has surely seen and those whose
start moved without a judgement (Run.clock_moved: a late piece with an earlier span and
no new record, ingest.runs); pairs the
entries without a ticket; and takes again the outcome of entries whose ticket changed
(every change of a ticket is an audit event) since the events it has surely seen. "Surely
seen": what was written more than STRAGGLERS ago, so that a transaction that commits late
is read by a later refresh. A full refresh (beat, every few minutes) compares every run
and every outcome, whatever the ids, and a new TALLY_TIME_ZONE computes everything again.
The work is a fixed number of statements, whatever changed."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Max
from django.utils import timezone

from reviewapp import durable
from reviewapp.celery import Tasks
from reviewapp.infra.bulk import insert_rows
from reviewapp.infra.locks import transaction_lock
from reviewapp.models import (
    AuditEvent,
    Finding,
    FrozenDiscrepancy,
    Judgement,
    Run,
    TallyEntry,
    TallyRun,
    TallyState,
    Ticket,
    TraceRecord,
    Verdict,
)
from reviewapp.reports.calendar import month_of, tally_zone

# A transaction that commits this long after it wrote is still read by later refreshes;
# one slower still, by the next full refresh.
STRAGGLERS = timedelta(minutes=5)

ENTRY_COLUMNS = (
    "run_id, month, origin, field, entity, sources, rule, policy_number, agent, "
    "finding_kind, verdict_id, finding_id, ticket_id, outcome, cause"
)
# What a closing keeps of each entry of its month (FrozenDiscrepancy): all but the month.
FROZEN_COLUMNS = ENTRY_COLUMNS.replace("month, ", "")
# An entry's outcome and cause from its ticket `t` (never NULL here: see _pair_tickets).
OUTCOME_OF_TICKET = (
    "CASE WHEN t.state = 'open' THEN 'open' WHEN t.resolution = 'explained' THEN 'reviewer' "
    "ELSE 'closed_unexplained' END"
)
CAUSE_OF_TICKET = (
    "CASE WHEN t.state = 'closed' AND t.resolution = 'explained' THEN t.cause ELSE '' END"
)


def tallies_refresh(*, full: bool = False) -> int:
    """Bring the kept discrepancies up to date; the number of runs read again. Waits for a
    refresh under way elsewhere to end first."""
    read = _refresh(full=full, wait=True, at_most=None)
    assert read is not None  # it waits, and has no bound
    return read


def tallies_refresh_if_quick() -> int | None:
    """What a page may do while somebody waits on it: bring the tallies up to date when at
    most TALLY_PAGE_REFRESH_RUNS runs are to be read again and no refresh is under way
    elsewhere; the number of runs read, or None when nothing was done (it is a worker's to
    do: after a large ingest, the first refresh reads every run it judged)."""
    return _refresh(full=False, wait=False, at_most=settings.TALLY_PAGE_REFRESH_RUNS)


def tallies_refresh_later() -> None:
    """Have a worker bring the tallies up to date (once the transaction commits). If the
    broker cannot take it, the beat's next full refresh does it anyway."""
    durable.send(Tasks.TALLIES_REFRESH)


class _LeftAsItWas(Exception):
    """Raised inside a refresh's transaction to leave the tallies as they were."""


def _refresh(*, full: bool, wait: bool, at_most: int | None) -> int | None:
    now = timezone.now()
    try:
        with transaction.atomic():
            if not _one_at_a_time(wait=wait):
                raise _LeftAsItWas
            state = _state(settings.TALLY_TIME_ZONE)
            changed = _changed_runs(None if full else state.judgements_seen)
            if at_most is not None and len(changed) > at_most:
                # Rolled back: a new TALLY_TIME_ZONE's emptying too (_state).
                raise _LeftAsItWas
            if changed:
                _read_again(changed, tally_zone())
            if full:
                _clocks_read()
            _pair_tickets()
            _outcomes_again(None if full else (state.events_seen, now - STRAGGLERS))
            _surely_seen(state, now - STRAGGLERS)
    except _LeftAsItWas:
        return None
    return len(changed)


def tallies_held() -> None:
    """Hold off every refresh until this transaction ends (waiting for one under way): what
    it reads of the entries twice, it reads the same."""
    _one_at_a_time(wait=True)


def entries_freeze(closing_id: int, month: date) -> int:
    """Keep the month's entries as they are now, with their closing (FrozenDiscrepancy):
    what its frozen figures counted. The number kept. Under tallies_held, with the figures."""
    frozen = _table(FrozenDiscrepancy)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {frozen} (closing_id, {FROZEN_COLUMNS}) "
            f"SELECT %s, {FROZEN_COLUMNS} FROM {_table(TallyEntry)} "
            f"WHERE month = %s ORDER BY run_id, id",
            [closing_id, month],
        )
        return cursor.rowcount


def _one_at_a_time(*, wait: bool) -> bool:
    """Whether this transaction may refresh: with `wait`, once no other refresh runs."""
    # Two refreshes at once would both insert a changed run's entries.
    return transaction_lock("crosscheck_tallies", wait=wait)


def _state(zone_name: str) -> TallyState:
    state = TallyState.objects.first()
    if state is not None and state.time_zone == zone_name:
        return state
    TallyEntry.objects.all().delete()
    TallyRun.objects.all().delete()
    TallyState.objects.all().delete()
    return TallyState.objects.create(time_zone=zone_name)


def _surely_seen(state: TallyState, before: datetime) -> None:
    """Move the ids surely seen to those of the newest rows written before `before`."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT (SELECT MAX(id) FROM {_table(Judgement)} WHERE id > %s AND created_at < %s), "
            f"(SELECT MAX(id) FROM {_table(AuditEvent)} WHERE id > %s AND created_at < %s)",
            [state.judgements_seen, before, state.events_seen, before],
        )
        judged, audited = cursor.fetchone()
    if judged or audited:
        state.judgements_seen = judged or state.judgements_seen
        state.events_seen = audited or state.events_seen
        state.save(update_fields=["judgements_seen", "events_seen"])


def _not_the_same(left: str, right: str) -> str:
    """SQL: the two values differ, NULL being a value like any other."""
    return f"{left} IS DISTINCT FROM {right}"


def _changed_runs(judged_after: int | None) -> list[tuple[Any, ...]]:
    """(run id, current judgement id, started_at, agent, verdict groups) of every judged
    run whose TallyRun is missing or no longer says what the run does; only among the runs
    judged after `judged_after`, and those whose start moved, when given."""
    runs, kept, judgements = (_table(m) for m in (Run, TallyRun, Judgement))
    recent = "" if judged_after is None else "AND (r.current_judgement_id > %s OR r.clock_moved) "
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT r.id, r.current_judgement_id, r.started_at, r.agent, "
            f"(SELECT j.verdict_count FROM {judgements} j WHERE j.id = r.current_judgement_id) "
            f"FROM {runs} r LEFT JOIN {kept} s ON s.run_id = r.id "
            f"WHERE r.current_judgement_id IS NOT NULL {recent}"
            f"AND (s.run_id IS NULL "
            f"OR {_not_the_same('s.judgement_id', 'r.current_judgement_id')} "
            f"OR s.started_at <> r.started_at OR s.agent <> r.agent)",
            [] if judged_after is None else [judged_after],
        )
        return cursor.fetchall()


def _read_again(rows: list[tuple[Any, ...]], zone) -> None:
    """Replace these runs' TallyRun and entries by what their current judgement says
    (conflicts and findings unpaired: _pair_tickets pairs them)."""
    ids = [row[0] for row in rows]
    within, params = _within("run_id", ids)
    with connection.cursor() as cursor:
        # In the same statement, what moved among them is read (Run.clock_moved) unless it
        # moved again since it was read: a run an ingest holds is left flagged for the
        # next refresh, not waited for (a page may be refreshing).
        runs = _table(Run)
        cursor.execute(
            f"WITH read AS (UPDATE {runs} SET clock_moved = false WHERE id IN ("
            f"SELECT r.id FROM {runs} r JOIN unnest(%s::bigint[], %s::timestamptz[]) m(id, at) "
            f"ON r.id = m.id WHERE r.clock_moved AND r.started_at = m.at "
            f"FOR NO KEY UPDATE OF r SKIP LOCKED)) "
            f"DELETE FROM {_table(TallyEntry)} WHERE {within}",
            [ids, [row[2] for row in rows], *params],
        )
        cursor.execute(f"DELETE FROM {_table(TallyRun)} WHERE {within}", params)
    insert_rows(
        TallyRun,
        ("run_id", "judgement_id", "started_at", "agent", "month", "groups"),
        [
            (run_id, judgement_id, _aware(started_at), agent, month_of(_aware(started_at), zone))
            + (groups or 0,)
            for run_id, judgement_id, started_at, agent, groups in rows
        ],
    )
    within, params = _within("s.run_id", ids)
    kept, judgements = _table(TallyRun), _table(Judgement)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {_table(TallyEntry)} ({ENTRY_COLUMNS}) "
            f"SELECT s.run_id, s.month, v.kind, v.field, v.entity, {_evidence_sources('v')}, "
            f"COALESCE(v.rule, ''), j.policy_number, s.agent, '', v.id, NULL, NULL, "
            f"CASE WHEN v.kind = 'resolved' THEN 'rule' ELSE 'untracked' END, "
            f"CASE WHEN v.kind = 'resolved' THEN 'rule' ELSE '' END "
            f"FROM {kept} s JOIN {judgements} j ON j.id = s.judgement_id "
            f"JOIN {_table(Verdict)} v ON v.judgement_id = s.judgement_id "
            f"WHERE {within} AND v.kind <> 'confirmed'",
            params,
        )
        cursor.execute(
            f"INSERT INTO {_table(TallyEntry)} ({ENTRY_COLUMNS}) "
            f"SELECT s.run_id, s.month, 'finding', '', NULL, '', '', j.policy_number, s.agent, "
            f"f.kind, NULL, f.id, NULL, 'untracked', '' "
            f"FROM {kept} s JOIN {judgements} j ON j.id = s.judgement_id "
            f"JOIN {_table(Finding)} f ON f.judgement_id = s.judgement_id "
            f"WHERE {within}",
            params,
        )


def _clocks_read() -> None:
    """Full refreshes: no run whose TallyRun has its start is left to read again (one an
    ingest held when it was read again, say)."""
    runs, kept = _table(Run), _table(TallyRun)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {runs} SET clock_moved = false WHERE id IN (SELECT r.id FROM {runs} r "
            f"JOIN {kept} s ON s.run_id = r.id WHERE r.clock_moved "
            f"AND s.started_at = r.started_at FOR NO KEY UPDATE OF r SKIP LOCKED)"
        )


def _evidence_sources(verdict: str) -> str:
    """SQL: the sources of the observations a verdict's evidence names, sorted by code
    point and comma-joined, as a ticket's `sources` are (reviewapp.review.opening)."""
    records = _table(TraceRecord)
    return (
        f"(SELECT string_agg(x.source, ',' ORDER BY x.source) FROM (SELECT DISTINCT "
        f'r.source COLLATE "C" AS source FROM jsonb_array_elements_text({verdict}.evidence) '
        f"AS e(id) JOIN {records} r ON r.run_id = {verdict}.run_id AND r.key = e.id "
        f"AND r.type = 'tool_observation') AS x)"
    )


def _pair_tickets() -> None:
    """Pair each conflict and finding not paired yet with its ticket, when it has one (the
    ticket of its run with its kind, field or finding kind, and entity), and take its
    outcome."""
    entries, tickets = _table(TallyEntry), _table(Ticket)
    # The same condition as the partial index tally_entry_unticketed: only its rows are read.
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {entries} SET ticket_id = t.id, outcome = {OUTCOME_OF_TICKET}, "
            f"cause = {CAUSE_OF_TICKET} FROM {tickets} t "
            f"WHERE {entries}.ticket_id IS NULL AND NOT ({entries}.origin = 'resolved') "
            f"AND t.run_id = {entries}.run_id AND t.kind = {entries}.origin "
            f"AND t.field = {entries}.field AND t.finding_kind = {entries}.finding_kind "
            f"AND NOT ({_not_the_same('t.entity', f'{entries}.entity')})"
        )


def _outcomes_again(since: tuple[int, datetime] | None) -> None:
    """Take again the outcome of the entries whose ticket changed: those with an audit
    event after the id given or written after the time given; every entry when None."""
    entries, tickets, events = _table(TallyEntry), _table(Ticket), _table(AuditEvent)
    changed, params = "", list[Any]()
    if since is not None:
        changed = (
            f"AND t.id IN (SELECT a.ticket_id FROM {events} a WHERE a.ticket_id IS NOT NULL "
            f"AND (a.id > %s OR a.created_at >= %s)) "
        )
        params = list(since)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {entries} SET outcome = {OUTCOME_OF_TICKET}, cause = {CAUSE_OF_TICKET} "
            f"FROM {tickets} t WHERE t.id = {entries}.ticket_id {changed}"
            f"AND ({entries}.outcome <> {OUTCOME_OF_TICKET} "
            f"OR {entries}.cause <> {CAUSE_OF_TICKET})",
            params,
        )


def _within(column: str, ids: Sequence[int]) -> tuple[str, list[Any]]:
    return f"{column} = ANY(%s::bigint[])", [list(ids)]


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _table(model) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def kept_months() -> list[date]:
    """Every month some judged run started in, oldest first (as last refreshed)."""
    return list(TallyRun.objects.order_by("month").values_list("month", flat=True).distinct())


def newest_kept_month(first: date, last: date) -> date | None:
    """The newest month from `first` to `last` some judged run started in."""
    months = TallyRun.objects.filter(month__gte=first, month__lte=last)
    return months.aggregate(newest=Max("month"))["newest"]
