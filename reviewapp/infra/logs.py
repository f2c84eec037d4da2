"""Log records that cannot forge other records (ASVS 16.4.1).

What the app logs may carry what others sent: a run id, a file name, a database error's
detail that quotes a value. A newline in one would start what reads as a record of its own.
Every handler's output goes through SafeFormatter: control characters in the message are
escaped (a newline becomes the two characters \\n), and a record that spans lines (a
traceback) has every line after its first indented, so that no text received from outside
can begin a line of the log."""

from __future__ import annotations

import logging
import re

CONTINUATION = "    "
# C0 controls but tab, DEL, C1 controls, and the Unicode line and paragraph separators.
_CONTROLS = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r"}


def escape_controls(text: str) -> str:
    """The text with every control character but tab written as an escape."""
    return _CONTROLS.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    return f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"


def confine(text: str) -> str:
    """A formatted record as lines of the log: the first as it is, the rest indented, and
    control characters other than those line breaks escaped."""
    first, *rest = text.replace("\r\n", "\n").split("\n")
    lines = [escape_controls(first)]
    lines.extend(CONTINUATION + escape_controls(line) for line in rest)
    return "\n".join(lines)


class SafeFormatter(logging.Formatter):
    """A formatter (or a wrapper of another one, `inner`) whose records stay in their lines:
    the message is escaped before formatting, the exception text indented after."""

    def __init__(self, *args, inner: logging.Formatter | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.inner = inner

    def format(self, record: logging.LogRecord) -> str:
        msg, args = record.msg, record.args
        try:
            record.msg, record.args = escape_controls(record.getMessage()), None
            text = self.inner.format(record) if self.inner else super().format(record)
        finally:
            record.msg, record.args = msg, args
        return confine(text)


def make_handlers_safe(logger: logging.Logger) -> None:
    """Wrap the formatter of each of this logger's handlers (Celery sets up its own)."""
    for handler in logger.handlers:
        if not isinstance(handler.formatter, SafeFormatter):
            handler.setFormatter(SafeFormatter(inner=handler.formatter or logging.Formatter()))
