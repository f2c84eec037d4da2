"""Fault scenarios against a live stack of its own, with their figures.

    python benchmarks/faults.py [--runs 6000] [--tries 3] [--only NAME ...]

Starts a PostgreSQL of its own (a new cluster in /tmp, with the owner and app roles,
migrated), Redis with append-only files, gunicorn with 2 workers, a Celery worker with a
pool of 2 and beat (tests/reliability/stack.py), all on the shipped defaults (reconciler
period, stall time, leases: the settings .env.example documents), and runs each scenario of
tests/reliability/scenarios.py on a trace of 6 lines a run: a pool process SIGKILLed, the
whole worker SIGKILLed and restarted, PostgreSQL SIGKILLed and started again, Redis
SIGKILLed and restarted, Redis frozen (SIGSTOP) for 10 s, and a poison batch (its worker
dies each time), `--tries` times each. Prints a table: tries, failures (tries that lost or
duplicated a line, missed the goal or did not finish), lines lost and duplicated over all
tries, and the slowest recovery (seconds from the fault's end until every line was stored
and a batch sent after it too); then one JSON line with every figure and the goal (0 lost,
0 duplicated, recovery within 60 s). Needs PostgreSQL's server binaries
and redis-server (scripts/test installs them); run as root or as a user who may run them.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.reliability import scenarios  # noqa: E402
from tests.reliability.postgres import Postgres  # noqa: E402
from tests.reliability.stack import Stack  # noqa: E402

GOAL_SECONDS = 60
# The stack's own database is migrated when it is made: no migration runs in the stack.
OVERRIDES = {"MIGRATE_DATABASE_URL": ""}
NAMES = ["pool", "worker", "postgres", "redis-kill", "redis-stop", "poison"]


def token_on(stack: Stack) -> str:
    script = (
        "from reviewapp.accounts.roles import account_role_set\n"
        "from reviewapp.ingest.tokens import create_token\n"
        "user = account_role_set('faults', 'reviewer')\n"
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


def one_try(name: str, stack: Stack, token: str, postgres: Postgres, prefix: str):
    if name == "pool":
        return scenarios.pool_process_killed(stack, token, prefix=prefix)
    if name == "worker":
        return scenarios.worker_killed(stack, token, prefix=prefix)
    if name == "postgres":
        return scenarios.postgres_killed(stack, token, postgres, prefix=prefix)
    if name == "redis-kill":
        return scenarios.redis_killed(stack, token, prefix=prefix)
    if name == "redis-stop":
        return scenarios.redis_frozen(stack, token, prefix=prefix)[0]
    return scenarios.poison(stack, token, max_attempts=3)


@dataclass
class Row:
    """A scenario's tries: how many, how many failed, and their figures."""

    name: str
    outcomes: list[scenarios.Outcome] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def failures(self) -> int:
        return len(self.errors) + sum(1 for o in self.outcomes if not met(o))

    def as_dict(self) -> dict:
        return {
            "scenario": self.name,
            "tries": len(self.outcomes) + len(self.errors),
            "failures": self.failures,
            "lost": sum(o.lost for o in self.outcomes),
            "duplicated": sum(o.duplicated for o in self.outcomes),
            "recovery_seconds_max": max((o.recovery_seconds for o in self.outcomes), default=None),
            "errors": self.errors,
            "outcomes": [o.as_dict() for o in self.outcomes],
        }


def met(o: scenarios.Outcome) -> bool:
    if o.scenario == "a poison batch":
        return (o.state, o.attempts) == ("failed", 3) and o.recovery_seconds <= GOAL_SECONDS * 3
    return (o.lost, o.duplicated, o.state) == (0, 0, "done") and o.recovery_seconds <= GOAL_SECONDS


def run(names: list[str], runs: int, tries: int) -> list[Row]:
    scenarios.RUNS = runs
    postgres = Postgres().create()
    rows = []
    work = Path(tempfile.mkdtemp(prefix="cc-faults."))
    try:
        for name in names:
            entry = (
                ["-m", "tests.reliability.poison_worker"] if name == "poison" else ["-m", "celery"]
            )
            stack = Stack(
                database_url=postgres.app_url,
                workdir=work / name,
                overrides=OVERRIDES,
                worker_entry=entry,
            )
            stack.start()
            row = Row(name)
            try:
                token = token_on(stack)
                for attempt in range(tries):
                    print(f"… {name} {attempt + 1}/{tries}", file=sys.stderr, flush=True)
                    try:
                        row.outcomes.append(
                            one_try(name, stack, token, postgres, f"{name}{attempt}")
                        )
                    except AssertionError as exc:  # it did not finish in time
                        row.errors.append(str(exc))
            finally:
                stack.stop()
            rows.append(row)
    finally:
        postgres.remove()
    return rows


def table(rows: list[Row]) -> str:
    lines = [
        "| scenario | tries | failures | lost | duplicated | recovery, slowest (s) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        figures = row.as_dict()
        scenario = row.outcomes[0].scenario if row.outcomes else row.name
        slowest = figures["recovery_seconds_max"]
        lines.append(
            f"| {scenario} | {figures['tries']} | {figures['failures']} | {figures['lost']} | "
            f"{figures['duplicated']} | {'-' if slowest is None else f'{slowest:.1f}'} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=scenarios.RUNS, help="runs of 6 lines")
    parser.add_argument("--tries", type=int, default=3, help="tries of each scenario")
    parser.add_argument("--only", nargs="*", choices=NAMES, default=NAMES)
    args = parser.parse_args()
    rows = run(args.only, args.runs, args.tries)
    print(table(rows))
    ok = all(row.failures == 0 for row in rows)
    print(
        json.dumps(
            {
                "scenarios": [row.as_dict() for row in rows],
                "goal": {"lost": 0, "duplicated": 0, "recovery_seconds": GOAL_SECONDS},
                "met": ok,
            }
        )
    )
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
