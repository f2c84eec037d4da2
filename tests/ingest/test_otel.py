"""The OpenTelemetry adapter (reviewapp/ingest/otel/): golden conversions of real exporter output,
the edge cases of research §8, and properties over generated documents. No database."""

import base64
import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reviewapp.engine import decode_line, parse_record
from reviewapp.ingest.otel import (
    ExternalFormatError,
    ExtractionKeys,
    convert_document,
    detect_format,
)
from tests.paths import OTEL as OTEL_DIR

DEFAULT_KEYS = ExtractionKeys()
FIXTURES = OTEL_DIR
FIXTURE_NAMES = (
    "otlp-js-sdk.json",
    "protobuf-messagetojson-not-spec.json",
    "python-console-exporter-not-otlp.json",
    "openinference-tools.json",
)
TRACE = "852ad2d6eff7411c199758e6190d4dde"
SPAN = "b1e6f162f86684a1"
SPAN_KEY = f"otel:{TRACE}:{SPAN}"
START, END = "1796002151368000000", "1796002151368109062"
START_AT, END_AT = "2026-11-30T01:29:11.368000Z", "2026-11-30T01:29:11.368109Z"
TIMES = {
    "startedAt": START_AT,
    "completedAt": END_AT,
    "startTimeUnixNano": START,
    "endTimeUnixNano": END,
}


def load(name):
    return json.loads((FIXTURES / name).read_text())


def any_value(value):
    """A plain JSON value as an OTLP AnyValue (intValue as a decimal string, as the spec writes)."""
    if value is None:
        return {}
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list):
        return {"arrayValue": {"values": [any_value(item) for item in value]}}
    if isinstance(value, dict):
        return {"kvlistValue": {"values": key_values(value)}}
    return {"stringValue": value}


def key_values(attributes):
    return [{"key": key, "value": any_value(value)} for key, value in attributes.items()]


def tool_span(attributes=None, **fields):
    """An OTLP execute_tool span; `attributes` are plain values, merged over the defaults."""
    merged = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "get_order",
        "gen_ai.tool.call.id": "call_1",
        "gen_ai.tool.call.arguments": '{"orderId": "order-204"}',
    }
    merged.update(attributes or {})
    span = {
        "traceId": TRACE,
        "spanId": SPAN,
        "name": "execute_tool get_order",
        "kind": 1,
        "startTimeUnixNano": START,
        "endTimeUnixNano": END,
        "attributes": key_values({k: v for k, v in merged.items() if v is not None}),
        "status": {"code": 0},
    }
    span.update(fields)
    return {key: value for key, value in span.items() if value is not None}


def otlp(*spans):
    return {"resourceSpans": [{"scopeSpans": [{"scope": {"name": "t"}, "spans": list(spans)}]}]}


def convert_one(span, keys=DEFAULT_KEYS):
    records = convert_document(otlp(span), keys)
    assert [r["type"] for r in records] == ["tool_call", "tool_observation"]
    check(records)
    return records


def tools_only(records):
    """The tool records of a conversion, without the run_started naming its agent."""
    return [record for record in records if record["type"] != "run_started"]


def check(records):
    """Every record passes the engine's checker, also after a strict JSON round trip."""
    for record in records:
        parse_record(record)
        parse_record(decode_line(json.dumps(record, allow_nan=False)))


def result_of(result, **attributes):
    return convert_one(tool_span({"gen_ai.tool.call.result": result, **attributes}))[1]


# --- golden conversions ---------------------------------------------------------------


def test_js_sdk_export_golden():
    records = convert_document(load("otlp-js-sdk.json"))
    assert records[0] == {
        "runId": TRACE,
        "type": "run_started",
        "agent": "support_agent",  # gen_ai.agent.name of the invoke_agent span
        "conversationId": "conv_123",
    }
    assert records[1:] == [
        {
            "runId": TRACE,
            "type": "tool_call",
            "toolCallId": "call_abc123",
            "tool": "get_inventory",
            "arguments": {"sku": "A-1"},
            "ok": True,
            **TIMES,
        },
        {
            "runId": TRACE,
            "type": "tool_observation",
            "observationId": SPAN_KEY,
            "toolCallId": "call_abc123",
            "source": "erp",
            "sourceRevision": 42,
            "value": {"qty": 7},
            "errors": ["stale cache"],  # the payload's warnings; its errors list is empty
            **TIMES,
        },
        {
            "runId": TRACE,
            "type": "tool_call",
            "toolCallId": "call_def456",
            "tool": "get_price",
            "arguments": {"sku": "A-1"},
            "ok": False,
            "startedAt": "2026-11-30T01:29:11.369000Z",
            "completedAt": "2026-11-30T01:29:11.369461Z",
            "startTimeUnixNano": "1796002151369000000",
            "endTimeUnixNano": "1796002151369461485",
        },
        {
            "runId": TRACE,
            "type": "tool_observation",
            "observationId": f"otel:{TRACE}:0d988688a149e6a9",
            "toolCallId": "call_def456",
            "source": "get_price",
            "sourceInferred": True,
            "errors": [
                {"code": "SPAN_ERROR", "message": "upstream timeout", "errorType": "TimeoutError"},
                {"code": "Error", "message": "upstream timeout"},
            ],
            "startedAt": "2026-11-30T01:29:11.369000Z",
            "completedAt": "2026-11-30T01:29:11.369461Z",
            "startTimeUnixNano": "1796002151369000000",
            "endTimeUnixNano": "1796002151369461485",
        },
    ]  # the invoke_agent span is skipped


PYTHON_TRACE = "da99a27a5e5919feca2f5517a31d2fe1"
PYTHON_ERRORS = [
    {"code": "SPAN_ERROR", "message": "upstream timeout", "errorType": "TimeoutError"},
    {"code": "TimeoutError", "message": "upstream timeout"},
]


def python_span_records(times: dict[str, str]) -> list[dict]:
    """The Python demo's get_price span, which two exports write differently."""
    return [
        {
            "runId": PYTHON_TRACE,
            "type": "tool_call",
            "toolCallId": "call_def456",
            "tool": "get_price",
            "arguments": {"sku": "A-1"},
            "ok": False,
            **times,
        },
        {
            "runId": PYTHON_TRACE,
            "type": "tool_observation",
            "observationId": f"otel:{PYTHON_TRACE}:ea6e456fe0d15b60",
            "toolCallId": "call_def456",
            "source": "get_price",
            "sourceInferred": True,
            "errors": PYTHON_ERRORS,
            **times,
        },
    ]


def test_protobuf_message_to_json_golden():
    """Base64 ids, enum names and string intValue: the same span as the console export."""
    assert tools_only(
        convert_document(load("protobuf-messagetojson-not-spec.json"))
    ) == python_span_records(
        {
            "startedAt": "2026-11-30T01:29:25.647392Z",
            "completedAt": "2026-11-30T01:29:25.647553Z",
            "startTimeUnixNano": "1796002165647392845",
            "endTimeUnixNano": "1796002165647553363",
        }
    )


def test_python_console_exporter_golden():
    # Its parent (the agent span) is not in the file: no agent is guessed from service.name.
    assert convert_document(load("python-console-exporter-not-otlp.json")) == python_span_records(
        {
            "startedAt": "2026-11-30T01:29:25.647393Z",
            "completedAt": "2026-11-30T01:29:25.647553Z",
            "startTimeUnixNano": "1796002165647393000",
            "endTimeUnixNano": "1796002165647553000",
        }
    )


def test_two_python_exports_of_one_span_agree_apart_from_clock_precision():
    def without_times(records):
        drop = {"startedAt", "completedAt", "startTimeUnixNano", "endTimeUnixNano"}
        return [{k: v for k, v in r.items() if k not in drop} for r in records]

    protobuf = tools_only(convert_document(load("protobuf-messagetojson-not-spec.json")))
    console = tools_only(convert_document(load("python-console-exporter-not-otlp.json")))
    assert without_times(protobuf) == without_times(console)


def test_openinference_golden():
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"  # upper case in the file
    records = convert_document(load("openinference-tools.json"))
    assert records.pop(0) == {"runId": trace, "type": "run_started", "agent": "support-bot"}
    assert [(r["type"], r["toolCallId"]) for r in records] == [
        ("tool_call", "toolu_01ABC"),
        ("tool_observation", "toolu_01ABC"),
        ("tool_call", "call_SEARCH1"),
        ("tool_observation", "call_SEARCH1"),
        ("tool_call", f"otel:{trace}:00f067aa0ba902b9"),
        ("tool_observation", f"otel:{trace}:00f067aa0ba902b9"),
        ("tool_call", "toolu_01STOCK"),
        ("tool_observation", "toolu_01STOCK"),
    ]  # the LLM span is skipped
    times = {
        "startedAt": "2026-11-30T01:30:00.000000Z",
        "completedAt": "2026-11-30T01:30:00.250000Z",
        "startTimeUnixNano": "1796002200000000000",
        "endTimeUnixNano": "1796002200250000999",
    }
    assert records[0] == {
        "runId": trace,
        "type": "tool_call",
        "toolCallId": "toolu_01ABC",
        "tool": "lookup_order",
        "arguments": {"orderId": "order-204"},
        "ok": True,
        **times,
    }
    assert records[1] == {
        "runId": trace,
        "type": "tool_observation",
        "observationId": f"otel:{trace}:00f067aa0ba902b7",
        "toolCallId": "toolu_01ABC",
        "source": "order-ledger",
        "revisionDomain": "payments",
        "revisionRaw": "42",  # a string revision is not a revision
        "entity": "order-204",
        "value": {"status": "chargeback"},
        "errors": [{"code": "PARTIAL", "message": "amount unavailable", "field": "amount"}],
        **times,
    }
    assert records[2]["arguments"] == {"_raw": "refund policy"}
    assert "value" not in records[3]
    assert records[3]["errors"][0]["code"] == "RESULT_REDACTED"
    assert records[4]["syntheticToolCallId"] is True
    assert records[4]["tool"] == "get_weather"  # no tool.name: the span name
    assert "completedAt" not in records[4] and "endTimeUnixNano" not in records[4]
    assert records[5]["value"] == {"result": "rainy, 57F"}
    assert "errors" not in records[5]
    assert records[7]["errors"][0]["code"] == "UNPARSEABLE_RESULT"


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_every_fixture_record_passes_the_engine_checker(name):
    records = convert_document(load(name))
    assert records
    check(records)
    records = tools_only(records)
    for call, observation in zip(records[::2], records[1::2], strict=True):
        assert (call["type"], observation["type"]) == ("tool_call", "tool_observation")
        assert call["toolCallId"] == observation["toolCallId"]
        assert call["runId"] == observation["runId"]


# --- detection ------------------------------------------------------------------------


def test_detect_format():
    assert detect_format(load("otlp-js-sdk.json")) == "otlp"
    assert detect_format(load("protobuf-messagetojson-not-spec.json")) == "otlp"
    assert detect_format({"resource_spans": []}) == "otlp"
    assert detect_format(load("python-console-exporter-not-otlp.json")) == "otel-span"
    native = {"runId": "r1", "type": "tool_call", "toolCallId": "c1", "tool": "t"}
    assert detect_format(native) is None
    for other in (None, [], "resourceSpans", 3, {}, {"context": {}}, {"context": "trace_id"}):
        assert detect_format(other) is None


def test_convert_refuses_a_document_that_is_not_an_external_format():
    with pytest.raises(ExternalFormatError, match="not a recognised trace format"):
        convert_document({"runId": "r1", "type": "agent_action", "name": "stop"})


def test_no_tool_spans_gives_no_records():
    agent = tool_span({"gen_ai.operation.name": "invoke_agent"}, name="invoke_agent a")
    assert convert_document(otlp(agent)) == []
    assert convert_document({"resourceSpans": []}) == []
    assert convert_document({"resourceSpans": [{"scopeSpans": [{"spans": []}]}]}) == []
    console = load("python-console-exporter-not-otlp.json")
    console["name"] = "chat gpt-4o"
    console["attributes"]["gen_ai.operation.name"] = "chat"
    assert convert_document(console) == []


def test_non_tool_spans_are_not_checked():
    junk = {"name": "chat", "traceId": "nope", "attributes": "junk", "status": 5}
    records = convert_document(otlp(junk, tool_span()))
    assert [r["type"] for r in records] == ["tool_call", "tool_observation"]


def test_tool_span_detected_by_name_or_openinference_kind():
    by_name = tool_span({"gen_ai.operation.name": None}, name="execute_tool get_order")
    assert convert_one(by_name)[0]["tool"] == "get_order"
    by_kind = tool_span(
        {"gen_ai.operation.name": None, "openinference.span.kind": "TOOL"}, name="anything"
    )
    assert convert_one(by_kind)[0]["tool"] == "get_order"
    only_name = tool_span({"gen_ai.operation.name": None, "gen_ai.tool.name": None})
    assert convert_one(only_name)[0]["tool"] == "get_order"  # span name minus the prefix


# --- ids ------------------------------------------------------------------------------


def test_missing_call_id_is_synthetic_deterministic_and_flagged():
    span = tool_span({"gen_ai.tool.call.id": None})
    first, again = convert_one(span), convert_one(span)
    assert first == again
    call, observation = first
    assert call["toolCallId"] == observation["toolCallId"] == SPAN_KEY
    assert observation["observationId"] == SPAN_KEY
    assert call["syntheticToolCallId"] is True and observation["syntheticToolCallId"] is True
    real = convert_one(tool_span())
    assert "syntheticToolCallId" not in real[0] and "syntheticToolCallId" not in real[1]


def test_array_call_id_prefers_provider_call_id_else_last():
    ids = ["run_9guMCbt68iSVgtsx6WdKMA18", "call_Sz1QP8T7fuJkIECGDLFWOorq"]
    assert convert_one(tool_span({"gen_ai.tool.call.id": ids[::-1]}))[0]["toolCallId"] == ids[1]
    anthropic = ["x-1", "toolu_01", "y-2"]
    assert convert_one(tool_span({"gen_ai.tool.call.id": anthropic}))[0]["toolCallId"] == "toolu_01"
    assert convert_one(tool_span({"gen_ai.tool.call.id": ["a", "b"]}))[0]["toolCallId"] == "b"
    empty = convert_one(tool_span({"gen_ai.tool.call.id": []}))
    assert empty[0]["syntheticToolCallId"] is True


def test_openinference_call_id_attributes():
    base = {"gen_ai.tool.call.id": None}
    assert convert_one(tool_span({**base, "tool.id": "t-1"}))[0]["toolCallId"] == "t-1"
    assert convert_one(tool_span({**base, "tool_call.id": "c-1"}))[0]["toolCallId"] == "c-1"


@pytest.mark.parametrize(
    ("trace_id", "span_id"),
    [
        (TRACE, SPAN),
        (TRACE.upper(), SPAN.upper()),
        ("0x" + TRACE, "0X" + SPAN),
        (
            base64.b64encode(bytes.fromhex(TRACE)).decode(),
            base64.b64encode(bytes.fromhex(SPAN)).decode(),
        ),
        (int(TRACE, 16), int(SPAN, 16)),
    ],
)
def test_id_encodings_normalize_to_lowercase_hex(trace_id, span_id):
    call, observation = convert_one(tool_span(traceId=trace_id, spanId=span_id))
    assert call["runId"] == observation["runId"] == TRACE
    assert observation["observationId"] == SPAN_KEY


def test_base64_ids_from_protobuf_json():
    span = tool_span(traceId="2pmiel5ZGf7KL1UXox0v4Q==", spanId="6m5Fb+DRW2A=")
    _, observation = convert_one(span)
    assert observation["runId"] == "da99a27a5e5919feca2f5517a31d2fe1"
    assert observation["observationId"] == "otel:da99a27a5e5919feca2f5517a31d2fe1:ea6e456fe0d15b60"


@pytest.mark.parametrize(
    "fields",
    [
        {"traceId": ""},
        {"traceId": None},
        {"traceId": "0" * 32},
        {"traceId": ["x"]},
        {"traceId": 1 << 128},
        {"spanId": "line\nbreak"},
        {"spanId": "x" * 201},
    ],
)
def test_unusable_ids_are_refused(fields):
    with pytest.raises(ExternalFormatError, match=r"spans\[0\] .*(traceId|spanId)"):
        convert_document(otlp(tool_span(**fields)))


@pytest.mark.parametrize(
    "fields",
    [
        {"traceId": TRACE[:-2]},
        {"traceId": "trace_" + TRACE},
        {"spanId": "zz" * 8},
        {"spanId": base64.b64encode(bytes(16)).decode()},  # base64 of the wrong length
    ],
)
def test_ids_that_are_no_hex_id_are_kept_as_opaque_ids(fields):
    """Not a reason to drop a tool span: the same text is the same id wherever it comes."""
    call, observation = convert_one(tool_span(**fields))
    trace_id, span_id = fields.get("traceId", TRACE), fields.get("spanId", SPAN)
    assert call["runId"] == trace_id
    assert observation["observationId"] == f"otel:{trace_id}:{span_id}"


# --- times ----------------------------------------------------------------------------


def test_numeric_and_string_nanos_agree_and_stay_exact():
    as_strings = convert_one(tool_span())
    as_numbers = convert_one(tool_span(startTimeUnixNano=int(START), endTimeUnixNano=int(END)))
    assert as_strings == as_numbers
    assert as_numbers[0]["endTimeUnixNano"] == END  # above 2**53: no float on the way
    assert as_numbers[0]["completedAt"] == END_AT


def test_rfc3339_matches_datetime_arithmetic():
    for nanos in (1, 999, 1_000, 1796002151369461485, 253402300799999999999 // 10):
        expected = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=nanos // 1000)
        call, _ = convert_one(tool_span(startTimeUnixNano=str(nanos), endTimeUnixNano=None))
        assert call["startedAt"] == expected.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@pytest.mark.parametrize("end", [None, "0", 0])
def test_missing_or_zero_end_time_gives_no_completion(end):
    for record in convert_one(tool_span(endTimeUnixNano=end)):
        assert record["startedAt"] == START_AT
        assert "completedAt" not in record and "endTimeUnixNano" not in record


@pytest.mark.parametrize("start", ["1.7e18", 1.796e18, "-5", -5, "17960021513680000000000", True])
def test_unusable_times_are_refused(start):
    with pytest.raises(ExternalFormatError, match="startTimeUnixNano"):
        convert_document(otlp(tool_span(startTimeUnixNano=start)))


def test_console_span_times_with_offsets_and_nanoseconds():
    span = load("python-console-exporter-not-otlp.json")
    span["start_time"] = "2026-11-30T02:29:25.647392845+01:00"
    span["end_time"] = None
    call, observation = tools_only(convert_document(span))
    assert call["startTimeUnixNano"] == "1796002165647392845"
    assert call["startedAt"] == "2026-11-30T01:29:25.647392Z"
    assert "completedAt" not in observation
    span["start_time"] = "yesterday"
    with pytest.raises(ExternalFormatError, match="start_time"):
        convert_document(span)


def test_console_span_with_integer_nanos_and_decimal_ids():
    """any-agent writes ReadableSpan-like spans with decimal ids and integer nanoseconds."""
    span = load("python-console-exporter-not-otlp.json")
    span["context"] = {"trace_id": int(TRACE, 16), "span_id": int(SPAN, 16)}
    span["start_time"], span["end_time"] = int(START), int(END)
    span["status"] = {"status_code": "error"}
    call, observation = tools_only(convert_document(span))
    assert (call["runId"], observation["observationId"]) == (TRACE, SPAN_KEY)
    assert {k: call[k] for k in TIMES} == TIMES
    assert call["ok"] is False


# --- status, errors and results -------------------------------------------------------


ERROR_STATUS = {"code": 2, "message": "retry: order id malformed"}
EXCEPTION_EVENT = {
    "name": "exception",
    "timeUnixNano": END,
    "attributes": key_values({"exception.type": "ToolRetryError", "exception.message": "bad id"}),
}


def test_error_span_with_result_and_exception_event():
    """pydantic-ai records the retry prompt as the result of an ERROR span: keep both."""
    span = tool_span(
        {"gen_ai.tool.call.result": '{"source": "orders", "data": {"status": "unknown"}}'},
        status=ERROR_STATUS,
        events=[EXCEPTION_EVENT, {"name": "log", "attributes": []}],
    )
    call, observation = convert_one(span)
    assert call["ok"] is False
    assert observation["source"] == "orders"
    assert observation["value"] == {"status": "unknown"}
    assert observation["errors"] == [
        {"code": "SPAN_ERROR", "message": "retry: order id malformed"},
        {"code": "ToolRetryError", "message": "bad id"},
    ]


@pytest.mark.parametrize("code", [2, "STATUS_CODE_ERROR", "ERROR", "error"])
def test_error_status_spellings(code):
    call, observation = convert_one(tool_span(status={"code": code}))
    assert call["ok"] is False
    assert observation["errors"] == [{"code": "SPAN_ERROR"}]


@pytest.mark.parametrize("status", [None, {}, {"code": 0}, {"code": 1}, {"code": "STATUS_CODE_OK"}])
def test_non_error_status_is_ok(status):
    call, observation = convert_one(tool_span(status=status))
    assert call["ok"] is True
    assert "errors" not in observation


def test_span_error_message_falls_back_to_exception_then_error_type():
    span = tool_span({"error.type": "TimeoutError"}, status={"code": 2}, events=[EXCEPTION_EVENT])
    assert convert_one(span)[1]["errors"][0] == {
        "code": "SPAN_ERROR",
        "message": "bad id",
        "errorType": "TimeoutError",
    }
    span = tool_span({"error.type": "TimeoutError"}, status={"code": 2})
    assert convert_one(span)[1]["errors"] == [
        {"code": "SPAN_ERROR", "message": "TimeoutError", "errorType": "TimeoutError"}
    ]


def test_missing_result_is_not_a_value():
    _, observation = convert_one(tool_span())
    assert "value" not in observation and "errors" not in observation
    assert observation["source"] == "get_order" and observation["sourceInferred"] is True


def test_plain_text_result_is_a_value_without_error():
    observation = result_of("rainy, 57F")
    assert observation["value"] == {"result": "rainy, 57F"}
    assert "errors" not in observation
    assert observation["sourceInferred"] is True


def test_truncated_json_result_is_flagged():
    text = '{"source": "erp", "revision": 42, "data": {"qty"'
    observation = result_of(text)
    assert observation["value"] == {"result": text}
    assert observation["source"] == "get_order"  # nothing is read out of a broken payload
    assert [e["code"] for e in observation["errors"]] == ["UNPARSEABLE_RESULT"]
    python_repr = result_of("{'status': 'paid'}")  # read as a literal, never run
    assert (python_repr["value"], python_repr["resultEncoding"]) == (
        {"status": "paid"},
        "python-repr",
    )
    assert "errors" not in python_repr
    cut_repr = result_of("{'status': 'pa")
    assert [e["code"] for e in cut_repr["errors"]] == ["UNPARSEABLE_RESULT"]
    markdown = result_of("[The Best 10 Breweries](https://example.com)")
    assert "errors" not in markdown  # text that opens with a bracket is not cut JSON


def test_redacted_result_is_withheld_not_a_value():
    observation = result_of("__REDACTED__")
    assert "value" not in observation
    assert [e["code"] for e in observation["errors"]] == ["RESULT_REDACTED"]


def test_non_object_json_results():
    assert result_of("42")["value"] == {"result": 42}
    assert result_of('["a", "b"]')["value"] == {"result": ["a", "b"]}
    assert result_of('"done"')["value"] == {"result": "done"}
    assert result_of("NaN")["value"] == {"result": "NaN"}  # not JSON: kept as text


def test_nested_json_with_an_unpaired_surrogate_is_not_decoded():
    """The outer line may carry it harmlessly as text; decoded, it could not be stored."""
    text = '{"source": "erp", "data": {"name": "\\ud800"}}'
    observation = result_of(text)
    assert observation["value"] == {"result": text}
    assert [e["code"] for e in observation["errors"]] == ["UNPARSEABLE_RESULT"]
    paired = result_of('{"source": "erp", "data": {"name": "\\ud83d\\ude00"}}')
    assert paired["value"] == {"name": "\U0001f600"}


def test_double_encoded_json_is_unwrapped_once():
    inner = json.dumps({"source": "erp", "data": {"qty": 1}})
    observation = result_of(json.dumps(inner))
    assert (observation["source"], observation["value"]) == ("erp", {"qty": 1})
    call, _ = convert_one(tool_span({"gen_ai.tool.call.arguments": json.dumps('{"sku": "A"}')}))
    assert call["arguments"] == {"sku": "A"}


def test_payload_provenance_and_value_selection():
    payload = {
        "source": "ledger",
        "sourceRevision": 9,
        "revision": 3,
        "revisionDomain": "payments",
        "entity": 204,
        "fallback": True,
        "errors": ["PAYMENT_EVENTS_UNAVAILABLE", {"code": "X", "field": "amount"}],
        "warnings": [],
        "result": {"status": "paid"},
        "meta": {"page": 1},
    }
    observation = result_of(json.dumps(payload))
    assert observation["source"] == "ledger"
    assert observation["sourceRevision"] == 9  # first key present wins
    assert observation["revisionDomain"] == "payments"
    assert observation["entity"] == "204"
    assert observation["fallback"] is True
    assert observation["value"] == {"status": "paid"}
    assert observation["payloadExtra"] == {"revision": 3, "meta": {"page": 1}}
    assert observation["errors"] == payload["errors"]
    assert "sourceInferred" not in observation


def test_payload_without_value_key_is_the_value_minus_provenance():
    observation = result_of(json.dumps({"source": "ledger", "revision": 4, "status": "paid"}))
    assert observation["value"] == {"status": "paid"}
    assert observation["sourceRevision"] == 4
    only_provenance = result_of(json.dumps({"source": "ledger", "errors": ["NOT_FOUND"]}))
    assert "value" not in only_provenance and only_provenance["errors"] == ["NOT_FOUND"]
    not_an_object = result_of(json.dumps({"data": [1, 2], "source": "s"}))
    assert not_an_object["value"] == {"data": [1, 2]}


def test_odd_provenance_types_are_kept_aside():
    payload = {
        "source": {"name": "erp"},
        "revision": 4.5,
        "revisionDomain": 7,
        "entity": ["a"],
        "fallback": "cache",
        "status": "paid",
    }
    observation = result_of(json.dumps(payload), **{"gen_ai.data_source.id": "erp-db"})
    assert observation["source"] == "erp-db" and observation["sourceInferred"] is True
    assert observation["sourceRaw"] == {"name": "erp"}
    assert observation["revisionRaw"] == 4.5 and "sourceRevision" not in observation
    assert observation["revisionDomainRaw"] == 7 and "revisionDomain" not in observation
    assert observation["entityRaw"] == ["a"] and "entity" not in observation
    assert observation["fallback"] is True and observation["fallbackRaw"] == "cache"
    assert observation["value"] == {"status": "paid"}
    assert result_of(json.dumps({"revision": True}))["revisionRaw"] is True


def test_payload_errors_of_odd_shapes():
    payload = {"errors": ["A", {"code": "B", "field": 3}, 5, None, ["C"]], "status": "x"}
    observation = result_of(json.dumps(payload))
    assert observation["errors"] == [
        "A",
        {"code": "B", "fieldRaw": 3},
        {"code": "UNRECOGNIZED_ERROR", "message": "5"},
        {"code": "UNRECOGNIZED_ERROR", "message": '["C"]'},
    ]
    assert result_of(json.dumps({"errors": "DOWN"}))["errors"] == ["DOWN"]
    assert "errors" not in result_of(json.dumps({"errors": {}, "status": "x"}))


def test_mcp_is_error_result():
    payload = {"content": [{"type": "text", "text": "no such order"}], "isError": True}
    observation = result_of(json.dumps(payload))
    assert [e["code"] for e in observation["errors"]] == ["TOOL_ERROR"]


def test_custom_extraction_keys():
    keys = ExtractionKeys(
        source=("system",), revision=("version",), value=("payload",), warnings=()
    )
    payload = {"system": "crm", "version": 12, "payload": {"tier": "gold"}, "warnings": ["w"]}
    span = tool_span({"gen_ai.tool.call.result": json.dumps(payload)})
    _, observation = convert_one(span, keys)
    assert (observation["source"], observation["sourceRevision"]) == ("crm", 12)
    assert observation["value"] == {"tier": "gold"}
    assert observation["payloadExtra"] == {"warnings": ["w"]}
    assert "errors" not in observation


def test_openinference_output_value_and_precedence():
    attributes = {
        "gen_ai.tool.call.arguments": None,
        "input.value": '{"sku": "B-2"}',
        "output.value": '{"source": "wms", "data": {"qty": 1}}',
    }
    call, observation = convert_one(tool_span(attributes))
    assert call["arguments"] == {"sku": "B-2"}
    assert observation["source"] == "wms"
    both = result_of('{"source": "first"}', **{"output.value": '{"source": "second"}'})
    assert both["source"] == "first"


# --- AnyValue ---------------------------------------------------------------------------


def test_kvlist_arguments_and_result():
    arguments = {"orderId": "order-204", "limit": 3, "tags": ["a", "b"], "filter": {"paid": True}}
    result = {"source": "erp", "sourceRevision": 5, "data": {"qty": 7}}
    call, observation = convert_one(
        tool_span({"gen_ai.tool.call.arguments": arguments, "gen_ai.tool.call.result": result})
    )
    assert call["arguments"] == arguments
    assert (observation["source"], observation["sourceRevision"]) == ("erp", 5)
    assert observation["value"] == {"qty": 7}


def test_non_object_arguments_are_kept_raw():
    call, _ = convert_one(tool_span({"gen_ai.tool.call.arguments": "{'sku': 'A'}"}))
    assert call["arguments"] == {"sku": "A"}  # a Python repr, read as a literal
    for raw in ("{'sku': ", "[1, 2]", "A-1", '{"sku": "A"'):
        call, _ = convert_one(tool_span({"gen_ai.tool.call.arguments": raw}))
        assert call["arguments"] == {"_raw": raw}
    call, _ = convert_one(tool_span({"gen_ai.tool.call.arguments": ["a", 1]}))
    assert call["arguments"] == {"_raw": ["a", 1]}
    call, _ = convert_one(tool_span({"gen_ai.tool.call.arguments": None}))
    assert "arguments" not in call  # not captured is not empty


def test_any_value_variants():
    values = {
        "s": {"stringValue": "x"},
        "b": {"boolValue": False},
        "i_number": {"intValue": 7},
        "i_string": {"intValue": "-12"},
        "d": {"doubleValue": 1.5},
        "d_string": {"doubleValue": "2.5"},
        "nan": {"doubleValue": "NaN"},
        "inf": {"doubleValue": "-Infinity"},
        "bytes": {"bytesValue": "AAEC"},
        "empty": {},
        "array": {"arrayValue": {"values": [{"intValue": "1"}, {}]}},
        "empty_array": {"arrayValue": {}},
        "kv": {"kvlistValue": {"values": [{"key": "a", "value": {"boolValue": True}}]}},
        "snake": {"string_value": "y"},
    }
    attributes = [{"key": key, "value": value} for key, value in values.items()]
    result = {"kvlistValue": {"values": attributes}}
    span = tool_span()
    span["attributes"].append({"key": "gen_ai.tool.call.result", "value": result})
    _, observation = convert_one(span)
    assert observation["value"] == {
        "s": "x",
        "b": False,
        "i_number": 7,
        "i_string": -12,
        "d": 1.5,
        "d_string": 2.5,
        "nan": "NaN",
        "inf": "-Infinity",
        "bytes": "AAEC",
        "empty": None,
        "array": [1, None],
        "empty_array": [],
        "kv": {"a": True},
        "snake": "y",
    }


def test_duplicate_attribute_keys_last_wins():
    span = tool_span()
    span["attributes"].append({"key": "gen_ai.tool.name", "value": {"stringValue": "second"}})
    assert convert_one(span)[0]["tool"] == "second"


@pytest.mark.parametrize(
    "value",
    [
        {"intValue": "1.5"},
        {"intValue": True},
        {"boolValue": "true"},
        {"stringValue": 3},
        {"stringValue": "a", "intValue": 1},
        {"arrayValue": []},
        "plain",
    ],
)
def test_malformed_any_value_on_a_tool_span_is_refused(value):
    span = tool_span()
    span["attributes"].append({"key": "app.x", "value": value})
    with pytest.raises(ExternalFormatError, match="attributes"):
        convert_document(otlp(span))


def test_deeply_nested_any_value_is_refused_not_crashed():
    value = {"stringValue": "leaf"}
    for _ in range(200):
        value = {"arrayValue": {"values": [value]}}
    span = tool_span()
    span["attributes"].append({"key": "app.deep", "value": value})
    with pytest.raises(ExternalFormatError, match="nested too deeply"):
        convert_document(otlp(span))


# --- documents --------------------------------------------------------------------------


def test_document_order_and_interleaved_traces():
    other = "0af7651916cd43dd8448eb211c80319c"
    spans = [
        tool_span({"gen_ai.tool.call.id": "call_b"}, spanId="2" * 16, startTimeUnixNano="9"),
        tool_span({"gen_ai.tool.call.id": "call_x"}, traceId=other, spanId="3" * 16),
        tool_span({"gen_ai.tool.call.id": "call_a"}, spanId="1" * 16, startTimeUnixNano="1"),
    ]
    records = convert_document(otlp(*spans))
    assert [(r["runId"][:4], r["toolCallId"]) for r in records] == [
        ("852a", "call_b"),
        ("852a", "call_b"),
        ("0af7", "call_x"),
        ("0af7", "call_x"),
        ("852a", "call_a"),
        ("852a", "call_a"),
    ]


def test_resource_and_scope_batches_and_old_names():
    document = {
        "resourceSpans": [
            {"scopeSpans": [{"spans": [tool_span(spanId="1" * 16)]}]},
            {"instrumentationLibrarySpans": [{"spans": [tool_span(spanId="2" * 16)]}]},
        ]
    }
    records = convert_document(document)
    assert [r["observationId"][-4:] for r in records[1::2]] == ["1111", "2222"]
    snake = {
        "resource_spans": [
            {
                "scope_spans": [
                    {
                        "spans": [
                            {
                                "trace_id": TRACE,
                                "span_id": SPAN,
                                "name": "execute_tool get_order",
                                "start_time_unix_nano": START,
                                "attributes": [
                                    {"key": "gen_ai.tool.call.id", "value": {"string_value": "c"}}
                                ],
                            }
                        ]
                    }
                ]
            }
        ]
    }
    call, _ = convert_document(snake)
    assert (call["toolCallId"], call["startedAt"]) == ("c", START_AT)


@pytest.mark.parametrize(
    ("document", "reason"),
    [
        ({"resourceSpans": {}}, "resourceSpans must be an array"),
        ({"resourceSpans": [3]}, r"resourceSpans\[0\] must be an object"),
        ({"resourceSpans": [{"scopeSpans": "x"}]}, "scopeSpans must be an array"),
        ({"resourceSpans": [{"scopeSpans": [{"spans": [None]}]}]}, "must be an object"),
        (otlp(tool_span(status="ERROR")), "status must be an object"),
        (otlp(tool_span(events={})), "events must be an array"),
        (otlp({**tool_span(), "attributes": {"a": 1}}), "attributes must be an array"),
        (otlp(tool_span({"gen_ai.tool.name": None}, name="execute_tool ")), "no tool name"),
        (otlp(tool_span(name=5)), "name must be a string"),
    ],
)
def test_unusable_documents_give_one_line_reasons(document, reason):
    with pytest.raises(ExternalFormatError, match=reason) as raised:
        convert_document(document)
    assert "\n" not in str(raised.value)


def test_console_span_with_bad_attributes_is_refused():
    span = load("python-console-exporter-not-otlp.json")
    span["attributes"] = ["x"]
    with pytest.raises(ExternalFormatError, match="attributes must be an object"):
        convert_document(span)


# --- properties -------------------------------------------------------------------------


KEYS = st.sampled_from(
    [
        "resourceSpans",
        "scopeSpans",
        "spans",
        "traceId",
        "spanId",
        "name",
        "attributes",
        "key",
        "value",
        "stringValue",
        "intValue",
        "kvlistValue",
        "arrayValue",
        "values",
        "status",
        "code",
        "events",
        "startTimeUnixNano",
        "endTimeUnixNano",
        "context",
        "trace_id",
        "span_id",
        "start_time",
        "runId",
        "type",
        "x",
    ]
)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(
        [
            "execute_tool",
            "execute_tool x",
            "TOOL",
            TRACE,
            SPAN,
            "0x" + TRACE,
            "2pmiel5ZGf7KL1UXox0v4Q==",
            "6m5Fb+DRW2A=",
            START,
            "2026-11-30T01:29:25.647393Z",
            "__REDACTED__",
            '{"source": "s", "revision": 1}',
        ]
    )
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(KEYS | st.text(max_size=5), inner, max_size=5)
    ),
    max_leaves=30,
)


def outcome(document):
    """Records (all checked) or None when refused with ExternalFormatError; anything else fails."""
    try:
        records = convert_document(document)
    except ExternalFormatError as exc:
        assert str(exc) and "\n" not in str(exc)
        return None
    check(records)
    return records


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(JSON_VALUES)
def test_arbitrary_json_only_raises_external_format_error(document):
    outcome(document)
    outcome({"resourceSpans": document})
    outcome({"resourceSpans": [{"scopeSpans": [{"spans": [document]}]}]})
    outcome({"context": {"trace_id": "0x" + TRACE}, "name": "execute_tool t", "x": document})


ATTRIBUTE_NAMES = st.sampled_from(
    [
        "gen_ai.operation.name",
        "gen_ai.tool.name",
        "gen_ai.tool.call.id",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
        "gen_ai.data_source.id",
        "openinference.span.kind",
        "tool.name",
        "tool.id",
        "input.value",
        "output.value",
        "error.type",
    ]
)
PAYLOAD_KEYS = st.sampled_from(
    [
        "source",
        "sourceRevision",
        "revision",
        "revisionDomain",
        "entity",
        "errors",
        "warnings",
        "fallback",
        "data",
        "value",
        "result",
        "isError",
        "status",
        "field",
        "code",
    ]
)
PAYLOADS = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(PAYLOAD_KEYS, inner, max_size=6),
    max_leaves=20,
)
RESULT_OBJECTS = st.fixed_dictionaries(
    {},
    optional={
        "source": st.sampled_from(["erp", "ledger", ""]) | SCALARS,
        "sourceRevision": st.integers(0, 99) | SCALARS,
        "revision": st.integers(0, 99) | PAYLOADS,
        "revisionDomain": st.just("payments") | SCALARS,
        "entity": st.sampled_from(["order-204", 204]) | PAYLOADS,
        "errors": st.lists(st.sampled_from(["DOWN", {"code": "X", "field": "qty"}]) | PAYLOADS),
        "warnings": PAYLOADS,
        "fallback": st.booleans() | SCALARS,
        "data": st.dictionaries(st.sampled_from(["qty", "status"]), SCALARS) | PAYLOADS,
        "status": SCALARS,
    },
)
RESULT_TEXTS = (
    RESULT_OBJECTS.map(json.dumps)
    | PAYLOADS.map(json.dumps)
    | PAYLOADS.map(lambda p: json.dumps(p)[:-1])
    | SCALARS
)


def mostly(draw, valid, noise):
    """Usually a draw from `valid`, one time in ten from `noise`."""
    return draw(noise) if draw(st.sampled_from(range(10))) == 9 else draw(valid)


@st.composite
def any_values(draw):
    choice = draw(st.integers(0, 5))
    if choice < 3:
        value = any_value(draw(RESULT_TEXTS))
    elif choice < 5:
        value = any_value(draw(PAYLOADS))
    else:
        value = {draw(st.sampled_from(["intValue", "doubleValue", "bytesValue"])): draw(SCALARS)}
    return mostly(draw, st.just(value), JSON_VALUES)


EVENTS = st.lists(
    st.fixed_dictionaries(
        {
            "name": st.sampled_from(["exception", "other"]),
            "attributes": st.lists(
                st.fixed_dictionaries(
                    {
                        "key": st.sampled_from(["exception.type", "exception.message"]),
                        "value": any_values(),
                    }
                ),
                max_size=2,
            ),
        }
    ),
    max_size=2,
)


@st.composite
def otlp_spans(draw):
    attributes = [
        {"key": draw(ATTRIBUTE_NAMES), "value": draw(any_values())}
        for _ in range(draw(st.integers(0, 8)))
    ]
    if draw(st.booleans()):
        result = draw(RESULT_OBJECTS)
        attributes.append({"key": "gen_ai.tool.call.result", "value": any_value(result)})
    if draw(st.sampled_from(range(4))) != 3:
        attributes.append(
            {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}}
        )
    trace_ids = st.sampled_from([TRACE, TRACE.upper(), "2pmiel5ZGf7KL1UXox0v4Q==", int(TRACE, 16)])
    span_ids = st.sampled_from([SPAN, "6m5Fb+DRW2A=", "0x" + SPAN, "1" * 16])
    times = st.sampled_from([START, int(START), END, int(END), "0", 0, None])
    statuses = st.sampled_from(
        [{"code": 2, "message": "boom"}, {"code": "STATUS_CODE_ERROR"}, {}, {"code": 1}, None]
    )
    span = {
        "traceId": mostly(draw, trace_ids, SCALARS),
        "spanId": mostly(draw, span_ids, SCALARS),
        "name": mostly(draw, st.sampled_from(["execute_tool t", "chat", "tool"]), SCALARS),
        "attributes": attributes,
        "startTimeUnixNano": mostly(draw, times, SCALARS),
        "endTimeUnixNano": mostly(draw, times, SCALARS),
        "status": mostly(draw, statuses, JSON_VALUES),
        "events": mostly(draw, EVENTS, JSON_VALUES),
    }
    return {key: value for key, value in span.items() if draw(st.sampled_from(range(20))) != 19}


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(otlp_spans(), min_size=1, max_size=4))
def test_generated_otlp_documents_convert_to_checked_records_or_refuse(spans):
    records = outcome(otlp(*spans))
    if records is None:
        return
    assert len(records) % 2 == 0
    for call, observation in zip(records[::2], records[1::2], strict=True):
        assert (call["type"], observation["type"]) == ("tool_call", "tool_observation")
        assert call["toolCallId"] == observation["toolCallId"]
        assert isinstance(call["ok"], bool)
        assert observation["observationId"].startswith(f"otel:{observation['runId']}:")
        # A trace id that reads as one is 32 lowercase hex digits; any other text is kept
        # as an opaque id (Phoenix's sanitised exports), trimmed, never empty.
        run_id = observation["runId"]
        assert run_id and run_id == run_id.strip()
        if len(run_id) == 32 and all(c in "0123456789abcdefABCDEF" for c in run_id):
            assert run_id == run_id.lower()
    assert convert_document(otlp(*spans)) == records  # deterministic
