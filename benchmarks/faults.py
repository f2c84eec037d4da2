"""Fault scenarios against a live stack of its own, with their figures.

    python benchmarks/faults.py [--runs 6000] [--only NAME ...]

Starts a PostgreSQL of its own (a new cluster in /tmp, with the owner and app roles,
migrated), Redis, gunicorn, a Celery worker and beat (tests/reliability/stack.py, the
reconciler fast: every 2 s, a silent batch after 6 s), and runs each scenario of
tests/reliability/scenarios.py on a trace of 6 lines a run: a pool process SIGKILLed, the
whole worker SIGKILLed and restarted, PostgreSQL SIGKILLed and started again, Redis
SIGKILLed and restarted, Redis frozen (SIGSTOP) for 10 s, and a poison batch (its worker
dies each time). Prints a table: lines expected, stored, duplicated, lost, and the seconds
from the fault's end until every line was stored; then one JSON line with every figure and
the goal (0 lost, 0 duplicated, recovery within 60 s). Needs PostgreSQL's server binaries
and redis-server (scripts/test installs them); run as root or as a user who may run them.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.reliability import scenarios  # noqa: E402
from tests.reliability.postgres import Postgres  # noqa: E402
from tests.reliability.stack import Stack  # noqa: E402

GOAL_SECONDS = 60
FAST = {
    "RECONCILE_SECONDS": "2",
    "INGEST_STALL_SECONDS": "6",
    "INGEST_REQUEUE_SECONDS": "6",
    "INGEST_RETRY_SECONDS": "2",
    "MIGRATE_DATABASE_URL": "",
}
NAMES = ["pool", "worker", "postgres", "redis-kill", "redis-stop", "poison"]


def token_on(stack: Stack) -> str:
    script = (
        "from django.contrib.auth.models import Group, User\n"
        "from reviewapp.ingest.tokens import create_token\n"
        "user, _ = User.objects.get_or_create(username='faults')\n"
        "user.groups.add(Group.objects.get(name='reviewer'))\n"
        "print(create_token(user=user, name='faults')[1])\n"
    )
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-v", "0", "-c", script],
        cwd=ROOT,
        env={**stack.env, "DJANGO_SETTINGS_MODULE": "reviewapp.settings"},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return done.stdout.strip().splitlines()[-1]


def run(names: list[str], runs: int) -> list[scenarios.Outcome]:
    scenarios.RUNS = runs
    postgres = Postgres().create()
    results = []
    work = Path(tempfile.mkdtemp(prefix="cc-faults."))
    try:
        for name in names:
            entry = (
                ["-m", "tests.reliability.poison_worker"] if name == "poison" else ["-m", "celery"]
            )
            stack = Stack(
                database_url=postgres.app_url,
                workdir=work / name,
                overrides=FAST,
                worker_entry=entry,
            )
            stack.start()
            try:
                token = token_on(stack)
                print(f"… {name}", file=sys.stderr, flush=True)
                if name == "pool":
                    results.append(scenarios.pool_process_killed(stack, token, prefix=name))
                elif name == "worker":
                    results.append(scenarios.worker_killed(stack, token, prefix=name))
                elif name == "postgres":
                    results.append(scenarios.postgres_killed(stack, token, postgres, prefix=name))
                elif name == "redis-kill":
                    results.append(scenarios.redis_killed(stack, token, prefix=name))
                elif name == "redis-stop":
                    results.append(scenarios.redis_frozen(stack, token, prefix=name)[0])
                elif name == "poison":
                    results.append(scenarios.poison(stack, token, max_attempts=3))
            finally:
                stack.stop()
    finally:
        postgres.remove()
    return results


def table(results: list[scenarios.Outcome]) -> str:
    rows = [
        "| scenario | lines expected | stored | duplicated | lost | recovery (s) | batch |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        batch = f"{r.state} after {r.attempts} tries" if r.scenario == "a poison batch" else r.state
        rows.append(
            f"| {r.scenario} | {r.expected:,} | {r.stored:,} | {r.duplicated} | {r.lost} | "
            f"{r.recovery_seconds:.1f} | {batch} |"
        )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=scenarios.RUNS, help="runs of 6 lines")
    parser.add_argument("--only", nargs="*", choices=NAMES, default=NAMES)
    args = parser.parse_args()
    results = run(args.only, args.runs)
    print(table(results))
    met = all(
        r.lost == 0 and r.duplicated == 0 and r.recovery_seconds <= GOAL_SECONDS for r in results
    )
    print(
        json.dumps(
            {
                "scenarios": [r.as_dict() for r in results],
                "goal": {"lost": 0, "duplicated": 0, "recovery_seconds": GOAL_SECONDS},
                "met": met,
            }
        )
    )
    sys.exit(0 if met else 1)


if __name__ == "__main__":
    main()
