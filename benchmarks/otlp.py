"""The OTLP receiver against native JSON Lines ingest of the same tool calls.

    DATABASE_URL=postgres://... python benchmarks/otlp.py --n 100000
    (also: python benchmarks/ingest.py --case otlp --n 100000)

Generates N spans as an agent framework exports them (traces of an invoke_agent span, two
chat spans and two execute_tool spans, 512 spans to an export request, as the SDK's batch
processor sends them; one trace in four holds a conflict), serialized with
opentelemetry-proto. Ours: every request POSTed to /v1/traces through Django's whole stack
(a test client, no socket), which keeps it, decodes it, converts its spans to records and
ingests them while the exporter waits (stored, judged, ticketed), in a throwaway database.

The limit: the same tool calls, as the native JSON Lines records the receiver makes of them
(under run ids of their own), ingested in the same process and database in the same
deliveries: one batch for each export request's records (pipeline.ingest_file), stored and
judged before the next, as the receiver must. A format should cost little more than our
own: `ratio` is the receiver's tool calls a second over that; goal 0.5.

Also reported: the same records ingested as one file (`ratio_one_file`: what delivering
them in 40 pieces costs on top of the format, whatever the format), decoding and
converting the requests to records with no database (`convert_spans_per_s`), and
opentelemetry-proto decoding alone. The native deliveries run first, on the emptier
database, so the order never favours the receiver.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import psycopg
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

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


def native_traces(bodies: list[bytes], folder: Path, prefix: str) -> tuple[list[Path], int]:
    """Write the records the receiver makes of each body as a native JSON Lines file, under
    run ids of their own (`prefix`, not the receiver's runs); the files, and how many tool
    calls they hold."""
    from reviewapp.ingest.formats import decode_unit
    from reviewapp.ingest.otlp_messages import protobuf_traces

    calls, paths = 0, []
    for number, body in enumerate(bodies):
        path = folder / f"{prefix}{number}.jsonl"
        with path.open("wb") as out:
            for trace in protobuf_traces(body):
                unit = trace.unit or decode_unit(trace.line)
                for document in unit.documents:
                    record = {**document, "runId": prefix + document["runId"]}
                    calls += record["type"] == "tool_call"
                    out.write(json.dumps(record, separators=(",", ":")).encode() + b"\n")
        paths.append(path)
    return paths, calls


def native_ingest(paths: list[Path]) -> float:
    """Seconds to ingest the native files one after the other, here, each a batch of its
    own (stored, judged, ticketed)."""
    from reviewapp.ingest.pipeline import ingest_file
    from reviewapp.models import IngestBatch

    started = time.perf_counter()
    for path in paths:
        summary = ingest_file(path, channel=IngestBatch.Channel.CLI)
        assert summary.rejected == 0, summary
    return time.perf_counter() - started


def one_file(paths: list[Path], path: Path) -> Path:
    with path.open("wb") as out:
        for part in paths:
            out.write(part.read_bytes())
    return path


def otlp_case(url: str, n: int, seed: int) -> None:
    from benchmarks.databases import admin_url

    bodies = generate_requests(n, seed)
    spans = sum(
        len(s.spans)
        for body in bodies
        for rs in ExportTraceServiceRequest.FromString(body).resource_spans
        for s in rs.scope_spans
    )
    size = sum(map(len, bodies))
    bench_db = f"crosscheck_bench_{os.getpid()}"
    with psycopg.connect(admin_url(url, "postgres"), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{bench_db}"')
    try:
        with tempfile.TemporaryDirectory() as tmp:
            setup(admin_url(url, bench_db), tmp)
            migrate()
            limit_seconds = min(protobuf_alone(bodies) for _ in range(3))
            convert_seconds = convert_alone(bodies)
            pieces, calls = native_traces(bodies, Path(tmp), "native-")
            whole, _ = native_traces(bodies, Path(tmp), "whole-")
            native_seconds = native_ingest(pieces)
            ours_seconds, stored = receiver(bodies)
            whole_seconds = native_ingest([one_file(whole, Path(tmp) / "whole.jsonl")])
            from django.db import connections

            connections.close_all()
    finally:
        with psycopg.connect(admin_url(url, "postgres"), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{bench_db}" WITH (FORCE)')
    ours, native_rate = calls / ours_seconds, calls / native_seconds
    whole_rate = calls / whole_seconds
    protobuf, converted = spans / limit_seconds, spans / convert_seconds
    print(
        f"{spans:,} spans, {calls:,} tool calls in {len(bodies):,} export requests "
        f"({size / 2**20:,.1f} MiB): {stored}"
    )
    print(
        f"POST /v1/traces:    {ours:10,.0f} tool calls/s  ({ours_seconds:.2f} s, stored and judged)"
    )
    print(
        f"native JSON Lines:  {native_rate:10,.0f} tool calls/s  ({native_seconds:.2f} s, the limit: "
        f"{len(bodies)} batches)"
    )
    print(f"  ... as one file:  {whole_rate:10,.0f} tool calls/s  ({whole_seconds:.2f} s)")
    print(f"decode + convert:   {converted:10,.0f} spans/s  ({convert_seconds:.2f} s, no database)")
    print(f"protobuf alone:     {protobuf:10,.0f} spans/s  ({limit_seconds:.3f} s)")
    print(
        json.dumps(
            {
                "benchmark": "ingest-otlp",
                "n": spans,
                "tool_calls": calls,
                "requests": len(bodies),
                "bytes": size,
                "receiver_calls_per_s": round(ours),
                "native_calls_per_s": round(native_rate),
                "receiver_spans_per_s": round(spans / ours_seconds),
                "convert_spans_per_s": round(converted),
                "protobuf_spans_per_s": round(protobuf),
                "convert_ratio": round(converted / protobuf, 4),
                "protobuf_ratio": round(spans / ours_seconds / protobuf, 4),
                "receiver_seconds": round(ours_seconds, 2),
                "native_seconds": round(native_seconds, 2),
                "native_one_file_calls_per_s": round(whole_rate),
                "ratio_one_file": round(ours / whole_rate, 4),
                "stored": stored,
                "ratio": round(ours / native_rate, 4),
                "goal": GOAL,
                "met": ours / native_rate >= GOAL,
            }
        )
    )


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


def migrate() -> None:
    from django.core.management import call_command

    from reviewapp.accounts.roles import ensure_roles

    call_command("migrate", verbosity=0)
    ensure_roles()


def receiver(bodies: list[bytes]) -> tuple[float, dict]:
    """Seconds to POST every body to /v1/traces, and what was stored."""
    from django.contrib.auth.models import Group, User
    from django.test import Client

    from reviewapp.accounts.roles import REVIEWER
    from reviewapp.ingest.tokens import create_token
    from reviewapp.models import IngestBatch, Ticket, TraceRecord

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
    mine = {"channel": IngestBatch.Channel.OTLP}
    stored = {
        "batches": IngestBatch.objects.filter(state="done", **mine).count(),
        "tool_observations": TraceRecord.objects.filter(
            type="tool_observation", line__batch__channel=mine["channel"]
        ).count(),
        "tickets": Ticket.objects.filter(batch__channel=mine["channel"]).count(),
    }
    return seconds, stored


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="spans in the generated export")
    parser.add_argument("--seed", type=int, default=20260804)
    args = parser.parse_args()
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        sys.exit("benchmarks/otlp.py needs DATABASE_URL pointing at a PostgreSQL server")
    otlp_case(url, args.n, args.seed)


if __name__ == "__main__":
    main()
