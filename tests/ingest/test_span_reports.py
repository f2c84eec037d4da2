"""Issue 27.3: a file whose spans hold no tool call, or whose spans could not be read, is
never "accepted" in silence. Every summary (the CLI's --json, the upload message, the batch
page, the API's batch and the OTLP answer, JSON and protobuf) says how many spans were read,
how many were tool calls, and what was dropped, grouped by reason with a count and a first
example."""

import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from reviewapp.ingest.otel import SpanReport, convert
from reviewapp.ingest.pipeline import ingest_file, ingest_stored_batch
from reviewapp.ingest.tokens import create_token
from reviewapp.models import IngestBatch
from tests.ingest.test_formats import otlp, otlp_span
from tests.ingest.test_otlp import PROTOBUF, TRACE, attributes, request_of
from tests.ingest.test_otlp import post as otlp_post

pytestmark = pytest.mark.django_db
NOT_HEX = "not\thex"  # control characters: no id, not even an opaque one
SHOWN = json.dumps(NOT_HEX)[1:-1]  # as a message quotes it


def chat_only():
    chat = otlp_span(name="chat gpt-4o", gen_ai__operation__name="chat")
    return otlp(chat, {**chat, "spanId": "1" * 16, "name": "chat again"})


def with_an_unreadable_span():
    """A tool call, a chat span and a span whose trace id does not read."""
    tool = otlp_span(gen_ai__tool__call__result='{"data": {"qty": 7}}', gen_ai__tool__name="s")
    chat = otlp_span(span_id="2" * 16, name="chat gpt-4o", gen_ai__operation__name="chat")
    odd = {**otlp_span(span_id="3" * 16, name="odd one"), "traceId": NOT_HEX}
    odd["attributes"] = []
    return otlp(tool, chat, odd)


def write(tmp_path, name, document):
    path = tmp_path / name
    path.write_text(json.dumps(document) + "\n")
    return path


def test_a_conversion_reports_spans_tool_calls_and_each_reason_with_a_first_example():
    report = convert(with_an_unreadable_span()).report
    assert (report.spans, report.tool_calls, report.dropped_count, report.unread) == (3, 1, 2, 1)
    reasons = {one["reason"]: one for one in report.as_json()["reasons"]}
    assert reasons["not a tool call"]["count"] == 1
    assert "chat gpt-4o" in reasons["not a tool call"]["firstExample"]
    unreadable = [reason for reason in reasons if reason.startswith("could not be read: ")]
    assert len(unreadable) == 1 and "traceId" in unreadable[0] and SHOWN not in unreadable[0]
    assert SHOWN in reasons[unreadable[0]]["firstExample"]  # the example keeps the value
    assert report.is_warning


def test_alike_unreadable_spans_share_one_reason_with_the_first_as_example():
    document = with_an_unreadable_span()
    spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans.append({**spans[-1], "traceId": "another\tbad one", "spanId": "4" * 16})
    report = convert(document).report
    unreadable = {k: v for k, v in report.dropped.items() if k.startswith("could not be read")}
    assert list(unreadable.values()) == [[2, unreadable[next(iter(unreadable))][1]]]
    assert SHOWN in next(iter(unreadable.values()))[1]


def test_a_document_with_spans_and_no_tool_call_says_so_in_words():
    report = convert(chat_only()).report
    assert (report.spans, report.tool_calls) == (2, 0)
    assert report.message().startswith("2 spans read, 0 tool calls: not one of them is a tool call")
    assert report.is_warning
    assert SpanReport.of_json(report.as_json()).as_json() == report.as_json()


def test_the_cli_json_summary_says_what_the_spans_came_to(tmp_path):
    out = io.StringIO()
    call_command("ingest", str(write(tmp_path, "chat.json", chat_only())), json=True, stdout=out)
    shown = json.loads(out.getvalue())
    assert shown["accepted"] == 1
    spans = shown["spans"]
    assert (spans["spans"], spans["toolCalls"], spans["dropped"], spans["warning"]) == (
        2,
        0,
        2,
        True,
    )
    assert spans["reasons"] == [
        {
            "reason": "not a tool call",
            "count": 2,
            "firstExample": 'resourceSpans[0].scopeSpans[0].spans[0] ("chat gpt-4o")',
        }
    ]
    assert "not one of them is a tool call" in spans["message"]


def test_the_cli_text_summary_warns_of_unreadable_spans(tmp_path):
    out = io.StringIO()
    call_command("ingest", str(write(tmp_path, "odd.json", with_an_unreadable_span())), stdout=out)
    text = out.getvalue()
    assert "warning: 3 spans read, 1 tool call; 2 dropped:" in text
    assert "1 could not be read: traceId" in text


def test_a_native_file_has_no_span_report(tmp_path):
    line = {"runId": "r1", "type": "tool_observation", "observationId": "o", "source": "a"}
    out = io.StringIO()
    call_command("ingest", str(write(tmp_path, "n.jsonl", line)), json=True, stdout=out)
    assert "spans" not in json.loads(out.getvalue())
    assert IngestBatch.objects.get().span_report == {}


def test_the_batch_page_shows_a_file_without_tool_calls_as_a_warning(client, reviewer, tmp_path):
    client.force_login(reviewer)
    response = client.post(
        reverse("batch-list"),
        {"files": [SimpleUploadedFile("chat.json", json.dumps(chat_only()).encode())]},
        follow=True,
    )
    body = response.content.decode()
    assert "chat.json: 2 spans read, 0 tool calls: not one of them is a tool call" in body
    batch = IngestBatch.objects.get()
    page = client.get(reverse("batch-detail", args=[batch.public_id])).content.decode()
    assert 'id="span-report" class="span-report warning"' in page
    assert "not one of them is a tool call" in page
    assert "2 not a tool call" in page and "(&quot;chat gpt-4o&quot;)" in page


def test_the_batch_page_lists_unreadable_spans_by_reason(client, reviewer, tmp_path):
    client.force_login(reviewer)
    summary = ingest_file(write(tmp_path, "odd.json", with_an_unreadable_span()), channel="cli")
    assert summary.span_report.unread == 1
    batch = IngestBatch.objects.get()
    page = client.get(reverse("batch-detail", args=[batch.public_id])).content.decode()
    assert 'class="span-report warning"' in page and "1 could not be read: traceId" in page


def test_the_api_batch_answer_says_what_the_spans_came_to(client, reviewer):
    token = create_token(user=reviewer, name="ci")[1]
    response = client.post(
        reverse("api-traces"),
        data=json.dumps(with_an_unreadable_span()).encode(),
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 202
    ingest_stored_batch(IngestBatch.objects.get().pk)
    status = client.get(response.json()["url"], headers={"Authorization": f"Bearer {token}"}).json()
    spans = status["spans"]
    assert (spans["spans"], spans["toolCalls"], spans["dropped"], spans["warning"]) == (
        3,
        1,
        2,
        True,
    )
    assert {one["reason"].split(":")[0] for one in spans["reasons"]} == {
        "not a tool call",
        "could not be read",
    }


def chat_request():
    from opentelemetry.proto.trace.v1.trace_pb2 import Span

    return request_of(
        [
            Span(
                trace_id=TRACE,
                span_id=(9).to_bytes(8, "big"),
                name="chat gpt-4o",
                start_time_unix_nano=1796002151360000000,
                end_time_unix_nano=1796002151370000000,
                attributes=attributes(gen_ai__operation__name="chat"),
            )
        ]
    )


def test_an_otlp_protobuf_request_without_tool_calls_is_answered_with_a_warning(client, reviewer):
    token = create_token(user=reviewer, name="exporter")[1]
    response = post_protobuf(client, chat_request(), token)
    answer = ExportTraceServiceResponse.FromString(response.content)
    assert answer.HasField("partial_success")
    assert answer.partial_success.rejected_spans == 0
    assert "1 span read, 0 tool calls: not one of them is a tool call" in (
        answer.partial_success.error_message
    )


def test_an_otlp_json_request_with_an_unreadable_span_counts_it_rejected(client, reviewer):
    token = create_token(user=reviewer, name="exporter")[1]
    response = otlp_post(
        client, json.dumps(with_an_unreadable_span()).encode(), token, "application/json"
    )
    assert response.status_code == 200
    partial = response.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "1"
    assert "3 spans read, 1 tool call; 2 dropped:" in partial["errorMessage"]
    assert "could not be read: traceId" in partial["errorMessage"]


def post_protobuf(client, body, token):
    return otlp_post(client, body, token, PROTOBUF)
