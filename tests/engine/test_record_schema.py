"""The records' JSON Schema (records.record_json_schema), which the API's OpenAPI document
serves: made from the schemas lines are checked against, it accepts exactly the records the
engine accepts, but for what JSON Schema cannot tell apart (a number 1.0 is an integer to it,
and never to the engine)."""

import json

import jsonschema_rs
import pytest
from hypothesis import given, settings

from reviewapp.engine import RecordError, parse_record
from reviewapp.engine.records import record_json_schema
from tests.engine.test_records import BAD_KEYS, VALID, record_documents
from tests.paths import SPEC

INTEGER_KEYS = ("attempt", "sourceRevision", "seq")


def validator():
    record, components = record_json_schema("#/$defs/{name}")
    return jsonschema_rs.Draft202012Validator({**record, "$defs": components})


VALIDATOR = validator()


def accepted(document) -> bool:
    try:
        parse_record(document)
    except RecordError:
        return False
    return True


def whole_float_for_an_integer(document) -> bool:
    return any(
        isinstance(document.get(key), float) and document[key].is_integer() for key in INTEGER_KEYS
    )


def test_each_record_type_has_its_schema_named_for_it():
    record, components = record_json_schema("#/components/schemas/{name}")
    names = {
        "run_started": "RunStarted",
        "tool_call": "ToolCall",
        "tool_observation": "ToolObservation",
        "observation_resolution": "ObservationResolution",
        "agent_action": "AgentAction",
    }
    assert record["discriminator"] == {
        "propertyName": "type",
        "mapping": {tag: f"#/components/schemas/{name}" for tag, name in names.items()},
    }
    assert set(components) == set(names.values())
    observation = components["ToolObservation"]
    assert observation["required"] == ["type", "runId", "observationId", "source"]
    # Every key spec/traces.md gives a tool_observation; any other key may be a field.
    assert set(observation["properties"]) == set(
        "type runId observationId toolCallId source revisionDomain sourceRevision entity field "
        "value errors fallback eventId deliveryId startedAt completedAt seq".split()
    )
    assert "additionalProperties" not in json.dumps(components)
    assert set(components["ObservationResolution"]["properties"]) >= set(
        "kind reason rule status value evidenceIds disputedFields policyVersion confidence "
        "reasoning".split()
    )


@pytest.mark.parametrize("record_type", sorted(VALID))
def test_a_valid_record_of_each_type_is_valid(record_type):
    assert VALIDATOR.is_valid({"runId": "r", "type": record_type, **VALID[record_type]})


@pytest.mark.parametrize(("record_type", "bad"), BAD_KEYS, ids=[str(b) for _, b in BAD_KEYS])
def test_every_refusal_of_the_engine_is_a_refusal_of_the_schema(record_type, bad):
    document = {"runId": "r", "type": record_type, **VALID[record_type], **bad}
    assert VALIDATOR.is_valid(document) == whole_float_for_an_integer(document)


def test_every_line_of_the_spec_fixtures_is_valid():
    lines = [
        json.loads(raw)
        for path in sorted(SPEC.glob("*.jsonl"))
        if not path.name.endswith(".expected.jsonl")
        for raw in path.read_text().splitlines()
        if raw.strip()
    ]
    assert len(lines) > 50
    assert [line for line in lines if not VALIDATOR.is_valid(line)] == []


@settings(max_examples=600)
@given(record_documents())
def test_the_schema_accepts_what_the_engine_accepts(document):
    if not whole_float_for_an_integer(document):
        assert VALIDATOR.is_valid(document) == accepted(document)
