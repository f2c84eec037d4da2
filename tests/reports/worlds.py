"""Randomized stored worlds for the tallies (hypothesis), written straight into the tables
the engine and the review desk write, and a brute-force count over those tables.

A world: runs started near month ends (so the time zone decides the month), each with
active judgements (an older one and a current one, or none), sometimes a shadow one
(never counted), verdict groups of every kind with evidence from named sources, findings,
and tickets for some of the conflicts and findings of any of its active judgements, open
or closed either way. The brute force reads it back row by row, in Python."""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from django.contrib.auth.models import User
from hypothesis import strategies as st

from reviewapp.models import (
    Finding,
    IngestBatch,
    Judgement,
    Run,
    Ticket,
    TraceLine,
    TraceRecord,
    Verdict,
)
from reviewapp.review import changes as ticket_changes
from reviewapp.review.opening import ticket_key
from tests.roles import person_set_up_before

ZONES = ("UTC", "Europe/Paris", "America/Los_Angeles", "Pacific/Kiritimati")
ENTITIES = (None, "order-1", "order-2")
FIELDS = ("status", "amount")
FINDING_KINDS = ("orphan-observation", "missing-prerequisite")
SOURCES = ("erp", "ledger", "search")
AGENTS = ("refund-agent", "stock-agent", "")
RULES = (None, "payments-newest", "owner")
CLOSINGS = ("open", "explained", "unexplained")
CAUSES = ("replica-lag", "wrong-join", "policy")

counter = itertools.count()

groups = st.fixed_dictionaries(
    {
        "kind": st.sampled_from(("confirmed", "resolved", "conflict")),
        "rule": st.sampled_from(RULES),
        "sources": st.lists(st.sampled_from(SOURCES), min_size=1, max_size=3),
    }
)
judgements = st.fixed_dictionaries(
    {
        "groups": st.dictionaries(
            st.tuples(st.sampled_from(ENTITIES), st.sampled_from(FIELDS)), groups, max_size=4
        ),
        "findings": st.sets(st.sampled_from(FINDING_KINDS)),
        "policy": st.integers(0, 2),
    }
)
runs = st.fixed_dictionaries(
    {
        "month": st.integers(1, 4),
        "hours": st.integers(-30, 30),
        "agent": st.sampled_from(AGENTS),
        "active": st.lists(judgements, max_size=2),
        "shadow": st.none() | judgements,
        # For each conflict or finding key of the run: open, explained or unexplained, or
        # no ticket (None).
        "tickets": st.lists(st.none() | st.sampled_from(CLOSINGS), min_size=12, max_size=12),
        "cause": st.sampled_from(CAUSES),
    }
)
worlds = st.fixed_dictionaries(
    {"zone": st.sampled_from(ZONES), "runs": st.lists(runs, min_size=1, max_size=6)}
)
# What changes between two refreshes: per run, a new current judgement, a new clock and
# agent, and how each of its tickets ends up.
changes = st.lists(
    st.fixed_dictionaries(
        {
            "judged_again": st.none() | judgements,
            "hours": st.none() | st.integers(-30, 30),
            "agent": st.none() | st.sampled_from(AGENTS),
            "tickets": st.lists(st.none() | st.sampled_from(CLOSINGS), min_size=12, max_size=12),
        }
    ),
    max_size=6,
)


def _started(month: int, hours: int) -> datetime:
    return datetime(2026, month + 1, 1, tzinfo=UTC) + timedelta(hours=hours)


@dataclass
class Built:
    batch: IngestBatch
    runs: list[Run]
    lines: list[TraceLine]


def build(world: dict) -> Built:
    batch = IngestBatch.objects.create(
        channel=IngestBatch.Channel.CLI, file_name="world.jsonl", content_sha256="0" * 64
    )
    built, lines = [], []
    for spec in world["runs"]:
        number = next(counter)
        run = Run.objects.create(
            run_id=f"world-{number}",
            agent=spec["agent"],
            started_at=_started(spec["month"], spec["hours"]),
        )
        line = TraceLine.objects.create(
            batch=batch, identity=f"{number:032x}", line_number=1, raw=b"{}", accepted=True
        )
        stored = [_judgement(run, line, j, "active") for j in spec["active"]]
        if spec["shadow"] is not None:
            _judgement(run, line, spec["shadow"], "shadow")
        if stored:
            Run.objects.filter(pk=run.pk).update(current_judgement=stored[-1])
        _tickets(run, batch, spec["tickets"], spec["cause"])
        built.append(run)
        lines.append(line)
    return Built(batch, built, lines)


def _judgement(run: Run, line: TraceLine, spec: dict, purpose: str) -> Judgement:
    from reviewapp.models import PolicyCandidate

    candidate = None
    if purpose != "active":
        candidate = PolicyCandidate.objects.create(
            kind="draft", document={}, sha256=f"{next(counter):064d}", number=9, base_number=0
        )
    judgement = Judgement.objects.create(
        run=run,
        purpose=purpose,
        candidate=candidate,
        policy_number=spec["policy"],
        through_record_id=next(counter),
        verdict_count=len(spec["groups"]),
    )
    for position, ((entity, field), group) in enumerate(sorted(spec["groups"].items(), key=str)):
        evidence = []
        for source in group["sources"] + group["sources"][:1]:
            observation = f"obs-{next(counter)}"
            TraceRecord.objects.create(
                run=run, line=line, type="tool_observation", key=observation, source=source, data={}
            )
            evidence.append(observation)
        Verdict.objects.create(
            judgement=judgement,
            run=run,
            position=position,
            entity=entity,
            field=field,
            kind=group["kind"],
            rule=group["rule"] if group["kind"] != "confirmed" else None,
            evidence=evidence,
            unsafe=False,
        )
    for position, kind in enumerate(sorted(spec["findings"])):
        Finding.objects.create(
            judgement=judgement, run=run, position=position, kind=kind, evidence=[]
        )
    return judgement


def ticket_keys(run: Run) -> list[tuple]:
    """Every conflict and finding key any active judgement of the run has, in one order."""
    keys = set()
    for verdict in Verdict.objects.filter(run=run, judgement__purpose="active", kind="conflict"):
        keys.add(("conflict", verdict.entity or "", verdict.field))
    for finding in Finding.objects.filter(run=run, judgement__purpose="active"):
        keys.add(("finding", "", finding.kind))
    return sorted(keys)


def _tickets(run: Run, batch: IngestBatch, closings: list, cause: str, actor=None) -> None:
    """Open (already closed as `closings` says) the tickets of the run's keys that have
    none; with `actor`, move those it has as a reviewer would (review.changes)."""
    existing = {(t.kind, t.entity or "", t.field or t.finding_kind): t for t in run.tickets.all()}
    for key, closing in zip(ticket_keys(run), closings, strict=False):
        if closing is None:
            continue
        ticket = existing.get(key)
        if ticket is not None:
            if actor is not None:
                _move(ticket, closing, cause, actor)
            continue
        kind, entity, subject = key
        found = (
            Verdict.objects.filter(
                run=run,
                judgement__purpose="active",
                kind="conflict",
                field=subject,
                entity=entity or None,
            )
            if kind == "conflict"
            else Finding.objects.filter(run=run, judgement__purpose="active", kind=subject)
        ).first()
        Ticket.objects.create(
            run=run,
            key=ticket_key(kind, entity or None, subject)
            if kind == "conflict"
            else ticket_key("finding", subject),
            kind=kind,
            entity=entity or None,
            field=subject if kind == "conflict" else "",
            finding_kind=subject if kind == "finding" else "",
            reason="no-approved-precedence" if kind == "conflict" else subject,
            agent=run.agent,
            fingerprint="f" * 16,
            fingerprint_label="world",
            verdict=found if kind == "conflict" else None,
            finding=found if kind == "finding" else None,
            judgement_id=found.judgement_id,
            policy_number=0,
            batch=batch,
            state="open" if closing == "open" else "closed",
            resolution="" if closing == "open" else closing,
            cause=cause if closing == "explained" else "",
        )


def _move(ticket: Ticket, closing: str, cause: str, actor) -> None:
    """Reopen or close a ticket as a reviewer does, through review.changes."""
    wanted = ("open", "") if closing == "open" else ("closed", closing)
    if (ticket.state, ticket.resolution) == wanted:
        return
    if ticket.state == "closed":
        ticket = ticket_changes.ticket_reopen(ticket, revision=ticket.revision, actor=actor)
    if closing != "open":
        ticket_changes.ticket_close(
            ticket,
            revision=ticket.revision,
            actor=actor,
            resolution=closing,
            cause=cause if closing == "explained" else "",
        )


def change(built: Built, wanted: list[dict]) -> None:
    """Judge some runs again (with, for some, a clock and an agent from a late
    run_started, as ingest does), and close and reopen tickets as reviewers do."""
    # The app's role may not write accounts: the reviewer is set up as the owner, once.
    actor = User.objects.filter(username="world-reviewer").first() or person_set_up_before(
        User, "world-reviewer", "world-reviewer-password", None
    )
    for run, line, spec in zip(built.runs, built.lines, wanted, strict=False):
        if spec["judged_again"] is not None:
            if spec["hours"] is not None:
                moved = run.started_at + timedelta(hours=spec["hours"])
                Run.objects.filter(pk=run.pk).update(started_at=moved)
            if spec["agent"] is not None:
                Run.objects.filter(pk=run.pk).update(agent=spec["agent"])
            judgement = _judgement(run, line, spec["judged_again"], "active")
            Run.objects.filter(pk=run.pk).update(current_judgement=judgement)
        _tickets(run, built.batch, spec["tickets"], "partial-result", actor)


# --- the brute force ----------------------------------------------------------------


def outcome_of(ticket: Ticket | None) -> str:
    if ticket is None:
        return "untracked"
    if ticket.state == "open":
        return "open"
    return "reviewer" if ticket.resolution == "explained" else "closed_unexplained"


@dataclass
class Truth:
    # month -> outcome -> count
    counts: dict[date, Counter]
    # month -> (judged runs, verdict groups)
    runs: dict[date, tuple[int, int]]
    # month -> dimension -> key -> outcome -> count
    breakdowns: dict[date, dict[str, dict[tuple, Counter]]]
    # month -> outcome -> ticket ids
    tickets: dict[date, dict[str, set[int]]]


def brute_force(zone_name: str) -> Truth:
    """Count every discrepancy of every run's current judgement, one stored row at a time."""
    zone = ZoneInfo(zone_name)
    truth = Truth(
        defaultdict(Counter),
        {},
        defaultdict(lambda: defaultdict(lambda: defaultdict(Counter))),
        defaultdict(lambda: defaultdict(set)),
    )
    runs_in: dict[date, list[int]] = defaultdict(lambda: [0, 0])
    for run in Run.objects.all():
        judgement = run.current_judgement
        if judgement is None:
            continue
        local = run.started_at.astimezone(zone)
        month = date(local.year, local.month, 1)
        runs_in[month][0] += 1
        runs_in[month][1] += judgement.verdict_count
        tickets = {(t.kind, t.entity, t.field, t.finding_kind): t for t in run.tickets.all()}
        for verdict in Verdict.objects.filter(judgement=judgement).exclude(kind="confirmed"):
            ticket = None
            if verdict.kind == "resolved":
                outcome = "rule"
            else:
                ticket = tickets.get(("conflict", verdict.entity, verdict.field, ""))
                outcome = outcome_of(ticket)
            sources = sorted(
                set(
                    TraceRecord.objects.filter(
                        run=run, type="tool_observation", key__in=verdict.evidence
                    ).values_list("source", flat=True)
                )
            )
            keys = {
                "field": (verdict.field,),
                "sources": (",".join(sources),),
                "rule": (verdict.rule, str(judgement.policy_number)) if verdict.rule else ("", ""),
            }
            _count(truth, month, outcome, ticket, run, keys)
        for finding in Finding.objects.filter(judgement=judgement):
            ticket = tickets.get(("finding", None, "", finding.kind))
            keys = {"finding_kind": (finding.kind,), "rule": ("", "")}
            _count(truth, month, outcome_of(ticket), ticket, run, keys)
    truth.runs = {month: (n, groups) for month, (n, groups) in runs_in.items()}
    return truth


def _count(truth: Truth, month: date, outcome: str, ticket, run: Run, keys: dict) -> None:
    truth.counts[month][outcome] += 1
    cause = "rule" if outcome == "rule" else ticket.cause if outcome == "reviewer" else ""
    for name, key in {**keys, "cause": (cause,), "agent": (run.agent,)}.items():
        truth.breakdowns[month][name][key][outcome] += 1
    if ticket is not None:
        truth.tickets[month][outcome].add(ticket.pk)
