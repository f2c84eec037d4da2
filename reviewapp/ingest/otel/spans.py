"""Finding tool spans in a document and reading each into a _Span: OTLP/JSON (every
variant SDKs write) and ConsoleSpanExporter spans."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from reviewapp.ingest.otel.values import (
    SPAN_ID_BYTES,
    TRACE_ID_BYTES,
    ExternalFormatError,
    _get,
    _is_int,
    _iso_nanos,
    _key_values,
    _list,
    _normalize_id,
    _quote,
    _type_name,
    _unix_nanos,
)

OTLP = "otlp"


OTEL_SPAN = "otel-span"


TOOL_NAME_PREFIX = "execute_tool "


ERROR_STATUS = frozenset({"2", "ERROR", "STATUS_CODE_ERROR"})


def detect_format(document: Any) -> str | None:
    """``"otlp"`` for an OTLP/JSON document (``resourceSpans``, any variant), ``"otel-span"``
    for one ConsoleSpanExporter-style span (``context.trace_id``), else None (a native record,
    or anything else)."""
    if not isinstance(document, dict):
        return None
    if "resourceSpans" in document or "resource_spans" in document:
        return OTLP
    context = document.get("context")
    if isinstance(context, dict) and "trace_id" in context:
        return OTEL_SPAN
    return None


def _is_error_status(code: Any) -> bool:
    if _is_int(code):
        return code == 2
    return isinstance(code, str) and code.strip().upper() in ERROR_STATUS


def _peek_otlp_string(items: Any, key: str) -> str | None:
    """The last string value of ``key`` in a KeyValue list, tolerating any malformed entry."""
    found = None
    if isinstance(items, list):
        for item in items:
            if isinstance(item, dict) and item.get("key") == key:
                value = item.get("value")
                if isinstance(value, dict):
                    text = _get(value, "stringValue", "string_value")
                    found = text if isinstance(text, str) else None
    return found


def _is_tool(name: Any, operation: Any, span_kind: Any) -> bool:
    return (
        operation == "execute_tool"
        or (isinstance(name, str) and name.startswith(TOOL_NAME_PREFIX))
        or (isinstance(span_kind, str) and span_kind.strip().upper() == "TOOL")
    )


def _otlp_tool_spans(document: dict) -> Iterator[tuple[str, dict]]:
    """(location, raw span) for every tool span, in document order."""
    top = "resourceSpans" if "resourceSpans" in document else "resource_spans"
    for i, resource_spans in enumerate(_list(document[top], top)):
        where = f"{top}[{i}]"
        if not isinstance(resource_spans, dict):
            raise ExternalFormatError(
                f"{where} must be an object, not {_type_name(resource_spans)}"
            )
        for scope_key in (
            "scopeSpans",
            "scope_spans",
            "instrumentationLibrarySpans",
            "instrumentation_library_spans",
        ):
            for j, scope_spans in enumerate(
                _list(resource_spans.get(scope_key), f"{where}.{scope_key}")
            ):
                scope_where = f"{where}.{scope_key}[{j}]"
                if not isinstance(scope_spans, dict):
                    raise ExternalFormatError(
                        f"{scope_where} must be an object, not {_type_name(scope_spans)}"
                    )
                spans = _list(scope_spans.get("spans"), f"{scope_where}.spans")
                for k, span in enumerate(spans):
                    span_where = f"{scope_where}.spans[{k}]"
                    if not isinstance(span, dict):
                        raise ExternalFormatError(
                            f"{span_where} must be an object, not {_type_name(span)}"
                        )
                    attributes = span.get("attributes")
                    if _is_tool(
                        span.get("name"),
                        _peek_otlp_string(attributes, "gen_ai.operation.name"),
                        _peek_otlp_string(attributes, "openinference.span.kind"),
                    ):
                        yield span_where, span


@dataclass(frozen=True)
class _Span:
    """A tool span, read from either shape."""

    where: str
    name: str | None
    trace_id: str
    span_id: str
    attributes: dict[str, Any]
    start_nanos: int | None
    end_nanos: int | None
    error: bool
    status_message: str | None
    exceptions: tuple[dict[str, Any], ...]  # attributes of each `exception` event


def _status(status: Any, where: str, code_key: str, message_key: str) -> tuple[bool, str | None]:
    if status is None:
        return False, None
    if not isinstance(status, dict):
        raise ExternalFormatError(f"{where}: status must be an object, not {_type_name(status)}")
    message = status.get(message_key)
    if message is not None and not isinstance(message, str):
        raise ExternalFormatError(f"{where}: status {message_key} must be a string")
    return _is_error_status(status.get(code_key)), message or None


def _span_name(span: dict, where: str) -> str | None:
    name = span.get("name")
    if name is not None and not isinstance(name, str):
        raise ExternalFormatError(f"{where}: name must be a string, not {_type_name(name)}")
    return name


def _exception_events(events: Any, label: str, read_attributes) -> tuple[dict[str, Any], ...]:
    """The attributes of a span's `exception` events, read the way its format writes them."""
    found = []
    for index, event in enumerate(_list(events, f"{label}: events")):
        if not isinstance(event, dict):
            raise ExternalFormatError(f"{label}: events[{index}] must be an object")
        if event.get("name") == "exception":
            found.append(
                read_attributes(event.get("attributes"), f"{label}: events[{index}].attributes")
            )
    return tuple(found)


def _read_otlp_span(where: str, span: dict) -> _Span:
    name = _span_name(span, where)
    label = f"{where} ({_quote(name, 40)})" if name else where
    trace_id = _normalize_id(_get(span, "traceId", "trace_id"), TRACE_ID_BYTES, "traceId", label)
    span_id = _normalize_id(_get(span, "spanId", "span_id"), SPAN_ID_BYTES, "spanId", label)
    attributes = _key_values(span.get("attributes"), f"{label}: attributes")
    start = _unix_nanos(
        _get(span, "startTimeUnixNano", "start_time_unix_nano"), "startTimeUnixNano", label
    )
    end = _unix_nanos(_get(span, "endTimeUnixNano", "end_time_unix_nano"), "endTimeUnixNano", label)
    error, message = _status(span.get("status"), label, "code", "message")
    exceptions = _exception_events(span.get("events"), label, _key_values)
    return _Span(
        where=label,
        name=name,
        trace_id=trace_id,
        span_id=span_id,
        attributes=attributes,
        start_nanos=start,
        end_nanos=end,
        error=error,
        status_message=message,
        exceptions=exceptions,
    )


def _is_console_tool_span(document: dict) -> bool:
    attributes = document.get("attributes")
    attributes = attributes if isinstance(attributes, dict) else {}
    return _is_tool(
        document.get("name"),
        attributes.get("gen_ai.operation.name"),
        attributes.get("openinference.span.kind"),
    )


def _plain_attributes(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ExternalFormatError(f"{where} must be an object, not {_type_name(value)}")
    return dict(value)


def _read_console_span(document: dict) -> _Span:
    name = _span_name(document, "span")
    label = f"span ({_quote(name, 40)})" if name else "span"
    context = document["context"]
    trace_id = _normalize_id(context.get("trace_id"), TRACE_ID_BYTES, "context.trace_id", label)
    span_id = _normalize_id(context.get("span_id"), SPAN_ID_BYTES, "context.span_id", label)
    attributes = _plain_attributes(document.get("attributes"), f"{label}: attributes")
    start = _iso_nanos(document.get("start_time"), "start_time", label)
    end = _iso_nanos(document.get("end_time"), "end_time", label)
    error, message = _status(document.get("status"), label, "status_code", "description")
    exceptions = _exception_events(document.get("events"), label, _plain_attributes)
    return _Span(
        where=label,
        name=name,
        trace_id=trace_id,
        span_id=span_id,
        attributes=attributes,
        start_nanos=start,
        end_nanos=end,
        error=error,
        status_message=message,
        exceptions=exceptions,
    )
