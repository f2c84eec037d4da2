"""Reading the values inside spans: ids, times, JSON inside strings and OTLP AnyValues,
strictly (what cannot be read raises ExternalFormatError naming the span)."""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec


class ExternalFormatError(ValueError):
    """An external trace document that cannot be converted; the message is a one-line reason."""


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


# One decoder for every call: json.loads with hooks builds a new one each time.
_STRICT_JSON = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)


def _loads(text: str) -> tuple[bool, Any]:
    """Strict JSON (no NaN, no infinite numbers, no unpaired surrogate escapes, which could not
    be stored): (True, value) or (False, None)."""
    try:
        # The C decoder first: what it accepts, the strict reading accepts the same (it
        # refuses NaN, infinite numbers and unpaired surrogates itself); what it refuses is
        # read again by the strict reading, which decides.
        return True, msgspec.json.decode(text)
    except (msgspec.DecodeError, UnicodeEncodeError):
        pass
    try:
        value = _STRICT_JSON.decode(text)
        if _SURROGATE_ESCAPE.search(text):
            json.dumps(value, ensure_ascii=False).encode("utf-8")
    except (ValueError, RecursionError):  # UnicodeEncodeError is a ValueError
        return False, None
    return True, value


# How JSON (or a Python repr) opens: not "[The Best ...](url)", which is Markdown.
_JSON_OPENING = re.compile(
    r"\s*(\{\s*[\"'}]|\[\s*([\"'{\[\]\-0-9]|true|false|null|None|True|False))"
)


def _looks_like_json(text: str) -> bool:
    return _JSON_OPENING.match(text) is not None


def _decode_json_text(text: str) -> tuple[bool, Any]:
    """JSON-decode text; a JSON string that itself holds a JSON object or array is unwrapped once."""
    ok, value = _loads(text)
    if ok and isinstance(value, str) and _looks_like_json(value):
        inner_ok, inner = _loads(value)
        if inner_ok:
            return True, inner
    return ok, value


MAX_OPAQUE_ID_LENGTH = 200


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _normalize_id(raw: Any, size: int, what: str, where: str) -> str:
    """A trace or span id as lowercase hex of ``size`` bytes; any other text id (Phoenix's
    sanitised data, Langfuse's UUIDs, "trace-1") as it is: an opaque id is still the same
    id wherever it comes back, which is all an identity needs."""
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
    if found is None and isinstance(raw, str):
        text = raw.strip()
        if text.strip("0") and len(text) <= MAX_OPAQUE_ID_LENGTH and not _CONTROL.search(text):
            return text
    if found is None:
        raise ExternalFormatError(
            f"{where}: {what} {_quote(raw)} is not a {size}-byte id (hex or base64) "
            f"nor a text id (1 to {MAX_OPAQUE_ID_LENGTH} characters)"
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
    # isoformat is faster than strftime; UTC's "+00:00" is written "Z"
    return moment.isoformat(timespec="microseconds")[:-6] + "Z"


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
