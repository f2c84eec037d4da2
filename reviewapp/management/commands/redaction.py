"""manage.py redaction: show the redaction rules ingest applies, or set new ones.

    manage.py redaction show
    manage.py redaction set rules.json --by USERNAME --reason "why"

A new set is refused when it names keys the oracle reads, or when the runs of the last 30
days would be judged otherwise with it (the refusal names the runs and fields). The
person named must hold the permission to manage redaction (admins)."""

from __future__ import annotations

import json
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from reviewapp.accounts.audit import Channel, audit_channel
from reviewapp.accounts.roles import MANAGE_REDACTION
from reviewapp.models import RedactionRuleSet
from reviewapp.privacy.rules import RuleError
from reviewapp.privacy.versions import read_rules_text, redaction_set


class Command(BaseCommand):
    help = "Show or set the redaction rules applied at ingest."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        actions.add_parser("show", help="print the active rules and the versions before them")
        chosen = actions.add_parser("set", help="make a rule set document the next version")
        chosen.add_argument("file")
        chosen.add_argument("--by", required=True, metavar="USERNAME", help="who sets it")
        chosen.add_argument("--reason", required=True)

    def handle(self, *args, **options) -> None:
        if options["action"] == "show":
            self._show()
            return
        users = get_user_model()
        user = users.objects.filter(username=options["by"]).first()
        if user is None or not user.is_active:
            raise CommandError(f"no active account named {options['by']!r}")
        if not user.has_perm(MANAGE_REDACTION):
            raise CommandError(f"{user.username} may not manage redaction rules")
        try:
            text = Path(options["file"]).read_text(encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"cannot read {options['file']}: {exc.strerror}") from None
        try:
            with audit_channel(Channel.CLI):
                version = redaction_set(read_rules_text(text), user=user, reason=options["reason"])
        except RuleError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"redaction v{version.number} is in force for new deliveries")

    def _show(self) -> None:
        versions = list(RedactionRuleSet.objects.select_related("created_by")[:20])
        if not versions:
            self.stdout.write("no redaction rules: traces are stored as they arrive")
            return
        active = versions[0]
        self.stdout.write(json.dumps(active.document, indent=2, ensure_ascii=False))
        for version in versions:
            by = version.created_by.username if version.created_by else "-"
            self.stdout.write(
                f"v{version.number}  {version.created_at:%Y-%m-%d %H:%M}  {by}  {version.reason}"
            )
