"""Opening tickets: every conflict verdict and every finding of a judgement that became
its run's current one is work for a reviewer, one ticket per run and (entity, field) or
finding kind. Tickets of alike conflicts share a family (fingerprint), so they can be
worked together."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterator
from typing import Any

from django.db import IntegrityError, transaction

from reviewapp.engine import Observation, Policy
from reviewapp.engine.judge import PARTIAL_RESULT
from reviewapp.infra.bulk import insert_rows
from reviewapp.judging.store import Stored
from reviewapp.models import Ticket
from reviewapp.review.disputed import disputed_values

# One encoder for every key: json.dumps with arguments builds a new one at each call.
_KEY_JSON = json.JSONEncoder(separators=(",", ":"))


def ticket_key(*parts: Any) -> str:
    return hashlib.sha256(_KEY_JSON.encode(parts).encode()).hexdigest()


# Families and finding kinds are few beside the tickets they name: each is hashed once.
@functools.lru_cache(maxsize=4096)
def _fingerprint(label: str) -> str:
    return hashlib.sha256(label.encode()).hexdigest()[:16]


@functools.lru_cache(maxsize=1024)
def _finding_key(kind: str) -> str:
    return ticket_key("finding", kind)


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
    "disputed",
)


def tickets_open(
    stored: list[Stored], *, policy: Policy, policy_number: int, batch_id: int, first: bool = False
) -> int:
    """Open the tickets of these judgements (made under `policy`, numbered `policy_number`)
    that became current; tickets already open for the same run and key are left as they are;
    how many it opened (see _insert_new_tickets). `first`: the runs' first judgements, so no
    ticket of theirs is looked for (one opened meanwhile is still left as it is)."""
    rows = [
        row
        for item in stored
        if item.current
        for row in _ticket_rows(item, policy, policy_number=policy_number, batch_id=batch_id)
    ]
    return _insert_new_tickets(rows, look_up=not first)


def _ticket_rows(
    item: Stored, policy: Policy, *, policy_number: int, batch_id: int
) -> Iterator[tuple[Any, ...]]:
    """Ticket rows (TICKET_COLUMNS) for a judgement's conflicts and findings."""
    run, result = item.judged.run, item.judged.result
    observations = {r.observation_id: r for _, r in run.records if isinstance(r, Observation)}
    for verdict_id, verdict in zip(item.verdict_ids, result.verdicts, strict=True):
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
            item.judgement_id,
            policy_number,
            batch_id,
            disputed_values(
                policy, verdict.field, involved, partial=verdict.reason == PARTIAL_RESULT
            ),
        )
    for finding_id, finding in zip(item.finding_ids, result.findings, strict=True):
        label = f"{finding.kind} · {run.agent or 'unknown agent'}"
        yield (
            run.pk,
            _finding_key(finding.kind),
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
            item.judgement_id,
            policy_number,
            batch_id,
            [],
        )


def _insert_new_tickets(rows: list[tuple[Any, ...]], *, look_up: bool) -> int:
    """Tickets are unique per run and key: those already open are left as they are. How
    many it opened, as far as it knows: none where another ingest opened some meanwhile
    (what a running batch shows it has opened so far; its end counts every ticket)."""
    if not rows:
        return 0
    existing = (
        set(Ticket.objects.filter(run_id__in={row[0] for row in rows}).values_list("run_id", "key"))
        if look_up
        else set()
    )
    # Sorted: two ingests opening the same tickets take their locks in one order.
    new = sorted((row for row in rows if (row[0], row[1]) not in existing), key=lambda r: r[:2])
    try:
        with transaction.atomic():
            insert_rows(Ticket, TICKET_COLUMNS, new)
        return len(new)
    except IntegrityError:
        # Another ingest opened some of them meanwhile.
        Ticket.objects.bulk_create(
            [Ticket(**dict(zip(TICKET_COLUMNS, row, strict=True))) for row in new],
            ignore_conflicts=True,
        )
        return 0
