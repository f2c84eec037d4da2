"""MLflow traces, LangSmith runs and the OpenAI Agents SDK's own export (issue 27) beyond
their generated fixtures: call ids taken from the model's answer only when the match is
unambiguous, errors, the conversation, and detection that leaves other lists alone."""

import copy
import json

from reviewapp.ingest.otel import convert, detect_format
from tests.paths import OTEL

GENERATED = OTEL / "generated"


def load(name):
    return json.loads((GENERATED / name).read_text())


def calls(records):
    return [r for r in records if r["type"] == "tool_call"]


def observations(records):
    return [r for r in records if r["type"] == "tool_observation"]


def test_mlflow_call_ids_are_not_guessed_when_a_tool_ran_more_often_than_the_model_asked():
    trace = load("mlflow/mlflow-trace.json")
    spans = trace["data"]["spans"]
    again = copy.deepcopy(next(s for s in spans if s["name"] == "get_order"))
    again["span_id"] = "AQIDBAUGBwg="  # 0102030405060708
    again["start_time_unix_nano"] += 1
    spans.append(again)
    by_tool = {}
    for call in calls(convert(trace).records):
        by_tool.setdefault(call["tool"], []).append(call)
    assert [c.get("syntheticToolCallId") for c in by_tool["get_order"]] == [True, True]
    (payment,) = by_tool["get_payment"]
    assert payment["toolCallId"] == "call_mlf_payment_2"


def test_a_failed_mlflow_tool_span_is_not_ok_and_says_why():
    trace = load("mlflow/mlflow-traces-artifact.json")
    span = next(s for s in trace["spans"] if s["name"] == "get_payment")
    span["status"] = {"code": "STATUS_CODE_ERROR", "message": "payments down"}
    records = convert(trace).records
    call = next(c for c in calls(records) if c["tool"] == "get_payment")
    observation = next(o for o in observations(records) if o["toolCallId"] == call["toolCallId"])
    assert call["ok"] is False
    assert {"code": "SPAN_ERROR", "message": "payments down"} in observation["errors"]


def test_a_langsmith_tool_run_with_an_error_is_not_ok():
    runs = load("langsmith/langsmith-runs.json")
    run = next(r for r in runs if r["name"] == "get_order")
    run["error"] = "ValueError('no such order')"
    run["outputs"] = None
    records = convert(runs).records
    call = next(c for c in calls(records) if c["tool"] == "get_order")
    observation = next(o for o in observations(records) if o["toolCallId"] == call["toolCallId"])
    assert call["ok"] is False
    assert "value" not in observation
    assert observation["errors"][0]["message"] == "ValueError('no such order')"


def test_the_agents_sdk_group_id_is_the_conversation_and_an_error_fails_the_call():
    export = load("openai-agents/openai-agents.native.json")
    export["data"][0]["group_id"] = "thread-42"
    span = next(i for i in export["data"] if i.get("span_data", {}).get("name") == "get_payment")
    span["error"] = {"message": "Error running tool", "data": {"tool_name": "get_payment"}}
    records = convert(export).records
    (started,) = [r for r in records if r["type"] == "run_started"]
    assert started["conversationId"] == "thread-42"
    assert started["agent"] == "refund_checker"
    call = next(c for c in calls(records) if c["tool"] == "get_payment")
    assert call["ok"] is False
    observation = next(o for o in observations(records) if o["toolCallId"] == call["toolCallId"])
    assert observation["resultEncoding"] == "python-repr"
    assert observation["errors"][0]["message"].startswith("Error running tool: ")


def test_the_agents_sdk_output_is_read_as_a_literal_and_never_run():
    export = load("openai-agents/openai-agents.native.json")
    span = next(i for i in export["data"] if i.get("span_data", {}).get("name") == "get_order")
    span["span_data"]["output"] = "{'status': __import__('os').getcwd()}"
    records = convert(export).records
    call = next(c for c in calls(records) if c["tool"] == "get_order")
    observation = next(o for o in observations(records) if o["toolCallId"] == call["toolCallId"])
    assert observation["value"] == {"result": "{'status': __import__('os').getcwd()}"}


def test_detection_of_the_new_formats_leaves_other_lists_alone():
    assert detect_format(load("mlflow/mlflow-trace.json")) == "mlflow"
    assert detect_format(load("mlflow/mlflow-traces-artifact.json")) == "mlflow"
    assert detect_format(load("langsmith/langsmith-runs.json")) == "langsmith"
    assert detect_format(load("openai-agents/openai-agents.native.json")) == "openai-agents"
    artifact = load("mlflow/mlflow-traces-artifact.json")
    for span in artifact["spans"]:
        del span["attributes"]["mlflow.spanType"]
    assert detect_format(artifact) == "span-list"  # no longer MLflow's: a plain span list
    runs = load("langsmith/langsmith-runs.json")
    del runs[0]["run_type"]
    assert detect_format(runs) is None
    export = load("openai-agents/openai-agents.native.json")
    export["data"].append({"traceID": "x", "spans": []})
    assert detect_format(export) is None
