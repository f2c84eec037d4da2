"""manage.py shadow --version N --since DATE [--until DATE] [--candidate ID] [--json]:
what the active policy blocked over the window, and what version N, in shadow, would newly
block, would unblock and leave unchanged, per action and per day (prospective counts, the
same as the Shadow page). N is the number a candidate has (a published version) or would
get (a draft); the active version's number prints its blocked counts alone."""

from __future__ import annotations

import json
from datetime import date
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import F

from reviewapp.infra.days import Window, WindowError
from reviewapp.judging.blocking import DIMENSIONS
from reviewapp.models import PolicyVersion, ShadowDesignation
from reviewapp.reports.blocked import BlockedCounts, blocked_counts
from reviewapp.shadow.compare import Comparison, comparison


class Command(BaseCommand):
    help = "Blocked counts of the active policy, and what a version in shadow would change."

    def add_base_argument(self, parser: CommandParser, *args: Any, **kwargs: Any) -> None:
        # Django's own --version prints Django's version: here it names a policy version.
        if "--version" not in args:
            super().add_base_argument(parser, *args, **kwargs)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--version", type=int, required=True, help="the policy version N")
        parser.add_argument("--since", required=True, help="first day, YYYY-MM-DD")
        parser.add_argument("--until", help="last day, YYYY-MM-DD (default: today)")
        parser.add_argument(
            "--candidate", type=int, help="which candidate numbered N, when several were"
        )
        parser.add_argument("--json", action="store_true", help="one JSON object")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            window = Window.read(options["since"], options["until"])
        except WindowError as error:
            raise CommandError(str(error)) from None
        number = options["version"]
        active = PolicyVersion.objects.order_by("-number").values_list("number", flat=True)
        active_number = active.first() or 0
        blocked = blocked_counts(window)
        designation = None
        if number != active_number or options["candidate"]:
            designation = _designation(number, options["candidate"])
        compared = comparison(designation, window) if designation else None
        if options["json"]:
            self.stdout.write(
                json.dumps(_document(window, active_number, blocked, designation, compared))
            )
            return
        self._print(window, active_number, blocked, designation, compared)

    def _print(
        self,
        window: Window,
        active_number: int,
        blocked: BlockedCounts,
        designation: ShadowDesignation | None,
        compared: Comparison | None,
    ) -> None:
        out = self.stdout.write
        out(
            f"{window}: v{active_number} (active) blocked {blocked.total} action(s) in {blocked.runs} of {blocked.judged} run(s)"
        )
        for name in DIMENSIONS:
            # A blank value in words ("no sources": blocked for a finding, not a conflict).
            top = ", ".join(f"{value or f'no {name}'} {n}" for value, n in blocked.by[name][:5])
            out(f"  by {name}: {top or '-'}")
        if designation is None or compared is None:
            return
        total = compared.total
        out(
            f"{designation.candidate.label} (in shadow since {designation.started_at:%Y-%m-%d}, "
            f"a what-if): would newly block {total.new}, would unblock {total.unblocked}, "
            f"unchanged {total.unchanged}; {compared.runs_compared} run(s) compared, "
            f"{compared.runs_pending} waiting"
        )
        out(f"  {'action':<32} {'new':>6} {'unblock':>8} {'same':>6}")
        for action, counts in compared.by_action:
            out(
                f"  {action or 'no action':<32} {counts.new:>6} {counts.unblocked:>8} {counts.unchanged:>6}"
            )
        out(f"  {'day':<32} {'new':>6} {'unblock':>8} {'same':>6}")
        for day, counts in compared.by_day:
            if counts.new or counts.unblocked or counts.unchanged:
                out(
                    f"  {day.isoformat():<32} {counts.new:>6} {counts.unblocked:>8} {counts.unchanged:>6}"
                )


def _designation(number: int, candidate: int | None) -> ShadowDesignation:
    designations = ShadowDesignation.objects.select_related("candidate").filter(
        candidate__number=number
    )
    if candidate:
        designations = designations.filter(candidate_id=candidate)
    # In shadow now first, then the latest.
    found = designations.order_by(F("ended_at").desc(nulls_first=True), "-started_at").first()
    if found is None:
        raise CommandError(
            f"v{number} has not been in shadow{' as that candidate' if candidate else ''}: put it "
            "in shadow first (the Shadow page)"
        )
    return found


def _document(
    window: Window,
    active_number: int,
    blocked: BlockedCounts,
    designation: ShadowDesignation | None,
    compared: Comparison | None,
) -> dict[str, Any]:
    document: dict[str, Any] = {
        "since": window.since.isoformat(),
        "until": window.until.isoformat(),
        "active": {
            "version": active_number,
            "blocked": blocked.total,
            "runs": blocked.runs,
            "runsJudged": blocked.judged,
            "byDay": {_day(day): n for day, n in blocked.by_day},
            "byWeek": {_day(week): n for week, n in blocked.by_week},
            **{f"by{name.title()}": dict(blocked.by[name]) for name in DIMENSIONS},
        },
    }
    if designation is not None and compared is not None:
        document["shadow"] = {
            "version": designation.candidate.number,
            "candidate": designation.candidate.label,
            "inShadow": designation.is_open,
            "prospective": True,
            "wouldNewlyBlock": compared.total.new,
            "wouldUnblock": compared.total.unblocked,
            "unchanged": compared.total.unchanged,
            "runsCompared": compared.runs_compared,
            "runsPending": compared.runs_pending,
            "byAction": {a: vars(c) for a, c in compared.by_action},
            "byDay": {_day(d): vars(c) for d, c in compared.by_day},
        }
    return document


def _day(day: date) -> str:
    return day.isoformat()
