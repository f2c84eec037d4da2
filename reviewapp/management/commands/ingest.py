"""manage.py ingest PATH...: files, .gz files and folders, through the one ingest pipeline."""

from __future__ import annotations

import json
import sys

from django.core.management.base import BaseCommand, CommandParser

from reviewapp.ingest.batches import IngestSummary, expand_paths, identical_note
from reviewapp.ingest.files import TraceFileError, open_trace_file
from reviewapp.ingest.parts import PartsFailed, ingest_file_in_parts
from reviewapp.ingest.pipeline import ingest_file
from reviewapp.ingest.sniff import file_binary_kind, refusal
from reviewapp.models import IngestBatch


class ProgressBar:
    """A one-line bar on a terminal; silent anywhere else."""

    def __init__(self, label: str, stream=None):
        self.label, self.stream = label, stream or sys.stderr
        self.enabled = self.stream.isatty()

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or not total:
            return
        share = min(1.0, done / total)
        filled = int(share * 30)
        self.stream.write(
            f"\r{self.label[-40:]:<40} [{'#' * filled}{'.' * (30 - filled)}] {share:4.0%}"
        )
        self.stream.flush()

    def finish(self) -> None:
        if self.enabled:
            self.stream.write("\n")


class Command(BaseCommand):
    help = (
        "Ingest trace files (JSON Lines, OpenTelemetry, Jaeger, Tempo or Langfuse JSON, gzip) "
        "and judge their runs."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", help="files or folders")
        parser.add_argument("--json", action="store_true", help="print one JSON summary object")
        parser.add_argument(
            "--stages",
            action="store_true",
            help="with --json: add the seconds spent in each stage (decode, judge, write, commit)",
        )
        parser.add_argument(
            "--parts",
            type=int,
            default=1,
            help="split each file into this many parts, ingested at once by Celery workers "
            "(the workers must be running); stages then sum every worker's seconds",
        )

    def handle(self, *args, **options) -> None:
        parts = options["parts"]
        if parts < 1:
            sys.stderr.write("ingest: --parts must be at least 1\n")
            raise SystemExit(2)
        files = expand_paths(options["paths"])
        for path in files:
            try:
                open_trace_file(path).close()
            except TraceFileError as exc:
                sys.stderr.write(f"ingest: cannot read {exc}\n")
                raise SystemExit(2) from None
            kind = file_binary_kind(path)
            if kind is not None:
                sys.stderr.write(f"ingest: {path}: {refusal(kind)}\n")
                raise SystemExit(2)
        total = IngestSummary()
        for path in files:
            bar = ProgressBar(str(path))
            if parts > 1:
                try:
                    summary = ingest_file_in_parts(path, parts=parts, progress=bar)
                except PartsFailed as exc:
                    bar.finish()
                    sys.stderr.write(f"ingest: {path}: {exc}\n")
                    raise SystemExit(1) from None
            else:
                summary = ingest_file(path, channel=IngestBatch.Channel.CLI, progress=bar)
            bar.finish()
            total.add(summary)
            if not options["json"]:
                self.stdout.write(f"{path}: {_describe(summary)}")
        if options["json"]:
            shown: dict[str, object] = total.as_json()
            if options["stages"]:
                shown["stages"] = total.stages
            self.stdout.write(json.dumps(shown))
        elif len(files) > 1:
            self.stdout.write(f"total: {_describe(total)}")


def _describe(summary: IngestSummary) -> str:
    if not summary.lines:
        return "no lines (the file is empty or blank)"
    return (
        f"{summary.lines:,} lines: {summary.accepted:,} accepted, {summary.duplicates:,} duplicates"
        + (f" ({identical_note(summary.identical)})" if summary.identical else "")
        + f", {summary.rejected:,} rejected; {summary.runs:,} runs judged, "
        f"{summary.tickets:,} tickets opened"
        + (f"; {summary.ignored:,} spans without a tool call ignored" if summary.ignored else "")
        + (
            f"\n  {'warning: ' if summary.span_report.is_warning else ''}"
            f"{summary.span_report.message()}"
            if summary.span_report.spans
            else ""
        )
    )
