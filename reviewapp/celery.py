"""The Celery app, the name of every task it runs, and what beat sends when.

A task is sent by its name (services never import the tasks that call them), and each
name is written here once: reviewapp.tasks registers its tasks under these names, the
services send them through reviewapp.durable, and the beat schedule below names them."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "reviewapp.settings")


class Tasks:
    """The tasks of reviewapp.tasks, by name (the names messages in a queue carry)."""

    INGEST_BATCH = "reviewapp.tasks.ingest_batch_task"
    INGEST_IN_PARTS = "reviewapp.tasks.ingest_in_parts_task"
    INGEST_PART = "reviewapp.tasks.ingest_part_task"
    SHADOW_JUDGE_BATCH = "reviewapp.tasks.shadow_judge_batch_task"
    SHADOW_BACKFILL = "reviewapp.tasks.shadow_backfill_task"
    LABEL_SETTLEMENTS = "reviewapp.tasks.label_settled_tickets_task"
    REPLAY_JOB = "reviewapp.tasks.replay_job_task"
    TALLIES_REFRESH = "reviewapp.tasks.tallies_refresh_task"
    ERASE = "reviewapp.tasks.erase_task"
    ALERT_DELIVER = "reviewapp.tasks.alert_deliver_task"
    # Sent after a close that marks the right observation; beat's too (a lost message).
    SUGGESTIONS_REFRESH = "reviewapp.tasks.suggestions_refresh_task"
    # Beat's.
    RECONCILE = "reviewapp.tasks.reconcile_task"
    FOLD_KEPT_COUNTS = "reviewapp.tasks.fold_kept_counts_task"
    CLOSE_TALLY_MONTHS = "reviewapp.tasks.close_tally_months_task"
    EXPIRE_RAW_PAYLOADS = "reviewapp.tasks.expire_raw_payloads_task"
    DETECT_ALERTS = "reviewapp.tasks.detect_alerts_task"


app = Celery("reviewapp")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def beat_schedule(
    reconcile_seconds: float, alert_seconds: float = 60.0
) -> dict[str, dict[str, object]]:
    """What beat sends (settings.CELERY_BEAT_SCHEDULE): the one reconciler of durable work
    (reviewapp.durable), which shows too that a worker takes tasks, every
    `reconcile_seconds`; periodic chores of the queue, the tallies and retention; and the
    look for alerts every `alert_seconds`."""
    return {
        "reconcile": {"task": Tasks.RECONCILE, "schedule": float(reconcile_seconds)},
        "fold-kept-counts": {"task": Tasks.FOLD_KEPT_COUNTS, "schedule": 60.0},
        # Brings the tallies up to date and closes the months that are due (reviewapp/reports).
        "close-tally-months": {"task": Tasks.CLOSE_TALLY_MONTHS, "schedule": 300.0},
        # Raw payloads past their retention window become tombstones (reviewapp/privacy):
        # hourly, so a window is kept to within an hour; nothing to do costs one query.
        "expire-raw-payloads": {"task": Tasks.EXPIRE_RAW_PAYLOADS, "schedule": 3600.0},
        # Looks for what admins are alerted of (reviewapp/watch), in a worker, never a request.
        "detect-alerts": {"task": Tasks.DETECT_ALERTS, "schedule": float(alert_seconds)},
        # Suggested rules are computed after each marked close; this catches a lost message.
        "refresh-suggestions": {"task": Tasks.SUGGESTIONS_REFRESH, "schedule": 900.0},
    }
