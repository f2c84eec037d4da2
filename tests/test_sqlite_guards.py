"""On SQLite (the bare-machine default) too, what was recorded is never rewritten."""

import importlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
guards = importlib.import_module("reviewapp.migrations.0009_sqlite_append_only")


@pytest.fixture(scope="module")
def migrated(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("sqlite")
    database = folder / "guards.sqlite3"
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{database}",
        "CROSSCHECK_VAR_DIR": str(folder),
        "DJANGO_SETTINGS_MODULE": "reviewapp.settings",
    }
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    return database


def test_every_append_only_table_refuses_update_and_delete(migrated):
    with sqlite3.connect(migrated) as db:
        names = {name for (name,) in db.execute("SELECT name FROM sqlite_master")}
        for table in guards.APPEND_ONLY_TABLES:
            assert {f"{table}_no_update", f"{table}_no_delete"} <= names, table
        db.execute(
            "INSERT INTO reviewapp_auditevent (verb, target, data, created_at) "
            "VALUES ('claimed', 'ticket 1', '{}', '2026-11-30 00:00:00')"
        )
        with pytest.raises(sqlite3.IntegrityError, match="append-only: UPDATE"):
            db.execute("UPDATE reviewapp_auditevent SET verb = 'rewritten'")
        with pytest.raises(sqlite3.IntegrityError, match="append-only: DELETE"):
            db.execute("DELETE FROM reviewapp_auditevent")
        assert db.execute("SELECT verb FROM reviewapp_auditevent").fetchall() == [("claimed",)]


def test_a_decided_proposal_keeps_its_decision_and_only_gains_its_version(migrated):
    with sqlite3.connect(migrated) as db:
        db.execute(
            "INSERT INTO reviewapp_ruleproposal (kind, change, sentence, rationale, "
            "proposed_by_id, created_at, base_number, state, decision_reason) VALUES "
            "('authoritative-source', '{}', 's', 'r', 1, '2026-11-30 00:00:00', 0, 'pending', '')"
        )
        db.execute("UPDATE reviewapp_ruleproposal SET state = 'approved', decided_by_id = 2")
        with pytest.raises(sqlite3.IntegrityError, match="a decided proposal cannot be changed"):
            db.execute("UPDATE reviewapp_ruleproposal SET state = 'rejected'")
        with pytest.raises(sqlite3.IntegrityError, match="a decided proposal cannot be changed"):
            db.execute("UPDATE reviewapp_ruleproposal SET rationale = 'other'")
        db.execute("UPDATE reviewapp_ruleproposal SET published_in_id = 7")
        with pytest.raises(sqlite3.IntegrityError, match="a decided proposal cannot be changed"):
            db.execute("UPDATE reviewapp_ruleproposal SET published_in_id = 8")
        with pytest.raises(sqlite3.IntegrityError, match="append-only: DELETE"):
            db.execute("DELETE FROM reviewapp_ruleproposal")
