"""Replay throughput on Celery workers against the in-process engine on the same runs.

    DATABASE_URL=postgres://... REDIS_URL=redis://... python benchmarks/replay.py --n 100000

Generates N seeded runs (benchmarks/engine.py's generator), ingests them into a throwaway
database beside the one DATABASE_URL names (so each is judged under the built-in default:
the recorded verdicts), freezes them all as one fixture set, then, in the same run:

- the limit: the in-process engine on the same runs, read as a replay reads them
  (judging.core: stored_runs pinned at each run's record, then judge), chunk by chunk,
  storing nothing: no replay can judge faster than reading and judging its runs;
- ours: a replay job of the fixture set under a candidate policy, from the moment it is
  sent until its last item is done, with 1 and then 2 worker processes (a fresh `celery
  worker --concurrency=N`, already up): claims, reading, judging, storing the replay
  judgements, comparing with the recorded verdicts, writing the results;
- and, for the record, the engine alone on records already in memory (no database).

Each replay is under a policy document of its own, so that none reuses another's stored
judgements. Rounds alternate the measurements (the machine may be shared: a busy stretch
then weighs on all of them) and each figure is its best round. Prints runs/s for each and
ends with one JSON line: the figures, `ratio` (2 workers / the limit) and `goal` (0.5)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.databases import admin_url  # noqa: E402
from benchmarks.engine import generate_lines  # noqa: E402
from tests.workers import stop_group  # noqa: E402

GOAL = 0.5
DOCUMENT = {
    "fields": {
        "status": {"normalize": {"kind": "enum", "caseInsensitive": True}},
        "amount": {"normalize": {"kind": "money"}},
        "sellableQty": {},
    },
    "rules": [
        {
            "id": "payments-newest",
            "kind": "higher-source-revision",
            "field": "status",
            "revisionDomain": "payments",
        },
        {
            "id": "refunds-own-status",
            "kind": "authoritative-source",
            "field": "status",
            "source": "refund-service",
            "unlessValues": ["chargeback"],
        },
        {
            "id": "review-refunds",
            "kind": "require-review",
            "field": "amount",
            "actions": ["issue_refund"],
        },
    ],
}


def write_trace(path: Path, runs: int, seed: int) -> int:
    """`runs` runs of about eight lines each, run ids unique across generated blocks."""
    lines = 0
    with path.open("wb") as out:
        for block, start in enumerate(range(0, runs, 5000)):
            for line in generate_lines(min(5000, runs - start), seed + block):
                out.write(line.replace(b'"runId":"run-', f'"runId":"b{block}-run-'.encode(), 1))
                out.write(b"\n")
                lines += 1
    return lines


def start_worker(env: dict[str, str], concurrency: int, log: Path) -> subprocess.Popen:
    handle = log.open("ab")
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "reviewapp.celery", "worker", "--without-gossip"]
        + [
            "--without-mingle",
            "--loglevel=WARNING",
            f"--concurrency={concurrency}",
            "-n",
            f"bench{concurrency}@%h",
        ],
        cwd=ROOT,
        env=env,
        stdout=handle,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    handle.close()
    # Ready when it answers a ping (workers need a moment to fork and connect).
    from reviewapp.celery import app

    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if app.control.ping(destination=[f"bench{concurrency}@{os.uname().nodename}"], timeout=1):
            return process
        if process.poll() is not None:
            sys.exit(f"the worker did not start: see {log}")
    sys.exit(f"the worker did not answer within 90s: see {log}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="runs to generate and replay")
    parser.add_argument("--seed", type=int, default=20260804)
    parser.add_argument("--repeats", type=int, default=2, help="rounds; each figure is its best")
    args = parser.parse_args()
    url, redis = os.environ.get("DATABASE_URL", ""), os.environ.get("REDIS_URL", "")
    if not url.startswith(("postgres://", "postgresql://")) or not redis:
        sys.exit("benchmarks/replay.py needs DATABASE_URL (PostgreSQL) and REDIS_URL (workers)")
    bench_db = f"crosscheck_replay_bench_{os.getpid()}"
    with psycopg.connect(admin_url(url, "postgres"), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{bench_db}"')
    try:
        with tempfile.TemporaryDirectory() as tmp:
            figures = measure(args, admin_url(url, bench_db), Path(tmp))
    finally:
        with psycopg.connect(admin_url(url, "postgres"), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{bench_db}" WITH (FORCE)')
    print(json.dumps(figures))


def measure(args: argparse.Namespace, bench_url: str, tmp: Path) -> dict:
    env = {
        **os.environ,
        "DATABASE_URL": bench_url,
        "DJANGO_SETTINGS_MODULE": "reviewapp.settings",
        "CROSSCHECK_VAR_DIR": str(tmp),
    }
    os.environ.update(env)
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection

    from reviewapp.engine import judge_run, load_policy
    from reviewapp.judging.core import judge, stored_runs
    from reviewapp.models import FixtureRun, ReplayJob, Run
    from reviewapp.policy.candidates import candidate_of_file
    from reviewapp.replay.fixtures import freeze, pins_where_judged
    from reviewapp.replay.jobs import job_start

    call_command("migrate", verbosity=0)
    trace = tmp / "bench.jsonl"
    lines = write_trace(trace, args.n, args.seed)
    started = time.perf_counter()
    call_command("ingest", str(trace), json=True, stdout=open(os.devnull, "w"))  # noqa: SIM115
    ingest_seconds = time.perf_counter() - started
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    pins = pins_where_judged(Run.objects.values_list("pk", flat=True))
    fixture_set = freeze(name="benchmark", origin="upload", pins=pins)
    # The limit reads in the chunks a replay's items are made of.
    chunk = settings.REPLAY_CHUNK_RUNS
    pinned = dict(
        FixtureRun.objects.filter(fixture_set=fixture_set).values_list(
            "run_id", "through_record_id"
        )
    )
    pks = sorted(pinned)
    print(f"{len(pks):,} runs, {lines:,} lines, ingested in {ingest_seconds:.0f}s; frozen")

    policy = load_policy(DOCUMENT)

    def limit() -> tuple[float, float]:
        """The limit (read as a replay reads, judge, store nothing), then the engine alone
        on the records it read."""
        started = time.perf_counter()
        loaded = []
        for start in range(0, len(pks), chunk):
            runs = stored_runs(pks[start : start + chunk], through=pinned)
            judge(runs, policy)
            loaded.extend(runs)
        read_and_judged = time.perf_counter() - started
        started = time.perf_counter()
        for run in loaded:
            judge_run(run.run_id, [record for _, record in run.records], policy)
        return read_and_judged, time.perf_counter() - started

    def replay(workers: int, round_number: int) -> float:
        process = start_worker(env, workers, tmp / f"worker-{workers}.log")
        try:
            name = f"benchmark, {workers} worker(s), round {round_number}"
            candidate = candidate_of_file({**DOCUMENT, "name": name})
            started = time.perf_counter()
            job = job_start(fixture_set, candidate, reason="benchmarks/replay.py")
            while True:
                time.sleep(0.05)
                job.refresh_from_db(fields=["state", "error"])
                if job.state in (ReplayJob.State.DONE, ReplayJob.State.FAILED):
                    break
            seconds = time.perf_counter() - started
        finally:
            stop_group(process)
        if job.state != ReplayJob.State.DONE:
            sys.exit(f"the replay failed: {job.error}")
        job.refresh_from_db()
        counts[workers] = job.counts
        return seconds

    counts: dict[int, dict] = {}
    rounds: dict[str, list[float]] = {"limit": [], "engine": [], "one": [], "two": []}
    for round_number in range(max(1, args.repeats)):
        read_and_judged, engine_alone = limit()
        rounds["limit"].append(read_and_judged)
        rounds["engine"].append(engine_alone)
        rounds["one"].append(replay(1, round_number))
        rounds["two"].append(replay(2, round_number))
        print(
            f"round {round_number + 1}: limit {rounds['limit'][-1]:.1f}s, "
            f"1 worker {rounds['one'][-1]:.1f}s, 2 workers {rounds['two'][-1]:.1f}s"
        )
    assert counts[1] == counts[2], "two replays of one fixture set under one document differ"
    print(f"what the replay found: {counts[2]}")
    seconds = {1: min(rounds["one"]), 2: min(rounds["two"])}
    limit_seconds, engine_seconds = min(rounds["limit"]), min(rounds["engine"])

    runs = len(pks)
    rate = {
        "one": runs / seconds[1],
        "two": runs / seconds[2],
        "limit": runs / limit_seconds,
        "engine": runs / engine_seconds,
    }
    print(f"replay on 1 worker process:   {rate['one']:10,.0f} runs/s ({seconds[1]:.1f} s)")
    print(f"replay on 2 worker processes: {rate['two']:10,.0f} runs/s ({seconds[2]:.1f} s)")
    print(
        f"in-process engine (limit):    {rate['limit']:10,.0f} runs/s ({limit_seconds:.1f} s:"
        " read as replay reads, judged, nothing stored)"
    )
    print(f"engine alone, in memory:      {rate['engine']:10,.0f} runs/s (no database)")
    return {
        "benchmark": "replay",
        "n": runs,
        "lines": lines,
        "chunk_runs": chunk,
        "one_worker_runs_per_s": round(rate["one"]),
        "two_workers_runs_per_s": round(rate["two"]),
        "limit_runs_per_s": round(rate["limit"]),
        "engine_alone_runs_per_s": round(rate["engine"]),
        "one_worker_seconds": round(seconds[1], 2),
        "two_workers_seconds": round(seconds[2], 2),
        "limit_seconds": round(limit_seconds, 2),
        "repeats": max(1, args.repeats),
        "ratio_one_worker": round(rate["one"] / rate["limit"], 3),
        "ratio": round(rate["two"] / rate["limit"], 3),
        "goal": GOAL,
        "met": rate["two"] / rate["limit"] >= GOAL,
    }


if __name__ == "__main__":
    main()
