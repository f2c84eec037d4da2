"""One name for each version and candidate (issue 26.2): models.policy_name, on every page,
export and command; and a page whose counts were made under another version than the
active one says which, in words."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse

from reviewapp.models import PolicyCandidate, Ticket, policy_name
from reviewapp.policy.candidates import (
    candidate_of_default,
    candidate_of_draft,
    candidate_of_proposal,
    candidate_of_version,
)
from reviewapp.policy.versions import counted_under
from reviewapp.replay.fixtures import freeze_ticket
from reviewapp.replay.jobs import job_start, job_work
from reviewapp.shadow.designations import candidate_choices
from tests.policy.helpers import publish_review_rule
from tests.replay.conftest import propose_owner
from tests.seeding import desk_lines, ingest_lines

pytestmark = pytest.mark.django_db

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"


def test_each_kind_has_one_name_that_does_not_go_stale(reviewer, approver):
    assert (policy_name(0), policy_name(None), policy_name(3)) == ("the built-in default",) + (
        "the built-in default",
        "v3",
    )
    assert candidate_of_default().label == "the built-in default"
    pending = propose_owner(reviewer)
    proposal = candidate_of_proposal(pending)
    draft_before = candidate_of_draft()
    assert proposal.label == f"the built-in default + proposal #{pending.pk}"
    assert draft_before.label == "the draft on the built-in default"
    version = publish_review_rule(reviewer, approver)
    assert candidate_of_version(version).label == policy_name(version) == "v1"
    # Published over, the same candidates keep the names of what they were made of (no
    # "v1 draft" once v1 is published), and new ones name the new base.
    draft_before.refresh_from_db()
    assert draft_before.label == "the draft on the built-in default"
    assert candidate_of_proposal(pending).label == f"v1 + proposal #{pending.pk}"
    assert candidate_of_draft().label == "the draft on v1"


def test_the_same_candidate_is_named_alike_on_pages_exports_commands_and_choices(
    client, capsys, tmp_path, reviewer, approver
):
    ingest_lines(tmp_path, desk_lines(6))
    publish_review_rule(reviewer, approver, field="amount")
    pending = propose_owner(reviewer)
    name = f"v1 + proposal #{pending.pk}"
    job = job_start(
        freeze_ticket(Ticket.objects.first(), name="one"), candidate_of_proposal(pending)
    )
    job_work(job.pk, budget=30)
    client.force_login(approver)
    assert name in client.get(reverse("replay-job", args=[job.pk])).content.decode()
    assert name in client.get(reverse("replay-jobs")).content.decode()
    assert client.get(reverse("replay-json", args=[job.pk])).json()["candidate"]["label"] == name
    call_command("replay", "one", "--policy", f"proposal-{pending.pk}", "--json")
    [replayed] = json.loads(capsys.readouterr().out)["jobs"]
    assert replayed["candidate"]["label"] == name
    assert replayed["label"] == f"prospective under {name}"
    choices = dict(candidate_choices())
    assert choices[f"proposal-{pending.pk}"].startswith(f"{name} (pending)")
    assert choices["draft"].startswith("the draft on v1")
    page = client.get(reverse("replay-jobs")).content.decode()
    assert f"{name}: " in page  # the replay form's choice
    assert PolicyCandidate.objects.filter(proposal=pending).count() == 1


def test_no_template_writes_a_version_s_name_itself():
    # "v{{ n }}" beside policy_name would be a second way to name a version.
    written = [
        f"{path.relative_to(TEMPLATES)}:{number}"
        for path in TEMPLATES.rglob("*.html")
        if "privacy/redaction" not in str(path)  # redaction rule sets' own versions
        for number, text in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"\bv\{\{", text)
    ]
    assert written == []


def test_counts_made_under_an_older_version_say_so(client, tmp_path, reviewer, approver):
    assert counted_under([(0, 4)]) == ""
    ingest_lines(tmp_path, desk_lines(6))  # judged under the built-in default
    version = publish_review_rule(reviewer, approver)
    said = counted_under([(0, 4), (1, 2)])
    assert said == (
        "counted under the built-in default (4 runs) and v1 (2 runs); "
        f"v1 is active since {version.published_at:%-d %b %H:%M}"
    )
    assert counted_under([(1, 3)]) == ""
    client.force_login(reviewer)
    page = client.get(reverse("shadow") + "?since=2000-01-01").content.decode()
    assert 'id="counted-under"' in page
    assert "Counted under the built-in default (" in page and "v1 is active since" in page
