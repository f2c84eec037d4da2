"""LangSmith runs into _Span: a JSON array of `schemas.Run` as its client gives them (`id`,
`trace_id`, `parent_run_id`, `run_type` tool / llm / chain ..., `inputs`, `outputs`,
`error`, `extra.metadata`). A tool run is a tool call; the root run of a trace names its
agent; the thread (`thread_id`, `session_id` or `conversation_id` metadata, as LangSmith
groups threads) is the conversation. A tool run has no call id: the llm run's output
names it (modelcalls.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from reviewapp.ingest.otel.modelcalls import announced_calls, match_call_ids
from reviewapp.ingest.otel.spans import _label, _optional_id, _Raw, _Span, _span_name
from reviewapp.ingest.otel.values import (
    ExternalFormatError,
    _iso_nanos,
    _list,
    _normalize_id,
    _type_name,
)

THREAD_KEYS = ("thread_id", "session_id", "conversation_id")
RUN_ID_BYTES = 16  # a UUID; LangSmith writes it with dashes, which is kept as it is


def is_langsmith_run(item: Any) -> bool:
    return isinstance(item, dict) and "run_type" in item and "id" in item and "trace_id" in item


def _metadata(run: dict) -> dict[str, Any]:
    extra = run.get("extra")
    metadata = extra.get("metadata") if isinstance(extra, dict) else None
    return metadata if isinstance(metadata, dict) else {}


def _thread(run: dict) -> str | None:
    metadata = _metadata(run)
    for key in THREAD_KEYS:
        value = metadata.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _kind(run: dict) -> str | None:
    kind = run.get("run_type")
    return kind.strip().upper() if isinstance(kind, str) and kind.strip() else None


def langsmith_raw_spans(runs: list) -> Iterator[_Raw]:
    runs = _list(runs, "runs")
    for index, run in enumerate(runs):
        if not isinstance(run, dict):
            raise ExternalFormatError(f"[{index}] must be an object, not {_type_name(run)}")
    roots = {
        run.get("trace_id"): run
        for run in runs
        if run.get("parent_run_id") is None and isinstance(run.get("trace_id"), str)
    }
    call_ids = _call_ids(runs)
    for index, run in enumerate(runs):
        where = f"[{index}]"
        root = roots.get(run.get("trace_id"))
        agent = None
        if root is not None and _kind(root) != "TOOL" and isinstance(root.get("name"), str):
            agent = root["name"]
        thread = _thread(run) or (_thread(root) if root is not None else None)
        yield _Raw(
            where,
            run,
            run.get("name"),
            {},
            _kind(run),
            _reader(where, run, agent, thread, call_ids.get(index)),
        )


def _start(run: dict) -> str:
    """The order of runs in a trace: its dotted order (start times, to the microsecond)."""
    order = run.get("dotted_order") or run.get("start_time")
    return order if isinstance(order, str) else ""


def _call_ids(runs: list[dict]) -> dict[int, str]:
    traces: dict[Any, tuple[list, list]] = {}
    for index, run in sorted(enumerate(runs), key=lambda one: _start(one[1])):
        tools, announced = traces.setdefault(str(run.get("trace_id")), ([], []))
        kind = _kind(run)
        if kind == "TOOL" and isinstance(run.get("name"), str):
            tools.append((index, run["name"]))
        elif kind in ("LLM", "CHAT_MODEL"):
            announced.extend(announced_calls(run.get("outputs")))
    matched: dict[int, str] = {}
    for tools, announced in traces.values():
        matched.update(match_call_ids(tools, announced))  # type: ignore[arg-type]
    return matched


def _reader(where, run, agent, thread, call_id):
    return lambda: _read_run(where, run, agent, thread, call_id)


def _read_run(
    where: str, run: dict, agent: str | None, thread: str | None, call_id: str | None
) -> _Span:
    name = _span_name(run, where)
    label = _label(where, name)
    trace_id = _normalize_id(run.get("trace_id"), RUN_ID_BYTES, "trace_id", label)
    span_id = _normalize_id(run.get("id"), RUN_ID_BYTES, "id", label)
    parent = run.get("parent_run_id")
    error = run.get("error")
    message = error if isinstance(error, str) and error else None
    return _Span(
        where=label,
        name=name,
        trace_id=trace_id,
        span_id=span_id,
        attributes={},
        start_nanos=_iso_nanos(run.get("start_time"), "start_time", label),
        end_nanos=_iso_nanos(run.get("end_time"), "end_time", label),
        error=error not in (None, ""),
        status_message=message,
        exceptions=(),
        parent_id=_optional_id(parent, RUN_ID_BYTES),
        kind=_kind(run),
        input=run.get("inputs"),
        output=run.get("outputs"),
        trace_name=agent,
        session_id=thread,
        call_id=call_id,
    )
