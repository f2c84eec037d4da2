"""Every route, every role, both methods (matrix rows 17 and 18): the URL resolver is walked,
so that a new route without a line here fails. Anonymous visitors are sent to sign in
everywhere but the sign-in page, the API (a bearer token, else 401) and its document; each
signed-in role gets exactly what its permissions allow: 0 unexpected successes."""

from __future__ import annotations

import uuid
from collections import Counter

import pytest
from django.urls import URLPattern, get_resolver, reverse

from reviewapp.accounts.roles import (
    APPROVE_RULE,
    CLOSE_MONTH,
    ERASE_VALUES,
    INGEST,
    MANAGE_ALERTS,
    MANAGE_PEOPLE,
    MANAGE_REDACTION,
    PROPOSE_RULE,
    ROLE_PERMISSIONS,
    RUN_REPLAY,
    SEE_RAW_DATA,
    WORK_TICKET,
)
from reviewapp.alerts.destinations import destination_add
from reviewapp.ingest.batches import create_batch
from reviewapp.ingest.tokens import create_token
from reviewapp.models import IngestBatch, ReplayResult, RuleSuggestion
from reviewapp.policy.candidates import candidate_of_draft, candidate_of_version
from reviewapp.policy.versions import policy_version_publish, proposal_create, proposal_decide
from reviewapp.replay.fixtures import freeze_ticket
from reviewapp.replay.jobs import job_start, job_work
from reviewapp.shadow.designations import shadow_start
from tests.conftest import make_user

pytestmark = pytest.mark.django_db

OK, LOGIN, FORBIDDEN, METHOD, UNAUTHORIZED, MISSING = "ok", "login", "403", "405", "401", "404"
READ = None  # any signed-in person
# Route name -> who may GET and who may POST: a permission, READ, or METHOD (not allowed).
RULES: dict[str, tuple[object, object]] = {
    "dashboard": (READ, METHOD),
    "glossary": (READ, METHOD),
    "batch-list": (READ, INGEST),
    "batch-detail": (READ, METHOD),
    "batch-progress": (READ, METHOD),
    "batch-retry": (METHOD, INGEST),
    "token-list": (INGEST, INGEST),
    "token-revoke": (METHOD, INGEST),
    "redaction": (MANAGE_REDACTION, MANAGE_REDACTION),
    "people": (MANAGE_PEOPLE, MANAGE_PEOPLE),
    "people-role": (METHOD, MANAGE_PEOPLE),
    "people-active": (METHOD, MANAGE_PEOPLE),
    "people-link": (METHOD, MANAGE_PEOPLE),
    "alerts": (MANAGE_ALERTS, METHOD),
    "alert-destination-add": (METHOD, MANAGE_ALERTS),
    "alert-destination-change": (METHOD, MANAGE_ALERTS),
    "policy-home": (READ, METHOD),
    "policy-version": (READ, METHOD),
    "policy-export": (READ, METHOD),
    "policy-settled": (READ, METHOD),
    "policy-close-settled": (METHOD, WORK_TICKET),
    "policy-diff": (READ, METHOD),
    "policy-draft": (READ, METHOD),
    "policy-publish": (METHOD, APPROVE_RULE),
    "policy-import": (METHOD, PROPOSE_RULE),
    "policy-propose": (PROPOSE_RULE, PROPOSE_RULE),
    "policy-propose-preview": (METHOD, PROPOSE_RULE),
    "proposal-list": (READ, METHOD),
    "proposal-detail": (READ, METHOD),
    "proposal-decide": (METHOD, APPROVE_RULE),
    "suggestions": (READ, METHOD),
    "suggestion-detail": (READ, METHOD),
    "suggestion-impact": (READ, METHOD),
    "suggestion-propose": (METHOD, PROPOSE_RULE),
    "suggestion-dismiss": (METHOD, PROPOSE_RULE),
    "ticket-queue": (READ, METHOD),
    "ticket-bulk": (METHOD, WORK_TICKET),
    "ticket-bulk-undo": (METHOD, WORK_TICKET),
    "ticket-detail": (READ, METHOD),
    "ticket-handoff": (READ, METHOD),
    "ticket-claim": (METHOD, WORK_TICKET),
    "ticket-assign": (METHOD, WORK_TICKET),
    "ticket-comment": (METHOD, WORK_TICKET),
    "ticket-close": (METHOD, WORK_TICKET),
    "ticket-reopen": (METHOD, WORK_TICKET),
    "ticket-raw": (METHOD, SEE_RAW_DATA),  # no role gives it (tests/privacy)
    "line-raw": (METHOD, SEE_RAW_DATA),
    "value-raw": (SEE_RAW_DATA, SEE_RAW_DATA),
    "run-detail": (READ, METHOD),
    "shadow": (READ, METHOD),
    "shadow-runs": (READ, METHOD),
    "shadow-start": (METHOD, APPROVE_RULE),
    "shadow-end": (METHOD, APPROVE_RULE),
    "shadow-backfill": (METHOD, APPROVE_RULE),
    "shadow-backfills": (READ, METHOD),
    "shadow-export-csv": (READ, METHOD),
    "shadow-export-json": (READ, METHOD),
    "gate": (READ, METHOD),
    "gate-mode": (METHOD, APPROVE_RULE),
    "erasure": (ERASE_VALUES, METHOD),
    "erasure-request": (METHOD, ERASE_VALUES),
    "erasure-decide": (METHOD, ERASE_VALUES),
    "tallies": (READ, METHOD),
    "tallies-status": (READ, METHOD),
    "tallies-csv": (READ, METHOD),
    "tallies-json": (READ, METHOD),
    "tally-close": (METHOD, CLOSE_MONTH),
    "tally-discrepancies": (READ, METHOD),
    "tally-reopen": (METHOD, CLOSE_MONTH),
    "replay-jobs": (READ, METHOD),
    "replay-open-tickets": (METHOD, RUN_REPLAY),
    "replay-job": (READ, METHOD),
    "replay-progress": (READ, METHOD),
    "replay-cancel": (METHOD, RUN_REPLAY),
    "replay-retry": (METHOD, RUN_REPLAY),
    "replay-changes": (READ, METHOD),
    "replay-group": (READ, METHOD),
    "replay-json": (READ, METHOD),
    "replay-export": (READ, METHOD),
    "replay-impact-draft": (READ, RUN_REPLAY),
    "replay-impact-proposal": (READ, RUN_REPLAY),
    "replay-fixtures": (READ, METHOD),
    "replay-freeze": (METHOD, RUN_REPLAY),
    "replay-upload": (METHOD, RUN_REPLAY),
    "replay-shared": (METHOD, RUN_REPLAY),
    "replay-fixture": (READ, METHOD),
    "replay-suite": (METHOD, RUN_REPLAY),
    "replay-start": (METHOD, RUN_REPLAY),
    "replay-fixture-export": (READ, METHOD),
}
# Open without a sign-in: (GET, POST) outcomes for everyone.
PUBLIC = {
    "login": (OK, OK),
    # Sign-in with an identity provider: not set up in tests but tests/accounts/test_oidc_sign_in.py
    "oidc-authenticate": (MISSING, METHOD),
    "oidc-callback": (MISSING, METHOD),
    "logout": (METHOD, LOGIN),
    # A one-time link to set a password: one that does not work says so (tests/accounts/test_people).
    "set-password": (OK, OK),
    "api-traces": (METHOD, UNAUTHORIZED),
    "api-batch": (UNAUTHORIZED, METHOD),
    "api-openapi": (OK, METHOD),
    "api-check": (METHOD, UNAUTHORIZED),
    "otlp-traces": (METHOD, UNAUTHORIZED),
}
ROLES = ["anonymous", "viewer", "reviewer", "approver", "admin"]


def route_names() -> set[str]:
    return {p.name for p in get_resolver().url_patterns if isinstance(p, URLPattern) and p.name}


def expected(role: str, name: str, method: str) -> str:
    index = 0 if method == "GET" else 1
    if name == "logout" and role == "anonymous":
        return LOGIN  # nobody to sign out: sent to sign in
    if name in PUBLIC:
        return PUBLIC[name][index]
    rule = RULES[name][index]
    if role == "anonymous":
        return LOGIN
    if rule == METHOD:
        return METHOD
    if rule is READ or f"{rule}" in ROLE_PERMISSIONS[role]:
        return OK
    return FORBIDDEN


def outcome(response) -> str:
    if response.status_code == 302 and response["Location"].startswith(reverse("login")):
        return LOGIN
    if response.status_code < 400:
        return OK
    return str(response.status_code)


def walk_suggestion(ticket) -> int:
    """A suggested rule of the ticket's family, for the routes that take one."""
    return RuleSuggestion.objects.create(
        key=f"authoritative-source:walk-{ticket.pk}:refund-service",
        kind="authoritative-source",
        fingerprint=ticket.fingerprint,
        family_label=ticket.fingerprint_label,
        field="status",
        source="refund-service",
        change={"field": "status", "source": "refund-service"},
        sentence="refund-service owns status",
        agreeing=5,
        decisions=5,
        evidence_stamp="5:15",
    ).pk


def walk_destination() -> int:
    """An alert destination, for the routes that take one."""
    return destination_add(
        name="walk", channel="email", emails="walk@example.com", kinds=["spike"]
    ).pk


@pytest.fixture
def world(tmp_path, desk, reviewer, approver):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"runId": "walk", "type": "run_started"}\n')
    batch = create_batch(channel=IngestBatch.Channel.API, path=path, file_name="t", user=reviewer)
    proposal = proposal_create(
        user=reviewer,
        kind="authoritative-source",
        change={"field": "status", "source": "refund-service"},
        rationale="walk",
    )
    proposal_decide(proposal=proposal, user=approver, approve=True, reason="")
    version = policy_version_publish(user=approver, reason="walk")
    designation = shadow_start(candidate_of_draft(user=reviewer), user=approver)
    ticket = next(iter(desk.values()))
    fixture_set = freeze_ticket(ticket, user=reviewer)
    job = job_start(fixture_set, candidate_of_version(version), user=reviewer, send=False)
    job_work(job.pk, budget=30)
    result = ReplayResult.objects.filter(job=job).first()
    assert result is not None, "the walk needs a changed group to open"
    return {
        "ticket_id": ticket.pk,
        "run_pk": ticket.run_id,
        "public_id": batch.public_id,
        "number": 1,
        "pk": proposal.pk,
        "designation": designation.pk,
        "destination": walk_destination(),
        "month": "2026-11",
        "job": job.pk,
        "fixture_set": fixture_set.pk,
        "result_id": result.pk,
        "user_id": reviewer.pk,  # the people page's changes (an empty form changes nothing)
        "suggestion": walk_suggestion(ticket),
    }


def url_of(name: str, world: dict, user) -> str:
    pattern = next(p for p in get_resolver().url_patterns if getattr(p, "name", None) == name)
    keys = list(pattern.pattern.converters)
    if name == "token-revoke":
        return (
            reverse(name, args=[create_token(user=user, name="walk")[0].pk])
            if user
            else reverse(name, args=[1])
        )
    if name == "set-password":
        return reverse(name, args=["MQ", "not-a-token"])
    if name == "api-batch":
        return reverse(name, args=[uuid.uuid4()])
    if name == "alert-destination-change":
        return reverse(name, args=[world["destination"]])
    if name.startswith("shadow-") and keys == ["pk"]:
        return reverse(name, args=[world["designation"]])
    if name.startswith("replay-") and "pk" in keys and name != "replay-impact-proposal":
        owner = (
            world["fixture_set"]
            if name.startswith(("replay-fixture", "replay-suite", "replay-start"))
            else world["job"]
        )
        return reverse(
            name, kwargs={**{key: world[key] for key in keys if key != "pk"}, "pk": owner}
        )
    return reverse(name, kwargs={key: world[key] for key in keys})


@pytest.mark.parametrize("role", ROLES)
def test_every_route_every_role_both_methods(client, world, role, django_user_model):
    assert route_names() == set(RULES) | set(PUBLIC), "a route without a rule here"
    user = None
    if role != "anonymous":
        user = make_user(django_user_model, f"walk-{role}", role)
        client.force_login(user)
    unexpected, cells = [], Counter()
    for name in sorted(route_names() - {"logout"}) + ["logout"]:
        for method in ("GET", "POST"):
            url = url_of(name, world, user)
            response = client.get(url) if method == "GET" else client.post(url, {})
            seen, want = outcome(response), expected(role, name, method)
            cells[seen == OK] += 1
            if seen != want:
                unexpected.append((name, method, want, seen))
    assert not unexpected, unexpected
    assert sum(cells.values()) == 2 * len(route_names())
