"""Reading numbers, lists and windows of days people type or pages send."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from reviewapp.infra.days import Window, WindowError


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


def window_asked(params: Mapping[str, str], *, default_days: int = 28) -> tuple[Window, str]:
    """The window of days a page is asked for (`since`, `until`) and "", or, when that
    cannot be read, the last `default_days` days and why not."""
    try:
        return Window.read(params.get("since"), params.get("until"), default_days=default_days), ""
    except WindowError as error:
        return Window.last(default_days), f"{error}; showing the last {default_days} days"
