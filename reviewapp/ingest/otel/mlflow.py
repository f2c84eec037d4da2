"""MLflow traces into _Span: `Trace.to_json()` (`{"info": {...}, "data": {"spans": [...]}}`)
and the traces artifact a file store keeps (`{"spans": [...]}`). Ids are base64, every
attribute value is JSON text (`mlflow.spanType` is `"\\"TOOL\\""`), a span's arguments and
result are `mlflow.spanInputs` and `mlflow.spanOutputs`, and the session is the trace's
`mlflow.trace.session` metadata. A tool span has no call id: the chat model's output names
it (modelcalls.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from reviewapp.ingest.otel.modelcalls import announced_calls, match_call_ids
from reviewapp.ingest.otel.spans import (
    _events,
    _exceptions,
    _label,
    _optional_id,
    _plain_attributes,
    _Raw,
    _Span,
    _span_name,
    _status,
)
from reviewapp.ingest.otel.values import (
    SPAN_ID_BYTES,
    TRACE_ID_BYTES,
    ExternalFormatError,
    _decode_json_text,
    _list,
    _normalize_id,
    _type_name,
    _unix_nanos,
)

SPAN_TYPE = "mlflow.spanType"
INPUTS = "mlflow.spanInputs"
OUTPUTS = "mlflow.spanOutputs"
SESSION = "mlflow.trace.session"
MODEL_TYPES = ("CHAT_MODEL", "LLM")


def is_mlflow_span(span: Any) -> bool:
    attributes = span.get("attributes") if isinstance(span, dict) else None
    return isinstance(attributes, dict) and SPAN_TYPE in attributes


def _decoded(value: Any) -> Any:
    """An MLflow attribute value: JSON text, decoded (text that is not JSON stays text)."""
    if isinstance(value, str):
        ok, found = _decode_json_text(value)
        if ok:
            return found
    return value


def _attributes(span: dict) -> dict[str, Any]:
    attributes = span.get("attributes")
    if not isinstance(attributes, dict):
        return {}
    return {key: _decoded(value) for key, value in attributes.items()}


def _kind(attributes: dict[str, Any]) -> str | None:
    kind = attributes.get(SPAN_TYPE)
    return kind.strip().upper() if isinstance(kind, str) and kind.strip() else None


def _metadata(info: dict) -> dict[str, Any]:
    """Trace metadata (MLflow 3's `trace_metadata`, 2's `request_metadata`, an object or a
    list of {key, value})."""
    for key in ("trace_metadata", "request_metadata"):
        found = info.get(key)
        if isinstance(found, dict):
            return found
        if isinstance(found, list):
            return {
                one["key"]: one.get("value")
                for one in found
                if isinstance(one, dict) and isinstance(one.get("key"), str)
            }
    return {}


def mlflow_raw_spans(document: dict) -> Iterator[_Raw]:
    info = document.get("info")
    info = info if isinstance(info, dict) else {}
    data = document.get("data")
    top, spans = ("data.spans", data.get("spans")) if isinstance(data, dict) else ("spans", None)
    if spans is None:
        top, spans = "spans", document.get("spans")
    spans = _list(spans, top)
    session = _metadata(info).get(SESSION)
    session = session if isinstance(session, str) and session else None
    tags = info.get("tags")
    trace_name = tags.get("mlflow.traceName") if isinstance(tags, dict) else None
    trace_name = trace_name if isinstance(trace_name, str) and trace_name else None
    call_ids = _call_ids(spans)
    for index, span in enumerate(spans):
        where = f"{top}[{index}]"
        if not isinstance(span, dict):
            raise ExternalFormatError(f"{where} must be an object, not {_type_name(span)}")
        attributes = _attributes(span)
        call_id = call_ids.get(index)
        yield _Raw(
            where,
            span,
            span.get("name"),
            attributes,
            _kind(attributes),
            _reader(where, span, attributes, trace_name, session, call_id),
        )


def _call_ids(spans: list) -> dict[int, str]:
    """{index of a TOOL span: the call id its trace's chat models gave it}."""
    traces: dict[Any, tuple[list, list]] = {}
    ordered = sorted(
        (one for one in enumerate(spans) if isinstance(one[1], dict)),
        key=lambda one: (
            one[1].get("start_time_unix_nano") or 0
            if isinstance(one[1].get("start_time_unix_nano"), int)
            else 0
        ),
    )
    for index, span in ordered:
        attributes = _attributes(span)
        tools, announced = traces.setdefault(str(span.get("trace_id")), ([], []))
        kind = _kind(attributes)
        if kind == "TOOL" and isinstance(span.get("name"), str):
            tools.append((index, span["name"]))
        elif kind in MODEL_TYPES:
            announced.extend(announced_calls(attributes.get(OUTPUTS)))
    matched: dict[int, str] = {}
    for tools, announced in traces.values():
        matched.update(match_call_ids(tools, announced))  # type: ignore[arg-type]
    return matched


def _reader(where, span, attributes, trace_name, session, call_id):
    return lambda: _read_span(where, span, attributes, trace_name, session, call_id)


def _read_span(
    where: str,
    span: dict,
    attributes: dict[str, Any],
    trace_name: str | None,
    session: str | None,
    call_id: str | None,
) -> _Span:
    name = _span_name(span, where)
    label = _label(where, name)
    trace_id = _normalize_id(span.get("trace_id"), TRACE_ID_BYTES, "trace_id", label)
    span_id = _normalize_id(span.get("span_id"), SPAN_ID_BYTES, "span_id", label)
    error, message = _status(span.get("status"), label, "code", "message")
    events = _events(span.get("events"), label, _plain_attributes)
    return _Span(
        where=label,
        name=name,
        trace_id=trace_id,
        span_id=span_id,
        attributes=attributes,
        start_nanos=_unix_nanos(span.get("start_time_unix_nano"), "start_time_unix_nano", label),
        end_nanos=_unix_nanos(span.get("end_time_unix_nano"), "end_time_unix_nano", label),
        error=error,
        status_message=message,
        exceptions=_exceptions(events),
        parent_id=_optional_id(span.get("parent_span_id"), SPAN_ID_BYTES),
        kind=_kind(attributes),
        input=attributes.get(INPUTS),
        output=attributes.get(OUTPUTS),
        trace_name=trace_name,
        session_id=session,
        call_id=call_id,
    )
