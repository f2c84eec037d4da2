"""From a reviewer's judgment to an approved, numbered, immutable policy version.

A proposal records one change with its rationale and motivating tickets. Someone other than
the proposer approves or rejects it (the database refuses otherwise). Approved proposals
gather into the draft, which an approver publishes as version N+1: the active policy from
then on. Publishing rewrites no verdict: open tickets the new version would settle are
only labelled, prospectively.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from reviewapp import durable
from reviewapp.accounts.audit import audit_record
from reviewapp.celery import Tasks
from reviewapp.infra.locks import transaction_lock
from reviewapp.judging.policies import default_policy_document, latest_version
from reviewapp.models import (
    PolicyVersion,
    RuleProposal,
    SettlementLabelling,
    Ticket,
    policy_name,
)
from reviewapp.policy.documents import apply_change, describe_change


class PolicyWorkError(ValueError):
    """A policy action that cannot be done as asked; the message says why."""


class FourEyesError(PolicyWorkError):
    pass


def _audit(actor, verb: str, target: str, **data: Any) -> None:
    audit_record(actor=actor, verb=verb, target=target, **data)


def active_document() -> tuple[int, dict[str, Any]]:
    """The active version's number and document (0 and the built-in default before any)."""
    latest = latest_version()
    if latest is None:
        return 0, default_policy_document()
    return latest.number, dict(latest.document)


def superseded(number: int, *, made: str = "measured") -> str:
    """Empty while version `number` (0: the built-in default) is the active one; else, in
    words, that what a page shows was made under another: "measured against v1; v2 is
    active since 2 Dec 14:05" (`made`: what was done under it, e.g. "counted under")."""
    latest = latest_version()
    active = latest.number if latest is not None else 0
    if number == active:
        return ""
    since = f" since {latest.published_at:%-d %b %H:%M}" if latest is not None else ""
    return f"{made} {policy_name(number)}; {policy_name(active)} is active{since}"


def counted_under(versions: Iterable[tuple[int, int]]) -> str:
    """Empty when every count was made under the active version; else, in words, which
    versions made them: "counted under v1 (12 runs) and v2 (3 runs); v2 is active since
    2 Dec 14:05". `versions`: (policy number, runs counted under it)."""
    made = [(number, runs) for number, runs in versions if runs]
    latest = latest_version()
    active = latest.number if latest is not None else 0
    if all(number == active for number, _ in made):
        return ""
    parts = [f"{policy_name(n)} ({runs} run{'' if runs == 1 else 's'})" for n, runs in made]
    listed = ", ".join(parts[:-1]) + f" and {parts[-1]}" if len(parts) > 1 else parts[0]
    since = f" since {latest.published_at:%-d %b %H:%M}" if latest is not None else ""
    return f"counted under {listed}; {policy_name(active)} is active{since}"


def approved_unpublished() -> list[RuleProposal]:
    return list(
        RuleProposal.objects.filter(state=RuleProposal.State.APPROVED, published_in__isnull=True)
        .select_related("proposed_by", "decided_by")
        .order_by("decided_at", "id")
    )


def draft_document(extra: tuple[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The next version as it stands: the active document with every approved, unpublished
    proposal applied in approval order (and `extra`, a change being considered)."""
    _, document = active_document()
    for proposal in approved_unpublished():
        document = apply_change(document, proposal.kind, proposal.change)
    if extra is not None:
        document = apply_change(document, *extra)
    return document


def proposal_create(
    *, user, kind: str, change: dict[str, Any], rationale: str, tickets: Iterable[Ticket] = ()
) -> RuleProposal:
    """Record a proposed change; PolicyError/ValueError when it would not make a valid policy."""
    if not rationale.strip():
        raise PolicyWorkError("a proposal needs its rationale")
    draft_document((kind, change))
    number, _ = active_document()
    with transaction.atomic():
        proposal = RuleProposal.objects.create(
            kind=kind,
            change=change,
            sentence=describe_change(kind, change),
            rationale=rationale.strip(),
            proposed_by=user,
            base_number=number,
        )
        proposal.tickets.set(list(tickets))
        # A suggested rule it covers is proposed already (reviewapp/suggestions).
        durable.send(Tasks.SUGGESTIONS_REFRESH)
        _audit(
            user,
            "proposal.created",
            f"proposal #{proposal.pk}",
            sentence=proposal.sentence,
            kind=kind,
            change=change,
        )
    return proposal


def proposal_decide(*, proposal: RuleProposal, user, approve: bool, reason: str) -> RuleProposal:
    """Approve or reject a pending proposal; never by its own proposer."""
    if proposal.proposed_by_id == user.pk:
        raise FourEyesError("you proposed this change: someone else must approve or reject it")
    if not approve and not reason.strip():
        raise PolicyWorkError("say why you reject it")
    state = RuleProposal.State.APPROVED if approve else RuleProposal.State.REJECTED
    with transaction.atomic():
        if approve:
            # Approving must leave a valid draft: the proposals already approved come first.
            draft_document((proposal.kind, proposal.change))
        updated = RuleProposal.objects.filter(
            pk=proposal.pk, state=RuleProposal.State.PENDING
        ).update(
            state=state, decided_by=user, decided_at=timezone.now(), decision_reason=reason.strip()
        )
        if not updated:
            current = RuleProposal.objects.select_related("decided_by").get(pk=proposal.pk)
            raise PolicyWorkError(
                f"already {current.state} by {current.decided_by} at {current.decided_at:%Y-%m-%d %H:%M}"
            )
        _audit(
            user,
            f"proposal.{state}",
            f"proposal #{proposal.pk}",
            reason=reason.strip(),
            sentence=proposal.sentence,
        )
    proposal.refresh_from_db()
    return proposal


def policy_version_publish(*, user, reason: str) -> PolicyVersion:
    """Publish the draft as the next numbered version, the active policy from now on."""
    if not reason.strip():
        raise PolicyWorkError("say why this version is published")
    with transaction.atomic():
        # One publish at a time: a second one waits, then finds the draft published (two
        # that read the same approvals would otherwise both try to publish them).
        _publish_lock()
        proposals = approved_unpublished()
        if not proposals:
            raise PolicyWorkError("nothing to publish: no approved proposal is waiting")
        base, _ = active_document()
        document = draft_document()
        number = (PolicyVersion.objects.aggregate(top=Max("number"))["top"] or 0) + 1
        try:
            with transaction.atomic():
                version = PolicyVersion.objects.create(
                    number=number,
                    name=document.get("name", ""),
                    document=document,
                    reason=reason.strip(),
                    based_on=base,
                    published_by=user,
                )
        except IntegrityError:
            raise PolicyWorkError(
                "another version was published at the same moment: look at it and try again"
            ) from None
        RuleProposal.objects.filter(pk__in=[p.pk for p in proposals]).update(published_in=version)
        SettlementLabelling.objects.create(version=version)
        _audit(
            user,
            "policy.published",
            f"policy v{number}",
            reason=reason.strip(),
            proposals=[p.pk for p in proposals],
        )
        # Labelled by a worker (policy.settlements.LABELLINGS) once this commits.
        durable.send(Tasks.LABEL_SETTLEMENTS, version.pk)
        # The suggested rules it covers now are no longer suggested (reviewapp/suggestions).
        durable.send(Tasks.SUGGESTIONS_REFRESH)
    return version


def _publish_lock() -> None:
    """One publish at a time, for the transaction."""
    transaction_lock("crosscheck_publish")


def policy_document_import(*, user, document: Any, rationale: str) -> RuleProposal:
    """An imported policy document becomes a proposal like any other change."""
    if not isinstance(document, dict):
        raise PolicyWorkError("a policy document is a JSON object")
    return proposal_create(
        user=user,
        kind=RuleProposal.Kind.DOCUMENT,
        change={"document": document},
        rationale=rationale,
    )


def policy_version_export(version: PolicyVersion) -> dict[str, Any]:
    return {"version": version.number, **version.document}
