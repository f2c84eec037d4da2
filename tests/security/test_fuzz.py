"""Hostile input through the line parser and the upload path (matrix row 1): whatever bytes
arrive, nothing raises, every non-blank line is counted once (accepted, duplicate or
rejected), and every rejected line keeps its bytes and a reason. Hypothesis with a fixed
seed; tests/security/fuzz_lines.py runs the parser under atheris too."""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reviewapp.engine import RecordError
from reviewapp.ingest.files import GZIP_MAGIC, MAX_LINE_BYTES, iter_raw_lines
from reviewapp.ingest.formats import decode_unit
from reviewapp.ingest.pipeline import ingest_file
from reviewapp.ingest.sniff import binary_kind
from reviewapp.models import IngestBatch, TraceLine
from tests.paths import ROOT

SLOW = os.environ.get("CROSSCHECK_SLOW") == "1"
PARSER_EXAMPLES = 10_000 if SLOW else 1_500
UPLOAD_EXAMPLES = 200 if SLOW else 40

RECORD = st.fixed_dictionaries(
    {
        "runId": st.text(max_size=12),
        "type": st.sampled_from(
            ["run_started", "tool_call", "tool_observation", "agent_action", "nonsense"]
        ),
    },
    optional={
        "toolCallId": st.text(max_size=8),
        "observationId": st.text(max_size=8),
        "source": st.text(max_size=8),
        "status": st.one_of(st.text(max_size=8), st.integers(), st.none()),
        "agent": st.text(max_size=8),
    },
)
LINE = st.one_of(
    st.binary(max_size=200),
    RECORD.map(lambda record: json.dumps(record, ensure_ascii=False).encode()),
    RECORD.map(lambda record: json.dumps(record).encode()),
    st.sampled_from(
        [b"", b"   ", b"\xef\xbb\xbf{}", b"\x00", b'{"runId": "a\\u0000"}', b"NaN", b"[1]"]
    ),
)
ENDINGS = st.sampled_from([b"\n", b"\r\n", b"\r"])


def joined(lines: list[bytes], endings: list[bytes]) -> bytes:
    return b"".join(line + endings[i % len(endings)] for i, line in enumerate(lines))


@settings(
    max_examples=PARSER_EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
@given(st.lists(LINE, max_size=20), st.lists(ENDINGS, min_size=1, max_size=3), st.booleans())
def test_the_line_parser_never_raises_and_loses_no_line(lines, endings, compressed):
    body = joined(lines, endings)
    data = gzip.compress(body) if compressed else body
    read = list(iter_raw_lines(io.BytesIO(data), "fuzz"))
    for raw_line in read:
        assert raw_line.error is None or raw_line.error
        if raw_line.error is None:
            try:
                decode_unit(raw_line.payload)
            except RecordError as exc:
                assert str(exc)
    if (
        not compressed
        and b"\r" not in b"".join(endings)
        and not body.lstrip().startswith((b"{", b"["))
        and not body.startswith(GZIP_MAGIC)
    ):
        # Plain lines split on \n only: every non-blank one is read, once, in order (a body
        # opening with gzip's magic bytes is read as gzip, whatever follows).
        expected = [line for line in body.split(b"\n") if line.strip()]
        assert [raw_line.raw for raw_line in read] == expected


@pytest.mark.django_db
@settings(
    max_examples=UPLOAD_EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
@given(lines=st.lists(LINE, max_size=12), compressed=st.booleans(), name=st.integers(0, 10**6))
def test_every_upload_line_is_stored_once_with_its_bytes_and_reason(
    lines, compressed, name, tmp_path_factory
):
    body = b"".join(line + b"\n" for line in lines)
    path = tmp_path_factory.mktemp("fuzz") / f"t{name}.jsonl"
    path.write_bytes(gzip.compress(body) if compressed else body)
    summary = ingest_file(path, channel=IngestBatch.Channel.CLI)
    assert summary.lines == summary.accepted + summary.duplicates + summary.rejected
    batch = IngestBatch.objects.get(pk=next(iter(summary.batch_pks)))
    assert batch.state == "done"
    for line in TraceLine.objects.filter(batch=batch, accepted=False):
        assert line.reason
        assert bytes(line.raw) in body or line.reason.startswith(("line is", "unreadable"))


CURATED = {
    "invalid utf-8": b'{"runId": "r", "type": "run_started", "agent": "\xff"}',
    "bom": b'\xef\xbb\xbf{"runId": "bom", "type": "run_started"}',
    "nul escape": b'{"runId": "r\\u0000", "type": "run_started"}',
    "raw nul": b'{"runId": "r\x00", "type": "run_started"}',
    "nan": b'{"runId": "r", "type": "tool_observation", "observationId": "o", "status": NaN}',
    "infinity": b'{"runId": "r", "type": "tool_observation", "observationId": "o", "v": Infinity}',
    "duplicate keys": b'{"runId": "a", "runId": "b", "type": "run_started"}',
    "not an object": b'["runId", "r"]',
    "deep": b'{"runId": "r", "type": "run_started", "subject": ' + b"[" * 5000 + b"]" * 5000 + b"}",
    "newline in run id": b'{"runId": "r\\n[2026] FORGED", "type": "run_started"}',
    "lone surrogate": b'{"runId": "\\ud800", "type": "run_started"}',
    "huge number": b'{"runId": "r", "type": "run_started", "n": 1' + b"0" * 5000 + b"}",
}


@pytest.mark.django_db
def test_the_curated_hostile_lines_are_each_kept_with_a_reason(tmp_path):
    oversized = b'{"runId": "big", "x": "' + b"a" * (MAX_LINE_BYTES + 1) + b'"}'
    body = b"\r\n".join([*CURATED.values(), b"", b"   ", oversized]) + b"\n" + b'{"runId": "last"}'
    path = tmp_path / "hostile.jsonl"
    path.write_bytes(body)
    summary = ingest_file(path, channel=IngestBatch.Channel.CLI)
    assert summary.lines == len(CURATED) + 2  # blank lines are not lines
    assert summary.lines == summary.accepted + summary.duplicates + summary.rejected
    rejected = dict(TraceLine.objects.filter(accepted=False).values_list("line_number", "reason"))
    assert all(rejected.values())
    assert len(rejected) >= len(CURATED) - 2, rejected  # a BOM'd and a deep line may be fine


@pytest.mark.skipif(sys.version_info >= (3, 14), reason="atheris has wheels up to 3.13")
def test_the_parser_under_atheris(tmp_path):
    runs = 1_000_000 if SLOW else 20_000
    done = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("fuzz_lines.py")), f"-atheris_runs={runs}"],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"},
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"Done {runs} in" in done.stderr or "Done" in done.stderr, done.stderr[-2000:]


NAMES = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="/\\"), min_size=1, max_size=40
)


@pytest.mark.django_db
@settings(
    max_examples=UPLOAD_EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
@given(lines=st.lists(LINE, max_size=8), name=NAMES)
def test_the_upload_page_takes_any_file_under_any_name(lines, name, client, reviewer):
    """Through the page itself (multipart, a file name as a browser sends it): never a 500;
    a small plain upload is ingested at once, every line counted."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    client.force_login(reviewer)
    before = IngestBatch.objects.count()
    body = b"".join(line + b"\n" for line in lines)
    upload = SimpleUploadedFile(name.replace("\x00", "") + ".jsonl", body)
    response = client.post("/ingest/", {"files": [upload]})
    assert response.status_code == 302
    if not body:  # named as empty, and nothing made of it
        assert IngestBatch.objects.count() == before
        return
    made = IngestBatch.objects.order_by("-id").first()
    if body.startswith(GZIP_MAGIC):  # queued for a worker
        return
    if binary_kind(body[:65536]) is not None:  # refused at the door, as a binary file
        assert IngestBatch.objects.count() == before
        return
    assert IngestBatch.objects.count() == before + 1
    assert made.state == "done"
    assert made.lines == made.accepted + made.duplicates + made.rejected
