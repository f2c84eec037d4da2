"""Which policy judges runs, and reading policy documents from files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings

from reviewapp.engine import Policy, PolicyError, load_policy


def read_policy_file(path: str | Path) -> Policy:
    """Load and validate a policy document; PolicyError for bad JSON or a bad document,
    OSError when the file cannot be read."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PolicyError([f"(document): not valid JSON: {exc.msg} at line {exc.lineno}"]) from None
    return load_policy(document)


def default_policy_document() -> dict[str, Any]:
    return json.loads(Path(settings.DEFAULT_POLICY_PATH).read_text(encoding="utf-8"))


def active_policy() -> Policy:
    """The policy that judges newly ingested runs: the default document kept in the
    repository until an approved policy version exists."""
    return load_policy(default_policy_document())
