"""Who may do what outside the review desk (ingest, tokens, policy): every role x URL x
method, checked on the server. Nothing outside this table succeeds."""

import io
import json

import pytest
from django.urls import reverse

from reviewapp.ingest.tokens import create_token
from reviewapp.models import ApiToken, IngestBatch, PolicyVersion, RuleProposal
from reviewapp.policy.versions import policy_version_publish, proposal_create, proposal_decide

pytestmark = pytest.mark.django_db
ROLES = ["anonymous", "viewer", "reviewer", "approver", "admin_user"]
LOGIN = "login"
WORKERS = {"reviewer", "approver", "admin_user"}
APPROVERS = {"approver", "admin_user"}


@pytest.fixture
def world(second_reviewer, django_user_model):
    """A published v1, a pending proposal by someone outside the table, a batch."""
    from tests.conftest import make_user

    outsider = make_user(django_user_model, "olga", "approver")
    proposal_decide(
        proposal=proposal_create(
            user=second_reviewer, kind="require-review", change={"field": "status"}, rationale="x"
        ),
        user=outsider,
        approve=True,
        reason="",
    )
    version = policy_version_publish(user=outsider, reason="first")
    pending = proposal_create(
        user=second_reviewer, kind="require-review", change={"field": "amount"}, rationale="y"
    )
    batch = IngestBatch.objects.create(channel="cli", file_name="t.jsonl", content_sha256="0" * 64)
    return {"version": version, "pending": pending, "batch": batch}


def expectations(role: str, world) -> list[tuple[str, str, str, dict, object]]:
    """(method, label, url, data, expected status or LOGIN)."""
    anonymous = role == "anonymous"

    def read(expected=200):
        return LOGIN if anonymous else expected

    def gated(allowed: bool, success):
        return LOGIN if anonymous else (success if allowed else 403)

    number, pending = world["version"].number, world["pending"].pk
    document = io.BytesIO(json.dumps({"fields": {"status": {}}}).encode())
    document.name = "p.json"
    return [
        ("GET", "dashboard", reverse("dashboard"), {}, read()),
        ("GET", "batches", reverse("batch-list"), {}, read()),
        ("POST", "upload", reverse("batch-list"), {}, gated(role in WORKERS, 200)),
        ("GET", "batch", reverse("batch-detail", args=[world["batch"].public_id]), {}, read()),
        ("POST", "batch", reverse("batch-detail", args=[world["batch"].public_id]), {}, read(405)),
        ("GET", "tokens", reverse("token-list"), {}, gated(role in WORKERS, 200)),
        ("POST", "token create", reverse("token-list"), {"name": "n"}, gated(role in WORKERS, 200)),
        ("GET", "policy", reverse("policy-home"), {}, read()),
        ("POST", "policy", reverse("policy-home"), {}, read(405)),
        ("GET", "version", reverse("policy-version", args=[number]), {}, read()),
        ("GET", "export", reverse("policy-export", args=[number]), {}, read()),
        ("GET", "diff", reverse("policy-diff"), {}, read()),
        ("GET", "draft", reverse("policy-draft"), {}, read()),
        ("GET", "settled", reverse("policy-settled", args=[number]), {}, read()),
        ("GET", "proposals", reverse("proposal-list"), {}, read()),
        ("GET", "proposal", reverse("proposal-detail", args=[pending]), {}, read()),
        ("GET", "propose", reverse("policy-propose"), {}, gated(role in WORKERS, 200)),
        (
            "POST",
            "propose",
            reverse("policy-propose"),
            {"kind": "require-review", "field": "status", "rationale": "z"},
            gated(role in WORKERS, 302),
        ),
        (
            "POST",
            "preview",
            reverse("policy-propose-preview"),
            {"kind": "require-review", "field": "status"},
            gated(role in WORKERS, 200),
        ),
        (
            "POST",
            "import",
            reverse("policy-import"),
            {"document": document, "rationale": "r"},
            gated(role in WORKERS, 302),
        ),
        (
            "POST",
            "decide",
            reverse("proposal-decide", args=[pending]),
            {"decision": "approve"},
            gated(role in APPROVERS, 302),
        ),
        (
            "POST",
            "publish",
            reverse("policy-publish"),
            {"reason": "r"},
            gated(role in APPROVERS, 302),
        ),
        (
            "POST",
            "close settled",
            reverse("policy-close-settled", args=[number]),
            {},
            gated(role in WORKERS, 302),
        ),
        (
            "GET",
            "api batch without a token",
            reverse("api-batch", args=[world["batch"].public_id]),
            {},
            401,
        ),
        ("POST", "api traces without a token", reverse("api-traces"), {}, 401),
    ]


def outcome(response) -> object:
    if response.status_code == 302 and response["Location"].startswith(reverse("login")):
        return LOGIN
    return response.status_code


@pytest.mark.parametrize("role", ROLES)
def test_every_role_gets_exactly_what_the_table_says(client, world, role, request):
    if role != "anonymous":
        client.force_login(request.getfixturevalue(role))
    observed, expected = {}, {}
    for method, label, url, data, status in expectations(role, world):
        response = client.get(url) if method == "GET" else client.post(url, data)
        observed[(method, label)], expected[(method, label)] = outcome(response), status
    assert observed == expected
    changed = (
        RuleProposal.objects.count() > 2
        or PolicyVersion.objects.count() > 1
        or ApiToken.objects.exists()
    )
    assert changed == (role in WORKERS)


def test_a_token_can_only_be_revoked_by_its_owner(client, reviewer, second_reviewer):
    token, _ = create_token(user=second_reviewer, name="theirs")
    client.force_login(reviewer)
    assert client.post(reverse("token-revoke", args=[token.pk])).status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None
