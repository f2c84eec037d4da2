"""Months of tallies for the demo: reviewers have worked the older months' tickets (most
explained, with a cause; some unexplained), the oldest month is closed (its tally frozen),
and a ticket of that month was closed after it was frozen, so the page shows drift.

Seeded, like the corpus: the same tickets are closed the same way every time. Run once: a
database where a month was ever closed is left as it is."""

from __future__ import annotations

import hashlib
from collections import defaultdict

from django.db.models import Q

from reviewapp.models import MonthClosing, TallyEntry, Ticket
from reviewapp.reports.calendar import month_key
from reviewapp.reports.entries import kept_months, tallies_refresh
from reviewapp.reports.months import MonthError, month_close
from reviewapp.review.changes import REVIEWER_CAUSES, tickets_close

# Of the tickets of a worked month: explained, unexplained (the rest stay open).
EXPLAINED_SHARE, UNEXPLAINED_SHARE = 0.6, 0.15
# The newest months are still being worked: left open.
MONTHS_LEFT_OPEN = 2
CAUSES = [value for value, _ in REVIEWER_CAUSES if value != Ticket.Cause.OTHER]


def _draw(ticket_id: int) -> float:
    """A number in [0, 1) that depends on the ticket only (seeded, not random)."""
    digest = hashlib.sha256(f"demo-tally-{ticket_id}".encode()).digest()
    return int.from_bytes(digest[:4], "big") / 2**32


def _month_tickets(month) -> list[Ticket]:
    counted = TallyEntry.objects.filter(month=month, ticket__isnull=False).values("ticket_id")
    return list(Ticket.objects.filter(Q(pk__in=counted), state=Ticket.State.OPEN).order_by("pk"))


def demo_tallies(*, reviewer, approver) -> str:
    """Work the older months' tickets, close the oldest month, then close one more of its
    tickets; a line saying what was done."""
    tallies_refresh()
    if MonthClosing.objects.exists():
        return "Demo tallies: a month was closed before; left as it is."
    months = kept_months()
    worked = months[:-MONTHS_LEFT_OPEN] if len(months) > MONTHS_LEFT_OPEN else months[:1]
    if not worked:
        return "Demo tallies: no judged run yet."
    kept_for_drift: list[Ticket] = []
    explained: dict[str, dict[int, int]] = defaultdict(dict)
    unexplained: dict[int, int] = {}
    for month in worked:
        tickets = _month_tickets(month)
        if month == worked[0] and tickets:
            kept_for_drift.append(tickets.pop())  # closed after the month is frozen
        for index, ticket in enumerate(tickets):
            draw = _draw(ticket.pk)
            if draw < EXPLAINED_SHARE:
                explained[CAUSES[index % len(CAUSES)]][ticket.pk] = ticket.revision
            elif draw < EXPLAINED_SHARE + UNEXPLAINED_SHARE:
                unexplained[ticket.pk] = ticket.revision
    for cause, expected in explained.items():
        tickets_close(expected, actor=reviewer, resolution="explained", cause=cause)
    if unexplained:
        tickets_close(unexplained, actor=reviewer, resolution="unexplained")
    try:
        month_close(worked[0], actor=approver, reason="Demo: closed for the monthly report.")
    except MonthError as error:  # a corpus of months that have not ended yet
        return f"Demo tallies: tickets of {len(worked)} month(s) worked; none closed ({error})."
    for ticket in kept_for_drift:
        tickets_close(
            {ticket.pk: ticket.revision},
            actor=reviewer,
            resolution="explained",
            cause=Ticket.Cause.REPLICA_LAG,
        )
    return (
        f"Demo tallies: tickets of {len(worked)} month(s) worked; "
        f"{month_key(worked[0])} closed, with {len(kept_for_drift)} ticket(s) closed since."
    )
