"""The detectors, one per kind of alert, and `detect_alerts` that runs them all. Each
names its occurrence by a key, so a detection run again raises nothing new:

- spike: the month's unexplained count spikes by the tallies' rule (reports.tally.is_spike),
  over the whole month (key: the month) and per source pair (the month and the pair);
- new family: a fingerprint whose first ticket is at most ALERT_LOOKBACK_HOURS old and
  that has open tickets (key: the fingerprint);
- gate blocks: an action in enforce mode that blocked ALERT_GATE_BLOCK_PERCENT or more of
  at least ALERT_GATE_MIN_CHECKS checks in the last ALERT_GATE_WINDOW_SECONDS (key: the
  action and the window, counted in whole windows since the epoch);
- batch failed: a batch failed for good (no tries left, or from the command line, which
  is never tried again) at most ALERT_LOOKBACK_HOURS ago (key: the batch)."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import urlencode

from django.conf import settings
from django.db.models import Count, Exists, Min, OuterRef, Q, Subquery
from django.urls import reverse
from django.utils import timezone

from reviewapp.alerts import raise_alert
from reviewapp.alerts.kinds import BATCH_FAILED, GATE_BLOCKS, NEW_FAMILY, SPIKE
from reviewapp.gate.modes import ENFORCE
from reviewapp.models import Alert, GateAnswer, IngestBatch, Ticket
from reviewapp.reports.calendar import current_month
from reviewapp.reports.entries import tallies_refresh
from reviewapp.reports.tally import month_tally


def detect_spikes() -> list[Alert]:
    tallies_refresh()
    tally = month_tally(current_month())
    if not tally.has_tally:
        return []
    month = tally.key
    raised = []
    if tally.spike:
        before = tally.previous.unexplained if tally.previous else 0
        raised.append(
            raise_alert(
                kind=SPIKE,
                key=month,
                title=f"Unexplained discrepancies spiked in {month}: {tally.counts.unexplained}",
                text=f"{before} the month before. Open tickets need a human: {tally.counts.open}.",
                link=f"{reverse('tallies')}?{urlencode({'month': month})}",
            )
        )
    for row in (tally.breakdowns or {}).get("sources", []):
        if row.spike:
            before = row.previous.unexplained if row.previous else 0
            raised.append(
                raise_alert(
                    kind=SPIKE,
                    key=f"{month}:sources:{row.label}",
                    title=f"Unexplained discrepancies of {row.label} spiked in {month}: "
                    f"{row.counts.unexplained}",
                    text=f"{before} the month before: an upstream system may be drifting.",
                    link=reverse("tally-discrepancies", args=[month])
                    + "?"
                    + urlencode({"outcome": "unexplained", "by": "sources", "value": row.key[0]}),
                )
            )
    return [alert for alert in raised if alert is not None]


def detect_new_families() -> list[Alert]:
    """One query, from the tickets opened in the window (beat runs this every minute: never
    a count of every family): a family is new when none of its tickets is older."""
    since = timezone.now() - timedelta(hours=settings.ALERT_LOOKBACK_HOURS)
    older = Ticket.objects.filter(fingerprint=OuterRef("fingerprint"), created_at__lt=since)
    first_label = (
        Ticket.objects.filter(fingerprint=OuterRef("fingerprint"))
        .order_by("created_at", "id")
        .values("fingerprint_label")[:1]
    )
    families = (
        Ticket.objects.filter(created_at__gte=since)
        .exclude(Exists(older))
        .values("fingerprint")
        .annotate(
            first=Min("created_at"),
            open=Count("id", filter=Q(state=Ticket.State.OPEN)),
            label=Subquery(first_label),
        )
        .filter(open__gt=0)
        .order_by("first")
    )
    raised = [
        raise_alert(
            kind=NEW_FAMILY,
            key=family["fingerprint"],
            title=f"New family of tickets: {family['label']}"[:300],
            text=f"{family['open']} open ticket(s) of family {family['fingerprint']}.",
            link=f"{reverse('ticket-queue')}?{urlencode({'family': family['fingerprint']})}",
        )
        for family in families
    ]
    return [alert for alert in raised if alert is not None]


def detect_gate_blocks() -> list[Alert]:
    window = settings.ALERT_GATE_WINDOW_SECONDS
    now = timezone.now()
    enforced = Q(mode=ENFORCE) & Q(
        decision__in=[GateAnswer.Decision.ALLOW, GateAnswer.Decision.BLOCK]
    )
    actions = (
        GateAnswer.objects.filter(enforced, created_at__gte=now - timedelta(seconds=window))
        .values("action")
        .annotate(
            checks=Count("id"), blocks=Count("id", filter=Q(decision=GateAnswer.Decision.BLOCK))
        )
        .filter(checks__gte=settings.ALERT_GATE_MIN_CHECKS)
        .order_by("action")
    )
    which_window = int(now.timestamp()) // max(window, 1)
    raised = []
    for action in actions:
        checks, blocks = action["checks"], action["blocks"]
        if blocks * 100 < settings.ALERT_GATE_BLOCK_PERCENT * checks:
            continue
        name = action["action"]
        raised.append(
            raise_alert(
                kind=GATE_BLOCKS,
                key=f"{name}:{which_window}",
                title=f"The gate blocked {blocks} of {checks} checks of {name or '(no action)'}",
                text=f"{round(100 * blocks / checks)}% in the last {window // 60} minutes, "
                f"in enforce mode (alerted at {settings.ALERT_GATE_BLOCK_PERCENT}%).",
                link=f"{reverse('gate')}?{urlencode({'action': name, 'decision': 'block'})}",
            )
        )
    return [alert for alert in raised if alert is not None]


def detect_failed_batches() -> list[Alert]:
    since = timezone.now() - timedelta(hours=settings.ALERT_LOOKBACK_HOURS)
    failed = IngestBatch.objects.filter(
        Q(attempts__gte=settings.INGEST_MAX_ATTEMPTS) | Q(channel=IngestBatch.Channel.CLI),
        state=IngestBatch.State.FAILED,
        finished_at__gte=since,
    ).order_by("finished_at")
    raised = [
        raise_alert(
            kind=BATCH_FAILED,
            key=str(batch.public_id),
            title=f"Ingest batch {batch.file_name} failed for good"[:300],
            text=(batch.error or "")[:1000],
            link=reverse("batch-detail", args=[batch.public_id]),
        )
        for batch in failed
    ]
    return [alert for alert in raised if alert is not None]


DETECTORS = (detect_spikes, detect_new_families, detect_gate_blocks, detect_failed_batches)


def detect_alerts() -> list[Alert]:
    """Every detector once: the alerts newly raised (each sent by workers)."""
    return [alert for detector in DETECTORS for alert in detector()]
