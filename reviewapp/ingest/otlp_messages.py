"""OTLP trace export requests, as protobuf (decoded by opentelemetry-proto) or OTLP/JSON,
regrouped into one OTLP/JSON TracesData document per trace: the lines a receiver keeps.

Protobuf spans are written in the spec's JSON encoding (hex ids, decimal-string
nanoseconds, integer enums), so that a line reads the same whichever encoding brought it;
a trace's spans keep their resource and scope. A protobuf span becomes JSON only when its
trace's line is written, so that a large request holds its decoded message and one
trace's worth of JSON, not every span's.

A protobuf trace's records are made from its decoded spans (their _Span built here, as
otel.spans reads them from that JSON), not by parsing its line back: a trace whose spans
do not all read plainly (an id of the wrong size, values nested too deeply ...) is decoded
from its line instead, as a file would be, so that it is refused for the same reason.

A request too large to decode while the exporter waits is kept as it came, and a worker
reads its lines from it here (kept_request_lines)."""

from __future__ import annotations

import base64
import functools
import json
import math
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import msgspec
from django.conf import settings
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from reviewapp.engine import RecordError
from reviewapp.ingest.files import (
    MAX_LINE_BYTES,
    InflateMeter,
    RawLine,
    open_stream,
    oversized_line,
    unreadable,
)
from reviewapp.ingest.formats import DecodedUnit, converted_unit, extraction_keys
from reviewapp.ingest.otel import OTLP, ExternalFormatError, ExtractionKeys, convert_spans
from reviewapp.ingest.otel.spans import _exceptions, _peek_key_values, _Span
from reviewapp.ingest.otel.values import MAX_NESTING, _quote

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
# The largest request, as it arrives and inflated: the OTLP specification has a server
# bound it (after decompression too) and answer 413, which exporters do not retry, and
# recommends this as the default. INGEST_MAX_BYTES lowers it.
MAX_REQUEST_BYTES = 64 * 1024 * 1024
# A request kept whole for a worker is stored under a name ending with its encoding's.
KEPT_SUFFIXES = {PROTOBUF: ".otlp-protobuf", JSON: ".otlp-json"}


def request_limit() -> int:
    """The most bytes a request may be, as it arrives and inflated."""
    return min(settings.INGEST_MAX_BYTES, MAX_REQUEST_BYTES)


class BadRequest(ValueError):
    """A body that is no OTLP trace export request; the message says why."""


@dataclass(frozen=True)
class TraceDocument:
    """One trace of a request: its TracesData as a JSON line, how many spans it holds and,
    for protobuf, what the line decodes to (None: decode the line)."""

    trace_id: str
    line: bytes
    spans: int
    unit: DecodedUnit | None = None


# --- protobuf ----------------------------------------------------------------------------


def _any_value(value: Any) -> dict[str, Any]:
    kind = value.WhichOneof("value")
    if kind is None:
        return {}
    if kind == "string_value":
        return {"stringValue": value.string_value}
    if kind == "bool_value":
        return {"boolValue": value.bool_value}
    if kind == "int_value":
        return {"intValue": str(value.int_value)}
    if kind == "double_value":
        number = value.double_value
        if not math.isfinite(number):  # proto3 JSON writes these as strings
            return {
                "doubleValue": "NaN"
                if math.isnan(number)
                else f"{'-' if number < 0 else ''}Infinity"
            }
        return {"doubleValue": number}
    if kind == "array_value":
        return {"arrayValue": {"values": [_any_value(item) for item in value.array_value.values]}}
    if kind == "kvlist_value":
        return {"kvlistValue": {"values": _key_values(value.kvlist_value.values)}}
    return {"bytesValue": base64.b64encode(value.bytes_value).decode()}


def _key_values(items: Any) -> list[dict[str, Any]]:
    return [{"key": item.key, "value": _any_value(item.value)} for item in items]


def _span(span: Any) -> dict[str, Any]:
    found: dict[str, Any] = {
        "traceId": span.trace_id.hex(),
        "spanId": span.span_id.hex(),
        "name": span.name,
        "kind": span.kind,
        "startTimeUnixNano": str(span.start_time_unix_nano),
        "endTimeUnixNano": str(span.end_time_unix_nano),
        "attributes": _key_values(span.attributes),
    }
    if span.parent_span_id:
        found["parentSpanId"] = span.parent_span_id.hex()
    if span.events:
        found["events"] = [
            {
                "timeUnixNano": str(event.time_unix_nano),
                "name": event.name,
                "attributes": _key_values(event.attributes),
            }
            for event in span.events
        ]
    if span.HasField("status"):
        found["status"] = {"code": span.status.code, "message": span.status.message}
    return found


def _scope(scope: Any) -> dict[str, Any]:
    found: dict[str, Any] = {"name": scope.name}
    if scope.version:
        found["version"] = scope.version
    return found


def protobuf_traces(body: bytes) -> list[TraceDocument]:
    return list(protobuf_documents(body))


def protobuf_documents(body: bytes) -> Iterator[TraceDocument]:
    """The request's traces, one at a time; BadRequest at once when it is no request."""
    try:
        request = ExportTraceServiceRequest.FromString(body)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise BadRequest(f"the body is not an OTLP ExportTraceServiceRequest: {exc}") from None
    grouped = _Grouped()
    for r, resource_spans in enumerate(request.resource_spans):
        resource = {"attributes": _key_values(resource_spans.resource.attributes)}
        for s, scope_spans in enumerate(resource_spans.scope_spans):
            scope = _scope(scope_spans.scope)
            for span in scope_spans.spans:
                grouped.add(span.trace_id.hex(), (r, s), resource, scope, span)
    keys = extraction_keys()
    return grouped.documents(
        _span, _protobuf_line, lambda places, line: _protobuf_unit(places, line, keys)
    )


def _protobuf_line(document: dict[str, Any]) -> bytes:
    # Protobuf strings are UTF-8 and _any_value writes no float JSON cannot hold, so the C
    # encoder writes the same JSON as json.dumps, several times faster.
    return msgspec.json.encode(document)


# --- protobuf spans straight to records --------------------------------------------------


class _NotPlain(Exception):
    """A span that the reading of its JSON might refuse: its trace is decoded from its line."""


def _plain_value(value: Any, depth: int) -> Any:
    """An AnyValue as otel.values._any_value reads the JSON that _any_value writes of it."""
    if depth > MAX_NESTING:
        raise _NotPlain
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind is None:
        return None
    if kind == "bool_value":
        return value.bool_value
    if kind == "int_value":
        return value.int_value
    if kind == "double_value":
        number = value.double_value
        if not math.isfinite(number):
            return "NaN" if math.isnan(number) else ("Infinity" if number > 0 else "-Infinity")
        return number
    if kind == "array_value":
        return [_plain_value(item, depth + 1) for item in value.array_value.values]
    if kind == "kvlist_value":
        return _plain_attributes(value.kvlist_value.values, depth + 1)
    return base64.b64encode(value.bytes_value).decode()


def _plain_attributes(items: Any, depth: int = 0) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for item in items:
        key = item.key
        if key in found:
            del found[key]  # a repeated key keeps its last value, placed last
        found[key] = _plain_value(item.value, depth)
    return found


def _plain_id(raw: bytes, size: int) -> str:
    if len(raw) != size or not any(raw):
        raise _NotPlain
    return raw.hex()


@functools.lru_cache(maxsize=4096)
def _quoted_name(name: str) -> str:
    return _quote(name, 40)  # a few names recur in every request


def _read_protobuf_span(where: str, span: Any, resource: Any, scope: Any) -> _Span:
    """The _Span that otel.spans reads from the JSON that _span writes of `span`."""
    name = span.name
    parent = span.parent_span_id
    status = span.status
    events = tuple((event.name, _plain_attributes(event.attributes)) for event in span.events)
    return _Span(
        where=f"{where} ({_quoted_name(name)})" if name else where,
        name=name,
        trace_id=_plain_id(span.trace_id, 16),
        span_id=_plain_id(span.span_id, 8),
        attributes=_plain_attributes(span.attributes),
        start_nanos=span.start_time_unix_nano or None,
        end_nanos=span.end_time_unix_nano or None,
        error=status.code == 2,
        status_message=status.message or None,
        exceptions=_exceptions(events),
        parent_id=parent.hex() if len(parent) == 8 and any(parent) else None,
        resource=resource,
        scope=scope,
        events=events,
    )


def _protobuf_unit(places: dict, line: bytes, keys: ExtractionKeys) -> DecodedUnit | None:
    """What the trace's line decodes to (formats.decode_unit), from its protobuf spans;
    None when decoding the line may say otherwise (a refusal, with its reason)."""
    if b"\\u0000" in line:
        return None
    spans = []
    r, s, last = -1, 0, None
    try:
        for resource, scope, members in places.values():
            # Where each span is in the line's document, as _Grouped.documents places it.
            if resource is not last:
                r, s, last = r + 1, 0, resource
                resource_view = _peek_key_values(resource["attributes"])
            else:
                s += 1
            where = f"resourceSpans[{r}].scopeSpans[{s}].spans"
            for k, span in enumerate(members):
                spans.append(
                    _read_protobuf_span(f"{where}[{k}]", span, resource_view, scope["name"])
                )
        return converted_unit(OTLP, convert_spans(OTLP, spans, (), keys))
    except (_NotPlain, ExternalFormatError, RecordError):
        return None


# --- JSON --------------------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _items(value: Any, where: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise BadRequest(f"{where} must be an array")
    return value


def json_traces(body: bytes) -> list[TraceDocument]:
    try:
        document = json.loads(body, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise BadRequest(f"the body is not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise BadRequest("the body is not an OTLP/JSON ExportTraceServiceRequest object")
    top = "resourceSpans" if "resourceSpans" in document else "resource_spans"
    grouped = _Grouped()
    for r, resource_spans in enumerate(_items(document.get(top), top)):
        if not isinstance(resource_spans, dict):
            raise BadRequest(f"{top}[{r}] must be an object")
        resource = resource_spans.get("resource") or {}
        for key in ("scopeSpans", "scope_spans", "instrumentationLibrarySpans"):
            for s, scope_spans in enumerate(_items(resource_spans.get(key), f"{top}[{r}].{key}")):
                if not isinstance(scope_spans, dict):
                    raise BadRequest(f"{top}[{r}].{key}[{s}] must be an object")
                scope = scope_spans.get("scope") or scope_spans.get("instrumentationLibrary") or {}
                for span in _items(scope_spans.get("spans"), f"{top}[{r}].{key}[{s}].spans"):
                    trace = (
                        span.get("traceId", span.get("trace_id"))
                        if isinstance(span, dict)
                        else None
                    )
                    grouped.add(str(trace), (r, key, s), resource, scope, span)
    return list(grouped.documents(_as_it_is, _json_line))


def _as_it_is(span: Any) -> Any:
    return span


def _json_line(document: dict[str, Any]) -> bytes:
    # surrogatepass: an unpaired surrogate escape of a JSON body becomes bytes that are no
    # UTF-8, and its line is rejected for it, not the request.
    line = json.dumps(document, ensure_ascii=False, separators=(",", ":"))
    return line.encode("utf-8", "surrogatepass")


# --- one TracesData per trace ------------------------------------------------------------


class _Grouped:
    """Spans by trace, then by the resource and scope they came under, in arrival order."""

    def __init__(self) -> None:
        self.traces: dict[str, dict[Any, tuple[Any, Any, list]]] = {}

    def add(self, trace: str, place: Any, resource: Any, scope: Any, span: Any) -> None:
        places = self.traces.setdefault(trace, {})
        if place not in places:
            places[place] = (resource, scope, [])
        places[place][2].append(span)

    def documents(
        self,
        span_json: Callable[[Any], Any],
        line_of: Callable[[dict[str, Any]], bytes],
        unit_of: Callable[[dict, bytes], DecodedUnit | None] | None = None,
    ) -> Iterator[TraceDocument]:
        """Each trace's document, its spans made JSON by `span_json` as `line_of` writes it
        (and with `unit_of`, what it decodes to, from its spans and line)."""
        for trace, places in self.traces.items():
            resource_spans: list[dict[str, Any]] = []
            last_resource = None
            for resource, scope, spans in places.values():
                if resource is not last_resource:
                    resource_spans.append({"resource": resource, "scopeSpans": []})
                    last_resource = resource
                resource_spans[-1]["scopeSpans"].append(
                    {"scope": scope, "spans": [span_json(span) for span in spans]}
                )
            encoded = line_of({"resourceSpans": resource_spans})
            count = sum(len(spans) for _, _, spans in places.values())
            unit = unit_of(places, encoded) if unit_of is not None else None
            yield TraceDocument(trace, encoded, count, unit)


# --- a request kept for a worker ---------------------------------------------------------


def kept_request_encoding(path: str) -> str | None:
    """The encoding of the request kept at `path` for a worker, or None for a file that is
    no such request."""
    for encoding, suffix in KEPT_SUFFIXES.items():
        if path.endswith(suffix):
            return encoding
    return None


def kept_request_lines(
    stream: BinaryIO, source: str, *, encoding: str, meter: InflateMeter | None = None
) -> Iterator[RawLine]:
    """The lines of a request kept for a worker (gzip or not): one per trace, the lines the
    receiver writes for a request it decodes while the exporter waits. A request that
    cannot be read is one rejected line saying why."""
    limit = request_limit()
    try:
        body = open_stream(stream, limit, meter).read(limit + 1)
        if len(body) > limit:
            raise BadRequest(f"the body is over the {limit:,}-byte limit of an OTLP request")
        documents = protobuf_documents(body) if encoding == PROTOBUF else json_traces(body)
    except (OSError, EOFError, zlib.error) as exc:
        yield RawLine(source, 1, b"", error=unreadable(exc))
        return
    except BadRequest as exc:
        yield RawLine(source, 1, b"", error=str(exc))
        return
    del body  # the decoded request holds what is needed
    for number, document in enumerate(documents, start=1):
        if len(document.line) > MAX_LINE_BYTES:
            yield oversized_line(source, number, document.line, len(document.line))
        else:
            yield RawLine(source, number, document.line, decoded=document.unit)
