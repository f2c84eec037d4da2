"""The generic CSV writer (reviewapp/infra/csv_export.py): what it writes reads back
through Python's csv module, formula-like cells are neutralised, file names are safe, and
the download is streamed as UTF-8 with a header row."""

from __future__ import annotations

import csv
import io
from datetime import date

from hypothesis import given
from hypothesis import strategies as st

from reviewapp.infra.csv_export import csv_lines, csv_response, safe_cell, safe_file_name

HEADER = ("name", "note", "count")


def read_back(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline="")))


@given(
    st.lists(
        st.tuples(st.text(), st.text(alphabet=st.characters(codec="utf-8")), st.integers()),
        max_size=20,
    )
)
def test_what_is_written_reads_back_through_the_csv_module(rows):
    text = "".join(csv_lines(HEADER, rows))
    expected = [list(HEADER)] + [[str(safe_cell(v)) for v in row] for row in rows]
    assert read_back(text) == expected


def test_quotes_commas_and_line_breaks_are_quoted_as_rfc_4180_says():
    text = "".join(csv_lines(HEADER, [['say "hi"', "a,b\nc", 3]]))
    assert text == 'name,note,count\r\n"say ""hi""","a,b\nc",3\r\n'
    assert read_back(text)[1] == ['say "hi"', "a,b\nc", "3"]


def test_a_formula_like_cell_is_neutralised():
    for dangerous in ('=HYPERLINK("http://x")', "+1+1", "-2+3", "@SUM(A1)", "\tx", "\rx"):
        assert safe_cell(dangerous) == "'" + dangerous
        row = read_back("".join(csv_lines(HEADER, [[dangerous, "", 1]])))[1]
        assert row[0] == "'" + dangerous
    # Numbers stay numbers, negative ones too; harmless text is left alone.
    assert safe_cell(-2) == -2
    assert safe_cell("a=b") == "a=b"
    assert safe_cell(None) == ""
    assert safe_cell(True) == "true"
    assert safe_cell(date(2026, 9, 1)) == "2026-09-01"


def test_a_formula_behind_white_space_or_in_full_width_is_neutralised_too():
    """Spreadsheets trim leading white space and line breaks, and may read the full-width
    signs as the ASCII ones."""
    for dangerous in (
        " =1+1",
        '\n=HYPERLINK("http://x")',
        "\r\n+1",
        " \t-2+3",
        "\u3000@SUM(A1)",
        "\xa0=1",
        '＝HYPERLINK("http://x")',
        "＋1",
        "－1",
        "＠SUM(A1)",
        " ＝1",
    ):
        assert safe_cell(dangerous) == "'" + dangerous, repr(dangerous)
        row = read_back("".join(csv_lines(HEADER, [[dangerous, "", 1]])))[1]
        assert row[0] == "'" + dangerous, repr(dangerous)
    for harmless in (" a=b", "\nnote", "１２", "a＝b", ""):
        assert safe_cell(harmless) == harmless, repr(harmless)


def test_file_names_are_made_safe():
    assert safe_file_name("crosscheck-tallies-2026-09.csv") == "crosscheck-tallies-2026-09.csv"
    assert safe_file_name('../../etc/"passwd"\r\n.csv') == "etc-passwd-.csv"
    assert safe_file_name("façade; rm -rf.csv") == "fa-ade-rm--rf.csv"
    assert safe_file_name("...") == "export.csv"


def test_the_download_is_streamed_utf8_with_a_header_row():
    response = csv_response("tallies 2026/09.csv", HEADER, iter([["über", "=1+1", 7]]))
    assert response.streaming
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == 'attachment; filename="tallies-2026-09.csv"'
    body = b"".join(response.streaming_content)
    assert read_back(body.decode("utf-8")) == [list(HEADER), ["über", "'=1+1", "7"]]
