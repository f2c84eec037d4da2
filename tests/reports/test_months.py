"""Closed months: a frozen tally does not change when a ticket of that month is closed
later, and shows the drift since; reopening needs a reason and is audited; the periodic job
closes each month once, the configured number of days after it ends."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.test import override_settings

from reviewapp.models import AuditEvent, MonthClosing
from reviewapp.reports.calendar import month_parse
from reviewapp.reports.entries import tallies_refresh
from reviewapp.reports.months import (
    MonthError,
    close_due_months,
    month_close,
    month_reopen,
    month_views,
    months_due,
)
from reviewapp.reports.tally import Counts
from reviewapp.review.changes import ticket_close
from reviewapp.tasks import close_tally_months_task
from tests.reports.traces import month_runs, tickets_of

pytestmark = pytest.mark.django_db

SEPTEMBER, OCTOBER = month_parse("2026-09"), month_parse("2026-10")


def view_of(month):
    tallies_refresh()
    (view,) = month_views(month, month, breakdowns=True)
    return view


def test_a_frozen_month_does_not_change_when_its_ticket_is_closed_later(
    tmp_path, approver, reviewer
):
    month_runs(tmp_path, {"2026-09": 3, "2026-10": 1})
    before = view_of(SEPTEMBER).live
    assert before.counts.open == 3 and before.counts.explained == 0

    closing = month_close(SEPTEMBER, actor=approver, reason="for the Q3 report")
    frozen_figures = MonthClosing.objects.get(pk=closing.pk).figures
    ticket = tickets_of("2026-09")[0]
    ticket_close(
        ticket,
        revision=ticket.revision,
        actor=reviewer,
        resolution="explained",
        cause="replica-lag",
    )

    view = view_of(SEPTEMBER)
    assert view.status.frozen
    # What is reported is what was frozen, whatever happened since.
    assert view.shown.counts == before.counts
    assert MonthClosing.objects.get(pk=closing.pk).figures == frozen_figures
    # Today's figures, and the drift between the two.
    assert view.live.counts == Counts(reviewer=1, open=2)
    assert view.drift is not None and view.drift.any
    assert view.drift.counts == Counts(reviewer=1, open=-1)
    assert view.drift.rows["cause"] == {
        ("replica-lag",): Counts(reviewer=1),
        ("",): Counts(open=-1),
    }
    # A month not frozen has no drift, and follows the tickets.
    assert view_of(OCTOBER).drift is None
    event = AuditEvent.objects.get(verb="month closed")
    assert event.actor == approver and event.data["month"] == "2026-09"
    assert event.data["reason"] == "for the Q3 report" and event.data["by"] == "hand"


def test_reopening_needs_a_reason_is_audited_and_makes_the_figures_live(
    tmp_path, approver, reviewer
):
    month_runs(tmp_path, {"2026-09": 2})
    month_close(SEPTEMBER, actor=approver)
    with pytest.raises(MonthError, match="needs a reason"):
        month_reopen(SEPTEMBER, actor=approver, reason="  ")
    with pytest.raises(MonthError, match="was closed on"):
        month_close(SEPTEMBER, actor=approver)
    month_reopen(SEPTEMBER, actor=approver, reason="a late delivery of September traces")
    event = AuditEvent.objects.get(verb="month reopened")
    assert event.data["reason"] == "a late delivery of September traces"
    ticket = tickets_of("2026-09")[0]
    ticket_close(ticket, revision=ticket.revision, actor=reviewer, resolution="unexplained")
    view = view_of(SEPTEMBER)
    assert not view.status.frozen and view.drift is None
    assert view.shown.counts == Counts(closed_unexplained=1, open=1)
    with pytest.raises(MonthError, match="is not closed"):
        month_reopen(SEPTEMBER, actor=approver, reason="again")
    # Closed again by hand: a second snapshot beside the first, both kept.
    month_close(SEPTEMBER, actor=approver)
    assert list(MonthClosing.objects.values_list("action", flat=True)) == [
        "closed",
        "reopened",
        "closed",
    ]
    assert view_of(SEPTEMBER).shown.counts == Counts(closed_unexplained=1, open=1)


def test_what_cannot_be_closed(tmp_path, approver):
    month_runs(tmp_path, {"2026-09": 1})
    with pytest.raises(MonthError, match="has not ended"):
        month_close(month_parse("2999-01"), actor=approver)
    with pytest.raises(MonthError, match="nothing to freeze"):
        month_close(month_parse("2026-07"), actor=approver)
    assert not MonthClosing.objects.exists()


@override_settings(TALLY_CLOSE_AFTER_DAYS=5)
def test_the_job_closes_each_month_once_the_days_after_it_ends(tmp_path, approver):
    month_runs(tmp_path, {"2026-08": 1, "2026-09": 1, "2026-10": 1})
    october_4 = datetime(2026, 10, 4, tzinfo=UTC)
    october_6 = datetime(2026, 10, 6, tzinfo=UTC)
    # On October 4, September ended three days ago: only August is due.
    assert close_due_months(october_4) == [month_parse("2026-08")]
    assert close_due_months(october_4) == []
    assert close_due_months(october_6) == [SEPTEMBER]
    closing = MonthClosing.objects.get(month=SEPTEMBER)
    assert closing.actor is None and closing.figures["counts"]["open"] == 1
    assert AuditEvent.objects.get(verb="month closed", target="tallies 2026-09").data["by"] == (
        "schedule"
    )
    # A month reopened by hand is not closed again by the job: someone reopened it on
    # purpose, and closes it again when done.
    month_reopen(SEPTEMBER, actor=approver, reason="recount")
    assert months_due(datetime(2026, 11, 30, tzinfo=UTC)) == [OCTOBER]
    # The task is a thin wrapper over the same (months up to today: October is due too).
    assert close_tally_months_task() == ["2026-10"]
