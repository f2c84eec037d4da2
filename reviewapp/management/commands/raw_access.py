"""manage.py raw_access: give or take the raw data permission (reading raw trace lines and
envelopes, each time with a reason), or list who has it.

It is given beside a role, whatever the role, by an admin: whoever holds the API token
given (--token, or CROSSCHECK_TOKEN), as for manage.py policy. Every change is an audit
event with its reason (accounts.roles.account_raw_access_set)."""

from __future__ import annotations

import os

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError
from django.db.models import Q

from reviewapp.accounts.audit import Channel, audit_channel
from reviewapp.accounts.roles import account_raw_access_set
from reviewapp.ingest.tokens import authenticate_token

TOKEN_VARIABLE = "CROSSCHECK_TOKEN"


class Command(BaseCommand):
    help = "Give or take the raw data permission, or list who has it."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        for name, what in (("grant", "give"), ("revoke", "take")):
            change = actions.add_parser(name, help=f"{what} the raw data permission")
            change.add_argument("username")
            change.add_argument("--reason", required=True, help="why (recorded)")
            change.add_argument(
                "--token",
                default=None,
                help=f"your API token (default: ${TOKEN_VARIABLE}); it says who you are",
            )
        actions.add_parser("list", help="who has the raw data permission")

    def handle(self, *args, **options) -> None:
        if options["action"] == "list":
            self._list()
            return
        raw = options.get("token") or os.environ.get(TOKEN_VARIABLE, "")
        if not raw:
            raise CommandError(
                f"say who you are: --token with your API token, or set {TOKEN_VARIABLE}"
            )
        token = authenticate_token(raw.strip())
        if token is None:
            raise CommandError(
                "this API token is not valid (unknown, revoked, or its user inactive)"
            )
        allowed = options["action"] == "grant"
        try:
            with audit_channel(Channel.CLI):
                user = account_raw_access_set(
                    options["username"], allowed, actor=token.user, reason=options["reason"]
                )
        except (PermissionError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        except DatabaseError as exc:
            raise CommandError(str(exc).splitlines()[0]) from None
        state = "may now" if allowed else "may no longer"
        self.stdout.write(f"{user.get_username()} {state} read raw data")

    def _list(self) -> None:
        granted = Q(user_permissions__codename="see_raw_data") & Q(
            user_permissions__content_type__app_label="reviewapp"
        )
        users = get_user_model().objects.filter(granted | Q(is_superuser=True)).distinct()
        for user in users.order_by("username"):
            note = " (superuser: every permission)" if user.is_superuser else ""
            self.stdout.write(f"{user.get_username()}{note}")
