"""manage.py tallies: a month's (or a range's) explained and unexplained discrepancies.

    python manage.py tallies --month 2026-09                  # a summary
    python manage.py tallies --month 2026-07 --to 2026-09 --csv > tallies.csv
    python manage.py tallies --month 2026-09 --json

The CSV and JSON are the page's downloads, byte for byte (reviewapp.reports.exports)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from reviewapp.infra.csv_export import csv_lines
from reviewapp.reports import exports
from reviewapp.reports.calendar import month_add, month_label, month_parse
from reviewapp.reports.entries import tallies_refresh
from reviewapp.reports.months import month_views, since_frozen
from reviewapp.reports.tally import DIMENSIONS


class Command(BaseCommand):
    help = "Print a month's tally (or a range's) as a summary, CSV or JSON."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--month", required=True, help="YYYY-MM: the (first) month")
        parser.add_argument("--to", help="YYYY-MM: the last month of a range")
        output = parser.add_mutually_exclusive_group()
        output.add_argument("--csv", action="store_true", help="CSV, as the page downloads it")
        output.add_argument("--json", action="store_true", help="JSON, as the page downloads it")

    def handle(self, *args, **options) -> None:
        first = month_parse(options["month"])
        if first is None:
            raise CommandError(f"--month: expected YYYY-MM, got {options['month']!r}")
        last = month_parse(options["to"]) if options["to"] else first
        if last is None:
            raise CommandError(f"--to: expected YYYY-MM, got {options['to']!r}")
        if last < first or month_add(first, exports.MAX_MONTHS - 1) < last:
            raise CommandError(f"a range is one to {exports.MAX_MONTHS} months, oldest first")
        tallies_refresh()
        if options["csv"]:
            for line in csv_lines(exports.HEADER, exports.csv_rows(first, last)):
                self.stdout.write(line, ending="")
        elif options["json"]:
            for chunk in exports.json_chunks(first, last):
                self.stdout.write(chunk, ending="")
        else:
            for view in month_views(first, last, breakdowns=True):
                self._summary(view)

    def _summary(self, view) -> None:
        shown, status = view.shown, view.status
        state = f"frozen on {status.frozen_at:%Y-%m-%d}" if status.frozen_at else "live"
        self.stdout.write(f"{month_label(shown.month)} ({state})")
        if not shown.has_tally:
            self.stdout.write("  no judged run started in this month")
            return
        counts = shown.counts
        change = "" if shown.change is None else f", {shown.change:+d} on the month before"
        spike = " SPIKE" if shown.spike else ""
        self.stdout.write(
            f"  {shown.runs} runs, {shown.groups} verdict groups, {counts.total} discrepancies\n"
            f"  explained {counts.explained} (by a rule {counts.rule}, by a reviewer "
            f"{counts.reviewer})\n"
            f"  unexplained {counts.unexplained} (closed {counts.closed_unexplained}, open "
            f"{counts.open}, without a ticket {counts.untracked}){change}{spike}"
        )
        if view.drift is not None and view.drift.any:
            drift, runs = view.drift.counts, (shown.runs or 0) + view.drift.runs
            now = counts + drift
            self.stdout.write(
                f"  today: {runs} runs ({since_frozen(view.drift.runs)}); "
                f"explained {now.explained} ({since_frozen(drift.explained)}), "
                f"unexplained {now.unexplained} ({since_frozen(drift.unexplained)})"
            )
        elif view.drift is not None:
            self.stdout.write("  today: as when frozen")
        for name, title in DIMENSIONS.items():
            rows = (shown.breakdowns or {}).get(name, [])
            if rows:
                listed = ", ".join(
                    f"{row.label} {row.counts.explained}/{row.counts.unexplained}" for row in rows
                )
                self.stdout.write(f"  by {title.lower()} (explained/unexplained): {listed}")
