"""seed_demo leaves suggested rules to look at: one waiting for a person, one dismissed."""

import pytest
from django.core.management import call_command

from reviewapp.models import SuggestionDismissal, TicketMark
from reviewapp.suggestions.work import annotated, ready_suggestions

pytestmark = pytest.mark.django_db


def test_seed_demo_marks_tickets_into_one_suggestion_waiting_and_one_dismissed(
    capsys, monkeypatch, settings
):
    monkeypatch.setenv("DEMO_PASSWORD", "a-demo-password")
    # The default corpus: families large enough to reach SUGGEST_MIN_DECISIONS.
    call_command("seed_demo", runs=360)
    assert "Demo suggestions: 2 families marked, 2 rules suggested, 1 dismissed." in (
        capsys.readouterr().out
    )
    assert TicketMark.objects.count() == 2 * settings.SUGGEST_MIN_DECISIONS
    assert ready_suggestions().count() == 1
    (dismissed,) = [s for s in annotated() if s.dismissed]
    dismissal = SuggestionDismissal.objects.get()
    assert dismissal.key == dismissed.key
    assert (dismissal.dismissed_by.username, bool(dismissal.reason)) == ("approver", True)
    # Run again: what it made is left as it is.
    call_command("seed_demo", runs=360)
    assert TicketMark.objects.count() == 2 * settings.SUGGEST_MIN_DECISIONS
    assert "Demo suggestions: already there." in capsys.readouterr().out
