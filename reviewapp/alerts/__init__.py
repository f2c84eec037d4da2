"""Alerts: raised once per occurrence (raising.raise_alert), sent by workers to the
webhooks and email addresses admins subscribed to their kind (delivery), every delivery
recorded. What is watched for is reviewapp.watch; docs/alerts.md says it all."""

from reviewapp.alerts.raising import raise_alert

__all__ = ["raise_alert"]
