"""Which policy judges runs, and reading policy documents from files."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import DatabaseError

from reviewapp.engine import Policy, PolicyError, load_policy
from reviewapp.models import PolicyVersion

DEFAULT_POLICY_NUMBER = 0


@dataclass(frozen=True)
class ActivePolicy:
    """The policy that judges newly ingested runs, with the version it comes from
    (number 0 and no version: the built-in default, until a version is published)."""

    policy: Policy
    number: int
    version: PolicyVersion | None


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


def default_policy() -> Policy:
    """The built-in default, read again only when its file changes."""
    path = Path(settings.DEFAULT_POLICY_PATH)
    return _default_policy(str(path), path.stat().st_mtime_ns)


@lru_cache(maxsize=4)
def _default_policy(path: str, modified: int) -> Policy:
    return load_policy(default_policy_document())


def policy_of_version(version: PolicyVersion) -> Policy:
    return load_policy({**version.document, "version": version.number})


# Published versions never change (the database refuses it), so each is read once.
@lru_cache(maxsize=64)
def policy_of_version_id(version_id: int) -> Policy:
    return policy_of_version(PolicyVersion.objects.get(pk=version_id))


def latest_version() -> PolicyVersion | None:
    return PolicyVersion.objects.order_by("-number").first()


def active_policy() -> ActivePolicy:
    version = latest_version()
    if version is None:
        return ActivePolicy(default_policy(), DEFAULT_POLICY_NUMBER, None)
    return ActivePolicy(policy_of_version(version), version.number, version)


def active_policy_offline() -> Policy:
    """The active policy for tools that must work without a database: the default document
    when the database cannot be read."""
    try:
        return active_policy().policy
    except DatabaseError:
        return default_policy()
