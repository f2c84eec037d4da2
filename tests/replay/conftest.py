"""A review desk of real ingested runs, and proposals to replay against it."""

from __future__ import annotations

import pytest

from reviewapp.policy.versions import proposal_create
from tests.seeding import desk_lines, ingest_lines


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
