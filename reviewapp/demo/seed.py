"""The demo as `manage.py seed_demo` builds it, in order: a user per role, the demo policy
as version 1 (proposed, approved by someone else, published, as every policy is), a seeded
corpus of months of runs ingested, then shadow mode, tallies, replay and alerts in it. Safe to run
again: each part leaves what it made before as it is."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.conf import settings

from reviewapp.accounts.roles import ADMIN, APPROVER, REVIEWER, VIEWER, account_role_set
from reviewapp.demo.alerts import seed_alerts_demo
from reviewapp.demo.corpus import DEMO_POLICY, demo_lines
from reviewapp.demo.privacy import seed_privacy_demo
from reviewapp.demo.replay import seed_demo_replay
from reviewapp.demo.shadow import seed_shadow_demo
from reviewapp.demo.suggestions import seed_demo_suggestions
from reviewapp.demo.tallies import demo_tallies
from reviewapp.ingest.pipeline import ingest_file
from reviewapp.models import IngestBatch, PolicyVersion
from reviewapp.policy.versions import (
    policy_document_import,
    policy_version_publish,
    proposal_decide,
)

DEMO_USERS = (
    ("reviewer", REVIEWER),
    ("reviewer2", REVIEWER),
    ("approver", APPROVER),
    ("viewer", VIEWER),
    ("admin", ADMIN),
)


def demo_users(password: str) -> dict[str, Any]:
    """The users of DEMO_USERS, each with `password`, by role (of two in a role, the last)."""
    users: dict[str, Any] = {}
    for username, role in DEMO_USERS:
        # The audited way every role is given (an event when anything changes).
        user = account_role_set(username, role, superuser=role == ADMIN)
        # Set again on every run, so that the credentials printed always work.
        user.set_password(password)
        user.save(update_fields=["password"])
        users[role] = user
    return users


def seed_demo(users: dict[str, Any], *, runs: int) -> Iterator[str]:
    """Build the demo beside `users` (demo_users), a line for each part as it is done."""
    if not PolicyVersion.objects.exists():
        proposal = policy_document_import(
            user=users[REVIEWER],
            document=DEMO_POLICY,
            rationale="Who owns which field, as the demo team decided.",
        )
        proposal_decide(
            proposal=proposal, user=users[APPROVER], approve=True, reason="Matches the runbook."
        )
        policy_version_publish(user=users[APPROVER], reason="First policy for the demo.")
    # Before the corpus: its lines are redacted as they are ingested.
    yield seed_privacy_demo(users)
    corpus = settings.VAR_DIR / "demo" / "demo-corpus.jsonl"
    corpus.parent.mkdir(parents=True, exist_ok=True)
    corpus.write_text("\n".join(demo_lines(runs=runs)) + "\n")
    summary = ingest_file(corpus, channel=IngestBatch.Channel.CLI, user=users[ADMIN])
    yield (
        f"Demo corpus: {summary.lines:,} lines ({summary.accepted:,} new), "
        f"{summary.runs:,} runs judged, {summary.tickets:,} tickets opened."
    )
    seed_shadow_demo(users)
    yield demo_tallies(reviewer=users[REVIEWER], approver=users[APPROVER])
    yield seed_demo_replay(reviewer=users[REVIEWER])
    yield seed_demo_suggestions(reviewer=users[REVIEWER], other_reviewer=users[APPROVER])
    # Last: the alerts the demo data raises.
    yield seed_alerts_demo(users)
