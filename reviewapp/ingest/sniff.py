"""Telling a binary file from a trace before any of it is ingested: an image, an archive or
any other bytes that are not UTF-8 text are refused as such, never stored as "lines"."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

from reviewapp.ingest.files import GZIP_MAGIC

HEAD_BYTES = 64 * 1024
# Magic numbers of what people upload by mistake.
MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "PNG image"),
    (b"\xff\xd8\xff", "JPEG image"),
    (b"GIF87a", "GIF image"),
    (b"GIF89a", "GIF image"),
    (b"%PDF-", "PDF document"),
    (b"PK\x03\x04", "ZIP archive (or an Office document)"),
    (b"\x7fELF", "program (ELF)"),
    (b"BZh", "bzip2 archive"),
    (b"\xfd7zXZ\x00", "xz archive"),
    (b"7z\xbc\xaf\x27\x1c", "7-Zip archive"),
    (b"\x28\xb5\x2f\xfd", "Zstandard archive"),
    (b"SQLite format 3\x00", "SQLite database"),
)
EXPECTED = (
    "send JSON Lines, an OpenTelemetry, Jaeger, Tempo or Langfuse JSON export, or a gzip of one"
)


# Past this share of bytes that text never holds (NUL and other control characters, or
# bytes that are no UTF-8), the head is binary; a trace with a damaged line or two stays
# text, and those lines are rejected one by one.
MAX_BINARY_SHARE = 0.05
_TEXT_CONTROLS = frozenset("\t\n\r\f")


def binary_kind(head: bytes) -> str | None:
    """What binary data `head` (the first bytes of a file) is, or None for text."""
    for magic, kind in MAGIC:
        if head.startswith(magic):
            return kind
    if not head:
        return None
    text = head.decode("utf-8", errors="replace")
    odd = sum(
        1
        for char in text
        if char == "\ufffd" or (char < " " and char not in _TEXT_CONTROLS) or char == "\x7f"
    )
    return "binary file" if odd > MAX_BINARY_SHARE * len(text) else None


def file_binary_kind(path: str | Path) -> str | None:
    """What binary data a file (or the file inside its gzip) is, or None for text."""
    with open(path, "rb") as stream:
        head = stream.read(HEAD_BYTES)
    if head.startswith(GZIP_MAGIC):
        try:
            with gzip.open(path, "rb") as inflated:
                head = inflated.read(HEAD_BYTES)
        except (OSError, EOFError, zlib.error):
            return None  # a damaged gzip: the pipeline says so, line by line
    return binary_kind(head[:HEAD_BYTES])


def refusal(kind: str) -> str:
    return f"this is a {kind}, not a trace: {EXPECTED}"
