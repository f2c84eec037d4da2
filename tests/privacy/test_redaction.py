"""Redaction rules: identities taken out keep every verdict; what the oracle needs is
refused, and so is a rule that would change a verdict, naming the runs and fields."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from reviewapp.demo.corpus import DEMO_POLICY, demo_lines
from reviewapp.engine import judge_runs, load_policy, parse_record
from reviewapp.judging.policies import read_policy_file
from reviewapp.models import AuditEvent, RedactionRuleSet
from reviewapp.privacy.impact import changed_runs
from reviewapp.privacy.rules import PATTERNS, Redactor, RuleError, luhn, parse_rules
from reviewapp.privacy.tokens import is_token, token_of
from reviewapp.privacy.versions import RedactionRefused, active_rules, redaction_set
from tests.paths import SPEC
from tests.seeding import ingest_lines, line

pytestmark = pytest.mark.django_db

NAMES = sorted(p.name.removesuffix(".policy.json") for p in SPEC.glob("*.policy.json"))
IDENTITIES = ["orderId", "customerId", "sku", "entity", "accountId", "transactionId"]
IDENTITY_RULES = {
    "rules": [
        {"name": "identities", "keys": IDENTITIES, "canonical": "trim"},
        {"name": "emails", "pattern": "email", "canonical": "casefold", "keep_raw": True},
        {"name": "cards", "pattern": "card", "canonical": "digits"},
    ]
}


def verdicts(records, policy):
    """What must not change: each run's verdicts (kind, reason, rule, unsafe, field,
    action) and its findings' kinds; entities may be tokens."""
    return {
        j.run_id: (
            [(v.field, v.action, v.kind, v.reason, v.rule, v.unsafe) for v in j.verdicts],
            sorted(f.kind for f in j.findings),
        )
        for j in judge_runs(records, policy)
    }


def both_ways(documents, policy):
    redactor = Redactor(parse_rules(IDENTITY_RULES, policy.decision_fields))
    redacted = [redactor(document) for document in documents]
    assert any(r is not d for r, d in zip(redacted, documents, strict=True)), "nothing redacted"
    originals = [parse_record(document) for document in documents]
    changed = [parse_record(document) for document in redacted]
    return verdicts(originals, policy), verdicts(changed, policy), redacted


@pytest.mark.parametrize("name", NAMES)
def test_identity_rules_keep_every_public_fixture_verdict(name):
    policy = read_policy_file(SPEC / f"{name}.policy.json")
    text = (SPEC / f"{name}.jsonl").read_text()
    documents = [json.loads(row) for row in text.splitlines() if row.strip()]
    before, after, redacted = both_ways(documents, policy)
    assert before and after == before
    # The identities are tokens now, and the expected verdicts still hold.
    assert not any(f'"{value}"' in json.dumps(redacted) for value in ("order-123", "SKU-001"))
    assert [run for run, _ in before.items()] == [
        json.loads(row)["runId"]
        for row in (SPEC / f"{name}.expected.jsonl").read_text().splitlines()
        if row.strip()
    ]


def test_identity_rules_keep_every_demo_corpus_verdict():
    policy = load_policy(DEMO_POLICY)
    documents = [json.loads(row) for row in demo_lines(runs=120)]
    before, after, _ = both_ways(documents, policy)
    assert len(before) == 120 and after == before
    kinds = {kind for shape, _ in before.values() for _, _, kind, *_ in shape}
    assert kinds == {"confirmed", "resolved", "conflict"}  # every kind was compared


def test_ingest_with_identity_rules_on_stores_tokens_and_the_same_verdicts(tmp_path, admin_user):
    lines = demo_lines(runs=60, months=1, until=timezone.now())
    ingest_lines(tmp_path, lines, name="plain.jsonl")
    from reviewapp.models import Judgement

    def stored_verdicts():
        return {
            j.run.run_id.removeprefix("again-"): sorted(
                (v.field, v.action or "", v.kind, v.reason or "", v.rule or "", v.unsafe)
                for v in j.verdicts.all()
            )
            for j in Judgement.objects.select_related("run").prefetch_related("verdicts")
            if j.run.current_judgement_id == j.pk and j.run.run_id.startswith("again-") == again
        }

    again = False
    plain = stored_verdicts()
    redaction_set(IDENTITY_RULES, user=admin_user, reason="identities out")
    again = True
    renamed = [row.replace('"runId":"demo-', '"runId":"again-demo-') for row in lines]
    summary = ingest_lines(tmp_path, renamed, name="redacted.jsonl")
    assert summary.rejected == 0
    assert stored_verdicts() == plain and len(plain) == 60
    from reviewapp.models import TraceLine

    stored = b"\n".join(bytes(raw) for raw in TraceLine.objects.values_list("raw", flat=True))
    assert b'"orderId":"tok_' in stored


def test_a_rule_on_a_decision_field_or_a_key_the_oracle_reads_is_refused(admin_user):
    with pytest.raises(RuleError, match="cannot redact status"):
        redaction_set({"rules": [{"name": "s", "keys": ["status"]}]}, user=admin_user, reason="x")
    with pytest.raises(RuleError, match="cannot redact payload.sourceRevision"):
        redaction_set(
            {"rules": [{"name": "r", "keys": ["payload.sourceRevision"]}]},
            user=admin_user,
            reason="x",
        )
    assert not RedactionRuleSet.objects.exists()


def echo_run(run_id: str) -> list[str]:
    """Two calls asking about o-1, each observation echoing the entity it answers for."""
    rows = []
    for call, source, status in (("c1", "x", "paid"), ("c2", "y", "refunded")):
        rows.append(
            line(
                runId=run_id,
                type="tool_call",
                toolCallId=call,
                tool="t",
                arguments={"orderId": "o-1"},
            )
        )
        rows.append(
            line(
                runId=run_id,
                type="tool_observation",
                observationId=f"obs-{call}",
                toolCallId=call,
                source=source,
                entity="o-1",
                status=status,
            )
        )
    return rows


def test_a_rule_that_would_change_a_verdict_is_refused_naming_run_and_field(tmp_path, admin_user):
    ingest_lines(tmp_path, echo_run("echo"))
    # The calls' identity redacted, the observations' echo of it not: they no longer match.
    with pytest.raises(RedactionRefused, match=r"1 run\(s\): echo \(status\)") as refused:
        redaction_set(
            {"rules": [{"name": "orders", "keys": ["arguments.orderId"]}]},
            user=admin_user,
            reason="calls only",
        )
    assert [(c.run_id, c.fields) for c in refused.value.changes] == [("echo", ("status",))]
    # Both sides of the join: accepted, numbered and audited.
    version = redaction_set(
        {"rules": [{"name": "orders", "keys": ["orderId", "entity"]}]},
        user=admin_user,
        reason="both sides",
    )
    assert version.number == 1 and active_rules().matched_keys == {"orderId", "entity"}
    event = AuditEvent.objects.get(verb="redaction.set")
    assert (event.actor, event.target, event.data["rules"]) == (
        admin_user,
        "redaction v1",
        ["orders"],
    )


def test_runs_older_than_thirty_days_are_not_judged_again(tmp_path, admin_user):
    old = (timezone.now() - timedelta(days=40)).isoformat()
    ingest_lines(tmp_path, [line(runId="old", type="run_started", startedAt=old), *echo_run("old")])
    version = redaction_set(
        {"rules": [{"name": "orders", "keys": ["arguments.orderId"]}]}, user=admin_user, reason="x"
    )
    assert version.number == 1


def test_the_same_email_from_two_sources_gets_one_token(tmp_path, admin_user):
    redaction_set(IDENTITY_RULES, user=admin_user, reason="emails")
    rows = [
        line(runId="mail", type="tool_call", toolCallId="c1", tool="crm", arguments={"q": "x"}),
        line(
            runId="mail",
            type="tool_observation",
            observationId="o1",
            toolCallId="c1",
            source="crm",
            contact="Alice@Example.com",
        ),
        line(
            runId="mail",
            type="tool_observation",
            observationId="o2",
            toolCallId="c1",
            source="billing",
            contact=" alice@example.COM ",
        ),
    ]
    ingest_lines(tmp_path, rows)
    from reviewapp.models import TraceRecord

    contacts = [
        record.document["contact"]
        for record in TraceRecord.objects.filter(type="tool_observation").order_by("id")
    ]
    token = token_of("alice@example.com", "casefold")
    assert contacts == [token, f" {token} "]
    assert is_token(token)


def test_a_kept_raw_value_is_stored_encrypted_and_read_back(tmp_path, admin_user):
    from reviewapp.models import ProtectedValue, TraceLine
    from reviewapp.privacy.protected import protected_value

    redaction_set(IDENTITY_RULES, user=admin_user, reason="emails")
    ingest_lines(
        tmp_path, [line(runId="kept", type="run_started", subject={"mail": "Bob@Corp.io"})]
    )
    row = ProtectedValue.objects.get()
    assert b"Bob@Corp.io" not in bytes(row.ciphertext) and row.rule == "emails"
    assert row.token == token_of("bob@corp.io", "casefold")
    assert protected_value(row.token) == "Bob@Corp.io"
    assert protected_value(token_of("nobody@corp.io", "casefold")) is None
    assert b"Bob@Corp.io" not in bytes(TraceLine.objects.get().raw)


def test_a_redacted_line_delivered_again_adds_nothing(tmp_path, admin_user):
    redaction_set(IDENTITY_RULES, user=admin_user, reason="ids")
    rows = [
        line(runId="again", type="run_started", subject={"orderId": "o-9"}, seq=0),
        line(
            runId="again", type="tool_call", toolCallId="c1", tool="t", arguments={"orderId": "o-9"}
        ),
    ]
    first = ingest_lines(tmp_path, rows, name="one.jsonl")
    second = ingest_lines(tmp_path, rows, name="two.jsonl")
    assert (first.accepted, second.accepted, second.rejected, second.duplicates) == (2, 0, 0, 2)


def test_invalid_rule_sets_say_what_is_wrong():
    for document, message in (
        ({"rules": [{"name": "x"}]}, "matches nothing"),
        ({"rules": [{"name": "x", "pattern": "phone"}]}, "no pattern named 'phone'"),
        ({"rules": [{"name": "x", "keys": ["a"], "canonical": "lower"}]}, "no canonicalisation"),
        ({"rules": [{"name": "x", "keys": ["a."]}]}, "not a key name or a dotted path"),
        ({"rules": [{"name": "x", "keys": ["a"]}, {"name": "y", "keys": ["a"]}]}, "matched by"),
        ({"rules": [{"name": "x", "keys": ["a"], "keep_raw": "yes"}]}, "keep_raw"),
        ({"rule": []}, "one key"),
    ):
        with pytest.raises(RuleError, match=message):
            parse_rules(document)


def test_card_numbers_are_luhn_checked_and_tokens_are_not_redacted_again():
    redactor = Redactor(parse_rules(IDENTITY_RULES))
    text = redactor.text("card 4111 1111-1111 1111, not 4111 1111 1111 1112")
    assert text == f"card {token_of('4111111111111111', 'digits')}, not 4111 1111 1111 1112"
    assert redactor.text(text) == text and luhn("79927398713")
    assert PATTERNS["email"].fullmatch("a.b+c@mail.example.org")


def test_a_dotted_path_matches_only_there():
    redactor = Redactor(parse_rules({"rules": [{"name": "p", "keys": ["arguments.email"]}]}))
    record = {"arguments": {"email": "a"}, "email": "b", "items": [{"email": "c"}]}
    assert redactor(record) == {
        "arguments": {"email": token_of("a")},
        "email": "b",
        "items": [{"email": "c"}],
    }
    before = {"runId": "r", "type": "agent_action", "name": "x"}
    assert redactor(before) is before  # nothing matched: the same object, nothing copied


def test_the_changed_runs_comparison_names_fields():
    policy = load_policy(DEMO_POLICY)
    documents = [json.loads(row) for row in echo_run("e")]
    redacted = Redactor(parse_rules({"rules": [{"name": "e", "keys": ["entity"]}]}))
    changes = changed_runs(
        [parse_record(d) for d in documents], [parse_record(redacted(d)) for d in documents], policy
    )
    assert [(c.run_id, c.fields) for c in changes] == [("e", ("status",))]


def test_an_external_export_is_redacted_in_its_records_and_in_its_stored_bytes(
    tmp_path, admin_user
):
    from reviewapp.ingest.pipeline import ingest_file
    from reviewapp.models import IngestBatch, TraceLine, TraceRecord
    from tests.paths import OTEL

    redaction_set(
        {"rules": [{"name": "orders", "keys": ["orderId", "entity"], "canonical": "trim"}]},
        user=admin_user,
        reason="orders",
    )
    summary = ingest_file(OTEL / "openinference-tools.json", channel=IngestBatch.Channel.CLI)
    assert summary.accepted == 1 and summary.rejected == 0
    token = token_of("order-204", "trim")
    documents = [record.document for record in TraceRecord.objects.order_by("id")]
    call = next(d for d in documents if d.get("tool") == "lookup_order")
    assert call["arguments"] == {"orderId": token}
    assert {d.get("entity") for d in documents if d["type"] == "tool_observation"} >= {token}
    raw = bytes(TraceLine.objects.get().raw)
    assert b"order-204" not in raw and token.encode() in raw
    assert b'"tool.name"' in raw  # the export's shape is kept
