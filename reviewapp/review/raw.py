"""A ticket's raw data, read on purpose: its envelopes (the lines its disputed observations,
their calls and the action that followed came in), and its handoff package, whose
identities are tokens unless someone with the raw data permission asks for them and says
why (privacy.access)."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from reviewapp.models import Ticket, TraceLine, TraceRecord
from reviewapp.privacy.access import raw_lines_read, raw_reason, raw_view_record
from reviewapp.privacy.tokens import token_of
from reviewapp.review.evidence import (
    TicketEvidence,
    handoff_package,
    ticket_evidence,
    with_judgement,
)

IDENTITIES_TOKENS, IDENTITIES_RAW = "tokens", "raw"


@dataclass
class Envelope:
    """One line of the ticket's evidence, as it arrived."""

    label: str
    line: TraceLine


def ticket_envelopes(evidence: TicketEvidence) -> list[Envelope]:
    """The lines of the disputed observations, of their calls and of the action that
    followed, each once, in line order."""
    found: dict[int, Envelope] = {}

    def add(label: str, record: TraceRecord | None) -> None:
        if record is not None and record.line_id not in found:
            found[record.line_id] = Envelope(label, record.line)

    for column in evidence.columns:
        add(f"observation {column.observation.observation_id}", column.record)
        if column.call is not None:
            add(f"call {column.call.tool_call_id}", column.call_record)
    if evidence.action is not None:
        add(f"action {evidence.action.name}", evidence.action_record)
    return sorted(found.values(), key=lambda envelope: envelope.line.pk)


def ticket_envelopes_read(user: Any, ticket: Ticket, *, reason: str | None) -> list[Envelope]:
    """The ticket's envelopes for a person with the raw data permission who says why: the
    reading is recorded on the ticket's trail (privacy.access.RawAccessRefused otherwise)."""
    raw_reason(user, reason)  # refused before the evidence is read
    envelopes = ticket_envelopes(ticket_evidence(with_judgement(ticket)))
    raw_lines_read(
        user,
        [envelope.line for envelope in envelopes],
        reason=reason,
        what=f"ticket #{ticket.pk} envelopes",
        ticket=ticket,
    )
    return envelopes


def ticket_handoff(
    user: Any, ticket: Ticket, *, identities: str = IDENTITIES_TOKENS, reason: str | None = None
) -> dict[str, Any]:
    """The handoff package, saying which identities it carries: tokens, or (with the raw
    data permission and a reason, recorded) the values as the trace held them."""
    if identities == IDENTITIES_RAW:
        why = raw_reason(user, reason)
        # Recorded first: the package's audit trail names its own export.
        raw_view_record(
            user, reason=why, what=f"ticket #{ticket.pk} handoff with identities", ticket=ticket
        )
        package = handoff_package(ticket_evidence(with_judgement(ticket)))
        return {"identities": IDENTITIES_RAW, **package}
    package = handoff_package(ticket_evidence(with_judgement(ticket)))
    return {"identities": IDENTITIES_TOKENS, **identities_tokenised(package)}


def identities_tokenised(package: dict[str, Any]) -> dict[str, Any]:
    """The package with every identity it carries (the ticket's entity, the entities asked
    for and echoed, the values of calls' and the action's arguments, idempotency keys) as
    its stable token: joins on them still hold, the values cannot be read back. Observed
    values, the evidence the verdict weighed, stay."""
    tokenised = copy.deepcopy(package)
    ticket = tokenised["ticket"]
    ticket["entity"] = _token(ticket.get("entity"))
    for observation in tokenised["observations"]:
        observation["arguments"] = _arguments(observation.get("arguments"))
        for key in ("requestedEntity", "returnedEntity"):
            observation[key] = _token(observation.get(key))
    action = tokenised.get("actionThatFollowed")
    if action:
        action["arguments"] = _arguments(action.get("arguments"))
        action["idempotencyKey"] = _token(action.get("idempotencyKey"))
    return tokenised


def _token(value: Any) -> Any:
    return value if value is None or value == "" else token_of(value)


def _arguments(arguments: dict[str, Any] | None) -> dict[str, Any] | None:
    if arguments is None:
        return None
    return {name: _token(value) for name, value in arguments.items()}
