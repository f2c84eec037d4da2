"""Decisions made at the same moment (matrix row 12): 200 requests closing one ticket, and
200 approving one proposal, sent together to the live web server (gunicorn, two processes):
exactly one wins, each once in the audit trail; every other is told it lost, none fails."""

from __future__ import annotations

import threading
from collections import Counter

import pytest

from reviewapp.accounts.audit import audit_verify
from reviewapp.models import AuditEvent, RuleProposal
from reviewapp.policy.versions import proposal_create
from tests.reliability.conftest import Browser

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]
ATTEMPTS, THREADS = 200, 20


def together(browser: Browser, path: str, data: dict) -> Counter:
    """ATTEMPTS posts of the same change from THREADS threads started at once."""
    statuses: Counter = Counter()
    lock = threading.Lock()
    start = threading.Barrier(THREADS)
    csrf = browser.csrf()

    def send(count: int) -> None:
        start.wait()
        for _ in range(count):
            status = browser.stack.status(
                path,
                data=browser.encode({"csrfmiddlewaretoken": csrf, **data}),
                headers={"Referer": browser.stack.url(path)},
                opener=browser.opener,
            )
            with lock:
                statuses[status] += 1

    threads = [threading.Thread(target=send, args=(ATTEMPTS // THREADS,)) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    return statuses


def test_two_hundred_closes_of_one_ticket_have_one_winner(stack, reviewer, desk):
    ticket = desk["run-stale"]
    browser = Browser(stack)
    assert browser.sign_in("rita", "pw-rita-123") == 200
    statuses = together(
        browser,
        f"/tickets/{ticket.pk}/close/",
        {"revision": ticket.revision, "resolution": "explained", "cause": "replica-lag"},
    )
    assert sum(statuses.values()) == ATTEMPTS and set(statuses) == {200}, statuses
    ticket.refresh_from_db()
    assert (ticket.state, ticket.revision) == ("closed", 2)
    assert AuditEvent.objects.filter(ticket=ticket, verb="closed").count() == 1
    assert audit_verify().intact


def test_two_hundred_approvals_of_one_proposal_have_one_winner(stack, reviewer, approver):
    proposal = proposal_create(
        user=reviewer,
        kind="authoritative-source",
        change={"field": "status", "source": "refund-service"},
        rationale="refunds are the refund service's",
    )
    browser = Browser(stack)
    assert browser.sign_in("abel", "pw-abel-123") == 200
    statuses = together(
        browser, f"/policy/proposals/{proposal.pk}/decide/", {"decision": "approve", "reason": "ok"}
    )
    assert sum(statuses.values()) == ATTEMPTS and set(statuses) == {200}, statuses
    proposal.refresh_from_db()
    assert (proposal.state, proposal.decided_by) == ("approved", approver)
    assert AuditEvent.objects.filter(verb="proposal.approved").count() == 1
    assert RuleProposal.objects.count() == 1
    assert audit_verify().intact
