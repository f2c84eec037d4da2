"""A delivery split into parts, each stored by a worker of its own (ingest.parts), ends as
a serial ingest of the same file would: the same lines, runs, records in the same order,
verdicts, findings and tickets. Here the parts run in this process, in a shuffled order;
tests/ingest/test_parts_workers.py runs them on real workers at once."""

import json
import random
from pathlib import Path

import pytest
from django.core.management import call_command
from django.utils import timezone

from reviewapp.ingest import pipeline as ingestion
from reviewapp.ingest.batches import create_batch
from reviewapp.ingest.files import RawLine
from reviewapp.ingest.parts import (
    PartsFailed,
    ingest_part,
    part_of,
    parts_create,
    parts_summary,
    parts_wait,
)
from reviewapp.ingest.pipeline import ingest_file
from reviewapp.models import (
    Finding,
    IngestBatch,
    IngestPart,
    Run,
    Ticket,
    TraceLine,
    TraceRecord,
    Verdict,
)
from reviewapp.review.opening import TICKET_COLUMNS
from tests.paths import OTEL, SPEC

pytestmark = pytest.mark.django_db(transaction=True)


def line(**record) -> bytes:
    return json.dumps(record, separators=(",", ":")).encode()


def mixed_trace(seed: int) -> bytes:
    """Every kind of line a file can hold, native runs interleaved so that each spans many
    chunks: the spec fixtures' runs, runs of conflicts with actions, identical lines far
    apart (in a run, and bad ones), lines that are not JSON, blank lines, a run an earlier
    delivery began, and one-line OpenTelemetry exports."""
    runs: list[list[bytes]] = []
    for path in sorted(SPEC.glob("*.jsonl")):
        if not path.name.endswith(".expected.jsonl"):
            lines = [raw for raw in path.read_bytes().splitlines() if raw.strip()]
            by_run: dict[str, list[bytes]] = {}
            for raw in lines:
                by_run.setdefault(json.loads(raw)["runId"], []).append(raw)
            runs.extend(by_run.values())
    for number in range(30):
        run = f"mixed-{number}"
        runs.append(
            [
                line(runId=run, type="run_started", agent=f"agent-{number % 3}"),
                line(
                    runId=run,
                    type="tool_observation",
                    observationId=f"{run}-a",
                    source="ledger",
                    status="paid",
                ),
                line(
                    runId=run,
                    type="tool_observation",
                    observationId=f"{run}-b",
                    source="refunds",
                    status="refunded" if number % 2 else "paid",
                ),
                line(runId=run, type="agent_action", name="send_status_message"),
            ]
        )
    twin = line(
        runId="mixed-0", type="tool_observation", observationId="twin", source="x", status="paid"
    )
    runs[-1].extend([twin, twin])
    runs.append(
        [
            line(
                runId="begun-before",
                type="tool_observation",
                observationId="late",
                source="refunds",
                status="refunded",
            )
        ]
    )
    order = [index for index, run in enumerate(runs) for _ in run]
    random.Random(seed).shuffle(order)
    taken = [0] * len(runs)
    out: list[bytes] = []
    for index in order:
        out.append(runs[index][taken[index]])
        taken[index] += 1
    out[5:5] = [b"{not json", b"", b"[1, 2]"]
    out[40:40] = [b"{not json", twin]
    for path in sorted(OTEL.glob("*.json")):
        out.insert(
            len(out) // 2, json.dumps(json.loads(path.read_bytes()), separators=(",", ":")).encode()
        )
    return b"\n".join(out) + b"\n"


EARLIER = (
    line(
        runId="begun-before",
        type="tool_observation",
        observationId="early",
        source="ledger",
        status="paid",
    )
    + b"\n"
)


def snapshot(batch: IngestBatch) -> dict:
    """What the batch left, without database ids: lines, runs, each run's records in
    stored order, the current judgements' verdicts and findings, tickets, the summary."""
    batch.refresh_from_db()
    run_ids = dict(Run.objects.values_list("pk", "run_id"))
    current = list(
        Run.objects.exclude(current_judgement=None).values_list("current_judgement", flat=True)
    )
    return {
        "lines": sorted(
            TraceLine.objects.filter(batch=batch).values_list(
                "line_number", "raw", "accepted", "reason", "format", "ignored"
            )
        ),
        "identities": sorted(
            TraceLine.objects.filter(accepted=True).values_list("identity", flat=True)
        ),
        "records": sorted(
            (
                run_ids[run_pk],
                [(kind, key, source, data) for _, kind, key, source, data in sorted(items)],
            )
            for run_pk, items in _records_by_run().items()
        ),
        "runs": sorted(Run.objects.values_list("run_id", "agent")),
        "verdicts": sorted(
            (run_ids[run], *rest)
            for run, *rest in Verdict.objects.filter(judgement__in=current).values_list(
                "run",
                "position",
                "entity",
                "field",
                "action",
                "kind",
                "reason",
                "rule",
                "value",
                "evidence",
                "unsafe",
            )
        ),
        "findings": sorted(
            (run_ids[run], *rest)
            for run, *rest in Finding.objects.filter(judgement__in=current).values_list(
                "run", "position", "kind", "evidence"
            )
        ),
        "tickets": sorted(
            (run_ids[run], *rest)
            for run, *rest in Ticket.objects.values_list("run", *TICKET_CONTENT)
        ),
        "summary": (
            batch.state,
            batch.lines,
            batch.accepted,
            batch.duplicates,
            batch.rejected,
            batch.runs,
            batch.tickets,
            batch.ignored,
        ),
    }


# What a ticket says, without the ids of the rows it points at.
TICKET_CONTENT = [column for column in TICKET_COLUMNS if not column.endswith("_id")]


def _records_by_run() -> dict[int, list]:
    records: dict[int, list] = {}
    for row in TraceRecord.objects.values_list("run", "id", "type", "key", "source", "data"):
        records.setdefault(row[0], []).append(row[1:])
    return records


def differences(got, expected) -> str:
    if not isinstance(got, list):
        return f"{got} != {expected}"
    shown = [repr(item)[:300] for item in got if item not in expected]
    missing = [repr(item)[:300] for item in expected if item not in got]
    return f"only in the parts' ingest: {shown}; only in the serial one: {missing}"


def ingest_in_parts(path: Path, parts: int, order: list[int]) -> IngestBatch:
    """What the workers do, one part after another in `order`: each part stores its lines
    and the last to finish ends the batch."""
    batch = create_batch(
        channel=IngestBatch.Channel.CLI, path=path, file_name=str(path), parts=parts
    )
    parts_create(batch)
    for index in order:
        ingest_part(batch.pk, index)
    return batch


def empty_database() -> None:
    call_command("flush", interactive=False, verbosity=0)


@pytest.mark.parametrize("parts, order", [(2, [1, 0]), (3, [2, 0, 1])])
def test_a_file_ingested_in_parts_equals_a_serial_ingest(tmp_path, monkeypatch, parts, order):
    monkeypatch.setattr(ingestion, "CHUNK_LINES", 7)
    trace, earlier = tmp_path / "mixed.jsonl", tmp_path / "earlier.jsonl"
    trace.write_bytes(mixed_trace(seed=parts))
    earlier.write_bytes(EARLIER)

    ingest_file(earlier, channel=IngestBatch.Channel.CLI)
    serial = ingest_file(trace, channel=IngestBatch.Channel.CLI)
    expected = snapshot(IngestBatch.objects.get(pk=max(serial.batch_pks)))
    empty_database()

    ingest_file(earlier, channel=IngestBatch.Channel.CLI)
    batch = ingest_in_parts(trace, parts, order)
    got = snapshot(batch)

    assert expected["summary"][0] == "done" and expected["summary"][5] > 40
    assert expected["summary"][4] >= 3, "the bad lines were in the file"
    assert expected["tickets"] and expected["findings"], "the trace opened tickets"
    for key in expected:
        assert got[key] == expected[key], differences(got[key], expected[key])
    assert (
        list(IngestPart.objects.filter(batch=batch).values_list("state", flat=True))
        == ["done"] * parts
    )
    assert (
        sum(IngestPart.objects.filter(batch=batch).values_list("lines", flat=True)) == batch.lines
    )


def test_a_part_run_again_adds_nothing_and_the_batch_ends_once(tmp_path, monkeypatch):
    monkeypatch.setattr(ingestion, "CHUNK_LINES", 7)
    trace = tmp_path / "mixed.jsonl"
    trace.write_bytes(mixed_trace(seed=7))
    batch = create_batch(
        channel=IngestBatch.Channel.CLI, path=trace, file_name="mixed.jsonl", parts=2
    )
    parts_create(batch)
    ingest_part(batch.pk, 0)
    ingest_part(batch.pk, 0)  # a worker given it again (its message delivered twice)
    batch.refresh_from_db()
    assert batch.state != "done", "one part is still to come"
    lines_after_one = TraceLine.objects.count()
    assert lines_after_one > 0

    ingest_part(batch.pk, 1)
    batch.refresh_from_db()
    finished_at, summary = batch.finished_at, parts_summary(batch)
    assert batch.state == "done" and summary.lines == batch.lines > lines_after_one
    assert summary.lines == summary.accepted + summary.duplicates + summary.rejected
    assert set(summary.stages) >= {"decode", "judge", "write", "commit"}

    ingest_part(batch.pk, 1)
    batch.refresh_from_db()
    assert batch.finished_at == finished_at, "the batch ended once"
    assert TraceLine.objects.count() == batch.accepted + batch.rejected


def test_a_run_goes_to_one_part_and_identical_lines_together():
    def raw(number: int, data: bytes) -> RawLine:
        return RawLine("f", number, data)

    for parts in (2, 3, 5):
        for run in ("r1", "run-with-é", "x" * 300):
            lines = [
                line(runId=run, type="agent_action", name="a"),
                line(
                    type="tool_call",
                    runId=run,
                    toolCallId="c",
                    tool="t",
                    arguments={"runId": "other"},
                ),
            ]
            assert len({part_of(raw(n, data), parts) for n, data in enumerate(lines, 2)}) == 1
        # Not native (a line that is not JSON, a runId that is no string, an export): the
        # first part, in file order.
        for other in (
            b'{"runId": 5, "type": "agent_action"}',
            b"{not json",
            b'{"resourceSpans":[]}',
        ):
            assert part_of(raw(3, other), parts) == 0
    spread = {part_of(raw(2, line(runId=f"r{n}", type="x")), 4) for n in range(40)}
    assert spread == {0, 1, 2, 3}


def test_the_batch_page_shows_each_part(tmp_path, client, reviewer):
    from django.urls import reverse

    trace = tmp_path / "mixed.jsonl"
    trace.write_bytes(mixed_trace(seed=3))
    batch = ingest_in_parts(trace, 2, [0, 1])
    client.force_login(reviewer)
    page = client.get(reverse("batch-detail", args=[batch.public_id])).content.decode()
    assert "In 2 parts, each stored by a worker of its own" in page
    lines = list(IngestPart.objects.filter(batch=batch).values_list("lines", flat=True))
    for index, count in enumerate(lines, 1):
        assert f"<tr><td>{index}</td>" in page and f"<td>{count}</td></tr>" in page
    assert page.count("state-done") >= 3  # the batch and its two parts


def test_the_command_ingests_a_large_file_itself_unless_told_to_split_it(tmp_path, settings):
    settings.INGEST_PARTS, settings.INGEST_PARTS_MIN_BYTES, settings.INGEST_INLINE_MAX_BYTES = (
        2,
        1,
        0,
    )
    trace = tmp_path / "mixed.jsonl"
    trace.write_bytes(mixed_trace(seed=1))
    summary = ingest_file(trace, channel=IngestBatch.Channel.CLI)
    batch = IngestBatch.objects.get()
    assert (batch.state, batch.parts, summary.lines) == ("done", 1, batch.lines)
    assert summary.lines > 100 and not IngestPart.objects.exists()
    # What arrives by the API or an upload, that large, is split (tests/ingest/test_parts_workers.py).
    upload = create_batch(channel=IngestBatch.Channel.UPLOAD, path=trace, file_name="u.jsonl")
    otlp = create_batch(channel=IngestBatch.Channel.OTLP, path=trace, file_name="o.jsonl")
    assert (upload.parts, otlp.parts) == (2, 1)


def test_a_part_that_fails_fails_its_batch_and_its_retry_ends_it(tmp_path, monkeypatch):
    monkeypatch.setattr(ingestion, "CHUNK_LINES", 7)
    trace = tmp_path / "mixed.jsonl"
    trace.write_bytes(mixed_trace(seed=9))
    batch = create_batch(channel=IngestBatch.Channel.CLI, path=trace, file_name="m.jsonl", parts=2)
    parts_create(batch)
    real_store = ingestion._store_chunk

    def dying_store(batch_, lines, in_flight):
        if lines:
            raise RuntimeError("worker lost")
        return real_store(batch_, lines, in_flight)

    monkeypatch.setattr(ingestion, "_store_chunk", dying_store)
    with pytest.raises(RuntimeError):
        ingest_part(batch.pk, 1)
    monkeypatch.setattr(ingestion, "_store_chunk", real_store)
    batch.refresh_from_db()
    assert batch.state == "failed" and "internal error" in batch.error
    assert IngestPart.objects.get(batch=batch, index=1).state == "failed"

    ingest_part(batch.pk, 0)
    batch.refresh_from_db()
    assert batch.state == "failed", "a part is missing: the batch does not end"

    ingest_part(batch.pk, 1)  # what the retry sends (parts_dispatch: the parts not done)
    batch.refresh_from_db()
    assert batch.state == "done"
    assert batch.lines == len([raw for raw in trace.read_bytes().splitlines() if raw.strip()])
    assert batch.lines == batch.accepted + batch.duplicates + batch.rejected
    assert TraceLine.objects.filter(batch=batch).count() == batch.accepted + batch.rejected


def test_waiting_for_parts_that_no_worker_takes_gives_up_and_says_why(tmp_path):
    trace = tmp_path / "trace.jsonl"
    trace.write_bytes(line(runId="r", type="run_started") + b"\n")
    batch = create_batch(channel="cli", path=trace, file_name=str(trace), parts=2)
    parts_create(batch)  # and never sent: no worker takes them

    with pytest.raises(PartsFailed) as failed:
        parts_wait(batch, poll=0.05, patience=0.5)

    assert "no worker took any of its 2 parts in 0.5 s" in str(failed.value)
    assert "celery -A reviewapp.celery worker" in str(failed.value)
    batch.refresh_from_db()
    assert batch.state != IngestBatch.State.FAILED, "giving up waiting fails nothing"
    assert IngestPart.objects.filter(batch=batch, state="queued").count() == 2


def test_waiting_goes_on_while_the_parts_move_and_gives_up_once_they_stand_still(tmp_path):
    trace = tmp_path / "trace.jsonl"
    trace.write_bytes(line(runId="r", type="run_started") + b"\n")
    batch = create_batch(channel="cli", path=trace, file_name=str(trace), parts=2)
    parts_create(batch)
    IngestPart.objects.filter(batch=batch, index=0).update(started_at=timezone.now())
    beats = iter(range(6))

    def progress(done: int, total: int) -> None:
        # A worker storing chunks: the batch moves on for the first few polls, then stops.
        if next(beats, None) is not None:
            IngestBatch.objects.filter(pk=batch.pk).update(bytes_done=done + 1)

    started = timezone.now()
    with pytest.raises(PartsFailed) as failed:
        parts_wait(batch, progress=progress, poll=0.1, patience=0.3)

    assert (timezone.now() - started).total_seconds() >= 0.5 + 0.3, "it waited while it moved"
    assert "showed no progress for 0.3 s (1 of 2 parts taken)" in str(failed.value)
