"""Authority decisions become approved, numbered, immutable policy versions."""

import json

import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError, IntegrityError, connection, transaction

from reviewapp.ingest.pipeline import ingest_file
from reviewapp.ingest.tokens import create_token
from reviewapp.models import (
    AuditEvent,
    IngestBatch,
    Judgement,
    PolicyVersion,
    ProspectiveSettlement,
    RuleProposal,
    Run,
    Ticket,
)
from reviewapp.policy.documents import apply_change, describe_rule, diff_documents
from reviewapp.policy.settlements import (
    settled_tickets_close,
    settlement_preview,
    settlements_label,
)
from reviewapp.policy.versions import (
    FourEyesError,
    PolicyWorkError,
    draft_document,
    policy_document_import,
    policy_version_publish,
    proposal_create,
    proposal_decide,
)
from reviewapp.review.stamp import data_stamp
from tests.paths import SPEC as SPEC_DIR
from tests.policy.helpers import publish_review_rule

pytestmark = pytest.mark.django_db
SPEC = SPEC_DIR
OWNER = {"field": "status", "source": "refund-service", "unlessValues": ["chargeback"]}


def token_of(user) -> str:
    return create_token(user=user, name="cli")[1]


def owner_rule(reviewer, **extra):
    return proposal_create(
        user=reviewer,
        kind="authoritative-source",
        change={**OWNER, **extra},
        rationale="refunds are the refund service's",
    )


def published(reviewer, approver) -> PolicyVersion:
    proposal_decide(proposal=owner_rule(reviewer), user=approver, approve=True, reason="agreed")
    return policy_version_publish(user=approver, reason="refund ownership")


def test_a_proposal_reads_as_a_sentence(reviewer):
    proposal = owner_rule(reviewer, actions=["send_status_message"])
    assert proposal.sentence == (
        "refund-service owns `status` when the agent's next action is send_status_message, unless a value is chargeback."
    )
    assert proposal.state == "pending" and proposal.base_number == 0


def test_the_proposer_cannot_approve_their_own_change(reviewer, approver):
    proposal = proposal_create(
        user=approver,
        kind="require-review",
        change={"field": "*", "actions": ["ship_goods"]},
        rationale="safety",
    )
    with pytest.raises(FourEyesError):
        proposal_decide(proposal=proposal, user=approver, approve=True, reason="")
    assert RuleProposal.objects.get().state == "pending"


def test_the_database_refuses_a_self_approval_even_by_direct_insert(reviewer):
    with pytest.raises(IntegrityError), transaction.atomic():
        RuleProposal.objects.create(
            kind="require-review",
            change={"field": "status"},
            sentence="s",
            rationale="r",
            proposed_by=reviewer,
            base_number=0,
            state="approved",
            decided_by=reviewer,
        )
    proposal = owner_rule(reviewer)
    with pytest.raises(IntegrityError), transaction.atomic():
        RuleProposal.objects.filter(pk=proposal.pk).update(state="approved", decided_by=reviewer)


def test_a_decision_once_made_cannot_be_changed_or_deleted(reviewer, approver):
    proposal = owner_rule(reviewer)
    proposal_decide(
        proposal=proposal, user=approver, approve=False, reason="chargebacks need more thought"
    )
    with pytest.raises(DatabaseError), transaction.atomic():
        RuleProposal.objects.filter(pk=proposal.pk).update(state="approved")
    with pytest.raises(DatabaseError), transaction.atomic():
        RuleProposal.objects.filter(pk=proposal.pk).delete()
    with pytest.raises(PolicyWorkError, match="already rejected by abel"):
        proposal_decide(proposal=proposal, user=approver, approve=True, reason="")


def test_publishing_makes_the_next_numbered_active_version(reviewer, approver):
    version = published(reviewer, approver)
    assert (version.number, version.based_on, version.published_by) == (1, 0, approver)
    assert [rule["id"] for rule in version.document["rules"]] == ["refund-service-owns-status"]
    assert RuleProposal.objects.get().published_in == version
    with pytest.raises(PolicyWorkError, match="nothing to publish"):
        policy_version_publish(user=approver, reason="again")


def test_a_published_version_cannot_be_updated_or_deleted(reviewer, approver):
    version = published(reviewer, approver)
    for statement in (
        "UPDATE reviewapp_policyversion SET reason = 'rewritten' WHERE id = %s",
        "DELETE FROM reviewapp_policyversion WHERE id = %s",
    ):
        with (
            pytest.raises(DatabaseError, match="append-only|permission denied"),
            transaction.atomic(),
            connection.cursor() as cursor,
        ):
            cursor.execute(statement, [version.pk])
    assert PolicyVersion.objects.get().reason == "refund ownership"


def test_the_next_ingest_uses_the_new_version_and_old_verdicts_keep_theirs(
    reviewer, approver, tmp_path
):
    ingest_file(SPEC / "order-status.jsonl", channel=IngestBatch.Channel.CLI)
    stale = Run.objects.get(run_id="stale-search").current_judgement
    assert stale.policy_number == 0 and stale.verdicts.get().kind == "conflict"
    published(reviewer, approver)
    later = tmp_path / "later.jsonl"
    later.write_text(
        (SPEC / "order-status.jsonl").read_text().replace('"stale-search"', '"stale-search-2"')
    )
    ingest_file(later, channel=IngestBatch.Channel.CLI)
    fresh = Run.objects.get(run_id="stale-search-2").current_judgement
    assert fresh.policy_number == 1 and fresh.policy_version.number == 1
    assert fresh.verdicts.get().rule == "refund-service-owns-status"
    # History is never rewritten: the old judgement still says conflict under the default.
    stale.refresh_from_db()
    assert stale.policy_number == 0 and stale.verdicts.get().kind == "conflict"
    assert Judgement.objects.filter(run__run_id="stale-search").count() == 1


def test_open_tickets_a_version_would_settle_are_labelled_not_changed(
    reviewer, approver, second_reviewer
):
    ingest_file(SPEC / "order-status.jsonl", channel=IngestBatch.Channel.CLI)
    ticket = Ticket.objects.get(run__run_id="stale-search")
    settled, considered = settlement_preview("authoritative-source", OWNER)
    assert [s.ticket for s in settled] == [ticket] and considered == 4
    version = published(reviewer, approver)
    assert settlements_label(version) == 1
    assert settlements_label(version) == 0  # labelling twice adds nothing
    label = ProspectiveSettlement.objects.get()
    assert (label.ticket, label.kind, label.rule) == (
        ticket,
        "resolved",
        "refund-service-owns-status",
    )
    ticket.refresh_from_db()
    assert ticket.state == "open" and ticket.verdict.kind == "conflict"
    seen = data_stamp()
    outcome = settled_tickets_close(version=version, actor=second_reviewer, seen=seen)
    assert outcome.summary("closed") == "1 ticket closed."
    ticket.refresh_from_db()
    assert (ticket.state, ticket.cause, ticket.cause_text) == (
        "closed",
        "policy",
        "would be resolved under v1",
    )


def test_every_step_is_in_the_audit_trail(reviewer, approver):
    published(reviewer, approver)
    assert list(AuditEvent.objects.values_list("verb", "actor__username")) == [
        ("proposal.created", "rita"),
        ("proposal.approved", "abel"),
        ("policy.published", "abel"),
    ]


def test_an_invalid_change_is_refused_with_its_path(reviewer):
    with pytest.raises(ValueError, match=r"rules\[0\]\.source: required"):
        proposal_create(
            user=reviewer, kind="authoritative-source", change={"field": "status"}, rationale="x"
        )
    with pytest.raises(PolicyWorkError, match="rationale"):
        proposal_create(
            user=reviewer, kind="require-review", change={"field": "status"}, rationale=" "
        )


def test_field_changes_and_a_draft_of_several_approvals(reviewer, approver):
    for kind, change in (
        ("normalizer", {"field": "status", "normalize": {"kind": "enum", "caseInsensitive": True}}),
        ("harmless-error", {"field": "status", "code": "AVATAR_UNAVAILABLE"}),
        ("higher-source-revision", {"field": "status", "revisionDomain": "payments"}),
    ):
        proposal_decide(
            proposal=proposal_create(user=reviewer, kind=kind, change=change, rationale="x"),
            user=approver,
            approve=True,
            reason="",
        )
    draft = draft_document()
    assert draft["fields"]["status"] == {
        "normalize": {"kind": "enum", "caseInsensitive": True},
        "harmlessErrors": ["AVATAR_UNAVAILABLE"],
    }
    assert draft["rules"][-1] == {
        "id": "newest-status",
        "kind": "higher-source-revision",
        "field": "status",
        "revisionDomain": "payments",
    }
    assert policy_version_publish(user=approver, reason="three changes").document == draft


def test_export_and_import_round_trip_exactly(reviewer, approver, tmp_path):
    first = published(reviewer, approver)
    exported = tmp_path / "v1.json"
    call_command("policy", "export", "--version", "1", "--out", str(exported))
    assert json.loads(exported.read_text()) == {"version": 1, **first.document}
    rita, abel = token_of(reviewer), token_of(approver)
    call_command("policy", "import", str(exported), "--token", rita, "--rationale", "round trip")
    proposal = RuleProposal.objects.get(state="pending")
    call_command("policy", "approve", str(proposal.pk), "--token", abel)
    call_command("policy", "publish", "--token", abel, "--reason", "same again")
    second = PolicyVersion.objects.get(number=2)
    assert second.document == first.document
    assert diff_documents(first.document, second.document).is_empty
    again = tmp_path / "v2.json"
    call_command("policy", "export", "--version", "2", "--out", str(again))
    assert {**json.loads(again.read_text()), "version": 1} == json.loads(exported.read_text())


def test_the_command_refuses_self_approval_and_bad_documents(reviewer, approver, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"rules": [{"id": "x", "kind": "newest", "field": "status"}]}))
    with pytest.raises(CommandError, match=r'rules\[0\]\.kind: unknown kind "newest"'):
        call_command(
            "policy", "import", str(bad), "--token", token_of(reviewer), "--rationale", "x"
        )
    proposal = policy_document_import(
        user=approver, document={"fields": {"status": {}}}, rationale="x"
    )
    with pytest.raises(CommandError, match="someone else must approve"):
        call_command("policy", "approve", str(proposal.pk), "--token", token_of(approver))
    with pytest.raises(CommandError, match="may not do this"):
        call_command("policy", "approve", str(proposal.pk), "--token", token_of(reviewer))


def test_diffs_show_added_removed_and_changed_rules():
    old = {
        "rules": [
            {"id": "a", "kind": "require-review", "field": "x"},
            {"id": "b", "kind": "require-review", "field": "y"},
        ]
    }
    new = apply_change(
        {"rules": [{"id": "a", "kind": "require-review", "field": "z"}]},
        "harmless-error",
        {"field": "x", "code": "E"},
    )
    diff = diff_documents(old, new)
    assert [r["id"] for r in diff.rules_removed] == ["b"]
    assert [(o["field"], n["field"]) for o, n in diff.rules_changed] == [("x", "z")]
    assert diff.fields_added == [("x", {"harmlessErrors": ["E"]})]
    assert ("-", "rule b: " + describe_rule(old["rules"][1])) in diff.lines()


def test_a_labelling_whose_task_was_lost_is_sent_again_by_the_reconciler(reviewer, approver):
    from dataclasses import replace

    from reviewapp.durable import Send, due
    from reviewapp.models import SettlementLabelling
    from reviewapp.policy.settlements import LABELLINGS, label_settled

    version = publish_review_rule(reviewer, approver)  # no worker here
    assert SettlementLabelling.objects.get(version=version).finished_at is None
    assert due(LABELLINGS) == []  # too new: a worker may be on it (five minutes)
    at_once = replace(LABELLINGS, requeue_after=0)
    assert due(at_once) == [Send("reviewapp.tasks.label_settled_tickets_task", (version.pk,))]
    label_settled(version.pk)  # what the task sent runs
    labelling = SettlementLabelling.objects.get(version=version)
    assert labelling.finished_at is not None and labelling.attempts == 1
    assert due(at_once) == []


def test_a_labelling_whose_worker_died_each_time_is_given_up(reviewer, approver):
    from reviewapp.models import SettlementLabelling
    from reviewapp.policy.settlements import label_settled

    version = publish_review_rule(reviewer, approver)
    SettlementLabelling.objects.filter(version=version).update(attempts=3)
    assert label_settled(version.pk) == 0
    labelling = SettlementLabelling.objects.get(version=version)
    assert labelling.finished_at is not None
    assert "died in each of 3 tries" in labelling.error
