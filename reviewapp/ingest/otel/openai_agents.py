"""The OpenAI Agents SDK's own tracing export into _Span: `{"data": [trace.export(),
span.export() ...]}` as its tracing processors send it. A `function` span is a tool call:
its `input` is JSON text, its `output` the Python repr of what the tool returned (read as
a literal, never run). An `agent` span names the agent; a trace's `group_id` (the SDK's
conversation) is the conversation. The SDK keeps no call id on a function span."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from reviewapp.ingest.otel.payloads import decode_text
from reviewapp.ingest.otel.spans import _label, _optional_id, _Raw, _Span, _span_name
from reviewapp.ingest.otel.values import (
    SPAN_ID_BYTES,
    TRACE_ID_BYTES,
    ExternalFormatError,
    _iso_nanos,
    _list,
    _normalize_id,
    _quote,
    _type_name,
)

OBJECTS = ("trace", "trace.span")
KINDS = {"function": "TOOL", "agent": "AGENT"}


def is_agents_item(item: Any) -> bool:
    return isinstance(item, dict) and item.get("object") in OBJECTS


def _kind(span: dict) -> str | None:
    data = span.get("span_data")
    kind = data.get("type") if isinstance(data, dict) else None
    if not isinstance(kind, str) or not kind.strip():
        return None
    return KINDS.get(kind.strip(), kind.strip().upper())


def _name(span: dict) -> Any:
    data = span.get("span_data")
    if not isinstance(data, dict):
        return None
    return data.get("name", data.get("type"))


def agents_raw_spans(document: dict) -> Iterator[_Raw]:
    items = _list(document.get("data"), "data")
    groups: dict[Any, str] = {}
    for item in items:
        if isinstance(item, dict) and item.get("object") == "trace":
            group = item.get("group_id")
            if isinstance(group, str) and group.strip():
                groups[item.get("id")] = group.strip()
    for index, item in enumerate(items):
        where = f"data[{index}]"
        if not isinstance(item, dict):
            raise ExternalFormatError(f"{where} must be an object, not {_type_name(item)}")
        if item.get("object") != "trace.span":
            continue  # the trace itself: its group was read above
        yield _Raw(
            where,
            item,
            _name(item),
            {},
            _kind(item),
            _reader(where, item, groups.get(item.get("trace_id"))),
        )


def _reader(where, span, group):
    return lambda: _read_span(where, span, group)


def _text_or_value(raw: Any) -> Any:
    """An input or output as the SDK writes it: JSON text or a Python repr, decoded; plain
    text as it is."""
    if isinstance(raw, str):
        kind, value = decode_text(raw)
        return raw if kind == "text" else value
    return raw


def _read_span(where: str, span: dict, group: str | None) -> _Span:
    data = span.get("span_data")
    if not isinstance(data, dict):
        raise ExternalFormatError(f"{where}: span_data must be an object")
    name = _name(span)
    if name is not None and not isinstance(name, str):
        name = _span_name(data, where)
    label = _label(where, name)
    trace_id = _normalize_id(span.get("trace_id"), TRACE_ID_BYTES, "trace_id", label)
    span_id = _normalize_id(span.get("id"), SPAN_ID_BYTES, "id", label)
    error = span.get("error")
    message = None
    if isinstance(error, dict):
        found = error.get("message")
        message = found if isinstance(found, str) and found else None
        details = error.get("data")
        if message is not None and details is not None:
            message = f"{message}: {_quote(details, 200)}"
    output = data.get("output")
    return _Span(
        where=label,
        name=name,
        trace_id=trace_id,
        span_id=span_id,
        attributes={},
        start_nanos=_iso_nanos(span.get("started_at"), "started_at", label),
        end_nanos=_iso_nanos(span.get("ended_at"), "ended_at", label),
        error=error is not None,
        status_message=message,
        exceptions=(),
        parent_id=_optional_id(span.get("parent_id"), SPAN_ID_BYTES),
        kind=_kind(span),
        input=_text_or_value(data.get("input")),
        output=output,
        session_id=group,
    )
