"""Fixture sets: runs frozen at a record, under a name, never changed.

A run is pinned where its current judgement stands (the last record that judgement
covered, which is what its tickets were opened from), with that judgement as what was
recorded; a run never judged is pinned at its last record, with nothing recorded. Records
are append-only, so a pinned run holds tomorrow what it holds today, however many lines
arrive for it later. Runs come from a ticket, a family, a queue filter, a version's
settled tickets, every open ticket (a snapshot, for impact), or files (replay.files)."""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max, OuterRef, QuerySet, Subquery
from django.utils import timezone

from reviewapp.infra.bulk import insert_rows
from reviewapp.models import (
    FixtureRun,
    FixtureSet,
    FixtureSuiteMark,
    Judgement,
    PolicyVersion,
    Run,
    Ticket,
    TraceRecord,
    stored_documents,
)
from reviewapp.review.queue import QueueFilters, filtered_tickets

RUN_CHUNK = 2000


class FixtureError(ValueError):
    """A fixture set that cannot be made as asked; the message says why."""


def canonical_line(document: Any) -> str:
    """A record as fixture files and the fixture hash write it: JSON, keys sorted."""
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def pins_where_judged(run_pks: Iterable[int]) -> dict[int, tuple[int, int | None]]:
    """Each run's pin and recorded judgement: where its current judgement stands, or its
    last record (nothing recorded) when it was never judged."""
    pks = sorted(set(run_pks))
    pins: dict[int, tuple[int, int | None]] = {}
    for start in range(0, len(pks), RUN_CHUNK):
        chunk = pks[start : start + RUN_CHUNK]
        rows = Run.objects.filter(pk__in=chunk).values_list(
            "pk", "current_judgement_id", "current_judgement__through_record_id"
        )
        unjudged: list[int] = []
        for pk, judgement_id, through in rows:
            if judgement_id is None:
                unjudged.append(pk)
            else:
                pins[pk] = (through, judgement_id)
        last = (
            TraceRecord.objects.filter(run_id__in=unjudged)
            .values("run_id")
            .annotate(last=Max("id"))
            .values_list("run_id", "last")
        )
        pins.update((pk, (through, None)) for pk, through in last)
    return pins


def recorded_at(pins: Mapping[int, int]) -> dict[int, tuple[int, int | None]]:
    """Pins given as records (files), each with the ACTIVE judgement covering exactly that
    record, if any: the current one when it does, else the one of the newest policy."""
    found: dict[int, tuple[int, int | None]] = {pk: (through, None) for pk, through in pins.items()}
    pks = sorted(pins)
    for start in range(0, len(pks), RUN_CHUNK):
        chunk = pks[start : start + RUN_CHUNK]
        current = dict(Run.objects.filter(pk__in=chunk).values_list("pk", "current_judgement_id"))
        rows = (
            Judgement.objects.filter(run_id__in=chunk, purpose=Judgement.Purpose.ACTIVE)
            .order_by("run_id", "policy_number", "id")
            .values_list("run_id", "id", "through_record_id")
        )
        for pk, judgement_id, through in rows:
            chosen = found[pk][1]
            if through != pins[pk] or (chosen is not None and chosen == current.get(pk)):
                continue
            found[pk] = (through, judgement_id)  # a newer policy's, unless the current one
    return found


def records_digest(pins: Mapping[int, int]) -> tuple[str, int]:
    """SHA-256 of the pinned records as canonical JSON Lines (runs by pk, records in
    order; what an unredacted export writes), and how many records that is."""
    digest, count = hashlib.sha256(), 0
    pks = sorted(pins)
    for start in range(0, len(pks), RUN_CHUNK):
        chunk = pks[start : start + RUN_CHUNK]
        for run_pk, record_id, document in stored_documents(chunk):
            if record_id <= pins[run_pk]:
                digest.update(canonical_line(document).encode() + b"\n")
                count += 1
    return digest.hexdigest(), count


def freeze(
    *,
    name: str,
    origin: str,
    pins: Mapping[int, tuple[int, int | None]],
    user: Any = None,
    origin_detail: str = "",
    description: str = "",
    stamp: str = "",
) -> FixtureSet:
    """Keep these runs, pinned, as a new fixture set named `name` (unique)."""
    name = " ".join(name.split())[:200]
    if not name:
        raise FixtureError("a fixture set needs a name")
    if not pins:
        raise FixtureError("no run to freeze: nothing selected has records")
    if len(pins) > settings.REPLAY_FIXTURE_MAX_RUNS:
        raise FixtureError(
            f"{len(pins):,} runs: a fixture set holds at most {settings.REPLAY_FIXTURE_MAX_RUNS:,}"
        )
    sha256, records = records_digest({pk: through for pk, (through, _) in pins.items()})
    try:
        with transaction.atomic():
            fixture_set = FixtureSet.objects.create(
                name=name,
                description=description.strip(),
                origin=origin,
                origin_detail=origin_detail[:2000],
                run_count=len(pins),
                record_count=records,
                sha256=sha256,
                stamp=stamp,
                created_by=user if user is not None and user.is_authenticated else None,
            )
            insert_rows(
                FixtureRun,
                ("fixture_set_id", "run_id", "through_record_id", "recorded_judgement_id"),
                [
                    (fixture_set.pk, pk, through, judged)
                    for pk, (through, judged) in sorted(pins.items())
                ],
            )
    except IntegrityError:
        if FixtureSet.objects.filter(name=name).exists():
            raise FixtureError(f"a fixture set named “{name}” exists already") from None
        raise
    return fixture_set


def _runs_of(tickets: QuerySet[Ticket]) -> list[int]:
    return list(tickets.order_by().values_list("run_id", flat=True).distinct())


def freeze_ticket(
    ticket: Ticket, *, name: str = "", user: Any = None, description: str = ""
) -> FixtureSet:
    subject = ticket.field or ticket.finding_kind
    return freeze(
        name=name or f"Ticket #{ticket.pk}: {subject} in {ticket.run.run_id}",
        origin=FixtureSet.Origin.TICKET,
        origin_detail=f"ticket #{ticket.pk}",
        pins=pins_where_judged([ticket.run_id]),
        user=user,
        description=description,
    )


def freeze_family(
    fingerprint: str, *, name: str = "", user: Any = None, description: str = ""
) -> FixtureSet:
    tickets = Ticket.objects.filter(fingerprint=fingerprint)
    label = tickets.values_list("fingerprint_label", flat=True).first()
    if label is None:
        raise FixtureError(f"no ticket in family {fingerprint}")
    return freeze(
        name=name or f"Family {label}"[:160] + f" ({_now_label()})",
        origin=FixtureSet.Origin.FAMILY,
        origin_detail=f"family {fingerprint}: {label}",
        pins=pins_where_judged(_runs_of(tickets)),
        user=user,
        description=description,
    )


def freeze_queue(
    filters: QueueFilters, user: Any, *, name: str = "", description: str = ""
) -> FixtureSet:
    params = "&".join(f"{key}={value}" for key, value in sorted(filters.as_params().items()))
    return freeze(
        name=name or f"Queue {params or 'open tickets'}"[:160] + f" ({_now_label()})",
        origin=FixtureSet.Origin.QUEUE,
        origin_detail=f"queue ?{params}",
        pins=pins_where_judged(_runs_of(filtered_tickets(filters, user))),
        user=user,
        description=description,
    )


def freeze_settled(
    version: PolicyVersion, *, name: str = "", user: Any = None, description: str = ""
) -> FixtureSet:
    tickets = Ticket.objects.filter(settlements__policy_version=version)
    return freeze(
        name=name or f"Settled by v{version.number} ({_now_label()})",
        origin=FixtureSet.Origin.SETTLED,
        origin_detail=f"tickets v{version.number} would settle",
        pins=pins_where_judged(_runs_of(tickets)),
        user=user,
        description=description,
    )


def freeze_open_tickets(*, user: Any = None, stamp: str = "") -> FixtureSet:
    """Every run with an open ticket, where its current judgement stands: a snapshot of
    the desk, for the impact a proposal or the draft would have."""
    now = timezone.now()
    return freeze(
        # Two taken in the same instant must not clash on the name.
        name=f"Open tickets at {now:%Y-%m-%d %H:%M:%S} UTC ({secrets.token_hex(4)})",
        origin=FixtureSet.Origin.OPEN_TICKETS,
        origin_detail="every open ticket's run, as it was",
        pins=pins_where_judged(_runs_of(Ticket.objects.filter(state=Ticket.State.OPEN))),
        user=user,
        stamp=stamp,
    )


def _now_label(moment: datetime | None = None) -> str:
    return f"{moment or timezone.now():%Y-%m-%d %H:%M:%S}"


# --- the regression suite -----------------------------------------------------------------


def suite_mark(fixture_set: FixtureSet, *, in_suite: bool, user: Any = None) -> FixtureSuiteMark:
    """Put a fixture set into the policy's regression suite, or take it out."""
    return FixtureSuiteMark.objects.create(
        fixture_set=fixture_set,
        in_suite=in_suite,
        marked_by=user if user is not None and user.is_authenticated else None,
    )


def with_suite_state(fixture_sets: QuerySet[FixtureSet]) -> QuerySet[FixtureSet]:
    """Annotated with `in_suite`: what its newest mark says (False without one)."""
    newest = FixtureSuiteMark.objects.filter(fixture_set=OuterRef("pk")).order_by("-id")
    return fixture_sets.annotate(in_suite=Subquery(newest.values("in_suite")[:1]))


def suite_sets() -> list[FixtureSet]:
    """The fixture sets in the regression suite now, oldest first."""
    sets = with_suite_state(FixtureSet.objects.all())
    return list(sets.filter(in_suite=True).order_by("id"))  # type: ignore[misc]


def in_suite(fixture_set: FixtureSet) -> bool:
    newest = fixture_set.suite_marks.order_by("-id").values_list("in_suite", flat=True).first()
    return bool(newest)
