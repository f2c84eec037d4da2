"""The engine is the oracle: standard library only, no Django, no other part of reviewapp."""

import ast
import subprocess
import sys
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[2] / "reviewapp" / "engine"


def imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module or "")
    return names


def test_engine_modules_import_only_the_standard_library():
    offenders = {}
    for path in sorted(ENGINE.glob("*.py")):
        foreign = {
            name
            for name in imported_modules(path)
            if name.split(".")[0] not in sys.stdlib_module_names
        }
        if foreign:
            offenders[path.name] = sorted(foreign)
    assert offenders == {}
    assert len(list(ENGINE.glob("*.py"))) >= 6


def test_importing_the_engine_loads_nothing_outside_it():
    probe = (
        "import sys, reviewapp.engine;"
        "bad = sorted(m for m in sys.modules if m.startswith(('django', 'celery', 'kombu'))"
        " or (m.startswith('reviewapp') and not m.startswith('reviewapp.engine') and m != 'reviewapp'));"
        "print(bad)"
    )
    root = ENGINE.parent.parent
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=root, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
