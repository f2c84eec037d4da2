from django.apps import AppConfig
from django.db.models.signals import post_migrate


class ReviewAppConfig(AppConfig):
    name = "reviewapp"
    verbose_name = "Crosscheck"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from reviewapp.accounts.roles import ensure_roles

        # Permissions exist only after migrate, so the roles are made then.
        post_migrate.connect(ensure_roles, sender=self)
