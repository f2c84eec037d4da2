"""OpenTelemetry tool spans into native trace records (spec/traces.md).

Pure: standard library only, no Django, no I/O. What is read, and how each span maps onto
a tool_call and its tool_observation, is described in docs/formats.md."""

from reviewapp.ingest.otel.records import DEFAULT_KEYS, ExtractionKeys, convert_document
from reviewapp.ingest.otel.spans import OTEL_SPAN, OTLP, detect_format
from reviewapp.ingest.otel.values import ExternalFormatError

__all__ = [
    "DEFAULT_KEYS",
    "OTEL_SPAN",
    "OTLP",
    "ExternalFormatError",
    "ExtractionKeys",
    "convert_document",
    "detect_format",
]
