"""seed_demo leaves months of tallies, worked unevenly, and one closed month with drift."""

import pytest
from django.core.management import call_command

from reviewapp.models import MonthClosing
from reviewapp.reports.entries import kept_months, tallies_refresh
from reviewapp.reports.months import month_views

pytestmark = pytest.mark.django_db


def test_the_demo_has_months_of_tallies_and_a_frozen_month_with_drift(monkeypatch, capsys):
    monkeypatch.setenv("DEMO_PASSWORD", "a-demo-password")
    call_command("seed_demo", runs=120)
    assert "closed, with 1 ticket(s) closed since" in capsys.readouterr().out
    tallies_refresh()
    months = kept_months()
    assert len(months) == 6
    views = month_views(months[0], months[-1])
    assert all(view.shown.has_tally for view in views)
    assert sum(view.shown.counts.reviewer for view in views) > 0
    assert sum(view.shown.counts.closed_unexplained for view in views) > 0
    (closing,) = MonthClosing.objects.all()
    frozen = views[0]
    assert closing.month == months[0] and frozen.status.frozen
    assert frozen.drift is not None and frozen.drift.any
    # Again: nothing more is closed or frozen.
    call_command("seed_demo", runs=120)
    assert MonthClosing.objects.count() == 1
