"""The demo corpus shows a new user every kind of thing Crosscheck finds."""

import pytest

from reviewapp.demo.corpus import DEMO_POLICY, demo_lines
from reviewapp.engine import judge_runs, load_policy, parse_line


def judged():
    return judge_runs([parse_line(line) for line in demo_lines(runs=120)], load_policy(DEMO_POLICY))


def test_it_is_the_same_every_time():
    assert demo_lines(runs=50) == demo_lines(runs=50)
    assert demo_lines(runs=50, seed=1) != demo_lines(runs=50)


def test_it_covers_every_verdict_kind_and_reason():
    verdicts = [v for j in judged() for v in j.verdicts]
    assert {v.kind for v in verdicts} == {"confirmed", "resolved", "conflict"}
    assert {v.reason for v in verdicts if v.reason} == {
        "identity-mismatch",
        "partial-result",
        "review-required",
        "no-approved-precedence",
    }
    assert {v.rule for v in verdicts if v.kind == "resolved"} == {
        "payments-newest",
        "refund-service-owns-status",
    }
    assert any(v.unsafe for v in verdicts)


def test_it_covers_every_finding_but_report_only_identity():
    # identity-mismatch is a finding only in report-only mode; the demo policy blocks.
    kinds = {f.kind for j in judged() for f in j.findings}
    assert kinds == {
        "duplicate-tool-call-id",
        "orphan-observation",
        "duplicate-observation-id",
        "event-body-mismatch",
        "agent-resolution-disagrees",
        "tool-outside-allowlist",
        "out-of-scope-entity",
        "missing-prerequisite",
        "mutation-budget-exceeded",
        "retry-without-idempotency-key",
        "retry-after-unknown-outcome",
    }


@pytest.mark.django_db
def test_seed_demo_is_safe_to_run_twice(capsys, monkeypatch):
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client
    from django.urls import reverse

    from reviewapp.models import (
        Alert,
        AlertDelivery,
        AlertDestination,
        ErasureRequest,
        PolicyVersion,
        RedactionRuleSet,
        Ticket,
    )

    monkeypatch.setenv("DEMO_PASSWORD", "a-demo-password")
    call_command("seed_demo", runs=60)
    tickets = Ticket.objects.count()
    call_command("seed_demo", runs=60)
    assert Ticket.objects.count() == tickets > 0
    assert PolicyVersion.objects.get().number == 1
    # The privacy screens have something to show: rules in force, an erasure waiting.
    assert RedactionRuleSet.objects.get().number == 1
    assert ErasureRequest.objects.get().state == ErasureRequest.State.REQUESTED
    # The alerts page shows two destinations and deliveries, recorded, never sent.
    assert AlertDestination.objects.count() == 2
    deliveries = AlertDelivery.objects.all()
    assert deliveries.count() > 2
    assert {delivery.state for delivery in deliveries} == {"skipped"}
    assert Alert.objects.filter(kind="new_family").exists()
    client = Client()
    client.force_login(get_user_model().objects.get(username="admin"))
    page = client.get(reverse("alerts")).content.decode()
    assert "Ops channel (demo)" in page and "On-call email (demo)" in page
    assert "<strong>skipped</strong>" in page and "not sent" in page
    assert "reviewer" in capsys.readouterr().out


@pytest.mark.django_db
def test_outside_debug_the_demo_users_need_a_password_of_ones_own(monkeypatch, settings):
    from django.contrib.auth import get_user_model
    from django.core.management import CommandError, call_command

    monkeypatch.delenv("DEMO_PASSWORD", raising=False)
    settings.DEBUG = False
    with pytest.raises(CommandError, match="set DEMO_PASSWORD"):
        call_command("seed_demo", no_corpus=True)
    assert not get_user_model().objects.filter(username="admin").exists()
    settings.DEBUG = True
    call_command("seed_demo", no_corpus=True)
    assert get_user_model().objects.get(username="admin").check_password("crosscheck-demo")
