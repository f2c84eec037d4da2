"""Trajectory findings (spec/policy.md, from 004_6714dc685bad9bec.txt): checks on the path
of tool calls, which count attempts, not successes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .findings import FindingCollector
from .policy import Trajectory
from .records import ToolCall


def trajectory_findings(
    calls: Sequence[ToolCall],
    subject: Mapping[str, Any],
    trajectory: Trajectory,
    collector: FindingCollector,
) -> None:
    """Add every trajectory finding of one run's calls (in line order) to `collector`."""
    scope = trajectory.scope_argument
    expected_scope = subject.get(scope) if scope else None
    # The argument to compare with the subject's, None when there is nothing to compare.
    scope_key = scope if scope and expected_scope is not None else None
    allowed_tools = trajectory.allowed_tools
    prerequisites = trajectory.prerequisites
    mutating_tools = trajectory.mutating_tools
    succeeded: set[str] = set()
    attempts_by_op: dict[tuple[str, str], list[ToolCall]] = {}
    previous_mutation: ToolCall | None = None
    checked_since_mutation = False

    for call in calls:
        tool = call.tool
        if allowed_tools is not None and tool not in allowed_tools:
            collector.add_one("tool-outside-allowlist", call.tool_call_id, blocked=True)
        if scope_key is not None:
            argument = call.arguments.get(scope_key)
            if argument is not None and argument != expected_scope:
                collector.add_one("out-of-scope-entity", call.tool_call_id, blocked=True)
        for prerequisite in prerequisites:
            if tool == prerequisite.tool and prerequisite.requires not in succeeded:
                collector.add_one("missing-prerequisite", call.tool_call_id, blocked=True)
        if call.ok is not False:
            succeeded.add(tool)

        if tool not in mutating_tools:
            checked_since_mutation = True
            continue
        if (
            previous_mutation is not None
            and previous_mutation.outcome == "unknown"
            and not checked_since_mutation
        ):
            collector.add_one("retry-after-unknown-outcome", call.tool_call_id, blocked=True)
        previous_mutation, checked_since_mutation = call, False
        # Calls without an opId count as one operation per tool name.
        op_key = ("op", call.op_id) if call.op_id is not None else ("tool", tool)
        attempts_by_op.setdefault(op_key, []).append(call)

    # Evidence: every attempt of the operation. Blocked: the attempts that broke the rule
    # as they were made (Finding.blocked), those past the budget, and the retries from the
    # first whose key is missing or differs from the first attempt's.
    for attempts in attempts_by_op.values():
        ids = [a.tool_call_id for a in attempts]
        budget = trajectory.max_mutations_per_op
        if budget is not None and len(attempts) > budget:
            collector.add("mutation-budget-exceeded", ids, blocked=ids[budget:])
        if len(attempts) > 1:
            first_key = attempts[0].idempotency_key
            unkeyed = next(
                (
                    i
                    for i, attempt in enumerate(attempts[1:], 1)
                    if not first_key or attempt.idempotency_key != first_key
                ),
                None,
            )
            if unkeyed is not None:
                collector.add("retry-without-idempotency-key", ids, blocked=ids[unkeyed:])
