"""403 and 404 are pages of the product: navigation, and the reason in words."""

from django.urls import reverse

from reviewapp.policy.versions import proposal_create


def test_a_missing_page_says_so_with_a_way_back(client, viewer):
    client.force_login(viewer)
    response = client.get("/tickets/999999/")
    assert response.status_code == 404
    body = response.content.decode()
    assert "Nothing here" in body and "<code>/tickets/999999/</code>" in body
    assert f'href="{reverse("dashboard")}"' in body and 'class="mainnav"' in body


def test_a_refusal_names_the_role_and_the_reason(client, viewer, approver):
    client.force_login(viewer)
    response = client.get(reverse("policy-propose"))
    assert response.status_code == 403
    body = response.content.decode()
    assert "You may not do this" in body and "(role: viewer)" in body
    assert 'class="mainnav"' in body
    # A refusal with its own reason says it.
    proposal = proposal_create(
        user=approver, kind="require-review", change={"field": "status"}, rationale="x"
    )
    client.force_login(approver)
    response = client.post(reverse("proposal-decide", args=[proposal.pk]), {"decision": "approve"})
    assert response.status_code == 403
    assert "someone else must approve or reject it" in response.content.decode()


def test_an_escaped_path_in_the_404_page(client, viewer):
    client.force_login(viewer)
    body = client.get("/nope/<script>x</script>").content.decode()
    assert "<script>x</script>" not in body and "/nope/%3Cscript%3Ex%3C/script%3E" in body
