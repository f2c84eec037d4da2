"""What alerts watch for (docs/alerts.md): each detector reads what the app already knows
and raises an alert per occurrence (reviewapp.alerts.raise_alert, once per key). Run by
beat's detect-alerts task in a worker, never in a request."""
