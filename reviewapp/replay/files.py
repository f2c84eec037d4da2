"""Fixture sets from files: an uploaded trace, one of the shared fixtures, or a fixture
file exported by Crosscheck (replay.exports) imported back.

A file's runs become stored runs the one way runs are stored: the ingest pipeline (so they
are judged, and ticketed, like any ingested run). A run already here is never changed by a
fixture file: it must hold the file's records as its first records (then it is pinned at
the last of them), or the file is refused, naming the runs that differ (a redacted export
imported back where its runs live, say)."""

from __future__ import annotations

import json
import shutil
import tempfile
import zipfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings

from reviewapp.engine import RecordError, judge_runs, load_policy
from reviewapp.ingest.files import TraceFileError, read_trace_file
from reviewapp.ingest.formats import decode_unit
from reviewapp.ingest.pipeline import ingest_file
from reviewapp.models import FixtureSet, IngestBatch, Run, stored_documents
from reviewapp.replay.fixtures import FixtureError, canonical_line, freeze, recorded_at

# How many bad lines or runs a refusal names.
MAX_REPORTED = 5


@dataclass
class FileRuns:
    """A trace file read for freezing: each run's records (as stored documents) in order,
    its lines with the runs each holds (an OpenTelemetry document may hold several), and
    the lines that could not be read."""

    documents: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    lines: list[tuple[bytes, list[str]]] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    order: list[str] = field(default_factory=list)


def read_runs(path: Path) -> FileRuns:
    found = FileRuns()
    try:
        for line in read_trace_file(path):
            if line.error:
                found.rejected.append(f"line {line.number}: {line.error}")
                continue
            try:
                unit = decode_unit(line.payload)
            except RecordError as exc:
                found.rejected.append(f"line {line.number}: {exc}")
                continue
            for record, document in zip(unit.records, unit.documents, strict=True):
                if record.run_id not in found.documents:
                    found.order.append(record.run_id)
                found.documents[record.run_id].append(document)
            found.lines.append((line.raw, unit.run_ids))
    except TraceFileError as exc:
        raise FixtureError(f"cannot read {exc}") from None
    return found


def freeze_file(
    path: Path,
    *,
    name: str,
    origin: str,
    origin_detail: str,
    user: Any = None,
    description: str = "",
) -> FixtureSet:
    """Freeze the runs of a trace file, ingesting those that are new here."""
    found = read_runs(path)
    if found.rejected:
        shown = "; ".join(found.rejected[:MAX_REPORTED])
        raise FixtureError(f"{len(found.rejected)} line(s) cannot be read: {shown}")
    if not found.order:
        raise FixtureError("the file holds no record")
    existing = dict(Run.objects.filter(run_id__in=found.order).values_list("run_id", "pk"))
    pins = _prefix_pins(found, existing)
    new = [run_id for run_id in found.order if run_id not in existing]
    if new:
        _ingest_runs(found, new, user)
        created = dict(Run.objects.filter(run_id__in=new).values_list("run_id", "pk"))
        pins.update(_prefix_pins(found, created))
    return freeze(
        name=name,
        origin=origin,
        origin_detail=origin_detail,
        pins=recorded_at(pins),
        user=user,
        description=description,
    )


def _prefix_pins(found: FileRuns, runs: dict[str, int]) -> dict[int, int]:
    """Pin each stored run at the last of the file's records, which must be its first
    records; FixtureError naming the runs that hold something else."""
    pins, differ = {}, []
    stored: dict[int, list[tuple[int, Any]]] = defaultdict(list)
    for run_pk, record_id, document in stored_documents(runs.values()):
        stored[run_pk].append((record_id, document))
    for run_id, run_pk in runs.items():
        wanted = [canonical_line(document) for document in found.documents[run_id]]
        held = stored[run_pk][: len(wanted)]
        if [canonical_line(data) for _, data in held] != wanted:
            differ.append(run_id)
            continue
        pins[run_pk] = held[-1][0]
    if differ:
        shown = ", ".join(differ[:MAX_REPORTED])
        raise FixtureError(
            f"{len(differ)} run(s) are stored here with other records than the file's ({shown}): "
            "a fixture file never changes a run; import it where those runs are not"
        )
    return pins


def _ingest_runs(found: FileRuns, run_ids: list[str], user: Any) -> None:
    """Ingest the lines of these runs (new here) through the pipeline, as one file."""
    new = set(run_ids)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "fixture-runs.jsonl"
        with path.open("wb") as out:
            for raw, holders in found.lines:
                if not new.intersection(holders):
                    continue
                if not new.issuperset(holders):
                    # It cannot be ingested without adding to a run stored already.
                    raise FixtureError(
                        f"a line holds runs new here and runs stored already ({', '.join(holders)}): "
                        "ingest the file instead"
                    )
                out.write(raw + b"\n")
        # Ingested where it lies and at once (never left for a worker to find gone).
        ingest_file(path, channel=IngestBatch.Channel.CLI, user=user)


# --- fixture files exported by Crosscheck, and the shared fixtures ----------------------


@dataclass
class Golden:
    """What a fixture file's expected verdicts say against the engine now."""

    runs: int
    matching: int

    def describe(self) -> str:
        return f"golden file: {self.matching} of {self.runs} runs match"


def unpack(upload: Path) -> tuple[Path, dict[str, Any] | None, list[dict[str, Any]] | None]:
    """A bundle (zip) exported by Crosscheck into its records file, policy and expected
    verdicts; any other file is a records file alone."""
    if not zipfile.is_zipfile(upload):
        return upload, None, None
    with zipfile.ZipFile(upload) as bundle:
        names = bundle.namelist()
        records = [n for n in names if n.endswith(".jsonl") and not n.endswith(".expected.jsonl")]
        if len(records) != 1:
            raise FixtureError("a fixture bundle holds exactly one records file (NAME.jsonl)")
        stem = records[0][: -len(".jsonl")]
        target = upload.with_suffix(".records.jsonl")
        info = bundle.getinfo(records[0])
        if info.file_size > settings.INGEST_MAX_DECOMPRESSED_BYTES:
            raise FixtureError(f"{records[0]} inflates past the limit")
        # Streamed to disk: a zip member reads no further than the size it declares.
        with bundle.open(info) as source, target.open("wb") as out:
            shutil.copyfileobj(source, out, 1 << 20)
        policy = _json_member(bundle, f"{stem}.policy.json")
        expected_text = _member(bundle, f"{stem}.expected.jsonl", missing_ok=True)
        expected = (
            [json.loads(line) for line in expected_text.decode().splitlines() if line.strip()]
            if expected_text
            else None
        )
    return target, policy, expected


def _member(bundle: zipfile.ZipFile, name: str, *, missing_ok: bool = False) -> bytes:
    """A small member (the policy, the expected verdicts), read into memory."""
    try:
        info = bundle.getinfo(name)
    except KeyError:
        if missing_ok:
            return b""
        raise FixtureError(f"the bundle has no {name}") from None
    if info.file_size > settings.INGEST_MAX_BYTES:
        raise FixtureError(f"{name} inflates past the limit")
    return bundle.read(name)


def _json_member(bundle: zipfile.ZipFile, name: str) -> dict[str, Any] | None:
    text = _member(bundle, name, missing_ok=True)
    return json.loads(text) if text else None


def golden_check(path: Path, policy: dict[str, Any], expected: list[dict[str, Any]]) -> Golden:
    """Judge the records file under the bundle's policy, as `manage.py evaluate` does, and
    count the runs whose verdicts are the expected ones."""
    records = []
    for line in read_trace_file(path):
        records.extend(decode_unit(line.payload).records)
    now = {j.run_id: j.as_dict() for j in judge_runs(records, load_policy(policy))}
    matching = sum(now.get(str(item.get("runId"))) == item for item in expected)
    return Golden(len(expected), matching)


def shared_fixtures() -> list[str]:
    """The names of the trace files in REPLAY_SHARED_FIXTURES_DIR (NAME.jsonl)."""
    folder = Path(settings.REPLAY_SHARED_FIXTURES_DIR)
    if not folder.is_dir():
        return []
    return sorted(
        path.name[: -len(".jsonl")]
        for path in folder.glob("*.jsonl")
        if not path.name.endswith(".expected.jsonl")
    )


def shared_path(name: str) -> tuple[Path, dict[str, Any] | None, list[dict[str, Any]] | None]:
    if name not in shared_fixtures():
        raise FixtureError(f"no shared fixture named {name}")
    folder = Path(settings.REPLAY_SHARED_FIXTURES_DIR)
    policy_path, expected_path = folder / f"{name}.policy.json", folder / f"{name}.expected.jsonl"
    policy = json.loads(policy_path.read_text()) if policy_path.exists() else None
    expected = (
        [json.loads(line) for line in expected_path.read_text().splitlines() if line.strip()]
        if expected_path.exists()
        else None
    )
    return folder / f"{name}.jsonl", policy, expected


def freeze_fixture_file(
    path: Path,
    *,
    name: str,
    origin: str,
    label: str,
    user: Any = None,
    description: str = "",
) -> tuple[FixtureSet, Golden | None]:
    """Freeze an upload, an exported bundle or a shared fixture; with its golden file, say
    how many of its runs the engine judges as expected now."""
    if origin == FixtureSet.Origin.SHARED:
        records, policy, expected = shared_path(label)
    else:
        records, policy, expected = unpack(path)
        if policy is not None:
            origin = FixtureSet.Origin.IMPORT
    golden = golden_check(records, policy, expected) if policy and expected is not None else None
    detail = f"{FixtureSet.Origin(origin).label}: {label}"
    if golden is not None:
        detail += f" ({golden.describe()})"
    fixture_set = freeze_file(
        records, name=name, origin=origin, origin_detail=detail, user=user, description=description
    )
    return fixture_set, golden
