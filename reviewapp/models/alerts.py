"""Alerts: what happened that people should hear of without opening the dashboard (a spike,
a new family, a gate blocking a lot, a batch failed for good, a suggestion ready), where
admins send them (destinations, each subscribed to kinds), and each delivery of an alert
to a destination, a unit of durable work (reviewapp.alerts.delivery)."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class AlertDestination(models.Model):
    """A webhook (a URL and its shared secret) or a list of email addresses, and the kinds
    of alert it is sent. Never deleted (its deliveries are its record): turned off."""

    class Channel(models.TextChoices):
        WEBHOOK = "webhook"
        EMAIL = "email"

    name = models.CharField(max_length=100)
    channel = models.CharField(max_length=10, choices=Channel.choices)
    url = models.CharField(max_length=500, blank=True)
    # The shared secret, Fernet-encrypted under PROTECTED_VALUES_KEY: never shown back.
    secret_encrypted = models.TextField(blank=True)
    # Email addresses, one per line.
    emails = models.TextField(blank=True)
    # Alert kinds (reviewapp.alerts.kinds) sent here.
    kinds = models.JSONField(default=list, blank=True)
    active = models.BooleanField(default=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "id"]
        permissions = [("manage_alerts", "Can choose where alerts are sent")]

    def __str__(self) -> str:
        return f"{self.name} ({self.channel})"


class Alert(models.Model):
    """One occurrence of something worth telling: its key is unique, so an occurrence
    detected again is the same alert, and is never sent twice."""

    kind = models.CharField(max_length=30)
    key = models.CharField(max_length=300, unique=True)
    title = models.CharField(max_length=300)
    text = models.TextField(blank=True)
    # The page that explains it: a path of the app (made absolute with CROSSCHECK_BASE_URL
    # when sent) or an absolute URL.
    link = models.CharField(max_length=500)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["kind", "-created_at"], name="alert_kind_created")]

    def __str__(self) -> str:
        return self.key


class AlertDelivery(models.Model):
    """An alert sent to one destination, at most once: queued, running, done, failed (with
    tries left it is tried again, reviewapp.durable), or skipped (never sent: its
    destination was turned off, or seed_demo recorded it without a network)."""

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"
        SKIPPED = "skipped"

    alert = models.ForeignKey(Alert, on_delete=models.PROTECT, related_name="deliveries")
    destination = models.ForeignKey(
        AlertDestination, on_delete=models.PROTECT, related_name="deliveries"
    )
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    attempts = models.PositiveIntegerField(default=0)
    # The HTTP status of the last webhook try (None: no answer, or an email).
    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["alert", "destination"], name="alert_delivery_once_per_destination"
            )
        ]
        indexes = [models.Index(fields=["state", "heartbeat_at"], name="alert_delivery_state")]

    def __str__(self) -> str:
        return f"{self.alert_id} -> {self.destination_id}: {self.state}"
