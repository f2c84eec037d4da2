"""Shadow mode in the demo (`manage.py seed_demo`): a pending proposal in shadow beside the
demo policy, the last two months of the corpus backfilled under it, one action enforced at
the gate and a few live checks answered, so that a new user's shadow page has counts."""

from __future__ import annotations

import json
import time
from datetime import UTC, timedelta
from typing import Any

from django.db.models import Max

from reviewapp.accounts.roles import APPROVER, REVIEWER
from reviewapp.demo.corpus import DEMO_POLICY
from reviewapp.gate.check import check
from reviewapp.gate.modes import mode_set
from reviewapp.infra.days import Window
from reviewapp.models import GateAnswer, Run, ShadowDesignation
from reviewapp.policy.candidates import candidate_of_proposal
from reviewapp.policy.versions import policy_document_import
from reviewapp.shadow.backfill import backfill_start, backfill_step
from reviewapp.shadow.designations import shadow_start

BACKFILL_DAYS = 60


def seed_shadow_demo(users: dict[str, Any]) -> None:
    """Idempotent: nothing is added where a candidate is in shadow, or the gate answered."""
    if not ShadowDesignation.objects.filter(ended_at__isnull=True).exists():
        proposal = policy_document_import(
            user=users[REVIEWER],
            document=_ledger_owns_status(),
            rationale="The ledger records chargebacks first: let it, not the refund service, "
            "own status.",
        )
        designation = shadow_start(
            candidate_of_proposal(proposal, user=users[APPROVER]),
            user=users[APPROVER],
            reason="Count what it would change before anyone approves it.",
        )
        # The corpus's last two months (its runs carry their own clock), up to today.
        today = Window.last(1).until
        latest = Run.objects.aggregate(latest=Max("started_at"))["latest"]
        since = min(today, latest.astimezone(UTC).date() if latest else today)
        backfill = backfill_start(
            designation,
            since=since - timedelta(days=BACKFILL_DAYS),
            until=today,
            user=users[APPROVER],
        )
        while backfill_step(backfill.pk):  # here and now: the demo needs no worker for it
            pass
    if not GateAnswer.objects.exists():
        mode_set(
            "ship_goods",
            "enforce",
            user=users[APPROVER],
            reason="Reviewed with the warehouse team: never ship on a disputed address.",
        )
        for body in _checks():
            check(json.dumps(body).encode(), token=None, started=time.perf_counter())


def _ledger_owns_status() -> dict[str, Any]:
    """The demo policy with the order ledger owning `status` instead of the refund service:
    store credit on a chargeback is decided (unblocked), a status message after a stale
    search read is not any more (newly blocked)."""
    rules = [rule for rule in DEMO_POLICY["rules"] if rule["id"] != "refund-service-owns-status"]
    owner = {"id": "ledger-owns-status", "kind": "authoritative-source", "field": "status"}
    return {**DEMO_POLICY, "rules": [*rules, {**owner, "source": "order-ledger"}]}


def _checks() -> list[dict[str, Any]]:
    """Live checks as an agent harness would ask them: one per decision."""

    def run(run_id: str, second: str, action: str) -> dict[str, Any]:
        calls = [
            {"runId": run_id, "type": "tool_call", "toolCallId": f"{run_id}-c{i}", "tool": tool}
            for i, tool in enumerate(("get_refund", "get_ledger_entry"))
        ]
        observations = [
            {
                "runId": run_id,
                "type": "tool_observation",
                "observationId": f"{run_id}-o{i}",
                "toolCallId": f"{run_id}-c{i}",
                "source": source,
                "revisionDomain": "payments",
                "sourceRevision": 42,
                "status": status,
            }
            for i, (source, status) in enumerate(
                (("refund-service", "refunded"), ("order-ledger", second))
            )
        ]
        return {"runId": run_id, "records": calls + observations, "action": {"name": action}}

    return [
        run("live-credit-1", "chargeback", "issue_store_credit"),
        run("live-credit-2", "refunded", "issue_store_credit"),
        run("live-ship-1", "chargeback", "ship_goods"),
        run("live-review-1", "chargeback", "request_review"),
        {"runId": "live-bad-1", "records": "not a list", "action": {"name": "ship_goods"}},
    ]
