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


def running_holder(job: ReplayJob) -> int | None:
    """The process id of a worker holding one of the job's items, if one is being judged."""
    claim = (
        ReplayItem.objects.filter(job=job, state="running")
        .values_list("claimed_by", flat=True)
        .first()
    )
    return int(claim.split(":")[1]) if claim else None


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
    for share in (0.2, 0.5):
        wait_for(lambda s=share: done_items(job) >= items * s, 120, f"{share:.0%} of the items")
        # The pool process holding an item being judged (its claim names it).
        holder = wait_for(lambda: running_holder(job), 30, "an item being judged")
        assert holder in pool_children(process.pid)
        os.kill(holder, signal.SIGKILL)
    started = time.monotonic()
    finished(job, 180)
    recovery = time.monotonic() - started
    assert job.state == "done", job.error
    assert_each_group_once(job)
    retried = ReplayItem.objects.filter(job=job, attempts__gt=1).count()
    assert retried >= 1, "no kill hit an item being judged: nothing was proven"
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


@pytest.mark.reliability
def test_ten_jobs_each_hit_by_a_sigkill_all_finish_with_nothing_lost_or_doubled(
    worker, tmp_path, reviewer, settings
):
    """The fault matrix's row 6, repeated: a pool process killed at a random moment of
    each of ten jobs (each under a policy of its own, so that each judges afresh)."""
    import random

    from reviewapp.policy.candidates import candidate_of_file

    process, _ = worker
    settings.REPLAY_CHUNK_RUNS = 100
    ingest_lines(tmp_path, desk_lines(1500))
    fixture_set = freeze_open_tickets(user=reviewer)
    rng = random.Random(6)
    complete = retried = 0
    for round_number in range(10):
        document = {
            "name": f"round {round_number}",
            "fields": {"status": {}},
            "rules": [
                {
                    "id": "ledger",
                    "kind": "authoritative-source",
                    "field": "status",
                    "source": "order-ledger",
                }
            ],
        }
        job = job_start(fixture_set, candidate_of_file(document), user=reviewer)
        target = rng.randint(0, job.item_count // 2)
        wait_for(lambda j=job, t=target: done_items(j) >= t, 60, f"{target} items done")
        holder = wait_for(lambda j=job: running_holder(j), 30, "an item being judged")
        if holder in pool_children(process.pid):
            os.kill(holder, signal.SIGKILL)
        finished(job, 120)
        assert job.state == "done", job.error
        assert_each_group_once(job)
        complete += 1
        retried += ReplayItem.objects.filter(job=job, attempts__gt=1).count()
    print(
        f"\nSIGKILL a pool process in each of 10 jobs: {complete}/10 complete, 0 missing, "
        f"0 duplicated, {retried} item(s) claimed again"
    )
    assert retried >= 5
