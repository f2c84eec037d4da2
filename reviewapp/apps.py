from django.apps import AppConfig
from django.db.models.signals import post_migrate


def grant_app_role(sender: AppConfig, using: str = "default", plan=None, **_kwargs) -> None:
    """After every migrate (not a test's flush, which passes no plan), the app's database
    role gets exactly its privileges (reviewapp/infra/roles.py)."""
    from django.apps import apps

    from reviewapp.infra.roles import app_role_grant

    if plan is not None:
        app_role_grant(using, apps.get_models(include_auto_created=True))


def keep_ticket_counts(sender: AppConfig, using: str = "default", plan=None, **_kwargs) -> None:
    """After every migrate, the trigger that keeps the queue's counts is made from the
    counted filters as they are defined (reviewapp/review/counts.py: keep_counting)."""
    from reviewapp.review.counts import keep_counting

    if plan is not None:
        keep_counting(using)


def _safe_worker_log(logger, **_kwargs) -> None:
    from reviewapp.infra.logs import make_handlers_safe

    make_handlers_safe(logger)


class ReviewAppConfig(AppConfig):
    name = "reviewapp"
    verbose_name = "Crosscheck"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from celery.signals import after_setup_logger, after_setup_task_logger
        from django.core import checks

        from reviewapp.accounts.identity_provider import identity_provider_check
        from reviewapp.accounts.roles import ensure_roles
        from reviewapp.infra import lookups  # noqa: F401  (registers field__any)

        # A Celery worker sets up its own log handlers: they escape what tasks log too.
        for signal in (after_setup_logger, after_setup_task_logger):
            signal.connect(_safe_worker_log, weak=False)

        checks.register(identity_provider_check)
        # Permissions exist only after migrate, so the roles are made then.
        post_migrate.connect(ensure_roles, sender=self)
        post_migrate.connect(keep_ticket_counts, sender=self)
        post_migrate.connect(grant_app_role, sender=self)
