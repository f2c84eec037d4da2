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


class ReviewAppConfig(AppConfig):
    name = "reviewapp"
    verbose_name = "Crosscheck"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from reviewapp.accounts.roles import ensure_roles

        # Permissions exist only after migrate, so the roles are made then.
        post_migrate.connect(ensure_roles, sender=self)
        post_migrate.connect(install_sqlite_guards, sender=self)
