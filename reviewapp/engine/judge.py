"""Judging one run (spec/policy.md): groups, verdicts in their fixed order, run findings.

Only line order inside the run matters; timestamps and arrival order never decide.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from .findings import Finding, FindingCollector
from .normalize import canonical, json_equal
from .policy import FieldPolicy, Policy, Rule
from .records import (
    ABSENT,
    RESERVED_OBSERVATION_KEYS,
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


class Verdict(msgspec.Struct, frozen=True, gc=False):
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


class RunJudgement(msgspec.Struct, frozen=True, gc=False):
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


class _Member(msgspec.Struct, gc=False):
    """An observation inside one group, with what the group needs to know about it."""

    observation: Observation
    value: Any
    identity_mismatch: bool


class _Group(msgspec.Struct, gc=False):
    """The observations of one (entity, field), in line order."""

    entity: str | None
    field: FieldPolicy
    first: int  # line position of its first observation
    last: int  # and of its last
    members: list[_Member]
    # Some member returned the field, or a blocking error names it: errors alone say
    # nothing about a field nobody returned (spec/policy.md, Decision fields).
    said: bool = False


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
        revisions: list[int] = []
        for member in members:
            revision = member.observation.source_revision
            if revision is None:
                return ABSENT
            revisions.append(revision)
        highest = max(revisions)
        if revisions.count(highest) != 1:
            return ABSENT
        return members[revisions.index(highest)].value
    if rule.kind == "authoritative-source":
        owned = [i for i, m in enumerate(members) if m.observation.source == rule.source]
        if not owned:
            return ABSENT
        if not _all_equal([normalized[i] for i in owned]):
            return ABSENT
        if rule.unless_values:
            unless = {canonical(v) for v in rule.unless_values}
            if any(canonical(v) in unless for v in normalized):
                return ABSENT
        return members[owned[0]].value
    return ABSENT


def _all_equal(values: list[Any]) -> bool:
    first = values[0]
    return all(json_equal(first, value) for value in values[1:])


def _verdict_for_group(
    members: list[_Member], field: FieldPolicy, policy: Policy, action: str | None
) -> tuple[str, str | None, str | None, Any]:
    """(kind, reason, rule id, value) by the first matching step of spec/policy.md."""
    if policy.identity_mode == "blocking":
        for member in members:
            if member.identity_mismatch:
                return CONFLICT, IDENTITY_MISMATCH, None, None
    for member in members:
        observation = member.observation
        if (observation.errors or observation.fallback) and _blocking_errors(observation, field):
            return CONFLICT, PARTIAL_RESULT, None, None
    normalize = field.normalizer.normalize
    normalized = [normalize(m.value) for m in members]
    if _all_equal(normalized):
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
    return not json_equal(normalize(chosen), normalize(verdict.value))


def _decision_fields(policy: Policy) -> tuple[FieldPolicy, ...]:
    return tuple(policy.field_policy(name) for name in policy.decision_fields)


def judge_run(run_id: str, records: Sequence[Record], policy: Policy) -> RunJudgement:
    """Judge one run's records, given in recording (line) order, under `policy`."""
    return _judge_run(run_id, records, policy, _decision_fields(policy))


def _judge_run(
    run_id: str, records: Sequence[Record], policy: Policy, fields: tuple[FieldPolicy, ...]
) -> RunJudgement:
    calls: dict[str, ToolCall] = {}
    call_list: list[ToolCall] = []
    observations: list[tuple[int, Observation]] = []
    action_positions: list[int] = []
    action_names: list[str] = []
    subject: dict[str, Any] | None = None
    resolution: Resolution | None = None
    collector = FindingCollector()

    # Records are the engine's own final classes: their exact class says what they are
    # (type(record) each time: type checkers narrow it, and it is cheaper than __class__).
    for position, record in enumerate(records):
        if type(record) is Observation:
            observations.append((position, record))
        elif type(record) is ToolCall:
            call_list.append(record)
            if record.tool_call_id in calls:
                collector.add("duplicate-tool-call-id", [record.tool_call_id])
            else:
                calls[record.tool_call_id] = record
        elif type(record) is AgentAction:
            action_positions.append(position)
            action_names.append(record.name)
        elif type(record) is Resolution:
            resolution = record
        elif type(record) is RunStarted and subject is None:
            subject = dict(record.subject)

    report_only = policy.identity_mode == "report-only"
    groups: dict[tuple[str | None, str], _Group] = {}
    seen_observation_ids: set[str] = set()
    by_event: dict[str, list[Observation]] = defaultdict(list)

    for position, observation in observations:
        if observation.observation_id in seen_observation_ids:
            collector.add("duplicate-observation-id", [observation.observation_id])
        seen_observation_ids.add(observation.observation_id)
        if observation.event_id is not None:
            by_event[observation.event_id].append(observation)

        call = calls.get(observation.tool_call_id) if observation.tool_call_id else None
        if call is None:
            if calls:
                collector.add("orphan-observation", [observation.observation_id])
            # Only an observation joined to no call falls back on the identity its
            # response claims; the others are grouped by what their call asked for.
            entity, mismatch = observation.entity, False
        else:
            entity = call.entity
            mismatch = (
                entity is not None
                and observation.entity is not None
                and observation.entity != entity
            )
            if mismatch and report_only:
                collector.add("identity-mismatch", [observation.observation_id])

        # The value of each decision field, first found (Observation.value_for, inlined).
        own_field, raw, data = observation.field, observation.value, observation.data
        nested = raw if isinstance(raw, dict) else None
        troubled = bool(observation.errors) or observation.fallback
        for field in fields:
            name = field.name
            if own_field == name:
                value = None if raw is ABSENT else raw
            elif nested is not None and name in nested:
                value = nested[name]
            elif name in data and name not in RESERVED_OBSERVATION_KEYS:
                value = data[name]
            elif troubled and _blocking_errors(observation, field):
                value = ABSENT
            else:
                continue
            group = groups.get((entity, name))
            if group is None:
                group = groups[(entity, name)] = _Group(entity, field, position, position, [])
            group.members.append(_Member(observation, value, mismatch))
            group.last = position
            if not group.said and (
                value is not ABSENT or _blocking_error_names(observation, field)
            ):
                group.said = True

    for event_observations in by_event.values():
        if len(event_observations) > 1:
            payloads = {canonical(o.payload()) for o in event_observations}
            if len(payloads) > 1:
                collector.add("event-body-mismatch", [o.observation_id for o in event_observations])

    judged = [g for g in groups.values() if g.said and len(g.members) > 1]
    judged.sort(key=lambda g: (g.first, g.field.name))
    verdicts = []
    safe_actions = policy.safe_actions
    for group in judged:
        following = bisect_right(action_positions, group.last)
        action = action_names[following] if following < len(action_names) else None
        kind, reason, rule_id, value = _verdict_for_group(
            group.members, group.field, policy, action
        )
        verdicts.append(
            Verdict(
                group.entity,
                group.field.name,
                action,
                kind,
                reason,
                rule_id,
                value,
                tuple([m.observation.observation_id for m in group.members]),
                kind == CONFLICT and action is not None and action not in safe_actions,
            )
        )
    if resolution is not None:
        disputed = set(resolution.disputed_fields)
        for verdict, group in zip(verdicts, judged, strict=True):
            if disputed and verdict.field not in disputed:
                continue
            if _agent_disagrees(resolution, verdict, group.field):
                collector.add("agent-resolution-disagrees", verdict.evidence)

    if policy.trajectory is not None:
        trajectory_findings(call_list, subject or {}, policy.trajectory, collector)

    return RunJudgement(run_id, policy.version, tuple(verdicts), tuple(collector.findings()))


def judge_runs(records: Iterable[Record], policy: Policy) -> list[RunJudgement]:
    """Judge every run of an interleaved record stream, runs in order of first appearance."""
    runs: dict[str, list[Record]] = {}
    for record in records:
        run = runs.get(record.run_id)
        if run is None:
            runs[record.run_id] = [record]
        else:
            run.append(record)
    fields = _decision_fields(policy)
    return [_judge_run(run_id, run_records, policy, fields) for run_id, run_records in runs.items()]
