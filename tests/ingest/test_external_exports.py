"""Golden conversions of real exports from public repositories, read from
../shared/fixtures/external at test time (its README gives each file's origin and the tool
calls it holds): every tool call is read, with its call id, arguments, value, errors and
the agent of its run. Then each file goes through the pipeline, and again as a duplicate."""

import json
from datetime import UTC, datetime, timedelta

import pytest

from reviewapp.engine import decode_line, parse_record
from reviewapp.ingest.otel import convert
from reviewapp.ingest.otel.detect import read_spans
from reviewapp.ingest.pipeline import ingest_file
from reviewapp.models import IngestBatch, Run, TraceRecord
from tests.paths import EXTERNAL, OTEL

SYNTHETIC = "synthetic"


def load(name):
    return json.loads((EXTERNAL / name).read_text())


def calls_of(name):
    """(run_started records, [(tool_call, tool_observation)]) of a file's conversion."""
    conversion = convert(load(name))
    for record in conversion.records:  # every record passes the engine's checker
        parse_record(decode_line(json.dumps(record, allow_nan=False)))
    started = [r for r in conversion.records if r["type"] == "run_started"]
    tools = [r for r in conversion.records if r["type"] != "run_started"]
    pairs = list(zip(tools[::2], tools[1::2], strict=True))
    for call, observation in pairs:
        assert (call["type"], observation["type"]) == ("tool_call", "tool_observation")
        assert call["toolCallId"] == observation["toolCallId"]
    return conversion, started, pairs


def call_id(call):
    return SYNTHETIC if call.get("syntheticToolCallId") else call["toolCallId"]


# name: (format, spans ignored, agent, conversation, [(tool, call id, arguments)])
EXPECTED = {
    "agentprism-langfuse-vercel-ai-mcp.json": (
        "langfuse",
        6,
        "QA-Chatbot",
        "chat_b537db89-0454-4ec2-9915-fc30b7e91beb",
        [
            (
                "searchLangfuseDocs",
                "call_Wgy5Y139OQnSh7grDUUE0iil",
                {
                    "query": "What is a dataset in Langfuse? definition, use cases, evaluation, "
                    "prompt testing, datasets feature docs"
                },
            )
        ],
    ),
    "langfuse-vercel-ai-sdk.trace.json": (
        "langfuse",
        2,
        "ai.generateText",
        None,
        [("getWeather", "call_DgKARp7a7IhJPDczfifMp6Ra", {"location": "San Francisco"})],
    ),
    "langfuse-dotnet-meai-gemini.trace.json": (
        "langfuse",
        6,
        "Insights Agent C#",
        "9714061f-20c0-4d98-9220-1dc7df15c3c2",
        [("get_custom_report", SYNTHETIC, None), ("final_result", SYNTHETIC, None)],
    ),
    "langfuse-koog.trace.json": (
        "langfuse",
        9,
        "ai.koog",
        "6f8d2449-33ed-4c7c-82e7-5410e34ee4e6",
        [
            ("ByeTool", "call_dOeEHJDI0liHrCdFWTpkTsuO", {"name": "Bob"}),
            ("HelloTool", "call_n2HaWg9KFP0BZDqXv6G4b3nJ", {"name": "Bob"}),
        ],
    ),
    "langfuse-langgraph-js.trace.json": (
        "langfuse",
        19,
        "LangGraph",
        None,
        [("get_weather", "call_VEZJgIQLgzcb80IIyQJm7JCi", {"city": "San Francisco"})],
    ),
    "langfuse-agno-openinference.json": (
        "langfuse",
        5,
        "Agent.run",
        "35cc6c90-b657-4819-b66c-c931c03ad569",
        [("duckduckgo_search", SYNTHETIC, {"query": "currently trending on Twitter"})],
    ),
    "langfuse-google-adk-openinference.json": (
        "langfuse",
        4,
        "hello_agent",
        "demo-session",
        [("say_hello", "adk-8bd8dc65-717d-4102-858b-3a1dd6b75a00", {})],
    ),
    "langfuse-langgraph-python.json": (
        "langfuse",
        8,
        "LangGraph",
        None,
        [("Web-Search", "call_1oGK863sxQHlPreFhDdEs3yl", {"query": "example"})],
    ),
    "langfuse-beeai-openinference.json": (
        "langfuse",
        27,
        "beeai-framework-main",
        None,
        [
            ("Wikipedia", SYNTHETIC, {"query": "Tourism in Barcelona", "full_text": False}),
            ("OpenMeteoTool", SYNTHETIC, {"location_name": "Barcelona", "country": "Spain"}),
        ],
    ),
    "agentfactory-url-to-podcast.anyagent.json": (
        "span-list",
        7,
        "any_agent",
        None,
        [
            ("read_file", SYNTHETIC, {"file_name": "tools/README.md"}),
            (
                "search_mcp_servers",
                SYNTHETIC,
                {
                    "keyphrase": "ElevenLabs",
                    "license": "",
                    "categories": "",
                    "tags": "",
                    "is_official": "false",
                },
            ),
            ("read_file", SYNTHETIC, {"file_name": "tools/combine_mp3_files_for_podcast.py"}),
            ("read_file", SYNTHETIC, {"file_name": "tools/extract_text_from_url.py"}),
            ("read_file", SYNTHETIC, {"file_name": "tools/generate_podcast_script_with_llm.py"}),
        ],
    ),
    "anyagent-openai-agents-openinference.readablespans.json": (
        "span-list",
        6,
        "any_agent",
        None,
        [
            ("search_web", SYNTHETIC, {"query": "brewery near Aspinwall PA"}),
            ("write_file", SYNTHETIC, None),
        ],
    ),
}


def test_every_real_export_is_covered_and_every_tool_call_of_the_readme_is_read():
    files = sorted(path.name for path in EXTERNAL.glob("*.json"))
    assert files == sorted(EXPECTED)
    readme = (EXTERNAL / "README.md").read_text()
    total = sum(len(calls_of(name)[2]) for name in files)
    assert f"Total: {total} tool calls over {len(files)} files." in readme


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_golden_tool_calls_agent_and_conversation(name):
    kind, ignored, agent, conversation, tools = EXPECTED[name]
    conversion, started, pairs = calls_of(name)
    assert (conversion.format, conversion.ignored) == (kind, ignored)
    assert len(started) == 1 and started[0].get("agent") == agent
    assert started[0].get("conversationId") == conversation
    assert [(c["tool"], call_id(c)) for c, _ in pairs] == [(t, i) for t, i, _ in tools]
    for (call, _), (_, _, arguments) in zip(pairs, tools, strict=True):
        if arguments is not None:
            assert call["arguments"] == arguments
        assert call["ok"] is True and call["startedAt"] <= call.get("completedAt", "9")


def observations(name):
    return [observation for _, observation in calls_of(name)[2]]


def test_vercel_ai_sdk_results_and_the_mcp_result_unwrapped():
    (weather,) = observations("langfuse-vercel-ai-sdk.trace.json")
    assert weather["value"] == {"location": "San Francisco", "temperature": 64}
    assert weather["source"] == "getWeather" and weather["sourceInferred"] is True
    (docs,) = observations("agentprism-langfuse-vercel-ai-mcp.json")
    # {_meta, content: [{type: text, text: <JSON>}], isError: false}: the text's JSON.
    assert docs["resultEnvelope"] == "mcp"
    assert docs["value"]["content"][0]["url"] == (
        "https://langfuse.com/docs/evaluation/dataset-runs/datasets"
    )
    assert "errors" not in docs and "isError" not in json.dumps(docs["value"])[:200]


def test_dotnet_call_ids_that_are_tool_names_and_the_error_inside_a_result():
    report, final = observations("langfuse-dotnet-meai-gemini.trace.json")
    assert (report["toolCallIdRaw"], final["toolCallIdRaw"]) == (
        "get_custom_report",
        "final_result",
    )
    assert report["errors"] == [
        {
            "code": "TOOL_ERROR",
            "message": "ERROR: No data found for dimensions: Campaign and metrics "
            "Cost,Displays,Clicks,Ctr,Sales,Cvr.",
        }
    ]
    assert report["value"]["response_status"] == "Error"
    assert "value" not in final and "errors" not in final  # its output is null


def test_koog_langgraph_agno_and_adk_values():
    bye, hello = observations("langfuse-koog.trace.json")
    assert (bye["value"], hello["value"]) == (
        {"result": "Bye my dear Bob!"},
        {"result": "Hello my darling Bob!"},
    )
    (weather,) = observations("langfuse-langgraph-js.trace.json")
    assert weather["value"] == {"result": "It's always sunny in San Francisco!"}
    assert weather["resultEnvelope"] == "langchain"
    (search,) = observations("langfuse-langgraph-python.json")
    assert search["value"] == {
        "result": [{"url": "https://example.com", "title": "Example Result", "q": "example"}]
    }
    (duck,) = observations("langfuse-agno-openinference.json")
    assert duck["value"]["result"][0]["href"] == "https://twitter.com/explore/tabs/trending/"
    (hello_adk,) = observations("langfuse-google-adk-openinference.json")
    assert hello_adk["value"] == {"greeting": "Hello Langfuse 👋"}
    assert hello_adk["resultEnvelope"] == "adk"


def test_beeai_react_events_give_one_call_each():
    wikipedia, meteo = observations("langfuse-beeai-openinference.json")
    assert wikipedia["value"]["result"][0]["description"].startswith("Barcelona")
    assert (meteo["value"]["latitude"], meteo["value"]["longitude"]) == (41.4375, 2.1875)


def test_any_agent_arguments_and_outputs_are_read():
    first, search, *rest = observations("agentfactory-url-to-podcast.anyagent.json")
    assert first["value"]["result"].startswith("# Available Tools")
    assert search["resultEncoding"] == "python-repr"  # str(list), read as a literal
    assert search["value"]["result"][0]["id"] == "elevenlabs-mcp"
    assert all(o["value"]["result"] for o in rest)
    web, write = observations("anyagent-openai-agents-openinference.readablespans.json")
    assert web["value"]["result"].startswith("[The Best 10 Breweries near Aspinwall")
    assert "errors" not in web  # Markdown, not JSON cut short
    assert write["value"] == {"result": "Successfully wrote to /projects/hi.txt"}
    assert write["resultEnvelope"] == "mcp"


# name: for each call, the fields at the top of its value (its envelopes taken off) that a
# policy decides on, each with what the file holds; None: the file holds no value.
DECISIONS = {
    "agentprism-langfuse-vercel-ai-mcp.json": [{"content.0.title": "Datasets"}],
    "langfuse-vercel-ai-sdk.trace.json": [{"location": "San Francisco", "temperature": 64}],
    "langfuse-dotnet-meai-gemini.trace.json": [{"response_status": "Error"}, None],
    "langfuse-koog.trace.json": [
        {"result": "Bye my dear Bob!"},
        {"result": "Hello my darling Bob!"},
    ],
    "langfuse-langgraph-js.trace.json": [{"result": "It's always sunny in San Francisco!"}],
    "langfuse-agno-openinference.json": [
        {"result.0.title": "Twitter. It's what's happening / Twitter"}
    ],
    "langfuse-google-adk-openinference.json": [{"greeting": "Hello Langfuse 👋"}],
    "langfuse-langgraph-python.json": [{"result.0.url": "https://example.com"}],
    "langfuse-beeai-openinference.json": [
        {"result.0.description": "Barcelona"},
        {"latitude": 41.4375, "longitude": 2.1875, "timezone": "GMT"},
    ],
    "agentfactory-url-to-podcast.anyagent.json": [
        {"result": "# Available Tools"},
        {"result.0.id": "elevenlabs-mcp", "result.0.license": "MIT"},
        {"result": "import subprocess"},
        {"result": "import requests"},
        {"result": "from litellm import completion"},
    ],
    "anyagent-openai-agents-openinference.readablespans.json": [
        {"result": "[The Best 10 Breweries near Aspinwall"},
        {"result": "Successfully wrote to /projects/hi.txt"},
    ],
}


def field_of(value, path):
    for step in path.split("."):
        value = value[int(step)] if isinstance(value, list) else value[step]
    return value


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_calls_value_holds_its_decision_fields_at_the_top(name):
    """Read means comparable: what the tool returned, not the envelope it came in. A long
    text is compared by its opening."""
    values = [observation.get("value") for observation in observations(name)]
    assert len(values) == len(DECISIONS[name])
    for value, fields in zip(values, DECISIONS[name], strict=True):
        if fields is None:
            assert value is None
            continue
        for path, expected in fields.items():
            found = field_of(value, path)
            if isinstance(expected, str) and isinstance(found, str) and len(found) > len(expected):
                assert found.startswith(expected), (path, found[:80])
            else:
                assert found == expected, path


# Every fixture, real or made: how many tool calls it gives. No format detection or reader
# change may read fewer (the lists above and tests/ingest/test_otel.py say which).
CALL_COUNTS = {
    **{name: len(tools) for name, (_, _, _, _, tools) in EXPECTED.items()},
    "openinference-tools.json": 4,
    "otlp-js-sdk.json": 2,
    "protobuf-messagetojson-not-spec.json": 1,
    "python-console-exporter-not-otlp.json": 1,
}


def test_no_fixture_reads_fewer_calls():
    paths = sorted([*EXTERNAL.glob("*.json"), *OTEL.glob("*.json")])
    counts = {}
    for path in paths:
        records = convert(json.loads(path.read_text())).records
        counts[path.name] = sum(1 for record in records if record["type"] == "tool_call")
    assert counts == CALL_COUNTS


# The exports the real libraries made here (tests/fixtures/otel/generated): a unit a line
# in JSON Lines, else the whole file, as the file reader takes them. Each holds two calls.
GENERATED_CALL_COUNTS = dict.fromkeys(
    (
        "crewai/crewai-otlp.json",
        "crewai/crewai-spans.jsonl",
        "langchain/langchain.openinference.otlp.json",
        "langsmith/langsmith-otel-spans.jsonl",
        "langsmith/langsmith-runs.json",
        "logfire/logfire.pydantic-ai.otlp.json",
        "mlflow/mlflow-trace.json",
        "mlflow/mlflow-traces-artifact.json",
        "openai-agents/openai-agents.native.json",
        "openai-agents/openai-agents.openinference.otlp.json",
        "phoenix/phoenix-client-spans.json",
        "phoenix/phoenix-rest-spans.json",
        "strands/strands.latest.otlp.json",
        "strands/strands.legacy.otlp.json",
    ),
    2,
)


def test_no_generated_export_reads_fewer_calls():
    generated = OTEL / "generated"
    counts = {}
    for path in sorted([*generated.glob("*/*.json"), *generated.glob("*/*.jsonl")]):
        if path.name == "versions.json":
            continue
        text = path.read_text()
        if path.suffix == ".jsonl":
            units = [json.loads(line) for line in text.splitlines() if line.strip()]
        else:
            units = [json.loads(text)]
        records = [record for unit in units for record in convert(unit).records]
        counts[str(path.relative_to(generated))] = sum(
            1 for record in records if record["type"] == "tool_call"
        )
    assert counts == GENERATED_CALL_COUNTS


@pytest.mark.django_db
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_real_export_is_ingested_once(name):
    kind, ignored, agent, _, tools = EXPECTED[name]
    summary = ingest_file(EXTERNAL / name, channel=IngestBatch.Channel.CLI)
    assert (summary.lines, summary.accepted, summary.rejected, summary.ignored) == (
        1,
        1,
        0,
        ignored,
    )
    assert TraceRecord.objects.filter(type="tool_call").count() == len(tools)
    run = Run.objects.get()
    assert run.agent == agent
    # The run started when its first span did, tool span or not; it arrived long after.
    _, spans, _ = read_spans(load(name))
    first = min(span.start_nanos for span in spans if span.start_nanos is not None)
    assert run.started_from == Run.Clock.RECORDS
    assert run.started_at == datetime(1970, 1, 1, tzinfo=UTC) + timedelta(
        microseconds=first // 1000
    )
    assert run.started_at < run.first_ingested_at - timedelta(days=1)
    again = ingest_file(EXTERNAL / name, channel=IngestBatch.Channel.CLI)
    assert (again.duplicates, again.accepted) == (1, 0)
    assert TraceRecord.objects.filter(type="tool_observation").count() == len(tools)
