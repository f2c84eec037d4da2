"""Candidates: the policies judged under prospectively, each kept as it was made."""

import pytest
from django.db import DatabaseError, transaction

from reviewapp.models import PolicyCandidate
from reviewapp.policy.candidates import (
    candidate_of_draft,
    candidate_of_proposal,
    candidate_of_version,
    policy_of_candidate,
)
from reviewapp.policy.versions import policy_version_publish, proposal_create, proposal_decide

pytestmark = pytest.mark.django_db


def propose(user, source: str):
    return proposal_create(
        user=user,
        kind="authoritative-source",
        change={"field": "status", "source": source},
        rationale=f"{source} owns status",
    )


def test_the_draft_is_one_candidate_until_it_changes(reviewer, approver):
    first = candidate_of_draft(user=reviewer)
    assert (first.kind, first.number, first.base_number, first.label) == (
        "draft",
        1,
        0,
        "the draft on the built-in default",
    )
    assert candidate_of_draft(user=approver) == first
    proposal_decide(
        proposal=propose(reviewer, "refund-service"), user=approver, approve=True, reason=""
    )
    changed = candidate_of_draft(user=reviewer)
    assert changed != first
    assert [rule["source"] for rule in changed.document["rules"]] == ["refund-service"]
    assert policy_of_candidate(changed).version == 1


def test_a_pending_proposal_is_judged_as_the_active_version_with_it_alone(reviewer, approver):
    # Its impact is its own: not that of the approved proposal waiting in the draft.
    proposal_decide(
        proposal=propose(reviewer, "refund-service"), user=approver, approve=True, reason=""
    )
    pending = propose(reviewer, "order-ledger")
    candidate = candidate_of_proposal(pending, user=approver)
    assert candidate.label == f"the built-in default + proposal #{pending.pk}"
    assert [rule["source"] for rule in candidate.document["rules"]] == ["order-ledger"]
    assert candidate.base_number == 0


def test_a_published_version_is_a_candidate_of_its_own_number(reviewer, approver):
    proposal_decide(
        proposal=propose(reviewer, "refund-service"), user=approver, approve=True, reason=""
    )
    version = policy_version_publish(user=approver, reason="owners")
    candidate = candidate_of_version(version)
    assert (candidate.label, candidate.version, candidate.base_number) == ("v1", version, 0)
    assert candidate_of_version(version) == candidate
    # Like the version itself, a candidate is never rewritten.
    with pytest.raises(DatabaseError, match="append-only|permission denied"), transaction.atomic():
        PolicyCandidate.objects.filter(pk=candidate.pk).update(number=7)
