"""manage.py migrate, as the owner of the tables: with MIGRATE_DATABASE_URL set, migrations
run as that role (the app's own, DATABASE_URL's, owns nothing and may change no schema),
which then grants the app's role its privileges (reviewapp/infra/roles.py, after migrate)."""

from __future__ import annotations

from django.core.management.commands import migrate

from reviewapp.infra.roles import as_owner


class Command(migrate.Command):
    def handle(self, *args, **options):
        with as_owner(options["database"]):
            return super().handle(*args, **options)
