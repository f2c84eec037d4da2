"""Properties of the engine over generated runs (hypothesis)."""

import contextlib
import io
import json
import re
from pathlib import Path

from django.core.management import call_command
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reviewapp.engine import Normalizer, canonical, judge_run, judge_runs, load_policy, parse_record

FIELDS = ("status", "qty")
POLICY = load_policy(
    {
        "fields": {"status": {"normalize": {"kind": "enum", "caseInsensitive": True}}, "qty": {}},
        "rules": [
            {"id": "rev", "kind": "higher-source-revision", "field": "*"},
            {"id": "own", "kind": "authoritative-source", "field": "status", "source": "s1"},
        ],
    }
)
timestamps = st.datetimes().map(lambda d: d.isoformat() + "Z")
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.sampled_from(["paid", "PAID", "refunded", " x "])
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["a", "b"]), inner, max_size=2)
    ),
    max_leaves=6,
)


@st.composite
def observation_lines(draw, index: int):
    line = {
        "type": "tool_observation",
        "observationId": f"obs-{index}",
        "source": draw(st.sampled_from(["s1", "s2", "s3"])),
        "entity": draw(st.sampled_from(["e1", "e2"])),
        "revisionDomain": draw(st.sampled_from(["payments", "search"])),
        "sourceRevision": draw(st.integers(1, 4)),
        "completedAt": draw(timestamps),
    }
    for field in FIELDS:
        if draw(st.booleans()):
            line[field] = draw(st.sampled_from(["paid", "PAID", "refunded", 1, 2, None]))
    if draw(st.integers(0, 6)) == 0:
        line["errors"] = [draw(st.sampled_from(["DOWN", {"code": "X", "field": "qty"}]))]
    return line


@st.composite
def runs(draw, run_id: str = "run-1"):
    size = draw(st.integers(1, 8))
    lines = []
    for index in range(size):
        choice = draw(st.integers(0, 5))
        if choice == 0:
            lines.append(
                {"type": "agent_action", "name": draw(st.sampled_from(["stop", "refund"]))}
            )
        elif choice == 1:
            lines.append({"type": "observation_resolution", "kind": "resolved", "value": "paid"})
        else:
            lines.append(draw(observation_lines(index)))
    return [{"runId": run_id, **line} for line in lines]


def judged(lines):
    return judge_run(lines[0]["runId"], [parse_record(line) for line in lines], POLICY)


@given(runs())
def test_evidence_lists_every_observation_of_its_group_in_line_order(lines):
    judgement = judged(lines)
    expected_groups = {}
    for line in lines:
        if line["type"] != "tool_observation":
            continue
        for field in FIELDS:
            blocking = any(
                e == "DOWN" or (isinstance(e, dict) and e["field"] == field)
                for e in line.get("errors", [])
            )
            if field in line or blocking:
                expected_groups.setdefault((line["entity"], field), []).append(
                    line["observationId"]
                )
    expected = {key: ids for key, ids in expected_groups.items() if len(ids) > 1}
    assert {(v.entity, v.field): list(v.evidence) for v in judgement.verdicts} == expected


@given(runs(), st.randoms(use_true_random=False))
def test_verdicts_ignore_completion_times(lines, rng):
    shuffled_times = [
        {**line, "completedAt": f"2026-0{rng.randint(1, 9)}-01T00:00:00Z"}
        if "completedAt" in line
        else line
        for line in lines
    ]
    assert judged(shuffled_times) == judged(lines)


@given(runs("run-a"), runs("run-b"), st.randoms(use_true_random=False))
def test_verdicts_ignore_other_runs_interleaved(run_a, run_b, rng):
    merged, a, b = [], list(run_a), list(run_b)
    while a or b:
        source = a if (a and (not b or rng.random() < 0.5)) else b
        merged.append(source.pop(0))
    together = {j.run_id: j for j in judge_runs([parse_record(line) for line in merged], POLICY)}
    assert together["run-a"] == judged(run_a)
    assert together["run-b"] == judged(run_b)


normalizers = st.builds(
    Normalizer,
    kind=st.sampled_from(["none", "enum", "text", "money"]),
    case_insensitive=st.booleans(),
    collapse_whitespace=st.booleans(),
)
money_values = st.fixed_dictionaries(
    {
        "amount": st.integers(-(10**6), 10**6)
        | st.decimals(places=3, allow_nan=False, allow_infinity=False).map(str)
        | st.floats(allow_nan=False, allow_infinity=False),
        "currency": st.sampled_from(["USD", "jpy", "BHD", "XYZ"]),
        "unit": st.sampled_from(["major", "minor", "cents"]),
    }
)


@given(normalizers, json_values | st.text() | money_values)
def test_normalizers_are_idempotent(normalizer, value):
    once = normalizer.normalize(value)
    assert canonical(normalizer.normalize(once)) == canonical(once)


POLICY_FILE = (
    Path(__file__).resolve().parent.parent / "fixtures" / "spec" / "order-status.policy.json"
)
REJECTION = re.compile(r"^(?P<file>.+):(?P<line>\d+): \S.*$")
any_line = st.one_of(
    st.binary(max_size=60),
    st.text(max_size=60).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.builds(
        lambda d: json.dumps(d).encode(),
        st.dictionaries(
            st.sampled_from(
                [
                    "runId",
                    "type",
                    "toolCallId",
                    "tool",
                    "observationId",
                    "source",
                    "errors",
                    "ok",
                    "value",
                ]
            ),
            json_values | st.sampled_from(["tool_call", "tool_observation", "r1"]),
        ),
    ),
)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(any_line, min_size=1, max_size=12))
def test_the_evaluator_never_crashes_on_any_line(tmp_path, lines):
    trace = tmp_path / "trace.jsonl"
    body = b"\n".join(line.replace(b"\n", b" ").replace(b"\r", b" ") for line in lines)
    trace.write_bytes(body)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        call_command("evaluate", str(trace), policy=str(POLICY_FILE), json=True, stdout=out)
    *rejections, summary = err.getvalue().splitlines()
    total, accepted, rejected = map(int, re.findall(r"\d+", summary))
    assert total == accepted + rejected
    if body.startswith(b"\x1f\x8b"):
        # Read as gzip by its magic bytes: random bytes after them are a corrupt stream,
        # one rejection with its reason, not lines.
        assert (accepted, rejected) == (0, 1)
    else:
        assert total == sum(1 for line in body.split(b"\n") if line.strip())
    assert len(rejections) == rejected
    for rejection in rejections:
        match = REJECTION.match(rejection)
        assert match and match["file"] == str(trace), rejection
    for output in out.getvalue().splitlines():
        assert set(json.loads(output)) == {"runId", "policyVersion", "verdicts", "findings"}
