"""Trace formats other than native JSON Lines into native trace records (spec/traces.md):
OpenTelemetry spans (OTLP/JSON, Tempo, Jaeger, span lists, ReadableSpan JSON), Langfuse
exports, MLflow traces, LangSmith runs and the OpenAI Agents SDK's trace export.

Pure: standard library only, no Django, no I/O. What is read, and how each span maps onto
a tool_call and its tool_observation, is described in docs/formats.md."""

from reviewapp.ingest.otel.detect import (
    EXPECTED,
    JAEGER,
    LANGFUSE,
    LANGSMITH,
    MLFLOW,
    OPENAI_AGENTS,
    OTEL_SPAN,
    OTLP,
    PHOENIX,
    SPAN_LIST,
    TEMPO,
    detect_format,
    unrecognised,
)
from reviewapp.ingest.otel.records import (
    DEFAULT_KEYS,
    Conversion,
    ExtractionKeys,
    convert,
    convert_document,
    convert_spans,
)
from reviewapp.ingest.otel.report import SpanReport
from reviewapp.ingest.otel.values import ExternalFormatError

__all__ = [
    "DEFAULT_KEYS",
    "EXPECTED",
    "JAEGER",
    "LANGFUSE",
    "LANGSMITH",
    "MLFLOW",
    "OPENAI_AGENTS",
    "OTEL_SPAN",
    "OTLP",
    "PHOENIX",
    "SpanReport",
    "SPAN_LIST",
    "TEMPO",
    "Conversion",
    "ExternalFormatError",
    "ExtractionKeys",
    "convert",
    "convert_document",
    "convert_spans",
    "detect_format",
    "unrecognised",
]
