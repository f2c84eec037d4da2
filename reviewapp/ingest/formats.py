"""One received unit (a line, or a whole pretty-printed document) into native records:
native JSON Lines as they are, every other format through the adapters in ingest/otel/.
Anything else is refused as not a recognised trace format, saying what was found and what
was expected."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from reviewapp.engine import Record, RecordError, decode_line, parse_record
from reviewapp.infra.storable_text import NUL_REFUSAL, holds_nul
from reviewapp.ingest import otel

NATIVE = "native"
RUN_STARTED_ORIGIN = "run_started"


@dataclass(frozen=True, slots=True)
class DecodedUnit:
    format: str
    records: list[Record]
    documents: list[dict[str, Any]]  # the native record dicts, as stored
    # External formats: spans read that are not tool calls, and what each record came from
    # (its span's observationId, or RUN_STARTED_ORIGIN): a span stored once is not stored
    # again, whatever the export that brings it back.
    ignored: int = 0
    origins: tuple[str, ...] = field(default=())
    # External formats: each run's earliest span start (ns since the epoch), tool span or not.
    span_starts: dict[str, int] = field(default_factory=dict)
    # External formats: its spans, tool calls, and the spans dropped and why (stored with
    # its line, summed into its batch's summary).
    span_report: otel.SpanReport | None = None

    @property
    def run_ids(self) -> list[str]:
        records = self.records
        if len(records) == 1:  # a native line: asked for three times a line
            return [records[0].run_id]
        return sorted({record.run_id for record in records})

    @property
    def span_keys(self) -> list[str]:
        return sorted({origin for origin in self.origins if origin != RUN_STARTED_ORIGIN})


def extraction_keys() -> otel.ExtractionKeys:
    """Where this deployment's tools put provenance in their results (settings)."""
    configured = {name: tuple(keys) for name, keys in settings.OTEL_EXTRACTION_KEYS.items()}
    return otel.ExtractionKeys(**configured)


def _decode(payload: bytes) -> Any:
    """The JSON of a unit, strictly (the engine's decoder); a JSON array (a list of spans)
    is decoded as the one value of an object."""
    if payload.lstrip()[:1] == b"[":
        return decode_line(b'{"_":' + payload + b"}")["_"]
    return decode_line(payload)


def decode_unit(payload: bytes) -> DecodedUnit:
    """Decode and check one unit; raises RecordError with the one-line reason to show."""
    document = _decode(payload)
    if b"\\u0000" in payload:
        raise RecordError(NUL_REFUSAL)
    if isinstance(document, dict) and "runId" in document and "type" in document:
        return DecodedUnit(NATIVE, [parse_record(document)], [document])
    external = otel.detect_format(document)
    if external is None:
        if isinstance(document, dict) and ("runId" in document or "type" in document):
            return DecodedUnit(NATIVE, [parse_record(document)], [document])
        raise RecordError(otel.unrecognised(document))
    try:
        conversion = otel.convert(document, extraction_keys())
    except otel.ExternalFormatError as exc:
        raise RecordError(f"{external}: {exc}") from None
    return converted_unit(external, conversion)


def converted_unit(external: str, conversion: otel.Conversion) -> DecodedUnit:
    """The unit of an external document's conversion, checked as decode_unit checks it
    (the OTLP receiver makes one from the spans it decoded, with no JSON between)."""
    converted = conversion.records
    if holds_nul(converted):
        # JSON text inside a span's attributes, decoded by the adapter, can hold one too.
        raise RecordError(f"{external}: {NUL_REFUSAL}")
    records = []
    for index, item in enumerate(converted):
        try:
            records.append(parse_record(item))
        except RecordError as exc:
            raise RecordError(f"{external}: span record {index + 1}: {exc}") from None
    return DecodedUnit(
        external,
        records,
        converted,
        conversion.ignored,
        _origins(converted),
        conversion.starts,
        conversion.report,
    )


def _origins(documents: list[dict[str, Any]]) -> tuple[str, ...]:
    """What each converted record came from: a tool_call comes just before its span's
    tool_observation."""
    origins = []
    for index, document in enumerate(documents):
        if document["type"] == "tool_observation":
            origins.append(document["observationId"])
        elif document["type"] == "tool_call":
            origins.append(documents[index + 1]["observationId"])
        else:
            origins.append(RUN_STARTED_ORIGIN)
    return tuple(origins)
