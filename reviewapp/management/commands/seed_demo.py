"""manage.py seed_demo: demo users (one per role, credentials printed), the demo policy
as version 1, and a seeded corpus of months of runs, ingested (reviewapp.demo). Safe to
run again."""

import os

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from reviewapp.demo.seed import DEMO_USERS, demo_users, seed_demo


class Command(BaseCommand):
    help = "Create demo users, the demo policy and the demo corpus (idempotent)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--runs", type=int, default=360, help="runs in the demo corpus")
        parser.add_argument("--no-corpus", action="store_true", help="users only")

    def handle(self, *args, **options) -> None:
        # A well-known password is for a local demo (DEBUG) only: anywhere else the demo
        # users, an admin among them, get the one DEMO_PASSWORD names.
        password = os.environ.get("DEMO_PASSWORD") or (
            "crosscheck-demo" if settings.DEBUG else None
        )
        if not password:
            raise CommandError(
                "set DEMO_PASSWORD: outside DEBUG the demo users (an admin among them) get "
                "no well-known password"
            )
        users = demo_users(password)
        if not options["no_corpus"]:
            for done in seed_demo(users, runs=options["runs"]):
                self.stdout.write(done)
        self.stdout.write("Demo users (local demo only):")
        for username, role in DEMO_USERS:
            self.stdout.write(f"  {username:<10} {role:<9} password: {password}")
        self.stdout.write("Signed in as admin, People (/people/) lists them and manages roles.")
