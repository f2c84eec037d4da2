"""Tickets in bulk for query-count tests and benchmarks/pages.py, and real traces through the
ingest pipeline for everything that reads evidence."""

from __future__ import annotations

import json
import random
from datetime import timedelta
from pathlib import Path

from django.db.models.functions import Mod
from django.utils import timezone

from reviewapp.ingest.pipeline import ingest_file
from reviewapp.models import IngestBatch, Run, Ticket
from reviewapp.review.opening import ticket_key

REASONS = ("no-approved-precedence", "partial-result", "identity-mismatch", "review-required")
FINDING_KINDS = ("missing-prerequisite", "orphan-observation", "tool-outside-allowlist")
FIELDS = ("status", "amount", "sellableQty")
ACTIONS = ("issue_refund", "send_status_message", "request_review", "ship_goods", "")
SOURCES = ("refund-service", "order-ledger", "search-index", "warehouse", "erp")
AGENTS = ("refund-agent", "stock-agent", "support-agent")
BLOCK = 5000
DAYS = 30


def order_entity(i: int) -> str:
    """The order the `i`th seeded ticket is about: ten digits, as an order id has."""
    return f"order-{i * 7_919 % 10**10:010d}"


def seed_tickets(n: int, *, assignees=(), seed: int = 7, tickets_per_run: int = 4) -> IngestBatch:
    """`n` tickets spread over every reason, field, action, source, agent and ~200 families,
    a fifth of them closed, each conflict on its own order (`order_entity`); inserted in
    blocks with bulk_create."""
    rng = random.Random(seed)
    batch = IngestBatch.objects.create(
        channel=IngestBatch.Channel.CLI, file_name="seeded.jsonl", content_sha256="0" * 64
    )
    now = timezone.now()
    runs_needed = -(-n // tickets_per_run)
    prefix = f"seeded-{batch.pk}"
    for start in range(0, runs_needed, BLOCK):
        Run.objects.bulk_create(
            Run(run_id=f"{prefix}-{i}", agent=AGENTS[i % len(AGENTS)], started_at=now)
            for i in range(start, min(start + BLOCK, runs_needed))
        )
    runs = list(Run.objects.filter(run_id__startswith=f"{prefix}-").order_by("id"))
    owners = [None, None, *assignees]
    made = 0
    while made < n:
        block = []
        for i in range(made, min(made + BLOCK, n)):
            run = runs[i // tickets_per_run]
            conflict = rng.random() < 0.85
            field = rng.choice(FIELDS)
            action = rng.choice(ACTIONS)
            sources = ",".join(sorted(rng.sample(SOURCES, 2)))
            reason = rng.choice(REASONS) if conflict else rng.choice(FINDING_KINDS)
            family = rng.randrange(200)
            closed = rng.random() < 0.2
            block.append(
                Ticket(
                    run=run,
                    key=ticket_key("seeded", i),
                    kind=Ticket.Kind.CONFLICT if conflict else Ticket.Kind.FINDING,
                    entity=order_entity(i) if conflict else None,
                    field=field if conflict else "",
                    finding_kind="" if conflict else reason,
                    reason=reason,
                    action=action,
                    unsafe=conflict and action not in ("", "request_review"),
                    sources=sources if conflict else "",
                    agent=run.agent,
                    fingerprint=f"{family:016x}",
                    fingerprint_label=f"seeded family {family}",
                    policy_number=0,
                    batch=batch,
                    state=Ticket.State.CLOSED if closed else Ticket.State.OPEN,
                    resolution=Ticket.Resolution.UNEXPLAINED if closed else "",
                    assignee=rng.choice(owners),
                )
            )
        Ticket.objects.bulk_create(block)
        made += len(block)
    # Spread creation times over a month, as a real queue's are (auto_now_add set them all
    # to now).
    seeded = Ticket.objects.filter(batch=batch).annotate(day=Mod("id", DAYS))
    for day in range(1, DAYS):
        seeded.filter(day=day).update(created_at=now - timedelta(days=day))
    return batch


def line(**record) -> str:
    return json.dumps(record, separators=(",", ":"))


def conflict_run(run_id: str, *, observations: int = 2, agent: str = "refund-agent") -> list[str]:
    """A run whose observations of `status` disagree, each from its own call, followed by an
    action that acts on the conflict: one unsafe no-approved-precedence ticket."""
    lines = [line(runId=run_id, type="run_started", agent=agent, subject={"orderId": "order-204"})]
    for i in range(observations):
        call = f"{run_id}-call-{i}"
        lines.append(
            line(
                runId=run_id,
                type="tool_call",
                toolCallId=call,
                tool="get_order",
                arguments={"orderId": "order-204", "page": i},
                startedAt=f"2026-08-04T10:00:{i % 60:02d}.000Z",
                completedAt=f"2026-08-04T10:01:{(observations - i) % 60:02d}.000Z",
                ok=True,
            )
        )
        lines.append(
            line(
                runId=run_id,
                type="tool_observation",
                observationId=f"{run_id}-obs-{i}",
                toolCallId=call,
                source=f"source-{i}",
                revisionDomain="payments",
                sourceRevision=40 + i % 3,
                status=["refunded", "chargeback", "paid"][i % 3],
                errors=[],
            )
        )
    lines.append(line(runId=run_id, type="agent_action", name="issue_store_credit"))
    return lines


def ingest_lines(directory: Path, lines: list[str], name: str = "trace.jsonl"):
    path = directory / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return ingest_file(path, channel=IngestBatch.Channel.CLI)


def review_desk_trace() -> list[str]:
    """Three runs a reviewer meets every day: revisions from two domains with an error on
    another field (unsafe: the agent acted), an echoed entity that is not the one asked
    for, and a partial result the agent handed to review. Markup in a value must stay text."""
    lines = [
        line(
            runId="run-stale",
            type="run_started",
            agent="refund-agent",
            subject={"orderId": "order-204"},
        ),
        line(
            runId="run-stale",
            type="tool_call",
            toolCallId="call-refund",
            tool="get_refund",
            arguments={"orderId": "order-204"},
            startedAt="2026-08-04T10:00:00Z",
            completedAt="2026-08-04T10:00:02Z",
            ok=True,
        ),
        line(
            runId="run-stale",
            type="tool_call",
            toolCallId="call-search",
            tool="search_orders",
            arguments={"orderId": "order-204", "q": "status"},
            startedAt="2026-08-04T10:00:00Z",
            completedAt="2026-08-04T10:00:01Z",
            ok=True,
        ),
        line(
            runId="run-stale",
            type="tool_observation",
            observationId="obs-refund",
            toolCallId="call-refund",
            source="refund-service",
            revisionDomain="payments",
            sourceRevision=42,
            status="Refunded",
            errors=[],
            completedAt="2026-08-04T10:00:02Z",
        ),
        line(
            runId="run-stale",
            type="tool_observation",
            observationId="obs-search",
            toolCallId="call-search",
            source="search-index",
            revisionDomain="search",
            sourceRevision=105,
            status="paid",
            note="<script>alert(1)</script>",
            errors=[{"code": "STALE_READ", "message": "index 3 minutes behind", "field": "eta"}],
            completedAt="2026-08-04T10:00:01Z",
        ),
        line(
            runId="run-stale",
            type="observation_resolution",
            kind="resolved",
            status="refunded",
            confidence=0.9,
            reasoning="The refund service is newer.",
        ),
        line(
            runId="run-stale",
            type="agent_action",
            name="issue_store_credit",
            arguments={"amount": 150},
        ),
        line(
            runId="run-mismatch",
            type="tool_call",
            toolCallId="call-a",
            tool="get_order",
            arguments={"orderId": "order-204"},
        ),
        line(
            runId="run-mismatch",
            type="tool_call",
            toolCallId="call-b",
            tool="get_ledger",
            arguments={"orderId": "order-204"},
        ),
        line(
            runId="run-mismatch",
            type="tool_observation",
            observationId="obs-a",
            toolCallId="call-a",
            source="order-service",
            entity="order-204",
            status="shipped",
        ),
        line(
            runId="run-mismatch",
            type="tool_observation",
            observationId="obs-b",
            toolCallId="call-b",
            source="order-ledger",
            entity="order-205",
            status="shipped",
        ),
        line(runId="run-mismatch", type="agent_action", name="send_status_message"),
        line(
            runId="run-partial",
            type="tool_call",
            toolCallId="call-p1",
            tool="get_refund",
            arguments={"orderId": "order-9"},
        ),
        line(
            runId="run-partial",
            type="tool_call",
            toolCallId="call-p2",
            tool="get_ledger",
            arguments={"orderId": "order-9"},
        ),
        line(
            runId="run-partial",
            type="tool_observation",
            observationId="obs-p1",
            toolCallId="call-p1",
            source="refund-service",
            status="refunded",
        ),
        line(
            runId="run-partial",
            type="tool_observation",
            observationId="obs-p2",
            toolCallId="call-p2",
            source="order-ledger",
            status="refunded",
            errors=["PAYMENT_EVENTS_UNAVAILABLE"],
            fallback=True,
        ),
        line(runId="run-partial", type="agent_action", name="request_review"),
    ]
    return lines


def observed_run(
    run_id: str, observations: list[tuple[str, str, int, dict]], action: str = "issue_refund"
) -> list[str]:
    """A run: each observation (source, revision domain, revision, its fields) answers a
    call of its own, then the agent acts."""
    lines = [
        line(runId=run_id, type="run_started", agent="refund-agent", subject={"orderId": run_id})
    ]
    for index, (source, domain, revision, values) in enumerate(observations):
        call = f"{run_id}-c{index}"
        lines.append(
            line(
                runId=run_id,
                type="tool_call",
                toolCallId=call,
                tool="lookup",
                arguments={"orderId": run_id},
            )
        )
        lines.append(
            line(
                runId=run_id,
                type="tool_observation",
                observationId=f"{run_id}-o{index}",
                toolCallId=call,
                source=source,
                revisionDomain=domain,
                sourceRevision=revision,
                **values,
            )
        )
    lines.append(line(runId=run_id, type="agent_action", name=action))
    return lines


def owned_run(run_id: str, owner: str, other: str, *, agree: bool = False) -> list[str]:
    """Two sources of `status` in two revision domains, then an action on it: a conflict
    that a rule making `owner` own `status` settles (unless they agree)."""
    return observed_run(
        run_id,
        [
            (owner, "payments", 40, {"status": "refunded"}),
            (other, "search", 41, {"status": "refunded" if agree else "paid"}),
        ],
    )


def desk_lines(runs: int, *, prefix: str = "run") -> list[str]:
    """`runs` runs: two in three between order-ledger and search-index, the others between
    refund-service and search-index, every seventh in agreement (no ticket)."""
    lines = []
    for number in range(runs):
        owner = "order-ledger" if number % 3 else "refund-service"
        lines.extend(owned_run(f"{prefix}-{number}", owner, "search-index", agree=number % 7 == 0))
    return lines


def chunk_store_dies_at(monkeypatch, number: int):
    """The `number`-th chunk stored from now on raises, as a worker lost mid-batch would;
    returns what puts the real store back."""
    from reviewapp.ingest import pipeline

    real_store, calls = pipeline._store_chunk, {"n": 0}

    def dying_store(batch, lines, in_flight):
        calls["n"] += 1
        if calls["n"] == number:
            raise RuntimeError("worker lost")
        return real_store(batch, lines, in_flight)

    monkeypatch.setattr(pipeline, "_store_chunk", dying_store)
    return lambda: monkeypatch.setattr(pipeline, "_store_chunk", real_store)
