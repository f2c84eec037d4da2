"""The two ways to make a redaction version: the command and the admin page; both refuse
what the oracle needs, and only an admin may."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from reviewapp.models import AuditEvent, RedactionRuleSet

pytestmark = pytest.mark.django_db

RULES = {"rules": [{"name": "emails", "pattern": "email", "canonical": "casefold"}]}


def test_the_command_sets_and_shows_rules_for_an_admin_only(tmp_path, admin_user, approver):
    path = tmp_path / "rules.json"
    path.write_text(json.dumps(RULES))
    with pytest.raises(CommandError, match="may not manage redaction rules"):
        call_command("redaction", "set", str(path), by=approver.username, reason="x")
    out = io.StringIO()
    call_command("redaction", "set", str(path), by=admin_user.username, reason="mail", stdout=out)
    assert "redaction v1 is in force" in out.getvalue()
    assert AuditEvent.objects.get(verb="redaction.set").channel == "cli"
    shown = io.StringIO()
    call_command("redaction", "show", stdout=shown)
    assert '"pattern": "email"' in shown.getvalue() and "v1" in shown.getvalue()
    path.write_text(json.dumps({"rules": [{"name": "s", "keys": ["status"]}]}))
    with pytest.raises(CommandError, match="cannot redact status"):
        call_command("redaction", "set", str(path), by=admin_user.username, reason="x")


def test_the_page_lists_versions_shows_a_refusal_and_is_an_admins(client, admin_user, approver):
    client.force_login(approver)
    assert client.get(reverse("redaction")).status_code == 403
    client.force_login(admin_user)
    refused = client.post(
        reverse("redaction"),
        {"document": json.dumps({"rules": [{"name": "s", "keys": ["source"]}]}), "reason": "x"},
    )
    assert "cannot redact source" in refused.content.decode()
    assert not RedactionRuleSet.objects.exists()
    made = client.post(reverse("redaction"), {"document": json.dumps(RULES), "reason": "mail"})
    assert made.status_code == 302
    page = client.get(reverse("redaction")).content.decode()
    assert "v1" in page and "<code>emails</code>" in page and "mail" in page
    assert RedactionRuleSet.objects.get().created_by == admin_user
