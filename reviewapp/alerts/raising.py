"""Raising an alert: recorded once per occurrence (its key), with a delivery queued for
every active destination subscribed to its kind, each sent by a worker. Called by workers
(reviewapp.watch's detectors, and whatever else has news), never while a request waits."""

from __future__ import annotations

from django.db import transaction

from reviewapp.alerts.delivery import dispatch
from reviewapp.alerts.kinds import KINDS
from reviewapp.models import Alert, AlertDelivery, AlertDestination


def raise_alert(*, kind: str, key: str, title: str, link: str, text: str = "") -> Alert | None:
    """Record the alert `kind` of occurrence `key` (say, a month, a fingerprint, a
    suggestion's id) and send it where it is subscribed: the alert, or None when this
    occurrence was raised before (nothing is sent again). `link` is the page that explains
    it, a path of the app (or an absolute URL)."""
    if kind not in KINDS:
        raise ValueError(f"no alert kind named {kind!r}")
    if not link.startswith(("/", "https://", "http://")):
        raise ValueError("an alert links to a path of the app, or an http(s) URL")
    with transaction.atomic():
        alert, created = Alert.objects.get_or_create(
            key=f"{kind}:{key}"[:300],
            defaults={"kind": kind, "title": title[:300], "text": text, "link": link[:500]},
        )
        if not created:
            return None
        for destination in AlertDestination.objects.filter(active=True, kinds__contains=[kind]):
            dispatch(AlertDelivery.objects.create(alert=alert, destination=destination))
    return alert
