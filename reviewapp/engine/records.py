"""Native trace records (spec/traces.md): decoding one line and checking it into a
frozen record, or refusing it with a one-line reason.

msgspec does the work of every line that is well formed: it decodes the JSON, and checks
the typed keys of each record type against a schema. Whatever it refuses, or cannot
decide alone, goes through the checker in plain Python, which is the reference: it gives
the reason a user reads, and the fast path never accepts a line it would refuse
(tests/engine/test_records.py holds both to that).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Annotated, Any, Literal

import msgspec

# A UTF-8 byte order mark: a file's first line may open with one, which is not JSON.
UTF8_BOM = b"\xef\xbb\xbf"


def line_payload(raw: bytes, *, first: bool) -> bytes:
    """The bytes of a line to decode: no carriage return before its newline, and for the
    file's first line no byte order mark."""
    data = raw[:-1] if raw.endswith(b"\r") else raw
    if first and data.startswith(UTF8_BOM):
        data = data[len(UTF8_BOM) :]
    return data


class RecordError(ValueError):
    """A line that cannot be accepted; the message is the one-line reason shown to users."""


def seq_taken_reason(run_id: str, seq: int) -> str:
    """Why a record is refused whose run already holds its `seq` with other bytes: a
    position holds one record (spec/traces.md, "Delivery in pieces, and `seq`")."""
    return f"seq {seq} of run {run_id} already holds another record"


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
    "value errors fallback eventId deliveryId startedAt completedAt arguments attempt seq".split()
)
# Where a tool call's requested entity is found when it has no `entity` key.
ENTITY_ARGUMENT_KEYS = ("entity", "orderId", "sku", "customerId", "accountId", "id")
OUTCOMES = frozenset({"success", "failure", "unknown"})


class _Frozen(msgspec.Struct, frozen=True, gc=False):
    """Base of the engine's records: immutable, compared field by field, cheap to build.

    Every record may carry `seq`, its position in its run (spec/traces.md, "Delivery in
    pieces"): what tells a repeated event from a re-delivery. It never orders records:
    line order is recording order.

    Untracked by the garbage collector: a record refers to decoded JSON, never back.
    msgspec passes the configuration on to subclasses; each says `frozen=True` again only
    for type checkers, which read a subclass without it as a mutable one."""


class RunStarted(_Frozen, frozen=True):
    run_id: str
    agent: str | None
    subject: Mapping[str, Any]
    started_at: str | None
    seq: int | None = None


class ToolCall(_Frozen, frozen=True):
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
    seq: int | None = None


class ObservationError(_Frozen, frozen=True):
    code: str | None
    message: str | None
    field: str | None  # None: the error concerns every field


FALLBACK_ERROR = ObservationError(code="FALLBACK", message="cached fallback value", field=None)


class Observation(_Frozen, frozen=True):
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
    seq: int | None = None

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


class Resolution(_Frozen, frozen=True):
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
    seq: int | None = None

    @property
    def chosen_value(self) -> Any:
        return self.value if self.value is not None else self.status


class AgentAction(_Frozen, frozen=True):
    run_id: str
    name: str
    arguments: Mapping[str, Any]
    op_id: str | None
    idempotency_key: str | None
    outcome: str | None
    seq: int | None = None


Record = RunStarted | ToolCall | Observation | Resolution | AgentAction


class RunPositions:
    """The positions (`seq`) of runs read so far, each with a digest of its record's bytes,
    in memory: for a reader of whole files (manage.py evaluate). A record at a position
    held already is a re-delivery when its bytes are the same, refused when they differ;
    a record without `seq` is always new (spec/traces.md, "Delivery in pieces")."""

    def __init__(self) -> None:
        self._held: dict[tuple[str, int], bytes] = {}

    def redelivered(self, record: Record, payload: bytes) -> bool:
        """Whether `record`, decoded from `payload`, re-delivers one read before; from now
        on its position is held. RecordError when its position holds another record."""
        if record.seq is None:
            return False
        position = (record.run_id, record.seq)
        digest = hashlib.blake2b(payload, digest_size=16).digest()
        held = self._held.get(position)
        if held is None:
            self._held[position] = digest
            return False
        if held != digest:
            raise RecordError(seq_taken_reason(record.run_id, record.seq))
        return True


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


# Deeper than this, the exact decoder decides (as deep as its own limit, today's rule).
_FAST_DEPTH = 200
_SHALLOW_BYTES = 2 * _FAST_DEPTH
_decode_json = msgspec.json.Decoder().decode
_encode_json = msgspec.json.Encoder().encode
_JSON_SPACE = b" \t\n\r"
_JSON_SPACE_TEXT = str.maketrans("", "", _JSON_SPACE.decode())
# A quote-colon pair whose quote is escaped lies inside a string (JSON text inside an
# attribute, say) and ends no key: an odd run of backslashes (the first not after another
# backslash), a quote and a colon. Counted exactly, by the parity of the backslashes, so
# the bound never drops below the keys of the text.
_ESCAPED_QUOTE_COLON = re.compile(r'(?<!\\)(?:\\\\)*\\":')
_ESCAPED_QUOTE_COLON_BYTES = re.compile(_ESCAPED_QUOTE_COLON.pattern.encode())


class _TooDeep(Exception):
    pass


def _count_keys(container: dict[str, Any] | list[Any], depth: int) -> int:
    """Keys of every object in `container`, however nested; _TooDeep past _FAST_DEPTH.

    `container` and the containers inside it counted are exactly dicts and lists."""
    if depth > _FAST_DEPTH:
        raise _TooDeep
    items: Iterable[Any]
    if isinstance(container, dict):
        keys, items = len(container), container.values()
    else:
        keys, items = 0, container
    for item in items:
        kind = item.__class__
        if (kind is dict or kind is list) and item:
            keys += _count_keys(item, depth + 1)
    return keys


def _is_compact_encoding(raw: bytes | str, obj: dict[str, Any]) -> bool:
    """True when the line is exactly the compact encoding of what it decoded to (as a writer
    of JSON Lines writes it): the text of a value, whose keys are unique. In C.

    Only as deep as _FAST_DEPTH: a line of at most twice as many bytes cannot nest deeper
    (every level opens and closes), a longer one is counted. parse_line inlines this."""
    return (
        raw.__class__ is bytes
        and (len(raw) <= _SHALLOW_BYTES or raw.count(b"{") + raw.count(b"[") <= _FAST_DEPTH)
        and _encode_json(obj) == raw
    )


def _keys_all_kept(raw: bytes | str, obj: dict[str, Any]) -> bool:
    """True when decoding kept every key of `raw`: then no key was repeated.

    msgspec, like most decoders, keeps the last of duplicate keys. Every key of the text
    ends with a quote, JSON white space and a colon: with the white space taken out, the
    quote-colon pairs bound the keys of the text from above, and when that bound equals
    the keys decoded, none was dropped. An escaped quote before a colon is taken off the
    bound (_ESCAPED_QUOTE_COLON); any other string that holds such a pair (one opening with
    a colon) only loosens the bound, and a loose bound sends the line to the exact decoder:
    never a wrong answer, only a slower one. Past _FAST_DEPTH, the exact decoder decides too.
    """
    if _is_compact_encoding(raw, obj):
        return True
    if isinstance(raw, bytes):
        data = raw.translate(None, _JSON_SPACE)
        bound = data.count(b'":')
        if b'\\"' in data:
            bound -= len(_ESCAPED_QUOTE_COLON_BYTES.findall(data))
    elif isinstance(raw, str):
        text = raw.translate(_JSON_SPACE_TEXT)
        bound = text.count('":')
        if '\\"' in text:
            bound -= len(_ESCAPED_QUOTE_COLON.findall(text))
    else:
        return False
    try:
        return _count_keys(obj, 1) == bound
    except _TooDeep:
        return False


def decode_line(raw: bytes | str) -> dict[str, Any]:
    """Decode one line of JSON Lines strictly: one object, UTF-8, no NaN, no duplicate keys.

    msgspec decodes; it refuses invalid UTF-8, NaN and Infinity, numbers out of range,
    control characters and unpaired surrogate escapes by itself. A line it refuses, or
    whose keys or depth it cannot vouch for, is decoded again by the exact decoder, which
    refuses it with the reason to show (or accepts it, where msgspec is narrower)."""
    try:
        obj = _decode_json(raw)
    except (msgspec.MsgspecError, RecursionError, UnicodeError):
        return _decode_line_exactly(raw)
    if obj.__class__ is dict and _keys_all_kept(raw, obj):
        return obj
    return _decode_line_exactly(raw)


def _decode_line_exactly(raw: bytes | str) -> dict[str, Any]:
    """The reference decoder (standard library): slow, exact, and the source of reasons."""
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


def _seq(obj: Mapping[str, Any]) -> int | None:
    value = obj.get("seq")
    if value is None:
        return None
    if value.__class__ is not int or value < 0:
        shown = value if value.__class__ in (int, float) else json_type_name(value)
        raise RecordError(
            f'"seq" must be a whole number from 0 (its position in its run), not {shown}'
        )
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
        if value is None:
            continue
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
        seq=_seq(obj),
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
        seq=_seq(obj),
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
        seq=_seq(obj),
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
        seq=_seq(obj),
    )


def _agent_action(obj: Mapping[str, Any], run_id: str) -> AgentAction:
    return AgentAction(
        run_id=run_id,
        name=_expect(obj, "name", str, required=True),
        arguments=_expect(obj, "arguments", dict) or {},
        op_id=_expect(obj, "opId", str),
        idempotency_key=_expect(obj, "idempotencyKey", str),
        outcome=_expect(obj, "outcome", str),
        seq=_seq(obj),
    )


_BUILDERS: dict[str, Callable[[Mapping[str, Any], str], Record]] = {
    "run_started": _run_started,
    "tool_call": _tool_call,
    "tool_observation": _observation,
    "observation_resolution": _resolution,
    "agent_action": _agent_action,
}


def _check_record(obj: Mapping[str, Any]) -> Record:
    """The reference checker (plain Python): the record, or RecordError with the reason."""
    run_id = _expect(obj, "runId", str, required=True)
    record_type = _expect(obj, "type", str, required=True)
    builder = _BUILDERS.get(record_type)
    if builder is None:
        raise RecordError(f'unknown record type "{record_type}"')
    try:
        return builder(obj, run_id)
    except RecordError as exc:
        raise RecordError(f"{record_type}: {exc}") from None


# --- the fast path: msgspec checks the typed keys ----------------------------------
#
# One schema per record type, tagged by "type", typed as spec/traces.md says. Keys that hold
# objects or lists are typed Any and checked below in Python: msgspec.convert would also
# take a tuple for a list or any mapping for an object, which a JSON document never holds
# and the reference checker refuses. A record the schema or those checks refuse goes to
# the reference checker, which gives the reason (or accepts what the schema is narrower
# about: an integer beyond 64 bits, a subclass of dict).
#
# The same schemas are the records' JSON Schema (record_json_schema, which the API's OpenAPI
# document serves): a key typed Any says in its annotation what the checks in Python accept.
# A JSON null is as good as an optional key's absence.


def _meta(description: str, schema: dict[str, Any] | None = None) -> msgspec.Meta:
    return msgspec.Meta(description=description, extra_json_schema=schema or {})


def _or_null(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


_OBJECT = _or_null({"type": "object"})
_STRINGS = _or_null({"type": "array", "items": {"type": "string"}})
_ERROR_OBJECT = {
    "type": "object",
    "description": "An error; with `field`, it concerns that field only.",
    "properties": {
        "code": {"description": "Any JSON value, read as text."},
        "message": {"description": "Any JSON value, read as text."},
        "field": _or_null({"type": "string"}),
    },
}
_ERROR_CODE = {"type": "string", "description": "An error code; it concerns every field."}

_NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]
_Position = Annotated[int, msgspec.Meta(ge=0, description="Its position in its run: 0, 1, ...")]
_Time = Annotated[str, _meta("RFC 3339, by the caller's clock.")]
_AnyJson = Annotated[Any, _meta("Any JSON value.")]
_Arguments = Annotated[Any, _meta("The arguments actually sent.", _OBJECT)]
_Subject = Annotated[Any, _meta('What the run is about, e.g. {"customerId": "c1"}.', _OBJECT)]
_Errors = Annotated[
    Any,
    _meta(
        "Warnings, partial failures, fallback markers.",
        _or_null({"type": "array", "items": {"anyOf": [_ERROR_CODE, _ERROR_OBJECT]}}),
    ),
]
_Ids = Annotated[Any, _meta("Observation ids.", _STRINGS)]
_Fields = Annotated[Any, _meta("Decision fields.", _STRINGS)]
_Entity = Annotated[
    str,
    _meta(
        "The entity asked about; if absent, the first present of arguments.entity, orderId, "
        "sku, customerId, accountId, id."
    ),
]
_Outcome = Annotated[
    Literal["success", "failure", "unknown"],
    _meta("Of a mutation; unknown: a timeout, a connection lost."),
]


class _Schema(msgspec.Struct, rename="camel", tag_field="type", gc=False):
    run_id: Annotated[str, msgspec.Meta(min_length=1, description="Its run.")]

    def build(self, obj: Mapping[str, Any]) -> Record | None:
        """The record, from this checked schema and the decoded `obj`; None when a key
        typed Any here is not what the trace format says (the reference checker decides)."""
        raise NotImplementedError


class _RunStartedSchema(_Schema, tag="run_started"):
    """The start of a run (optional)."""

    agent: str | None = None
    subject: _Subject = None
    started_at: _Time | None = None
    seq: _Position | None = None

    def build(self, obj: Mapping[str, Any]) -> Record | None:
        subject = self.subject
        if subject is None:
            subject = {}
        elif subject.__class__ is not dict:
            return None
        return RunStarted(self.run_id, self.agent, subject, self.started_at, self.seq)


class _ToolCallSchema(_Schema, tag="tool_call"):
    """An invocation of a tool; its observations join it by toolCallId."""

    tool_call_id: _NonEmpty
    tool: _NonEmpty
    arguments: _Arguments = None
    entity: _Entity | None = None
    ok: Annotated[bool, _meta("Transport success.")] | None = None
    op_id: Annotated[str, _meta("One logical operation, however many attempts.")] | None = None
    idempotency_key: str | None = None
    attempt: Annotated[int, _meta("1 for the first attempt.")] | None = None
    outcome: _Outcome | None = None
    started_at: _Time | None = None
    completed_at: _Time | None = None
    seq: _Position | None = None

    def build(self, obj: Mapping[str, Any]) -> Record | None:
        arguments = self.arguments
        if arguments is None:
            arguments = {}
        elif arguments.__class__ is not dict:
            return None
        return ToolCall(
            self.run_id,
            self.tool_call_id,
            self.tool,
            arguments,
            requested_entity(self.entity, arguments),
            self.ok,
            self.op_id,
            self.idempotency_key,
            self.attempt,
            self.outcome,
            self.started_at,
            self.completed_at,
            self.seq,
        )


def _plain_errors(items: Any) -> tuple[ObservationError, ...] | None:
    """`errors` as _errors reads it, or None for anything but a list of strings and
    objects whose `field` is a string or null."""
    if items is None:
        return ()
    if items.__class__ is not list:
        return None
    errors = []
    for item in items:
        kind = item.__class__
        if kind is str:
            errors.append(ObservationError(item, None, None))
        elif kind is dict:
            code, message, field = item.get("code"), item.get("message"), item.get("field")
            if field is not None and field.__class__ is not str:
                return None
            errors.append(
                ObservationError(
                    None if code is None else str(code),
                    None if message is None else str(message),
                    field,
                )
            )
        else:
            return None
    return tuple(errors)


class _ObservationSchema(_Schema, tag="tool_observation"):
    """A recorded result. Its business values: `value` for `field`, else `value`'s keys, else
    any key that is not one of the record's own (`"status": "refunded"`)."""

    observation_id: _NonEmpty
    source: Annotated[str, msgspec.Meta(min_length=1, description="What produced the value.")]
    tool_call_id: Annotated[str, _meta("The invocation that produced it.")] | None = None
    revision_domain: Annotated[str, _meta("What sourceRevision counts.")] | None = None
    source_revision: Annotated[int, _meta("The version the source supplied.")] | None = None
    entity: Annotated[str, _meta("The entity the response echoed.")] | None = None
    field: Annotated[str, _meta("The decision field `value` holds.")] | None = None
    value: _AnyJson = None
    errors: _Errors = None
    fallback: Annotated[bool, _meta("A cached fallback: counts as the error FALLBACK.")] | None = (
        None
    )
    event_id: str | None = None
    delivery_id: str | None = None
    started_at: _Time | None = None
    completed_at: _Time | None = None
    seq: _Position | None = None

    def build(self, obj: Mapping[str, Any]) -> Record | None:
        errors = self.errors
        # No errors (absent, null or []) is the common case: no call for it.
        if errors is None or (errors.__class__ is list and not errors):
            errors = ()
        else:
            errors = _plain_errors(errors)
            if errors is None:
                return None
        return Observation(
            self.run_id,
            self.observation_id,
            self.tool_call_id,
            self.source,
            self.revision_domain,
            self.source_revision,
            self.entity,
            self.field,
            obj.get("value", ABSENT),
            obj,
            errors,
            self.fallback is True,
            self.event_id,
            self.delivery_id,
            self.started_at,
            self.completed_at,
            self.seq,
        )


def _plain_strings(items: Any) -> tuple[str, ...] | None:
    if items is None:
        return ()
    if items.__class__ is not list or any(item.__class__ is not str for item in items):
        return None
    return tuple(items)


class _ResolutionSchema(_Schema, tag="observation_resolution"):
    """What the agent's own runtime decided: shown beside the engine's verdict, never
    trusted as the verdict."""

    kind: Annotated[str, _meta("confirmed, resolved, conflict or needs_human_review.")] | None = (
        None
    )
    reason: str | None = None
    rule: str | None = None
    status: _AnyJson = None
    value: _AnyJson = None
    evidence_ids: _Ids = None
    disputed_fields: _Fields = None
    policy_version: _AnyJson = None
    confidence: _AnyJson = None
    reasoning: str | None = None
    seq: _Position | None = None

    def build(self, obj: Mapping[str, Any]) -> Record | None:
        evidence_ids = _plain_strings(self.evidence_ids)
        disputed_fields = _plain_strings(self.disputed_fields)
        if evidence_ids is None or disputed_fields is None:
            return None
        return Resolution(
            self.run_id,
            self.kind,
            self.reason,
            self.rule,
            obj.get("status"),
            obj.get("value"),
            evidence_ids,
            disputed_fields,
            obj.get("policyVersion"),
            obj.get("confidence"),
            self.reasoning,
            self.seq,
        )


class _AgentActionSchema(_Schema, tag="agent_action"):
    """The side effect the agent proposed or executed after reading the observations."""

    name: _NonEmpty
    arguments: _Arguments = None
    op_id: str | None = None
    idempotency_key: str | None = None
    outcome: str | None = None
    seq: _Position | None = None

    def build(self, obj: Mapping[str, Any]) -> Record | None:
        arguments = self.arguments
        if arguments is None:
            arguments = {}
        elif arguments.__class__ is not dict:
            return None
        return AgentAction(
            self.run_id,
            self.name,
            arguments,
            self.op_id,
            self.idempotency_key,
            self.outcome,
            self.seq,
        )


# By "type" (msgspec.convert of a tagged union is slower than this look-up and one struct).
_SCHEMAS: dict[str | int | None, type[_Schema]] = {
    schema.__struct_config__.tag: schema
    for schema in (
        _RunStartedSchema,
        _ToolCallSchema,
        _ObservationSchema,
        _ResolutionSchema,
        _AgentActionSchema,
    )
}
_convert = msgspec.convert


# --- the records' JSON Schema -------------------------------------------------------

_AnySchema = (
    _RunStartedSchema
    | _ToolCallSchema
    | _ObservationSchema
    | _ResolutionSchema
    | _AgentActionSchema
)
_REF = "\x00{name}"  # what a reference is, until each schema has its name


def record_schema_name(record_type: str) -> str:
    """A record type's schema, named for it: ToolObservation for tool_observation."""
    return "".join(part.capitalize() for part in record_type.split("_"))


def record_json_schema(
    ref_template: str = "#/$defs/{name}",
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The JSON Schema (2020-12) of one native record (spec/traces.md), and the schemas it
    refers to, one per record type (record_schema_name), each reached by `ref_template`.

    Made from the schemas lines are checked against, so the format is defined once. No key
    has a default (an absent key is not its default value), and no schema forbids other
    keys: a record keeps them all, and an observation's may be its fields."""
    names = {schema.__name__: record_schema_name(str(tag)) for tag, schema in _SCHEMAS.items()}
    (record,), components = msgspec.json.schema_components([_AnySchema], ref_template=_REF)

    def named(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                key: named(value)
                for key, value in node.items()
                if not (key == "default" and value is None)
            }
        if isinstance(node, list):
            return [named(item) for item in node]
        if isinstance(node, str) and node.startswith(_REF[0]):
            return ref_template.format(name=names[node[1:]])
        return node

    schemas = {}
    for tag, schema in _SCHEMAS.items():
        body = named(components[schema.__name__])
        body["title"] = tag
        schemas[record_schema_name(str(tag))] = body
    return named(record), schemas


def parse_record(obj: Mapping[str, Any]) -> Record:
    """Check a decoded record against the trace format and build its frozen record."""
    record_type = obj.get("type") if obj.__class__ is dict else None
    schema = _SCHEMAS.get(record_type) if record_type.__class__ is str else None
    if schema is None:
        return _check_record(obj)
    try:
        record = _convert(obj, schema).build(obj)
    except msgspec.ValidationError:
        return _check_record(obj)
    return _check_record(obj) if record is None else record


def parse_line(raw: bytes | str) -> Record:
    """decode_line + parse_record: one line of a native trace into a record.

    Their common case inlined, one call a line instead of five: a line that is the compact
    encoding of an object (_is_compact_encoding) of a known type that its schema accepts.
    Anything else goes the way of decode_line and parse_record, with the same outcome."""
    try:
        obj = _decode_json(raw)
    except (msgspec.MsgspecError, RecursionError, UnicodeError):
        return parse_record(_decode_line_exactly(raw))
    if obj.__class__ is not dict:
        return parse_record(_decode_line_exactly(raw))
    if not (
        raw.__class__ is bytes
        and (len(raw) <= _SHALLOW_BYTES or raw.count(b"{") + raw.count(b"[") <= _FAST_DEPTH)
        and _encode_json(obj) == raw
    ):
        return parse_record(obj if _keys_all_kept(raw, obj) else _decode_line_exactly(raw))
    record_type = obj.get("type")
    schema = _SCHEMAS.get(record_type) if record_type.__class__ is str else None
    if schema is not None:
        try:
            record = _convert(obj, schema).build(obj)
        except msgspec.ValidationError:
            record = None
        if record is not None:
            return record
    return _check_record(obj)
