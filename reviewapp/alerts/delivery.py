"""Sending an alert to a destination: one AlertDelivery row each, a unit of durable work
(reviewapp.durable; DELIVERIES says how) sent to a worker once the alert is recorded.

A delivery ends done once the webhook answered 2xx or the mail server took the message,
and is never sent again: a worker claims only a delivery not done (under its lock, so two
copies of one message cannot both send it). A failure (no answer, a non-2xx status, a
mail server refusing) fails the try, and the reconciler sends it again after
ALERT_RETRY_SECONDS times its tries so far, up to ALERT_MAX_ATTEMPTS tries: then it stays
failed, its error on the alerts page. A worker that dies between the receiver's answer and
recording it sends it again: receivers dedupe on X-Crosscheck-Alert (the alert's key).

A webhook gets a JSON body (`text` for Slack-compatible receivers, and the alert's kind,
key, title, link and time) signed with its shared secret: X-Crosscheck-Timestamp (Unix
seconds) and X-Crosscheck-Signature, `sha256=` and the hex HMAC-SHA256 of
`TIMESTAMP.BODY`. Redirects are not followed and no proxy is used, so that the address
checked (destinations.webhook_url_check) is the one reached."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urljoin

from cryptography.fernet import InvalidToken
from django.conf import settings
from django.core.mail import EmailMessage
from django.db.models import Q
from django.utils import timezone

from reviewapp import durable
from reviewapp.alerts.destinations import DestinationError, secret_of, webhook_url_check
from reviewapp.celery import Tasks
from reviewapp.durable import Durable
from reviewapp.infra.locks import Space
from reviewapp.models import Alert, AlertDelivery, AlertDestination

log = logging.getLogger(__name__)
State = AlertDelivery.State

DELIVERIES = Durable(
    name="alert delivery",
    model=AlertDelivery,
    task=Tasks.ALERT_DELIVER,
    lock=Space.ALERT_DELIVERY,
    lost_after=30,
    # A queued delivery whose message was lost is sent again after five minutes.
    requeue_after=300,
    retry_after="ALERT_RETRY_SECONDS",
    max_attempts="ALERT_MAX_ATTEMPTS",
)
WEBHOOK_TIMEOUT_SECONDS = 10
SIGNATURE_HEADER = "X-Crosscheck-Signature"
TIMESTAMP_HEADER = "X-Crosscheck-Timestamp"
ALERT_HEADER = "X-Crosscheck-Alert"


class DeliveryFailed(Exception):
    """A try that did not deliver; `status` is the webhook's answer, if it gave one."""

    def __init__(self, reason: str, status: int | None = None) -> None:
        super().__init__(reason)
        self.status = status


def absolute_link(link: str) -> str:
    """The alert's link as people open it: a path of the app under CROSSCHECK_BASE_URL."""
    return urljoin(settings.CROSSCHECK_BASE_URL.rstrip("/") + "/", link)


def alert_payload(alert: Alert) -> dict[str, Any]:
    link = absolute_link(alert.link)
    text = "\n".join(part for part in (f"Crosscheck: {alert.title}", alert.text, link) if part)
    return {
        "text": text,
        "kind": alert.kind,
        "key": alert.key,
        "title": alert.title,
        "link": link,
        "created_at": alert.created_at.isoformat(),
    }


def signature(secret: bytes, timestamp: str, body: bytes) -> str:
    """What X-Crosscheck-Signature holds: receivers compute it again and compare."""
    digest = hmac.new(secret, timestamp.encode("ascii") + b"." + body, hashlib.sha256)
    return "sha256=" + digest.hexdigest()


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirects())


def webhook_send(destination: AlertDestination, alert: Alert) -> int:
    """POST the alert, signed; the status of a 2xx answer, else DeliveryFailed."""
    try:
        url = webhook_url_check(destination.url, resolve=True)
    except DestinationError as exc:
        raise DeliveryFailed(str(exc)) from None
    try:
        secret = secret_of(destination)
    except InvalidToken:
        raise DeliveryFailed(
            "its secret cannot be read (PROTECTED_VALUES_KEY changed?): set it again"
        ) from None
    body = json.dumps(alert_payload(alert), ensure_ascii=False).encode("utf-8")
    timestamp = str(int(time.time()))
    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "User-Agent": "Crosscheck-Alerts/1",
            ALERT_HEADER: alert.key,
            TIMESTAMP_HEADER: timestamp,
            SIGNATURE_HEADER: signature(secret, timestamp, body),
        },
    )
    try:
        with _opener.open(request, timeout=WEBHOOK_TIMEOUT_SECONDS) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        raise DeliveryFailed(f"the webhook answered {exc.code}", exc.code) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise DeliveryFailed(f"the webhook could not be reached: {reason}") from None


def email_send(destination: AlertDestination, alert: Alert) -> None:
    payload = alert_payload(alert)
    message = EmailMessage(
        subject=f"[Crosscheck] {alert.title}"[:200],
        body=payload["text"] + "\n",
        to=destination.emails.split(),
        headers={ALERT_HEADER: alert.key},
    )
    try:
        message.send()
    except Exception as exc:  # the backend's own (smtplib, OSError...): the try failed
        raise DeliveryFailed(f"the mail server did not take it: {exc}") from None


def pending() -> Q:
    """What a worker may still send: not done, not skipped, not failed for good."""
    return Q(state__in=[State.QUEUED, State.RUNNING]) | Q(
        state=State.FAILED, attempts__lt=settings.ALERT_MAX_ATTEMPTS
    )


def deliver(delivery_id: int) -> str:
    """Try to send one delivery (what its task runs); its state after."""
    with durable.claim(DELIVERIES, delivery_id, when=pending()) as delivery:
        if delivery is None:
            found = AlertDelivery.objects.filter(pk=delivery_id).values_list("state", flat=True)
            return found.first() or "missing"
        destination, alert = delivery.destination, delivery.alert
        if not destination.active:
            _end(delivery_id, State.SKIPPED, error="its destination was turned off")
            return State.SKIPPED
        try:
            if destination.channel == AlertDestination.Channel.WEBHOOK:
                status: int | None = webhook_send(destination, alert)
            else:
                email_send(destination, alert)
                status = None
        except DeliveryFailed as exc:
            log.warning("alert %s to %s: %s", alert.key, destination.name, exc)
            durable.fail(DELIVERIES, delivery_id, str(exc))
            AlertDelivery.objects.filter(pk=delivery_id).update(response_status=exc.status)
            return State.FAILED
        _end(delivery_id, State.DONE, status=status, delivered=True)
        return State.DONE


def _end(pk: int, state: str, *, error: str = "", status: int | None = None, delivered=False):
    now = timezone.now()
    AlertDelivery.objects.filter(pk=pk).update(
        state=state,
        error=error,
        response_status=status,
        finished_at=now,
        delivered_at=now if delivered else None,
    )


def dispatch(delivery: AlertDelivery) -> None:
    durable.dispatch(DELIVERIES, delivery)
