"""Settings read from the environment, typed: a value that is not what its variable must
hold stops the start with ImproperlyConfigured naming the variable; unset or empty is the
default."""

import json
import os

from django.core.exceptions import ImproperlyConfigured


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    if raw.lower() in ("1", "true", "yes", "on"):
        return True
    if raw.lower() in ("0", "false", "no", "off"):
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean, got {raw!r}")


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from exc


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}") from exc


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
