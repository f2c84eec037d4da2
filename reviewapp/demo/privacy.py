"""The privacy screens in the demo: a redaction rule set in force (emails and card numbers
become tokens at ingest, their raw values kept encrypted), and an erasure an admin asked for,
waiting for a second admin's approval (docs/security.md)."""

from __future__ import annotations

from typing import Any

from reviewapp.accounts.roles import ADMIN
from reviewapp.models import ErasureRequest, RedactionRuleSet
from reviewapp.privacy.erasure import erasure_request
from reviewapp.privacy.versions import redaction_set

DEMO_REDACTION = {
    "rules": [
        {"name": "emails", "pattern": "email", "canonical": "casefold", "keep_raw": True},
        {"name": "card numbers", "pattern": "card", "canonical": "digits"},
    ]
}
# A customer who asked to be forgotten (not in the demo corpus: the request only waits).
DEMO_ERASED_VALUE = "former-customer@example.com"


def seed_privacy_demo(users: dict[str, Any]) -> str:
    """Once: the rule set before the corpus is ingested, and one erasure request."""
    said = []
    if not RedactionRuleSet.objects.exists():
        version = redaction_set(
            DEMO_REDACTION, user=users[ADMIN], reason="No email or card number in plain text."
        )
        said.append(f"redaction v{version.number} in force")
    if not ErasureRequest.objects.exists():
        request = erasure_request(
            DEMO_ERASED_VALUE, user=users[ADMIN], reason="The customer asked to be forgotten."
        )
        said.append(f"erasure #{request.pk} waiting for a second admin")
    return "Privacy: " + (", ".join(said) or "as before") + "."
