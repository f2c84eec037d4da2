"""Exports written by the real libraries (tests/fixtures/otel/generated, set b: OpenAI Agents
SDK native and through OpenInference, Strands in both GenAI convention versions, LangChain
through OpenInference, pydantic-ai through Logfire), each made offline by the generate.py
beside it. MANIFEST-b.json says which tool calls each file holds; these tests check the
manifest against the files, then hold our readers to at least what they read of each call
today (a floor: a reader that improves keeps passing, one that loses a field fails)."""

import ast
import json
import re

import pytest

from reviewapp.engine import decode_line, parse_record
from reviewapp.ingest.otel import convert
from reviewapp.ingest.otel.values import ExternalFormatError
from tests.paths import OTEL

GENERATED = OTEL / "generated"
MANIFEST = json.loads((GENERATED / "MANIFEST-b.json").read_text())
FILES = sorted(MANIFEST["files"])
MAX_BYTES = 200_000
# A call is read completely when each of these is what the file holds.
COMPLETE = {"tool", "callId", "arguments", "decision", "agent"}

# What our readers get right of each call today, by file and tool (both tools of a file alike).
# Every call is read whole: LangChain has no agent span (its agent is the root CHAIN span's
# name, refund_checker), and the Agents SDK's own export keeps no call id (callId null: the
# call's id is a synthetic one, as the manifest expects).
READ_TODAY = {
    "openai-agents/openai-agents.native.json": COMPLETE | {"provenance"},
    "openai-agents/openai-agents.openinference.otlp.json": COMPLETE | {"provenance"},
    "strands/strands.legacy.otlp.json": COMPLETE | {"provenance"},
    "strands/strands.latest.otlp.json": COMPLETE | {"provenance"},
    "langchain/langchain.openinference.otlp.json": COMPLETE | {"provenance"},
    "logfire/logfire.pydantic-ai.otlp.json": COMPLETE | {"provenance"},
}
CALL_ID_SHAPE = re.compile(r"^(call|tooluse|toolu)_")


def load(name):
    return json.loads((GENERATED / name).read_text())


def tool_spans(document):
    """{span id: (trace id, span)} of the file's tool spans, by its own structure."""
    found = {}
    if "data" in document:  # the Agents SDK's own {"data": [trace, trace.span ...]}
        for item in document["data"]:
            if item.get("object") == "trace.span" and item["span_data"]["type"] == "function":
                found[item["id"]] = (item["trace_id"], item)
        return found
    for resource_spans in document["resourceSpans"]:
        for scope_spans in resource_spans["scopeSpans"]:
            for span in scope_spans["spans"]:
                attributes = {a["key"]: a["value"] for a in span.get("attributes", [])}
                kind = attributes.get("openinference.span.kind", {}).get("stringValue")
                operation = attributes.get("gen_ai.operation.name", {}).get("stringValue")
                if kind == "TOOL" or operation == "execute_tool":
                    found[span["spanId"]] = (span["traceId"], span)
    return found


def decoded(node):
    """Every value inside node, JSON text and Python reprs decoded, at any depth."""
    yield node
    if isinstance(node, dict):
        for value in node.values():
            yield from decoded(value)
    elif isinstance(node, list):
        for value in node:
            yield from decoded(value)
    elif isinstance(node, str) and node[:1] in "{[":
        try:
            inner = json.loads(node)
        except ValueError:
            try:
                inner = ast.literal_eval(node)
            except (ValueError, SyntaxError):
                return
        yield from decoded(inner)


def holds(span, expected):
    return any(
        isinstance(value, dict) and all(value.get(k) == v for k, v in expected.items())
        for value in decoded(span)
    )


@pytest.mark.parametrize("name", FILES)
def test_each_file_is_small_and_beside_its_script_and_versions(name):
    path = GENERATED / name
    assert 0 < path.stat().st_size < MAX_BYTES
    assert (path.parent / "generate.py").is_file()
    readme = (path.parent / "README.md").read_text()
    assert path.name in readme
    for package_version in MANIFEST["files"][name]["library"].split(", "):
        assert package_version.split(" (")[0] in readme, package_version


@pytest.mark.parametrize("name", FILES)
def test_the_manifest_names_each_tool_span_of_the_file_and_what_it_holds(name):
    spans = tool_spans(load(name))
    calls = MANIFEST["files"][name]["calls"]
    assert sorted(call["spanId"] for call in calls) == sorted(spans)
    assert {call["tool"] for call in calls} == {"get_order", "get_payment"}
    statuses = {call["decision"]["status"] for call in calls}
    assert statuses == {"refunded", "paid"}  # the two sources disagree: a conflict to find
    for call in calls:
        trace_id, span = spans[call["spanId"]]
        assert trace_id == call["run"]
        assert call["tool"] in json.dumps(span)
        assert holds(span, call["decision"] | call["provenance"]), call["tool"]
        (argument,) = call["arguments"].values()
        # A one-argument tool's arguments may be written bare (LangChain's input.value).
        assert holds(span, call["arguments"]) or argument in list(decoded(span))
        ids = {v for v in decoded(span) if isinstance(v, str) and CALL_ID_SHAPE.match(v)}
        assert ids == ({call["callId"]} if call["callId"] else set())


def read_calls(name):
    """{span id: (tool_call, tool_observation, agent)} as our readers read the file today."""
    try:
        conversion = convert(load(name))
    except ExternalFormatError:
        return {}
    for record in conversion.records:  # every record passes the engine's checker
        parse_record(decode_line(json.dumps(record, allow_nan=False)))
    agents = {r["runId"]: r.get("agent") for r in conversion.records if r["type"] == "run_started"}
    tools = [r for r in conversion.records if r["type"] != "run_started"]
    read = {}
    for call, observation in zip(tools[::2], tools[1::2], strict=True):
        assert (call["type"], observation["type"]) == ("tool_call", "tool_observation")
        span_id = observation["observationId"].rsplit(":", 1)[1]
        assert span_id not in read
        read[span_id] = (call, observation, agents.get(call["runId"]))
    return read


def fields_read(expected, call, observation, agent):
    value = observation.get("value") or {}
    checks = {
        "tool": call["tool"] == expected["tool"],
        "callId": call.get("syntheticToolCallId", False)
        if expected["callId"] is None
        else call["toolCallId"] == expected["callId"],
        "arguments": call.get("arguments") == expected["arguments"],
        "decision": all(value.get(k) == v for k, v in expected["decision"].items()),
        "provenance": all(observation.get(k) == v for k, v in expected["provenance"].items()),
        "agent": agent == expected["agent"],
    }
    return {field for field, ok in checks.items() if ok}


@pytest.mark.parametrize("name", FILES)
def test_our_readers_read_at_least_what_they_read_today(name):
    read = read_calls(name)
    calls = {call["spanId"]: call for call in MANIFEST["files"][name]["calls"]}
    assert set(read) <= set(calls)  # no call that the file does not hold
    floor = READ_TODAY[name]
    if floor:
        assert set(read) == set(calls)
    for span_id, (call, observation, agent) in read.items():
        expected = calls[span_id]
        assert call["runId"] == expected["run"]
        assert fields_read(expected, call, observation, agent) >= floor, expected["tool"]


def test_at_least_ten_of_the_twelve_calls_are_read_completely_today():
    complete = 0
    total = 0
    for name in FILES:
        read = read_calls(name)
        for expected in MANIFEST["files"][name]["calls"]:
            total += 1
            if (
                expected["spanId"] in read
                and fields_read(expected, *read[expected["spanId"]]) >= COMPLETE
            ):
                complete += 1
    assert total == 12
    assert complete >= 10
