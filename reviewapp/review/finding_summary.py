"""What a finding found, in one line for its queue row: the tool of each call it names, the
operation, how many attempts, the ids ("create_refund ×3 in op-7, no idempotency key:
call-1, call-2, call-3"). A finding keeps its kind and the ids of its evidence (engine
findings.py); the tool, the operation and the idempotency keys are read from the run's
stored tool calls those ids name, in one query for a page of rows. An id no stored call
has (an observation's, or a call whose raw data expired) is named as it is."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from reviewapp.engine import RecordError, ToolCall, parse_record
from reviewapp.models import TraceRecord

log = logging.getLogger(__name__)

# Enough to say what a row found; the ticket names every id.
IDS_SHOWN = 6

# What the kinds about repeated attempts of one operation add to the tools and the count.
_ATTEMPTS_SAY = {
    "retry-without-idempotency-key": "no idempotency key",
    "mutation-budget-exceeded": "over the mutation budget",
    "retry-after-unknown-outcome": "retried after an unknown outcome",
}


def finding_summaries(findings: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Each finding ticket's summary by ticket pk (as text), from rows with `pk`,
    `finding_kind`, `run_id` and `finding__evidence` (the finding's ids; None for a ticket
    that keeps no finding)."""
    findings = list(findings)
    evidence_of = {
        str(row["pk"]): (row["run_id"], [str(i) for i in row["finding__evidence"] or ()])
        for row in findings
    }
    kinds = {str(row["pk"]): row["finding_kind"] for row in findings}
    calls = _stored_calls({(run, i) for run, ids in evidence_of.values() for i in ids})
    return {
        pk: summary(kinds[pk], ids, {i: calls[run, i] for i in ids if (run, i) in calls})
        for pk, (run, ids) in evidence_of.items()
    }


def summary(kind: str, evidence: Sequence[str], calls: Mapping[str, ToolCall]) -> str:
    """What a finding of `kind` with these evidence ids found, their calls as `calls` has them."""
    if not evidence:
        return kind
    # The calls grouped by tool and operation, in the evidence's order.
    groups: dict[tuple[str, str | None], list[str]] = {}
    unknown: list[str] = []
    for evidence_id in evidence:
        call = calls.get(evidence_id)
        if call is None:
            unknown.append(evidence_id)
        else:
            groups.setdefault((call.tool, call.op_id), []).append(evidence_id)
    parts = []
    for (tool, op_id), ids in groups.items():
        part = tool if len(ids) == 1 else f"{tool} ×{len(ids)}"
        parts.append(f"{part} in {op_id}" if op_id else part)
    said = _ATTEMPTS_SAY.get(kind)
    if said == _ATTEMPTS_SAY["retry-without-idempotency-key"] and any(
        calls[i].idempotency_key for i in evidence if i in calls
    ):
        said = "idempotency key missing or changed"
    if said and parts:
        parts.append(said)
    shown = list(evidence[:IDS_SHOWN])
    more = f" and {len(evidence) - IDS_SHOWN} more" if len(evidence) > IDS_SHOWN else ""
    ids_text = ", ".join(shown) + more
    if not parts:
        return f"{len(evidence)} id{'s' if len(evidence) != 1 else ''}: {ids_text}"
    return f"{', '.join(parts)}: {ids_text}"


def _stored_calls(wanted: set[tuple[int, str]]) -> dict[tuple[int, str], ToolCall]:
    """The first stored call of each (run pk, tool call id), parsed."""
    if not wanted:
        return {}
    records = (
        TraceRecord.objects.filter(
            type=TraceRecord.Type.TOOL_CALL,
            run_id__in={run for run, _ in wanted},
            key__in={key for _, key in wanted},
        )
        .select_related("line")
        .only("run_id", "key", "data", "line__raw")
        .order_by("id")
    )
    calls: dict[tuple[int, str], ToolCall] = {}
    for record in records:
        found = (record.run_id, record.key)
        if found not in wanted or found in calls:
            continue
        try:
            parsed = parse_record(record.document)
        except RecordError:
            # Its raw data expired, or it no longer parses: the id is named as it is.
            log.info("tool call record %s not read for its finding's summary", record.pk)
            continue
        if isinstance(parsed, ToolCall):
            calls[found] = parsed
    return calls
