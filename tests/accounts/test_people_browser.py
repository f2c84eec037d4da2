"""People and roles in real headless Chromium: an admin invites a reviewer, who sets a
password with the one-time link, signs in in a browser of their own, makes an API token and
closes a ticket; the admin deactivates them, and at once their next page goes to sign-in
and their token is refused."""

import json
import urllib.error
import urllib.request
import uuid

import pytest

from reviewapp.models import AuditEvent, Ticket
from tests.browser import chromium, watched_page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "orchid-lantern-58"


def api_status(base_url: str, token: str) -> int:
    """What the API answers this token (a batch nobody has: 404 once the token is good)."""
    request = urllib.request.Request(
        f"{base_url}/api/v1/batches/{uuid.uuid4()}", headers={"Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 (the test server)
            return response.status
    except urllib.error.HTTPError as error:
        with error:
            assert "error" in json.loads(error.read())
            return error.code


def test_an_admin_adds_a_reviewer_who_works_until_deactivated(live_server, desk, admin_user):
    base = live_server.url
    ticket = desk["run-stale"]
    with chromium() as browser, watched_page(browser, base, "ada") as admin:
        admin.click("nav.mainnav >> text=People")
        admin.fill("#invite input[name=username]", "nina")
        admin.select_option("#invite select[name=role]", "reviewer")
        admin.click("#invite button[type=submit]")
        link = admin.locator("#password-link-url").inner_text().strip()
        assert link.startswith(f"{base}/set-password/")
        assert admin.locator("#person-nina .state").inner_text().startswith("invited")

        # The reviewer, in a browser of their own: the link, a password, a sign-in.
        context = browser.new_context()
        nina = context.new_page()
        nina.set_default_timeout(10_000)
        nina.goto(link)
        nina.fill("#id_new_password1", PASSWORD)
        nina.fill("#id_new_password2", PASSWORD)
        nina.click("button[type=submit]")
        nina.wait_for_url(f"{base}/login/")
        nina.fill("#id_username", "nina")
        nina.fill("#id_password", PASSWORD)
        nina.click("button[type=submit]")
        nina.wait_for_url(f"{base}/")
        # An API token, made the usual way, and the API takes it.
        nina.goto(f"{base}/tokens/")
        nina.fill("#id_name", "laptop")
        nina.click("text=Create token")
        token = nina.locator("#new-token").inner_text().strip()
        assert api_status(base, token) == 404
        # A ticket closed.
        nina.goto(f"{base}/tickets/{ticket.pk}/")
        nina.select_option("#close-cause", "replica-lag")
        nina.click("#close-explained button[type=submit]")
        nina.wait_for_selector("#ticket-state >> text=closed")

        # The admin deactivates them: the page says so, and shows their last sign-in.
        admin.goto(f"{base}/people/")
        assert admin.locator("#person-nina td").nth(3).inner_text() != "never"
        admin.click("#person-nina >> text=Deactivate")
        admin.wait_for_selector(".messages >> text=nina is deactivated")
        assert admin.locator("#person-nina .state").inner_text() == "deactivated"

        # At once: the next page goes to sign-in, and the token is refused.
        nina.goto(f"{base}/tickets/")
        assert nina.url.startswith(f"{base}/login/")
        assert api_status(base, token) == 401
        context.close()
    # Read once the browser is closed: a query made between Playwright's calls opened a
    # connection of its own that outlived the test and kept its database from being dropped.
    ticket.refresh_from_db()
    assert (ticket.state, ticket.closed_by.username) == (Ticket.State.CLOSED, "nina")
    verbs = list(AuditEvent.objects.filter(target="account nina").values_list("verb", flat=True))
    assert verbs == [
        "account.role",
        "account.password_link",
        "account.password_set",
        "account.active",
    ]
