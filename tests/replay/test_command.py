"""manage.py replay for scripts and CI: the exit code says whether the regression suite
regressed (changed outside the policy's own change), or with --strict changed at all."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from reviewapp.models import PolicyCandidate, ReplayJob, Ticket
from reviewapp.policy.versions import proposal_decide
from reviewapp.replay.fixtures import freeze_ticket, suite_mark
from tests.replay.conftest import propose_owner

pytestmark = pytest.mark.django_db


def replay(capsys, *args: str) -> tuple[int, str, str]:
    try:
        call_command("replay", *args)
        code = 0
    except SystemExit as exit:
        code = int(exit.code)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def sets(small_desk, reviewer):
    """Two fixture sets: run-3 (refund-service's, unchanged when the ledger owns status)
    and run-4 (the ledger's: settled)."""
    return (
        freeze_ticket(Ticket.objects.get(run__run_id="run-3"), name="steady"),
        freeze_ticket(Ticket.objects.get(run__run_id="run-4"), name="moving"),
    )


def test_exit_0_when_nothing_in_the_suite_changed(capsys, sets, reviewer):
    steady, moving = sets
    proposal = propose_owner(reviewer)
    suite_mark(steady, in_suite=True)
    code, out, _ = replay(capsys, "steady", "--policy", f"proposal-{proposal.pk}", "--json")
    assert code == 0
    document = json.loads(out)
    assert document["regressionSuiteChanged"] is False
    [job] = document["jobs"]
    assert job["label"] == f"prospective under the built-in default + proposal #{proposal.pk}"
    assert job["against"] == "against the built-in default, the active version"
    assert (job["state"], job["counts"]["groups"], job["counts"]["unchanged"]) == ("done", 1, 1)
    # A set outside the suite that changes is reported, and fails only with --strict.
    assert replay(capsys, "moving", "--policy", f"proposal-{proposal.pk}")[0] == 0
    assert replay(capsys, "moving", "--policy", f"proposal-{proposal.pk}", "--strict")[0] == 1


def test_the_change_a_policy_means_is_no_regression(capsys, sets, reviewer, approver):
    for fixture_set in sets:
        suite_mark(fixture_set, in_suite=True)
    propose_owner(reviewer)  # pending: not in the draft
    code, out, _ = replay(capsys, "--suite", "--policy", "draft")
    assert code == 0 and "steady (regression suite)" in out
    assert "prospective under the draft on the built-in default" in out
    proposal_decide(proposal=propose_owner(reviewer), user=approver, approve=True, reason="")
    # The draft now makes the ledger own `status`: the suite's status group changes, as
    # the draft means it to. That is counted apart, and fails nothing...
    code, out, _ = replay(capsys, "--suite", "--policy", "draft", "--json")
    assert code == 0
    document = json.loads(out)
    assert document["regressions"] == 0 and document["regressionSuiteChanged"] is False
    moving = next(job for job in document["jobs"] if job["fixtureSet"]["name"] == "moving")
    assert moving["counts"]["newly_resolved"] == 1 and moving["counts"]["intended"] == 1
    assert moving["regressions"] == 0
    code, out, _ = replay(capsys, "--suite", "--policy", "draft")
    assert "changed where the change means to act: 1" in out
    assert "changed elsewhere (regressions): 0" in out
    # ... unless any change at all must fail.
    assert replay(capsys, "--suite", "--policy", "draft", "--strict")[0] == 1
    assert ReplayJob.objects.filter(reason="manage.py replay").count() == 8


def test_a_policy_file_is_replayed_as_such(capsys, sets, tmp_path):
    policy = tmp_path / "ledger.json"
    policy.write_text(
        json.dumps(
            {
                "fields": {"status": {}},
                "rules": [
                    {
                        "id": "ledger",
                        "kind": "authoritative-source",
                        "field": "status",
                        "source": "order-ledger",
                    }
                ],
            }
        )
    )
    code, out, _ = replay(capsys, "moving", "--policy", str(policy), "--json")
    [job] = json.loads(out)["jobs"]
    assert code == 0 and job["counts"]["newly_resolved"] == 1
    assert (
        job["candidate"]["kind"] == "file" and PolicyCandidate.objects.filter(kind="file").exists()
    )
    assert job["label"].startswith("prospective under policy file ")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope", "--policy", "draft"], "no fixture set named nope"),
        (["steady", "--policy", "v9"], "no version v9"),
        (["steady", "--policy", "proposal-999"], "no proposal #999"),
        (
            ["steady", "--policy", "sideways"],
            "--policy sideways: not a file, a version, draft or proposal-N",
        ),
        (["--suite", "--policy", "draft"], "no fixture set is in the regression suite"),
        (["--policy", "draft"], "name a fixture set, or --suite"),
    ],
)
def test_what_cannot_be_replayed_exits_2_with_one_line(capsys, sets, args, message):
    code, _, err = replay(capsys, *args)
    assert code == 2
    assert err == f"replay: {message}\n"


def test_every_open_ticket_under_a_proposal(capsys, sets, reviewer):
    proposal = propose_owner(reviewer)
    code, out, _ = replay(capsys, "--open-tickets", "--policy", f"proposal-{proposal.pk}", "--json")
    [job] = json.loads(out)["jobs"]
    assert code == 0
    assert job["fixtureSet"]["origin"] == "open-tickets" and job["fixtureSet"]["runs"] == 25
    assert job["counts"]["tickets_settled"] == 17
