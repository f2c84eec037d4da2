"""Every change a reviewer makes to tickets: claim, assign, comment, close, reopen, one at a
time or in bulk.

Concurrency is optimistic: a change names the revision its author saw, and the one guarded
UPDATE (`WHERE id = X AND revision = N`) lets exactly one of two simultaneous changes win.
The loser is told who changed the ticket and how (a StaleChange), never silently
overwritten. Every change appends an AuditEvent with the values before and after it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Count, F, OuterRef, Q, QuerySet, Subquery
from django.utils import timezone

from reviewapp import durable
from reviewapp.accounts.audit import audit_record, audit_records
from reviewapp.accounts.roles import WORK_TICKET
from reviewapp.celery import Tasks
from reviewapp.infra.storable_text import NUL
from reviewapp.models import AuditEvent, Ticket, TicketComment
from reviewapp.review import marks
from reviewapp.review.errors import TicketActionError
from reviewapp.review.stamp import DataStamp

# The causes a reviewer is offered; POLICY is given when a newer policy version settles tickets.
REVIEWER_CAUSES = [
    (value, label) for value, label in Ticket.Cause.choices if value != Ticket.Cause.POLICY
]


REVIEWER_CAUSE_VALUES = frozenset(value for value, _ in REVIEWER_CAUSES)


@dataclass(frozen=True)
class StaleChange:
    """A change that lost: the ticket moved on since its author saw it."""

    ticket: Ticket
    last_event: AuditEvent | None

    def __str__(self) -> str:
        event = self.last_event
        if event is None:
            return f"Ticket #{self.ticket.pk} changed since you saw it (now revision {self.ticket.revision}); nothing was applied."
        who = event.actor.get_username() if event.actor else "the system"
        when = timezone.localtime(event.created_at).strftime("%H:%M:%S")
        return (
            f"{who} {describe(event)} at {when}: ticket #{self.ticket.pk} is now at revision "
            f"{self.ticket.revision}, so your change was not applied."
        )


class StaleChangeError(Exception):
    def __init__(self, stale: StaleChange):
        super().__init__(str(stale))
        self.stale = stale


@dataclass
class Outcome:
    """What a change did to each ticket it named."""

    changed: list[int] = field(default_factory=list)
    stale: list[StaleChange] = field(default_factory=list)
    refused: dict[int, str] = field(default_factory=dict)

    def summary(self, verb: str) -> str:
        parts = [f"{len(self.changed)} ticket{'s' if len(self.changed) != 1 else ''} {verb}"]
        if self.stale:
            parts.append(f"{len(self.stale)} changed by someone else first, left alone")
        if self.refused:
            parts.append(f"{len(self.refused)} skipped ({next(iter(self.refused.values()))})")
        return "; ".join(parts) + "."


def _audited(ticket: Ticket) -> dict[str, Any]:
    """The audited view of a ticket: what an event's "before" and "after" record."""
    return {
        "state": ticket.state,
        "assignee": ticket.assignee.get_username() if ticket.assignee else None,
        "resolution": ticket.resolution,
        "cause": ticket.cause,
        "cause_text": ticket.cause_text,
    }


VERB_TEXT = {
    "claimed": "claimed it",
    "assigned": "assigned it",
    "unassigned": "unassigned it",
    "closed": "closed it",
    "reopened": "reopened it",
    "commented": "commented",
    "raw.view": "read raw data",
}


def describe(event: AuditEvent) -> str:
    """An audit event in words, e.g. "assigned it to ravi" or "closed it as explained"."""
    after = event.data.get("after", {})
    text = VERB_TEXT.get(event.verb, event.verb)
    if event.verb == "assigned" and after.get("assignee"):
        text += f" to {after['assignee']}"
    if event.verb == "closed" and after.get("resolution"):
        text += f" as {after['resolution']}"
        if after.get("cause"):
            text += f" ({Ticket.Cause(after['cause']).label})"
        if event.data.get("bulk"):
            text += " in a bulk close"
        if "right" in event.data:
            right = event.data["right"] or {}
            text += f"; {right.get('source') or 'none of them'} was right"
            if right.get("observation"):
                text += f" ({right['observation']})"
    if event.data.get("undoes"):
        text += ", undoing a bulk close"
    return text


Check = Callable[[Ticket], str | None]


def _change(
    expected: Mapping[int, int],
    *,
    actor,
    verb: str,
    changes: dict[str, Any],
    refuse: Check,
    note: Mapping[str, Any] | None = None,
) -> Outcome:
    """Apply `changes` to each ticket still at its expected revision and not refused,
    one guarded UPDATE each, and audit every change (its event's data with `note` too: the
    bulk change it is part of, say); in one transaction."""
    outcome = Outcome()
    now = timezone.now()
    with transaction.atomic():
        tickets = (
            Ticket.objects.select_related("assignee").filter(pk__in=list(expected)).order_by("pk")
        )
        events = []
        lost = []
        for ticket in tickets:
            if ticket.revision != expected[ticket.pk]:
                lost.append(ticket.pk)
                continue
            reason = refuse(ticket)
            if reason:
                outcome.refused[ticket.pk] = reason
                continue
            updated = Ticket.objects.filter(pk=ticket.pk, revision=ticket.revision).update(
                **changes, revision=F("revision") + 1, updated_at=now
            )
            if not updated:
                lost.append(ticket.pk)
                continue
            before = _audited(ticket)
            for name, value in changes.items():
                setattr(ticket, name, value)
            events.append(
                AuditEvent(
                    actor=actor,
                    verb=verb,
                    ticket=ticket,
                    target=f"ticket {ticket.pk}",
                    data={
                        "revision": ticket.revision + 1,
                        "before": before,
                        "after": _audited(ticket),
                        **(note or {}),
                    },
                )
            )
            outcome.changed.append(ticket.pk)
        audit_records(events)
    outcome.stale = _stale_changes(lost)
    return outcome


def _stale_changes(ticket_ids: list[int]) -> list[StaleChange]:
    """Who changed these tickets last, read after their change won (so it is committed)."""
    if not ticket_ids:
        return []
    # The change that won, not a comment made since (comments change no revision).
    last_event = (
        AuditEvent.objects.filter(ticket=OuterRef("pk"))
        .exclude(verb="commented")
        .order_by("-id")
        .values("id")[:1]
    )
    tickets = list(
        Ticket.objects.select_related("assignee")
        .filter(pk__in=ticket_ids)
        .annotate(last_event_id=Subquery(last_event))
        .order_by("pk")
    )
    events = AuditEvent.objects.select_related("actor").in_bulk(
        [t.last_event_id for t in tickets if t.last_event_id]
    )
    return [StaleChange(ticket, events.get(ticket.last_event_id)) for ticket in tickets]


def _single(ticket: Ticket, outcome: Outcome) -> Ticket:
    """The result of a one-ticket change: the ticket as changed, or why it was not."""
    if outcome.stale:
        raise StaleChangeError(outcome.stale[0])
    if outcome.refused:
        raise TicketActionError(outcome.refused[ticket.pk])
    return Ticket.objects.select_related("assignee", "closed_by").get(pk=ticket.pk)


def _require_open(ticket: Ticket) -> str | None:
    return None if ticket.state == Ticket.State.OPEN else "the ticket is closed"


def ticket_claim(ticket: Ticket, *, revision: int, actor) -> Ticket:
    def refuse(current: Ticket) -> str | None:
        if current.assignee_id == actor.pk:
            return "you already hold this ticket"
        if current.assignee is not None:
            return f"{current.assignee.get_username()} holds this ticket; assign it to take it over"
        return _require_open(current)

    outcome = _change(
        {ticket.pk: revision},
        actor=actor,
        verb="claimed",
        changes={"assignee": actor},
        refuse=refuse,
    )
    return _single(ticket, outcome)


def _check_assignee(assignee) -> None:
    if assignee is not None and not assignee.has_perm(WORK_TICKET):
        raise TicketActionError(f"{assignee.get_username()} may not work tickets")


def tickets_assign(expected: Mapping[int, int], *, actor, assignee) -> Outcome:
    """Assign (or, with None, unassign) each ticket still at its expected revision."""
    _check_assignee(assignee)
    assignee_id = assignee.pk if assignee else None

    def refuse(current: Ticket) -> str | None:
        if current.assignee_id == assignee_id:
            return f"already with {assignee.get_username()}" if assignee else "already unassigned"
        return None

    verb = "assigned" if assignee else "unassigned"
    return _change(expected, actor=actor, verb=verb, changes={"assignee": assignee}, refuse=refuse)


def ticket_assign(ticket: Ticket, *, revision: int, actor, assignee) -> Ticket:
    return _single(ticket, tickets_assign({ticket.pk: revision}, actor=actor, assignee=assignee))


def _closing(resolution: str, cause: str, cause_text: str) -> dict[str, Any]:
    cause_text = cause_text.strip()
    if resolution == Ticket.Resolution.EXPLAINED:
        # "Settled by a newer policy version" is recorded only by close_settled_by_policy.
        if cause not in REVIEWER_CAUSE_VALUES:
            raise TicketActionError("closing as explained needs one of the causes offered")
        if cause == Ticket.Cause.OTHER and not cause_text:
            raise TicketActionError("the cause “other” needs a few words saying what it was")
    elif resolution == Ticket.Resolution.UNEXPLAINED:
        cause = ""
    else:
        raise TicketActionError("close as explained or unexplained")
    return {"resolution": resolution, "cause": cause, "cause_text": cause_text}


def check_closing(resolution: str, cause: str, cause_text: str) -> None:
    """Raise TicketActionError when a close with these values would be refused."""
    _closing(resolution, cause, cause_text)


def tickets_close(
    expected: Mapping[int, int],
    *,
    actor,
    resolution: str,
    cause: str = "",
    cause_text: str = "",
    bulk: str = "",
) -> Outcome:
    """Close these tickets; `bulk` names a bulk change, which its author may undo for a
    while (bulk_undo): each close's audit event records it."""
    note = {"bulk": bulk} if bulk else None
    return _close(expected, actor, _closing(resolution, cause, cause_text), note)


def tickets_close_settled(
    expected: Mapping[int, int], *, actor, version_number: int, bulk: str = ""
) -> Outcome:
    """Close as explained by a newer policy version, the one cause no reviewer picks;
    `bulk` names the change for undoing, as in tickets_close."""
    closing = {
        "resolution": Ticket.Resolution.EXPLAINED,
        "cause": Ticket.Cause.POLICY,
        "cause_text": f"would be resolved under v{version_number}",
    }
    return _close(expected, actor, closing, {"bulk": bulk} if bulk else None)


def _close(
    expected: Mapping[int, int],
    actor,
    closing: dict[str, Any],
    note: Mapping[str, Any] | None = None,
) -> Outcome:
    changes = {
        **closing,
        "state": Ticket.State.CLOSED,
        "closed_by": actor,
        "closed_at": timezone.now(),
    }
    return _change(
        expected, actor=actor, verb="closed", changes=changes, refuse=_require_open, note=note
    )


def ticket_close(
    ticket: Ticket,
    *,
    revision: int,
    actor,
    resolution: str,
    cause: str = "",
    cause_text: str = "",
    right: str = "",
) -> Ticket:
    """Close one ticket; `right` marks which of a conflict's observations was right (its
    id, or marks.NONE_RIGHT), recorded with the close as a TicketMark in its transaction.
    Without `right` nothing is marked."""
    closing = _closing(resolution, cause, cause_text)
    with transaction.atomic():
        mark = marks.mark_to_record(ticket, right, closing["cause"]) if right else None
        note = {"right": marks.mark_note(mark)} if mark is not None else None
        outcome = _close({ticket.pk: revision}, actor, closing, note)
        if mark is not None and outcome.changed:
            mark.ticket_revision = revision + 1
            mark.marked_by = actor
            mark.save()
            # The suggested rules are computed again by a worker, once this commits.
            durable.send(Tasks.SUGGESTIONS_REFRESH)
    return _single(ticket, outcome)


_REOPENING = {
    "state": Ticket.State.OPEN,
    "resolution": "",
    "cause": "",
    "cause_text": "",
    "closed_by": None,
    "closed_at": None,
}


def _refuse_open(current: Ticket) -> str | None:
    return "the ticket is already open" if current.state == Ticket.State.OPEN else None


def ticket_reopen(ticket: Ticket, *, revision: int, actor) -> Ticket:
    outcome = _change(
        {ticket.pk: revision},
        actor=actor,
        verb="reopened",
        changes=_REOPENING,
        refuse=_refuse_open,
    )
    return _single(ticket, outcome)


# A bulk close can be undone by its author for this long.
UNDO_SECONDS = 600


def bulk_closed(bulk: str, actor) -> dict[int, int]:
    """The tickets a bulk close of `actor` closed, with the revision each close made; empty
    once UNDO_SECONDS have passed or once it was undone."""
    # A NUL names no bulk change, and PostgreSQL refuses it in a query.
    if not bulk or NUL in bulk:
        return {}
    since = timezone.now() - timedelta(seconds=UNDO_SECONDS)
    events = AuditEvent.objects.filter(actor=actor, verb="closed", data__bulk=bulk)
    if AuditEvent.objects.filter(verb="reopened", data__undoes=bulk).exists():
        return {}
    return dict(events.filter(created_at__gte=since).values_list("ticket_id", "data__revision"))


def bulk_undo(bulk: str, *, actor) -> Outcome:
    """Reopen exactly what the bulk close `bulk` of `actor` closed, each as a new audited
    change (its event names the bulk change it undoes; history is never rewritten). A
    ticket changed since its close is left alone and reported."""
    closed = bulk_closed(bulk, actor)
    if not closed:
        raise TicketActionError("that bulk change can no longer be undone")
    return _change(
        closed,
        actor=actor,
        verb="reopened",
        changes=_REOPENING,
        refuse=_refuse_open,
        note={"undoes": bulk},
    )


def ticket_comment(ticket: Ticket, *, actor, text: str) -> TicketComment:
    """Comments never conflict: they add to the ticket without changing it."""
    text = text.strip()
    if not text:
        raise TicketActionError("a comment needs some text")
    with transaction.atomic():
        comment = TicketComment.objects.create(ticket=ticket, author=actor, text=text)
        audit_record(
            actor=actor,
            verb="commented",
            ticket=ticket,
            target=f"ticket {ticket.pk}",
            comment=comment.pk,
        )
    return comment


def revisions_as_seen(selected: QuerySet[Ticket], seen: DataStamp) -> dict[int, int]:
    """The revisions the selected tickets had on a page rendered under `seen`, for a bulk
    change of all of them: one changed since then fails, reported with who changed it, and
    one opened since is left out. Every change bumps the revision and appends one audit
    event (a comment only appends), so the revision seen is today's less the changes since.
    Tickets closed before the page was rendered are not counted in."""
    changes_since = Count(
        "audit_events",
        filter=Q(audit_events__id__gt=seen.newest_event) & ~Q(audit_events__verb="commented"),
    )
    rows = (
        selected.filter(pk__lte=seen.newest_ticket)
        .annotate(changes_since=changes_since)
        .filter(Q(state=Ticket.State.OPEN) | Q(changes_since__gt=0))
        .values_list("pk", "revision", "changes_since")
    )
    return {pk: revision - changes for pk, revision, changes in rows}


def family_revisions(fingerprint: str, seen: DataStamp) -> dict[int, int]:
    """The family's open tickets as a page rendered under `seen` showed them."""
    return revisions_as_seen(Ticket.objects.filter(fingerprint=fingerprint), seen)
