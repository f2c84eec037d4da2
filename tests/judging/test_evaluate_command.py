"""manage.py evaluate as spec/verdicts.md describes it."""

import gzip
import json
import subprocess
import sys

import pytest
from django.core.management import call_command

from reviewapp.ingest import otel
from tests.paths import ROOT

SPEC = ROOT / "tests" / "fixtures" / "spec"
GOOD = (
    '{"runId":"r1","type":"tool_observation","observationId":"o1","source":"a","status":"paid"}\n'
    '{"runId":"r1","type":"tool_observation","observationId":"o2","source":"b","status":"refunded"}\n'
)


def evaluate(capsys, *paths, policy=str(SPEC / "order-status.policy.json")):
    call_command("evaluate", *map(str, paths), policy=policy, json=True)
    captured = capsys.readouterr()
    runs = [json.loads(line) for line in captured.out.splitlines()]
    return runs, captured.err.splitlines()


def test_it_reads_gzip_whatever_the_file_is_called(tmp_path, capsys):
    plain, packed = tmp_path / "t.jsonl", tmp_path / "t.jsonl.gz"
    plain.write_text(GOOD)
    packed.write_bytes(gzip.compress(GOOD.encode()))
    assert evaluate(capsys, plain)[0] == evaluate(capsys, packed)[0]
    (tmp_path / "no-suffix").write_bytes(gzip.compress(GOOD.encode()))
    runs, _ = evaluate(capsys, tmp_path / "no-suffix")
    assert runs[0]["verdicts"][0]["reason"] == "no-approved-precedence"


def test_bad_lines_are_reported_with_file_line_and_reason(tmp_path, capsys):
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(
        b"\xef\xbb\xbf"
        + GOOD.encode()  # a BOM opening the file is tolerated
        + b"\r\n"  # a blank line is not a line
        + b"not json\r\n"
        + b'{"runId":"r1","type":"tool_call","tool":"x"}\n'
        + b'{"runId":"r1","type":"agent_action","name":"stop","name":"go"}\n'
        + b"[1,2]\n"
        + b'{"runId":"r1","type":"tool_observation","observationId":"o3","source":"c","qty":NaN}\n'
        + b"\xff\xfe{}\n"
        + b'{"runId":"r1","type":"agent_action","name":"refund"}'  # no newline at the end
    )
    runs, err = evaluate(capsys, trace)
    assert err == [
        f"{trace}:4: not valid JSON: Expecting value at column 1",
        f'{trace}:5: tool_call: missing required key "toolCallId"',
        f'{trace}:6: duplicate key "name"',
        # An array could be a list of spans; this one is not.
        f"{trace}:7: not a recognised trace format: found an array of 2 items; "
        f"expected {otel.EXPECTED}",
        f"{trace}:8: NaN is not valid JSON",
        f"{trace}:9: invalid UTF-8 at byte 1",
        "9 lines, 3 accepted, 6 rejected",
    ]
    assert runs[0]["verdicts"][0]["action"] == "refund"


def test_runs_come_out_in_order_of_first_appearance_across_files(tmp_path, capsys):
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text('{"runId":"zeta","type":"agent_action","name":"stop"}\n')
    second.write_text(GOOD + '{"runId":"zeta","type":"agent_action","name":"go"}\n')
    runs, err = evaluate(capsys, first, second)
    assert [r["runId"] for r in runs] == ["zeta", "r1"]
    assert err == ["4 lines, 4 accepted, 0 rejected"]


@pytest.mark.django_db
def test_default_policy_is_the_active_one(tmp_path, capsys):
    trace = tmp_path / "t.jsonl"
    trace.write_text(GOOD)
    runs, _ = evaluate(capsys, trace, policy=None)
    assert runs[0]["verdicts"][0]["field"] == "status"


def run_cli(*args):
    return subprocess.run(
        [sys.executable, "manage.py", "evaluate", *args, "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.jsonl"], "evaluate: cannot read missing.jsonl: No such file or directory"),
        (
            [str(SPEC), "--policy", str(SPEC / "order-status.policy.json")],
            f"evaluate: cannot read {SPEC}: is a directory",
        ),
        (
            [str(SPEC / "order-status.jsonl"), "--policy", "nope.json"],
            "evaluate: cannot read policy nope.json: No such file or directory",
        ),
    ],
)
def test_unreadable_inputs_exit_2_with_one_line(args, message):
    result = run_cli(*args)
    assert (result.returncode, result.stdout, result.stderr) == (2, "", message + "\n")


def test_an_invalid_policy_exits_2_naming_the_bad_path(tmp_path):
    policy = tmp_path / "p.json"
    policy.write_text(json.dumps({"rules": [{"id": "a", "kind": "newest", "field": "status"}]}))
    result = run_cli(str(SPEC / "order-status.jsonl"), "--policy", str(policy))
    assert result.returncode == 2
    assert result.stderr.startswith(
        f'evaluate: invalid policy {policy}: rules[0].kind: unknown kind "newest"'
    )
    assert result.stderr.count("\n") == 1


def test_it_writes_nothing_to_the_database(tmp_path):
    # A database no server answers for: any read or write would fail.
    result = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "evaluate",
            str(SPEC / "order-status.jsonl"),
            "--policy",
            str(SPEC / "order-status.policy.json"),
            "--json",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={
            "PATH": "/usr/bin:/bin",
            "DATABASE_URL": "postgres://nobody@127.0.0.1:1/nowhere",
            "CROSSCHECK_VAR_DIR": str(tmp_path),
        },
    )
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == 5


def test_a_record_read_again_at_its_position_adds_nothing_and_other_bytes_there_are_refused(
    tmp_path, capsys
):
    """As the ingest stores the same pieces (spec/traces.md, "Delivery in pieces")."""
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    numbered = [
        '{"runId":"r1","type":"tool_observation","observationId":"o1","source":"a",'
        '"status":"paid","seq":0}',
        '{"runId":"r1","type":"agent_action","name":"request_review","seq":1}',
        '{"runId":"r1","type":"tool_observation","observationId":"o2","source":"b",'
        '"status":"refunded","seq":2}',
        '{"runId":"r1","type":"agent_action","name":"request_review","seq":3}',
    ]
    first.write_text("\n".join(numbered[:2]) + "\n")
    second.write_text(
        "\n".join(
            [
                numbered[1],  # sent again
                numbered[2],
                numbered[3],  # the same action again, at its own position
                numbered[3].replace("request_review", "issue_refund"),
            ]
        )
        + "\n"
    )
    runs, err = evaluate(capsys, first, second)
    assert err == [
        f"{second}:4: seq 3 of run r1 already holds another record",
        "6 lines, 5 accepted, 1 rejected",
    ]
    (verdict,) = runs[0]["verdicts"]
    assert (verdict["evidence"], verdict["action"]) == (["o1", "o2"], "request_review")
    whole = tmp_path / "whole.jsonl"
    whole.write_text("\n".join(numbered) + "\n")
    assert evaluate(capsys, whole)[0] == runs
