"""Shadow mode's cost, and the gate's answer time, each against its limit in the same run.

    DATABASE_URL=postgres://... python benchmarks/shadow.py --n 100000

In a throwaway database (a test database beside the one DATABASE_URL names, dropped at
the end):

1. Ingest with one candidate in shadow against ingest without: a seeded native trace of N
   lines is ingested into the emptied database with nothing in shadow (the limit), then
   into the emptied database again with a draft in shadow, after which the shadow worker's
   own function judges its runs under the draft (shadow.judging.shadow_judge_batch, what
   the Celery task runs, here in-process so that the work is timed alone); in turn,
   --rounds times, the best of each kept. `ingest_ratio` = (ingest + shadow) / ingest without (goal: at
   most 1.5); `keeps_up`: the shadow worker judges a delivery faster than it was ingested,
   so a worker beside the ingest never falls behind.
2. POST /api/v1/check for a 20-record run against a trivial authenticated API call
   (GET /api/v1/batches/<id>, the same bearer token), in turn, --checks times each,
   in-process through Django's test client: p50 and p99 server time. `check_ratio` = p99
   of the check / p99 of the trivial call (goal: at most 3).

The last line is one JSON object with the figures, `ratio` and `goal` (each for both)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "reviewapp.settings")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import setup_databases, teardown_databases  # noqa: E402

from benchmarks.ingest import write_trace  # noqa: E402

INGEST_GOAL, CHECK_GOAL = 1.5, 3.0
CANDIDATE = {
    "name": "bench: owners decided",
    "safeActions": ["request_review", "stop"],
    "fields": {
        "status": {"normalize": {"kind": "enum", "caseInsensitive": True}},
        "amount": {"normalize": {"kind": "money"}},
    },
    "rules": [
        {"id": "R1", "kind": "higher-source-revision", "field": "*"},
        {"id": "R2", "kind": "authoritative-source", "field": "status", "source": "order-ledger"},
        {"id": "R3", "kind": "require-review", "field": "amount", "actions": ["issue_refund"]},
    ],
    "trajectory": {
        "allowedTools": ["get_refund", "get_ledger", "search_orders", "check_eligibility"],
        "mutatingTools": ["issue_refund"],
        "scopeArgument": "orderId",
    },
}


def trace(path: Path, lines: int, seed: int, prefix: str) -> int:
    written = write_trace(path, lines, seed)
    text = path.read_text().replace('"runId":"b', f'"runId":"{prefix}')
    path.write_text(text)
    return written


def emptied() -> tuple:
    """The database as new (its append-only guards let go for it), and two users."""
    import pgtrigger
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    with pgtrigger.ignore():
        call_command("flush", interactive=False, verbosity=0)
    users = get_user_model()
    return users.objects.create_user("bench-r"), users.objects.create_user("bench-a")


def ingest_in_shadow(n: int, seed: int, rounds: int) -> dict:
    """The same file into the same empty database, without and with a candidate in shadow,
    in turn, `rounds` times; the best time of each (the machine's load only adds)."""
    from reviewapp.ingest.pipeline import ingest_file
    from reviewapp.policy.candidates import candidate_of_draft
    from reviewapp.policy.versions import policy_document_import, proposal_decide
    from reviewapp.shadow.designations import shadow_start
    from reviewapp.shadow.judging import shadow_judge_batch

    limits, ingests, shadows = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.jsonl"
        lines = trace(path, n, seed, "A")
        for _ in range(rounds):
            emptied()
            started = time.perf_counter()
            ingest_file(path, channel="cli")
            limits.append(time.perf_counter() - started)

            reviewer, approver = emptied()
            proposal = policy_document_import(user=reviewer, document=CANDIDATE, rationale="b")
            proposal_decide(proposal=proposal, user=approver, approve=True, reason="bench")
            shadow_start(candidate_of_draft(user=approver), user=approver, reason="bench")
            started = time.perf_counter()
            summary = ingest_file(path, channel="cli")
            ingests.append(time.perf_counter() - started)
            started = time.perf_counter()
            done = shadow_judge_batch(max(summary.batch_pks))
            shadows.append(time.perf_counter() - started)
            assert done is not None and done.judgements == summary.runs, (done, summary)
    limit, ours, shadow = min(limits), min(ingests), min(shadows)
    return {
        "lines": lines,
        "runs": summary.runs,
        "rounds": rounds,
        "ingest_without_s": round(limit, 2),
        "ingest_with_s": round(ours, 2),
        "shadow_s": round(shadow, 2),
        "ingest_lines_per_s": round(lines / ours),
        "shadow_lines_per_s": round(lines / shadow),
        "keeps_up": shadow <= ours,
        "ingest_ratio": round((ours + shadow) / limit, 3),
    }


def twenty_records(number: int) -> dict:
    """A run of 20 records (run_started, 9 calls each with its observation, the agent's
    resolution) before an action on a conflict: the gate has something to find."""
    run_id = f"check-{number}"
    records: list[dict] = [{"runId": run_id, "type": "run_started", "subject": {"orderId": "o1"}}]
    for i in range(9):
        records.append(
            {
                "runId": run_id,
                "type": "tool_call",
                "toolCallId": f"c{i}",
                "tool": "get_refund",
                "arguments": {"orderId": "o1"},
            }
        )
        records.append(
            {
                "runId": run_id,
                "type": "tool_observation",
                "observationId": f"o{i}",
                "toolCallId": f"c{i}",
                "source": f"source-{i % 3}",
                "status": ["refunded", "paid", "chargeback"][i % 3],
                "amount": {"amount": "12.50", "currency": "USD", "unit": "major"},
            }
        )
    records.append({"runId": run_id, "type": "observation_resolution", "kind": "conflict"})
    return {"runId": run_id, "records": records, "action": {"name": "issue_store_credit"}}


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def check_times(rounds: int) -> dict:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    from reviewapp.accounts.roles import REVIEWER
    from reviewapp.ingest.tokens import create_token
    from reviewapp.models import IngestBatch

    user = get_user_model().objects.create_user("bench-agent")
    user.groups.add(Group.objects.get(name=REVIEWER))
    _, token = create_token(user=user, name="bench")
    batch = IngestBatch.objects.order_by("pk").first()
    IngestBatch.objects.filter(pk=batch.pk).update(created_by=user)
    headers = {"Authorization": f"Bearer {token}"}
    client = Client()
    trivial_url = f"/api/v1/batches/{batch.public_id}"
    bodies = [json.dumps(twenty_records(i)).encode() for i in range(rounds)]

    def ask(body: bytes) -> float:
        started = time.perf_counter()
        response = client.post(
            "/api/v1/check", data=body, content_type="application/json", headers=headers
        )
        elapsed = time.perf_counter() - started
        if response.status_code != 200 or response.json()["decision"] != "would-block":
            raise SystemExit(f"the check answered {response.status_code}: {response.content!r}")
        return elapsed * 1000

    def trivial() -> float:
        started = time.perf_counter()
        response = client.get(trivial_url, headers=headers)
        elapsed = time.perf_counter() - started
        if response.status_code != 200:
            raise SystemExit(f"the trivial call answered {response.status_code}")
        return elapsed * 1000

    for body in bodies[:20]:  # warm up: connections open, policy loaded, code paths hot
        ask(body)
        trivial()
    checks, trivials = [], []
    for body in bodies:  # in turn: both under the same load
        checks.append(ask(body))
        trivials.append(trivial())
    figures = {
        "check_p50_ms": round(percentile(checks, 0.5), 3),
        "check_p99_ms": round(percentile(checks, 0.99), 3),
        "trivial_p50_ms": round(percentile(trivials, 0.5), 3),
        "trivial_p99_ms": round(percentile(trivials, 0.99), 3),
    }
    figures["check_ratio"] = round(figures["check_p99_ms"] / figures["trivial_p99_ms"], 3)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="lines in each trace")
    parser.add_argument("--checks", type=int, default=2000, help="checks (and trivial calls)")
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument("--rounds", type=int, default=2, help="ingests of each kind")
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL"):
        sys.exit("benchmarks/shadow.py needs DATABASE_URL pointing at a PostgreSQL server")
    settings.DATABASES["default"].setdefault("TEST", {})["NAME"] = (
        f"crosscheck_shadow_bench_{os.getpid()}"
    )
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    created = setup_databases(verbosity=0, interactive=False)
    try:
        ingest = ingest_in_shadow(args.n, args.seed, args.rounds)
        checks = check_times(args.checks)
    finally:
        teardown_databases(created, verbosity=0)

    print(
        f"{ingest['lines']:,} lines, {ingest['runs']:,} runs: ingest without shadow "
        f"{ingest['ingest_without_s']} s; with one candidate in shadow {ingest['ingest_with_s']} s "
        f"+ shadow worker {ingest['shadow_s']} s ({ingest['shadow_lines_per_s']:,} lines/s)"
    )
    print(
        f"check (20 records): p50 {checks['check_p50_ms']} ms, p99 {checks['check_p99_ms']} ms;"
        f" trivial API call: p50 {checks['trivial_p50_ms']} ms, p99 {checks['trivial_p99_ms']} ms"
    )
    ratio = {"ingest": ingest["ingest_ratio"], "check": checks["check_ratio"]}
    goal = {"ingest": INGEST_GOAL, "check": CHECK_GOAL}
    print(
        json.dumps(
            {
                "benchmark": "shadow",
                "n": args.n,
                "checks": args.checks,
                **ingest,
                **checks,
                "ratio": ratio,
                "goal": goal,
                "met": ingest["keeps_up"] and all(ratio[k] <= goal[k] for k in goal),
            }
        )
    )


if __name__ == "__main__":
    main()
