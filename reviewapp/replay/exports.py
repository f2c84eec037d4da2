"""Exporting a fixture set as a golden file a repository's CI can check:

    NAME.jsonl           its records up to each pin, native JSON Lines (runs in order)
    NAME.policy.json     the chosen version's document, with its number
    NAME.expected.jsonl  what `manage.py evaluate NAME.jsonl --policy NAME.policy.json --json`
                         prints, line for line: computed from the exported lines themselves

and a zip bundle of the three with a manifest (fixture.json). Named keys can be redacted
on the way out (personal or secret data): each value becomes a token, the same for the
same value within one export, so joins and identities still match; keys the oracle reads
are refused, and an export whose redaction would change any run's verdicts (kinds,
reasons, rules, unsafe, findings) is refused, naming the runs."""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from django.utils import timezone

from reviewapp.engine import Policy, judge_runs, load_policy
from reviewapp.ingest.formats import decode_unit
from reviewapp.judging.policies import default_policy_document
from reviewapp.models import FixtureRun, FixtureSet, PolicyVersion, stored_documents
from reviewapp.policy.versions import policy_version_export
from reviewapp.privacy.access import raw_reason, raw_view_record
from reviewapp.privacy.impact import changed_runs, refusal
from reviewapp.privacy.rules import Redactor, RuleSet, oracle_refusal, refused_keys
from reviewapp.replay.fixtures import FixtureError, canonical_line

RUN_CHUNK = 2000
# The parts that hold the traces' records whole.
RAW_PARTS = frozenset({"bundle", "records"})


def raw_export_check(user: Any, fixture_set: FixtureSet, part: str, reason: str | None) -> None:
    """A part holding the records (RAW_PARTS) is exported only to a person with the raw
    data permission who says why, and recorded (privacy.access.RawAccessRefused
    otherwise). Not tokens instead: a record's keys are the source's to name, so no list
    of keys to tokenise catches every identity, and the keys the oracle reads cannot be
    tokenised without changing the verdicts the golden file is there to check."""
    if part not in RAW_PARTS:
        return
    why = raw_reason(user, reason)
    raw_view_record(
        user, reason=why, what=f"fixture set #{fixture_set.pk} ({fixture_set.name}): {part} export"
    )


def redaction_keys(text: str, policy_document: dict[str, Any]) -> frozenset[str]:
    """The keys named (commas or spaces); FixtureError for one the oracle needs (the
    check redaction rules at ingest get: privacy.rules)."""
    keys = frozenset(word for word in re.split(r"[\s,]+", text) if word)
    refused = refused_keys(keys, load_policy(policy_document).decision_fields)
    if refused:
        raise FixtureError(oracle_refusal(refused))
    return keys


def policy_document_of(number: int) -> dict[str, Any]:
    """The document expected verdicts are computed under: version `number`, or the built-in
    default for 0."""
    if number == 0:
        return default_policy_document()
    version = PolicyVersion.objects.filter(number=number).first()
    if version is None:
        raise FixtureError(f"no version v{number}")
    return policy_version_export(version)


def record_documents(fixture_set: FixtureSet) -> Iterator[tuple[int, dict[str, Any]]]:
    """The fixture set's records up to each pin (with their run's pk), runs by pk, records
    in order."""
    pins = dict(
        FixtureRun.objects.filter(fixture_set=fixture_set).values_list(
            "run_id", "through_record_id"
        )
    )
    pks = sorted(pins)
    for start in range(0, len(pks), RUN_CHUNK):
        chunk = pks[start : start + RUN_CHUNK]
        for run_pk, record_id, document in stored_documents(chunk):
            if record_id <= pins[run_pk]:
                yield run_pk, document


@dataclass
class Export:
    """An export being written: the records file, then the expected verdicts."""

    fixture_set: FixtureSet
    version_number: int
    redact: frozenset[str] = frozenset()
    policy: dict[str, Any] = field(default_factory=dict)
    sha256: str = ""
    runs: int = 0
    records: int = 0
    _loaded: Policy | None = None

    def __post_init__(self) -> None:
        self.policy = policy_document_of(self.version_number)

    @property
    def stem(self) -> str:
        slug = re.sub(r"[^A-Za-z0-9._-]+", "-", self.fixture_set.name).strip("-.")[:80]
        return slug or f"fixture-{self.fixture_set.pk}"

    @property
    def label(self) -> str:
        return (
            f"expected under v{self.version_number}"
            if self.version_number
            else ("expected under the built-in default policy")
        )

    def write_records(self, out: IO[bytes]) -> None:
        """The records file; with redaction, each run is judged both ways on the way out,
        and FixtureError says which runs redaction would change."""
        # Tokens under a key made for this export and then forgotten: equal values, equal
        # tokens, nothing to match against the stored ones or to reverse.
        redactor = Redactor(RuleSet.of_keys(self.redact), secret=secrets.token_bytes(32))
        digest, changed = hashlib.sha256(), []
        current: int | None = None
        originals: list[Any] = []
        redacted: list[Any] = []
        for run_pk, document in record_documents(self.fixture_set):
            if run_pk != current and originals:
                changed.extend(changed_runs(originals, redacted, self._policy()))
                originals, redacted = [], []
            current = run_pk
            line = (canonical_line(redactor(document)) + "\n").encode()
            out.write(line)
            digest.update(line)
            self.records += 1
            if self.redact:
                originals.append(decode_unit(canonical_line(document).encode()).records[0])
                redacted.append(decode_unit(line.rstrip(b"\n")).records[0])
        if originals:
            changed.extend(changed_runs(originals, redacted, self._policy()))
        self.sha256 = digest.hexdigest()
        if changed:
            raise FixtureError(
                f"redacting {', '.join(sorted(self.redact))} would change the verdicts of "
                f"{len(changed)} run(s) ({', '.join(c.run_id for c in changed[:5])}): keep what "
                f"the oracle needs ({refusal(changed)})"
            )

    def _policy(self) -> Policy:
        if self._loaded is None:
            self._loaded = load_policy(self.policy)
        return self._loaded

    def write_expected(self, records_file: IO[bytes], out: IO[bytes]) -> None:
        """Judge the exported lines as `manage.py evaluate` reads them, and print what it
        prints (runs are whole and in order in the file: judged one at a time)."""
        run: list[Any] = []
        for line in records_file:
            if not line.strip():
                continue
            record = decode_unit(line.rstrip(b"\n")).records[0]
            if run and record.run_id != run[0].run_id:
                self._write_judged(run, out)
                run = []
            run.append(record)
        if run:
            self._write_judged(run, out)

    def _write_judged(self, records: list[Any], out: IO[bytes]) -> None:
        for judgement in judge_runs(records, self._policy()):
            out.write((json.dumps(judgement.as_dict(), ensure_ascii=False) + "\n").encode())
            self.runs += 1

    def manifest(self) -> dict[str, Any]:
        return {
            "name": self.fixture_set.name,
            "origin": self.fixture_set.origin_detail or self.fixture_set.origin,
            "fixtureSha256": self.fixture_set.sha256,
            "recordsSha256": self.sha256,
            "runs": self.runs,
            "records": self.records,
            "expected": self.label,
            "policyVersion": self.version_number,
            "redactedKeys": sorted(self.redact),
            "exportedAt": timezone.now().isoformat(),
            "check": f"manage.py evaluate {self.stem}.jsonl --policy {self.stem}.policy.json --json",
        }

    def bundle(self) -> IO[bytes]:
        """A zip of the records, the policy, the expected verdicts and the manifest, in a
        temporary file (rewound; closing it removes it)."""
        out = tempfile.TemporaryFile()  # noqa: SIM115 (the caller streams and closes it)
        with (
            tempfile.TemporaryFile() as records,
            tempfile.TemporaryFile() as expected,
            zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive,
        ):
            self.write_records(records)
            records.seek(0)
            self.write_expected(records, expected)
            for name, part in (
                (f"{self.stem}.jsonl", records),
                (f"{self.stem}.expected.jsonl", expected),
            ):
                part.seek(0)
                with archive.open(name, "w", force_zip64=True) as member:
                    while chunk := part.read(1 << 20):
                        member.write(chunk)
            archive.writestr(
                f"{self.stem}.policy.json",
                json.dumps(self.policy, indent=2, ensure_ascii=False) + "\n",
            )
            archive.writestr(
                "fixture.json", json.dumps(self.manifest(), indent=2, ensure_ascii=False) + "\n"
            )
        out.seek(0)
        return out
