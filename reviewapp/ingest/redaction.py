"""The active redaction rules applied to lines as they are decoded (privacy.rules): a
native line that a rule matches is stored as its redacted record (compact JSON); an
external one keeps its converted records and its own bytes redacted; a rejected line has
its patterns taken out. A line's identity stays that of the bytes that arrived, so the
same line delivered again is still a duplicate. Lines nothing can match (a test of their
bytes) are not parsed again."""

from __future__ import annotations

import json
from dataclasses import replace

import msgspec

from reviewapp.engine import Record, RecordError, parse_record
from reviewapp.ingest.formats import NATIVE, DecodedUnit
from reviewapp.privacy.protected import ProtectedValues
from reviewapp.privacy.raw import RawRedactor
from reviewapp.privacy.rules import Redactor, RuleSet
from reviewapp.privacy.versions import active_rules


class LineRedaction:
    """One ingest's rules (read once, when it starts) and the raw values they keep."""

    def __init__(self, rules: RuleSet):
        self.records = Redactor(rules)
        self.raw = RawRedactor(rules)
        self._protected = ProtectedValues()

    def unit(self, payload: bytes, unit: DecodedUnit) -> tuple[DecodedUnit, bytes | None]:
        """The unit redacted, and the bytes to store for its line (None: as they came)."""
        patterns = self.records.patterns_in(payload)
        if patterns is None:
            return unit, None
        redact = self.records.redact
        if unit.format == NATIVE:
            original = unit.documents[0]
            document = redact(original, patterns)
            if document is original:
                return unit, None
            return DecodedUnit(NATIVE, [_parsed(document)], [document]), _encoded(document)
        documents = [redact(document, patterns) for document in unit.documents]
        if all(a is b for a, b in zip(documents, unit.documents, strict=True)):
            return unit, self.raw.document(payload, patterns)
        records = [
            record if document is original else _parsed(document)
            for record, document, original in zip(
                unit.records, documents, unit.documents, strict=True
            )
        ]
        redacted = replace(unit, records=records, documents=documents)
        return redacted, self.raw.document(payload, patterns)

    def rejected(self, raw: bytes) -> bytes | None:
        """A rejected line's bytes with what the patterns match taken out (its keys cannot
        be found in what does not parse)."""
        patterns = self.records.patterns_in(raw)
        if not patterns:
            return None
        try:
            text = raw.decode()
        except UnicodeDecodeError:
            return None
        redacted = self.records.redact(text, patterns)
        return None if redacted == text else redacted.encode()

    def kept(self) -> list[tuple[str, str, bytes]]:
        """(token, rule, ciphertext) of the raw values kept since asked last, each token
        once an ingest."""
        if not self.records.kept and not self.raw.kept:
            return []
        rows = self._protected.encrypt(self.records.take_kept())
        return rows + self._protected.encrypt(self.raw.take_kept())


def ingest_redaction() -> LineRedaction | None:
    """The active rules for an ingest starting now; None when there are none."""
    rules = active_rules()
    return LineRedaction(rules) if rules else None


def _parsed(document: dict) -> Record:
    try:
        return parse_record(document)
    except RecordError as exc:
        raise RecordError(f"invalid once redacted: {exc}") from None


def _encoded(document: dict) -> bytes:
    try:
        return msgspec.json.encode(document)
    except (OverflowError, msgspec.EncodeError):
        return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode()
