"""CSV downloads that a spreadsheet opens safely: streamed, UTF-8, a header row, RFC 4180
quoting (the csv module's), and no cell a spreadsheet would run as a formula.

A text cell that starts with =, +, -, @, a tab or a carriage return is neutralised with a
leading apostrophe (OWASP's advice): spreadsheets show it as text and never evaluate it. So
is one whose first character after white space or line breaks is one of them (spreadsheets
trim them), or a full-width ＝ ＋ － ＠ (a spreadsheet may read them as the ASCII ones).
Numbers are written as numbers (a negative one is not text, and stays as it is). The file
name is reduced to letters, digits, dots, dashes and underscores."""

from __future__ import annotations

import csv
import re
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from django.http import StreamingHttpResponse

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
FORMULA_SIGNS = ("=", "+", "-", "@")
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def safe_cell(value: Any) -> str | int | float | Decimal:
    """A value as it may go into a cell: None is empty, numbers stay numbers, dates are
    ISO 8601, any other value is text, neutralised when it starts like a formula."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | Decimal):
        return value
    if isinstance(value, datetime | date):
        return value.isoformat()
    text = str(value)
    if starts_like_formula(text):
        return "'" + text
    return text


def starts_like_formula(text: str) -> bool:
    """Whether a spreadsheet might take the text for a formula: it starts with one of
    FORMULA_STARTS, or its first character past white space is a formula's sign, in any of
    its compatible forms (NFKC makes full-width ＝ the ASCII =)."""
    if text.startswith(FORMULA_STARTS):
        return True
    first = text.lstrip()[:1]
    return unicodedata.normalize("NFKC", first).startswith(FORMULA_SIGNS)


def safe_file_name(name: str, *, default: str = "export.csv") -> str:
    """A file name with nothing a header, a path or a shell could misread."""
    cleaned = _UNSAFE_NAME.sub("-", name).strip(".-_")[:120]
    return cleaned or default


class _Line:
    """A file-like object the csv writer writes one line into, read back at once."""

    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> int:
        self.text = text
        return len(text)


def csv_lines(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> Iterator[str]:
    """The CSV text of the header and each row, a line at a time (CRLF line ends, fields
    quoted when they must be, quotes doubled: RFC 4180)."""
    line = _Line()
    writer = csv.writer(line, lineterminator="\r\n", quoting=csv.QUOTE_MINIMAL)
    writer.writerow([safe_cell(name) for name in header])
    yield line.text
    for row in rows:
        writer.writerow([safe_cell(value) for value in row])
        yield line.text


def csv_response(
    file_name: str, header: Sequence[str], rows: Iterable[Sequence[Any]]
) -> StreamingHttpResponse:
    """A CSV download streamed row by row, as UTF-8 with a header row."""
    response = StreamingHttpResponse(
        (text.encode("utf-8") for text in csv_lines(header, rows)),
        content_type="text/csv; charset=utf-8",
    )
    response["Content-Disposition"] = attachment(safe_file_name(file_name))
    response["X-Content-Type-Options"] = "nosniff"
    return response


def attachment(file_name: str) -> str:
    """A Content-Disposition header for a download of a file already made safe."""
    return f'attachment; filename="{safe_file_name(file_name)}"'
