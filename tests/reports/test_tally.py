"""The tally equals a brute-force count over the stored verdicts, findings and tickets, on
randomized worlds (hypothesis), in several time zones, before and after the world changes
(runs judged again, clocks and agents moved, tickets closed and reopened); and the queue's
tally-month filter selects exactly the tickets each figure counts."""

from __future__ import annotations

from datetime import timedelta
from unittest import mock

import pytest
from django.db import transaction
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reviewapp.reports import entries
from reviewapp.reports.calendar import month_add
from reviewapp.reports.entries import tallies_refresh
from reviewapp.reports.tally import DIMENSIONS, OUTCOMES, breakdown_counts, month_tallies
from reviewapp.review.queue import QueueFilters, filtered_tickets
from tests.reports.worlds import Truth, brute_force, build, change, changes, worlds

pytestmark = pytest.mark.django_db


def assert_tally_is(truth: Truth) -> None:
    months = sorted(set(truth.runs) | set(truth.counts))
    first, last = months[0], months[-1]
    tallies = {tally.month: tally for tally in month_tallies(month_add(first, -1), last)}
    for month, tally in tallies.items():
        if month not in truth.runs:
            assert tally.runs is None and tally.counts.total == 0, month
            continue
        assert (tally.runs, tally.groups) == truth.runs[month], month
        expected = {outcome: truth.counts[month][outcome] for outcome in OUTCOMES}
        assert tally.counts.as_dict() == expected, month
    breakdowns = breakdown_counts(months)
    for month in months:
        for name in DIMENSIONS:
            found = {key: counts.as_dict() for key, counts in breakdowns[month][name].items()}
            expected = {
                key: {outcome: by_outcome[outcome] for outcome in OUTCOMES}
                for key, by_outcome in truth.breakdowns[month][name].items()
            }
            assert found == expected, (month, name)


def assert_queue_selects_the_counted_tickets(truth: Truth) -> None:
    for month in truth.runs:
        key = f"{month:%Y-%m}"
        selections = {
            ("", "unexplained"): ("open", "closed_unexplained"),
            ("closed", "explained"): ("reviewer",),
            ("closed", "unexplained"): ("closed_unexplained",),
            ("open", ""): ("open",),
        }
        for (state, resolution), outcomes in selections.items():
            filters = QueueFilters(month=key, state=state, outcome=resolution)
            shown = set(filtered_tickets(filters, None).values_list("pk", flat=True))
            expected = set().union(*(truth.tickets[month][o] for o in outcomes))
            assert shown == expected, (key, state, resolution)
            counted = sum(truth.counts[month][o] for o in outcomes)
            # Each ticket stands for one discrepancy: the same number either way.
            assert len(shown) == counted, (key, state, resolution)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    world=worlds,
    later=changes,
    zone_later=st.sampled_from(("UTC", "Asia/Kolkata")),
    stragglers=st.sampled_from((entries.STRAGGLERS, timedelta(0))),
)
def test_the_tally_is_a_brute_force_count_of_what_is_stored(world, later, zone_later, stragglers):
    # Without a margin for late commits, a refresh reads again only what came after the
    # ids it saw: the incremental path alone must find every change.
    with (
        transaction.atomic(),
        mock.patch.object(entries, "STRAGGLERS", stragglers),
    ):
        with override_settings(TALLY_TIME_ZONE=world["zone"]):
            built = build(world)
            tallies_refresh()
            truth = brute_force(world["zone"])
            if truth.runs:
                assert_tally_is(truth)
                assert_queue_selects_the_counted_tickets(truth)
            change(built, later)
            # Only what changed is read again, and the result is the same as from scratch.
            tallies_refresh()
            truth = brute_force(world["zone"])
            if truth.runs:
                assert_tally_is(truth)
                assert_queue_selects_the_counted_tickets(truth)
        with override_settings(TALLY_TIME_ZONE=zone_later):
            # Another time zone: every month computed again.
            tallies_refresh()
            truth = brute_force(zone_later)
            if truth.runs:
                assert_tally_is(truth)
        transaction.set_rollback(True)


def test_a_refresh_with_nothing_changed_reads_no_run_again(tmp_path):
    from tests.seeding import conflict_run, ingest_lines

    ingest_lines(tmp_path, conflict_run("run-a") + conflict_run("run-b"))
    assert tallies_refresh() == 2
    assert tallies_refresh() == 0


def test_a_full_refresh_finds_what_changed_without_a_judgement(tmp_path):
    """A clock moved with no new judgement and unflagged (ingest flags the runs whose start
    it moves, Run.clock_moved: tests/ingest/test_run_start.py) is found by the full
    refresh beat runs."""
    from reviewapp.models import Run
    from reviewapp.reports.calendar import month_parse
    from tests.reports.traces import month_runs

    month_runs(tmp_path, {"2026-09": 1})
    with mock.patch.object(entries, "STRAGGLERS", timedelta(0)):
        tallies_refresh()
        Run.objects.update(started_at="2026-10-02T00:00:00Z")
        assert tallies_refresh() == 0
        assert tallies_refresh(full=True) == 1
    (october,) = month_tallies(month_parse("2026-10"), month_parse("2026-10"))
    assert october.runs == 1 and october.counts.open == 1
