"""A large delivery ingested by several workers at once, ending as one worker's would.

The batch is split into parts, each ingested by a Celery worker of its own, on this
machine or another. Every part reads the whole file and stores only the units that are
its own: every line of a native run goes to the part its runId falls to, so no run spans
two parts and each part stores and judges its runs in line order, exactly as a serial
ingest does. Every other unit (a line that is not JSON, an external export) goes to the
first part, in file order, as in a serial ingest. Identical lines thus always meet in
one part and are numbered there as occurrences just as in the whole file: the lines'
identities, hence re-delivery, are those of a serial ingest. Reading is cheap beside storing: a part pays a light decode (the runId alone)
of each line it leaves to another.

The last part to finish ends the batch with the serial ingest's own final sweep, which
judges the runs the batch touched that no part judged whole (a run an earlier delivery
began; a run both native lines and an export brought), then counts.

A batch in parts is sent to a worker that claims it as any batch (ingest.batches.BATCHES)
and sends its parts not done, each to a worker of its own (parts_start). A part is a unit of
durable work too (reviewapp.durable, PARTS): safe to run again, and claimed, so that two
workers handed one part leave it to the first. A part whose worker died is found by the
reconciler, which sends its batch again; a part that fails fails its batch, which is sent
again as any failed batch is; either way the batch's tries bound its parts', and a batch
sent again sends only its parts not done.

Known differences from a serial ingest: when one file holds both native lines and an
external export of the same run, its records from the two are ordered by which part
stored them first, not by line; a file of external exports only is stored by one part.
"""

from __future__ import annotations

import logging
import time
import zlib
from pathlib import Path
from typing import Any

import msgspec
from django.conf import settings
from django.db.models import Min, OuterRef, Q, Subquery
from django.utils import timezone

from reviewapp import durable
from reviewapp.celery import Tasks
from reviewapp.durable import Durable, Send
from reviewapp.infra.locks import Space, advisory_lock
from reviewapp.ingest.batches import BATCHES, IngestSummary, create_batch, left_to_do
from reviewapp.ingest.files import RawLine
from reviewapp.ingest.judge import RunsInFlight
from reviewapp.ingest.pipeline import (
    ChunkStored,
    Progress,
    batch_finish,
    claim_batch,
    run_retrying,
    store_file,
    stored_so_far,
)
from reviewapp.ingest.stages import STAGES, StageClock, atomic_write, counting
from reviewapp.judging.policies import active_policy
from reviewapp.models import IngestBatch, IngestPart

log = logging.getLogger(__name__)

PARTS = Durable(
    name="part of a batch",
    model=IngestPart,
    task=Tasks.INGEST_PART,
    lock=Space.PART,
    # Its worker moves its batch's heartbeat as it goes.
    pulse="batch__heartbeat_at",
    born=None,
    watched=Q(batch__state=IngestBatch.State.RUNNING) & ~Q(batch__channel=IngestBatch.Channel.CLI),
    lost_after=BATCHES.lost_after,
    # Sent again as its batch, whose tries bound its parts' (ingest.batches.BATCHES).
    sends=lambda part: Send(Tasks.INGEST_IN_PARTS, (part.batch_id,)),
)


class _RunKey(msgspec.Struct):
    runId: Any = None  # noqa: N815 (the trace format's own key)


_run_key = msgspec.json.Decoder(_RunKey).decode


def part_of(raw_line: RawLine, parts: int) -> int:
    """Which part a unit is stored by: a native line's by its runId, any other by part 0.

    So identical lines always go together, and the units of external exports are stored
    in file order among themselves (of two exports of one span, the first is kept)."""
    if raw_line.error is None:
        try:
            run_id = _run_key(raw_line.payload).runId
        except msgspec.MsgspecError:
            return 0
        if run_id.__class__ is str:
            return zlib.crc32(run_id.encode("utf-8", "surrogatepass")) % parts
    return 0


def parts_create(batch: IngestBatch) -> None:
    """The batch's parts, those not made yet."""
    IngestPart.objects.bulk_create(
        [IngestPart(batch=batch, index=index) for index in range(batch.parts)],
        ignore_conflicts=True,
    )


def parts_start(batch_id: int) -> None:
    """What a worker runs for a batch in parts: claim it as any batch (its tries counted,
    given up when they are spent) and send its parts not done to workers."""
    with claim_batch(batch_id, when=left_to_do()) as batch:
        if batch is not None:
            parts_dispatch(batch)


def parts_dispatch(batch: IngestBatch) -> None:
    """Send every part of the batch not done yet to a worker (once the transaction
    commits); with all done, part 0 again, which ends the batch."""
    parts_create(batch)
    pending = list(
        IngestPart.objects.filter(batch=batch)
        .exclude(state=IngestPart.State.DONE)
        .values_list("index", flat=True)
    )
    IngestPart.objects.filter(batch=batch, state=IngestPart.State.FAILED).update(
        state=IngestPart.State.QUEUED
    )
    for index in pending or [0]:
        durable.send(Tasks.INGEST_PART, batch.pk, index)


def ingest_part(batch_id: int, index: int) -> None:
    """Store the part's lines and judge its runs; then, if it is the last part to finish,
    end the batch."""
    batch = IngestBatch.objects.get(pk=batch_id)
    part_pk = IngestPart.objects.values_list("pk", flat=True).get(batch=batch, index=index)
    not_done = ~Q(state=IngestPart.State.DONE)
    with durable.claim(PARTS, part_pk, when=not_done, started_at=timezone.now()) as part:
        if part is not None:
            _store_part(batch, part)
        elif IngestPart.objects.filter(not_done, pk=part_pk).exists():
            return  # another worker has it
    _finish_when_all_done(batch.pk)


def _store_part(batch: IngestBatch, part: IngestPart) -> None:
    parts = batch.parts

    def take(raw_line: RawLine) -> bool:
        return part_of(raw_line, parts) == part.index

    def report(done: int, stored: ChunkStored) -> None:
        IngestPart.objects.filter(pk=part.pk).update(bytes_done=done)
        # The batch is as far as its slowest part.
        slowest = (
            IngestPart.objects.filter(batch=OuterRef("pk"))
            .order_by()
            .values("batch")
            .annotate(done=Min("bytes_done"))
            .values("done")
        )
        IngestBatch.objects.filter(pk=batch.pk).update(
            bytes_done=Subquery(slowest), **durable.pulse(BATCHES), **stored_so_far(stored)
        )

    def store() -> ChunkStored:
        in_flight = RunsInFlight(active_policy(), batch)
        stored = store_file(batch, in_flight, report=report, take=take)
        with atomic_write():
            in_flight.judge_rest()
        return stored

    clock = StageClock()
    try:
        with counting(clock):
            stored = run_retrying(batch, store)
    except Exception:
        IngestPart.objects.filter(pk=part.pk).update(
            state=IngestPart.State.FAILED, finished_at=timezone.now()
        )
        raise
    IngestPart.objects.filter(pk=part.pk).update(
        state=IngestPart.State.DONE,
        lines=stored.lines,
        identical=stored.identical,
        stages=clock.rounded(),
        bytes_done=batch.size_bytes,
        finished_at=timezone.now(),
    )


def _finish_when_all_done(batch_pk: int) -> None:
    """End the batch if every part is done and nobody has ended it. Each part marks itself
    done before it looks, and looks under the batch's lock: of two parts ending at once,
    the second to look sees both done."""
    with advisory_lock(Space.BATCH, batch_pk, wait=True):
        batch = IngestBatch.objects.get(pk=batch_pk)
        if batch.state == IngestBatch.State.DONE:
            return
        parts = list(
            IngestPart.objects.filter(batch=batch).values_list("state", "lines", "identical")
        )
        if len(parts) < batch.parts or any(state != IngestPart.State.DONE for state, *_ in parts):
            return
        lines = sum(lines for _, lines, _ in parts)
        identical = sum(identical for *_, identical in parts)
        run_retrying(
            batch,
            lambda: batch_finish(batch, lines=lines, identical=identical, active=active_policy()),
        )
        log.info("batch %s: its %s parts are in; ended", batch.pk, batch.parts)


class PartsFailed(Exception):
    """A batch split into parts that failed, or that nobody is working on; the message
    says which."""


def ingest_file_in_parts(
    path: Path,
    *,
    parts: int,
    progress: Progress | None = None,
    poll: float = 0.2,
    patience: float | None = None,
) -> IngestSummary:
    """Ingest a file where it lies (the command line) in `parts` parts, each by a worker:
    send them, then wait for the last to end the batch (see parts_wait)."""
    batch = create_batch(
        channel=IngestBatch.Channel.CLI, path=path.resolve(), file_name=str(path), parts=parts
    )
    parts_start(batch.pk)
    return parts_wait(batch, progress=progress, poll=poll, patience=patience)


def parts_wait(
    batch: IngestBatch,
    *,
    progress: Progress | None = None,
    poll: float = 0.2,
    patience: float | None = None,
) -> IngestSummary:
    """Wait for a batch sent in parts to end; its summary. PartsFailed if it fails, or if
    `patience` seconds (by default INGEST_STALL_SECONDS, after which a batch counts as
    stalled) pass with no sign of a worker: no part taken, and the batch's heartbeat and
    progress standing still. Giving up waiting stops nothing: the parts are left to the
    workers, and what is stored stays stored."""
    if patience is None:
        patience = float(settings.INGEST_STALL_SECONDS)
    last_sign: tuple[Any, ...] | None = None
    quiet_since = time.monotonic()
    while True:
        batch.refresh_from_db()
        if progress:
            progress(batch.bytes_done, batch.size_bytes)
        if batch.state == IngestBatch.State.DONE:
            return parts_summary(batch)
        if batch.state == IngestBatch.State.FAILED:
            raise PartsFailed(batch.error)
        taken = IngestPart.objects.filter(batch=batch, started_at__isnull=False).count()
        sign = (batch.heartbeat_at, batch.bytes_done, taken)
        if sign != last_sign:
            last_sign, quiet_since = sign, time.monotonic()
        elif time.monotonic() - quiet_since > patience:
            raise PartsFailed(_stalled(batch, taken, patience))
        time.sleep(poll)


def _stalled(batch: IngestBatch, taken: int, patience: float) -> str:
    waited = f"{patience:g} s"
    left = (
        f"batch {batch.pk} is left to the workers (a stalled batch is sent again by the "
        "beat); what is stored stays stored"
    )
    if not taken:
        return (
            f"no worker took any of its {batch.parts} parts in {waited}: is a Celery worker "
            f"running on this broker (celery -A reviewapp.celery worker)? The {left}."
        )
    return (
        f"its workers showed no progress for {waited} ({taken} of {batch.parts} parts "
        f"taken). The {left}."
    )


def parts_summary(batch: IngestBatch) -> IngestSummary:
    """The batch's summary, its stages the sum of its parts' (seconds of every worker)."""
    summary = IngestSummary.of(batch)
    summary.batch_pks = {batch.pk}
    seconds = dict.fromkeys(STAGES, 0.0)
    for stages in IngestPart.objects.filter(batch=batch).values_list("stages", flat=True):
        for name, value in stages.items():
            seconds[name] = seconds.get(name, 0.0) + value
    summary.stages = {name: round(value, 6) for name, value in seconds.items()}
    return summary
