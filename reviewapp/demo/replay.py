"""The demo's replay screens (manage.py seed_demo): the desk's largest conflict family
frozen and put in the regression suite, a reviewer's proposal drawn from it (its first
source owns its field), and that family replayed under the draft with the proposal, on
the spot, so that the first page anyone opens shows a finished replay. The proposal's
impact over every open ticket is started as the propose page starts it, for a worker.
Run again, it leaves what it made as it is."""

from __future__ import annotations

from typing import Any

from django.db.models import Count

from reviewapp.models import FixtureSet, RuleProposal, Ticket
from reviewapp.policy.candidates import candidate_of_proposal
from reviewapp.policy.versions import proposal_create
from reviewapp.replay.fixtures import freeze_family, suite_mark
from reviewapp.replay.impact import proposal_impact_start
from reviewapp.replay.jobs import job_start, job_work

DEMO_SET = "Demo: the largest conflict family"


def seed_demo_replay(*, reviewer: Any) -> str:
    """Make the demo's fixture set, proposal and finished replay; what it did, in a line."""
    if FixtureSet.objects.filter(name=DEMO_SET).exists():
        return "Demo replay: already there."
    largest = (
        Ticket.objects.filter(state=Ticket.State.OPEN, kind=Ticket.Kind.CONFLICT)
        .exclude(sources="")
        .values("fingerprint")
        .annotate(size=Count("id"))
        .order_by("-size", "fingerprint")
        .first()
    )
    if largest is None:
        return "Demo replay: no open conflict to freeze."
    fixture_set = freeze_family(
        largest["fingerprint"],
        name=DEMO_SET,
        user=reviewer,
        description="Frozen by seed_demo: the family most tickets belong to, as it was.",
    )
    suite_mark(fixture_set, in_suite=True, user=reviewer)
    sample = Ticket.objects.filter(fingerprint=largest["fingerprint"]).first()
    assert sample is not None
    proposal = proposal_create(
        user=reviewer,
        kind=RuleProposal.Kind.AUTHORITATIVE_SOURCE,
        change={"field": sample.field, "source": sample.sources.split(",")[0]},
        rationale="Demo: the largest family keeps asking who owns this field.",
        tickets=Ticket.objects.filter(fingerprint=largest["fingerprint"])[:20],
    )
    job = job_start(
        fixture_set,
        candidate_of_proposal(proposal, user=reviewer),
        user=reviewer,
        reason="seed_demo",
        send=False,
    )
    job_work(job.pk, budget=float("inf"))
    job.refresh_from_db()
    proposal_impact_start(proposal, user=reviewer)
    return (
        f"Demo replay: {fixture_set.run_count} runs of the largest family under proposal "
        f"#{proposal.pk}, {job.state}: {job.changed_groups} groups changed, "
        f"{job.counts.get('tickets_settled', 0)} tickets it would settle."
    )
