"""`benchmarks/ingest.py --redaction`: the same trace ingested with three redaction rules
on (the generated runs' order ids by key, and the email and card patterns over every
text: four lines in ten are rewritten) against ingest without them, each into a fresh
database, in alternating rounds. `redaction_ratio` is the median wall time with the rules over the
median without (goal: at most 1.2); `redaction_cpu_ratio` the same of our processes'
processor time, steadier on a shared machine; `redaction_decode_ratio` that of the
decode stage, where the rules are applied."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import psycopg

GOAL = 1.2
RULES = {
    "rules": [
        {"name": "order ids", "keys": ["orderId"], "canonical": "trim"},
        {"name": "emails", "pattern": "email", "canonical": "casefold", "keep_raw": True},
        {"name": "cards", "pattern": "card", "canonical": "digits"},
    ]
}


def rules_on(bench_url: str) -> None:
    """The rules in force in the bench database: written as the first version directly
    (an empty database has no runs for the check before a version to judge)."""
    with psycopg.connect(bench_url) as conn:
        conn.execute(
            "INSERT INTO reviewapp_redactionruleset (number, document, reason, created_at) "
            "VALUES (1, %s, 'benchmark', now())",
            [json.dumps(RULES)],
        )


def redacted_lines(bench_url: str) -> int:
    with psycopg.connect(bench_url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM reviewapp_traceline WHERE position('\"tok_' in convert_from(raw, 'UTF8')) > 0"
        ).fetchone()
        return int(row[0]) if row else 0


def redaction_figures(
    url: str,
    trace: Path,
    folder: Path,
    *,
    plain: Any,
    rounds: int,
    bench_database: Callable[[str], AbstractContextManager[str]],
    timed_ingest: Callable[..., Any],
) -> dict[str, Any]:
    """`rounds` ingests with the rules, each after one without (the first of those is
    `plain`, measured already); the figures for the final JSON line."""
    without, with_rules, rewritten = [plain], [], 0
    for round_number in range(rounds):
        if round_number:
            with bench_database(url) as bench_url:
                without.append(
                    timed_ingest(bench_url, trace, folder / f"plain-{round_number}", parts=1)
                )
        with bench_database(url) as bench_url:
            rules_on(bench_url)
            run = timed_ingest(bench_url, trace, folder / f"redacted-{round_number}", parts=1)
            rewritten = redacted_lines(bench_url)
        assert run.summary == plain.summary, (run.summary, plain.summary)
        with_rules.append(run)

    def ratio(measure: Callable[[Any], float]) -> float:
        return statistics.median(map(measure, with_rules)) / statistics.median(
            map(measure, without)
        )

    wall = ratio(lambda run: run.seconds)
    cpu = ratio(lambda run: run.cpu_seconds)
    decode = ratio(lambda run: run.stages["decode"])
    print(
        f"redaction (3 rules, {rewritten:,} lines rewritten), median of {rounds} rounds: "
        f"x{wall:.3f} wall time, x{cpu:.3f} our processor time, x{decode:.3f} decode stage"
    )
    return {
        "redaction_seconds": [round(run.seconds, 2) for run in with_rules],
        "redaction_plain_seconds": [round(run.seconds, 2) for run in without],
        "redaction_cpu_seconds": [round(run.cpu_seconds, 2) for run in with_rules],
        "redaction_plain_cpu_seconds": [round(run.cpu_seconds, 2) for run in without],
        "redaction_lines_rewritten": rewritten,
        "redaction_ratio": round(wall, 3),
        "redaction_cpu_ratio": round(cpu, 3),
        "redaction_decode_ratio": round(decode, 3),
        "redaction_goal": GOAL,
        "redaction_met": wall <= GOAL,
    }
