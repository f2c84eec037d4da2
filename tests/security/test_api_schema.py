"""The API against the OpenAPI document it serves (schemathesis, ASVS 4.x): every operation of
the document, the gate included, called with generated requests, valid and not, with a real
token; 0 server errors, 0 answers that break the document, 0 invalid requests accepted.
Bounded for every run; the slow variant (CROSSCHECK_SLOW=1) tries many more."""

import json

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance

from reviewapp.engine.records import record_json_schema
from reviewapp.ingest.tokens import create_token
from reviewapp.views.openapi import DOCUMENT

# Every operation the document names, with valid requests and, where it takes anything
# (parameters, a body), invalid ones: one added there is fuzzed here without a word.
OPERATIONS = [
    operation["operationId"] for path in DOCUMENT["paths"].values() for operation in path.values()
]
CASES = [
    (operation["operationId"], mode)
    for path in DOCUMENT["paths"].values()
    for operation in path.values()
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
    if mode == GenerationMode.POSITIVE or "parameters" in operation or "requestBody" in operation
]
EXAMPLES, SLOW_EXAMPLES = 50, 500
# Trace bodies are bytes, sent as they are.
schemathesis.serializer.alias(
    ["application/x-ndjson", "application/gzip"], "application/octet-stream"
)


@pytest.fixture
def api_schema(db):
    # The WSGI app, in the test's own transaction: no request may close its connection
    # (the test client does the same).
    signals.request_started.disconnect(close_old_connections)
    try:
        yield schemathesis.openapi.from_wsgi("/api/v1/openapi.json", get_wsgi_application())
    finally:
        signals.request_started.connect(close_old_connections)


@pytest.fixture
def token(reviewer):
    return create_token(user=reviewer, name="schemathesis")[1]


def test_the_document_is_served_without_a_sign_in(client):
    response = client.get("/api/v1/openapi.json")
    assert response.status_code == 200 and response.json()["openapi"].startswith("3.")
    assert "no-store" in response["Cache-Control"]


def test_the_gate_s_records_are_described_by_the_engine_s_record_schemas(client):
    document = client.get("/api/v1/openapi.json").json()
    schemas = document["components"]["schemas"]
    body = document["paths"]["/api/v1/check"]["post"]["requestBody"]["content"]
    properties = body["application/json"]["schema"]["properties"]
    assert properties["records"]["items"] == {"$ref": "#/components/schemas/TraceRecord"}
    # One definition: the engine's, as OpenAPI 3.0 spells it (null is `nullable`, no type).
    record, components = record_json_schema("#/components/schemas/{name}")
    assert schemas["TraceRecord"]["discriminator"] == record["discriminator"]
    for name, schema in components.items():
        assert set(schemas[name]["properties"]) == set(schema["properties"]), name
        assert schemas[name]["required"] == schema["required"], name
    assert '"null"' not in json.dumps(document)
    assert schemas["ToolObservation"]["properties"]["entity"] == {
        "description": "The entity the response echoed.",
        "type": "string",
        "nullable": True,
    }
    assert schemas["ToolCall"]["properties"]["outcome"]["enum"] == [
        "failure",
        "success",
        "unknown",
        None,
    ]
    # The action checked: an agent action (its type is the default) or a tool call, of the
    # run checked (its runId is the default).
    action = properties["action"]
    assert [item["$ref"].rsplit("/", 1)[1] for item in action["anyOf"]] == [
        "AgentActionToCheck",
        "ToolCallToCheck",
    ]
    assert schemas["AgentActionToCheck"]["required"] == ["name"]
    assert schemas["ToolCallToCheck"]["required"] == ["type", "toolCallId", "tool"]


def test_every_operation_of_the_document_is_fuzzed(api_schema):
    paths = api_schema.raw_schema["paths"].values()
    served = {operation["operationId"] for path in paths for operation in path.values()}
    assert served == set(OPERATIONS) and "postCheck" in served


def keeps_to_the_document(api_schema, token, operation_id, mode, examples):
    operation = api_schema.find_operation_by_id(operation_id)

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    def call(case):
        # A real token: what it guards is what is fuzzed (tests/ingest/test_api.py has
        # the requests without one). Also given as the run's own credentials: a token only
        # in the case's headers is taken for a generated one, which an answer (200) must not
        # follow; given so, each answered request is sent again without a token and with a
        # wrong one, and must be refused.
        headers = None
        if operation.path != "/api/v1/openapi.json":
            headers = {"Authorization": f"Bearer {token}"}
            case.headers = {**(case.headers or {}), **headers}
        # Every check but "valid data is accepted": a generated Idempotency-Key comes back
        # with another body, and is rightly refused (422, as the document says); a
        # generated run's records are valid JSON but rarely valid records (400).
        case.call_and_validate(headers=headers, excluded_checks=[positive_data_acceptance])

    call()


@pytest.mark.parametrize(("operation_id", "mode"), CASES, ids=str)
def test_every_operation_keeps_to_the_document(api_schema, token, operation_id, mode):
    keeps_to_the_document(api_schema, token, operation_id, mode, EXAMPLES)


@pytest.mark.slow
@pytest.mark.parametrize(("operation_id", "mode"), CASES, ids=str)
def test_every_operation_keeps_to_the_document_at_length(api_schema, token, operation_id, mode):
    keeps_to_the_document(api_schema, token, operation_id, mode, SLOW_EXAMPLES)
