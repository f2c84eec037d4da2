"""Reading trace files line by line: plain or gzip (found by its magic bytes, whatever the
name), in bounded memory, every physical line numbered and every failure turned into a
line that carries its reason instead of an exception."""

from __future__ import annotations

import gzip
import io
import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, cast

from reviewapp.engine import line_payload

GZIP_MAGIC = b"\x1f\x8b"
MAX_LINE_BYTES = 8 * 1024 * 1024
# What is kept of a line too long to keep whole.
OVERSIZED_PREFIX_BYTES = 4096
# A pretty-printed JSON document (an OTLP export, say) is read whole up to this size:
# parsing holds many times its size in memory.
MAX_DOCUMENT_BYTES = 16 * 1024 * 1024
# What a gzip stream may inflate to before the rest of it is refused (a gzip bomb
# inflates a thousandfold); ingestion passes its setting.
MAX_DECOMPRESSED_BYTES = 4 * 1024**3
# A run of blank lines is read past in bulk; every this many bytes of it, a reader that
# asks is told how far it got (BlankRun), so that its progress moves through the run.
BLANK_RUN_REPORT_BYTES = 8 * 1024 * 1024


class DecompressedTooLarge(OSError):
    """A gzip stream that inflates past its limit."""


class InflateMeter:
    """How far the inflating of a gzip file has got: the bytes given so far against what
    its trailer says it inflates to (ISIZE, the size modulo 2**32 of its last member)."""

    def __init__(self, expected: int | None = None):
        self.expected, self.inflated = expected, 0

    def fraction(self) -> float | None:
        """The share inflated, or None when the trailer cannot tell (several members,
        more than 4 GiB): then the compressed position is the only measure."""
        if not self.expected or self.inflated > self.expected:
            return None
        return self.inflated / self.expected

    @classmethod
    def of(cls, stream: BinaryIO) -> InflateMeter | None:
        """A meter for a gzip file (None for a plain one), open in `stream` (a seekable
        one, left at its start)."""
        try:
            if stream.read(2) != GZIP_MAGIC:
                return None
            try:
                stream.seek(-4, io.SEEK_END)
            except OSError:  # shorter than a gzip trailer: the reader says what is wrong
                return cls(None)
            return cls(int.from_bytes(stream.read(4), "little"))
        finally:
            stream.seek(0)


class _Capped(io.RawIOBase):
    """A decompressing stream that refuses to give more than `limit` bytes."""

    def __init__(self, stream: BinaryIO, limit: int, meter: InflateMeter | None = None):
        self._stream, self._limit, self._given = stream, limit, 0
        self._meter = meter

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        # read1: what one step inflates, so that a stream damaged further on still gives
        # everything before the damage.
        data = self._stream.read1(len(buffer))  # type: ignore[attr-defined]
        self._given += len(data)
        if self._meter is not None:
            self._meter.inflated = self._given
        if self._given > self._limit:
            raise DecompressedTooLarge(
                f"the decompressed data passes {self._limit:,} bytes; the rest was not read"
            )
        buffer[: len(data)] = data
        return len(data)


class TraceFileError(OSError):
    """A path that cannot be read at all (missing, a directory, no permission)."""


@dataclass(frozen=True, slots=True)
class RawLine:
    """One non-blank physical line as it arrived (without its newline), or a read failure."""

    source: str
    number: int
    raw: bytes
    error: str | None = None
    # What its payload decodes to (a formats.DecodedUnit), when whoever made the line
    # decoded it already: the OTLP receiver, from protobuf, with no JSON between.
    decoded: Any = None

    @property
    def payload(self) -> bytes:
        """The bytes to decode: no carriage return before the newline, no BOM opening the file."""
        return line_payload(self.raw, first=self.number == 1)


@dataclass(frozen=True, slots=True)
class BlankRun:
    """Blank lines read past, up to line `number`, in a run still going on: nothing to
    store, only a sign of how far the reading got (iter_lines_and_blank_runs)."""

    number: int


def open_stream(
    stream: BinaryIO,
    max_decompressed: int = MAX_DECOMPRESSED_BYTES,
    meter: InflateMeter | None = None,
) -> BinaryIO:
    """Wrap a binary stream in a gzip decoder when it starts with the gzip magic bytes,
    capped at `max_decompressed` bytes (and measured by `meter`)."""
    buffered = stream if isinstance(stream, io.BufferedReader) else io.BufferedReader(stream)  # type: ignore[type-var]
    if buffered.peek(2)[:2] == GZIP_MAGIC:
        inflated = gzip.GzipFile(fileobj=buffered)
        return io.BufferedReader(_Capped(inflated, max_decompressed, meter))  # type: ignore[arg-type]
    return buffered


def is_gzip(path: str | Path) -> bool:
    with open(path, "rb") as stream:
        return stream.read(2) == GZIP_MAGIC


def unreadable(exc: BaseException) -> str:
    """Why a (gzip) stream could not be read on: the reason of the line that says so."""
    if isinstance(exc, DecompressedTooLarge):
        return str(exc)
    return f"unreadable compressed data: {exc}"


class _Concatenated(io.RawIOBase):
    """Bytes already read, then the rest of a stream, as one readable stream."""

    def __init__(self, head: bytes, rest: BinaryIO):
        self._head, self._rest = io.BytesIO(head), rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        count = self._head.readinto(buffer)
        if count:
            return count
        data = self._rest.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def _whole_document(reader: BinaryIO) -> tuple[bytes | None, BinaryIO]:
    """A file whose first line is not a JSON value but which opens with { or [ may be one
    pretty-printed document: return it whole, or give back a reader that starts over."""
    head = reader.peek(65536) if isinstance(reader, io.BufferedReader) else b""
    opening = head.lstrip()
    if opening[:1] not in (b"{", b"[") or b"\n" not in opening:
        return None, reader
    first_line = opening.split(b"\n", 1)[0].rstrip(b"\r")
    try:
        json.loads(first_line)
        return None, reader
    except ValueError:
        pass
    data = reader.read(MAX_DOCUMENT_BYTES + 1)
    if len(data) <= MAX_DOCUMENT_BYTES:
        try:
            json.loads(data)
            return data, reader
        except ValueError:
            pass
    return None, io.BufferedReader(_Concatenated(data, reader))


def iter_raw_lines(
    stream: BinaryIO,
    source: str,
    *,
    max_decompressed: int = MAX_DECOMPRESSED_BYTES,
    meter: InflateMeter | None = None,
) -> Iterator[RawLine]:
    """Yield the non-blank lines of a (possibly gzip) stream, or a pretty-printed document as
    one unit; a corrupt, truncated or too large gzip ends with one RawLine carrying the
    error, after every line that could be read."""
    for line in iter_lines_and_blank_runs(
        stream, source, max_decompressed=max_decompressed, meter=meter
    ):
        if isinstance(line, RawLine):
            yield line


def iter_lines_and_blank_runs(
    stream: BinaryIO,
    source: str,
    *,
    max_decompressed: int = MAX_DECOMPRESSED_BYTES,
    meter: InflateMeter | None = None,
) -> Iterator[RawLine | BlankRun]:
    """iter_raw_lines, with a BlankRun every BLANK_RUN_REPORT_BYTES of a run of blank
    lines: a reader that reports its progress reports it through such a run too."""
    reader = open_stream(stream, max_decompressed, meter)
    try:
        document, reader = _whole_document(reader)
    except (OSError, EOFError, zlib.error) as exc:
        yield RawLine(source, 1, b"", error=unreadable(exc))
        return
    if document is not None:
        yield RawLine(source, 1, document.strip())
        return
    counted = _Counted()
    while True:
        try:
            chunk = reader.readline(MAX_LINE_BYTES + 1)
        except (OSError, EOFError, zlib.error) as exc:
            yield RawLine(source, counted.number + 1, b"", error=unreadable(exc))
            return
        if not chunk:
            return
        counted.number += 1
        number = counted.number
        if len(chunk) > MAX_LINE_BYTES and not chunk.endswith(b"\n"):
            size = len(chunk)
            prefix = chunk[:OVERSIZED_PREFIX_BYTES]
            try:
                while not chunk.endswith(b"\n"):
                    chunk = reader.readline(1 << 20)
                    if not chunk:
                        break
                    size += len(chunk)
            except (OSError, EOFError, zlib.error) as exc:
                yield RawLine(source, counted.number + 1, b"", error=unreadable(exc))
                return
            yield oversized_line(source, number, prefix, size)
            continue
        raw = chunk[:-1] if chunk.endswith(b"\n") else chunk
        if raw.strip():
            yield RawLine(source, number, raw)
            continue
        # Blank: so may the lines after it be, by the billion (a gzip of newlines). Read
        # past them in bulk: a readline each costs a thousand times their bytes.
        try:
            more = _skip_blank_lines(reader, counted)
        except (OSError, EOFError, zlib.error) as exc:
            yield RawLine(source, counted.number + 1, b"", error=unreadable(exc))
            return
        if more:
            yield BlankRun(counted.number)


class _Counted:
    """The number of the last physical line read."""

    number = 0


def _skip_blank_lines(reader: BinaryIO, counted: _Counted) -> bool:
    """Read past the whole blank lines at the reader's position, counting them, up to
    about BLANK_RUN_REPORT_BYTES: whether it stopped at that bound (more may follow)
    rather than before a line with something on it or a blank one longer than what is
    buffered (both left to readline, which numbers, keeps or refuses them)."""
    buffered = cast(io.BufferedReader, reader)
    read = 0
    while read < BLANK_RUN_REPORT_BYTES:
        ahead = buffered.peek(1)  # everything buffered; one read fills it when empty
        blank = len(ahead) - len(ahead.lstrip())
        end = ahead.rfind(b"\n", 0, blank) + 1
        if not end:
            return False
        counted.number += ahead.count(b"\n", 0, end)
        buffered.read(end)
        read += end
        if end < len(ahead):
            return False
    return True


def oversized_line(source: str, number: int, prefix: bytes, size: int) -> RawLine:
    """A line too long to keep: its first bytes, and why it is refused."""
    return RawLine(
        source,
        number,
        prefix[:OVERSIZED_PREFIX_BYTES],
        error=f"line is {size:,} bytes, over the {MAX_LINE_BYTES:,}-byte limit (first "
        f"{OVERSIZED_PREFIX_BYTES:,} bytes kept)",
    )


def open_trace_file(path: str | Path) -> BinaryIO:
    """Open a trace file for reading, or raise TraceFileError saying why it cannot be."""
    path = Path(path)
    if path.is_dir():
        raise TraceFileError(f"{path}: is a directory")
    try:
        return path.open("rb")
    except OSError as exc:
        raise TraceFileError(f"{path}: {exc.strerror or exc}") from None


def read_trace_file(path: str | Path) -> Iterator[RawLine]:
    """The lines of one trace file. Raises TraceFileError before yielding if it cannot be opened."""
    return _closing_lines(open_trace_file(path), str(path))


def _closing_lines(stream: BinaryIO, source: str) -> Iterator[RawLine]:
    with stream:
        yield from iter_raw_lines(stream, source)
