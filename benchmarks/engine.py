"""Engine throughput: parse + judge against msgspec decoding alone, in one process.

    python benchmarks/engine.py --n 100000

The limit is msgspec.json.decode of each line into plain Python objects: no engine can
read a line faster than its decoder does. Ours is the engine's whole work on the same
lines: decode strictly, check into records (parse_line), judge every run (judge_runs).
Both keep what they built until they are done, as a program reading a file would. The
goal is a quarter of the limit's throughput. The last line printed is one JSON object
with the figures, `ratio` (ours / limit, as throughputs) and `goal`.

The garbage collector weighs on both, and more on the limit the more decoded objects it
keeps alive: the ratio grows with --n. The same rounds with the collector off give
`ratio_gc_off`, the ratio of the work itself.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import sys
import time
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from reviewapp.engine import judge_runs, load_policy, parse_line  # noqa: E402

GOAL = 0.25
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


def timed(work, *, collector: bool = True) -> float:
    """Seconds for one call of `work`, starting from a collected heap; what it built is
    dropped afterwards, so that one measurement's garbage never weighs on the next."""
    gc.collect()
    if not collector:
        gc.disable()
    try:
        started = time.perf_counter()
        result = work()
        seconds = time.perf_counter() - started
    finally:
        gc.enable()
    del result
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="number of runs to generate")
    parser.add_argument("--seed", type=int, default=20260804)
    parser.add_argument(
        "--repeats", type=int, default=3, help="rounds; each figure is its best round"
    )
    args = parser.parse_args()

    lines = generate_lines(args.n, args.seed)
    decode = msgspec.json.decode

    def limit() -> list:
        return [decode(line) for line in lines]

    def parse_only() -> list:
        return [parse_line(line) for line in lines]

    def parse_and_judge() -> list:
        return judge_runs([parse_line(line) for line in lines], POLICY)

    # Rounds alternate the measurements, so that a slower stretch of the machine weighs on
    # all of them; each figure is its best round.
    works = {"limit": limit, "parse": parse_only, "ours": parse_and_judge}
    seconds: dict[str, list[float]] = {name: [] for name in [*works, "limit_off", "ours_off"]}
    for _ in range(max(1, args.repeats)):
        for name, work in works.items():
            seconds[name].append(timed(work))
        seconds["limit_off"].append(timed(limit, collector=False))
        seconds["ours_off"].append(timed(parse_and_judge, collector=False))
    best = {name: min(values) for name, values in seconds.items()}
    rate = {name: len(lines) / value for name, value in best.items()}
    judgements = parse_and_judge()
    verdicts = sum(len(j.verdicts) for j in judgements)
    findings = sum(len(j.findings) for j in judgements)
    ratio = rate["ours"] / rate["limit"]

    print(f"{args.n:,} runs, {len(lines):,} lines, {verdicts:,} verdicts, {findings:,} findings")
    print(f"limit, msgspec decode:  {rate['limit']:12,.0f} lines/s")
    print(f"parse (decode + check): {rate['parse']:12,.0f} lines/s")
    print(f"ours, parse + judge:    {rate['ours']:12,.0f} lines/s")
    print(
        f"collector off: limit {rate['limit_off']:,.0f} lines/s, ours {rate['ours_off']:,.0f}"
        f" lines/s, ratio {rate['ours_off'] / rate['limit_off']:.3f}"
    )
    print(
        json.dumps(
            {
                "benchmark": "engine",
                "n": args.n,
                "lines": len(lines),
                "repeats": max(1, args.repeats),
                "limit_lines_per_s": round(rate["limit"]),
                "parse_lines_per_s": round(rate["parse"]),
                "ours_lines_per_s": round(rate["ours"]),
                "ours_runs_per_s": round(args.n / best["ours"]),
                "parse_ratio": round(rate["parse"] / rate["limit"], 3),
                "limit_gc_off_lines_per_s": round(rate["limit_off"]),
                "ours_gc_off_lines_per_s": round(rate["ours_off"]),
                "ratio_gc_off": round(rate["ours_off"] / rate["limit_off"], 3),
                "ratio": round(ratio, 3),
                "goal": GOAL,
                "met": ratio >= GOAL,
            }
        )
    )


if __name__ == "__main__":
    main()
