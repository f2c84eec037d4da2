"""seed_demo leaves the replay screens something to show: a fixture set in the regression
suite and a finished replay of it, once however often it runs."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from reviewapp.demo.replay import DEMO_SET
from reviewapp.models import FixtureSet, ReplayJob, RuleProposal
from reviewapp.replay.fixtures import in_suite

pytestmark = pytest.mark.django_db


def test_seed_demo_leaves_a_suite_set_and_a_finished_replay(capsys, monkeypatch):
    monkeypatch.setenv("DEMO_PASSWORD", "a-demo-password")
    call_command("seed_demo", runs=80)
    out = capsys.readouterr().out
    fixture_set = FixtureSet.objects.get(name=DEMO_SET)
    assert in_suite(fixture_set) and fixture_set.run_count > 1
    job = ReplayJob.objects.get(fixture_set=fixture_set)
    assert job.state == "done" and job.counts["groups"] > 0
    assert job.candidate.proposal.state == "pending"
    assert f"Demo replay: {fixture_set.run_count} runs of the largest family" in out
    # The proposal's page shows its impact: every open ticket, started as it was proposed.
    impact = ReplayJob.objects.get(fixture_set__origin="open-tickets")
    assert (impact.candidate, impact.started_by) == (job.candidate, job.started_by)
    pending = RuleProposal.objects.filter(state="pending").count()
    call_command("seed_demo", runs=80)
    assert "Demo replay: already there." in capsys.readouterr().out
    assert ReplayJob.objects.count() == 2
    assert RuleProposal.objects.filter(state="pending").count() == pending
