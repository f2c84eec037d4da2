"""Durable work: what must end done, or failed with a reason, whatever happens to its
worker, the broker or the database on the way. One pattern for every kind of it: ingest
batches and their parts (reviewapp.ingest), replay items (reviewapp.replay), shadow
backfills and deliveries judged in shadow (reviewapp.shadow), settlement labellings
(reviewapp.policy), approved erasures (reviewapp.privacy).

A unit of work is a row, and a task (reviewapp.celery.Tasks) that works on it given its
id: the row is the record of the work, a message in the broker only says there is some.
A kind of unit declares itself once (`Durable`): its model, its task, its lock space, its
pulse (a heartbeat its worker moves as it goes, or a lease the claim dates ahead), how long
each wait lasts and how many tries it gets. Every kind then works the same way:

- claim (`claim`, `take`): a worker works on a unit while its connection holds the unit's
  advisory lock (reviewapp.infra.locks). A claim counts one more attempt, marks the unit
  running and dates its pulse; a second worker handed the same unit finds it held and
  leaves it. A worker that dies loses its connection, and the lock with it.
- heartbeat or lease (`beat`): the worker dates its unit as it goes.
- retry with a bound: a claim that finds its unit running finds that every worker before
  it died (none holds its lock); after `max_attempts` such tries the unit is given up.
  A kind that tries failures again (batches) says after how long (`retry_after`).
- give up with a reason (`give_up`, `fail`): failed, the reason in its error, and never
  sent again by itself.
- one reconciler (`reconcile`: beat's reconcile task, every RECONCILE_SECONDS): every
  kind is asked which of its units are due (`due`), and their tasks are sent again:
  running units whose lock nobody holds once their pulse is `lost_after` old (the worker
  died), or silent for `stalled_after` whatever the locks; queued ones no worker took in
  `requeue_after` (the message was lost); failed ones with tries left, `retry_after` times
  their tries after they failed.

Celery and the broker do their part first: tasks are acks_late and rejected when their
worker is lost (settings), so a pool process killed mid-task has its message delivered
again at once, and the claim makes a message delivered twice harmless. The reconciler is
for what they cannot see: a whole worker killed with the messages it held (Redis gives
those back only after its visibility timeout, an hour), a message never sent because the
broker was down, a task ended by the database going away under it."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial, reduce
from operator import or_
from typing import Any

from django.conf import settings
from django.db import models, transaction
from django.db.models import F, Q, Value
from django.utils import timezone

from reviewapp.celery import app
from reviewapp.infra.locks import Space, locks_held, try_lock, unlock
from reviewapp.models import ServicePulse

log = logging.getLogger(__name__)

# A number (of seconds, of tries), or the name of the setting that says how many (read
# when used, so that a test's settings apply).
Seconds = int | str


def number(value: Seconds) -> int:
    return int(getattr(settings, value)) if isinstance(value, str) else value


def seconds(value: Seconds) -> timedelta:
    return timedelta(seconds=number(value))


@dataclass(frozen=True)
class Send:
    """A task to send, with its arguments."""

    task: str
    args: tuple[int, ...]


RUNNING, QUEUED, FAILED = "running", "queued", "failed"


@dataclass(frozen=True)
class Durable:
    """A kind of durable work, as its module declares it."""

    name: str
    model: type[models.Model]
    # The task that works on a unit, given its id (`sends` when it is sent otherwise).
    task: str
    # Its units' locks: (lock, id). None: work that is safe to do twice at once, unclaimed.
    lock: Space | None = None
    # The field its worker dates as it goes (a heartbeat), or its claim dates `lease` ahead
    # (a lease); "born" dates a unit whose pulse is not set yet.
    pulse: str | None = "heartbeat_at"
    lease: Seconds = 0
    born: str | None = "created_at"
    # Its states, as conditions on its rows (a field `state` set to "running" by a claim
    # and to "failed" by a give-up; None: a kind whose rows say it otherwise).
    state: str | None = "state"
    running: Q = Q(state=RUNNING)
    queued: Q = Q(state=QUEUED)
    failed: Q = Q(state=FAILED)
    # The rows the reconciler reads.
    watched: Q = Q()
    # The waits (None: not a rule of this kind's); see the module's docstring.
    lost_after: Seconds | None = None
    lost_when: Q = Q()
    stalled_after: Seconds | None = None
    requeue_after: Seconds | None = None
    retry_after: Seconds | None = None
    max_attempts: Seconds | None = None
    # What is kept of a unit given up, said after why.
    keeps: str = ""
    # How a unit is sent again, when not as `task` with its id.
    sends: Callable[[Any], Send] | None = None
    # A rule of its own for what the reconciler sends, in place of the waits above.
    due: Callable[[], list[Send]] | None = None

    def send_of(self, unit: Any) -> Send:
        return self.sends(unit) if self.sends is not None else Send(self.task, (unit.pk,))

    @property
    def own_pulse(self) -> str | None:
        """Its pulse, when it is a column of the unit's own (not one across a relation)."""
        return self.pulse if self.pulse is not None and "__" not in self.pulse else None


# --- claiming a unit ----------------------------------------------------------------------


def take(kind: Durable, pk: int, *, when: Q | None = None, **started: Any) -> Any | None:
    """Claim the unit `pk` for this connection until `release`: its lock taken, one more
    attempt counted, running, its pulse dated, `started` set. None when another worker
    holds it, or it does not match `when` (it has ended, say): then nothing is changed; or
    when it is given up here (its worker died in each of its `max_attempts` tries)."""
    assert kind.lock is not None, f"{kind.name} is not claimed"
    if not try_lock(kind.lock, pk):
        log.info("%s %s is being worked on elsewhere; left to that worker", kind.name, pk)
        return None
    try:
        unit: Any = kind.model._default_manager.filter(when or Q(), pk=pk).first()
        if unit is not None and _died_every_time(kind, unit):
            give_up(kind, pk, f"its worker died in each of {unit.attempts} tries")
            unit = None
        if unit is None:
            unlock(kind.lock, pk)
            return None
        fields: dict[str, Any] = {"attempts": F("attempts") + 1, **started}
        if kind.state is not None:
            fields[kind.state] = RUNNING
        if kind.own_pulse is not None:
            fields[kind.own_pulse] = timezone.now() + seconds(kind.lease)
        kind.model._default_manager.filter(pk=pk).update(**fields)
        unit.refresh_from_db()
        return unit
    except BaseException:
        unlock(kind.lock, pk)
        raise


def release(kind: Durable, pk: int) -> None:
    assert kind.lock is not None
    unlock(kind.lock, pk)


@contextmanager
def claim(kind: Durable, pk: int, *, when: Q | None = None, **started: Any) -> Iterator[Any]:
    """`take` for the time inside: the unit as claimed, or None."""
    unit = take(kind, pk, when=when, **started)
    try:
        yield unit
    finally:
        if unit is not None:
            release(kind, pk)


def _died_every_time(kind: Durable, unit: Any) -> bool:
    """Claimed `max_attempts` times, and running still although nobody holds it (this
    claim took its lock): each time, its worker died (a crash, a memory limit). Delivered
    again, it would kill the next one."""
    if kind.max_attempts is None or unit.attempts < number(kind.max_attempts):
        return False
    return kind.model._default_manager.filter(kind.running, pk=unit.pk).exists()


# --- its pulse, its end ------------------------------------------------------------------


def pulse(kind: Durable) -> dict[str, datetime]:
    """The fields that date a unit's heartbeat now (to add to an update of its own)."""
    assert kind.own_pulse is not None
    return {kind.own_pulse: timezone.now() + seconds(kind.lease)}


def beat(kind: Durable, pk: int) -> None:
    """Date the unit's heartbeat (or lease) now."""
    kind.model._default_manager.filter(pk=pk).update(**pulse(kind))


def fail(kind: Durable, pk: int, error: str, *, only: Q | None = None) -> int:
    """Mark the unit failed (where it still matches `only`), `error` saying why (what its
    page and the API show: no server detail). How many rows changed."""
    columns = {field.name for field in kind.model._meta.concrete_fields}
    fields: dict[str, Any] = {"finished_at": timezone.now(), "error": error[:2000]}
    if kind.state is not None:
        fields[kind.state] = FAILED
    if kind.lease and kind.own_pulse is not None:
        fields[kind.own_pulse] = None
    fields = {name: value for name, value in fields.items() if name in columns}
    return kind.model._default_manager.filter(only or Q(), pk=pk).update(**fields)


def give_up(kind: Durable, pk: int, reason: str) -> None:
    """Fail the unit for good: `reason`, what it keeps, and that it is not tried again."""
    log.error("%s %s: %s; not tried again", kind.name, pk, reason)
    kept = f"; {kind.keeps}" if kind.keeps else ""
    fail(kind, pk, f"{reason} (a crash, or a memory limit){kept}. It is not tried again by itself.")


# --- sending ------------------------------------------------------------------------------


def send(
    task: str, *args: int, copies: int = 1, unsent: Callable[[], object] | None = None
) -> None:
    """Send the task (`copies` times: as many workers may share the work) once the current
    transaction commits, or at once outside one. A broker that cannot take it fails nothing
    here: it is logged, `unsent` is told, and the reconciler sends the work again once the
    broker is back."""

    def now() -> None:
        try:
            for _ in range(copies):
                app.send_task(task, args=list(args))
        except Exception:
            log.warning("%s%s: not sent (broker unreachable); the reconciler sends it", task, args)
            if unsent is not None:
                unsent()

    transaction.on_commit(now)


def dispatch(kind: Durable, unit: Any) -> None:
    """Send the unit to a worker once the transaction commits, its pulse dated now (the
    wait for a message lost on the way starts). If the broker cannot take it, the unit is
    due at the reconciler's next round rather than after that wait."""
    if kind.own_pulse is not None:
        beat(kind, unit.pk)
    message = kind.send_of(unit)
    send(message.task, *message.args, unsent=partial(_due_now, kind, unit.pk))


def _due_now(kind: Durable, pk: int) -> None:
    if kind.requeue_after is not None and kind.own_pulse is not None:
        unsent_since = timezone.now() - seconds(kind.requeue_after) - timedelta(seconds=1)
        kind.model._default_manager.filter(kind.queued, pk=pk).update(
            **{kind.own_pulse: unsent_since}
        )


# --- the reconciler -----------------------------------------------------------------------


def due(kind: Durable) -> list[Send]:
    """What the reconciler sends again for this kind now (see the module's docstring)."""
    if kind.due is not None:
        return kind.due()
    now = timezone.now()
    held = locks_held(kind.lock) if kind.lock is not None else set()
    free = ~Q(pk__in=held) if held else Q()
    rules = []
    if kind.lost_after is not None:
        rules.append(
            kind.running & kind.lost_when & free & silent(kind, now - seconds(kind.lost_after))
        )
    if kind.stalled_after is not None:
        rules.append(kind.running & silent(kind, now - seconds(kind.stalled_after)))
    if kind.requeue_after is not None:
        rules.append(kind.queued & free & silent(kind, now - seconds(kind.requeue_after)))
    if kind.retry_after is not None and kind.max_attempts is not None:
        rules.append(
            kind.failed
            & Q(attempts__lt=number(kind.max_attempts))
            & Q(finished_at__lt=Value(now) - Value(seconds(kind.retry_after)) * F("attempts"))
        )
    if not rules:
        return []
    units = kind.model._default_manager.filter(kind.watched).filter(reduce(or_, rules))
    return list(dict.fromkeys(kind.send_of(unit) for unit in units.order_by("pk")))


def silent(kind: Durable, moment: datetime) -> Q:
    """No sign of life since `moment`: its pulse, or its birth when it has no pulse yet."""
    assert kind.pulse is not None
    quiet = Q(**{f"{kind.pulse}__lt": moment})
    if kind.born is not None:
        quiet |= Q(**{f"{kind.pulse}__isnull": True, f"{kind.born}__lt": moment})
    return quiet


def reconcile(kinds: Iterable[Durable]) -> dict[str, int]:
    """Send again every kind's units that are due; how many tasks were sent, by kind. A
    task two kinds ask for (a batch stalled, and a part of it lost) is sent once: each
    claim of a unit counts a try."""
    sent: dict[str, int] = {}
    asked: set[Send] = set()
    for kind in kinds:
        messages = [message for message in due(kind) if message not in asked]
        asked.update(messages)
        for message in messages:
            app.send_task(message.task, args=list(message.args))
        if messages:
            log.info("%s: %s task(s) sent again", kind.name, len(messages))
        sent[kind.name] = len(messages)
    return sent


# --- whether the workers are alive --------------------------------------------------------


def worker_seen() -> None:
    """A worker takes tasks (it runs the reconciler): the pages stop warning."""
    ServicePulse.objects.update_or_create(name="worker", defaults={"seen_at": timezone.now()})


def worker_silent_since() -> datetime | None:
    """When a worker was last seen taking a task, if longer ago than WORKER_SILENT_SECONDS;
    None when one is (or none was ever seen: a fresh install has nothing to warn of)."""
    seen = ServicePulse.objects.filter(name="worker").values_list("seen_at", flat=True).first()
    if seen is None or timezone.now() - seen <= timedelta(seconds=settings.WORKER_SILENT_SECONDS):
        return None
    return seen
