"""manage.py seed_demo: demo users for a local run, one per role, credentials printed."""

import os

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand

DEMO_USERS = (
    ("reviewer", "reviewer"),
    ("approver", "approver"),
    ("viewer", "viewer"),
)


class Command(BaseCommand):
    help = "Create demo users (idempotent) and print their credentials."

    def handle(self, *args, **options) -> None:
        # A local demo only: the password comes from the environment when it is set.
        password = os.environ.get("DEMO_PASSWORD", "crosscheck-demo")
        user_model = get_user_model()
        for username, group_name in DEMO_USERS:
            group, _ = Group.objects.get_or_create(name=group_name)
            user, created = user_model.objects.get_or_create(username=username)
            # Reset on every run so that the printed credentials always work.
            user.set_password(password)
            user.save(update_fields=["password"])
            user.groups.add(group)
            state = "created" if created else "exists"
            self.stdout.write(f"  {username:<9} password: {password}  ({state})")
