"""POST /api/v1/check: allow, block or would-block as the action's gate mode says, with
the verdicts, reasons, evidence ids and policy version; bad input is a 400 with its reason;
every answer is recorded and counted."""

import json
from collections import Counter
from datetime import UTC, datetime

import pytest
from django.urls import reverse

from reviewapp.demo.corpus import DEMO_POLICY, demo_lines
from reviewapp.engine import judge_run, parse_line
from reviewapp.gate.answers import answer_counts
from reviewapp.gate.check import CheckRefused, check_read
from reviewapp.gate.modes import mode_of, mode_set, modes_current
from reviewapp.infra.days import Window
from reviewapp.ingest.tokens import create_token
from reviewapp.judging.policies import default_policy
from reviewapp.models import AuditEvent, GateAnswer
from tests.seeding import conflict_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def token(approver):
    return create_token(user=approver, name="agent harness")[1]


def ask(client, token, body, **headers):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return client.post(
        reverse("api-check"),
        data=data,
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}", **headers} if token else headers,
    )


def conflict(run_id="run-1", action="issue_store_credit"):
    """A run whose two reads of `status` disagree, before the action to check."""
    lines = [json.loads(text) for text in conflict_run(run_id)]
    return {"runId": run_id, "records": lines[:-1], "action": {"name": action}}


def test_an_action_on_a_conflict_would_be_blocked_in_shadow_and_is_in_enforce(
    client, token, approver
):
    answer = ask(client, token, conflict()).json()
    assert answer["decision"] == "would-block" and answer["allow"] is True
    assert answer["mode"] == "shadow" and answer["policyVersion"] == 0
    assert answer["action"] == "issue_store_credit"
    assert [r["reason"] for r in answer["reasons"]] == ["no-approved-precedence"]
    assert answer["reasons"][0]["field"] == "status"
    assert answer["reasons"][0]["sources"] == ["source-0", "source-1"]
    assert answer["evidence"] == ["run-1-obs-0", "run-1-obs-1"]
    assert [v["kind"] for v in answer["verdicts"]] == ["conflict"]
    assert answer["verdicts"][0]["unsafe"] is True

    mode_set("issue_store_credit", "enforce", user=approver, reason="reviewed with the owners")
    answer = ask(client, token, conflict()).json()
    assert (answer["decision"], answer["allow"], answer["mode"]) == ("block", False, "enforce")
    # A safe action on the same conflict is allowed; so is any action on agreeing reads.
    assert ask(client, token, conflict(action="request_review")).json()["decision"] == "allow"
    agreeing = conflict()
    for record in agreeing["records"]:
        if record["type"] == "tool_observation":
            record["status"] = "refunded"
    assert ask(client, token, agreeing).json()["decision"] == "allow"

    # Taken out of enforce again: the latest choice wins, each is kept and audited.
    mode_set("issue_store_credit", "shadow", user=approver, reason="too many false alarms")
    assert mode_of("issue_store_credit") == "shadow"
    assert [m.mode for m in modes_current()] == ["shadow"]
    assert AuditEvent.objects.filter(verb="gate.mode").count() == 2
    assert ask(client, token, conflict()).json()["decision"] == "would-block"


def test_a_conflict_answered_before_an_earlier_action_is_not_this_ones(client, token):
    body = conflict()
    # The agent already acted after the conflicting reads: that action carried them.
    body["records"].append({"runId": "run-1", "type": "agent_action", "name": "request_review"})
    answer = ask(client, token, body).json()
    assert answer["decision"] == "allow" and answer["reasons"] == []


def test_a_tool_call_is_checked_against_the_trajectory(client, token, reviewer, approver):
    from tests.shadow.conftest import publish

    publish(DEMO_POLICY, reviewer, approver)
    start = {"runId": "r", "type": "run_started", "subject": {"customerId": "c1"}}
    refund = {
        "type": "tool_call",
        "toolCallId": "call-2",
        "tool": "create_refund",
        "arguments": {"customerId": "c1"},
        "opId": "op-1",
        "idempotencyKey": "k1",
    }
    answer = ask(client, token, {"runId": "r", "records": [start], "action": refund}).json()
    assert (answer["decision"], answer["action"], answer["policyVersion"]) == (
        "would-block",
        "create_refund",
        1,
    )
    assert answer["reasons"] == [
        {"kind": "finding", "reason": "missing-prerequisite", "evidence": ["call-2"]}
    ]
    checked = {
        "runId": "r",
        "type": "tool_call",
        "toolCallId": "call-1",
        "tool": "check_refund_eligibility",
        "arguments": {"customerId": "c1"},
    }
    answer = ask(client, token, {"runId": "r", "records": [start, checked], "action": refund})
    assert answer.json()["decision"] == "allow"
    # Another customer's refund breaks the scope check instead.
    other = {**refund, "arguments": {"customerId": "c2"}}
    answer = ask(client, token, {"runId": "r", "records": [start, checked], "action": other})
    assert [r["reason"] for r in answer.json()["reasons"]] == ["out-of-scope-entity"]


BAD = [
    (b"", "empty body"),
    (b"{not json", "body: not valid JSON"),
    (b"[1, 2]", "body: not a JSON object but an array"),
    (b'{"runId": "r", "records": [], "action": {"name": "x"}, "extra": 1}', 'unknown key "extra"'),
    (b'{"records": [], "action": {"name": "x"}}', '"runId" must be a string'),
    (b'{"runId": "r", "records": {}, "action": {"name": "x"}}', '"records" must be an array'),
    (b'{"runId": "r", "records": [], "action": "x"}', '"action" must be an object'),
    (b'{"runId": "r", "records": [], "action": {}}', 'action: missing required key "name"'),
    (
        b'{"runId": "r", "records": [], "action": {"type": "stop", "name": "x"}}',
        'action.type must be "agent_action"',
    ),
    (
        b'{"runId": "r", "records": [{"runId": "other", "type": "agent_action", "name": "a"}],'
        b' "action": {"name": "x"}}',
        'records[0].runId: must be the run checked, "r"',
    ),
    (
        b'{"runId": "r", "records": [{"runId": "r", "type": "tool_observation"}],'
        b' "action": {"name": "x"}}',
        'records[0]: tool_observation: missing required key "observationId"',
    ),
    (b'{"runId": "r", "records": [], "action": {"name": "x", "name": "y"}}', "duplicate key"),
]


@pytest.mark.parametrize(("body", "reason"), BAD, ids=[reason for _, reason in BAD])
def test_bad_input_is_a_400_with_its_reason_and_is_recorded_as_rejected(
    client, token, body, reason
):
    response = ask(client, token, body)
    assert response.status_code == 400
    answer = response.json()
    assert answer["decision"] == "rejected" and reason in answer["error"]
    recorded = GateAnswer.objects.get(pk=answer["checkId"])
    assert recorded.decision == "rejected" and reason in recorded.error


NUL_BODIES = [
    ({"runId": "x\x00y", "records": [], "action": {"name": "a"}}, "runId"),
    ({"runId": "r", "records": [], "action": {"name": "a\x00"}}, "action.name"),
    (
        {
            "runId": "r",
            "records": [{"runId": "r", "type": "agent_action", "name": "a\x00"}],
            "action": {"name": "a"},
        },
        "records[0].name",
    ),
    (
        {"runId": "r", "records": [], "action": {"name": "a", "arguments": {"k": ["\x00"]}}},
        "action.arguments.k[0]",
    ),
    ({"runId": "r", "records": [], "action": {"name": "a", "x\x00": 1}}, "action.x\\u0000"),
]


@pytest.mark.parametrize(("body", "where"), NUL_BODIES, ids=[where for _, where in NUL_BODIES])
def test_a_nul_anywhere_is_a_400_naming_where_it_is(client, token, body, where):
    """PostgreSQL stores no NUL, and the run id, the action and the answer are stored."""
    response = ask(client, token, body)  # json.dumps writes the NUL as \u0000
    assert response.status_code == 400
    error = response.json()["error"]
    assert error == f"{where}: contains a NUL character (\\u0000), which cannot be stored"
    assert GateAnswer.objects.get(pk=response.json()["checkId"]).error == error


def test_a_body_over_the_limit_is_a_413_refused_unread(client, token, settings):
    settings.GATE_MAX_BYTES = 100
    response = ask(client, token, conflict())
    assert response.status_code == 413 and "over the 100-byte limit" in response.json()["error"]
    assert GateAnswer.objects.get().decision == "rejected"
    # Read past the limit (no Content-Length said so): the same status.
    with pytest.raises(CheckRefused) as refused:
        check_read(json.dumps(conflict()).encode())
    assert refused.value.status == 413


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", ""])
def test_a_body_not_declared_json_is_a_415(client, token, content_type):
    def post(content_type):
        return client.post(
            reverse("api-check"),
            data=json.dumps(conflict()).encode(),
            content_type=content_type,
            headers={"Authorization": f"Bearer {token}"},
        )

    response = post(content_type)
    assert response.status_code == 415
    assert "is not JSON: send application/json" in response.json()["error"]
    assert GateAnswer.objects.get().decision == "rejected"
    assert post("application/json; charset=utf-8").status_code == 200


def test_without_a_token_nothing_is_answered_or_recorded(client, reviewer):
    assert ask(client, None, conflict()).status_code == 401
    assert ask(client, "cc_wrong", conflict()).status_code == 401
    assert client.get(reverse("api-check")).status_code in (401, 405)
    assert not GateAnswer.objects.exists()


def test_every_answer_is_recorded_and_counted(client, token, approver):
    mode_set("ship_goods", "enforce", user=approver, reason="reviewed")
    asked = [
        conflict("a"),
        conflict("b", action="ship_goods"),
        conflict("c", action="request_review"),
        conflict("d", action="ship_goods"),
        b"{}",
    ]
    ids = [ask(client, token, body).json()["checkId"] for body in asked]
    answers = GateAnswer.objects.order_by("pk")
    assert list(answers.values_list("pk", flat=True)) == ids
    assert list(answers.values_list("decision", flat=True)) == [
        "would-block",
        "block",
        "allow",
        "block",
        "rejected",
    ]
    assert all(a.server_ms > 0 and a.token.user == approver for a in answers)
    assert answers[0].answer["reasons"][0]["evidence"] == ["a-obs-0", "a-obs-1"]
    # Counted as the rows say.
    counts = answer_counts(Window.last(7))
    assert counts.total.as_dict() == Counter(answers.values_list("decision", flat=True))
    by_action = {action: c.as_dict() for action, c in counts.by_action}
    assert by_action["ship_goods"]["block"] == 2 and by_action[""]["rejected"] == 1
    assert dict(counts.by_reason) == {"no-approved-precedence": 3}
    today = datetime.now(UTC).date()
    assert {d: c.total for d, c in counts.by_day}[today] == 5


def test_the_gate_agrees_with_the_stored_judgement_of_each_demo_run(client, token):
    """For every demo run that ends with its only action, asking before that action blocks
    exactly the unsafe verdicts the engine gives the whole run."""
    lines = demo_lines(runs=60, until=datetime.now(UTC))
    runs: dict[str, list[dict]] = {}
    for text in lines:
        record = json.loads(text)
        runs.setdefault(record["runId"], []).append(record)
    policy = default_policy()
    checked = 0
    for run_id, records in runs.items():
        actions = [r for r in records if r["type"] == "agent_action"]
        if len(actions) != 1 or records[-1] is not actions[0]:
            continue
        whole = judge_run(run_id, [parse_line(json.dumps(r)) for r in records], policy)
        unsafe = [v for v in whole.verdicts if v.unsafe]
        action = {k: v for k, v in records[-1].items() if k not in ("runId", "type")}
        answer = ask(client, token, {"runId": run_id, "records": records[:-1], "action": action})
        found = answer.json()
        assert len(found["reasons"]) == len(unsafe), run_id
        assert found["decision"] == ("would-block" if unsafe else "allow"), run_id
        checked += 1
    assert checked > 40
