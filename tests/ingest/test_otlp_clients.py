"""Real clients against a running server: the OpenTelemetry Python SDK's OTLP/HTTP protobuf
exporter, configured the way a framework is (environment variables), and a real agent
framework, pydantic-ai with its offline test model and two tools that disagree, exporting
its own spans. Their conflict becomes a ticket."""

import json

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from pydantic_ai import Agent
from pydantic_ai.models.instrumented import InstrumentationSettings
from pydantic_ai.models.test import TestModel

from reviewapp.ingest.tokens import create_token
from reviewapp.models import IngestBatch, Run, Ticket, TraceRecord

pytestmark = pytest.mark.django_db(transaction=True)


def result(source: str, status: str) -> dict:
    return {
        "source": source,
        "sourceRevision": 42,
        "revisionDomain": "payments",
        "entity": "order-204",
        "data": {"status": status},
    }


@pytest.fixture
def exporter_env(live_server, reviewer, monkeypatch):
    """What a framework's deployment sets: the traces endpoint and the bearer token header
    (a URL-encoded `key=value` list, as the OpenTelemetry specification says)."""
    token = create_token(user=reviewer, name="agent")[1]
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"{live_server.url}/v1/traces")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", f"Authorization=Bearer%20{token}")
    return token


def test_the_sdk_exporter_sends_spans_one_by_one_and_a_ticket_appears(exporter_env):
    exporter = OTLPSpanExporter()  # endpoint and headers from the environment
    provider = TracerProvider(resource=Resource.create({"service.name": "refund-bot"}))
    # One export request per span, as each ends: the tool spans arrive before their agent.
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("crosscheck-test")
    with tracer.start_as_current_span(
        "invoke_agent refund-agent",
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "refund-agent"},
    ) as root:
        for tool, source, status in (
            ("refund_service", "refund-service", "refunded"),
            ("order_ledger", "order-ledger", "chargeback"),
        ):
            with tracer.start_as_current_span(
                f"execute_tool {tool}",
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": tool,
                    "gen_ai.tool.call.id": f"call_{tool}",
                    "gen_ai.tool.call.arguments": json.dumps({"orderId": "order-204"}),
                    "gen_ai.tool.call.result": json.dumps(result(source, status)),
                },
            ):
                pass
    provider.shutdown()
    trace_id = f"{root.get_span_context().trace_id:032x}"
    run = Run.objects.get(run_id=trace_id)
    # The tool spans came first, without their agent span: the agent span, exported last,
    # names the run's agent (service.name would have been a guess).
    assert run.agent == "refund-agent"
    ticket = Ticket.objects.get(run=run)
    assert (ticket.kind, ticket.field) == ("conflict", "status")
    assert IngestBatch.objects.filter(channel="otlp", state="done").count() == 3


def test_a_pydantic_ai_agent_exports_its_run_and_its_conflict_becomes_a_ticket(exporter_env):
    provider = TracerProvider(resource=Resource.create({"service.name": "support"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    agent = Agent(TestModel(), name="refund-agent")
    agent.instrument = InstrumentationSettings(tracer_provider=provider, include_content=True)

    @agent.tool_plain
    def refund_service(order_id: str) -> dict:
        """The refund service's view of an order."""
        return result("refund-service", "refunded")

    @agent.tool_plain
    def order_ledger(order_id: str) -> dict:
        """The order ledger's view of an order."""
        return result("order-ledger", "chargeback")

    agent.run_sync("What is the status of order-204?")
    assert provider.force_flush()
    provider.shutdown()

    run = Run.objects.get()
    assert run.agent == "refund-agent"  # gen_ai.agent.name on pydantic-ai's spans
    calls = TraceRecord.objects.filter(run=run, type="tool_call").order_by("id")
    assert sorted(call.data["tool"] for call in calls) == ["order_ledger", "refund_service"]
    assert all(call.data["toolCallId"].startswith("pyd_ai_tool_call_id") for call in calls)
    observations = TraceRecord.objects.filter(run=run, type="tool_observation")
    assert {o.data["source"] for o in observations} == {"refund-service", "order-ledger"}
    assert {o.data["value"]["status"] for o in observations} == {"refunded", "chargeback"}
    started = TraceRecord.objects.get(run=run, type="run_started").data
    assert started["conversationId"]  # gen_ai.conversation.id
    ticket = Ticket.objects.get(run=run, kind="conflict")
    assert ticket.field == "status"
    assert IngestBatch.objects.filter(channel="otlp").exclude(ignored=0).exists()  # chat spans
