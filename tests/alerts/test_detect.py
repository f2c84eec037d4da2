"""Each kind of alert is detected from what the app knows, once per occurrence: a detection
run again raises nothing, and queues no second delivery."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from reviewapp.alerts import raise_alert
from reviewapp.alerts.destinations import destination_add
from reviewapp.alerts.kinds import KINDS
from reviewapp.ingest.batches import create_batch
from reviewapp.models import Alert, AlertDelivery, GateAnswer, IngestBatch, Ticket
from reviewapp.reports.calendar import current_month, month_add, month_key
from reviewapp.review.changes import tickets_close
from reviewapp.watch.detect import (
    detect_alerts,
    detect_failed_batches,
    detect_gate_blocks,
    detect_new_families,
    detect_spikes,
)
from tests.reports.traces import month_runs

pytestmark = pytest.mark.django_db


@pytest.fixture
def everywhere():
    """An email destination subscribed to every kind: each alert queues one delivery."""
    return destination_add(name="all", channel="email", emails="ops@example.com", kinds=KINDS)


def keys(alerts) -> list[str]:
    return sorted(alert.key for alert in alerts)


def test_a_spike_of_the_month_and_of_its_source_pair_is_alerted_once(tmp_path, everywhere):
    now, before = current_month(), month_add(current_month(), -1)
    month_runs(tmp_path, {month_key(before): 2, month_key(now): 7})
    raised = detect_spikes()
    month = month_key(now)
    assert [alert.key for alert in raised][0] == f"spike:{month}"
    assert raised[0].title == f"Unexplained discrepancies spiked in {month}: 7"
    assert raised[0].link == f"/tallies/?month={month}"
    (pair,) = raised[1:]
    assert pair.key.startswith(f"spike:{month}:sources:") and "upstream" in pair.text
    assert pair.link.startswith(f"/tallies/{month}/discrepancies/?outcome=unexplained&by=sources")
    assert detect_spikes() == []
    assert AlertDelivery.objects.count() == 2


def test_no_spike_below_the_tallies_rule(tmp_path, everywhere):
    now, before = current_month(), month_add(current_month(), -1)
    # 6 is 1.5 times 4 but only 2 more: no spike (at least SPIKE_MIN more).
    month_runs(tmp_path, {month_key(before): 4, month_key(now): 6})
    assert detect_spikes() == []


def test_a_new_family_with_open_tickets_is_alerted_once(tmp_path, everywhere, settings):
    month_runs(tmp_path, {month_key(current_month()): 2})
    fingerprints = set(Ticket.objects.values_list("fingerprint", flat=True))
    (fingerprint,) = fingerprints
    (alert,) = detect_new_families()
    assert alert.key == f"new_family:{fingerprint}"
    assert alert.link == f"/tickets/?family={fingerprint}"
    assert alert.text.startswith("2 open ticket(s)")
    assert detect_new_families() == []
    assert AlertDelivery.objects.filter(alert=alert).count() == 1


def test_a_family_without_open_tickets_or_not_new_is_not_alerted(tmp_path, reviewer, settings):
    month_runs(tmp_path, {month_key(current_month()): 2})
    settings.ALERT_LOOKBACK_HOURS = 0  # its first ticket is older than that
    assert detect_new_families() == []
    settings.ALERT_LOOKBACK_HOURS = 24
    tickets = Ticket.objects.all()
    outcome = tickets_close(
        {ticket.pk: ticket.revision for ticket in tickets},
        actor=reviewer,
        resolution="explained",
        cause="replica-lag",
    )
    assert not outcome.refused
    assert detect_new_families() == []


def test_a_family_whose_first_ticket_is_older_than_the_window_is_not_new(tmp_path, everywhere):
    month_runs(tmp_path, {month_key(current_month()): 2})
    first = Ticket.objects.order_by("created_at", "id").first()
    Ticket.objects.filter(pk=first.pk).update(created_at=timezone.now() - timedelta(days=3))
    # Its other ticket is new, and open: the family is not.
    assert Ticket.objects.filter(created_at__gte=timezone.now() - timedelta(hours=24)).exists()
    assert detect_new_families() == []


def test_a_new_family_is_titled_by_its_first_tickets_label(tmp_path, everywhere):
    month_runs(tmp_path, {month_key(current_month()): 2})
    first = Ticket.objects.order_by("created_at", "id").first()
    (alert,) = detect_new_families()
    assert alert.title == f"New family of tickets: {first.fingerprint_label}"


def answers(action: str, mode: str, **decisions: int) -> None:
    GateAnswer.objects.bulk_create(
        GateAnswer(action=action, mode=mode, decision=decision.replace("_", "-"))
        for decision, count in decisions.items()
        for _ in range(count)
    )


def test_a_gate_enforcing_blocks_above_the_rate_is_alerted_once_per_window(everywhere, settings):
    settings.ALERT_GATE_MIN_CHECKS, settings.ALERT_GATE_BLOCK_PERCENT = 20, 20
    # A window so long that both detections surely fall in the same one.
    settings.ALERT_GATE_WINDOW_SECONDS = 10**9
    answers("issue_refund", "enforce", block=5, allow=15)  # 25%
    answers("lookup_order", "enforce", block=3, allow=17)  # 15%
    answers("cancel_order", "enforce", block=5, allow=10)  # too few checks to judge
    answers("ship_order", "shadow", would_block=20)  # shadow mode blocks nothing
    (alert,) = detect_gate_blocks()
    assert alert.key.startswith("gate_blocks:issue_refund:")
    assert alert.title == "The gate blocked 5 of 20 checks of issue_refund"
    assert alert.key == f"gate_blocks:issue_refund:{int(timezone.now().timestamp()) // 10**9}"
    assert alert.link == "/gate/?action=issue_refund&decision=block"
    answers("issue_refund", "enforce", block=5)
    assert detect_gate_blocks() == []  # the same window: the same occurrence


def test_a_batch_failed_for_good_is_alerted_once_and_one_with_tries_left_is_not(
    tmp_path, everywhere, settings
):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"runId": "r", "type": "run_started"}\n')
    retried = create_batch(channel=IngestBatch.Channel.API, path=path, file_name="a.jsonl")
    spent = create_batch(channel=IngestBatch.Channel.API, path=path, file_name="b.jsonl")
    failed = {"state": IngestBatch.State.FAILED, "finished_at": timezone.now(), "error": "boom"}
    IngestBatch.objects.filter(pk=retried.pk).update(attempts=1, **failed)
    IngestBatch.objects.filter(pk=spent.pk).update(attempts=settings.INGEST_MAX_ATTEMPTS, **failed)
    (alert,) = detect_failed_batches()
    assert alert.key == f"batch_failed:{spent.public_id}"
    assert alert.link == f"/ingest/batches/{spent.public_id}/" and alert.text == "boom"
    assert detect_failed_batches() == []
    assert detect_alerts() == []


def test_a_suggestion_ready_is_raised_by_its_caller_once(everywhere):
    webhookless = destination_add(
        name="spikes only", channel="email", emails="a@example.com", kinds=["spike"]
    )
    alert = raise_alert(
        kind="suggestion_ready", key="41", title="A rule suggestion is ready", link="/policy/"
    )
    assert alert is not None and alert.key == "suggestion_ready:41"
    assert raise_alert(kind="suggestion_ready", key="41", title="again", link="/") is None
    assert Alert.objects.get().title == "A rule suggestion is ready"
    # Sent where it is subscribed, once.
    (delivery,) = AlertDelivery.objects.all()
    assert (delivery.destination, delivery.state) == (everywhere, "queued")
    assert not webhookless.deliveries.exists()
    with pytest.raises(ValueError, match="no alert kind"):
        raise_alert(kind="suggestion", key="1", title="t", link="/")
    with pytest.raises(ValueError, match="links to a path"):
        raise_alert(kind="suggestion_ready", key="2", title="t", link="javascript:alert(1)")
