"""The proposal form's preview judges every open ticket the change concerns (up to
PREVIEW_TICKET_LIMIT, the motivating ones first), not the newest 300: a proposal that
settles its own motivating ticket says so whatever the desk's size."""

from __future__ import annotations

import pytest

from reviewapp.models import Ticket
from reviewapp.policy import settlements
from reviewapp.policy.settlements import settlement_preview
from tests.seeding import desk_lines, ingest_lines

pytestmark = pytest.mark.django_db
OWNER = {"field": "status", "source": "order-ledger"}


@pytest.fixture
def desk(tmp_path):
    ingest_lines(tmp_path, desk_lines(420))
    return Ticket.objects.filter(kind="conflict", state="open")


def expected(desk) -> set[str]:
    # order-ledger owns two runs in three; every seventh run agrees (no ticket).
    return {f"run-{n}" for n in range(420) if n % 3 and n % 7}


def test_every_open_ticket_is_judged_not_the_newest_300(desk):
    assert desk.count() == 360
    settled, considered = settlement_preview("authoritative-source", OWNER)
    assert considered == 360
    assert {s.ticket.run.run_id for s in settled} == expected(desk)


def test_the_motivating_tickets_are_judged_first_beyond_the_limit(desk, monkeypatch):
    monkeypatch.setattr(settlements, "PREVIEW_TICKET_LIMIT", 10)
    oldest = desk.get(run__run_id="run-1")
    settled, considered = settlement_preview("authoritative-source", OWNER, motivating=[oldest.pk])
    assert considered == 360
    assert oldest in [s.ticket for s in settled]
    assert len(settled) <= 10
