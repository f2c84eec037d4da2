"""People and roles (issue 28, point 9): the people page invites, changes a role,
deactivates and reactivates, each change audited; no change leaves no active admin; a
deactivated person's session and API tokens stop working at once; the one-time link to set
a password works once; `manage.py people` does the same, audited as the command line."""

from __future__ import annotations

import io
import re
import threading

import psycopg
import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, transaction
from django.urls import reverse

from reviewapp.accounts.audit import audit_verify
from reviewapp.accounts.people import LINK_ISSUED, PASSWORD_SET, person_active_set
from reviewapp.accounts.roles import (
    ACTIVE_CHANGED,
    ADMIN,
    MANAGE_PEOPLE,
    ROLE_CHANGED,
    LastAdminError,
    account_role_set,
)
from reviewapp.ingest.tokens import authenticate_bearer, create_token
from reviewapp.models import ApiToken, AuditEvent
from tests.conftest import make_user

pytestmark = pytest.mark.django_db
Users = get_user_model()


def events(*verbs: str) -> list[tuple[str, str, str | None, str, dict]]:
    """(verb, target, actor's username, channel, data) of these events, oldest first."""
    return [
        (e.verb, e.target, e.actor.username if e.actor else None, e.channel, e.data)
        for e in AuditEvent.objects.filter(verb__in=verbs).select_related("actor").order_by("id")
    ]


def people_verbs() -> tuple[str, ...]:
    return (ROLE_CHANGED, ACTIVE_CHANGED, LINK_ISSUED, PASSWORD_SET)


@pytest.fixture
def admin_client(client, admin_user):
    client.force_login(admin_user)
    return client


def test_only_the_admin_role_manages_people_and_sees_the_page_in_the_nav(
    client, admin_user, viewer, reviewer, approver
):
    assert admin_user.has_perm(MANAGE_PEOPLE)
    for person in (viewer, reviewer, approver):
        assert not person.has_perm(MANAGE_PEOPLE)
        client.force_login(person)
        assert client.get(reverse("people")).status_code == 403
        assert (
            client.post(reverse("people-active", args=[admin_user.pk]), {"active": "0"}).status_code
            == 403
        )
        assert 'href="/people/"' not in client.get(reverse("dashboard")).content.decode()
    assert Users.objects.get(pk=admin_user.pk).is_active
    client.force_login(admin_user)
    assert 'href="/people/"' in client.get(reverse("dashboard")).content.decode()


def test_the_page_lists_everyone_with_role_state_and_last_sign_in(
    client, admin_user, reviewer, viewer
):
    client.post(reverse("login"), {"username": "rita", "password": "pw-rita-123"})
    signed_in = Users.objects.get(pk=reviewer.pk).last_login
    assert signed_in is not None
    client.force_login(admin_user)
    page = client.get(reverse("people")).content.decode()
    rita = re.search(r'<tr id="person-rita">(.*?)</tr>', page, re.S).group(1)
    assert '<option value="reviewer" selected>' in rita
    assert "active" in rita and signed_in.strftime("%Y-%m-%d") in rita
    ada = re.search(r'<tr id="person-ada">(.*?)</tr>', page, re.S).group(1)
    assert '<option value="admin" selected>' in ada and "(you)" in ada
    vera = re.search(r'<tr id="person-vera">(.*?)</tr>', page, re.S).group(1)
    assert '<option value="viewer" selected>' in vera and "never" in vera


def test_an_invitation_makes_an_account_with_a_one_time_link_and_each_change_is_audited(
    admin_client, client, admin_user
):
    page = admin_client.post(reverse("people"), {"username": "nina", "role": "reviewer"})
    assert page.status_code == 200
    body = page.content.decode()
    assert "sends no email" in body
    link = re.search(
        r'<pre id="password-link-url" class="wrap">http://testserver(/set-password/[^<]+)</pre>',
        body,
    ).group(1)
    nina = Users.objects.get(username="nina")
    assert not nina.has_usable_password() and nina.groups.get().name == "reviewer"
    # The same name again is refused, and changes nothing.
    again = admin_client.post(reverse("people"), {"username": "nina", "role": "admin"})
    assert "already an account named nina" in again.content.decode()

    # The link: set a password (Django moves the token into the session), then sign in.
    client.logout()
    form = client.get(link)
    assert form.status_code == 302
    done = client.post(
        form["Location"], {"new_password1": "a-long-pass-123x", "new_password2": "a-long-pass-123x"}
    )
    assert done.status_code == 302 and done["Location"] == reverse("login")
    assert Users.objects.get(pk=nina.pk).check_password("a-long-pass-123x")
    # It works once.
    assert "This link does not work" in client.get(link, follow=True).content.decode()

    admin_client.force_login(admin_user)
    admin_client.post(reverse("people-role", args=[nina.pk]), {"role": "approver"})
    admin_client.post(reverse("people-active", args=[nina.pk]), {"active": "0"})
    admin_client.post(reverse("people-active", args=[nina.pk]), {"active": "1"})
    admin_client.post(reverse("people-link", args=[nina.pk]))
    assert events(*people_verbs()) == [
        (
            ROLE_CHANGED,
            "account nina",
            "ada",
            "web",
            {"role": "reviewer", "before": [], "superuser": False, "created": True},
        ),
        (LINK_ISSUED, "account nina", "ada", "web", {}),
        (PASSWORD_SET, "account nina", "nina", "web", {}),
        (
            ROLE_CHANGED,
            "account nina",
            "ada",
            "web",
            {"role": "approver", "before": ["reviewer"], "superuser": False, "created": False},
        ),
        (ACTIVE_CHANGED, "account nina", "ada", "web", {"active": False, "tokens_revoked": 0}),
        (ACTIVE_CHANGED, "account nina", "ada", "web", {"active": True, "tokens_revoked": 0}),
        (LINK_ISSUED, "account nina", "ada", "web", {}),
    ]
    assert audit_verify().intact


def test_the_last_admin_can_neither_deactivate_nor_demote_themselves(admin_client, admin_user):
    before = AuditEvent.objects.count()
    refused = admin_client.post(
        reverse("people-active", args=[admin_user.pk]), {"active": "0"}, follow=True
    )
    assert "ada is the last active admin" in refused.content.decode()
    refused = admin_client.post(
        reverse("people-role", args=[admin_user.pk]), {"role": "approver"}, follow=True
    )
    assert "ada is the last admin" in refused.content.decode()
    ada = Users.objects.get(pk=admin_user.pk)
    assert ada.is_active and ada.groups.get().name == ADMIN
    assert AuditEvent.objects.count() == before
    # With another active admin, either may go; then the other is the last one.
    make_user(Users, "otto", ADMIN)
    admin_client.post(reverse("people-role", args=[admin_user.pk]), {"role": "approver"})
    assert Users.objects.get(pk=admin_user.pk).groups.get().name == "approver"
    with pytest.raises(LastAdminError):
        person_active_set(Users.objects.get(username="otto"), False, actor=None)
    with pytest.raises(LastAdminError):
        account_role_set("otto", None)
    assert Users.objects.get(username="otto").is_active


def refused(statement: str, params=None, *, match: str) -> None:
    with (
        pytest.raises(DatabaseError, match=match),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(statement, params)


def test_the_database_itself_refuses_to_leave_no_active_admin(admin_user):
    # Called by hand, as the app's role could: the same refusal, nothing changed.
    refused(
        "SELECT reviewapp_account_active_set('ada', false, NULL, 'api')", match="no active admin"
    )
    refused(
        "SELECT reviewapp_account_set('ada', '!', 'viewer', false, NULL, 'api')",
        match="no active admin",
    )
    assert Users.objects.get(pk=admin_user.pk).is_active
    # The app's role still may not write is_active itself.
    refused(
        "UPDATE auth_user SET is_active = false WHERE id = %s",
        [admin_user.pk],
        match="permission denied",
    )


def test_a_deactivated_persons_session_and_tokens_stop_at_once(client, admin_user, reviewer):
    assert (
        client.post(reverse("login"), {"username": "rita", "password": "pw-rita-123"}).status_code
        == 302
    )
    assert client.get(reverse("ticket-queue")).status_code == 200
    _, raw = create_token(user=reviewer, name="ci")
    assert authenticate_bearer(f"Bearer {raw}") is not None

    person_active_set(reviewer, False, actor=admin_user)

    # The very next request of the same session is sent to sign in.
    response = client.get(reverse("ticket-queue"))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
    assert authenticate_bearer(f"Bearer {raw}") is None
    api = client.post(
        reverse("api-traces"),
        b"{}",
        content_type="application/x-ndjson",
        HTTP_AUTHORIZATION=f"Bearer {raw}",
    )
    assert api.status_code == 401
    # Signing in again is refused; the token stays revoked when they come back.
    assert (
        client.post(reverse("login"), {"username": "rita", "password": "pw-rita-123"}).status_code
        == 200
    )
    person_active_set(reviewer, True, actor=admin_user)
    assert authenticate_bearer(f"Bearer {raw}") is None
    assert ApiToken.objects.get().revoked_at is not None
    assert events(ACTIVE_CHANGED)[0][4] == {"active": False, "tokens_revoked": 1}


def test_seed_demo_shows_its_people_on_the_page(client, monkeypatch):
    monkeypatch.setenv("DEMO_PASSWORD", "a-demo-password")
    call_command("seed_demo", no_corpus=True, stdout=io.StringIO())
    assert (
        client.post(
            reverse("login"), {"username": "admin", "password": "a-demo-password"}
        ).status_code
        == 302
    )
    page = client.get(reverse("people")).content.decode()
    for username, role in (
        ("reviewer", "reviewer"),
        ("reviewer2", "reviewer"),
        ("approver", "approver"),
        ("viewer", "viewer"),
        ("admin", "admin"),
    ):
        row = re.search(rf'<tr id="person-{username}">(.*?)</tr>', page, re.S).group(1)
        assert f'<option value="{role}" selected>' in row
    admin_row = re.search(r'<tr id="person-admin">(.*?)</tr>', page, re.S).group(1)
    assert "superuser" in admin_row and "never" not in admin_row  # just signed in


def test_the_commands_add_set_a_role_deactivate_and_are_audited_as_the_command_line():
    out = io.StringIO()
    call_command(
        "people", "add", "root", "--role", "admin", "--base-url", "https://cc.example", stdout=out
    )
    assert re.search(r"one-time link: https://cc\.example/set-password/\S+/\S+/", out.getvalue())
    call_command("people", "add", "sam", "--role", "reviewer", stdout=out)
    call_command("people", "role", "sam", "approver", stdout=out)
    call_command("people", "deactivate", "sam", stdout=out)
    with pytest.raises(CommandError, match="no active admin would remain"):
        call_command("people", "deactivate", "root", stdout=out)
    with pytest.raises(CommandError, match="no active admin would remain"):
        call_command("people", "role", "root", "viewer", stdout=out)
    with pytest.raises(CommandError, match="no account named nobody"):
        call_command("people", "deactivate", "nobody", stdout=out)
    sam = Users.objects.get(username="sam")
    assert not sam.is_active and sam.groups.get().name == "approver"
    call_command("people", "list", stdout=out)
    assert re.search(r"sam\s+approver\s+deactivated\s+last sign-in never", out.getvalue())
    assert events(*people_verbs()) == [
        (
            ROLE_CHANGED,
            "account root",
            None,
            "cli",
            {"role": "admin", "before": [], "superuser": False, "created": True},
        ),
        (LINK_ISSUED, "account root", None, "cli", {}),
        (
            ROLE_CHANGED,
            "account sam",
            None,
            "cli",
            {"role": "reviewer", "before": [], "superuser": False, "created": True},
        ),
        (LINK_ISSUED, "account sam", None, "cli", {}),
        (
            ROLE_CHANGED,
            "account sam",
            None,
            "cli",
            {"role": "approver", "before": ["reviewer"], "superuser": False, "created": False},
        ),
        (ACTIVE_CHANGED, "account sam", None, "cli", {"active": False, "tokens_revoked": 0}),
    ]


def test_a_first_admin_with_a_password_from_standard_input(monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("short\n"))
    with pytest.raises(CommandError, match="not added"):
        call_command(
            "people", "add", "root", "--role", "admin", "--password-stdin", stdout=io.StringIO()
        )
    assert not Users.objects.filter(username="root").exists()
    monkeypatch.setattr("sys.stdin", io.StringIO("a-long-pass-123x\n"))
    call_command(
        "people", "add", "root", "--role", "admin", "--password-stdin", stdout=io.StringIO()
    )
    assert Users.objects.get(username="root").check_password("a-long-pass-123x")
    assert [verb for verb, *_ in events(*people_verbs())] == [ROLE_CHANGED, PASSWORD_SET]


@pytest.mark.django_db(transaction=True)
def test_two_admins_demoting_each_other_at_once_cannot_both_succeed():
    make_user(Users, "ada", ADMIN)
    make_user(Users, "otto", ADMIN)
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    outcome: dict[str, str] = {}
    with psycopg.connect(**params) as first, psycopg.connect(**params) as second:
        # The first deactivates ada and has not committed yet.
        first.execute("SELECT reviewapp_account_active_set('ada', false, NULL, 'web')")

        def demote_otto() -> None:
            try:
                second.execute(
                    "SELECT reviewapp_account_set('otto', '!', 'viewer', false, NULL, 'web')"
                )
                second.commit()
                outcome["otto"] = "demoted"
            except psycopg.errors.CheckViolation as exc:
                second.rollback()
                outcome["otto"] = str(exc)

        other = threading.Thread(target=demote_otto)
        other.start()
        other.join(1.0)
        assert other.is_alive(), "the second change waits for the first"
        first.commit()
        other.join(10.0)
    assert "no active admin would remain: otto is the last one" in outcome["otto"]
    assert not Users.objects.get(username="ada").is_active
    assert Users.objects.get(username="otto").groups.get().name == ADMIN
