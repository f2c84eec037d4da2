"""The agent of a run read from exports whose agent is named on a span other than the
tool spans' (tests/fixtures/otel/generated): through the ingest pipeline, as a run's row
gets it, whichever line names it and in whatever order the lines come."""

import json

import pytest

from reviewapp.ingest.pipeline import ingest_file
from reviewapp.models import IngestBatch, Run, TraceRecord
from tests.paths import OTEL

pytestmark = pytest.mark.django_db

GENERATED = OTEL / "generated"
CREWAI_LINES = GENERATED / "crewai" / "crewai-spans.jsonl"
LANGSMITH_LINES = GENERATED / "langsmith" / "langsmith-otel-spans.jsonl"


def lines(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write(tmp_path, name, spans):
    path = tmp_path / name
    path.write_text("".join(json.dumps(span) + "\n" for span in spans))
    return path


def ingested(path):
    summary = ingest_file(path, channel=IngestBatch.Channel.CLI)
    assert summary.rejected == 0
    return Run.objects.get(), TraceRecord.objects.filter(type="tool_call").count()


def test_crewai_lines_name_the_agent_by_its_role():
    run, calls = ingested(CREWAI_LINES)
    assert (run.agent, calls) == ("support_agent", 2)


def test_crewai_agent_span_last_names_the_run_when_tool_spans_do_not(tmp_path):
    """Without the role on its tool spans, the run's first run_started names only the
    conversation; the agent span, last in the same file, still names the agent."""
    spans = lines(CREWAI_LINES)
    for span in spans:
        if span["attributes"].get("gen_ai.operation.name") == "execute_tool":
            del span["attributes"]["crewai.agent.role"]
    run, calls = ingested(write(tmp_path, "crewai-no-role.jsonl", spans))
    assert (run.agent, calls) == ("support_agent", 2)


@pytest.mark.parametrize("order", ["as-exported", "root-last"])
def test_langsmith_lines_name_the_agent_by_the_root_chain(tmp_path, order):
    spans = lines(LANGSMITH_LINES)
    if order == "root-last":
        spans = spans[1:] + spans[:1]
    run, calls = ingested(write(tmp_path, f"langsmith-{order}.jsonl", spans))
    assert (run.agent, calls) == ("support_agent", 2)
    data = TraceRecord.objects.filter(type="tool_call").values_list("data", flat=True)
    assert sorted((d["tool"], d["arguments"]) for d in data) == [
        ("get_order", {"order_id": "A-1"}),
        ("get_payment", {"order_id": "A-1"}),
    ]
