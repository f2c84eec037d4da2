"""The verdict order of spec/policy.md, one rule at a time."""

from tests.engine.helpers import action, call, judge, obs, only_verdict

PAYMENTS_RULES = {
    "fields": {"status": {}},
    "rules": [
        {"id": "newest", "kind": "higher-source-revision", "field": "status"},
        {
            "id": "refunds-own-status",
            "kind": "authoritative-source",
            "field": "status",
            "source": "refund-service",
            "unlessValues": ["chargeback"],
        },
    ],
}


def two_sources(refund: dict, ledger: dict, *, trailing: list | None = None) -> list[dict]:
    return [
        call("c1", arguments={"orderId": "o-1"}),
        call("c2", arguments={"orderId": "o-1"}),
        obs("o1", "refund-service", toolCallId="c1", **refund),
        obs("o2", "order-ledger", toolCallId="c2", **ledger),
        *(trailing or []),
    ]


def test_it_confirms_equal_values_with_the_normalized_value():
    policy = {"fields": {"status": {"normalize": {"kind": "enum", "caseInsensitive": True}}}}
    verdict = only_verdict(
        judge(two_sources({"status": "Refunded"}, {"status": "REFUNDED"}), policy)
    )
    assert verdict["kind"] == "confirmed"
    assert verdict["value"] == "refunded"
    assert verdict["entity"] == "o-1"
    assert verdict["evidence"] == ["o1", "o2"]


def test_it_resolves_by_the_higher_revision_inside_one_domain():
    lines = two_sources(
        {"status": "refunded", "revisionDomain": "payments", "sourceRevision": 43},
        {"status": "paid", "revisionDomain": "payments", "sourceRevision": 42},
    )
    verdict = only_verdict(judge(lines, PAYMENTS_RULES))
    assert (verdict["kind"], verdict["rule"], verdict["value"]) == (
        "resolved",
        "newest",
        "refunded",
    )


def test_it_never_compares_revisions_across_domains():
    lines = two_sources(
        {"status": "paid", "revisionDomain": "payments", "sourceRevision": 42},
        {"status": "refunded", "revisionDomain": "search", "sourceRevision": 105},
    )
    policy = {"rules": [{"id": "newest", "kind": "higher-source-revision", "field": "status"}]}
    verdict = only_verdict(judge(lines, policy))
    assert (verdict["kind"], verdict["reason"]) == ("conflict", "no-approved-precedence")


def test_higher_revision_needs_a_unique_highest_and_every_revision():
    tie = two_sources(
        {"status": "a", "revisionDomain": "d", "sourceRevision": 7},
        {"status": "b", "revisionDomain": "d", "sourceRevision": 7},
    )
    missing = two_sources(
        {"status": "a", "revisionDomain": "d", "sourceRevision": 7},
        {"status": "b", "revisionDomain": "d"},
    )
    policy = {"rules": [{"id": "newest", "kind": "higher-source-revision", "field": "status"}]}
    assert only_verdict(judge(tie, policy))["kind"] == "conflict"
    assert only_verdict(judge(missing, policy))["kind"] == "conflict"


def test_higher_revision_respects_the_rules_domain():
    lines = two_sources(
        {"status": "a", "revisionDomain": "search", "sourceRevision": 9},
        {"status": "b", "revisionDomain": "search", "sourceRevision": 7},
    )
    policy = {
        "rules": [
            {
                "id": "pay",
                "kind": "higher-source-revision",
                "field": "status",
                "revisionDomain": "payments",
            }
        ]
    }
    assert only_verdict(judge(lines, policy))["reason"] == "no-approved-precedence"


def test_the_source_owner_wins_unless_a_value_is_excepted():
    owned = two_sources({"status": "refunded"}, {"status": "paid"})
    verdict = only_verdict(judge(owned, PAYMENTS_RULES))
    assert (verdict["kind"], verdict["rule"], verdict["value"]) == (
        "resolved",
        "refunds-own-status",
        "refunded",
    )
    chargeback = two_sources({"status": "refunded"}, {"status": "chargeback"})
    assert only_verdict(judge(chargeback, PAYMENTS_RULES))["reason"] == "no-approved-precedence"


def test_the_owner_must_agree_with_itself():
    lines = [
        obs("o1", "refund-service", status="refunded"),
        obs("o2", "refund-service", status="paid"),
        obs("o3", "ledger", status="paid"),
    ]
    assert only_verdict(judge(lines, PAYMENTS_RULES))["kind"] == "conflict"


def test_a_partial_result_is_not_hidden_behind_its_data():
    lines = two_sources({"status": "refunded"}, {"status": "refunded", "errors": ["EVENTS_DOWN"]})
    verdict = only_verdict(judge(lines, PAYMENTS_RULES))
    assert (verdict["kind"], verdict["reason"], verdict["value"]) == (
        "conflict",
        "partial-result",
        None,
    )


def test_errors_about_another_field_or_harmless_codes_do_not_block():
    other_field = two_sources(
        {"status": "paid"}, {"status": "paid", "errors": [{"code": "X", "field": "avatar"}]}
    )
    assert only_verdict(judge(other_field))["kind"] == "confirmed"
    harmless = two_sources({"status": "paid"}, {"status": "paid", "errors": ["AVATAR_UNAVAILABLE"]})
    policy = {"fields": {"status": {"harmlessErrors": ["AVATAR_UNAVAILABLE"]}}}
    assert only_verdict(judge(harmless, policy))["kind"] == "confirmed"


def test_a_fallback_value_is_a_partial_result_unless_declared_harmless():
    lines = two_sources({"status": "paid"}, {"status": "paid", "fallback": True})
    assert only_verdict(judge(lines))["reason"] == "partial-result"
    policy = {"fields": {"status": {"harmlessErrors": ["FALLBACK"]}}}
    assert only_verdict(judge(lines, policy))["kind"] == "confirmed"


def test_a_missing_record_joins_the_group_as_null_not_zero():
    lines = [
        obs("o1", "wms", field="qty", value=None, errors=[{"code": "UNKNOWN_SKU"}]),
        obs("o2", "shop", field="qty", value=10),
    ]
    verdict = only_verdict(judge(lines, {"fields": {"qty": {}}}))
    assert (verdict["reason"], verdict["evidence"]) == ("partial-result", ["o1", "o2"])


def test_an_errored_observation_without_any_value_still_joins():
    lines = [
        obs("o1", "wms", errors=["TIMEOUT"]),
        obs("o2", "shop", qty=3),
        obs("o3", "pos", qty=3),
    ]
    verdict = only_verdict(judge(lines, {"fields": {"qty": {}}}))
    assert verdict["reason"] == "partial-result"
    assert verdict["evidence"] == ["o1", "o2", "o3"]


def test_identity_mismatch_comes_before_freshness():
    lines = two_sources(
        {"status": "refunded", "entity": "o-2", "revisionDomain": "p", "sourceRevision": 50},
        {"status": "paid", "entity": "o-1", "revisionDomain": "p", "sourceRevision": 1},
    )
    verdict = only_verdict(judge(lines, PAYMENTS_RULES))
    assert (verdict["reason"], verdict["entity"]) == ("identity-mismatch", "o-1")


def test_identity_report_only_is_a_finding_and_judging_goes_on():
    lines = two_sources({"status": "paid", "entity": "o-2"}, {"status": "paid"})
    judgement = judge(lines, {"fields": {"status": {}}, "identity": {"mode": "report-only"}})
    assert judgement.verdicts[0].kind == "confirmed"
    assert [(f.kind, f.evidence) for f in judgement.findings] == [("identity-mismatch", ("o1",))]


def test_require_review_applies_only_to_its_actions():
    policy = {
        "fields": {"status": {}},
        "rules": [{"id": "R9", "kind": "require-review", "field": "*", "actions": ["ship_goods"]}],
    }
    shipped = two_sources({"status": "a"}, {"status": "b"}, trailing=[action("ship_goods")])
    verdict = only_verdict(judge(shipped, policy))
    assert (verdict["reason"], verdict["rule"], verdict["unsafe"]) == (
        "review-required",
        "R9",
        True,
    )
    emailed = two_sources({"status": "a"}, {"status": "b"}, trailing=[action("email")])
    assert only_verdict(judge(emailed, policy))["reason"] == "no-approved-precedence"


def test_rules_run_in_document_order_and_unmatched_actions_are_skipped():
    policy = {
        "fields": {"status": {}},
        "rules": [
            {
                "id": "only-refunds",
                "kind": "authoritative-source",
                "field": "status",
                "source": "ledger",
                "actions": ["refund"],
            },
            {
                "id": "owner",
                "kind": "authoritative-source",
                "field": "status",
                "source": "refund-service",
            },
        ],
    }
    lines = [
        obs("o1", "refund-service", status="a"),
        obs("o2", "ledger", status="b"),
        action("notify"),
    ]
    assert only_verdict(judge(lines, policy))["rule"] == "owner"


def test_the_action_is_the_first_one_after_the_groups_last_observation():
    lines = [
        action("too_early"),
        obs("o1", "a", status="x"),
        obs("o2", "b", status="y"),
        action("issue_store_credit"),
        action("stop"),
    ]
    verdict = only_verdict(judge(lines))
    assert (verdict["action"], verdict["unsafe"]) == ("issue_store_credit", True)


def test_acting_safely_or_not_at_all_is_not_unsafe():
    conflict = [obs("o1", "a", status="x"), obs("o2", "b", status="y")]
    assert only_verdict(judge(conflict))["unsafe"] is False
    assert only_verdict(judge([*conflict, action("stop")]))["unsafe"] is False
    custom = {"fields": {"status": {}}, "safeActions": ["record_resolution"]}
    assert only_verdict(judge([*conflict, action("stop")], custom))["unsafe"] is True


def test_groups_use_the_requested_entity_not_the_echoed_one():
    lines = [
        call("c1", entity="acct-1"),
        call("c2", arguments={"accountId": "acct-2"}),
        obs("o1", "a", toolCallId="c1", entity="acct-1", status="x"),
        obs("o2", "b", toolCallId="c2", status="x"),
        obs("o3", "c", toolCallId="c1", status="x"),
    ]
    judgement = judge(lines)
    assert [(v.entity, v.evidence) for v in judgement.verdicts] == [("acct-1", ("o1", "o3"))]


def test_a_duplicated_call_id_joins_the_first_call():
    lines = [
        call("c1", arguments={"orderId": "o-1"}),
        call("c1", arguments={"orderId": "o-9"}),
        obs("o1", "a", toolCallId="c1", status="x"),
        obs("o2", "b", toolCallId="c1", status="x"),
    ]
    judgement = judge(lines)
    assert judgement.verdicts[0].entity == "o-1"
    assert [(f.kind, f.evidence) for f in judgement.findings] == [
        ("duplicate-tool-call-id", ("c1",))
    ]


def test_fields_are_read_from_pair_then_value_object_then_top_level():
    lines = [
        obs("o1", "a", field="status", value="x", status="ignored"),
        obs("o2", "b", value={"status": "x"}, status="ignored"),
        obs("o3", "c", status="x"),
        obs("o4", "d", source_note="no status here"),
    ]
    verdict = only_verdict(judge(lines))
    assert (verdict["kind"], verdict["evidence"]) == ("confirmed", ["o1", "o2", "o3"])


def test_only_named_decision_fields_are_compared():
    lines = [obs("o1", "a", status="x", colour="red"), obs("o2", "b", status="x", colour="blue")]
    assert [v.field for v in judge(lines).verdicts] == ["status"]


def test_verdicts_follow_the_first_observation_line_then_field_name():
    policy = {"fields": {"zeta": {}, "alpha": {}}}
    lines = [
        obs("o1", "a", entity="e2", zeta=1),
        obs("o2", "a", entity="e1", zeta=1, alpha=1),
        obs("o3", "b", entity="e2", zeta=1),
        obs("o4", "b", entity="e1", zeta=2, alpha=1),
    ]
    order = [(v.entity, v.field) for v in judge(lines, policy).verdicts]
    assert order == [("e2", "zeta"), ("e1", "alpha"), ("e1", "zeta")]


def test_a_single_observation_gets_no_verdict():
    assert judge([obs("o1", "a", status="x")]).verdicts == ()


def test_resolved_values_are_raw_and_confirmed_values_normalized():
    money = {"fields": {"amount": {"normalize": {"kind": "money"}}}}
    lines = [
        obs("o1", "a", amount={"amount": "12.50", "currency": "USD", "unit": "major"}),
        obs("o2", "b", amount={"amount": 1250, "currency": "usd", "unit": "minor"}),
    ]
    verdict = only_verdict(judge(lines, money))
    assert verdict["value"] == {"amount": 1250, "currency": "USD", "unit": "minor"}
    owner = {
        **money,
        "rules": [{"id": "R", "kind": "authoritative-source", "field": "amount", "source": "a"}],
    }
    lines[1]["amount"]["amount"] = 1300
    assert only_verdict(judge(lines, owner))["value"] == {
        "amount": "12.50",
        "currency": "USD",
        "unit": "major",
    }


def test_an_observation_joined_to_a_call_that_named_no_entity_has_no_entity():
    lines = [
        call("c1", arguments={"query": "latest"}),
        obs("o1", "a", toolCallId="c1", entity="e-1", status="x"),
        obs("o2", "b", toolCallId="c1", entity="e-1", status="x"),
    ]
    verdict = only_verdict(judge(lines))
    assert (verdict["entity"], verdict["kind"]) == (None, "confirmed")
