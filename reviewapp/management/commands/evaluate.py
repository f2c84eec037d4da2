"""manage.py evaluate: judge trace files with the engine, print verdicts as JSON Lines.

Reads files only and writes nothing to the database (spec/verdicts.md)."""

from __future__ import annotations

import json
import sys

from django.core.management.base import BaseCommand, CommandParser

from reviewapp.engine import PolicyError, RecordError, RunPositions, judge_runs
from reviewapp.ingest.files import TraceFileError, read_trace_file
from reviewapp.ingest.formats import NATIVE, decode_unit
from reviewapp.judging.policies import active_policy_offline, read_policy_file


class Command(BaseCommand):
    help = "Judge trace files and print one JSON verdict object per run."
    # A file tool: it must run where no database is reachable.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "traces", nargs="+", help="trace files (.jsonl, .jsonl.gz, OpenTelemetry JSON)"
        )
        parser.add_argument("--policy", help="policy document (default: the active policy)")
        parser.add_argument(
            "--json", action="store_true", help="JSON Lines output (the only format)"
        )

    def handle(self, *args, **options) -> None:
        try:
            policy = (
                read_policy_file(options["policy"])
                if options["policy"]
                else active_policy_offline()
            )
        except PolicyError as exc:
            self._fail(f"invalid policy {options['policy']}: {exc}")
        except OSError as exc:
            self._fail(f"cannot read policy {options['policy']}: {exc.strerror or exc}")

        try:
            streams = [read_trace_file(path) for path in options["traces"]]
        except TraceFileError as exc:
            self._fail(f"cannot read {exc}")

        records, counts = [], {"lines": 0, "accepted": 0, "rejected": 0}
        # A record whose `seq` was read before is a re-delivery (accepted, adding nothing) or
        # refused, as the ingest stores the same files.
        positions = RunPositions()
        for lines in streams:
            for line in lines:
                counts["lines"] += 1
                try:
                    if line.error:
                        raise RecordError(line.error)
                    unit = decode_unit(line.payload)
                    if unit.format != NATIVE or not positions.redelivered(
                        unit.records[0], line.payload
                    ):
                        records.extend(unit.records)
                    counts["accepted"] += 1
                except RecordError as exc:
                    counts["rejected"] += 1
                    sys.stderr.write(f"{line.source}:{line.number}: {exc}\n")

        for judgement in judge_runs(records, policy):
            self.stdout.write(json.dumps(judgement.as_dict(), ensure_ascii=False))
        sys.stderr.write(
            f"{counts['lines']} lines, {counts['accepted']} accepted, {counts['rejected']} rejected\n"
        )

    def _fail(self, message: str) -> None:
        # One line on stderr and exit 2, as the contract asks (CommandError would exit 1).
        sys.stderr.write(f"evaluate: {message}\n")
        raise SystemExit(2)
