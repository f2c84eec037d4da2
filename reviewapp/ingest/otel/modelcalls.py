"""Call ids that a format keeps only in the model's answer (MLflow, LangSmith): the tool
calls a chat model announced, matched to the tool spans that ran them by tool name and
order within one trace, and only where that match is unambiguous."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

MAX_DEPTH = 16


def announced_calls(output: Any, depth: int = 0) -> list[tuple[str, str]]:
    """(tool name, call id) of each tool call in a model's output, in order: OpenAI's
    `tool_calls` ({id, function: {name}}) and LangChain's ({id, name}), at any depth."""
    found: list[tuple[str, str]] = []
    if depth > MAX_DEPTH:
        return found
    if isinstance(output, dict):
        for key, value in output.items():
            if key == "tool_calls" and isinstance(value, list):
                found.extend(filter(None, map(_one_call, value)))
            else:
                found.extend(announced_calls(value, depth + 1))
    elif isinstance(output, list):
        for value in output:
            found.extend(announced_calls(value, depth + 1))
    return found


def _one_call(call: Any) -> tuple[str, str] | None:
    if not isinstance(call, dict):
        return None
    call_id, function = call.get("id"), call.get("function")
    name = function.get("name") if isinstance(function, dict) else call.get("name")
    if isinstance(call_id, str) and call_id and isinstance(name, str) and name:
        return name, call_id
    return None


def match_call_ids(
    tools: Iterable[tuple[Hashable, str]], announced: Iterable[tuple[str, str]]
) -> dict[Hashable, str]:
    """{tool span key: call id}: the n-th span of a tool takes the n-th call id the model
    gave that tool, when the model gave it exactly as many calls as there are spans of it
    (else none of that tool's spans gets one: a guess is worse than no id)."""
    ids: dict[str, list[str]] = {}
    seen: set[str] = set()
    for name, call_id in announced:
        if call_id not in seen:  # LangChain repeats each call in additional_kwargs
            seen.add(call_id)
            ids.setdefault(name, []).append(call_id)
    spans: dict[str, list[Hashable]] = {}
    for key, name in tools:
        spans.setdefault(name, []).append(key)
    matched: dict[Hashable, str] = {}
    for name, keys in spans.items():
        if len(ids.get(name, ())) == len(keys):
            matched.update(zip(keys, ids[name], strict=True))
    return matched
