"""CSV files that people open in spreadsheets, written one way everywhere (shadow counts,
tallies, any export): RFC 4180 (comma, CRLF, a field quoted when it holds a comma, a
quote or a line break, a quote doubled), UTF-8, a header row first, and a safe file name.

Text from traces reaches these cells (action names, sources, agents), and a spreadsheet
runs a cell starting with = + - @ (or a tab or carriage return before one) as a formula:
such a text cell gets a leading apostrophe, as OWASP's CSV injection advice says. Numbers
are written as they are (-3 is a number to a spreadsheet, not a formula)."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from django.http import HttpResponse

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
CONTENT_TYPE = "text/csv; charset=utf-8; header=present"
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def neutralised(value: Any) -> str:
    """A cell's text: numbers and dates as they are, None empty, any other text with a
    leading apostrophe when a spreadsheet would read it as a formula."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | Decimal):
        return str(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    text = str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def csv_text(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """The whole file: the header row, then every row, each cell neutralised."""
    out = io.StringIO()
    writer = csv.writer(out, dialect="excel", lineterminator="\r\n", quoting=csv.QUOTE_MINIMAL)
    writer.writerow([neutralised(name) for name in header])
    for row in rows:
        writer.writerow([neutralised(cell) for cell in row])
    return out.getvalue()


def safe_file_name(stem: str, extension: str = "csv") -> str:
    """A file name any system takes: letters, digits, dot, dash and underscore only, no
    leading dot, at most 100 characters before the extension."""
    cleaned = _UNSAFE_NAME.sub("-", stem).strip(".-_")[:100] or "export"
    return f"{cleaned}.{extension}"


def csv_response(stem: str, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> HttpResponse:
    """An attachment download of the file."""
    response = HttpResponse(csv_text(header, rows).encode("utf-8"), content_type=CONTENT_TYPE)
    response["Content-Disposition"] = f'attachment; filename="{safe_file_name(stem)}"'
    response["X-Content-Type-Options"] = "nosniff"
    return response
