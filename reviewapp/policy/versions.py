"""From a reviewer's judgment to an approved, numbered, immutable policy version.

A proposal records one change with its rationale and motivating tickets. Someone other than
the proposer approves or rejects it (the database refuses otherwise). Approved proposals
gather into the draft, which an approver publishes as version N+1: the active policy from
then on. Publishing rewrites no verdict: open tickets the new version would settle are
only labelled, prospectively.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from reviewapp.engine import Policy, judge_run, load_policy
from reviewapp.judging.policies import default_policy_document, latest_version, policy_of_version
from reviewapp.judging.store import stored_engine_records
from reviewapp.models import AuditEvent, PolicyVersion, ProspectiveSettlement, RuleProposal, Ticket
from reviewapp.policy.documents import apply_change, describe_change

if TYPE_CHECKING:
    from reviewapp.review.tickets import DataStamp

# How many open tickets a preview judges again; the count beyond is reported, not judged.
PREVIEW_TICKET_LIMIT = 300


class PolicyWorkError(ValueError):
    """A policy action that cannot be done as asked; the message says why."""


class FourEyesError(PolicyWorkError):
    pass


def _audit(actor, verb: str, target: str, **data: Any) -> None:
    AuditEvent.objects.create(actor=actor, verb=verb, target=target, data=data)


def active_document() -> tuple[int, dict[str, Any]]:
    """The active version's number and document (0 and the built-in default before any)."""
    latest = latest_version()
    if latest is None:
        return 0, default_policy_document()
    return latest.number, dict(latest.document)


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


def propose(
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
        _audit(
            user,
            "proposal.created",
            f"proposal #{proposal.pk}",
            sentence=proposal.sentence,
            kind=kind,
            change=change,
        )
    return proposal


def decide(*, proposal: RuleProposal, user, approve: bool, reason: str) -> RuleProposal:
    """Approve or reject a pending proposal; never by its own proposer."""
    if proposal.proposed_by_id == user.pk:
        raise FourEyesError("you proposed this change: someone else must approve or reject it")
    if approve and not reason.strip():
        reason = "approved"
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


def publish(*, user, reason: str) -> PolicyVersion:
    """Publish the draft as the next numbered version, the active policy from now on."""
    if not reason.strip():
        raise PolicyWorkError("say why this version is published")
    with transaction.atomic():
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
        _audit(
            user,
            "policy.published",
            f"policy v{number}",
            reason=reason.strip(),
            proposals=[p.pk for p in proposals],
        )
        transaction.on_commit(lambda: _queue_settlement_labels(version.pk), robust=True)
    return version


def _queue_settlement_labels(version_id: int) -> None:
    from reviewapp.tasks import label_settled_tickets_task

    label_settled_tickets_task.delay(version_id)


def import_document(*, user, document: Any, rationale: str) -> RuleProposal:
    """An imported policy document becomes a proposal like any other change."""
    if not isinstance(document, dict):
        raise PolicyWorkError("a policy document is a JSON object")
    return propose(
        user=user,
        kind=RuleProposal.Kind.DOCUMENT,
        change={"document": document},
        rationale=rationale,
    )


def export_document(version: PolicyVersion) -> dict[str, Any]:
    return {"version": version.number, **version.document}


# --- what a policy would settle -----------------------------------------------------


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
    records = stored_engine_records(list(by_run))
    found = []
    for run_pk, run_tickets in by_run.items():
        run_records = [record for _, record in records.get(run_pk, [])]
        if not run_records:
            continue
        verdicts = {
            (v.entity, v.field): v
            for v in judge_run(run_records[0].run_id, run_records, policy).verdicts
        }
        for ticket in run_tickets:
            verdict = verdicts.get((ticket.entity, ticket.field))
            if verdict is not None and verdict.kind != "conflict":
                found.append(Settlement(ticket, verdict.kind, verdict.rule, verdict.value))
    return found


def open_conflicts(field: str | None = None):
    tickets = Ticket.objects.filter(state=Ticket.State.OPEN, kind=Ticket.Kind.CONFLICT)
    if field and field != "*":
        tickets = tickets.filter(field=field)
    return tickets.order_by("-created_at", "-id")


def preview(kind: str, change: dict[str, Any]) -> tuple[list[Settlement], int]:
    """Which open tickets a proposed change would settle, and how many were considered."""
    policy = load_policy(draft_document((kind, change)))
    candidates = open_conflicts(change.get("field") if kind != "document" else None)
    considered = list(candidates.select_related("run")[:PREVIEW_TICKET_LIMIT])
    return settlements(policy, considered), candidates.count()


def label_settled_tickets(version: PolicyVersion) -> int:
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


def close_settled(*, version: PolicyVersion, actor, seen: DataStamp) -> str:
    """Close, as explained by the newer policy, every open ticket labelled for `version` as
    the page rendered under `seen` showed them: one changed since is left alone and
    reported, one labelled since is left for another look."""
    from reviewapp.review.tickets import close_settled_by_policy, revisions_as_seen

    labelled = Ticket.objects.filter(settlements__policy_version=version)
    outcome = close_settled_by_policy(
        revisions_as_seen(labelled, seen), actor=actor, version_number=version.number
    )
    return outcome.summary("closed")
