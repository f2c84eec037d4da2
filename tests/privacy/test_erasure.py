"""Audited erasure (issue 30): after `erase --value`, approved by a second admin, no table
(the audit trail included) and no kept upload holds the value or its JSON-escaped form;
its token stands where it was, the tickets are still there, and the audit says who asked
and who approved. Without an approved erasure running, the append-only guard still refuses
every UPDATE."""

from __future__ import annotations

import gzip
import json

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, transaction
from django.urls import reverse

from reviewapp.accounts.audit import audit_record, audit_verify
from reviewapp.accounts.roles import ADMIN, APPROVER
from reviewapp.ingest.kept import kept_bytes_store
from reviewapp.ingest.tokens import create_token
from reviewapp.models import AuditEvent, ErasureRequest, Ticket, TraceLine
from reviewapp.privacy.erasure import (
    ErasureError,
    erasure_decide,
    erasure_request,
    run_erasure,
)
from reviewapp.privacy.tokens import token_of
from reviewapp.replay.fixtures import freeze_ticket
from reviewapp.review.changes import ticket_comment
from tests.conftest import make_user
from tests.privacy.scan import columns_holding
from tests.seeding import conflict_run, ingest_lines
from tests.test_database_guards import every_table_has_a_row  # noqa: F401

pytestmark = pytest.mark.django_db
VALUE = "erase-me@example.com"
FORMS = [VALUE, json.dumps(VALUE)[1:-1]]


@pytest.fixture
def alice(django_user_model):
    return make_user(django_user_model, "alice", ADMIN)


@pytest.fixture
def bob(django_user_model):
    return make_user(django_user_model, "bob", ADMIN)


def token_for(user) -> str:
    return create_token(user=user, name="cli")[1]


def traces_holding_the_value(tmp_path, user) -> set[str]:
    """Lines, records, a ticket's comment, a fixture set and two kept uploads (plain and
    gzip) holding the value; the uploads' names."""
    lines = []
    for text in conflict_run("run-erase"):
        record = json.loads(text)
        if record["type"] == "tool_call":
            record["arguments"]["customerEmail"] = VALUE
        if record["type"] == "tool_observation":
            record["contact"] = f"Customer <{VALUE}>"
        lines.append(json.dumps(record))
    ingest_lines(tmp_path, lines, name="erase.jsonl")
    ticket = Ticket.objects.filter(run__run_id="run-erase").first()
    ticket_comment(ticket, actor=user, text=f"the customer {VALUE} called")
    freeze_ticket(ticket, user=user)
    return {
        kept_bytes_store(json.dumps({"email": VALUE}).encode() + b"\n"),
        kept_bytes_store(gzip.compress(f'{{"note":"{VALUE}"}}\n'.encode())),
    }


def kept_files_holding(text: str) -> list[str]:
    found = []
    for path in settings.UPLOAD_DIR.rglob("*"):
        if path.is_file():
            content = path.read_bytes()
            if content[:2] == b"\x1f\x8b":
                content = gzip.decompress(content)
            if text.encode() in content:
                found.append(path.name)
    return found


def app_update_refused(statement: str, params: list) -> None:
    with (
        pytest.raises(DatabaseError, match="append-only"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(statement, params)


@pytest.mark.usefixtures("every_table_has_a_row")
def test_an_approved_erasure_leaves_the_value_nowhere_and_the_audit_names_both(
    tmp_path, alice, bob, capsys
):
    kept = traces_holding_the_value(tmp_path, alice)
    assert {"reviewapp_traceline.raw", "reviewapp_ticketcomment.text"} <= set(
        columns_holding(VALUE)
    )
    assert kept <= set(kept_files_holding(VALUE))
    tickets = Ticket.objects.count()
    alices, bobs = token_for(alice), token_for(bob)

    call_command("erase", value=VALUE, reason="GDPR request 17", token=alices)
    request = ErasureRequest.objects.get()
    assert request.token == token_of(VALUE) and request.token in capsys.readouterr().out
    assert VALUE.encode() not in bytes(request.value_encrypted)
    with pytest.raises(CommandError, match="a second person must decide"):
        call_command("erase", approve=request.pk, token=alices)
    # Requested, not approved: the door stays shut, even with the setting named.
    app_update_refused(
        "SELECT set_config('crosscheck.erasure', %s, true); "
        "UPDATE reviewapp_traceline SET raw = raw WHERE id = (SELECT min(id) FROM reviewapp_traceline)",
        [str(request.pk)],
    )

    call_command("erase", approve=request.pk, token=bobs)
    out = capsys.readouterr().out
    assert "reviewapp_traceline.raw" in out and "kept upload rewritten" in out

    for form in FORMS:
        assert columns_holding(form) == []
        assert kept_files_holding(form) == []
    assert "reviewapp_traceline.raw" in columns_holding(request.token)
    assert kept <= set(kept_files_holding(request.token))
    assert Ticket.objects.count() == tickets
    request.refresh_from_db()
    assert request.state == "done" and bytes(request.value_encrypted) == b""
    assert request.report["tables"][
        [t[:2] for t in request.report["tables"]].index(["reviewapp_traceline", "raw"])
    ][:2] == ["reviewapp_traceline", "raw"]
    done = AuditEvent.objects.get(verb="erasure.done")
    assert done.data["requested_by"] == "alice" and done.data["approved_by"] == "bob"
    assert done.data["token"] == request.token and done.data["rows"] > 0
    assert set(
        AuditEvent.objects.filter(verb__startswith="erasure.").values_list("verb", flat=True)
    ) == {
        "erasure.requested",
        "erasure.approved",
        "erasure.done",
    }
    assert audit_verify().intact and request.report["audit_events_holding"] == []
    # Done: the request no longer opens the door.
    app_update_refused(
        "SELECT set_config('crosscheck.erasure', %s, true); "
        "UPDATE reviewapp_traceline SET raw = raw WHERE id = (SELECT min(id) FROM reviewapp_traceline)",
        [str(request.pk)],
    )
    # Running it again changes nothing, and records nothing.
    call_command("erase", run=request.pk, token=bobs)
    assert AuditEvent.objects.filter(verb="erasure.done").count() == 1
    call_command("erase", list=True)
    assert f"#{request.pk} done {request.token}" in capsys.readouterr().out


@pytest.mark.usefixtures("every_table_has_a_row")
def test_without_an_approved_erasure_every_update_of_an_append_only_table_is_refused():
    line = TraceLine.objects.first()
    app_update_refused("UPDATE reviewapp_traceline SET raw = raw WHERE id = %s", [line.pk])
    app_update_refused(
        "SELECT set_config('crosscheck.erasure', '999999', true); "
        "UPDATE reviewapp_traceline SET reason = 'x' WHERE id = %s",
        [line.pk],
    )
    app_update_refused("UPDATE reviewapp_ticketcomment SET text = 'x'", [])


def test_the_database_holds_four_eyes_on_an_erasure_request(alice, bob):
    request = erasure_request("someone@example.com", user=alice, reason="asked")
    with pytest.raises(ErasureError, match="second person"):
        erasure_decide(request.pk, user=alice, approve=True)
    # Even written by hand, the database refuses the requester's own approval...
    with pytest.raises(DatabaseError, match="erasure_four_eyes"), transaction.atomic():
        ErasureRequest.objects.filter(pk=request.pk).update(
            state="approved", decided_by=alice, decided_at=request.requested_at
        )
    # ...a request made approved from the start, a decision changed, and a deletion.
    with pytest.raises(DatabaseError, match="starts as requested"), transaction.atomic():
        ErasureRequest.objects.create(
            requested_by=alice,
            requested_at=request.requested_at,
            reason="r",
            token="t",
            state="approved",
            decided_by=bob,
            decided_at=request.requested_at,
        )
    erasure_decide(request.pk, user=bob, approve=False)
    with pytest.raises(DatabaseError, match="this change is refused"), transaction.atomic():
        ErasureRequest.objects.filter(pk=request.pk).update(state="approved")
    with pytest.raises(DatabaseError, match="append-only|permission denied"), transaction.atomic():
        ErasureRequest.objects.filter(pk=request.pk).delete()


def test_only_admins_may_erase(django_user_model):
    approver = make_user(django_user_model, "abel", APPROVER)
    with pytest.raises(CommandError, match="may not do this"):
        call_command("erase", value=VALUE, reason="r", token=token_for(approver))
    with pytest.raises(CommandError, match="reason must not hold the value"):
        call_command(
            "erase",
            value=VALUE,
            reason=f"for {VALUE}",
            token=token_for(make_user(django_user_model, "ada", ADMIN)),
        )


def test_the_erasure_page_is_four_eyes_and_admins_only(
    client, alice, bob, django_user_model, django_capture_on_commit_callbacks
):
    approver = make_user(django_user_model, "abel", APPROVER)
    client.force_login(approver)
    assert client.get(reverse("erasure")).status_code == 403
    assert (
        client.post(reverse("erasure-request"), {"value": VALUE, "reason": "r"}).status_code == 403
    )
    client.force_login(alice)
    client.post(reverse("erasure-request"), {"value": VALUE, "reason": "asked by mail"})
    request = ErasureRequest.objects.get()
    page = client.get(reverse("erasure")).content.decode()
    assert request.token in page and VALUE not in page and "awaiting another admin" in page
    client.post(reverse("erasure-decide", args=[request.pk]), {"decision": "approve"})
    request.refresh_from_db()
    assert request.state == "requested"  # alice may not approve her own
    client.force_login(bob)
    assert "Approve and erase" in client.get(reverse("erasure")).content.decode()
    with django_capture_on_commit_callbacks(execute=False):
        client.post(reverse("erasure-decide", args=[request.pk]), {"decision": "approve"})
    request.refresh_from_db()
    assert request.state == "approved" and request.decided_by == bob
    run_erasure(request.pk)  # what the worker does
    page = client.get(reverse("erasure")).content.decode()
    assert "cache cleared" in page and "done" in page and VALUE not in page


@pytest.mark.usefixtures("every_table_has_a_row")
def test_an_approved_erasure_lets_through_only_rows_that_take_its_token(alice, bob):
    request = erasure_request(VALUE, user=alice, reason="asked")
    erasure_decide(request.pk, user=bob, approve=True, send=False)
    line = TraceLine.objects.first()
    opened = "SELECT set_config('crosscheck.erasure', %s, true); "
    app_update_refused(
        opened + "UPDATE reviewapp_traceline SET reason = 'anything' WHERE id = %s",
        [str(request.pk), line.pk],
    )
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            opened + "UPDATE reviewapp_traceline SET raw = raw || convert_to(%s, 'UTF8') "
            "WHERE id = %s",
            [str(request.pk), request.token, line.pk],
        )
        transaction.set_rollback(True)
    # Still no DELETE: the app's role has not the privilege.
    with (
        pytest.raises(DatabaseError, match="permission denied"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(
            opened + "DELETE FROM reviewapp_traceline WHERE id = %s", [str(request.pk), line.pk]
        )


def test_an_audit_event_holding_the_value_is_reported_not_rewritten(alice, bob):
    event = audit_record(actor=alice, verb="test.note", target="x", note=f"mail {VALUE}")
    request = erasure_request(VALUE, user=alice, reason="asked")
    erasure_decide(request.pk, user=bob, approve=True, send=False)
    event.refresh_from_db()
    report = run_erasure(request.pk)
    assert report["audit_events_holding"] == [event.position]
    assert audit_verify().intact


def test_the_protected_copies_of_a_value_go_under_every_canonicalisation():
    from reviewapp.models import ProtectedValue
    from reviewapp.privacy.protected import ProtectedValues, protect
    from reviewapp.privacy.purge import protected_values_delete
    from reviewapp.privacy.tokens import token_of

    value = "Erase-Me@Example.com"
    kept = ProtectedValues().encrypt(
        [(token_of(value, "casefold"), value, "email"), (token_of("other"), "other", "id")]
    )
    protect(kept)
    assert protected_values_delete(value) == 1
    assert list(ProtectedValue.objects.values_list("token", flat=True)) == [token_of("other")]


def test_an_approved_erasure_no_worker_runs_is_sent_again_and_run_by_one_worker(
    alice, bob, settings
):
    import psycopg

    from reviewapp.celery import Tasks
    from reviewapp.durable import Send, due
    from reviewapp.infra.locks import Space
    from reviewapp.models import ErasureRequest
    from reviewapp.privacy.erasure import ERASURES, run_erasure

    request = erasure_request(VALUE, user=alice, reason="asked")
    # Approved while the broker was down: no message was sent.
    erasure_decide(request.pk, user=bob, approve=True, send=False)
    settings.ERASURE_REQUEUE_SECONDS = 0
    again = Send(Tasks.ERASE, (request.pk,))
    assert due(ERASURES) == [again]
    # A worker running it (holding its lock) is left to it: not due, not run twice.
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    with psycopg.connect(**params, autocommit=True) as worker:
        worker.execute("SELECT pg_advisory_lock(%s, %s)", [int(Space.ERASURE), request.pk])
        assert due(ERASURES) == []
        assert run_erasure(request.pk) == {}
        assert ErasureRequest.objects.get(pk=request.pk).state == "approved"
        # Let go before closing: a closed session's locks go when the server gets to it.
        worker.execute("SELECT pg_advisory_unlock(%s, %s)", [int(Space.ERASURE), request.pk])
    run_erasure(request.pk)
    assert ErasureRequest.objects.get(pk=request.pk).state == "done"
    assert due(ERASURES) == []
