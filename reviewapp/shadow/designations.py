"""Which candidates are in shadow: an approver puts a candidate policy (a draft, a proposal
applied to it, a published version) in shadow beside the active one, and takes it out (a
ShadowDesignation; each change an AuditEvent). While it is in shadow, every newly ingested
run is also judged under it (shadow.judging), and a past window can be backfilled
(shadow.backfill)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from reviewapp.judging.policies import latest_version
from reviewapp.models import (
    AuditEvent,
    PolicyCandidate,
    PolicyVersion,
    RuleProposal,
    ShadowDesignation,
    draft_name,
    policy_name,
    proposal_name,
)
from reviewapp.policy.candidates import (
    candidate_of_draft,
    candidate_of_proposal,
    candidate_of_version,
)


class ShadowError(ValueError):
    """A shadow action that cannot be done as asked; the message says why."""


def _audit(actor: Any, verb: str, designation: ShadowDesignation, **data: Any) -> None:
    AuditEvent.objects.create(
        actor=actor if actor is not None and actor.is_authenticated else None,
        verb=verb,
        target=f"{designation.candidate.label} in shadow",
        data={"designation": designation.pk, "candidate": designation.candidate_id, **data},
    )


def candidate_choices() -> list[tuple[str, str]]:
    """What can be put in shadow, as (choice, label): the draft, each pending or approved
    unpublished proposal applied to it, each published version but the active one."""
    active = latest_version()
    number = active.number if active else 0
    choices = [("draft", f"{draft_name(number)}: the active version with every approved change")]
    proposals = RuleProposal.objects.filter(
        state__in=[RuleProposal.State.PENDING, RuleProposal.State.APPROVED],
        published_in__isnull=True,
    ).order_by("-id")[:50]
    choices += [
        (f"proposal-{p.pk}", f"{proposal_name(number, p.pk)} ({p.state}): {p.sentence}")
        for p in proposals
    ]
    versions = PolicyVersion.objects.exclude(number=number).order_by("-number")[:50]
    choices += [(f"version-{v.number}", f"{policy_name(v)}, published") for v in versions]
    return choices


def candidate_choose(choice: str, *, user: Any) -> PolicyCandidate:
    """The candidate a choice of candidate_choices names (made when first chosen)."""
    kind, _, ident = choice.partition("-")
    if kind == "draft":
        return candidate_of_draft(user=user)
    if kind == "proposal" and ident.isdecimal():
        proposal = RuleProposal.objects.filter(pk=int(ident), published_in__isnull=True).first()
        if proposal is not None and proposal.state != RuleProposal.State.REJECTED:
            return candidate_of_proposal(proposal, user=user)
    if kind == "version" and ident.isdecimal():
        version = PolicyVersion.objects.filter(number=int(ident)).first()
        if version is not None:
            return candidate_of_version(version, user=user)
    raise ShadowError(f"nothing to put in shadow under {choice!r}")


def shadow_start(candidate: PolicyCandidate, *, user: Any, reason: str = "") -> ShadowDesignation:
    """Put a candidate in shadow beside the active version, from now on."""
    active = latest_version()
    if candidate.kind == PolicyCandidate.Kind.VERSION and candidate.version_id == (
        active.pk if active else None
    ):
        raise ShadowError(f"{candidate.label} is the active version: nothing to compare it with")
    try:
        with transaction.atomic():
            designation = ShadowDesignation.objects.create(
                candidate=candidate,
                reason=reason.strip(),
                started_by=user if user is not None and user.is_authenticated else None,
            )
            _audit(user, "shadow.started", designation, reason=reason.strip())
    except IntegrityError:
        raise ShadowError(f"{candidate.label} is already in shadow") from None
    return designation


def shadow_end(designation: ShadowDesignation, *, user: Any, reason: str = "") -> None:
    """Take a candidate out of shadow: runs ingested from now on are not judged under it;
    what it judged is kept."""
    with transaction.atomic():
        ended = ShadowDesignation.objects.filter(pk=designation.pk, ended_at__isnull=True).update(
            ended_at=timezone.now(),
            ended_by=user if user is not None and user.is_authenticated else None,
        )
        if not ended:
            raise ShadowError(f"{designation.candidate.label} is no longer in shadow")
        _audit(user, "shadow.ended", designation, reason=reason.strip())
    designation.refresh_from_db()


def designations_at(moment: datetime) -> list[ShadowDesignation]:
    """The candidates in shadow at that moment."""
    return list(
        ShadowDesignation.objects.filter(started_at__lte=moment)
        .filter(Q(ended_at__isnull=True) | Q(ended_at__gte=moment))
        .select_related("candidate")
        .order_by("started_at", "id")
    )
