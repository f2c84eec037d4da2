"""manage.py seed_demo: demo users (one per role, credentials printed), the demo policy
as version 1, and a seeded corpus of months of runs, ingested. Safe to run again."""

import os

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from reviewapp.accounts.roles import ADMIN, APPROVER, REVIEWER, VIEWER, account_role_set
from reviewapp.demo.corpus import DEMO_POLICY, demo_lines
from reviewapp.demo.shadow import seed_shadow_demo
from reviewapp.demo.tallies import demo_tallies
from reviewapp.ingest.pipeline import ingest_file
from reviewapp.models import IngestBatch, PolicyVersion
from reviewapp.policy.versions import (
    policy_document_import,
    policy_version_publish,
    proposal_decide,
)
from reviewapp.replay.demo import seed_demo_replay

DEMO_USERS = (
    ("reviewer", REVIEWER),
    ("reviewer2", REVIEWER),
    ("approver", APPROVER),
    ("viewer", VIEWER),
    ("admin", ADMIN),
)


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
        users = {}
        for username, role in DEMO_USERS:
            # The audited way every role is given (an event when anything changes).
            user = account_role_set(username, role, superuser=role == ADMIN)
            # Reset on every run so that the printed credentials always work.
            user.set_password(password)
            user.save(update_fields=["password"])
            users[role] = user
        if options["no_corpus"]:
            self._print_credentials(password)
            return
        if not PolicyVersion.objects.exists():
            # The demo policy goes the way every policy goes: proposed, approved by
            # someone else, published.
            proposal = policy_document_import(
                user=users[REVIEWER],
                document=DEMO_POLICY,
                rationale="Who owns which field, as the demo team decided.",
            )
            proposal_decide(
                proposal=proposal, user=users[APPROVER], approve=True, reason="Matches the runbook."
            )
            policy_version_publish(user=users[APPROVER], reason="First policy for the demo.")
        corpus = settings.VAR_DIR / "demo" / "demo-corpus.jsonl"
        corpus.parent.mkdir(parents=True, exist_ok=True)
        corpus.write_text("\n".join(demo_lines(runs=options["runs"])) + "\n")
        summary = ingest_file(corpus, channel=IngestBatch.Channel.CLI, user=users[ADMIN])
        self.stdout.write(
            f"Demo corpus: {summary.lines:,} lines ({summary.accepted:,} new), "
            f"{summary.runs:,} runs judged, {summary.tickets:,} tickets opened."
        )
        seed_shadow_demo(users)
        self.stdout.write(demo_tallies(reviewer=users[REVIEWER], approver=users[APPROVER]))
        self.stdout.write(seed_demo_replay(reviewer=users[REVIEWER]))
        self._print_credentials(password)

    def _print_credentials(self, password: str) -> None:
        self.stdout.write("Demo users (local demo only):")
        for username, role in DEMO_USERS:
            self.stdout.write(f"  {username:<10} {role:<9} password: {password}")
