"""Which policy judges runs, and reading policy documents from files."""

from __future__ import annotations

import json
from dataclasses import dataclass
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


def policy_of_version(version: PolicyVersion) -> Policy:
    return load_policy({**version.document, "version": version.number})


def active_policy() -> ActivePolicy:
    version = PolicyVersion.objects.order_by("-number").first()
    if version is None:
        return ActivePolicy(load_policy(default_policy_document()), DEFAULT_POLICY_NUMBER, None)
    return ActivePolicy(policy_of_version(version), version.number, version)


def active_policy_offline() -> Policy:
    """The active policy for tools that must work without a database: the default document
    when the database cannot be read."""
    try:
        return active_policy().policy
    except DatabaseError:
        return load_policy(default_policy_document())
