"""The policy command knows who acts (issue 15, defect 5): one operator used to import a
policy as `--user reviewer` and approve it as `--user approver`, and the audit trail
credited two people. A decision now needs the person's own API token."""

import pytest
from django.core.management import CommandError, call_command

from reviewapp.ingest.tokens import create_token, revoke_token
from reviewapp.models import AuditEvent, RuleProposal

pytestmark = pytest.mark.django_db


@pytest.fixture
def document(tmp_path):
    path = tmp_path / "policy.json"
    path.write_text('{"fields": {"status": {}}}')
    return path


def test_a_name_alone_no_longer_acts_for_anyone(reviewer, approver, document):
    with pytest.raises(CommandError, match="--user"):
        call_command("policy", "import", str(document), "--user", "rita", "--rationale", "x")
    with pytest.raises(CommandError, match="say who you are"):
        call_command("policy", "import", str(document), "--rationale", "x")
    assert not RuleProposal.objects.exists()


def test_one_operator_with_one_token_cannot_act_as_two_people(reviewer, approver, document):
    rita = create_token(user=reviewer, name="cli")[1]
    call_command("policy", "import", str(document), "--token", rita, "--rationale", "x")
    proposal = RuleProposal.objects.get()
    # Rita's token is Rita, whatever she claims: she may not approve, and not her own.
    with pytest.raises(CommandError, match="rita may not do this"):
        call_command("policy", "approve", str(proposal.pk), "--token", rita)
    with pytest.raises(CommandError, match="not valid"):
        call_command("policy", "approve", str(proposal.pk), "--token", "cc_guessed")
    proposal.refresh_from_db()
    assert proposal.state == "pending"


def test_the_approver_approves_with_their_own_token_and_the_audit_says_cli(
    reviewer, approver, document, monkeypatch
):
    monkeypatch.setenv("CROSSCHECK_TOKEN", create_token(user=reviewer, name="cli")[1])
    call_command("policy", "import", str(document), "--rationale", "x")
    abel_token, abel = create_token(user=approver, name="cli")
    proposal = RuleProposal.objects.get()
    call_command("policy", "approve", str(proposal.pk), "--token", abel)
    call_command("policy", "publish", "--token", abel, "--reason", "agreed")
    decided = list(
        AuditEvent.objects.filter(
            verb__in=["proposal.created", "proposal.approved", "policy.published"]
        )
        .order_by("id")
        .values_list("verb", "actor__username", "channel")
    )
    assert decided == [
        ("proposal.created", "rita", "cli"),
        ("proposal.approved", "abel", "cli"),
        ("policy.published", "abel", "cli"),
    ]
    # A revoked token acts for nobody.
    revoke_token(abel_token)
    with pytest.raises(CommandError, match="not valid"):
        call_command("policy", "publish", "--token", abel, "--reason", "again")
