from django.apps import AppConfig
from django.db.models.signals import post_migrate


def install_sqlite_guards(sender: AppConfig, using: str = "default", **_kwargs) -> None:
    """SQLite's refusals (reviewapp/models/guards.py), made where missing after every
    migrate: a table SQLite remade to alter it has lost its triggers."""
    from django.db import connections

    from reviewapp.models.guards import sqlite_guards

    connection = connections[using]
    if connection.vendor != "sqlite":
        return
    with connection.cursor() as cursor:
        for statement in sqlite_guards(list(sender.get_models())).values():
            cursor.execute(statement)


def grant_app_role(sender: AppConfig, using: str = "default", plan=None, **_kwargs) -> None:
    """After every migrate (not a test's flush, which passes no plan), the app's database
    role gets exactly its privileges (reviewapp/infra/roles.py)."""
    from django.apps import apps

    from reviewapp.infra.roles import app_role_grant

    if plan is not None:
        app_role_grant(using, apps.get_models(include_auto_created=True))


def _safe_worker_log(logger, **_kwargs) -> None:
    from reviewapp.infra.logs import make_handlers_safe

    make_handlers_safe(logger)


class ReviewAppConfig(AppConfig):
    name = "reviewapp"
    verbose_name = "Crosscheck"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from celery.signals import after_setup_logger, after_setup_task_logger

        from reviewapp.accounts.roles import ensure_roles

        # A Celery worker sets up its own log handlers: they escape what tasks log too.
        for signal in (after_setup_logger, after_setup_task_logger):
            signal.connect(_safe_worker_log, weak=False)

        # Permissions exist only after migrate, so the roles are made then.
        post_migrate.connect(ensure_roles, sender=self)
        post_migrate.connect(install_sqlite_guards, sender=self)
        post_migrate.connect(grant_app_role, sender=self)
