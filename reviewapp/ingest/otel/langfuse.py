"""Langfuse trace exports into _Span: the UI's download (`{"trace": {...}, "observations":
[...]}`, input, output and metadata as JSON text, every observation listed again under
`trace.observations`) and the "merged" export (metadata an object, input and output objects
or text). An observation's `metadata.attributes` are its OpenTelemetry span attributes,
less what Langfuse moved into its `input` and `output`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from reviewapp.ingest.otel.spans import _label, _Raw, _Span, _span_name
from reviewapp.ingest.otel.values import (
    SPAN_ID_BYTES,
    TRACE_ID_BYTES,
    ExternalFormatError,
    _decode_json_text,
    _iso_nanos,
    _list,
    _normalize_id,
    _type_name,
)

MAX_ID_LENGTH = 200


def langfuse_raw_spans(document: dict) -> Iterator[_Raw]:
    trace = document.get("trace")
    trace = trace if isinstance(trace, dict) else {}
    trace_name = trace.get("name") if isinstance(trace.get("name"), str) else None
    session = trace.get("sessionId") if isinstance(trace.get("sessionId"), str) else None
    listed = [("observations", _list(document.get("observations"), "observations"))]
    if "observations" in trace:
        listed.append(("trace.observations", _list(trace["observations"], "trace.observations")))
    seen: set[Any] = set()
    for top, observations in listed:
        for index, observation in enumerate(observations):
            where = f"{top}[{index}]"
            if not isinstance(observation, dict):
                raise ExternalFormatError(
                    f"{where} must be an object, not {_type_name(observation)}"
                )
            key = (observation.get("traceId"), observation.get("id"))
            if isinstance(key[1], str) and key in seen:
                continue  # the same observation listed twice (the copy under trace has less)
            seen.add(key)
            metadata = _metadata(observation.get("metadata"))
            attributes = metadata.get("attributes")
            attributes = attributes if isinstance(attributes, dict) else {}
            kind = observation.get("type")
            yield _Raw(
                where,
                observation,
                observation.get("name"),
                attributes,
                kind.upper() if isinstance(kind, str) else None,
                _reader(where, observation, metadata, trace_name, session),
            )


def _metadata(raw: Any) -> dict[str, Any]:
    if isinstance(raw, str):
        ok, raw = _decode_json_text(raw)
        if not ok:
            return {}
    return raw if isinstance(raw, dict) else {}


def _reader(where, observation, metadata, trace_name, session):
    return lambda: _read_observation(where, observation, metadata, trace_name, session)


def _langfuse_id(raw: Any, size: int, what: str, where: str) -> str:
    """OpenTelemetry ids as lowercase hex; Langfuse's own ids (UUIDs, say) as they are."""
    try:
        return _normalize_id(raw, size, what, where)
    except ExternalFormatError:
        if isinstance(raw, str) and raw.strip() and len(raw) <= MAX_ID_LENGTH:
            return raw.strip()
        raise


def _text_or_json(raw: Any) -> Any:
    """Langfuse's input and output: JSON text is decoded (once, or twice when it was
    encoded twice); other text stays text."""
    if isinstance(raw, str):
        ok, value = _decode_json_text(raw)
        if ok:
            return value
    return raw


def _read_observation(
    where: str, observation: dict, metadata: dict, trace_name: str | None, session: str | None
) -> _Span:
    name = _span_name(observation, where)
    label = _label(where, name)
    trace_id = _langfuse_id(observation.get("traceId"), TRACE_ID_BYTES, "traceId", label)
    span_id = _langfuse_id(observation.get("id"), SPAN_ID_BYTES, "id", label)
    parent = observation.get("parentObservationId")
    parent_id = None
    if isinstance(parent, str) and parent:
        try:
            parent_id = _langfuse_id(parent, SPAN_ID_BYTES, "parentObservationId", label)
        except ExternalFormatError:
            parent_id = None
    attributes = metadata.get("attributes")
    attributes = dict(attributes) if isinstance(attributes, dict) else {}
    level = observation.get("level")
    message = observation.get("statusMessage")
    message = message if isinstance(message, str) and message else None
    exceptions: tuple[dict[str, Any], ...] = ()
    if level == "WARNING":
        exceptions = ({"exception.type": "WARNING", "exception.message": message or "warning"},)
    resource = metadata.get("resourceAttributes")
    scope = metadata.get("scope")
    scope_name = scope.get("name") if isinstance(scope, dict) else None
    kind = observation.get("type")
    return _Span(
        where=label,
        name=name,
        trace_id=trace_id,
        span_id=span_id,
        attributes=attributes,
        start_nanos=_iso_nanos(observation.get("startTime"), "startTime", label),
        end_nanos=_iso_nanos(observation.get("endTime"), "endTime", label),
        error=level == "ERROR",
        status_message=message,
        exceptions=exceptions,
        parent_id=parent_id,
        kind=kind.upper() if isinstance(kind, str) else None,
        resource=resource if isinstance(resource, dict) else {},
        scope=scope_name if isinstance(scope_name, str) else None,
        input=_text_or_json(observation.get("input")),
        output=_text_or_json(observation.get("output")),
        trace_name=trace_name,
        session_id=session,
    )
