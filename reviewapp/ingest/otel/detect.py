"""Which trace format a decoded document is, by its top-level keys, and its spans."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain
from typing import Any

from reviewapp.ingest.otel.jaeger import jaeger_raw_spans
from reviewapp.ingest.otel.langfuse import langfuse_raw_spans
from reviewapp.ingest.otel.langsmith import is_langsmith_run, langsmith_raw_spans
from reviewapp.ingest.otel.mlflow import is_mlflow_span, mlflow_raw_spans
from reviewapp.ingest.otel.openai_agents import agents_raw_spans, is_agents_item
from reviewapp.ingest.otel.spans import (
    _Raw,
    _Span,
    console_raw_span,
    otlp_raw_spans,
    span_list_raw_spans,
)
from reviewapp.ingest.otel.tools import raw_is_tool
from reviewapp.ingest.otel.values import ExternalFormatError, _quote, _type_name

OTLP = "otlp"
OTEL_SPAN = "otel-span"
TEMPO = "tempo"
JAEGER = "jaeger"
LANGFUSE = "langfuse"
SPAN_LIST = "span-list"
PHOENIX = "phoenix"
MLFLOW = "mlflow"
LANGSMITH = "langsmith"
OPENAI_AGENTS = "openai-agents"

EXPECTED = (
    'native JSON Lines (objects with "runId" and "type"), OTLP/JSON ("resourceSpans"), '
    'Jaeger JSON ("data": [{"traceID", "spans"}]), Grafana Tempo JSON ("batches"), '
    'a Langfuse trace export ("observations"), Phoenix spans ("data": [...], as its REST API '
    'and client give them), an MLflow trace ("info", "data": {"spans"}), LangSmith runs '
    '(a JSON array of runs with "run_type"), the OpenAI Agents SDK\'s trace export ("data": '
    '[{"object": "trace.span"}]), or a list of spans (a JSON array, or "spans": [...])'
)


def _is_spanish(item: Any) -> bool:
    return isinstance(item, dict) and (
        isinstance(item.get("context"), dict)
        or ("traceId" in item and "spanId" in item)
        or ("trace_id" in item and "span_id" in item)
    )


def _is_otlp(item: Any) -> bool:
    return isinstance(item, dict) and ("resourceSpans" in item or "resource_spans" in item)


def _is_phoenix(item: Any) -> bool:
    """A span as Phoenix gives it: its kind beside its ids, not in its attributes."""
    return isinstance(item, dict) and isinstance(item.get("context"), dict) and "span_kind" in item


def _span_list_kind(spans: list) -> str | None:
    if not spans or not all(map(_is_spanish, spans)):
        return None
    return PHOENIX if all(map(_is_phoenix, spans)) else SPAN_LIST


def detect_format(document: Any) -> str | None:
    """The external format of a decoded document, else None (a native record, or nothing
    this reads)."""
    if isinstance(document, list):
        if document and all(map(_is_otlp, document)):
            return OTLP  # OTLP documents saved together, as a session's export writes them
        if document and all(map(is_langsmith_run, document)):
            return LANGSMITH
        return _span_list_kind(document)
    if not isinstance(document, dict):
        return None
    if _is_otlp(document):
        return OTLP
    if isinstance(document.get("batches"), list):
        return TEMPO
    trace = document.get("trace")
    if isinstance(trace, dict) and ("resourceSpans" in trace or "batches" in trace):
        return TEMPO
    if isinstance(document.get("observations"), list):
        return LANGFUSE
    data = document.get("data")
    if isinstance(document.get("info"), dict) and isinstance(data, dict) and "spans" in data:
        return MLFLOW  # Trace.to_json()
    spans = document.get("spans")
    if isinstance(spans, list) and spans and all(map(is_mlflow_span, spans)):
        return MLFLOW  # the traces artifact of MLflow's file store
    if isinstance(data, list) and data and all(map(is_agents_item, data)):
        return OPENAI_AGENTS
    if isinstance(data, list) and _span_list_kind(data) is not None:
        return PHOENIX  # Phoenix's REST page of spans, {"data": [...], "next_cursor"}
    if (
        isinstance(data, list)
        and data
        and all(isinstance(one, dict) and "spans" in one for one in data)
    ):
        return JAEGER
    if "traceID" in document and isinstance(document.get("spans"), list):
        return JAEGER
    if isinstance(document.get("spans"), list) and all(map(_is_spanish, document["spans"])):
        return SPAN_LIST
    context = document.get("context")
    if isinstance(context, dict) and "trace_id" in context:
        return PHOENIX if _is_phoenix(document) else OTEL_SPAN
    return None


# --- what a document this does not read holds, to say so -----------------------------------

_SPAN_IDS = 'ids on each span ("context": {"trace_id", "span_id"}, or "traceId" and "spanId")'
_MAX_KEYS = 6


def _keys(obj: dict) -> str:
    keys = [_quote(key, 40) for key in list(obj)[:_MAX_KEYS]]
    more = len(obj) - len(keys)
    return ", ".join(keys) + (f" and {more} more" if more > 0 else "")


def _what(value: Any) -> str:
    if isinstance(value, dict):
        return f"an object with keys {_keys(value)}" if value else "an empty object"
    if isinstance(value, list):
        if not value:
            return "an empty array"
        return f"an array of {len(value)} item{'s' if len(value) != 1 else ''}"
    return _type_name(value)


def _first_other(items: list, accepted) -> str:
    """Where a list stops being what it should be: its first item that is not, as found."""
    for index, item in enumerate(items):
        if not accepted(item):
            found = f"has keys {_keys(item)}" if isinstance(item, dict) and item else None
            return f"[{index}] {found or 'is ' + _what(item)}"
    return ""


def _nearest(document: Any) -> str | None:
    """What the nearest format would need of a document this does not read, else None."""
    if isinstance(document, list):
        if document and any(isinstance(item, dict) for item in document):
            return f"a list of spans needs {_SPAN_IDS}: item {_first_other(document, _is_spanish)}"
        return None
    if not isinstance(document, dict):
        return None
    lists = {key: value for key, value in document.items() if isinstance(value, list) and value}
    otlp = [key for key, value in lists.items() if all(map(_is_otlp, value))]
    if otlp:
        return (
            f"{_keys(dict.fromkeys(otlp))} hold{'s' if len(otlp) == 1 else ''} OTLP documents: "
            "send each document, or a JSON array of them"
        )
    span_lists = [
        key for key, value in lists.items() if key != "spans" and all(map(_is_spanish, value))
    ]
    if span_lists:
        return (
            f"{_keys(dict.fromkeys(span_lists))} hold{'s' if len(span_lists) == 1 else ''} "
            'lists of spans: send one list, as a JSON array or as "spans": [...]'
        )
    if "spans" in document:
        spans = document["spans"]
        if not isinstance(spans, list):
            return f'"spans" must be an array of spans, not {_type_name(spans)}'
        return f'"spans" needs {_SPAN_IDS}: spans{_first_other(spans, _is_spanish)}'
    if isinstance(document.get("data"), list) and document["data"]:
        return (
            '"data" needs Jaeger traces ({"traceID", "spans"}) or Phoenix spans '
            '({"context": {"trace_id", "span_id"}, "span_kind"}): '
            f"data{_first_other(document['data'], _is_spanish)}"
        )
    if "name" in document and ("attributes" in document or "span_kind" in document):
        return f"a span needs its ids: {_SPAN_IDS}"
    return None


def unrecognised(document: Any) -> str:
    """The one-line refusal of a document in no format this reads: what was found, what the
    nearest format would need, and every format there is."""
    nearest = _nearest(document)
    hint = f"; {nearest}" if nearest else ""
    return f"not a recognised trace format: found {_what(document)}{hint}; expected {EXPECTED}"


def _raw_spans(kind: str, document: Any) -> Iterator[_Raw]:
    if kind == OTLP and isinstance(document, list):
        return chain.from_iterable(
            otlp_raw_spans(one, f"[{index}].") for index, one in enumerate(document)
        )
    if kind in (OTLP, TEMPO):
        return otlp_raw_spans(document)
    if kind == JAEGER:
        return jaeger_raw_spans(document)
    if kind == LANGFUSE:
        return langfuse_raw_spans(document)
    if kind == MLFLOW:
        return mlflow_raw_spans(document)
    if kind == LANGSMITH:
        return langsmith_raw_spans(document)
    if kind == OPENAI_AGENTS:
        return agents_raw_spans(document)
    if kind in (SPAN_LIST, PHOENIX) and not (isinstance(document, dict) and "context" in document):
        if isinstance(document, list):
            return span_list_raw_spans(document, "spans")
        top = "spans" if isinstance(document.get("spans"), list) else "data"
        return span_list_raw_spans(document[top], top)
    return iter([console_raw_span(document)])


def read_spans(document: Any) -> tuple[str, list[_Span], list[tuple[str, str]]]:
    """(format, every span that reads, (where, why) of each that did not): a span that
    does not read is refused when it looks like a tool span, and only reported otherwise."""
    kind = detect_format(document)
    if kind is None:
        raise ExternalFormatError(unrecognised(document))
    spans: list[_Span] = []
    unread: list[tuple[str, str]] = []
    for raw in _raw_spans(kind, document):
        if raw_is_tool(raw):
            spans.append(raw.read())
            continue
        try:
            spans.append(raw.read())
        except ExternalFormatError as exc:
            unread.append((raw.where, str(exc)))
    return kind, spans, unread
