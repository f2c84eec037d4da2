"""Comparing a run's baseline verdicts (the version a candidate builds on, or those recorded)
with its prospective ones, group by group.

A group is what a ticket is about: a (entity, field) verdict, or a finding kind. For each
the comparison says what changed (COUNTS names the categories), whether the prospective
verdict settles the group's open ticket where the baseline's did not (policy.settlements.
settles: the same rule the proposal preview and the labels after publishing use), whether
the change is where the candidate's own change reaches (`intended`: policy.documents.
ChangeScope; any other change is a regression), and feeds a digest of everything
compared, so that the same replay always gives the same result hash. Every group is
counted; a result row is kept for each group that changed or settles its ticket (the
drill-down from every count), while both sides of every group stay in their judgements.
Nothing here reads or writes the database: callers bring both sides and store the rows."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from reviewapp.policy.documents import ChangeScope
from reviewapp.policy.settlements import settles
from reviewapp.review.opening import ticket_key

CONFLICT = "conflict"
SETTLED_KINDS = frozenset({"confirmed", "resolved"})
# The flags of a result, in the order screens list them, with what they are called there.
FLAGS = {
    "newly_resolved": "newly resolved",
    "newly_conflict": "newly conflict",
    "value_changed": "value changed",
    "newly_unsafe": "newly unsafe",
    "newly_safe": "newly safe",
    "finding_gained": "findings gained",
    "finding_lost": "findings lost",
    "other_changed": "other change (reason, rule, a group on one side only)",
}
# What a job counts: groups, those unchanged, each flag, the open tickets it would settle,
# runs compared, and pinned runs that had no record left to judge.
# runs_expired: runs whose raw data retention expired (privacy/retention.py), not judged.
COUNTS = (
    "groups",
    "unchanged",
    *FLAGS,
    "tickets_settled",
    # Changed groups where the candidate's own change reaches (the rest are regressions).
    "intended",
    "runs",
    "runs_missing",
    "runs_expired",
)

RESULT_COLUMNS = (
    "job_id",
    "run_id",
    "key",
    "kind",
    "entity",
    "field",
    "finding_kind",
    "recorded_judgement_id",
    "recorded_verdict_id",
    "recorded_finding_id",
    "prospective_judgement_id",
    "prospective_verdict_id",
    "prospective_finding_id",
    "changed",
    *FLAGS,
    "ticket_id",
    "settles_ticket",
    "intended",
)


@dataclass(frozen=True, slots=True)
class Said:
    """One side's verdict on a group, as stored (id) and as compared."""

    id: int
    kind: str
    reason: str | None
    rule: str | None
    value: Any
    unsafe: bool
    # The agent's next action the verdict is about (not compared: the records decide it).
    action: str | None = None

    def comparable(self) -> str:
        """Everything compared, in one string (unambiguous: fields apart by a separator
        no value holds unescaped, values as canonical JSON)."""
        return "\x1f".join(
            (
                self.kind,
                self.reason or "",
                self.rule or "",
                plain(self.value),
                "u" if self.unsafe else "",
            )
        )


@dataclass(frozen=True, slots=True)
class Found:
    """One side's finding of a kind."""

    id: int
    evidence: tuple[str, ...]


@dataclass(slots=True)
class Side:
    """What one judgement said of a run: verdicts by (entity, field), findings by kind."""

    judgement_id: int | None = None
    verdicts: dict[tuple[str | None, str], Said] = field(default_factory=dict)
    findings: dict[str, Found] = field(default_factory=dict)


@dataclass(slots=True)
class RunPair:
    """A run as recorded and as replayed; `prospective` is None when none of its records up
    to its pin could be read (the run is counted missing)."""

    run_pk: int
    run_id: str
    recorded: Side
    prospective: Side | None
    # Its tickets by group, ("conflict", entity, field) or ("finding", kind) -> (ticket id,
    # kind, state).
    tickets: dict[tuple[str, str | None, str], tuple[int, str, str]] = field(default_factory=dict)
    # Its raw data expired (privacy/retention.py): skipped, and counted apart.
    expired: bool = False


def canonical(value: Any) -> str:
    """JSON with sorted keys: 1 and 1.0 are one value, 1 and true are not."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def plain(value: Any) -> str:
    """canonical(), without its cost for the values verdicts mostly hold (strings)."""
    if type(value) is str:
        return '"' + value + '"' if value.isalnum() else canonical(value)
    return "null" if value is None else canonical(value)


def verdict_flags(recorded: Said | None, prospective: Said | None) -> dict[str, bool]:
    was = recorded.kind if recorded else None
    now = prospective.kind if prospective else None
    flags = dict.fromkeys(FLAGS, False)
    flags["newly_resolved"] = was == CONFLICT and now in SETTLED_KINDS
    flags["newly_conflict"] = now == CONFLICT and was != CONFLICT
    flags["value_changed"] = (
        recorded is not None
        and prospective is not None
        and was in SETTLED_KINDS
        and now in SETTLED_KINDS
        and plain(recorded.value) != plain(prospective.value)
    )
    flags["newly_unsafe"] = bool(prospective and prospective.unsafe) and not (
        recorded and recorded.unsafe
    )
    flags["newly_safe"] = bool(recorded and recorded.unsafe) and not (
        prospective and prospective.unsafe
    )
    same = (
        recorded is not None
        and prospective is not None
        and recorded.comparable() == prospective.comparable()
    )
    flags["other_changed"] = not same and not any(flags.values())
    return flags


def finding_flags(recorded: Found | None, prospective: Found | None) -> dict[str, bool]:
    flags = dict.fromkeys(FLAGS, False)
    flags["finding_gained"] = recorded is None and prospective is not None
    flags["finding_lost"] = recorded is not None and prospective is None
    flags["other_changed"] = (
        recorded is not None
        and prospective is not None
        and recorded.evidence != prospective.evidence
    )
    return flags


@dataclass(slots=True)
class Compared:
    """What comparing some runs gave: result rows (RESULT_COLUMNS) of the groups that
    changed or settle their ticket, counts of every group, and a digest of every group."""

    rows: list[tuple[Any, ...]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTS, 0))
    digest: Any = field(default_factory=hashlib.sha256)
    scope: ChangeScope = field(default_factory=ChangeScope)
    # Whether a verdict of the run being compared changed where the scope reaches: its
    # findings' changes are then the change's consequence, not a regression.
    run_reached: bool = False

    @property
    def hexdigest(self) -> str:
        return str(self.digest.hexdigest())


def compare_runs(
    job_id: int, pairs: Iterable[RunPair], scope: ChangeScope | None = None
) -> Compared:
    """Compare every group of every run; runs in the order given (the digest depends on it).
    `scope`: where the candidate's change means to act (None: nowhere is intended)."""
    out = Compared(scope=scope or ChangeScope())
    for pair in pairs:
        out.counts["runs"] += 1
        if pair.expired:
            out.counts["runs_expired"] += 1
            out.digest.update(f"{pair.run_id}\x1eexpired\n".encode())
            continue
        if pair.prospective is None:
            out.counts["runs_missing"] += 1
            out.digest.update(f"{pair.run_id}\x1emissing\n".encode())
            continue
        out.run_reached = False
        _compare_verdicts(job_id, pair, pair.prospective, out)
        _compare_findings(job_id, pair, pair.prospective, out)
    return out


def _compare_verdicts(job_id: int, pair: RunPair, prospective: Side, out: Compared) -> None:
    recorded = pair.recorded
    groups = list(prospective.verdicts) + [
        g for g in recorded.verdicts if g not in prospective.verdicts
    ]
    for group in groups:
        was, now = recorded.verdicts.get(group), prospective.verdicts.get(group)
        entity, field_name = group
        ticket = pair.tickets.get(("conflict", entity, field_name))
        settled = (
            ticket is not None
            and settles(ticket[1], ticket[2], now.kind if now else None)
            and not settles(ticket[1], ticket[2], was.kind if was else None)
        )
        if was is not None and now is not None and not settled:
            seen = was.comparable()
            if seen == now.comparable():
                # Unchanged (most groups): counted and digested, nothing else to do.
                _unchanged(out, pair.run_id, f"{entity}\x1f{field_name}", seen)
                continue
        flags = verdict_flags(was, now)
        either = now or was
        action = either.action if either is not None else None
        reached = any(flags.values()) and out.scope.reaches(field_name, action)
        out.run_reached |= reached
        _add(
            out,
            job_id,
            pair,
            ("conflict", entity, field_name),
            ("verdict", entity, field_name, ""),
            (was.id if was else None, None, now.id if now else None, None),
            flags,
            ticket,
            settled,
            (was.comparable() if was else "-", now.comparable() if now else "-"),
            reached,
        )


def _compare_findings(job_id: int, pair: RunPair, prospective: Side, out: Compared) -> None:
    recorded = pair.recorded
    kinds = list(prospective.findings) + [
        k for k in recorded.findings if k not in prospective.findings
    ]
    for kind in kinds:
        was, now = recorded.findings.get(kind), prospective.findings.get(kind)
        flags = finding_flags(was, now)
        _add(
            out,
            job_id,
            pair,
            ("finding", None, kind),
            ("finding", None, "", kind),
            (None, was.id if was else None, None, now.id if now else None),
            flags,
            pair.tickets.get(("finding", None, kind)),
            False,
            ("\x1f".join(was.evidence) if was else "-", "\x1f".join(now.evidence) if now else "-"),
            any(flags.values()) and out.run_reached,
        )


def _unchanged(out: Compared, run_id: str, group: str, said: str) -> None:
    counts = out.counts
    counts["groups"] += 1
    counts["unchanged"] += 1
    out.digest.update("\x1e".join((run_id, group, said, said, "")).encode() + b"\n")


def _add(
    out: Compared,
    job_id: int,
    pair: RunPair,
    ticket_group: tuple[str, str | None, str],
    group: tuple[str, str | None, str, str],
    ids: tuple[int | None, int | None, int | None, int | None],
    flags: dict[str, bool],
    ticket: tuple[int, str, str] | None,
    settled: bool,
    sides: tuple[str, str],
    intended: bool,
) -> None:
    changed = any(flags.values())
    recorded_verdict, recorded_finding, prospective_verdict, prospective_finding = ids
    assert pair.prospective is not None
    counts = out.counts
    counts["groups"] += 1
    counts["unchanged"] += not changed
    for name, on in flags.items():
        counts[name] += on
    counts["tickets_settled"] += settled
    counts["intended"] += intended
    kind, entity, name = ticket_group
    label = f"{name}" if kind == "finding" else f"{entity}\x1f{name}"
    out.digest.update(
        "\x1e".join((pair.run_id, label, *sides, "s" if settled else "")).encode() + b"\n"
    )
    if not changed and not settled:
        return
    out.rows.append(
        (
            job_id,
            pair.run_pk,
            ticket_key("finding", name) if kind == "finding" else ticket_key(kind, entity, name),
            *group,
            pair.recorded.judgement_id,
            recorded_verdict,
            recorded_finding,
            pair.prospective.judgement_id,
            prospective_verdict,
            prospective_finding,
            changed,
            *flags.values(),
            ticket[0] if ticket else None,
            settled,
            intended,
        )
    )


def sum_counts(parts: Iterable[dict[str, int]]) -> dict[str, int]:
    total = dict.fromkeys(COUNTS, 0)
    for part in parts:
        for name in COUNTS:
            total[name] += int(part.get(name, 0))
    return total
