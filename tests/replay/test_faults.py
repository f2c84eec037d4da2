"""The whole worker killed with SIGKILL mid-replay (pool and all, with the messages it held)
and started again: the items it held are free once their worker's rows are (its connection
died) and their short lease ran out, beat's reconciler sends the job again, and every item
ends done exactly once, within a minute on the shipped defaults. A live stack of its own (Redis, worker, beat)."""

from __future__ import annotations

import time

import pytest
from django.db import connection

from reviewapp.models import ReplayItem
from reviewapp.policy.candidates import candidate_of_proposal
from reviewapp.replay.fixtures import freeze_open_tickets
from reviewapp.replay.jobs import job_start
from tests.reliability.stack import Stack, wait_for
from tests.replay.conftest import propose_owner
from tests.replay.test_worker import (
    assert_each_group_once,
    done_items,
    finished,
)
from tests.seeding import desk_lines, ingest_lines

pytestmark = [pytest.mark.reliability, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def stack(django_db_blocker, tmp_path):
    import os

    assert os.environ.get("REDIS_URL"), "fault tests need the services scripts/test starts"
    with django_db_blocker.unblock():
        database = connection.settings_dict["NAME"]
    base = os.environ["DATABASE_URL"].rsplit("/", 1)[0]
    # The shipped defaults (lease, reconciler period, requeue time): the recovery measured
    # is the one a user gets.
    live = Stack(database_url=f"{base}/{database}", workdir=tmp_path / "stack")
    live.workdir.mkdir(parents=True)
    try:
        live.start_redis()
        live.start_worker(concurrency=2)
        live.start_beat()
        yield live
    finally:
        live.stop()


def test_the_whole_worker_killed_and_restarted_finishes_every_item_once(
    stack, tmp_path, reviewer, settings
):
    settings.REPLAY_CHUNK_RUNS = 100
    ingest_lines(tmp_path, desk_lines(6000))
    candidate = candidate_of_proposal(propose_owner(reviewer))
    # Not sent from here (this process knows another Redis): beat sends it, as it would a
    # job whose message was lost.
    job = job_start(freeze_open_tickets(user=reviewer), candidate, user=reviewer, send=False)
    wait_for(lambda: done_items(job) >= job.item_count // 4, 120, "a quarter of the items")
    running = ReplayItem.objects.filter(job=job, state="running")
    wait_for(running.exists, 30, "an item being judged")
    held = running.count()
    stack.processes["worker"].kill()  # SIGKILL to its process group: the pool goes too
    killed_at = time.monotonic()
    done_then = done_items(job)
    time.sleep(1)
    stack.start_worker(concurrency=2)
    finished(job, 180)
    recovery = time.monotonic() - killed_at
    assert job.state == "done", job.error
    assert recovery < 60, recovery
    assert done_then < job.item_count
    assert_each_group_once(job)
    again = ReplayItem.objects.filter(job=job, attempts__gt=1).count()
    print(
        f"\nSIGKILL whole worker: {job.item_count} items ({held} being judged at the kill, "
        f"{done_then} done), 0 missing, 0 duplicated, {again} claimed again; "
        f"finished {recovery:.1f}s after the kill (the shipped defaults)"
    )
