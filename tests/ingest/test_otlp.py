"""POST /v1/traces, the OTLP/HTTP receiver: protobuf (built with opentelemetry-proto's own
classes) and JSON, gzip, the OTLP status codes and partial-success answers."""

import gzip
import json

import pytest
from django.urls import reverse
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import (
    ResourceSpans,
    ScopeSpans,
    Span,
)
from opentelemetry.proto.trace.v1.trace_pb2 import (
    Status as SpanStatus,
)

from reviewapp.ingest.otlp_messages import json_traces, protobuf_traces
from reviewapp.ingest.pipeline import ingest_stored_batch
from reviewapp.ingest.tokens import create_token
from reviewapp.models import IngestBatch, Run, Ticket, TraceLine, TraceRecord
from tests.uploads import is_kept, kept_body

pytestmark = pytest.mark.django_db
TRACE = bytes.fromhex("5b8efff798038103d269b633813fc60c")
OTHER_TRACE = bytes.fromhex("0af7651916cd43dd8448eb211c80319c")
PROTOBUF = "application/x-protobuf"
MIB = 1024 * 1024


def payload(source: str, status: str) -> str:
    return json.dumps(
        {
            "source": source,
            "sourceRevision": 42,
            "revisionDomain": "payments",
            "entity": "order-204",
            "data": {"status": status},
        }
    )


def attributes(**values) -> list[KeyValue]:
    return [
        KeyValue(key=key.replace("__", "."), value=AnyValue(string_value=value))
        for key, value in values.items()
    ]


def tool_span(span_id: int, tool: str, result: str, trace: bytes = TRACE, **extra) -> Span:
    return Span(
        trace_id=trace,
        span_id=span_id.to_bytes(8, "big"),
        parent_span_id=(1).to_bytes(8, "big"),
        name=f"execute_tool {tool}",
        kind=Span.SPAN_KIND_INTERNAL,
        start_time_unix_nano=1796002151368000000 + span_id,
        end_time_unix_nano=1796002151369000000 + span_id,
        attributes=attributes(
            gen_ai__operation__name="execute_tool",
            gen_ai__tool__name=tool,
            gen_ai__tool__call__id=f"call_{tool}",
            gen_ai__tool__call__arguments='{"orderId": "order-204"}',
            gen_ai__tool__call__result=result,
            **extra,
        ),
    )


def agent_span(trace: bytes = TRACE) -> Span:
    return Span(
        trace_id=trace,
        span_id=(1).to_bytes(8, "big"),
        name="invoke_agent refund-agent",
        start_time_unix_nano=1796002151360000000,
        end_time_unix_nano=1796002151370000000,
        attributes=attributes(
            gen_ai__operation__name="invoke_agent",
            gen_ai__agent__name="refund-agent",
            gen_ai__conversation__id="conv-7",
        ),
        status=SpanStatus(code=SpanStatus.STATUS_CODE_OK),
    )


def conflict_spans(trace: bytes = TRACE) -> list[Span]:
    return [
        tool_span(2, "refund_service", payload("refund-service", "refunded"), trace),
        tool_span(3, "order_ledger", payload("order-ledger", "chargeback"), trace),
        agent_span(trace),
    ]


def request_of(spans: list[Span]) -> bytes:
    return ExportTraceServiceRequest(
        resource_spans=[
            ResourceSpans(
                resource=Resource(attributes=attributes(service__name="support-bot")),
                scope_spans=[ScopeSpans(scope=InstrumentationScope(name="test"), spans=spans)],
            )
        ]
    ).SerializeToString()


@pytest.fixture
def token(reviewer):
    return create_token(user=reviewer, name="exporter")[1]


def post(client, body: bytes, token: str | None, content_type: str = PROTOBUF, **headers):
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return client.post(
        reverse("otlp-traces"), data=body, content_type=content_type, headers=headers
    )


def test_a_protobuf_export_is_ingested_judged_and_ticketed(client, token):
    response = post(client, request_of(conflict_spans()), token)
    assert response.status_code == 200 and response["Content-Type"] == PROTOBUF
    answer = ExportTraceServiceResponse.FromString(response.content)
    assert not answer.HasField("partial_success")
    run = Run.objects.get()
    assert (run.run_id, run.agent) == (TRACE.hex(), "refund-agent")
    started = TraceRecord.objects.get(type="run_started").data
    assert started["conversationId"] == "conv-7"
    ticket = Ticket.objects.get()
    assert (ticket.kind, ticket.field) == ("conflict", "status")
    batch = IngestBatch.objects.get()
    assert (batch.channel, batch.state, batch.accepted, batch.ignored) == ("otlp", "done", 1, 1)
    line = TraceLine.objects.get()
    assert line.format == "otlp" and json.loads(bytes(line.raw))["resourceSpans"]


def test_an_exporter_retry_and_a_json_re_export_of_the_same_spans_are_duplicates(client, token):
    body = request_of(conflict_spans())
    assert post(client, body, token).status_code == 200
    assert (
        post(client, gzip.compress(body), token, **{"Content-Encoding": "gzip"}).status_code == 200
    )
    # The same spans as OTLP/JSON, pretty-printed: a re-export whatever its formatting.
    line = bytes(TraceLine.objects.get().raw)
    pretty = json.dumps(json.loads(line), indent=2).encode()
    response = post(client, pretty, token, content_type="application/json")
    assert (response.status_code, response.json()) == (200, {})
    assert TraceRecord.objects.filter(type="tool_observation").count() == 2
    assert TraceRecord.objects.filter(type="run_started").count() == 1
    assert Ticket.objects.count() == 1
    assert not Ticket.objects.filter(kind="finding").exists()  # no duplicate-id finding
    batches = IngestBatch.objects.order_by("id")
    assert [(b.accepted, b.duplicates) for b in batches] == [(1, 0), (0, 1), (0, 1)]


def test_one_span_more_in_a_later_export_adds_only_that_span(client, token):
    spans = conflict_spans()
    post(client, request_of(spans[:1]), token)
    post(client, request_of(spans), token)
    keys = TraceRecord.objects.filter(type="tool_observation").values_list("key", flat=True)
    assert sorted(keys) == [f"otel:{TRACE.hex()}:{n:016x}" for n in (2, 3)]
    assert Ticket.objects.filter(kind="conflict").count() == 1


def test_a_trace_with_an_unreadable_tool_span_is_a_partial_success(client, token):
    bad = tool_span(9, "get_stock", "{}", OTHER_TRACE)
    bad.start_time_unix_nano = 0
    bad.trace_id = b"\x00" * 16  # an all-zero id is no id
    response = post(client, request_of([*conflict_spans(), bad]), token)
    assert response.status_code == 200
    partial = ExportTraceServiceResponse.FromString(response.content).partial_success
    assert partial.rejected_spans == 1
    assert "traceId is all zeros" in partial.error_message
    assert Ticket.objects.filter(kind="conflict").count() == 1  # the good trace went in
    as_json = post(
        client,
        json.dumps(
            {
                "resourceSpans": [
                    {
                        "scopeSpans": [
                            {
                                "spans": [
                                    {
                                        "traceId": "no\tpe",  # text ids, not this
                                        "spanId": "00f067aa0ba902b7",
                                        "name": "execute_tool x",
                                    }
                                ]
                            }
                        ]
                    }
                ]
            }
        ).encode(),
        token,
        content_type="application/json",
    )
    body = as_json.json()["partialSuccess"]
    assert body["rejectedSpans"] == "1" and "not a 16-byte id" in body["errorMessage"]


def test_spans_without_tools_are_accepted_and_counted_as_ignored(client, token):
    response = post(client, request_of([agent_span()]), token)
    assert response.status_code == 200
    # Nothing rejected, but the answer says so in words (issue 27.3: never in silence).
    partial = ExportTraceServiceResponse.FromString(response.content).partial_success
    assert partial.rejected_spans == 0
    assert partial.error_message.startswith("1 span read, 0 tool calls: not one of them is")
    batch = IngestBatch.objects.get()
    assert (batch.accepted, batch.rejected, batch.ignored) == (1, 0, 1)
    # The agent span names an agent: the run exists, with its agent, before any tool call.
    assert Run.objects.get().agent == "refund-agent"
    no_spans = ExportTraceServiceRequest(resource_spans=[ResourceSpans()]).SerializeToString()
    assert post(client, no_spans, token).status_code == 200
    assert post(client, b"{}", token, content_type="application/json").json() == {}
    assert IngestBatch.objects.count() == 1  # nothing to keep: no batch


def status_of(response) -> Status:
    assert response["Content-Type"] == PROTOBUF
    return Status.FromString(response.content)


def test_refusals_carry_the_otlp_status_codes_and_a_status_message(client, token, viewer, settings):
    body = request_of(conflict_spans())
    assert status_of(post(client, body, None)).message == "a valid bearer token is required"
    assert post(client, body, "cc_wrong").status_code == 401
    viewer_token = create_token(user=viewer, name="v")[1]
    assert post(client, body, viewer_token).status_code == 403
    bad_gzip = post(client, b"\x1f\x8bnot gzip", token, **{"Content-Encoding": "gzip"})
    assert bad_gzip.status_code == 400
    assert "not valid gzip" in status_of(bad_gzip).message
    cut = post(client, gzip.compress(body)[:-12], token, **{"Content-Encoding": "gzip"})
    assert cut.status_code == 400 and "cut short" in status_of(cut).message
    garbage = post(client, b"\xff\xff\xff\xff", token)
    assert garbage.status_code == 400 and "ExportTraceServiceRequest" in status_of(garbage).message
    not_json = post(client, b"{nope", token, content_type="application/json")
    assert not_json.status_code == 400 and "not JSON" in not_json.json()["message"]
    wrong_type = post(client, body, token, content_type="text/plain")
    assert (
        wrong_type.status_code == 415 and "application/x-protobuf" in wrong_type.json()["message"]
    )
    brotli = post(client, body, token, **{"Content-Encoding": "br"})
    assert brotli.status_code == 415
    got = client.get(reverse("otlp-traces"))
    assert (got.status_code, got["Allow"]) == (405, "POST")
    # Past the OTLP limit inflated (64 MiB, as the specification recommends): 413, which
    # exporters do not retry.
    bomb = gzip.compress(b"\x00" * (64 * 1024 * 1024 + 1), compresslevel=1)
    inflated = post(client, bomb, token, **{"Content-Encoding": "gzip"})
    assert inflated.status_code == 413
    assert status_of(inflated) == Status(
        code=8,
        message="the body inflates past the 67,108,864-byte limit; export fewer "
        "spans in each request",
    )
    settings.INGEST_MAX_BYTES = 100
    too_large = post(client, body, token)
    assert too_large.status_code == 413 and "100-byte limit" in status_of(too_large).message
    assert not IngestBatch.objects.exists() and not Run.objects.exists()


def test_an_export_decoded_here_into_many_lines_is_stored_by_a_worker(
    client, token, django_capture_on_commit_callbacks
):
    spans = [span for n in range(1, 900) for span in conflict_spans(n.to_bytes(16, "big"))]
    body = request_of(spans)
    lines = sum(len(trace.line) + 1 for trace in protobuf_traces(body))
    assert len(body) <= MIB < lines  # decoded here (the defaults), too many lines to wait for
    with django_capture_on_commit_callbacks() as callbacks:
        response = post(client, body, token)
    assert response.status_code == 200 and len(callbacks) == 1
    batch = IngestBatch.objects.get()
    assert batch.state == "queued" and batch.file_name.endswith(".jsonl")
    assert not Run.objects.exists()


def chat_span(message_bytes: int, trace: bytes = TRACE) -> Span:
    return Span(
        trace_id=trace,
        span_id=(4).to_bytes(8, "big"),
        parent_span_id=(1).to_bytes(8, "big"),
        name="chat gpt-4o",
        attributes=attributes(
            gen_ai__operation__name="chat", gen_ai__input__messages="m" * message_bytes
        ),
    )


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("encoding", [PROTOBUF, "application/json"])
def test_an_export_past_what_is_decoded_here_is_kept_for_a_worker_that_stores_it_the_same(
    client, token, encoding, compressed, django_capture_on_commit_callbacks
):
    request = request_of([*conflict_spans(), chat_span(3 * MIB // 2)])
    if encoding == PROTOBUF:
        body, expected = request, protobuf_traces(request)
    else:  # the same spans as OTLP/JSON
        body = protobuf_traces(request)[0].line
        expected = json_traces(body)
    assert len(body) > MIB  # INGEST_INLINE_MAX_BYTES, its default
    posted = gzip.compress(body) if compressed else body
    headers = {"Content-Encoding": "gzip"} if compressed else {}
    with django_capture_on_commit_callbacks() as callbacks:
        response = post(client, posted, token, content_type=encoding, **headers)
    # Answered at once, as accepted; kept as it came, for a worker.
    assert response.status_code == 200 and len(callbacks) == 1
    assert response.content in (ExportTraceServiceResponse().SerializeToString(), b"{}")
    batch = IngestBatch.objects.get()
    assert batch.state == "queued" and not Run.objects.exists()
    assert kept_body(batch) == posted
    ingest_stored_batch(batch.pk)  # what the worker runs
    batch.refresh_from_db()
    assert (batch.state, batch.lines, batch.accepted, batch.ignored) == ("done", 1, 1, 2)
    stored = TraceLine.objects.filter(batch=batch).order_by("line_number")
    assert [bytes(line.raw) for line in stored] == [trace.line for trace in expected]
    assert Ticket.objects.filter(kind="conflict").count() == 1
    assert not is_kept(batch)


def test_a_kept_export_that_is_no_request_is_one_rejected_line_saying_why(client, token):
    assert post(client, b"\xff" * (2 * MIB), token).status_code == 200
    batch = IngestBatch.objects.get()
    ingest_stored_batch(batch.pk)
    (line,) = TraceLine.objects.filter(batch=batch)
    assert not line.accepted
    assert line.reason.startswith("the body is not an OTLP ExportTraceServiceRequest")
