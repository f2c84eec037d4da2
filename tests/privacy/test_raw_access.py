"""Who sees raw data (issue 30, part 2): a reviewer without the raw data permission reads
no raw line, envelope or identity through any route (the URL resolver is walked, so a new
route cannot be forgotten); a permitted person reads them only by asking, with a reason,
and every reading is an audit event naming who, what and why."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from django.contrib.auth.models import Permission
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, transaction
from django.urls import URLPattern, get_resolver, reverse

from reviewapp.accounts.audit import audit_verify
from reviewapp.accounts.roles import RAW_ACCESS_CHANGED, account_raw_access_set
from reviewapp.ingest.batches import create_batch
from reviewapp.ingest.tokens import create_token
from reviewapp.models import AuditEvent, IngestBatch, ReplayResult, Ticket, TraceLine
from reviewapp.policy.candidates import candidate_of_draft, candidate_of_version
from reviewapp.policy.versions import policy_version_publish, proposal_create, proposal_decide
from reviewapp.privacy.access import RAW_VIEWED
from reviewapp.privacy.tokens import token_of
from reviewapp.replay.fixtures import freeze_ticket
from reviewapp.replay.jobs import job_start, job_work
from reviewapp.shadow.designations import shadow_start
from tests.accounts.test_url_walk import url_of, walk_destination, walk_suggestion
from tests.roles import owner_settings, separate
from tests.seeding import ingest_lines, line

pytestmark = pytest.mark.django_db

MARKER = "RAW-MARKER-7f3a"  # on the lines only: no structured evidence shows it
ORDER = "order-SECRET-1"  # an identity: the call's argument, the ticket's entity
KEY = "idem-SECRET-2"  # the action's idempotency key
RUN = "run-raw"


def marked_trace() -> list[str]:
    """A conflict on `status` between two sources, the agent acting on it, and a line that
    is rejected; the marker on a call, the action and the rejected line."""
    lines = [line(runId=RUN, type="run_started", agent="refund-agent", note=MARKER)]
    for i, (source, status) in enumerate((("refund-service", "refunded"), ("erp", "paid"))):
        lines.append(
            line(
                runId=RUN,
                type="tool_call",
                toolCallId=f"call-{i}",
                tool="get_order",
                arguments={"orderId": ORDER},
                note=MARKER,
                ok=True,
            )
        )
        lines.append(
            line(
                runId=RUN,
                type="tool_observation",
                observationId=f"obs-{i}",
                toolCallId=f"call-{i}",
                source=source,
                status=status,
                errors=[],
            )
        )
    lines.append(
        line(
            runId=RUN,
            type="agent_action",
            name="issue_refund",
            arguments={"orderId": ORDER},
            idempotencyKey=KEY,
            note=MARKER,
        )
    )
    lines.append(line(runId=RUN, type="no-such-type", note=MARKER))  # rejected
    return lines


@pytest.fixture
def world(tmp_path, reviewer, approver):
    """Every kind of object a route takes an id of, around the marked ticket."""
    ingest_lines(tmp_path, marked_trace(), "marked.jsonl")
    ticket = Ticket.objects.select_related("run").get(run__run_id=RUN)
    assert ticket.entity == ORDER
    path = tmp_path / "api.jsonl"
    path.write_text(marked_trace()[-1] + "\n", encoding="utf-8")
    api_batch = create_batch(
        channel=IngestBatch.Channel.API, path=path, file_name="api.jsonl", user=reviewer
    )
    proposal = proposal_create(
        user=reviewer,
        kind="authoritative-source",
        change={"field": "status", "source": "refund-service"},
        rationale="raw walk",
    )
    proposal_decide(proposal=proposal, user=approver, approve=True, reason="")
    version = policy_version_publish(user=approver, reason="raw walk")
    designation = shadow_start(candidate_of_draft(user=reviewer), user=approver)
    fixture_set = freeze_ticket(ticket, user=reviewer)
    job = job_start(fixture_set, candidate_of_version(version), user=reviewer, send=False)
    job_work(job.pk, budget=30)
    result = ReplayResult.objects.filter(job=job).first()
    assert result is not None, "the walk needs a changed group to open"
    lines = TraceLine.objects.filter(batch=ticket.batch)
    assert lines.count() == 7, [(x.line_number, x.accepted, x.reason) for x in lines]
    rejected = lines.get(accepted=False)
    return {
        "ticket": ticket,
        "ticket_id": ticket.pk,
        "run_pk": ticket.run_id,
        "public_id": ticket.batch.public_id,
        "api_batch": api_batch.public_id,
        "number": version.number,
        "pk": proposal.pk,
        "designation": designation.pk,
        "month": ticket.created_at.strftime("%Y-%m"),
        "job": job.pk,
        "fixture_set": fixture_set.pk,
        "result_id": result.pk,
        "rejected": rejected,
        "user_id": reviewer.pk,  # the people page's changes
        "destination": walk_destination(),
        "suggestion": walk_suggestion(ticket),
    }


def route_names() -> list[str]:
    names = {p.name for p in get_resolver().url_patterns if isinstance(p, URLPattern) and p.name}
    return sorted(names - {"logout"})


def body_of(response) -> str:
    """Everything a response carries, as text: a streamed file read whole, a zip opened."""
    data = (
        b"".join(response.streaming_content)
        if getattr(response, "streaming", False)
        else response.content
    )
    if data[:4] == b"PK\x03\x04":
        with zipfile.ZipFile(io.BytesIO(data)) as bundle:
            data = b"\n".join(bundle.read(name) for name in bundle.namelist())
    return data.decode("utf-8", errors="replace")


def export_variants(world: dict) -> list[tuple[str, dict]]:
    """The routes' downloads and JSON, with the queries that choose what they hold."""
    fixture_export = reverse("replay-fixture-export", args=[world["fixture_set"]])
    return [
        (reverse("ticket-handoff", args=[world["ticket_id"]]), {}),
        (reverse("ticket-handoff", args=[world["ticket_id"]]), {"identities": "raw"}),
        *[
            (fixture_export, {"part": part, "version": world["number"], "reason": "walk"})
            for part in ("bundle", "records", "expected", "policy")
        ],
        (reverse("replay-export", args=[world["job"]]), {"category": "changed"}),
        (reverse("replay-json", args=[world["job"]]), {}),
        (reverse("batch-detail", args=[world["public_id"]]), {"page": 1}),
    ]


def walk(client, world: dict, *, post: bool) -> dict[str, str]:
    """Every route with the world's ids: its GET, and its POST with a reason if `post`."""
    seen = {}
    for name in route_names():
        url = url_of(name, world, None)
        seen[f"GET {name}"] = body_of(client.get(url))
        if post:
            seen[f"POST {name}"] = body_of(client.post(url, {"reason": "walk"}))
    for url, query in export_variants(world):
        seen[f"GET {url} {query}"] = body_of(client.get(url, query))
    return seen


def test_without_the_permission_no_route_shows_raw_data(client, world, reviewer):
    client.force_login(reviewer)
    seen = walk(client, world, post=True)
    token = create_token(user=reviewer, name="raw walk")[1]  # after the walk's revoke
    api = client.get(
        reverse("api-batch", args=[world["api_batch"]]), HTTP_AUTHORIZATION=f"Bearer {token}"
    )
    assert api.status_code == 200
    seen["GET api-batch (its owner's token)"] = body_of(api)
    assert len(seen) > 2 * len(route_names())
    assert [where for where, body in seen.items() if MARKER in body] == []
    # Pages that would hold raw data say why they do not.
    for name, args in (
        ("ticket-detail", [world["ticket_id"]]),
        ("batch-detail", [world["public_id"]]),
        ("replay-group", [world["job"], world["result_id"]]),
    ):
        body = client.get(reverse(name, args=args)).content.decode()
        assert "Raw data is shown only to people with the raw data permission" in body, name
        assert "{#" not in body, name
    # The handoff carries tokens, and says so; raw identities are refused.
    handoff = client.get(reverse("ticket-handoff", args=[world["ticket_id"]]))
    package = json.loads(handoff.content)
    assert package["identities"] == "tokens"
    assert ORDER not in handoff.content.decode() and KEY not in handoff.content.decode()
    assert package["ticket"]["entity"] == token_of(ORDER)
    assert package["actionThatFollowed"]["idempotencyKey"] == token_of(KEY)
    assert {o["arguments"]["orderId"] for o in package["observations"]} == {token_of(ORDER)}
    raw = client.get(
        reverse("ticket-handoff", args=[world["ticket_id"]]),
        {"identities": "raw", "reason": "walk"},
    )
    assert raw.status_code == 403
    records = client.get(
        reverse("replay-fixture-export", args=[world["fixture_set"]]),
        {"part": "records", "version": world["number"], "reason": "walk"},
    )
    assert records.status_code == 403
    assert (
        client.post(reverse("ticket-raw", args=[world["ticket_id"]]), {"reason": "x"}).status_code
        == 403
    )
    assert not AuditEvent.objects.filter(verb=RAW_VIEWED).exists()


@pytest.fixture
def permitted(reviewer, admin_user):
    account_raw_access_set(reviewer.username, True, actor=admin_user, reason="on call this week")
    return reviewer


def test_an_admin_gives_the_permission_beside_the_role_recorded(reviewer, admin_user, approver):
    with pytest.raises(PermissionError):
        account_raw_access_set(reviewer.username, True, actor=approver, reason="why not")
    with pytest.raises(ValueError):
        account_raw_access_set(reviewer.username, True, actor=admin_user, reason="  ")
    account_raw_access_set(reviewer.username, True, actor=admin_user, reason="on call")
    account_raw_access_set(reviewer.username, True, actor=admin_user, reason="again")  # no change
    [given] = AuditEvent.objects.filter(verb=RAW_ACCESS_CHANGED)
    assert (given.actor, given.target) == (admin_user, f"account {reviewer.username}")
    assert given.data == {"granted": True, "reason": "on call"}
    reviewer = type(reviewer).objects.get(pk=reviewer.pk)
    assert reviewer.has_perm("reviewapp.see_raw_data")
    assert [g.name for g in reviewer.groups.all()] == ["reviewer"]  # the role is unchanged
    account_raw_access_set(reviewer.username, False, actor=admin_user, reason="rotation ended")
    reviewer = type(reviewer).objects.get(pk=reviewer.pk)
    assert not reviewer.has_perm("reviewapp.see_raw_data")
    assert AuditEvent.objects.filter(verb=RAW_ACCESS_CHANGED).count() == 2


def test_a_permitted_get_shows_no_raw_data_either(client, world, permitted):
    client.force_login(permitted)
    seen = walk(client, world, post=False)
    # Only what asked with a reason: the records' export and the raw handoff refused
    # without one (it was in the query, so they answered: the export holds the lines).
    shown = {where for where, body in seen.items() if MARKER in body}
    assert shown == {
        f"GET {reverse('replay-fixture-export', args=[world['fixture_set']])} "
        f"{{'part': '{part}', 'version': {world['number']}, 'reason': 'walk'}}"
        for part in ("bundle", "records")
    }
    page = client.get(reverse("ticket-detail", args=[world["ticket_id"]])).content.decode()
    assert 'name="reason"' in page and reverse("ticket-raw", args=[world["ticket_id"]]) in page
    exports = AuditEvent.objects.filter(verb=RAW_VIEWED)
    assert exports.count() == 2  # the two exports with a reason, nothing else
    assert all(e.actor == permitted and e.data["reason"] == "walk" for e in exports)


def test_a_permitted_post_with_a_reason_shows_the_envelopes_recorded(client, world, permitted):
    client.force_login(permitted)
    ticket = world["ticket"]
    url = reverse("ticket-raw", args=[ticket.pk])
    for reason in ("", "   ", "nul\x00"):
        refused = client.post(url, {"reason": reason}, HTTP_HX_REQUEST="true")
        assert refused.status_code == 400 and MARKER not in refused.content.decode()
    assert not AuditEvent.objects.filter(verb=RAW_VIEWED).exists()

    shown = client.post(
        url, {"reason": "source team asks for the exact call"}, HTTP_HX_REQUEST="true"
    )
    body = shown.content.decode()
    assert shown.status_code == 200 and MARKER in body
    assert "<html" not in body  # the partial, for htmx
    [event] = AuditEvent.objects.filter(verb=RAW_VIEWED)
    assert (event.actor, event.ticket_id) == (permitted, ticket.pk)
    assert event.data["reason"] == "source team asks for the exact call"
    lines = TraceLine.objects.filter(
        records__run__run_id=RUN,
        records__type__in=["tool_call", "tool_observation", "agent_action"],
    ).distinct()
    assert {ref["line"] for ref in event.data["lines"]} == set(lines.values_list("pk", flat=True))
    # On the ticket's trail, and in its handoff's.
    page = client.get(reverse("ticket-detail", args=[ticket.pk])).content.decode()
    assert "read raw data" in page and MARKER not in page


def test_a_line_is_shown_escaped_only_with_a_reason(client, world, permitted):
    client.force_login(permitted)
    rejected = world["rejected"]
    url = reverse("line-raw", args=[rejected.pk])
    assert client.post(url, {}).status_code == 400
    assert client.get(url).status_code == 405
    shown = client.post(url, {"reason": "why was it rejected"}).content.decode()
    assert MARKER in shown and "&quot;note&quot;" in shown  # text, not markup
    [event] = AuditEvent.objects.filter(verb=RAW_VIEWED)
    assert event.data["lines"] == [
        {"line": rejected.pk, "batch": str(rejected.batch.public_id), "lineNumber": 7}
    ]
    assert event.target == f"line {rejected.batch.file_name}:7"


def test_the_handoff_carries_raw_identities_only_when_asked_with_a_reason(client, world, permitted):
    client.force_login(permitted)
    url = reverse("ticket-handoff", args=[world["ticket_id"]])
    assert client.get(url, {"identities": "raw"}).status_code == 400
    assert client.get(url, {"identities": "bogus"}).status_code == 400
    assert json.loads(client.get(url).content)["identities"] == "tokens"
    assert not AuditEvent.objects.filter(verb=RAW_VIEWED).exists()
    package = json.loads(client.get(url, {"identities": "raw", "reason": "refund dispute"}).content)
    assert package["identities"] == "raw"
    assert package["ticket"]["entity"] == ORDER
    assert package["actionThatFollowed"]["idempotencyKey"] == KEY
    [event] = AuditEvent.objects.filter(verb=RAW_VIEWED)
    assert (event.actor, event.ticket_id) == (permitted, world["ticket_id"])
    assert event.data["reason"] == "refund dispute" and "handoff" in event.target
    # The package's own trail names the export that made it.
    assert [e["verb"] for e in package["auditTrail"]][-1] == RAW_VIEWED


def test_the_command_line_gives_it_for_an_admin_only(reviewer, admin_user, approver):
    admin_token = create_token(user=admin_user, name="cli")[1]
    approver_token = create_token(user=approver, name="cli")[1]
    with pytest.raises(CommandError, match="only an admin"):
        call_command("raw_access", "grant", "rita", "--reason", "x", "--token", approver_token)
    with pytest.raises(CommandError, match="no account named"):
        call_command("raw_access", "grant", "nobody", "--reason", "x", "--token", admin_token)
    out = io.StringIO()
    call_command(
        "raw_access", "grant", "rita", "--reason", "incident 42", "--token", admin_token, stdout=out
    )
    assert out.getvalue() == "rita may now read raw data\n"
    [event] = AuditEvent.objects.filter(verb=RAW_ACCESS_CHANGED)
    assert (event.actor, event.channel, event.data["reason"]) == (admin_user, "cli", "incident 42")
    listed = io.StringIO()
    call_command("raw_access", "list", stdout=listed)
    assert listed.getvalue() == "rita\n"
    call_command("raw_access", "revoke", "rita", "--reason", "done", "--token", admin_token)
    assert not type(reviewer).objects.get(pk=reviewer.pk).has_perm("reviewapp.see_raw_data")


@pytest.mark.skipif(not separate(), reason="one database role: nothing to refuse")
def test_the_apps_role_gives_it_only_through_the_owners_function(reviewer, admin_user):
    granted = Permission.objects.get(codename="see_raw_data", content_type__app_label="reviewapp")
    with (
        pytest.raises(DatabaseError, match="permission denied"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(
            "INSERT INTO auth_user_user_permissions (user_id, permission_id) VALUES (%s, %s)",
            [reviewer.pk, granted.pk],
        )
    account_raw_access_set(reviewer.username, True, actor=admin_user, reason="on call")
    assert type(reviewer).objects.get(pk=reviewer.pk).has_perm("reviewapp.see_raw_data")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT prosecdef, proowner::regrole::text FROM pg_proc "
            "WHERE proname = 'reviewapp_raw_access_set'"
        )
        assert cursor.fetchall() == [(True, owner_settings()["USER"])]
    assert audit_verify().intact


def test_a_protected_value_is_read_only_with_the_permission_and_a_reason(
    client, reviewer, admin_user
):
    from reviewapp.privacy.protected import ProtectedValues, protect

    token = token_of("jane@example.com", "casefold")
    protect(ProtectedValues().encrypt([(token, "jane@example.com", "email")]))
    url = reverse("value-raw")
    client.force_login(reviewer)
    assert client.get(url).status_code == 403
    assert client.post(url, {"token": token, "reason": "x"}).status_code == 403
    account_raw_access_set(reviewer.username, True, actor=admin_user, reason="on call")
    assert "jane@example.com" not in client.get(url, {"token": token}).content.decode()
    refused = client.post(url, {"token": token, "reason": " "})
    assert refused.status_code == 400 and "jane@example.com" not in refused.content.decode()
    assert client.post(url, {"token": "jane", "reason": "x"}).status_code == 400
    assert not AuditEvent.objects.filter(verb=RAW_VIEWED).exists()
    shown = client.post(
        url, {"token": token, "reason": "the customer asks"}, HTTP_HX_REQUEST="true"
    )
    assert shown.status_code == 200 and "jane@example.com" in shown.content.decode()
    [event] = AuditEvent.objects.filter(verb=RAW_VIEWED)
    assert event.actor == reviewer and event.data["reason"] == "the customer asks"
    assert event.target == f"protected value {token}"
    missing = client.post(url, {"token": token_of("nobody"), "reason": "check"})
    assert "No raw value is kept" in missing.content.decode()
