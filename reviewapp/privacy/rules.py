"""Redaction rules: what to take out of a record (values under named keys or dotted paths,
values matching a named pattern), how each is canonicalised, and applying them.

A rule set document:

    {"rules": [
        {"name": "order ids", "keys": ["orderId", "subject.orderId"], "canonical": "trim"},
        {"name": "emails", "pattern": "email", "canonical": "casefold", "keep_raw": true}
    ]}

A key without a dot matches that key anywhere in a record; a dotted one is a path from the
record's top (list items are walked through: `items.email` is every item's email). A
matched value is replaced by its stable token (tokens.token_of); an object or list under a
matched key keeps its shape, each value in it replaced. A pattern replaces the matching
part of any text. Keys the oracle reads (PROTECTED_KEYS, the policy's decision fields)
are refused here; a rule that would still change a verdict is refused by privacy.impact."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from reviewapp.privacy.tokens import CANONICAL, is_token, token_of

# Keys whose values the oracle reads for more than equality, or whose type it checks:
# never redacted.
PROTECTED_KEYS = frozenset(
    "runId type observationId toolCallId source revisionDomain sourceRevision field value errors "
    "fallback eventId deliveryId name tool kind ok outcome attempt disputedFields evidenceIds "
    "safeActions seq startedAt completedAt".split()
)
RULE_KEYS = frozenset({"name", "keys", "pattern", "canonical", "keep_raw"})

# Card numbers: 13 to 19 digits, spaces or dashes between them, not inside a word (a
# token's hex digits are), and passing the Luhn check (_card).
_CARD = re.compile(r"(?<![\w.])\d(?:[ -]?\d){12,18}(?![\w.])")
_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
PATTERNS: dict[str, re.Pattern[str]] = {"email": _EMAIL, "card": _CARD}
# What a line's bytes must hold for a pattern to match in it (a cheap test before parsing).
_RAW_HINTS: dict[str, Callable[[bytes], bool]] = {
    "email": lambda raw: b"@" in raw,
    # Wider than a card (digits, spaces and dashes, 13 long or more): found without the
    # backtracking the card's own expression does over a timestamp.
    "card": re.compile(rb"\d[\d -]{11,}\d").search,  # type: ignore[dict-item]
}


MEMO_SIZE = 50_000


class RuleError(ValueError):
    """A rule set document that cannot be used, with what is wrong in it."""


def luhn(digits: str) -> bool:
    total = 0
    for index, digit in enumerate(reversed(digits)):
        value = int(digit) * (2 if index % 2 else 1)
        total += value - 9 if value > 9 else value
    return total % 10 == 0


@dataclass(frozen=True)
class Rule:
    name: str
    keys: tuple[str, ...] = ()
    pattern: str = ""
    canonical: str = "exact"
    keep_raw: bool = False

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.keys:
            out["keys"] = list(self.keys)
        if self.pattern:
            out["pattern"] = self.pattern
        return out | {"canonical": self.canonical, "keep_raw": self.keep_raw}


@dataclass(frozen=True)
class RuleSet:
    rules: tuple[Rule, ...] = ()
    by_key: dict[str, Rule] = field(default_factory=dict, compare=False)
    by_path: dict[tuple[str, ...], Rule] = field(default_factory=dict, compare=False)
    patterns: tuple[Rule, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        for rule in self.rules:
            for key in rule.keys:
                if "." in key:
                    self.by_path[tuple(key.split("."))] = rule
                else:
                    self.by_key[key] = rule
        object.__setattr__(self, "patterns", tuple(r for r in self.rules if r.pattern))

    @classmethod
    def of_keys(cls, keys: Iterable[str], canonical: str = "exact") -> RuleSet:
        """One rule taking out these keys (a replay export's redaction)."""
        return cls((Rule("keys", tuple(sorted(keys)), canonical=canonical),))

    def __bool__(self) -> bool:
        return bool(self.rules)

    def as_document(self) -> dict[str, Any]:
        return {"rules": [rule.as_dict() for rule in self.rules]}

    @property
    def matched_keys(self) -> frozenset[str]:
        """Every key name a rule matches (a path's last step)."""
        return frozenset(self.by_key) | {path[-1] for path in self.by_path}


def refused_keys(keys: Iterable[str], decision_fields: Iterable[str]) -> list[str]:
    """The keys (or a path's last step) the oracle needs, of these: PROTECTED_KEYS and the
    policy's decision fields."""
    decision = set(decision_fields)
    return sorted({key for key in keys if key.rsplit(".", 1)[-1] in PROTECTED_KEYS | decision})


def oracle_refusal(refused: list[str]) -> str:
    """Why these keys (refused_keys) are not redacted, in words."""
    return (
        f"cannot redact {', '.join(refused)}: the oracle needs "
        f"{'it' if len(refused) == 1 else 'them'} (decision fields and the keys records are "
        "judged by)"
    )


def parse_rules(document: Any, decision_fields: Iterable[str] | None = None) -> RuleSet:
    """Check a rule set document; RuleError saying what is wrong. With a policy's
    `decision_fields`, keys the oracle reads are refused too."""
    if not isinstance(document, dict) or set(document) - {"rules"}:
        raise RuleError('a rule set is an object with one key, "rules": a list of rules')
    items = document.get("rules", [])
    if not isinstance(items, list):
        raise RuleError('"rules" must be a list')
    rules: list[Rule] = []
    names: set[str] = set()
    taken: dict[str, str] = {}
    for index, item in enumerate(items, 1):
        rule = _rule(index, item)
        if rule.name in names:
            raise RuleError(f"rule {index}: another rule is named {rule.name!r}")
        names.add(rule.name)
        for key in rule.keys:
            if key in taken:
                raise RuleError(f"rule {rule.name!r}: {key!r} is matched by {taken[key]!r} too")
            taken[key] = rule.name
        rules.append(rule)
    if decision_fields is not None:
        refused = refused_keys(taken, decision_fields)
        if refused:
            raise RuleError(oracle_refusal(refused))
    return RuleSet(tuple(rules))


def _rule(index: int, item: Any) -> Rule:
    if not isinstance(item, dict):
        raise RuleError(f"rule {index}: must be an object")
    unknown = sorted(set(item) - RULE_KEYS)
    if unknown:
        raise RuleError(f"rule {index}: unknown key(s) {', '.join(unknown)}")
    name = item.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > 100:
        raise RuleError(f"rule {index}: needs a name (text, up to 100 characters)")
    where = f"rule {name!r}"
    keys = item.get("keys", [])
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise RuleError(f"{where}: keys must be a list of key names or dotted paths")
    for key in keys:
        if not key or any(not step for step in key.split(".")):
            raise RuleError(f"{where}: {key!r} is not a key name or a dotted path")
    pattern = item.get("pattern", "")
    if pattern and pattern not in PATTERNS:
        raise RuleError(f"{where}: no pattern named {pattern!r}: one of {', '.join(PATTERNS)}")
    if not keys and not pattern:
        raise RuleError(f"{where}: matches nothing: give keys, a pattern, or both")
    canonical = item.get("canonical", "exact")
    if canonical not in CANONICAL:
        raise RuleError(
            f"{where}: no canonicalisation named {canonical!r}: one of {', '.join(CANONICAL)}"
        )
    keep_raw = item.get("keep_raw", False)
    if not isinstance(keep_raw, bool):
        raise RuleError(f"{where}: keep_raw must be true or false")
    return Rule(name.strip(), tuple(dict.fromkeys(keys)), pattern, canonical, keep_raw)


class Redactor:
    """Applies a rule set to decoded JSON, returning the same object when nothing matched.
    Tokens are under REDACTION_SECRET, or `secret` (an export's own). Values a keep_raw
    rule matched are collected in `kept` as (token, raw text, rule name) until taken."""

    def __init__(self, rules: RuleSet, *, secret: bytes | None = None):
        self.rules = rules
        self._secret = secret if secret is not None else settings.REDACTION_SECRET.encode()
        # Tokens of texts met lately: an id recurs in most records of its run.
        self._memo: dict[tuple[str, str], str] = {}
        self._by_key = rules.by_key
        self._by_path = rules.by_path
        self._patterns = self._active = rules.patterns
        self.kept: list[tuple[str, str, str]] = []
        self._raw_keys = tuple(b'"' + key.encode() for key in rules.matched_keys)
        self._raw_hints = tuple((_RAW_HINTS[rule.pattern], rule) for rule in self._patterns)

    def patterns_in(self, raw: bytes) -> tuple[Rule, ...] | None:
        """What may match in a line of these bytes: None when no rule can (nothing to
        parse), else the pattern rules that can (redact() applies only those)."""
        if not self.rules:
            return None
        if b"\\u" in raw:  # an escaped key name or value: only parsing tells
            return self._patterns
        patterns = tuple(rule for hint, rule in self._raw_hints if hint(raw))
        if patterns:
            return patterns
        for key in self._raw_keys:
            if key in raw:
                return patterns
        return None

    def may_match(self, raw: bytes) -> bool:
        return self.patterns_in(raw) is not None

    def __call__(self, value: Any) -> Any:
        return self._walk(value, ())

    def redact(self, value: Any, patterns: tuple[Rule, ...]) -> Any:
        """`value` redacted by the key rules and only these pattern rules."""
        self._active = patterns
        try:
            return self._walk(value, ())
        finally:
            self._active = self._patterns

    def token(self, value: Any, rule: Rule) -> str:
        if type(value) is str:
            memo = self._memo
            token = memo.get((value, rule.canonical))
            if token is None:
                if len(memo) >= MEMO_SIZE:
                    memo.clear()
                token = memo[value, rule.canonical] = token_of(
                    value, rule.canonical, secret=self._secret
                )
        else:
            token = token_of(value, rule.canonical, secret=self._secret)
        if rule.keep_raw:
            raw = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            self.kept.append((token, raw, rule.name))
        return token

    def take_kept(self) -> list[tuple[str, str, str]]:
        kept, self.kept = self.kept, []
        return kept

    def _walk(self, value: Any, path: tuple[str, ...]) -> Any:
        kind = type(value)
        if kind is dict:
            changed: dict[str, Any] | None = None
            for key, item in value.items():
                below = (*path, key) if self._by_path else path
                rule = self._by_key.get(key) or (self._by_path.get(below) if below else None)
                new = self._leaves(item, rule) if rule is not None else self._walk(item, below)
                if new is not item:
                    if changed is None:
                        changed = dict(value)
                    changed[key] = new
            return value if changed is None else changed
        if kind is list:
            items = [self._walk(item, path) for item in value]
            return value if all(a is b for a, b in zip(items, value, strict=True)) else items
        if kind is str and self._active:
            return self.text(value)
        return value

    def _leaves(self, value: Any, rule: Rule) -> Any:
        """Every value under a matched key, tokenised, in the shape it has (null stays
        null: nothing to hide; a token stays itself: redacting twice changes nothing)."""
        if isinstance(value, dict):
            return {key: self._leaves(item, rule) for key, item in value.items()}
        if isinstance(value, list):
            return [self._leaves(item, rule) for item in value]
        if value is None or is_token(value):
            return value
        return self.token(value, rule)

    def text(self, text: str) -> str:
        """A text with every part a pattern matches replaced by its token."""
        if is_token(text):
            return text
        for rule in self._active:
            text = PATTERNS[rule.pattern].sub(self._replacer(rule), text)
        return text

    def _replacer(self, rule: Rule) -> Callable[[re.Match[str]], str]:
        if rule.pattern == "card":
            return lambda match: self._card(match.group(), rule)
        return lambda match: self.token(match.group(), rule)

    def _card(self, found: str, rule: Rule) -> str:
        digits = found.replace(" ", "").replace("-", "")
        return self.token(found, rule) if luhn(digits) else found
