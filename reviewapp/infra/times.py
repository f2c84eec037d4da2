"""Times as traces write them."""

from __future__ import annotations

from datetime import UTC, datetime


def parse_timestamp(text: str | None) -> datetime | None:
    """An RFC 3339 timestamp from a trace as an aware datetime, or None when it is absent or
    unreadable (timestamps are evidence to show, so a bad one is not an error)."""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
