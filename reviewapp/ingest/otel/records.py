"""A tool span into native records: a tool_call and its tool_observation, with the
result's provenance, value and errors (docs/formats.md says how)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from reviewapp.ingest.otel.spans import (
    OTEL_SPAN,
    OTLP,
    TOOL_NAME_PREFIX,
    _is_console_tool_span,
    _otlp_tool_spans,
    _read_console_span,
    _read_otlp_span,
    _Span,
    detect_format,
)
from reviewapp.ingest.otel.values import (
    ExternalFormatError,
    _decode_json_text,
    _is_int,
    _looks_like_json,
    _quote,
    _rfc3339,
)


@dataclass(frozen=True)
class ExtractionKeys:
    """Where provenance lives in a tool's result payload; each tuple is tried in order."""

    source: tuple[str, ...] = ("source",)
    revision: tuple[str, ...] = ("sourceRevision", "revision")
    revision_domain: tuple[str, ...] = ("revisionDomain", "revision_domain")
    entity: tuple[str, ...] = ("entity",)
    errors: tuple[str, ...] = ("errors",)
    fallback: tuple[str, ...] = ("fallback",)
    value: tuple[str, ...] = ("data", "value", "result")  # the business payload inside the result
    warnings: tuple[str, ...] = ("warnings",)  # merged into errors (spec: errors include warnings)


DEFAULT_KEYS = ExtractionKeys()


REDACTED = "__REDACTED__"


CALL_ID_PREFIXES = ("call_", "toolu_")


CALL_ID_ATTRIBUTES = ("gen_ai.tool.call.id", "tool.id", "tool_call.id", "ai.toolCall.id")


TOOL_NAME_ATTRIBUTES = ("gen_ai.tool.name", "tool.name", "ai.toolCall.name")


ARGUMENT_ATTRIBUTES = (
    "gen_ai.tool.call.arguments",
    "input.value",
    "tool_arguments",
    "gcp.vertex.agent.tool_call_args",
    "ai.toolCall.args",
)


RESULT_ATTRIBUTES = (
    "gen_ai.tool.call.result",
    "output.value",
    "tool_response",
    "gcp.vertex.agent.tool_response",
    "ai.toolCall.result",
)


def convert_document(document: Any, keys: ExtractionKeys = DEFAULT_KEYS) -> list[dict]:
    """Native record dicts for every tool span of ``document``, in document order: each span's
    ``tool_call`` then its ``tool_observation``. Raises ExternalFormatError when the document
    is not an external format, or is one but cannot be read."""
    kind = detect_format(document)
    spans: Iterator[_Span]
    if kind == OTLP:
        spans = (_read_otlp_span(where, raw) for where, raw in _otlp_tool_spans(document))
    elif kind == OTEL_SPAN:
        spans = iter([_read_console_span(document)] if _is_console_tool_span(document) else [])
    else:
        raise ExternalFormatError("not an OTLP/JSON document or an OpenTelemetry span")
    records: list[dict] = []
    for span in spans:
        records.extend(_records(span, keys))
    return records


def _first_attribute(attributes: Mapping[str, Any], names: tuple[str, ...]) -> Any:
    for name in names:
        if attributes.get(name) is not None:
            return attributes[name]
    return None


def _tool_name(span: _Span) -> str:
    for key in TOOL_NAME_ATTRIBUTES:
        value = span.attributes.get(key)
        if isinstance(value, str) and value.strip():
            return value
    name = span.name or ""
    if name.startswith(TOOL_NAME_PREFIX) and name[len(TOOL_NAME_PREFIX) :].strip():
        return name[len(TOOL_NAME_PREFIX) :].strip()
    if name.strip() and name.strip() != TOOL_NAME_PREFIX.strip():
        return name
    raise ExternalFormatError(f"{span.where}: tool span has no tool name")


def _one_call_id(value: Any) -> str | None:
    if isinstance(value, str):
        return value if value.strip() else None
    if _is_int(value):
        return str(value)
    if isinstance(value, list):
        candidates = [one for one in map(_one_call_id, value) if one is not None]
        for candidate in candidates:
            if candidate.startswith(CALL_ID_PREFIXES):
                return candidate
        return candidates[-1] if candidates else None
    return None


def _tool_call_id(attributes: Mapping[str, Any]) -> str | None:
    for key in CALL_ID_ATTRIBUTES:
        found = _one_call_id(attributes.get(key))
        if found is not None:
            return found
    return None


def _arguments(raw: Any) -> dict[str, Any] | None:
    if raw is None:
        return None
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        ok, value = _decode_json_text(raw)
        if ok and isinstance(value, dict):
            return value
    return {"_raw": raw}


def _times(span: _Span) -> dict[str, str]:
    times = {}
    if span.start_nanos is not None:
        times["startedAt"] = _rfc3339(span.start_nanos)
    if span.end_nanos is not None:
        times["completedAt"] = _rfc3339(span.end_nanos)
    if span.start_nanos is not None:
        times["startTimeUnixNano"] = str(span.start_nanos)
    if span.end_nanos is not None:
        times["endTimeUnixNano"] = str(span.end_nanos)
    return times


def _error_items(value: Any) -> list[Any]:
    """Payload errors/warnings as native error items (strings or objects)."""
    if value is None or value is False or value in ("", [], {}):
        return []
    items: list[Any] = []
    for item in value if isinstance(value, list) else [value]:
        if item is None:
            continue
        if isinstance(item, str):
            items.append(item)
        elif isinstance(item, dict):
            field = item.get("field")
            if field is not None and not isinstance(field, str):
                item = {key: one for key, one in item.items() if key != "field"}
                item["fieldRaw"] = field
            items.append(item)
        else:
            items.append({"code": "UNRECOGNIZED_ERROR", "message": _quote(item, 200)})
    return items


class _Payload:
    """Looks keys up in a result payload object, remembering which ones it consulted."""

    def __init__(self, payload: dict[str, Any]):
        self.payload = payload
        self.used: set[str] = set()

    def first(self, names: tuple[str, ...]) -> Any:
        for name in names:
            if name in self.payload:
                self.used.add(name)
                if self.payload[name] is not None:
                    return self.payload[name]
        return None

    def rest(self) -> dict[str, Any]:
        return {key: value for key, value in self.payload.items() if key not in self.used}


def _from_payload(payload: dict[str, Any], keys: ExtractionKeys, observation: dict) -> list:
    """Fill provenance and value from a result object; returns the payload's errors."""
    lookup = _Payload(payload)
    source = lookup.first(keys.source)
    if isinstance(source, str) and source:
        observation["source"] = source
    elif source is not None:
        observation["sourceRaw"] = source
    domain = lookup.first(keys.revision_domain)
    if isinstance(domain, str):
        observation["revisionDomain"] = domain
    elif domain is not None:
        observation["revisionDomainRaw"] = domain
    revision = lookup.first(keys.revision)
    if _is_int(revision):
        observation["sourceRevision"] = revision
    elif revision is not None:
        observation["revisionRaw"] = revision
    entity = lookup.first(keys.entity)
    if isinstance(entity, str):
        observation["entity"] = entity
    elif _is_int(entity):
        observation["entity"] = str(entity)
    elif entity is not None:
        observation["entityRaw"] = entity
    fallback = lookup.first(keys.fallback)
    if fallback is not None:
        observation["fallback"] = bool(fallback)
        if not isinstance(fallback, bool):
            observation["fallbackRaw"] = fallback
    errors = _error_items(lookup.first(keys.errors)) + _error_items(lookup.first(keys.warnings))
    if payload.get("isError") is True:
        errors.append({"code": "TOOL_ERROR", "message": "the tool result has isError: true"})
    for name in keys.value:
        if isinstance(payload.get(name), dict):
            lookup.used.add(name)
            observation["value"] = payload[name]
            extra = lookup.rest()
            if extra:
                observation["payloadExtra"] = extra
            break
    else:
        rest = lookup.rest()
        if rest:
            observation["value"] = rest
    return errors


def _span_errors(span: _Span) -> list[dict[str, Any]]:
    errors: list[dict[str, Any]] = []
    exceptions = []
    for attributes in span.exceptions:
        kind, message = attributes.get("exception.type"), attributes.get("exception.message")
        error: dict[str, Any] = {"code": "EXCEPTION"}
        if isinstance(kind, str) and kind:
            error["code"] = kind
        elif kind is not None:
            error["code"] = _quote(kind, 200)
        if message is not None:
            error["message"] = message if isinstance(message, str) else _quote(message, 200)
        exceptions.append(error)
    if span.error:
        error_type = span.attributes.get("error.type")
        error_type = error_type if isinstance(error_type, str) and error_type else None
        message = span.status_message
        if message is None:
            message = next((e["message"] for e in exceptions if e.get("message")), error_type)
        error = {"code": "SPAN_ERROR"}
        if message:
            error["message"] = message
        if error_type:
            error["errorType"] = error_type
        errors.append(error)
    return errors + exceptions


def _records(span: _Span, keys: ExtractionKeys) -> tuple[dict, dict]:
    span_key = f"otel:{span.trace_id}:{span.span_id}"
    tool = _tool_name(span)
    call_id = _tool_call_id(span.attributes)
    flags = {} if call_id is not None else {"syntheticToolCallId": True}
    common = {"runId": span.trace_id}
    times = _times(span)

    call: dict[str, Any] = {
        **common,
        "type": "tool_call",
        "toolCallId": call_id or span_key,
        **flags,
        "tool": tool,
    }
    arguments = _arguments(_first_attribute(span.attributes, ARGUMENT_ATTRIBUTES))
    if arguments is not None:
        call["arguments"] = arguments
    call["ok"] = not span.error
    call.update(times)

    observation: dict[str, Any] = {
        **common,
        "type": "tool_observation",
        "observationId": span_key,
        "toolCallId": call_id or span_key,
        **flags,
    }
    errors: list[Any] = []
    result = _first_attribute(span.attributes, RESULT_ATTRIBUTES)
    if isinstance(result, str) and result.strip() == REDACTED:
        errors.append(
            {
                "code": "RESULT_REDACTED",
                "message": "the exporter withheld the result (__REDACTED__)",
            }
        )
    elif isinstance(result, str):
        ok, payload = _decode_json_text(result)
        if ok and isinstance(payload, dict):
            errors.extend(_from_payload(payload, keys, observation))
        elif ok:
            observation["value"] = {"result": payload}
        else:
            observation["value"] = {"result": result}
            if _looks_like_json(result):
                errors.append(
                    {
                        "code": "UNPARSEABLE_RESULT",
                        "message": "the result starts like JSON but does not parse (truncated?)",
                    }
                )
    elif isinstance(result, dict):
        errors.extend(_from_payload(result, keys, observation))
    elif result is not None:
        observation["value"] = {"result": result}

    if "source" not in observation:
        data_source = span.attributes.get("gen_ai.data_source.id")
        observation["source"] = (
            data_source if isinstance(data_source, str) and data_source else tool
        )
        observation["sourceInferred"] = True
    errors.extend(_span_errors(span))
    if errors:
        observation["errors"] = errors
    observation.update(times)
    return call, observation
