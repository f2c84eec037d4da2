"""Run findings: not verdicts, but facts about a run that route it to review."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec


class Finding(msgspec.Struct, frozen=True, gc=False):
    kind: str
    evidence: tuple[str, ...]
    # The calls of its evidence that broke the policy's path as they were made: what a
    # check before each call would have stopped (a trajectory finding's; spec/policy.md
    # "Trajectory findings"). A retry's first attempt is evidence, but broke nothing when
    # it was made. Empty for a finding about the trace or the agent's reasoning. Not in
    # the verdict output (spec/verdicts.md): what blocks is judging.blocking's to say.
    blocked: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "evidence": list(self.evidence)}


def _finding_order(finding: Finding) -> tuple[str, str]:
    return finding.kind, finding.evidence[0]


class FindingCollector(dict[str, dict[str, bool]]):
    """One finding per kind, its evidence ids each once, in the order they were seen, each
    marked with whether it is one of the finding's blocked calls (Finding.blocked).

    A dict of kind to evidence ids (keys of a dict, which keeps them once and in order):
    one is made for every run judged, and a dict subclass is made in C."""

    def add(self, kind: str, ids: Iterable[str], *, blocked: Iterable[str] = ()) -> None:
        """Add evidence ids; `blocked`: those of them that are blocked calls."""
        evidence = self.get(kind)
        if evidence is None:
            evidence = self[kind] = dict.fromkeys(ids, False)
        else:
            for evidence_id in ids:
                evidence.setdefault(evidence_id, False)
        for evidence_id in blocked:
            evidence[evidence_id] = True

    def add_one(self, kind: str, evidence_id: str, *, blocked: bool = False) -> None:
        """add(kind, [evidence_id]), without building the list."""
        evidence = self.get(kind)
        if evidence is None:
            self[kind] = {evidence_id: blocked}
        elif blocked:
            evidence[evidence_id] = True
        else:
            evidence.setdefault(evidence_id, False)

    def findings(self) -> list[Finding]:
        found = [
            Finding(kind, tuple(ids), tuple(i for i, blocked in ids.items() if blocked))
            for kind, ids in self.items()
            if ids
        ]
        if len(found) > 1:
            found.sort(key=_finding_order)
        return found
