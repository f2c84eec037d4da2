"""Suggested rules: where reviewers keep marking the same side right in a family of tickets
(field, source pair, action, how the revision domains relate: the ticket's fingerprint) and
no rule covers it yet, a rule is suggested.

- `authoritative-source`: one source marked right in at least SUGGEST_MIN_DECISIONS of the
  family's marked closes, and in at least SUGGEST_MIN_SHARE of them;
- `higher-source-revision` for a domain: in at least SUGGEST_MIN_DECISIONS marked closes of
  the family whose observations all share that domain, the right one was always the one
  with the highest revision.

A mark counts while the close that made it stands (the ticket's revision is the mark's).
Everything is counted by ONE aggregate query (SUGGESTION_TALLY), a GROUP BY over the marks
joined to their tickets; the thresholds are read over its few rows. Computed by a worker
(suggestions_refresh, after a marked close and on beat), never in a request. A suggestion
never publishes anything: a person turns it into a proposal, which four eyes decide."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, OuterRef, QuerySet
from django.urls import reverse

from reviewapp.alerts import raise_alert
from reviewapp.alerts.kinds import SUGGESTION_READY
from reviewapp.engine import PolicyError
from reviewapp.infra.locks import transaction_lock
from reviewapp.models import RuleProposal, RuleSuggestion, SuggestionDismissal, Ticket
from reviewapp.policy.candidates import candidate_of_file
from reviewapp.policy.documents import apply_change, describe_change
from reviewapp.policy.versions import active_document, draft_document
from reviewapp.replay.fixtures import FixtureError
from reviewapp.replay.impact import impact
from reviewapp.replay.jobs import ReplayError

log = logging.getLogger(__name__)

AUTHORITATIVE = RuleSuggestion.Kind.AUTHORITATIVE_SOURCE
HIGHER = RuleSuggestion.Kind.HIGHER_SOURCE_REVISION

# Per family, shared domain ("" for none) and right source ("" for none of them): how many
# marked closes, how many of them chose the unique highest revision, and over the family and
# over the family's domain the same sums, with a stamp of the family's marks (their count
# and the sum of their ids: one more, one fewer or one replaced changes it).
SUGGESTION_TALLY = """
SELECT t.fingerprint, m.domain, m.source,
       count(*) AS marked,
       sum(count(*)) OVER family AS family_marked,
       sum(count(*)) OVER family_domain AS domain_marked,
       sum(count(*) FILTER (WHERE m.right_is_higher)) OVER family_domain AS domain_higher,
       sum(sum(m.id)) OVER family AS family_ids
FROM reviewapp_ticketmark m
JOIN reviewapp_ticket t ON t.id = m.ticket_id AND t.revision = m.ticket_revision
GROUP BY t.fingerprint, m.domain, m.source
WINDOW family AS (PARTITION BY t.fingerprint),
       family_domain AS (PARTITION BY t.fingerprint, m.domain)
"""


@dataclass(frozen=True)
class Tally:
    """One row of SUGGESTION_TALLY."""

    fingerprint: str
    domain: str
    source: str
    marked: int
    family_marked: int
    domain_marked: int
    domain_higher: int
    family_ids: int

    @property
    def stamp(self) -> str:
        return f"{self.family_marked}:{self.family_ids}"


@dataclass(frozen=True)
class Suggested:
    """A rule the tallies suggest, before it is checked against the policy."""

    kind: str
    fingerprint: str
    source: str
    domain: str
    agreeing: int
    decisions: int
    stamp: str

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.fingerprint}:{self.source or self.domain}"


def tallies() -> list[Tally]:
    with connection.cursor() as cursor:
        cursor.execute(SUGGESTION_TALLY)
        return [Tally(*(row[:3]), *(int(v or 0) for v in row[3:])) for row in cursor.fetchall()]


def suggested(rows: Iterable[Tally], *, min_decisions: int, min_share: float) -> list[Suggested]:
    """The rules the tallies suggest under these thresholds (pure: tested without data)."""
    found: dict[str, Suggested] = {}
    for row in rows:
        owner_share = row.marked / row.family_marked if row.family_marked else 0.0
        if row.source and row.marked >= min_decisions and owner_share >= min_share:
            s = Suggested(
                AUTHORITATIVE, row.fingerprint, row.source, "", row.marked, row.family_marked,
                row.stamp,
            )  # fmt: skip
            found[s.key] = s
        always_higher = row.domain_higher == row.domain_marked
        if row.domain and always_higher and row.domain_marked >= min_decisions:
            s = Suggested(
                HIGHER, row.fingerprint, "", row.domain, row.domain_higher, row.domain_marked,
                row.stamp,
            )  # fmt: skip
            found[s.key] = s
    return list(found.values())


def change_of(kind: str, field: str, action: str, source: str, domain: str) -> dict[str, Any]:
    change: dict[str, Any] = {"field": field}
    if action:
        change["actions"] = [action]
    if kind == AUTHORITATIVE:
        change["source"] = source
    else:
        change["revisionDomain"] = domain
    return change


def covered(document: dict[str, Any], kind: str, change: dict[str, Any]) -> bool:
    """Whether a rule of the document already decides what the change would: a rule of the
    same kind for the field (or every field), the action (or any), and the same source, or
    a domain-less or same-domain higher-revision rule."""
    action = (change.get("actions") or [""])[0]
    for rule in document.get("rules", []):
        if rule.get("kind") != kind or rule.get("field") not in (change["field"], "*"):
            continue
        if rule.get("actions") and action not in rule["actions"]:
            continue
        if kind == AUTHORITATIVE and rule.get("source") != change["source"]:
            continue
        if kind == HIGHER and rule.get("revisionDomain") not in (None, change["revisionDomain"]):
            continue
        return True
    return False


def suggestions_refresh() -> int:
    """Compute every suggestion again: rows for those the marks suggest and no rule of the
    draft (the active version and the approved proposals) covers, the others removed; the
    impact of each new or changed one started. How many are ready (see ready_suggestions)."""
    found = suggested(
        tallies(),
        min_decisions=settings.SUGGEST_MIN_DECISIONS,
        min_share=settings.SUGGEST_MIN_SHARE,
    )
    with transaction.atomic():
        transaction_lock("crosscheck_suggestions")
        draft = draft_document()
        waiting = _waiting_proposals()
        families = _families({s.fingerprint for s in found})
        kept: list[str] = []
        for item in found:
            family = families.get(item.fingerprint)
            if family is None:
                continue
            field, action, label = family
            change = change_of(item.kind, field, action, item.source, item.domain)
            if covered(draft, item.kind, change):
                continue
            proposal = next((p for p in waiting if _covers(p, item.kind, change)), None)
            _store(item, change, field, action, label, proposal)
            kept.append(item.key)
        RuleSuggestion.objects.exclude(key__in=kept).delete()
    ready = list(ready_suggestions())
    for suggestion in ready:
        # Once for each suggestion on its evidence: the same one, suggested again on more
        # decisions (after a dismissal, say), is news again.
        raise_alert(
            kind=SUGGESTION_READY,
            key=f"{suggestion.key}:{suggestion.evidence_stamp}",
            title=f"Suggested rule: {suggestion.sentence}",
            text=f"{suggestion.agreeing} of {suggestion.decisions} decisions agree",
            link=reverse("suggestions"),
        )
    return len(ready)


def _families(fingerprints: set[str]) -> dict[str, tuple[str, str, str]]:
    """Each family's field, action and label, from one of its tickets."""
    rows = (
        Ticket.objects.filter(fingerprint__in=fingerprints)
        .order_by("fingerprint", "-id")
        .distinct("fingerprint")
        .values_list("fingerprint", "field", "action", "fingerprint_label")
    )
    return {fp: (field, action, label) for fp, field, action, label in rows}


def _waiting_proposals() -> list[RuleProposal]:
    """Proposals not decided yet: one that covers a suggestion makes it proposed already."""
    return list(RuleProposal.objects.filter(state=RuleProposal.State.PENDING).order_by("id"))


def _covers(proposal: RuleProposal, kind: str, change: dict[str, Any]) -> bool:
    return covered({"rules": [{"kind": proposal.kind, **proposal.change}]}, kind, change)


def _store(
    item: Suggested,
    change: dict[str, Any],
    field: str,
    action: str,
    label: str,
    proposal: RuleProposal | None,
) -> None:
    previous = RuleSuggestion.objects.filter(key=item.key).first()
    values = {
        "kind": item.kind,
        "fingerprint": item.fingerprint,
        "family_label": label,
        "field": field,
        "action": action,
        "source": item.source,
        "domain": item.domain,
        "change": change,
        "sentence": describe_change(item.kind, change),
        "agreeing": item.agreeing,
        "decisions": item.decisions,
        "evidence_stamp": item.stamp,
        "proposal": proposal,
    }
    candidate = _candidate(item.kind, change)
    values["candidate"] = candidate
    suggestion, _ = RuleSuggestion.objects.update_or_create(key=item.key, defaults=values)
    unchanged = (
        previous is not None
        and previous.evidence_stamp == item.stamp
        and previous.candidate_id == getattr(candidate, "pk", None)
    )
    if candidate is not None and not unchanged and not _dismissed(suggestion):
        # The impact the proposal page shows, for the same document: replayed by workers.
        transaction.on_commit(lambda: _impact_start(candidate))


def _impact_start(candidate) -> None:
    try:
        impact(candidate, start=True)
    except (ReplayError, FixtureError):  # the page says it was not measured
        log.warning("the impact of suggested candidate %s was not started", candidate.pk)


def _candidate(kind: str, change: dict[str, Any]):
    """The active version with the change applied, as a candidate to replay; None when it
    would not make a valid policy (the page says so)."""
    _, active = active_document()
    try:
        return candidate_of_file(apply_change(active, kind, change))
    except (PolicyError, ValueError):
        return None


def _dismissed(suggestion: RuleSuggestion) -> bool:
    return SuggestionDismissal.objects.filter(
        key=suggestion.key, evidence_stamp=suggestion.evidence_stamp
    ).exists()


def _proposed() -> Exists:
    """Its proposal is pending, or approved and waiting to be published (a rejected one
    leaves it waiting for a person again)."""
    return Exists(
        RuleProposal.objects.filter(
            pk=OuterRef("proposal_id"),
            state__in=[RuleProposal.State.PENDING, RuleProposal.State.APPROVED],
            published_in__isnull=True,
        )
    )


def _dismissal() -> Exists:
    return Exists(
        SuggestionDismissal.objects.filter(
            key=OuterRef("key"), evidence_stamp=OuterRef("evidence_stamp")
        )
    )


def annotated() -> QuerySet[RuleSuggestion]:
    """Every suggestion, each with `dismissed` and `proposed`."""
    return RuleSuggestion.objects.annotate(dismissed=_dismissal(), proposed=_proposed())


def ready_suggestions() -> QuerySet[RuleSuggestion]:
    """The suggestions waiting for a person: neither dismissed on their evidence nor
    proposed already (what an alert counts)."""
    return RuleSuggestion.objects.filter(~_dismissal(), ~_proposed())
