"""Arguments and results that exporters write outside the tool span's attributes: in its
events (the GenAI conventions up to v1.36 and Strands: `gen_ai.tool.message`,
`gen_ai.choice`; the newer `gen_ai.client.inference.operation.details` with
`gen_ai.input.messages` / `gen_ai.output.messages`; any event carrying
`gen_ai.tool.call.arguments` / `gen_ai.tool.call.result`), or on the model's spans, where
the call the model made and the result it was given name the call by its id."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from reviewapp.ingest.otel.payloads import decode_text, is_id_placeholder
from reviewapp.ingest.otel.spans import _Span

MISSING = object()
DETAILS_EVENT = "gen_ai.client.inference.operation.details"
MESSAGE_KEYS = ("gen_ai.input.messages", "gen_ai.output.messages")
STRANDS = "strands-agents"
# OpenInference's flattened messages: llm.output_messages.0.message.tool_calls.1.tool_call.id
_OI_TOOL_CALL = re.compile(
    r"llm\.(?:input|output)_messages\.(\d+)\.message\.tool_calls\.(\d+)\.tool_call\.id"
)
_OI_TOOL_RESULT = re.compile(r"llm\.input_messages\.(\d+)\.message\.tool_call_id")


@dataclass
class Found:
    """What was found of one call: its arguments, its result, its id (MISSING: nothing)."""

    arguments: Any = MISSING
    result: Any = MISSING
    call_id: str | None = None


@dataclass
class CallIndex:
    """The arguments and results of a document's tool calls, by call id, as the model's
    spans and events state them."""

    arguments: dict[str, Any] = field(default_factory=dict)
    results: dict[str, Any] = field(default_factory=dict)


class LazyCallIndex:
    """index(spans), made when first asked: most tool spans hold their own arguments and
    result, and reading every model message for ids nobody asks for costs more than the
    rest of a conversion."""

    def __init__(self, spans: list[_Span]) -> None:
        self._spans: list[_Span] | None = spans
        self._made = CallIndex()

    def _index(self) -> CallIndex:
        if self._spans is not None:
            self._made, self._spans = index(self._spans), None
        return self._made

    def argument(self, call_id: str | None) -> Any:
        return self._index().arguments.get(call_id, MISSING) if call_id else MISSING

    def result(self, call_id: str | None) -> Any:
        return self._index().results.get(call_id) if call_id else None


def _decoded(value: Any) -> Any:
    if isinstance(value, str):
        kind, decoded = decode_text(value)
        if kind != "text":
            return decoded
    return value


def _an_id(value: Any) -> str | None:
    return value if isinstance(value, str) and not is_id_placeholder(value) else None


def _parts(messages: Any) -> Iterable[dict]:
    """The parts of GenAI-convention messages (`[{"role", "parts": [...]}]`)."""
    messages = _decoded(messages)
    for message in messages if isinstance(messages, list) else []:
        parts = message.get("parts") if isinstance(message, dict) else None
        for part in parts if isinstance(parts, list) else []:
            if isinstance(part, dict):
                yield part


def _chat_tool_calls(message: Any) -> Iterable[tuple[str, Any]]:
    """(id, arguments) of each tool call in a chat message (`gen_ai.choice` message)."""
    message = _decoded(message)
    if isinstance(message, dict) and "message" in message:
        message = _decoded(message["message"])
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    for call in calls if isinstance(calls, list) else []:
        if not isinstance(call, dict) or _an_id(call.get("id")) is None:
            continue
        function = call.get("function")
        if isinstance(function, dict) and "arguments" in function:
            yield call["id"], function["arguments"]
        elif "arguments" in call:
            yield call["id"], call["arguments"]


def own(span: _Span) -> Found:
    """The arguments and result a tool span writes in its events (or, in the newer
    convention, in its message attributes)."""
    found = Found()
    events = list(span.events)
    details = {key: span.attributes[key] for key in MESSAGE_KEYS if key in span.attributes}
    if details:
        events.append((DETAILS_EVENT, details))
    # Strands writes the call's input as `gen_ai.tool.message` and its result as
    # `gen_ai.choice`; in the conventions `gen_ai.tool.message` is the tool's result.
    strands = STRANDS in (
        span.attributes.get("gen_ai.system"),
        span.attributes.get("gen_ai.provider.name"),
    )
    input_message = strands or any(name == "gen_ai.choice" for name, _ in events)
    for name, attributes in events:
        if "gen_ai.tool.call.arguments" in attributes:
            found.arguments = attributes["gen_ai.tool.call.arguments"]
        if "gen_ai.tool.call.result" in attributes:
            found.result = attributes["gen_ai.tool.call.result"]
        found.call_id = found.call_id or _an_id(attributes.get("gen_ai.tool.call.id"))
        if name == DETAILS_EVENT:
            for key in MESSAGE_KEYS:
                for part in _parts(attributes.get(key)):
                    if part.get("type") == "tool_call" and "arguments" in part:
                        found.arguments = part["arguments"]
                        found.call_id = found.call_id or _an_id(part.get("id"))
                    elif part.get("type") == "tool_call_response" and "response" in part:
                        found.result = part["response"]
                        found.call_id = found.call_id or _an_id(part.get("id"))
        elif name == "gen_ai.tool.message" and "content" in attributes:
            if input_message:
                found.arguments = attributes["content"]
            else:
                found.result = attributes["content"]
            found.call_id = found.call_id or _an_id(attributes.get("id"))
        elif name == "gen_ai.choice" and "message" in attributes and input_message:
            found.result = attributes["message"]
            found.call_id = found.call_id or _an_id(attributes.get("id"))
    return found


def index(spans: Iterable[_Span]) -> CallIndex:
    """Every tool call the model made and every result it was given, by call id."""
    calls = CallIndex()
    for span in spans:
        _index_attributes(span.attributes, calls)
        for name, attributes in span.events:
            if name in ("gen_ai.choice", "gen_ai.assistant.message"):
                for key in ("message", "tool_calls", "gen_ai.event.content"):
                    if key in attributes:
                        value = attributes[key]
                        message = {"tool_calls": _decoded(value)} if key == "tool_calls" else value
                        for call_id, arguments in _chat_tool_calls(message):
                            calls.arguments.setdefault(call_id, arguments)
            elif name == "gen_ai.tool.message":
                result_id = _an_id(attributes.get("id"))
                if result_id is not None and "content" in attributes:
                    calls.results.setdefault(result_id, attributes["content"])
            if name == DETAILS_EVENT:
                _index_attributes(attributes, calls)
    return calls


def _index_attributes(attributes: Mapping[str, Any], calls: CallIndex) -> None:
    for key in MESSAGE_KEYS:
        for part in _parts(attributes.get(key)) if key in attributes else ():
            call_id = _an_id(part.get("id"))
            if call_id is None:
                continue
            if part.get("type") == "tool_call" and "arguments" in part:
                calls.arguments.setdefault(call_id, part["arguments"])
            elif part.get("type") == "tool_call_response" and "response" in part:
                calls.results.setdefault(call_id, part["response"])
    for key, value in attributes.items():
        if not key.startswith("llm."):
            continue
        match = _OI_TOOL_CALL.fullmatch(key)
        if match is not None and _an_id(value) is not None:
            arguments = attributes.get(key.removesuffix(".id") + ".function.arguments")
            if arguments is not None:
                calls.arguments.setdefault(value, arguments)
        match = _OI_TOOL_RESULT.fullmatch(key)
        if match is not None and _an_id(value) is not None:
            content = attributes.get(f"llm.input_messages.{match.group(1)}.message.content")
            if content is not None:
                calls.results.setdefault(value, content)
