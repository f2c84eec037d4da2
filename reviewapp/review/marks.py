"""Which observation was right: a reviewer marks it (or "none of them") when closing a
conflict ticket as explained. The mark is recorded with the close, in its transaction, and
keeps what the suggested rules group by (reviewapp/suggestions): the right source, the
revision domain every observation shares, and whether the right one had the unique highest
revision there."""

from __future__ import annotations

from dataclasses import dataclass

from reviewapp.engine import Observation
from reviewapp.models import Ticket, TicketMark, Verdict
from reviewapp.review.errors import TicketActionError
from reviewapp.review.evidence import ticket_evidence, with_judgement

# What the close form posts for "none of them was right".
NONE_RIGHT = "none"


@dataclass(frozen=True)
class MarkChoice:
    observation_id: str
    source: str
    value: str


def mark_choices(ticket: Ticket) -> list[MarkChoice]:
    """The observations a reviewer can mark right on this open conflict ticket: its
    verdict's evidence (one query), with the source and value the ticket keeps of each."""
    if ticket.kind != Ticket.Kind.CONFLICT or ticket.state != Ticket.State.OPEN:
        return []
    if ticket.verdict_id is None:
        return []
    evidence = Verdict.objects.filter(pk=ticket.verdict_id).values_list("evidence", flat=True)
    ids = list(evidence.first() or [])
    kept = list(ticket.disputed or [])
    if len(ids) == len(kept):
        return [
            MarkChoice(i, str(entry[0]), str(entry[1])) for i, entry in zip(ids, kept, strict=True)
        ]
    # Some evidence was not an observation the ticket kept: read the run for the rest.
    columns = ticket_evidence(with_judgement(ticket)).columns
    return [
        MarkChoice(c.observation.observation_id, c.observation.source, c.raw_json) for c in columns
    ]


def _observations(ticket: Ticket) -> list[Observation]:
    return [c.observation for c in ticket_evidence(with_judgement(ticket)).columns]


def shared_domain(observations: list[Observation]) -> str:
    """The revision domain all the observations name, "" when they do not all name one."""
    domains = {o.revision_domain for o in observations}
    if len(domains) != 1:
        return ""
    return next(iter(domains)) or ""


def _right_is_higher(chosen: Observation, observations: list[Observation]) -> bool | None:
    """Whether `chosen` had the unique highest revision of the one domain they share; None
    when their revisions are not comparable (as higher-source-revision would say)."""
    revisions = [o.source_revision for o in observations]
    if not shared_domain(observations) or any(r is None for r in revisions):
        return None
    top = max(r for r in revisions if r is not None)
    return chosen.source_revision == top and revisions.count(top) == 1


def mark_to_record(ticket: Ticket, right: str, cause: str) -> TicketMark:
    """The mark `right` (an observation id of the ticket's, or NONE_RIGHT) would record,
    unsaved; TicketActionError when it names no observation of this conflict."""
    if ticket.kind != Ticket.Kind.CONFLICT:
        raise TicketActionError("only a conflict's observations can be marked right")
    observations = _observations(ticket)
    domain = shared_domain(observations)
    if right == NONE_RIGHT:
        return TicketMark(ticket=ticket, domain=domain, cause=cause)
    chosen = next((o for o in observations if o.observation_id == right), None)
    if chosen is None:
        raise TicketActionError("the observation marked right is not one of this ticket's")
    return TicketMark(
        ticket=ticket,
        observation_id=chosen.observation_id,
        source=chosen.source,
        domain=domain,
        right_is_higher=_right_is_higher(chosen, observations),
        cause=cause,
    )


def mark_note(mark: TicketMark) -> dict[str, str | None]:
    """What the close's audit event records of the mark."""
    return {"observation": mark.observation_id or None, "source": mark.source or None}


def current_mark(ticket: Ticket) -> TicketMark | None:
    """The mark of the close the ticket is in, if it was marked (a closed ticket only)."""
    if ticket.state != Ticket.State.CLOSED:
        return None
    return TicketMark.objects.filter(ticket=ticket, ticket_revision=ticket.revision).first()
