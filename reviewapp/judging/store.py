"""Judging runs with the engine, storing what it said, and opening tickets.

Judging is idempotent: a run whose current judgement already covers its last record under
the same policy is left alone, and tickets are unique per run and key. A run's current
judgement only ever moves forward (to one covering later records, or the same records under
a newer policy), so two ingests judging one run at once cannot leave the older view current.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, connection, transaction

from reviewapp.engine import Observation, Record, RecordError, judge_run, parse_record
from reviewapp.infra.bulk import insert_rows
from reviewapp.judging.policies import ActivePolicy
from reviewapp.models import Finding, IngestBatch, Judgement, Run, Ticket, TraceRecord, Verdict

log = logging.getLogger(__name__)
RUNS_PER_BLOCK = 500


def ticket_key(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, separators=(",", ":")).encode()).hexdigest()


def _fingerprint(label: str) -> str:
    return hashlib.sha256(label.encode()).hexdigest()[:16]


def conflict_family(field: str, action: str | None, observations: list[Observation]) -> str:
    """The family of alike conflicts: field, action, the sources involved and how their
    revision domains relate."""
    sources = " + ".join(sorted({o.source for o in observations}))
    domains = sorted({o.revision_domain or "" for o in observations})
    if domains == [""]:
        relation = "no revision domain"
    elif len(domains) == 1:
        relation = f"same domain {domains[0]}"
    else:
        relation = "across domains " + " | ".join(d or "(none)" for d in domains)
    return f"{field} · {action or 'no action'} · {sources} · {relation}"


def _chunks(items: list[int], size: int) -> Iterator[list[int]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def stored_engine_records(run_pks: list[int]) -> dict[int, list[tuple[int, Any]]]:
    """Each run's engine records with their record ids, in recording order."""
    by_run: dict[int, list[tuple[int, Any]]] = defaultdict(list)
    rows = (
        TraceRecord.objects.filter(run_id__in=run_pks)
        .order_by("run_id", "id")
        .values_list("run_id", "id", "data")
    )
    for run_pk, record_id, data in rows.iterator(chunk_size=5000):
        try:
            by_run[run_pk].append((record_id, parse_record(data)))
        except RecordError:
            # Accepted when it arrived; an engine that has grown stricter skips it, loudly.
            log.warning("stored record %s no longer parses; skipped", record_id)
    return by_run


@dataclass(slots=True)
class RunToJudge:
    """A run with every engine record it has, each with its stored id, in recording order."""

    pk: int
    run_id: str
    agent: str
    records: list[tuple[int, Record]]


def judge_stored_runs(
    run_pks: Iterable[int],
    *,
    active: ActivePolicy,
    batch: IngestBatch,
    heartbeat: Callable[[], None] = lambda: None,
) -> None:
    """Judge these runs from their stored records unless their current judgement already
    covers them under the active policy; store what the engine said, open tickets.
    `heartbeat` is called after each block: long work shows it is alive."""
    for block in _chunks(sorted(set(run_pks)), RUNS_PER_BLOCK):
        heartbeat()
        with transaction.atomic():
            runs = Run.objects.filter(pk__in=block).select_related("current_judgement")
            records = stored_engine_records(block)
            due = [
                RunToJudge(run.pk, run.run_id, run.agent, records[run.pk])
                for run in runs
                if records.get(run.pk) and not _is_current(run, records[run.pk][-1][0], active)
            ]
            record_judgements(due, active=active, batch=batch)


def _is_current(run: Run, through: int, active: ActivePolicy) -> bool:
    current = run.current_judgement
    return current is not None and (current.policy_number, current.through_record_id) == (
        active.number,
        through,
    )


def record_judgements(runs: list[RunToJudge], *, active: ActivePolicy, batch: IngestBatch) -> None:
    """Judge these runs, store judgements, verdicts and findings, make each judgement its
    run's current one unless a newer one is already there, and open tickets for those."""
    if not runs:
        return
    results = [
        (run, judge_run(run.run_id, [r for _, r in run.records], active.policy)) for run in runs
    ]
    policy_version_id = active.version.pk if active.version else None
    judgement_ids = insert_rows(
        Judgement,
        (
            "run_id",
            "purpose",
            "policy_version_id",
            "policy_number",
            "through_record_id",
            "verdict_count",
            "conflict_count",
            "unsafe_count",
            "finding_count",
        ),
        [
            (
                run.pk,
                Judgement.Purpose.ACTIVE.value,
                policy_version_id,
                active.number,
                run.records[-1][0],
                len(result.verdicts),
                sum(v.kind == "conflict" for v in result.verdicts),
                sum(v.unsafe for v in result.verdicts),
                len(result.findings),
            )
            for run, result in results
        ],
        return_ids=True,
    )
    verdict_rows, finding_rows = [], []
    for judgement_id, (run, result) in zip(judgement_ids, results, strict=True):
        verdict_rows.extend(
            (judgement_id, run.pk, i, v.entity, v.field, v.action, v.kind, v.reason, v.rule)
            + (v.value, list(v.evidence), v.unsafe)
            for i, v in enumerate(result.verdicts)
        )
        finding_rows.extend(
            (judgement_id, run.pk, i, f.kind, list(f.evidence))
            for i, f in enumerate(result.findings)
        )
    verdict_ids = insert_rows(
        Verdict,
        ("judgement_id", "run_id", "position", "entity", "field", "action", "kind", "reason")
        + ("rule", "value", "evidence", "unsafe"),
        verdict_rows,
        return_ids=True,
    )
    finding_ids = insert_rows(
        Finding,
        ("judgement_id", "run_id", "position", "kind", "evidence"),
        finding_rows,
        return_ids=True,
    )
    now_current = _make_current(judgement_ids)
    verdicts = iter(zip(verdict_ids, verdict_rows, strict=True))
    findings = iter(zip(finding_ids, finding_rows, strict=True))
    tickets: list[tuple[Any, ...]] = []
    for judgement_id, (run, result) in zip(judgement_ids, results, strict=True):
        run_verdicts = [next(verdicts) for _ in result.verdicts]
        run_findings = [next(findings) for _ in result.findings]
        if judgement_id in now_current:
            tickets.extend(
                _tickets_of(run, judgement_id, result, run_verdicts, run_findings, active, batch)
            )
    _insert_new_tickets(tickets)


def _make_current(judgement_ids: list[int]) -> set[int]:
    """Point each run at its new judgement unless its current one is newer or the same
    (later records, or the same records under a newer policy); the ids that became current."""
    runs, judged = Run._meta.db_table, Judgement._meta.db_table
    placeholders = ", ".join(["%s"] * len(judgement_ids))
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {runs} SET current_judgement_id = j.id FROM {judged} j "
            f"WHERE j.id IN ({placeholders}) AND j.run_id = {runs}.id AND NOT EXISTS ("
            f"SELECT 1 FROM {judged} c WHERE c.id = {runs}.current_judgement_id "
            "AND (c.through_record_id > j.through_record_id OR (c.through_record_id = "
            "j.through_record_id AND c.policy_number >= j.policy_number))) "
            "RETURNING current_judgement_id",
            judgement_ids,
        )
        return {judgement_id for (judgement_id,) in cursor.fetchall()}


TICKET_COLUMNS = (
    "run_id",
    "key",
    "kind",
    "entity",
    "field",
    "finding_kind",
    "reason",
    "action",
    "unsafe",
    "sources",
    "agent",
    "fingerprint",
    "fingerprint_label",
    "verdict_id",
    "finding_id",
    "judgement_id",
    "policy_number",
    "batch_id",
)


def _tickets_of(
    run, judgement_id, result, verdicts, findings, active, batch
) -> Iterator[tuple[Any, ...]]:
    """Ticket rows (TICKET_COLUMNS) for a run's conflicts and findings."""
    observations = {r.observation_id: r for _, r in run.records if isinstance(r, Observation)}
    for (verdict_id, _), verdict in zip(verdicts, result.verdicts, strict=True):
        if verdict.kind != "conflict":
            continue
        involved = [observations[i] for i in verdict.evidence if i in observations]
        label = conflict_family(verdict.field, verdict.action, involved)
        yield (
            run.pk,
            ticket_key("conflict", verdict.entity, verdict.field),
            Ticket.Kind.CONFLICT.value,
            verdict.entity,
            verdict.field,
            "",
            verdict.reason or "",
            verdict.action or "",
            verdict.unsafe,
            ",".join(sorted({o.source for o in involved})),
            run.agent,
            _fingerprint(label),
            label,
            verdict_id,
            None,
            judgement_id,
            active.number,
            batch.pk,
        )
    for (finding_id, _), finding in zip(findings, result.findings, strict=True):
        label = f"{finding.kind} · {run.agent or 'unknown agent'}"
        yield (
            run.pk,
            ticket_key("finding", finding.kind),
            Ticket.Kind.FINDING.value,
            None,
            "",
            finding.kind,
            finding.kind,
            "",
            False,
            "",
            run.agent,
            _fingerprint(label),
            label,
            None,
            finding_id,
            judgement_id,
            active.number,
            batch.pk,
        )


def _insert_new_tickets(rows: list[tuple[Any, ...]]) -> None:
    """Tickets are unique per run and key: those already open are left as they are."""
    if not rows:
        return
    existing = set(
        Ticket.objects.filter(run_id__in={row[0] for row in rows}).values_list("run_id", "key")
    )
    # Sorted: two ingests opening the same tickets take their locks in one order.
    new = sorted((row for row in rows if (row[0], row[1]) not in existing), key=lambda row: row[:2])
    try:
        with transaction.atomic():
            insert_rows(Ticket, TICKET_COLUMNS, new)
    except IntegrityError:
        # Another ingest opened some of them meanwhile.
        Ticket.objects.bulk_create(
            [Ticket(**dict(zip(TICKET_COLUMNS, row, strict=True))) for row in new],
            ignore_conflicts=True,
        )
