"""Which observation was right, marked on closing, and the rules suggested from the marks:
the thresholds, counter-examples, the higher-revision case, what a rule covers already and
what a dismissal holds."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, transaction
from django.urls import reverse

from reviewapp.alerts.destinations import destination_add
from reviewapp.alerts.kinds import SUGGESTION_READY
from reviewapp.models import Alert, AuditEvent, RuleSuggestion, Ticket, TicketMark
from reviewapp.policy.versions import policy_version_publish, proposal_create, proposal_decide
from reviewapp.review import changes
from reviewapp.review.errors import TicketActionError
from reviewapp.review.marks import NONE_RIGHT
from reviewapp.suggestions import decisions, work
from tests.seeding import ingest_lines, observed_run, owned_run

pytestmark = pytest.mark.django_db


def owned_family(tmp_path, runs: int, prefix: str = "own") -> list[Ticket]:
    """`runs` conflicts of one family: order-ledger (payments 40) against search-index
    (search 41) on status, then an action."""
    lines = []
    for number in range(runs):
        lines += owned_run(f"{prefix}-{number}", "order-ledger", "search-index")
    ingest_lines(tmp_path, lines, name=f"{prefix}.jsonl")
    return list(Ticket.objects.filter(run__run_id__startswith=f"{prefix}-").order_by("id"))


def same_domain_family(tmp_path, runs: int, prefix: str = "same") -> list[Ticket]:
    """`runs` conflicts between two sources of one domain, the higher revision alternating
    between them."""
    lines = []
    for number in range(runs):
        low, high = ("ledger", "replica") if number % 2 else ("replica", "ledger")
        lines += observed_run(
            f"{prefix}-{number}",
            [
                (low, "payments", 10 + number, {"status": "paid"}),
                (high, "payments", 20 + number, {"status": "refunded"}),
            ],
        )
    ingest_lines(tmp_path, lines, name=f"{prefix}.jsonl")
    return list(Ticket.objects.filter(run__run_id__startswith=f"{prefix}-").order_by("id"))


def observation_of(ticket: Ticket, source: str) -> str:
    ticket.refresh_from_db()
    index = [entry[0] for entry in ticket.disputed].index(source)
    return ticket.verdict.evidence[index]


def close_marked(ticket: Ticket, user, right: str, cause: str = "replica-lag") -> Ticket:
    ticket.refresh_from_db()
    return changes.ticket_close(
        ticket,
        revision=ticket.revision,
        actor=user,
        resolution="explained",
        cause=cause,
        right=right,
    )


def mark_source(tickets: list[Ticket], user, source: str) -> None:
    for ticket in tickets:
        close_marked(ticket, user, observation_of(ticket, source))


def test_a_close_records_the_right_observation_audited_and_append_only(tmp_path, reviewer):
    (ticket,) = owned_family(tmp_path, 1)
    right = observation_of(ticket, "order-ledger")
    closed = close_marked(ticket, reviewer, right)
    mark = TicketMark.objects.get(ticket=closed)
    assert (mark.observation_id, mark.source, mark.marked_by) == (right, "order-ledger", reviewer)
    # Two domains: their revisions say nothing of each other.
    assert (mark.domain, mark.right_is_higher, mark.ticket_revision) == ("", None, closed.revision)
    event = AuditEvent.objects.filter(ticket=ticket, verb="closed").get()
    assert event.data["right"] == {"observation": right, "source": "order-ledger"}
    assert "order-ledger was right" in changes.describe(event)
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        TicketMark.objects.filter(pk=mark.pk).update(source="search-index")


def test_none_of_them_and_no_mark_are_both_possible_and_a_stranger_is_refused(tmp_path, reviewer):
    first, second, third = owned_family(tmp_path, 3)
    close_marked(first, reviewer, NONE_RIGHT)
    assert TicketMark.objects.get(ticket=first).none_right
    close_marked(second, reviewer, "")
    assert not TicketMark.objects.filter(ticket=second).exists()
    with pytest.raises(TicketActionError, match="not one of this ticket's"):
        close_marked(third, reviewer, "obs-of-another-run")
    third.refresh_from_db()
    assert third.state == "open", "a refused mark closes nothing"


def test_a_source_marked_right_often_enough_is_suggested_with_its_evidence(
    tmp_path, reviewer, second_reviewer
):
    tickets = owned_family(tmp_path, 5)
    mark_source(tickets[:4], reviewer, "order-ledger")
    assert work.suggestions_refresh() == 0, "four decisions are not enough"
    mark_source(tickets[4:], second_reviewer, "order-ledger")
    assert work.suggestions_refresh() == 1
    suggestion = RuleSuggestion.objects.get()
    assert suggestion.kind == "authoritative-source"
    assert suggestion.change == {
        "field": "status",
        "actions": ["issue_refund"],
        "source": "order-ledger",
    }
    assert (suggestion.agreeing, suggestion.decisions) == (5, 5)
    evidence = decisions.suggestion_evidence(suggestion)
    assert {m.ticket_id for m in evidence.agreeing} == {t.pk for t in tickets}
    assert {m.marked_by.username for m in evidence.agreeing} == {"rita", "ravi"}
    assert evidence.counter == []
    assert suggestion.candidate is not None
    assert {"kind": "authoritative-source", "id": "order-ledger-owns-status"}.items() <= (
        suggestion.candidate.document["rules"][-1].items()
    )


def test_the_suggestion_page_shows_its_evidence_and_names_its_impact(
    client, tmp_path, reviewer, second_reviewer
):
    tickets = owned_family(tmp_path, 10)
    mark_source(tickets[:9], reviewer, "order-ledger")
    mark_source(tickets[9:], second_reviewer, "search-index")  # 9 of 10: still suggested
    work.suggestions_refresh()
    suggestion = RuleSuggestion.objects.get()
    client.force_login(second_reviewer)
    page = client.get(reverse("suggestion-detail", args=[suggestion.pk])).content.decode()
    for ticket in tickets:
        assert f'href="{reverse("ticket-detail", args=[ticket.pk])}"' in page
    assert "decided by rita" in page and "decided by ravi" in page  # the counter-example's
    assert "the built-in default + this suggested rule" in page
    assert "policy file" not in page


def test_a_ready_suggestion_raises_its_alert_once_for_its_evidence(
    tmp_path, reviewer, second_reviewer
):
    destination_add(
        name="team", channel="email", emails="team@example.com", kinds=[SUGGESTION_READY]
    )
    tickets = owned_family(tmp_path, 6)
    mark_source(tickets[:5], reviewer, "order-ledger")
    assert work.suggestions_refresh() == 1
    alert = Alert.objects.get(kind=SUGGESTION_READY)
    assert (alert.title, alert.link) == (
        "Suggested rule: " + RuleSuggestion.objects.get().sentence,
        "/policy/suggestions/",
    )
    assert alert.deliveries.count() == 1
    work.suggestions_refresh()
    assert Alert.objects.filter(kind=SUGGESTION_READY).count() == 1, "the same evidence: once"
    mark_source(tickets[5:], second_reviewer, "order-ledger")
    work.suggestions_refresh()
    assert Alert.objects.filter(kind=SUGGESTION_READY).count() == 2, "more evidence: news again"


def test_the_share_threshold_and_counter_examples(tmp_path, reviewer, settings):
    tickets = owned_family(tmp_path, 10)
    mark_source(tickets[:9], reviewer, "order-ledger")
    close_marked(tickets[9], reviewer, observation_of(tickets[9], "search-index"))
    assert work.suggestions_refresh() == 1  # 9 of 10: the default share, 0.9
    evidence = decisions.suggestion_evidence(RuleSuggestion.objects.get())
    assert [m.ticket_id for m in evidence.counter] == [tickets[9].pk]
    assert evidence.counter[0].source == "search-index"
    settings.SUGGEST_MIN_SHARE = 0.95
    assert work.suggestions_refresh() == 0
    assert not RuleSuggestion.objects.exists()
    settings.SUGGEST_MIN_SHARE = 0.9
    settings.SUGGEST_MIN_DECISIONS = 10
    assert work.suggestions_refresh() == 0, "nine of ten agree: fewer than ten decisions"


def test_a_reopened_ticket_no_longer_counts_its_mark(tmp_path, reviewer):
    tickets = owned_family(tmp_path, 5)
    mark_source(tickets, reviewer, "order-ledger")
    assert work.suggestions_refresh() == 1
    ticket = Ticket.objects.get(pk=tickets[0].pk)
    changes.ticket_reopen(ticket, revision=ticket.revision, actor=reviewer)
    assert work.suggestions_refresh() == 0


def test_the_higher_revision_always_right_within_one_domain(tmp_path, reviewer):
    tickets = same_domain_family(tmp_path, 6)
    for ticket in tickets:
        ticket.refresh_from_db()
        higher = next(
            i for i, entry in zip(ticket.verdict.evidence, ticket.disputed, strict=True)
            if entry[1] == "refunded"
        )  # fmt: skip
        close_marked(ticket, reviewer, higher)
    assert {m.right_is_higher for m in TicketMark.objects.all()} == {True}
    assert work.suggestions_refresh() == 1, "the right source alternates: only higher revision"
    suggestion = RuleSuggestion.objects.get()
    assert suggestion.kind == "higher-source-revision"
    assert suggestion.change["revisionDomain"] == "payments"
    assert (suggestion.agreeing, suggestion.decisions) == (6, 6)


def test_one_lower_revision_marked_right_spoils_always_higher(tmp_path, reviewer):
    tickets = same_domain_family(tmp_path, 6)
    for number, ticket in enumerate(tickets):
        ticket.refresh_from_db()
        wanted = "paid" if number == 0 else "refunded"
        right = next(
            i for i, entry in zip(ticket.verdict.evidence, ticket.disputed, strict=True)
            if entry[1] == wanted
        )  # fmt: skip
        close_marked(ticket, reviewer, right)
    assert work.suggestions_refresh() == 0


def test_a_rule_that_covers_it_already_is_not_suggested(tmp_path, reviewer, approver):
    tickets = owned_family(tmp_path, 5)
    mark_source(tickets, reviewer, "order-ledger")
    assert work.suggestions_refresh() == 1
    proposal = proposal_create(
        user=reviewer,
        kind="authoritative-source",
        change={"field": "status", "source": "order-ledger"},
        rationale="it owns it",
    )
    # Pending: proposed already, so no longer waiting, but still listed.
    assert work.suggestions_refresh() == 0
    proposal_decide(proposal=proposal, user=approver, approve=True, reason="")
    policy_version_publish(user=approver, reason="ownership")
    assert work.suggestions_refresh() == 0
    assert not RuleSuggestion.objects.exists(), "covered by the published rule"


def test_a_dismissed_suggestion_stays_dismissed_until_its_evidence_changes(
    tmp_path, reviewer, second_reviewer
):
    tickets = owned_family(tmp_path, 6)
    mark_source(tickets[:5], reviewer, "order-ledger")
    work.suggestions_refresh()
    suggestion = RuleSuggestion.objects.get()
    decisions.suggestion_dismiss(suggestion, user=second_reviewer, reason="a migration window")
    assert work.suggestions_refresh() == 0
    assert work.annotated().get().dismissed
    event = AuditEvent.objects.get(verb="suggestion.dismissed")
    assert (event.actor, event.data["reason"]) == (second_reviewer, "a migration window")
    # Computed again on the same evidence: still dismissed.
    assert work.suggestions_refresh() == 0
    # One decision more: the evidence changed, it is back.
    mark_source(tickets[5:], reviewer, "order-ledger")
    assert work.suggestions_refresh() == 1
    assert RuleSuggestion.objects.get().agreeing == 6


def test_a_suggestion_becomes_a_proposal_that_someone_else_decides(tmp_path, reviewer):
    tickets = owned_family(tmp_path, 5)
    mark_source(tickets, reviewer, "order-ledger")
    work.suggestions_refresh()
    proposal = decisions.suggestion_propose(
        RuleSuggestion.objects.get(), user=reviewer, rationale=""
    )
    assert proposal.state == "pending" and proposal.kind == "authoritative-source"
    assert proposal.change["source"] == "order-ledger"
    assert set(proposal.tickets.values_list("pk", flat=True)) == {t.pk for t in tickets}
    assert "5 of 5" in proposal.rationale
    assert work.ready_suggestions().count() == 0


def test_the_thresholds_over_tallies_alone():
    rows = [
        work.Tally("f1", "", "a", 5, 5, 5, 0, 15),
        work.Tally("f2", "", "a", 4, 4, 4, 0, 10),
        work.Tally("f3", "", "a", 9, 11, 11, 0, 66),
        work.Tally("f3", "", "b", 2, 11, 11, 0, 66),
        work.Tally("f4", "d", "a", 3, 6, 6, 6, 21),
        work.Tally("f4", "d", "b", 3, 6, 6, 6, 21),
    ]
    found = work.suggested(rows, min_decisions=5, min_share=0.9)
    assert sorted(s.key for s in found) == [
        "authoritative-source:f1:a",
        "higher-source-revision:f4:d",
    ]


def test_the_mark_is_on_the_ticket_page_and_in_the_handoff_package(client, tmp_path, reviewer):
    (ticket,) = owned_family(tmp_path, 1)
    right = observation_of(ticket, "order-ledger")
    close_marked(ticket, reviewer, right, cause="normalization")
    client.force_login(reviewer)
    page = client.get(reverse("ticket-detail", args=[ticket.pk])).content.decode()
    assert "Marked right:" in page and f"<code>{right}</code>" in page
    package = client.get(reverse("ticket-handoff", args=[ticket.pk])).json()
    assert package["work"]["rightObservation"] == {
        "observationId": right,
        "source": "order-ledger",
        "noneRight": False,
        "revisionDomain": None,
        "rightWasHigherRevision": None,
        "cause": "normalization",
        "markedBy": "rita",
        "markedAt": TicketMark.objects.get().created_at.isoformat(),
    }


def test_an_open_conflict_offers_its_observations_to_mark(client, tmp_path, reviewer):
    (ticket,) = owned_family(tmp_path, 1)
    client.force_login(reviewer)
    page = client.get(reverse("ticket-detail", args=[ticket.pk])).content.decode()
    assert 'id="mark-right-choices"' in page
    for source in ("order-ledger", "search-index"):
        assert f'value="{observation_of(ticket, source)}"' in page
    assert 'name="right" value="none"' in page


def test_a_marked_close_sends_the_worker_and_an_unmarked_one_does_not(
    tmp_path, reviewer, django_capture_on_commit_callbacks
):
    marked, unmarked = owned_family(tmp_path, 2)
    with django_capture_on_commit_callbacks() as sent:
        close_marked(marked, reviewer, NONE_RIGHT)
    assert len(sent) == 1
    with django_capture_on_commit_callbacks() as sent:
        close_marked(unmarked, reviewer, "")
    assert sent == []
