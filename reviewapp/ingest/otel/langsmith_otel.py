"""LangSmith's OpenTelemetry mode (`LANGSMITH_OTEL_ENABLED`): a run's inputs and outputs as
JSON text in `gen_ai.prompt` / `gen_ai.completion`, and a tool span that carries no call id.
The call id is only in the model's (`llm` span's) completion, as OpenAI-style tool calls:
it is given to a tool span when the match is unambiguous (docs/formats.md)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from reviewapp.ingest.otel.payloads import decode_text, is_id_placeholder
from reviewapp.ingest.otel.spans import _Span

KIND = "langsmith.span.kind"
INPUTS = "gen_ai.prompt"
OUTPUTS = "gen_ai.completion"


def is_langsmith(span: _Span) -> bool:
    return isinstance(span.attributes.get(KIND), str)


def _kind(span: _Span) -> str:
    kind = span.attributes.get(KIND)
    return kind.strip().lower() if isinstance(kind, str) else ""


def _decoded(value: Any) -> Any:
    if isinstance(value, str):
        kind, found = decode_text(value)
        return found if kind != "text" else value
    return value


def _model_calls(span: _Span) -> Iterable[tuple[str, str, Any]]:
    """(call id, tool name, arguments) of each tool call in an llm span's completion."""
    completion = _decoded(span.attributes.get(OUTPUTS))
    choices = completion.get("choices") if isinstance(completion, dict) else None
    for choice in choices if isinstance(choices, list) else []:
        message = choice.get("message") if isinstance(choice, dict) else None
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        for call in calls if isinstance(calls, list) else []:
            function = call.get("function") if isinstance(call, dict) else None
            call_id = call.get("id") if isinstance(call, dict) else None
            if (
                isinstance(function, dict)
                and isinstance(function.get("name"), str)
                and isinstance(call_id, str)
                and not is_id_placeholder(call_id)
            ):
                yield call_id, function["name"], _decoded(function.get("arguments"))


def call_ids(
    spans: list[_Span], tools: list[tuple[_Span, str, Any]], known: set[str]
) -> dict[int, str]:
    """{id(tool span): call id} for LangSmith tool spans with no call id of their own
    (`tools`: (span, tool name, its arguments)), from the model's tool calls of the same
    trace. Per trace and tool name the model's calls and the tool spans, each in the order
    they started, are paired only when they are as many, no id is taken already (`known`),
    and either there is one of each or the calls' arguments all differ and each pair's
    agree. Otherwise the spans keep synthetic ids: a wrong id would join a result to
    another call."""
    ordered = sorted(spans, key=lambda span: span.start_nanos or 0)
    made: dict[tuple[str, str], list[tuple[str, Any]]] = {}
    for span in ordered:
        if _kind(span) == "llm":
            for call_id, name, arguments in _model_calls(span):
                made.setdefault((span.trace_id, name), []).append((call_id, arguments))
    ran: dict[tuple[str, str], list[tuple[_Span, Any]]] = {}
    for span, name, arguments in sorted(tools, key=lambda tool: tool[0].start_nanos or 0):
        if is_langsmith(span):
            ran.setdefault((span.trace_id, name), []).append((span, arguments))
    found: dict[int, str] = {}
    for key, runs in ran.items():
        calls = made.get(key, [])
        ids = [call_id for call_id, _ in calls]
        if len(calls) != len(runs) or len(set(ids)) != len(ids) or set(ids) & known:
            continue
        if len(calls) > 1:
            arguments = [repr(one) for _, one in calls]
            if len(set(arguments)) != len(arguments) or any(
                call[1] != run[1] for call, run in zip(calls, runs, strict=True)
            ):
                continue
        for (call_id, _), (span, _) in zip(calls, runs, strict=True):
            found[id(span)] = call_id
    return found
