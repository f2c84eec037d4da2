"""Alerts through a real Celery worker on the real Redis broker: an alert raised is sent
by the worker once its transaction commits, a 500 fails the try, the reconciler's round
sends it again, and the worker delivers it: the receiver sees two requests, then no more."""

import pytest
from django.db import transaction

from reviewapp.alerts import raise_alert
from reviewapp.alerts.delivery import DELIVERIES
from reviewapp.alerts.destinations import destination_add
from reviewapp.durable import reconcile
from reviewapp.models import AlertDelivery
from tests.alerts.receivers import SECRET, webhook_receiver
from tests.workers import celery_worker, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_a_worker_delivers_and_the_reconciler_retries_after_a_500(
    django_db_blocker, tmp_path, settings
):
    settings.ALERT_RETRY_SECONDS = 0
    log_path = tmp_path / "worker.log"
    with (
        webhook_receiver(500) as hook,
        celery_worker(django_db_blocker, log_path, concurrency=1),
    ):
        destination_add(
            name="ops", channel="webhook", url=hook.url, secret=SECRET, kinds=["batch_failed"]
        )
        with transaction.atomic():
            raise_alert(kind="batch_failed", key="b-1", title="Batch b-1 failed", link="/ingest/")
        delivery = AlertDelivery.objects.get()

        def state() -> str:
            delivery.refresh_from_db()
            return delivery.state

        wait_for(lambda: state() == "failed", 30, "the worker's first try")
        assert reconcile([DELIVERIES]) == {"alert delivery": 1}
        wait_for(lambda: state() == "done", 30, "the worker's second try")
        assert reconcile([DELIVERIES]) == {"alert delivery": 0}
    assert [received.answered for received in hook.received] == [500, 200]
    assert delivery.attempts == 2 and delivery.response_status == 200
