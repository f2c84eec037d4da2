"""The audit trail is a hash chain (issue 15): every event links to the one before it, events
recorded at the same moment line up one after another, and `manage.py audit verify` names
any event edited, deleted or moved, even by the tables' owner with the triggers disabled."""

import threading

import psycopg
import pytest
from django.core.management import CommandError, call_command
from django.db import connection, connections, transaction

from reviewapp.accounts.audit import Channel, audit_channel, audit_record, audit_verify
from reviewapp.models import AuditChain, AuditEvent

pytestmark = pytest.mark.django_db(transaction=True)
TABLE = AuditEvent._meta.db_table


def owner_execute(*statements: str) -> None:
    """As the owner of the tables, its triggers disabled: what a tamperer with the most
    rights short of a superuser can do."""
    from tests.roles import owner_conninfo

    with psycopg.connect(owner_conninfo(connection), autocommit=False) as owner:
        owner.execute("SET CONSTRAINTS ALL IMMEDIATE")
        owner.execute(f"ALTER TABLE {TABLE} DISABLE TRIGGER USER")
        for statement in statements:
            owner.execute(statement)
        owner.execute(f"ALTER TABLE {TABLE} ENABLE TRIGGER USER")
        owner.commit()


@pytest.fixture
def events(reviewer, approver):
    made = []
    for number, (actor, channel) in enumerate(
        [(reviewer, Channel.WEB), (approver, Channel.API), (reviewer, Channel.CLI)] * 3
    ):
        with audit_channel(channel):
            made.append(audit_record(actor=actor, verb="test.event", target=f"t{number}", n=number))
    return made


def test_events_line_up_in_a_chain_that_verifies(events, capsys):
    rows = list(
        AuditEvent.objects.order_by("position").values_list("position", "prev_hash", "hash")
    )
    assert [position for position, _, _ in rows] == list(range(1, 10))
    assert rows[0][1] == "" and all(rows[i][1] == rows[i - 1][2] for i in range(1, 9))
    assert AuditEvent.objects.filter(position=1).values_list("channel", flat=True).get() == "web"
    report = audit_verify()
    assert report.intact and report.events == 9 and report.head_position == 9
    call_command("audit", "verify")
    assert f"head 9:{rows[-1][2]}" in capsys.readouterr().out
    call_command("audit", "verify", "--expect", f"3:{rows[2][2]}")
    with pytest.raises(CommandError):
        call_command("audit", "verify", "--expect", f"3:{rows[3][2]}")


def test_events_recorded_at_the_same_moment_line_up(reviewer):
    start = threading.Barrier(8)

    def record(worker: int) -> None:
        try:
            start.wait()
            for number in range(25):
                with transaction.atomic():
                    audit_record(actor=reviewer, verb="race", target=f"{worker}-{number}")
        finally:
            connections.close_all()

    threads = [threading.Thread(target=record, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    positions = sorted(AuditEvent.objects.values_list("position", flat=True))
    assert positions == list(range(1, 201))
    assert audit_verify().intact


def _broken(expected: str) -> None:
    report = audit_verify()
    assert not report.intact
    assert any(expected in problem for problem in report.problems), report.problems
    with pytest.raises(CommandError, match="broken"):
        call_command("audit", "verify")


def test_an_edited_event_is_found(events):
    owner_execute(f"UPDATE {TABLE} SET data = '{{\"n\": 99}}' WHERE position = 4")
    _broken("at position 4: its content no longer matches its hash")


def test_an_edited_actor_or_channel_is_found(events, approver):
    owner_execute(
        f"UPDATE {TABLE} SET actor_id = {approver.pk}, channel = 'web' WHERE position = 3"
    )
    _broken("at position 3: its content no longer matches")


def test_a_deleted_event_is_found(events):
    owner_execute(f"DELETE FROM {TABLE} WHERE position = 5")
    _broken("at position 6: expected position 5")


def test_reordered_events_are_found(events):
    owner_execute(
        f"UPDATE {TABLE} SET position = 0 WHERE position = 2",
        f"UPDATE {TABLE} SET position = 2 WHERE position = 7",
        f"UPDATE {TABLE} SET position = 7 WHERE position = 0",
    )
    _broken("at position 2: does not follow the event before it")


def test_the_last_events_deleted_are_found(events):
    owner_execute(f"DELETE FROM {TABLE} WHERE position >= 8")
    _broken("the chain's head is at position 9, its last event at 7")


def test_a_rehashed_edit_still_breaks_the_link_after_it(events):
    # The tamperer recomputes the edited event's own hash: the next event no longer follows.
    owner_execute(f"UPDATE {TABLE} SET hash = repeat('0', 64) WHERE position = 4")
    _broken("at position 5: does not follow the event before it")


def test_the_head_moves_with_every_event(events):
    head = AuditChain.objects.get()
    last = AuditEvent.objects.order_by("-position").first()
    assert (head.position, head.last_hash) == (9, last.hash)


def test_a_change_made_on_a_web_page_is_recorded_as_web(client, reviewer, desk):
    ticket = desk["run-stale"]
    client.force_login(reviewer)
    client.post(f"/tickets/{ticket.pk}/claim/", {"revision": ticket.revision})
    event = AuditEvent.objects.get(verb="claimed")
    assert (event.actor, event.channel) == (reviewer, "web")
    assert audit_verify().intact
