"""OpenTelemetry tool spans into native trace records (spec/traces.md).

Pure: standard library only, no Django, no I/O. Two external shapes are read:

* ``"otlp"``: an OTLP/JSON ``TracesData`` document (``resourceSpans``). Accepted variants:
  spec encoding (hex ids, decimal-string nanos, integer enums), the JS SDK's numeric
  ``intValue``, protobuf ``MessageToJson`` output (base64 ids, enum names such as
  ``STATUS_CODE_ERROR``), snake_case keys (``resource_spans``, ``trace_id`` ...) and the old
  ``instrumentationLibrarySpans``.
* ``"otel-span"``: one Python ``ConsoleSpanExporter`` / ``ReadableSpan.to_json()`` span
  (``context.trace_id``, ``0x`` ids, ISO-8601 times, attributes as a plain object).

A tool span is one with ``gen_ai.operation.name == "execute_tool"``, a name starting with
``"execute_tool "``, or ``openinference.span.kind == "TOOL"``. Every other span is skipped
without being checked. Each tool span gives a ``tool_call`` record immediately followed by
its ``tool_observation`` record.

Choices made here:

* **Order.** Records follow document order (resourceSpans, then scopeSpans, then spans), never
  timestamps: the engine trusts line order only and clocks disagree. SDK exporters write a span
  when it ends, so document order is roughly completion order.
* **All or nothing.** A document that is an external format but cannot be read (the envelope
  has the wrong shape, or a *tool* span has an unusable trace/span id, time, status, event or
  attribute) raises ``ExternalFormatError`` naming the span; no span is silently dropped.
  A document with no tool spans converts to ``[]``. ``convert_document`` on something that is
  not an external format (a native record) also raises ``ExternalFormatError``.
* **Ids.** ``runId`` is the trace id as 32 lowercase hex digits; ids may arrive as hex of any
  case, with ``0x``, as base64 of the right byte length, or as a JSON integer. An all-zero id
  is invalid. ``observationId`` is always ``otel:{traceId}:{spanId}``; the same string is the
  ``toolCallId`` when the span carries no call id, and then both records get
  ``"syntheticToolCallId": true``. An array call id yields its element starting ``call_`` or
  ``toolu_``, else its last element.
* **Times.** Nanoseconds are parsed as exact integers (never through float) and written as
  RFC 3339 UTC with microseconds (``2026-11-30T01:29:25.647392Z``, truncated, not rounded).
  The nanoseconds are kept as decimal strings under ``startTimeUnixNano`` /
  ``endTimeUnixNano`` (for ``otel-span`` they are derived from the ISO text; an integer there is
  taken as nanoseconds). A missing or zero time gives no ``startedAt`` / ``completedAt``. Both
  records carry the times.
* **Nested JSON** (arguments and results inside string attributes) is decoded strictly: NaN,
  infinite numbers or an unpaired surrogate escape make it "not JSON".
* **Arguments.** A JSON object (also one JSON-encoded twice) or a ``kvlistValue`` becomes
  ``arguments``; anything else is kept as ``{"_raw": ...}``. Not captured: no ``arguments``.
* **Result.** Read from ``gen_ai.tool.call.result``, then ``output.value`` (then a few framework
  keys). A JSON object payload gives the provenance keys (``ExtractionKeys``) and the value:
  the first ``keys.value`` entry holding an object (other non-provenance payload keys are kept
  under ``payloadExtra``), else the payload minus the provenance keys used (no ``value`` when
  nothing is left). Any other JSON gives ``{"result": <value>}``; plain text gives
  ``{"result": <text>}`` with no error. Text that starts like JSON (``{`` / ``[``) but does not
  parse (cut by an attribute length limit, or a Python repr) gives ``{"result": <text>}`` and
  the error ``UNPARSEABLE_RESULT``. ``"__REDACTED__"`` gives no value and the error
  ``RESULT_REDACTED``: a withheld result must not look like one. A missing result gives no
  value and no error of its own.
* **Provenance.** ``source`` must be a non-empty string, else ``gen_ai.data_source.id``, else the
  tool name, with ``"sourceInferred": true``. ``sourceRevision`` must be an int, else it is
  dropped and kept as ``revisionRaw``; a non-string ``source`` / ``revisionDomain`` / ``entity``
  likewise becomes ``sourceRaw`` / ``revisionDomainRaw`` / ``entityRaw`` (an integer entity is
  written as a string). A non-boolean ``fallback`` counts by truthiness and is kept as
  ``fallbackRaw``. Keys are looked up at the top level of the payload only, first present wins.
* **Errors**, in this order: payload ``errors`` then payload ``warnings`` (the spec counts
  warnings as errors; ``ExtractionKeys(warnings=())`` turns that off) — strings and objects kept
  as they are, except an object whose ``field`` is not a string loses it (kept as ``fieldRaw``,
  so the error concerns every field) and any other item becomes
  ``{"code": "UNRECOGNIZED_ERROR", "message": <its JSON>}``; ``TOOL_ERROR`` for an MCP result
  with ``isError: true``; ``UNPARSEABLE_RESULT`` / ``RESULT_REDACTED``; ``SPAN_ERROR`` when the
  span status is ERROR (message: status message, else the first exception message, else
  ``error.type``; ``errorType`` holds ``error.type``); then one ``{"code": exception.type,
  "message": exception.message}`` per ``exception`` event, whatever the status (the semantic
  conventions keep handled errors off spans). ``errors`` is omitted when empty.
* ``ok`` on the ``tool_call`` is false exactly when the span status is ERROR.
* No deduplication: the same call id on two spans gives two ``tool_call`` records, which the
  engine reports as ``duplicate-tool-call-id``.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

OTLP = "otlp"
OTEL_SPAN = "otel-span"


class ExternalFormatError(ValueError):
    """An external trace document that cannot be converted; the message is a one-line reason."""


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

TOOL_NAME_PREFIX = "execute_tool "
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
ERROR_STATUS = frozenset({"2", "ERROR", "STATUS_CODE_ERROR"})

TRACE_ID_BYTES = 16
SPAN_ID_BYTES = 8
MAX_NESTING = 64
MAX_NANOS = 10**20  # year 5138; keeps every time inside datetime's range
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_HEX = re.compile(r"[0-9a-fA-F]+")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_DECIMAL = re.compile(r"[0-9]{1,20}")
_ISO_TIME = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2}):([0-9]{2})"
    r"(?:\.([0-9]{1,9}))?(Z|z|[+-][0-9]{2}:?[0-9]{2})?"
)
_ANY_VALUE_KEYS = {
    "stringValue": "string",
    "string_value": "string",
    "boolValue": "bool",
    "bool_value": "bool",
    "intValue": "int",
    "int_value": "int",
    "doubleValue": "double",
    "double_value": "double",
    "arrayValue": "array",
    "array_value": "array",
    "kvlistValue": "kvlist",
    "kvlist_value": "kvlist",
    "bytesValue": "bytes",
    "bytes_value": "bytes",
}
_NON_FINITE = {"NaN", "Infinity", "-Infinity"}


# --- public interface ---------------------------------------------------------------


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


def convert_document(document: Any, keys: ExtractionKeys = DEFAULT_KEYS) -> list[dict]:
    """Native record dicts for every tool span of ``document``, in document order: each span's
    ``tool_call`` then its ``tool_observation``. Raises ExternalFormatError when the document
    is not an external format, or is one but cannot be read."""
    kind = detect_format(document)
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


# --- small helpers ------------------------------------------------------------------


def _quote(value: Any, limit: int = 60) -> str:
    """A short one-line rendering of a value for an error message."""
    try:
        text = json.dumps(value, ensure_ascii=True)
    except (TypeError, ValueError, RecursionError):
        text = f"({_type_name(value)})"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _get(obj: Mapping[str, Any], camel: str, snake: str | None = None) -> Any:
    """The value of a protobuf JSON field under its lowerCamelCase or original name."""
    if camel in obj:
        return obj[camel]
    return obj.get(snake) if snake else None


def _list(value: Any, where: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ExternalFormatError(f"{where} must be an array, not {_type_name(value)}")
    return value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"{text} is out of range")
    return number


def _loads(text: str) -> tuple[bool, Any]:
    """Strict JSON (no NaN, no infinite numbers, no unpaired surrogate escapes, which could not
    be stored): (True, value) or (False, None)."""
    try:
        value = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
        if _SURROGATE_ESCAPE.search(text):
            json.dumps(value, ensure_ascii=False).encode("utf-8")
    except (ValueError, RecursionError):  # UnicodeEncodeError is a ValueError
        return False, None
    return True, value


def _looks_like_json(text: str) -> bool:
    return text.lstrip().startswith(("{", "["))


def _decode_json_text(text: str) -> tuple[bool, Any]:
    """JSON-decode text; a JSON string that itself holds a JSON object or array is unwrapped once."""
    ok, value = _loads(text)
    if ok and isinstance(value, str) and _looks_like_json(value):
        inner_ok, inner = _loads(value)
        if inner_ok:
            return True, inner
    return ok, value


# --- ids and times ------------------------------------------------------------------


def _normalize_id(raw: Any, size: int, what: str, where: str) -> str:
    """A trace or span id as lowercase hex of ``size`` bytes."""
    found: str | None = None
    if _is_int(raw):
        if 0 <= raw < 1 << (8 * size):
            found = f"{raw:0{2 * size}x}"
    elif isinstance(raw, str):
        text = raw.strip()
        prefixed = text[:2] in ("0x", "0X")
        if prefixed:
            text = text[2:]
        if len(text) == 2 * size and _HEX.fullmatch(text):
            found = text.lower()
        elif not prefixed and text:
            for altchars in (None, b"-_"):
                try:
                    decoded = base64.b64decode(text, altchars=altchars, validate=True)
                except ValueError:
                    continue
                if len(decoded) == size:
                    found = decoded.hex()
                    break
    if found is None:
        raise ExternalFormatError(
            f"{where}: {what} {_quote(raw)} is not a {size}-byte id (hex or base64)"
        )
    if found.strip("0") == "":
        raise ExternalFormatError(f"{where}: {what} is all zeros, which is not a valid id")
    return found


def _unix_nanos(raw: Any, what: str, where: str) -> int | None:
    """Exact integer nanoseconds from a decimal string or a JSON integer; 0 or absent is None."""
    if raw is None:
        return None
    if _is_int(raw):
        nanos = raw
    elif isinstance(raw, str) and _DECIMAL.fullmatch(raw.strip()):
        nanos = int(raw.strip())
    else:
        raise ExternalFormatError(
            f"{where}: {what} {_quote(raw)} is not an integer count of nanoseconds"
        )
    if not 0 <= nanos < MAX_NANOS:
        raise ExternalFormatError(f"{where}: {what} {_quote(raw)} is out of range")
    return nanos or None


def _iso_nanos(raw: Any, what: str, where: str) -> int | None:
    """Exact integer nanoseconds since the epoch from an ISO-8601 / RFC 3339 time (or from an
    integer count of nanoseconds, as any-agent writes)."""
    if raw is None:
        return None
    if _is_int(raw):
        return _unix_nanos(raw, what, where)
    match = _ISO_TIME.fullmatch(raw.strip()) if isinstance(raw, str) else None
    if match is None:
        raise ExternalFormatError(f"{where}: {what} {_quote(raw)} is not an ISO-8601 time")
    year, month, day, hour, minute, second, fraction, offset = match.groups()
    try:
        moment = datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second), tzinfo=UTC
        )
    except ValueError:
        raise ExternalFormatError(f"{where}: {what} {_quote(raw)} is not a valid time") from None
    delta = moment - _EPOCH
    seconds = delta.days * 86400 + delta.seconds
    if offset and offset not in ("Z", "z"):
        sign = -1 if offset[0] == "-" else 1
        digits = offset[1:].replace(":", "")
        seconds -= sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
    nanos = seconds * 10**9 + int((fraction or "").ljust(9, "0"))
    if not 0 <= nanos < MAX_NANOS:
        raise ExternalFormatError(f"{where}: {what} {_quote(raw)} is out of range")
    return nanos or None


def _rfc3339(nanos: int) -> str:
    seconds, rest = divmod(nanos, 10**9)
    moment = _EPOCH + timedelta(seconds=seconds, microseconds=rest // 1000)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _is_error_status(code: Any) -> bool:
    if _is_int(code):
        return code == 2
    return isinstance(code, str) and code.strip().upper() in ERROR_STATUS


# --- OTLP/JSON ----------------------------------------------------------------------


def _any_value(value: Any, where: str, depth: int = 0) -> Any:
    """Decode one OTLP AnyValue into plain JSON."""
    if depth > MAX_NESTING:
        raise ExternalFormatError(f"{where}: attribute value nested too deeply")
    if not isinstance(value, dict):
        raise ExternalFormatError(
            f"{where}: attribute value must be an AnyValue object, not {_type_name(value)}"
        )
    present = [key for key in value if key in _ANY_VALUE_KEYS and value[key] is not None]
    if not present:
        return None
    if len(present) > 1:
        raise ExternalFormatError(
            f"{where}: attribute value has both {present[0]} and {present[1]}"
        )
    key = present[0]
    kind, raw = _ANY_VALUE_KEYS[key], value[key]
    if kind in ("string", "bytes") and isinstance(raw, str):
        return raw  # bytes stay base64 text
    if kind == "bool" and isinstance(raw, bool):
        return raw
    if kind == "int":
        if _is_int(raw):
            return raw
        if isinstance(raw, str) and re.fullmatch(r"-?[0-9]{1,40}", raw.strip()):
            return int(raw.strip())
    if kind == "double":
        if _is_int(raw) or isinstance(raw, float):
            number = float(raw) if _is_int(raw) and abs(raw) < 2**53 else raw
            if isinstance(number, float) and not math.isfinite(number):
                return "NaN" if math.isnan(number) else ("Infinity" if number > 0 else "-Infinity")
            return number
        if isinstance(raw, str):
            if raw in _NON_FINITE:
                return raw
            ok, number = _loads(raw.strip())
            if ok and (_is_int(number) or isinstance(number, float)):
                return float(number) if _is_int(number) and abs(number) < 2**53 else number
    if kind == "array" and isinstance(raw, dict):
        items = _list(raw.get("values"), f"{where}.{key}.values")
        return [
            _any_value(item, f"{where}.{key}.values[{index}]", depth + 1)
            for index, item in enumerate(items)
        ]
    if kind == "kvlist" and isinstance(raw, dict):
        return _key_values(raw.get("values"), f"{where}.{key}.values", depth + 1)
    raise ExternalFormatError(f"{where}: {key} {_quote(raw)} is not valid")


def _key_values(items: Any, where: str, depth: int = 0) -> dict[str, Any]:
    """A list of OTLP KeyValue into a dict; a repeated key keeps its last value."""
    decoded: dict[str, Any] = {}
    for index, item in enumerate(_list(items, where)):
        if not isinstance(item, dict) or not isinstance(item.get("key"), str):
            raise ExternalFormatError(f"{where}[{index}] must be a {{key, value}} object")
        key = item["key"]
        value = item.get("value")
        value = _any_value({} if value is None else value, f"{where}[{index}]", depth)
        decoded.pop(key, None)
        decoded[key] = value
    return decoded


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


# --- ConsoleSpanExporter span -------------------------------------------------------


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


# --- span → records -----------------------------------------------------------------


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
    items = []
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
