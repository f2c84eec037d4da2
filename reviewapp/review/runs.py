"""A run as a reviewer reads it whole: every record in line order (calls, observations, the
agent's resolutions and actions), the verdicts and findings of its current judgement beside
the records they name, and its tickets. A bounded number of queries whatever the run's size;
past SHOWN_RECORDS the page says how many more there are."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from reviewapp.engine import (
    AgentAction,
    Observation,
    RecordError,
    Resolution,
    ToolCall,
    parse_record,
)
from reviewapp.models import Finding, Run, Ticket, TraceRecord, Verdict, policy_name
from reviewapp.review.disputed import value_text

SHOWN_RECORDS = 500


@dataclass
class RunEntry:
    """One record of the run, as the timeline shows it."""

    record: TraceRecord
    kind: str  # "call", "observation", "resolution", "action" or "other"
    call: ToolCall | None = None
    observation: Observation | None = None
    resolution: Resolution | None = None
    action: AgentAction | None = None
    value_field: str = ""  # the field whose value an observation shows
    value: str = ""  # that value (or every business value it carries), shortened
    verdicts: list[Verdict] = field(default_factory=list)  # verdicts naming it as evidence
    finding_kinds: list[str] = field(default_factory=list)


@dataclass
class RunTimeline:
    run: Run
    entries: list[RunEntry]
    hidden: int
    verdicts: list[Verdict]
    findings: list[Finding]
    tickets: list[dict[str, Any]]
    # The policy version its current judgement was made under (0: the built-in default),
    # whose rules its verdicts name, and that version's name.
    policy_number: int = 0
    version: str = ""


def _entry(record: TraceRecord, parsed: Any) -> RunEntry:
    if isinstance(parsed, ToolCall):
        return RunEntry(record, "call", call=parsed)
    if isinstance(parsed, Observation):
        return RunEntry(record, "observation", observation=parsed)
    if isinstance(parsed, Resolution):
        return RunEntry(record, "resolution", resolution=parsed)
    if isinstance(parsed, AgentAction):
        return RunEntry(record, "action", action=parsed)
    return RunEntry(record, "other")


def run_timeline(run: Run) -> RunTimeline:
    """The run whole, in at most five queries (records, their count past the shown ones,
    verdicts, findings, tickets) whatever its size, and one more for its current judgement
    unless `run` was read with it (select_related)."""
    records = list(
        TraceRecord.objects.filter(run_id=run.pk)
        .select_related("line__batch")
        .order_by("id")[: SHOWN_RECORDS + 1]
    )
    hidden = 0
    if len(records) > SHOWN_RECORDS:
        hidden = TraceRecord.objects.filter(run_id=run.pk).count() - SHOWN_RECORDS
        records = records[:SHOWN_RECORDS]
    judgement_id = run.current_judgement_id
    verdicts: list[Verdict] = []
    findings: list[Finding] = []
    if judgement_id is not None:
        verdicts = list(Verdict.objects.filter(judgement_id=judgement_id).order_by("position"))
        findings = list(Finding.objects.filter(judgement_id=judgement_id).order_by("position"))
    by_evidence: dict[str, list[Verdict]] = {}
    for verdict in verdicts:
        for evidence_id in verdict.evidence:
            by_evidence.setdefault(evidence_id, []).append(verdict)
    kinds_by_id: dict[str, list[str]] = {}
    for finding in findings:
        for evidence_id in finding.evidence:
            kinds_by_id.setdefault(evidence_id, []).append(finding.kind)
    entries = []
    for record in records:
        try:
            parsed = parse_record(record.document)
        except RecordError:
            parsed = None
        entry = _entry(record, parsed)
        if entry.observation:
            observation = entry.observation
            entry.verdicts = by_evidence.get(observation.observation_id, [])
            entry.finding_kinds = kinds_by_id.get(observation.observation_id, [])
            # The value a verdict disputes, else the observation's own field's, else all.
            entry.value_field = (
                entry.verdicts[0].field if entry.verdicts else observation.field or ""
            )
            entry.value = value_text(
                observation.value_for(entry.value_field)
                if entry.value_field
                else observation.payload()
            )
        elif entry.call:
            entry.finding_kinds = kinds_by_id.get(entry.call.tool_call_id, [])
        entries.append(entry)
    tickets: list[dict[str, Any]] = [
        dict(row)
        for row in Ticket.objects.filter(run_id=run.pk)
        .order_by("id")
        .values("pk", "state", "reason", "field", "finding_kind", "entity", "resolution")
    ]
    judgement = run.current_judgement
    number = judgement.policy_number if judgement is not None else 0
    return RunTimeline(
        run, entries, hidden, verdicts, findings, tickets, number, policy_name(number)
    )
