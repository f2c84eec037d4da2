"""Ticket work as plain functions: the queue's filters and counts, and every change, audited,
with exactly one winner when two reviewers act on the same ticket at once."""

import threading
from collections import Counter
from datetime import timedelta

import pytest
from django.core.paginator import Paginator
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from reviewapp.forms import fields as forms
from reviewapp.models import (
    AuditEvent,
    Ticket,
    TicketCombinationDelta,
    TicketComment,
    TicketFacetDelta,
)
from reviewapp.review import changes, counts, errors, queue, stamp
from tests.seeding import ingest_lines, review_desk_trace, seed_tickets

pytestmark = pytest.mark.django_db


def ids(queryset) -> set[int]:
    return set(queryset.values_list("pk", flat=True))


# --- the queue ---------------------------------------------------------------------


def test_the_desk_trace_opens_the_tickets_reviewers_expect(desk):
    assert {run: (t.reason, t.unsafe, t.sources) for run, t in desk.items()} == {
        "run-stale": ("no-approved-precedence", True, "refund-service,search-index"),
        "run-mismatch": ("identity-mismatch", True, "order-ledger,order-service"),
        "run-partial": ("partial-result", False, "order-ledger,refund-service"),
    }
    # The agent resolved what the engine calls a conflict: a finding of its own.
    finding = Ticket.objects.get(kind="finding")
    assert (finding.run.run_id, finding.finding_kind) == ("run-stale", "agent-resolution-disagrees")


@pytest.fixture
def seeded(reviewer, second_reviewer):
    seed_tickets(400, assignees=[reviewer, second_reviewer])
    return list(Ticket.objects.select_related("assignee"))


FILTER_CASES = [
    ({}, lambda t: t.state == "open"),
    ({"state": "closed"}, lambda t: t.state == "closed"),
    ({"state": "any"}, lambda t: True),
    ({"reason": "partial-result"}, lambda t: t.state == "open" and t.reason == "partial-result"),
    (
        {"finding_kind": "orphan-observation"},
        lambda t: t.state == "open" and t.finding_kind == "orphan-observation",
    ),
    ({"field": "amount"}, lambda t: t.state == "open" and t.field == "amount"),
    ({"action": "ship_goods"}, lambda t: t.state == "open" and t.action == "ship_goods"),
    ({"source": "erp"}, lambda t: t.state == "open" and "erp" in t.sources.split(",")),
    ({"unsafe": "yes"}, lambda t: t.state == "open" and t.unsafe),
    ({"unsafe": "no"}, lambda t: t.state == "open" and not t.unsafe),
    ({"assignee": "unassigned"}, lambda t: t.state == "open" and t.assignee_id is None),
    (
        {"assignee": "ravi"},
        lambda t: t.state == "open" and t.assignee and t.assignee.username == "ravi",
    ),
    ({"agent": "stock-agent"}, lambda t: t.state == "open" and t.agent == "stock-agent"),
    ({"family": f"{7:016x}"}, lambda t: t.state == "open" and t.fingerprint == f"{7:016x}"),
    (
        {"reason": "identity-mismatch", "source": "warehouse", "unsafe": "yes", "state": "any"},
        lambda t: (
            t.reason == "identity-mismatch" and "warehouse" in t.sources.split(",") and t.unsafe
        ),
    ),
]


@pytest.mark.parametrize(("params", "expected"), FILTER_CASES)
def test_every_filter_selects_exactly_its_tickets(seeded, reviewer, params, expected):
    filters = queue.queue_filters(params)
    chosen = ids(queue.filtered_tickets(filters, reviewer))
    assert chosen == {t.pk for t in seeded if expected(t)}
    assert chosen  # the seeded data has some of each


def test_assigned_to_me_is_the_signed_in_reviewers_queue(seeded, reviewer, second_reviewer):
    mine = queue.filtered_tickets(queue.queue_filters({"assignee": "me"}), reviewer)
    theirs = queue.filtered_tickets(queue.queue_filters({"assignee": "me"}), second_reviewer)
    assert ids(mine) == {t.pk for t in seeded if t.state == "open" and t.assignee_id == reviewer.pk}
    assert ids(mine) and not ids(mine) & ids(theirs)


def test_a_source_matches_whole_names_only(reviewer, desk):
    Ticket.objects.filter(pk=desk["run-partial"].pk).update(
        sources="order-ledger-replica,refund-service"
    )
    found = queue.filtered_tickets(queue.queue_filters({"source": "order-ledger"}), reviewer)
    assert ids(found) == {desk["run-mismatch"].pk}


def test_a_date_range_includes_both_days(desk, reviewer):
    today = timezone.localdate()
    old = desk["run-stale"]
    Ticket.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=3))

    def between(start, end):
        params = {"created_from": start.isoformat(), "created_to": end.isoformat()}
        return ids(queue.filtered_tickets(queue.queue_filters(params), reviewer))

    assert between(today, today) == ids(Ticket.objects.exclude(pk=old.pk))
    assert between(today - timedelta(days=3), today - timedelta(days=3)) == {old.pk}
    assert between(today - timedelta(days=9), today - timedelta(days=4)) == set()


def test_values_the_queue_cannot_understand_are_ignored():
    filters = queue.queue_filters(
        {
            "created_from": "yesterday",
            "sort": "random()",
            "unsafe": "maybe",
            "group": "x",
            "reason": " partial-result ",
        }
    )
    assert filters == queue.QueueFilters(reason="partial-result")


def test_filters_survive_the_round_trip_through_the_url():
    filters = queue.QueueFilters(
        state="", reason="r", unsafe="yes", assignee="me", sort="oldest", group="family"
    )
    assert queue.queue_filters(filters.as_params()) == filters
    assert queue.QueueFilters().as_params() == {}


@pytest.mark.parametrize("sort", list(queue.SORTS))
def test_each_sort_orders_the_page(seeded, reviewer, sort):
    page = list(queue.queue_tickets(queue.QueueFilters(sort=sort), reviewer)[:400])
    key = {
        "newest": lambda t: (-t.created_at.timestamp(), -t.pk),
        "oldest": lambda t: (t.created_at.timestamp(), t.pk),
        "unsafe": lambda t: (not t.unsafe, -t.created_at.timestamp(), -t.pk),
        "reason": lambda t: (t.reason, -t.created_at.timestamp(), -t.pk),
        "field": lambda t: (t.field, -t.created_at.timestamp(), -t.pk),
    }[sort]
    assert [t.pk for t in page] == [t.pk for t in sorted(page, key=key)]
    assert len(page) == sum(t.state == "open" for t in seeded)


def test_pages_do_not_overlap(seeded, reviewer):
    pages = Paginator(queue.queue_tickets(queue.QueueFilters(), reviewer), 50)
    first, second = pages.page(1), pages.page(2)
    assert len(first) == len(second) == 50
    assert not {t.pk for t in first} & {t.pk for t in second}


@pytest.mark.parametrize(
    "params",
    [{}, {"reason": "partial-result", "unsafe": "yes"}, {"state": "any", "assignee": "me"}],
)
def test_counts_per_filter_value_match_the_filtered_tickets(seeded, reviewer, params):
    filters = queue.queue_filters(params)
    chosen = [t for t in seeded if t.pk in ids(queue.filtered_tickets(filters, reviewer))]
    facets = counts.facet_counts(filters, reviewer)
    assert facets.total == len(chosen)
    assert dict(facets.values("reason")) == Counter(t.reason for t in chosen)
    assert dict(facets.values("field")) == Counter(t.field for t in chosen)
    assert dict(facets.values("unsafe")) == Counter("yes" if t.unsafe else "no" for t in chosen)
    assert dict(facets.values("assignee")) == Counter(
        t.assignee.username if t.assignee else "unassigned" for t in chosen
    )
    assert dict(facets.values("source")) == Counter(
        s for t in chosen for s in t.sources.split(",") if s
    )
    assert dict(facets.values("state")) == Counter(t.state for t in chosen)


def test_counts_follow_every_change_at_once(desk, reviewer):
    before = counts.facet_counts(queue.QueueFilters(), reviewer)
    assert before.total == 4
    changes.ticket_close(desk["run-stale"], revision=1, actor=reviewer, resolution="unexplained")
    after = counts.facet_counts(queue.QueueFilters(), reviewer)
    assert after.total == 3
    assert "no-approved-precedence" not in dict(after.values("reason"))


def test_counts_include_tickets_opened_since(desk, reviewer, tmp_path):
    assert counts.facet_counts(queue.QueueFilters(), reviewer).total == 4
    more = [line.replace('"run-', '"again-run-') for line in review_desk_trace()]
    ingest_lines(tmp_path, more, "more.jsonl")
    assert counts.facet_counts(queue.QueueFilters(), reviewer).total == 8


def kept_and_counted(state: str, user) -> tuple[dict, dict]:
    """The counts PostgreSQL keeps for the queue filtered by `state`, beside the same counts
    made by reading the tickets."""
    filters = queue.QueueFilters(state=state)
    assert counts._counted_by_the_database(filters)
    kept = counts._kept_facets(state).counts
    counted = counts._count_facets(queue.filtered_tickets(filters, user)).counts
    return kept, counted


def change_tickets_every_way(seeded, desk, reviewer, second_reviewer, tmp_path) -> None:
    """Ingested tickets arrive by COPY, seeded ones by INSERT: change some of each in every
    way a reviewer can (claim, close, bulk assign and close, reopen), then ingest more."""
    changes.ticket_claim(desk["run-stale"], revision=1, actor=reviewer)
    changes.ticket_close(desk["run-partial"], revision=1, actor=reviewer, resolution="unexplained")
    open_seeded = {t.pk: t.revision for t in seeded if t.state == "open"}
    some = dict(list(open_seeded.items())[:30])
    changes.tickets_assign(some, actor=reviewer, assignee=second_reviewer)
    closed = changes.tickets_close(
        dict(Ticket.objects.filter(pk__in=some).values_list("pk", "revision")),
        actor=reviewer,
        resolution="explained",
        cause="replica-lag",
    )
    assert len(closed.changed) == 30
    reopened = Ticket.objects.filter(state="closed").order_by("pk").first()
    changes.ticket_reopen(reopened, revision=reopened.revision, actor=second_reviewer)
    ingest_lines(tmp_path, [line.replace('"run-', '"more-run-') for line in review_desk_trace()])


def test_the_kept_counts_follow_ingests_and_every_kind_of_change(
    seeded, desk, reviewer, second_reviewer, tmp_path
):
    change_tickets_every_way(seeded, desk, reviewer, second_reviewer, tmp_path)
    for state in ("open", "closed", ""):
        kept, counted = kept_and_counted(state, reviewer)
        assert kept == counted
    assert dict(kept["state"]) == dict(Counter(Ticket.objects.values_list("state", flat=True)))


def test_folding_the_kept_counts_changes_none_of_them(seeded, reviewer):
    before = kept_and_counted("open", reviewer)[0]
    counts.fold_facet_deltas()
    assert kept_and_counted("open", reviewer)[0] == before
    rows = TicketFacetDelta.objects.values_list("state", "dimension", "value")
    assert len(rows) == len(set(rows)), "one row per value once folded"


COMBINED_FILTERS = [
    {"reason": "partial-result"},
    {"reason": "partial-result", "source": "erp", "unsafe": "yes"},
    {"state": "any", "assignee": "me"},
    {"state": "closed", "agent": "refund-agent", "field": "amount"},
    {"assignee": "unassigned", "action": "issue_refund", "finding_kind": ""},
    {"state": "any", "assignee": "ravi", "source": "warehouse"},
]


def combined_and_counted(params: dict, user) -> tuple[dict, dict]:
    """The counts within these filters summed from the combinations PostgreSQL keeps,
    beside the same counts made by reading the tickets."""
    filters = queue.queue_filters(params)
    assert counts._combinations_kept_by_the_database(filters)
    combined = counts._combined_facets(filters, user).counts
    counted = counts._count_facets(queue.filtered_tickets(filters, user)).counts
    return combined, counted


def test_the_kept_combinations_follow_ingests_and_every_kind_of_change(
    seeded, desk, reviewer, second_reviewer, tmp_path
):
    change_tickets_every_way(seeded, desk, reviewer, second_reviewer, tmp_path)
    assert TicketCombinationDelta.objects.filter(tickets__lt=0).exists(), "changes were kept"
    for params in COMBINED_FILTERS:
        combined, counted = combined_and_counted(params, reviewer)
        assert combined == counted, params
    some = combined_and_counted({"reason": "partial-result"}, reviewer)[0]
    assert sum(n for _, n in some["state"]) > 0


def test_folding_the_kept_combinations_changes_none_of_them(
    seeded, desk, reviewer, second_reviewer, tmp_path
):
    change_tickets_every_way(seeded, desk, reviewer, second_reviewer, tmp_path)
    before = [combined_and_counted(params, reviewer)[0] for params in COMBINED_FILTERS]
    counts.fold_combination_deltas()
    assert [combined_and_counted(params, reviewer)[0] for params in COMBINED_FILTERS] == before
    assert not TicketCombinationDelta.objects.filter(tickets__lte=0).exists()
    rows = [
        repr(sorted(c.items()))
        for c in TicketCombinationDelta.objects.values_list("combination", flat=True)
    ]
    assert len(rows) == len(set(rows)), "one row per combination once folded"


def test_beat_folds_the_kept_counts_every_minute(
    seeded, desk, reviewer, second_reviewer, tmp_path, settings
):
    from reviewapp.tasks import fold_kept_counts_task

    schedule = settings.CELERY_BEAT_SCHEDULE["fold-kept-counts"]
    assert (schedule["task"], schedule["schedule"]) == (fold_kept_counts_task.name, 60.0)
    change_tickets_every_way(seeded, desk, reviewer, second_reviewer, tmp_path)
    before = [combined_and_counted(params, reviewer)[0] for params in COMBINED_FILTERS]
    assert TicketCombinationDelta.objects.filter(tickets__lt=0).exists()
    assert TicketFacetDelta.objects.filter(tickets__lt=0).exists()
    fold_kept_counts_task()
    assert not TicketCombinationDelta.objects.filter(tickets__lt=0).exists()
    assert not TicketFacetDelta.objects.filter(tickets__lt=0).exists()
    assert [combined_and_counted(params, reviewer)[0] for params in COMBINED_FILTERS] == before


def test_combined_counts_are_kept_and_brought_up_to_date_from_the_rows_appended(
    seeded, reviewer, second_reviewer, monkeypatch
):
    summed = []
    sum_them = counts._sum_combinations
    monkeypatch.setattr(
        counts, "_sum_combinations", lambda *args: summed.append(args) or sum_them(*args)
    )
    params = {"reason": "partial-result", "source": "erp"}
    filters = queue.queue_filters(params)

    def plain():
        return counts._count_facets(queue.filtered_tickets(filters, reviewer)).counts

    selected = set(queue.filtered_tickets(filters, reviewer).values_list("pk", flat=True))
    before = counts.facet_counts(filters, reviewer)
    assert before.counts == plain() and len(summed) == 1
    outside = next(t for t in seeded if t.state == "open" and t.pk not in selected)
    changes.ticket_close(
        outside, revision=outside.revision, actor=reviewer, resolution="unexplained"
    )
    after = counts.facet_counts(filters, reviewer)
    # The data stamp names new data; the counts of these filters are as they were.
    assert after.seen != before.seen and after.counted_as == before.counted_as
    assert after.counts == before.counts
    # Changes to tickets they select: brought up to date from the rows appended, never
    # summed again, and the same as counting the tickets.
    inside = [t for t in seeded if t.state == "open" and t.pk in selected][:3]
    changes.ticket_close(
        inside[0], revision=inside[0].revision, actor=reviewer, resolution="unexplained"
    )
    changes.tickets_assign(
        {t.pk: Ticket.objects.get(pk=t.pk).revision for t in inside[1:]},
        actor=reviewer,
        assignee=second_reviewer,
    )
    changed = counts.facet_counts(filters, reviewer)
    assert changed.counted_as != before.counted_as and changed.total == before.total - 1
    assert changed.counts == plain() and len(summed) == 1
    reopened = Ticket.objects.get(pk=inside[0].pk)
    changes.ticket_reopen(reopened, revision=reopened.revision, actor=reviewer)
    again = counts.facet_counts(filters, reviewer)
    assert again.counts == plain() and again.total == before.total and len(summed) == 1
    # A fold writes every row again: the counts are summed again, and are the same.
    counts.fold_combination_deltas()
    folded = counts.facet_counts(filters, reviewer)
    assert len(summed) == 2 and folded.counts == plain()


def test_reading_many_unfolded_combinations_folds_them(seeded, reviewer, monkeypatch):
    monkeypatch.setattr(counts, "FOLD_COMBINATION_ROWS_AFTER", 0)
    changes.tickets_assign(
        {t.pk: t.revision for t in seeded if t.state == "open"}, actor=reviewer, assignee=None
    )
    assert TicketCombinationDelta.objects.filter(tickets__lt=0).exists()
    combined, counted = combined_and_counted({"state": "any", "agent": "stock-agent"}, reviewer)
    assert combined == counted
    assert not TicketCombinationDelta.objects.filter(tickets__lt=0).exists()


def test_families_are_counted_largest_first(seeded, reviewer):
    filters = queue.QueueFilters()
    version = queue.queue_version(filters, reviewer)
    found = queue.families(filters, reviewer, limit=500, version=version)
    expected = Counter(t.fingerprint for t in seeded if t.state == "open")
    assert {f.fingerprint: f.size for f in found} == expected
    assert [f.size for f in found] == sorted((f.size for f in found), reverse=True)
    unsafe = Counter(t.fingerprint for t in seeded if t.state == "open" and t.unsafe)
    assert all(f.unsafe == unsafe[f.fingerprint] for f in found)


# --- changes ----------------------------------------------------------------------


def test_claiming_holds_the_ticket_and_is_audited(desk, reviewer):
    ticket = changes.ticket_claim(desk["run-stale"], revision=1, actor=reviewer)
    assert (ticket.assignee, ticket.revision) == (reviewer, 2)
    event = AuditEvent.objects.get(ticket=ticket)
    assert (event.actor, event.verb) == (reviewer, "claimed")
    assert event.data == {
        "revision": 2,
        "before": {
            "state": "open",
            "assignee": None,
            "resolution": "",
            "cause": "",
            "cause_text": "",
        },
        "after": {
            "state": "open",
            "assignee": "rita",
            "resolution": "",
            "cause": "",
            "cause_text": "",
        },
    }


def test_a_stale_change_loses_and_says_who_did_what(desk, reviewer, second_reviewer):
    ticket = desk["run-stale"]
    changes.ticket_claim(ticket, revision=1, actor=second_reviewer)
    with pytest.raises(changes.StaleChangeError) as lost:
        changes.ticket_close(ticket, revision=1, actor=reviewer, resolution="unexplained")
    assert "ravi claimed it" in str(lost.value) and "revision 2" in str(lost.value)
    assert lost.value.stale.last_event.actor == second_reviewer
    ticket.refresh_from_db()
    assert (ticket.state, ticket.assignee, ticket.revision) == ("open", second_reviewer, 2)
    assert AuditEvent.objects.filter(ticket=ticket).count() == 1


def test_the_loser_hears_of_the_change_that_won_not_of_a_comment_since(
    desk, reviewer, second_reviewer
):
    ticket = desk["run-stale"]
    changes.ticket_close(ticket, revision=1, actor=second_reviewer, resolution="unexplained")
    changes.ticket_comment(ticket, actor=second_reviewer, text="closing: known lag")
    with pytest.raises(changes.StaleChangeError, match="ravi closed it as unexplained"):
        changes.ticket_claim(ticket, revision=1, actor=reviewer)


def test_claiming_a_ticket_someone_holds_is_refused(desk, reviewer, second_reviewer):
    changes.ticket_claim(desk["run-stale"], revision=1, actor=second_reviewer)
    with pytest.raises(errors.TicketActionError, match="ravi holds this ticket"):
        changes.ticket_claim(desk["run-stale"], revision=2, actor=reviewer)


@pytest.mark.django_db(transaction=True)
def test_two_reviewers_at_once_exactly_one_wins(tmp_path, reviewer, second_reviewer):
    ingest_lines(tmp_path, review_desk_trace())
    ticket = Ticket.objects.get(run__run_id="run-stale", kind="conflict")
    barrier = threading.Barrier(2)
    results = {}

    def act(user, change):
        try:
            barrier.wait()
            results[user.username] = change(user)
        except changes.StaleChangeError as stale:
            results[user.username] = stale
        finally:
            connection.close()

    workers = [
        threading.Thread(
            target=act, args=(reviewer, lambda u: changes.ticket_claim(ticket, revision=1, actor=u))
        ),
        threading.Thread(
            target=act,
            args=(
                second_reviewer,
                lambda u: changes.ticket_close(
                    ticket, revision=1, actor=u, resolution="unexplained"
                ),
            ),
        ),
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(10)
    lost = [r for r in results.values() if isinstance(r, changes.StaleChangeError)]
    won = [r for r in results.values() if isinstance(r, Ticket)]
    assert len(won) == 1 and len(lost) == 1
    ticket.refresh_from_db()
    assert ticket.revision == 2
    winner = AuditEvent.objects.get(ticket=ticket)
    assert lost[0].stale.last_event == winner
    assert winner.actor.username in str(lost[0])


@pytest.mark.django_db(transaction=True)
def test_a_change_that_wins_between_read_and_write_makes_the_guarded_update_fail(
    tmp_path, reviewer, second_reviewer, monkeypatch
):
    """The race the revision guard exists for: both read revision 1, the other writes first."""
    ingest_lines(tmp_path, review_desk_trace())
    ticket = Ticket.objects.get(run__run_id="run-stale", kind="conflict")
    check_open = changes._require_open

    def claim():
        monkeypatch.undo()  # the other reviewer's claim runs unhindered
        changes.ticket_claim(ticket, revision=1, actor=second_reviewer)
        connection.close()

    def someone_else_claims_first(current):
        other = threading.Thread(target=claim)
        other.start()
        other.join(10)
        return check_open(current)

    monkeypatch.setattr(changes, "_require_open", someone_else_claims_first)
    with pytest.raises(changes.StaleChangeError, match="ravi claimed it"):
        changes.ticket_close(ticket, revision=1, actor=reviewer, resolution="unexplained")
    ticket.refresh_from_db()
    assert (ticket.state, ticket.assignee, ticket.revision) == ("open", second_reviewer, 2)
    assert list(AuditEvent.objects.values_list("verb", flat=True)) == ["claimed"]


def test_explained_needs_a_cause_and_other_needs_words(desk, reviewer):
    ticket = desk["run-stale"]
    with pytest.raises(errors.TicketActionError, match="needs one of the causes offered"):
        changes.ticket_close(ticket, revision=1, actor=reviewer, resolution="explained")
    with pytest.raises(errors.TicketActionError, match="needs a few words"):
        changes.ticket_close(
            ticket,
            revision=1,
            actor=reviewer,
            resolution="explained",
            cause="other",
            cause_text="  ",
        )
    with pytest.raises(errors.TicketActionError, match="needs one of the causes offered"):
        changes.ticket_close(
            ticket, revision=1, actor=reviewer, resolution="explained", cause="clocks"
        )
    with pytest.raises(errors.TicketActionError, match="explained or unexplained"):
        changes.ticket_close(ticket, revision=1, actor=reviewer, resolution="fixed")
    assert not AuditEvent.objects.exists()
    closed = changes.ticket_close(
        ticket,
        revision=1,
        actor=reviewer,
        resolution="explained",
        cause="other",
        cause_text="clock skew",
    )
    assert (closed.state, closed.resolution, closed.cause, closed.cause_text) == (
        "closed",
        "explained",
        "other",
        "clock skew",
    )
    assert (closed.closed_by, closed.closed_at is not None) == (reviewer, True)


def test_unexplained_keeps_no_cause_and_a_closed_ticket_cannot_close_again(desk, reviewer):
    closed = changes.ticket_close(
        desk["run-stale"], revision=1, actor=reviewer, resolution="unexplained", cause="replica-lag"
    )
    assert (closed.resolution, closed.cause) == ("unexplained", "")
    with pytest.raises(errors.TicketActionError, match="closed"):
        changes.ticket_close(closed, revision=2, actor=reviewer, resolution="unexplained")


def test_reopening_clears_the_closure_and_the_trail_keeps_it(desk, reviewer):
    closed = changes.ticket_close(
        desk["run-stale"], revision=1, actor=reviewer, resolution="explained", cause="replica-lag"
    )
    reopened = changes.ticket_reopen(closed, revision=2, actor=reviewer)
    assert (
        reopened.state,
        reopened.resolution,
        reopened.cause,
        reopened.closed_by,
        reopened.closed_at,
    ) == ("open", "", "", None, None)
    trail = list(AuditEvent.objects.filter(ticket=reopened).order_by("id"))
    assert [e.verb for e in trail] == ["closed", "reopened"]
    assert (
        trail[1].data["before"]["cause"] == "replica-lag" and trail[1].data["after"]["cause"] == ""
    )
    assert changes.describe(trail[0]) == "closed it as explained (replica lag)"
    with pytest.raises(errors.TicketActionError, match="already open"):
        changes.ticket_reopen(reopened, revision=3, actor=reviewer)


def test_assigning_to_someone_who_may_not_work_tickets_is_refused(
    desk, reviewer, viewer, second_reviewer
):
    with pytest.raises(errors.TicketActionError, match="vera may not work tickets"):
        changes.ticket_assign(desk["run-stale"], revision=1, actor=reviewer, assignee=viewer)
    assigned = changes.ticket_assign(
        desk["run-stale"], revision=1, actor=reviewer, assignee=second_reviewer
    )
    assert assigned.assignee == second_reviewer
    unassigned = changes.ticket_assign(assigned, revision=2, actor=reviewer, assignee=None)
    assert unassigned.assignee is None
    assert [changes.describe(e) for e in AuditEvent.objects.order_by("id")] == [
        "assigned it to ravi",
        "unassigned it",
    ]


def test_bulk_changes_skip_and_report_what_moved_meanwhile(desk, reviewer, second_reviewer):
    stale, mismatch, partial = desk["run-stale"], desk["run-mismatch"], desk["run-partial"]
    changes.ticket_claim(
        mismatch, revision=1, actor=second_reviewer
    )  # after the queue was rendered
    changes.ticket_close(partial, revision=1, actor=second_reviewer, resolution="unexplained")
    outcome = changes.tickets_assign(
        {stale.pk: 1, mismatch.pk: 1, partial.pk: 2}, actor=reviewer, assignee=reviewer
    )
    assert outcome.changed == sorted([stale.pk, partial.pk])
    assert [c.ticket.pk for c in outcome.stale] == [mismatch.pk]
    mismatch.refresh_from_db()
    assert mismatch.assignee == second_reviewer
    assert (
        outcome.summary("assigned")
        == "2 tickets assigned; 1 changed by someone else first, left alone."
    )


def test_bulk_close_of_a_whole_family_leaves_closed_tickets_alone(seeded, reviewer):
    states: dict[str, set[str]] = {}
    for t in seeded:
        states.setdefault(t.fingerprint, set()).add(t.state)
    family = next(f for f, found in sorted(states.items()) if found == {"open", "closed"})
    members = [t for t in seeded if t.fingerprint == family]
    open_ones = {t.pk for t in members if t.state == "open"}
    assert open_ones and len(open_ones) < len(members)
    expected = changes.family_revisions(family, stamp.data_stamp())
    assert set(expected) == open_ones
    outcome = changes.tickets_close(
        expected, actor=reviewer, resolution="explained", cause="normalization"
    )
    assert set(outcome.changed) == open_ones
    assert not Ticket.objects.filter(fingerprint=family, state="open").exists()
    assert AuditEvent.objects.filter(verb="closed", ticket__fingerprint=family).count() == len(
        open_ones
    )


def test_a_whole_family_change_reports_tickets_changed_since_the_page_was_seen(
    seeded, reviewer, second_reviewer
):
    family, size = Counter(t.fingerprint for t in seeded if t.state == "open").most_common(1)[0]
    open_ones = Ticket.objects.filter(fingerprint=family, state="open").order_by("pk")
    assert open_ones.count() == size >= 2
    seen = stamp.data_stamp()  # the page as the reviewer loaded it
    claimed = open_ones[0]
    changes.ticket_claim(claimed, revision=claimed.revision, actor=second_reviewer)
    changes.ticket_comment(open_ones[1], actor=second_reviewer, text="a comment changes nothing")
    outcome = changes.tickets_assign(
        changes.family_revisions(family, seen), actor=reviewer, assignee=reviewer
    )
    assert claimed.pk not in outcome.changed
    assert [c.ticket.pk for c in outcome.stale] == [claimed.pk]
    claimed.refresh_from_db()
    assert claimed.assignee == second_reviewer  # not silently taken over
    assert open_ones[1].pk in outcome.changed


def test_tickets_opened_after_the_page_was_seen_are_left_out(desk, reviewer, tmp_path):
    family = desk["run-stale"].fingerprint
    seen = stamp.data_stamp()
    ingest_lines(tmp_path, [line.replace('"run-', '"later-run-') for line in review_desk_trace()])
    later = Ticket.objects.get(run__run_id="later-run-stale", kind="conflict")
    assert later.fingerprint == family
    assert later.pk not in changes.family_revisions(family, seen)
    assert later.pk in changes.family_revisions(family, stamp.data_stamp())


def test_a_damaged_page_stamp_is_refused():
    for text in ("", "1-2-3", "1-2-x-4", "١-2-3-4", "1-2-3-4-5"):
        with pytest.raises(errors.TicketActionError):
            stamp.DataStamp.from_text(text)
    assert stamp.DataStamp.from_text("7-8-9-0") == stamp.DataStamp(7, 8, 9, 0)


def test_no_reviewer_can_record_the_policy_cause_by_hand(desk, reviewer):
    ticket = desk["run-stale"]
    with pytest.raises(errors.TicketActionError, match="one of the causes offered"):
        changes.ticket_close(
            ticket, revision=ticket.revision, actor=reviewer, resolution="explained", cause="policy"
        )
    ticket.refresh_from_db()
    assert ticket.state == "open"


def test_a_selection_is_read_as_rendered():
    assert forms.parse_selection(["4:2", "9:1", "x:1", "5", "7:", "²:1", "3:²"]) == {4: 2, 9: 1}


def test_comments_are_kept_in_order_and_audited(desk, reviewer):
    ticket = desk["run-stale"]
    changes.ticket_comment(ticket, actor=reviewer, text=" first ")
    changes.ticket_comment(ticket, actor=reviewer, text="second")
    with pytest.raises(errors.TicketActionError):
        changes.ticket_comment(ticket, actor=reviewer, text="   ")
    assert [c.text for c in TicketComment.objects.filter(ticket=ticket)] == ["first", "second"]
    assert AuditEvent.objects.filter(ticket=ticket, verb="commented").count() == 2
    ticket.refresh_from_db()
    assert ticket.revision == 1  # a comment changes nothing a concurrent change could overwrite


@pytest.mark.parametrize(
    "statement", ["UPDATE {table} SET text = 'rewritten'", "DELETE FROM {table}"]
)
def test_the_database_refuses_to_rewrite_or_delete_a_comment(desk, reviewer, statement):
    changes.ticket_comment(desk["run-stale"], actor=reviewer, text="what I saw")
    with (
        pytest.raises(DatabaseError, match="append-only|permission denied"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(statement.format(table=TicketComment._meta.db_table))
    assert TicketComment.objects.get().text == "what I saw"
