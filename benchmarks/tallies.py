"""Server time of the tallies page on N verdict groups, next to the raw SQL GROUP BY of the
same counts, in the same run.

    DATABASE_URL=postgres://... python benchmarks/tallies.py --n 1000000

Creates a throwaway database (a test database beside the one DATABASE_URL names, dropped
at the end) and seeds it in SQL: N verdict groups in the current judgements of N/5 runs
spread over the 12 months of 2026 (60% confirmed, 15% resolved by a rule, 25% conflicts),
an older judgement for a fifth of the runs (history the counts must leave out), a finding
for a tenth, two observations (trace records, with their sources) per group, and a ticket
for every conflict and finding (40% open, 45% closed as explained with a cause, 15% as
unexplained). The tallies' reporting copy is then built (timed: build_s).

Every round, in turn: the page as first seen after a change (its cache cleared: the
refresh finds nothing to read again, the GROUP BYs run, the page renders), the page seen
again (cached), the raw GROUP BY over the stored verdicts, findings, tickets and runs
(`limit`: what one would write without the tallies; its counts are checked equal to the
page's), and the page's own GROUP BYs over the reporting copy, raw (`limit_reporting`:
what the page costs beyond its SQL is page / limit_reporting). Prints medians; the last line is
one JSON object with `ratio` = page (first seen) / limit, and `goal` (2.0). Also: the
page's number of queries (the same at any N), and the refresh after 1,000 runs were
judged again."""

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
from django.contrib.auth import get_user_model  # noqa: E402
from django.contrib.auth.models import Group  # noqa: E402
from django.core.cache import cache  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import setup_databases, teardown_databases  # noqa: E402

GOAL = 2.0
GROUPS_PER_RUN = 5
PAGE = "/tallies/?until=2026-12"


def sql(statement: str, params=None) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchall() if cursor.description else []


def seed(n: int) -> float:
    """The stored world of the docstring, in SQL; the seconds the tallies' build took."""
    from reviewapp.models import IngestBatch, TraceLine
    from reviewapp.reports.entries import tallies_refresh
    from reviewapp.review.counts import fold_kept_counts

    runs = -(-n // GROUPS_PER_RUN)
    started = time.perf_counter()
    batch = IngestBatch.objects.create(channel="cli", file_name="bench", content_sha256="0" * 64)
    line = TraceLine.objects.create(
        batch=batch, identity="b" * 32, line_number=1, raw=b"{}", accepted=True
    )
    sql(
        "INSERT INTO reviewapp_run (run_id, agent, started_at, first_ingested_at) "
        "SELECT 'bench-' || i, (ARRAY['refund-agent','stock-agent','support-agent',"
        "'resolver-agent'])[1 + i %% 4], timestamptz '2026-01-01 00:00:00+00' "
        "+ make_interval(secs => (i::bigint * 2654435761) %% (365 * 86400)), now() "
        "FROM generate_series(1, %s) i",
        [runs],
    )
    # An older active judgement for a fifth of the runs, then every run's current one,
    # judged as the runs arrived over the year.
    for through, share in ((1, 5), (2, 1)):
        sql(
            "INSERT INTO reviewapp_judgement (run_id, purpose, policy_number, through_record_id,"
            " verdict_count, conflict_count, unsafe_count, finding_count, created_at) "
            "SELECT id, 'active', 1, %s, 5, 0, 0, 0, LEAST(started_at + make_interval(mins => %s),"
            " now() - interval '1 hour') FROM reviewapp_run WHERE id %% %s = 0 ORDER BY id",
            [through, through, share],
        )
    sql(
        "UPDATE reviewapp_run r SET current_judgement_id = j.id FROM reviewapp_judgement j "
        "WHERE j.run_id = r.id AND j.through_record_id = 2",
        [],
    )
    # The groups: kind, rule and sources from a hash of (run, position).
    sql(
        "INSERT INTO reviewapp_verdict (judgement_id, run_id, position, entity, field, action,"
        " kind, reason, rule, value, evidence, unsafe) "
        "SELECT j.id, j.run_id, p, 'entity-' || p, (ARRAY['status','amount','sellableQty',"
        "'address'])[1 + (j.run_id + p) %% 4], 'send_status_message', k.kind, "
        "CASE WHEN k.kind = 'conflict' THEN 'no-approved-precedence' END, "
        "CASE WHEN k.kind = 'resolved' THEN (ARRAY['payments-newest','owner','trust-wms'])"
        "[1 + k.h %% 3] WHEN k.kind = 'conflict' AND k.h %% 10 = 0 THEN 'review-before-shipping'"
        " END, 'null'::jsonb, jsonb_build_array('o' || j.run_id || '-' || p || '-a', "
        "'o' || j.run_id || '-' || p || '-b'), false "
        "FROM reviewapp_judgement j CROSS JOIN generate_series(0, 4) p "
        "CROSS JOIN LATERAL (SELECT h, CASE WHEN h < 60 THEN 'confirmed' WHEN h < 75 "
        "THEN 'resolved' ELSE 'conflict' END AS kind FROM (SELECT "
        "abs(hashint8(j.run_id * 8 + p + j.through_record_id * 3)) %% 100 AS h) x) k",
        [],
    )
    sql(
        "INSERT INTO reviewapp_tracerecord (run_id, line_id, type, key, source, data) "
        "SELECT v.run_id, %s, 'tool_observation', e.id, (ARRAY['erp','order-ledger',"
        "'refund-service','search-index','warehouse'])[1 + abs(hashint8(v.run_id * 8 + "
        "v.position * 2 + e.n)) %% 5], '{}'::jsonb "
        "FROM reviewapp_verdict v JOIN reviewapp_run r ON r.current_judgement_id = "
        "v.judgement_id CROSS JOIN LATERAL jsonb_array_elements_text(v.evidence) "
        "WITH ORDINALITY AS e(id, n)",
        [line.pk],
    )
    sql(
        "INSERT INTO reviewapp_finding (judgement_id, run_id, position, kind, evidence) "
        "SELECT current_judgement_id, id, 0, (ARRAY['orphan-observation',"
        "'missing-prerequisite','tool-outside-allowlist'])[1 + id %% 3], '[]'::jsonb "
        "FROM reviewapp_run WHERE id %% 10 = 0",
        [],
    )
    ticket_columns = (
        "run_id, key, kind, entity, field, finding_kind, reason, action, unsafe, sources, "
        "agent, fingerprint, fingerprint_label, verdict_id, finding_id, judgement_id, "
        "policy_number, batch_id, state, resolution, cause, cause_text, revision, "
        "created_at, updated_at, closed_at, disputed"
    )
    closing = (
        "CASE WHEN h < 40 THEN 'open' ELSE 'closed' END, "
        "CASE WHEN h < 40 THEN '' WHEN h < 85 THEN 'explained' ELSE 'unexplained' END, "
        "CASE WHEN h >= 40 AND h < 85 THEN (ARRAY['replica-lag','partial-result',"
        "'duplicate-delivery','normalization','wrong-join','reservation'])[1 + h %% 6] "
        "ELSE '' END, '', 1, now(), now(), CASE WHEN h >= 40 THEN now() END"
    )
    sql(
        f"INSERT INTO reviewapp_ticket ({ticket_columns}) "
        f"SELECT v.run_id, 'conflict-' || v.id, 'conflict', v.entity, v.field, '', "
        f"'no-approved-precedence', v.action, false, '', r.agent, 'f000000000000000', "
        f"'bench', v.id, NULL, v.judgement_id, 1, %s, {closing}, '[]'::jsonb "
        f"FROM reviewapp_verdict v JOIN reviewapp_run r ON r.current_judgement_id = "
        f"v.judgement_id CROSS JOIN LATERAL (SELECT abs(hashint8(v.id)) %% 100 AS h) x "
        f"WHERE v.kind = 'conflict'",
        [batch.pk],
    )
    sql(
        f"INSERT INTO reviewapp_ticket ({ticket_columns}) "
        f"SELECT f.run_id, 'finding-' || f.kind, 'finding', NULL, '', f.kind, f.kind, '', "
        f"false, '', r.agent, 'f000000000000001', 'bench', NULL, f.id, f.judgement_id, 1, "
        f"%s, {closing}, '[]'::jsonb FROM reviewapp_finding f JOIN reviewapp_run r ON r.id = f.run_id "
        f"CROSS JOIN LATERAL (SELECT abs(hashint8(f.id)) %% 100 AS h) x",
        [batch.pk],
    )
    fold_kept_counts()
    vacuum()
    print(f"seeded in {time.perf_counter() - started:.1f}s: {_sizes()}")
    started = time.perf_counter()
    tallies_refresh()
    built = time.perf_counter() - started
    vacuum()
    return built


def vacuum() -> None:
    # What autovacuum does to tables this size soon after they are loaded or rewritten.
    for table in (
        "run",
        "judgement",
        "verdict",
        "finding",
        "ticket",
        "tracerecord",
        "tallyrun",
        "tallyentry",
    ):
        sql(f"VACUUM ANALYZE reviewapp_{table}")


def _sizes() -> str:
    counts = sql(
        "SELECT (SELECT count(*) FROM reviewapp_run), (SELECT count(*) FROM reviewapp_verdict "
        "v JOIN reviewapp_run r ON r.current_judgement_id = v.judgement_id), "
        "(SELECT count(*) FROM reviewapp_verdict), (SELECT count(*) FROM reviewapp_ticket), "
        "(SELECT count(*) FROM reviewapp_tracerecord)"
    )[0]
    return (
        "{:,} runs, {:,} current verdict groups ({:,} in all), {:,} tickets, {:,} records".format(
            *counts
        )
    )


# The limit: the same monthly counts, straight from the stored verdicts, findings, tickets.
LIMIT = """
SELECT month, outcome, count(*) FROM (
  SELECT date_trunc('month', r.started_at AT TIME ZONE %(zone)s) AS month,
    CASE WHEN v.kind = 'resolved' THEN 'rule' WHEN t.id IS NULL THEN 'untracked'
      WHEN t.state = 'open' THEN 'open' WHEN t.resolution = 'explained' THEN 'reviewer'
      ELSE 'closed_unexplained' END AS outcome
  FROM reviewapp_run r
  JOIN reviewapp_verdict v ON v.judgement_id = r.current_judgement_id AND v.kind <> 'confirmed'
  LEFT JOIN reviewapp_ticket t ON v.kind = 'conflict' AND t.run_id = r.id
    AND t.kind = 'conflict' AND t.field = v.field AND t.finding_kind = ''
    AND t.entity IS NOT DISTINCT FROM v.entity
  WHERE r.started_at >= %(first)s AND r.started_at < %(end)s
  UNION ALL
  SELECT date_trunc('month', r.started_at AT TIME ZONE %(zone)s),
    CASE WHEN t.id IS NULL THEN 'untracked' WHEN t.state = 'open' THEN 'open'
      WHEN t.resolution = 'explained' THEN 'reviewer' ELSE 'closed_unexplained' END
  FROM reviewapp_run r
  JOIN reviewapp_finding f ON f.judgement_id = r.current_judgement_id
  LEFT JOIN reviewapp_ticket t ON t.run_id = r.id AND t.kind = 'finding'
    AND t.finding_kind = f.kind
  WHERE r.started_at >= %(first)s AND r.started_at < %(end)s
) d GROUP BY 1, 2
"""
# The page's own GROUP BYs over the reporting copy, raw: the months' counts, their runs,
# and the breakdowns of the month shown and the one before.
LIMIT_REPORTING = (
    "SELECT month, outcome, count(*) FROM reviewapp_tallyentry "
    "WHERE month >= %(first)s AND month < %(end)s GROUP BY 1, 2",
    "SELECT month, count(*), sum(groups) FROM reviewapp_tallyrun "
    "WHERE month >= %(first)s AND month < %(end)s GROUP BY 1",
    "SELECT month, outcome, origin, field, sources, cause, rule, policy_number, agent, "
    "finding_kind, count(*) FROM reviewapp_tallyentry "
    "WHERE month IN ('2026-11-01', '2026-12-01') GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10",
)
WINDOW = {"first": "2025-12-01", "end": "2027-01-01"}


def timed(action) -> float:
    started = time.perf_counter()
    action()
    return (time.perf_counter() - started) * 1000


def limit_counts() -> dict:
    rows = sql(LIMIT, {**WINDOW, "zone": settings.TALLY_TIME_ZONE})
    return {(month.date().replace(day=1), outcome): n for month, outcome, n in rows}


def page_counts() -> dict:
    from reviewapp.reports.calendar import month_parse
    from reviewapp.reports.tally import month_tallies

    found = {}
    for tally in month_tallies(month_parse("2026-01"), month_parse("2026-12")):
        for outcome, n in tally.counts.as_dict().items():
            if n:
                found[(tally.month, outcome)] = n
    return found


def get(client: Client, url: str) -> None:
    response = client.get(url)
    if response.status_code != 200:
        raise SystemExit(f"{url} answered {response.status_code}")


def measure(rounds: int) -> dict:
    from reviewapp.accounts.roles import VIEWER

    user = get_user_model().objects.create_user("bench-viewer")
    user.groups.add(Group.objects.get(name=VIEWER))
    client = Client()
    client.force_login(user)
    if limit_counts() != page_counts():
        raise SystemExit("the page's counts differ from the raw GROUP BY's")
    for _ in range(2):  # warm up: templates compiled, pages in the OS cache
        get(client, PAGE)
        sql(LIMIT, {**WINDOW, "zone": settings.TALLY_TIME_ZONE})
    cache.clear()
    statements = []
    with connection.execute_wrapper(
        lambda run, sql, *rest: statements.append(sql) or run(sql, *rest)
    ):
        get(client, PAGE)
    samples: dict[str, list[float]] = {
        "page_first_seen": [],
        "page_seen_again": [],
        "limit": [],
        "limit_reporting": [],
    }
    for _ in range(rounds):
        cache.clear()
        samples["page_first_seen"].append(timed(lambda: get(client, PAGE)))
        samples["page_seen_again"].append(timed(lambda: get(client, PAGE)))
        samples["limit"].append(
            timed(lambda: sql(LIMIT, {**WINDOW, "zone": settings.TALLY_TIME_ZONE}))
        )
        samples["limit_reporting"].append(
            timed(lambda: [sql(statement, WINDOW) for statement in LIMIT_REPORTING])
        )
    figures = {name: round(statistics.median(values), 1) for name, values in samples.items()}
    figures["page_queries"] = len(statements)
    return figures


def refresh_after_judging_again(count: int) -> float:
    """Judge `count` runs again (a new current judgement, its groups copied), then time
    the refresh that reads them again."""
    from reviewapp.reports.entries import tallies_refresh

    sql(
        "INSERT INTO reviewapp_judgement (run_id, purpose, policy_number, through_record_id, "
        "verdict_count, conflict_count, unsafe_count, finding_count, created_at) "
        "SELECT id, 'active', 1, 3, 5, 0, 0, 0, now() FROM reviewapp_run ORDER BY id LIMIT %s",
        [count],
    )
    sql(
        "INSERT INTO reviewapp_verdict (judgement_id, run_id, position, entity, field, action,"
        " kind, reason, rule, value, evidence, unsafe) "
        "SELECT n.id, v.run_id, v.position, v.entity, v.field, v.action, v.kind, v.reason, "
        "v.rule, v.value, v.evidence, v.unsafe FROM reviewapp_judgement n "
        "JOIN reviewapp_run r ON r.id = n.run_id "
        "JOIN reviewapp_verdict v ON v.judgement_id = r.current_judgement_id "
        "WHERE n.through_record_id = 3"
    )
    sql(
        "UPDATE reviewapp_run r SET current_judgement_id = j.id FROM reviewapp_judgement j "
        "WHERE j.run_id = r.id AND j.through_record_id = 3"
    )
    started = time.perf_counter()
    read_again = tallies_refresh()
    elapsed = (time.perf_counter() - started) * 1000
    if read_again != count:
        raise SystemExit(f"the refresh read {read_again} runs again, not {count}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="verdict groups to seed")
    parser.add_argument("--rounds", type=int, default=15, help="timings of each")
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL"):
        sys.exit("benchmarks/tallies.py needs DATABASE_URL pointing at a PostgreSQL server")
    settings.DATABASES["default"].setdefault("TEST", {})["NAME"] = (
        f"crosscheck_tallies_bench_{os.getpid()}"
    )
    # Not setup_test_environment(): it instruments template rendering for the test client.
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    created = setup_databases(verbosity=0, interactive=False)
    try:
        build_s = seed(args.n)
        figures = measure(args.rounds)
        refresh_ms = refresh_after_judging_again(1000)
    finally:
        teardown_databases(created, verbosity=0)

    for name, value in figures.items():
        print(f"{name:<20}{value:>10}")
    print(f"{'build_s':<20}{build_s:>10.1f}")
    print(f"{'refresh_1000_ms':<20}{refresh_ms:>10.1f}")
    ratio = figures["page_first_seen"] / figures["limit"]
    print(
        json.dumps(
            {
                "benchmark": "tallies",
                "n": args.n,
                "rounds": args.rounds,
                "page_first_seen_ms": figures["page_first_seen"],
                "page_seen_again_ms": figures["page_seen_again"],
                "limit_ms": figures["limit"],
                "limit_reporting_ms": figures["limit_reporting"],
                "page_queries": figures["page_queries"],
                "build_s": round(build_s, 1),
                "refresh_after_1000_runs_judged_again_ms": round(refresh_ms, 1),
                "ratio": round(ratio, 2),
                "reporting_ratio": round(
                    figures["page_first_seen"] / figures["limit_reporting"], 2
                ),
                "goal": GOAL,
                "met": ratio <= GOAL,
            }
        )
    )


if __name__ == "__main__":
    main()
