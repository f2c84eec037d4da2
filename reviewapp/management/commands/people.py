"""manage.py people: the people page's changes on the command line, for a first admin and
for scripts: add an account with a role (printing its one-time link to set a password, or
setting one read from standard input), set a role, deactivate, reactivate, a new link, and
a list of everyone.

Whoever runs manage.py on the server holds the database's credentials already: the
changes are recorded in the audit trail as made on the command line, by no one in
particular (the same audited functions as the page: accounts/people.py)."""

from __future__ import annotations

import sys

from django.contrib.auth import get_user_model, password_validation
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from reviewapp.accounts.audit import Channel, audit_channel
from reviewapp.accounts.people import (
    ROLES,
    PeopleError,
    password_link,
    password_set_record,
    people,
    person_active_set,
    person_invite,
    person_role_set,
)
from reviewapp.accounts.roles import LastAdminError


class Command(BaseCommand):
    help = "Add people, set their roles, deactivate or reactivate them, or list them."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        add = actions.add_parser("add", help="a new account with a role")
        add.add_argument("username")
        add.add_argument("--role", required=True, choices=ROLES)
        add.add_argument(
            "--password-stdin",
            action="store_true",
            help="set the password read from standard input instead of printing a link",
        )
        add.add_argument("--base-url", default="", help="printed before the link's path")
        role = actions.add_parser("role", help="give someone a role instead of theirs")
        role.add_argument("username")
        role.add_argument("role", choices=ROLES)
        for name, what in (("deactivate", "no sign-in, session or token"), ("reactivate", "")):
            change = actions.add_parser(name, help=f"{name} an account {what}".strip())
            change.add_argument("username")
        link = actions.add_parser("link", help="a new one-time link to set a password")
        link.add_argument("username")
        link.add_argument("--base-url", default="", help="printed before the link's path")
        actions.add_parser("list", help="everyone, with role, state and last sign-in")

    def handle(self, *args, **options) -> None:
        action = options["action"]
        try:
            with audit_channel(Channel.CLI):
                getattr(self, f"_{action}")(options)
        except (PeopleError, LastAdminError) as exc:
            raise CommandError(str(exc)) from None

    def _add(self, options) -> None:
        password = sys.stdin.readline().rstrip("\n") if options["password_stdin"] else None
        if password is not None:
            try:  # before the account is made: a refused password leaves nothing behind
                password_validation.validate_password(password)
            except ValidationError as exc:
                raise CommandError("not added: " + " ".join(exc.messages)) from None
        user, path = person_invite(
            options["username"], options["role"], actor=None, with_link=password is None
        )
        if password is None:
            self.stdout.write(f"{user.get_username()} added as {options['role']}.")
            self.stdout.write(f"Hand them this one-time link: {options['base_url']}{path}")
            return
        user.set_password(password)
        user.save(update_fields=["password"])
        password_set_record(user)
        self.stdout.write(f"{user.get_username()} added as {options['role']}, password set.")

    def _role(self, options) -> None:
        user = person_role_set(_user(options["username"]), options["role"], actor=None)
        self.stdout.write(f"{user.get_username()} is now {options['role']}.")

    def _deactivate(self, options) -> None:
        user = person_active_set(_user(options["username"]), False, actor=None)
        self.stdout.write(f"{user.get_username()} is deactivated; their API tokens are revoked.")

    def _reactivate(self, options) -> None:
        user = person_active_set(_user(options["username"]), True, actor=None)
        self.stdout.write(f"{user.get_username()} is reactivated.")

    def _link(self, options) -> None:
        path = password_link(_user(options["username"]), actor=None)
        self.stdout.write(f"Hand them this one-time link: {options['base_url']}{path}")

    def _list(self, options) -> None:
        for person in people():
            role = (person.role or "no role") + (" (superuser)" if person.superuser else "")
            state = "active" if person.active else "deactivated"
            last = f"{person.last_login:%Y-%m-%d %H:%M}" if person.last_login else "never"
            self.stdout.write(f"{person.username:<20} {role:<20} {state:<12} last sign-in {last}")


def _user(username: str):
    users = get_user_model()
    try:
        return users.objects.get(username=users.normalize_username(username))
    except users.DoesNotExist:
        raise PeopleError(f"no account named {username}") from None
