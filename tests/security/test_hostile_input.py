"""What people type or pages send never makes a 500 (issue 15, defect 7): a NUL in a queue
filter, a proposal's family, a comment or an assignee, a policy change, the shadow and gate
pages' filters, a bulk change to undo (issue 24, defect 3); a date at the end of the
calendar. Each is refused or ignored, and the page answers. The API's: tests/gate,
tests/ingest/test_api.py and test_api_schema.py."""

import json
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from reviewapp.models import RuleProposal, TicketComment

pytestmark = pytest.mark.django_db

NUL = "x\x00y"


@pytest.mark.parametrize(
    "name",
    ["field", "source", "agent", "assignee", "family", "reason", "action", "finding_kind", "state"],
)
def test_a_nul_in_a_queue_filter_is_ignored(client, reviewer, desk, name):
    client.force_login(reviewer)
    for params in ({name: NUL}, {name: NUL, "group": "family"}):
        response = client.get(reverse("ticket-queue"), params)
        assert response.status_code == 200, params


def test_a_nul_in_a_bulk_change_filter_is_not_a_500(client, reviewer, desk):
    client.force_login(reviewer)
    ticket = desk["run-stale"]
    response = client.post(
        reverse("ticket-bulk"),
        {
            "operation": "assign",
            "assignee": NUL,
            "field": NUL,
            "whole_family": NUL,
            "selected": [f"{ticket.pk}:{ticket.revision}"],
        },
    )
    assert response.status_code in (302, 400)


@pytest.mark.parametrize("day", ["9999-12-31", "0001-01-01"])
def test_dates_at_the_ends_of_the_calendar_are_not_a_500(client, reviewer, desk, day):
    client.force_login(reviewer)
    for name in ("created_from", "created_to"):
        assert client.get(reverse("ticket-queue"), {name: day}).status_code == 200
        assert (
            client.get(reverse("ticket-queue"), {name: day, "group": "family"}).status_code == 200
        )


def test_a_nul_in_a_proposals_family_is_not_a_500(client, reviewer, desk):
    client.force_login(reviewer)
    assert client.get(reverse("policy-propose"), {"family": NUL}).status_code in (200, 400)
    assert client.get(reverse("policy-propose"), {"ticket": NUL}).status_code in (200, 400, 404)


def test_a_nul_in_a_comment_or_an_assignee_is_refused_not_a_500(client, reviewer, desk):
    client.force_login(reviewer)
    ticket = desk["run-stale"]
    url = reverse("ticket-comment", args=[ticket.pk])
    for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
        assert client.post(url, {"text": NUL}, **headers).status_code in (200, 302, 400)
        response = client.post(
            reverse("ticket-assign", args=[ticket.pk]),
            {"revision": ticket.revision, "assignee": NUL},
            **headers,
        )
        assert response.status_code in (200, 302, 400)
        response = client.post(
            reverse("ticket-close", args=[ticket.pk]),
            {
                "revision": ticket.revision,
                "resolution": "explained",
                "cause": "other",
                "cause_text": NUL,
            },
            **headers,
        )
        assert response.status_code in (200, 302, 400)
    assert not TicketComment.objects.exists()


def test_a_nul_anywhere_in_a_query_string_is_not_a_500(client, reviewer, desk):
    client.force_login(reviewer)
    ticket = desk["run-stale"]
    for name in (
        "dashboard",
        "batch-list",
        "token-list",
        "policy-home",
        "proposal-list",
        "policy-draft",
        "policy-diff",
        "policy-propose",
    ):
        for params in (
            {"q": NUL, "page": NUL, "state": NUL, "from": NUL, "to": NUL},
            {"ticket": NUL, "family": NUL, "from": "1", "to": "99999999999999999999"},
        ):
            assert client.get(reverse(name), params).status_code < 500, (name, params)
    assert client.get(reverse("ticket-detail", args=[ticket.pk]), {"next": NUL}).status_code < 500


def test_a_nul_in_a_policy_change_is_refused_naming_where_not_a_500(client, reviewer):
    """A policy document or a normaliser's aliases are JSON: "\\u0000" there is a NUL, which
    PostgreSQL refuses in the proposal it would be stored in."""
    client.force_login(reviewer)
    document = json.loads(Path(settings.DEFAULT_POLICY_PATH).read_text())
    upload = SimpleUploadedFile("policy.json", json.dumps({**document, "name": NUL}).encode())
    response = client.post(
        reverse("policy-import"), {"document": upload, "rationale": "imported"}, follow=True
    )
    assert response.status_code == 200
    assert "document.name: contains a NUL character" in response.content.decode()
    aliases = {
        "kind": "normalizer",
        "field": "status",
        "normalize_kind": "enum",
        "aliases": json.dumps({NUL: "refunded"}),
        "rationale": "aliases",
    }
    for name in ("policy-propose", "policy-propose-preview"):
        response = client.post(reverse(name), aliases)
        assert response.status_code in (200, 400), name
        assert "contains a NUL character" in response.content.decode(), name
    assert not RuleProposal.objects.exists()


def test_a_nul_in_a_filter_of_the_shadow_and_gate_pages_is_ignored(client, viewer):
    client.force_login(viewer)
    for name in ("action", "field", "sources", "agent", "reason"):
        assert client.get(reverse("shadow-runs"), {name: NUL}).status_code == 200, name
    assert client.get(reverse("gate"), {"action": NUL, "decision": NUL}).status_code == 200


def test_a_nul_naming_a_bulk_change_to_undo_is_refused_not_a_500(client, reviewer, desk):
    client.force_login(reviewer)
    response = client.post(reverse("ticket-bulk-undo"), {"bulk": NUL}, follow=True)
    assert response.status_code == 200
    assert "can no longer be undone" in response.content.decode()
