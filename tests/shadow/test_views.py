"""The shadow page, its drill-down, exports and the gate page: login everywhere, the
approver's actions checked on the server, a bounded number of queries, trace content
escaped, CSV cells neutralised."""

import csv
import io
import json

import pytest
from django.urls import reverse

from reviewapp.gate.modes import mode_set
from reviewapp.models import AuditEvent, GateAnswer, ShadowBackfill, ShadowDesignation
from reviewapp.shadow.judging import shadow_judge_batch
from tests.seeding import ingest_lines, line
from tests.shadow.conftest import demo_month

pytestmark = pytest.mark.django_db

READ_PAGES = ["shadow", "shadow-runs", "gate", "shadow-export-csv", "shadow-export-json"]


@pytest.fixture
def in_shadow(draft_in_shadow, tmp_path):
    summary = demo_month(tmp_path, runs=40, seed=21, name="while-in-shadow.jsonl")
    shadow_judge_batch(max(summary.batch_pks))
    return draft_in_shadow


@pytest.mark.parametrize("name", READ_PAGES)
def test_every_page_needs_a_login(client, name):
    response = client.get(reverse(name))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


@pytest.mark.parametrize("name", READ_PAGES)
def test_viewers_read_every_page(client, viewer, in_shadow, name):
    client.force_login(viewer)
    response = client.get(reverse(name))
    assert response.status_code == 200


def test_only_approvers_act(client, viewer, reviewer, approver, in_shadow):
    posts = [
        (reverse("shadow-start"), {"candidate": "draft", "reason": "again"}),
        (reverse("shadow-end", args=[in_shadow.pk]), {"reason": "done"}),
        (
            reverse("shadow-backfill", args=[in_shadow.pk]),
            {"since": "2026-11-01", "until": "2026-11-02"},
        ),
        (reverse("gate-mode"), {"action": "ship_goods", "mode": "enforce", "reason": "reviewed"}),
    ]
    for user in (viewer, reviewer):
        client.force_login(user)
        for url, data in posts:
            assert client.post(url, data).status_code == 403, (user, url)
    assert ShadowDesignation.objects.count() == 1 and not ShadowBackfill.objects.exists()
    client.force_login(approver)
    for url, data in posts[2:] + posts[1:2]:
        assert client.post(url, data).status_code == 302, url
    in_shadow.refresh_from_db()
    assert not in_shadow.is_open
    assert ShadowBackfill.objects.get().since.isoformat() == "2026-11-01"
    verbs = set(AuditEvent.objects.values_list("verb", flat=True))
    assert {"shadow.started", "shadow.ended", "shadow.backfill", "gate.mode"} <= verbs


def test_an_approver_puts_a_proposal_in_shadow_with_a_backfill(client, approver, demo_desk):
    from reviewapp.policy.versions import proposal_create

    proposal = proposal_create(
        user=approver,
        kind="require-review",
        change={"field": "status", "actions": ["send_status_message"]},
        rationale="ask first",
    )
    client.force_login(approver)
    page = client.get(reverse("shadow")).content.decode()
    assert f'value="proposal-{proposal.pk}"' in page and 'value="draft"' in page
    response = client.post(
        reverse("shadow-start"),
        {
            "candidate": f"proposal-{proposal.pk}",
            "reason": "look before deciding",
            "since": "2026-11-01",
            "until": "2026-11-20",
        },
        follow=True,
    )
    designation = ShadowDesignation.objects.get()
    assert designation.candidate.proposal == proposal
    assert "is in shadow" in response.content.decode()
    assert ShadowBackfill.objects.get(designation=designation).state == "queued"
    # A choice that names nothing is refused with its reason.
    response = client.post(
        reverse("shadow-start"), {"candidate": "proposal-999999", "reason": "x"}, follow=True
    )
    assert "nothing to put in shadow" in response.content.decode()
    response = client.post(
        reverse("shadow-start"), {"candidate": "../etc", "reason": "x"}, follow=True
    )
    assert "Choose a draft, a proposal or a published version" in response.content.decode()


# Session, user, permissions (2), the active version, designations, blocked counts,
# the comparison, deliveries waiting, backfills, gate counts, candidate choices (2).
SHADOW_PAGE_QUERIES = 15
RUNS_QUERIES = 10
GATE_PAGE_QUERIES = 10
EXPORT_QUERIES = 9


def test_the_pages_run_a_bounded_number_of_queries(
    client, approver, in_shadow, tmp_path, django_assert_max_num_queries
):
    # More of everything must not mean more queries.
    for round_ in range(2):
        client.force_login(approver)
        with django_assert_max_num_queries(SHADOW_PAGE_QUERIES):
            assert client.get(reverse("shadow")).status_code == 200
        with django_assert_max_num_queries(SHADOW_PAGE_QUERIES):
            assert client.get(reverse("shadow"), {"part": "comparison"}).status_code == 200
        for params in (
            {"scope": "active"},
            {"scope": "active", "action": "create_refund", "page": "2"},
            {"scope": "shadow", "designation": in_shadow.pk, "status": "new"},
            {"scope": "shadow", "designation": in_shadow.pk, "field": ""},
        ):
            with django_assert_max_num_queries(RUNS_QUERIES):
                assert client.get(reverse("shadow-runs"), params).status_code == 200
        with django_assert_max_num_queries(GATE_PAGE_QUERIES):
            assert client.get(reverse("gate")).status_code == 200
        for name in ("shadow-export-csv", "shadow-export-json"):
            with django_assert_max_num_queries(EXPORT_QUERIES):
                assert client.get(reverse(name)).status_code == 200
        summary = demo_month(tmp_path, runs=80, seed=31 + round_, name=f"more-{round_}.jsonl")
        shadow_judge_batch(max(summary.batch_pks))
        for i in range(20):
            GateAnswer.objects.create(action=f"act-{i}", decision="would-block", reasons=["x"])
        mode_set(f"act-{round_}", "enforce", user=approver, reason="reviewed")


def test_trace_content_is_escaped_and_csv_cells_neutralised(client, approver, in_shadow, tmp_path):
    evil = '=HYPERLINK("http://x")<script>alert(1)</script>'
    lines = [
        line(runId="evil-run", type="run_started", agent="<b>agent</b>"),
        line(
            runId="evil-run", type="tool_observation", observationId="o1", source="@a", status="x"
        ),
        line(
            runId="evil-run", type="tool_observation", observationId="o2", source="+b", status="y"
        ),
        line(runId="evil-run", type="agent_action", name=evil),
    ]
    summary = ingest_lines(tmp_path, lines, "evil.jsonl")
    shadow_judge_batch(max(summary.batch_pks))
    client.force_login(approver)
    for url, params in (
        (reverse("shadow"), {}),
        (reverse("shadow-runs"), {"scope": "active", "action": evil}),
        (reverse("shadow-runs"), {"scope": "shadow", "designation": in_shadow.pk}),
        (reverse("gate"), {}),
    ):
        body = client.get(url, params).content.decode()
        assert "<script>alert(1)</script>" not in body and "<b>agent</b>" not in body, url
    assert "&lt;script&gt;" in client.get(reverse("shadow")).content.decode()
    assert (
        "evil-run"
        in client.get(reverse("shadow-runs"), {"scope": "active", "action": evil}).content.decode()
    )

    response = client.get(reverse("shadow-export-csv"))
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="blocked-')
    content = b"".join(response.streaming_content).decode()
    rows = list(csv.reader(io.StringIO(content, newline="")))
    assert rows[0] == [
        "source",
        "policy",
        "since",
        "until",
        "grouping",
        "value",
        "measure",
        "count",
    ]
    values = {row[5] for row in rows[1:]}
    assert "'" + evil in values and evil not in values
    assert "'+b,@a" in values  # the source pair, neutralised as a whole cell
    assert not any(cell.startswith(("=", "+", "-", "@")) for row in rows for cell in row)

    document = json.loads(client.get(reverse("shadow-export-json")).content)
    assert {"window", "active", "shadow", "gate"} <= set(document)
    actions = [c for c in document["active"]["blocked"] if c["grouping"] == "action"]
    assert any(c["value"] == evil for c in actions)  # JSON keeps the value as it is
