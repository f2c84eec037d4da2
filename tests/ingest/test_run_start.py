"""A run's month is when it ran (issue 26): a run starts at its run_started's startedAt,
else at its earliest span or record time, else when it arrived; every format, every
piece, through files and the OTLP receiver, down to `manage.py tallies`."""

from __future__ import annotations

import importlib
import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from reviewapp.ingest.pipeline import ingest_file
from reviewapp.ingest.tokens import create_token
from reviewapp.models import IngestBatch, Run
from reviewapp.reports import entries
from reviewapp.reports.calendar import month_parse
from reviewapp.reports.entries import tallies_refresh
from reviewapp.reports.months import month_close, month_views
from tests.ingest.test_otlp import agent_span, payload, post, request_of, tool_span
from tests.paths import ROOT
from tests.seeding import conflict_run, ingest_lines, line

pytestmark = pytest.mark.django_db

TRACE_HEX = "4bf92f3577b34da6a3ce929d0e0e4736"
# The agent span starts first: the run's start. Its tools run a few seconds later.
AGENT_START = datetime(2025, 6, 14, 9, 30, 0, 250000, tzinfo=UTC)


def nanos(moment: datetime) -> str:
    return str(int(moment.timestamp()) * 10**9 + moment.microsecond * 1000)


def json_attributes(**values: str) -> list[dict]:
    return [
        {"key": key.replace("__", "."), "value": {"stringValue": value}}
        for key, value in values.items()
    ]


def json_span(span_id: int, start: datetime, seconds: float, **attributes: str) -> dict:
    return {
        "traceId": TRACE_HEX,
        "spanId": f"{span_id:016x}",
        **({"parentSpanId": f"{1:016x}"} if span_id != 1 else {}),
        "name": attributes.pop("name"),
        "kind": 1,
        "startTimeUnixNano": nanos(start),
        "endTimeUnixNano": nanos(start + timedelta(seconds=seconds)),
        "attributes": json_attributes(**attributes),
        "status": {"code": 0},
    }


def json_agent_span(start: datetime = AGENT_START) -> dict:
    return json_span(
        1,
        start,
        20,
        name="invoke_agent refund-agent",
        gen_ai__operation__name="invoke_agent",
        gen_ai__agent__name="refund-agent",
    )


def json_tool_span(span_id: int, tool: str, start: datetime, result: str, **extra: str) -> dict:
    return json_span(
        span_id,
        start,
        0.5,
        **extra,
        name=f"execute_tool {tool}",
        gen_ai__operation__name="execute_tool",
        gen_ai__tool__name=tool,
        gen_ai__tool__call__id=f"call_{tool}",
        gen_ai__tool__call__arguments='{"orderId": "order-204"}',
        gen_ai__tool__call__result=result,
    )


def json_conflict_tools(start: datetime, **extra: str) -> list[dict]:
    """Two tools whose sources disagree on the order's status: one conflict ticket."""
    second = start + timedelta(seconds=1)
    return [
        json_tool_span(2, "refund_service", start, payload("refund-service", "refunded"), **extra),
        json_tool_span(3, "order_ledger", second, payload("order-ledger", "chargeback"), **extra),
    ]


def otlp_json(spans: list[dict]) -> str:
    resource = {"attributes": json_attributes(service__name="support-bot")}
    scope = {"scope": {"name": "test"}, "spans": spans}
    return json.dumps({"resourceSpans": [{"resource": resource, "scopeSpans": [scope]}]})


def ingest_text(directory: Path, text: str, name: str):
    path = directory / name
    path.write_text(text + "\n", encoding="utf-8")
    return ingest_file(path, channel=IngestBatch.Channel.CLI)


def tallies_json(month: str) -> dict:
    out = io.StringIO()
    call_command("tallies", "--month", month, "--json", stdout=out)
    (found,) = json.loads(out.getvalue())["months"]
    return found


def this_month() -> str:
    return f"{timezone.now():%Y-%m}"


def test_an_otlp_json_file_of_june_2025_counts_in_june_2025(tmp_path):
    spans = [*json_conflict_tools(AGENT_START + timedelta(seconds=3)), json_agent_span()]
    ingest_text(tmp_path, otlp_json(spans), "june.json")

    run = Run.objects.get()
    assert run.started_at == AGENT_START  # the earliest span, though not a tool span
    assert run.started_from == Run.Clock.RECORDS
    assert run.first_ingested_at > AGENT_START + timedelta(days=300)  # arrival stays its own
    assert IngestBatch.objects.get().created_at > AGENT_START + timedelta(days=300)

    june = tallies_json("2025-06")
    assert (june["runs"], june["counts"]["open"], june["counts"]["unexplained"]) == (1, 1, 1)
    assert tallies_json(this_month())["runs"] is None


def test_an_otlp_protobuf_export_to_the_receiver_counts_in_its_spans_month(client, reviewer):
    token = create_token(user=reviewer, name="exporter")[1]
    june = int(nanos(AGENT_START))
    spans = [tool_span(2, "refund_service", payload("refund-service", "refunded"))]
    spans += [tool_span(3, "order_ledger", payload("order-ledger", "chargeback")), agent_span()]
    for span in spans:  # the same spans, a year and a half earlier
        shift = june - 1796002151360000000
        span.start_time_unix_nano += shift
        span.end_time_unix_nano += shift
    assert post(client, request_of(spans), token).status_code == 200

    assert Run.objects.get().started_at == AGENT_START
    found = tallies_json("2025-06")
    assert (found["runs"], found["counts"]["open"]) == (1, 1)
    assert tallies_json(this_month())["runs"] is None


def test_a_later_piece_with_an_earlier_span_moves_the_start_and_the_month(tmp_path):
    """An exporter sends spans as they end: the agent span, the first to start, ends last
    and comes in the last piece. The run moves to the month it started in, the tallies
    with it; a month closed meanwhile keeps its frozen figures and shows the drift."""
    july = datetime(2025, 7, 1, 0, 0, 5, tzinfo=UTC)
    ingest_text(tmp_path, otlp_json(json_conflict_tools(july)), "tools.json")
    assert Run.objects.get().started_at == july
    assert tallies_json("2025-07")["runs"] == 1
    month_close(month_parse("2025-07"))

    agent_start = datetime(2025, 6, 30, 23, 59, 58, tzinfo=UTC)
    ingest_text(tmp_path, otlp_json([json_agent_span(agent_start)]), "agent.json")
    run = Run.objects.get()
    assert run.started_at == agent_start

    assert tallies_json("2025-06")["runs"] == 1
    july_view = tallies_json("2025-07")
    assert july_view["runs"] == 1  # frozen as reported ...
    assert july_view["drift"]["runs"] == -1  # ... and the run gone since
    (live_july,) = month_views(month_parse("2025-07"), month_parse("2025-07"))
    assert live_july.live.runs is None

    # Sent again, nothing moves back: the earliest known start stays.
    ingest_text(tmp_path, otlp_json(json_conflict_tools(july)), "tools-again.json")
    assert Run.objects.get().started_at == agent_start


def test_a_piece_with_no_new_record_still_moves_the_tallies(tmp_path, monkeypatch):
    """The agent span comes last, and its run already named its agent (on its tool spans):
    that piece stores nothing new and judges nothing, yet the month of the run moves at
    the next refresh, not only at the next full one."""
    july = datetime(2025, 7, 1, 0, 0, 5, tzinfo=UTC)
    tools = json_conflict_tools(july, gen_ai__agent__name="refund-agent")
    ingest_text(tmp_path, otlp_json(tools), "tools.json")
    # Every judgement surely seen at once: a refresh reads only what changed since.
    monkeypatch.setattr(entries, "STRAGGLERS", timedelta(0))
    tallies_refresh()
    assert tallies_refresh() == 0
    summary = ingest_text(
        tmp_path, otlp_json([json_agent_span(datetime(2025, 6, 30, 12, tzinfo=UTC))]), "late.json"
    )
    assert (summary.accepted, summary.duplicates) == (0, 1)  # the run has its run_started
    assert tallies_json("2025-06")["runs"] == 1
    assert tallies_json("2025-07")["runs"] is None
    assert not Run.objects.get().clock_moved  # read again, so no longer to read


def test_a_native_run_without_a_clock_starts_at_its_earliest_record_time(tmp_path):
    # conflict_run: a run_started without startedAt; calls from 2026-08-04T10:00:00Z.
    ingest_lines(tmp_path, conflict_run("r1"))
    run = Run.objects.get()
    assert run.started_at == datetime(2026, 8, 4, 10, 0, tzinfo=UTC)
    assert run.started_from == Run.Clock.RECORDS


def test_a_native_run_started_clock_is_the_start_whatever_the_records_say(tmp_path):
    """Clocks disagree: the run's own (run_started) wins, then and in any later piece."""
    lines = conflict_run("r1")
    first = json.loads(lines[0])
    lines[0] = line(**first, startedAt="2025-06-20T08:00:00+02:00")
    ingest_lines(tmp_path, lines, name="first.jsonl")
    run = Run.objects.get()
    assert run.started_at == datetime(2025, 6, 20, 6, tzinfo=UTC)
    assert run.started_from == Run.Clock.RUN_STARTED
    earlier = line(
        runId="r1",
        type="tool_call",
        toolCallId="c-early",
        tool="get_order",
        arguments={"orderId": "order-204"},
        startedAt="2025-05-01T00:00:00Z",
    )
    ingest_lines(tmp_path, [earlier], name="later.jsonl")
    assert Run.objects.get().started_at == datetime(2025, 6, 20, 6, tzinfo=UTC)


def test_a_run_started_arriving_later_sets_the_clock_over_record_times(tmp_path):
    lines = conflict_run("r1")
    ingest_lines(tmp_path, lines[1:], name="records.jsonl")
    assert Run.objects.get().started_at == datetime(2026, 8, 4, 10, 0, tzinfo=UTC)
    started = line(
        runId="r1", type="run_started", agent="refund-agent", startedAt="2026-08-05T00:00:00Z"
    )
    ingest_lines(tmp_path, [started], name="started.jsonl")
    run = Run.objects.get()
    assert (run.started_at, run.started_from, run.agent) == (
        datetime(2026, 8, 5, tzinfo=UTC),
        Run.Clock.RUN_STARTED,
        "refund-agent",
    )


def test_a_run_with_no_time_at_all_starts_when_it_arrived_until_a_time_comes(tmp_path):
    untimed = [
        line(runId="r1", type="tool_observation", observationId=f"o{n}", source=f"s{n}", status=s)
        for n, s in enumerate(("paid", "refunded"))
    ]
    before = timezone.now()
    ingest_lines(tmp_path, untimed, name="untimed.jsonl")
    run = Run.objects.get()
    assert run.started_at >= before and run.started_from == Run.Clock.ARRIVAL
    timed = line(
        runId="r1",
        type="tool_call",
        toolCallId="c1",
        tool="get_order",
        completedAt="2025-06-02T10:00:00Z",
    )
    ingest_lines(tmp_path, [timed], name="timed.jsonl")
    run = Run.objects.get()
    assert (run.started_at, run.started_from) == (
        datetime(2025, 6, 2, 10, tzinfo=UTC),
        Run.Clock.RECORDS,
    )


def test_a_protobuf_span_without_a_start_leaves_the_run_at_its_other_spans(client, reviewer):
    token = create_token(user=reviewer, name="exporter")[1]
    spans = [tool_span(2, "refund_service", payload("refund-service", "refunded"))]
    unstarted = Span()
    unstarted.CopyFrom(agent_span())
    unstarted.start_time_unix_nano = 0  # unset in protobuf: no time, not 1970
    assert post(client, request_of([*spans, unstarted]), token).status_code == 200
    first_tool = datetime.fromtimestamp(1796002151, UTC) + timedelta(milliseconds=368)
    assert Run.objects.get().started_at == first_tool


def test_the_upgrade_marks_the_runs_whose_run_started_gave_their_start(tmp_path):
    """Runs stored before started_from existed: those whose run_started named startedAt
    keep it for good, the others take their spans' time from a later piece."""
    (migration,) = (ROOT / "reviewapp" / "migrations").glob("*_run_start_from_its_spans.py")
    module = importlib.import_module(f"reviewapp.migrations.{migration.stem}")
    clocked = conflict_run("clocked")
    clocked[0] = line(**json.loads(clocked[0]), startedAt="2025-06-20T08:00:00Z")
    ingest_lines(tmp_path, [*clocked, *conflict_run("unclocked")], name="native.jsonl")
    spans = [*json_conflict_tools(AGENT_START + timedelta(seconds=3)), json_agent_span()]
    ingest_text(tmp_path, otlp_json(spans), "june.json")
    Run.objects.update(started_from=Run.Clock.ARRIVAL)  # as the column's default left them

    with connection.cursor() as cursor:
        cursor.execute(module.MARK_RUN_STARTED)
    marked = dict(Run.objects.values_list("run_id", "started_from"))
    assert marked == {
        "clocked": Run.Clock.RUN_STARTED,
        "unclocked": Run.Clock.ARRIVAL,
        TRACE_HEX: Run.Clock.ARRIVAL,
    }
