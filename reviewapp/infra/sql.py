"""Pieces of SQL that read the same on PostgreSQL and on SQLite (the bare-machine
default), for the few reports written in SQL: JSON arrays as rows, a JSON object's text
field, JSON held in a line's bytes, a timestamp's UTC day and ISO week (Monday), and a
sorted, de-duplicated list of texts joined by commas. Values are passed as parameters,
never formatted in."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from django.db import connection


def _postgresql() -> bool:
    return connection.vendor == "postgresql"


def json_elements(expression: str) -> str:
    """A JSON array's elements as text rows, for a FROM clause: `FROM ... AS e`, read as
    `e.value` (it may name columns of tables before it)."""
    if _postgresql():
        return f"jsonb_array_elements_text({expression})"
    return f"json_each({expression})"


def json_text(expression: str, key: str) -> str:
    """A JSON object's field as text (NULL when absent); `key` is a constant of ours."""
    if not key.replace("_", "").isalnum():
        raise ValueError(f"not a plain key: {key!r}")
    if _postgresql():
        return f"({expression} ->> '{key}')"
    return f"json_extract({expression}, '$.{key}')"


def bytes_json(expression: str) -> str:
    """A JSON value from the bytes of a line that held it (a native record's line: UTF-8,
    a byte order mark it may open with left out, as ingest read it)."""
    if _postgresql():
        return f"(ltrim(convert_from({expression}, 'UTF8'), chr(65279))::jsonb)"
    return f"ltrim(CAST({expression} AS TEXT), char(65279))"


def day_of(expression: str) -> str:
    """The UTC day of a timestamp column."""
    if _postgresql():
        return f"(({expression}) AT TIME ZONE 'UTC')::date"
    return f"date({expression})"


def week_of(expression: str) -> str:
    """The Monday starting the ISO week of a timestamp column (UTC)."""
    if _postgresql():
        return f"date_trunc('week', ({expression}) AT TIME ZONE 'UTC')::date"
    return f"date({expression}, 'weekday 0', '-6 days')"


def sorted_list(select_distinct: str) -> str:
    """A scalar subquery: the values of `select_distinct` (a SELECT DISTINCT of one column
    named s) sorted and joined by commas; NULL when there are none."""
    if _postgresql():
        return f"(SELECT string_agg(s, ',' ORDER BY s) FROM ({select_distinct}) listed)"
    return f"(SELECT group_concat(s, ',') FROM ({select_distinct} ORDER BY s) listed)"


def timestamp_param(moment: datetime) -> Any:
    """A datetime as raw SQL compares it with a DateTimeField column."""
    return connection.ops.adapt_datetimefield_value(moment)


def as_date(value: Any) -> date:
    """A day as read back: PostgreSQL gives a date, SQLite its text."""
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    return date.fromisoformat(str(value)[:10])


def placeholders(count: int) -> str:
    return ", ".join(["%s"] * count)
