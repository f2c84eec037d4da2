"""Policy documents as people change them: one proposed change applied to a document,
what a rule means in a sentence, and the difference between two versions.

Pure functions over JSON documents; every result is validated by the engine's loader, and
every change first refused when it holds a NUL, which PostgreSQL cannot store."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

from reviewapp.engine import PolicyError, load_policy
from reviewapp.infra.storable_text import NUL_REFUSAL, nul_location

RULE_CHANGES = ("authoritative-source", "higher-source-revision", "require-review")
_RULE_KEYS = {
    "authoritative-source": ("field", "actions", "source", "unlessValues"),
    "higher-source-revision": ("field", "actions", "revisionDomain"),
    "require-review": ("field", "actions"),
}


def _without_version(document: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in document.items() if key != "version"}


def _fresh_rule_id(document: dict[str, Any], change: dict[str, Any], kind: str) -> str:
    taken = {rule.get("id") for rule in document.get("rules", [])}
    base = {
        "authoritative-source": f"{change.get('source')}-owns-{change.get('field')}",
        "higher-source-revision": f"newest-{change.get('field')}",
        "require-review": f"review-{change.get('field')}",
    }[kind].replace("*", "any-field")
    candidate, number = base, 2
    while candidate in taken:
        candidate, number = f"{base}-{number}", number + 1
    return candidate


def apply_change(document: dict[str, Any], kind: str, change: dict[str, Any]) -> dict[str, Any]:
    """A new document with one change applied; raises PolicyError (paths named) or
    ValueError when the result is not a valid policy. The input is left untouched."""
    nul_at = nul_location(change)
    if nul_at is not None:
        raise PolicyError([f"{nul_at}: {NUL_REFUSAL}"])
    if kind == "document":
        result = _without_version(copy.deepcopy(change["document"]))
    else:
        result = _without_version(copy.deepcopy(document))
        if kind in RULE_CHANGES:
            rule = {"id": change.get("id") or _fresh_rule_id(result, change, kind), "kind": kind}
            rule.update(
                {
                    key: change[key]
                    for key in _RULE_KEYS[kind]
                    if change.get(key) not in (None, [], "")
                }
            )
            result.setdefault("rules", []).append(rule)
        elif kind == "normalizer":
            result.setdefault("fields", {}).setdefault(change["field"], {})["normalize"] = change[
                "normalize"
            ]
        elif kind == "harmless-error":
            spec = result.setdefault("fields", {}).setdefault(change["field"], {})
            spec["harmlessErrors"] = sorted({*spec.get("harmlessErrors", []), change["code"]})
        else:
            raise ValueError(f'unknown change kind "{kind}"')
    load_policy(result)
    return result


def _quoted(values: list[Any]) -> str:
    return ", ".join(json.dumps(v) if not isinstance(v, str) else v for v in values)


def describe_rule(rule: dict[str, Any]) -> str:
    """What a rule means, in one sentence a reviewer can check."""
    field_name = rule.get("field")
    subject = "every field" if field_name == "*" else f"`{field_name}`"
    actions = rule.get("actions")
    when = (
        f" when the agent's next action is {_quoted(actions)}"
        if actions
        else " whatever the agent does next"
    )
    if rule.get("kind") == "authoritative-source":
        unless = (
            f", unless a value is {_quoted(rule['unlessValues'])}"
            if rule.get("unlessValues")
            else ""
        )
        return f"{rule.get('source')} owns {subject}{when}{unless}."
    if rule.get("kind") == "higher-source-revision":
        domain = (
            f" in the `{rule['revisionDomain']}` revision domain"
            if rule.get("revisionDomain")
            else " within one revision domain"
        )
        return f"For {subject}, the highest source revision wins{domain}{when}."
    if rule.get("kind") == "require-review":
        return f"A disagreement on {subject} always goes to a person{when}."
    return f"Unknown rule kind {rule.get('kind')!r}."


def describe_change(kind: str, change: dict[str, Any]) -> str:
    if kind in RULE_CHANGES:
        return describe_rule({"kind": kind, **change})
    if kind == "normalizer":
        spec = change.get("normalize", {})
        flags = [name for name in ("caseInsensitive", "collapseWhitespace") if spec.get(name)]
        aliases = f" with aliases {spec['aliases']}" if spec.get("aliases") else ""
        extra = f" ({', '.join(flags)})" if flags else ""
        return f"`{change.get('field')}` values are compared as {spec.get('kind', 'none')}{extra}{aliases}."
    if kind == "harmless-error":
        return f"The error {change.get('code')} does not make `{change.get('field')}` a partial result."
    if kind == "document":
        return "Replace the whole policy with an imported document."
    return kind


def overlaps(document: dict[str, Any], kind: str, change: dict[str, Any]) -> list[str]:
    """What in `document` the change would meet, each said in a sentence: rules tried before
    it for the same field and action (a new rule goes last, so those decide first), or the
    field's setting it would replace or extend. Empty when it overlaps nothing."""
    found: list[str] = []
    field_name = change.get("field")
    if kind in RULE_CHANGES:
        actions = set(change.get("actions") or ())
        for rule in document.get("rules", []):
            same_field = "*" in (rule.get("field"), field_name) or rule.get("field") == field_name
            theirs = set(rule.get("actions") or ())
            same_action = not actions or not theirs or bool(actions & theirs)
            if same_field and same_action:
                found.append(
                    f"Rule `{rule.get('id')}` is tried first where both apply: "
                    f"{describe_rule(rule)}"
                )
        return found
    spec = document.get("fields", {}).get(field_name, {})
    if kind == "normalizer" and spec.get("normalize"):
        found.append(
            f"`{field_name}` is already compared as {spec['normalize'].get('kind')}: "
            "this replaces it."
        )
    if kind == "harmless-error" and change.get("code") in spec.get("harmlessErrors", []):
        found.append(f"The error {change.get('code')} is already harmless for `{field_name}`.")
    return found


@dataclass
class PolicyDiff:
    rules_added: list[dict[str, Any]] = field(default_factory=list)
    rules_removed: list[dict[str, Any]] = field(default_factory=list)
    rules_changed: list[tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=list)
    fields_added: list[tuple[str, Any]] = field(default_factory=list)
    fields_removed: list[tuple[str, Any]] = field(default_factory=list)
    fields_changed: list[tuple[str, Any, Any]] = field(default_factory=list)
    sections_changed: list[tuple[str, Any, Any]] = field(default_factory=list)

    @property
    def is_empty(self) -> bool:
        return not any(vars(self).values())

    def lines(self) -> list[tuple[str, str]]:
        """("+" | "-" | "~", what changed) for people to read."""
        shown = [("+", f"rule {r.get('id')}: {describe_rule(r)}") for r in self.rules_added]
        shown += [("-", f"rule {r.get('id')}: {describe_rule(r)}") for r in self.rules_removed]
        shown += [
            (
                "~",
                f"rule {new.get('id')}: {describe_rule(old)} → {describe_rule(new)}"
                + ("" if old != new else " (moved)"),
            )
            for old, new in self.rules_changed
        ]
        shown += [("+", f"field {name}: {_compact(spec)}") for name, spec in self.fields_added]
        shown += [("-", f"field {name}: {_compact(spec)}") for name, spec in self.fields_removed]
        shown += [
            ("~", f"field {name}: {_compact(old)} → {_compact(new)}")
            for name, old, new in self.fields_changed
        ]
        shown += [
            ("~", f"{key}: {_compact(old)} → {_compact(new)}")
            for key, old, new in self.sections_changed
        ]
        return shown


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def diff_documents(old: dict[str, Any], new: dict[str, Any]) -> PolicyDiff:
    """Rules (matched by id, order changes shown as changes), fields, and other sections."""
    diff = PolicyDiff()
    old_rules = {r.get("id"): (i, r) for i, r in enumerate(old.get("rules", []))}
    new_rules = {r.get("id"): (i, r) for i, r in enumerate(new.get("rules", []))}
    for rule_id, (position, rule) in new_rules.items():
        if rule_id not in old_rules:
            diff.rules_added.append(rule)
        elif old_rules[rule_id][1] != rule or old_rules[rule_id][0] != position:
            diff.rules_changed.append((old_rules[rule_id][1], rule))
    diff.rules_removed = [
        rule for rule_id, (_, rule) in old_rules.items() if rule_id not in new_rules
    ]
    old_fields, new_fields = old.get("fields", {}), new.get("fields", {})
    diff.fields_added = [
        (name, spec) for name, spec in new_fields.items() if name not in old_fields
    ]
    diff.fields_removed = [
        (name, spec) for name, spec in old_fields.items() if name not in new_fields
    ]
    diff.fields_changed = [
        (name, old_fields[name], spec)
        for name, spec in new_fields.items()
        if name in old_fields and old_fields[name] != spec
    ]
    for key in sorted((set(old) | set(new)) - {"rules", "fields", "version"}):
        if old.get(key) != new.get(key):
            diff.sections_changed.append((key, old.get(key), new.get(key)))
    return diff


@dataclass(frozen=True)
class ChangeScope:
    """Where a change of policy means to act: the (field, actions) of every rule it adds,
    removes, changes or moves, and every field whose setting it changes (any action). A
    field "*" is every field; no actions is every action; `everything` when a section that
    applies to every group changed (safe actions, identity...), or the whole document did."""

    reaches_: frozenset[tuple[str, frozenset[str]]] = frozenset()
    everything: bool = False

    def reaches(self, field_name: str | None, action: str | None) -> bool:
        if self.everything:
            return True
        for scoped_field, actions in self.reaches_:
            if scoped_field in ("*", field_name) and (not actions or action in actions):
                return True
        return False

    def describe(self) -> str:
        """In words, for a page: "`status` when the next action is ship_goods; `amount`"."""
        if self.everything:
            return "every group"
        parts = []
        for scoped_field, actions in sorted(self.reaches_, key=lambda p: (p[0], sorted(p[1]))):
            subject = "every field" if scoped_field == "*" else f"`{scoped_field}`"
            parts.append(
                f"{subject} when the next action is {_quoted(sorted(actions))}"
                if actions
                else subject
            )
        return "; ".join(parts) or "nothing"


# Sections that only name the policy: changing them changes no verdict.
_NAMING_SECTIONS = {"name", "description"}


def change_scope(old: dict[str, Any], new: dict[str, Any]) -> ChangeScope:
    """Where going from `old` to `new` means to act (diff_documents, read as ChangeScope)."""
    diff = diff_documents(old, new)
    if any(key not in _NAMING_SECTIONS for key, _, _ in diff.sections_changed):
        return ChangeScope(everything=True)
    rules = [*diff.rules_added, *diff.rules_removed]
    rules += [rule for pair in diff.rules_changed for rule in pair]
    reaches = {
        (str(rule.get("field") or "*"), frozenset(rule.get("actions") or ())) for rule in rules
    }
    touched = [*diff.fields_added, *diff.fields_removed, *diff.fields_changed]
    reaches |= {(str(name), frozenset()) for name, *_ in touched}
    return ChangeScope(frozenset(reaches))
