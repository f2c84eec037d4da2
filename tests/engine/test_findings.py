"""Run findings: integrity, agent resolution and trajectory (spec/policy.md)."""

from tests.engine.helpers import action, call, finding_kinds, judge, obs, resolution

TRAJECTORY = {
    "trajectory": {
        "allowedTools": ["lookup", "check", "refund"],
        "mutatingTools": ["refund"],
        "scopeArgument": "customerId",
        "prerequisites": [{"tool": "refund", "requires": "check"}],
        "maxMutationsPerOp": 1,
    }
}


def test_orphan_observations_are_flagged_only_when_the_run_has_calls():
    with_calls = [call("c1"), obs("o1", "a", toolCallId="c1"), obs("o2", "a", toolCallId="nope")]
    assert finding_kinds(judge(with_calls)) == {"orphan-observation": ["o2"]}
    without_calls = [obs("o1", "a", toolCallId="c1"), obs("o2", "a", toolCallId="nope")]
    assert finding_kinds(judge(without_calls)) == {}


def test_duplicate_observation_ids_are_flagged_once():
    lines = [obs("o1", "a", status="x"), obs("o1", "b", status="x"), obs("o1", "c", status="x")]
    judgement = judge(lines)
    assert finding_kinds(judgement) == {"duplicate-observation-id": ["o1"]}
    # Both deliveries are still evidence: nothing is silently dropped.
    assert judgement.verdicts[0].evidence == ("o1", "o1", "o1")


def test_an_event_delivered_twice_with_different_bodies_is_an_integrity_problem():
    same = [obs("o1", "a", eventId="e1", status="x"), obs("o2", "a", eventId="e1", status="x")]
    assert finding_kinds(judge(same)) == {}
    differ = [obs("o1", "a", eventId="e1", status="x"), obs("o2", "a", eventId="e1", status="y")]
    assert finding_kinds(judge(differ)) == {"event-body-mismatch": ["o1", "o2"]}


def test_agent_resolution_is_compared_not_trusted():
    conflict = [obs("o1", "a", status="x"), obs("o2", "b", status="y")]
    agent_resolved = [*conflict, resolution(kind="resolved", value="x")]
    assert finding_kinds(judge(agent_resolved)) == {"agent-resolution-disagrees": ["o1", "o2"]}
    agent_escalated = [*conflict, resolution(kind="needs_human_review")]
    assert finding_kinds(judge(agent_escalated)) == {}


def test_agent_resolution_values_are_compared_after_normalizing():
    policy = {"fields": {"status": {"normalize": {"kind": "enum", "caseInsensitive": True}}}}
    agreed = [obs("o1", "a", status="paid"), obs("o2", "b", status="PAID")]
    same = [*agreed, resolution(kind="confirmed", status="Paid")]
    assert finding_kinds(judge(same, policy)) == {}
    other = [*agreed, resolution(kind="confirmed", status="refunded")]
    assert finding_kinds(judge(other, policy)) == {"agent-resolution-disagrees": ["o1", "o2"]}
    silent = [*agreed, resolution(kind="resolved")]
    assert finding_kinds(judge(silent, policy)) == {}


def test_only_the_last_resolution_and_its_disputed_fields_count():
    policy = {"fields": {"status": {}, "qty": {}}}
    lines = [
        obs("o1", "a", status="x", qty=1),
        obs("o2", "b", status="x", qty=2),
        resolution(kind="confirmed"),
        resolution(kind="conflict", disputedFields=["qty"]),
    ]
    assert finding_kinds(judge(lines, policy)) == {}
    lines.append(resolution(kind="conflict"))
    assert finding_kinds(judge(lines, policy)) == {"agent-resolution-disagrees": ["o1", "o2"]}


def test_a_clean_trajectory_has_no_findings_in_any_lookup_order():
    base = [
        {"type": "run_started", "subject": {"customerId": "c1"}},
        call("a1", "lookup", arguments={"customerId": "c1"}),
        call("a2", "check", arguments={"customerId": "c1"}),
    ]
    refund = call("a3", "refund", arguments={"customerId": "c1"}, opId="op", idempotencyKey="k")
    assert finding_kinds(judge([*base, refund], TRAJECTORY)) == {}
    assert finding_kinds(judge([base[0], base[2], base[1], refund], TRAJECTORY)) == {}


def test_a_prerequisite_must_have_succeeded_earlier():
    failed_check = [call("a1", "check", ok=False), call("a2", "refund", opId="op")]
    assert finding_kinds(judge(failed_check, TRAJECTORY)) == {"missing-prerequisite": ["a2"]}
    check_after = [call("a1", "refund", opId="op"), call("a2", "check")]
    assert finding_kinds(judge(check_after, TRAJECTORY)) == {"missing-prerequisite": ["a1"]}


def test_scope_and_allowlist_count_attempts():
    lines = [
        {"type": "run_started", "subject": {"customerId": "c1"}},
        call("a1", "search", arguments={"customerId": "c9"}, ok=False),
        call("a2", "lookup", arguments={"customerId": "c1"}),
        call("a3", "lookup", arguments={}),
    ]
    assert finding_kinds(judge(lines, TRAJECTORY)) == {
        "out-of-scope-entity": ["a1"],
        "tool-outside-allowlist": ["a1"],
    }


def test_retries_share_an_operation_and_need_one_idempotency_key():
    keyed = [
        call("a0", "check"),
        call("a1", "refund", opId="op", idempotencyKey="k", outcome="failure"),
        call("a2", "refund", opId="op", idempotencyKey="k", outcome="success"),
    ]
    assert finding_kinds(judge(keyed, TRAJECTORY)) == {"mutation-budget-exceeded": ["a1", "a2"]}
    unkeyed = [
        call("a0", "check"),
        call("a1", "refund", opId="op"),
        call("a2", "refund", opId="op"),
    ]
    assert finding_kinds(judge(unkeyed, TRAJECTORY)) == {
        "mutation-budget-exceeded": ["a1", "a2"],
        "retry-without-idempotency-key": ["a1", "a2"],
    }
    separate_ops = [
        call("a0", "check"),
        call("a1", "refund", opId="op-1"),
        call("a2", "refund", opId="op-2"),
    ]
    assert finding_kinds(judge(separate_ops, TRAJECTORY)) == {}


def test_calls_without_an_op_id_share_their_tool_name():
    lines = [call("a0", "check"), call("a1", "refund"), call("a2", "refund")]
    assert "mutation-budget-exceeded" in finding_kinds(judge(lines, TRAJECTORY))


def test_a_retry_after_an_unknown_outcome_needs_a_status_check_first():
    policy = {"trajectory": {"mutatingTools": ["refund"]}}
    blind = [
        call("a1", "refund", opId="x", idempotencyKey="k", outcome="unknown"),
        call("a2", "refund", opId="x", idempotencyKey="k"),
    ]
    assert finding_kinds(judge(blind, policy)) == {"retry-after-unknown-outcome": ["a2"]}
    checked = [blind[0], call("s1", "get_refund_status"), blind[1]]
    assert finding_kinds(judge(checked, policy)) == {}


def test_findings_are_ordered_by_kind_then_first_evidence():
    lines = [
        call("c1"),
        call("c1"),
        obs("o2", "a", toolCallId="zz"),
        obs("o2", "a", toolCallId="c1"),
        action("stop"),
    ]
    kinds = [f.kind for f in judge(lines).findings]
    assert kinds == ["duplicate-observation-id", "duplicate-tool-call-id", "orphan-observation"]


def test_no_trajectory_section_means_no_trajectory_findings():
    lines = [call("a1", "anything", opId="op"), call("a2", "anything", opId="op")]
    assert finding_kinds(judge(lines)) == {}


def test_the_collector_keeps_each_id_once_in_order_whichever_way_ids_come():
    from reviewapp.engine.findings import Finding, FindingCollector

    one_by_one, in_lists = FindingCollector(), FindingCollector()
    for kind, ids in [("b", ["x", "y"]), ("a", ["z"]), ("b", ["y", "w"]), ("c", [])]:
        in_lists.add(kind, ids)
        for evidence_id in ids:
            one_by_one.add_one(kind, evidence_id)
    expected = [Finding("a", ("z",)), Finding("b", ("x", "y", "w"))]
    assert in_lists.findings() == one_by_one.findings() == expected


def test_the_collector_keeps_an_id_blocked_once_any_addition_blocks_it():
    from reviewapp.engine.findings import Finding, FindingCollector

    one_by_one, in_lists = FindingCollector(), FindingCollector()
    for ids, blocked in [(["x", "y"], ["y"]), (["y", "z"], []), (["x"], ["x"])]:
        in_lists.add("k", ids, blocked=blocked)
        for evidence_id in ids:
            one_by_one.add_one("k", evidence_id, blocked=evidence_id in blocked)
    expected = [Finding("k", ("x", "y", "z"), blocked=("x", "y"))]
    assert in_lists.findings() == one_by_one.findings() == expected


def blocked_calls(judgement) -> dict[str, list[str]]:
    return {f.kind: list(f.blocked) for f in judgement.findings}


def test_a_retried_operation_blocks_its_retries_not_its_first_attempt():
    # Evidence names every attempt (spec/policy.md); what a check before each call would
    # have stopped is the attempts that broke the rule as they were made.
    unkeyed = [call("a0", "check")] + [call(f"a{i}", "refund", opId="op") for i in (1, 2, 3)]
    judged = judge(unkeyed, TRAJECTORY)
    assert finding_kinds(judged)["retry-without-idempotency-key"] == ["a1", "a2", "a3"]
    assert blocked_calls(judged) == {
        # maxMutationsPerOp 1: the second and third attempts are over it.
        "mutation-budget-exceeded": ["a2", "a3"],
        "retry-without-idempotency-key": ["a2", "a3"],
    }
    generous = {"trajectory": {**TRAJECTORY["trajectory"], "maxMutationsPerOp": 3}}
    # Keyed alike, then a retry with another key: that retry only.
    keys = [call("a0", "check")] + [
        call(f"a{i}", "refund", opId="op", idempotencyKey=key)
        for i, key in ((1, "k"), (2, "k"), (3, "other"))
    ]
    assert blocked_calls(judge(keys, generous)) == {"retry-without-idempotency-key": ["a3"]}
    # Two operations in one finding: each one's own retries.
    two_ops = [call("a0", "check")] + [
        call(f"{op}{i}", "refund", opId=op) for op in ("p", "q") for i in (1, 2)
    ]
    judged = judge(two_ops, generous)
    assert finding_kinds(judged) == {"retry-without-idempotency-key": ["p1", "p2", "q1", "q2"]}
    assert blocked_calls(judged) == {"retry-without-idempotency-key": ["p2", "q2"]}


def test_a_single_call_finding_blocks_its_call_and_integrity_findings_block_nothing():
    lines = [
        call("a1", "delete_everything", arguments={"customerId": "c2"}),
        call("a1", "lookup"),
        obs("o1", "a", toolCallId="nope"),
    ]
    judged = judge(lines, {**TRAJECTORY, "fields": {"status": {}}})
    assert blocked_calls(judged) == {
        "duplicate-tool-call-id": [],
        "orphan-observation": [],
        "tool-outside-allowlist": ["a1"],
    }
