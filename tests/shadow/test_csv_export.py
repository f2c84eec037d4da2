"""The CSV writer every export uses: RFC 4180, a header row, UTF-8, formula-like text
neutralised, a safe file name."""

import csv
import io
from datetime import date

from reviewapp.infra.csv_export import (
    csv_response,
    csv_text,
    neutralised,
    safe_file_name,
)


def test_formula_like_text_is_neutralised_and_numbers_are_not():
    for text in ("=1+2", "+SUM(A1)", "-2+3", "@cmd", "\tx", "\rx"):
        assert neutralised(text) == "'" + text
    assert neutralised("refund=yes") == "refund=yes"
    assert neutralised(-3) == "-3" and neutralised(2.5) == "2.5"
    assert neutralised(None) == "" and neutralised(True) == "true"
    assert neutralised(date(2026, 12, 1)) == "2026-12-01"


def test_the_file_is_rfc_4180_with_a_header():
    text = csv_text(
        ["action", "count"],
        [['say "hi", then', 3], ["two\nlines", 0], ['=HYPERLINK("x")', -1]],
    )
    assert text.startswith("action,count\r\n")
    assert text.endswith("\r\n")
    assert '"say ""hi"", then",3\r\n' in text
    rows = list(csv.reader(io.StringIO(text, newline="")))
    assert rows == [
        ["action", "count"],
        ['say "hi", then', "3"],
        ["two\nlines", "0"],
        ['\'=HYPERLINK("x")', "-1"],
    ]


def test_file_names_are_safe():
    assert safe_file_name("shadow v3 draft/../etc") == "shadow-v3-draft-..-etc.csv"
    assert safe_file_name("../..") == "export.csv"
    assert safe_file_name("ok_name-1", "json") == "ok_name-1.json"
    assert len(safe_file_name("x" * 500)) == 104


def test_the_response_is_an_utf8_attachment():
    response = csv_response("blocked counts", ["value"], [["réfund"]])
    assert response["Content-Type"] == "text/csv; charset=utf-8; header=present"
    assert response["Content-Disposition"] == 'attachment; filename="blocked-counts.csv"'
    assert response.content.decode("utf-8") == "value\r\nréfund\r\n"
