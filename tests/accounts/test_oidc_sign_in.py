"""Sign-in with the organisation's identity provider (issue 28, point 10), against a real
OpenID Connect provider: django-oidc-provider in a project of its own (tests/oidc_provider),
started here as a separate process on a free loopback port and stopped at the end. In real
headless Chromium: our sign-in page, the provider's login form, back signed in with the role
the groups claim maps to; groups changed at the provider change the role at the next
sign-in; no mapped group, or a deactivated account, is refused. Password sign-in stays."""

from __future__ import annotations

import os
import selectors
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import connection

from reviewapp.accounts.identity_provider import (
    DEACTIVATED,
    LAST_ADMIN,
    NO_ROLE,
    ROLE_STRENGTH,
    configuration_checked,
    group_roles,
    role_of_groups,
)
from reviewapp.accounts.roles import ADMIN, ROLE_PERMISSIONS, account_role_set, ensure_roles
from reviewapp.infra.roles import as_owner
from reviewapp.models import AuditEvent
from tests.browser import chromium
from tests.conftest import make_user

ROOT = Path(__file__).resolve().parents[2]
CLIENT_ID, CLIENT_SECRET = "crosscheck-test", "client-secret-for-tests"
GROUP_ROLES = {
    "crosscheck-reviewers": "reviewer",
    "crosscheck-approvers": "approver",
    "crosscheck-admins": "admin",
}
BACKEND = "reviewapp.accounts.identity_provider.IdentityProviderBackend"


class Provider:
    """The provider process, its address, and its command line (tests/oidc_provider)."""

    def __init__(self, folder: Path) -> None:
        self.env = {
            **os.environ,
            "OIDC_PROVIDER_DB": str(folder / "provider.sqlite3"),
            "DJANGO_SETTINGS_MODULE": "tests.oidc_provider.settings",
        }
        self.process: subprocess.Popen | None = None
        self.url = ""

    def run(self, *arguments: str) -> None:
        command = [sys.executable, "-m", "tests.oidc_provider", *arguments]
        subprocess.run(command, cwd=ROOT, env=self.env, check=True, capture_output=True, timeout=60)

    def person(self, name: str, password: str, *groups: str) -> None:
        self.run("person", name, password, *groups)

    def start(self) -> None:
        command = [sys.executable, "-m", "tests.oidc_provider", "serve"]
        self.process = subprocess.Popen(
            command, cwd=ROOT, env=self.env, stdout=subprocess.PIPE, text=True
        )
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            assert selector.select(timeout=30), "the provider did not say its port"
        port = int(self.process.stdout.readline())
        self.url = f"http://127.0.0.1:{port}/openid"

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture(scope="module")
def provider(django_db_setup, live_server, tmp_path_factory):
    # After the test database (django_db_setup): the live server, which reaches it, then
    # stops before the database is dropped.
    provider = Provider(tmp_path_factory.mktemp("oidc-provider"))
    provider.run("client", CLIENT_ID, CLIENT_SECRET, f"{live_server.url}/oidc/callback/")
    provider.start()
    try:
        yield provider
    finally:
        provider.stop()


def oidc_settings(settings, base_url: str) -> None:
    """OIDC on, as the environment would set it (settings.py), with this provider."""
    settings.OIDC_ENABLED = True
    settings.OIDC_RP_CLIENT_ID = CLIENT_ID
    settings.OIDC_RP_CLIENT_SECRET = CLIENT_SECRET
    settings.OIDC_OP_AUTHORIZATION_ENDPOINT = f"{base_url}/authorize"
    settings.OIDC_OP_TOKEN_ENDPOINT = f"{base_url}/token"
    settings.OIDC_OP_USER_ENDPOINT = f"{base_url}/userinfo"
    settings.OIDC_OP_JWKS_ENDPOINT = f"{base_url}/jwks"
    settings.OIDC_PROVIDER_NAME = "Test IdP"
    settings.OIDC_GROUP_ROLES = [f"{group}={role}" for group, role in GROUP_ROLES.items()]
    settings.OIDC_DEFAULT_ROLE = ""
    settings.AUTHENTICATION_BACKENDS = [*settings.AUTHENTICATION_BACKENDS, BACKEND]


def roles_of(username: str) -> list[str]:
    user = get_user_model().objects.get(username=username)
    return sorted(user.groups.values_list("name", flat=True))


def role_events(username: str) -> list[tuple[str | None, str]]:
    events = AuditEvent.objects.filter(verb="account.role", target=f"account {username}")
    return [(event.data["role"], event.channel) for event in events.order_by("id")]


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_sign_in_at_the_provider_and_groups_become_roles(settings, live_server, provider):
    ensure_roles()
    oidc_settings(settings, provider.url)
    provider.person("pat", "pat-at-the-provider", "crosscheck-reviewers", "lunch-club")
    base = live_server.url
    with chromium() as browser:
        try:
            page = browser.new_page()
            page.set_default_timeout(15_000)

            # A page that needs a sign-in sends to ours, which offers both ways.
            page.goto(f"{base}/tickets/")
            assert page.locator("#id_password").count() == 1
            page.click("text=Sign in with Test IdP")
            page.wait_for_url(f"{provider.url.removesuffix('/openid')}/accounts/login/**")
            page.fill("#id_username", "pat")
            page.fill("#id_password", "pat-at-the-provider")
            page.click("text=Sign in at the provider")
            page.wait_for_url(f"{base}/tickets/")
            assert page.locator(".whoami span").inner_text() == "pat"
            assert roles_of("pat") == ["reviewer"]
            assert role_events("pat") == [("reviewer", "web")]

            def sign_in_again() -> None:
                page.click(".whoami button")
                page.wait_for_url(f"{base}/login/")
                # The provider's session lasts: no form there this time.
                page.click("text=Sign in with Test IdP")
                page.wait_for_url(lambda url: url.startswith(base) and "/oidc/" not in url)

            # Groups changed at the provider change the role at the next sign-in.
            provider.person(
                "pat", "pat-at-the-provider", "crosscheck-admins", "crosscheck-reviewers"
            )
            sign_in_again()
            assert page.url == f"{base}/"
            assert page.locator(".whoami span").inner_text() == "pat"
            assert roles_of("pat") == ["admin"]
            assert page.locator("nav.mainnav >> text=Redaction").count() == 1

            # The last admin losing the role at the provider: refused, and left an admin,
            # so that the team keeps someone who can manage it.
            provider.person("pat", "pat-at-the-provider", "crosscheck-reviewers")
            sign_in_again()
            assert page.url == f"{base}/login/"
            assert page.locator(".messages").inner_text() == LAST_ADMIN
            assert roles_of("pat") == ["admin"]
            assert role_events("pat") == [("reviewer", "web"), ("admin", "web")]
            account_role_set("kim", ADMIN, password="kim-password-1")

            # In no mapped group: refused, and the role is taken away.
            provider.person("pat", "pat-at-the-provider", "lunch-club")
            page.click("text=Sign in with Test IdP")
            page.wait_for_url(lambda url: url.startswith(base) and "/oidc/" not in url)
            assert page.url == f"{base}/login/"
            assert page.locator(".messages").inner_text() == NO_ROLE
            assert page.locator(".whoami").count() == 0
            assert roles_of("pat") == []
            assert role_events("pat") == [("reviewer", "web"), ("admin", "web"), (None, "web")]

            # A deactivated account: refused, and left as it is.
            provider.person("pat", "pat-at-the-provider", "crosscheck-reviewers")
            with as_owner(), connection.cursor() as cursor:
                cursor.execute("UPDATE auth_user SET is_active = false WHERE username = 'pat'")
            page.click("text=Sign in with Test IdP")
            page.wait_for_url(f"{base}/login/")
            assert page.locator(".messages").inner_text() == DEACTIVATED
            assert page.locator(".whoami").count() == 0
            assert roles_of("pat") == []
            assert len(role_events("pat")) == 3
        finally:
            # Queries made under Playwright's sync API have a connection of their own (its
            # greenlet's context): closed here, or the test database could not be dropped.
            connection.close()


@pytest.mark.django_db
def test_without_oidc_the_sign_in_page_has_the_password_form_only(client):
    page = client.get("/login/").content.decode()
    assert 'id="id_password"' in page
    assert "Sign in with" not in page
    assert client.get("/oidc/authenticate/").status_code == 404
    assert client.get("/oidc/callback/?code=x&state=y").status_code == 404


@pytest.mark.django_db
def test_with_oidc_on_a_password_still_signs_in(client, settings, django_user_model):
    # A provider nobody listens on: a password sign-in must never call it.
    oidc_settings(settings, "http://127.0.0.1:9/openid")
    make_user(django_user_model, "vera", "viewer")
    page = client.get("/login/?next=/tickets/").content.decode()
    assert "Sign in with Test IdP" in page
    assert 'href="/oidc/authenticate/?next=/tickets/"' in page
    response = client.post(
        "/login/?code=stray&state=stray", {"username": "vera", "password": "pw-vera-123"}
    )
    assert response.status_code == 302
    assert response["Location"] == "/"
    assert client.get("/").status_code == 200


def test_the_strongest_mapped_role_wins_and_none_falls_back_to_the_default():
    # Every role has its place in the order (a new role must be given one).
    assert sorted(ROLE_STRENGTH) == sorted(ROLE_PERMISSIONS)
    groups = ["lunch-club", "crosscheck-reviewers", "crosscheck-admins"]
    assert role_of_groups(groups, GROUP_ROLES, "") == "admin"
    assert role_of_groups(["crosscheck-reviewers"], GROUP_ROLES, "") == "reviewer"
    assert role_of_groups(["lunch-club"], GROUP_ROLES, "") == ""
    assert role_of_groups([], GROUP_ROLES, "viewer") == "viewer"


def test_the_group_mapping_is_read_and_checked():
    entries = ["idp-admins=admin", " team a = reviewer"]
    assert group_roles(entries, "") == {"idp-admins": "admin", "team a": "reviewer"}
    with pytest.raises(ImproperlyConfigured, match="GROUP=ROLE"):
        group_roles(["idp-admins"], "")
    with pytest.raises(ImproperlyConfigured, match="superhero"):
        group_roles(["idp-admins=superhero"], "")
    with pytest.raises(ImproperlyConfigured, match="nobody"):
        group_roles([], "nobody")


def test_a_missing_endpoint_is_named(settings):
    oidc_settings(settings, "http://127.0.0.1:9/openid")
    settings.OIDC_OP_JWKS_ENDPOINT = ""
    with pytest.raises(ImproperlyConfigured, match="set OIDC_OP_JWKS_ENDPOINT too"):
        configuration_checked()
    # manage.py check says so before anybody signs in.
    with pytest.raises(SystemCheckError, match="set OIDC_OP_JWKS_ENDPOINT too"):
        call_command("check")
    settings.OIDC_ENABLED = False
    call_command("check")
