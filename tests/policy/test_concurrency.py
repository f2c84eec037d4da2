"""Publishing at the same moment from many browsers (issue 15, defect 7: 7 of 50 answered
500): exactly one version is made, every other request is told why, none fails."""

import threading

import pytest
from django.db import connections
from django.test import Client
from django.urls import reverse

from reviewapp.models import AuditEvent, PolicyVersion, RuleProposal
from reviewapp.policy.versions import proposal_create, proposal_decide

pytestmark = pytest.mark.django_db(transaction=True)
PUBLISHERS = 50


def approved(reviewer, approver) -> RuleProposal:
    proposal = proposal_create(
        user=reviewer,
        kind="authoritative-source",
        change={"field": "status", "source": "refund-service"},
        rationale="refunds are the refund service's",
    )
    return proposal_decide(proposal=proposal, user=approver, approve=True, reason="agreed")


def test_fifty_simultaneous_publishes_make_one_version_and_no_500(reviewer, approver):
    approved(reviewer, approver)
    statuses: list[int] = []
    start = threading.Barrier(PUBLISHERS)

    def publish() -> None:
        client = Client(raise_request_exception=False)
        client.force_login(approver)
        try:
            start.wait()
            response = client.post(reverse("policy-publish"), {"reason": "together"})
            statuses.append(response.status_code)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=publish) for _ in range(PUBLISHERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(statuses) == PUBLISHERS
    assert set(statuses) == {302}, sorted(statuses)
    assert PolicyVersion.objects.count() == 1
    assert AuditEvent.objects.filter(verb="policy.published").count() == 1
    assert RuleProposal.objects.get().published_in.number == 1
