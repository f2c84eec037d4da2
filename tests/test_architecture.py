"""The architecture is a checked contract: the import contracts in pyproject.toml hold for
the code as it is, and a forbidden import breaks them (shown on a copy of the code)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
MAX_MODULE_LINES = 500


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
    )


@pytest.fixture
def copy_of_the_code(tmp_path: Path) -> Path:
    shutil.copytree(
        ROOT / "reviewapp", tmp_path / "reviewapp", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_import_contracts_hold():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "forbidden", "contract"),
    [
        ("engine/judge.py", "from reviewapp.models import Run", "The engine is pure"),
        ("engine/judge.py", "import django", "The engine is pure"),
        ("models/judging.py", "from reviewapp.review import queue", "Layers"),
        ("review/queue.py", "from reviewapp.ingest import pipeline", "Layers"),
        ("judging/core.py", "from reviewapp.views import review", "Layers"),
        ("shadow/judging.py", "from reviewapp.replay import jobs", "Layers"),
    ],
)
def test_a_forbidden_import_breaks_its_contract(copy_of_the_code, module, forbidden, contract):
    path = copy_of_the_code / "reviewapp" / module
    path.write_text(path.read_text() + f"\n{forbidden}  # noqa\n")
    result = lint_imports(copy_of_the_code)
    assert result.returncode != 0
    broken = result.stdout.split("Broken contracts", 1)[-1]
    assert contract in broken, result.stdout


def test_no_module_outside_the_engine_and_migrations_is_over_500_lines():
    long = [
        f"{path.relative_to(ROOT)}: {lines} lines"
        for path in (ROOT / "reviewapp").rglob("*.py")
        if "migrations" not in path.parts and "engine" not in path.parts
        if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    ]
    assert long == []
