"""Jaeger JSON (the UI's "Download JSON" and the query API's `{"data": [trace, ...]}`): its
spans into _Span. Tags and log fields are `{key, type, value}` lists; times are integer
microseconds; the OpenTelemetry status travels in the `otel.status_code` tag."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from reviewapp.ingest.otel.spans import _label, _optional_id, _Raw, _Span, _span_name
from reviewapp.ingest.otel.values import (
    MAX_NANOS,
    SPAN_ID_BYTES,
    TRACE_ID_BYTES,
    ExternalFormatError,
    _is_int,
    _list,
    _normalize_id,
    _quote,
    _type_name,
)

_HEX16 = re.compile(r"[0-9a-fA-F]{16}")


def jaeger_traces(document: dict) -> list[Any]:
    """The traces of a Jaeger document: `data` of the API, or one downloaded trace."""
    if "data" in document:
        return _list(document["data"], "data")
    return [document]


def jaeger_raw_spans(document: dict) -> Iterator[_Raw]:
    for i, trace in enumerate(jaeger_traces(document)):
        where = f"data[{i}]"
        if not isinstance(trace, dict):
            raise ExternalFormatError(f"{where} must be an object, not {_type_name(trace)}")
        processes = trace.get("processes")
        processes = processes if isinstance(processes, dict) else {}
        for j, span in enumerate(_list(trace.get("spans"), f"{where}.spans")):
            span_where = f"{where}.spans[{j}]"
            if not isinstance(span, dict):
                raise ExternalFormatError(f"{span_where} must be an object, not {_type_name(span)}")
            process = processes.get(span.get("processID"))
            process = process if isinstance(process, dict) else span.get("process")
            yield _Raw(
                span_where,
                span,
                span.get("operationName"),
                _peek_tags(span.get("tags")),
                None,
                _reader(span_where, span, process if isinstance(process, dict) else {}),
            )


def _reader(where: str, span: dict, process: dict):
    return lambda: _read_jaeger_span(where, span, process)


def _peek_tags(tags: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}
    if isinstance(tags, list):
        for tag in tags:
            if isinstance(tag, dict) and isinstance(tag.get("key"), str):
                found[tag["key"]] = tag.get("value")
    return found


def _tags(tags: Any, where: str) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for index, tag in enumerate(_list(tags, where)):
        if not isinstance(tag, dict) or not isinstance(tag.get("key"), str):
            raise ExternalFormatError(f"{where}[{index}] must be a {{key, type, value}} object")
        value = tag.get("value")
        if tag.get("type") == "int64" and isinstance(value, str) and value.lstrip("-").isdigit():
            value = int(value)
        found.pop(tag["key"], None)
        found[tag["key"]] = value
    return found


def _micros(raw: Any, what: str, where: str) -> int | None:
    if raw is None:
        return None
    if not _is_int(raw) or raw < 0 or raw * 1000 >= MAX_NANOS:
        raise ExternalFormatError(f"{where}: {what} {_quote(raw)} is not a count of microseconds")
    return raw * 1000 or None


def _jaeger_id(raw: Any, size: int, what: str, where: str) -> str:
    """Jaeger writes 64-bit trace ids as 16 hex digits: they are the low half of a 128-bit id."""
    if isinstance(raw, str) and size == TRACE_ID_BYTES and _HEX16.fullmatch(raw.strip()):
        raw = raw.strip().rjust(32, "0")
    return _normalize_id(raw, size, what, where)


def _read_jaeger_span(where: str, span: dict, process: dict) -> _Span:
    name = _span_name(span, where, "operationName")
    label = _label(where, name)
    trace_id = _jaeger_id(span.get("traceID"), TRACE_ID_BYTES, "traceID", label)
    span_id = _jaeger_id(span.get("spanID"), SPAN_ID_BYTES, "spanID", label)
    attributes = _tags(span.get("tags"), f"{label}: tags")
    start = _micros(span.get("startTime"), "startTime", label)
    duration = _micros(span.get("duration"), "duration", label)
    end = start + duration if start is not None and duration is not None else None
    status = attributes.get("otel.status_code")
    error = (isinstance(status, str) and status.upper() == "ERROR") or attributes.get("error") in (
        True,
        "true",
    )
    message = attributes.get("otel.status_description")
    exceptions = []
    events = []  # a Jaeger log is a span event, its name under "event"
    for index, log in enumerate(_list(span.get("logs"), f"{label}: logs")):
        if not isinstance(log, dict):
            raise ExternalFormatError(f"{label}: logs[{index}] must be an object")
        fields = _tags(log.get("fields"), f"{label}: logs[{index}].fields")
        if fields.get("event") == "exception" or "exception.type" in fields:
            exceptions.append(fields)
        event = fields.get("event")
        events.append((event if isinstance(event, str) else "", fields))
    parent = None
    for reference in span.get("references") or []:
        if isinstance(reference, dict) and reference.get("refType") == "CHILD_OF":
            parent = _optional_id(reference.get("spanID"), SPAN_ID_BYTES)
            break
    service = process.get("serviceName")
    resource = _peek_tags(process.get("tags"))
    if isinstance(service, str):
        resource["service.name"] = service
    return _Span(
        where=label,
        name=name,
        trace_id=trace_id,
        span_id=span_id,
        attributes=attributes,
        start_nanos=start,
        end_nanos=end,
        error=error,
        status_message=message if isinstance(message, str) and message else None,
        exceptions=tuple(exceptions),
        parent_id=parent,
        resource=resource,
        events=tuple(events),
    )
