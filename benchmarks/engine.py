"""Engine throughput: parse only versus parse + judge, in one process, on seeded runs.

    python benchmarks/engine.py --n 100000

The limit is reading (decode + check into records); judging must keep at least 40% of
that throughput. The last line printed is one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from reviewapp.engine import judge_runs, load_policy, parse_line  # noqa: E402

GOAL = 0.40
POLICY = load_policy(
    {
        "fields": {
            "status": {
                "normalize": {"kind": "enum", "caseInsensitive": True},
                "harmlessErrors": ["AVATAR"],
            },
            "amount": {"normalize": {"kind": "money"}},
            "sellableQty": {},
        },
        "rules": [
            {"id": "R1", "kind": "higher-source-revision", "field": "*"},
            {
                "id": "R2",
                "kind": "authoritative-source",
                "field": "status",
                "source": "refund-service",
                "unlessValues": ["chargeback"],
            },
            {"id": "R3", "kind": "require-review", "field": "amount", "actions": ["issue_refund"]},
        ],
        "trajectory": {
            "allowedTools": [
                "get_refund",
                "get_ledger",
                "search_orders",
                "check_eligibility",
                "issue_refund",
            ],
            "mutatingTools": ["issue_refund"],
            "scopeArgument": "orderId",
            "prerequisites": [{"tool": "issue_refund", "requires": "check_eligibility"}],
            "maxMutationsPerOp": 1,
        },
    }
)
SOURCES = (
    ("refund-service", "get_refund", "payments"),
    ("order-ledger", "get_ledger", "payments"),
    ("search-index", "search_orders", "search"),
)


def generate_lines(runs: int, seed: int) -> list[bytes]:
    """Seeded native trace lines: each run has calls, observations, a resolution, an action."""
    rng = random.Random(seed)
    lines = []
    for number in range(runs):
        run_id, order = f"run-{number}", f"order-{rng.randrange(10**6)}"
        records = [{"type": "run_started", "agent": "refund-agent", "subject": {"orderId": order}}]
        for index, (source, tool, domain) in enumerate(rng.sample(SOURCES, rng.randint(2, 3))):
            call_id = f"{run_id}-c{index}"
            records.append(
                {
                    "type": "tool_call",
                    "toolCallId": call_id,
                    "tool": tool,
                    "arguments": {"orderId": order},
                    "ok": True,
                    "startedAt": "2026-08-04T10:00:00Z",
                }
            )
            observation = {
                "type": "tool_observation",
                "observationId": f"{run_id}-o{index}",
                "toolCallId": call_id,
                "source": source,
                "revisionDomain": domain,
                "sourceRevision": rng.randint(40, 44),
                "status": rng.choice(["refunded", "Refunded", "paid", "chargeback"]),
                "amount": {
                    "amount": rng.choice(["12.50", "12.5", "13.00"]),
                    "currency": "USD",
                    "unit": "major",
                },
                "errors": [] if rng.random() > 0.05 else ["PAYMENT_EVENTS_UNAVAILABLE"],
                "completedAt": "2026-08-04T10:00:01Z",
            }
            records.append(observation)
        records.append(
            {
                "type": "observation_resolution",
                "kind": "resolved",
                "status": "refunded",
                "reasoning": "owner wins",
            }
        )
        records.append(
            {
                "type": "agent_action",
                "name": rng.choice(["send_status_message", "request_review", "issue_refund"]),
            }
        )
        lines.extend(
            json.dumps({"runId": run_id, **r}, separators=(",", ":")).encode() for r in records
        )
    return lines


def best_of(repeats: int, work) -> float:
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        work()
        timings.append(time.perf_counter() - started)
    return min(timings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="number of runs to generate")
    parser.add_argument("--seed", type=int, default=20260804)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()

    lines = generate_lines(args.n, args.seed)

    def parse_only() -> None:
        [parse_line(line) for line in lines]

    def parse_and_judge() -> None:
        judge_runs([parse_line(line) for line in lines], POLICY)

    parse_seconds = best_of(args.repeats, parse_only)
    judge_seconds = best_of(args.repeats, parse_and_judge)
    parse_rate, judge_rate = args.n / parse_seconds, args.n / judge_seconds
    verdicts = sum(
        len(j.verdicts) for j in judge_runs([parse_line(line) for line in lines], POLICY)
    )
    print(f"{args.n:,} runs, {len(lines):,} lines, {verdicts:,} verdicts")
    print(
        f"parse only:     {parse_rate:12,.0f} runs/s  ({len(lines) / parse_seconds:,.0f} lines/s)"
    )
    print(f"parse + judge:  {judge_rate:12,.0f} runs/s")
    ratio = judge_rate / parse_rate
    print(
        json.dumps(
            {
                "benchmark": "engine",
                "n": args.n,
                "lines": len(lines),
                "parse_runs_per_s": round(parse_rate),
                "parse_judge_runs_per_s": round(judge_rate),
                "ratio": round(ratio, 3),
                "goal": GOAL,
                "met": ratio >= GOAL,
            }
        )
    )


if __name__ == "__main__":
    main()
