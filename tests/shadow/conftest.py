"""Shadow fixtures: the demo policy published as v1 and a month of the demo corpus
ingested under it (every verdict kind, unsafe actions and trajectory findings)."""

from datetime import UTC, datetime

import pytest

from reviewapp.demo.corpus import DEMO_POLICY, demo_lines
from reviewapp.policy.versions import (
    policy_document_import,
    policy_version_publish,
    proposal_create,
    proposal_decide,
)
from tests.seeding import ingest_lines


def publish(document, reviewer, approver, rationale="owners decided"):
    proposal = policy_document_import(user=reviewer, document=document, rationale=rationale)
    proposal_decide(proposal=proposal, user=approver, approve=True, reason="")
    return policy_version_publish(user=approver, reason=rationale)


def approve(reviewer, approver, kind, change):
    """An approved change: part of the draft from then on."""
    proposal = proposal_create(user=reviewer, kind=kind, change=change, rationale="try it")
    return proposal_decide(proposal=proposal, user=approver, approve=True, reason="")


def demo_month(tmp_path, runs: int = 130, seed: int = 20260804, name: str = "demo.jsonl"):
    lines = demo_lines(runs=runs, months=1, seed=seed, until=datetime.now(UTC))
    if seed != 20260804:
        lines = [line.replace('"demo-', f'"demo{seed}-') for line in lines]
    return ingest_lines(tmp_path, lines, name=name)


@pytest.fixture
def demo_desk(tmp_path, reviewer, approver):
    """v1 (the demo policy) active, a month of runs judged under it."""
    version = publish(DEMO_POLICY, reviewer, approver)
    demo_month(tmp_path)
    return version


def shadow_document():
    """The demo policy changed both ways: the refund service no longer owns `status` (the
    stale-search runs acting on it would newly be blocked), the order ledger does (the
    chargeback runs would be unblocked), and creating a refund needs no prior check."""
    import copy

    document = copy.deepcopy(DEMO_POLICY)
    document["rules"] = [
        rule for rule in document["rules"] if rule["id"] != "refund-service-owns-status"
    ] + [
        {
            "id": "ledger-owns-status",
            "kind": "authoritative-source",
            "field": "status",
            "source": "order-ledger",
        }
    ]
    document["trajectory"] = {**document["trajectory"], "prerequisites": []}
    return document


@pytest.fixture
def draft_in_shadow(demo_desk, reviewer, approver):
    """The shadow document approved, so the draft; the draft in shadow."""
    from reviewapp.policy.candidates import candidate_of_draft
    from reviewapp.shadow.designations import shadow_start

    proposal = policy_document_import(
        user=reviewer, document=shadow_document(), rationale="what if the ledger owned it"
    )
    proposal_decide(proposal=proposal, user=approver, approve=True, reason="try it in shadow")
    return shadow_start(candidate_of_draft(user=approver), user=approver, reason="a week's look")


# A real Celery worker on the test Redis and database, for the tests that need one.
from tests.ingest.test_worker import worker  # noqa: E402, F401
