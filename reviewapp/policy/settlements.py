"""What a policy would settle: open conflict tickets whose group another policy would no
longer leave in conflict. Computed for a proposal being written (a preview) and, after a
version is published, as labels on the tickets it would settle: a label, never a change to
a ticket or its verdict, until a reviewer closes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reviewapp.engine import Policy, load_policy
from reviewapp.judging.core import judge, stored_runs
from reviewapp.judging.policies import policy_of_version
from reviewapp.models import PolicyVersion, ProspectiveSettlement, Ticket
from reviewapp.policy.versions import draft_document
from reviewapp.review.changes import revisions_as_seen, tickets_close_settled
from reviewapp.review.stamp import DataStamp

# How many open tickets a preview judges again; the count beyond is reported, not judged.
PREVIEW_TICKET_LIMIT = 300


@dataclass(frozen=True)
class Settlement:
    ticket: Ticket
    kind: str
    rule: str | None
    value: Any


def settlements(policy: Policy, tickets: list[Ticket]) -> list[Settlement]:
    """Open conflict tickets whose group `policy` would no longer leave in conflict."""
    by_run: dict[int, list[Ticket]] = {}
    for ticket in tickets:
        by_run.setdefault(ticket.run_id, []).append(ticket)
    found = []
    for judged in judge(stored_runs(by_run), policy):
        verdicts = {(v.entity, v.field): v for v in judged.result.verdicts}
        for ticket in by_run[judged.run.stored_pk]:
            verdict = verdicts.get((ticket.entity, ticket.field))
            if verdict is not None and verdict.kind != "conflict":
                found.append(Settlement(ticket, verdict.kind, verdict.rule, verdict.value))
    return found


def open_conflicts(field: str | None = None):
    tickets = Ticket.objects.filter(state=Ticket.State.OPEN, kind=Ticket.Kind.CONFLICT)
    if field and field != "*":
        tickets = tickets.filter(field=field)
    return tickets.order_by("-created_at", "-id")


def settlement_preview(kind: str, change: dict[str, Any]) -> tuple[list[Settlement], int]:
    """Which open tickets a proposed change would settle, and how many were considered."""
    policy = load_policy(draft_document((kind, change)))
    candidates = open_conflicts(change.get("field") if kind != "document" else None)
    considered = list(candidates.select_related("run")[:PREVIEW_TICKET_LIMIT])
    return settlements(policy, considered), candidates.count()


def settlements_label(version: PolicyVersion) -> int:
    """Label (never close) every open conflict ticket this version would settle."""
    policy = policy_of_version(version)
    labelled = 0
    tickets = list(open_conflicts().exclude(settlements__policy_version=version))
    for start in range(0, len(tickets), 500):
        found = settlements(policy, tickets[start : start + 500])
        ProspectiveSettlement.objects.bulk_create(
            [
                ProspectiveSettlement(
                    ticket=s.ticket,
                    policy_version=version,
                    kind=s.kind,
                    rule=s.rule or "",
                    value=s.value,
                )
                for s in found
            ],
            ignore_conflicts=True,
        )
        labelled += len(found)
    return labelled


def settled_open_tickets(version: PolicyVersion):
    return (
        Ticket.objects.filter(state=Ticket.State.OPEN, settlements__policy_version=version)
        .select_related("run", "assignee")
        .order_by("-created_at", "-id")
    )


def settled_tickets_close(*, version: PolicyVersion, actor, seen: DataStamp) -> str:
    """Close, as explained by the newer policy, every open ticket labelled for `version` as
    the page rendered under `seen` showed them: one changed since is left alone and
    reported, one labelled since is left for another look."""
    labelled = Ticket.objects.filter(settlements__policy_version=version)
    outcome = tickets_close_settled(
        revisions_as_seen(labelled, seen), actor=actor, version_number=version.number
    )
    return outcome.summary("closed")
