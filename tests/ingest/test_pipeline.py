"""The ingest pipeline: every line accounted for, nothing lost, nothing doubled."""

import gzip
import json
from pathlib import Path

import pytest
from django.db import transaction

from reviewapp.engine import UTF8_BOM
from reviewapp.ingest import pipeline as ingestion
from reviewapp.ingest.batches import IngestSummary, create_batch
from reviewapp.ingest.pipeline import ingest_batch, ingest_file
from reviewapp.judging.core import stored_runs
from reviewapp.models import IngestBatch, Judgement, Run, Ticket, TraceLine, TraceRecord, Verdict
from tests.paths import OTEL as OTEL_DIR
from tests.paths import SPEC as SPEC_DIR
from tests.seeding import chunk_store_dies_at

pytestmark = pytest.mark.django_db
SPEC = SPEC_DIR


def line(**record) -> bytes:
    return json.dumps(record, separators=(",", ":")).encode()


def observation(run: str, obs_id: str, source: str, status: str, **extra) -> bytes:
    return line(
        runId=run,
        type="tool_observation",
        observationId=obs_id,
        source=source,
        status=status,
        **extra,
    )


def ingest(tmp_path: Path, content: bytes, name: str = "trace.jsonl") -> IngestSummary:
    path = tmp_path / name
    path.write_bytes(content)
    return ingest_file(path, channel=IngestBatch.Channel.CLI)


def assert_accounted(summary: IngestSummary) -> None:
    assert summary.lines == summary.accepted + summary.duplicates + summary.rejected


def test_a_fixture_is_stored_judged_and_ticketed():
    summary = ingest_file(SPEC / "order-status.jsonl", channel=IngestBatch.Channel.CLI)
    assert summary.as_dict() == {
        "lines": 25,
        "accepted": 25,
        "duplicates": 0,
        "identical": 0,
        "rejected": 0,
        "runs": 5,
        "tickets": 4,  # the default policy decides no authority: only "agreement" is settled
        "ignored": 0,
    }
    assert Run.objects.count() == 5
    assert TraceRecord.objects.filter(type="tool_observation").count() == 10
    run = Run.objects.get(run_id="run-conflict-1")
    verdict = Verdict.objects.get(judgement=run.current_judgement)
    assert (verdict.kind, verdict.reason, verdict.unsafe) == (
        "conflict",
        "no-approved-precedence",
        True,
    )
    assert verdict.evidence == ["obs-refund-1", "obs-ledger-3"]
    assert run.current_judgement.policy_number == 0  # the built-in default policy
    ticket = Ticket.objects.get(run=run)
    assert (ticket.field, ticket.action, ticket.sources) == (
        "status",
        "issue_store_credit",
        "order-ledger,refund-service",
    )
    assert "same domain payments" in ticket.fingerprint_label


def test_raw_lines_are_kept_byte_for_byte(tmp_path):
    odd = b'{"runId":"r","type":"agent_action","name":"stop",  "extra":{"b":1,"a":[1.50]}}'
    ingest(tmp_path, odd + b"\r\n")
    stored = TraceLine.objects.get()
    assert bytes(stored.raw) == odd + b"\r"
    assert TraceRecord.objects.select_related("line").get().document["extra"] == {
        "b": 1,
        "a": [1.5],
    }


def test_ingesting_the_same_content_again_adds_nothing(tmp_path):
    content = (SPEC / "stock-reconciliation.jsonl").read_bytes()
    first = ingest(tmp_path, content)
    counts = (
        TraceLine.objects.count(),
        Run.objects.count(),
        Ticket.objects.count(),
        Judgement.objects.count(),
    )
    again = ingest(tmp_path, content, name="copy.jsonl")
    assert again.as_dict() == {
        "lines": first.lines,
        "accepted": 0,
        "duplicates": first.lines,
        # Its actions and resolutions, which have no id: they may be events that happened
        # again, counted apart.
        "identical": 18,
        "rejected": 0,
        "runs": 0,
        "tickets": 0,
        "ignored": 0,
    }
    gzipped = ingest(tmp_path, gzip.compress(content), name="copy.jsonl.gz")
    assert gzipped.duplicates == first.lines
    assert (
        TraceLine.objects.count(),
        Run.objects.count(),
        Ticket.objects.count(),
        Judgement.objects.count(),
    ) == counts


def test_identical_records_in_one_run_are_both_kept_and_flagged(tmp_path):
    twin = observation("r1", "o1", "a", "paid")
    content = twin + b"\n" + twin + b"\n" + observation("r1", "o2", "b", "paid") + b"\n"
    summary = ingest(tmp_path, content)
    assert (summary.accepted, summary.duplicates) == (3, 0)
    judgement = Run.objects.get(run_id="r1").current_judgement
    assert list(judgement.findings.values_list("kind", flat=True)) == ["duplicate-observation-id"]
    assert ingest(tmp_path, content, name="again.jsonl").duplicates == 3


def test_identical_bytes_far_apart_in_a_file_are_later_occurrences(tmp_path, monkeypatch):
    monkeypatch.setattr(ingestion, "CHUNK_LINES", 2)
    twin = observation("r1", "o1", "a", "paid")
    filler = [line(runId="r1", type="agent_action", name=f"a{i}") for i in range(5)]
    content = b"\n".join([twin, *filler, twin, twin]) + b"\n"
    first = ingest(tmp_path, content)
    assert (first.accepted, first.duplicates) == (8, 0)
    again = ingest(tmp_path, content, name="again.jsonl")
    assert (again.accepted, again.duplicates) == (0, 8)


def test_new_lines_for_a_known_run_are_appended_and_judged_again(tmp_path):
    ingest(
        tmp_path,
        observation("r1", "o1", "a", "paid")
        + b"\n"
        + observation("r1", "o2", "b", "refunded")
        + b"\n",
    )
    first_judgement = Run.objects.get().current_judgement
    assert first_judgement.conflict_count == 1
    summary = ingest(
        tmp_path, line(runId="r1", type="agent_action", name="refund") + b"\n", name="more.jsonl"
    )
    assert (summary.accepted, summary.runs, summary.tickets) == (1, 1, 0)
    run = Run.objects.get()
    assert run.current_judgement != first_judgement
    assert run.current_judgement.verdicts.get().action == "refund"
    # History stays: the first judgement still says what it said.
    assert first_judgement.verdicts.get().action is None
    assert Ticket.objects.count() == 1


def test_a_run_whose_lines_are_far_apart_in_a_file_is_judged_on_all_of_them(tmp_path, monkeypatch):
    monkeypatch.setattr(ingestion, "CHUNK_LINES", 2)
    filler = [observation("r2", f"f{i}", "a", "paid") for i in range(5)]
    content = b"\n".join(
        [
            observation("r1", "o1", "a", "paid"),
            *filler,
            observation("r1", "o2", "b", "refunded"),
            line(runId="r1", type="agent_action", name="refund"),
        ]
    )
    ingest(tmp_path, content + b"\n")
    run = Run.objects.get(run_id="r1")
    last_record = run.records.order_by("-id").values_list("id", flat=True)[0]
    assert run.current_judgement.through_record_id == last_record
    verdict = run.current_judgement.verdicts.get()
    assert (verdict.kind, verdict.action, verdict.unsafe) == ("conflict", "refund", True)
    assert Ticket.objects.filter(run=run).get().action == "refund"


def test_runs_judged_while_ingesting_match_a_judgement_of_their_stored_records(monkeypatch):
    from reviewapp.engine import judge_run
    from reviewapp.judging.core import stored_runs
    from reviewapp.judging.policies import active_policy

    monkeypatch.setattr(ingestion, "CHUNK_LINES", 7)
    for path in sorted(SPEC.glob("*.jsonl")):
        if not path.name.endswith(".expected.jsonl"):
            ingest_file(path, channel=IngestBatch.Channel.CLI)
    runs = list(Run.objects.select_related("current_judgement"))
    records = {run.pk: run.records for run in stored_runs([run.pk for run in runs])}
    for run in runs:
        expected = judge_run(run.run_id, [r for _, r in records[run.pk]], active_policy().policy)
        stored = run.current_judgement.verdicts.order_by("position")
        assert [
            {k: v for k, v in verdict.items() if k in expected.verdicts[0].as_dict()}
            for verdict in stored.values()
        ] == [v.as_dict() for v in expected.verdicts], run.run_id
        assert run.current_judgement.through_record_id == records[run.pk][-1][0]


def test_an_older_judgement_never_replaces_a_newer_current_one(tmp_path):
    from reviewapp.ingest.judge import judge_and_open
    from reviewapp.judging.core import RunToJudge, stored_runs
    from reviewapp.judging.policies import active_policy

    ingest(
        tmp_path,
        observation("r1", "o1", "a", "paid") + b"\n" + observation("r1", "o2", "b", "gone") + b"\n",
    )
    run = Run.objects.get()
    current, tickets = run.current_judgement_id, Ticket.objects.count()
    partial = stored_runs([run.pk])[0].records[:1]
    with transaction.atomic():
        judge_and_open(
            [RunToJudge(run.pk, run.run_id, run.agent, partial)],
            active=active_policy(),
            batch=IngestBatch.objects.get(),
        )
    run.refresh_from_db()
    assert Judgement.objects.count() == 2  # stored, as history
    assert run.current_judgement_id == current
    assert Ticket.objects.count() == tickets


def test_a_first_judgement_leaves_a_ticket_opened_meanwhile_as_it_is(tmp_path):
    # A run judged from memory is judged for the first time, so its tickets are not looked
    # for; one that another ingest opened meanwhile is kept, not doubled and not an error.
    from reviewapp.judging.core import judge, stored_runs
    from reviewapp.judging.policies import active_policy
    from reviewapp.judging.store import Stored
    from reviewapp.models import Finding
    from reviewapp.review.opening import tickets_open

    ingest(
        tmp_path,
        observation("r1", "o1", "a", "paid") + b"\n" + observation("r1", "o2", "b", "gone") + b"\n",
    )
    run = Run.objects.get()
    before = list(Ticket.objects.order_by("pk").values())
    assert before, "the conflict opened a ticket"
    [judged] = judge(stored_runs([run.pk]), active_policy().policy)
    judgement_id = run.current_judgement_id
    again = Stored(
        judged,
        judgement_id,
        list(
            Verdict.objects.filter(judgement_id=judgement_id)
            .order_by("position")
            .values_list("pk", flat=True)
        ),
        list(
            Finding.objects.filter(judgement_id=judgement_id)
            .order_by("position")
            .values_list("pk", flat=True)
        ),
        current=True,
    )
    with transaction.atomic():
        tickets_open(
            [again],
            policy=active_policy().policy,
            policy_number=0,
            batch_id=IngestBatch.objects.get().pk,
            first=True,
        )
    assert list(Ticket.objects.order_by("pk").values()) == before


def test_a_run_appended_to_by_another_delivery_mid_ingest_is_judged_on_all_its_lines(
    tmp_path, monkeypatch
):
    # Windows of three file lines: lines 1-2, then 3-5 (chunks follow line numbers).
    monkeypatch.setattr(ingestion, "CHUNK_LINES", 3)
    first = b"\n".join(
        [
            observation("r1", "o1", "a", "paid"),
            observation("r1", "o2", "a", "paid"),
            observation("r2", "x1", "a", "paid"),
            observation("r2", "x2", "a", "paid"),
        ]
    )
    real_store, calls = ingestion._store_chunk, {"n": 0}

    def store_with_a_delivery_in_between(batch_, lines, in_flight):
        calls["n"] += 1
        if calls["n"] == 2:
            monkeypatch.setattr(ingestion, "_store_chunk", real_store)
            ingest(tmp_path, observation("r1", "o3", "b", "refunded") + b"\n", name="other.jsonl")
        return real_store(batch_, lines, in_flight)

    monkeypatch.setattr(ingestion, "_store_chunk", store_with_a_delivery_in_between)
    ingest(tmp_path, first + b"\n")
    run = Run.objects.get(run_id="r1")
    assert run.records.count() == 3
    # Only whole views of r1 were judged: none that missed the other delivery's line.
    assert list(Judgement.objects.filter(run=run).values_list("through_record_id", flat=True)) == [
        run.records.order_by("-id").values_list("id", flat=True)[0]
    ]
    assert run.current_judgement.conflict_count == 1


def test_a_run_started_arriving_after_the_first_lines_still_names_agent_and_clock(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(ingestion, "CHUNK_LINES", 2)
    started = line(
        runId="r1",
        type="run_started",
        agent="refund-agent",
        startedAt="2026-03-04T05:06:07Z",
        subject={"orderId": "o-1"},
    )
    content = b"\n".join(
        [observation("r1", "o1", "a", "paid"), observation("r1", "o2", "b", "gone"), started]
    )
    ingest(tmp_path, content + b"\n")
    run = Run.objects.get()
    assert (run.agent, run.subject, run.started_at.isoformat()) == (
        "refund-agent",
        {"orderId": "o-1"},
        "2026-03-04T05:06:07+00:00",
    )
    assert Ticket.objects.get().agent == "refund-agent"

    ingest(tmp_path, observation("r2", "o1", "a", "paid") + b"\n", name="first.jsonl")
    ingest(tmp_path, started.replace(b'"r1"', b'"r2"') + b"\n", name="later.jsonl")
    assert Run.objects.get(run_id="r2").agent == "refund-agent"


BAD_INPUT = [
    (b"\xff\xfe not utf-8", "invalid UTF-8 at byte 1"),
    (
        b'{"runId":"x","type":"agent_action","name":"a\x00"}',
        "not valid JSON: Invalid control character at column 45",
    ),
    (
        b'{"runId":"x","type":"agent_action","name":"a\\u0000"}',
        "contains a NUL character (\\u0000), which cannot be stored",
    ),
    (b"[" * 100000 + b"]" * 100000, "JSON nested too deeply"),
    (b'{"runId":"x","type":"agent_action","name":"a","n":NaN}', "NaN is not valid JSON"),
    (b'{"runId":"x","runId":"y","type":"agent_action","name":"a"}', 'duplicate key "runId"'),
    (b'"just a string"', "not a JSON object but a string"),
    (b'{"type":"agent_action","name":"a"}', 'missing required key "runId"'),
    (
        b'{"runId":"x","type":"tool_call","toolCallId":"c","tool":"t","ok":"yes"}',
        'tool_call: "ok" must be a boolean, not a string',
    ),
]


@pytest.mark.parametrize(("bad", "reason"), BAD_INPUT, ids=[r for _, r in BAD_INPUT])
def test_bad_lines_are_rejected_with_a_reason_and_good_ones_kept(tmp_path, bad, reason):
    good = observation("r1", "o1", "a", "paid")
    summary = ingest(tmp_path, good + b"\n" + bad + b"\n" + observation("r1", "o2", "b", "paid"))
    assert (summary.accepted, summary.rejected) == (2, 1)
    assert_accounted(summary)
    rejected = TraceLine.objects.get(accepted=False)
    assert (rejected.line_number, rejected.reason) == (2, reason)
    assert bytes(rejected.raw) == bad


def test_a_bom_mixed_line_endings_and_no_final_newline_are_fine(tmp_path):
    content = (
        b"\xef\xbb\xbf"
        + observation("r1", "o1", "a", "paid")
        + b"\r\n\n  \n"
        + observation("r1", "o2", "b", "paid")
    )
    summary = ingest(tmp_path, content)
    assert (summary.lines, summary.accepted, summary.rejected) == (2, 2, 0)
    assert bytes(TraceLine.objects.get(line_number=1).raw).startswith(b"\xef\xbb\xbf")


def test_a_corrupt_gzip_keeps_every_line_before_the_damage(tmp_path):
    packed = gzip.compress(
        b"".join(observation("r1", f"o{i}", "a", "paid") + b"\n" for i in range(200))
    )
    summary = ingest(tmp_path, packed[: len(packed) // 2], name="cut.jsonl.gz")
    assert summary.accepted > 0 and summary.rejected == 1
    assert_accounted(summary)
    assert TraceLine.objects.get(accepted=False).reason.startswith("unreadable compressed data")


def test_a_gzip_that_inflates_past_its_limit_keeps_the_lines_before_it(tmp_path, settings):
    settings.INGEST_MAX_DECOMPRESSED_BYTES = 50_000
    content = b"".join(observation(f"r{i}", "o1", "a", "paid") + b"\n" for i in range(2000))
    assert len(content) > 100_000
    summary = ingest(tmp_path, gzip.compress(content), name="bomb.jsonl.gz")
    assert_accounted(summary)
    assert 0 < summary.accepted < 2000 and summary.rejected == 1
    reason = TraceLine.objects.get(accepted=False).reason
    assert reason == "the decompressed data passes 50,000 bytes; the rest was not read"


def test_a_nul_hidden_in_a_span_result_is_one_rejected_line_not_a_failed_batch(tmp_path):
    from tests.ingest.test_otel import otlp, tool_span

    span = tool_span({"gen_ai.tool.call.result": '{"status": "pa-NUL-id"}'})
    # \u005c decodes to a backslash: the result's JSON text then holds \u0000, a NUL once
    # the adapter decodes it, which no check of the line's own bytes can see.
    line = json.dumps(otlp(span)).replace("-NUL-", "\\u005cu0000").encode()
    assert b"\\u0000" not in line
    summary = ingest(tmp_path, line + b"\n" + observation("r1", "o1", "a", "paid") + b"\n")
    assert (summary.accepted, summary.rejected) == (1, 1)
    assert IngestBatch.objects.get().state == "done"
    assert TraceLine.objects.get(accepted=False).reason == (
        "otlp: contains a NUL character (\\u0000), which cannot be stored"
    )


def test_an_empty_file_is_an_empty_batch(tmp_path):
    summary = ingest(tmp_path, b"")
    assert summary.as_dict() == IngestSummary().as_dict()
    assert IngestBatch.objects.get().state == "done"


def test_an_oversized_line_is_rejected_without_reading_it_into_memory(tmp_path, monkeypatch):
    monkeypatch.setattr("reviewapp.ingest.files.MAX_LINE_BYTES", 1000)
    huge = line(runId="r1", type="agent_action", name="x" * 5000)
    summary = ingest(tmp_path, observation("r1", "o1", "a", "paid") + b"\n" + huge + b"\n")
    assert (summary.accepted, summary.rejected) == (1, 1)
    assert "over the 1,000-byte limit" in TraceLine.objects.get(accepted=False).reason


def test_a_file_sent_again_reports_its_rejected_lines_again_with_their_reasons(tmp_path):
    """An API client that sends a file again must learn that it still has bad lines: they
    are rejected again (stored with this batch), only the accepted line is a duplicate."""
    content = b"oops\n" + observation("r1", "o1", "a", "paid") + b"\n"
    first = ingest(tmp_path, content)
    again = ingest(tmp_path, content, name="again.jsonl")
    assert (first.rejected, again.duplicates, again.rejected) == (1, 1, 1)
    assert again.lines == again.accepted + again.duplicates + again.rejected
    reasons = list(TraceLine.objects.filter(accepted=False).values_list("batch_id", "reason"))
    assert len(reasons) == 2 and len({batch for batch, _ in reasons}) == 2
    assert all(reason.startswith("not valid JSON") for _, reason in reasons)
    batch = IngestBatch.objects.get(file_name__endswith="again.jsonl")
    assert ingest_batch(batch).rejected == 1  # the same batch again: still one, not two


def test_a_batch_interrupted_mid_way_finishes_on_retry_without_doubles(tmp_path, monkeypatch):
    monkeypatch.setattr(ingestion, "CHUNK_LINES", 3)
    content = b"".join(
        observation(f"r{i % 4}", f"o{i}", "abc"[i % 3], "paid" if i % 3 else "x") + b"\n"
        for i in range(20)
    )
    path = tmp_path / "t.jsonl"
    path.write_bytes(content)
    # A file named on the command line stays where it is, so it can be read again below.
    batch = create_batch(channel=IngestBatch.Channel.CLI, path=path, file_name="t.jsonl")
    restore_store = chunk_store_dies_at(monkeypatch, 3)
    with pytest.raises(RuntimeError):
        ingest_batch(batch)
    failed = IngestBatch.objects.get()
    assert failed.state == "failed"
    assert "internal error (RuntimeError)" in failed.error and "worker lost" not in failed.error
    # Two whole chunks (lines 1-2 and 3-5: chunks follow line numbers), nothing partial.
    assert TraceLine.objects.count() == 5
    restore_store()
    summary = ingest_batch(batch)
    assert summary.as_dict() == {
        "lines": 20,
        "accepted": 20,
        "duplicates": 0,
        "identical": 0,
        "rejected": 0,
        "runs": 4,
        "tickets": summary.tickets,
        "ignored": 0,
    }
    assert TraceLine.objects.count() == 20
    assert Ticket.objects.count() == summary.tickets > 0
    for run in Run.objects.select_related("current_judgement"):
        last_record = run.records.order_by("-id").values_list("id", flat=True)[0]
        assert run.current_judgement.through_record_id == last_record
    judgements = Judgement.objects.count()
    assert ingest_batch(batch).as_dict() == summary.as_dict()
    assert Judgement.objects.count() == judgements


def test_the_command_says_so_when_a_file_is_empty_and_fails_on_unreadable_paths(tmp_path, capsys):
    from django.core.management import call_command

    (tmp_path / "empty.jsonl").write_bytes(b"\n\n")
    call_command("ingest", str(tmp_path / "empty.jsonl"))
    assert "no lines (the file is empty or blank)" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exited:
        call_command("ingest", str(tmp_path / "missing.jsonl"))
    assert exited.value.code == 2
    assert "ingest: cannot read" in capsys.readouterr().err


def test_the_command_reads_folders_and_prints_one_json_summary(tmp_path, capsys):
    from django.core.management import call_command

    folder = tmp_path / "traces"
    (folder / "nested").mkdir(parents=True)
    (folder / "a.jsonl").write_bytes(observation("r1", "o1", "a", "paid") + b"\n")
    (folder / "nested" / "b.jsonl.gz").write_bytes(
        gzip.compress(observation("r1", "o2", "b", "refunded") + b"\nbad\n")
    )
    (folder / ".hidden.jsonl").write_bytes(b"ignored\n")
    call_command("ingest", str(folder), json=True)
    summary = json.loads(capsys.readouterr().out)
    assert summary == {
        "lines": 3,
        "accepted": 2,
        "duplicates": 0,
        "identical": 0,
        "rejected": 1,
        "runs": 1,
        "tickets": 1,
        "ignored": 0,
    }


@pytest.mark.parametrize(
    ("name", "expected_format", "agent"),
    [
        ("otlp-js-sdk.json", "otlp", "support_agent"),
        ("protobuf-messagetojson-not-spec.json", "otlp", "support_agent"),
        ("python-console-exporter-not-otlp.json", "otel-span", ""),  # its agent span is not in it
    ],
)
def test_opentelemetry_exports_are_ingested_as_tool_calls_and_observations(
    name, expected_format, agent
):
    path = OTEL_DIR / name
    summary = ingest_file(path, channel=IngestBatch.Channel.CLI)
    # A pretty-printed document is one unit, kept whole as it arrived.
    assert (summary.lines, summary.accepted, summary.rejected) == (1, 1, 0)
    line = TraceLine.objects.get()
    assert line.format == expected_format and bytes(line.raw) == path.read_bytes().strip()
    types = set(TraceRecord.objects.values_list("type", flat=True))
    # run_started: the agent the spans name (gen_ai.agent.name of an invoke_agent span).
    assert types == {"tool_call", "tool_observation"} | ({"run_started"} if agent else set())
    assert Run.objects.count() == summary.runs >= 1
    assert set(Run.objects.values_list("agent", flat=True)) == {agent}
    assert ingest_file(path, channel=IngestBatch.Channel.CLI).duplicates == 1


def test_where_otel_results_carry_their_source_is_a_setting(settings, tmp_path):
    span_result = json.dumps({"system": "erp", "rev": 7, "data": {"qty": 3}})
    document = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": "852ad2d6eff7411c199758e6190d4dde",
                                "spanId": "b1e6f162f86684a1",
                                "name": "execute_tool get_stock",
                                "startTimeUnixNano": "1796002151368000000",
                                "endTimeUnixNano": "1796002151368109062",
                                "attributes": [
                                    {
                                        "key": "gen_ai.operation.name",
                                        "value": {"stringValue": "execute_tool"},
                                    },
                                    {
                                        "key": "gen_ai.tool.name",
                                        "value": {"stringValue": "get_stock"},
                                    },
                                    {
                                        "key": "gen_ai.tool.call.id",
                                        "value": {"stringValue": "call_1"},
                                    },
                                    {
                                        "key": "gen_ai.tool.call.result",
                                        "value": {"stringValue": span_result},
                                    },
                                ],
                            }
                        ]
                    }
                ]
            }
        ]
    }
    settings.OTEL_EXTRACTION_KEYS = {
        **settings.OTEL_EXTRACTION_KEYS,
        "source": ["system"],
        "revision": ["rev"],
    }
    ingest(tmp_path, json.dumps(document).encode() + b"\n")
    observation = TraceRecord.objects.get(type="tool_observation").data
    assert (observation["source"], observation["sourceRevision"], observation["value"]) == (
        "erp",
        7,
        {"qty": 3},
    )


def test_the_command_reports_its_seconds_by_stage_when_asked(tmp_path, capsys):
    from django.core.management import call_command

    path = tmp_path / "a.jsonl"
    path.write_bytes(
        observation("r1", "o1", "a", "paid") + b"\n" + observation("r1", "o2", "b", "refunded")
    )
    call_command("ingest", str(path), json=True, stages=True)
    shown = json.loads(capsys.readouterr().out)
    stages = shown.pop("stages")
    assert shown["lines"] == 2 and shown["tickets"] == 1
    assert set(stages) == {"decode", "judge", "write", "commit"}
    # Every stage ran: lines decoded, a run judged, rows written, transactions committed.
    assert all(seconds > 0 for seconds in stages.values()), stages


def test_a_stage_inside_another_counts_once():
    from reviewapp.ingest.stages import StageClock, counting, stage

    clock = StageClock()
    with counting(clock), stage("write"), stage("judge"):
        sum(range(200_000))
    assert clock.seconds["judge"] > 0
    assert clock.seconds["write"] < clock.seconds["judge"]


def test_a_native_record_is_its_line_stored_once_as_received(tmp_path):
    # 12.50 as a JSON number: decoded, it is the float 12.5. The record keeps no copy of
    # the JSON: the line's bytes are its data, the number as written.
    ingest(
        tmp_path,
        UTF8_BOM
        + observation("r1", "o1", "a", "paid", amount=1).replace(b"1}", b"12.50}")
        + b"\r\n",
    )
    record = TraceRecord.objects.select_related("line").get()
    assert record.data is None
    assert b'"amount":12.50' in bytes(record.line.raw)
    assert record.document["amount"] == 12.5 and record.document["observationId"] == "o1"
    # What reads records from the database reads them so too (judging, replay, shadow).
    [run] = stored_runs([record.run_id])
    assert run.records[0][1].observation_id == "o1"


def test_a_converted_record_keeps_its_own_data(tmp_path):
    ingest_file(OTEL_DIR / "otlp-js-sdk.json", channel=IngestBatch.Channel.CLI)
    converted = TraceRecord.objects.select_related("line").filter(type="tool_observation")
    assert converted and all(record.data is not None for record in converted)
    assert all(record.document == record.data for record in converted)


def test_reserved_ids_are_new_distinct_and_ascending_and_never_given_again():
    from reviewapp.infra.bulk import reserve_ids

    first = reserve_ids(IngestBatch, 3000)
    second = reserve_ids(IngestBatch, 5)
    assert len(set(first)) == 3000 and first == sorted(first)
    assert min(second) > max(first)
    made = IngestBatch.objects.create(channel="cli", file_name="f", content_sha256="x")
    assert made.pk > max(second)


def test_the_writer_writes_chunks_in_order_in_its_own_thread_on_the_ingests_connection():
    import threading

    from django.db import connection

    from reviewapp.ingest.writer import ChunkWriter

    seen = []

    def work(number: int) -> int:
        # The caller's transaction: the batch it created is visible, uncommitted.
        batch_seen = IngestBatch.objects.filter(file_name="writer").exists()
        seen.append((number, threading.get_ident(), id(connection.connection), batch_seen))
        return number * 10

    IngestBatch.objects.create(channel="cli", file_name="writer", content_sha256="x")
    connection.ensure_connection()
    with ChunkWriter() as writer:
        for number in range(5):
            writer.submit(work, number)
        assert writer.results() == [0, 10, 20, 30, 40]
    assert [number for number, *_ in seen] == [0, 1, 2, 3, 4]
    assert {ident for _, ident, *_ in seen} != {threading.get_ident()}  # not this thread
    assert {conn for _, _, conn, _ in seen} == {id(connection.connection)}
    assert all(batch_seen for *_, batch_seen in seen)


def test_an_error_of_the_writer_is_raised_in_the_reading_thread():
    from reviewapp.ingest.writer import ChunkWriter

    def fails() -> None:
        raise ValueError("chunk failed")

    with pytest.raises(ValueError, match="chunk failed"), ChunkWriter() as writer:
        writer.submit(fails)
        writer.submit(lambda: None)


def test_a_running_batch_counts_what_each_chunk_stored_as_it_goes(tmp_path, monkeypatch):
    """Its page reads the batch's counts instead of counting its lines at every poll: after
    each chunk they are what is stored so far, and at the end what it stored."""
    monkeypatch.setattr(ingestion, "CHUNK_LINES", 4)
    lines = []
    for number in range(6):
        lines += [
            observation(f"r{number}", f"a{number}", "ledger", "refunded"),
            observation(f"r{number}", f"b{number}", "search", "paid"),
            b"not json",
        ]
    real_store, seen = ingestion._store_chunk, []

    def store_and_look(batch_, chunk, in_flight):
        # Before each chunk: the one before it is stored and reported.
        counted = IngestBatch.objects.values_list("accepted", "rejected", "tickets").get()
        stored = (
            batch_.trace_lines.filter(accepted=True).count(),
            batch_.trace_lines.filter(accepted=False).count(),
            batch_.opened_tickets.count(),
        )
        seen.append((counted, stored))
        return real_store(batch_, chunk, in_flight)

    monkeypatch.setattr(ingestion, "_store_chunk", store_and_look)
    summary = ingest(tmp_path, b"\n".join(lines) + b"\n")

    assert len(seen) > 3 and all(counted == stored for counted, stored in seen), seen
    assert seen[-1][0][0] > 0 and seen[-1][0][2] > 0, "the counts moved while it ran"
    batch = IngestBatch.objects.get()
    assert (
        (batch.accepted, batch.rejected, batch.tickets)
        == (12, 6, 6)
        == (
            summary.accepted,
            summary.rejected,
            summary.tickets,
        )
    )
