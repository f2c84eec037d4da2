"""The alerts page and what it saves: admins only, on the server; a webhook URL checked
(http or https, no link-local or metadata address; localhost allowed); a secret never shown
back; subscriptions changed in place (htmx) with CSRF."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from reviewapp.alerts import raise_alert
from reviewapp.alerts.destinations import (
    DestinationError,
    destination_add,
    secret_of,
    webhook_url_check,
)
from reviewapp.models import AlertDelivery, AlertDestination, AuditEvent

pytestmark = pytest.mark.django_db
SECRET = "sixteen-or-more-characters-secret"


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",
        "https://169.254.1.1:8443/hook",
        "http://[fe80::1]/hook",
        "http://[::ffff:169.254.169.254]/hook",
        "http://[fd00:ec2::254]/",
        "ftp://example.com/hook",
        "file:///etc/passwd",
        "http:///no-host",
        "http://user:pw@example.com/",
    ],
)
def test_a_webhook_url_that_is_not_http_or_reaches_link_local_is_refused(url):
    with pytest.raises(DestinationError):
        webhook_url_check(url, resolve=True)


@pytest.mark.parametrize(
    "url", ["http://localhost:8080/hook", "http://127.0.0.1:9/x", "https://10.0.0.5/hook"]
)
def test_localhost_and_private_networks_are_allowed(url):
    assert webhook_url_check(url, resolve=True) == url


def test_admins_add_a_webhook_whose_secret_is_never_shown_back(client, admin_user):
    client.force_login(admin_user)
    response = client.post(
        reverse("alert-destination-add"),
        {
            "name": "ops channel",
            "channel": "webhook",
            "url": "http://127.0.0.1:9999/hook",
            "secret": SECRET,
            "kinds": ["spike", "batch_failed"],
        },
        follow=True,
    )
    assert "Destination ops channel added." in response.content.decode()
    destination = AlertDestination.objects.get()
    assert destination.kinds == ["spike", "batch_failed"]
    assert secret_of(destination) == SECRET.encode()
    page = client.get(reverse("alerts")).content.decode()
    assert "ops channel" in page and "secret set (never shown)" in page
    assert SECRET not in page and destination.secret_encrypted not in page
    assert SECRET not in destination.secret_encrypted
    # Audited: who added what, without the secret or the URL's path.
    event = AuditEvent.objects.get(verb="alerts.destination")
    assert event.actor == admin_user and event.data["host"] == "127.0.0.1"
    assert event.data["kinds"] == ["spike", "batch_failed"]
    assert SECRET not in str(event.data) and "/hook" not in str(event.data)


def test_a_refused_url_is_not_saved_and_says_why(client, admin_user):
    client.force_login(admin_user)
    response = client.post(
        reverse("alert-destination-add"),
        {"name": "meta", "channel": "webhook", "url": "http://169.254.169.254/", "secret": SECRET},
        follow=True,
    )
    assert "link-local or metadata address" in response.content.decode()
    assert not AlertDestination.objects.exists()


def test_subscriptions_change_in_place_and_need_the_csrf_token(admin_user):
    destination = destination_add(
        name="mail", channel="email", emails="a@example.com", kinds=["spike"]
    )
    url = reverse("alert-destination-change", args=[destination.pk])
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(admin_user)
    assert strict.post(url, {"kinds": ["new_family"], "active": "on"}).status_code == 403
    page = strict.get(reverse("alerts"))
    token = page.cookies["csrftoken"].value
    response = strict.post(
        url,
        {"kinds": ["new_family", "gate_blocks"], "active": "on"},
        headers={"HX-Request": "true", "X-CSRFToken": token},
    )
    assert response.status_code == 200
    row = response.content.decode()
    assert row.lstrip().startswith(f'<tr id="destination-{destination.pk}">') and "Saved." in row
    destination.refresh_from_db()
    assert destination.kinds == ["new_family", "gate_blocks"] and destination.active
    changed = AuditEvent.objects.filter(verb="alerts.destination").latest("id")
    assert (changed.actor, changed.data["change"]) == (admin_user, "changed")


def test_the_page_lists_every_delivery_and_its_failure(client, admin_user):
    destination = destination_add(
        name="mail", channel="email", emails="a@example.com", kinds=["spike"]
    )
    alert = raise_alert(kind="spike", key="2026-11", title="Spike <b>in</b> November", link="/t/")
    AlertDelivery.objects.filter(alert=alert).update(
        state="failed", attempts=2, error="the mail server did not take it: refused"
    )
    client.force_login(admin_user)
    page = client.get(reverse("alerts")).content.decode()
    assert "Spike &lt;b&gt;in&lt;/b&gt; November" in page
    assert "the mail server did not take it: refused" in page
    assert f"{destination.name}:" in page and "<strong>failed</strong>" in page


def test_only_admins_see_or_change_alerts(client, approver):
    client.force_login(approver)
    assert client.get(reverse("alerts")).status_code == 403
    assert client.post(reverse("alert-destination-add"), {"name": "x"}).status_code == 403
