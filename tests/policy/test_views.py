"""Policy pages: proposing, deciding and publishing through the browser's requests."""

import io
import json
import re

import pytest
from django.urls import reverse

from reviewapp.ingest.pipeline import ingest_file
from reviewapp.models import PolicyVersion, RuleProposal, Ticket
from reviewapp.policy.versions import policy_version_publish, proposal_create, proposal_decide
from reviewapp.templatetags.policy_text import code_spans
from tests.paths import SPEC as SPEC_DIR
from tests.policy.helpers import publish_review_rule

pytestmark = pytest.mark.django_db
FORM = {
    "kind": "authoritative-source",
    "field": "status",
    "source": "refund-service",
    "actions": "send_status_message, issue_store_credit",
    "unless_values": "chargeback",
    "rationale": "The refund service is the system of record for refunds.",
}


def test_a_reviewer_proposes_from_the_form(client, reviewer):
    client.force_login(reviewer)
    response = client.post(reverse("policy-propose"), FORM, follow=True)
    proposal = RuleProposal.objects.get()
    assert proposal.change == {
        "field": "status",
        "actions": ["send_status_message", "issue_store_credit"],
        "source": "refund-service",
        "unlessValues": ["chargeback"],
    }
    assert code_spans(proposal.sentence) in response.content.decode()
    assert "someone else must approve" in response.content.decode()


def test_the_preview_says_what_it_means_without_saving(client, reviewer):
    client.force_login(reviewer)
    response = client.post(reverse("policy-propose-preview"), FORM, headers={"HX-Request": "true"})
    body = response.content.decode()
    assert (
        "refund-service owns <code>status</code>" in body
        and 'id="proposal-preview"' in body
        and "<html" not in body
    )
    assert RuleProposal.objects.count() == 0


def test_a_proposal_form_is_prefilled_from_a_ticket(client, reviewer):
    ingest_file(SPEC_DIR / "order-status.jsonl", channel="cli")
    ticket = Ticket.objects.get(run__run_id="stale-search")
    client.force_login(reviewer)
    body = client.get(reverse("policy-propose"), {"ticket": ticket.pk}).content.decode()
    assert 'value="refund-service"' in body and 'value="send_status_message"' in body
    assert f'value="{ticket.pk}"' in body
    assert f'<a href="/tickets/{ticket.pk}/">#{ticket.pk}</a>' in body  # the motivating ticket
    # Its preview comes with the page (issue 28), and its sources are the choices.
    assert "In a sentence:" in body and "Fill in the decision" not in body
    assert re.search(r'name="source_choice" value="refund-service"\s+checked>', body)
    assert 'name="source_choice" value="search-index"' in body


def test_a_chosen_source_is_the_decisions_and_another_must_be_typed(client, reviewer):
    client.force_login(reviewer)
    chosen = {**FORM, "source_choice": "search-index", "source": "typed-but-not-chosen"}
    client.post(reverse("policy-propose"), chosen)
    assert RuleProposal.objects.get().change["source"] == "search-index"
    # "another source" (a blank choice) with nothing typed names no source: refused as before.
    body = client.post(
        reverse("policy-propose"), {**FORM, "source_choice": "", "source": ""}
    ).content.decode()
    assert "Name the source that owns the field." in body
    assert RuleProposal.objects.count() == 1


def test_the_proposer_gets_403_when_approving_their_own(client, approver):
    proposal = proposal_create(
        user=approver, kind="require-review", change={"field": "status"}, rationale="x"
    )
    client.force_login(approver)
    response = client.post(reverse("proposal-decide", args=[proposal.pk]), {"decision": "approve"})
    assert response.status_code == 403
    assert RuleProposal.objects.get().state == "pending"


def test_a_decision_reads_as_a_sentence(client, reviewer, approver):
    approved, rejected = (
        proposal_create(user=reviewer, kind="require-review", change={"field": f}, rationale="x")
        for f in ("status", "eta")
    )
    client.force_login(approver)
    page = client.post(
        reverse("proposal-decide", args=[approved.pk]), {"decision": "approve"}, follow=True
    ).content.decode()
    assert f"Proposal #{approved.pk} approved." in page
    state = page[page.index('id="proposal-state"') :]
    state = " ".join(state[: state.index("</p>")].split())
    # No reason given: the line ends with the date, not ": approved".
    assert re.search(r"approved</span> by abel on \d{4}-\d\d-\d\d \d\d:\d\d$", state), state
    page = client.post(
        reverse("proposal-decide", args=[rejected.pk]),
        {"decision": "reject", "reason": "eta is the carrier's"},
        follow=True,
    ).content.decode()
    assert f"Proposal #{rejected.pk} rejected." in page and "eta is the carrier&#x27;s" in page


def test_a_reviewer_may_not_approve_or_publish(client, reviewer, second_reviewer):
    proposal = proposal_create(
        user=second_reviewer, kind="require-review", change={"field": "status"}, rationale="x"
    )
    client.force_login(reviewer)
    assert (
        client.post(
            reverse("proposal-decide", args=[proposal.pk]), {"decision": "approve"}
        ).status_code
        == 403
    )
    assert client.post(reverse("policy-publish"), {"reason": "x"}).status_code == 403
    assert RuleProposal.objects.get().state == "pending" and PolicyVersion.objects.count() == 0


def test_an_approver_approves_and_publishes(client, reviewer, approver):
    proposal = proposal_create(
        user=reviewer,
        kind="require-review",
        change={"field": "*", "actions": ["ship_goods"]},
        rationale="safety",
    )
    client.force_login(approver)
    client.post(
        reverse("proposal-decide", args=[proposal.pk]), {"decision": "approve", "reason": "yes"}
    )
    draft = client.get(reverse("policy-draft")).content.decode()
    assert "A disagreement on every field always goes to a person" in draft
    response = client.post(
        reverse("policy-publish"), {"reason": "shipping needs a person"}, follow=True
    )
    assert response.redirect_chain[-1][0] == reverse("policy-version", args=[1])
    assert "Published v1" in response.content.decode()


def test_versions_are_readable_exportable_and_diffable(client, viewer, reviewer, approver):
    publish_review_rule(reviewer, approver)
    client.force_login(viewer)
    page = client.get(reverse("policy-version", args=[1])).content.decode()
    assert (
        "A disagreement on <code>status</code> always goes to a person whatever the agent does next."
        in page
    )
    export = client.get(reverse("policy-export", args=[1]))
    assert export["Content-Disposition"] == 'attachment; filename="policy-v1.json"'
    assert json.loads(export.content)["version"] == 1
    diff = client.get(reverse("policy-diff"), {"from": "0", "to": "1"}).content.decode()
    assert "+</span> rule review-status" in diff
    # Unless told, the diff is between the last two published versions.
    assert (
        "<h1>Diff: the built-in default → v1</h1>"
        in client.get(reverse("policy-diff")).content.decode()
    )
    publish_review_rule(reviewer, approver, "eta")
    diff = client.get(reverse("policy-diff")).content.decode()
    assert "<h1>Diff: v1 → v2</h1>" in diff and "+</span> rule review-eta" in diff
    assert '<option value="1" selected>' in diff and '<option value="2" selected>' in diff


def test_an_import_with_errors_names_the_bad_path(client, reviewer):
    client.force_login(reviewer)
    bad = io.BytesIO(json.dumps({"rules": [{"kind": "newest", "field": "status"}]}).encode())
    bad.name = "bad.json"
    response = client.post(
        reverse("policy-import"), {"document": bad, "rationale": "x"}, follow=True
    )
    assert "rules[0].kind: unknown kind &quot;newest&quot;" in response.content.decode()
    assert RuleProposal.objects.count() == 0


def test_viewers_read_policy_but_cannot_propose(client, viewer):
    client.force_login(viewer)
    assert client.get(reverse("policy-home")).status_code == 200
    assert client.get(reverse("policy-propose")).status_code == 403
    assert client.post(reverse("policy-propose"), FORM).status_code == 403
    assert RuleProposal.objects.count() == 0


def test_a_ticket_offers_a_proposal_and_shows_a_newer_version_would_settle_it(
    client, reviewer, approver, viewer
):
    from reviewapp.policy.settlements import settlements_label

    ingest_file(SPEC_DIR / "order-status.jsonl", channel="cli")
    ticket = Ticket.objects.get(run__run_id="stale-search")
    client.force_login(reviewer)
    page = client.get(reverse("ticket-detail", args=[ticket.pk])).content.decode()
    assert f'href="/policy/propose/?ticket={ticket.pk}"' in page and "Would be resolved" not in page
    change = {"field": "status", "source": "refund-service"}
    proposal_decide(
        proposal=proposal_create(
            user=reviewer, kind="authoritative-source", change=change, rationale="x"
        ),
        user=approver,
        approve=True,
        reason="",
    )
    settlements_label(policy_version_publish(user=approver, reason="owners"))
    page = client.get(reverse("ticket-detail", args=[ticket.pk])).content.decode()
    assert "Would be resolved under" in page and "by refund-service-owns-status" in page
    client.force_login(viewer)
    assert (
        "propose-from-ticket"
        not in client.get(reverse("ticket-detail", args=[ticket.pk])).content.decode()
    )


def test_a_version_says_labelling_until_its_worker_is_done_then_links_what_it_settles(
    client, reviewer, approver
):
    from reviewapp.policy.settlements import settlements_label

    ingest_file(SPEC_DIR / "order-status.jsonl", channel="cli")
    change = {"field": "status", "source": "refund-service"}
    proposal = proposal_create(
        user=reviewer, kind="authoritative-source", change=change, rationale="x"
    )
    proposal_decide(proposal=proposal, user=approver, approve=True, reason="")
    client.force_login(approver)
    # No worker runs here: the version is published, its tickets not yet labelled.
    response = client.post(reverse("policy-publish"), {"reason": "owners"}, follow=True)
    page = response.content.decode()
    settled_url = reverse("policy-settled", args=[1])
    assert f'A worker labels the open tickets it would settle: <a href="{settled_url}">' in page
    assert "Labelling…" in page and 'hx-trigger="every 2s"' in page
    assert 'id="labelling"' in client.get(settled_url).content.decode()
    version = PolicyVersion.objects.get(number=1)
    labelled = settlements_label(version)
    assert labelled >= 1
    part = client.get(reverse("policy-version", args=[1]), {"part": "settled"}).content.decode()
    assert "<html" not in part and "every 2s" not in part and "Labelling" not in part
    assert f"{labelled} open ticket" in part and f'href="{settled_url}"' in part
    assert 'id="labelling"' not in client.get(settled_url).content.decode()
    # The queue filters on it too: exactly the labelled tickets, with a chip to remove it.
    assert f'href="{reverse("ticket-queue")}?settled_under=1"' in part
    queue = client.get(reverse("ticket-queue"), {"settled_under": "1"}).content.decode()
    shown = set(map(int, re.findall(r'data-ticket-url="/tickets/(\d+)/', queue)))
    labelled_ids = set(version.settlements.values_list("ticket_id", flat=True))
    assert shown == labelled_ids and len(shown) == labelled
    assert "Would be resolved under version: <strong>1</strong>" in queue
    everything = client.get(reverse("ticket-queue")).content.decode()
    assert len(re.findall(r'data-ticket-url="/tickets/(\d+)/', everything)) > len(shown)


@pytest.mark.parametrize("odd", ["²", "٣", "-1", "1.5", "99999999999999999999999"])
def test_odd_numbers_in_policy_urls_are_not_server_errors(client, reviewer, odd):
    client.force_login(reviewer)
    assert client.get(reverse("policy-diff"), {"from": odd, "to": "draft"}).status_code in (
        200,
        404,
    )
    assert client.get(reverse("policy-propose"), {"ticket": odd}).status_code == 200


def test_a_policy_file_too_large_to_be_one_is_refused(client, reviewer):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from reviewapp.forms.policy import MAX_POLICY_FILE_BYTES

    client.force_login(reviewer)
    huge = SimpleUploadedFile("p.json", b" " * (MAX_POLICY_FILE_BYTES + 1))
    page = client.post(
        reverse("policy-import"), {"document": huge, "rationale": "x"}, follow=True
    ).content.decode()
    assert "a policy file is at most 1,048,576 bytes" in page
    assert not RuleProposal.objects.exists()


def test_code_in_a_rule_sentence_is_code_and_the_rest_is_escaped():
    assert code_spans("`refund-service` owns `status` <b>") == (
        "<code>refund-service</code> owns <code>status</code> &lt;b&gt;"
    )
    assert code_spans("`<script>`") == "<code>&lt;script&gt;</code>"
    assert code_spans("an odd ` stays") == "an odd ` stays"


def test_a_proposal_that_overlaps_a_rule_says_so(client, reviewer, approver):
    first = proposal_create(
        user=reviewer,
        kind="authoritative-source",
        change={"field": "status", "source": "order-ledger", "actions": ["ship_goods"]},
        rationale="x",
    )
    proposal_decide(proposal=first, user=approver, approve=True, reason="")
    policy_version_publish(user=approver, reason="ledger")
    client.force_login(reviewer)
    form = {**FORM, "actions": "ship_goods"}
    body = client.post(
        reverse("policy-propose-preview"), form, headers={"HX-Request": "true"}
    ).content.decode()
    assert "It overlaps what the policy already says" in body
    assert "is tried first where both apply: order-ledger owns <code>status</code>" in body
    # Another action: no overlap.
    other = {**FORM, "actions": "send_status_message"}
    body = client.post(
        reverse("policy-propose-preview"), other, headers={"HX-Request": "true"}
    ).content.decode()
    assert "overlaps" not in body


def test_closing_all_settled_shows_held_tickets_asks_and_can_be_undone(
    client, reviewer, second_reviewer, approver
):
    from reviewapp.policy.settlements import settlements_label
    from reviewapp.review import changes
    from reviewapp.review.stamp import data_stamp

    ingest_file(SPEC_DIR / "order-status.jsonl", channel="cli")
    proposal = proposal_create(
        user=reviewer,
        kind="authoritative-source",
        change={"field": "status", "source": "refund-service"},
        rationale="x",
    )
    proposal_decide(proposal=proposal, user=approver, approve=True, reason="")
    version = policy_version_publish(user=approver, reason="owners")
    assert settlements_label(version) >= 1
    labelled = list(version.settlements.values_list("ticket_id", flat=True))
    held = Ticket.objects.get(pk=labelled[0])
    changes.ticket_claim(held, revision=held.revision, actor=second_reviewer)
    client.force_login(reviewer)
    settled_url = reverse("policy-settled", args=[version.number])
    page = client.get(settled_url).content.decode()
    assert "<th>Holder</th>" in page and '<td class="holder">ravi</td>' in page
    close_url = reverse("policy-close-settled", args=[version.number])
    seen = data_stamp().text
    confirm = client.post(close_url, {"seen": seen}).content.decode()
    assert 'id="held-warning"' in confirm and f"#{held.pk}\n    (ravi)" in confirm
    assert f'action="{close_url}"' in confirm
    assert Ticket.objects.filter(pk__in=labelled, state="open").count() == len(labelled)
    done = client.post(close_url, {"seen": seen, "confirmed": "1"}, follow=True).content.decode()
    assert f"{len(labelled)} ticket" in done and 'id="undo-bulk"' in done
    assert not Ticket.objects.filter(pk__in=labelled, state="open").exists()
    bulk = re.search(r'name="bulk" value="([0-9a-f]+)"', done).group(1)
    client.post(reverse("ticket-bulk-undo"), {"bulk": bulk, "next": settled_url})
    assert Ticket.objects.filter(pk__in=labelled, state="open").count() == len(labelled)
