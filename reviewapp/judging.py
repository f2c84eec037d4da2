"""Judging stored runs with the engine, storing what it said, and opening tickets.

Judging is idempotent: a run whose current judgement already covers its last record under
the same policy is left alone, and tickets are unique per run and key."""

from __future__ import annotations

import hashlib
import json
import logging
from collections import defaultdict
from collections.abc import Iterable, Iterator
from typing import Any

from django.db import IntegrityError, connection, transaction

from reviewapp.bulk import insert_rows
from reviewapp.engine import Observation, RecordError, RunJudgement, judge_run, parse_record
from reviewapp.models import Finding, IngestBatch, Judgement, Run, Ticket, TraceRecord, Verdict
from reviewapp.policies import ActivePolicy

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


def judge_stored_runs(run_pks: Iterable[int], *, active: ActivePolicy, batch: IngestBatch) -> None:
    """Judge these runs under the active policy, store verdicts and findings, open tickets."""
    for block in _chunks(sorted(set(run_pks)), RUNS_PER_BLOCK):
        with transaction.atomic():
            _judge_block(block, active=active, batch=batch)


def _judge_block(run_pks: list[int], *, active: ActivePolicy, batch: IngestBatch) -> None:
    runs = {
        run.pk: run
        for run in Run.objects.filter(pk__in=run_pks).select_related("current_judgement")
    }
    records = stored_engine_records(run_pks)
    pending: list[tuple[Run, Judgement, RunJudgement, dict[str, Observation]]] = []
    for run_pk, run_records in records.items():
        run = runs[run_pk]
        through = run_records[-1][0]
        current = run.current_judgement
        if current and (current.policy_number, current.through_record_id) == (
            active.number,
            through,
        ):
            continue
        engine_records = [record for _, record in run_records]
        result = judge_run(run.run_id, engine_records, active.policy)
        judgement = Judgement(
            run=run,
            purpose=Judgement.Purpose.ACTIVE,
            policy_version=active.version,
            policy_number=active.number,
            through_record_id=through,
            verdict_count=len(result.verdicts),
            conflict_count=sum(v.kind == "conflict" for v in result.verdicts),
            unsafe_count=sum(v.unsafe for v in result.verdicts),
            finding_count=len(result.findings),
        )
        observations = {r.observation_id: r for r in engine_records if isinstance(r, Observation)}
        pending.append((run, judgement, result, observations))
    if not pending:
        return

    insert_rows(Judgement, [judgement for _, judgement, _, _ in pending], assign_ids=True)
    verdict_rows, finding_rows = [], []
    for run, judgement, result, _ in pending:
        verdict_rows.extend(
            Verdict(judgement=judgement, run=run, position=i, **v.as_dict())
            for i, v in enumerate(result.verdicts)
        )
        finding_rows.extend(
            Finding(
                judgement=judgement, run=run, position=i, kind=f.kind, evidence=list(f.evidence)
            )
            for i, f in enumerate(result.findings)
        )
    insert_rows(Verdict, verdict_rows, assign_ids=True)
    insert_rows(Finding, finding_rows, assign_ids=True)
    _point_runs_at([judgement for _, judgement, _, _ in pending])
    _open_tickets(pending, verdict_rows, finding_rows, active=active, batch=batch)


def _point_runs_at(judgements: list[Judgement]) -> None:
    """Make these judgements their runs' current ones, in one statement."""
    runs, judged = Run._meta.db_table, Judgement._meta.db_table
    placeholders = ", ".join(["%s"] * len(judgements))
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {runs} SET current_judgement_id = j.id FROM {judged} j "
            f"WHERE j.run_id = {runs}.id AND j.id IN ({placeholders})",
            [j.pk for j in judgements],
        )


def _open_tickets(
    pending, verdict_rows, finding_rows, *, active: ActivePolicy, batch: IngestBatch
) -> None:
    observations_by_judgement = {judgement.pk: obs for _, judgement, _, obs in pending}
    tickets = []
    for verdict in verdict_rows:
        if verdict.kind != "conflict":
            continue
        observations = observations_by_judgement[verdict.judgement_id]
        involved = [observations[i] for i in verdict.evidence if i in observations]
        label = conflict_family(verdict.field, verdict.action, involved)
        tickets.append(
            Ticket(
                run=verdict.run,
                key=ticket_key("conflict", verdict.entity, verdict.field),
                kind=Ticket.Kind.CONFLICT,
                entity=verdict.entity,
                field=verdict.field,
                reason=verdict.reason or "",
                action=verdict.action or "",
                unsafe=verdict.unsafe,
                sources=",".join(sorted({o.source for o in involved})),
                agent=verdict.run.agent,
                fingerprint=_fingerprint(label),
                fingerprint_label=label,
                verdict=verdict,
                policy_number=active.number,
                batch=batch,
            )
        )
    for finding in finding_rows:
        label = f"{finding.kind} · {finding.run.agent or 'unknown agent'}"
        tickets.append(
            Ticket(
                run=finding.run,
                key=ticket_key("finding", finding.kind),
                kind=Ticket.Kind.FINDING,
                finding_kind=finding.kind,
                reason=finding.kind,
                agent=finding.run.agent,
                fingerprint=_fingerprint(label),
                fingerprint_label=label,
                finding=finding,
                policy_number=active.number,
                batch=batch,
            )
        )
    _insert_new_tickets(tickets)


def _insert_new_tickets(tickets: list[Ticket]) -> None:
    """Tickets are unique per run and key: those already open are left as they are."""
    existing = set(
        Ticket.objects.filter(run_id__in={t.run_id for t in tickets}).values_list("run_id", "key")
    )
    new = [t for t in tickets if (t.run_id, t.key) not in existing]
    try:
        with transaction.atomic():
            insert_rows(Ticket, new)
    except IntegrityError:
        # Another ingest opened some of them meanwhile.
        Ticket.objects.bulk_create(new, ignore_conflicts=True)
