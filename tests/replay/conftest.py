"""A review desk of real ingested runs, proposals to replay against it, and a real worker."""

from __future__ import annotations

import pytest

from reviewapp.policy.versions import proposal_create
from tests.seeding import desk_lines, ingest_lines
from tests.workers import celery_worker

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
    """A worker with two pool processes, short leases so that an item whose process was
    killed is claimed again within seconds."""
    log_path = tmp_path_factory.mktemp("replay-worker") / "worker.log"
    extra = {"REPLAY_LEASE_SECONDS": str(LEASE_SECONDS), "REPLAY_TASK_SECONDS": "15"}
    with celery_worker(django_db_blocker, log_path, concurrency=2, env=extra) as process:
        yield process, log_path
