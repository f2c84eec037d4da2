"""The OTLP/HTTP traces receiver's work: a request body (protobuf or JSON, maybe gzip) is
kept, decoded, regrouped into one OTLP/JSON line per trace and ingested as a batch like any
other delivery; the answer says, in the request's own encoding, how many spans were
rejected and why (OTLP's partial success).

A small request (what exporters send: a few hundred spans) is decoded and ingested while
the exporter waits, so that its partial success is true. The web process never holds more
of a body than INGEST_INLINE_MAX_BYTES inflated: a gzip is inflated as a stream, and a
request that inflates past that is kept as it came for a worker, in the uploads storage
(ingest.kept; the worker decodes and stores it as it would have been here), and answered at
once, as accepted. Past the OTLP limit
(otlp_messages.request_limit, as it arrives or inflated) it is refused with 413."""

from __future__ import annotations

import hashlib
import json
import zlib
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from reviewapp.ingest.batches import create_batch, send_to_worker
from reviewapp.ingest.files import GZIP_MAGIC, DecompressedTooLarge, open_stream
from reviewapp.ingest.kept import kept_bytes_store, kept_delete, kept_store
from reviewapp.ingest.otlp_messages import (
    JSON,
    KEPT_SUFFIXES,
    PROTOBUF,
    BadRequest,
    json_traces,
    protobuf_traces,
    request_limit,
)
from reviewapp.ingest.pipeline import ingest_batch
from reviewapp.ingest.streams import Kept, Readable, TooLarge, keep_stream
from reviewapp.models import ApiToken, IngestBatch, TraceLine

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


class InflatesTooLarge(Exception):
    """A gzip body that inflates past the limit of a request."""


def _inflated_if_small(path: Path, *, gzipped: bool, keep: int, limit: int) -> bytes | None:
    """The body, inflated, when that is at most `keep` bytes. Else None, once the rest is
    inflated as a stream and let go, to make sure that it stays within `limit`
    (InflatesTooLarge past it): no more than `keep` bytes of it are held at once."""
    if not gzipped:
        return path.read_bytes() if path.stat().st_size <= keep else None
    with path.open("rb") as stream:
        reader = open_stream(stream, limit)
        try:
            body = reader.read(min(keep, limit) + 1)
            if len(body) <= keep:
                return body
            del body
            while reader.read(256 * 1024):
                pass
        except DecompressedTooLarge:
            raise InflatesTooLarge from None
        except EOFError:
            raise BadRequest(
                "the body is not valid gzip (Content-Encoding: gzip): it is cut short"
            ) from None
        except (OSError, zlib.error) as exc:
            raise BadRequest(
                f"the body is not valid gzip (Content-Encoding: gzip): {exc}"
            ) from None
    return None


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
    limit = request_limit()
    advice = "export fewer spans in each request"
    too_large = refusal(413, f"the body is over the {limit:,}-byte limit; {advice}", encoding)
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
        with kept.path.open("rb") as stream:
            gzipped = stream.read(2) == GZIP_MAGIC
        if compression == "gzip" and not gzipped:
            raise BadRequest("the body is not valid gzip (Content-Encoding: gzip)")
        data = _inflated_if_small(
            kept.path, gzipped=gzipped, keep=settings.INGEST_INLINE_MAX_BYTES, limit=limit
        )
        if data is None:
            return _to_worker(kept, encoding=encoding, gzipped=gzipped, token=token)
        traces = protobuf_traces(data) if encoding == PROTOBUF else json_traces(data)
    except InflatesTooLarge:
        return refusal(413, f"the body inflates past the {limit:,}-byte limit; {advice}", encoding)
    except BadRequest as exc:
        return refusal(400, str(exc), encoding)
    finally:
        kept.path.unlink(missing_ok=True)  # gone already when the uploads storage took it
    if not traces:
        return _success(encoding, 0, "")
    return _ingest(traces, token=token, encoding=encoding)


def _to_worker(kept: Kept, *, encoding: str, gzipped: bool, token: ApiToken) -> Answer:
    """A request too large to decode here, kept as it came for a worker, which decodes it
    into the lines it would have been given here (otlp_messages.kept_request_lines)."""
    stored = kept_store(kept, suffix=KEPT_SUFFIXES[encoding])
    extension = (".pb" if encoding == PROTOBUF else ".json") + (".gz" if gzipped else "")
    try:
        batch = create_batch(
            channel=IngestBatch.Channel.OTLP,
            path=stored,
            file_name=f"otlp-{kept.sha256[:12]}{extension}",
            digest=(kept.sha256, kept.size),
            user=token.user,
            token=token,
        )
    except BaseException:
        kept_delete(stored)
        raise
    send_to_worker(batch)
    return _success(encoding, 0, "")


def _ingest(traces, *, token: ApiToken, encoding: str) -> Answer:
    content = b"".join(trace.line + b"\n" for trace in traces)
    stored = kept_bytes_store(content)
    sha256 = hashlib.sha256(content).hexdigest()
    try:
        batch = create_batch(
            channel=IngestBatch.Channel.OTLP,
            path=stored,
            file_name=f"otlp-{sha256[:12]}.jsonl",
            digest=(sha256, len(content)),
            user=token.user,
            token=token,
        )
    except BaseException:
        kept_delete(stored)
        raise
    if len(content) > settings.INGEST_INLINE_MAX_BYTES:
        send_to_worker(batch)
        return _success(encoding, 0, "")
    # The lines decoded from protobuf spans already are not decoded again.
    decoded = {number: trace.unit for number, trace in enumerate(traces, start=1) if trace.unit}
    report = ingest_batch(batch, decoded=decoded).span_report
    rejected = list(
        TraceLine.objects.filter(batch=batch, accepted=False)
        .order_by("line_number")
        .values_list("line_number", "reason")
    )
    # Spans that did not read are dropped as a rejected trace's are; the report says why,
    # and that a request with spans held no tool call (a warning, with nothing rejected).
    said = [f"{report.message()} (batch {batch.public_id})"] if report.is_warning else []
    if not rejected:
        return _success(encoding, report.unread, "; ".join(said))
    spans = sum(traces[number - 1].spans for number, _ in rejected)
    named = [f"trace {traces[n - 1].trace_id}: {reason}" for n, reason in rejected[:NAMED_REASONS]]
    if len(rejected) > NAMED_REASONS:
        named.append(
            f"and {len(rejected) - NAMED_REASONS} more traces (see batch {batch.public_id})"
        )
    return _success(encoding, spans + report.unread, "; ".join(named + said))
