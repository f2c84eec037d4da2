"""A window of whole days (UTC), as reports count by: its days, its ISO weeks (each named by
its Monday), and read from what people type or pages send."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from django.utils import timezone

MAX_DAYS = 366


class WindowError(ValueError):
    """A window that cannot be read; the message says why."""


@dataclass(frozen=True)
class Window:
    since: date
    until: date  # included

    @classmethod
    def last(cls, days: int, *, today: date | None = None) -> Window:
        today = today or timezone.now().astimezone(UTC).date()
        return cls(today - timedelta(days=days - 1), today)

    @classmethod
    def read(cls, since: str | None, until: str | None, *, default_days: int = 28) -> Window:
        """From ISO dates (either may be missing); WindowError when they cannot be read,
        are in the wrong order, or span more than MAX_DAYS."""
        fallback = cls.last(default_days)
        try:
            end = date.fromisoformat(until) if until else fallback.until
            start = date.fromisoformat(since) if since else end - timedelta(days=default_days - 1)
        except ValueError:
            raise WindowError("dates are written YYYY-MM-DD") from None
        if start > end:
            raise WindowError(f"{start} is after {end}")
        if (end - start).days >= MAX_DAYS:
            raise WindowError(f"a window is at most {MAX_DAYS} days")
        return cls(start, end)

    @property
    def start(self) -> datetime:
        return datetime.combine(self.since, time.min, tzinfo=UTC)

    @property
    def end(self) -> datetime:
        """The first moment after the window."""
        return datetime.combine(self.until + timedelta(days=1), time.min, tzinfo=UTC)

    @property
    def days(self) -> list[date]:
        return [self.since + timedelta(days=i) for i in range((self.until - self.since).days + 1)]

    @property
    def weeks(self) -> list[date]:
        first = monday_of(self.since)
        return [first + timedelta(weeks=i) for i in range((self.until - first).days // 7 + 1)]

    def query(self) -> str:
        return f"since={self.since.isoformat()}&until={self.until.isoformat()}"

    def __str__(self) -> str:
        return f"{self.since.isoformat()} to {self.until.isoformat()}"


def monday_of(day: date) -> date:
    return day - timedelta(days=day.weekday())
