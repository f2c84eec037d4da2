"""The receiver makes a protobuf trace's records from its decoded spans, not by parsing its
OTLP/JSON line back: the same spans give the same records whether they come as protobuf,
as OTLP/JSON or as an OTLP/JSON file, and a trace that does not read plainly is still
refused for the reason its line gives."""

import base64
import json

import pytest
from django.db import transaction
from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import (
    AnyValue,
    ArrayValue,
    InstrumentationScope,
    KeyValue,
    KeyValueList,
)
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span
from opentelemetry.proto.trace.v1.trace_pb2 import Status as SpanStatus

from reviewapp.engine import RecordError
from reviewapp.ingest.formats import decode_unit
from reviewapp.ingest.otlp_messages import protobuf_traces
from reviewapp.ingest.pipeline import ingest_file
from reviewapp.models import IngestBatch, Run, TraceLine, TraceRecord
from tests.ingest.test_otlp import PROTOBUF, agent_span, conflict_spans, post, tool_span
from tests.ingest.test_otlp import token as token  # noqa: F401 (a fixture)

TRACE_B = bytes.fromhex("0af7651916cd43dd8448eb211c80319c")
TRACE_C = bytes.fromhex("4bf92f3577b34da6a3ce929d0e0e4736")


def value(**kind) -> AnyValue:
    return AnyValue(**kind)


def key_value(key: str, **kind) -> KeyValue:
    return KeyValue(key=key, value=AnyValue(**kind))


def nested(depth: int) -> AnyValue:
    inner = AnyValue(string_value="bottom")
    for _ in range(depth):
        inner = AnyValue(array_value=ArrayValue(values=[inner]))
    return inner


def odd_tool_span() -> Span:
    """A tool span with every kind of value, a repeated key, a failed status and an
    exception event."""
    span = tool_span(4, "ledger_lookup", '{"source": "ledger", "data": {"n": 1}}', TRACE_B)
    span.attributes.extend(
        [
            key_value("retries", int_value=-3),
            key_value("score", double_value=0.1),
            key_value("big", double_value=1e16),
            key_value("nan", double_value=float("nan")),
            key_value("inf", double_value=float("-inf")),
            key_value("flag", bool_value=True),
            key_value("blob", bytes_value=b"\x00\xffraw"),
            key_value("empty"),
            key_value(
                "list",
                array_value=ArrayValue(values=[value(int_value=1), value(string_value="two")]),
            ),
            key_value(
                "map",
                kvlist_value=KeyValueList(
                    values=[key_value("a", bool_value=False), key_value("a", int_value=2)]
                ),
            ),
            KeyValue(key="deep", value=nested(20)),
            key_value("retries", string_value="again"),  # a repeated key: the last one counts
        ]
    )
    span.status.CopyFrom(SpanStatus(code=SpanStatus.STATUS_CODE_ERROR, message="ledger down"))
    span.events.add(
        name="exception",
        time_unix_nano=span.start_time_unix_nano + 1,
        attributes=[
            key_value("exception.type", string_value="TimeoutError"),
            key_value("exception.message", string_value="no answer in 5 s"),
        ],
    )
    span.events.add(name="log", attributes=[key_value("note", string_value="not an exception")])
    return span


def chat_span(trace: bytes, span_id: int) -> Span:
    return Span(
        trace_id=trace,
        span_id=span_id.to_bytes(8, "big"),
        parent_span_id=bytes(8),  # all zeros: no parent
        name="",
        start_time_unix_nano=1796002151361000000,
        attributes=[key_value("gen_ai.operation.name", string_value="chat")],
    )


def rich_request() -> ExportTraceServiceRequest:
    """Three traces over two resources and three scopes, spans of one trace under both."""
    support = Resource(
        attributes=[
            key_value("service.name", string_value="support-bot"),
            key_value("service.instance", int_value=7),
            key_value("host.tags", array_value=ArrayValue(values=[value(string_value="a")])),
        ]
    )
    ledger = Resource(attributes=[key_value("service.name", string_value="ledger-bot")])
    return ExportTraceServiceRequest(
        resource_spans=[
            ResourceSpans(
                resource=support,
                scope_spans=[
                    ScopeSpans(
                        scope=InstrumentationScope(name="agents", version="1.2"),
                        spans=[*conflict_spans(), chat_span(TRACE_B, 9)],
                    ),
                    ScopeSpans(
                        scope=InstrumentationScope(name=""),
                        spans=[agent_span(TRACE_B), odd_tool_span()],
                    ),
                ],
            ),
            ResourceSpans(
                resource=ledger,
                scope_spans=[
                    ScopeSpans(
                        scope=InstrumentationScope(name="tools"),
                        spans=[
                            tool_span(5, "refund_service", '"done"', TRACE_C),
                            tool_span(6, "order_ledger", "__REDACTED__", TRACE_B),
                        ],
                    )
                ],
            ),
        ]
    )


def otlp_json(request: ExportTraceServiceRequest) -> dict:
    """The request as OTLP/JSON (hex ids, as the specification has them)."""
    document = MessageToDict(request)
    for resource_spans in document["resourceSpans"]:
        for scope_spans in resource_spans["scopeSpans"]:
            for span in scope_spans["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return document


def test_a_protobuf_trace_decodes_from_its_spans_to_what_its_line_decodes_to():
    traces = protobuf_traces(rich_request().SerializeToString())
    assert [trace.trace_id for trace in traces] == [
        bytes.fromhex("5b8efff798038103d269b633813fc60c").hex(),
        TRACE_B.hex(),
        TRACE_C.hex(),
    ]
    for trace in traces:
        assert trace.unit is not None
        assert trace.unit == decode_unit(trace.line)
    assert [len(trace.unit.records) for trace in traces] == [5, 5, 2]


@pytest.mark.parametrize(
    ("spoil", "refused"),
    [
        # A span id of the wrong size: the line reads it as an opaque id (as any format).
        (lambda span: setattr(span, "span_id", b"\x01" * 7), False),
        (lambda span: setattr(span, "trace_id", b""), True),
        (lambda span: (span.ClearField("name"), span.attributes.pop(1)), True),  # no name
        (lambda span: span.attributes.append(key_value("nul", string_value="a\x00b")), True),
    ],
    ids=["short-span-id", "no-trace-id", "a-tool-without-a-name", "nul"],
)
def test_a_trace_that_does_not_read_plainly_is_decoded_from_its_line(spoil, refused):
    span = tool_span(2, "refund_service", '{"source": "refund-service"}')
    spoil(span)
    request = ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=[span])])]
    )
    (trace,) = protobuf_traces(request.SerializeToString())
    assert trace.unit is None
    if refused:
        with pytest.raises(RecordError):
            decode_unit(trace.line)
    else:
        assert decode_unit(trace.line).records


def stored() -> dict:
    """What is stored: each record's run and canonical JSON, the runs, the lines' verdicts."""
    records = sorted(
        (record.run.run_id, json.dumps(record.document, sort_keys=True))
        for record in TraceRecord.objects.select_related("run", "line")
    )
    runs = sorted(Run.objects.values_list("run_id", "agent"))
    lines = sorted(TraceLine.objects.values_list("accepted", "reason", "format"))
    return {"records": records, "runs": runs, "lines": lines}


def stored_then_undone(deliver) -> dict:
    """What `deliver` stores, undone after (the next delivery starts from nothing)."""

    class Undo(Exception):
        pass

    found: dict = {}
    with pytest.raises(Undo), transaction.atomic():
        deliver()
        found.update(stored())
        raise Undo
    assert not TraceRecord.objects.exists()
    return found


@pytest.mark.django_db
def test_the_same_spans_by_protobuf_json_and_a_file_store_the_same_records(client, token, tmp_path):
    request = rich_request()
    document = otlp_json(request)
    export = tmp_path / "export.json"
    export.write_text(json.dumps(document, indent=2))

    def protobuf():
        response = post(client, request.SerializeToString(), token)
        assert response.status_code == 200
        assert not ExportTraceServiceResponse.FromString(response.content).HasField(
            "partial_success"
        )

    def otlp_json_request():
        response = post(client, json.dumps(document).encode(), token, "application/json")
        assert (response.status_code, response.json()) == (200, {})

    def file():
        ingest_file(export, channel=IngestBatch.Channel.CLI)

    by_protobuf = stored_then_undone(protobuf)
    by_json = stored_then_undone(otlp_json_request)
    by_file = stored_then_undone(file)
    assert len(by_protobuf["records"]) == 12 and len(by_protobuf["runs"]) == 3
    assert by_protobuf["records"] == by_json["records"] == by_file["records"]
    assert by_protobuf["runs"] == by_json["runs"] == by_file["runs"]
    # The receiver keeps one line a trace, the file is one document: all accepted.
    assert by_protobuf["lines"] == by_json["lines"] == [(True, "", "otlp")] * 3
    assert by_file["lines"] == [(True, "", "otlp")]


@pytest.mark.django_db
def test_a_protobuf_export_sent_again_adds_nothing_and_the_line_is_kept(client, token):
    body = rich_request().SerializeToString()
    assert post(client, body, token).status_code == 200
    before = stored()
    raw = sorted(bytes(line.raw) for line in TraceLine.objects.all())
    assert post(client, body, token, PROTOBUF).status_code == 200
    assert stored() == before
    assert sorted(bytes(line.raw) for line in TraceLine.objects.all()) == raw
    assert sorted(trace.line for trace in protobuf_traces(body)) == raw  # kept as written
    batches = IngestBatch.objects.order_by("id")
    assert [(b.accepted, b.duplicates) for b in batches] == [(3, 0), (0, 3)]


def test_a_result_in_a_span_event_is_read_alike_from_protobuf_and_from_its_line():
    # GenAI exporters may put the result in an event: the direct path reads events too.
    span = tool_span(2, "refund_service", '{"source": "refund-service"}')
    while span.attributes[-1].key != "gen_ai.tool.call.arguments":
        span.attributes.pop()
    span.events.add(
        name="gen_ai.tool.message",
        time_unix_nano=span.end_time_unix_nano,
        attributes=[
            key_value(
                "gen_ai.tool.call.result",
                string_value='{"source": "refund-service", "status": "refunded"}',
            )
        ],
    )
    request = ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=[agent_span(), span])])]
    )
    (trace,) = protobuf_traces(request.SerializeToString())
    assert trace.unit is not None and trace.unit == decode_unit(trace.line)
    observation = [r for r in trace.unit.records if type(r).__name__ == "Observation"]
    assert [o.value_for("status") for o in observation] == ["refunded"]
