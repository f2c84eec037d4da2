"""The OTLP case of benchmarks/ingest.py: the receiver against native JSON Lines ingest of
the same tool calls.

    DATABASE_URL=postgres://... python benchmarks/ingest.py --case otlp --n 100000

Generates N spans as an agent framework exports them (traces of an invoke_agent span, two
chat spans and two execute_tool spans, 512 spans to an export request, as the SDK's batch
processor sends them; one trace in four holds a conflict), serialized with
opentelemetry-proto. Ours: every request POSTed to /v1/traces through Django's whole stack
(a test client, no socket), which keeps it, decodes it, writes its traces as lines and
ingests them while the exporter waits (stored, judged, ticketed), in a throwaway database.
The limit: the same tool calls, as the native JSON Lines records the receiver makes of them
(under run ids of their own), ingested as a file in the same process and database
(pipeline.ingest_file): a format should cost little more than our own. `ratio` is the
receiver's tool calls a second over native ingest's; goal 0.5. Also timed: decoding and
converting the same requests to records without the database (`convert_spans_per_s`),
how far the receiver could go with storage free, and opentelemetry-proto decoding alone.
"""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

SPANS_PER_REQUEST = 512
SPANS_PER_TRACE = 5
GOAL = 0.5


def _attributes(**values: str) -> list[KeyValue]:
    return [
        KeyValue(key=key.replace("__", "."), value=AnyValue(string_value=value))
        for key, value in values.items()
    ]


def _trace_spans(rng: random.Random, number: int) -> list[Span]:
    trace_id = rng.randbytes(16)
    root = rng.randbytes(8)
    start = 1796002200000000000 + number * 10**9
    order = f"order-{rng.randrange(10**6)}"
    conflict = number % 4 == 0
    messages = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "x" * 600}]}])

    def span(name: str, offset: int, **attributes: str) -> Span:
        return Span(
            trace_id=trace_id,
            span_id=rng.randbytes(8),
            parent_span_id=root,
            name=name,
            kind=Span.SPAN_KIND_INTERNAL,
            start_time_unix_nano=start + offset * 10**6,
            end_time_unix_nano=start + offset * 10**6 + 500_000,
            attributes=_attributes(**attributes),
        )

    spans = [
        span("chat gpt-4o", 1, gen_ai__operation__name="chat", gen_ai__input__messages=messages)
    ]
    for index, (source, status) in enumerate(
        (("refund-service", "refunded"), ("order-ledger", "chargeback" if conflict else "refunded"))
    ):
        result = {
            "source": source,
            "sourceRevision": 42,
            "revisionDomain": "payments",
            "entity": order,
            "data": {"status": status},
        }
        tool = source.replace("-", "_")
        spans.append(
            span(
                f"execute_tool {tool}",
                2 + index,
                gen_ai__operation__name="execute_tool",
                gen_ai__tool__name=tool,
                gen_ai__tool__call__id=f"call_{rng.randbytes(8).hex()}",
                gen_ai__tool__call__arguments=json.dumps({"orderId": order}),
                gen_ai__tool__call__result=json.dumps(result),
                gen_ai__agent__name="refund-agent",
            )
        )
    spans.append(
        span("chat gpt-4o", 4, gen_ai__operation__name="chat", gen_ai__input__messages=messages)
    )
    agent = span(
        "invoke_agent refund-agent",
        0,
        gen_ai__operation__name="invoke_agent",
        gen_ai__agent__name="refund-agent",
    )
    agent.span_id, agent.parent_span_id = root, b""
    spans.append(agent)
    return spans


def generate_requests(n: int, seed: int) -> list[bytes]:
    """About `n` spans as serialized export requests of SPANS_PER_REQUEST spans."""
    rng = random.Random(seed)
    spans: list[Span] = []
    for number in range(max(1, n // SPANS_PER_TRACE)):
        spans.extend(_trace_spans(rng, number))
    resource = Resource(attributes=_attributes(service__name="refund-bot"))
    return [
        ExportTraceServiceRequest(
            resource_spans=[
                ResourceSpans(
                    resource=resource,
                    scope_spans=[
                        ScopeSpans(
                            scope=InstrumentationScope(name="bench"),
                            spans=spans[start : start + SPANS_PER_REQUEST],
                        )
                    ],
                )
            ]
        ).SerializeToString()
        for start in range(0, len(spans), SPANS_PER_REQUEST)
    ]


def protobuf_alone(bodies: list[bytes]) -> float:
    """Seconds to decode every body with opentelemetry-proto (upb), keeping the messages."""
    started = time.perf_counter()
    kept = [ExportTraceServiceRequest.FromString(body) for body in bodies]
    seconds = time.perf_counter() - started
    assert sum(len(s.spans) for r in kept for rs in r.resource_spans for s in rs.scope_spans)
    return seconds


def convert_alone(bodies: list[bytes]) -> float:
    """Seconds to decode and convert every body into checked records, with no database."""
    from reviewapp.ingest.formats import decode_unit
    from reviewapp.ingest.otlp_messages import protobuf_traces

    started = time.perf_counter()
    for body in bodies:
        for trace in protobuf_traces(body):
            trace.unit or decode_unit(trace.line)
    return time.perf_counter() - started


def native_trace(bodies: list[bytes], path: Path) -> int:
    """Write the records the receiver makes of the bodies as native JSON Lines, under run ids
    of their own (not the receiver's runs); how many tool calls they hold."""
    from reviewapp.ingest.formats import decode_unit
    from reviewapp.ingest.otlp_messages import protobuf_traces

    calls = 0
    with path.open("wb") as out:
        for body in bodies:
            for trace in protobuf_traces(body):
                unit = trace.unit or decode_unit(trace.line)
                for document in unit.documents:
                    record = {**document, "runId": "native-" + document["runId"]}
                    calls += record["type"] == "tool_call"
                    out.write(json.dumps(record, separators=(",", ":")).encode() + b"\n")
    return calls


def native_ingest(path: Path) -> float:
    """Seconds to ingest the native trace as a file, here (stored, judged, ticketed)."""
    from reviewapp.ingest.pipeline import ingest_file
    from reviewapp.models import IngestBatch

    started = time.perf_counter()
    summary = ingest_file(path, channel=IngestBatch.Channel.CLI)
    seconds = time.perf_counter() - started
    assert summary.rejected == 0, summary
    return seconds


def setup(database_url: str, var_dir: str) -> None:
    """Django on the throwaway database, every request ingested while it waits."""
    os.environ.update(
        DATABASE_URL=database_url,
        DJANGO_SETTINGS_MODULE="reviewapp.settings",
        INGEST_INLINE_MAX_BYTES=str(1 << 30),
        ALLOWED_HOSTS="testserver",
        CROSSCHECK_VAR_DIR=var_dir,
    )
    import django

    django.setup()


def receiver(bodies: list[bytes]) -> tuple[float, dict]:
    """Seconds to POST every body to /v1/traces in a freshly migrated database, and what
    was stored."""
    from django.core.management import call_command
    from django.test import Client

    from reviewapp.accounts.roles import REVIEWER, ensure_roles
    from reviewapp.ingest.tokens import create_token
    from reviewapp.models import IngestBatch, Ticket, TraceRecord

    call_command("migrate", verbosity=0)
    ensure_roles()
    from django.contrib.auth.models import Group, User

    user = User.objects.create_user("bench", password="bench-password-1")
    user.groups.add(Group.objects.get(name=REVIEWER))
    token = create_token(user=user, name="bench")[1]
    client = Client()
    headers = {"Authorization": f"Bearer {token}"}
    started = time.perf_counter()
    for body in bodies:
        response = client.post(
            "/v1/traces", data=body, content_type="application/x-protobuf", headers=headers
        )
        assert response.status_code == 200, response.content
    seconds = time.perf_counter() - started
    stored = {
        "batches": IngestBatch.objects.filter(state="done").count(),
        "tool_observations": TraceRecord.objects.filter(type="tool_observation").count(),
        "tickets": Ticket.objects.count(),
    }
    return seconds, stored
