"""GET /api/v1/openapi.json: the ingest API described for its clients and for schemathesis
(tests/security/test_api_schema.py fuzzes every operation against it). Written by hand, next
to the views it describes (views/ingest_api.py); served without a sign-in. The trace records
are the engine's own schemas (engine.records.record_json_schema), as OpenAPI 3.0 spells
them: the format is defined once."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from reviewapp.engine.records import record_json_schema
from reviewapp.gate.check import MAX_RUN_ID
from reviewapp.gate.modes import MAX_ACTION
from reviewapp.ingest.receive import MAX_FILE_NAME, MAX_IDEMPOTENCY_KEY

_ERROR = {"$ref": "#/components/schemas/Error"}
_BATCH = {"$ref": "#/components/schemas/Batch"}


def _answer(description: str, schema: dict[str, Any] = _ERROR) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


_UNAUTHORIZED = {
    **_answer("no valid bearer token"),
    "headers": {"WWW-Authenticate": {"schema": {"type": "string"}}},
}
_TRACES = {
    "type": "string",
    "format": "binary",
    "minLength": 1,
    "description": "JSON Lines: each line a trace record (TraceRecord), or a line of another "
    "format the ingest reads (docs/formats.md).",
}
_SCHEMAS = "#/components/schemas/{name}"
_NULL = {"type": "null"}


def _openapi_3_0(node: Any) -> Any:
    """A JSON Schema (2020-12) as OpenAPI 3.0 spells it: there, a value that may be null
    is `nullable` (and an enum that may be null holds null), never of the type "null"."""
    if isinstance(node, list):
        return [_openapi_3_0(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _openapi_3_0(value) for key, value in node.items()}
    options = node.get("anyOf")
    if not isinstance(options, list) or _NULL not in options:
        return node
    others = [option for option in options if option != _NULL]
    rest = {key: value for key, value in node.items() if key != "anyOf"}
    if len(others) > 1:
        return {**rest, "anyOf": others, "nullable": True}
    (only,) = others
    # A reference has no siblings in OpenAPI 3.0.
    merged = {**rest, "allOf": [only]} if "$ref" in only else {**rest, **only}
    if "enum" in merged:
        merged["enum"] = [*merged["enum"], None]
    return {**merged, "nullable": True}


def _to_check(schema: dict[str, Any], *, optional: set[str], name: str) -> dict[str, Any]:
    """A record as the gate takes the action it checks: `optional` keys have a default
    there, and the name the gate modes know it by (`name`) has a length."""
    properties = dict(schema["properties"])
    properties[name] = {**properties[name], "maxLength": MAX_ACTION}
    return {
        **schema,
        "properties": properties,
        "required": [key for key in schema["required"] if key not in optional],
    }


def _record_schemas() -> dict[str, Any]:
    """TraceRecord (any record, by its type), one schema per record type, and the two the
    gate takes as the action it checks."""
    record, components = record_json_schema(_SCHEMAS)
    schemas = {"TraceRecord": record, **components}
    schemas["AgentActionToCheck"] = _to_check(
        components["AgentAction"], optional={"type", "runId"}, name="name"
    )
    schemas["ToolCallToCheck"] = _to_check(components["ToolCall"], optional={"runId"}, name="tool")
    return _openapi_3_0(schemas)


_RECORD_SCHEMAS = _record_schemas()

# What a batch's counts mean while it runs (ingest.pipeline.stored_so_far) and once done.
SO_FAR = (
    "While the batch runs, what it has stored so far (at most one chunk behind); once it is "
    "done, counted from what it stored."
)
ONCE_DONE = "Set when the batch is done; 0 before."


DOCUMENT: dict[str, Any] = {
    "openapi": "3.0.3",
    "info": {
        "title": "Crosscheck ingest API",
        "version": "1",
        "description": (
            "Send agent traces (JSON Lines, optionally gzip-compressed) to be stored and "
            "judged, and follow what became of them. Authenticate with an API token of "
            "yours: `Authorization: Bearer cc_...` (made on the API tokens page)."
        ),
    },
    "paths": {
        "/api/v1/traces": {
            "post": {
                "operationId": "postTraces",
                "summary": "Deliver a trace file",
                "security": [{"bearer": []}],
                "parameters": [
                    {
                        "name": "Idempotency-Key",
                        "in": "header",
                        "required": False,
                        "description": "The same key with the same body answers as the first "
                        "delivery did; with another body, 422.",
                        "schema": {"type": "string", "maxLength": MAX_IDEMPOTENCY_KEY},
                    },
                    {
                        "name": "X-File-Name",
                        "in": "header",
                        "required": False,
                        "description": "A name to show for the delivery (UTF-8).",
                        "schema": {"type": "string", "maxLength": MAX_FILE_NAME},
                    },
                ],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/x-ndjson": {"schema": _TRACES},
                        "application/gzip": {"schema": _TRACES},
                        "application/octet-stream": {"schema": _TRACES},
                    },
                },
                "responses": {
                    "202": _answer("kept and queued for a worker (or already was)", _BATCH),
                    "400": _answer(
                        "an empty body, an Idempotency-Key too long or holding a NUL, an "
                        "X-File-Name too long"
                    ),
                    "401": _UNAUTHORIZED,
                    "403": _answer("the token's user may not ingest traces"),
                    "413": _answer("the body is over INGEST_MAX_BYTES"),
                    "415": _answer("a binary file (an image, an archive): not a trace"),
                    "422": _answer("this Idempotency-Key was used with another body"),
                },
            }
        },
        "/api/v1/check": {
            "post": {
                "operationId": "postCheck",
                "summary": "Ask the gate before a side effect: allow, block or would-block",
                "security": [{"bearer": []}],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "required": ["runId", "records", "action"],
                                "additionalProperties": False,
                                "properties": {
                                    "runId": {
                                        "type": "string",
                                        "minLength": 1,
                                        "maxLength": MAX_RUN_ID,
                                    },
                                    "records": {
                                        "type": "array",
                                        "description": "The run's records so far, in "
                                        "recording order, each of the run checked (runId).",
                                        "items": {"$ref": "#/components/schemas/TraceRecord"},
                                    },
                                    "action": {
                                        "description": "What the agent is about to do: an "
                                        "agent action (type defaults to agent_action), or "
                                        "a tool call; runId defaults to the run checked.",
                                        "anyOf": [
                                            {"$ref": "#/components/schemas/AgentActionToCheck"},
                                            {"$ref": "#/components/schemas/ToolCallToCheck"},
                                        ],
                                    },
                                },
                            }
                        }
                    },
                },
                "responses": {
                    "200": _answer("the gate's answer", {"type": "object"}),
                    "400": _answer(
                        "bad input (a NUL character anywhere, say), recorded as rejected",
                        {"type": "object"},
                    ),
                    "401": _UNAUTHORIZED,
                    "403": _answer("the token's user may not ingest traces"),
                    "405": _answer("only POST"),
                    "413": _answer(
                        "the body is over GATE_MAX_BYTES, recorded as rejected",
                        {"type": "object"},
                    ),
                    "415": _answer(
                        "the body is not declared application/json, recorded as rejected",
                        {"type": "object"},
                    ),
                },
            }
        },
        "/api/v1/batches/{id}": {
            "get": {
                "operationId": "getBatch",
                "summary": "A delivery's state and counts",
                "security": [{"bearer": []}],
                "parameters": [
                    {
                        "name": "id",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string", "format": "uuid"},
                    }
                ],
                "responses": {
                    "200": _answer("the batch", _BATCH),
                    "401": _UNAUTHORIZED,
                    "403": _answer("the token's user may not ingest traces"),
                    "404": _answer("no such batch of this token's user"),
                },
            }
        },
        "/api/v1/openapi.json": {
            "get": {
                "operationId": "getOpenApi",
                "summary": "This document",
                "security": [],
                "responses": {
                    "200": {
                        "description": "the document",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    }
                },
            }
        },
    },
    "components": {
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        "schemas": {
            **_RECORD_SCHEMAS,
            "Error": {
                "type": "object",
                "required": ["error"],
                "properties": {"error": {"type": "string"}},
                "additionalProperties": False,
            },
            "Batch": {
                "type": "object",
                "required": [
                    "id",
                    "state",
                    "file",
                    "bytes",
                    "progress",
                    "lines",
                    "accepted",
                    "duplicates",
                    "identical",
                    "rejected",
                    "ignored",
                    "spans",
                    "runs",
                    "tickets",
                    "error",
                    "url",
                ],
                "additionalProperties": False,
                "properties": {
                    "id": {"type": "string", "format": "uuid"},
                    "state": {"type": "string", "enum": ["queued", "running", "done", "failed"]},
                    "file": {"type": "string"},
                    "bytes": {"type": "integer", "minimum": 0},
                    "progress": {"type": "integer", "minimum": 0, "maximum": 100},
                    "lines": {"type": "integer", "minimum": 0, "description": ONCE_DONE},
                    "accepted": {"type": "integer", "minimum": 0, "description": SO_FAR},
                    "duplicates": {"type": "integer", "minimum": 0, "description": ONCE_DONE},
                    "identical": {
                        "type": "integer",
                        "minimum": 0,
                        "description": "Of the duplicates, lines of a record with no id and no "
                        "seq (an action, a resolution, a run's start) identical to a record of "
                        "the run already stored: a re-delivery, or a repeated event stored once; "
                        "seq keeps repeated events. " + ONCE_DONE,
                    },
                    "rejected": {"type": "integer", "minimum": 0, "description": SO_FAR},
                    "ignored": {"type": "integer", "minimum": 0, "description": ONCE_DONE},
                    "spans": {
                        "type": "object",
                        "nullable": True,
                        "description": "An external format's spans: how many were read, how "
                        "many were tool calls, and the rest dropped, grouped by reason with a "
                        "count and the first example; in words (message), and whether that is "
                        "a warning (spans and no tool call, or spans that did not read). Null "
                        "for native lines. " + ONCE_DONE,
                        "required": ["spans", "toolCalls", "dropped", "reasons", "message"],
                        "properties": {
                            "spans": {"type": "integer", "minimum": 0},
                            "toolCalls": {"type": "integer", "minimum": 0},
                            "dropped": {"type": "integer", "minimum": 0},
                            "reasons": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "required": ["reason", "count", "firstExample"],
                                    "properties": {
                                        "reason": {"type": "string"},
                                        "count": {"type": "integer", "minimum": 1},
                                        "firstExample": {"type": "string"},
                                    },
                                },
                            },
                            "message": {"type": "string"},
                            "warning": {"type": "boolean"},
                        },
                    },
                    "runs": {"type": "integer", "minimum": 0, "description": ONCE_DONE},
                    "tickets": {"type": "integer", "minimum": 0, "description": SO_FAR},
                    "error": {"type": "string", "nullable": True},
                    "url": {"type": "string"},
                },
            },
        },
    },
}


@login_not_required
@require_GET
def openapi_document(request: HttpRequest) -> JsonResponse:
    return JsonResponse(DOCUMENT)
