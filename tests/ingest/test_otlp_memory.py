"""An OTLP gzip body in a real web process (issue 24, defect 4): gunicorn, as production runs
it, with the default limits. A request inflating to 511 MiB (a 520 KB body) once took a
worker from 97 to 1,112 MiB; now the process's peak stays within 64 MiB of its resting
size, whether the request is refused (past the OTLP limit) or kept for a worker."""

from __future__ import annotations

import gzip
import http.client
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from reviewapp.ingest.otlp_messages import MAX_REQUEST_BYTES, protobuf_traces
from reviewapp.ingest.pipeline import ingest_stored_batch
from reviewapp.ingest.tokens import create_token
from reviewapp.models import IngestBatch, Ticket, TraceLine
from tests.gzips import repeated_gzip
from tests.ingest.test_otlp import attributes, conflict_spans, payload, request_of
from tests.paths import ROOT
from tests.uploads import is_kept, kept_body, uploads_in
from tests.workers import stop_group, wait_for

MIB = 1 << 20
PEAK_ABOVE_REST = 64 * MIB
# RESOURCE_EXHAUSTED, the google.rpc.Code of a 413.
RESOURCE_EXHAUSTED = 8


def varint(number: int) -> bytes:
    out = bytearray()
    while True:
        byte, number = number & 0x7F, number >> 7
        if not number:
            return bytes(out + bytes([byte]))
        out.append(byte | 0x80)


def framed(field: int, head: bytes, size: int) -> tuple[bytes, int]:
    """A length-delimited protobuf field around a message of `size` bytes that begins with
    `head` (the rest streamed after it): the field's own head, and its size."""
    prefix = varint(field << 3 | 2) + varint(size)
    return prefix + head, len(prefix) + size


def request_with_one_long_attribute(length: int) -> tuple[bytes, int]:
    """An ExportTraceServiceRequest of one span whose one attribute is a string of `length`
    bytes (x), all but that string: the bytes before it, and the request's whole size."""
    head, size = framed(1, b"", length)  # AnyValue.string_value
    head, size = framed(2, head, size)  # KeyValue.value
    key = framed(1, b"gen_ai.input.messages", len(b"gen_ai.input.messages"))[0]
    head, size = key + head, len(key) + size
    span = Span(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name="chat").SerializeToString()
    head, size = framed(9, head, size)  # Span.attributes
    head, size = span + head, len(span) + size
    head, size = framed(2, head, size)  # ScopeSpans.spans
    head, size = framed(2, head, size)  # ResourceSpans.scope_spans
    return framed(1, head, size)  # ExportTraceServiceRequest.resource_spans


def test_the_long_attribute_request_is_a_request_protobuf_reads():
    head, size = request_with_one_long_attribute(1000)
    request = ExportTraceServiceRequest.FromString(head + b"x" * 1000)
    assert len(head) + 1000 == size == request.ByteSize()
    (value,) = request.resource_spans[0].scope_spans[0].spans[0].attributes
    assert value.value.string_value == "x" * 1000


def bomb(inflated: int) -> bytes:
    """A gzip of a valid request inflating to exactly `inflated` bytes (one attribute of
    x's): too large for its size alone, not for being no request."""
    head, _ = request_with_one_long_attribute(inflated - 16)  # heads take a few bytes more
    head, size = request_with_one_long_attribute(inflated - len(head))
    assert size == inflated
    blocks, rest = divmod(inflated - len(head), MIB)
    return repeated_gzip(b"x" * MIB, blocks, head=head, tail=b"x" * rest)


def large_request(traces: int, chat_bytes: int) -> bytes:
    """`traces` runs of an agent, each a conflict of two tools and a chat span with a long
    message (as agents export their prompts)."""
    spans = []
    for number in range(traces):
        trace = (number + 1).to_bytes(16, "big")

        def span(span_id: int, name: str, trace: bytes = trace, **values: str) -> Span:
            return Span(
                trace_id=trace,
                span_id=span_id.to_bytes(8, "big"),
                parent_span_id=b"" if span_id == 1 else (1).to_bytes(8, "big"),
                name=name,
                start_time_unix_nano=1796002151360000000 + span_id,
                end_time_unix_nano=1796002151370000000 + span_id,
                attributes=attributes(**values),
            )

        spans.append(
            span(
                1,
                "invoke_agent refund-agent",
                gen_ai__operation__name="invoke_agent",
                gen_ai__agent__name="refund-agent",
                gen_ai__conversation__id=f"conversation-{number}",
            )
        )
        for span_id, (tool, status) in enumerate(
            (("refund_service", "refunded"), ("order_ledger", "chargeback")), start=2
        ):
            spans.append(
                span(
                    span_id,
                    f"execute_tool {tool}",
                    gen_ai__operation__name="execute_tool",
                    gen_ai__tool__name=tool,
                    gen_ai__tool__call__id=f"call-{number}-{tool}",
                    gen_ai__tool__call__arguments='{"orderId": "order-204"}',
                    gen_ai__tool__call__result=payload(tool.replace("_", "-"), status),
                )
            )
        spans.append(
            span(
                4,
                "chat gpt-4o",
                gen_ai__operation__name="chat",
                gen_ai__input__messages="m" * chat_bytes,
            )
        )
    return ExportTraceServiceRequest(
        resource_spans=[
            ResourceSpans(
                resource=Resource(attributes=attributes(service__name="support-bot")),
                scope_spans=[ScopeSpans(scope=InstrumentationScope(name="t"), spans=spans)],
            )
        ]
    ).SerializeToString()


@dataclass
class Reply:
    status: int
    content_type: str
    body: bytes


@dataclass
class WebServer:
    popen: subprocess.Popen
    port: int
    log: Path

    def post(self, body: bytes, token: str, **headers: str) -> Reply:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        connection.request(
            "POST",
            "/v1/traces",
            body=body,
            headers={
                "Authorization": f"Bearer {token}",
                "Content-Type": "application/x-protobuf",
                **headers,
            },
        )
        response = connection.getresponse()
        return Reply(response.status, response.getheader("Content-Type", ""), response.read())

    @property
    def worker_pid(self) -> int:
        """The one gunicorn worker, the process that reads requests."""
        pids = [
            int(entry)
            for entry in os.listdir("/proc")
            if entry.isdigit() and _parent(int(entry)) == self.popen.pid
        ]
        assert len(pids) == 1, pids
        return pids[0]


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def memory(pid: int) -> dict[str, int]:
    """VmRSS (resident now) and VmHWM (the peak since it was last reset), in bytes."""
    found = {}
    for row in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = row.partition(":")
        if name in ("VmRSS", "VmHWM"):
            found[name] = int(value.split()[0]) * 1024
    return found


def reset_peak(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM back to VmRSS


@pytest.fixture
def web(transactional_db, tmp_path, settings) -> Iterator[WebServer]:
    """gunicorn with one worker on the test database, every limit at its default; what it
    keeps for a worker, this process finds (it ingests it as the worker would)."""
    uploads_in(settings, tmp_path / "uploads")
    database = connection.settings_dict["NAME"]  # the test database, made by now
    port = _free_port()
    environment = {
        **{name: value for name, value in os.environ.items() if not name.startswith("INGEST_")},
        "DATABASE_URL": f"{os.environ['DATABASE_URL'].rsplit('/', 1)[0]}/{database}",
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "CROSSCHECK_VAR_DIR": str(tmp_path / "var"),
        "UPLOAD_DIR": str(tmp_path / "uploads"),
        # The broker in the var folder: nothing sent here reaches another test's worker.
        "REDIS_URL": "",
        "CACHE_URL": "",
    }
    log = tmp_path / "web.log"
    with log.open("wb") as out:
        popen = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "reviewapp.wsgi", "-b", f"127.0.0.1:{port}"]
            + ["-w", "1", "--no-control-socket", "--timeout", "120"],
            cwd=ROOT,
            env=environment,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = WebServer(popen, port, log)
    try:
        wait_for(lambda: _answers(port) or popen.poll() is not None, 60, "gunicorn")
        assert popen.poll() is None, log.read_text()
        yield server
    finally:
        stop_group(popen)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _answers(port: int) -> bool:
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        connection.request("GET", "/v1/traces")
        return connection.getresponse().status == 405
    except OSError:
        return False


def test_a_body_inflating_to_511_mib_leaves_the_web_process_within_64_mib_of_rest(web, reviewer):
    assert settings.INGEST_MAX_BYTES == 512 * MIB  # the defaults, as production has them
    assert settings.INGEST_INLINE_MAX_BYTES == MIB
    token = create_token(user=reviewer, name="exporter")[1]
    # At rest: the worker has answered requests like exporters send (its code loaded).
    for number in range(3):
        small = request_of(conflict_spans((10**6 + number).to_bytes(16, "big")))
        reply = web.post(gzip.compress(small), token, **{"Content-Encoding": "gzip"})
        assert reply.status == 200, web.log.read_text()[-2000:]
    pid = web.worker_pid
    rest = memory(pid)["VmRSS"]
    batches = IngestBatch.objects.count()

    body = bomb(511 * MIB)
    assert len(body) < 600 * 1024
    reset_peak(pid)
    refused = web.post(body, token, **{"Content-Encoding": "gzip"})
    peak = memory(pid)["VmHWM"]
    assert peak - rest < PEAK_ABOVE_REST, f"peak {peak / MIB:.0f} MiB, at rest {rest / MIB:.0f}"
    # OTLP's answer to a request past the server's limit: 413 (exporters do not retry it)
    # with a google.rpc.Status in the request's encoding.
    assert (refused.status, refused.content_type) == (413, "application/x-protobuf")
    assert Status.FromString(refused.body) == Status(
        code=RESOURCE_EXHAUSTED,
        message=f"the body inflates past the {MAX_REQUEST_BYTES:,}-byte limit; export fewer "
        "spans in each request",
    )
    assert IngestBatch.objects.count() == batches  # nothing kept of it

    # Within the OTLP limit but past what is decoded here: kept as it came, for a worker.
    large = large_request(traces=500, chat_bytes=100_000)
    assert 40 * MIB < len(large) < MAX_REQUEST_BYTES
    posted = gzip.compress(large)
    reset_peak(pid)
    accepted = web.post(posted, token, **{"Content-Encoding": "gzip"})
    peak = memory(pid)["VmHWM"]
    assert accepted.status == 200, web.log.read_text()[-2000:]
    assert ExportTraceServiceResponse.FromString(accepted.body) == ExportTraceServiceResponse()
    assert peak - rest < PEAK_ABOVE_REST, f"peak {peak / MIB:.0f} MiB, at rest {rest / MIB:.0f}"
    batch = IngestBatch.objects.get(file_name__endswith=".pb.gz")
    assert batch.state == IngestBatch.State.QUEUED
    assert kept_body(batch) == posted

    # The worker stores it as the receiver would have while the exporter waited.
    ingest_stored_batch(batch.pk)
    batch.refresh_from_db()
    assert batch.state == IngestBatch.State.DONE and batch.accepted == 500
    stored = TraceLine.objects.filter(batch=batch).order_by("line_number")
    assert [bytes(line.raw) for line in stored] == [t.line for t in protobuf_traces(large)]
    assert Ticket.objects.filter(batch=batch).count() == 500
    assert not is_kept(batch)
