"""Blank lines, by the billion (issue 24, defect 5): a gzip of 1 GiB of newlines, 1 MB as
posted, costs a worker what reading its bytes costs, not minutes, and the batch's progress
moves while they are read. Blank lines stay ignored and every physical line keeps its
number (../shared/spec/traces.md)."""

import contextlib
import gzip
import io
import signal
import threading
import time
import zlib

import pytest
from django.db import connection

from reviewapp.ingest.batches import create_batch
from reviewapp.ingest.files import BlankRun, iter_lines_and_blank_runs, iter_raw_lines
from reviewapp.ingest.pipeline import ingest_stored_batch
from reviewapp.models import IngestBatch, TraceLine
from tests.gzips import repeated_gzip

MIB = 1 << 20
# What a worker may spend on 1 GiB of blank lines: inflating it alone takes about 2.5 s
# of processor time on the 2-core machine; a readline a line took 296 s.
CPU_SECONDS = 10


class TookTooLong(AssertionError):
    pass


@contextlib.contextmanager
def processor_time_bound(seconds: float):
    """Stop the test once this process has used `seconds` of processor time (SIGPROF),
    rather than wait minutes for code that reads a line at a time."""

    def stop(signum, frame):
        raise TookTooLong(f"still reading after {seconds} s of processor time")

    previous = signal.signal(signal.SIGPROF, stop)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


class ProgressWatch:
    """The batch's bytes_done as its page reads it, polled on a connection of its own while
    a worker stores it."""

    def __init__(self, batch_pk: int):
        self.batch_pk, self.seen, self._stop = batch_pk, [], threading.Event()
        self._thread = threading.Thread(target=self._poll)

    def _poll(self) -> None:
        try:
            while not self._stop.wait(0.05):
                state, done = IngestBatch.objects.values_list("state", "bytes_done").get(
                    pk=self.batch_pk
                )
                if state == IngestBatch.State.RUNNING and (not self.seen or done != self.seen[-1]):
                    self.seen.append(done)
        finally:
            connection.close()

    def __enter__(self) -> "ProgressWatch":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@pytest.mark.django_db(transaction=True)
def test_a_gibibyte_of_blank_lines_takes_a_worker_seconds_and_moves_its_progress(
    tmp_path, reviewer
):
    path = tmp_path / "blank.jsonl.gz"
    path.write_bytes(repeated_gzip(b"\n" * MIB, 1024))
    assert path.stat().st_size < 1.1 * MIB
    batch = create_batch(
        channel=IngestBatch.Channel.API, path=path, file_name="blank.jsonl.gz", user=reviewer
    )
    with ProgressWatch(batch.pk) as progress, processor_time_bound(3 * CPU_SECONDS):
        started = time.process_time()
        summary = ingest_stored_batch(batch.pk)  # what the worker's task runs
        seconds = time.process_time() - started
    assert seconds < CPU_SECONDS, f"{seconds:.1f} s of processor time for 1 GiB of blank lines"
    batch.refresh_from_db()
    assert batch.state == IngestBatch.State.DONE and summary.lines == 0
    assert not TraceLine.objects.filter(batch=batch).exists()
    # The bar moved with the bytes inflated (its share of what the trailer says), many times.
    moved = [done for done in progress.seen if 0 < done < batch.size_bytes]
    assert len(moved) >= 5, progress.seen
    assert moved == sorted(moved)


LINES = [
    b'{"runId": "r", "type": "run_started"}',
    b"",
    b"   \t",
    b"\r",
    b"x",
]


@pytest.mark.parametrize(
    "body",
    [
        b"\n" * 50_000 + LINES[0] + b"\n" + b"\n" * 20_000 + b"last",
        b"\n".join(LINES * 3000) + b"\n",
        # Blank lines longer than what is buffered at once, and one blank line at the end.
        b"\n".join([b" " * 20_000, LINES[0], b"\t" * 70_000, b"y" * 10, b" " * 9000]),
        b"\r\n" * 10_000 + LINES[4] + b"\r\n" + b" \r\n" * 30_000 + LINES[0],
        b"\n" * (9 * MIB) + b"after a blank run longer than one report\n",
    ],
    ids=["runs", "alternating", "long blank lines", "crlf", "past a report"],
)
@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "gzip"])
def test_blank_lines_are_skipped_and_every_line_keeps_its_physical_number(body, compressed):
    expected = [
        (number, line) for number, line in enumerate(body.split(b"\n"), start=1) if line.strip()
    ]
    data = gzip.compress(body) if compressed else body
    read = list(iter_raw_lines(io.BytesIO(data), "f"))
    assert [(line.number, line.raw) for line in read] == expected
    assert all(line.error is None for line in read)


def test_a_long_blank_run_reports_how_far_it_got_and_the_lines_after_it_still_count():
    body = b"\n" * (20 * MIB) + b"x\n"
    read = list(iter_lines_and_blank_runs(io.BytesIO(gzip.compress(body)), "f"))
    runs = [item.number for item in read if isinstance(item, BlankRun)]
    assert len(runs) == 2 and runs == sorted(runs) and runs[-1] < 20 * MIB
    assert [(line.number, line.raw) for line in read if not isinstance(line, BlankRun)] == [
        (20 * MIB + 1, b"x")
    ]


def test_a_gzip_cut_short_in_a_blank_run_ends_with_a_line_numbered_after_the_blank_ones():
    data = gzip.compress(b"x\n" + b"\n" * (5 * MIB) + b"y\n")
    cut = data[: len(data) // 2]
    inflated = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(cut)
    read = list(iter_raw_lines(io.BytesIO(cut), "f"))
    assert [line.raw for line in read[:-1]] == [b"x"]
    assert read[-1].error and read[-1].number == inflated.count(b"\n") + 1
