"""A seeded demo corpus: months of runs from a few agents and sources, covering every
verdict kind, every conflict reason and every run finding, so that a new user lands on a
living dashboard. `python manage.py seed_demo` writes it and ingests it."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

DEMO_POLICY: dict[str, Any] = {
    "name": "demo: payments, stock and refunds",
    "safeActions": ["request_review", "stop", "record_resolution"],
    "fields": {
        "status": {
            "normalize": {
                "kind": "enum",
                "caseInsensitive": True,
                "aliases": {"erstattet": "refunded"},
            },
            "harmlessErrors": ["AVATAR_UNAVAILABLE"],
        },
        "amount": {"normalize": {"kind": "money"}},
        "sellableQty": {},
        "address": {
            "normalize": {"kind": "text", "collapseWhitespace": True, "caseInsensitive": True}
        },
    },
    "rules": [
        {
            "id": "payments-newest",
            "kind": "higher-source-revision",
            "field": "status",
            "revisionDomain": "payments",
        },
        {
            "id": "refund-service-owns-status",
            "kind": "authoritative-source",
            "field": "status",
            "source": "refund-service",
            "unlessValues": ["chargeback"],
        },
        {
            "id": "review-before-shipping",
            "kind": "require-review",
            "field": "*",
            "actions": ["ship_goods"],
        },
    ],
    "identity": {"mode": "blocking"},
    "trajectory": {
        "allowedTools": [
            "get_refund",
            "get_ledger_entry",
            "search_orders",
            "get_customer",
            "get_wms_stock",
            "get_storefront_stock",
            "get_transaction",
            "check_refund_eligibility",
            "check_approval_limit",
            "create_refund",
            "verify_refund",
        ],
        "mutatingTools": ["create_refund", "delete_customer_profile"],
        "scopeArgument": "customerId",
        "prerequisites": [{"tool": "create_refund", "requires": "check_refund_eligibility"}],
        "maxMutationsPerOp": 1,
    },
}

Lines = list[dict[str, Any]]


class _Run:
    """Builds the lines of one run, numbering its calls and observations."""

    def __init__(self, run_id: str, agent: str, started: datetime, subject: dict[str, Any]):
        self.run_id, self.started, self.clock = run_id, started, started
        self.lines: Lines = [
            {
                "type": "run_started",
                "agent": agent,
                "subject": subject,
                "startedAt": _stamp(started),
            }
        ]
        self.calls = 0

    def _tick(self, ms: int = 350) -> str:
        self.clock += timedelta(milliseconds=ms)
        return _stamp(self.clock)

    def read(self, tool: str, arguments: dict[str, Any], source: str, **observed: Any) -> str:
        self.calls += 1
        call_id = f"{self.run_id}-c{self.calls}"
        started = self._tick(40)
        self.lines.append(
            {
                "type": "tool_call",
                "toolCallId": call_id,
                "tool": tool,
                "arguments": arguments,
                "startedAt": started,
                "completedAt": self._tick(),
                "ok": not observed.get("errors"),
            }
        )
        self.lines.append(
            {
                "type": "tool_observation",
                "observationId": f"{self.run_id}-o{self.calls}",
                "toolCallId": call_id,
                "source": source,
                "completedAt": _stamp(self.clock),
                "errors": [],
                **observed,
            }
        )
        return call_id

    def payments(
        self, tool: str, order: str, source: str, revision: int, status: str, **extra: Any
    ) -> str:
        """A read of an order's payment status, at a revision of the payments domain."""
        return self.read(
            tool,
            {"orderId": order},
            source,
            revisionDomain="payments",
            sourceRevision=revision,
            status=status,
            **extra,
        )

    def call(self, tool: str, arguments: dict[str, Any], **extra: Any) -> None:
        self.calls += 1
        self.lines.append(
            {
                "type": "tool_call",
                "toolCallId": f"{self.run_id}-c{self.calls}",
                "tool": tool,
                "arguments": arguments,
                "startedAt": self._tick(),
                "ok": True,
                **extra,
            }
        )

    def resolve(self, **resolution: Any) -> None:
        self.lines.append({"type": "observation_resolution", **resolution})

    def act(self, name: str, **extra: Any) -> None:
        self.lines.append({"type": "agent_action", "name": name, **extra})


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


# --- scenarios: each writes one run -------------------------------------------------


def _order_agreement(run: _Run, rng: random.Random, order: str) -> None:
    run.payments("get_refund", order, "refund-service", 42, "refunded")
    run.payments(
        "get_ledger_entry", order, "order-ledger", 42, rng.choice(["Refunded", "erstattet"])
    )
    run.act("send_status_message")


def _order_stale_search(run: _Run, rng: random.Random, order: str) -> None:
    run.payments("get_refund", order, "refund-service", 42, "refunded")
    run.read(
        "search_orders",
        {"orderId": order},
        "search-index",
        revisionDomain="search",
        sourceRevision=105,
        status="paid",
    )
    run.resolve(
        kind="resolved",
        rule="refund-service-owns-refund-state",
        status="refunded",
        confidence="high",
    )
    run.act("send_status_message")


def _order_newer_revision(run: _Run, rng: random.Random, order: str) -> None:
    run.payments("get_ledger_entry", order, "order-ledger", 41, "paid")
    run.payments("get_refund", order, "payments-replica", 43, "refunded")
    run.act("send_status_message")


def _order_partial(run: _Run, rng: random.Random, order: str) -> None:
    run.payments("get_refund", order, "refund-service", 42, "refunded")
    run.payments(
        "get_ledger_entry",
        order,
        "order-ledger",
        42,
        "refunded",
        errors=["PAYMENT_EVENTS_UNAVAILABLE"],
    )
    run.act(rng.choice(["request_review", "send_status_message"]))


def _order_chargeback(run: _Run, rng: random.Random, order: str) -> None:
    run.payments("get_refund", order, "refund-service", 42, "refunded")
    run.payments("get_ledger_entry", order, "order-ledger", 42, "chargeback")
    run.resolve(kind="conflict", reason="no-approved-precedence")
    run.act(rng.choice(["issue_store_credit", "request_review"]))


def _order_wrong_join(run: _Run, rng: random.Random, order: str) -> None:
    other = f"order-{rng.randrange(1000, 9999)}"
    run.payments("get_refund", order, "refund-service", 42, "refunded", entity=order)
    run.read(
        "search_orders",
        {"orderId": order},
        "search-index",
        revisionDomain="search",
        sourceRevision=7,
        status="paid",
        entity=other,
    )
    run.act("send_status_message")


def _order_shipping(run: _Run, rng: random.Random, order: str) -> None:
    run.read(
        "get_ledger_entry",
        {"orderId": order},
        "order-ledger",
        address="1  Main St ",
        amount={"amount": "12.50", "currency": "USD", "unit": "major"},
    )
    run.read(
        "get_customer",
        {"orderId": order},
        "crm",
        address="1 main st",
        amount={"amount": 1300, "currency": "USD", "unit": "minor"},
    )
    run.act("ship_goods")


def _order_duplicate_delivery(run: _Run, rng: random.Random, order: str) -> None:
    run.payments("get_refund", order, "refund-service", 42, "refunded", eventId=f"evt-{order}")
    run.payments(
        "get_refund",
        order,
        "refund-service",
        42,
        rng.choice(["refunded", "paid"]),
        eventId=f"evt-{order}",
    )
    run.act("send_status_message")


def _order_broken_instrumentation(run: _Run, rng: random.Random, order: str) -> None:
    call_id = run.read("get_refund", {"orderId": order}, "refund-service", status="refunded")
    run.lines.append(
        {
            "type": "tool_call",
            "toolCallId": call_id,
            "tool": "get_refund",
            "arguments": {"orderId": order},
        }
    )
    run.lines.append(
        {
            "type": "tool_observation",
            "observationId": f"{run.run_id}-orphan",
            "toolCallId": "lost-call",
            "source": "order-ledger",
            "status": "refunded",
        }
    )
    # The same observation recorded twice by a retrying exporter.
    run.lines.append({**run.lines[2], "completedAt": _stamp(run.clock + timedelta(seconds=1))})
    run.act("send_status_message")


def _stock(run: _Run, rng: random.Random, sku: str) -> None:
    wms = rng.randint(10, 60)
    gap = rng.choice([0, 0, 3, 8, 10])
    missing = rng.random() < 0.15
    if missing:
        run.read(
            "get_wms_stock",
            {"sku": sku},
            "global-wms-service",
            field="sellableQty",
            value=None,
            errors=[{"code": "UNKNOWN_SKU", "message": f"Unknown SKU: {sku}"}],
        )
    else:
        run.read(
            "get_wms_stock",
            {"sku": sku},
            "global-wms-service",
            field="sellableQty",
            value=wms,
            entity=sku,
        )
    run.read(
        "get_storefront_stock",
        {"sku": sku},
        "retail-storefront-service",
        field="sellableQty",
        value=wms + gap,
        entity=sku,
    )
    if missing or gap == 10:
        run.resolve(
            kind="needs_human_review",
            confidence="low",
            disputedFields=["sellableQty"],
            reasoning="Nothing explains the gap.",
        )
    elif gap:
        run.resolve(
            kind="resolved",
            value=wms,
            rule="trust_wms",
            confidence="high",
            disputedFields=["sellableQty"],
            reasoning="Reserved units still on the shelf.",
        )
    run.act("record_resolution", arguments={"sku": sku})


def _refund_trajectory(run: _Run, rng: random.Random, customer: str) -> None:
    clean = rng.random() < 0.6
    run.call("get_transaction", {"customerId": customer, "transactionId": "t-77"})
    if clean:
        run.call("check_refund_eligibility", {"customerId": customer})
        run.call(
            "create_refund",
            {"customerId": customer, "amount": 150},
            opId=f"{run.run_id}-op",
            idempotencyKey=f"{run.run_id}-key",
            outcome="success",
        )
        run.call("verify_refund", {"customerId": customer})
    else:
        run.call("search_customers", {"customerId": "c-other"})
        run.call(
            "create_refund",
            {"customerId": customer, "amount": 150},
            opId=f"{run.run_id}-op",
            ok=False,
            outcome="unknown",
        )
        run.call(
            "create_refund",
            {"customerId": customer, "amount": 150},
            opId=f"{run.run_id}-op",
            outcome="success",
        )
    run.act("reply_to_customer", arguments={"text": "Your refund has been processed."})


Scenario = tuple[str, str, Callable[[_Run, random.Random, str], None], str]
SCENARIOS: tuple[Scenario, ...] = (
    ("support-agent", "order", _order_agreement, "orderId"),
    ("support-agent", "order", _order_stale_search, "orderId"),
    ("support-agent", "order", _order_newer_revision, "orderId"),
    ("support-agent", "order", _order_partial, "orderId"),
    ("support-agent", "order", _order_chargeback, "orderId"),
    ("support-agent", "order", _order_wrong_join, "orderId"),
    ("fulfilment-agent", "order", _order_shipping, "orderId"),
    ("support-agent", "order", _order_duplicate_delivery, "orderId"),
    ("support-agent", "order", _order_broken_instrumentation, "orderId"),
    ("resolver-agent", "SKU", _stock, "sku"),
    ("resolver-agent", "SKU", _stock, "sku"),
    ("refund-agent", "c", _refund_trajectory, "customerId"),
)


def demo_lines(
    *, runs: int = 360, months: int = 6, seed: int = 20260804, until: datetime | None = None
) -> list[str]:
    """Seeded JSON Lines (same arguments, same bytes), spread over `months` months."""
    rng = random.Random(seed)
    end = until or datetime(2026, 11, 28, tzinfo=UTC)
    span = timedelta(days=30 * months)
    out: list[str] = []
    for number in range(runs):
        agent, prefix, scenario, subject_key = SCENARIOS[number % len(SCENARIOS)]
        subject = (
            f"{prefix}-{rng.randrange(100, 999)}" if prefix != "c" else f"c{rng.randrange(1, 60)}"
        )
        started = end - span + timedelta(seconds=rng.randrange(int(span.total_seconds())))
        run = _Run(f"demo-{number:04d}", agent, started, {subject_key: subject})
        scenario(run, rng, subject)
        out.extend(
            json.dumps({"runId": run.run_id, **line}, separators=(",", ":")) for line in run.lines
        )
    return out
