"""manage.py policy: export, import, approve, reject, publish and list policy versions.

Imports become proposals like any other change, and need a second person to approve. Who
acts is whoever holds the API token given (--token, or the CROSSCHECK_TOKEN environment
variable; made on the API tokens page): a name alone proves nothing, so one operator cannot
act as two people. The audit trail records the decision as made on the command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from reviewapp.accounts.audit import Channel, audit_channel
from reviewapp.accounts.roles import APPROVE_RULE, PROPOSE_RULE
from reviewapp.engine import PolicyError
from reviewapp.management.identity import TOKEN_VARIABLE, token_holder
from reviewapp.models import PolicyVersion, RuleProposal
from reviewapp.policy.versions import (
    PolicyWorkError,
    active_document,
    policy_document_import,
    policy_version_export,
    policy_version_publish,
    proposal_decide,
)


class Command(BaseCommand):
    help = "Export, import, approve, reject and publish policy versions."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        export = actions.add_parser(
            "export", help="print a version's document (default: the active one)"
        )
        export.add_argument("--version", type=int)
        export.add_argument("--out", help="write to this file instead of standard output")
        imported = actions.add_parser("import", help="propose a policy document from a file")
        imported.add_argument("file")
        imported.add_argument("--rationale", required=True)
        decisions = [imported]
        for name in ("approve", "reject"):
            decision = actions.add_parser(name, help=f"{name} a pending proposal")
            decision.add_argument("proposal", type=int)
            decision.add_argument("--reason", default="")
            decisions.append(decision)
        published = actions.add_parser(
            "publish", help="publish the approved draft as the next version"
        )
        published.add_argument("--reason", required=True)
        decisions.append(published)
        for decision in decisions:
            decision.add_argument(
                "--token",
                default=None,
                help=f"your API token (default: ${TOKEN_VARIABLE}); it says who you are",
            )
        actions.add_parser("list", help="list versions and pending proposals")

    def handle(self, *args, **options) -> None:
        try:
            with audit_channel(Channel.CLI):
                getattr(self, f"_{options['action']}")(options)
        except (PolicyError, PolicyWorkError) as exc:
            raise CommandError(str(exc)) from None

    def _user(self, options, permission: str):
        """The person who holds the token given, if they may do this."""
        return token_holder(options.get("token"), permission)

    def _export(self, options) -> None:
        if options["version"] is not None:
            version = PolicyVersion.objects.filter(number=options["version"]).first()
            if version is None:
                raise CommandError(f"no version {options['version']}")
            document = policy_version_export(version)
        else:
            number, document = active_document()
            document = {"version": number, **document} if number else document
        text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
        if options["out"]:
            Path(options["out"]).write_text(text, encoding="utf-8")
        else:
            sys.stdout.write(text)

    def _import(self, options) -> None:
        user = self._user(options, PROPOSE_RULE)
        try:
            document = json.loads(Path(options["file"]).read_text(encoding="utf-8"))
        except OSError as exc:
            raise CommandError(f"cannot read {options['file']}: {exc.strerror or exc}") from None
        except json.JSONDecodeError as exc:
            raise CommandError(
                f"{options['file']}: not valid JSON: {exc.msg} at line {exc.lineno}"
            ) from None
        proposal = policy_document_import(
            user=user, document=document, rationale=options["rationale"]
        )
        self.stdout.write(f"proposal #{proposal.pk} waits for another person's approval")

    def _decision(self, options, approve: bool) -> None:
        user = self._user(options, APPROVE_RULE)
        proposal = RuleProposal.objects.filter(pk=options["proposal"]).first()
        if proposal is None:
            raise CommandError(f"no proposal #{options['proposal']}")
        decided = proposal_decide(
            proposal=proposal, user=user, approve=approve, reason=options["reason"]
        )
        self.stdout.write(f"proposal #{decided.pk} {decided.state}")

    def _approve(self, options) -> None:
        self._decision(options, approve=True)

    def _reject(self, options) -> None:
        self._decision(options, approve=False)

    def _publish(self, options) -> None:
        version = policy_version_publish(
            user=self._user(options, APPROVE_RULE), reason=options["reason"]
        )
        self.stdout.write(f"published v{version.number}")

    def _list(self, options) -> None:
        for version in PolicyVersion.objects.select_related("published_by"):
            self.stdout.write(
                f"v{version.number}  {version.published_at:%Y-%m-%d %H:%M}  {version.published_by}  {version.reason}"
            )
        for proposal in RuleProposal.objects.filter(state=RuleProposal.State.PENDING):
            self.stdout.write(
                f"pending #{proposal.pk} by {proposal.proposed_by}: {proposal.sentence}"
            )
