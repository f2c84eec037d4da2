"""Redacting a received line of an external format (OTLP, OpenInference, ...) as it is
kept, beside the native records converted from it: its raw bytes hold the same values in
other places. Matched here, more widely than in records:

- a key anywhere, and a dotted path by its last step anywhere (its place in the export is
  not the record's);
- an attribute pair {"key": K, "value": {...}} whose K a rule matches: the value inside;
- JSON held in a text (tool arguments and results, as exports carry them): decoded,
  redacted and encoded again."""

from __future__ import annotations

import json
from typing import Any

from reviewapp.privacy.rules import Redactor, Rule, RuleSet

_JSON_OPENERS = ("{", "[")


class RawRedactor(Redactor):
    def __init__(self, rules: RuleSet, *, secret: bytes | None = None):
        super().__init__(rules, secret=secret)
        self._by_key = {**{path[-1]: rule for path, rule in rules.by_path.items()}, **rules.by_key}
        self._by_path = {}

    def document(self, payload: bytes, patterns: tuple[Rule, ...]) -> bytes | None:
        """The line's bytes redacted (compact JSON), or None when nothing matched."""
        document = json.loads(payload)
        redacted = self.redact(document, patterns)
        if redacted is document:
            return None
        return json.dumps(redacted, ensure_ascii=False, separators=(",", ":")).encode()

    def _walk(self, value: Any, path: tuple[str, ...]) -> Any:
        if type(value) is dict:
            key, inner = value.get("key"), value.get("value")
            rule = self._by_key.get(key) if isinstance(key, str) else None
            if rule is not None and isinstance(inner, dict):
                return {**value, "value": self._leaves(inner, rule)}
        if type(value) is str and value.lstrip().startswith(_JSON_OPENERS):
            embedded = _json_of(value)
            if embedded is not None:
                redacted = super()._walk(embedded, ())
                if redacted is not embedded:
                    return json.dumps(redacted, ensure_ascii=False)
        return super()._walk(value, path)


def _json_of(text: str) -> Any:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, (dict, list)) else None
