"""Keeping the tallies' reporting copy up to date: one TallyEntry per discrepancy of every
run's current judgement, and one TallyRun per run saying what was read of it.

What counts (a run's CURRENT judgement only, so never a shadow or replay one):
- each verdict group that was not confirmed: resolved by a rule (its rule, and the policy
  version in force) or a conflict, with the sources of its evidence;
- each finding (the engine makes at most one per kind and run).
A conflict or a finding is paired with its ticket, the one of its run and key (entity and
field, or finding kind), whichever judgement opened it. Only the pairing is kept here: how
a ticket was closed is read when counting.

A run is read again when its current judgement, clock or agent is not what its TallyRun
says (a new run, more lines, a newer policy, a late run_started); a ticket opened later is
paired by the next refresh. Everything is computed again when TALLY_TIME_ZONE changes.
The work is a fixed number of statements on PostgreSQL, whatever was changed."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, date, datetime
from typing import Any

from django.conf import settings
from django.db import connection, transaction

from reviewapp.infra.bulk import insert_rows
from reviewapp.models import (
    Finding,
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

# SQLite takes at most 32,766 parameters a statement: runs are read again in chunks there.
SQLITE_CHUNK = 5000

ENTRY_COLUMNS = (
    "run_id, month, origin, field, entity, sources, rule, policy_number, agent, "
    "finding_kind, verdict_id, finding_id, ticket_id"
)


def tallies_refresh() -> int:
    """Bring the kept discrepancies up to date; the number of runs read again."""
    zone_name = settings.TALLY_TIME_ZONE
    with transaction.atomic():
        _one_at_a_time()
        _forget_other_time_zones(zone_name)
        changed = _changed_runs()
        zone = tally_zone()
        for chunk in _chunks(changed):
            _read_again(chunk, zone)
        _pair_tickets()
    return len(changed)


def _one_at_a_time() -> None:
    # Two refreshes at once would both insert a changed run's entries. SQLite's writes
    # already wait for each other (IMMEDIATE transactions).
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(hashtext('crosscheck_tallies'))")


def _forget_other_time_zones(zone_name: str) -> None:
    state = TallyState.objects.first()
    if state is not None and state.time_zone == zone_name:
        return
    TallyEntry.objects.all().delete()
    TallyRun.objects.all().delete()
    TallyState.objects.all().delete()
    TallyState.objects.create(time_zone=zone_name)


def _not_the_same(left: str, right: str) -> str:
    """SQL: the two values differ, NULL being a value like any other."""
    operator = "IS DISTINCT FROM" if connection.vendor == "postgresql" else "IS NOT"
    return f"{left} {operator} {right}"


def _changed_runs() -> list[tuple[Any, ...]]:
    """(run id, current judgement id, started_at, agent, verdict groups) of every run whose
    TallyRun is missing or no longer says what the run does."""
    runs, kept, judgements = (_table(m) for m in (Run, TallyRun, Judgement))
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT r.id, r.current_judgement_id, r.started_at, r.agent, "
            f"(SELECT j.verdict_count FROM {judgements} j WHERE j.id = r.current_judgement_id) "
            f"FROM {runs} r LEFT JOIN {kept} s ON s.run_id = r.id "
            f"WHERE s.run_id IS NULL "
            f"OR {_not_the_same('s.judgement_id', 'r.current_judgement_id')} "
            f"OR s.started_at <> r.started_at OR s.agent <> r.agent"
        )
        return cursor.fetchall()


def _chunks(rows: list[tuple[Any, ...]]) -> Iterator[list[tuple[Any, ...]]]:
    size = len(rows) if connection.vendor == "postgresql" else SQLITE_CHUNK
    for start in range(0, len(rows), max(size, 1)):
        yield rows[start : start + size]


def _read_again(rows: list[tuple[Any, ...]], zone) -> None:
    """Replace these runs' TallyRun and entries by what their current judgement says."""
    ids = [row[0] for row in rows]
    within, params = _within("run_id", ids)
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {_table(TallyEntry)} WHERE {within}", params)
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
            f"COALESCE(v.rule, ''), j.policy_number, s.agent, '', v.id, NULL, NULL "
            f"FROM {kept} s JOIN {judgements} j ON j.id = s.judgement_id "
            f"JOIN {_table(Verdict)} v ON v.judgement_id = s.judgement_id "
            f"WHERE {within} AND v.kind <> 'confirmed'",
            params,
        )
        cursor.execute(
            f"INSERT INTO {_table(TallyEntry)} ({ENTRY_COLUMNS}) "
            f"SELECT s.run_id, s.month, 'finding', '', NULL, '', '', j.policy_number, s.agent, "
            f"f.kind, NULL, f.id, NULL "
            f"FROM {kept} s JOIN {judgements} j ON j.id = s.judgement_id "
            f"JOIN {_table(Finding)} f ON f.judgement_id = s.judgement_id "
            f"WHERE {within}",
            params,
        )


def _evidence_sources(verdict: str) -> str:
    """SQL: the sources of the observations a verdict's evidence names, sorted by code
    point and comma-joined, as a ticket's `sources` are (reviewapp.review.opening)."""
    records = _table(TraceRecord)
    if connection.vendor == "postgresql":
        return (
            f"(SELECT string_agg(x.source, ',' ORDER BY x.source) FROM (SELECT DISTINCT "
            f'r.source COLLATE "C" AS source FROM jsonb_array_elements_text({verdict}.evidence) '
            f"AS e(id) JOIN {records} r ON r.run_id = {verdict}.run_id AND r.key = e.id "
            f"AND r.type = 'tool_observation') AS x)"
        )
    return (
        f"COALESCE((SELECT group_concat(x.source, ',') FROM (SELECT DISTINCT r.source AS source "
        f"FROM json_each({verdict}.evidence) AS e JOIN {records} r ON r.run_id = {verdict}.run_id "
        f"AND r.key = e.value AND r.type = 'tool_observation' ORDER BY r.source) AS x), '')"
    )


def _pair_tickets() -> None:
    """Pair each conflict and finding not paired yet with its ticket, when it has one:
    the ticket of its run with its kind, field (or finding kind) and entity."""
    entries, tickets = _table(TallyEntry), _table(Ticket)
    # The same condition as the partial index tally_entry_unticketed: only its rows are read.
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {entries} SET ticket_id = t.id FROM {tickets} t "
            f"WHERE {entries}.ticket_id IS NULL AND NOT ({entries}.origin = 'resolved') "
            f"AND t.run_id = {entries}.run_id AND t.kind = {entries}.origin "
            f"AND t.field = {entries}.field AND t.finding_kind = {entries}.finding_kind "
            f"AND NOT ({_not_the_same('t.entity', f'{entries}.entity')})"
        )


def _within(column: str, ids: Sequence[int]) -> tuple[str, list[Any]]:
    if connection.vendor == "postgresql":
        return f"{column} = ANY(%s::bigint[])", [list(ids)]
    return f"{column} IN ({', '.join(['%s'] * len(ids))})", list(ids)


def _aware(moment: datetime | str) -> datetime:
    # SQLite hands raw timestamps back as text.
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _table(model) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def kept_months() -> list[date]:
    """Every month some judged run started in, oldest first (as last refreshed)."""
    months = (
        TallyRun.objects.filter(judgement_id__isnull=False)
        .order_by("month")
        .values_list("month", flat=True)
        .distinct()
    )
    return list(months)
