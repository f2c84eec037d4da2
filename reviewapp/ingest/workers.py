"""Whether the workers are alive: beat's canary task, run by a worker, records
its pulse; pages read it to warn that queued work is waiting on nobody."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from reviewapp.models import ServicePulse


def record_pulse(name: str) -> None:
    ServicePulse.objects.update_or_create(name=name, defaults={"seen_at": timezone.now()})


def silent_since(name: str) -> datetime | None:
    """When the service was last seen, if that is longer ago than its allowance; None when
    it is alive (or was never seen: a fresh install has no pulse yet, nothing to warn of)."""
    seen = ServicePulse.objects.filter(name=name).values_list("seen_at", flat=True).first()
    if seen is None or timezone.now() - seen <= timedelta(seconds=settings.WORKER_SILENT_SECONDS):
        return None
    return seen
