"""Server time of the review desk's pages on many tickets, next to a trivial logged-in page.

    DATABASE_URL=postgres://... python benchmarks/pages.py --n 100000

Creates a throwaway database (a test database beside the one DATABASE_URL names, dropped
at the end), seeds N tickets with bulk inserts plus real ingested runs, then requests pages
in-process with Django's test client, every page once a round for --rounds rounds: the
API-token page (session, user, permissions and one small query: the trivial limit), the
queue unfiltered and filtered, a ticket page seen before, the first look at a ticket never
opened (its evidence is read and rendered), a run's page, the queue searched (SEARCHES: a
ticket number, a run id, an order id, a fragment of one, a search beside filters), and
both queues right after a change: a ticket each selects is closed or reopened (as a
reviewer does, through reviewapp.review.changes), which renames everything the queue
caches about tickets, so its counts, rows and families are read and rendered again.
Prints median and p95 per page; the last line is one JSON object with `ratio` = worst p95
of every page but the trivial one / trivial p95, and `goal` (3.0);
`warm_ratio` leaves out the queues right after a change, `cold_ratio` is those alone,
`search_ratio` the searched queues alone (all within `ratio`). The figures of past runs are
in docs/operations.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
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
from django.contrib.auth import get_user_model  # noqa: E402
from django.contrib.auth.models import Group  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import setup_databases, teardown_databases  # noqa: E402
from django.urls import reverse  # noqa: E402

GOAL = 3.0
FILTERED = {"reason": "partial-result", "source": "erp", "unsafe": "yes"}


def seed(n: int, first_views: int) -> tuple[dict[str, str], list[str]]:
    """Seed the tickets; return the pages to time by name, and tickets never opened yet."""
    from reviewapp.accounts.roles import REVIEWER
    from reviewapp.models import Ticket
    from reviewapp.review.counts import KEPT, fold_kept_counts
    from tests.seeding import ingest_lines, order_entity, review_desk_trace, seed_tickets

    users = get_user_model()
    reviewer = users.objects.create_user("bench-reviewer")
    reviewer.groups.add(Group.objects.get(name=REVIEWER))
    colleagues = [users.objects.create_user(f"bench-colleague-{i}") for i in range(4)]
    for colleague in colleagues:
        colleague.groups.add(Group.objects.get(name=REVIEWER))
    started = time.perf_counter()
    seeded = seed_tickets(n, assignees=[reviewer, *colleagues])
    # Real runs through the ingest pipeline, for ticket pages with real evidence.
    real = review_desk_trace()
    with tempfile.TemporaryDirectory() as tmp:
        ingest_lines(
            Path(tmp),
            real
            + [
                line.replace('"run-', f'"copy{i}-run-') for i in range(first_views) for line in real
            ],
        )
    # The queue folds the counts its trigger kept while loading, as its first read would.
    fold_kept_counts()
    with connection.cursor() as cursor:
        # What autovacuum does to tables this size soon after they are loaded or rewritten.
        for model in (Ticket, *KEPT):
            cursor.execute(f"VACUUM ANALYZE {model._meta.db_table}")
    print(f"seeded {Ticket.objects.count():,} tickets in {time.perf_counter() - started:.1f}s")
    ticket = Ticket.objects.get(run__run_id="run-stale", kind="conflict")
    unseen = Ticket.objects.filter(
        run__run_id__startswith="copy", run__run_id__endswith="-run-stale"
    )
    filtered = "&".join(f"{name}={value}" for name, value in FILTERED.items())
    # A seeded ticket in the middle of the desk, on its own order.
    middle = (
        Ticket.objects.filter(batch=seeded, entity__isnull=False, pk__gte=n // 2)
        .order_by("pk")
        .first()
    )
    searched = f"{reverse('ticket-queue')}?state=any&q="
    pages = {
        "trivial": reverse("token-list"),
        "queue": reverse("ticket-queue"),
        "queue_filtered": f"{reverse('ticket-queue')}?{filtered}",
        "ticket": reverse("ticket-detail", args=[ticket.pk]),
        # The run page (its whole timeline, read every time).
        "run": reverse("run-detail", args=[ticket.run_id]),
        # The search box (review/search.py): a ticket's number; a run's id; the
        # real desk's order id (also the start of a thousand seeded ones at 1,000,000
        # tickets); seven digits from the middle of a seeded order id (a few tickets); the
        # real order id again, beside filters.
        "search_number": f"{searched}%23{middle.pk}",
        "search_run": f"{searched}{middle.run.run_id}",
        "search_order": f"{searched}{ticket.entity}",
        "search_fragment": f"{searched}{order_entity(n // 2)[9:16]}",
        "search_filtered": f"{reverse('ticket-queue')}?unsafe=yes&source=erp&q={ticket.entity}",
    }
    return pages, [
        reverse("ticket-detail", args=[pk]) for pk in unseen.values_list("pk", flat=True)
    ]


def timed_get(client: Client, url: str) -> float:
    started = time.perf_counter()
    response = client.get(url)
    elapsed = time.perf_counter() - started
    if response.status_code != 200:
        raise SystemExit(f"{url} answered {response.status_code}")
    return elapsed * 1000


def p95(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def change_a_ticket(ticket_id: int, reviewer, round_number: int) -> None:
    """What a reviewer does all day: close an open ticket, then reopen it."""
    from reviewapp.models import Ticket
    from reviewapp.review import changes

    ticket = Ticket.objects.get(pk=ticket_id)
    if round_number % 2 == 0:
        changes.ticket_close(
            ticket, revision=ticket.revision, actor=reviewer, resolution="unexplained"
        )
    else:
        changes.ticket_reopen(ticket, revision=ticket.revision, actor=reviewer)


def measure(pages: dict[str, str], unseen: list[str], rounds: int):
    """Every page once a round, in turn, so that all are timed under the same conditions
    (the machine's load drifts; comparing pages timed minutes apart would measure that)."""
    from reviewapp.models import Ticket
    from reviewapp.review.queue import filtered_tickets, queue_filters

    client = Client()
    reviewer = get_user_model().objects.get(username="bench-reviewer")
    client.force_login(reviewer)
    for url in pages.values():  # warm up: templates compiled, connections open
        for _ in range(5):
            timed_get(client, url)
    cold = {"queue_cold": pages["queue"], "queue_filtered_cold": pages["queue_filtered"]}
    samples: dict[str, list[float]] = {name: [] for name in [*pages, "ticket_first_view", *cold]}
    # Each cold queue right after a change to a ticket it selects: its counts are made again
    # (counts.py keeps those of a filtered queue while the tickets it selects do not change).
    filtered = filtered_tickets(queue_filters(FILTERED), reviewer)
    changed = {
        "queue_cold": Ticket.objects.filter(state=Ticket.State.OPEN).order_by("pk")[0].pk,
        "queue_filtered_cold": filtered.order_by("pk")[0].pk,
    }
    for round_number in range(rounds):
        # The queue just after a ticket changed: nothing cached about tickets still applies.
        for name, url in cold.items():
            change_a_ticket(changed[name], reviewer, round_number)
            samples[name].append(timed_get(client, url))
        timed_get(client, pages["queue"])  # not timed: the warm queue is the one seen again
        for name, url in pages.items():
            samples[name].append(timed_get(client, url))
        # The first look at a ticket: its evidence is read and rendered, then kept.
        samples["ticket_first_view"].append(timed_get(client, unseen[round_number]))
    return {
        name: {"median_ms": round(statistics.median(values), 2), "p95_ms": round(p95(values), 2)}
        for name, values in samples.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="tickets to seed")
    parser.add_argument("--rounds", type=int, default=200, help="requests per page")
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL"):
        sys.exit("benchmarks/pages.py needs DATABASE_URL pointing at a PostgreSQL server")

    # A database of its own, whatever else runs against the same server.
    settings.DATABASES["default"].setdefault("TEST", {})["NAME"] = (
        f"crosscheck_pages_bench_{os.getpid()}"
    )
    # Not setup_test_environment(): it instruments template rendering for the test client's
    # assertions, which would be timed as if it were the server's work.
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    created = setup_databases(verbosity=0, interactive=False)
    try:
        pages, unseen = seed(args.n, args.rounds)
        figures = measure(pages, unseen, args.rounds)
    finally:
        teardown_databases(created, verbosity=0)

    print(f"{'page':<22}{'median ms':>12}{'p95 ms':>10}")
    for name, figure in figures.items():
        print(f"{name:<22}{figure['median_ms']:>12.2f}{figure['p95_ms']:>10.2f}")
    trivial = figures["trivial"]["p95_ms"]
    searches = [name for name in figures if name.startswith("search_")]
    warm = ("queue", "queue_filtered", "ticket", "ticket_first_view", "run", *searches)
    cold = ("queue_cold", "queue_filtered_cold")
    worst_warm = max(figures[name]["p95_ms"] for name in warm)
    worst_cold = max(figures[name]["p95_ms"] for name in cold)
    worst_search = max(figures[name]["p95_ms"] for name in searches)
    ratio = max(worst_warm, worst_cold) / trivial
    print(
        json.dumps(
            {
                "benchmark": "pages",
                "n": args.n,
                "rounds": args.rounds,
                "pages": figures,
                "ratio": round(ratio, 2),
                "warm_ratio": round(worst_warm / trivial, 2),
                "cold_ratio": round(worst_cold / trivial, 2),
                "search_ratio": round(worst_search / trivial, 2),
                "goal": GOAL,
                "met": ratio <= GOAL,
            }
        )
    )


if __name__ == "__main__":
    main()
