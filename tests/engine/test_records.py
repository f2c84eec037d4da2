"""Decoding one line strictly (spec/traces.md, Bad input): every refusal is a RecordError
with a one-line reason, never another exception."""

import pytest

from reviewapp.engine import RecordError, decode_line

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
