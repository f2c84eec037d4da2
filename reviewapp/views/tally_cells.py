"""The numbers of a row of the tallies page, each with where it drills down: its tickets in
the queue when the queue can select exactly them (the tally month, the outcome and, for a
breakdown, the queue's filter of the same name), else the list of the discrepancies behind
it (resolved by a rule, a source pair, a rule, without a ticket). The page's partial
tally-cells (templates/reports/tallies.html) writes them as table cells."""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from django.utils.http import urlencode

from reviewapp.models import Ticket
from reviewapp.reports.calendar import month_key
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
    """Where the numbers of one month go."""

    def __init__(self, month) -> None:
        self.month = month_key(month)
        self.queue = reverse("ticket-queue")
        self.items = reverse("tally-discrepancies", args=[self.month])

    def url(self, group: str, counts: Counts, dimension: str = "", key=()) -> str:
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
        params = {"outcome": group}
        if dimension:
            params.update(by=dimension, value=value)
            if dimension == "rule" and len(key) > 1:
                params["version"] = key[1]
        return f"{self.items}?{urlencode(params)}"


def signed(change: int) -> str:
    """A change as the page shows it: "+2", "−1", or nothing when there is none."""
    return f"+{change}" if change > 0 else f"−{-change}" if change < 0 else ""


def cells(
    drill: Drill, counts: Counts, dimension: str = "", key=(), drift: Counts | None = None
) -> list[dict[str, Any]]:
    """Each of COLUMNS: its group, its number, where it drills down and, with `drift` (a
    frozen month), what changed since ("" for nothing)."""
    return [
        {
            "group": group,
            "value": counts.of(group),
            "url": drill.url(group, counts, dimension, key) if counts.of(group) else "",
            "change": signed(drift.of(group)) if drift is not None else "",
        }
        for group in COLUMNS
    ]
