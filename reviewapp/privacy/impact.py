"""Whether redaction would change what the oracle says: runs judged with and without it,
compared verdict by verdict (field, action, kind, reason, rule, unsafe) and by their
findings' kinds; entities may differ (they become tokens). One comparison for both uses:
a new rule set before it takes effect (the runs of the last 30 days, as stored) and a
replay export's redaction (the runs exported)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.utils import timezone

from reviewapp.engine import Policy, Record, RecordError, judge_runs, parse_record
from reviewapp.models import Run, stored_documents
from reviewapp.privacy.rules import Redactor

RECENT_DAYS = 30
RUN_CHUNK = 2000
FINDINGS = "findings"
INVALID = "a record redaction makes invalid"


@dataclass(frozen=True)
class RunChange:
    """A run whose verdicts redaction would change, and where: the fields whose verdicts
    differ, FINDINGS when its findings do, INVALID when a redacted record no longer parses."""

    run_id: str
    fields: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.run_id} ({', '.join(self.fields)})"


def _shape(records: list[Record], policy: Policy) -> dict[str, tuple[dict[str, Any], list[str]]]:
    shapes = {}
    for judgement in judge_runs(records, policy):
        verdicts: dict[str, list[Any]] = defaultdict(list)
        for v in judgement.verdicts:
            verdicts[v.field].append((v.action, v.kind, v.reason, v.rule, v.unsafe))
        shapes[judgement.run_id] = (dict(verdicts), sorted(f.kind for f in judgement.findings))
    return shapes


def changed_runs(
    originals: list[Record], redacted: list[Record], policy: Policy
) -> list[RunChange]:
    """The runs of `originals` judged otherwise once redacted (`redacted`: the same
    records, redacted), naming the fields that differ."""
    before, after = _shape(originals, policy), _shape(redacted, policy)
    changes = []
    for run_id, (verdicts, findings) in before.items():
        other_verdicts, other_findings = after.get(run_id, ({}, []))
        fields = sorted(
            name
            for name in verdicts.keys() | other_verdicts.keys()
            if verdicts.get(name) != other_verdicts.get(name)
        )
        if findings != other_findings:
            fields.append(FINDINGS)
        if fields:
            changes.append(RunChange(run_id, tuple(fields)))
    return changes


def run_changes(
    runs: Iterator[tuple[Any, list[dict[str, Any]]]], redactor: Redactor, policy: Policy
) -> list[RunChange]:
    """Each run's documents (grouped by run) judged with and without `redactor`; only runs
    it changes a document of are judged."""
    changes: list[RunChange] = []
    for _key, documents in runs:
        redacted_documents = [redactor(document) for document in documents]
        redactor.take_kept()
        if all(a is b for a, b in zip(redacted_documents, documents, strict=True)):
            continue
        originals = [parse_record(document) for document in documents]
        try:
            redacted = [parse_record(document) for document in redacted_documents]
        except RecordError:
            changes.append(RunChange(originals[0].run_id, (INVALID,)))
            continue
        changes.extend(changed_runs(originals, redacted, policy))
    return changes


def recent_changes(
    redactor: Redactor, policy: Policy, *, days: int = RECENT_DAYS
) -> list[RunChange]:
    """The runs started in the last `days` days whose verdicts `redactor` would change, as
    stored (records already redacted by earlier rules are redacted again: a token stays)."""
    since = timezone.now() - timedelta(days=days)
    pks = list(
        Run.objects.filter(started_at__gte=since).order_by("pk").values_list("pk", flat=True)
    )
    changes: list[RunChange] = []
    for start in range(0, len(pks), RUN_CHUNK):
        changes.extend(run_changes(_by_run(pks[start : start + RUN_CHUNK]), redactor, policy))
    return changes


def _by_run(pks: list[int]) -> Iterator[tuple[int, list[dict[str, Any]]]]:
    current: int | None = None
    documents: list[dict[str, Any]] = []
    for run_pk, _record_id, document in stored_documents(pks):
        if run_pk != current and documents:
            yield current, documents  # type: ignore[misc]
            documents = []
        current = run_pk
        documents.append(document)
    if documents:
        yield current, documents  # type: ignore[misc]


def refusal(changes: list[RunChange], shown: int = 5) -> str:
    """What a refusal says: how many runs, and the first few with their fields."""
    more = f" and {len(changes) - shown} more" if len(changes) > shown else ""
    return (
        f"would change the verdicts of {len(changes)} run(s): "
        f"{'; '.join(str(change) for change in changes[:shown])}{more}"
    )
