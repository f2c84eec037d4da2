"""Which trace format a decoded document is, by its top-level keys, and its spans."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from reviewapp.ingest.otel.jaeger import jaeger_raw_spans
from reviewapp.ingest.otel.langfuse import langfuse_raw_spans
from reviewapp.ingest.otel.spans import (
    _Raw,
    _Span,
    console_raw_span,
    otlp_raw_spans,
    span_list_raw_spans,
)
from reviewapp.ingest.otel.tools import raw_is_tool
from reviewapp.ingest.otel.values import ExternalFormatError

OTLP = "otlp"
OTEL_SPAN = "otel-span"
TEMPO = "tempo"
JAEGER = "jaeger"
LANGFUSE = "langfuse"
SPAN_LIST = "span-list"

EXPECTED = (
    'native JSON Lines (objects with "runId" and "type"), OTLP/JSON ("resourceSpans"), '
    'Jaeger JSON ("data": [{"traceID", "spans"}]), Grafana Tempo JSON ("batches"), '
    'a Langfuse trace export ("observations"), or a list of spans '
    '(a JSON array, or "spans": [...])'
)


def _is_spanish(item: Any) -> bool:
    return isinstance(item, dict) and (
        isinstance(item.get("context"), dict)
        or ("traceId" in item and "spanId" in item)
        or ("trace_id" in item and "span_id" in item)
    )


def detect_format(document: Any) -> str | None:
    """The external format of a decoded document, else None (a native record, or nothing
    this reads)."""
    if isinstance(document, list):
        return SPAN_LIST if document and all(map(_is_spanish, document)) else None
    if not isinstance(document, dict):
        return None
    if "resourceSpans" in document or "resource_spans" in document:
        return OTLP
    if isinstance(document.get("batches"), list):
        return TEMPO
    trace = document.get("trace")
    if isinstance(trace, dict) and ("resourceSpans" in trace or "batches" in trace):
        return TEMPO
    if isinstance(document.get("observations"), list):
        return LANGFUSE
    data = document.get("data")
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
        return OTEL_SPAN
    return None


def _raw_spans(kind: str, document: Any) -> Iterator[_Raw]:
    if kind in (OTLP, TEMPO):
        return otlp_raw_spans(document)
    if kind == JAEGER:
        return jaeger_raw_spans(document)
    if kind == LANGFUSE:
        return langfuse_raw_spans(document)
    if kind == SPAN_LIST:
        spans = document if isinstance(document, list) else document["spans"]
        return span_list_raw_spans(spans, "spans")
    return iter([console_raw_span(document)])


def read_spans(document: Any) -> tuple[str, list[_Span], list[tuple[str, str]]]:
    """(format, every span that reads, (where, why) of each that did not): a span that
    does not read is refused when it looks like a tool span, and only reported otherwise."""
    kind = detect_format(document)
    if kind is None:
        raise ExternalFormatError(f"not a recognised trace format: expected {EXPECTED}")
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
