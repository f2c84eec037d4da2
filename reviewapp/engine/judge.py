"""Judging one run (spec/policy.md): groups, verdicts in their fixed order, run findings.

Only line order inside the run matters; timestamps and arrival order never decide.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .findings import Finding, FindingCollector
from .normalize import canonical
from .policy import FieldPolicy, Policy, Rule
from .records import (
    ABSENT,
    AgentAction,
    Observation,
    Record,
    Resolution,
    RunStarted,
    ToolCall,
)
from .trajectory import trajectory_findings

CONFIRMED, RESOLVED, CONFLICT = "confirmed", "resolved", "conflict"
IDENTITY_MISMATCH = "identity-mismatch"
PARTIAL_RESULT = "partial-result"
REVIEW_REQUIRED = "review-required"
NO_APPROVED_PRECEDENCE = "no-approved-precedence"


@dataclass(frozen=True, slots=True)
class Verdict:
    entity: str | None
    field: str
    action: str | None
    kind: str
    reason: str | None
    rule: str | None
    value: Any
    evidence: tuple[str, ...]
    unsafe: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "entity": self.entity,
            "field": self.field,
            "action": self.action,
            "kind": self.kind,
            "reason": self.reason,
            "rule": self.rule,
            "value": self.value,
            "evidence": list(self.evidence),
            "unsafe": self.unsafe,
        }


@dataclass(frozen=True, slots=True)
class RunJudgement:
    run_id: str
    policy_version: int | None
    verdicts: tuple[Verdict, ...]
    findings: tuple[Finding, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "runId": self.run_id,
            "policyVersion": self.policy_version,
            "verdicts": [v.as_dict() for v in self.verdicts],
            "findings": [f.as_dict() for f in self.findings],
        }


@dataclass(slots=True)
class _Member:
    """An observation inside one group, with what the group needs to know about it."""

    observation: Observation
    value: Any
    identity_mismatch: bool


def _blocking_errors(observation: Observation, field: FieldPolicy) -> bool:
    """An error concerning the field (string error, object error naming it or no field, the
    fallback marker) whose code is not harmless for it: a partial result."""
    if not observation.errors and not observation.fallback:
        return False
    return any(
        error.code not in field.harmless_errors
        for error in observation.errors_concerning(field.name)
    )


def _blocking_error_names(observation: Observation, field: FieldPolicy) -> bool:
    """A blocking object error with this very `field`: the source said the field failed.

    A string error, an object error without `field` and the fallback marker name no field."""
    return any(
        error.field == field.name and error.code not in field.harmless_errors
        for error in observation.errors
    )


def _apply_rule(rule: Rule, members: list[_Member], normalized: list[Any]) -> Any:
    """The chosen raw value when the rule resolves the group, ABSENT when it does not apply."""
    if rule.kind == "higher-source-revision":
        # Revisions compare only inside one named domain: an observation that names none has
        # no comparable revision, even beside others that name none either.
        domains = {m.observation.revision_domain for m in members}
        if len(domains) != 1 or None in domains:
            return ABSENT
        domain = next(iter(domains))
        if rule.revision_domain is not None and rule.revision_domain != domain:
            return ABSENT
        revisions = [m.observation.source_revision for m in members]
        if any(r is None for r in revisions):
            return ABSENT
        highest = max(revisions)
        if revisions.count(highest) != 1:
            return ABSENT
        return members[revisions.index(highest)].value
    if rule.kind == "authoritative-source":
        owned = [i for i, m in enumerate(members) if m.observation.source == rule.source]
        if not owned:
            return ABSENT
        if len({canonical(normalized[i]) for i in owned}) != 1:
            return ABSENT
        if rule.unless_values:
            unless = {canonical(v) for v in rule.unless_values}
            if any(canonical(v) in unless for v in normalized):
                return ABSENT
        return members[owned[0]].value
    return ABSENT


def _verdict_for_group(
    members: list[_Member], field: FieldPolicy, policy: Policy, action: str | None
) -> tuple[str, str | None, str | None, Any]:
    """(kind, reason, rule id, value) by the first matching step of spec/policy.md."""
    if policy.identity_mode == "blocking" and any(m.identity_mismatch for m in members):
        return CONFLICT, IDENTITY_MISMATCH, None, None
    if any(_blocking_errors(m.observation, field) for m in members):
        return CONFLICT, PARTIAL_RESULT, None, None
    normalize = field.normalizer.normalize
    normalized = [normalize(m.value) for m in members]
    if len({canonical(v) for v in normalized}) == 1:
        return CONFIRMED, None, None, normalized[0]
    for rule in policy.rules:
        if not rule.matches(field.name, action):
            continue
        if rule.kind == "require-review":
            return CONFLICT, REVIEW_REQUIRED, rule.id, None
        chosen = _apply_rule(rule, members, normalized)
        if chosen is not ABSENT:
            return RESOLVED, None, rule.id, chosen
    return CONFLICT, NO_APPROVED_PRECEDENCE, None, None


def _agent_disagrees(resolution: Resolution, verdict: Verdict, field: FieldPolicy) -> bool:
    agent_conflict = resolution.kind in (CONFLICT, "needs_human_review")
    engine_conflict = verdict.kind == CONFLICT
    if agent_conflict or engine_conflict:
        return agent_conflict != engine_conflict
    chosen = resolution.chosen_value
    if chosen is None:
        return False
    normalize = field.normalizer.normalize
    return canonical(normalize(chosen)) != canonical(normalize(verdict.value))


def judge_run(run_id: str, records: Sequence[Record], policy: Policy) -> RunJudgement:
    """Judge one run's records, given in recording (line) order, under `policy`."""
    calls: dict[str, ToolCall] = {}
    call_list: list[ToolCall] = []
    observations: list[tuple[int, Observation]] = []
    action_positions: list[int] = []
    action_names: list[str] = []
    subject: dict[str, Any] | None = None
    resolution: Resolution | None = None
    collector = FindingCollector()

    for position, record in enumerate(records):
        if isinstance(record, Observation):
            observations.append((position, record))
        elif isinstance(record, ToolCall):
            call_list.append(record)
            if record.tool_call_id in calls:
                collector.add("duplicate-tool-call-id", [record.tool_call_id])
            else:
                calls[record.tool_call_id] = record
        elif isinstance(record, AgentAction):
            action_positions.append(position)
            action_names.append(record.name)
        elif isinstance(record, Resolution):
            resolution = record
        elif isinstance(record, RunStarted) and subject is None:
            subject = dict(record.subject)

    decision_fields = [policy.field_policy(name) for name in policy.decision_fields]
    groups: dict[tuple[str | None, str], list[_Member]] = {}
    # Groups in which some observation says something about the field itself: a value, or a
    # blocking error naming it. Errors alone say nothing about a field nobody returned.
    evidenced: set[tuple[str | None, str]] = set()
    first_position: dict[tuple[str | None, str], int] = {}
    last_position: dict[tuple[str | None, str], int] = {}
    seen_observation_ids: set[str] = set()
    by_event: dict[str, list[Observation]] = defaultdict(list)

    for position, observation in observations:
        if observation.observation_id in seen_observation_ids:
            collector.add("duplicate-observation-id", [observation.observation_id])
        seen_observation_ids.add(observation.observation_id)
        if observation.event_id is not None:
            by_event[observation.event_id].append(observation)

        call = calls.get(observation.tool_call_id) if observation.tool_call_id else None
        if calls and call is None:
            collector.add("orphan-observation", [observation.observation_id])
        requested = call.entity if call is not None else None
        mismatch = (
            requested is not None
            and observation.entity is not None
            and observation.entity != requested
        )
        if mismatch and policy.identity_mode == "report-only":
            collector.add("identity-mismatch", [observation.observation_id])
        # Grouped by what the call asked for; only an observation joined to no call falls
        # back on the identity its response claims.
        entity = observation.entity if call is None else requested

        for field in decision_fields:
            value = observation.value_for(field.name)
            if value is ABSENT and not _blocking_errors(observation, field):
                continue
            key = (entity, field.name)
            if key not in groups:
                groups[key] = []
                first_position[key] = position
            groups[key].append(_Member(observation, value, mismatch))
            last_position[key] = position
            if value is not ABSENT or _blocking_error_names(observation, field):
                evidenced.add(key)

    for event_observations in by_event.values():
        if len(event_observations) > 1:
            payloads = {canonical(o.payload()) for o in event_observations}
            if len(payloads) > 1:
                collector.add("event-body-mismatch", [o.observation_id for o in event_observations])

    verdicts = []
    fields_by_name = {f.name: f for f in decision_fields}
    ordered_groups = sorted(groups, key=lambda key: (first_position[key], key[1]))
    for entity, field_name in ordered_groups:
        members = groups[(entity, field_name)]
        if len(members) < 2 or (entity, field_name) not in evidenced:
            continue
        field = fields_by_name[field_name]
        following = bisect_right(action_positions, last_position[(entity, field_name)])
        action = action_names[following] if following < len(action_names) else None
        kind, reason, rule_id, value = _verdict_for_group(members, field, policy, action)
        verdicts.append(
            Verdict(
                entity=entity,
                field=field_name,
                action=action,
                kind=kind,
                reason=reason,
                rule=rule_id,
                value=value,
                evidence=tuple(m.observation.observation_id for m in members),
                unsafe=kind == CONFLICT
                and action is not None
                and action not in policy.safe_actions,
            )
        )
    if resolution is not None:
        disputed = set(resolution.disputed_fields)
        for verdict in verdicts:
            if disputed and verdict.field not in disputed:
                continue
            if _agent_disagrees(resolution, verdict, fields_by_name[verdict.field]):
                collector.add("agent-resolution-disagrees", verdict.evidence)

    if policy.trajectory is not None:
        trajectory_findings(call_list, subject or {}, policy.trajectory, collector)

    return RunJudgement(
        run_id=run_id,
        policy_version=policy.version,
        verdicts=tuple(verdicts),
        findings=tuple(collector.findings()),
    )


def judge_runs(records: Iterable[Record], policy: Policy) -> list[RunJudgement]:
    """Judge every run of an interleaved record stream, runs in order of first appearance."""
    runs: dict[str, list[Record]] = {}
    for record in records:
        runs.setdefault(record.run_id, []).append(record)
    return [judge_run(run_id, run_records, policy) for run_id, run_records in runs.items()]
