"""Settings read from the environment, typed: a value that is not what its variable must
hold stops the start with ImproperlyConfigured naming the variable; unset or empty is the
default."""

import json
import os
from collections.abc import Callable

from django.core.exceptions import ImproperlyConfigured


def _parsed[T](name: str, default: T, parse: Callable[[str], T], what: str) -> T:
    """The variable read by `parse`; unset or empty is `default`, a value `parse` refuses
    stops the start, naming the variable and what it must be."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return parse(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be {what}, got {raw!r}") from exc


def _boolean(raw: str) -> bool:
    if raw.lower() in ("1", "true", "yes", "on"):
        return True
    if raw.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(raw)


def env_bool(name: str, default: bool) -> bool:
    return _parsed(name, default, _boolean, "a boolean")


def env_int(name: str, default: int) -> int:
    return _parsed(name, default, int, "an integer")


def env_float(name: str, default: float) -> float:
    return _parsed(name, default, float, "a number")


def env_list(name: str, default: list[str]) -> list[str]:
    def items(raw: str) -> list[str]:
        return [item.strip() for item in raw.split(",") if item.strip()]

    return _parsed(name, default, items, "a comma-separated list")


def env_days_by_source(name: str) -> dict[str, int]:
    """A JSON object of source -> days (retention windows per source)."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be a JSON object, got {raw!r}") from exc
    if not isinstance(parsed, dict) or not all(
        isinstance(days, int) and not isinstance(days, bool) and days >= 0
        for days in parsed.values()
    ):
        raise ImproperlyConfigured(f"{name} must map each source to a number of days")
    return {str(source): days for source, days in parsed.items()}
