"""The alerts page in the demo: two destinations (a webhook and an email list) and the
alerts the demo data raises, with a delivery recorded for each as skipped: seed_demo sends
nothing over the network, and says so in each delivery's error. Alerts raised later, by
beat while `scripts/run` serves, are sent for real (to a webhook nobody listens to in the
demo: their failures and retries show on the page)."""

from __future__ import annotations

import secrets
from typing import Any

from django.utils import timezone

from reviewapp.accounts.roles import ADMIN
from reviewapp.alerts import raise_alert
from reviewapp.alerts.destinations import destination_add
from reviewapp.alerts.kinds import KINDS, SUGGESTION_READY
from reviewapp.models import Alert, AlertDelivery, AlertDestination
from reviewapp.watch.detect import detect_alerts

NOT_SENT = "recorded by seed_demo, not sent: the demo makes no network call while it is seeded"
# Port 9 (discard): nothing answers on a demo machine, which is what the page then shows.
DEMO_WEBHOOK = "http://localhost:9/crosscheck-demo-hook"


def seed_alerts_demo(users: dict[str, Any]) -> str:
    """Once: the alerts the demo data raises, two destinations, skipped deliveries."""
    if AlertDestination.objects.exists():
        return "Alerts: as before."
    detect_alerts()
    raise_alert(
        kind=SUGGESTION_READY,
        key="demo",
        title="A rule suggestion is ready: search-index reads of status lag the refund service",
        link="/policy/",
    )
    admin = users[ADMIN]
    webhook = destination_add(
        name="Ops channel (demo)",
        channel="webhook",
        url=DEMO_WEBHOOK,
        secret=secrets.token_urlsafe(24),
        kinds=KINDS,
        user=admin,
    )
    email = destination_add(
        name="On-call email (demo)",
        channel="email",
        emails="oncall@example.com",
        kinds=["spike", "batch_failed", "gate_blocks"],
        user=admin,
    )
    now = timezone.now()
    recorded = [
        AlertDelivery(
            alert=alert,
            destination=destination,
            state=AlertDelivery.State.SKIPPED,
            error=NOT_SENT,
            finished_at=now,
        )
        for alert in Alert.objects.all()
        for destination in (webhook, email)
        if alert.kind in destination.kinds
    ]
    AlertDelivery.objects.bulk_create(recorded, ignore_conflicts=True)
    return (
        f"Alerts: {Alert.objects.count()} raised, 2 destinations, "
        f"{len(recorded)} deliveries recorded as skipped."
    )
