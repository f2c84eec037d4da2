"""Issue 27.5: a tool that returned `{}` or `null` returned a value; only a tool whose
result is absent has none. Read the same way whatever the format."""

import json

import pytest

from reviewapp.engine import ABSENT, parse_record
from reviewapp.ingest.otel import convert
from tests.ingest.test_formats import otlp, otlp_span


def observation_of(document):
    return next(r for r in convert(document).records if r["type"] == "tool_observation")


def tool(**attributes):
    return otlp(otlp_span(gen_ai__tool__name="get_stock", **attributes))


@pytest.mark.parametrize(
    ("result", "value"),
    [
        ("{}", {}),
        ("null", {"result": None}),
        # MCP content blocks and a CallToolResult around the same answers.
        (json.dumps([{"type": "text", "text": "{}"}]), {}),
        (json.dumps({"content": [{"type": "text", "text": "{}"}], "isError": False}), {}),
    ],
)
def test_an_empty_object_or_null_result_is_a_value(result, value):
    observation = observation_of(tool(gen_ai__tool__call__result=result))
    assert observation["value"] == value


def test_a_result_in_openinference_output_value_reads_the_same():
    observation = observation_of(tool(output__value="{}"))
    assert observation["value"] == {}


def test_an_absent_result_is_no_value():
    observation = observation_of(tool(gen_ai__tool__call__arguments='{"sku": "a"}'))
    assert "value" not in observation


def test_the_engine_reads_an_empty_value_as_an_answer_without_fields():
    """spec/traces.md: `value` is the response's fields; an empty one has none, so every
    decision field stays absent (never zero), while the observation says the tool answered."""
    for value in ({}, {"result": None}):
        record = parse_record(
            {
                "runId": "r",
                "type": "tool_observation",
                "observationId": "o",
                "source": "s",
                "value": value,
            }
        )
        assert record.value == value and record.value_for("status") is ABSENT
    bare = parse_record(
        {"runId": "r", "type": "tool_observation", "observationId": "o", "source": "s"}
    )
    assert bare.value is ABSENT
