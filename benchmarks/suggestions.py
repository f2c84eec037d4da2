"""Computing the suggested rules on N decided tickets, next to a plain GROUP BY over the same
rows, in the same run.

    DATABASE_URL=postgres://... python benchmarks/suggestions.py --n 1000000

Creates a throwaway database (a test database beside the one DATABASE_URL names, dropped
at the end) and seeds it in SQL: N closed conflict tickets in 200 families (a fingerprint
each), each with the mark of its close: its right source one of the family's two (mostly
the first), none of them for one in twenty (but in a quarter of the families, whose right
side is always the higher revision of the domain they share), a shared revision domain for
half the families and whether the right one was the higher revision; one mark in twenty belongs to an earlier
close (the ticket was reopened and closed again since), which must not count.

Every round, in turn: the suggestions computed as the worker computes them (the one
aggregate query, reviewapp.suggestions.work.SUGGESTION_TALLY, and the thresholds over its
rows: `ours`), and a plain `GROUP BY fingerprint, source` over the same join of marks to
their tickets (`limit`). Prints medians; the last line is one JSON object with the figures,
`ratio` = ours / limit and `goal` (2.0)."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "reviewapp.settings")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.utils import setup_databases, teardown_databases  # noqa: E402

GOAL = 2.0
FAMILIES = 200
TICKETS_PER_RUN = 4
PLAIN_GROUP_BY = """
SELECT t.fingerprint, m.source, count(*)
FROM reviewapp_ticketmark m
JOIN reviewapp_ticket t ON t.id = m.ticket_id AND t.revision = m.ticket_revision
GROUP BY t.fingerprint, m.source
"""


def sql(statement: str, params=None) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchall() if cursor.description else []


def seed(n: int) -> float:
    """The world of the docstring, in SQL; the seconds it took."""
    from django.contrib.auth import get_user_model

    from reviewapp.models import IngestBatch

    started = time.perf_counter()
    users = [
        get_user_model().objects.create_user(f"bench-reviewer-{i}", password="x").pk
        for i in range(4)
    ]
    batch = IngestBatch.objects.create(channel="cli", file_name="bench", content_sha256="0" * 64)
    runs = -(-n // TICKETS_PER_RUN)
    sql(
        "INSERT INTO reviewapp_run (run_id, agent, started_at, first_ingested_at) "
        "SELECT 'bench-' || i, 'refund-agent', now(), now() FROM generate_series(1, %s) i",
        [runs],
    )
    first_run = sql("SELECT min(id) FROM reviewapp_run")[0][0]
    # Family f: field status, action issue_refund, sources source-f-a and source-f-b.
    sql(
        "INSERT INTO reviewapp_ticket (run_id, key, kind, entity, field, finding_kind, reason, "
        "action, unsafe, sources, agent, fingerprint, fingerprint_label, policy_number, "
        "batch_id, state, resolution, cause, cause_text, revision, created_at, updated_at, "
        "closed_at, disputed) "
        "SELECT %s + (i - 1) / %s, 'conflict-' || i, 'conflict', 'e-' || i, 'status', '', "
        "'no-approved-precedence', 'issue_refund', false, "
        "'source-' || f || '-a,source-' || f || '-b', 'refund-agent', lpad(to_hex(f), 16, '0'), "
        "'status · issue_refund · family ' || f, 1, %s, 'closed', 'explained', 'replica-lag', "
        "'', 3, now(), now(), now(), '[]'::jsonb "
        "FROM generate_series(1, %s) i CROSS JOIN LATERAL (SELECT i %% %s AS f) x",
        [first_run, TICKETS_PER_RUN, batch.pk, n, FAMILIES],
    )
    # Each ticket's mark: h picks the right side, s whether it is the close that stands.
    sql(
        "INSERT INTO reviewapp_ticketmark (ticket_id, ticket_revision, observation_id, source, "
        "domain, right_is_higher, cause, marked_by_id, created_at) "
        "SELECT t.id, CASE WHEN s < 5 THEN 2 ELSE 3 END, "
        "CASE WHEN n THEN '' ELSE 'obs-' || t.id END, "
        "CASE WHEN n THEN '' WHEN h < 97 THEN split_part(t.sources, ',', 1) "
        "ELSE split_part(t.sources, ',', 2) END, "
        "CASE WHEN f %% 2 = 0 THEN 'payments' ELSE '' END, "
        "CASE WHEN f %% 2 = 1 OR n THEN NULL ELSE (h < 97 OR f %% 4 = 0) END, "
        "'replica-lag', (%s::int[])[1 + t.id %% 4], now() "
        "FROM reviewapp_ticket t CROSS JOIN LATERAL (SELECT abs(hashint8(t.id)) %% 100 AS h, "
        "abs(hashint8(t.id * 7 + 1)) %% 100 AS s, ('x' || t.fingerprint)::bit(64)::bigint AS f) x "
        "CROSS JOIN LATERAL (SELECT h < 5 AND f %% 4 <> 0 AS n) y",
        [users],
    )
    for table in ("run", "ticket", "ticketmark"):
        sql(f"VACUUM ANALYZE reviewapp_{table}")
    return time.perf_counter() - started


def timed(action) -> float:
    started = time.perf_counter()
    action()
    return (time.perf_counter() - started) * 1000


def measure(rounds: int) -> dict:
    from reviewapp.suggestions.work import suggested, tallies

    found: list = []

    def ours() -> None:
        found[:] = suggested(
            tallies(),
            min_decisions=settings.SUGGEST_MIN_DECISIONS,
            min_share=settings.SUGGEST_MIN_SHARE,
        )

    def limit() -> None:
        sql(PLAIN_GROUP_BY)

    ours()
    limit()  # warm both: the tables are in the cache for each
    times: dict[str, list[float]] = {"ours": [], "limit": []}
    for _ in range(rounds):
        times["ours"].append(timed(ours))
        times["limit"].append(timed(limit))
    kinds = sorted({s.kind for s in found})
    return {
        "ours_ms": round(statistics.median(times["ours"]), 1),
        "limit_ms": round(statistics.median(times["limit"]), 1),
        "suggested": len(found),
        "kinds": kinds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="decided tickets to seed")
    parser.add_argument("--rounds", type=int, default=7, help="timings of each")
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL"):
        sys.exit("benchmarks/suggestions.py needs DATABASE_URL pointing at a PostgreSQL server")
    settings.DATABASES["default"].setdefault("TEST", {})["NAME"] = (
        f"crosscheck_suggestions_bench_{os.getpid()}"
    )
    created = setup_databases(verbosity=0, interactive=False)
    try:
        seed_s = seed(args.n)
        figures = measure(args.rounds)
    finally:
        teardown_databases(created, verbosity=0)

    print(f"seeded {args.n:,} decided tickets with their marks in {seed_s:.1f} s")
    print(
        f"suggestions computed: {figures['ours_ms']} ms ({figures['suggested']} suggested: "
        f"{', '.join(figures['kinds'])}); plain GROUP BY: {figures['limit_ms']} ms"
    )
    ratio = figures["ours_ms"] / figures["limit_ms"]
    print(
        json.dumps(
            {
                "benchmark": "suggestions",
                "n": args.n,
                "rounds": args.rounds,
                "seed_s": round(seed_s, 1),
                **figures,
                "ratio": round(ratio, 2),
                "goal": GOAL,
                "met": ratio <= GOAL,
            }
        )
    )


if __name__ == "__main__":
    main()
