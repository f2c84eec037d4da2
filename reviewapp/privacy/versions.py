"""Versions of the redaction rules: made one way (redaction_set: checked, judged both ways
over the last 30 days' runs, audited), the latest one applied by ingest."""

from __future__ import annotations

import json
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max

from reviewapp.accounts.audit import audit_record
from reviewapp.judging.policies import active_policy
from reviewapp.models import RedactionRuleSet
from reviewapp.privacy.impact import RECENT_DAYS, recent_changes, refusal
from reviewapp.privacy.rules import Redactor, RuleError, RuleSet, parse_rules

REDACTION_SET = "redaction.set"


class RedactionRefused(RuleError):
    """A rule set that would change verdicts; `changes` says which runs and fields."""

    def __init__(self, message: str, changes: list[Any]):
        super().__init__(message)
        self.changes = changes


def read_rules_text(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise RuleError(f"not JSON: {exc}") from None


def redaction_set(document: Any, *, user: Any, reason: str) -> RedactionRuleSet:
    """Make the next version of the rules from `document`: RuleError when it is not a
    valid rule set or names keys the oracle needs, RedactionRefused (naming runs and
    fields) when the runs started in the last 30 days would be judged otherwise with it."""
    if not reason.strip():
        raise RuleError("say why (a reason is required)")
    active = active_policy()
    rules = parse_rules(document, active.policy.decision_fields)
    changes = recent_changes(Redactor(rules), active.policy)
    if changes:
        raise RedactionRefused(
            f"refused: these rules {refusal(changes)} in the last {RECENT_DAYS} days", changes
        )
    try:
        with transaction.atomic():
            number = (RedactionRuleSet.objects.aggregate(n=Max("number"))["n"] or 0) + 1
            version = RedactionRuleSet.objects.create(
                number=number,
                document=rules.as_document(),
                reason=reason.strip(),
                created_by=user,
            )
            audit_record(
                actor=user,
                verb=REDACTION_SET,
                target=str(version),
                rules=[rule.name for rule in rules.rules],
                reason=version.reason,
            )
    except IntegrityError:
        raise RuleError("another version was made at the same moment: try again") from None
    return version


_cached: tuple[int, RuleSet] = (0, RuleSet())


def active_rules() -> RuleSet:
    """The latest version's rules (none before the first): which version that is, is read
    each call (one row of an index), its document only when it changed. Known by its
    primary key, never reused, unlike a number (a test's rolled back version)."""
    global _cached
    latest = RedactionRuleSet.objects.order_by("-number").values_list("pk", flat=True).first()
    if latest is None:
        return RuleSet()
    if latest != _cached[0]:
        _cached = (latest, parse_rules(RedactionRuleSet.objects.get(pk=latest).document))
    return _cached[1]


def active_document() -> dict[str, Any]:
    return active_rules().as_document()
