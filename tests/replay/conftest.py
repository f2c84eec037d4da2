"""A review desk of real ingested runs, proposals to replay against it, and a real worker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from django.db import connection

from reviewapp.policy.versions import proposal_create
from tests.ingest.test_worker import wait_for
from tests.paths import ROOT
from tests.seeding import desk_lines, ingest_lines

# A worker's lease on an item: short, so that one killed is claimed again within seconds.
LEASE_SECONDS = 4


@pytest.fixture
def small_desk(tmp_path):
    ingest_lines(tmp_path, desk_lines(30))


def propose_owner(user, source: str = "order-ledger"):
    return proposal_create(
        user=user,
        kind="authoritative-source",
        change={"field": "status", "source": source},
        rationale=f"{source} owns status",
    )


@pytest.fixture(scope="module")
def worker(django_db_blocker, tmp_path_factory):
    """A worker with two pool processes on the test database, short leases so that an item
    whose process was killed is claimed again within seconds."""
    assert os.environ.get("REDIS_URL"), (
        "these tests need a real Redis: run them through scripts/test"
    )
    with django_db_blocker.unblock():
        database = connection.settings_dict["NAME"]
    base = os.environ["DATABASE_URL"].rsplit("/", 1)[0]
    log_path = tmp_path_factory.mktemp("replay-worker") / "worker.log"
    env = {
        **os.environ,
        "DATABASE_URL": f"{base}/{database}",
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "REPLAY_LEASE_SECONDS": str(LEASE_SECONDS),
        "REPLAY_TASK_SECONDS": "15",
    }
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "reviewapp.celery", "worker", "--concurrency=2"]
            + ["--loglevel=INFO", "--without-gossip", "--without-mingle"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        wait_for(
            lambda: "ready" in log_path.read_text() or process.poll() is not None,
            60,
            "the worker to start",
        )
        assert process.poll() is None, log_path.read_text()
        yield process, log_path
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
