"""Trace formats other than native JSON Lines into native trace records (spec/traces.md):
OpenTelemetry spans (OTLP/JSON, Tempo, Jaeger, span lists, ReadableSpan JSON) and Langfuse
exports.

Pure: standard library only, no Django, no I/O. What is read, and how each span maps onto
a tool_call and its tool_observation, is described in docs/formats.md."""

from reviewapp.ingest.otel.detect import (
    EXPECTED,
    JAEGER,
    LANGFUSE,
    OTEL_SPAN,
    OTLP,
    SPAN_LIST,
    TEMPO,
    detect_format,
)
from reviewapp.ingest.otel.records import (
    DEFAULT_KEYS,
    Conversion,
    ExtractionKeys,
    convert,
    convert_document,
)
from reviewapp.ingest.otel.report import SpanReport
from reviewapp.ingest.otel.values import ExternalFormatError

__all__ = [
    "DEFAULT_KEYS",
    "EXPECTED",
    "JAEGER",
    "LANGFUSE",
    "OTEL_SPAN",
    "OTLP",
    "SpanReport",
    "SPAN_LIST",
    "TEMPO",
    "Conversion",
    "ExternalFormatError",
    "ExtractionKeys",
    "convert",
    "convert_document",
    "detect_format",
]
