"""The ticket queue's rows: what each shows, as plain values, and each rendered by the
partial ticket-row of templates/review/queue.html (which writes the markup, escaping every
value), kept per ticket as it is shown.

After any ticket changes, everything the queue caches under its stamp is read again; a
row is not rendered again unless its own ticket changed: a page of rows rendered whole was
most of the queue's time right after a change (benchmarks/pages.py, queue_cold)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast

from django.core.cache import cache
from django.template.loader import get_template
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode
from django.utils.safestring import SafeString

from reviewapp.review.disputed import disputed_sides, sides_title
from reviewapp.review.filters import Cell, cells
from reviewapp.review.finding_summary import finding_summaries
from reviewapp.review.related import judged_again
from reviewapp.review.stamp import CACHE_SECONDS

# What a queue row shows of its own (what the ticket is, the disputed values, its age),
# read as plain values: model instances cost three times as much.
ROW_COLUMNS = (
    *("pk", "revision", "state", "reason", "unsafe", "field", "finding_kind", "entity"),
    *("agent", "created_at", "closed_at", "run__run_id", "disputed", "judgement_id"),
    "run__current_judgement_id",
    # A finding's row says what it found (review/finding_summary.py).
    *("kind", "run_id", "finding__evidence"),
)


def queue_row_columns() -> list[str]:
    """The columns a queue row reads: its own, then its filters' cells' (filters.cells)."""
    return list(dict.fromkeys((*ROW_COLUMNS, *(cell.column for cell in cells()))))


NONE = "—"
# A finding has no sources or action of its own: its row spends their cells on what it found.
CELLS_A_FINDING_SPANS = ("sources", "action")


def url_of_each_ticket(name: str) -> Callable[[str], str]:
    """The URL `name` of any ticket, from one reverse(): the ticket's id is its only part
    that varies."""
    placeholder = "2147483647"
    prefix, _, suffix = reverse(name, args=[placeholder]).rpartition(placeholder)
    return lambda ticket_id: f"{prefix}{ticket_id}{suffix}"


def _when(moment) -> str:
    return timezone.localtime(moment).strftime("%Y-%m-%d %H:%M")


def age(moment, now) -> str:
    """How long ago, in its largest unit: 40s, 12m, 5h, 3d."""
    seconds = max(0, int((now - moment).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _cell(cell: Cell, value: Any) -> dict:
    """A filter's cell in a row, as its partial writes it."""
    empty = value in (None, "")
    return {
        "css": cell.css,
        "text": cell.empty if empty else str(value),
        "title": cell.title,
        "muted": empty and cell.muted_empty,
    }


def queue_rows(tickets: Iterable[Mapping[str, Any]], *, queue_query: str = "") -> list[dict]:
    """Each ticket (given as queue_row_columns() values) as its row shows it: one line, the
    stylesheet cutting what overflows, each cell's title holding it whole. Ages are as of
    now: the queue caches its rows for stamp.CACHE_SECONDS at most. Each ticket's link
    carries the queue's filters (`queue_query`, URL-encoded), so that its page moves to the
    tickets before and after it in this queue."""
    ticket_url = url_of_each_ticket("ticket-detail")
    claim_url = url_of_each_ticket("ticket-claim")
    came_from = f"?{urlencode({'queue': queue_query})}"
    now = timezone.now()
    shown = cells()
    rows = []
    for ticket in tickets:
        # Numbers as text: a template formats a number for the locale, a fifth of its time here.
        pk, closed_at = str(ticket["pk"]), ticket["closed_at"]
        sides = disputed_sides(ticket["disputed"])
        finding = ticket["kind"] == "finding"
        # A finding's reason is its kind: said once.
        subject = ticket["field"] or ("" if finding else ticket["finding_kind"])
        entity = ticket["entity"] or ""
        row_cells = [
            _cell(cell, ticket[cell.column])
            for cell in shown
            if not (finding and cell.css in CELLS_A_FINDING_SPANS)
        ]
        rows.append(
            {
                "pk": pk,
                "revision": str(ticket["revision"]),
                "state": ticket["state"],
                "url": ticket_url(pk) + came_from,
                "claim_url": claim_url(pk),
                "what": f"{ticket['reason']}: {' '.join(filter(None, (subject, entity)))} · agent "
                f"{ticket['agent'] or NONE} · run {ticket['run__run_id']}",
                "reason": ticket["reason"],
                "unsafe": ticket["unsafe"],
                "closed": ticket["state"] == "closed",
                "judged_again": judged_again(
                    ticket["judgement_id"], ticket["run__current_judgement_id"]
                ),
                "subject": subject,
                "entity": entity,
                # The disputed values side by side, each with the errors that make a partial
                # result and their source; the title names the source of each.
                "sides": sides,
                "values_title": sides_title(sides),
                "finding": finding,
                # Set by rows_rendered, for the rows it renders.
                "found": "",
                "values_span": str(1 + len(shown) - len(row_cells)),
                "cells": row_cells,
                "age": age(ticket["created_at"], now),
                "opened": f"opened {_when(ticket['created_at'])}"
                + (f", closed {_when(closed_at)}" if closed_at else ""),
            }
        )
    return rows


def rows_rendered(
    tickets: Iterable[Mapping[str, Any]], *, can_work: bool, queue_query: str = ""
) -> list[SafeString]:
    """Each ticket's row (queue_rows) as its partial renders it; with `can_work`, starting
    with the checkbox that selects it ("id:revision") for a bulk change. A row is kept for
    CACHE_SECONDS under all it shows: its ticket's revision (every change makes a new one),
    whether its run was judged again, the queue its link carries, the checkbox. Only the
    rows not kept are made (queue_rows) and rendered."""
    tickets = list(tickets)
    queue = hashlib.sha256(queue_query.encode()).hexdigest()[:16]
    keys = [
        f"queue-row:2:{ticket['pk']}:{ticket['revision']}:"
        f"{judged_again(ticket['judgement_id'], ticket['run__current_judgement_id']):d}:"
        f"{can_work:d}:{queue}"
        for ticket in tickets
    ]
    kept = cache.get_many(keys)
    missing = [(key, ticket) for key, ticket in zip(keys, tickets, strict=True) if key not in kept]
    fresh: dict[str, SafeString] = {}
    if missing:
        unkept = [ticket for _, ticket in missing]
        rows = queue_rows(unkept, queue_query=queue_query)
        # What each finding found, read (one query) for the rows rendered now only.
        found = finding_summaries(ticket for ticket in unkept if ticket["kind"] == "finding")
        template = get_template("review/queue.html#ticket-row")
        for (key, _), row in zip(missing, rows, strict=True):
            row["found"] = found.get(row["pk"], "")
            # What a template renders is safe already: it escaped every value.
            fresh[key] = cast(SafeString, template.render({"row": row, "can_work": can_work}))
        cache.set_many(fresh, CACHE_SECONDS)
    return [kept.get(key) or fresh[key] for key in keys]
