"""What a conflict ticket says it disputes, in its queue row and on its page: the values side
by side, and for a partial result the errors that make it a conflict (their code, the field
they name, the source that reported them), never a bare "refunded vs refunded"."""

import re

import pytest
from django.urls import reverse

from reviewapp.models import Ticket
from reviewapp.policy.versions import policy_version_publish, proposal_create, proposal_decide
from tests.seeding import ingest_lines, line

pytestmark = pytest.mark.django_db


def queue_row(body: str, ticket: Ticket) -> str:
    row = re.search(rf'<tr data-ticket-url="/tickets/{ticket.pk}/[?"].*?</tr>', body, re.S)
    assert row, f"no row for ticket {ticket.pk}"
    return row.group(0)


def values_cell(row: str) -> tuple[str, str]:
    """The values cell of a queue row: its title, and its text without markup."""
    cell = re.search(r'<td class="values" title="([^"]*)">(.*?)</td>', row, re.S)
    assert cell
    return cell.group(1), " ".join(re.sub(r"<[^>]+>", " ", cell.group(2)).split())


def disputed_on_the_page(client, ticket: Ticket) -> str:
    body = client.get(reverse("ticket-detail", args=[ticket.pk])).content.decode()
    paragraph = re.search(r'<p class="disputed-values" id="disputed-values">(.*?)</p>', body, re.S)
    assert paragraph
    return " ".join(re.sub(r"<[^>]+>", " ", paragraph.group(1)).split())


def test_a_partial_result_says_the_errors_that_make_it_a_conflict(client, reviewer, desk):
    partial = desk["run-partial"]
    assert partial.reason == "partial-result"
    client.force_login(reviewer)
    body = client.get(reverse("ticket-queue")).content.decode()
    title, text = values_cell(queue_row(body, partial))
    # Both sources said refunded: what makes it a conflict is the ledger's error and fallback.
    assert text == "refunded vs refunded PAYMENT_EVENTS_UNAVAILABLE, FALLBACK from order-ledger"
    assert title == (
        "refunded (refund-service) vs refunded (order-ledger: PAYMENT_EVENTS_UNAVAILABLE, FALLBACK)"
    )
    assert disputed_on_the_page(client, partial) == (
        "Disputed: refunded (refund-service) vs refunded (order-ledger) "
        "errors: PAYMENT_EVENTS_UNAVAILABLE, FALLBACK"
    )


def test_an_error_about_another_field_is_not_shown_as_a_cause(client, reviewer, desk):
    # run-stale's search index warned about `eta`: its conflict on `status` is of revisions.
    stale = desk["run-stale"]
    client.force_login(reviewer)
    body = client.get(reverse("ticket-queue")).content.decode()
    title, text = values_cell(queue_row(body, stale))
    assert (title, text) == ("Refunded (refund-service) vs paid (search-index)", "Refunded vs paid")
    assert "STALE_READ" not in disputed_on_the_page(client, stale)


def test_the_errors_shown_are_those_naming_the_field_or_none_and_not_harmless(
    client, reviewer, approver, tmp_path
):
    proposal = proposal_create(
        user=reviewer,
        kind="harmless-error",
        change={"field": "status", "code": "AVATAR_UNAVAILABLE"},
        rationale="avatars say nothing of an order",
    )
    proposal_decide(proposal=proposal, user=approver, approve=True, reason="")
    policy_version_publish(user=approver, reason="avatars")
    ingest_lines(
        tmp_path,
        [
            line(runId="r", type="tool_call", toolCallId="c1", tool="t", arguments={"id": "o-1"}),
            line(runId="r", type="tool_call", toolCallId="c2", tool="t", arguments={"id": "o-1"}),
            line(
                runId="r",
                type="tool_observation",
                observationId="a",
                toolCallId="c1",
                source="refund-service",
                status="refunded",
            ),
            line(
                runId="r",
                type="tool_observation",
                observationId="b",
                toolCallId="c2",
                source="<b>ledger</b>",
                status="refunded",
                errors=[
                    "AVATAR_UNAVAILABLE",
                    {"code": "SLOW", "field": "eta"},
                    {"code": "<i>TIMEOUT</i>", "field": "status", "message": "gave up"},
                    {"message": "no code at all"},
                ],
            ),
        ],
    )
    ticket = Ticket.objects.get(run__run_id="r", kind="conflict")
    assert ticket.reason == "partial-result"
    client.force_login(reviewer)
    body = client.get(reverse("ticket-queue")).content.decode()
    row = queue_row(body, ticket)
    assert "<i>" not in row and "<b>" not in row  # trace content stays text
    title, text = values_cell(row)
    shown = "&lt;i&gt;TIMEOUT&lt;/i&gt; on status, an error without a code"
    assert text == f"refunded vs refunded {shown} from &lt;b&gt;ledger&lt;/b&gt;"
    assert title.endswith(f"refunded (&lt;b&gt;ledger&lt;/b&gt;: {shown})")
    assert disputed_on_the_page(client, ticket).endswith(
        f"refunded (&lt;b&gt;ledger&lt;/b&gt;) errors: {shown}"
    )


def test_a_ticket_kept_before_errors_were_kept_shows_its_values(client, reviewer, desk):
    partial = desk["run-partial"]
    Ticket.objects.filter(pk=partial.pk).update(
        disputed=[["refund-service", "refunded"], ["order-ledger", "refunded"]]
    )
    client.force_login(reviewer)
    body = client.get(reverse("ticket-queue")).content.decode()
    assert values_cell(queue_row(body, partial))[1] == "refunded vs refunded"
    assert disputed_on_the_page(client, partial) == (
        "Disputed: refunded (refund-service) vs refunded (order-ledger)"
    )
