"""End-to-end ingest through `manage.py ingest` against PostgreSQL COPY of the same rows
(and, with --case otlp, the OTLP receiver against native ingest of the same tool calls:
benchmarks/otlp.py).

    DATABASE_URL=postgres://... python benchmarks/ingest.py --n 1000000
    DATABASE_URL=postgres://... python benchmarks/ingest.py --n 1000000 --workers 2
    DATABASE_URL=postgres://... python benchmarks/ingest.py --case otlp --n 100000

Generates a seeded native trace of N lines, creates a throwaway database beside the one
DATABASE_URL names, migrates it, ingests the file with `manage.py ingest --json` (parse,
store raw lines, store records, judge, open tickets), then COPYs the same lines into a
plain table of the same database: the raw limit (the fastest of three). Prints lines/s
for both, the ingest's peak memory and processor time a line (of our processes, not
PostgreSQL's), and one JSON line with `ratio` (ours / COPY) and `goal` (0.05; the compass
goal is 0.10).

With --workers N (more than 1), the same file is also ingested, into a fresh database, in
N parts by a Celery worker with N pool processes (`manage.py ingest --parts N`, the
scaled-out path: ingest.parts), on a broker of its own (the filesystem one, in a
temporary folder). Then `ratio` is that ingest's, and `scaling` is its throughput over
the one-worker ingest's (goal 1.7 for two workers); its stages sum every worker's seconds.

With --redaction ROUNDS, the file is also ingested with three redaction rules on, against
ingest without them, in alternating rounds (benchmarks/redaction.py): `redaction_ratio`
(goal at most 1.2).

The ingest explains itself: its seconds by stage (decode, judge, write, commit, as
`manage.py ingest --stages` counts them; `other` is the rest of its wall time: starting
Django, reading the file, bookkeeping), beside msgspec decoding alone of the same lines
(the decoding limit: no stage that decodes can be faster).

It also times the engine alone on the same file (decode, check and judge in this process,
no database): no ingest can run faster than its own oracle, so `engine_ratio` (engine
alone / COPY) is the ceiling any `ratio` can reach on this machine.

And the database alone (`storage_floor`): every row in the bench database once the
one-worker ingest is done (the ingest's, and the few the migrations wrote), COPYed again
(binary, from a file) into bare tables with the same columns and indexes but none of the
checks, in one transaction on one connection. That is the least work PostgreSQL does for
one ingest, so `storage_floor_ratio` is the ceiling of any ingest that writes on one
connection (one transaction a chunk). With the cores the machine has,
both goals together (`goal` with one worker, `scaling_goal` with two) leave each line at
most `budget_us_per_line` of processor time, PostgreSQL's and ours together.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import msgspec  # noqa: E402

from benchmarks.databases import admin_url  # noqa: E402
from benchmarks.engine import generate_lines  # noqa: E402
from reviewapp.engine import decode_line, judge_run, load_policy, parse_record  # noqa: E402

GOAL = 0.05
COMPASS_GOAL = 0.10
SCALING_GOAL = 1.7  # two workers against one


def write_trace(path: Path, lines_wanted: int, seed: int) -> int:
    """About eight lines a run; cut to exactly `lines_wanted` lines."""
    written = 0
    with path.open("wb") as out:
        batch = 0
        while written < lines_wanted:
            for line in generate_lines(5000, seed + batch):
                # Keep run ids unique across generated blocks.
                line = line.replace(b'"runId":"run-', f'"runId":"b{batch}-run-'.encode(), 1)
                out.write(line + b"\n")
                written += 1
                if written == lines_wanted:
                    break
            batch += 1
    return written


def engine_alone(trace: Path) -> float:
    """Seconds to decode, check and judge every run of the file with the default policy;
    runs are contiguous in the generated file, so one is held at a time."""
    policy = load_policy(json.loads((ROOT / "reviewapp" / "default_policy.json").read_text()))
    started = time.perf_counter()
    run_id, records = None, []
    with trace.open("rb") as source:
        for raw in source:
            record = parse_record(decode_line(raw))
            if record.run_id != run_id and records:
                judge_run(run_id, records, policy)
                records = []
            run_id = record.run_id
            records.append(record)
    if records:
        judge_run(run_id, records, policy)
    return time.perf_counter() - started


def decode_alone(trace: Path) -> float:
    """Seconds for msgspec to decode every line of the file into Python objects, each
    dropped once decoded (the ingest holds a chunk at a time)."""
    decode = msgspec.json.decode
    started = time.perf_counter()
    with trace.open("rb") as source:
        for raw in source:
            decode(raw)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--n", type=int, default=1_000_000, help="lines in the generated trace (otlp: spans)"
    )
    parser.add_argument("--seed", type=int, default=20260804)
    parser.add_argument(
        "--case",
        choices=("lines", "otlp"),
        default="lines",
        help="lines: manage.py ingest against COPY; otlp: /v1/traces against native ingest",
    )
    parser.add_argument(
        "--redaction",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="lines: also ingest with three redaction rules on, this many rounds (redaction_ratio)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="lines: also ingest in this many parts on as many worker processes",
    )
    args = parser.parse_args()
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        sys.exit("benchmarks/ingest.py needs DATABASE_URL pointing at a PostgreSQL server")
    if args.case == "otlp":
        from benchmarks import otlp

        otlp.otlp_case(url, args.n, args.seed)
        return

    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "bench.jsonl"
        lines = write_trace(trace, args.n, args.seed)
        size = trace.stat().st_size
        with bench_database(url) as bench_url:
            serial = timed_ingest(bench_url, trace, Path(tmp) / "serial", parts=1)
            print(f"one worker: {serial.seconds:.1f} s, {serial.summary}", flush=True)
            copy_seconds = copy_limit(bench_url, trace)
            floor_seconds = storage_floor(bench_url, Path(tmp) / "floor")
        redaction: dict = {}
        if args.redaction:
            from benchmarks.redaction import redaction_figures

            redaction = redaction_figures(
                url,
                trace,
                Path(tmp),
                plain=serial,
                rounds=args.redaction,
                bench_database=bench_database,
                timed_ingest=timed_ingest,
            )
        scaled = None
        if args.workers > 1:
            with bench_database(url) as bench_url:
                scaled = timed_ingest(bench_url, trace, Path(tmp) / "parts", parts=args.workers)
                print(f"{args.workers} workers: {scaled.seconds:.1f} s", flush=True)
        engine_seconds = engine_alone(trace)
        decode_seconds = min(decode_alone(trace) for _ in range(3))

    limit, engine = lines / copy_seconds, lines / engine_seconds
    decoded = lines / decode_seconds
    print(f"{lines:,} lines ({size / 2**20:,.0f} MiB): {serial.summary}")
    runs = [("manage.py ingest", serial)]
    if scaled is not None:
        runs.append((f"{args.workers} workers", scaled))
        assert scaled.summary == serial.summary, (scaled.summary, serial.summary)
    for label, run in runs:
        print(
            f"{label + ':':18}{lines / run.seconds:12,.0f} lines/s  ({run.seconds:.1f} s, "
            f"{run.cpu_seconds / lines * 1e6:.0f} µs of our processor time a line, "
            f"peak RSS {run.peak_rss_mib:,.0f} MiB)"
        )
    print(f"COPY (raw limit): {limit:12,.0f} lines/s  ({copy_seconds:.1f} s)")
    print(
        f"engine alone:     {engine:12,.0f} lines/s  ({engine_seconds:.1f} s, no database:"
        f" the ceiling is ratio {engine / limit:.3f})"
    )
    print(
        f"msgspec decode:   {decoded:12,.0f} lines/s  ({decode_seconds:.2f} s, the decoding limit)"
    )
    floor = lines / floor_seconds
    print(
        f"storage floor:    {floor:12,.0f} lines/s  ({floor_seconds:.1f} s, the database alone "
        f"reloading what was stored: the ceiling is ratio {floor / limit:.3f})"
    )
    cores = os.cpu_count() or 1
    budget = cores / (GOAL * SCALING_GOAL * limit)
    print(
        f"both goals on {cores} cores leave {budget * 1e6:.0f} µs of processor time a line; "
        f"storing alone takes {floor_seconds / lines * 1e6:.0f} µs of the database's, the "
        f"engine alone {engine_seconds / lines * 1e6:.0f} µs, and the ingest "
        f"{serial.cpu_seconds / lines * 1e6:.0f} µs of ours"
    )
    for label, run in runs:
        print(
            f"{label} by stage: "
            + ", ".join(f"{name} {seconds:.2f} s" for name, seconds in run.stages.items())
            + f" (decode at {decode_seconds / max(run.stages['decode'], 1e-9):.2f} of its limit)"
        )
    measured = scaled or serial
    ours = lines / measured.seconds
    figures = {
        "benchmark": "ingest",
        "n": lines,
        "bytes": size,
        "workers": args.workers,
        "ingest_lines_per_s": round(ours),
        "one_worker_lines_per_s": round(lines / serial.seconds),
        "copy_lines_per_s": round(limit),
        "engine_alone_lines_per_s": round(engine),
        "engine_ratio": round(engine / limit, 3),
        "msgspec_decode_lines_per_s": round(decoded),
        "storage_floor_lines_per_s": round(floor),
        "storage_floor_ratio": round(floor / limit, 4),
        "cores": cores,
        "budget_us_per_line": round(budget * 1e6, 1),
        "storage_floor_us_per_line": round(floor_seconds / lines * 1e6, 1),
        "engine_alone_us_per_line": round(engine_seconds / lines * 1e6, 1),
        "one_worker_python_us_per_line": round(serial.cpu_seconds / lines * 1e6, 1),
        "stage_seconds": measured.stages,
        "ingest_seconds": round(measured.seconds, 2),
        "python_cpu_seconds": round(measured.cpu_seconds, 2),
        "one_worker_python_cpu_seconds": round(serial.cpu_seconds, 2),
        "peak_rss_mib": round(measured.peak_rss_mib),
        "summary": measured.summary,
        "ratio": round(ours / limit, 4),
        "goal": GOAL,
        "compass_goal": COMPASS_GOAL,
        "met": ours / limit >= GOAL,
    } | redaction
    if scaled is not None:
        scaling = serial.seconds / scaled.seconds
        figures |= {
            "one_worker_ratio": round(lines / serial.seconds / limit, 4),
            "scaling": round(scaling, 2),
            "scaling_goal": SCALING_GOAL,
            "scaling_met": scaling >= SCALING_GOAL,
        }
    print(json.dumps(figures))


@dataclass
class TimedIngest:
    seconds: float
    summary: dict[str, int]
    stages: dict[str, float]
    peak_rss_mib: float
    # Processor seconds of our processes (not PostgreSQL's): what a line costs in Python,
    # steadier than the wall time on a busy machine.
    cpu_seconds: float


@contextmanager
def bench_database(url: str) -> Iterator[str]:
    """A throwaway database beside the one `url` names, migrated; dropped at the end."""
    name = f"crosscheck_bench_{os.getpid()}"
    admin = admin_url(url, "postgres")
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{name}"')
    bench_url = admin_url(url, name)
    try:
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "-v0"],
            cwd=ROOT,
            env=django_env(bench_url, None),
            check=True,
        )
        yield bench_url
    finally:
        drop_database(admin, name)


def drop_database(admin: str, name: str) -> None:
    """Drop it, waiting out a backend FORCE may not end (autovacuum, after a large ingest)."""
    for attempt in range(30):
        try:
            with psycopg.connect(admin, autocommit=True) as connection:
                connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            return
        except (psycopg.errors.InsufficientPrivilege, psycopg.errors.ObjectInUse):
            if attempt == 29:
                raise
            time.sleep(2)


def django_env(bench_url: str, var_dir: Path | None) -> dict[str, str]:
    """The environment of the project's commands on the bench database; with `var_dir`,
    its own broker (the filesystem one, there) instead of any Redis of the caller's."""
    env = {**os.environ, "DATABASE_URL": bench_url, "DJANGO_SETTINGS_MODULE": "reviewapp.settings"}
    env.pop("MIGRATE_DATABASE_URL", None)
    if var_dir is not None:
        env["CROSSCHECK_VAR_DIR"] = str(var_dir)
        env.pop("REDIS_URL", None)
    return env


def timed_ingest(bench_url: str, trace: Path, var_dir: Path, *, parts: int) -> TimedIngest:
    """`manage.py ingest --json --stages` of the trace, timed from outside; in `parts`
    parts by a worker with as many pool processes when more than one."""
    var_dir.mkdir()
    env = django_env(bench_url, var_dir)
    command = [sys.executable, "manage.py", "ingest", str(trace), "--json", "--stages"]
    worker = None
    if parts > 1:
        command += ["--parts", str(parts)]
        worker = start_worker(env, var_dir, concurrency=parts)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        started = time.perf_counter()
        result = subprocess.run(
            command, cwd=ROOT, env=env, check=True, capture_output=True, text=True
        )
        seconds = time.perf_counter() - started
    finally:
        if worker is not None:
            worker.terminate()
            worker.wait(timeout=60)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # The command's and its workers' (ended and waited for by now) processor time.
    cpu_seconds = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    stages = summary.pop("stages")
    peak_rss_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    if parts == 1:
        stages["other"] = round(seconds - sum(stages.values()), 3)
    return TimedIngest(seconds, summary, stages, peak_rss_mib, cpu_seconds)


def start_worker(env: dict[str, str], var_dir: Path, *, concurrency: int) -> subprocess.Popen:
    """A Celery worker with `concurrency` pool processes, once it says it is ready."""
    log_path = var_dir / "worker.log"
    log = log_path.open("w")
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "reviewapp.celery", "worker"]
        + [f"--concurrency={concurrency}", "--loglevel=INFO", "--without-gossip"]
        + ["--without-mingle", "--prefetch-multiplier=1"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 120
    while "ready" not in log_path.read_text():
        if worker.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the worker did not start:\n{log_path.read_text()}")
        time.sleep(0.2)
    return worker


def copy_limit(bench_url: str, trace: Path, *, tries: int = 3) -> float:
    """Seconds to COPY the file's lines (number and text) into a plain table: the limit, as
    the fastest of `tries` COPYs into a new table each (one COPY varies by a tenth from run
    to run on a busy machine, and the ratio with it)."""
    return min(_copy_once(bench_url, trace) for _ in range(tries))


def _copy_once(bench_url: str, trace: Path) -> float:
    with psycopg.connect(bench_url) as conn:
        conn.execute("DROP TABLE IF EXISTS copy_limit")
        conn.execute("CREATE TABLE copy_limit (line_number integer, raw text)")
        started = time.perf_counter()
        statement = "COPY copy_limit (line_number, raw) FROM STDIN"
        with (
            conn.cursor() as cursor,
            cursor.copy(statement) as copy,
            trace.open("rb") as source,
        ):
            for number, raw in enumerate(source, 1):
                copy.write_row((number, raw.rstrip(b"\n").decode()))
        conn.commit()
        return time.perf_counter() - started


def storage_floor(bench_url: str, folder: Path) -> float:
    """Seconds for PostgreSQL alone to store again every row the ingest left in the bench
    database: each table's rows dumped to a file (binary COPY, not timed), then COPYed
    from those files into bare tables with the same columns and indexes (no triggers, no
    foreign keys), all in one transaction on one connection, as an ingest writes."""
    folder.mkdir()
    with psycopg.connect(bench_url) as conn:
        tables = [
            table
            for (table,) in conn.execute(
                "SELECT relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = 'public' AND c.relkind = 'r' AND c.relname <> 'copy_limit' "
                "ORDER BY relname"
            )
            if conn.execute(f'SELECT EXISTS (SELECT FROM "{table}")').fetchone()[0]
        ]
        for table in tables:
            with (
                (folder / table).open("wb") as out,
                conn.cursor().copy(f'COPY "{table}" TO STDOUT (FORMAT BINARY)') as copy,
            ):
                for block in copy:
                    out.write(block)
            conn.execute(
                f'CREATE TABLE "floor_{table}" (LIKE "{table}" INCLUDING DEFAULTS '
                "INCLUDING INDEXES)"
            )
        conn.commit()
        started = time.perf_counter()
        for table in tables:
            with (
                (folder / table).open("rb") as source,
                conn.cursor().copy(f'COPY "floor_{table}" FROM STDIN (FORMAT BINARY)') as copy,
            ):
                while block := source.read(1 << 20):
                    copy.write(block)
        conn.commit()
        return time.perf_counter() - started


if __name__ == "__main__":
    main()
