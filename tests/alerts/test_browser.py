"""The alerts page in real headless Chromium: an admin adds a webhook destination,
subscribes it to a kind, and sees the delivery recorded once an alert is sent to a real
receiver."""

import pytest

from reviewapp.alerts import raise_alert
from reviewapp.alerts.delivery import deliver
from reviewapp.models import AlertDelivery, AlertDestination
from tests.alerts.receivers import SECRET, webhook_receiver
from tests.browser import watched_page
from tests.review.test_browser import serious_violations

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_admin_adds_a_webhook_subscribes_it_and_sees_its_delivery(
    browser, live_server, admin_user
):
    with (
        webhook_receiver() as hook,
        watched_page(browser, live_server.url, admin_user.username) as page,
    ):
        page.click("nav.mainnav >> text=Alerts")
        page.wait_for_selector("#alert-destinations >> text=No destination yet")
        page.fill("#id_name", "Ops channel")
        page.select_option("#id_channel", "webhook")
        page.fill("#id_url", hook.url)
        page.fill("#id_secret", SECRET)
        page.click("#destination-add button[type=submit]")
        page.wait_for_selector(".messages >> text=Destination Ops channel added.")
        destination = AlertDestination.objects.get()
        row = page.locator(f"#destination-{destination.pk}")
        assert "secret set (never shown)" in row.inner_text()
        assert SECRET not in page.content()

        # Subscribed in place (htmx): the row comes back saying so.
        row.locator("input[name=kinds][value=suggestion_ready]").check()
        row.locator("button[type=submit]").click()
        page.wait_for_selector(f"#destination-{destination.pk} >> text=Saved.")
        destination.refresh_from_db()
        assert destination.kinds == ["suggestion_ready"]

        # A worker raises and sends an alert (the task's function, run here).
        alert = raise_alert(
            kind="suggestion_ready", key="12", title="Suggestion 12 is ready", link="/policy/"
        )
        (delivery,) = AlertDelivery.objects.filter(alert=alert)
        assert deliver(delivery.pk) == "done"

        page.reload()
        shown = page.locator(f"#alert-{alert.pk}")
        assert "Suggestion 12 is ready" in shown.inner_text()
        assert "Ops channel: done" in shown.inner_text()
        assert "HTTP 200" in shown.inner_text()
        assert serious_violations(page) == []
    assert [received.signed for received in hook.received] == [True]
