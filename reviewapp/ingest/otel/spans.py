"""Reading spans into _Span: OTLP/JSON (every variant SDKs write, Grafana Tempo's batches too)
and ConsoleSpanExporter / ReadableSpan.to_json() spans (alone, in a list, or any-agent's).

Every span of a document is read; a span that cannot be read is refused when it looks like
a tool span (ExternalFormatError naming it) and skipped otherwise (tools.py decides)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
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

ERROR_STATUS = frozenset({"2", "ERROR", "STATUS_CODE_ERROR"})


@dataclass(slots=True)
class _Span:
    """One span, read from any of the formats. Not frozen, though nothing changes one: a
    frozen dataclass is three times as slow to make, and the receiver makes one a span."""

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
    parent_id: str | None = None
    kind: str | None = None  # a Langfuse observation type (TOOL, AGENT, SPAN ...)
    resource: Mapping[str, Any] = field(default_factory=dict)
    scope: str | None = None
    # A Langfuse observation's own input and output (None: absent), beside its attributes.
    input: Any = None
    output: Any = None
    # What the export says of the whole trace (a Langfuse trace's name and session).
    trace_name: str | None = None
    session_id: str | None = None
    # Every event as (name, attributes): GenAI exporters put arguments and results there.
    events: tuple[tuple[str, dict[str, Any]], ...] = ()
    # The call id a format keeps outside the span (the model's tool call, matched to it).
    call_id: str | None = None


class _Raw:
    """A span as found, with a best-effort view of its attributes to tell whether it is a
    tool span before (and whether or not) it can be read."""

    __slots__ = ("where", "raw", "name", "peek", "kind", "read")

    def __init__(self, where: str, raw: Any, name: Any, peek: Mapping[str, Any], kind, read):
        self.where, self.raw, self.name, self.peek, self.kind = where, raw, name, peek, kind
        self.read: Callable[[], _Span] = read


def _is_error_status(code: Any) -> bool:
    if _is_int(code):
        return code == 2
    return (
        isinstance(code, str) and code.strip().upper().removeprefix("STATUSCODE.") in ERROR_STATUS
    )


def _peek_key_values(items: Any) -> dict[str, Any]:
    """A KeyValue list as a dict of its plain values (strings, numbers, booleans; anything
    else as True), tolerating any malformed entry."""
    found: dict[str, Any] = {}
    if isinstance(items, list):
        for item in items:
            if isinstance(item, dict) and isinstance(item.get("key"), str):
                value = item.get("value")
                plain: Any = True
                if isinstance(value, dict):
                    for one in value.values():
                        if isinstance(one, str | int | float | bool):
                            plain = one
                            break
                found[item["key"]] = plain
    return found


def _status(status: Any, where: str, code_key: str, message_key: str) -> tuple[bool, str | None]:
    if status is None:
        return False, None
    if not isinstance(status, dict):
        raise ExternalFormatError(f"{where}: status must be an object, not {_type_name(status)}")
    message = status.get(message_key)
    if message is not None and not isinstance(message, str):
        raise ExternalFormatError(f"{where}: status {message_key} must be a string")
    return _is_error_status(status.get(code_key)), message or None


def _span_name(span: dict, where: str, key: str = "name") -> str | None:
    name = span.get(key)
    if name is not None and not isinstance(name, str):
        raise ExternalFormatError(f"{where}: {key} must be a string, not {_type_name(name)}")
    return name


def _label(where: str, name: Any) -> str:
    return f"{where} ({_quote(name, 40)})" if isinstance(name, str) and name else where


def _events(events: Any, label: str, read_attributes) -> tuple[tuple[str, dict[str, Any]], ...]:
    """Each event of a span as (name, attributes), read the way its format writes them."""
    found: list[tuple[str, dict[str, Any]]] = []
    for index, event in enumerate(_list(events, f"{label}: events")):
        if not isinstance(event, dict):
            raise ExternalFormatError(f"{label}: events[{index}] must be an object")
        raw_name = event.get("name")
        name = raw_name if isinstance(raw_name, str) else ""
        try:
            attributes = read_attributes(
                event.get("attributes"), f"{label}: events[{index}].attributes"
            )
        except ExternalFormatError:
            if name == "exception":
                raise
            continue  # an event that cannot be read is no reason to lose the span
        found.append((name, attributes))
    return tuple(found)


def _exceptions(events: tuple[tuple[str, dict[str, Any]], ...]) -> tuple[dict[str, Any], ...]:
    """The attributes of a span's `exception` events."""
    return tuple(attributes for name, attributes in events if name == "exception")


def _optional_id(raw: Any, size: int) -> str | None:
    """A parent id when it reads as one (empty or unreadable: none)."""
    if raw in (None, ""):
        return None
    try:
        return _normalize_id(raw, size, "parent", "")
    except ExternalFormatError:
        return None


# --- OTLP/JSON ---------------------------------------------------------------------------

OTLP_TOPS = ("resourceSpans", "resource_spans", "batches")
SCOPE_KEYS = (
    "scopeSpans",
    "scope_spans",
    "instrumentationLibrarySpans",
    "instrumentation_library_spans",
)


def otlp_raw_spans(document: dict, prefix: str = "") -> Iterator[_Raw]:
    """Every span of an OTLP/JSON TracesData (or Tempo's `batches`, or `{"trace": ...}`);
    ``prefix`` places it in a larger document (`[2].`: the third of an array of them)."""
    if isinstance(document.get("trace"), dict) and not any(k in document for k in OTLP_TOPS):
        document = document["trace"]
    top = next((key for key in OTLP_TOPS if key in document), "resourceSpans")
    for i, resource_spans in enumerate(_list(document.get(top), f"{prefix}{top}")):
        where = f"{prefix}{top}[{i}]"
        if not isinstance(resource_spans, dict):
            raise ExternalFormatError(
                f"{where} must be an object, not {_type_name(resource_spans)}"
            )
        resource = resource_spans.get("resource")
        resource_view = (
            _peek_key_values(resource.get("attributes")) if isinstance(resource, dict) else {}
        )
        for scope_key in SCOPE_KEYS:
            for j, scope_spans in enumerate(
                _list(resource_spans.get(scope_key), f"{where}.{scope_key}")
            ):
                scope_where = f"{where}.{scope_key}[{j}]"
                if not isinstance(scope_spans, dict):
                    raise ExternalFormatError(
                        f"{scope_where} must be an object, not {_type_name(scope_spans)}"
                    )
                scope = _get(scope_spans, "scope") or _get(
                    scope_spans, "instrumentationLibrary", "instrumentation_library"
                )
                scope_name = scope.get("name") if isinstance(scope, dict) else None
                scope_name = scope_name if isinstance(scope_name, str) else None
                spans = _list(scope_spans.get("spans"), f"{scope_where}.spans")
                for k, span in enumerate(spans):
                    span_where = f"{scope_where}.spans[{k}]"
                    if not isinstance(span, dict):
                        raise ExternalFormatError(
                            f"{span_where} must be an object, not {_type_name(span)}"
                        )
                    yield _Raw(
                        span_where,
                        span,
                        span.get("name"),
                        _peek_key_values(span.get("attributes")),
                        None,
                        _otlp_reader(span_where, span, resource_view, scope_name),
                    )


def _otlp_reader(where: str, span: dict, resource: Mapping[str, Any], scope: str | None):
    return lambda: _read_otlp_span(where, span, resource, scope)


def _read_otlp_span(
    where: str, span: dict, resource: Mapping[str, Any] | None = None, scope: str | None = None
) -> _Span:
    name = _span_name(span, where)
    label = _label(where, name)
    trace_id = _normalize_id(_get(span, "traceId", "trace_id"), TRACE_ID_BYTES, "traceId", label)
    span_id = _normalize_id(_get(span, "spanId", "span_id"), SPAN_ID_BYTES, "spanId", label)
    attributes = _key_values(span.get("attributes"), f"{label}: attributes")
    start = _unix_nanos(
        _get(span, "startTimeUnixNano", "start_time_unix_nano"), "startTimeUnixNano", label
    )
    end = _unix_nanos(_get(span, "endTimeUnixNano", "end_time_unix_nano"), "endTimeUnixNano", label)
    error, message = _status(span.get("status"), label, "code", "message")
    events = _events(span.get("events"), label, _key_values)
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
        exceptions=_exceptions(events),
        parent_id=_optional_id(_get(span, "parentSpanId", "parent_span_id"), SPAN_ID_BYTES),
        resource=resource or {},
        scope=scope,
        events=events,
    )


# --- ReadableSpan.to_json(), any-agent and Phoenix ------------------------------------------


def _plain_attributes(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ExternalFormatError(f"{where} must be an object, not {_type_name(value)}")
    return dict(value)


def _phoenix_kind(document: dict) -> str | None:
    """Phoenix's span kind (TOOL, AGENT, LLM ...), which it moves out of the attributes."""
    kind = document.get("span_kind")
    return kind.strip().upper() if isinstance(kind, str) and kind.strip() else None


def console_raw_span(document: dict, where: str = "span") -> _Raw:
    attributes = document.get("attributes")
    return _Raw(
        where,
        document,
        document.get("name"),
        attributes if isinstance(attributes, dict) else {},
        _phoenix_kind(document),
        lambda: _read_console_span(document, where),
    )


def _read_console_span(document: dict, where: str = "span") -> _Span:
    name = _span_name(document, where)
    label = _label(where, name)
    context = document.get("context")
    if not isinstance(context, dict):
        raise ExternalFormatError(f"{label}: context must be an object")
    trace_id = _normalize_id(context.get("trace_id"), TRACE_ID_BYTES, "context.trace_id", label)
    span_id = _normalize_id(context.get("span_id"), SPAN_ID_BYTES, "context.span_id", label)
    attributes = _plain_attributes(document.get("attributes"), f"{label}: attributes")
    start = _iso_nanos(document.get("start_time"), "start_time", label)
    end = _iso_nanos(document.get("end_time"), "end_time", label)
    if "status" in document or "status_code" not in document:
        error, message = _status(document.get("status"), label, "status_code", "description")
    else:  # Phoenix: the status's code and message beside the span's other fields
        error, message = _status(document, label, "status_code", "status_message")
    events = _events(document.get("events"), label, _plain_attributes)
    parent = document.get("parent")
    parent_id = parent.get("span_id") if isinstance(parent, dict) else document.get("parent_id")
    resource = document.get("resource")
    resource_attributes = resource.get("attributes") if isinstance(resource, dict) else None
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
        exceptions=_exceptions(events),
        parent_id=_optional_id(parent_id, SPAN_ID_BYTES),
        kind=_phoenix_kind(document),
        resource=resource_attributes if isinstance(resource_attributes, dict) else {},
        events=events,
    )


def span_list_raw_spans(spans: Any, top: str) -> Iterator[_Raw]:
    """A JSON array of spans, each a ReadableSpan.to_json() object (any-agent writes these
    under `spans`) or one OTLP/JSON span."""
    for index, span in enumerate(_list(spans, top)):
        where = f"{top}[{index}]"
        if not isinstance(span, dict):
            raise ExternalFormatError(f"{where} must be an object, not {_type_name(span)}")
        if isinstance(span.get("context"), dict):
            yield console_raw_span(span, where)
        else:
            yield _Raw(
                where,
                span,
                span.get("name"),
                _peek_key_values(span.get("attributes")),
                None,
                _otlp_reader(where, span, {}, None),
            )
