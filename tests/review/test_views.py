"""The queue, the ticket page, work through forms (htmx and plain POST) and the handoff
package, as the browser and a source team's script see them."""

import json
import re
from urllib.parse import quote

import pytest
from django.urls import reverse

from reviewapp.models import AuditEvent, Run, Ticket, TraceLine, TraceRecord
from reviewapp.privacy.tokens import token_of
from reviewapp.review import changes, related
from tests.paths import SPEC as SPEC_DIR
from tests.seeding import desk_lines, ingest_lines, line, review_desk_trace

pytestmark = pytest.mark.django_db


def shown_ticket_ids(body: str) -> set[int]:
    return {int(pk) for pk in re.findall(r'data-ticket-url="/tickets/(\d+)/[?"]', body)}


def test_the_queue_lists_open_tickets_with_counts(client, reviewer, desk):
    client.force_login(reviewer)
    body = client.get(reverse("ticket-queue")).content.decode()
    assert shown_ticket_ids(body) == set(Ticket.objects.values_list("pk", flat=True))
    assert '<h2 id="queue-total">4 tickets' in body
    # Counts per filter value, each a link that sets the filter.
    assert re.search(
        r'href="/tickets/\?reason=partial-result"[^>]*>partial-result</a>\s*<span class="count">1</span>',
        body,
    )


def test_the_queue_escapes_every_ticket_value_in_rows_counts_and_suggestions(
    client, reviewer, desk
):
    markup = "<b>x</b>"
    Ticket.objects.filter(pk=desk["run-stale"].pk).update(
        entity=markup,
        action=markup,
        agent=markup,
        sources=f"erp,{markup}",
        field=markup,
        disputed=[["erp", markup], [markup, "paid"]],
    )
    client.force_login(reviewer)
    body = client.get(reverse("ticket-queue")).content.decode()
    assert "<b>" not in body
    escaped = "&lt;b&gt;x&lt;/b&gt;"
    row = re.search(
        rf'<tr data-ticket-url="/tickets/{desk["run-stale"].pk}/[?"].*?</tr>', body, re.S
    )
    # Shown: field, entity, action, sources, the disputed value; and in the cells' titles:
    # field, entity and agent; action; sources; the disputed value and the other's source.
    assert row and row.group(0).count(escaped) == 12
    assert f"<code>{escaped}</code>" in row.group(0)
    # The facet links of field, action, source and agent, and their datalists' suggestions.
    assert len(re.findall(rf'data-facet="\w+">{escaped}</a>', body)) == 4
    assert body.count(f'<option value="{escaped}">') == 4


def test_a_filter_in_the_url_narrows_the_list(client, reviewer, desk):
    client.force_login(reviewer)
    body = client.get(
        reverse("ticket-queue"), {"unsafe": "yes", "source": "search-index"}
    ).content.decode()
    assert shown_ticket_ids(body) == {desk["run-stale"].pk}
    assert 'value="search-index"' in body  # the form shows the filter it applied


def test_a_row_shows_the_disputed_values_side_by_side(client, reviewer, desk):
    stale = desk["run-stale"]
    # Kept when the ticket opened, as the sources said them (raw), from the observations
    # the conflict names.
    assert stale.disputed == [["refund-service", "Refunded"], ["search-index", "paid"]]
    client.force_login(reviewer)
    body = client.get(reverse("ticket-queue")).content.decode()
    row = re.search(rf'<tr data-ticket-url="/tickets/{stale.pk}/[?"].*?</tr>', body, re.S)
    assert row
    shown = " ".join(row.group(0).split())
    assert '<code>Refunded</code> <span class="vs">vs</span> <code>paid</code>' in shown
    assert 'title="Refunded (refund-service) vs paid (search-index)"' in row.group(0)


def test_after_a_change_only_the_changed_ticket_s_row_is_rendered_again(
    client, reviewer, desk, monkeypatch
):
    from reviewapp.views import review_rows

    rendered: list[str] = []
    row_template = review_rows.get_template("review/queue.html#ticket-row")

    class Counting:
        def render(self, context):
            rendered.append(context["row"]["pk"])
            return row_template.render(context)

    monkeypatch.setattr(review_rows, "get_template", lambda name: Counting())
    client.force_login(reviewer)
    client.get(reverse("ticket-queue"))
    every = set(Ticket.objects.values_list("pk", flat=True))
    assert {int(pk) for pk in rendered} == every and len(rendered) == len(every)
    stale = Ticket.objects.get(pk=desk["run-stale"].pk)
    changes.ticket_claim(stale, revision=stale.revision, actor=reviewer)
    rendered.clear()
    body = client.get(reverse("ticket-queue")).content.decode()
    assert rendered == [str(stale.pk)]
    row = re.search(rf'<tr data-ticket-url="/tickets/{stale.pk}/[?"].*?</tr>', body, re.S)
    assert row and '<td class="holder">rita</td>' in row.group(0)
    assert shown_ticket_ids(body) == every


def test_active_filters_are_chips_that_remove_them(client, reviewer, desk):
    client.force_login(reviewer)
    url = reverse("ticket-queue")
    body = client.get(url, {"unsafe": "yes", "source": "search-index"}).content.decode()
    chips = re.findall(r'<a class="chip" href="([^"]*)"', body)
    # The chip of the source filter keeps the other one, and the other way round.
    assert chips == [f"{url}?unsafe=yes", f"{url}?source=search-index"]
    assert "Unsafe: <strong>yes</strong>" in body
    # A change of the form swaps the results, and the chips out of band beside them.
    swapped = client.get(
        url, {"unsafe": "yes"}, headers={"HX-Request": "true", "HX-Target": "queue-results"}
    ).content.decode()
    assert 'id="filter-chips" aria-label="active filters" hx-swap-oob="true"' in swapped
    assert re.findall(r'<a class="chip" href="([^"]*)"', swapped) == [url]


def test_htmx_swaps_only_the_results_or_the_whole_queue(client, reviewer, desk):
    client.force_login(reviewer)
    url = reverse("ticket-queue")
    results = client.get(
        url,
        {"reason": "partial-result"},
        headers={"HX-Request": "true", "HX-Target": "queue-results"},
    )
    body = results.content.decode()
    assert body.lstrip().startswith('<div id="queue-results"') and "<html" not in body
    assert shown_ticket_ids(body) == {desk["run-partial"].pk}
    queue = client.get(
        url, {"reason": "partial-result"}, headers={"HX-Request": "true", "HX-Target": "queue"}
    )
    body = queue.content.decode()
    assert body.lstrip().startswith('<div id="queue"') and 'id="queue-filters"' in body


def test_the_queue_pages_through_tickets(client, reviewer, desk, settings, monkeypatch):
    monkeypatch.setattr("reviewapp.views.review.TICKETS_PER_PAGE", 3)
    client.force_login(reviewer)
    first = client.get(reverse("ticket-queue")).content.decode()
    second = client.get(reverse("ticket-queue"), {"page": 2}).content.decode()
    assert len(shown_ticket_ids(first)) == 3 and len(shown_ticket_ids(second)) == 1
    assert "Page 1 of 2" in first and 'page=2" hx-get' in first
    assert client.get(reverse("ticket-queue"), {"page": "99"}).status_code == 200


def test_families_show_their_sizes(client, reviewer, desk, tmp_path):
    ingest_lines(
        tmp_path,
        [line.replace('"run-', '"again-run-') for line in review_desk_trace()],
        "again.jsonl",
    )
    client.force_login(reviewer)
    body = client.get(reverse("ticket-queue"), {"group": "family"}).content.decode()
    stale = desk["run-stale"]
    row = re.search(
        rf'<a href="([^"]*family={stale.fingerprint}[^"]*)">([^<]*)</a></td>\s*<td class="num">(\d+)</td>',
        body,
    )
    assert row and int(row.group(3)) == 2
    family_page = client.get(row.group(1).replace("&amp;", "&")).content.decode()
    assert len(shown_ticket_ids(family_page)) == 2


def test_the_ticket_page_puts_both_observations_side_by_side(client, viewer, desk):
    client.force_login(viewer)
    body = client.get(reverse("ticket-detail", args=[desk["run-stale"].pk])).content.decode()
    columns = re.findall(r'<article class="observation" data-observation="([^"]+)">', body)
    assert columns == ["obs-refund", "obs-search"]
    assert re.findall(r'<dd class="source-revision">([^<]*)</dd>', body) == ["42", "105"]
    assert re.findall(r'<dd class="revision-domain">([^<]*)</dd>', body) == ["payments", "search"]
    assert "STALE_READ" in body and "index 3 minutes behind" in body
    assert "ENTITY MISMATCH" not in body
    # Raw "Refunded" beside the value the policy's enum normalizer compares.
    assert (
        '<pre class="json raw-value">&quot;Refunded&quot;</pre>' in body
        and "&quot;refunded&quot;" in body
    )
    # Completion order by the callers' clocks: search finished first.
    assert re.findall(r'<dd class="completion">([^<]*)</dd>', body) == ["2 of 2", "1 of 2"]
    assert "UNSAFE" in body and "issue_store_credit" in body
    assert "The refund service is newer." in body and "0.9" in body
    # The raw envelopes are not on the page: read on purpose, with a reason
    # (tests/privacy/test_raw_access.py, which shows them escaped).
    assert "alert(1)" not in body and "Raw data is shown only to people with" in body
    # A viewer reads, and is offered nothing to do.
    assert 'id="claim-form"' not in body and 'id="close-explained"' not in body


def test_an_echoed_entity_that_was_not_asked_for_is_shown_loudly(client, reviewer, desk):
    client.force_login(reviewer)
    body = client.get(reverse("ticket-detail", args=[desk["run-mismatch"].pk])).content.decode()
    assert body.count("ENTITY MISMATCH") == 1
    assert "asked <code>order-204</code> · echoed <code>order-205</code>" in body


def test_errors_and_fallbacks_are_marked(client, reviewer, desk):
    client.force_login(reviewer)
    body = client.get(reverse("ticket-detail", args=[desk["run-partial"].pk])).content.decode()
    assert '<span class="error-code concerns">PAYMENT_EVENTS_UNAVAILABLE</span>' in body
    assert '<span class="error-code concerns">FALLBACK</span>' in body


def test_a_finding_ticket_shows_the_runs_calls_as_a_timeline(client, reviewer, approver, tmp_path):

    from reviewapp.ingest.pipeline import ingest_file
    from reviewapp.policy.versions import (
        policy_document_import,
        policy_version_publish,
        proposal_decide,
    )

    spec = SPEC_DIR
    # Published as every version is, four eyes (the database refuses any other).
    proposal = policy_document_import(
        user=reviewer,
        document=json.loads((spec / "refund-trajectory.policy.json").read_text()),
        rationale="the trajectory rules",
    )
    proposal_decide(proposal=proposal, user=approver, approve=True, reason="")
    policy_version_publish(user=approver, reason="the trajectory rules")
    ingest_file(spec / "refund-trajectory.jsonl", channel="cli")
    ticket = Ticket.objects.get(finding_kind="out-of-scope-entity")
    client.force_login(reviewer)
    body = client.get(reverse("ticket-detail", args=[ticket.pk])).content.decode()
    heading = body[body.index("<h1>") : body.index("</h1>")]
    assert heading.count("out-of-scope-entity") == 1  # its kind, said once
    timeline = body[body.index('<ol class="timeline">') :]
    timeline = timeline[: timeline.index("</ol>")]
    assert re.findall(r"<code>(b\d)</code>", timeline) == [
        "b1",
        "b2",
        "b3",
        "b4",
        "b5",
    ]
    b2 = timeline[timeline.index("<code>b2</code>") : timeline.index("<code>b3</code>")]
    assert "out-of-scope-entity" in b2 and "tool-outside-allowlist" in b2
    assert "reply_to_customer" in timeline


def test_related_tickets_of_the_family_and_the_run_are_linked(client, reviewer, desk, tmp_path):
    ingest_lines(
        tmp_path,
        [line.replace('"run-', '"again-run-') for line in review_desk_trace()],
        "again.jsonl",
    )
    stale = desk["run-stale"]
    twin = Ticket.objects.get(run__run_id="again-run-stale", kind="conflict")
    finding = Ticket.objects.get(run__run_id="run-stale", kind="finding")
    client.force_login(reviewer)
    body = client.get(reverse("ticket-detail", args=[stale.pk])).content.decode()
    family = body[body.index("Same family") : body.index("Same run")]
    run = body[body.index("Same run") :]
    assert f'href="/tickets/{twin.pk}/"' in family
    assert f"family={stale.fingerprint}" in family  # the whole family, in the queue
    assert f'href="/tickets/{finding.pk}/"' in run[: run.index("</article>")]


def test_related_tickets_show_the_newest_of_the_family_and_tell_when_there_are_more(desk, tmp_path):
    for copy in range(3):
        ingest_lines(
            tmp_path,
            [line.replace('"run-', f'"copy{copy}-run-') for line in review_desk_trace()],
            f"copy{copy}.jsonl",
        )
    stale = desk["run-stale"]
    copies = Ticket.objects.filter(run__run_id__endswith="-run-stale", kind="conflict")
    around = related.related_tickets(stale, shown=1)
    # One more than shown, newest first: the page says there are more.
    assert [row["pk"] for row in around.family] == list(
        copies.order_by("-created_at", "-id").values_list("pk", flat=True)[:2]
    )
    assert around.family[0]["run__run_id"].endswith("-run-stale")
    same_run = Ticket.objects.filter(run=stale.run).exclude(pk=stale.pk).order_by("pk")
    assert [row["pk"] for row in around.same_run] == [same_run[0].pk]


def test_a_ticket_says_when_its_run_was_judged_again_since(client, viewer, tmp_path):
    def observation(obs_id: str, source: str, status: str) -> str:
        return json.dumps(
            {
                "runId": "r-again",
                "type": "tool_observation",
                "observationId": obs_id,
                "source": source,
                "status": status,
            }
        )

    ingest_lines(tmp_path, [observation("o1", "a", "paid"), observation("o2", "b", "gone")])
    ticket = Ticket.objects.get(run__run_id="r-again")
    client.force_login(viewer)
    page = client.get(reverse("ticket-detail", args=[ticket.pk])).content.decode()
    assert "Judged again since" not in page
    assert "judged again</span>" not in client.get(reverse("ticket-queue")).content.decode()

    ingest_lines(
        tmp_path,
        [json.dumps({"runId": "r-again", "type": "agent_action", "name": "refund"})],
        "more.jsonl",
    )
    page = client.get(reverse("ticket-detail", args=[ticket.pk])).content.decode()
    banner = page[page.index("Judged again since") :]
    banner = banner[: banner.index("</p>")]
    assert "status is now <strong>conflict</strong>" in banner
    assert "then refund" in banner
    assert Ticket.objects.filter(run__run_id="r-again").count() == 1  # the same ticket
    queue = client.get(reverse("ticket-queue")).content.decode()
    row = queue[queue.index(f'data-ticket-url="/tickets/{ticket.pk}/?queue="') :]
    assert "judged again</span>" in row[: row.index("</tr>")]


def test_the_handoff_package_has_what_a_source_team_needs(client, viewer, desk):
    stale = desk["run-stale"]
    client.force_login(viewer)
    response = client.get(reverse("ticket-handoff", args=[stale.pk]))
    assert response["Content-Type"] == "application/json"
    assert (
        response["Content-Disposition"] == f'attachment; filename="ticket-{stale.pk}-handoff.json"'
    )
    package = json.loads(response.content)
    assert package["runId"] == "run-stale"
    assert package["callIds"] == ["call-refund", "call-search"]
    assert package["completionOrder"] == ["obs-search", "obs-refund"]
    refund, search = package["observations"]
    # Identities as their stable tokens (tests/privacy/test_raw_access.py: the values).
    assert package["identities"] == "tokens"
    assert (refund["requestedEntity"], refund["returnedEntity"]) == (token_of("order-204"), None)
    assert package["ticket"]["entity"] == token_of(stale.entity)
    assert (refund["revisionDomain"], refund["sourceRevision"]) == ("payments", 42)
    assert (search["revisionDomain"], search["sourceRevision"]) == ("search", 105)
    assert search["errors"] == [
        {"code": "STALE_READ", "message": "index 3 minutes behind", "field": "eta"}
    ]
    assert (refund["rawValue"], refund["normalizedValue"]) == ("Refunded", "refunded")
    line = TraceLine.objects.get(pk=search["envelope"]["traceLineId"])
    assert b'"observationId":"obs-search"' in bytes(line.raw)
    assert search["envelope"]["lineNumber"] == line.line_number == 5
    assert search["envelope"]["batch"] == str(line.batch.public_id)
    assert package["actionThatFollowed"]["name"] == "issue_store_credit"
    assert package["actionThatFollowed"]["arguments"] == {"amount": token_of(150)}
    assert package["actionThatFollowed"]["envelope"]["lineNumber"] == 7
    assert package["verdict"]["evidence"] == ["obs-refund", "obs-search"]
    assert package["agentResolution"]["reasoning"] == "The refund service is newer."
    assert package["work"]["state"] == "open" and package["comments"] == []


def test_the_handoff_package_says_what_people_did(client, reviewer, desk):
    ticket = desk["run-stale"]
    changes.ticket_comment(ticket, actor=reviewer, text="the index lags after deploys")
    changes.ticket_close(
        ticket,
        revision=1,
        actor=reviewer,
        resolution="explained",
        cause="other",
        cause_text="index rebuilt at 02:00",
    )
    client.force_login(reviewer)
    package = json.loads(client.get(reverse("ticket-handoff", args=[ticket.pk])).content)
    work = package["work"]
    assert (work["state"], work["resolution"], work["cause"]) == ("closed", "explained", "other")
    assert (work["causeNote"], work["closedBy"]) == ("index rebuilt at 02:00", "rita")
    assert work["closedAt"]
    [comment] = package["comments"]
    assert (comment["author"], comment["text"]) == ("rita", "the index lags after deploys")
    verbs = [event["verb"] for event in package["auditTrail"]]
    assert verbs == ["commented", "closed"] and all(
        e["actor"] == "rita" for e in package["auditTrail"]
    )


def test_a_plain_post_works_without_javascript(client, reviewer, desk):
    ticket = desk["run-stale"]
    client.force_login(reviewer)
    response = client.post(reverse("ticket-claim", args=[ticket.pk]), {"revision": 1})
    assert response.status_code == 302 and response["Location"] == reverse(
        "ticket-detail", args=[ticket.pk]
    )
    page = client.get(response["Location"]).content.decode()
    assert "You hold this ticket now." in page and "Held by <strong>rita</strong>" in page


def test_an_htmx_post_returns_the_work_panel_with_its_message(client, reviewer, desk):
    ticket = desk["run-stale"]
    client.force_login(reviewer)
    response = client.post(
        reverse("ticket-close", args=[ticket.pk]),
        {"revision": 1, "resolution": "explained", "cause": "replica-lag"},
        headers={"HX-Request": "true"},
    )
    body = response.content.decode()
    assert body.lstrip().startswith('<section class="card work" id="ticket-work"')
    assert "Ticket closed." in body and "Closed as <strong>explained</strong> (replica lag)" in body
    assert 'name="revision" value="2"' in body  # the next form carries the new revision
    assert "closed it as explained (replica lag)" in body  # the audit trail


def test_the_loser_of_a_race_sees_who_won(client, reviewer, second_reviewer, desk):
    ticket = desk["run-stale"]
    changes.ticket_claim(ticket, revision=1, actor=second_reviewer)
    client.force_login(reviewer)
    body = client.post(
        reverse("ticket-close", args=[ticket.pk]),
        {"revision": 1, "resolution": "unexplained"},
        headers={"HX-Request": "true"},
    ).content.decode()
    assert "ravi claimed it at" in body and "your change was not applied" in body
    assert "Held by <strong>ravi</strong>" in body
    ticket.refresh_from_db()
    assert ticket.state == "open"


def test_a_refused_change_says_why(client, reviewer, desk):
    client.force_login(reviewer)
    response = client.post(
        reverse("ticket-close", args=[desk["run-stale"].pk]),
        {"revision": 1, "resolution": "explained", "cause": "other"},
        follow=True,
    )
    assert "Not applied: the cause “other” needs a few words" in response.content.decode()
    assert not AuditEvent.objects.exists()


def test_comments_are_shown_escaped(client, reviewer, desk):
    client.force_login(reviewer)
    client.post(
        reverse("ticket-comment", args=[desk["run-stale"].pk]), {"text": "<b>lag</b> again"}
    )
    body = client.get(reverse("ticket-detail", args=[desk["run-stale"].pk])).content.decode()
    assert "&lt;b&gt;lag&lt;/b&gt; again" in body and "rita commented" not in body
    assert "<strong>rita</strong> commented" in body


def test_bulk_close_from_the_queue_and_back_to_the_same_filters(
    client, reviewer, second_reviewer, desk
):
    client.force_login(reviewer)
    stale, mismatch = desk["run-stale"], desk["run-mismatch"]
    changes.ticket_claim(mismatch, revision=1, actor=second_reviewer)
    posted = {
        "selected": [f"{stale.pk}:1", f"{mismatch.pk}:2"],
        "operation": "close",
        "resolution": "explained",
        "cause": "wrong-join",
        "unsafe": "yes",
    }
    # First what it would close, the ticket someone else holds named; nothing closed yet.
    asked = client.post(reverse("ticket-bulk"), posted).content.decode()
    assert "Close 2 tickets?" in asked
    assert re.search(rf"held by someone else</strong>: #{mismatch.pk}\s+\(ravi\)", asked)
    assert '<tr class="held">' in asked and asked.count("<tr") == 3
    assert not Ticket.objects.filter(state="closed").exists()
    for name, value in (("selected", f"{stale.pk}:1"), ("unsafe", "yes"), ("cause", "wrong-join")):
        assert f'<input type="hidden" name="{name}" value="{value}">' in asked
    response = client.post(reverse("ticket-bulk"), {**posted, "confirmed": "1"})
    assert response.status_code == 302 and response["Location"] == "/tickets/?unsafe=yes"
    assert set(Ticket.objects.filter(state="closed").values_list("pk", flat=True)) == {
        stale.pk,
        mismatch.pk,
    }
    page = client.get(response["Location"]).content.decode()
    assert "2 tickets closed." in page


def test_bulk_assign_a_whole_family(client, reviewer, second_reviewer, desk, tmp_path):
    ingest_lines(
        tmp_path,
        [line.replace('"run-', '"again-run-') for line in review_desk_trace()],
        "again.jsonl",
    )
    family = desk["run-stale"].fingerprint
    client.force_login(reviewer)
    change = {"whole_family": family, "operation": "assign", "assignee": "ravi"}
    refused = client.post(reverse("ticket-bulk"), change, follow=True).content.decode()
    assert "the page was too old or damaged" in refused  # no stamp of the page seen
    assert not Ticket.objects.filter(assignee__isnull=False).exists()
    page = client.get(reverse("ticket-queue"), {"family": family}).content.decode()
    seen = re.search(r'name="seen" value="([0-9-]+)"', page).group(1)
    client.post(reverse("ticket-bulk"), {**change, "seen": seen})
    assert set(
        Ticket.objects.filter(fingerprint=family).values_list("assignee__username", flat=True)
    ) == {"ravi"}
    assert Ticket.objects.filter(fingerprint=family).count() == 2
    assert Ticket.objects.exclude(fingerprint=family).filter(assignee__isnull=False).count() == 0


def test_the_dashboard_counts_open_tickets_by_reason(client, viewer, desk):
    client.force_login(viewer)
    body = client.get(reverse("dashboard")).content.decode()
    assert "Open tickets: 4" in body
    assert '<a href="/tickets/?reason=partial-result">partial-result</a> 1' in body
    assert 'href="/tickets/">Open the queue' in body


def test_the_cached_queue_shows_every_change_at_once(client, reviewer, second_reviewer, desk):
    client.force_login(reviewer)
    url = reverse("ticket-queue")
    assert '<td class="holder">ravi</td>' not in client.get(url).content.decode()
    changes.ticket_claim(desk["run-partial"], revision=1, actor=second_reviewer)
    row = re.search(
        rf'<tr data-ticket-url="/tickets/{desk["run-partial"].pk}/[?"].*?</tr>',
        client.get(url).content.decode(),
        re.S,
    )
    assert row and '<td class="holder">ravi</td>' in row.group(0)
    facets = client.get(url).content.decode()
    assert re.search(r'>ravi</a>\s*<span class="count">1</span>', facets)


def test_a_keyboard_claim_from_the_queue_goes_back_to_that_queue_and_nowhere_else(
    client, reviewer, desk
):
    client.force_login(reviewer)
    stale, partial = desk["run-stale"], desk["run-partial"]
    back = "/tickets/?reason=no-approved-precedence"
    response = client.post(reverse("ticket-claim", args=[stale.pk]), {"revision": 1, "next": back})
    assert response["Location"] == back
    elsewhere = client.post(
        reverse("ticket-claim", args=[partial.pk]),
        {"revision": 1, "next": "https://elsewhere.example/"},
    )
    assert elsewhere["Location"] == reverse("ticket-detail", args=[partial.pk])
    # A bare word is a (relative) URL, never a view's name to look up: that was a 500.
    word = client.post(
        reverse("ticket-comment", args=[partial.pk]), {"text": "seen", "next": "foo"}
    )
    assert (word.status_code, word["Location"]) == (302, "foo")


def test_a_finding_tickets_raw_value_is_what_the_line_held(client, reviewer, tmp_path):
    from tests.seeding import ingest_lines

    ingest_lines(
        tmp_path,
        [
            '{"runId":"r-orphan","type":"tool_call","toolCallId":"c1","tool":"get_order",'
            '"arguments":{"orderId":"order-9"},"ok":true}',
            '{"runId":"r-orphan","type":"tool_observation","observationId":"o1",'
            '"toolCallId":"nowhere","source":"search-index","entity":"order-9","status":"paid"}',
        ],
    )
    ticket = Ticket.objects.get(finding_kind="orphan-observation")
    client.force_login(reviewer)
    package = json.loads(client.get(reverse("ticket-handoff", args=[ticket.pk])).content)
    [observation] = package["observations"]
    assert observation["rawValue"]["status"] == "paid"
    assert "field" not in observation["rawValue"] and "value" not in observation["rawValue"]


def queue_order(client, query: str) -> list[int]:
    body = client.get(f"{reverse('ticket-queue')}?{query}").content.decode()
    return [int(pk) for pk in re.findall(r'data-ticket-url="/tickets/(\d+)/', body)]


@pytest.mark.parametrize("query", ["sort=oldest", "sort=reason", "unsafe=no&sort=field", ""])
def test_a_ticket_links_to_its_neighbours_in_the_queue_it_came_from(client, reviewer, desk, query):
    client.force_login(reviewer)
    order = queue_order(client, query)
    assert len(order) >= 2
    came_from = f"?queue={quote(query)}"
    for index, pk in enumerate(order):
        body = client.get(reverse("ticket-detail", args=[pk]) + came_from).content.decode()
        previous = re.search(r'href="/tickets/(\d+)/[^"]*" id="previous-ticket"', body)
        following = re.search(r'href="/tickets/(\d+)/[^"]*" id="next-ticket"', body)
        assert (int(previous.group(1)) if previous else None) == (
            order[index - 1] if index else None
        )
        assert (int(following.group(1)) if following else None) == (
            order[index + 1] if index + 1 < len(order) else None
        )
        back = f"{reverse('ticket-queue')}?{query}" if query else reverse("ticket-queue")
        assert f'href="{back}" id="back-to-queue"' in body.replace("&amp;", "&")
    # Opened from elsewhere (a link), a ticket has no neighbours to move to.
    body = client.get(reverse("ticket-detail", args=[order[0]])).content.decode()
    assert 'id="next-ticket"' not in body and 'id="previous-ticket"' not in body


def test_auto_advance_opens_the_next_ticket_after_a_close(client, reviewer, desk):
    client.force_login(reviewer)
    first, second, *_ = queue_order(client, "sort=oldest")
    close = {"resolution": "unexplained", "advance": "1", "queue": "sort=oldest"}
    # htmx: the browser is sent to the next ticket of the same queue.
    response = client.post(
        reverse("ticket-close", args=[first]),
        {"revision": 1, **close},
        headers={"HX-Request": "true"},
    )
    assert response["HX-Redirect"] == f"/tickets/{second}/?queue=sort%3Doldest"
    assert Ticket.objects.get(pk=first).state == "closed"
    # A refused change stays on its ticket to say why.
    response = client.post(
        reverse("ticket-close", args=[first]),
        {"revision": 1, **close},
        headers={"HX-Request": "true"},
    )
    assert "HX-Redirect" not in response and 'id="ticket-work"' in response.content.decode()
    # A claim, an assignment or a comment leaves the ticket still to work: it stays, toggle
    # or not (issue 28: six claims in a row had closed nothing).
    advance = {"advance": "1", "queue": "sort=oldest"}
    for name, data in [
        ("ticket-claim", {"revision": 1}),
        ("ticket-assign", {"revision": 2, "assignee": ""}),
        ("ticket-comment", {"text": "seen"}),
    ]:
        response = client.post(
            reverse(name, args=[second]), {**data, **advance}, headers={"HX-Request": "true"}
        )
        assert "HX-Redirect" not in response and "Not applied" not in response.content.decode()
    response = client.post(reverse("ticket-comment", args=[second]), {"text": "again", **advance})
    assert response["Location"] == reverse("ticket-detail", args=[second])
    assert Ticket.objects.get(pk=second).state == "open"
    # A plain POST of a close is redirected to the next ticket.
    third = queue_order(client, "sort=oldest")[1]
    revision = Ticket.objects.get(pk=second).revision
    response = client.post(reverse("ticket-close", args=[second]), {"revision": revision, **close})
    assert response["Location"] == f"/tickets/{third}/?queue=sort%3Doldest"


def test_auto_advance_stays_on_the_last_ticket_of_the_queue(client, reviewer, desk):
    client.force_login(reviewer)
    last = queue_order(client, "sort=oldest")[-1]
    response = client.post(
        reverse("ticket-close", args=[last]),
        {"revision": 1, "resolution": "unexplained", "advance": "1", "queue": "sort=oldest"},
        headers={"HX-Request": "true"},
    )
    assert "HX-Redirect" not in response
    assert "That was the last ticket of this queue." in response.content.decode()


@pytest.mark.parametrize("how", ["number", "hash", "entity", "run", "source", "agent"])
def test_one_search_box_finds_tickets_by_number_entity_run_source_or_agent(
    client, reviewer, desk, how
):
    stale = desk["run-stale"]
    text = {
        "number": str(stale.pk),
        "hash": f"#{stale.pk}",
        "entity": stale.entity,
        "run": "run-stale",
        "source": "refund-service",
        "agent": stale.agent,
    }[how]
    expected = {
        "number": {stale.pk},
        "hash": {stale.pk},
        "entity": set(Ticket.objects.filter(entity=stale.entity).values_list("pk", flat=True)),
        "run": set(Ticket.objects.filter(run__run_id="run-stale").values_list("pk", flat=True)),
        "source": set(
            Ticket.objects.filter(sources__contains="refund-service").values_list("pk", flat=True)
        ),
        "agent": set(Ticket.objects.filter(agent=stale.agent).values_list("pk", flat=True)),
    }[how]
    assert stale.pk in expected and (how in ("number", "hash") or len(expected) >= 1)
    client.force_login(reviewer)
    body = client.get(reverse("ticket-queue"), {"q": text, "state": "any"}).content.decode()
    assert shown_ticket_ids(body) == expected
    assert f'id="queue-total">{len(expected)} ticket' in body
    assert "Search: <strong>" in body  # a chip that removes it


def test_a_search_that_matches_nothing_says_so(client, reviewer, desk):
    client.force_login(reviewer)
    body = client.get(reverse("ticket-queue"), {"q": "order-none", "state": "any"}).content.decode()
    assert shown_ticket_ids(body) == set()
    assert "No ticket matches these filters." in body


def test_the_batch_page_links_to_the_tickets_it_opened(client, reviewer, desk, tmp_path):
    batch = desk["run-stale"].batch
    ingest_lines(tmp_path, desk_lines(3, prefix="other"), name="other.jsonl")
    client.force_login(reviewer)
    page = client.get(reverse("batch-detail", args=[batch.public_id])).content.decode()
    link = re.search(r'href="([^"]*)" id="batch-tickets"', page).group(1).replace("&amp;", "&")
    body = client.get(link).content.decode()
    opened = set(Ticket.objects.filter(batch=batch).values_list("pk", flat=True))
    assert len(opened) == batch.tickets and shown_ticket_ids(body) == opened
    assert Ticket.objects.exclude(batch=batch).exists()


def test_the_run_page_shows_the_whole_run_as_a_timeline(
    client, viewer, desk, django_assert_max_num_queries
):
    stale = desk["run-stale"]
    run = stale.run
    client.force_login(viewer)
    ticket_page = client.get(reverse("ticket-detail", args=[stale.pk])).content.decode()
    assert f'href="{reverse("run-detail", args=[run.pk])}" id="run-link"' in ticket_page
    with django_assert_max_num_queries(12):
        body = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    timeline = body[body.index('id="run-timeline"') :]
    # Every record of the run, in line order: calls, observations, the resolution, the action.
    assert timeline.count('<li class="entry-') == TraceRecord.objects.filter(run=run).count()
    for kind in ("call", "observation", "resolution", "action"):
        assert f'class="entry-{kind}' in timeline
    assert "<code>Refunded</code>" in timeline and "<code>paid</code>" in timeline
    assert "issue_store_credit" in timeline
    # Its verdicts and findings, and every ticket of the run, linked.
    assert '<span class="kind kind-conflict">conflict</span> status' in body
    for ticket in Ticket.objects.filter(run=run):
        assert f'<a href="/tickets/{ticket.pk}/">#{ticket.pk}</a>' in body
    # Trace content is escaped.
    assert "<script>alert(1)</script>" not in body


def test_the_run_page_says_which_rule_of_which_version_resolved_each_group(
    client, viewer, reviewer, approver, tmp_path
):
    from reviewapp.policy.versions import policy_version_publish, proposal_create, proposal_decide
    from tests.seeding import owned_run

    proposal = proposal_create(
        user=reviewer,
        kind="authoritative-source",
        change={"field": "status", "source": "refund-service"},
        rationale="refunds are the refund service's",
    )
    proposal_decide(proposal=proposal, user=approver, approve=True, reason="")
    version = policy_version_publish(user=approver, reason="refund ownership")
    ingest_lines(tmp_path, owned_run("owned", "refund-service", "search-index"))
    run = Run.objects.get(run_id="owned")
    client.force_login(viewer)
    body = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    verdicts = re.search(r'<ul class="compact" id="run-verdicts">(.*?)</ul>', body, re.S).group(1)
    text = " ".join(re.sub(r"<[^>]+>", " ", verdicts).split())
    assert text == (
        f"resolved status of owned · by rule refund-service-owns-status of v{version.number}"
        " → refunded · then issue_refund"
    )
    assert f'<a href="{reverse("policy-version", args=[version.number])}">v1</a>' in verdicts
    assert "<code>refund-service-owns-status</code>" in verdicts


def test_a_value_that_is_an_object_is_shown_as_json_on_the_ticket_page(client, viewer, tmp_path):
    chosen = {"status": "refunded", "note": "<b>x</b>"}
    ingest_lines(
        tmp_path,
        [
            *review_desk_trace(),
            line(
                runId="run-partial",
                type="observation_resolution",
                kind="resolved",
                value=chosen,
                confidence={"p": 0.9},
            ),
        ],
    )
    ticket = Ticket.objects.get(run__run_id="run-partial", kind="conflict")
    client.force_login(viewer)
    body = client.get(reverse("ticket-detail", args=[ticket.pk])).content.decode()
    agent = body[body.index('id="agent-title"') :]
    agent = agent[: agent.index("</article>")]
    assert "&#x27;" not in agent and "<b>" not in agent
    compact = json.dumps(chosen, separators=(",", ":"), sort_keys=True)
    assert compact.replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;") in agent
    assert "{&quot;p&quot;:0.9}" in agent


def test_a_search_for_a_run_id_leads_to_the_run_page(client, viewer, desk):
    run = desk["run-stale"].run
    client.force_login(viewer)
    body = client.get(reverse("ticket-queue"), {"q": run.run_id, "state": "any"}).content.decode()
    assert f'<p id="search-run">Run <a href="{reverse("run-detail", args=[run.pk])}">' in body
    assert client.get(reverse("run-detail", args=[run.pk + 10_000])).status_code == 404


def test_a_bulk_close_without_a_cause_is_refused_before_asking(client, reviewer, desk):
    client.force_login(reviewer)
    posted = {"selected": [f"{desk['run-stale'].pk}:1"], "operation": "close"}
    response = client.post(reverse("ticket-bulk"), {**posted, "resolution": "explained"})
    assert response.status_code == 302
    assert "closing as explained needs" in client.get(response["Location"]).content.decode()


def test_undo_reopens_exactly_what_a_bulk_close_closed_audited(
    client, reviewer, second_reviewer, desk
):
    client.force_login(reviewer)
    stale, mismatch, partial = desk["run-stale"], desk["run-mismatch"], desk["run-partial"]
    # Closed before, by someone else: the undo must leave it closed.
    changes.ticket_close(partial, revision=1, actor=second_reviewer, resolution="unexplained")
    posted = {
        "selected": [f"{stale.pk}:1", f"{mismatch.pk}:1"],
        "operation": "close",
        "resolution": "unexplained",
        "confirmed": "1",
    }
    queue_url = client.post(reverse("ticket-bulk"), posted)["Location"]
    page = client.get(queue_url).content.decode()
    bulk = re.search(r'name="bulk" value="([0-9a-f]+)"', page).group(1)
    assert "You closed 2 tickets in bulk." in page
    history = list(AuditEvent.objects.order_by("id").values_list("id", "verb", "data"))
    response = client.post(reverse("ticket-bulk-undo"), {"bulk": bulk, "next": queue_url})
    assert response["Location"] == queue_url
    assert "2 tickets reopened." in client.get(queue_url).content.decode()
    states = dict(Ticket.objects.values_list("pk", "state"))
    assert (states[stale.pk], states[mismatch.pk], states[partial.pk]) == ("open", "open", "closed")
    # History is kept as it was; the undo is new events, each naming the bulk change.
    after = list(AuditEvent.objects.order_by("id").values_list("id", "verb", "data"))
    assert after[: len(history)] == history
    undone = after[len(history) :]
    assert [(verb, data["undoes"]) for _, verb, data in undone] == [("reopened", bulk)] * 2
    assert {e.ticket_id for e in AuditEvent.objects.filter(data__undoes=bulk)} == {
        stale.pk,
        mismatch.pk,
    }
    # Once undone, it cannot be undone again, and the queue offers nothing.
    client.post(reverse("ticket-bulk-undo"), {"bulk": bulk})
    assert "can no longer be undone" in client.get(queue_url).content.decode()
    assert AuditEvent.objects.count() == len(after)


def test_only_the_author_may_undo_a_bulk_close_and_only_for_a_while(
    client, reviewer, second_reviewer, desk, monkeypatch
):
    stale = desk["run-stale"]
    outcome = changes.tickets_close(
        {stale.pk: 1}, actor=second_reviewer, resolution="unexplained", bulk="b1"
    )
    assert outcome.changed == [stale.pk]
    client.force_login(reviewer)
    client.post(reverse("ticket-bulk-undo"), {"bulk": "b1"})
    assert Ticket.objects.get(pk=stale.pk).state == "closed"
    assert changes.bulk_closed("b1", reviewer) == {}
    assert changes.bulk_closed("b1", second_reviewer) == {stale.pk: 2}
    # Past the window, not even its author may.
    monkeypatch.setattr(changes, "UNDO_SECONDS", -60)
    assert changes.bulk_closed("b1", second_reviewer) == {}
    with pytest.raises(changes.TicketActionError):
        changes.bulk_undo("b1", actor=second_reviewer)
    assert Ticket.objects.get(pk=stale.pk).state == "closed"


def test_the_filter_form_offers_a_version_published_after_it_was_shown(
    client, desk, reviewer, approver
):
    from tests.policy.helpers import publish_review_rule

    client.force_login(reviewer)
    offered = re.compile(r'<option value="(\d+)">v\1')
    assert not offered.findall(client.get(reverse("ticket-queue")).content.decode())
    version = publish_review_rule(reviewer, approver)
    # The form is kept per filters and newest version: the same filters show the new one.
    page = client.get(reverse("ticket-queue")).content.decode()
    assert offered.findall(page) == [str(version.number)]
