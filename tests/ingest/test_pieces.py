"""A run delivered in pieces (spec/traces.md, "Delivery in pieces, and `seq`"), through the
pipeline `manage.py ingest` uses, on the real database.

With `seq` on every record, what is stored is judged as `manage.py evaluate` judges the
whole file, whatever the pieces re-send. Without it, a line of a record with no id that
is identical to one its run holds from an earlier delivery is stored once, like any
duplicate, and counted apart in every summary: an event that happened again is never
dropped in silence."""

import contextlib
import io
import json
import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.db import connection
from django.urls import reverse

from reviewapp.infra.roles import as_owner
from reviewapp.ingest import lines as ingested_lines
from reviewapp.ingest import pipeline as ingestion
from reviewapp.ingest.batches import IngestSummary
from reviewapp.ingest.parts import parts_summary
from reviewapp.ingest.pipeline import ingest_file, ingest_stored_batch
from reviewapp.ingest.tokens import create_token
from reviewapp.models import IngestBatch, IngestPart, Judgement, Run, TraceLine, TraceRecord
from tests.ingest.test_parts import ingest_in_parts
from tests.seeding import chunk_store_dies_at

pytestmark = pytest.mark.django_db

ACTIONS = ("request_review", "issue_refund", "send_status_message")
SOURCES = ("refund-service", "order-ledger", "search-index")
# Record types without an id of their own (spec/traces.md).
WITHOUT_ID = {"agent_action", "observation_resolution", "run_started"}
PIECES = 3


def encoded(record: dict) -> bytes:
    return json.dumps(record, separators=(",", ":")).encode()


def random_run(rng: random.Random, run_id: str) -> list[dict]:
    """Rounds of calls and observations of one or two orders, each round ended by an
    action; names come from a few, so that a run often takes one action again."""
    records: list[dict] = []
    if rng.random() < 0.5:
        records.append({"type": "run_started", "agent": "refund-agent"})
    for round_number in range(rng.randint(1, 4)):
        for call_number in range(rng.randint(1, 2)):
            call = f"{run_id}-c{round_number}.{call_number}"
            records.append(
                {
                    "type": "tool_call",
                    "toolCallId": call,
                    "tool": "get_order",
                    "arguments": {"orderId": f"{run_id}-order-{rng.randint(1, 2)}"},
                }
            )
            records.append(
                {
                    "type": "tool_observation",
                    "observationId": f"{run_id}-o{round_number}.{call_number}",
                    "toolCallId": call,
                    "source": rng.choice(SOURCES),
                    "status": rng.choice(["paid", "refunded"]),
                }
            )
        if rng.random() < 0.3:
            records.append({"type": "observation_resolution", "kind": "conflict"})
        records.append({"type": "agent_action", "name": rng.choice(ACTIONS)})
    return [{"runId": run_id, **record} for record in records]


@dataclass
class Delivery:
    whole: bytes  # every run once, in recording order: what evaluate judges
    pieces: list[list[tuple[str, dict, bytes]]]  # (run id, record, line) in file order


def delivered_in_pieces(seed: int, *, runs: int, numbered: bool, resend: bool) -> Delivery:
    """Random runs cut into PIECES pieces each, every piece interleaving the runs' shares
    as an exporter flushes them. `numbered`: each record carries `seq`. `resend`: a piece
    may begin by sending again the last records of the one before it (an exporter's
    retry)."""
    rng = random.Random(seed)
    shares: list[list[list[tuple[str, dict, bytes]]]] = []
    whole: list[list[bytes]] = []
    for number in range(runs):
        run_id = f"run-{seed}-{number}"
        records = random_run(rng, run_id)
        if numbered:
            records = [{**record, "seq": seq} for seq, record in enumerate(records)]
        lines = [(run_id, record, encoded(record)) for record in records]
        whole.append([line for _, _, line in lines])
        cuts = [0, *sorted(rng.randint(0, len(lines)) for _ in range(PIECES - 1)), len(lines)]
        run_shares = []
        for piece in range(PIECES):
            start = cuts[piece]
            if resend and piece and rng.random() < 0.5:
                start = max(0, start - rng.randint(1, 2))
            run_shares.append(lines[start : cuts[piece + 1]])
        shares.append(run_shares)
    pieces = [
        interleaved(rng, [run_shares[piece] for run_shares in shares]) for piece in range(PIECES)
    ]
    return Delivery(b"".join(line + b"\n" for line in interleaved(rng, whole)), pieces)


def interleaved[T](rng: random.Random, runs: list[list[T]]) -> list[T]:
    """Every run's items in its own order, the runs mixed at random."""
    order = [index for index, run in enumerate(runs) for _ in run]
    rng.shuffle(order)
    taken = [0] * len(runs)
    out = []
    for index in order:
        out.append(runs[index][taken[index]])
        taken[index] += 1
    return out


def ingest_pieces(tmp_path: Path, delivery: Delivery) -> list[IngestSummary]:
    summaries = []
    for number, piece in enumerate(delivery.pieces):
        path = tmp_path / f"piece-{number}.jsonl"
        path.write_bytes(b"".join(line + b"\n" for _, _, line in piece))
        summaries.append(ingest_file(path, channel=IngestBatch.Channel.CLI))
        statistics_refreshed()
    return summaries


def statistics_refreshed() -> None:
    """The planner's statistics of what an ingest reads, as autovacuum keeps them where
    tables only grow. In a test database whose tests roll back, autovacuum may find only
    dead rows and record the tables as empty; the final sweep's look-up of the runs to
    judge (ingest.judge.runs_to_judge) is then planned for one run and takes minutes for
    hundreds. ANALYZE is the owner's to run, and sees what is committed: these tests
    commit (transaction=True)."""
    tables = ", ".join(model._meta.db_table for model in (Run, TraceRecord, TraceLine, Judgement))
    with as_owner(), connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {tables}")


def evaluated(tmp_path: Path, content: bytes) -> dict[str, dict]:
    """`manage.py evaluate` of a file, by run: its verdicts and findings."""
    path = tmp_path / "whole.jsonl"
    path.write_bytes(content)
    out = io.StringIO()
    with contextlib.redirect_stderr(io.StringIO()):
        call_command("evaluate", str(path), json=True, stdout=out)
    judged = (json.loads(line) for line in out.getvalue().splitlines())
    return {j["runId"]: {"verdicts": j["verdicts"], "findings": j["findings"]} for j in judged}


def stored_verdicts() -> dict[str, dict]:
    """What each run's current judgement says, as evaluate prints it."""
    judged = {}
    for run in Run.objects.select_related("current_judgement"):
        judgement = run.current_judgement
        judged[run.run_id] = {
            "verdicts": [
                {
                    "entity": v.entity,
                    "field": v.field,
                    "action": v.action,
                    "kind": v.kind,
                    "reason": v.reason,
                    "rule": v.rule,
                    "value": v.value,
                    "evidence": v.evidence,
                    "unsafe": v.unsafe,
                }
                for v in judgement.verdicts.order_by("position")
            ],
            "findings": [
                {"kind": f.kind, "evidence": f.evidence}
                for f in judgement.findings.order_by("position")
            ],
        }
    return judged


@dataclass
class Expected:
    duplicates: list[int]  # by piece
    identical: list[int]  # by piece
    runs_with_identical: set[str]


def expected_by_the_spec(delivery: Delivery) -> Expected:
    """Without `seq`, a line is known by its run, its bytes and its occurrence among
    identical lines of its delivery: the n-th is a duplicate when an earlier delivery
    brought n or more of them, and counted apart when its record has no id."""
    held: Counter[tuple[str, bytes]] = Counter()
    expected = Expected([], [], set())
    for piece in delivery.pieces:
        seen: Counter[tuple[str, bytes]] = Counter()
        duplicates = identical = 0
        for run_id, record, line in piece:
            seen[run_id, line] += 1
            if seen[run_id, line] <= held[run_id, line]:
                duplicates += 1
                if record["type"] in WITHOUT_ID:
                    identical += 1
                    expected.runs_with_identical.add(run_id)
        for key, count in seen.items():
            held[key] = max(held[key], count)
        expected.duplicates.append(duplicates)
        expected.identical.append(identical)
    return expected


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("seed", [1, 2])
def test_runs_in_pieces_with_seq_are_judged_as_the_whole_file_is(tmp_path, monkeypatch, seed):
    # Small chunks: a run's records meet the ones stored by an earlier chunk of its piece.
    monkeypatch.setattr(ingestion, "CHUNK_LINES", 500)
    delivery = delivered_in_pieces(seed, runs=600, numbered=True, resend=True)
    summaries = ingest_pieces(tmp_path, delivery)

    resent = [len(piece) for piece in delivery.pieces]
    assert sum(resent) > delivery.whole.count(b"\n"), "some records were sent twice"
    for summary, lines in zip(summaries, resent, strict=True):
        assert (summary.lines, summary.rejected, summary.identical) == (lines, 0, 0)
    assert sum(s.accepted for s in summaries) == delivery.whole.count(b"\n")
    assert stored_verdicts() == evaluated(tmp_path, delivery.whole)

    # A piece sent again adds nothing.
    again = tmp_path / "again.jsonl"
    again.write_bytes(b"".join(line + b"\n" for _, _, line in delivery.pieces[1]))
    records = TraceRecord.objects.count()
    summary = ingest_file(again, channel=IngestBatch.Channel.CLI)
    assert (summary.accepted, summary.duplicates, summary.identical) == (0, summary.lines, 0)
    assert TraceRecord.objects.count() == records


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("seed", [1, 2])
def test_without_seq_every_line_taken_for_a_redelivery_of_a_record_without_id_is_counted(
    tmp_path, seed
):
    delivery = delivered_in_pieces(seed, runs=600, numbered=False, resend=True)
    expected = expected_by_the_spec(delivery)
    summaries = ingest_pieces(tmp_path, delivery)

    assert [s.duplicates for s in summaries] == expected.duplicates
    assert [s.identical for s in summaries] == expected.identical
    for summary in summaries:
        batch = IngestBatch.objects.get(pk=max(summary.batch_pks))
        assert batch.identical == summary.identical
    # Every run the pieces judge otherwise than the whole file is one the summaries
    # named a line of: nothing is lost in silence.
    whole = evaluated(tmp_path, delivery.whole)
    stored = stored_verdicts()
    differing = {run_id for run_id in whole if stored[run_id] != whole[run_id]}
    assert differing, "some run took an action again in a later piece"
    assert differing <= expected.runs_with_identical


def test_the_same_position_with_other_bytes_is_rejected_and_reported_again(tmp_path):
    def action(name: str, seq: int) -> bytes:
        return encoded({"runId": "r", "type": "agent_action", "name": name, "seq": seq})

    first = tmp_path / "first.jsonl"
    first.write_bytes(action("request_review", 0) + b"\n")
    ingest_file(first, channel=IngestBatch.Channel.CLI)

    later = tmp_path / "later.jsonl"
    later.write_bytes(
        action("issue_refund", 0)  # another record at a held position
        + b"\n"
        + action("request_review", 0)  # a re-delivery
        + b"\n"
        + action("request_review", 1)  # the same bytes but for its position: a new record
        + b"\n"
        + action("stop", 1)  # another record at a position held earlier in this file
        + b"\n"
        + action("request_review", 1)  # a re-delivery of a line of this very file
        + b"\n"
        # A run this file begins: the first line at a position holds it.
        + action("stop", 0).replace(b'"r"', b'"new"')
        + b"\n"
        + action("stop", 0).replace(b'"r"', b'"new"')
        + b"\n"
        + action("go", 0).replace(b'"r"', b'"new"')
        + b"\n"
    )
    summary = ingest_file(later, channel=IngestBatch.Channel.CLI)
    assert (summary.accepted, summary.duplicates, summary.rejected, summary.identical) == (
        2,
        3,
        3,
        0,
    )
    rejected = TraceLine.objects.filter(accepted=False).order_by("line_number")
    assert [(line.line_number, line.reason) for line in rejected] == [
        (1, "seq 0 of run r already holds another record"),
        (4, "seq 1 of run r already holds another record"),
        (8, "seq 0 of run new already holds another record"),
    ]
    stored = TraceRecord.objects.filter(run__run_id="r").order_by("id")
    assert [record.document["name"] for record in stored] == ["request_review", "request_review"]

    # Sent again, the file reports its rejected lines again, and adds nothing.
    again = ingest_file(later, channel=IngestBatch.Channel.CLI)
    assert (again.accepted, again.duplicates, again.rejected) == (0, 5, 3)
    assert TraceRecord.objects.count() == 3


def observed(seq: int, status: str) -> bytes:
    record = {
        "runId": "r",
        "type": "tool_observation",
        "observationId": f"o{seq}",
        "source": "s",
        "status": status,
        "seq": seq,
    }
    return encoded(record) + b"\r\n"


def test_a_position_held_by_an_earlier_chunk_is_settled_by_its_bytes(tmp_path, monkeypatch):
    monkeypatch.setattr(ingestion, "CHUNK_LINES", 2)
    content = observed(0, "paid") + observed(1, "void") + observed(0, "paid") + observed(1, "x")
    path = tmp_path / "t.jsonl"
    path.write_bytes(content)
    summary = ingest_file(path, channel=IngestBatch.Channel.CLI)
    assert (summary.accepted, summary.duplicates, summary.rejected) == (2, 1, 1)
    assert TraceLine.objects.get(accepted=False).reason == (
        "seq 1 of run r already holds another record"
    )
    # The same records without their carriage returns are the same records.
    path.write_bytes(content.replace(b"\r\n", b"\n"))
    again = ingest_file(path, channel=IngestBatch.Channel.CLI)
    assert (again.accepted, again.duplicates, again.rejected) == (0, 3, 1)


def test_a_position_taken_by_another_delivery_meanwhile_is_settled_by_its_bytes(
    tmp_path, monkeypatch
):
    """Stored by another delivery between the look-up of a chunk's positions and its
    insert (here the look-up misses them): the insert finds them taken, and then their
    bytes decide."""
    first = tmp_path / "first.jsonl"
    first.write_bytes(observed(0, "paid") + observed(1, "void"))
    ingest_file(first, channel=IngestBatch.Channel.CLI)
    looked_up = ingested_lines._holding
    calls: list[list[str]] = []

    def missing_the_first_time(identities):
        calls.append(identities)
        return {} if len(calls) == 1 else looked_up(identities)

    monkeypatch.setattr(ingested_lines, "_holding", missing_the_first_time)
    later = tmp_path / "later.jsonl"
    later.write_bytes(observed(0, "paid") + observed(1, "x") + observed(2, "paid"))
    summary = ingest_file(later, channel=IngestBatch.Channel.CLI)
    assert len(calls) == 2, "the insert found two positions taken"
    assert (summary.accepted, summary.duplicates, summary.rejected) == (1, 1, 1)
    assert TraceLine.objects.get(accepted=False).line_number == 2


def test_a_retried_batch_counts_its_identical_lines_once(tmp_path, monkeypatch):
    monkeypatch.setattr(ingestion, "CHUNK_LINES", 2)
    actions = [
        encoded({"runId": f"r{n % 3}", "type": "agent_action", "name": "request_review"})
        for n in range(9)
    ]
    first = tmp_path / "first.jsonl"
    first.write_bytes(b"".join(line + b"\n" for line in actions[:3]))
    ingest_file(first, channel=IngestBatch.Channel.CLI)
    later = tmp_path / "later.jsonl"
    later.write_bytes(b"".join(line + b"\n" for line in actions))
    restore_store = chunk_store_dies_at(monkeypatch, 3)
    with pytest.raises(RuntimeError):
        ingest_file(later, channel=IngestBatch.Channel.CLI)
    restore_store()
    batch = IngestBatch.objects.get(file_name=str(later))
    summary = ingestion.ingest_batch(batch)
    # The first of each run's three is the action stored before; the others are new.
    assert (summary.accepted, summary.duplicates, summary.identical) == (6, 3, 3)


def test_every_summary_counts_the_identical_lines_apart_and_says_what_keeps_them(
    tmp_path, capsys, client, reviewer
):
    action = encoded({"runId": "r", "type": "agent_action", "name": "request_review"})
    call = encoded({"runId": "r", "type": "tool_call", "toolCallId": "c", "tool": "t"})
    first, later = tmp_path / "first.jsonl", tmp_path / "later.jsonl"
    first.write_bytes(action + b"\n" + call + b"\n")
    later.write_bytes(action + b"\n" + call + b"\n" + action + b"\n" + action + b"\n")
    call_command("ingest", str(first))
    capsys.readouterr()

    call_command("ingest", str(later), json=True)
    assert json.loads(capsys.readouterr().out) == {
        "lines": 4,
        "accepted": 2,
        "duplicates": 2,
        "identical": 1,  # the call has an id: a re-delivery, never counted apart
        "rejected": 0,
        "runs": 1,
        "tickets": 0,
        "ignored": 0,
    }
    call_command("ingest", str(later))
    said = capsys.readouterr().out
    assert "4 lines: 0 accepted, 4 duplicates (3 of them identical to a record of the run " in said
    assert "seq keeps repeated events" in said

    token = create_token(user=reviewer, name="ci")[1]
    authorized = {"Authorization": f"Bearer {token}"}
    posted = client.post(
        reverse("api-traces"),
        data=later.read_bytes(),
        content_type="application/x-ndjson",
        headers=authorized,
    ).json()
    ingest_stored_batch(IngestBatch.objects.get(public_id=posted["id"]).pk)
    answer = client.get(posted["url"], headers=authorized).json()
    assert (answer["duplicates"], answer["identical"]) == (4, 3)

    client.force_login(reviewer)
    page = client.get(reverse("batch-detail", args=[posted["id"]])).content.decode()
    assert "identical to a record of the run already stored" in page
    assert "keep repeated events" in page

    uploaded = client.post(
        reverse("batch-list"),
        {"files": [SimpleUploadedFile("later.jsonl", later.read_bytes())]},
        follow=True,
    ).content.decode()
    assert "4 duplicates (3 of them identical to a record of the run already stored" in uploaded


def test_a_delivery_in_parts_counts_its_identical_lines_as_a_serial_one(tmp_path, monkeypatch):
    monkeypatch.setattr(ingestion, "CHUNK_LINES", 50)
    delivery = delivered_in_pieces(3, runs=60, numbered=False, resend=True)
    first, second = (tmp_path / f"piece-{n}.jsonl" for n in range(2))
    for path, piece in zip((first, second), delivery.pieces, strict=False):
        path.write_bytes(b"".join(line + b"\n" for _, _, line in piece))
    expected = expected_by_the_spec(delivery).identical[1]
    assert expected

    ingest_file(first, channel=IngestBatch.Channel.CLI)
    batch = ingest_in_parts(second, 3, [2, 0, 1])
    batch.refresh_from_db()
    assert batch.identical == parts_summary(batch).identical == expected
    assert sum(IngestPart.objects.filter(batch=batch).values_list("identical", flat=True)) == (
        expected
    )
