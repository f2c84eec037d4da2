"""Where an ingest spends its time, by stage: decode (lines into records, no database),
judge (the engine, no database), write (statements sent to PostgreSQL inside a chunk's
or a block's transaction, reading back included) and commit (the transactions' ends).

Each ingest counts on a clock of its own, found through a context variable, so that the
code of each stage does not have to carry it; outside an ingest nothing is counted. The
benchmark (benchmarks/ingest.py) prints what `manage.py ingest --json --stages` reports."""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.db import transaction

STAGES = ("decode", "judge", "write", "commit")


class StageClock:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = dict.fromkeys(STAGES, 0.0)

    def add(self, stage: str, seconds: float) -> None:
        self.seconds[stage] = self.seconds.get(stage, 0.0) + seconds

    def rounded(self) -> dict[str, float]:
        return {stage: round(seconds, 6) for stage, seconds in self.seconds.items()}


_current: ContextVar[StageClock | None] = ContextVar("ingest_stage_clock", default=None)


@contextmanager
def counting(clock: StageClock) -> Iterator[StageClock]:
    """Count the stages of the work inside on `clock`."""
    token = _current.set(clock)
    try:
        yield clock
    finally:
        _current.reset(token)


# The time of the stages inside the one open here (in this context: a thread working for
# the ingest has its own), taken out of it when it ends.
_inner: ContextVar[list[float] | None] = ContextVar("ingest_stage_inner", default=None)


@contextmanager
def stage(name: str) -> Iterator[None]:
    """Count the time inside as `name` (nothing outside an ingest). A stage inside another
    is taken out of the outer one: each second counts once in each thread. Stages of two
    threads overlap: their sum can pass the wall time (the writer thread, ingest.writer)."""
    clock = _current.get()
    if clock is None:
        yield
        return
    outer = _inner.get()
    inner = [0.0]
    token = _inner.set(inner)
    started = time.perf_counter()
    try:
        yield
    finally:
        elapsed = time.perf_counter() - started
        _inner.reset(token)
        clock.add(name, elapsed - inner[0])
        if outer is not None:
            outer[0] += elapsed


@contextmanager
def atomic_write() -> Iterator[None]:
    """transaction.atomic(), its body counted as write and its end as commit."""
    atomic = transaction.atomic()
    with stage("write"):
        atomic.__enter__()
    try:
        with stage("write"):
            yield
    except BaseException:
        with stage("commit"):
            atomic.__exit__(*sys.exc_info())  # rolls back; Atomic never swallows the error
        raise
    with stage("commit"):
        atomic.__exit__(None, None, None)


# Generation-0 collections during an ingest: one per this many container allocations
# instead of Python's 700. An ingest allocates and frees (by reference counting) millions
# of short-lived dicts, lists and records, so most collections find nothing; each one
# still walks every young object (measured: a tenth of the ingest's CPU at 100,000 lines).
# Cycles are still collected, less often; memory stays bounded by the chunk.
INGEST_GC_THRESHOLD = 50_000


@contextmanager
def fewer_collections() -> Iterator[None]:
    """The garbage collector's first threshold raised to INGEST_GC_THRESHOLD inside (it is
    per process: set back as it was when the ingest ends)."""
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], INGEST_GC_THRESHOLD), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
