"""Candidates: the policies runs are judged under prospectively, beside the active one
(replay, shadow mode). A candidate is made from a published version, the built-in default,
the draft, the active version with one proposal applied, or a policy file, and kept as it
was: when the draft changes, the next candidate made from it is a new one.

Each builds on a version (`base_number`) and is measured against it (`baseline_of`): a
proposal's candidate is the active version with that proposal alone, so that its impact is
its own, not that of others approved or published meanwhile."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.db import IntegrityError, transaction

from reviewapp.engine import Policy, load_policy
from reviewapp.judging.policies import default_policy_document
from reviewapp.judging.store import PolicyRef
from reviewapp.models import PolicyCandidate, PolicyVersion, RuleProposal
from reviewapp.policy.documents import apply_change
from reviewapp.policy.versions import active_document, draft_document


def candidate_of_version(version: PolicyVersion, *, user: Any = None) -> PolicyCandidate:
    return _kept(
        PolicyCandidate.Kind.VERSION,
        dict(version.document),
        number=version.number,
        base_number=version.based_on,
        version=version,
        user=user,
    )


def candidate_of_default(*, user: Any = None) -> PolicyCandidate:
    """The built-in default, as it reads now (number 0: runs are judged under it before
    any version is published)."""
    return _kept(
        PolicyCandidate.Kind.DEFAULT, default_policy_document(), number=0, base_number=0, user=user
    )


def baseline_of(candidate: PolicyCandidate, *, user: Any = None) -> PolicyCandidate:
    """What a candidate is measured against: the version it builds on (the built-in default
    for number 0), judged on the same runs."""
    if candidate.base_number == 0:
        return candidate_of_default(user=user)
    version = PolicyVersion.objects.get(number=candidate.base_number)
    return candidate_of_version(version, user=user)


def candidate_of_draft(*, user: Any = None) -> PolicyCandidate:
    """The draft as it stands: the active document with every approved proposal."""
    base, _ = active_document()
    return _kept(
        PolicyCandidate.Kind.DRAFT,
        draft_document(),
        number=base + 1,
        base_number=base,
        user=user,
    )


def candidate_of_proposal(proposal: RuleProposal, *, user: Any = None) -> PolicyCandidate:
    """The active version with this proposal alone applied, whatever its state (an approver
    looks at a pending one before deciding; the draft's candidate holds every approved
    one). PolicyError or ValueError when it does not apply to the active version alone."""
    base, _ = active_document()
    return _kept(
        PolicyCandidate.Kind.PROPOSAL,
        _applied(proposal),
        number=base + 1,
        base_number=base,
        proposal=proposal,
        user=user,
    )


def made_candidate_of_draft() -> PolicyCandidate | None:
    """The draft's candidate as it stands if one was made already (a page that shows what
    was measured under it makes none)."""
    return _found(PolicyCandidate.Kind.DRAFT, draft_document())


def made_candidate_of_proposal(proposal: RuleProposal) -> PolicyCandidate | None:
    """The proposal's candidate, on the active version as it stands, if one was made already."""
    return _found(PolicyCandidate.Kind.PROPOSAL, _applied(proposal), proposal=proposal)


def _applied(proposal: RuleProposal) -> dict[str, Any]:
    _, active = active_document()
    return apply_change(active, proposal.kind, proposal.change)


def candidate_of_file(document: dict[str, Any], *, user: Any = None) -> PolicyCandidate:
    """A policy document read from a file (`manage.py replay --policy FILE`), judged as the
    number it would get if published now."""
    base, _ = active_document()
    return _kept(
        PolicyCandidate.Kind.FILE, dict(document), number=base + 1, base_number=base, user=user
    )


def policy_of_candidate(candidate: PolicyCandidate) -> Policy:
    return load_policy({**candidate.document, "version": candidate.number})


def candidate_ref(candidate: PolicyCandidate) -> PolicyRef:
    """How judgements under the candidate are stored (judging.store)."""
    return PolicyRef(candidate.number, candidate.version_id, candidate.pk)


def _identity(
    kind: str,
    document: dict[str, Any],
    version: PolicyVersion | None = None,
    proposal: RuleProposal | None = None,
) -> dict[str, Any]:
    """What a candidate is known by: its kind, its document's hash and what it was made of."""
    sha256 = hashlib.sha256(
        json.dumps(_unversioned(document), sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()
    return {"kind": kind, "sha256": sha256, "version": version, "proposal": proposal}


def _unversioned(document: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in document.items() if key != "version"}


def _found(
    kind: str,
    document: dict[str, Any],
    *,
    version: PolicyVersion | None = None,
    proposal: RuleProposal | None = None,
) -> PolicyCandidate | None:
    return PolicyCandidate.objects.filter(**_identity(kind, document, version, proposal)).first()


def _kept(
    kind: str,
    document: dict[str, Any],
    *,
    number: int,
    base_number: int,
    version: PolicyVersion | None = None,
    proposal: RuleProposal | None = None,
    user: Any = None,
) -> PolicyCandidate:
    document = _unversioned(document)
    load_policy(document)  # a candidate is always a valid policy
    identity = _identity(kind, document, version, proposal)
    found = PolicyCandidate.objects.filter(**identity).first()
    if found is not None:
        return found
    try:
        with transaction.atomic():
            return PolicyCandidate.objects.create(
                **identity,
                document=document,
                number=number,
                base_number=base_number,
                created_by=user if user is not None and user.is_authenticated else None,
            )
    except IntegrityError:  # made by someone else a moment ago
        return PolicyCandidate.objects.get(**identity)
