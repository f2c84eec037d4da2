"""What a ticket's run shows a reviewer: the disputed observations side by side with their
calls, the engine's verdict beside the agent's own resolution, the action that followed, the
run's calls as a timeline with the findings that concern them; and the handoff package, the
same evidence as JSON for the team that owns a source.

Stored records are read once per ticket (one query), up to the last one the ticket's judgement
covered, and parsed with the engine's own parser: what is shown is what the engine judged,
and it never changes.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

from reviewapp.engine import (
    ABSENT,
    AgentAction,
    Observation,
    Policy,
    RecordError,
    Resolution,
    ToolCall,
    parse_record,
)
from reviewapp.infra.times import parse_timestamp
from reviewapp.judging.policies import default_policy, policy_of_version_id
from reviewapp.models import (
    AuditEvent,
    Finding,
    Ticket,
    TicketComment,
    TicketMark,
    TraceRecord,
    Verdict,
)

log = logging.getLogger(__name__)
# Past these, the page says how many more there are; the handoff package has them all.
SHOWN_OBSERVATIONS = 24
SHOWN_TIMELINE = 200


@dataclass
class ObservationColumn:
    """One disputed observation with the call that produced it."""

    observation: Observation
    record: TraceRecord
    call: ToolCall | None
    call_record: TraceRecord | None
    raw_value: Any
    has_value: bool
    normalized_value: Any
    completed_at: str | None
    field_name: str
    completion_rank: int | None = None

    @property
    def requested_entity(self) -> str | None:
        return self.call.entity if self.call else None

    @property
    def echoed_entity(self) -> str | None:
        return self.observation.entity

    @property
    def entity_mismatch(self) -> bool:
        requested, echoed = self.requested_entity, self.echoed_entity
        return requested is not None and echoed is not None and requested != echoed

    @property
    def value_normalized_differently(self) -> bool:
        return self.has_value and self.normalized_value != self.raw_value

    @property
    def raw_json(self) -> str:
        return _json(self.raw_value)

    @property
    def normalized_json(self) -> str:
        return _json(self.normalized_value)

    @property
    def arguments_json(self) -> str:
        return _json(dict(self.call.arguments)) if self.call else ""

    @property
    def errors(self) -> list[tuple[str, str, bool]]:
        """(code, message, whether it concerns the disputed field), fallback included."""
        concerning = (
            set(self.observation.errors_concerning(self.field_name)) if self.field_name else set()
        )
        shown = [
            (e.code or "", e.message or "", not self.field_name or e in concerning)
            for e in self.observation.errors
        ]
        if self.observation.fallback:
            shown.append(("FALLBACK", "cached fallback value, not a current read", True))
        return shown


@dataclass
class TimelineEntry:
    record: TraceRecord
    call: ToolCall | None = None
    action: AgentAction | None = None
    finding_kinds: list[str] = field(default_factory=list)
    disputed: bool = False  # it produced one of the ticket's observations


@dataclass
class TicketEvidence:
    ticket: Ticket
    policy: Policy
    columns: list[ObservationColumn]
    resolution: Resolution | None
    action: AgentAction | None
    action_record: TraceRecord | None
    timeline: list[TimelineEntry]
    findings: list[Finding]

    @property
    def shown_columns(self) -> list[ObservationColumn]:
        return self.columns[:SHOWN_OBSERVATIONS]

    @property
    def hidden_columns(self) -> int:
        return max(0, len(self.columns) - SHOWN_OBSERVATIONS)

    @property
    def shown_timeline(self) -> list[TimelineEntry]:
        return self.timeline[:SHOWN_TIMELINE]

    @property
    def hidden_timeline(self) -> int:
        return max(0, len(self.timeline) - SHOWN_TIMELINE)

    @property
    def action_arguments_json(self) -> str:
        return _json(dict(self.action.arguments)) if self.action and self.action.arguments else ""

    @property
    def evidence_ids(self) -> list[str]:
        source = self.ticket.verdict or self.ticket.finding
        return list(source.evidence) if source else []


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def _policy_of(ticket: Ticket) -> Policy:
    """The policy the ticket was judged under: its field normalizers explain the values."""
    judged = ticket.verdict or ticket.finding
    version_id = judged.judgement.policy_version_id if judged else None
    return default_policy() if version_id is None else policy_of_version_id(version_id)


def _parsed(records: list[TraceRecord]) -> list[tuple[TraceRecord, Any]]:
    parsed = []
    for record in records:
        try:
            parsed.append((record, parse_record(record.document)))
        except RecordError:
            # Accepted when it arrived; an engine grown stricter since skips it, as judging does.
            log.warning("stored record %s no longer parses; not shown", record.pk)
    return parsed


def ticket_evidence(ticket: Ticket) -> TicketEvidence:
    """Everything the ticket page and the handoff package show, from one read of the run.

    `ticket` must come with its run, and its verdict or finding with their judgement
    (see `with_judgement`)."""
    policy = _policy_of(ticket)
    judged = ticket.verdict or ticket.finding
    run_records = TraceRecord.objects.filter(run_id=ticket.run_id)
    if judged:
        # What the engine judged: lines of the run that arrived later are another judgement's.
        run_records = run_records.filter(id__lte=judged.judgement.through_record_id)
    records = _parsed(list(run_records.select_related("line__batch").order_by("id")))
    calls: dict[str, tuple[TraceRecord, ToolCall]] = {}
    for record, parsed in records:
        if isinstance(parsed, ToolCall):
            calls.setdefault(parsed.tool_call_id, (record, parsed))  # the first of duplicates

    evidence_ids = set(judged.evidence if judged else ())
    columns = [
        _column(record, parsed, calls, ticket.field, policy)
        for record, parsed in records
        if isinstance(parsed, Observation) and parsed.observation_id in evidence_ids
    ]
    _rank_completion(columns)

    resolutions = [parsed for _, parsed in records if isinstance(parsed, Resolution)]
    action_record, action = _action_that_followed(records, columns)
    findings = list(_findings(ticket))
    disputed_calls = {c.observation.tool_call_id for c in columns if c.observation.tool_call_id}
    return TicketEvidence(
        ticket=ticket,
        policy=policy,
        columns=columns,
        resolution=resolutions[-1] if resolutions else None,
        action=action,
        action_record=action_record,
        timeline=_timeline(records, findings, disputed_calls),
        findings=findings,
    )


def with_judgement(ticket: Ticket) -> Ticket:
    """The ticket with its verdict or finding and their judgement loaded, which
    `ticket_evidence` reads (one query)."""
    if ticket.verdict_id:
        ticket.verdict = Verdict.objects.select_related("judgement").get(pk=ticket.verdict_id)
    elif ticket.finding_id:
        ticket.finding = Finding.objects.select_related("judgement").get(pk=ticket.finding_id)
    return ticket


def _column(
    record, observation: Observation, calls, field_name: str, policy: Policy
) -> ObservationColumn:
    call_record, call = calls.get(observation.tool_call_id, (None, None))
    if field_name:
        raw = observation.value_for(field_name)
        has_value = raw is not ABSENT
        normalized = (
            policy.field_policy(field_name).normalizer.normalize(raw) if has_value else None
        )
    else:
        # A finding names no field: show every business value the observation carries,
        # as the line held them (no "field" or "value" key it did not have).
        raw, has_value = observation.payload(), True
        if observation.field is None:
            raw.pop("field", None)
        if observation.value is ABSENT:
            raw.pop("value", None)
        normalized = raw
    return ObservationColumn(
        observation=observation,
        record=record,
        call=call,
        call_record=call_record,
        raw_value=raw if has_value else None,
        has_value=has_value,
        normalized_value=normalized,
        completed_at=observation.completed_at or (call.completed_at if call else None),
        field_name=field_name,
    )


def _rank_completion(columns: list[ObservationColumn]) -> None:
    """Completion order by the callers' clocks: shown as evidence, never used to decide."""
    timed = sorted(
        (moment, index)
        for index, column in enumerate(columns)
        if (moment := parse_timestamp(column.completed_at)) is not None
    )
    for rank, (_, index) in enumerate(timed, start=1):
        columns[index].completion_rank = rank


def _action_that_followed(records, columns: list[ObservationColumn]):
    """The first agent_action after the last disputed observation, in line order."""
    if not columns:
        return None, None
    last = max(column.record.pk for column in columns)
    for record, parsed in records:
        if record.pk > last and isinstance(parsed, AgentAction):
            return record, parsed
    return None, None


def _findings(ticket: Ticket):
    judged = ticket.verdict or ticket.finding
    if judged is None or not judged.judgement.finding_count:
        return Finding.objects.none()
    return Finding.objects.filter(judgement_id=judged.judgement_id).order_by("position")


def _timeline(records, findings: list[Finding], disputed_calls: set[str]) -> list[TimelineEntry]:
    kinds_by_id: dict[str, list[str]] = {}
    for finding in findings:
        for evidence_id in finding.evidence:
            kinds_by_id.setdefault(evidence_id, []).append(finding.kind)
    timeline = []
    for record, parsed in records:
        if isinstance(parsed, ToolCall):
            timeline.append(
                TimelineEntry(
                    record,
                    call=parsed,
                    finding_kinds=kinds_by_id.get(parsed.tool_call_id, []),
                    disputed=parsed.tool_call_id in disputed_calls,
                )
            )
        elif isinstance(parsed, AgentAction):
            timeline.append(TimelineEntry(record, action=parsed))
    return timeline


# --- the handoff package -----------------------------------------------------------


def _envelope(record: TraceRecord | None) -> dict[str, Any] | None:
    """Where the raw bytes are kept: enough for the source's team to ask for the line."""
    if record is None:
        return None
    line = record.line
    return {
        "traceLineId": line.pk,
        "traceRecordId": record.pk,
        "batch": str(line.batch.public_id),
        "file": line.batch.file_name,
        "lineNumber": line.line_number,
        "format": line.format,
    }


def _errors(observation: Observation) -> list[dict[str, Any]]:
    errors = [{"code": e.code, "message": e.message, "field": e.field} for e in observation.errors]
    if observation.fallback:
        errors.append({"code": "FALLBACK", "message": "cached fallback value", "field": None})
    return errors


def handoff_package(evidence: TicketEvidence) -> dict[str, Any]:
    ticket = evidence.ticket
    verdict = ticket.verdict
    ordered = sorted(
        (c for c in evidence.columns if c.completion_rank is not None),
        key=lambda c: c.completion_rank or 0,
    )
    return {
        "ticket": {
            "id": ticket.pk,
            "kind": ticket.kind,
            "reason": ticket.reason,
            "field": ticket.field or None,
            "entity": ticket.entity,
            "state": ticket.state,
            "unsafe": ticket.unsafe,
            "family": {"fingerprint": ticket.fingerprint, "label": ticket.fingerprint_label},
            "policyVersion": ticket.policy_number,
        },
        "runId": ticket.run.run_id,
        "agent": ticket.run.agent or None,
        "verdict": (
            {
                "kind": verdict.kind,
                "reason": verdict.reason,
                "rule": verdict.rule,
                "value": verdict.value,
                "evidence": verdict.evidence,
                "unsafe": verdict.unsafe,
            }
            if verdict
            else None
        ),
        "callIds": [c.call.tool_call_id for c in evidence.columns if c.call],
        "observations": [
            {
                "observationId": c.observation.observation_id,
                "toolCallId": c.observation.tool_call_id,
                "tool": c.call.tool if c.call else None,
                "arguments": dict(c.call.arguments) if c.call else None,
                "source": c.observation.source,
                "requestedEntity": c.requested_entity,
                "returnedEntity": c.echoed_entity,
                "entityMismatch": c.entity_mismatch,
                "revisionDomain": c.observation.revision_domain,
                "sourceRevision": c.observation.source_revision,
                "rawValue": c.raw_value,
                "normalizedValue": c.normalized_value,
                "errors": _errors(c.observation),
                "callStartedAt": c.call.started_at if c.call else None,
                "callCompletedAt": c.call.completed_at if c.call else None,
                "completedAt": c.completed_at,
                "completionOrder": c.completion_rank,
                "envelope": _envelope(c.record),
                "callEnvelope": _envelope(c.call_record),
            }
            for c in evidence.columns
        ],
        "completionOrder": [c.observation.observation_id for c in ordered],
        "actionThatFollowed": (
            {
                "name": evidence.action.name,
                "arguments": dict(evidence.action.arguments),
                "opId": evidence.action.op_id,
                "idempotencyKey": evidence.action.idempotency_key,
                "outcome": evidence.action.outcome,
                "envelope": _envelope(evidence.action_record),
            }
            if evidence.action
            else None
        ),
        "agentResolution": (
            {
                "kind": evidence.resolution.kind,
                "reason": evidence.resolution.reason,
                "value": evidence.resolution.chosen_value,
                "confidence": evidence.resolution.confidence,
                "reasoning": evidence.resolution.reasoning,
            }
            if evidence.resolution
            else None
        ),
        "findings": [{"kind": f.kind, "evidence": f.evidence} for f in evidence.findings],
        **_work_record(ticket),
    }


def _work_record(ticket: Ticket) -> dict[str, Any]:
    """What people did with the ticket: its state of work, its comments and its audit
    trail, so that the team it is handed to sees why it was closed, and by whom."""
    people = Ticket.objects.select_related("assignee", "closed_by").get(pk=ticket.pk)
    comments = TicketComment.objects.filter(ticket=ticket).select_related("author")
    events = AuditEvent.objects.filter(ticket=ticket).select_related("actor")
    return {
        "work": {
            "state": people.state,
            "assignee": people.assignee.get_username() if people.assignee else None,
            "resolution": people.resolution or None,
            "cause": people.cause or None,
            "causeNote": people.cause_text or None,
            "closedBy": people.closed_by.get_username() if people.closed_by else None,
            "closedAt": people.closed_at.isoformat() if people.closed_at else None,
            "rightObservation": _mark_record(people),
        },
        "comments": [
            {"author": c.author.get_username(), "at": c.created_at.isoformat(), "text": c.text}
            for c in comments
        ],
        "auditTrail": [
            {
                "at": e.created_at.isoformat(),
                "actor": e.actor.get_username() if e.actor else None,
                "verb": e.verb,
                "channel": e.channel or None,
                "data": e.data,
            }
            for e in events
        ],
    }


def _mark_record(ticket: Ticket) -> dict[str, Any] | None:
    """Which observation the close marked right (review/marks.py), if it marked one."""
    if ticket.state != Ticket.State.CLOSED:
        return None
    mark = (
        TicketMark.objects.filter(ticket=ticket, ticket_revision=ticket.revision)
        .select_related("marked_by")
        .first()
    )
    if mark is None:
        return None
    return {
        "observationId": mark.observation_id or None,
        "source": mark.source or None,
        "noneRight": mark.none_right,
        "revisionDomain": mark.domain or None,
        "rightWasHigherRevision": mark.right_is_higher,
        "cause": mark.cause or None,
        "markedBy": mark.marked_by.get_username(),
        "markedAt": mark.created_at.isoformat(),
    }
