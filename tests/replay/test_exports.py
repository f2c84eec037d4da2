"""Exports a repository's CI can check with `manage.py evaluate`, redaction that keeps what
the oracle needs, and fixture files read back: uploads, shared fixtures, bundles."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from reviewapp.models import FixtureRun, FixtureSet, IngestBatch, PolicyVersion, Run, Ticket
from reviewapp.policy.versions import policy_version_publish, proposal_decide
from reviewapp.replay.exports import Export, redaction_keys
from reviewapp.replay.files import freeze_fixture_file, shared_fixtures
from reviewapp.replay.fixtures import FixtureError, freeze_queue
from reviewapp.review.queue import queue_filters
from tests.paths import ROOT, SPEC
from tests.replay.conftest import propose_owner
from tests.seeding import ingest_lines, line

pytestmark = pytest.mark.django_db


@pytest.fixture
def version(small_desk, reviewer, approver) -> PolicyVersion:
    proposal_decide(proposal=propose_owner(reviewer), user=approver, approve=True, reason="")
    return policy_version_publish(user=approver, reason="ledger owns status")


@pytest.fixture
def desk_set(version, reviewer) -> FixtureSet:
    return freeze_queue(queue_filters({"state": "any"}), reviewer, name="the desk")


def unzip(bundle, folder: Path) -> dict[str, Path]:
    with zipfile.ZipFile(bundle) as archive:
        archive.extractall(folder)
        return {name: folder / name for name in archive.namelist()}


def evaluate(records: Path, policy: Path) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", "evaluate", str(records), "--policy", str(policy), "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout


def test_the_golden_file_is_what_evaluate_prints(desk_set, version, tmp_path):
    export = Export(desk_set, version.number)
    files = unzip(export.bundle(), tmp_path)
    assert sorted(files) == [
        "fixture.json",
        "the-desk.expected.jsonl",
        "the-desk.jsonl",
        "the-desk.policy.json",
    ]
    records = files["the-desk.jsonl"].read_bytes()
    # Unredacted, the records file is the fixture set itself: its hash is the set's.
    assert hashlib.sha256(records).hexdigest() == desk_set.sha256
    expected = files["the-desk.expected.jsonl"].read_text()
    assert evaluate(files["the-desk.jsonl"], files["the-desk.policy.json"]) == expected
    assert len(expected.splitlines()) == desk_set.run_count == 25
    assert all(json.loads(row)["policyVersion"] == version.number for row in expected.splitlines())
    manifest = json.loads(files["fixture.json"].read_text())
    assert manifest["expected"] == f"expected under v{version.number}"
    assert manifest["redactedKeys"] == [] and manifest["recordsSha256"] == desk_set.sha256


def test_redaction_takes_named_keys_out_and_keeps_the_verdicts(desk_set, version, tmp_path):
    keys = redaction_keys("orderId, agent", version.document)
    files = unzip(Export(desk_set, version.number, keys).bundle(), tmp_path)
    records = files["the-desk.jsonl"].read_text()
    assert "run-4" in records and '"orderId":"run-4"' not in records
    assert '"agent":"refund-agent"' not in records and '"tok_' in records
    # The same value gets the same token: calls still join the subject they asked about.
    first = json.loads(records.splitlines()[0])
    assert (
        first["subject"]["orderId"] == json.loads(records.splitlines()[1])["arguments"]["orderId"]
    )
    expected = files["the-desk.expected.jsonl"].read_text()
    assert evaluate(files["the-desk.jsonl"], files["the-desk.policy.json"]) == expected
    kinds = [[v["kind"] for v in json.loads(row)["verdicts"]] for row in expected.splitlines()]
    assert kinds.count(["conflict"]) == 8 and kinds.count(["resolved"]) == 17


def test_keys_the_oracle_needs_are_refused(version, desk_set, tmp_path):
    with pytest.raises(FixtureError, match="cannot redact source, status"):
        redaction_keys("source status email", version.document)
    # An echoed identity redacted alone no longer matches the call's: refused, by run.
    ingest_lines(
        tmp_path,
        [
            line(
                runId="echo",
                type="tool_call",
                toolCallId="c1",
                tool="t",
                arguments={"orderId": "o-1"},
            ),
            line(
                runId="echo",
                type="tool_call",
                toolCallId="c2",
                tool="t",
                arguments={"orderId": "o-1"},
            ),
            line(
                runId="echo",
                type="tool_observation",
                observationId="a",
                toolCallId="c1",
                source="x",
                entity="o-1",
                status="paid",
            ),
            line(
                runId="echo",
                type="tool_observation",
                observationId="b",
                toolCallId="c2",
                source="y",
                entity="o-1",
                status="refunded",
            ),
        ],
        name="echo.jsonl",
    )
    echo = freeze_queue(queue_filters({"agent": ""} | {"state": "any"}), None, name="echo too")
    with pytest.raises(FixtureError, match=r"would change the verdicts of 1 run\(s\) \(echo\)"):
        Export(echo, version.number, redaction_keys("entity", version.document)).bundle()


def test_an_export_imported_back_is_the_same_fixture(desk_set, version, tmp_path, reviewer):
    bundle = tmp_path / "desk.zip"
    bundle.write_bytes(Export(desk_set, version.number).bundle().read())
    again, golden = freeze_fixture_file(
        bundle, name="desk again", origin="upload", label="desk.zip", user=reviewer
    )
    assert again.origin == "import"
    assert (golden.runs, golden.matching) == (25, 25)
    assert again.sha256 == desk_set.sha256 and again.run_count == 25
    assert "golden file: 25 of 25 runs match" in again.origin_detail
    pinned = FixtureRun.objects.filter(fixture_set=again).values_list("run_id", "through_record_id")
    assert set(pinned) == set(
        FixtureRun.objects.filter(fixture_set=desk_set).values_list("run_id", "through_record_id")
    )


def test_a_redacted_export_never_rewrites_the_runs_it_came_from(desk_set, version, tmp_path):
    bundle = tmp_path / "desk.zip"
    keys = redaction_keys("orderId", version.document)
    bundle.write_bytes(Export(desk_set, version.number, keys).bundle().read())
    runs = Run.objects.count()
    with pytest.raises(FixtureError, match="25 run\\(s\\) are stored here with other records"):
        freeze_fixture_file(bundle, name="x", origin="upload", label="desk.zip")
    assert Run.objects.count() == runs and not FixtureSet.objects.filter(name="x").exists()


def test_an_export_elsewhere_is_ingested_and_frozen(desk_set, version, tmp_path):
    files = unzip(Export(desk_set, version.number).bundle(), tmp_path)
    # The same runs under other ids stand for another installation's.
    moved = files["the-desk.jsonl"].read_text().replace('"run-', '"elsewhere-')
    upload = tmp_path / "elsewhere.jsonl"
    upload.write_text(moved)
    batches, tickets = IngestBatch.objects.count(), Ticket.objects.count()
    imported, golden = freeze_fixture_file(
        upload, name="elsewhere", origin="upload", label="e.jsonl"
    )
    assert golden is None and imported.origin == "upload"
    assert imported.sha256 == hashlib.sha256(moved.encode()).hexdigest()
    assert imported.run_count == 25 and IngestBatch.objects.count() == batches + 1
    # Ingested like any run: judged, and its conflicts ticketed.
    assert Ticket.objects.count() == tickets + 8
    assert (
        FixtureRun.objects.filter(fixture_set=imported, recorded_judgement__isnull=True).count()
        == 0
    )


def test_the_shared_fixtures_freeze_with_their_golden_files(settings, reviewer):
    settings.REPLAY_SHARED_FIXTURES_DIR = SPEC
    assert shared_fixtures() == [
        "errors-alone",
        "order-status",
        "refund-trajectory",
        "stock-reconciliation",
    ]
    for name in shared_fixtures():
        fixture_set, golden = freeze_fixture_file(
            SPEC / f"{name}.jsonl",
            name=f"shared {name}",
            origin="shared",
            label=name,
            user=reviewer,
        )
        assert golden is not None and golden.matching == golden.runs > 0, name
        assert fixture_set.run_count == golden.runs
    with pytest.raises(FixtureError, match="no shared fixture named nope"):
        freeze_fixture_file(SPEC, name="n", origin="shared", label="nope")
