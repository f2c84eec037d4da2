"""Upgrading a database that holds data: lines and records stored under migration 0028
(before a native record became its line, 0029, and before line identities became UUIDs,
0030; then 0031 remade the reference checks) are kept whole by `manage.py migrate`, a
delivery of the same lines afterwards is still a duplicate, and the guards still refuse.

Each database is made at 0028, filled through the models as they were at 0028, migrated
to the newest migration and then ingested into, all by `manage.py` in processes of their
own, in a throwaway database beside the test database."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest

from tests.paths import ROOT
from tests.roles import owner_settings

BEFORE = "0028_guards_planned_per_statement"

RUN_ID = "upgrade-run-1"
STORED_LINES = [
    {
        "runId": RUN_ID,
        "type": "run_started",
        "agent": "refund-agent",
        "subject": {"orderId": "o-7"},
    },
    {
        "runId": RUN_ID,
        "type": "tool_call",
        "toolCallId": "c1",
        "tool": "get_refund",
        "arguments": {"orderId": "o-7"},
        "ok": True,
    },
]
NEW_LINE = {
    "runId": RUN_ID,
    "type": "tool_observation",
    "observationId": "ob1",
    "toolCallId": "c1",
    "source": "refund-service",
    "revisionDomain": "payments",
    "sourceRevision": 42,
    "status": "refunded",
    "errors": [],
}


def raw(document: dict) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode()


def identity_at_0028(document: dict) -> str:
    """A native line's identity as ingest computed it before 0030: the whole SHA-256, in
    hex, of its owner (its run), its bytes' hash and its occurrence in the file."""
    text = f"run:{document['runId']}\x1f{hashlib.sha256(raw(document)).hexdigest()}".encode()
    return hashlib.sha256(b"%b\x1f%d" % (text, 1)).hexdigest()


# Run by `manage.py shell` on the database at 0028: the two lines and their records (each
# with its data, as every record had then), through the models of that migration.
FILL_AT_0028 = f"""
import json, sys
from django.db import connection
from django.db.migrations.loader import MigrationLoader
from django.utils import timezone
state = MigrationLoader(connection).project_state(("reviewapp", "{BEFORE}"))
model = lambda name: state.apps.get_model("reviewapp", name)
lines = json.loads(sys.stdin.read())
batch = model("IngestBatch").objects.create(
    channel="cli", state="done", file_name="before.jsonl", content_sha256="0" * 64,
    size_bytes=1, lines=2, accepted=2,
)
run = model("Run").objects.create(
    run_id="{RUN_ID}", agent="refund-agent", subject={{"orderId": "o-7"}}, started_at=timezone.now()
)
for number, (document, identity) in enumerate(lines, 1):
    line = model("TraceLine").objects.create(
        batch=batch, identity=identity, line_number=number,
        raw=json.dumps(document, separators=(",", ":")).encode(), accepted=True,
    )
    key = document.get("toolCallId", "")
    model("TraceRecord").objects.create(
        run=run, line=line, type=document["type"], key=key, source="", data=document
    )
"""

# Run by `manage.py shell` once upgraded and ingested into: what is stored, as JSON.
READ_BACK = f"""
import json
from reviewapp.models import Run, TraceLine, TraceRecord
run = Run.objects.get(run_id="{RUN_ID}")
records = TraceRecord.objects.filter(run=run).select_related("line").order_by("id")
print(json.dumps({{
    "identities": sorted(line.identity.hex for line in TraceLine.objects.all()),
    "documents": [record.document for record in records],
    "judged_through": run.current_judgement.through_record_id,
    "last_record": records.last().pk,
}}))
"""


def manage(env: dict[str, str], *args: str, stdin: str | None = None) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def upgrade_and_redeliver(env: dict[str, str], folder: Path) -> tuple[dict, dict]:
    """Migrate to 0028, fill, migrate to the newest, then ingest a file of the two stored
    lines and one new one; (the ingest's summary, what is stored)."""
    manage(env, "migrate", "reviewapp", BEFORE, "-v0")
    stored = [(document, identity_at_0028(document)) for document in STORED_LINES]
    manage(env, "shell", "-c", FILL_AT_0028, stdin=json.dumps(stored))
    manage(env, "migrate", "-v0")
    delivery = folder / "again.jsonl"
    delivery.write_bytes(b"".join(raw(d) + b"\n" for d in [*STORED_LINES, NEW_LINE]))
    summary = json.loads(manage(env, "ingest", str(delivery), "--json").splitlines()[-1])
    return summary, json.loads(manage(env, "shell", "-c", READ_BACK).splitlines()[-1])


def assert_upgraded(summary: dict, stored: dict) -> None:
    # The two lines stored before the upgrade are recognised: only the new one is added.
    assert (summary["lines"], summary["duplicates"], summary["accepted"]) == (3, 2, 1)
    assert summary["rejected"] == 0
    # Each old identity is kept as its first 128 bits, the identity ingest computes now.
    old = {identity_at_0028(document)[:32] for document in STORED_LINES}
    assert old <= set(stored["identities"]) and len(stored["identities"]) == 3
    # The old records read back from their own data, the new one from its line; the run
    # is judged again over all three.
    assert stored["documents"] == [*STORED_LINES, NEW_LINE]
    assert stored["judged_through"] == stored["last_record"]


def manage_env(url: str, folder: Path) -> dict[str, str]:
    """The environment of `manage.py` on the database `url` names, as one role, with the
    broker that needs no server (in `folder`)."""
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "CROSSCHECK_VAR_DIR": str(folder),
        "DJANGO_SETTINGS_MODULE": "reviewapp.settings",
    }
    env.pop("MIGRATE_DATABASE_URL", None)
    env.pop("REDIS_URL", None)
    return env


def test_a_postgresql_database_with_lines_stored_before_0029_upgrades_whole(tmp_path):
    owner = owner_settings()
    name = f"crosscheck_upgrade_{uuid.uuid4().hex[:12]}"
    server = {
        "host": owner["HOST"],
        "port": owner["PORT"],
        "user": owner["USER"],
        "password": owner["PASSWORD"],
    }

    def connect(dbname: str, **options) -> psycopg.Connection:
        """As the owner of the tables, on this server."""
        given = {key: value for key, value in server.items() if value}
        return psycopg.connect(**given, dbname=dbname, **options)

    with connect("postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = "postgres://{user}:{password}@{host}:{port}/{name}".format(
        name=name, **{k: v or "" for k, v in server.items()}
    )
    try:
        summary, stored = upgrade_and_redeliver(manage_env(url, tmp_path), tmp_path)
        assert_upgraded(summary, stored)
        with (
            connect(name) as conn,
            pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only: UPDATE"),
        ):
            conn.execute("UPDATE reviewapp_traceline SET reason = 'rewritten'")
    finally:
        with connect("postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
