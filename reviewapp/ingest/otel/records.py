"""A tool span into native records: a tool_call and its tool_observation, with the
result's provenance, value and errors (docs/formats.md says how)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reviewapp.ingest.otel import events
from reviewapp.ingest.otel import langsmith_otel as langsmith
from reviewapp.ingest.otel.detect import (
    JAEGER,
    LANGFUSE,
    LANGSMITH,
    MLFLOW,
    OPENAI_AGENTS,
    PHOENIX,
    read_spans,
)
from reviewapp.ingest.otel.events import MISSING
from reviewapp.ingest.otel.payloads import (
    decode_text,
    is_id_placeholder,
    is_placeholder,
    looks_like_schema,
    unwrap,
)
from reviewapp.ingest.otel.report import SpanReport
from reviewapp.ingest.otel.spans import _Span
from reviewapp.ingest.otel.tools import (
    AGENT_NAME_KEYS,
    ARGUMENT_KEYS,
    RESULT_KEYS,
    Document,
    ToolSpan,
)
from reviewapp.ingest.otel.values import MAX_NANOS, _is_int, _looks_like_json, _quote, _rfc3339


@dataclass(frozen=True)
class ExtractionKeys:
    """Where provenance lives in a tool's result payload; each tuple is tried in order."""

    source: tuple[str, ...] = ("source",)
    revision: tuple[str, ...] = ("sourceRevision", "revision")
    revision_domain: tuple[str, ...] = ("revisionDomain", "revision_domain")
    entity: tuple[str, ...] = ("entity",)
    errors: tuple[str, ...] = ("errors",)
    fallback: tuple[str, ...] = ("fallback",)
    value: tuple[str, ...] = ("data", "value", "result")  # the business payload inside the result
    warnings: tuple[str, ...] = ("warnings",)  # merged into errors (spec: errors include warnings)


DEFAULT_KEYS = ExtractionKeys()


REDACTED = "__REDACTED__"


# Phoenix lists its spans newest first; the Agents SDK, a span as it ends.
UNORDERED = (LANGFUSE, JAEGER, PHOENIX, MLFLOW, LANGSMITH, OPENAI_AGENTS)


CALL_ID_PREFIXES = ("call_", "toolu_")


CALL_ID_ATTRIBUTES = ("gen_ai.tool.call.id", "tool.id", "tool_call.id", "ai.toolCall.id")


@dataclass(frozen=True)
class Conversion:
    """A document's records, and how many of its spans were not tool calls (or not read)."""

    format: str
    records: list[dict]
    ignored: int
    # Each trace's earliest span start (nanoseconds since the epoch), whatever the span: a
    # run starts when its first span did, which is seldom a tool span.
    starts: dict[str, int] = dataclasses.field(default_factory=dict)
    # Its spans, tool calls and what was dropped and why (ignored, in words).
    report: SpanReport = dataclasses.field(default_factory=SpanReport)


def convert(document: Any, keys: ExtractionKeys = DEFAULT_KEYS) -> Conversion:
    """Native record dicts for every tool span of ``document``, in document order: a
    ``run_started`` for each trace whose agent or conversation the spans name (before its
    first tool span), then each tool span's ``tool_call`` and ``tool_observation``. Raises
    ExternalFormatError when the document is no format this reads, or is one but a tool
    span of it cannot be read."""
    kind, spans, unread = read_spans(document)
    return convert_spans(kind, spans, unread, keys)


def convert_spans(
    kind: str,
    spans: list[_Span],
    unread: Sequence[tuple[str, str]] = (),
    keys: ExtractionKeys = DEFAULT_KEYS,
) -> Conversion:
    """convert() of spans read already (`unread`: where and why others did not read): what
    the OTLP receiver gives for the spans it decoded from protobuf, with no JSON between."""
    found = Document(spans)
    tools = found.tool_spans()
    calls = events.LazyCallIndex(spans)
    if kind in UNORDERED:
        # These exports list spans in no order of their own: a span's start is the best
        # order there is (a stable sort: spans that start together keep their places).
        tools.sort(key=lambda tool: tool.span.start_nanos or 0)
    inferred = _inferred_call_ids(spans, tools)
    records: list[dict] = []
    started: set[str] = set()
    for tool in tools:
        if tool.span.trace_id not in started:
            started.add(tool.span.trace_id)
            records.extend(_run_started(found, tool.span))
        records.extend(_records(tool, keys, calls, inferred.get(id(tool.span))))
    for span in spans:
        # An agent span that ends after its tool spans may come in a later export: it
        # still names the run's agent.
        if span.trace_id not in started and (
            any(span.attributes.get(key) for key in AGENT_NAME_KEYS) or found.is_root_chain(span)
        ):
            started.add(span.trace_id)
            records.extend(_run_started(found, span))
    report = SpanReport.of(spans, unread, [tool.span for tool in tools])
    return Conversion(
        kind, records, len(spans) + len(unread) - len(tools), _earliest_starts(spans), report
    )


def _inferred_call_ids(spans: list[_Span], tools: list[ToolSpan]) -> dict[int, str]:
    """Call ids of LangSmith OpenTelemetry tool spans, which write none, from the model's tool
    calls (langsmith_otel)."""
    unnamed = []
    known = set()
    for tool in tools:
        call_id, _ = _tool_call_id(tool.span.attributes, tool.tool)
        call_id = call_id or tool.span.call_id or events.own(tool.span).call_id
        if call_id is not None:
            known.add(call_id)
        elif langsmith.is_langsmith(tool.span):
            unnamed.append((tool.span, tool.tool, _arguments(tool.span)))
    return langsmith.call_ids(spans, unnamed, known) if unnamed else {}


def _earliest_starts(spans: list[_Span]) -> dict[str, int]:
    starts: dict[str, int] = {}
    for span in spans:
        if span.start_nanos is not None and span.start_nanos < starts.get(span.trace_id, MAX_NANOS):
            starts[span.trace_id] = span.start_nanos
    return starts


def convert_document(document: Any, keys: ExtractionKeys = DEFAULT_KEYS) -> list[dict]:
    """The records of convert()."""
    return convert(document, keys).records


def _run_started(found: Document, span: _Span) -> list[dict]:
    agent, conversation = found.agent(span), found.conversation(span)
    if agent is None and conversation is None:
        return []
    record: dict[str, Any] = {"runId": span.trace_id, "type": "run_started"}
    if agent is not None:
        record["agent"] = agent
    if conversation is not None:
        record["conversationId"] = conversation
    return [record]


def _first(span: _Span, names: tuple[str, ...], fallback: Any) -> Any:
    for name in names:
        value = span.attributes.get(name)
        if value is not None and not is_placeholder(value):
            return value
    return None if is_placeholder(fallback) else fallback


def _one_call_id(value: Any) -> str | None:
    if isinstance(value, str):
        return None if is_id_placeholder(value) else value
    if _is_int(value):
        return str(value)
    if isinstance(value, list):
        candidates = [one for one in map(_one_call_id, value) if one is not None]
        for candidate in candidates:
            if candidate.startswith(CALL_ID_PREFIXES):
                return candidate
        return candidates[-1] if candidates else None
    return None


def _tool_call_id(attributes: Mapping[str, Any], tool: str) -> tuple[str | None, Any]:
    """(the call id, what stood in its place when that was no id): a placeholder, or the
    tool's own name (which .NET's Microsoft.Extensions.AI writes), is no call id."""
    for key in CALL_ID_ATTRIBUTES:
        raw = attributes.get(key)
        found = _one_call_id(raw)
        if found is not None and found != tool:
            return found, None
        if raw is not None:
            return None, raw
    return None, None


def _as_object(raw: Any) -> dict[str, Any] | None:
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        kind, value = decode_text(raw)
        if kind != "text" and isinstance(value, dict):
            return value
    return None


def _no_model() -> Any:
    return MISSING


def _arguments(
    span: _Span, own: Any = MISSING, model_said: Callable[[], Any] = _no_model
) -> dict[str, Any] | None:
    """The call's arguments: on the span, in its events, or (where the span holds only one
    argument's bare value, as OpenInference writes a LangChain tool's) as the model's tool
    call with the same id named them (`model_said`: asked only when needed)."""
    raw = _first(span, _keys(span, ARGUMENT_KEYS, langsmith.INPUTS), None)
    if raw is None and own is not MISSING:
        raw = own
    parameters = span.attributes.get("tool.parameters")
    if isinstance(parameters, str):
        parameters = decode_text(parameters)[1]
    if raw is None and parameters is not None and not looks_like_schema(parameters):
        raw = parameters  # OpenInference arguments, where the emitter put them there
    if raw is None:
        raw = None if is_placeholder(span.input) else span.input
    model = model_said() if raw is None else MISSING
    if raw is None and model is not MISSING:
        raw = model
    if raw is None:
        return None
    found = _as_object(raw)
    if found is not None:
        return found
    if model is MISSING:
        model = model_said()
    named = _as_object(model) if model is not MISSING else None
    if named is not None:
        return named
    if isinstance(parameters, dict) and looks_like_schema(parameters):
        properties = parameters["properties"]
        if len(properties) == 1:
            return {next(iter(properties)): raw}
    return {"_raw": raw}


def _keys(span: _Span, keys: tuple[str, ...], langsmith_key: str) -> tuple[str, ...]:
    """The keys a tool span's arguments or result may be in: LangSmith's gen_ai.prompt and
    gen_ai.completion only on LangSmith's spans (elsewhere they hold a model's messages)."""
    return (*keys, langsmith_key) if langsmith.is_langsmith(span) else keys


def _times(span: _Span) -> dict[str, str]:
    times = {}
    if span.start_nanos is not None:
        times["startedAt"] = _rfc3339(span.start_nanos)
    if span.end_nanos is not None:
        times["completedAt"] = _rfc3339(span.end_nanos)
    if span.start_nanos is not None:
        times["startTimeUnixNano"] = str(span.start_nanos)
    if span.end_nanos is not None:
        times["endTimeUnixNano"] = str(span.end_nanos)
    return times


def _error_items(value: Any) -> list[Any]:
    """Payload errors/warnings as native error items (strings or objects)."""
    if value is None or value is False or value in ("", [], {}):
        return []
    items: list[Any] = []
    for item in value if isinstance(value, list) else [value]:
        if item is None:
            continue
        if isinstance(item, str):
            items.append(item)
        elif isinstance(item, dict):
            field = item.get("field")
            if field is not None and not isinstance(field, str):
                item = {key: one for key, one in item.items() if key != "field"}
                item["fieldRaw"] = field
            items.append(item)
        else:
            items.append({"code": "UNRECOGNIZED_ERROR", "message": _quote(item, 200)})
    return items


class _Payload:
    """Looks keys up in a result payload object, remembering which ones it consulted."""

    def __init__(self, payload: dict[str, Any]):
        self.payload = payload
        self.used: set[str] = set()

    def first(self, names: tuple[str, ...]) -> Any:
        for name in names:
            if name in self.payload:
                self.used.add(name)
                if self.payload[name] is not None:
                    return self.payload[name]
        return None

    def rest(self) -> dict[str, Any]:
        return {key: value for key, value in self.payload.items() if key not in self.used}


def _from_payload(payload: dict[str, Any], keys: ExtractionKeys, observation: dict) -> list:
    """Fill provenance and value from a result object; returns the payload's errors."""
    lookup = _Payload(payload)
    source = lookup.first(keys.source)
    if isinstance(source, str) and source:
        observation["source"] = source
    elif source is not None:
        observation["sourceRaw"] = source
    domain = lookup.first(keys.revision_domain)
    if isinstance(domain, str):
        observation["revisionDomain"] = domain
    elif domain is not None:
        observation["revisionDomainRaw"] = domain
    revision = lookup.first(keys.revision)
    if _is_int(revision):
        observation["sourceRevision"] = revision
    elif revision is not None:
        observation["revisionRaw"] = revision
    entity = lookup.first(keys.entity)
    if isinstance(entity, str):
        observation["entity"] = entity
    elif _is_int(entity):
        observation["entity"] = str(entity)
    elif entity is not None:
        observation["entityRaw"] = entity
    fallback = lookup.first(keys.fallback)
    if fallback is not None:
        observation["fallback"] = bool(fallback)
        if not isinstance(fallback, bool):
            observation["fallbackRaw"] = fallback
    errors = _error_items(lookup.first(keys.errors)) + _error_items(lookup.first(keys.warnings))
    if payload.get("isError") is True:
        lookup.used.add("isError")
        errors.append({"code": "TOOL_ERROR", "message": "the tool result has isError: true"})
    for name in keys.value:
        if isinstance(payload.get(name), dict):
            lookup.used.add(name)
            observation["value"] = payload[name]
            extra = lookup.rest()
            if extra:
                observation["payloadExtra"] = extra
            break
    else:
        rest = lookup.rest()
        if rest:
            observation["value"] = rest
    return errors


def _span_errors(span: _Span) -> list[dict[str, Any]]:
    errors: list[dict[str, Any]] = []
    exceptions = []
    for attributes in span.exceptions:
        kind, message = attributes.get("exception.type"), attributes.get("exception.message")
        error: dict[str, Any] = {"code": "EXCEPTION"}
        if isinstance(kind, str) and kind:
            error["code"] = kind
        elif kind is not None:
            error["code"] = _quote(kind, 200)
        if message is not None:
            error["message"] = message if isinstance(message, str) else _quote(message, 200)
        exceptions.append(error)
    if span.error:
        error_type = span.attributes.get("error.type")
        error_type = error_type if isinstance(error_type, str) and error_type else None
        message = span.status_message
        if message is None:
            message = next((e["message"] for e in exceptions if e.get("message")), error_type)
        error = {"code": "SPAN_ERROR"}
        if message:
            error["message"] = message
        if error_type:
            error["errorType"] = error_type
        errors.append(error)
    return errors + exceptions


def _result(result: Any, keys: ExtractionKeys, observation: dict) -> tuple[list, str | None]:
    """Fill the observation's value and provenance from a result; (its errors, the call id
    its envelope carried)."""
    errors: list[Any] = []
    if result is None:
        return errors, None  # no result: the only way to have no value
    if isinstance(result, str) and result.strip() == REDACTED:
        errors.append(
            {
                "code": "RESULT_REDACTED",
                "message": "the exporter withheld the result (__REDACTED__)",
            }
        )
        return errors, None
    if isinstance(result, str):
        kind, payload = decode_text(result)
        if kind == "text":
            observation["value"] = {"result": result}
            if _looks_like_json(result):
                errors.append(
                    {
                        "code": "UNPARSEABLE_RESULT",
                        "message": "the result starts like JSON but does not parse (truncated?)",
                    }
                )
            return errors, None
        if kind == "python":
            observation["resultEncoding"] = "python-repr"
    else:
        payload = result
    unwrapped = unwrap(payload)
    if unwrapped.envelopes:
        observation["resultEnvelope"] = "+".join(unwrapped.envelopes)
    payload = unwrapped.payload
    if isinstance(payload, str) and payload.strip() == REDACTED:
        errors.append({"code": "RESULT_REDACTED", "message": "the exporter withheld the result"})
    elif isinstance(payload, dict):
        errors.extend(_from_payload(payload, keys, observation))
        if not payload:
            observation["value"] = {}  # the tool answered, with no fields: still an answer
    elif not is_placeholder(payload):
        # A scalar, a list or null: what the tool returned ({"result": null} for null).
        observation["value"] = {"result": payload}
    return errors + unwrapped.errors, unwrapped.call_id


def _records(
    tool: ToolSpan, keys: ExtractionKeys, calls: events.LazyCallIndex, inferred: str | None = None
) -> tuple[dict, dict]:
    span = tool.span
    span_key = f"otel:{span.trace_id}:{span.span_id}"
    call_id, stand_in = _tool_call_id(span.attributes, tool.tool)
    call_id = call_id or span.call_id
    common = {"runId": span.trace_id}
    times = _times(span)

    written = events.own(span)
    known_id = call_id or written.call_id
    result = _first(span, _keys(span, RESULT_KEYS, langsmith.OUTPUTS), span.output)
    if result is None and written.result is not MISSING:
        result = written.result
    if result is None:
        result = calls.result(known_id)
    found: dict[str, Any] = {}
    errors, envelope_call_id = _result(result, keys, found)
    call_id = call_id or envelope_call_id or written.call_id or inferred
    flags: dict[str, Any] = {} if call_id is not None else {"syntheticToolCallId": True}
    if stand_in is not None:
        flags["toolCallIdRaw"] = stand_in
    observation: dict[str, Any] = {
        **common,
        "type": "tool_observation",
        "observationId": span_key,
        "toolCallId": call_id or span_key,
        **flags,
        **found,
    }

    call: dict[str, Any] = {
        **common,
        "type": "tool_call",
        "toolCallId": call_id or span_key,
        **flags,
        "tool": tool.tool,
    }
    arguments = _arguments(span, written.arguments, lambda: calls.argument(call_id))
    if arguments is not None:
        call["arguments"] = arguments
    call["ok"] = not span.error
    call.update(times)

    if "source" not in observation:
        data_source = span.attributes.get("gen_ai.data_source.id")
        observation["source"] = (
            data_source if isinstance(data_source, str) and data_source else tool.tool
        )
        observation["sourceInferred"] = True
    errors.extend(_span_errors(span))
    if errors:
        observation["errors"] = errors
    observation.update(times)
    return call, observation
