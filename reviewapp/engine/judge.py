"""Judging one run (spec/policy.md): groups, verdicts in their fixed order, run findings.

Only line order inside the run matters; timestamps and arrival order never decide.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

import msgspec

from .findings import Finding, FindingCollector
from .normalize import canonical, json_equal
from .policy import ANY_FIELD, FieldPolicy, Policy, Rule
from .records import (
    ABSENT,
    RESERVED_OBSERVATION_KEYS,
    AgentAction,
    Observation,
    ObservationError,
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
HIGHER_SOURCE_REVISION = "higher-source-revision"
AUTHORITATIVE_SOURCE = "authoritative-source"
REQUIRE_REVIEW = "require-review"


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


class _FieldPlan(msgspec.Struct, frozen=True, gc=False):
    """What judging needs of one decision field, worked out once per policy and call."""

    field: FieldPolicy
    name: str
    normalize: Callable[[Any], Any]
    # A top-level key of this name is a value (reserved keys never are).
    top_level: bool
    # The rules whose `field` matches this one, in document order (actions are the group's
    # to match), each with the canonical forms of its unlessValues.
    rules: tuple[tuple[Rule, frozenset[Hashable]], ...]


class _Group(msgspec.Struct, gc=False):
    """The observations of one (entity, field), in line order, with their raw values."""

    entity: str | None
    plan: _FieldPlan
    last: int  # line position of its last observation
    observations: list[Observation]
    values: list[Any]
    # Some member returned the field, or a blocking error names it: errors alone say
    # nothing about a field nobody returned (spec/policy.md, Decision fields).
    said: bool = False
    # Some member's echoed entity differs from the one its call requested.
    mismatched: bool = False
    # Some member carries an error that blocks this field (a partial result).
    blocked: bool = False


def partial_result_errors(
    observation: Observation, field: FieldPolicy
) -> tuple[ObservationError, ...]:
    """The errors of `observation` that make a group of `field` a partial result: those that
    concern the field (a string error, an object error naming it or no field, the fallback
    marker) and whose code is not harmless for it."""
    return tuple(
        error
        for error in observation.errors_concerning(field.name)
        if error.code not in field.harmless_errors
    )


def _blocking_errors(observation: Observation, field: FieldPolicy) -> bool:
    """Whether `observation` makes a group of `field` a partial result (partial_result_errors)."""
    if not observation.errors and not observation.fallback:
        return False
    return bool(partial_result_errors(observation, field))


def _blocking_error_names(observation: Observation, field: FieldPolicy) -> bool:
    """A blocking object error with this very `field`: the source said the field failed.

    A string error, an object error without `field` and the fallback marker name no field."""
    return any(
        error.field == field.name and error.code not in field.harmless_errors
        for error in observation.errors
    )


def _higher_source_revision(rule: Rule, group: _Group) -> Any:
    """The value of the one highest revision, when every observation names the same domain
    (the rule's, if it names one) and a revision; ABSENT when the rule does not apply.

    Revisions compare only inside one named domain: an observation that names none has no
    comparable revision, even beside others that name none either."""
    observations = group.observations
    domain = observations[0].revision_domain
    if domain is None or (rule.revision_domain is not None and rule.revision_domain != domain):
        return ABSENT
    highest, chosen, tied = -1, 0, False
    for index, observation in enumerate(observations):
        revision = observation.source_revision
        if revision is None or observation.revision_domain != domain:
            return ABSENT
        if index == 0 or revision > highest:
            highest, chosen, tied = revision, index, False
        elif revision == highest:
            tied = True
    return ABSENT if tied else group.values[chosen]


def _authoritative_source(
    rule: Rule, unless: frozenset[Hashable], group: _Group, normalized: list[Any]
) -> Any:
    """The source's value when its observations agree and no value is an unless-value;
    ABSENT when the rule does not apply."""
    source = rule.source
    owned = [i for i, o in enumerate(group.observations) if o.source == source]
    if not owned:
        return ABSENT
    if not _all_equal([normalized[i] for i in owned]):
        return ABSENT
    if unless:
        for value in normalized:
            # A string is its own canonical form.
            if (value if type(value) is str else canonical(value)) in unless:
                return ABSENT
    return group.values[owned[0]]


def _all_equal(values: list[Any]) -> bool:
    first = values[0]
    if type(first) is str:
        # JSON-equal to a string is being an equal string: json_equal inlined, in a loop
        # rather than all() over a generator, which costs a resumption per value.
        for value in values:  # noqa: SIM110
            if type(value) is not str or value != first:
                return False
        return True
    return all(json_equal(first, value) for value in values[1:])


def _verdict_for_group(
    group: _Group, policy: Policy, action: str | None
) -> tuple[str, str | None, str | None, Any]:
    """(kind, reason, rule id, value) by the first matching step of spec/policy.md."""
    if group.mismatched and policy.identity_mode == "blocking":
        return CONFLICT, IDENTITY_MISMATCH, None, None
    if group.blocked:
        return CONFLICT, PARTIAL_RESULT, None, None
    normalize = group.plan.normalize
    normalized = [normalize(value) for value in group.values]
    if _all_equal(normalized):
        return CONFIRMED, None, None, normalized[0]
    for rule, unless in group.plan.rules:
        if rule.actions is not None and action not in rule.actions:
            continue
        if rule.kind == REQUIRE_REVIEW:
            return CONFLICT, REVIEW_REQUIRED, rule.id, None
        if rule.kind == HIGHER_SOURCE_REVISION:
            chosen = _higher_source_revision(rule, group)
        elif rule.kind == AUTHORITATIVE_SOURCE:
            chosen = _authoritative_source(rule, unless, group, normalized)
        else:
            continue
        if chosen is not ABSENT:
            return RESOLVED, None, rule.id, chosen
    return CONFLICT, NO_APPROVED_PRECEDENCE, None, None


def _field_name(field: FieldPolicy) -> str:
    return field.name


def _field_plans(policy: Policy) -> tuple[_FieldPlan, ...]:
    """The decision fields, sorted by name: groups opened by one observation are then
    opened in the order verdicts list them."""
    plans = []
    fields = [policy.field_policy(name) for name in policy.decision_fields]
    for field in sorted(fields, key=_field_name):
        name = field.name
        plans.append(
            _FieldPlan(
                field,
                name,
                field.normalizer.function(),
                name not in RESERVED_OBSERVATION_KEYS,
                tuple(
                    (rule, frozenset([canonical(value) for value in rule.unless_values]))
                    for rule in policy.rules
                    if rule.field == ANY_FIELD or rule.field == name
                ),
            )
        )
    return tuple(plans)


def judge_run(run_id: str, records: Sequence[Record], policy: Policy) -> RunJudgement:
    """Judge one run's records, given in recording (line) order, under `policy`."""
    return _judge_run(run_id, records, policy, _field_plans(policy))


def _judge_run(
    run_id: str, records: Sequence[Record], policy: Policy, plans: tuple[_FieldPlan, ...]
) -> RunJudgement:
    calls: dict[str, ToolCall] = {}
    call_list: list[ToolCall] = []
    observations: list[tuple[int, Observation]] = []
    action_positions: list[int] = []
    action_names: list[str] = []
    subject: Any = None
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
                collector.add_one("duplicate-tool-call-id", record.tool_call_id)
            else:
                calls[record.tool_call_id] = record
        elif type(record) is AgentAction:
            action_positions.append(position)
            action_names.append(record.name)
        elif type(record) is Resolution:
            resolution = record
        elif type(record) is RunStarted and subject is None:
            subject = record.subject

    report_only = policy.identity_mode == "report-only"
    # Keyed by (entity, field name); in order of (first observation, field name).
    groups: dict[tuple[str | None, str], _Group] = {}
    seen_observation_ids: set[str] = set()
    by_event: dict[str, list[Observation]] = {}

    for position, observation in observations:
        observation_id = observation.observation_id
        if observation_id in seen_observation_ids:
            collector.add_one("duplicate-observation-id", observation_id)
        else:
            seen_observation_ids.add(observation_id)
        event_id = observation.event_id
        if event_id is not None:
            if event_id in by_event:
                by_event[event_id].append(observation)
            else:
                by_event[event_id] = [observation]

        call = calls.get(observation.tool_call_id) if observation.tool_call_id else None
        if call is None:
            if calls:
                collector.add_one("orphan-observation", observation_id)
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
                collector.add_one("identity-mismatch", observation_id)

        # The value of each decision field, first found (Observation.value_for, inlined).
        own_field, raw, data = observation.field, observation.value, observation.data
        nested = raw if isinstance(raw, dict) else None
        troubled = bool(observation.errors) or observation.fallback
        for plan in plans:
            name = plan.name
            if own_field == name:
                value = None if raw is ABSENT else raw
            elif nested is not None and name in nested:
                value = nested[name]
            elif plan.top_level and name in data:
                value = data[name]
            elif troubled and _blocking_errors(observation, plan.field):
                value = ABSENT
            else:
                continue
            key = (entity, name)
            group = groups.get(key)
            if group is None:
                group = groups[key] = _Group(entity, plan, position, [observation], [value])
            else:
                group.observations.append(observation)
                group.values.append(value)
                group.last = position
            if mismatch:
                group.mismatched = True
            # Read with the field that opened the group, as the verdict reads it.
            if troubled and _blocking_errors(observation, group.plan.field):
                group.blocked = True
            if not group.said and (
                value is not ABSENT or _blocking_error_names(observation, plan.field)
            ):
                group.said = True

    for event_observations in by_event.values():
        if len(event_observations) > 1:
            payloads = {canonical(o.payload()) for o in event_observations}
            if len(payloads) > 1:
                collector.add("event-body-mismatch", [o.observation_id for o in event_observations])

    verdicts = []
    judged_plans = []
    safe_actions = policy.safe_actions
    for group in groups.values():
        if not group.said or len(group.values) < 2:
            continue
        following = bisect_right(action_positions, group.last)
        action = action_names[following] if following < len(action_names) else None
        plan = group.plan
        kind, reason, rule_id, value = _verdict_for_group(group, policy, action)
        verdicts.append(
            Verdict(
                group.entity,
                plan.name,
                action,
                kind,
                reason,
                rule_id,
                value,
                tuple([o.observation_id for o in group.observations]),
                kind == CONFLICT and action is not None and action not in safe_actions,
            )
        )
        judged_plans.append(plan)
    if resolution is not None and verdicts:
        _check_resolution(resolution, verdicts, judged_plans, collector)

    if policy.trajectory is not None:
        trajectory_findings(call_list, subject or {}, policy.trajectory, collector)

    return RunJudgement(run_id, policy.version, tuple(verdicts), tuple(collector.findings()))


def _check_resolution(
    resolution: Resolution,
    verdicts: list[Verdict],
    plans: list[_FieldPlan],
    collector: FindingCollector,
) -> None:
    """agent-resolution-disagrees: the agent's last resolution against the verdicts of its
    disputed fields (all of them when it names none)."""
    disputed = set(resolution.disputed_fields)
    agent_conflict = resolution.kind in (CONFLICT, "needs_human_review")
    chosen = resolution.chosen_value
    evidence: list[str] = []  # of every verdict it disagrees with: one finding
    for verdict, plan in zip(verdicts, plans, strict=True):
        if disputed and verdict.field not in disputed:
            continue
        engine_conflict = verdict.kind == CONFLICT
        if agent_conflict or engine_conflict:
            disagrees = agent_conflict != engine_conflict
        elif chosen is None:
            disagrees = False
        else:
            normalize = plan.normalize
            disagrees = not json_equal(normalize(chosen), normalize(verdict.value))
        if disagrees:
            evidence.extend(verdict.evidence)
    if evidence:
        collector.add("agent-resolution-disagrees", evidence)


def judge_runs(records: Iterable[Record], policy: Policy) -> list[RunJudgement]:
    """Judge every run of an interleaved record stream, runs in order of first appearance."""
    runs: dict[str, list[Record]] = {}
    run_id: str | None = None
    run: list[Record] = []
    for record in records:
        # A run's records mostly come one after another: look its list up only when the
        # run changes (comparing two strings costs less than hashing a new one).
        if record.run_id != run_id:
            run_id = record.run_id
            run = runs.setdefault(run_id, [])
        run.append(record)
    plans = _field_plans(policy)
    return [_judge_run(run_id, run_records, policy, plans) for run_id, run_records in runs.items()]
