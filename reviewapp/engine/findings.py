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


def _finding_order(finding: Finding) -> tuple[str, str]:
    return finding.kind, finding.evidence[0]


class FindingCollector(dict[str, dict[str, None]]):
    """One finding per kind, its evidence ids each once, in the order they were seen.

    A dict of kind to evidence ids (keys of a dict, which keeps them once and in order):
    one is made for every run judged, and a dict subclass is made in C."""

    def add(self, kind: str, ids: Iterable[str]) -> None:
        evidence = self.get(kind)
        if evidence is None:
            self[kind] = dict.fromkeys(ids)
        else:
            evidence.update(dict.fromkeys(ids))

    def add_one(self, kind: str, evidence_id: str) -> None:
        """add(kind, [evidence_id]), without building the list."""
        evidence = self.get(kind)
        if evidence is None:
            self[kind] = {evidence_id: None}
        else:
            evidence[evidence_id] = None

    def findings(self) -> list[Finding]:
        found = [Finding(kind, tuple(ids)) for kind, ids in self.items() if ids]
        if len(found) > 1:
            found.sort(key=_finding_order)
        return found
