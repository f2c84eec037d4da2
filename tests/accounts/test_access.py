"""Who may do what on the review desk: every role x every ticket URL x method, checked on the
server. Anonymous visitors are sent to log in, viewers read and are refused every change,
reviewers, approvers and admins work tickets. Nothing outside this table succeeds."""

import pytest
from django.urls import reverse

from reviewapp.models import AuditEvent, Ticket, TicketComment
from tests.seeding import ingest_lines, review_desk_trace

pytestmark = pytest.mark.django_db

READ = ["ticket-queue", "ticket-detail", "ticket-handoff"]
WORK = [
    "ticket-claim",
    "ticket-assign",
    "ticket-comment",
    "ticket-close",
    "ticket-reopen",
    "ticket-bulk",
]
WITHOUT_TICKET = {"ticket-queue", "ticket-bulk"}
LOGIN, OK, REDIRECT, FORBIDDEN, WRONG_METHOD = "login", 200, 302, 403, 405


def expected_table(role: str) -> dict[tuple[str, str], object]:
    """What each role gets: a status code, or LOGIN for a redirect to the login page."""
    table = {}
    for name in READ:
        table[(name, "GET")] = LOGIN if role == "anonymous" else OK
        table[(name, "POST")] = LOGIN if role == "anonymous" else WRONG_METHOD
    for name in WORK:
        table[(name, "GET")] = LOGIN if role == "anonymous" else WRONG_METHOD
        if role == "anonymous":
            table[(name, "POST")] = LOGIN
        elif role == "viewer":
            table[(name, "POST")] = FORBIDDEN
        else:
            table[(name, "POST")] = REDIRECT  # done, or refused with a message on the ticket
    return table


@pytest.fixture
def ticket(tmp_path):
    ingest_lines(tmp_path, review_desk_trace())
    return Ticket.objects.get(run__run_id="run-stale", kind="conflict")


def post_data(name: str, ticket: Ticket, worker: str) -> dict:
    return {
        "ticket-claim": {"revision": ticket.revision},
        "ticket-assign": {"revision": ticket.revision, "assignee": worker},
        "ticket-comment": {"text": "seen"},
        "ticket-close": {"revision": ticket.revision, "resolution": "unexplained"},
        "ticket-reopen": {"revision": ticket.revision},
        "ticket-bulk": {
            "selected": [f"{ticket.pk}:{ticket.revision}"],
            "operation": "assign",
            "assignee": worker,
        },
    }.get(name, {})


def outcome(response) -> object:
    if response.status_code == 302 and response["Location"].startswith(reverse("login")):
        return LOGIN
    return response.status_code


def observed_table(client, ticket: Ticket, worker: str) -> dict[tuple[str, str], object]:
    table = {}
    for name in READ + WORK:
        url = reverse(name) if name in WITHOUT_TICKET else reverse(name, args=[ticket.pk])
        table[(name, "GET")] = outcome(client.get(url))
        ticket.refresh_from_db()
        table[(name, "POST")] = outcome(client.post(url, post_data(name, ticket, worker)))
    return table


def test_anonymous_visitors_are_sent_to_log_in_everywhere(client, ticket):
    assert observed_table(client, ticket, "rita") == expected_table("anonymous")
    assert_untouched(ticket)


def test_viewers_read_everything_and_change_nothing(client, viewer, ticket):
    client.force_login(viewer)
    assert observed_table(client, ticket, "vera") == expected_table("viewer")
    assert_untouched(ticket)


def assert_untouched(ticket: Ticket) -> None:
    ticket.refresh_from_db()
    assert (ticket.revision, ticket.state, ticket.assignee_id) == (1, "open", None)
    assert not AuditEvent.objects.exists() and not TicketComment.objects.exists()


@pytest.mark.parametrize("role", ["reviewer", "approver", "admin_user"])
def test_reviewers_approvers_and_admins_work_tickets(client, ticket, role, request):
    user = request.getfixturevalue(role)
    client.force_login(user)
    assert observed_table(client, ticket, user.username) == expected_table(role)
    # Their changes really happened (assigning to themselves a ticket they hold changes nothing).
    verbs = list(AuditEvent.objects.order_by("id").values_list("verb", flat=True))
    assert verbs == ["claimed", "commented", "closed", "reopened"]
    assert all(event.actor == user for event in AuditEvent.objects.all())
