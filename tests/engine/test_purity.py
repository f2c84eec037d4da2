"""The engine is the oracle: standard library plus msgspec, no Django, no I/O, no other part
of reviewapp."""

import ast
import subprocess
import sys
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[2] / "reviewapp" / "engine"
# The one third-party package the engine may import: a decoder, no I/O of its own.
ALLOWED_OUTSIDE_STDLIB = {"msgspec"}


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module or "")
    return names


def foreign_imports(path: Path) -> set[str]:
    return {
        name
        for name in imported_modules(path)
        if name.split(".")[0] not in sys.stdlib_module_names
        and name.split(".")[0] not in ALLOWED_OUTSIDE_STDLIB
    }


def test_engine_modules_import_only_the_standard_library_and_msgspec():
    offenders = {}
    for path in sorted(ENGINE.glob("*.py")):
        if foreign := foreign_imports(path):
            offenders[path.name] = sorted(foreign)
    assert offenders == {}
    assert len(list(ENGINE.glob("*.py"))) >= 6
    # msgspec is used, not merely allowed: the records are decoded with it.
    assert "msgspec" in imported_modules(ENGINE / "records.py")


def test_the_check_names_anything_else(tmp_path):
    module = tmp_path / "module.py"
    module.write_text(
        "import json\nimport msgspec.json\nfrom django.db import models\nimport requests\n"
    )
    assert foreign_imports(module) == {"django.db", "requests"}


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


def test_importing_the_engine_loads_no_third_party_package_but_msgspec():
    probe = (
        "import sys, msgspec, msgspec.json;"
        "before = set(sys.modules);"
        "import reviewapp.engine;"
        "new = {m.split('.')[0] for m in set(sys.modules) - before};"
        "print(sorted(new - sys.stdlib_module_names))"
    )
    root = ENGINE.parent.parent
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=root, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "['reviewapp']"
