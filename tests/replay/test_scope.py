"""What a policy means to change (issue 26.5, the regression suite): a change where its
rules' fields and actions and its fields' settings reach is intended; any other is a
regression, the only kind the suite shows in red and the command fails on."""

from __future__ import annotations

import pytest
from django.urls import reverse

from reviewapp.models import ReplayJob, Ticket
from reviewapp.policy.candidates import candidate_of_proposal
from reviewapp.policy.documents import change_scope
from reviewapp.replay.compare import RunPair, Said, Side, compare_runs
from reviewapp.replay.fixtures import freeze_ticket, suite_mark
from reviewapp.replay.impact import impact
from reviewapp.replay.jobs import job_work
from tests.replay.conftest import propose_owner

BASE = {"fields": {"status": {}, "amount": {}}, "rules": []}


def with_rule(**rule):
    return {**BASE, "rules": [{"id": "r", "kind": "authoritative-source", **rule}]}


def test_the_scope_is_the_fields_and_actions_the_change_names():
    scope = change_scope(BASE, with_rule(field="status", source="crm", actions=["ship_goods"]))
    assert scope.reaches("status", "ship_goods")
    assert not scope.reaches("status", "issue_refund")
    assert not scope.reaches("amount", "ship_goods")
    anywhere = change_scope(BASE, with_rule(field="status", source="crm"))
    assert anywhere.reaches("status", None) and not anywhere.reaches("amount", None)
    field = change_scope(
        BASE, {**BASE, "fields": {"status": {}, "amount": {"normalize": {"kind": "money"}}}}
    )
    assert field.reaches("amount", "anything") and not field.reaches("status", None)
    assert change_scope(BASE, {**BASE, "safeActions": ["stop"]}).everything
    assert not change_scope(BASE, {**BASE, "name": "renamed"}).reaches("status", None)


def said(id_: int, kind: str, action: str) -> Said:
    return Said(id_, kind, None, None, None, False, action)


def test_a_change_outside_the_scope_is_a_regression_and_inside_is_not():
    before = Side(
        1,
        {
            (None, "status"): said(1, "conflict", "ship_goods"),
            (None, "amount"): said(2, "conflict", "ship_goods"),
        },
    )
    after = Side(
        2,
        {
            (None, "status"): said(3, "resolved", "ship_goods"),
            (None, "amount"): said(4, "resolved", "ship_goods"),
        },
    )
    scope = change_scope(BASE, with_rule(field="status", source="crm", actions=["ship_goods"]))
    compared = compare_runs(9, [RunPair(1, "run-1", before, after)], scope)
    assert compared.counts["newly_resolved"] == 2 and compared.counts["intended"] == 1
    intended = {row[5]: row[-1] for row in compared.rows}  # field -> intended
    assert intended == {"status": True, "amount": False}
    # Without a scope (a job from before baselines), nothing is intended.
    assert compare_runs(9, [RunPair(1, "run-1", before, after)]).counts["intended"] == 0


@pytest.mark.django_db
def test_the_suite_shows_the_meant_change_apart_and_no_regression_in_red(
    client, small_desk, reviewer, approver
):
    moving = freeze_ticket(Ticket.objects.get(run__run_id="run-4"), name="ledger owned")
    suite_mark(moving, in_suite=True, user=reviewer)
    proposal = propose_owner(reviewer)
    found = impact(candidate_of_proposal(proposal), user=reviewer, start=True)
    for job in found.jobs:
        job_work(job.pk, budget=60)
    [(_, job)] = found.suite
    job = ReplayJob.objects.get(pk=job.pk)
    assert (job.changed_groups, job.intended_groups, job.regressions) == (1, 1, 0)
    client.force_login(approver)
    page = client.get(reverse("replay-impact-proposal", args=[proposal.pk])).content.decode()
    assert "1 group changed as the change means to" in page
    assert 'class="regression"' not in page
    regressions = client.get(reverse("replay-changes", args=[job.pk]) + "?category=regressions")
    intended = client.get(reverse("replay-changes", args=[job.pk]) + "?category=intended")
    assert "0 groups" in regressions.content.decode()
    assert "1 group<" in intended.content.decode()
