"""The OTLP/HTTP traces receiver's work: a request body (protobuf or JSON, maybe gzip) is
kept, decoded, regrouped into one OTLP/JSON line per trace and ingested as a batch like any
other delivery; the answer says, in the request's own encoding, how many spans were
rejected and why (OTLP's partial success).

A small request (what exporters send: a few hundred spans) is ingested while the exporter
waits, so that its partial success is true; a large one goes to a worker and is answered
at once, as accepted."""

from __future__ import annotations

import hashlib
import json
import uuid
import zlib
from dataclasses import dataclass

from django.conf import settings
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from reviewapp.ingest.batches import create_batch, send_to_worker
from reviewapp.ingest.files import GZIP_MAGIC
from reviewapp.ingest.otlp_messages import BadRequest, json_traces, protobuf_traces
from reviewapp.ingest.pipeline import ingest_batch
from reviewapp.ingest.streams import Readable, TooLarge, keep_stream, upload_dir
from reviewapp.models import ApiToken, IngestBatch, TraceLine

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
CONTENT_TYPES = {PROTOBUF: PROTOBUF, "application/protobuf": PROTOBUF, JSON: JSON}
# How many rejected traces the answer names (the batch page has them all).
NAMED_REASONS = 3
# google.rpc.Code values for the Status of a refused request.
INVALID_ARGUMENT, UNAUTHENTICATED, PERMISSION_DENIED, RESOURCE_EXHAUSTED = 3, 16, 7, 8


@dataclass(frozen=True)
class Answer:
    status: int
    content_type: str
    body: bytes


def encoding_of(content_type: str) -> str | None:
    """The OTLP encoding a Content-Type names, or None."""
    return CONTENT_TYPES.get(content_type.split(";", 1)[0].strip().lower())


def refusal(status: int, message: str, encoding: str | None) -> Answer:
    """A refused request, with a google.rpc.Status body in the request's encoding."""
    code = {401: UNAUTHENTICATED, 403: PERMISSION_DENIED, 413: RESOURCE_EXHAUSTED}.get(
        status, INVALID_ARGUMENT
    )
    if encoding == PROTOBUF:
        return Answer(status, PROTOBUF, Status(code=code, message=message).SerializeToString())
    return Answer(status, JSON, json.dumps({"code": code, "message": message}).encode())


def _success(encoding: str, rejected: int, message: str) -> Answer:
    if encoding == PROTOBUF:
        response = ExportTraceServiceResponse()
        if rejected or message:
            response.partial_success.rejected_spans = rejected
            response.partial_success.error_message = message
        return Answer(200, PROTOBUF, response.SerializeToString())
    body = {}
    if rejected or message:
        body = {"partialSuccess": {"rejectedSpans": str(rejected), "errorMessage": message}}
    return Answer(200, JSON, json.dumps(body).encode())


def _inflate(data: bytes, limit: int) -> bytes:
    try:
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        body = inflater.decompress(data, limit + 1)
        if len(body) > limit or inflater.unconsumed_tail:
            raise BadRequest(f"the body inflates past the {limit:,}-byte limit")
        if not inflater.eof:
            raise BadRequest("the body is not valid gzip (Content-Encoding: gzip): it is cut short")
    except zlib.error as exc:
        raise BadRequest(f"the body is not valid gzip (Content-Encoding: gzip): {exc}") from None
    return body


def otlp_receive(
    body: Readable,
    *,
    token: ApiToken,
    content_type: str,
    content_encoding: str,
    declared_length: str,
) -> Answer:
    """Take one OTLP/HTTP export request and answer it (never raises for bad input)."""
    encoding = encoding_of(content_type)
    if encoding is None:
        return refusal(
            415,
            f"Content-Type {content_type or '(none)'} is not an OTLP encoding: send "
            f"{PROTOBUF} or {JSON}",
            JSON,
        )
    limit = settings.INGEST_MAX_BYTES
    too_large = refusal(413, f"the body is over the {limit:,}-byte limit", encoding)
    if declared_length.isascii() and declared_length.isdecimal() and int(declared_length) > limit:
        return too_large
    compression = content_encoding.strip().lower()
    if compression not in ("", "identity", "gzip"):
        return refusal(415, f"Content-Encoding {compression} is not supported: use gzip", encoding)
    try:
        kept = keep_stream(body, limit=limit)
    except TooLarge:
        return too_large
    try:
        data = kept.path.read_bytes()
        if compression == "gzip" or data.startswith(GZIP_MAGIC):
            data = _inflate(data, limit)
        traces = protobuf_traces(data) if encoding == PROTOBUF else json_traces(data)
    except BadRequest as exc:
        return refusal(400, str(exc), encoding)
    finally:
        kept.path.unlink(missing_ok=True)
    if not traces:
        return _success(encoding, 0, "")
    return _ingest(traces, token=token, encoding=encoding)


def _ingest(traces, *, token: ApiToken, encoding: str) -> Answer:
    content = b"".join(trace.line + b"\n" for trace in traces)
    path = upload_dir() / uuid.uuid4().hex
    path.write_bytes(content)
    sha256 = hashlib.sha256(content).hexdigest()
    batch = create_batch(
        channel=IngestBatch.Channel.OTLP,
        path=path,
        file_name=f"otlp-{sha256[:12]}.jsonl",
        digest=(sha256, len(content)),
        user=token.user,
        token=token,
    )
    if len(content) > settings.INGEST_INLINE_MAX_BYTES:
        send_to_worker(batch)
        return _success(encoding, 0, "")
    ingest_batch(batch)
    rejected = list(
        TraceLine.objects.filter(batch=batch, accepted=False)
        .order_by("line_number")
        .values_list("line_number", "reason")
    )
    if not rejected:
        return _success(encoding, 0, "")
    spans = sum(traces[number - 1].spans for number, _ in rejected)
    named = [f"trace {traces[n - 1].trace_id}: {reason}" for n, reason in rejected[:NAMED_REASONS]]
    if len(rejected) > NAMED_REASONS:
        named.append(
            f"and {len(rejected) - NAMED_REASONS} more traces (see batch {batch.public_id})"
        )
    return _success(encoding, spans, "; ".join(named))
