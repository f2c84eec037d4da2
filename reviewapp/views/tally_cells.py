"""The numbers of a row of the tallies page, each with where it drills down: its tickets in
the queue when the queue can select exactly them (the tally month, the outcome and, for a
breakdown, the queue's filter of the same name), else the list of the discrepancies behind
it (resolved by a rule, a source pair, a rule, without a ticket).

A frozen month's figure opens the discrepancies its closing counted, as they were then
(the queue shows only today's tickets); a closing that did not keep them (made before
closings did) links nowhere, and says so. Beside a frozen figure, today's, in words, when
it differs ("44 today (7 fewer than when frozen)") or when the frozen list was not kept,
opening today's list. The page's partial tally-cells (templates/reports/tallies.html)
writes them as table cells."""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from django.utils.http import urlencode

from reviewapp.models import MonthClosing, Ticket
from reviewapp.reports.calendar import month_key
from reviewapp.reports.months import MonthView, since_frozen
from reviewapp.reports.tally import Counts

# The columns of every tally row: outcome groups (reviewapp.reports.tally.OUTCOME_GROUPS).
COLUMNS = ("rule", "reviewer", "closed_unexplained", "open", "explained", "unexplained", "all")
# Breakdown dimension -> the queue filter that selects exactly its tickets.
QUEUE_FILTERS = {
    "field": "field",
    "cause": "closed_cause",
    "agent": "agent",
    "finding_kind": "finding_kind",
}
# Outcome group -> the queue's state and outcome filters that select its tickets.
QUEUE_OUTCOMES = {
    "reviewer": {"state": "closed", "outcome": "explained"},
    "closed_unexplained": {"state": "closed", "outcome": "unexplained"},
    "open": {"state": "open"},
    "unexplained": {"state": "any", "outcome": "unexplained"},
}


class Drill:
    """Where the numbers of one month go: `frozen`, the closing of a frozen month."""

    def __init__(self, month, frozen: MonthClosing | None = None) -> None:
        self.month = month_key(month)
        self.frozen = frozen
        self.queue = reverse("ticket-queue")
        self.items = reverse("tally-discrepancies", args=[self.month])

    @classmethod
    def of(cls, view: MonthView) -> Drill:
        return cls(view.shown.month, view.status.last if view.status.frozen else None)

    @property
    def list_kept(self) -> bool:
        """Whether a figure as shown opens what it counted: today's, or a freeze's kept."""
        return self.frozen is None or self.frozen.discrepancies_kept

    def url(self, group: str, counts: Counts, dimension: str = "", key=()) -> str:
        """Where a figure as shown goes: "" for a frozen one whose list was not kept."""
        if self.frozen is None:
            return self.today_url(group, counts, dimension, key)
        if not self.frozen.discrepancies_kept:
            return ""
        return self._items(group, dimension, key, frozen=self.frozen.pk)

    def today_url(self, group: str, counts: Counts, dimension: str = "", key=()) -> str:
        """Where today's figure goes: its tickets in the queue, or today's discrepancies."""
        queue = QUEUE_OUTCOMES.get(group)
        value = key[0] if key else ""
        exact = not dimension or (
            dimension in QUEUE_FILTERS
            and bool(value)
            and (dimension != "cause" or value in Ticket.Cause.values)
        )
        # The queue cannot show a conflict that has no ticket.
        if queue is not None and exact and not (group == "unexplained" and counts.untracked):
            params = {"month": self.month, **queue}
            if dimension:
                params[QUEUE_FILTERS[dimension]] = value
            return f"{self.queue}?{urlencode(params)}"
        return self._items(group, dimension, key)

    def _items(self, group: str, dimension: str, key, frozen: int | None = None) -> str:
        params: dict[str, Any] = {"outcome": group}
        if dimension:
            params.update(by=dimension, value=key[0] if key else "")
            if dimension == "rule" and len(key) > 1:
                params["version"] = key[1]
        if frozen is not None:
            params["frozen"] = frozen
        return f"{self.items}?{urlencode(params)}"


def signed(change: int) -> str:
    """A change against the month before as the page shows it: "+2", "−1", or nothing."""
    return f"+{change}" if change > 0 else f"−{-change}" if change < 0 else ""


def today(frozen: int, change: int, *, list_kept: bool = True) -> dict[str, str] | None:
    """What a frozen figure says of today's: "44 today" and "7 fewer than when frozen";
    None when nothing changed and the frozen figure opens its own list (or is nothing)."""
    if change == 0 and (list_kept or frozen == 0):
        return None
    return {"text": f"{frozen + change} today", "since": since_frozen(change)}


def cells(
    drill: Drill, counts: Counts, dimension: str = "", key=(), drift: Counts | None = None
) -> list[dict[str, Any]]:
    """Each of COLUMNS: its group, its number, where it drills down and, with `drift` (a
    frozen month), today's figure in words and where it drills down (None for nothing)."""
    now = None if drift is None else counts + drift
    found = []
    for group in COLUMNS:
        value = counts.of(group)
        cell: dict[str, Any] = {
            "group": group,
            "value": value,
            "url": drill.url(group, counts, dimension, key) if value else "",
            "today": None,
        }
        if drift is not None and now is not None:
            cell["today"] = today(value, drift.of(group), list_kept=drill.list_kept)
            if cell["today"] is not None and now.of(group):
                cell["today"]["url"] = drill.today_url(group, now, dimension, key)
        found.append(cell)
    return found
