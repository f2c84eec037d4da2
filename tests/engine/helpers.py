"""Small builders so that engine tests read like the traces they judge."""

from typing import Any

from reviewapp.engine import RunJudgement, judge_run, load_policy, parse_record


def call(call_id: str, tool: str = "lookup", **keys: Any) -> dict[str, Any]:
    return {"type": "tool_call", "toolCallId": call_id, "tool": tool, **keys}


def obs(obs_id: str, source: str, **keys: Any) -> dict[str, Any]:
    return {"type": "tool_observation", "observationId": obs_id, "source": source, **keys}


def action(name: str, **keys: Any) -> dict[str, Any]:
    return {"type": "agent_action", "name": name, **keys}


def resolution(**keys: Any) -> dict[str, Any]:
    return {"type": "observation_resolution", **keys}


def judge(lines: list[dict[str, Any]], policy: dict[str, Any] | None = None) -> RunJudgement:
    records = [parse_record({"runId": "run-1", **line}) for line in lines]
    return judge_run("run-1", records, load_policy(policy or {"fields": {"status": {}}}))


def only_verdict(judgement: RunJudgement) -> dict[str, Any]:
    assert len(judgement.verdicts) == 1, judgement.verdicts
    return judgement.verdicts[0].as_dict()


def finding_kinds(judgement: RunJudgement) -> dict[str, list[str]]:
    return {f.kind: list(f.evidence) for f in judgement.findings}
