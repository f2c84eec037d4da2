"""Reading numbers and lists people type or pages send."""

from __future__ import annotations

from collections.abc import Iterable


def whole_number(text: str | None) -> int | None:
    """A number typed or sent as plain ASCII digits, else None (str.isdigit also takes
    digits like "²" that int() refuses)."""
    if text and text.isascii() and text.isdecimal():
        return int(text)
    return None


def parse_selection(values: Iterable[str]) -> dict[int, int]:
    """Checked rows of the queue, each "id:revision" as it was rendered."""
    selection = {}
    for value in values:
        ticket_text, _, revision_text = value.partition(":")
        ticket_id, revision = whole_number(ticket_text), whole_number(revision_text)
        if ticket_id is not None and revision is not None:
            selection[ticket_id] = revision
    return selection
