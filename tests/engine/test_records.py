"""Decoding one line strictly (spec/traces.md, Bad input): every refusal is a RecordError
with a one-line reason, never another exception."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reviewapp.engine import (
    ABSENT,
    RecordError,
    RunPositions,
    decode_line,
    judge_run,
    load_policy,
    parse_line,
    parse_record,
)
from reviewapp.engine.records import ObservationError, _check_record, _decode_line_exactly

REFUSED = [
    (b"\xff\xfe not utf-8", "invalid UTF-8 at byte 1"),
    (b'{"a":"\xed\xa0\x80"}', "invalid UTF-8 at byte 7"),
    (b"\xef\xbb\xbf{}", "starts with a byte order mark inside the file"),
    (b"not json", "not valid JSON: Expecting value at column 1"),
    (b'{"a":"x\x01"}', "not valid JSON: Invalid control character at column 8"),
    (b'{"a":1,}', "not valid JSON: Illegal trailing comma before end of object at column 7"),
    (b'{"a":1} {"b":2}', "not valid JSON: Extra data at column 9"),
    (b"", "not valid JSON: Expecting value at column 1"),
    (b'{"n":NaN}', "NaN is not valid JSON"),
    (b'{"n":-Infinity}', "-Infinity is not valid JSON"),
    (b'{"n":1e400}', "number 1e400 is too large"),
    (b'{"n":' + b"9" * 5000 + b"}", "integer too large (more than 4300 digits)"),
    (b'{"a":1,"b":{"c":2,"c":3}}', 'duplicate key "c"'),
    (b'{"a" : 1, "a": 2}', 'duplicate key "a"'),
    (b'[{"a":1,"a":2}]', 'duplicate key "a"'),
    (b"[" * 100000 + b"]" * 100000, "JSON nested too deeply"),
    (b"[1,2]", "not a JSON object but an array"),
    (b"null", "not a JSON object but null"),
    (b'{"a":"\\ud800"}', "contains an unpaired UTF-16 surrogate escape"),
    (b'{"\\udc00":1}', "contains an unpaired UTF-16 surrogate escape"),
    (b'{"a":"\\ud800\\u0041"}', "contains an unpaired UTF-16 surrogate escape"),
]


@pytest.mark.parametrize(("raw", "reason"), REFUSED, ids=[r for _, r in REFUSED])
def test_refused_lines_say_why(raw, reason):
    with pytest.raises(RecordError) as caught:
        decode_line(raw)
    assert str(caught.value) == reason


@pytest.mark.parametrize(("raw", "reason"), REFUSED[2:], ids=[r for _, r in REFUSED[2:]])
def test_text_is_refused_for_the_same_reasons_as_bytes(raw, reason):
    with pytest.raises(RecordError) as caught:
        decode_line(raw.decode("utf-8"))
    assert str(caught.value) == reason


ACCEPTED = [
    (b'{"a":1}', {"a": 1}),
    (b' {"a" :\t1 }\r\n', {"a": 1}),
    (b'{"a":"\\ud83d\\ude00"}', {"a": "\U0001f600"}),
    (b'{"a":"\\u00e9","b":"\xc3\xa9"}', {"a": "\u00e9", "b": "\u00e9"}),
    (b'{"n":123456789012345678901234567890,"m":-0,"f":-0.0,"e":1E2}', None),
    (b'{"a":{"a":{"a":1}},"b":[{"a":1},{"a":2}]}', None),
    (b'{"a":"\\":","b":": x","c":"\\" :"}', {"a": '":', "b": ": x", "c": '" :'}),
    (b'{"deep":' + b"[" * 500 + b"]" * 500 + b"}", None),
]


@pytest.mark.parametrize(("raw", "expected"), ACCEPTED)
def test_accepted_lines_decode_to_plain_json_values(raw, expected):
    import json

    decoded = decode_line(raw)
    reference = json.loads(raw)
    assert decoded == reference
    assert repr(decoded) == repr(reference)  # same types: 1 is not 1.0, -0.0 keeps its sign
    if expected is not None:
        assert decoded == expected
    assert decode_line(raw.decode()) == decoded


# --- the msgspec path against the reference ------------------------------------------
#
# decode_line and parse_record take a fast path through msgspec and fall back on the
# reference decoder and checker (plain Python) for whatever msgspec refuses or cannot vouch
# for. Over generated JSON text, with duplicate keys, white space, escapes and odd numbers,
# both must give the same value or the same reason.

KEYS = ['"a"', '"b"', '"\\u0061"', '":"', '" :"', '"\\":"', '"a\\\\"', '"\\\\\\":"', '"\\\\"']
SCALARS = [
    "1",
    "-0",
    "-0.0",
    "0.5",
    "1e5",
    "1E+2",
    "1e400",
    "-1e-400",
    "123456789012345678901234567890",
    "1.7976931348623158e308",
    "1.7976931348623159e308",
    "2e-324",
    "true",
    "null",
    "NaN",
    '"x"',
    '""',
    '"\\":"',
    '"\\\\\\":"',
    '"\\\\":"',
    '"{\\"a\\": 1, \\"b\\" : {\\"c\\":2}}"',
    '":x"',
    '"\\u003a"',
    '"\\u0022:"',
    '" :"',
    '"2026-01-01T00:00:00Z"',
    '"\\ud83d\\ude00"',
    '"\\ud800"',
    '"\\udc00x"',
    '"\\/\\n"',
    '"é"',
]
spaces = st.sampled_from(["", " ", "\t", "\n", "\r"])


@st.composite
def json_texts(draw, depth: int = 0):
    kind = draw(st.integers(0, 4)) if depth < 3 else 0
    if kind <= 1:
        return draw(st.sampled_from(SCALARS))
    if kind == 2:
        items = draw(st.lists(json_texts(depth + 1), max_size=3))
        return "[" + ",".join(draw(spaces) + item + draw(spaces) for item in items) + "]"
    pairs = draw(st.lists(st.tuples(st.sampled_from(KEYS), json_texts(depth + 1)), max_size=4))
    body = ",".join(
        draw(spaces) + key + draw(spaces) + ":" + draw(spaces) + value for key, value in pairs
    )
    return "{" + body + draw(spaces) + "}"


def outcome(function, argument):
    try:
        value = function(argument)
    except RecordError as exc:
        return ("refused", str(exc))
    return ("accepted", repr(value))


top_level = st.one_of(
    json_texts(2).map(lambda inner: '{"runId":"r","v":' + inner + "}"),
    json_texts(),
)


@settings(max_examples=400)
@given(top_level)
def test_the_fast_decoder_agrees_with_the_reference(text):
    raw = text.encode("utf-8")
    expected = outcome(_decode_line_exactly, raw)
    assert outcome(decode_line, raw) == expected
    assert outcome(decode_line, text) == outcome(_decode_line_exactly, text)


def test_json_inside_a_string_keeps_a_line_on_the_fast_path():
    """OpenTelemetry attributes hold JSON text: its escaped quote-colon pairs end no key."""
    from reviewapp.engine.records import _decode_json, _keys_all_kept

    inner = json.dumps({"a": 1, "b": {"c": "x\\"}, "d": ['\\":']})
    for raw in [
        json.dumps({"runId": "r", "attributes": {"x": inner, "y": inner}}),
        json.dumps({"runId": "r", "k\\": 1, "s": 'say \\": then'}),
    ]:
        assert _keys_all_kept(raw, _decode_json(raw)), raw
        assert _keys_all_kept(raw.encode(), _decode_json(raw.encode())), raw


def test_the_duplicate_check_is_not_fooled_by_strings_that_look_like_keys():
    # Quote-colon pairs inside strings loosen the bound; they never hide a duplicate.
    for raw in [
        b'{"a":"\\":","a":1}',
        b'{"a" :1,"a":2,"b":"x"}',
        b'{"a":{"k":1,"k":2},"s":"\\":\\":"}',
        b'{"\\u0061":1,"a":2,"s":"\\u0022:"}',
        b'{"k\\\\":1,"k\\\\":2,"s":"\\\\\\":"}',
        b'{"a":1,"a":2,"s":"{\\"x\\":1}"}',
    ]:
        with pytest.raises(RecordError, match="duplicate key"):
            decode_line(raw)


RECORD_TYPES = ["run_started", "tool_call", "tool_observation", "observation_resolution"]
RECORD_KEYS = [
    "runId",
    "type",
    "agent",
    "subject",
    "toolCallId",
    "tool",
    "arguments",
    "entity",
    "ok",
    "opId",
    "idempotencyKey",
    "attempt",
    "outcome",
    "observationId",
    "source",
    "revisionDomain",
    "sourceRevision",
    "field",
    "value",
    "errors",
    "fallback",
    "kind",
    "evidenceIds",
    "disputedFields",
    "name",
    "status",
    "seq",
]
record_values = st.one_of(
    st.sampled_from(["x", "", "success", "unknown", "maybe"]),
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.integers(2**63, 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.lists(st.sampled_from(["E", 1, None, {"code": "C", "field": "status"}, {"field": 3}])),
    st.dictionaries(st.sampled_from(["orderId", "entity", "id", "code"]), st.text(max_size=3)),
)


@st.composite
def record_documents(draw):
    document = draw(st.dictionaries(st.sampled_from(RECORD_KEYS), record_values, max_size=10))
    if draw(st.integers(0, 9)):
        document["type"] = draw(st.sampled_from([*RECORD_TYPES, "agent_action", "other"]))
    if draw(st.integers(0, 9)):
        document["runId"] = "run-1"
    required = {
        "tool_call": ("toolCallId", "tool"),
        "tool_observation": ("observationId", "source"),
        "agent_action": ("name",),
    }.get(str(document.get("type")), ())
    for key in required:
        if draw(st.integers(0, 5)):
            document.setdefault(key, draw(st.sampled_from(["k", "k2"])))
    return document


@settings(max_examples=600)
@given(record_documents())
def test_the_fast_checker_agrees_with_the_reference(document):
    assert outcome(parse_record, document) == outcome(_check_record, document)


def test_records_accepted_by_the_fast_path_are_the_references_records():
    line = (
        b'{"runId":"r","type":"tool_observation","observationId":"o","source":"s",'
        b'"toolCallId":"c","revisionDomain":"d","sourceRevision":4,"status":"paid",'
        b'"errors":["DOWN",{"code":7,"message":"m","field":"status"}],"fallback":true}'
    )
    record = parse_line(line)
    assert record == _check_record(_decode_line_exactly(line))
    assert record.errors[1] == ObservationError(code="7", message="m", field="status")
    assert (record.fallback, record.value, record.value_for("status")) == (True, ABSENT, "paid")
    with pytest.raises(AttributeError):
        record.source = "other"  # frozen


def decode_then_parse(raw):
    return parse_record(decode_line(raw))


@settings(max_examples=600)
@given(record_documents(), st.sampled_from([(",", ":"), (", ", ": ")]), st.booleans())
def test_parse_line_is_decode_line_then_parse_record(document, separators, as_text):
    """parse_line inlines the common case of both; every line ends as they would end it."""
    text = json.dumps(document, separators=separators)
    raw = text if as_text else text.encode()
    assert outcome(parse_line, raw) == outcome(decode_then_parse, raw)


@settings(max_examples=400)
@given(top_level)
def test_parse_line_decodes_as_decode_line_does(text):
    for raw in (text, text.encode("utf-8")):
        assert outcome(parse_line, raw) == outcome(decode_then_parse, raw)


@pytest.mark.parametrize(
    "raw",
    [raw for raw, _ in REFUSED + ACCEPTED]
    + [
        b'{"runId":"r","type":"agent_action","name":"stop","arguments":{"a":1,"a":2}}',
        b'{"runId":"r","type":"agent_action","name":"' + b"{" * 300 + b'"}',
        b'{"runId":"r","type":"agent_action","name":"stop","x":' + b"[" * 250 + b"]" * 250 + b"}",
    ],
)
def test_parse_line_refuses_and_accepts_as_decode_line_then_parse_record(raw):
    assert outcome(parse_line, raw) == outcome(decode_then_parse, raw)


@pytest.mark.parametrize("depth", [199, 201, 5000, 9998, 9999, 10000])
def test_deep_nesting_is_decided_as_the_reference_decides(depth):
    raw = b'{"a":' + b"[" * depth + b"]" * depth + b"}"
    assert outcome(decode_line, raw) == outcome(_decode_line_exactly, raw)


VALID = {
    "run_started": {"agent": "a", "subject": {"orderId": "o"}, "startedAt": "t"},
    "tool_call": {"toolCallId": "c", "tool": "t", "arguments": {"orderId": "o"}, "ok": True},
    "tool_observation": {"observationId": "o", "source": "s", "errors": ["E"], "status": 1},
    "observation_resolution": {"kind": "conflict", "evidenceIds": ["o"], "value": 2},
    "agent_action": {"name": "stop", "arguments": {}, "outcome": "whatever"},
}
BAD_KEYS = [
    ("run_started", {"subject": ["o"]}),
    ("run_started", {"agent": 1}),
    ("tool_call", {"arguments": "o"}),
    ("tool_call", {"outcome": "maybe"}),
    ("tool_call", {"attempt": True}),
    ("tool_call", {"attempt": 1.0}),
    ("tool_call", {"ok": 1}),
    ("tool_call", {"tool": ""}),
    ("tool_call", {"toolCallId": None}),
    ("tool_observation", {"errors": "E"}),
    ("tool_observation", {"errors": [3]}),
    ("tool_observation", {"errors": [{"code": "C", "field": 3}]}),
    ("tool_observation", {"errors": [["E"]]}),
    ("tool_observation", {"sourceRevision": "4"}),
    ("tool_observation", {"fallback": "yes"}),
    ("tool_observation", {"source": ""}),
    ("observation_resolution", {"evidenceIds": [1]}),
    ("observation_resolution", {"disputedFields": "status"}),
    ("observation_resolution", {"kind": 1}),
    ("agent_action", {"arguments": []}),
    ("agent_action", {"name": None}),
    ("agent_action", {"runId": ""}),
    ("agent_action", {"type": ""}),
    *(
        (record_type, {"seq": bad})
        for record_type in sorted(VALID)
        for bad in (-1, 1.0, 2.5, True, "3", [3], {"n": 3})
    ),
]


@pytest.mark.parametrize("record_type", sorted(VALID))
def test_each_record_type_is_built_alike_on_both_paths(record_type):
    document = {"runId": "r", "type": record_type, **VALID[record_type]}
    assert parse_record(document) == _check_record(document)
    assert type(parse_record(document)).__name__ in repr(parse_record(document))


@pytest.mark.parametrize(("record_type", "bad"), BAD_KEYS, ids=[str(b) for _, b in BAD_KEYS])
def test_each_refusal_of_the_reference_is_a_refusal_with_its_reason(record_type, bad):
    document = {"runId": "r", "type": record_type, **VALID[record_type], **bad}
    with pytest.raises(RecordError) as reference:
        _check_record(document)
    with pytest.raises(RecordError) as fast:
        parse_record(document)
    assert str(fast.value) == str(reference.value)


@pytest.mark.parametrize("record_type", sorted(VALID))
@pytest.mark.parametrize("seq", [0, 7, 2**70])
def test_every_record_type_carries_its_position_in_its_run(record_type, seq):
    document = {"runId": "r", "type": record_type, **VALID[record_type], "seq": seq}
    record = parse_record(document)
    assert record == _check_record(document)
    assert record.seq == seq
    assert parse_line(json.dumps(document, separators=(",", ":")).encode()) == record
    assert parse_record({**document, "seq": None}).seq is None


@pytest.mark.parametrize(
    ("seq", "shown"), [(-1, "-1"), (2.5, "2.5"), (True, "a boolean"), ("3", "a string")]
)
def test_a_position_that_is_no_whole_number_from_zero_is_refused_saying_so(seq, shown):
    with pytest.raises(RecordError) as refused:
        parse_record({"runId": "r", "type": "agent_action", "name": "stop", "seq": seq})
    assert str(refused.value) == (
        f'agent_action: "seq" must be a whole number from 0 (its position in its run), not {shown}'
    )


def test_a_position_is_no_business_field_of_an_observation():
    """Two deliveries of one event at two positions carry the same body: no mismatch."""
    policy = load_policy({"fields": {"status": {}, "seq": {}}})
    records = [
        parse_record(
            {
                "runId": "r",
                "type": "tool_observation",
                "observationId": f"o{seq}",
                "source": "s",
                "eventId": "e1",
                "status": "paid",
                "seq": seq,
            }
        )
        for seq in (0, 1)
    ]
    assert records[0].value_for("seq") is ABSENT
    judgement = judge_run("r", records, policy)
    assert [v.field for v in judgement.verdicts] == ["status"]
    assert "event-body-mismatch" not in {f.kind for f in judgement.findings}


def test_records_are_judged_in_line_order_whatever_their_positions_say():
    """Line order is recording order (spec/traces.md): `seq` tells records apart, it never
    reorders them."""
    lines = [
        {"type": "tool_observation", "observationId": "o1", "source": "a", "status": "paid"},
        {"type": "agent_action", "name": "issue_refund"},
        {"type": "tool_observation", "observationId": "o2", "source": "b", "status": "void"},
        {"type": "agent_action", "name": "request_review"},
    ]
    policy = load_policy({"fields": {"status": {}}})

    def judged(positions):
        records = [
            parse_record({"runId": "r", **line, **position})
            for line, position in zip(lines, positions, strict=True)
        ]
        return judge_run("r", records, policy)

    unnumbered = judged([{}] * 4)
    assert judged([{"seq": n} for n in (3, 2, 1, 0)]) == unnumbered
    assert unnumbered.verdicts[0].action == "request_review"


def test_a_position_read_again_is_a_redelivery_with_the_same_bytes_and_refused_with_others():
    positions = RunPositions()
    first = b'{"runId":"r","type":"agent_action","name":"request_review","seq":3}'
    other = b'{"runId":"r","type":"agent_action","name":"issue_refund","seq":3}'
    unnumbered = b'{"runId":"r","type":"agent_action","name":"request_review"}'
    assert not positions.redelivered(parse_line(first), first)
    assert positions.redelivered(parse_line(first), first)
    with pytest.raises(RecordError) as refused:
        positions.redelivered(parse_line(other), other)
    assert str(refused.value) == "seq 3 of run r already holds another record"
    # Identical lines at other positions, or in another run, are other records.
    again = first.replace(b'"seq":3', b'"seq":4')
    elsewhere = first.replace(b'"runId":"r"', b'"runId":"r2"')
    assert not positions.redelivered(parse_line(again), again)
    assert not positions.redelivered(parse_line(elsewhere), elsewhere)
    for _ in range(2):
        assert not positions.redelivered(parse_line(unnumbered), unnumbered)
