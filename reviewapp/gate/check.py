"""Checking one action before it is taken: a run's records so far and the action the agent
is about to take (an agent action, or a tool call), judged in memory under the active
policy; the answer is allow, block (the action's gate mode is enforce) or would-block (its
mode is shadow: answered as allow, and counted). Bad input is refused with its reason:
400, or 413 for a body over GATE_MAX_BYTES, 415 for a body that is not declared JSON.
Every answer, refusals included, is recorded (GateAnswer).

What blocks this action (judging.blocking): an agent action is blocked by the unsafe
verdicts the engine gives it, that is of the groups observed since the run's previous
action; a tool call by the blocking trajectory findings that name it."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from reviewapp.engine import (
    AgentAction,
    Observation,
    Policy,
    Record,
    RecordError,
    ToolCall,
    decode_line,
    parse_record,
)
from reviewapp.gate.modes import ENFORCE, MAX_ACTION, mode_of
from reviewapp.infra.storable_text import NUL_REFUSAL, nul_location
from reviewapp.judging.blocking import FINDING, VERDICT, Blocked, blocked_in
from reviewapp.judging.core import RunToJudge, judge
from reviewapp.judging.policies import default_policy, policy_of_version_id
from reviewapp.models import ApiToken, GateAnswer, PolicyVersion

KEYS = {"runId", "records", "action"}
JSON = "application/json"
ACTION_TYPES = ("agent_action", "tool_call")
MAX_RUN_ID = 200
ALLOW, BLOCK, WOULD_BLOCK, REJECTED = (d.value for d in GateAnswer.Decision)


class CheckRefused(ValueError):
    """Input the gate cannot judge; the message is the reason answered, with `status`."""

    def __init__(self, reason: str, status: int = 400):
        super().__init__(reason)
        self.status = status


@dataclass(frozen=True)
class CheckRequest:
    run_id: str
    records: list[Record]  # the run so far, in recording order
    action: AgentAction | ToolCall  # what the agent is about to do

    @property
    def name(self) -> str:
        """The action's name, as gate modes and counts know it (a tool call's tool)."""
        return self.action.name if isinstance(self.action, AgentAction) else self.action.tool


def check_refused_unread(*, content_type: str, declared_length: str) -> CheckRefused | None:
    """What the headers alone refuse, before a byte of the body is read: a body not
    declared JSON (415, as the OTLP receiver answers), or declared over the limit (413).
    No body at all is left to check_read, which says what to send."""
    declared = (
        int(declared_length) if declared_length.isascii() and declared_length.isdecimal() else 0
    )
    media_type = content_type.split(";", 1)[0].strip().lower()
    if declared and media_type != JSON:
        return CheckRefused(
            f"Content-Type {media_type or '(none)'} is not JSON: send {JSON}", status=415
        )
    if declared > settings.GATE_MAX_BYTES:
        return check_too_large()
    return None


def check_too_large() -> CheckRefused:
    return CheckRefused(f"body is over the {settings.GATE_MAX_BYTES:,}-byte limit", status=413)


def check_read(body: bytes) -> CheckRequest:
    """The request, checked strictly: CheckRefused names the first thing wrong."""
    if len(body) > settings.GATE_MAX_BYTES:
        raise check_too_large()
    if not body.strip():
        raise CheckRefused('empty body: send a JSON object with "runId", "records" and "action"')
    try:
        document = decode_line(body)
    except RecordError as exc:
        raise CheckRefused(f"body: {exc}") from None
    # First: every later reason may quote what was sent, and a refusal is stored too.
    nul_at = nul_location(document)
    if nul_at is not None:
        raise CheckRefused(f"{nul_at}: {NUL_REFUSAL}")
    unknown = sorted(set(document) - KEYS)
    if unknown:
        raise CheckRefused(f'unknown key "{unknown[0]}" (the keys are runId, records, action)')
    run_id = document.get("runId")
    if not isinstance(run_id, str) or not run_id or len(run_id) > MAX_RUN_ID:
        raise CheckRefused(f'"runId" must be a string of 1 to {MAX_RUN_ID} characters')
    records = document.get("records")
    if not isinstance(records, list):
        raise CheckRefused('"records" must be an array of the run\'s records so far')
    if len(records) > settings.GATE_MAX_RECORDS:
        raise CheckRefused(f'"records" holds more than {settings.GATE_MAX_RECORDS:,} records')
    parsed = [_record(item, run_id, f"records[{i}]") for i, item in enumerate(records)]
    action = document.get("action")
    if not isinstance(action, dict):
        raise CheckRefused('"action" must be an object: the agent action or tool call to check')
    kind = action.get("type", "agent_action")
    if kind not in ACTION_TYPES:
        raise CheckRefused('action.type must be "agent_action" (the default) or "tool_call"')
    about = _record(
        {**action, "type": kind, "runId": action.get("runId", run_id)}, run_id, "action"
    )
    assert isinstance(about, AgentAction | ToolCall)
    request = CheckRequest(run_id, parsed, about)
    if len(request.name) > MAX_ACTION:
        raise CheckRefused(f"the action's name is longer than {MAX_ACTION} characters")
    return request


def _record(item: Any, run_id: str, where: str) -> Record:
    if not isinstance(item, dict):
        raise CheckRefused(f"{where}: must be an object (a native trace record)")
    if item.get("runId") != run_id:
        raise CheckRefused(f'{where}.runId: must be the run checked, "{run_id}"')
    try:
        return parse_record(item)
    except RecordError as exc:
        raise CheckRefused(f"{where}: {exc}") from None


def active_policy_cached() -> tuple[int, Policy]:
    """The active policy and its number: one small query for which version it is, the
    policy itself loaded once per version and process."""
    found = PolicyVersion.objects.order_by("-number").values_list("pk", "number").first()
    if found is None:
        return 0, default_policy()
    return found[1], policy_of_version_id(found[0])


def check_answer(request: CheckRequest) -> dict[str, Any]:
    """The answer to a check (not recorded): decision, mode, policy version, what blocks
    and why, with evidence ids, and every verdict and finding of the run."""
    number, policy = active_policy_cached()
    records = [*request.records, request.action]
    run = RunToJudge(None, request.run_id, "", list(enumerate(records)))
    result = judge([run], policy)[0].result
    blocking = [item for item in blocked_in(result, records) if _concerns(item, request)]
    mode = mode_of(request.name)
    decision = ALLOW if not blocking else BLOCK if mode == ENFORCE else WOULD_BLOCK
    return {
        "decision": decision,
        "allow": decision != BLOCK,
        "mode": mode,
        "runId": request.run_id,
        "action": request.name,
        "policyVersion": number,
        "reasons": [_reason(item) for item in blocking],
        "evidence": sorted({i for item in blocking for i in item.evidence}),
        "verdicts": [v.as_dict() for v in result.verdicts],
        "findings": [f.as_dict() for f in result.findings],
    }


def _concerns(item: Blocked, request: CheckRequest) -> bool:
    if isinstance(request.action, ToolCall):
        return item.kind == FINDING and item.call == request.action.tool_call_id
    if item.kind != VERDICT or item.action != request.action.name:
        return False
    # The engine gives a group the first action after its last observation: this action
    # only when no earlier action came after it.
    last_action = max(
        (i for i, record in enumerate(request.records) if type(record) is AgentAction),
        default=-1,
    )
    positions = {
        record.observation_id: i
        for i, record in enumerate(request.records)
        if type(record) is Observation
    }
    return max((positions.get(i, -1) for i in item.evidence), default=-1) > last_action


def _reason(item: Blocked) -> dict[str, Any]:
    if item.kind == FINDING:
        return {"kind": "finding", "reason": item.reason, "evidence": list(item.evidence)}
    return {
        "kind": "unsafe-verdict",
        "reason": item.reason,
        "field": item.field,
        "entity": item.entity,
        "rule": item.rule,
        "sources": item.sources.split(",") if item.sources else [],
        "evidence": list(item.evidence),
    }


def check(body: bytes, *, token: ApiToken | None, started: float) -> tuple[int, dict[str, Any]]:
    """Read, judge and answer a check, and record the answer: (HTTP status, body)."""
    try:
        request = check_read(body)
    except CheckRefused as refused:
        return check_refuse(refused, token=token, started=started)
    answer = check_answer(request)
    recorded = _record_answer(token, answer, records=len(request.records), started=started)
    return 200, {**answer, "checkId": recorded.pk}


def check_refuse(
    refused: CheckRefused, *, token: ApiToken | None, started: float
) -> tuple[int, dict[str, Any]]:
    """Refuse a check as bad input, and record the refusal: (its status, body)."""
    reason = str(refused)
    answer = {"decision": REJECTED, "allow": False, "error": reason}
    recorded = _record_answer(token, answer, error=reason, started=started)
    return refused.status, {**answer, "checkId": recorded.pk}


def _record_answer(
    token: ApiToken | None,
    answer: dict[str, Any],
    *,
    started: float,
    records: int = 0,
    error: str = "",
) -> GateAnswer:
    return GateAnswer.objects.create(
        token=token,
        run_id=answer.get("runId", ""),
        action=answer.get("action", "")[:MAX_ACTION],
        decision=answer["decision"],
        mode=answer.get("mode", ""),
        policy_number=answer.get("policyVersion"),
        reasons=[reason["reason"] for reason in answer.get("reasons", [])],
        answer=answer,
        error=error[:1000],
        records=records,
        server_ms=(time.perf_counter() - started) * 1000,
    )
