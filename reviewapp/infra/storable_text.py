"""Text PostgreSQL can store: it refuses a NUL character (U+0000) in a text column and in
JSON alike, with a DataError that would be a 500. Input is checked where it is parsed, and
refused naming where the NUL is."""

from __future__ import annotations

from typing import Any

import msgspec

NUL = "\x00"
NUL_REFUSAL = "contains a NUL character (\\u0000), which cannot be stored"


def nul_location(value: Any, where: str = "") -> str | None:
    """Where the first NUL of a decoded JSON value is, as a path ("runId",
    "records[2].name"; a key's own NUL is shown escaped), or None when there is none."""
    if isinstance(value, str):
        return where if NUL in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            path = f"{where}.{key}" if where else str(key)
            if NUL in str(key):
                return path.replace(NUL, "\\u0000")
            found = nul_location(item, path)
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = nul_location(item, f"{where}[{index}]")
            if found is not None:
                return found
    return None


def holds_nul(value: Any) -> bool:
    """Whether a decoded JSON value holds a NUL anywhere: nul_location's answer, first
    screened by the C encoder (which writes a NUL as \\u0000), since nearly nothing holds one."""
    try:
        if b"\\u0000" not in msgspec.json.encode(value):
            return False
    except (TypeError, ValueError):  # what it cannot encode (a lone surrogate) is walked
        pass
    return nul_location(value) is not None
