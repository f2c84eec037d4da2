"""Bulk work on every ticket matching the queue's filters, on the server: the filters
evaluated again on the tickets as the page showed them, confirmed first, permission
checked; and what a finding's queue row says."""

import re

import pytest
from django.urls import reverse

from reviewapp.engine import ToolCall
from reviewapp.models import AuditEvent, Ticket
from reviewapp.review import changes, stamp
from reviewapp.review.finding_summary import summary

pytestmark = pytest.mark.django_db


def test_all_matching_assigns_what_the_filters_select_not_what_the_form_names(
    client, reviewer, second_reviewer, desk
):
    held = desk["run-stale"]
    changes.ticket_claim(held, revision=1, actor=reviewer)
    unassigned = set(
        Ticket.objects.filter(state="open", assignee__isnull=True).values_list("pk", flat=True)
    )
    assert len(unassigned) >= 3
    client.force_login(reviewer)
    page = client.get(reverse("ticket-queue"), {"assignee": "unassigned"}).content.decode()
    # The filter rides along under its own name: the form's "assignee" is whom to assign to.
    assert '<input type="hidden" name="filter-assignee" value="unassigned">' in page
    seen = re.search(r'name="seen" value="([0-9-]+)"', page).group(1)
    posted = {
        "filter-assignee": "unassigned",
        "all_matching": str(len(unassigned)),
        "seen": seen,
        "operation": "assign",
        "assignee": "ravi",
    }
    asked = client.post(reverse("ticket-bulk"), posted).content.decode()
    assert f"Assign {len(unassigned)} tickets?" in asked
    assert "<dt>Assign to</dt><dd>ravi</dd>" in asked
    assert not Ticket.objects.filter(assignee=second_reviewer).exists()  # asked, not done

    response = client.post(reverse("ticket-bulk"), {**posted, "confirmed": "1"})
    assert response["Location"] == "/tickets/?assignee=unassigned"
    assert (
        set(Ticket.objects.filter(assignee=second_reviewer).values_list("pk", flat=True))
        == unassigned
    )
    assert Ticket.objects.get(pk=held.pk).assignee == reviewer
    assert AuditEvent.objects.filter(verb="assigned", ticket__in=unassigned).count() == len(
        unassigned
    )


def test_all_matching_says_when_fewer_match_than_the_page_showed(client, reviewer, desk):
    client.force_login(reviewer)
    posted = {
        "filter-unsafe": "yes",
        "all_matching": "99",
        "seen": stamp.data_stamp().text,
        "operation": "close",
        "resolution": "unexplained",
    }
    asked = client.post(reverse("ticket-bulk"), posted).content.decode()
    assert "Close 2 tickets?" in asked
    assert "the page showed 99" in asked
    assert "<dt>Close as</dt><dd>unexplained</dd>" in asked


def test_all_matching_needs_the_page_it_was_seen_on_and_the_permission(
    client, reviewer, viewer, desk
):
    posted = {"all_matching": "4", "operation": "assign", "assignee": ""}
    client.force_login(viewer)
    assert client.post(reverse("ticket-bulk"), posted).status_code == 403
    client.force_login(reviewer)
    refused = client.post(reverse("ticket-bulk"), posted, follow=True).content.decode()
    assert "the page was too old or damaged" in refused
    assert not AuditEvent.objects.exists()


def call(call_id: str, tool: str, op_id: str | None = None, key: str | None = None) -> ToolCall:
    return ToolCall(
        run_id="r",
        tool_call_id=call_id,
        tool=tool,
        arguments={},
        entity=None,
        ok=True,
        op_id=op_id,
        idempotency_key=key,
        attempt=None,
        outcome=None,
        started_at=None,
        completed_at=None,
    )


def test_a_finding_summary_names_tools_operations_attempts_and_ids():
    retries = {i: call(i, "create_refund", "op-7") for i in ("c1", "c2", "c3")}
    assert summary("retry-without-idempotency-key", ["c1", "c2", "c3"], retries) == (
        "create_refund ×3 in op-7, no idempotency key: c1, c2, c3"
    )
    keyed = {**retries, "c3": call("c3", "create_refund", "op-7", key="k2")}
    assert summary("retry-without-idempotency-key", ["c1", "c2", "c3"], keyed).startswith(
        "create_refund ×3 in op-7, idempotency key missing or changed"
    )
    # Ids no stored call has (an observation's) are named as they are.
    assert summary("orphan-observation", ["obs-1", "obs-2"], {}) == "2 ids: obs-1, obs-2"
    assert summary("orphan-observation", [], {}) == "orphan-observation"
    many = [f"c{i}" for i in range(9)]
    text = summary("tool-outside-allowlist", many, {i: call(i, "drop_table") for i in many})
    assert text == "drop_table ×9: c0, c1, c2, c3, c4, c5 and 3 more"
