"""What a person does with a suggested rule, and what it shows: its evidence (the marked
closes behind it, who decided them) and counter-examples; dismissing it (with why, kept
until the evidence changes) or turning it into a proposal (four eyes as always)."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.db.models import F

from reviewapp.accounts.audit import audit_record
from reviewapp.models import RuleProposal, RuleSuggestion, SuggestionDismissal, TicketMark
from reviewapp.policy.versions import PolicyWorkError, proposal_create
from reviewapp.replay.impact import proposal_impact_start
from reviewapp.suggestions.work import AUTHORITATIVE

EVIDENCE_SHOWN = 200


@dataclass
class Evidence:
    agreeing: list[TicketMark]
    counter: list[TicketMark]


def suggestion_evidence(suggestion: RuleSuggestion) -> Evidence:
    """The marked closes of its family that stand (the ticket's close is the mark's), split
    into those that agree with the suggestion and its counter-examples."""
    marks = (
        TicketMark.objects.filter(
            ticket__fingerprint=suggestion.fingerprint, ticket_revision=F("ticket__revision")
        )
        .select_related("ticket", "marked_by")
        .order_by("-id")
    )
    if suggestion.kind != AUTHORITATIVE:
        marks = marks.filter(domain=suggestion.domain)
    agreeing: list[TicketMark] = []
    counter: list[TicketMark] = []
    for mark in marks[:EVIDENCE_SHOWN]:
        if suggestion.kind == AUTHORITATIVE:
            agrees = mark.source == suggestion.source
        else:
            agrees = bool(mark.right_is_higher)
        (agreeing if agrees else counter).append(mark)
    return Evidence(agreeing, counter)


def default_rationale(suggestion: RuleSuggestion) -> str:
    return (
        f"Suggested from {suggestion.agreeing} of {suggestion.decisions} reviewers' decisions "
        f"in the family {suggestion.family_label}."
    )


def suggestion_dismiss(suggestion: RuleSuggestion, *, user, reason: str) -> SuggestionDismissal:
    """Dismissed for the evidence it has now: shown again once that changes."""
    if not reason.strip():
        raise PolicyWorkError("say why you dismiss it")
    with transaction.atomic():
        dismissal = SuggestionDismissal.objects.create(
            key=suggestion.key,
            evidence_stamp=suggestion.evidence_stamp,
            reason=reason.strip(),
            dismissed_by=user,
        )
        audit_record(
            actor=user,
            verb="suggestion.dismissed",
            target=f"suggestion {suggestion.key}",
            sentence=suggestion.sentence,
            evidence=suggestion.evidence_stamp,
            reason=reason.strip(),
        )
    return dismissal


def suggestion_propose(suggestion: RuleSuggestion, *, user, rationale: str) -> RuleProposal:
    """A proposal of the suggested change, its evidence's tickets as motivating ones; its
    impact started as any proposal's. Someone else decides it."""
    evidence = suggestion_evidence(suggestion)
    proposal = proposal_create(
        user=user,
        kind=suggestion.kind,
        change=dict(suggestion.change),
        rationale=rationale or default_rationale(suggestion),
        tickets=[mark.ticket for mark in evidence.agreeing],
    )
    RuleSuggestion.objects.filter(pk=suggestion.pk).update(proposal=proposal)
    audit_record(
        actor=user,
        verb="suggestion.proposed",
        target=f"suggestion {suggestion.key}",
        proposal=proposal.pk,
        evidence=suggestion.evidence_stamp,
    )
    proposal_impact_start(proposal, user=user)
    return proposal
