"""manage.py replay FIXTURE_SET --policy VERSION|FILE [--json]: judge a fixture set again
under a version (v3), the draft, a proposal applied to the active version (proposal-12) or
a policy file, prospectively, for scripts and CI, against the version it builds on (the
active one; a version's own: the one it was drafted from). --suite: every set in the
regression suite; --open-tickets: every open ticket's run, as the desk is now.

The command works on the job itself, through the functions workers run (no worker needed;
--workers sends it to them and follows it instead). A progress bar on a terminal; a summary
at the end, or with --json one JSON object: {"jobs": [...], "regressions": N,
"regressionSuiteChanged": …}.

A regression is a group that changed outside the policy's own change (the fields and
actions its rules and settings name: what it means to change is not one). Exit code: 0 when
no fixture set of the regression suite replayed has one (with --strict: when nothing
changed at all, in any set replayed), 1 when one does, 2 when the replay could not be done
(an unknown set or policy, a failed job)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandParser

from reviewapp.engine import PolicyError
from reviewapp.management.commands.ingest import ProgressBar
from reviewapp.models import FixtureSet, PolicyCandidate, ReplayJob
from reviewapp.policy.candidates import candidate_of_file
from reviewapp.replay.fixtures import FixtureError, in_suite, suite_sets
from reviewapp.replay.impact import candidate_for, replay_open_tickets
from reviewapp.replay.jobs import ReplayError, job_progress, job_start, job_work
from reviewapp.replay.results import baseline_label, count_rows, job_json, prospective_label


class Command(BaseCommand):
    help = "Replay a fixture set under a version, the draft, a proposal or a policy file."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("fixture_set", nargs="?", help="a fixture set's name (or id)")
        parser.add_argument(
            "--policy",
            required=True,
            help="v3 (or 3), draft, proposal-12, or a policy document file",
        )
        parser.add_argument(
            "--suite", action="store_true", help="every fixture set in the regression suite"
        )
        parser.add_argument(
            "--open-tickets",
            action="store_true",
            help="every open ticket's run, as the desk is now (a snapshot)",
        )
        parser.add_argument(
            "--strict", action="store_true", help="exit 1 when anything changed, in any set"
        )
        parser.add_argument(
            "--workers", action="store_true", help="send the job to workers and follow it"
        )
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    def handle(self, *args, **options) -> None:
        try:
            candidate = self._candidate(options["policy"])
            if options["open_tickets"]:
                job = replay_open_tickets(
                    candidate, send=options["workers"], reason="manage.py replay"
                )
                sets, jobs = [job.fixture_set], [self._follow(job, options)]
            else:
                sets = self._sets(options["fixture_set"], options["suite"])
                jobs = [self._replay(fixture_set, candidate, options) for fixture_set in sets]
        except (ReplayError, FixtureError, PolicyError, OSError, ValueError) as exc:
            self._fail(str(exc))
        changed, regressions = False, 0
        for fixture_set, job in zip(sets, jobs, strict=True):
            if job.state != ReplayJob.State.DONE:
                self._fail(f"replay #{job.pk} of {fixture_set.name} {job.state}: {job.error}")
            if options["strict"]:
                changed |= job.changed_groups > 0
            elif in_suite(fixture_set):
                changed |= job.regressions > 0
            regressions += job.regressions
        if options["json"]:
            document = {
                "jobs": [job_json(job) for job in jobs],
                "regressions": regressions,
                "regressionSuiteChanged": changed,
            }
            self.stdout.write(json.dumps(document, ensure_ascii=False))
        else:
            for fixture_set, job in zip(sets, jobs, strict=True):
                self._describe(fixture_set, job)
        if changed:
            raise SystemExit(1)

    def _sets(self, name: str | None, suite: bool) -> list[FixtureSet]:
        if suite:
            found = suite_sets()
            if not found:
                raise ReplayError("no fixture set is in the regression suite")
            return found
        if not name:
            raise ReplayError("name a fixture set, or --suite")
        fixture_set = FixtureSet.objects.filter(name=name).first()
        if fixture_set is None and name.isdecimal():
            fixture_set = FixtureSet.objects.filter(pk=int(name)).first()
        if fixture_set is None:
            raise ReplayError(f"no fixture set named {name}")
        return [fixture_set]

    def _candidate(self, policy: str) -> PolicyCandidate:
        path = Path(policy)
        if path.is_file():
            document = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(document, dict):
                raise ReplayError(f"{policy}: a policy document is a JSON object")
            return candidate_of_file(document)
        text = policy.strip().lower()
        if text == "draft":
            return candidate_for("draft")
        if text.startswith("proposal-") and text[9:].isdecimal():
            return candidate_for("proposal", int(text[9:]))
        if text.removeprefix("v").isdecimal():
            return candidate_for("version", int(text.removeprefix("v")))
        raise ReplayError(f"--policy {policy}: not a file, a version, draft or proposal-N")

    def _replay(self, fixture_set: FixtureSet, candidate: PolicyCandidate, options) -> ReplayJob:
        job = job_start(
            fixture_set,
            candidate,
            reason="manage.py replay",
            send=options["workers"],
        )
        return self._follow(job, options)

    def _follow(self, job: ReplayJob, options) -> ReplayJob:
        """Work on the job here (or wait for the workers), with a bar on a terminal."""
        bar = ProgressBar(f"{job.fixture_set.name} under {job.candidate.label}")

        def report() -> None:
            progress = job_progress(job)
            bar(progress.runs_done, progress.runs)

        if options["workers"]:
            while not job.is_finished:
                time.sleep(0.5)
                job.refresh_from_db()
                report()
        else:
            job_work(job.pk, budget=float("inf"), on_item=report)
        bar.finish()
        job.refresh_from_db()
        return job

    def _describe(self, fixture_set: FixtureSet, job: ReplayJob) -> None:
        counts = job.counts
        suite = " (regression suite)" if in_suite(fixture_set) else ""
        self.stdout.write(
            f"{fixture_set.name}{suite}: {counts['runs']:,} runs, {counts['groups']:,} groups, "
            f"{prospective_label(job)}, {baseline_label(job)} (replay #{job.pk})"
        )
        if counts.get("runs_expired"):
            self.stdout.write(
                f"  skipped: {counts['runs_expired']:,} runs whose raw data expired (retention)"
            )
        for _, what, number in count_rows(counts):
            self.stdout.write(f"  {what}: {number:,}")

    def _fail(self, message: str) -> None:
        sys.stderr.write(f"replay: {message}\n")
        raise SystemExit(2)
