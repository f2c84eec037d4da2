"""One received unit (a line, or a whole pretty-printed document) into native records:
native JSON Lines as they are, OpenTelemetry documents through the adapter in otel.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings

from reviewapp.engine import Record, RecordError, decode_line, parse_record
from reviewapp.ingest import otel

NATIVE = "native"
# PostgreSQL cannot store a NUL character in JSON or text.
NUL_REASON = "contains a NUL character (\\u0000), which cannot be stored"


@dataclass(frozen=True, slots=True)
class DecodedUnit:
    format: str
    records: list[Record]
    documents: list[dict[str, Any]]  # the native record dicts, as stored

    @property
    def run_ids(self) -> list[str]:
        return sorted({record.run_id for record in self.records})


def extraction_keys() -> otel.ExtractionKeys:
    """Where this deployment's tools put provenance in their results (settings)."""
    configured = {name: tuple(keys) for name, keys in settings.OTEL_EXTRACTION_KEYS.items()}
    return otel.ExtractionKeys(**configured)


def decode_unit(payload: bytes) -> DecodedUnit:
    """Decode and check one unit; raises RecordError with the one-line reason to show."""
    document = decode_line(payload)
    if b"\\u0000" in payload:
        raise RecordError(NUL_REASON)
    external = otel.detect_format(document)
    if external is None:
        return DecodedUnit(NATIVE, [parse_record(document)], [document])
    try:
        converted = otel.convert_document(document, extraction_keys())
    except otel.ExternalFormatError as exc:
        raise RecordError(f"{external}: {exc}") from None
    if not converted:
        raise RecordError(f"{external}: no tool spans in this document")
    if _holds_nul(converted):
        # JSON text inside a span's attributes, decoded by the adapter, can hold one too.
        raise RecordError(f"{external}: {NUL_REASON}")
    records = []
    for index, item in enumerate(converted):
        try:
            records.append(parse_record(item))
        except RecordError as exc:
            raise RecordError(f"{external}: span record {index + 1}: {exc}") from None
    return DecodedUnit(external, records, converted)


def _holds_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_holds_nul(key) or _holds_nul(item) for key, item in value.items())
    if isinstance(value, list):
        return any(_holds_nul(item) for item in value)
    return False
