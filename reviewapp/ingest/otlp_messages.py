"""OTLP trace export requests, as protobuf (decoded by opentelemetry-proto) or OTLP/JSON,
regrouped into one OTLP/JSON TracesData document per trace: the lines a receiver keeps.

Protobuf spans are written in the spec's JSON encoding (hex ids, decimal-string
nanoseconds, integer enums), so that a line reads the same whichever encoding brought it;
a trace's spans keep their resource and scope."""

from __future__ import annotations

import base64
import json
import math
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


class BadRequest(ValueError):
    """A body that is no OTLP trace export request; the message says why."""


@dataclass(frozen=True)
class TraceDocument:
    """One trace of a request: its TracesData as a JSON line, and how many spans it holds."""

    trace_id: str
    line: bytes
    spans: int


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
                grouped.add(span.trace_id.hex(), (r, s), resource, scope, _span(span))
    return grouped.lines()


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
    return grouped.lines()


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

    def lines(self) -> list[TraceDocument]:
        lines = []
        for trace, places in self.traces.items():
            resource_spans: list[dict[str, Any]] = []
            last_resource = None
            for resource, scope, spans in places.values():
                if resource is not last_resource:
                    resource_spans.append({"resource": resource, "scopeSpans": []})
                    last_resource = resource
                resource_spans[-1]["scopeSpans"].append({"scope": scope, "spans": spans})
            document = {"resourceSpans": resource_spans}
            line = json.dumps(document, ensure_ascii=False, separators=(",", ":"))
            count = sum(len(spans) for _, _, spans in places.values())
            # surrogatepass: an unpaired surrogate escape of a JSON body becomes bytes that are
            # no UTF-8, and its line is rejected for it, not the request.
            lines.append(TraceDocument(trace, line.encode("utf-8", "surrogatepass"), count))
        return lines
