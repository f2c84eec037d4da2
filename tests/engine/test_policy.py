import pytest

from reviewapp.engine import PolicyError, load_policy


def errors_of(document) -> list[str]:
    with pytest.raises(PolicyError) as caught:
        load_policy(document)
    return caught.value.errors


def test_the_spec_example_policy_loads():
    policy = load_policy(
        {
            "version": 3,
            "name": "payments",
            "safeActions": ["request_review", "stop"],
            "fields": {
                "status": {
                    "normalize": {
                        "kind": "enum",
                        "caseInsensitive": True,
                        "aliases": {"erstattet": "refunded"},
                    },
                    "harmlessErrors": ["AVATAR_UNAVAILABLE"],
                },
                "amount": {"normalize": {"kind": "money"}},
                "address": {
                    "normalize": {
                        "kind": "text",
                        "collapseWhitespace": True,
                        "caseInsensitive": True,
                    }
                },
            },
            "rules": [
                {"id": "R1", "kind": "higher-source-revision", "field": "status"},
                {
                    "id": "R2",
                    "kind": "authoritative-source",
                    "field": "status",
                    "source": "refund-service",
                    "unlessValues": ["chargeback"],
                },
                {
                    "id": "R3",
                    "kind": "require-review",
                    "field": "status",
                    "actions": ["ship_goods"],
                },
            ],
            "identity": {"mode": "blocking"},
            "trajectory": {
                "allowedTools": ["create_refund"],
                "mutatingTools": ["create_refund"],
                "scopeArgument": "customerId",
                "prerequisites": [
                    {"tool": "create_refund", "requires": "check_refund_eligibility"}
                ],
                "maxMutationsPerOp": 1,
            },
        }
    )
    assert policy.version == 3
    assert policy.decision_fields == ("status", "amount", "address")
    assert [r.id for r in policy.rules] == ["R1", "R2", "R3"]
    assert policy.trajectory.max_mutations_per_op == 1


def test_every_section_is_optional():
    policy = load_policy({})
    assert policy.rules == () and policy.decision_fields == ()
    assert policy.safe_actions == {"request_review", "stop"}


def test_errors_name_the_bad_path():
    errors = errors_of(
        {
            "rules": [
                {"id": "a", "kind": "higher-source-revision", "field": "x"},
                {},
                {"kind": "newest", "field": "x"},
            ]
        }
    )
    assert (
        'rules[2].kind: unknown kind "newest" (expected one of: higher-source-revision, authoritative-source, require-review)'
        in errors
    )
    assert any(e.startswith("rules[1].kind: unknown kind null") for e in errors)


def test_every_problem_is_reported_at_once():
    errors = errors_of(
        {
            "safeActions": "stop",
            "fields": {"status": {"normalize": {"kind": "fuzzy"}}, "qty": {"harmlessErrors": [1]}},
            "rules": [
                {"id": "R1", "kind": "authoritative-source", "field": "status"},
                {"id": "R1", "kind": "require-review", "field": "status", "colour": "red"},
            ],
            "identity": {"mode": "loose"},
            "trajectory": {"maxMutationsPerOp": -1, "prerequisites": [{"tool": "x"}]},
        }
    )
    assert errors == [
        "safeActions: must be a list of strings, not a string",
        'fields.status.normalize.kind: unknown kind "fuzzy" (expected one of: none, enum, text, money)',
        "fields.qty.harmlessErrors[0]: must be a string, not a number",
        "rules[0].source: required for an authoritative-source rule",
        "rules[1].colour: unknown key (expected one of: id, kind, field, actions, revisionDomain, source, unlessValues)",
        'rules[1].id: "R1" is used by an earlier rule',
        'identity.mode: unknown mode "loose" (expected blocking or report-only)',
        "trajectory.prerequisites[0].requires: must be a string, not null",
        "trajectory.maxMutationsPerOp: must not be negative",
    ]


def test_alias_cycles_are_refused_and_chains_flattened():
    assert errors_of(
        {"fields": {"s": {"normalize": {"kind": "enum", "aliases": {"a": "b", "b": "a"}}}}}
    ) == ['fields.s.normalize.aliases: alias "a" leads to a cycle']
    policy = load_policy(
        {"fields": {"s": {"normalize": {"kind": "enum", "aliases": {"a": "b", "b": "c"}}}}}
    )
    assert policy.fields["s"].normalizer.normalize("a") == "c"


def test_a_document_must_be_an_object():
    assert errors_of([1]) == ["(document): must be a JSON object, not an array"]


def test_a_booleans_is_not_a_version():
    assert errors_of({"version": True}) == ["version: must be a whole number, not a boolean"]


def test_notes_for_people_are_allowed_anywhere():
    policy = load_policy(
        {
            "description": "payments",
            "fields": {"status": {"comment": "from the runbook"}},
            "rules": [
                {"id": "R1", "kind": "require-review", "field": "status", "description": "x"}
            ],
        }
    )
    assert [r.id for r in policy.rules] == ["R1"]
