"""Replay on real Celery workers (the test Redis, the test database): what they find is
the engine's verdict, computed here; a pool process killed with SIGKILL mid-job leaves no
item missing and none done twice; cancel stops the job within seconds; nothing recorded
changes."""

from __future__ import annotations

import os
import signal
import time

import pytest

from reviewapp.models import ReplayItem, ReplayJob
from reviewapp.policy.candidates import candidate_of_proposal
from reviewapp.replay.fixtures import freeze_open_tickets
from reviewapp.replay.jobs import job_cancel, job_start
from tests.ingest.test_worker import pool_children, wait_for
from tests.replay.conftest import propose_owner
from tests.replay.helpers import (
    changed_groups,
    engine_verdicts,
    recorded_state,
    replayed_verdicts,
    result_groups,
)
from tests.seeding import desk_lines, ingest_lines

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def start(tmp_path, reviewer, runs: int) -> ReplayJob:
    ingest_lines(tmp_path, desk_lines(runs))
    candidate = candidate_of_proposal(propose_owner(reviewer))
    return job_start(freeze_open_tickets(user=reviewer), candidate, user=reviewer)


def done_items(job: ReplayJob) -> int:
    return ReplayItem.objects.filter(job=job, state="done").count()


def finished(job: ReplayJob, timeout: float) -> ReplayJob:
    def ended():
        job.refresh_from_db()
        return job.is_finished

    wait_for(ended, timeout, f"replay #{job.pk} to end")
    return job


def assert_each_group_once(job: ReplayJob) -> None:
    """Every group judged as the engine judges it here, every changed one kept once."""
    expected = engine_verdicts(job)
    assert replayed_verdicts(job) == expected  # none missing, each as the engine says
    assert job.counts["groups"] == len(expected)
    kept = result_groups(job)
    assert len(kept) == len(set(kept))  # none twice
    assert set(kept) == changed_groups(job)  # none missing
    assert job.counts["groups"] - job.counts["unchanged"] == len(kept)


def test_workers_find_what_the_engine_says_and_change_nothing_recorded(
    worker, tmp_path, reviewer, settings
):
    settings.REPLAY_CHUNK_RUNS = 50
    ingest_lines(tmp_path, desk_lines(400))
    candidate = candidate_of_proposal(propose_owner(reviewer))
    before = recorded_state()
    job = job_start(freeze_open_tickets(user=reviewer), candidate, user=reviewer)
    finished(job, 120)
    assert job.state == "done", job.error
    assert_each_group_once(job)
    assert job.counts["tickets_settled"] == job.counts["newly_resolved"] > 0
    assert recorded_state() == before
    # Both pool processes took items.
    claimers = {
        c.rsplit(":", 1)[0]
        for c in ReplayItem.objects.filter(job=job).values_list("claimed_by", flat=True)
    }
    assert len(claimers) == 2


def test_a_pool_process_killed_mid_job_loses_and_doubles_nothing(
    worker, tmp_path, reviewer, settings
):
    process, log_path = worker
    settings.REPLAY_CHUNK_RUNS = 100
    job = start(tmp_path, reviewer, 5000)
    items = job.item_count
    kills = 0
    for share in (0.2, 0.5):
        wait_for(lambda s=share: done_items(job) >= items * s, 120, f"{share:.0%} of the items")
        busy = ReplayItem.objects.filter(job=job, state="running").exists()
        os.kill(pool_children(process.pid)[0], signal.SIGKILL)
        kills += busy
    started = time.monotonic()
    finished(job, 180)
    recovery = time.monotonic() - started
    assert job.state == "done", job.error
    assert kills >= 1, "no kill hit an item being judged: nothing was proven"
    assert_each_group_once(job)
    retried = ReplayItem.objects.filter(job=job, attempts__gt=1).count()
    log = log_path.read_text()
    assert "WorkerLostError" in log or "SIGKILL" in log
    print(
        f"\nSIGKILL pool process x2: {items} items, {job.counts['groups']} groups, 0 missing, "
        f"0 duplicated, {retried} item(s) claimed again, finished {recovery:.1f}s after the last kill"
    )


def test_cancel_stops_a_running_job_within_seconds(worker, tmp_path, reviewer, settings):
    settings.REPLAY_CHUNK_RUNS = 50
    job = start(tmp_path, reviewer, 4000)
    wait_for(lambda: done_items(job) >= 2, 60, "the job to be under way")
    cancelled_at = time.monotonic()
    assert job_cancel(job)

    def settled():
        return not ReplayItem.objects.filter(job=job, state="running").exists()

    wait_for(settled, 10, "the items being judged to end")
    stopped = time.monotonic() - cancelled_at
    done = done_items(job)
    time.sleep(2)
    assert done_items(job) == done < job.item_count
    assert ReplayItem.objects.filter(job=job, state="queued").count() == 0
    job.refresh_from_db()
    assert job.state == "cancelled"
    print(f"\ncancel: stopped {stopped:.2f}s after it, {done} of {job.item_count} items done")
    assert stopped < 5
