"""Run findings: not verdicts, but facts about a run that route it to review."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec


class Finding(msgspec.Struct, frozen=True, gc=False):
    kind: str
    evidence: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "evidence": list(self.evidence)}


class FindingCollector:
    """One finding per kind, its evidence ids each once, in the order they were seen."""

    def __init__(self) -> None:
        self._evidence: dict[str, dict[str, None]] = {}

    def add(self, kind: str, ids: Iterable[str]) -> None:
        self._evidence.setdefault(kind, {}).update(dict.fromkeys(ids))

    def findings(self) -> list[Finding]:
        found = [Finding(kind, tuple(ids)) for kind, ids in self._evidence.items() if ids]
        found.sort(key=lambda f: (f.kind, f.evidence[0]))
        return found
