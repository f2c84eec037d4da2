"""What a policy would settle: open conflict tickets whose group another policy would no
longer leave in conflict. Computed for a proposal being written (a preview) and, after a
version is published, as labels on the tickets it would settle: a label, never a change to
a ticket or its verdict, until a reviewer closes them.

One rule decides what settles a ticket (`settles`), over runs pinned the one way
(`current_pins`: at the last record their current judgement covers): the preview, the
labels and every replay (reviewapp.replay, whose impact the proposal and draft pages show)
use both, so that what a replay of a candidate counts is what publishing it labels.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import Q
from django.utils import timezone

from reviewapp import durable
from reviewapp.celery import Tasks
from reviewapp.durable import Durable
from reviewapp.engine import Policy, load_policy
from reviewapp.infra.locks import Space
from reviewapp.judging.core import judge, stored_runs
from reviewapp.judging.policies import policy_of_version
from reviewapp.models import (
    PolicyVersion,
    ProspectiveSettlement,
    Run,
    SettlementLabelling,
    Ticket,
)
from reviewapp.policy.documents import apply_change
from reviewapp.policy.versions import active_document
from reviewapp.review.changes import Outcome, revisions_as_seen, tickets_close_settled
from reviewapp.review.stamp import DataStamp

# How many open tickets the proposal form's preview judges again while the browser waits
# (the motivating ones first); the proposal's page then replays every one on workers.
PREVIEW_TICKET_LIMIT = 5000

UNFINISHED = Q(finished_at__isnull=True)
# Labelling what a published version would settle: a unit of durable work (reviewapp.durable),
# sent to a worker when the version is published (policy.versions).
LABELLINGS = Durable(
    name="settlement labelling",
    model=SettlementLabelling,
    task=Tasks.LABEL_SETTLEMENTS,
    lock=Space.LABELLING,
    # No state of its own: unfinished, claimed before or not.
    state=None,
    running=UNFINISHED & Q(attempts__gt=0),
    queued=UNFINISHED,
    # Unfinished five minutes after its version was published, with nobody holding its
    # lock: its message or its worker was lost.
    pulse="version__published_at",
    born=None,
    requeue_after=300,
    max_attempts=3,
)


def settles(ticket_kind: str, ticket_state: str, verdict_kind: str | None) -> bool:
    """Whether a policy whose verdict for a ticket's group is `verdict_kind` (None: it
    judges no such group) settles the ticket: an open conflict no longer in conflict."""
    return (
        ticket_state == Ticket.State.OPEN
        and ticket_kind == Ticket.Kind.CONFLICT
        and verdict_kind is not None
        and verdict_kind != "conflict"
    )


def current_pins(run_pks: Iterable[int]) -> dict[int, int]:
    """Where each run is judged again: up to the last record its current judgement covers
    (what its tickets were opened from); a run never judged is left out (all its records)."""
    return dict(
        Run.objects.filter(pk__in=list(run_pks), current_judgement__isnull=False).values_list(
            "pk", "current_judgement__through_record_id"
        )
    )


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
    for judged in judge(stored_runs(by_run, through=current_pins(by_run)), policy):
        verdicts = {(v.entity, v.field): v for v in judged.result.verdicts}
        for ticket in by_run[judged.run.stored_pk]:
            verdict = verdicts.get((ticket.entity, ticket.field))
            if verdict is not None and settles(ticket.kind, ticket.state, verdict.kind):
                found.append(Settlement(ticket, verdict.kind, verdict.rule, verdict.value))
    return found


def open_conflicts(field: str | None = None):
    tickets = Ticket.objects.filter(state=Ticket.State.OPEN, kind=Ticket.Kind.CONFLICT)
    if field and field != "*":
        tickets = tickets.filter(field=field)
    return tickets.order_by("-created_at", "-id")


def settlement_preview(
    kind: str, change: dict[str, Any], *, motivating: Sequence[int] = ()
) -> tuple[list[Settlement], int]:
    """Which open tickets a proposed change alone would settle, and how many it concerns:
    the motivating tickets first, then every other open conflict ticket of its field,
    newest first, up to PREVIEW_TICKET_LIMIT judged (beyond, the proposal's page replays
    them all). Its own effect: the active version with the change, less what the active
    version settles already (a ticket opened under an older one, say), as its replay counts."""
    _, active = active_document()
    policy = load_policy(apply_change(active, kind, change))
    candidates = open_conflicts(change.get("field") if kind != "document" else None)
    first = list(candidates.filter(pk__in=list(motivating)).select_related("run"))
    rest = candidates.exclude(pk__in=[t.pk for t in first]).select_related("run")
    judged = first + list(rest[: max(0, PREVIEW_TICKET_LIMIT - len(first))])
    found: list[Settlement] = []
    for start in range(0, len(judged), 500):
        found.extend(settlements(policy, judged[start : start + 500]))
    if found:  # judged again under the active version: only those the change settles
        already = {
            settlement.ticket.pk
            for start in range(0, len(found), 500)
            for settlement in settlements(
                load_policy(active),
                [s.ticket for s in found[start : start + 500]],
            )
        }
        found = [settlement for settlement in found if settlement.ticket.pk not in already]
    return found, candidates.count()


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
    SettlementLabelling.objects.update_or_create(
        version=version,
        defaults={"finished_at": timezone.now(), "labelled": version.settlements.count()},
    )
    return labelled


def label_settled(version_id: int) -> int:
    """What a worker runs once a version is published: its labelling claimed (its tries
    counted, given up when they are spent), then settlements_label."""
    with durable.claim(LABELLINGS, version_id, when=UNFINISHED) as labelling:
        if labelling is None:
            return 0
        return settlements_label(PolicyVersion.objects.get(pk=version_id))


def settled_before(version: PolicyVersion) -> int:
    """Of the open tickets `version` would settle, those the version it was drafted from
    settles too: the rest are its own change's (as its draft's impact counted them)."""
    return (
        Ticket.objects.filter(state=Ticket.State.OPEN, settlements__policy_version=version)
        .filter(settlements__policy_version__number=version.based_on)
        .count()
    )


def labelling_under_way(version: PolicyVersion) -> bool:
    """Whether a worker has yet to finish labelling what the version would settle."""
    return SettlementLabelling.objects.filter(version=version, finished_at__isnull=True).exists()


def settled_open_tickets(version: PolicyVersion):
    return (
        Ticket.objects.filter(state=Ticket.State.OPEN, settlements__policy_version=version)
        .select_related("run", "assignee")
        .order_by("-created_at", "-id")
    )


def settled_tickets_close(
    *, version: PolicyVersion, actor, seen: DataStamp, bulk: str = ""
) -> Outcome:
    """Close, as explained by the newer policy, every open ticket labelled for `version` as
    the page rendered under `seen` showed them: one changed since is left alone and
    reported, one labelled since is left for another look."""
    return tickets_close_settled(
        settled_as_seen(version, seen), actor=actor, version_number=version.number, bulk=bulk
    )


def settled_as_seen(version: PolicyVersion, seen: DataStamp) -> dict[int, int]:
    """The labelled tickets, each at the revision the page rendered under `seen` showed."""
    labelled = Ticket.objects.filter(settlements__policy_version=version)
    return revisions_as_seen(labelled, seen)
