"""Format detection and each format's mapping, on small samples written from each format's
documentation (Jaeger's JSON, Tempo's, Langfuse's export, span lists, pydantic-ai v2,
Vercel AI SDK, MCP results, ADK placeholders), then what the pipeline makes of them."""

import base64
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reviewapp.engine import RecordError
from reviewapp.ingest.formats import decode_unit
from reviewapp.ingest.otel import convert, detect_format
from reviewapp.ingest.pipeline import ingest_file
from reviewapp.models import IngestBatch, Run, TraceLine, TraceRecord

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
RESULT = {"source": "erp", "sourceRevision": 42, "entity": "sku-1", "data": {"qty": 7}}


def kv(**values):
    return [{"key": k.replace("__", "."), "value": {"stringValue": v}} for k, v in values.items()]


def otlp_span(span_id="00f067aa0ba902b7", name="execute_tool get_stock", **attributes):
    return {
        "traceId": TRACE,
        "spanId": span_id,
        "name": name,
        "startTimeUnixNano": "1796002200000000000",
        "endTimeUnixNano": "1796002200250000000",
        "attributes": kv(**attributes),
    }


def otlp(*spans):
    return {"resourceSpans": [{"scopeSpans": [{"spans": list(spans)}]}]}


def tool_records(document):
    conversion = convert(document)
    return [r for r in conversion.records if r["type"] != "run_started"], conversion


# --- Jaeger -----------------------------------------------------------------------------


def jaeger_trace():
    """A trace as Jaeger's query API and UI write it: 64-bit trace id, microseconds, tags."""
    return {
        "traceID": "a3ce929d0e0e4736",
        "spans": [
            {
                "traceID": "a3ce929d0e0e4736",
                "spanID": "00f067aa0ba902b7",
                "operationName": "execute_tool get_stock",
                "references": [
                    {"refType": "CHILD_OF", "traceID": "a3ce929d0e0e4736", "spanID": "1" * 16}
                ],
                "startTime": 1796002200000000,
                "duration": 250000,
                "tags": [
                    {"key": "gen_ai.operation.name", "type": "string", "value": "execute_tool"},
                    {"key": "gen_ai.tool.name", "type": "string", "value": "get_stock"},
                    {"key": "gen_ai.tool.call.id", "type": "string", "value": "call_1"},
                    {
                        "key": "gen_ai.tool.call.arguments",
                        "type": "string",
                        "value": '{"sku": "sku-1"}',
                    },
                    {
                        "key": "gen_ai.tool.call.result",
                        "type": "string",
                        "value": json.dumps(RESULT),
                    },
                    {"key": "otel.status_code", "type": "string", "value": "ERROR"},
                    {"key": "otel.status_description", "type": "string", "value": "slow erp"},
                    {"key": "attempt", "type": "int64", "value": 2},
                ],
                "logs": [
                    {
                        "timestamp": 1796002200200000,
                        "fields": [
                            {"key": "event", "type": "string", "value": "exception"},
                            {"key": "exception.type", "type": "string", "value": "Timeout"},
                            {"key": "exception.message", "type": "string", "value": "slow erp"},
                        ],
                    }
                ],
                "processID": "p1",
            },
            {
                "traceID": "a3ce929d0e0e4736",
                "spanID": "1" * 16,
                "operationName": "invoke_agent stock-agent",
                "references": [],
                "startTime": 1796002199000000,
                "duration": 2000000,
                "tags": [
                    {"key": "gen_ai.operation.name", "type": "string", "value": "invoke_agent"},
                    {"key": "gen_ai.agent.name", "type": "string", "value": "stock-agent"},
                ],
                "processID": "p1",
            },
        ],
        "processes": {"p1": {"serviceName": "stock-svc", "tags": []}},
    }


def test_jaeger_api_and_download_shapes():
    api = {"data": [jaeger_trace()], "total": 0, "limit": 0, "offset": 0, "errors": None}
    assert detect_format(api) == detect_format(jaeger_trace()) == "jaeger"
    (call, observation), conversion = tool_records(api)
    assert conversion.ignored == 1
    assert conversion.records[0] == {
        "runId": "0000000000000000a3ce929d0e0e4736",  # a 64-bit id is the low half
        "type": "run_started",
        "agent": "stock-agent",
    }
    assert (call["toolCallId"], call["tool"], call["arguments"], call["ok"]) == (
        "call_1",
        "get_stock",
        {"sku": "sku-1"},
        False,
    )
    assert (call["startedAt"], call["completedAt"]) == (
        "2026-11-30T01:30:00.000000Z",
        "2026-11-30T01:30:00.250000Z",
    )
    assert (observation["source"], observation["sourceRevision"], observation["value"]) == (
        "erp",
        42,
        {"qty": 7},
    )
    assert observation["errors"] == [
        {"code": "SPAN_ERROR", "message": "slow erp"},
        {"code": "Timeout", "message": "slow erp"},
    ]
    assert tool_records(jaeger_trace())[0] == [call, observation]


# --- Tempo ------------------------------------------------------------------------------


def b64(hex_id):
    return base64.b64encode(bytes.fromhex(hex_id)).decode()


def test_tempo_batches_with_base64_ids_and_enum_names():
    span = {
        "traceId": b64(TRACE),
        "spanId": b64("00f067aa0ba902b7"),
        "name": "execute_tool get_stock",
        "kind": "SPAN_KIND_INTERNAL",
        "startTimeUnixNano": "1796002200000000000",
        "endTimeUnixNano": "1796002200250000000",
        "attributes": kv(
            gen_ai__tool__name="get_stock", gen_ai__tool__call__result=json.dumps(RESULT)
        ),
        "status": {"code": "STATUS_CODE_ERROR", "message": "boom"},
    }
    batches = {
        "batches": [
            {
                "resource": {"attributes": kv(service__name="stock-svc")},
                "instrumentationLibrarySpans": [{"spans": [span]}],
            }
        ]
    }
    assert detect_format(batches) == "tempo"
    (call, observation), _ = tool_records(batches)
    assert (call["runId"], call["tool"], call["ok"]) == (TRACE, "get_stock", False)
    assert observation["observationId"] == f"otel:{TRACE}:00f067aa0ba902b7"
    assert observation["errors"] == [{"code": "SPAN_ERROR", "message": "boom"}]
    wrapped = {"trace": {"resourceSpans": batches["batches"]}}
    assert detect_format(wrapped) == "tempo"
    assert tool_records(wrapped)[0] == [call, observation]


# --- Langfuse ---------------------------------------------------------------------------


def test_langfuse_levels_ids_and_input_output():
    document = {
        "trace": {"id": "trace-7", "name": "stock-agent", "sessionId": "s-1"},
        "observations": [
            {
                "id": "obs-b",
                "traceId": "trace-7",
                "type": "TOOL",
                "name": "get_price",
                "startTime": "2026-11-30T01:30:01.000Z",
                "endTime": "2026-11-30T01:30:02.000Z",
                "input": '{"sku": "sku-1"}',
                "output": "not json: price service down",
                "level": "ERROR",
                "statusMessage": "price service down",
                "metadata": "{}",
            },
            {
                "id": "obs-a",
                "traceId": "trace-7",
                "type": "TOOL",
                "name": "get_stock",
                "startTime": "2026-11-30T01:30:00.000Z",
                "endTime": "2026-11-30T01:30:00.500Z",
                "input": {"sku": "sku-1"},
                "output": RESULT,
                "level": "WARNING",
                "statusMessage": "cache used",
                "metadata": {"attributes": {"gen_ai.tool.call.id": "call_a"}},
            },
        ],
    }
    records, conversion = tool_records(document)
    assert conversion.records[0] == {
        "runId": "trace-7",  # a Langfuse id that is no OpenTelemetry id, kept as it is
        "type": "run_started",
        "agent": "stock-agent",
        "conversationId": "s-1",
    }
    # In start order, not the export's order.
    assert [(r["tool"], r["toolCallId"]) for r in records[::2]] == [
        ("get_stock", "call_a"),
        ("get_price", "otel:trace-7:obs-b"),
    ]
    stock, price = records[1], records[3]
    assert stock["value"] == {"qty": 7}
    assert stock["errors"] == [{"code": "WARNING", "message": "cache used"}]
    assert price["value"] == {"result": "not json: price service down"}
    assert price["errors"] == [{"code": "SPAN_ERROR", "message": "price service down"}]
    assert records[2]["ok"] is False and records[2]["arguments"] == {"sku": "sku-1"}


# --- span lists and framework vocabularies ---------------------------------------------


def test_a_plain_list_of_otlp_spans():
    listed = [otlp_span(gen_ai__tool__name="get_stock", gen_ai__output=json.dumps(RESULT))]
    assert detect_format(listed) == "span-list"
    (call, observation), _ = tool_records(listed)
    assert observation["value"] == {"qty": 7} and call["tool"] == "get_stock"
    assert detect_format({"spans": listed, "final_output": "done"}) == "span-list"


def test_pydantic_ai_v2_running_tool_spans():
    span = otlp_span(
        name="running tool",
        gen_ai__tool__name="get_stock",
        gen_ai__tool__call__id="call_9",
        tool_arguments='{"sku": "sku-1"}',
        tool_response=json.dumps(RESULT),
        logfire__msg="running tool: get_stock",
    )
    (call, observation), _ = tool_records(otlp(span))
    assert (call["toolCallId"], call["arguments"], observation["value"]) == (
        "call_9",
        {"sku": "sku-1"},
        {"qty": 7},
    )


def test_vercel_ai_sdk_tool_call_spans():
    span = otlp_span(
        name="ai.toolCall",
        ai__toolCall__name="getStock",
        ai__toolCall__id="call_v",
        ai__toolCall__args='{"sku": "sku-1"}',
        ai__toolCall__result=json.dumps(RESULT),
        operation__name="ai.toolCall",
    )
    (call, observation), _ = tool_records(otlp(span))
    assert (call["tool"], call["toolCallId"], observation["source"]) == (
        "getStock",
        "call_v",
        "erp",
    )


def mcp(**result):
    return otlp_span(
        gen_ai__operation__name="execute_tool",
        gen_ai__tool__name="get_stock",
        gen_ai__tool__call__result=json.dumps(result),
    )


def test_mcp_results_are_unwrapped():
    structured = tool_records(
        otlp(mcp(content=[{"type": "text", "text": "7 left"}], structuredContent=RESULT))
    )[0][1]
    assert (structured["source"], structured["value"]) == ("erp", {"qty": 7})
    text = tool_records(otlp(mcp(content=[{"type": "text", "text": json.dumps(RESULT)}])))[0][1]
    assert (text["source"], text["sourceRevision"], text["value"]) == ("erp", 42, {"qty": 7})
    failed = tool_records(
        otlp(mcp(content=[{"type": "text", "text": "sku unknown"}], isError=True))
    )[0][1]
    assert failed["errors"] == [{"code": "TOOL_ERROR", "message": "sku unknown"}]
    assert failed["value"] == {"result": "sku unknown"}  # isError is no data field


def test_adk_placeholders_are_no_call_id_and_no_value():
    spans = [
        otlp_span(
            span_id=span_id,
            gen_ai__operation__name="execute_tool",
            gen_ai__tool__name="get_stock",
            gen_ai__tool__call__id="<not specified>",
            gcp__vertex__agent__tool_response="<not specified>",
        )
        for span_id in ("00f067aa0ba902b7", "00f067aa0ba902b8")
    ]
    records, _ = tool_records(otlp(*spans))
    ids = [r["toolCallId"] for r in records[::2]]
    assert ids == [f"otel:{TRACE}:00f067aa0ba902b7", f"otel:{TRACE}:00f067aa0ba902b8"]
    assert all(r["toolCallIdRaw"] == "<not specified>" for r in records)
    assert "value" not in records[1] and "errors" not in records[1]


# --- detection ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "payload", [b'{"foo": 1}', b"[1, 2]", b'{"spans": "x"}', b'{"data": [{"x": 1}]}', b"[]"]
)
def test_anything_else_is_not_a_recognised_trace_format(payload):
    with pytest.raises(
        RecordError, match="not a recognised trace format: found .*; expected native"
    ):
        decode_unit(payload)


def test_a_native_record_missing_a_key_still_says_so():
    with pytest.raises(RecordError, match='"runId"'):
        decode_unit(b'{"type": "agent_action", "name": "stop"}')


@settings(max_examples=60, deadline=None)
@given(
    indent=st.one_of(st.none(), st.integers(0, 4)),
    sort_keys=st.booleans(),
    ascii_only=st.booleans(),
)
def test_any_formatting_of_a_document_is_the_same_spans(indent, sort_keys, ascii_only):
    document = otlp(
        otlp_span(gen_ai__tool__name="get_stock", gen_ai__tool__call__result="é " + "x")
    )
    compact = decode_unit(json.dumps(document, separators=(",", ":")).encode())
    text = json.dumps(document, indent=indent, sort_keys=sort_keys, ensure_ascii=ascii_only)
    other = decode_unit(text.encode())
    assert other.documents == compact.documents
    assert other.span_keys == compact.span_keys == [f"otel:{TRACE}:00f067aa0ba902b7"]


# --- through the pipeline ---------------------------------------------------------------


@pytest.mark.django_db
def test_pretty_and_compact_exports_of_one_span_are_one_span(tmp_path):
    document = {"data": [jaeger_trace()]}
    pretty, compact = tmp_path / "pretty.json", tmp_path / "compact.jsonl"
    pretty.write_text(json.dumps(document, indent=2))
    compact.write_text(json.dumps(document) + "\n")
    first = ingest_file(pretty, channel=IngestBatch.Channel.CLI)
    second = ingest_file(compact, channel=IngestBatch.Channel.CLI)
    assert (first.accepted, second.duplicates, second.accepted) == (1, 1, 0)
    assert TraceRecord.objects.filter(type="tool_call").count() == 1
    assert Run.objects.get().agent == "stock-agent"


@pytest.mark.django_db
def test_a_document_without_tool_spans_is_accepted_and_its_spans_ignored(tmp_path):
    chat = otlp_span(name="chat gpt-4o", gen_ai__operation__name="chat")
    path = tmp_path / "chat.jsonl"
    path.write_text(json.dumps(otlp(chat, {**chat, "spanId": "1" * 16})) + "\n")
    summary = ingest_file(path, channel=IngestBatch.Channel.CLI)
    assert (summary.lines, summary.accepted, summary.rejected, summary.ignored) == (1, 1, 0, 2)
    assert summary.lines == summary.accepted + summary.duplicates + summary.rejected
    assert TraceLine.objects.get().ignored == 2 and not TraceRecord.objects.exists()
