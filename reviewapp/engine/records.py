"""Native trace records (spec/traces.md): decoding one line and checking it into a
frozen dataclass, or refusing it with a one-line reason."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class RecordError(ValueError):
    """A line that cannot be accepted; the message is the one-line reason shown to users."""


class _Absent:
    """Marks a field an observation does not carry (distinct from a JSON null)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False


ABSENT: Any = _Absent()

# Keys of tool_observation that are never business fields.
RESERVED_OBSERVATION_KEYS = frozenset(
    "runId type observationId toolCallId source revisionDomain sourceRevision entity field "
    "value errors fallback eventId deliveryId startedAt completedAt arguments attempt".split()
)
# Where a tool call's requested entity is found when it has no `entity` key.
ENTITY_ARGUMENT_KEYS = ("entity", "orderId", "sku", "customerId", "accountId", "id")
OUTCOMES = frozenset({"success", "failure", "unknown"})


@dataclass(frozen=True, slots=True)
class RunStarted:
    run_id: str
    agent: str | None
    subject: Mapping[str, Any]
    started_at: str | None


@dataclass(frozen=True, slots=True)
class ToolCall:
    run_id: str
    tool_call_id: str
    tool: str
    arguments: Mapping[str, Any]
    entity: str | None  # the entity the call asked about
    ok: bool | None
    op_id: str | None
    idempotency_key: str | None
    attempt: int | None
    outcome: str | None
    started_at: str | None
    completed_at: str | None


@dataclass(frozen=True, slots=True)
class ObservationError:
    code: str | None
    message: str | None
    field: str | None  # None: the error concerns every field


FALLBACK_ERROR = ObservationError(code="FALLBACK", message="cached fallback value", field=None)


@dataclass(frozen=True, slots=True)
class Observation:
    run_id: str
    observation_id: str
    tool_call_id: str | None
    source: str
    revision_domain: str | None
    source_revision: int | None
    entity: str | None  # the identity the response echoed
    field: str | None
    value: Any  # ABSENT when the record has no `value` key
    data: Mapping[str, Any]  # the whole record, for top-level shorthand fields
    errors: tuple[ObservationError, ...]
    fallback: bool
    event_id: str | None
    delivery_id: str | None
    started_at: str | None
    completed_at: str | None

    def value_for(self, name: str) -> Any:
        """The raw value of decision field `name`, or ABSENT (spec/policy.md, first found)."""
        if self.field == name:
            return None if self.value is ABSENT else self.value
        if isinstance(self.value, dict) and name in self.value:
            return self.value[name]
        if name in self.data and name not in RESERVED_OBSERVATION_KEYS:
            return self.data[name]
        return ABSENT

    def payload(self) -> Any:
        """Every business value the record carries, for comparing two deliveries of one event."""
        extra = {k: v for k, v in self.data.items() if k not in RESERVED_OBSERVATION_KEYS}
        return {"field": self.field, "value": None if self.value is ABSENT else self.value, **extra}

    def errors_concerning(self, name: str) -> tuple[ObservationError, ...]:
        found = tuple(e for e in self.errors if e.field is None or e.field == name)
        return (*found, FALLBACK_ERROR) if self.fallback else found


@dataclass(frozen=True, slots=True)
class Resolution:
    run_id: str
    kind: str | None
    reason: str | None
    rule: str | None
    status: Any
    value: Any
    evidence_ids: tuple[str, ...]
    disputed_fields: tuple[str, ...]
    policy_version: Any
    confidence: Any
    reasoning: str | None

    @property
    def chosen_value(self) -> Any:
        return self.value if self.value is not None else self.status


@dataclass(frozen=True, slots=True)
class AgentAction:
    run_id: str
    name: str
    arguments: Mapping[str, Any]
    op_id: str | None
    idempotency_key: str | None
    outcome: str | None


Record = RunStarted | ToolCall | Observation | Resolution | AgentAction


# --- decoding ---------------------------------------------------------------------


def _object_without_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise RecordError(f'duplicate key "{key}"')
            seen.add(key)
    return obj


def _reject_constant(name: str) -> Any:
    raise RecordError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    number = float(text)
    if number in (_INFINITY, -_INFINITY):
        raise RecordError(f"number {text[:40]} is too large")
    return number


_INFINITY = float("inf")


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_JSON_TYPE_NAMES = {
    dict: "an object",
    list: "an array",
    str: "a string",
    bool: "a boolean",
    int: "a number",
    float: "a number",
    type(None): "null",
}


def json_type_name(value: Any) -> str:
    return _JSON_TYPE_NAMES.get(type(value), type(value).__name__)


def decode_line(raw: bytes | str) -> dict[str, Any]:
    """Decode one line of JSON Lines strictly: one object, UTF-8, no NaN, no duplicate keys."""
    if isinstance(raw, bytes):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RecordError(f"invalid UTF-8 at byte {exc.start + 1}") from None
    else:
        text = raw
    if text.startswith("\ufeff"):
        raise RecordError("starts with a byte order mark inside the file")
    try:
        obj = json.loads(
            text,
            object_pairs_hook=_object_without_duplicate_keys,
            parse_constant=_reject_constant,
            parse_float=_finite_float,
        )
    except RecordError:
        raise
    except RecursionError:
        raise RecordError("JSON nested too deeply") from None
    except json.JSONDecodeError as exc:
        message = exc.msg.removesuffix(" at")
        raise RecordError(f"not valid JSON: {message} at column {exc.colno}") from None
    except ValueError:
        # int() refuses more digits than sys.get_int_max_str_digits() allows.
        raise RecordError(
            f"integer too large (more than {sys.get_int_max_str_digits()} digits)"
        ) from None
    if not isinstance(obj, dict):
        raise RecordError(f"not a JSON object but {json_type_name(obj)}")
    if _SURROGATE_ESCAPE.search(text):
        try:
            json.dumps(obj, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise RecordError("contains an unpaired UTF-16 surrogate escape") from None
    return obj


# --- checking ---------------------------------------------------------------------


def _expect(obj: Mapping[str, Any], key: str, kind: type, *, required: bool = False) -> Any:
    value = obj.get(key)
    if value is None:
        if required:
            raise RecordError(f'missing required key "{key}"')
        return None
    # bool is an int in Python, never in JSON.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise RecordError(f'"{key}" must be {_JSON_TYPE_NAMES[kind]}, not {json_type_name(value)}')
    if required and kind is str and not value:
        raise RecordError(f'"{key}" must not be empty')
    return value


def _string_list(obj: Mapping[str, Any], key: str) -> tuple[str, ...]:
    items = _expect(obj, key, list) or []
    for index, item in enumerate(items):
        if not isinstance(item, str):
            raise RecordError(f'"{key}[{index}]" must be a string, not {json_type_name(item)}')
    return tuple(items)


def requested_entity(entity: str | None, arguments: Mapping[str, Any]) -> str | None:
    if entity is not None:
        return entity
    for key in ENTITY_ARGUMENT_KEYS:
        value = arguments.get(key)
        if isinstance(value, str) and value:
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
    return None


def _errors(obj: Mapping[str, Any]) -> tuple[ObservationError, ...]:
    items = _expect(obj, "errors", list)
    if not items:
        return ()
    errors = []
    for index, item in enumerate(items):
        if isinstance(item, str):
            errors.append(ObservationError(code=item, message=None, field=None))
        elif isinstance(item, dict):
            code, message, field = item.get("code"), item.get("message"), item.get("field")
            if field is not None and not isinstance(field, str):
                raise RecordError(f'"errors[{index}].field" must be a string')
            errors.append(
                ObservationError(
                    code=None if code is None else str(code),
                    message=None if message is None else str(message),
                    field=field,
                )
            )
        else:
            raise RecordError(
                f'"errors[{index}]" must be a string or an object, not {json_type_name(item)}'
            )
    return tuple(errors)


def _run_started(obj: Mapping[str, Any], run_id: str) -> RunStarted:
    return RunStarted(
        run_id=run_id,
        agent=_expect(obj, "agent", str),
        subject=_expect(obj, "subject", dict) or {},
        started_at=_expect(obj, "startedAt", str),
    )


def _tool_call(obj: Mapping[str, Any], run_id: str) -> ToolCall:
    arguments = _expect(obj, "arguments", dict) or {}
    outcome = _expect(obj, "outcome", str)
    if outcome is not None and outcome not in OUTCOMES:
        raise RecordError(f'"outcome" must be one of success, failure, unknown, not "{outcome}"')
    return ToolCall(
        run_id=run_id,
        tool_call_id=_expect(obj, "toolCallId", str, required=True),
        tool=_expect(obj, "tool", str, required=True),
        arguments=arguments,
        entity=requested_entity(_expect(obj, "entity", str), arguments),
        ok=_expect(obj, "ok", bool),
        op_id=_expect(obj, "opId", str),
        idempotency_key=_expect(obj, "idempotencyKey", str),
        attempt=_expect(obj, "attempt", int),
        outcome=outcome,
        started_at=_expect(obj, "startedAt", str),
        completed_at=_expect(obj, "completedAt", str),
    )


def _observation(obj: Mapping[str, Any], run_id: str) -> Observation:
    return Observation(
        run_id=run_id,
        observation_id=_expect(obj, "observationId", str, required=True),
        tool_call_id=_expect(obj, "toolCallId", str),
        source=_expect(obj, "source", str, required=True),
        revision_domain=_expect(obj, "revisionDomain", str),
        source_revision=_expect(obj, "sourceRevision", int),
        entity=_expect(obj, "entity", str),
        field=_expect(obj, "field", str),
        value=obj.get("value", ABSENT),
        data=obj,
        errors=_errors(obj),
        fallback=bool(_expect(obj, "fallback", bool)),
        event_id=_expect(obj, "eventId", str),
        delivery_id=_expect(obj, "deliveryId", str),
        started_at=_expect(obj, "startedAt", str),
        completed_at=_expect(obj, "completedAt", str),
    )


def _resolution(obj: Mapping[str, Any], run_id: str) -> Resolution:
    return Resolution(
        run_id=run_id,
        kind=_expect(obj, "kind", str),
        reason=_expect(obj, "reason", str),
        rule=_expect(obj, "rule", str),
        status=obj.get("status"),
        value=obj.get("value"),
        evidence_ids=_string_list(obj, "evidenceIds"),
        disputed_fields=_string_list(obj, "disputedFields"),
        policy_version=obj.get("policyVersion"),
        confidence=obj.get("confidence"),
        reasoning=_expect(obj, "reasoning", str),
    )


def _agent_action(obj: Mapping[str, Any], run_id: str) -> AgentAction:
    return AgentAction(
        run_id=run_id,
        name=_expect(obj, "name", str, required=True),
        arguments=_expect(obj, "arguments", dict) or {},
        op_id=_expect(obj, "opId", str),
        idempotency_key=_expect(obj, "idempotencyKey", str),
        outcome=_expect(obj, "outcome", str),
    )


_BUILDERS = {
    "run_started": _run_started,
    "tool_call": _tool_call,
    "tool_observation": _observation,
    "observation_resolution": _resolution,
    "agent_action": _agent_action,
}


def parse_record(obj: Mapping[str, Any]) -> Record:
    """Check a decoded record against the trace format and build its dataclass."""
    run_id = _expect(obj, "runId", str, required=True)
    record_type = _expect(obj, "type", str, required=True)
    builder = _BUILDERS.get(record_type)
    if builder is None:
        raise RecordError(f'unknown record type "{record_type}"')
    try:
        return builder(obj, run_id)
    except RecordError as exc:
        raise RecordError(f"{record_type}: {exc}") from None


def parse_line(raw: bytes | str) -> Record:
    """decode_line + parse_record: one line of a native trace into a record."""
    return parse_record(decode_line(raw))
