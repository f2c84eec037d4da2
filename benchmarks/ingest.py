"""End-to-end ingest through `manage.py ingest` against PostgreSQL COPY of the same rows
(and, with --case otlp, the OTLP receiver against protobuf decoding: benchmarks/otlp.py).

    DATABASE_URL=postgres://... python benchmarks/ingest.py --n 1000000
    DATABASE_URL=postgres://... python benchmarks/ingest.py --case otlp --n 100000

Generates a seeded native trace of N lines, creates a throwaway database beside the one
DATABASE_URL names, migrates it, ingests the file with `manage.py ingest --json` (parse,
store raw lines, store records, judge, open tickets), then COPYs the same lines into a
plain table of the same database: the raw limit. Prints lines/s for both, the ingest's
peak memory, and one JSON line with `ratio` (ours / COPY) and `goal` (0.25).

The ingest explains itself: its seconds by stage (decode, judge, write, commit, as
`manage.py ingest --stages` counts them; `other` is the rest of its wall time: starting
Django, reading the file, bookkeeping), beside msgspec decoding alone of the same lines
(the decoding limit: no stage that decodes can be faster).

It also times the engine alone on the same file (decode, check and judge in this process,
no database): no ingest can run faster than its own oracle, so `engine_ratio` (engine
alone / COPY) is the ceiling any `ratio` can reach on this machine.
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
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import msgspec  # noqa: E402

from benchmarks.engine import generate_lines  # noqa: E402
from reviewapp.engine import decode_line, judge_run, load_policy, parse_record  # noqa: E402

GOAL = 0.25


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


def admin_url(url: str, database: str) -> str:
    return url.rsplit("/", 1)[0] + "/" + database


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
        help="lines: manage.py ingest against COPY; otlp: /v1/traces against protobuf decoding",
    )
    args = parser.parse_args()
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        sys.exit("benchmarks/ingest.py needs DATABASE_URL pointing at a PostgreSQL server")
    if args.case == "otlp":
        otlp_case(url, args.n, args.seed)
        return

    bench_db = f"crosscheck_bench_{os.getpid()}"
    with psycopg.connect(admin_url(url, "postgres"), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{bench_db}"')
    bench_url = admin_url(url, bench_db)
    env = {**os.environ, "DATABASE_URL": bench_url, "DJANGO_SETTINGS_MODULE": "reviewapp.settings"}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            trace = Path(tmp) / "bench.jsonl"
            lines = write_trace(trace, args.n, args.seed)
            size = trace.stat().st_size
            subprocess.run(
                [sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True
            )

            started = time.perf_counter()
            result = subprocess.run(
                [sys.executable, "manage.py", "ingest", str(trace), "--json", "--stages"],
                cwd=ROOT,
                env={**env, "CROSSCHECK_VAR_DIR": tmp},
                check=True,
                capture_output=True,
                text=True,
            )
            ingest_seconds = time.perf_counter() - started
            peak_rss_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
            summary = json.loads(result.stdout.strip().splitlines()[-1])
            stages = summary.pop("stages")

            with psycopg.connect(bench_url) as conn:
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
                copy_seconds = time.perf_counter() - started
            engine_seconds = engine_alone(trace)
            decode_seconds = min(decode_alone(trace) for _ in range(3))
    finally:
        with psycopg.connect(admin_url(url, "postgres"), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{bench_db}" WITH (FORCE)')

    ours, limit, engine = lines / ingest_seconds, lines / copy_seconds, lines / engine_seconds
    decoded = lines / decode_seconds
    stages["other"] = round(ingest_seconds - sum(stages.values()), 3)
    print(f"{lines:,} lines ({size / 2**20:,.0f} MiB): {summary}")
    print(
        f"manage.py ingest: {ours:12,.0f} lines/s  ({ingest_seconds:.1f} s, peak RSS {peak_rss_mib:,.0f} MiB)"
    )
    print(f"COPY (raw limit): {limit:12,.0f} lines/s  ({copy_seconds:.1f} s)")
    print(
        f"engine alone:     {engine:12,.0f} lines/s  ({engine_seconds:.1f} s, no database:"
        f" the ceiling is ratio {engine / limit:.3f})"
    )
    print(
        f"msgspec decode:   {decoded:12,.0f} lines/s  ({decode_seconds:.2f} s, the decoding limit)"
    )
    print(
        "ingest by stage:  "
        + ", ".join(f"{name} {seconds:.2f} s" for name, seconds in stages.items())
        + f" (decode at {decode_seconds / max(stages['decode'], 1e-9):.2f} of its limit)"
    )
    print(
        json.dumps(
            {
                "benchmark": "ingest",
                "n": lines,
                "bytes": size,
                "ingest_lines_per_s": round(ours),
                "copy_lines_per_s": round(limit),
                "engine_alone_lines_per_s": round(engine),
                "engine_ratio": round(engine / limit, 3),
                "msgspec_decode_lines_per_s": round(decoded),
                "stage_seconds": stages,
                "ingest_seconds": round(ingest_seconds, 2),
                "peak_rss_mib": round(peak_rss_mib),
                "summary": summary,
                "ratio": round(ours / limit, 3),
                "goal": GOAL,
                "met": ours / limit >= GOAL,
            }
        )
    )


def otlp_case(url: str, n: int, seed: int) -> None:
    from benchmarks import otlp

    bodies = otlp.generate_requests(n, seed)
    spans = sum(
        len(s.spans)
        for body in bodies
        for rs in otlp.ExportTraceServiceRequest.FromString(body).resource_spans
        for s in rs.scope_spans
    )
    size = sum(map(len, bodies))
    bench_db = f"crosscheck_bench_{os.getpid()}"
    with psycopg.connect(admin_url(url, "postgres"), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{bench_db}"')
    try:
        with tempfile.TemporaryDirectory() as tmp:
            otlp.setup(admin_url(url, bench_db), tmp)
            limit_seconds = min(otlp.protobuf_alone(bodies) for _ in range(3))
            convert_seconds = otlp.convert_alone(bodies)
            ours_seconds, stored = otlp.receiver(bodies)
            from django.db import connections

            connections.close_all()
    finally:
        with psycopg.connect(admin_url(url, "postgres"), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{bench_db}" WITH (FORCE)')
    ours, limit, converted = spans / ours_seconds, spans / limit_seconds, spans / convert_seconds
    print(f"{spans:,} spans in {len(bodies):,} export requests ({size / 2**20:,.1f} MiB): {stored}")
    print(f"POST /v1/traces:    {ours:12,.0f} spans/s  ({ours_seconds:.2f} s, stored and judged)")
    print(f"decode + convert:   {converted:12,.0f} spans/s  ({convert_seconds:.2f} s, no database)")
    print(f"protobuf alone:     {limit:12,.0f} spans/s  ({limit_seconds:.3f} s, the limit)")
    print(
        json.dumps(
            {
                "benchmark": "ingest-otlp",
                "n": spans,
                "requests": len(bodies),
                "bytes": size,
                "receiver_spans_per_s": round(ours),
                "convert_spans_per_s": round(converted),
                "protobuf_spans_per_s": round(limit),
                "convert_ratio": round(converted / limit, 4),
                "receiver_seconds": round(ours_seconds, 2),
                "stored": stored,
                "ratio": round(ours / limit, 4),
                "goal": otlp.GOAL,
                "met": ours / limit >= otlp.GOAL,
            }
        )
    )


if __name__ == "__main__":
    main()
