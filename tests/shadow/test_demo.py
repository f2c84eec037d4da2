"""seed_demo leaves a candidate in shadow with counts to show, and live checks answered;
run again, it adds nothing."""

from datetime import UTC, timedelta

import pytest
from django.core.management import call_command
from django.db.models import Max

from reviewapp.gate.answers import answer_counts
from reviewapp.infra.days import Window
from reviewapp.models import GateAnswer, Judgement, Run, ShadowBackfill, ShadowDesignation
from reviewapp.shadow.compare import comparison

pytestmark = pytest.mark.django_db


def test_the_demo_has_a_candidate_in_shadow_with_counts(monkeypatch, capsys):
    monkeypatch.setenv("DEMO_PASSWORD", "a-demo-password")
    call_command("seed_demo", runs=120)
    designation = ShadowDesignation.objects.get()
    assert designation.is_open and designation.candidate.kind == "proposal"
    assert ShadowBackfill.objects.get().state == "done"
    latest = Run.objects.aggregate(latest=Max("started_at"))["latest"].astimezone(UTC).date()
    compared = comparison(designation, Window(latest - timedelta(days=60), latest))
    assert compared.total.new and compared.total.unblocked and compared.total.unchanged
    assert set(answer_counts(Window.last(1)).total.as_dict().values()) == {1, 2}
    shadow, answers = Judgement.objects.filter(purpose="shadow").count(), GateAnswer.objects.count()

    call_command("seed_demo", runs=120)
    assert ShadowDesignation.objects.count() == 1
    assert Judgement.objects.filter(purpose="shadow").count() == shadow
    assert GateAnswer.objects.count() == answers
