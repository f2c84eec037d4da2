"""The demo's suggested rules (manage.py seed_demo): reviewers close tickets of two conflict
families marking the same source right each time, enough for a suggestion each; the second
suggestion is dismissed by the other reviewer, with why. Computed on the spot (a worker does
it after every marked close as well). Run again, it leaves what it made as it is."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import Count

from reviewapp.models import RuleProposal, RuleSuggestion, Ticket, TicketMark
from reviewapp.policy.versions import draft_document
from reviewapp.review.changes import ticket_close
from reviewapp.suggestions.decisions import suggestion_dismiss
from reviewapp.suggestions.work import AUTHORITATIVE, change_of, covered, suggestions_refresh

FAMILIES = 2


def _open_families(size: int) -> list[str]:
    return list(
        Ticket.objects.filter(state=Ticket.State.OPEN, kind=Ticket.Kind.CONFLICT)
        .exclude(sources="")
        .values("fingerprint")
        .annotate(size=Count("id"))
        .filter(size__gte=size)
        .order_by("-size", "fingerprint")
        .values_list("fingerprint", flat=True)
    )


def _uncovered_source(ticket: Ticket, document: dict[str, Any]) -> str | None:
    """A source of the family that no rule of the draft, nor a pending proposal, owns yet."""
    pending = [
        {"kind": p.kind, **p.change}
        for p in RuleProposal.objects.filter(state=RuleProposal.State.PENDING)
    ]
    rules = {"rules": [*document.get("rules", []), *pending]}
    for source in sorted({entry[0] for entry in ticket.disputed}):
        change = change_of(AUTHORITATIVE, ticket.field, ticket.action, source, "")
        if not covered(rules, AUTHORITATIVE, change):
            return source
    return None


def _mark_family(tickets: list[Ticket], source: str, reviewer: Any) -> None:
    for ticket in tickets:
        sources = [entry[0] for entry in ticket.disputed]
        evidence = list(ticket.verdict.evidence) if ticket.verdict else []
        if len(evidence) != len(sources) or source not in sources:
            continue
        ticket_close(
            ticket,
            revision=ticket.revision,
            actor=reviewer,
            resolution=Ticket.Resolution.EXPLAINED,
            cause=Ticket.Cause.REPLICA_LAG,
            right=evidence[sources.index(source)],
        )


def seed_demo_suggestions(*, reviewer: Any, other_reviewer: Any) -> str:
    """Mark, suggest, dismiss one; what it did, in a line."""
    if TicketMark.objects.exists():
        return "Demo suggestions: already there."
    needed = settings.SUGGEST_MIN_DECISIONS
    document = draft_document()
    marked: list[str] = []
    for fingerprint in _open_families(needed):
        tickets = list(
            Ticket.objects.filter(fingerprint=fingerprint, state=Ticket.State.OPEN)
            .select_related("verdict")
            .order_by("id")[:needed]
        )
        source = _uncovered_source(tickets[0], document)
        if source is None:
            continue
        _mark_family(tickets, source, reviewer)
        marked.append(fingerprint)
        if len(marked) == FAMILIES:
            break
    suggestions_refresh()
    dismissed = RuleSuggestion.objects.filter(fingerprint__in=marked[1:]).first()
    if dismissed is not None:
        suggestion_dismiss(
            dismissed,
            user=other_reviewer,
            reason="Demo: one week of a migration, not who owns the field.",
        )
    return (
        f"Demo suggestions: {len(marked)} families marked, "
        f"{RuleSuggestion.objects.count()} rules suggested, "
        f"{1 if dismissed else 0} dismissed."
    )
