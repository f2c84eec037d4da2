"""Months as the tallies count them: a month is named by its first day (a date) or by
"YYYY-MM", and holds the runs whose own clock started in it, read in TALLY_TIME_ZONE."""

from __future__ import annotations

import re
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from django.conf import settings
from django.utils import timezone

_MONTH = re.compile(r"([0-9]{4})-([0-9]{2})")
# The months a URL or a command may name: a margin on each side of any real one.
FIRST_YEAR, LAST_YEAR = 1900, 9000


def tally_zone() -> ZoneInfo:
    return ZoneInfo(settings.TALLY_TIME_ZONE)


def month_parse(text: str | None) -> date | None:
    """The month "YYYY-MM" names (its first day), or None when it names none."""
    found = _MONTH.fullmatch((text or "").strip())
    if not found:
        return None
    year, month = int(found[1]), int(found[2])
    if not (FIRST_YEAR <= year <= LAST_YEAR and 1 <= month <= 12):
        return None
    return date(year, month, 1)


def month_key(month: date) -> str:
    return f"{month.year:04d}-{month.month:02d}"


def month_label(month: date) -> str:
    return month.strftime("%b %Y")


def month_add(month: date, months: int) -> date:
    index = month.year * 12 + month.month - 1 + months
    return date(index // 12, index % 12 + 1, 1)


def month_of(moment: datetime, zone: ZoneInfo) -> date:
    """The month an instant falls in, in `zone`."""
    local = moment.astimezone(zone)
    return date(local.year, local.month, 1)


def month_start(month: date, zone: ZoneInfo) -> datetime:
    """The instant a month begins in `zone` (midnight there, whatever the offset)."""
    return datetime.combine(month, time.min, tzinfo=zone)


def month_ends(month: date, zone: ZoneInfo) -> datetime:
    return month_start(month_add(month, 1), zone)


def current_month(zone: ZoneInfo | None = None) -> date:
    return month_of(timezone.now(), zone or tally_zone())


def months_between(first: date, last: date) -> list[date]:
    """Every month from `first` to `last`, both included (none when last is earlier)."""
    months = []
    month = first
    while month <= last:
        months.append(month)
        month = month_add(month, 1)
    return months


def days_since_end(month: date, zone: ZoneInfo, now: datetime | None = None) -> float:
    """Days since the month ended (negative while it lasts)."""
    elapsed = (now or timezone.now()) - month_ends(month, zone)
    return elapsed / timedelta(days=1)
