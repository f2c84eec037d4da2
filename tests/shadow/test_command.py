"""manage.py shadow --version N --since DATE [--json]: the same counts as the page."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from reviewapp.infra.days import Window
from reviewapp.shadow.judging import shadow_judge_batch
from tests.shadow import brute
from tests.shadow.conftest import demo_month

pytestmark = pytest.mark.django_db


def run(*args):
    out = StringIO()
    call_command("shadow", *args, stdout=out)
    return out.getvalue()


def test_the_version_in_shadow_is_counted_as_brute_force_counts_it(draft_in_shadow, tmp_path):
    summary = demo_month(tmp_path, runs=60, seed=41, name="while-in-shadow.jsonl")
    shadow_judge_batch(max(summary.batch_pks))
    window = Window.last(28)
    number = draft_in_shadow.candidate.number
    document = json.loads(run("--version", str(number), "--since", str(window.since), "--json"))
    expected = brute.comparison(draft_in_shadow.candidate_id, window.since, window.until)
    shadow = document["shadow"]
    assert (shadow["wouldNewlyBlock"], shadow["wouldUnblock"], shadow["unchanged"]) == (
        len(expected["new"]),
        len(expected["unblocked"]),
        len(expected["unchanged"]),
    )
    assert shadow["version"] == 2 and shadow["prospective"] is True
    new_by_action = brute.counts(expected["new"])["action"]
    assert {a: c["new"] for a, c in shadow["byAction"].items() if c["new"]} == dict(new_by_action)
    active = brute.active_items(window.since, window.until)
    assert document["active"]["blocked"] == len(active)
    assert document["active"]["byReason"] == dict(brute.counts(active)["reason"])

    text = run("--version", str(number), "--since", str(window.since))
    assert f"would newly block {len(expected['new'])}," in text
    assert "the draft on v1 (in shadow since" in text


def test_the_active_version_alone_and_mistakes(demo_desk):
    window = Window.last(28)
    document = json.loads(run("--version", "1", "--since", str(window.since), "--json"))
    assert "shadow" not in document
    assert document["active"]["blocked"] == len(brute.active_items(window.since, window.until))
    with pytest.raises(CommandError, match="v7 has not been in shadow"):
        run("--version", "7", "--since", str(window.since))
    with pytest.raises(CommandError, match="YYYY-MM-DD"):
        run("--version", "1", "--since", "yesterday")
    with pytest.raises(CommandError, match="is after"):
        run("--version", "1", "--since", "2026-12-01", "--until", "2026-11-01")


def test_the_candidate_in_shadow_now_is_the_one_counted(draft_in_shadow, reviewer, approver):
    from reviewapp.policy.candidates import candidate_of_proposal
    from reviewapp.policy.versions import proposal_create
    from reviewapp.shadow.designations import shadow_end, shadow_start

    shadow_end(draft_in_shadow, user=approver)
    proposal = proposal_create(
        user=reviewer,
        kind="require-review",
        change={"field": "status", "actions": ["send_status_message"]},
        rationale="ask first",
    )
    now = shadow_start(candidate_of_proposal(proposal), user=approver)
    window = Window.last(28)
    document = json.loads(run("--version", "2", "--since", str(window.since), "--json"))
    assert document["shadow"]["candidate"] == now.candidate.label
    assert document["shadow"]["inShadow"] is True
    earlier = run(
        "--version",
        "2",
        "--since",
        str(window.since),
        "--candidate",
        str(draft_in_shadow.candidate_id),
    )
    assert "the draft on v1 (in shadow since" in earlier
