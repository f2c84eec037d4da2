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
HARMLESS = {"status": frozenset(), "qty": frozenset({"SLOW"})}
POLICY = load_policy(
    {
        "fields": {
            "status": {"normalize": {"kind": "enum", "caseInsensitive": True}},
            "qty": {"harmlessErrors": sorted(HARMLESS["qty"])},
        },
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


errors = st.sampled_from(
    [
        "DOWN",
        "SLOW",
        {"code": "X", "field": "qty"},
        {"code": "X", "field": "status"},
        {"code": "SLOW", "field": "qty"},
        {"code": "X", "field": "colour"},
        {"code": "X"},
    ]
)


@st.composite
def observation_lines(draw, index: int):
    line = {
        "type": "tool_observation",
        "observationId": f"obs-{index}",
        "source": draw(st.sampled_from(["s1", "s2", "s3"])),
        "entity": draw(st.sampled_from(["e1", "e2"])),
        "sourceRevision": draw(st.integers(1, 4)),
        "completedAt": draw(timestamps),
    }
    domain = draw(st.sampled_from(["payments", "search", None]))
    if domain is not None:
        line["revisionDomain"] = domain
    for field in FIELDS:
        if draw(st.booleans()):
            line[field] = draw(st.sampled_from(["paid", "PAID", "refunded", 1, 2, None]))
    if draw(st.integers(0, 3)) == 0:
        line["errors"] = draw(st.lists(errors, min_size=1, max_size=2))
    if draw(st.integers(0, 8)) == 0:
        line["fallback"] = True
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


def _code(error) -> str | None:
    return error if isinstance(error, str) else error.get("code")


def blocking(line: dict, field: str) -> bool:
    """spec/policy.md, partial-result: an error concerning the field that is not harmless."""
    concerning = [
        e for e in line.get("errors", []) if isinstance(e, str) or e.get("field") in (None, field)
    ]
    if line.get("fallback"):
        concerning.append("FALLBACK")
    return any(_code(e) not in HARMLESS[field] for e in concerning)


def names_field(line: dict, field: str) -> bool:
    """A blocking object error with this `field`."""
    return any(
        isinstance(e, dict) and e.get("field") == field and _code(e) not in HARMLESS[field]
        for e in line.get("errors", [])
    )


def expected_evidence(lines: list[dict]) -> dict[tuple, list[str]]:
    """Groups that get a verdict, by the wording of spec/policy.md, with their members."""
    groups: dict[tuple, list[str]] = {}
    said: set[tuple] = set()
    for line in lines:
        if line["type"] != "tool_observation":
            continue
        for field in FIELDS:
            if field in line or blocking(line, field):
                key = (line["entity"], field)
                groups.setdefault(key, []).append(line["observationId"])
                if field in line or names_field(line, field):
                    said.add(key)
    return {key: ids for key, ids in groups.items() if len(ids) > 1 and key in said}


@given(runs())
def test_evidence_lists_every_observation_of_its_group_in_line_order(lines):
    judgement = judged(lines)
    expected = expected_evidence(lines)
    assert {(v.entity, v.field): list(v.evidence) for v in judgement.verdicts} == expected


@given(runs())
def test_every_verdict_has_a_value_or_a_named_blocking_error_behind_it(lines):
    by_id = {line["observationId"]: line for line in lines if "observationId" in line}
    for verdict in judged(lines).verdicts:
        members = [by_id[i] for i in verdict.evidence]
        assert any(verdict.field in m or names_field(m, verdict.field) for m in members)


@given(runs(), st.integers(0, 8), st.sampled_from([*FIELDS, "colour"]), st.booleans())
def test_an_observation_with_only_errors_naming_other_fields_adds_no_verdict(
    lines, where, named, blocking_code
):
    error = {"code": "X" if blocking_code else "SLOW", "field": named}
    extra = {
        "runId": lines[0]["runId"],
        "type": "tool_observation",
        "observationId": "obs-extra",
        "source": "s9",
        "entity": "e1",
        "errors": [error, {"code": "Y", "field": named}],
    }
    where = min(where, len(lines))
    before = judged(lines)
    after = judged([*lines[:where], extra, *lines[where:]])
    others = [f for f in FIELDS if f != named]
    assert [v for v in after.verdicts if v.field in others] == [
        v for v in before.verdicts if v.field in others
    ]


@given(runs())
def test_a_group_with_a_domain_less_observation_is_never_resolved_by_revision(lines):
    by_id = {line["observationId"]: line for line in lines if "observationId" in line}
    for verdict in judged(lines).verdicts:
        if verdict.rule != "rev":
            continue
        domains = {by_id[i].get("revisionDomain") for i in verdict.evidence}
        assert None not in domains
        assert len(domains) == 1
        revisions = sorted(by_id[i]["sourceRevision"] for i in verdict.evidence)
        assert revisions[-1] > revisions[-2]


@given(runs())
def test_removing_every_revision_domain_leaves_no_verdict_to_the_revision_rule(lines):
    stripped = [{k: v for k, v in line.items() if k != "revisionDomain"} for line in lines]
    assert all(v.rule != "rev" for v in judged(stripped).verdicts)


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
