"""Replay on real Celery workers (the test Redis, the test database): what they find is
the engine's verdict, computed here; a pool process killed with SIGKILL mid-job leaves no
item missing and none done twice; cancel stops the job within seconds; nothing recorded
changes."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

import pytest
from django.db.models import Sum

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


def process_state(pid: int) -> str:
    """The process's state letter (R, S, T for stopped, Z for dead and not yet reaped...),
    X once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return "X"
    return stat.rsplit(")", 1)[1].split()[0]


def live_claim(job: ReplayJob, worker_pid: int) -> tuple[int, str, int] | None:
    """One of the job's items being judged by a live pool process: the item, the claim and
    the process (an item whose process was killed stays running until its lease ends, and
    the dead process stays the pool's child until it is reaped)."""
    running = ReplayItem.objects.filter(job=job, state="running")
    children = pool_children(worker_pid)
    for item_id, token in running.values_list("pk", "claimed_by"):
        holder = int(token.split(":")[1])
        if holder in children and process_state(holder) not in "ZX":
            return item_id, token, holder
    return None


def kill_mid_item(job: ReplayJob, worker_pid: int, after_done: int = 0) -> bool:
    """Once `after_done` of the job's items are done, SIGKILL a pool process while it holds
    one of them; True once a kill is known to have hit mid-item, False if the job ended
    first. The process is stopped first (SIGSTOP) and its item looked at while it cannot
    move: still running, the process is killed (a stopped process dies without running
    again, so the item cannot be finished by it); finished meanwhile, the process goes on
    and another is tried."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        job.refresh_from_db()
        if job.is_finished:
            return False
        claim = live_claim(job, worker_pid) if done_items(job) >= after_done else None
        if claim is None:
            time.sleep(0.005)
            continue
        item_id, token, holder = claim
        try:
            os.kill(holder, signal.SIGSTOP)
        except ProcessLookupError:
            continue
        killed = False
        try:
            wait_for(lambda h=holder: process_state(h) in "tTZX", 10, "the process stopped")
            time.sleep(0.2)  # a commit it had sent before it stopped lands meanwhile
            running = ReplayItem.objects.filter(pk=item_id, state="running", claimed_by=token)
            if process_state(holder) in "tT" and running.exists():
                os.kill(holder, signal.SIGKILL)
                killed = True
        finally:
            if not killed:  # never leave a stopped process holding locks behind
                with contextlib.suppress(ProcessLookupError):
                    os.kill(holder, signal.SIGCONT)
        if killed:
            return True
    raise AssertionError("no kill hit an item being judged within 60s")


def claims_again(job: ReplayJob) -> int:
    """How many more claims the job's items took than one each (a killed item's second)."""
    attempts = ReplayItem.objects.filter(job=job).aggregate(total=Sum("attempts"))["total"]
    return attempts - job.item_count


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
    # Both pool processes, one after the other, each holding an item.
    assert kill_mid_item(job, process.pid, after_done=items // 5), "the job ended first"
    assert kill_mid_item(job, process.pid), "the job ended before the second kill"
    started = time.monotonic()
    finished(job, 180)
    recovery = time.monotonic() - started
    assert job.state == "done", job.error
    assert_each_group_once(job)
    retried = claims_again(job)
    assert retried >= 2  # each killed item was claimed again (one may have been hit twice)
    log = log_path.read_text()
    assert "WorkerLostError" in log or "SIGKILL" in log
    print(
        f"\nSIGKILL pool process x2: {items} items, {job.counts['groups']} groups, 0 missing, "
        f"0 duplicated, {retried} claim(s) again, finished {recovery:.1f}s after the last kill"
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
    ingest_lines(tmp_path, desk_lines(3000))
    fixture_set = freeze_open_tickets(user=reviewer)
    rng = random.Random(6)
    complete = retried = hits = 0
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
        hits += kill_mid_item(job, process.pid, after_done=rng.randint(0, job.item_count // 3))
        finished(job, 120)
        assert job.state == "done", job.error
        assert_each_group_once(job)
        complete += 1
        retried += claims_again(job)
    print(
        f"\nSIGKILL a pool process in each of 10 jobs: {hits} hit mid-item, {complete}/10 "
        f"complete, 0 missing, 0 duplicated, {retried} claim(s) again"
    )
    assert hits == 10
    assert retried >= hits
