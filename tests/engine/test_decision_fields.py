"""spec/policy.md, Decision fields and higher-source-revision: errors alone say nothing about
a field nobody returned, and a revision without a domain is never ordered."""

from tests.engine.helpers import action, call, judge, obs, only_verdict, resolution

TWO_FIELDS = {"fields": {"status": {}, "amount": {"normalize": {"kind": "money"}}}}


def failed_twice(*errors_each: list) -> list[dict]:
    """One call per error list, each answered by an observation carrying only those errors."""
    lines = []
    for index, errors in enumerate(errors_each, start=1):
        lines.append(call(f"c{index}", arguments={"orderId": "o-1"}))
        lines.append(obs(f"o{index}", "ledger", toolCallId=f"c{index}", errors=errors))
    return [*lines, action("send_status_message")]


def test_one_tool_failing_twice_opens_no_conflict_on_any_field():
    judgement = judge(failed_twice(["RATE_LIMITED"], ["RATE_LIMITED"]), TWO_FIELDS)
    assert judgement.verdicts == ()
    assert judgement.findings == ()


def test_two_failed_reads_naming_the_field_are_still_a_partial_result():
    timeout = {"code": "TIMEOUT", "field": "status"}
    judgement = judge(failed_twice([timeout], [timeout]), TWO_FIELDS)
    verdict = only_verdict(judgement)
    assert (verdict["field"], verdict["kind"], verdict["reason"]) == (
        "status",
        "conflict",
        "partial-result",
    )
    assert (verdict["entity"], verdict["evidence"], verdict["unsafe"]) == (
        "o-1",
        ["o1", "o2"],
        True,
    )


def test_one_named_error_is_enough_to_judge_the_group_it_joins():
    named = [{"code": "TIMEOUT", "field": "amount"}]
    verdict = only_verdict(judge(failed_twice(["DOWN"], named), TWO_FIELDS))
    assert (verdict["field"], verdict["reason"], verdict["evidence"]) == (
        "amount",
        "partial-result",
        ["o1", "o2"],
    )


def test_errors_naming_another_field_say_nothing_about_this_one():
    other = [{"code": "TIMEOUT", "field": "colour"}]
    assert judge(failed_twice(other, other), TWO_FIELDS).verdicts == ()
    # Named, but by a field the policy does not compare either: still nothing.
    assert judge(failed_twice(other, ["DOWN"]), TWO_FIELDS).verdicts == ()


def test_an_object_error_without_a_field_names_none():
    unnamed = [{"code": "TIMEOUT", "message": "upstream timed out"}]
    assert judge(failed_twice(unnamed, unnamed), TWO_FIELDS).verdicts == ()


def test_a_harmless_error_naming_the_field_does_not_count():
    policy = {"fields": {"status": {"harmlessErrors": ["AVATAR"]}}}
    harmless = [{"code": "AVATAR", "field": "status"}, "DOWN"]
    assert judge(failed_twice(harmless, ["DOWN"]), policy).verdicts == ()
    # The same code is blocking for a field that does not declare it harmless.
    strict = {"fields": {"status": {}}}
    verdict = only_verdict(judge(failed_twice(harmless, ["DOWN"]), strict))
    assert verdict["reason"] == "partial-result"


def test_fallback_markers_alone_name_no_field():
    lines = [obs("o1", "cache", fallback=True), obs("o2", "cache", fallback=True)]
    assert judge(lines, TWO_FIELDS).verdicts == ()
    # A fallback that carries a value is judged, and is a partial result.
    with_value = [obs("o1", "cache", fallback=True, status="paid"), obs("o2", "erp", status="paid")]
    verdict = only_verdict(judge(with_value, TWO_FIELDS))
    assert (verdict["field"], verdict["reason"]) == ("status", "partial-result")


def test_a_null_value_is_a_value_and_opens_the_group():
    lines = [
        obs("o1", "wms", errors=["UNKNOWN_SKU"]),
        obs("o2", "shop", status=None, errors=["STALE"]),
    ]
    verdict = only_verdict(judge(lines, TWO_FIELDS))
    assert (verdict["field"], verdict["reason"], verdict["evidence"]) == (
        "status",
        "partial-result",
        ["o1", "o2"],
    )


def test_errors_alone_on_one_entity_do_not_borrow_values_of_another():
    lines = [
        obs("o1", "ledger", entity="e1", errors=["DOWN"]),
        obs("o2", "ledger", entity="e1", errors=["DOWN"]),
        obs("o3", "ledger", entity="e2", status="paid"),
        obs("o4", "refunds", entity="e2", status="paid"),
    ]
    judgement = judge(lines, TWO_FIELDS)
    assert [(v.entity, v.field, v.kind) for v in judgement.verdicts] == [
        ("e2", "status", "confirmed")
    ]


def test_an_unjudged_group_is_not_compared_with_the_agents_resolution():
    lines = [*failed_twice(["DOWN"], ["DOWN"]), resolution(kind="conflict")]
    judgement = judge(lines, TWO_FIELDS)
    assert (judgement.verdicts, judgement.findings) == ((), ())


NEWEST = {"id": "newest", "kind": "higher-source-revision", "field": "status"}
OWNER = {"id": "owner", "kind": "authoritative-source", "field": "status", "source": "ledger"}


def revised(*observations: dict) -> list[dict]:
    return [
        obs(f"o{index}", source, status=status, **extra)
        for index, (source, status, extra) in enumerate(observations, start=1)
    ]


def test_revisions_without_a_domain_are_never_ordered():
    lines = revised(
        ("ledger", "paid", {"sourceRevision": 7}), ("search", "refunded", {"sourceRevision": 9})
    )
    verdict = only_verdict(judge(lines, {"rules": [NEWEST]}))
    assert (verdict["kind"], verdict["reason"], verdict["rule"]) == (
        "conflict",
        "no-approved-precedence",
        None,
    )


def test_one_observation_without_a_domain_keeps_the_rule_out():
    lines = revised(
        ("ledger", "paid", {"sourceRevision": 7, "revisionDomain": "payments"}),
        ("refunds", "paid", {"sourceRevision": 8, "revisionDomain": "payments"}),
        ("search", "refunded", {"sourceRevision": 9}),
    )
    assert only_verdict(judge(lines, {"rules": [NEWEST]}))["kind"] == "conflict"
    named = {"rules": [{**NEWEST, "revisionDomain": "payments"}]}
    assert only_verdict(judge(lines, named))["kind"] == "conflict"
    lines[2]["revisionDomain"] = "payments"
    verdict = only_verdict(judge(lines, named))
    assert (verdict["kind"], verdict["rule"], verdict["value"]) == (
        "resolved",
        "newest",
        "refunded",
    )


def test_a_rule_that_does_not_apply_passes_to_the_next():
    lines = revised(
        ("ledger", "paid", {"sourceRevision": 1}), ("search", "refunded", {"sourceRevision": 9})
    )
    verdict = only_verdict(judge(lines, {"rules": [NEWEST, OWNER]}))
    assert (verdict["kind"], verdict["rule"], verdict["value"]) == ("resolved", "owner", "paid")


def test_a_rule_naming_a_domain_needs_every_observation_in_it():
    in_search = revised(
        ("ledger", "paid", {"sourceRevision": 7, "revisionDomain": "search"}),
        ("search", "refunded", {"sourceRevision": 9, "revisionDomain": "search"}),
    )
    named = {"rules": [{**NEWEST, "revisionDomain": "search"}]}
    assert only_verdict(judge(in_search, named))["value"] == "refunded"
    payments = {"rules": [{**NEWEST, "revisionDomain": "payments"}]}
    assert only_verdict(judge(in_search, payments))["reason"] == "no-approved-precedence"
