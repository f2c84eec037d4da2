"""Alerts delivered for real: to a webhook started here (http.server on a free port, which
checks the signature) and to an SMTP server started here (aiosmtpd) through Django's SMTP
EmailBackend. A failed try is tried again by the durable-work reconciler; a delivery done
is never sent again, not by its message delivered twice nor by the next detection run."""

from __future__ import annotations

from datetime import timedelta

import pytest
from cryptography.fernet import Fernet
from django.utils import timezone

from reviewapp import durable
from reviewapp.alerts import raise_alert
from reviewapp.alerts.delivery import DELIVERIES, deliver
from reviewapp.alerts.destinations import destination_add
from reviewapp.celery import Tasks
from reviewapp.durable import Send
from reviewapp.ingest.batches import create_batch
from reviewapp.models import AlertDelivery, AlertDestination, IngestBatch
from reviewapp.watch.detect import detect_alerts
from tests.alerts.receivers import SECRET, smtp_server, webhook_receiver

pytestmark = pytest.mark.django_db


@pytest.fixture
def failed_batch(tmp_path, settings) -> IngestBatch:
    """A batch that failed for good, as the pipeline leaves one after its last try."""
    path = tmp_path / "orders.jsonl"
    path.write_bytes(b'{"runId": "r", "type": "run_started"}\n')
    batch = create_batch(channel=IngestBatch.Channel.API, path=path, file_name="orders.jsonl")
    IngestBatch.objects.filter(pk=batch.pk).update(
        state=IngestBatch.State.FAILED,
        attempts=settings.INGEST_MAX_ATTEMPTS,
        finished_at=timezone.now(),
        error="line 3: the disk was full",
    )
    return batch


def use_smtp(settings, port: int) -> None:
    """Django's SMTP backend as the default mailer (tests get locmem otherwise)."""
    settings.MAILERS = {
        "default": {
            "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
            "OPTIONS": {"host": "127.0.0.1", "port": port, "use_tls": False, "timeout": 5},
        }
    }


def the_delivery() -> AlertDelivery:
    (delivery,) = AlertDelivery.objects.select_related("alert", "destination")
    return delivery


def test_a_webhook_is_signed_retried_after_a_500_and_sent_exactly_once(failed_batch, settings):
    settings.ALERT_RETRY_SECONDS = 0
    settings.CROSSCHECK_BASE_URL = "https://crosscheck.example.com"
    with webhook_receiver(500) as hook:
        destination_add(
            name="ops", channel="webhook", url=hook.url, secret=SECRET, kinds=["batch_failed"]
        )
        (alert,) = detect_alerts()
        delivery = the_delivery()
        assert deliver(delivery.pk) == AlertDelivery.State.FAILED
        delivery.refresh_from_db()
        assert (delivery.state, delivery.attempts, delivery.response_status) == ("failed", 1, 500)
        assert delivery.error == "the webhook answered 500"
        # The reconciler finds it due again (ALERT_RETRY_SECONDS times its tries), and sends it.
        assert durable.due(DELIVERIES) == [Send(Tasks.ALERT_DELIVER, (delivery.pk,))]
        assert deliver(delivery.pk) == AlertDelivery.State.DONE

        # Delivered: neither its message delivered again, nor the reconciler, nor the next
        # detection run sends it again.
        assert deliver(delivery.pk) == AlertDelivery.State.DONE
        assert durable.due(DELIVERIES) == []
        assert detect_alerts() == []
        assert AlertDelivery.objects.count() == 1

    assert [received.answered for received in hook.received] == [500, 200]
    assert all(received.signed for received in hook.received)
    body = hook.received[-1].body
    link = f"https://crosscheck.example.com/ingest/batches/{failed_batch.public_id}/"
    assert body["link"] == link
    assert body["kind"] == "batch_failed" and body["key"] == alert.key
    # Slack-compatible: a `text` field that says what happened and links to it.
    assert "orders.jsonl failed for good" in body["text"] and link in body["text"]
    assert hook.received[-1].headers["X-Crosscheck-Alert"] == alert.key
    delivery.refresh_from_db()
    assert (delivery.state, delivery.attempts, delivery.response_status) == ("done", 2, 200)
    assert delivery.delivered_at is not None and delivery.error == ""


def test_a_receiver_refuses_a_wrong_signature_and_the_delivery_fails_with_it(settings):
    with webhook_receiver(secret="another-secret-than-the-one-saved") as hook:
        destination_add(
            name="ops", channel="webhook", url=hook.url, secret=SECRET, kinds=["suggestion_ready"]
        )
        raise_alert(kind="suggestion_ready", key="7", title="Suggestion 7", link="/policy/")
        assert deliver(the_delivery().pk) == AlertDelivery.State.FAILED
    assert [received.signed for received in hook.received] == [False]
    assert the_delivery().response_status == 401


def test_tries_are_spent_with_a_growing_wait_then_the_delivery_stays_failed(settings):
    settings.ALERT_RETRY_SECONDS = 60
    settings.ALERT_MAX_ATTEMPTS = 2
    with webhook_receiver(503, 503, 503) as hook:
        destination_add(
            name="ops", channel="webhook", url=hook.url, secret=SECRET, kinds=["suggestion_ready"]
        )
        raise_alert(kind="suggestion_ready", key="8", title="Suggestion 8", link="/policy/")
        pk = the_delivery().pk
        deliver(pk)
        assert durable.due(DELIVERIES) == []  # not before 60 s times one try
        AlertDelivery.objects.filter(pk=pk).update(
            finished_at=timezone.now() - timedelta(seconds=61)
        )
        assert durable.due(DELIVERIES) == [Send(Tasks.ALERT_DELIVER, (pk,))]
        deliver(pk)
        AlertDelivery.objects.filter(pk=pk).update(finished_at=timezone.now() - timedelta(days=1))
        # Its tries spent: failed for good, never sent again.
        assert durable.due(DELIVERIES) == []
        assert deliver(pk) == AlertDelivery.State.FAILED
    assert len(hook.received) == 2
    assert the_delivery().attempts == 2


def test_email_goes_through_django_smtp_backend_to_a_real_server_once(failed_batch, settings):
    settings.DEFAULT_FROM_EMAIL = "crosscheck@example.com"
    settings.CROSSCHECK_BASE_URL = "https://crosscheck.example.com/"
    with smtp_server() as (port, messages):
        use_smtp(settings, port)
        destination_add(
            name="on call",
            channel="email",
            emails="oncall@example.com\nlead@example.com",
            kinds=["batch_failed"],
        )
        (alert,) = detect_alerts()
        delivery = the_delivery()
        assert deliver(delivery.pk) == AlertDelivery.State.DONE
        assert detect_alerts() == []
        assert deliver(delivery.pk) == AlertDelivery.State.DONE
    (message,) = messages
    assert message["Subject"] == "[Crosscheck] Ingest batch orders.jsonl failed for good"
    assert message["From"] == "crosscheck@example.com"
    assert message["X-Envelope-To"] == "oncall@example.com, lead@example.com"
    assert message["X-Crosscheck-Alert"] == alert.key
    text = message.get_payload(decode=True).decode()
    assert f"https://crosscheck.example.com/ingest/batches/{failed_batch.public_id}/" in text
    assert "line 3: the disk was full" in text


def test_a_mail_server_that_is_not_there_fails_the_try(settings):
    from tests.alerts.receivers import free_port

    use_smtp(settings, free_port())
    destination_add(name="mail", channel="email", emails="a@example.com", kinds=["spike"])
    raise_alert(kind="spike", key="2026-11", title="Spike", link="/tallies/")
    assert deliver(the_delivery().pk) == AlertDelivery.State.FAILED
    assert the_delivery().error.startswith("the mail server did not take it")


def test_a_destination_turned_off_skips_its_deliveries(settings):
    with webhook_receiver() as hook:
        destination = destination_add(
            name="ops", channel="webhook", url=hook.url, secret=SECRET, kinds=["spike"]
        )
        raise_alert(kind="spike", key="2026-10", title="Spike", link="/tallies/")
        destination.active = False
        destination.save()
        assert deliver(the_delivery().pk) == AlertDelivery.State.SKIPPED
        # Off when raised: nothing is recorded for it.
        raise_alert(kind="spike", key="2026-11", title="Spike", link="/tallies/")
    assert hook.received == []
    assert AlertDelivery.objects.count() == 1


def test_a_secret_that_cannot_be_read_fails_the_try_and_says_so():
    with webhook_receiver() as hook:
        destination = destination_add(
            name="ops", channel="webhook", url=hook.url, secret=SECRET, kinds=["spike"]
        )
        # As after PROTECTED_VALUES_KEY changed: the ciphertext is another key's.
        AlertDestination.objects.filter(pk=destination.pk).update(
            secret_encrypted=Fernet(Fernet.generate_key()).encrypt(b"x").decode()
        )
        raise_alert(kind="spike", key="2026-09", title="Spike", link="/tallies/")
        assert deliver(the_delivery().pk) == AlertDelivery.State.FAILED
    assert hook.received == []
    assert "its secret cannot be read" in the_delivery().error
