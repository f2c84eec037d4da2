"""Policy documents (spec/policy.md): validation with errors that name the bad path, and
the frozen Policy the judge reads."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .normalize import NORMALIZER_KINDS, Normalizer, resolve_aliases
from .records import json_type_name

RULE_KINDS = ("higher-source-revision", "authoritative-source", "require-review")
IDENTITY_MODES = ("blocking", "report-only")
DEFAULT_SAFE_ACTIONS = ("request_review", "stop")
ANY_FIELD = "*"


class PolicyError(ValueError):
    """A policy document that cannot be used; `errors` lists every problem as `path: message`."""

    def __init__(self, errors: list[str]):
        self.errors = errors
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        super().__init__(f"{errors[0]}{more}")


@dataclass(frozen=True, slots=True)
class FieldPolicy:
    name: str
    normalizer: Normalizer = field(default_factory=Normalizer)
    harmless_errors: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    kind: str
    field: str
    actions: frozenset[str] | None = None  # None: any action
    source: str | None = None
    unless_values: tuple[Any, ...] = ()
    revision_domain: str | None = None

    def matches(self, field_name: str, action: str | None) -> bool:
        if self.field != ANY_FIELD and self.field != field_name:
            return False
        return self.actions is None or action in self.actions


@dataclass(frozen=True, slots=True)
class Prerequisite:
    tool: str
    requires: str


@dataclass(frozen=True, slots=True)
class Trajectory:
    allowed_tools: frozenset[str] | None = None
    mutating_tools: frozenset[str] = frozenset()
    scope_argument: str | None = None
    prerequisites: tuple[Prerequisite, ...] = ()
    max_mutations_per_op: int | None = None


@dataclass(frozen=True, slots=True)
class Policy:
    version: int | None = None
    name: str | None = None
    safe_actions: frozenset[str] = frozenset(DEFAULT_SAFE_ACTIONS)
    fields: Mapping[str, FieldPolicy] = field(default_factory=dict)
    rules: tuple[Rule, ...] = ()
    identity_mode: str = "blocking"
    trajectory: Trajectory | None = None

    @property
    def decision_fields(self) -> tuple[str, ...]:
        """Fields named in `fields` or by a rule: the only ones ever compared."""
        named = dict.fromkeys(self.fields)
        named.update(dict.fromkeys(r.field for r in self.rules if r.field != ANY_FIELD))
        return tuple(named)

    def field_policy(self, name: str) -> FieldPolicy:
        return self.fields.get(name) or FieldPolicy(name=name)


class _Checker:
    """Collects every problem of a document, each with its path."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def fail(self, path: str, message: str) -> None:
        self.errors.append(f"{path}: {message}")

    def typed(self, value: Any, kind: type, path: str, what: str) -> bool:
        if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
            return True
        self.fail(path, f"must be {what}, not {json_type_name(value)}")
        return False

    def keys(self, obj: Mapping[str, Any], allowed: tuple[str, ...], path: str) -> None:
        """Unknown keys are refused (a typo must not silently change a policy); notes for
        people, `description` and `comment`, are allowed anywhere."""
        for key in obj:
            if key not in allowed and key not in NOTE_KEYS:
                where = f"{path}.{key}" if path else key
                self.fail(where, f"unknown key (expected one of: {', '.join(allowed)})")

    def strings(self, value: Any, path: str) -> tuple[str, ...]:
        if not self.typed(value, list, path, "a list of strings"):
            return ()
        good = []
        for index, item in enumerate(value):
            if self.typed(item, str, f"{path}[{index}]", "a string"):
                good.append(item)
        return tuple(good)


NOTE_KEYS = ("description", "comment")
_TOP_KEYS = (
    "version",
    "name",
    "safeActions",
    "fields",
    "rules",
    "identity",
    "trajectory",
)
_FIELD_KEYS = ("normalize", "harmlessErrors")
_NORMALIZE_KEYS = {
    "none": ("kind",),
    "enum": ("kind", "caseInsensitive", "aliases"),
    "text": ("kind", "caseInsensitive", "collapseWhitespace"),
    "money": ("kind",),
}
_RULE_KEYS = {
    "higher-source-revision": ("id", "kind", "field", "actions", "revisionDomain"),
    "authoritative-source": ("id", "kind", "field", "actions", "source", "unlessValues"),
    "require-review": ("id", "kind", "field", "actions"),
}
_ANY_RULE_KEYS = tuple(dict.fromkeys(key for keys in _RULE_KEYS.values() for key in keys))
_TRAJECTORY_KEYS = (
    "allowedTools",
    "mutatingTools",
    "scopeArgument",
    "prerequisites",
    "maxMutationsPerOp",
)


def _normalizer(check: _Checker, spec: Any, path: str) -> Normalizer:
    if not check.typed(spec, dict, path, "an object"):
        return Normalizer()
    kind = spec.get("kind", "none")
    if kind not in NORMALIZER_KINDS:
        check.fail(
            f"{path}.kind",
            f'unknown kind "{kind}" (expected one of: {", ".join(NORMALIZER_KINDS)})',
        )
        return Normalizer()
    check.keys(spec, _NORMALIZE_KEYS[kind], path)
    flags = {}
    for key in ("caseInsensitive", "collapseWhitespace"):
        if key in spec and check.typed(spec[key], bool, f"{path}.{key}", "true or false"):
            flags[key] = spec[key]
    aliases: dict[str, str] = {}
    if "aliases" in spec and check.typed(spec["aliases"], dict, f"{path}.aliases", "an object"):
        for key, target in spec["aliases"].items():
            if check.typed(target, str, f"{path}.aliases.{key}", "a string"):
                aliases[key] = target
        try:
            aliases = resolve_aliases(aliases, flags.get("caseInsensitive", False))
        except ValueError as exc:
            check.fail(f"{path}.aliases", str(exc))
    return Normalizer(
        kind=kind,
        case_insensitive=flags.get("caseInsensitive", False),
        collapse_whitespace=flags.get("collapseWhitespace", False),
        aliases=aliases,
    )


def _fields(check: _Checker, spec: Any) -> dict[str, FieldPolicy]:
    if not check.typed(spec, dict, "fields", "an object"):
        return {}
    fields = {}
    for name, body in spec.items():
        path = f"fields.{name}"
        if name == ANY_FIELD or not name:
            check.fail(path, "a field needs a name")
            continue
        if not check.typed(body, dict, path, "an object"):
            continue
        check.keys(body, _FIELD_KEYS, path)
        normalizer = _normalizer(check, body.get("normalize", {}), f"{path}.normalize")
        harmless = check.strings(body.get("harmlessErrors", []), f"{path}.harmlessErrors")
        fields[name] = FieldPolicy(
            name=name, normalizer=normalizer, harmless_errors=frozenset(harmless)
        )
    return fields


def _rules(check: _Checker, spec: Any) -> tuple[Rule, ...]:
    if not check.typed(spec, list, "rules", "a list"):
        return ()
    rules, seen_ids = [], set()
    for index, body in enumerate(spec):
        path = f"rules[{index}]"
        if not check.typed(body, dict, path, "an object"):
            continue
        kind = body.get("kind")
        if kind not in RULE_KINDS:
            shown = f'"{kind}"' if isinstance(kind, str) else json_type_name(kind)
            check.fail(
                f"{path}.kind", f"unknown kind {shown} (expected one of: {', '.join(RULE_KINDS)})"
            )
            continue
        # A key of another rule kind is accepted and means nothing here.
        check.keys(body, _ANY_RULE_KEYS, path)
        rule_id = body.get("id", f"R{index + 1}")
        if check.typed(rule_id, str, f"{path}.id", "a string"):
            if rule_id in seen_ids:
                check.fail(f"{path}.id", f'"{rule_id}" is used by an earlier rule')
            seen_ids.add(rule_id)
        field_name = body.get("field")
        if field_name is None:
            check.fail(f"{path}.field", 'required (a field name, or "*" for every field)')
        else:
            check.typed(field_name, str, f"{path}.field", "a string")
        actions = None
        if "actions" in body:
            actions = frozenset(check.strings(body["actions"], f"{path}.actions"))
        source = body.get("source")
        if kind == "authoritative-source":
            if source is None:
                check.fail(f"{path}.source", "required for an authoritative-source rule")
            else:
                check.typed(source, str, f"{path}.source", "a string")
        unless: tuple[Any, ...] = ()
        if "unlessValues" in body and check.typed(
            body["unlessValues"], list, f"{path}.unlessValues", "a list"
        ):
            unless = tuple(body["unlessValues"])
        domain = body.get("revisionDomain")
        if domain is not None:
            check.typed(domain, str, f"{path}.revisionDomain", "a string")
        rules.append(
            Rule(
                id=rule_id if isinstance(rule_id, str) else str(rule_id),
                kind=kind,
                field=field_name if isinstance(field_name, str) else "",
                actions=actions,
                source=source if isinstance(source, str) else None,
                unless_values=unless,
                revision_domain=domain if isinstance(domain, str) else None,
            )
        )
    return tuple(rules)


def _trajectory(check: _Checker, spec: Any) -> Trajectory | None:
    if not check.typed(spec, dict, "trajectory", "an object"):
        return None
    check.keys(spec, _TRAJECTORY_KEYS, "trajectory")
    allowed = None
    if "allowedTools" in spec:
        allowed = frozenset(check.strings(spec["allowedTools"], "trajectory.allowedTools"))
    mutating = frozenset(check.strings(spec.get("mutatingTools", []), "trajectory.mutatingTools"))
    scope = spec.get("scopeArgument")
    if scope is not None and not check.typed(scope, str, "trajectory.scopeArgument", "a string"):
        scope = None
    prerequisites = []
    raw_prerequisites = spec.get("prerequisites", [])
    if check.typed(raw_prerequisites, list, "trajectory.prerequisites", "a list"):
        for index, item in enumerate(raw_prerequisites):
            path = f"trajectory.prerequisites[{index}]"
            if not check.typed(item, dict, path, "an object"):
                continue
            check.keys(item, ("tool", "requires"), path)
            tool, requires = item.get("tool"), item.get("requires")
            if check.typed(tool, str, f"{path}.tool", "a string") and check.typed(
                requires, str, f"{path}.requires", "a string"
            ):
                prerequisites.append(Prerequisite(tool=tool, requires=requires))
    budget = spec.get("maxMutationsPerOp")
    if budget is not None:
        if not check.typed(budget, int, "trajectory.maxMutationsPerOp", "a whole number"):
            budget = None
        elif budget < 0:
            check.fail("trajectory.maxMutationsPerOp", "must not be negative")
            budget = None
    return Trajectory(
        allowed_tools=allowed,
        mutating_tools=mutating,
        scope_argument=scope,
        prerequisites=tuple(prerequisites),
        max_mutations_per_op=budget,
    )


def load_policy(document: Any) -> Policy:
    """Validate a policy document and build the Policy; raises PolicyError listing every problem."""
    check = _Checker()
    if not isinstance(document, dict):
        raise PolicyError([f"(document): must be a JSON object, not {json_type_name(document)}"])
    check.keys(document, _TOP_KEYS, "")
    version = document.get("version")
    if (
        version is not None
        and check.typed(version, int, "version", "a whole number")
        and version < 1
    ):
        check.fail("version", "must be 1 or more")
    name = document.get("name")
    if name is not None:
        check.typed(name, str, "name", "a string")
    safe_actions: tuple[str, ...] = DEFAULT_SAFE_ACTIONS
    if "safeActions" in document:
        safe_actions = check.strings(document["safeActions"], "safeActions")
    fields = _fields(check, document.get("fields", {}))
    rules = _rules(check, document.get("rules", []))
    identity_mode = "blocking"
    identity = document.get("identity", {})
    if check.typed(identity, dict, "identity", "an object"):
        check.keys(identity, ("mode",), "identity")
        identity_mode = identity.get("mode", "blocking")
        if identity_mode not in IDENTITY_MODES:
            check.fail(
                "identity.mode",
                f'unknown mode "{identity_mode}" (expected blocking or report-only)',
            )
    trajectory = _trajectory(check, document["trajectory"]) if "trajectory" in document else None
    if check.errors:
        raise PolicyError(check.errors)
    return Policy(
        version=version,
        name=name,
        safe_actions=frozenset(safe_actions),
        fields=fields,
        rules=rules,
        identity_mode=identity_mode,
        trajectory=trajectory,
    )
