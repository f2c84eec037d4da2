"""Containers of traces (issue 27, points 2 and 4): a JSON array of OTLP documents, as tools
that save a session write, is read whole; a container this does not read is refused saying
what was found (its top-level keys) and what the nearest format would need."""

import json

import pytest

from reviewapp.engine import RecordError
from reviewapp.ingest.formats import decode_unit
from reviewapp.ingest.otel import convert
from tests.paths import OTEL

JS_TRACE = "852ad2d6eff7411c199758e6190d4dde"
OI_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def load(name):
    return json.loads((OTEL / name).read_text())


def test_an_array_of_otlp_documents_is_read_with_every_tool_call():
    session = [load("otlp-js-sdk.json"), load("openinference-tools.json")]
    unit = decode_unit(json.dumps(session).encode())
    assert unit.format == "otlp"
    assert unit.run_ids == sorted([JS_TRACE, OI_TRACE])
    calls = [(r.run_id, r.tool, r.tool_call_id) for r in unit.records if hasattr(r, "tool")]
    assert calls == [
        (JS_TRACE, "get_inventory", "call_abc123"),
        (JS_TRACE, "get_price", "call_def456"),
        (OI_TRACE, "lookup_order", "toolu_01ABC"),
        (OI_TRACE, "search_docs", "call_SEARCH1"),
        (OI_TRACE, "get_weather", f"otel:{OI_TRACE}:00f067aa0ba902b9"),
        (OI_TRACE, "get_stock", "toolu_01STOCK"),
    ]
    records = convert(session).records
    by_call = {r["toolCallId"]: r for r in records if r["type"] == "tool_call"}
    assert by_call["call_abc123"]["arguments"] == {"sku": "A-1"}
    assert by_call["toolu_01ABC"]["arguments"] == {"orderId": "order-204"}
    # The same documents one by one give the same records.
    one_by_one = convert(session[0]).records + convert(session[1]).records
    assert records == one_by_one


def test_an_unreadable_tool_span_in_an_array_of_otlp_documents_is_named_by_its_place():
    broken = load("otlp-js-sdk.json")
    broken["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["startTimeUnixNano"] = "soon"
    with pytest.raises(RecordError, match=r"otlp: \[1\]\.resourceSpans\[0\]"):
        decode_unit(json.dumps([load("openinference-tools.json"), broken]).encode())


def refusal(document) -> str:
    with pytest.raises(RecordError) as refused:
        decode_unit(json.dumps(document).encode())
    message = str(refused.value)
    assert message.startswith("not a recognised trace format: found ")
    assert "\n" not in message
    return message


def test_an_object_of_span_lists_says_its_keys_and_how_spans_are_read():
    span = {"name": "t", "context": {"trace_id": "t1", "span_id": "s1"}, "attributes": {}}
    message = refusal({"session-a": [span], "session-b": [span, span], "meta": {"v": 1}})
    assert 'an object with keys "session-a", "session-b", "meta"' in message
    assert '"session-a", "session-b" hold lists of spans' in message
    assert '"spans": [...]' in message


def test_an_object_holding_otlp_documents_says_so():
    message = refusal({"traces": [load("otlp-js-sdk.json")]})
    assert '"traces" holds OTLP documents' in message and "a JSON array of them" in message


def test_spans_without_ids_say_which_ids_a_span_needs():
    message = refusal([{"name": "get_order", "attributes": {"tool.name": "get_order"}}])
    assert "an array of 1 item" in message
    assert '[0] has keys "name", "attributes"' in message
    assert '"context": {"trace_id", "span_id"}' in message and '"traceId"' in message


def test_a_data_list_that_is_neither_jaeger_nor_phoenix_says_what_each_needs():
    message = refusal({"data": [{"id": 1, "name": "x"}], "next_cursor": None})
    assert '"data"' in message and "traceID" in message and "span_kind" in message
    assert 'data[0] has keys "id", "name"' in message


@pytest.mark.parametrize(
    ("payload", "found"),
    [
        (b'{"foo": 1}', 'an object with keys "foo"'),
        (b"[1, 2]", "an array of 2 items"),
        (b"[]", "an empty array"),
        (b'{"spans": "x"}', 'an object with keys "spans"'),
    ],
)
def test_every_refusal_says_what_was_found_and_still_lists_the_formats(payload, found):
    with pytest.raises(RecordError) as refused:
        decode_unit(payload)
    message = str(refused.value)
    assert message.startswith(f"not a recognised trace format: found {found}")
    assert message.endswith('or a list of spans (a JSON array, or "spans": [...])')
