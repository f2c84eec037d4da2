"""Static checks (matrix row 26): bandit finds nothing of high severity and nothing of
medium severity that was not reviewed (bandit-reviewed.txt says why each is fine). The
supply-chain report (pip-audit) is a step of scripts/test of its own: it says "not run"
when no advisory database can be reached, never a pass it did not earn."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.paths import ROOT

HERE = Path(__file__).parent
BIN = Path(sys.executable).parent


def reviewed() -> set[tuple[str, str]]:
    pairs = set()
    for line in (HERE / "bandit-reviewed.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            test_id, path, *_ = line.split()
            pairs.add((test_id, path))
    return pairs


def test_bandit_finds_nothing_unreviewed():
    done = subprocess.run(
        [str(BIN / "bandit"), "-r", "reviewapp", "-f", "json", "-q", "--severity-level", "medium"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    results = json.loads(done.stdout)["results"]
    high = [r for r in results if r["issue_severity"] == "HIGH"]
    assert not high, high
    unreviewed = [
        f"{r['test_id']} {r['filename']}:{r['line_number']} {r['issue_text']}"
        for r in results
        if (r["test_id"], r["filename"]) not in reviewed()
    ]
    assert not unreviewed, "\n".join(unreviewed)
