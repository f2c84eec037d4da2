"""manage.py audit verify: check the audit trail's hash chain, event by event.

Prints the chain's head (position:hash) when intact: keep it somewhere else, and pass it
back later with --expect to prove that nothing up to it has changed since. Exits 1 naming
the first events where the chain breaks (an event edited, deleted or moved)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from reviewapp.accounts.audit import audit_verify


def _head(text: str) -> tuple[int, str]:
    position, _, digest = text.partition(":")
    if not position.isdecimal() or len(digest) != 64:
        raise CommandError(f"--expect takes POSITION:SHA256, not {text!r}")
    return int(position), digest


class Command(BaseCommand):
    help = "Verify the audit trail's hash chain."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        verify = actions.add_parser("verify", help="recompute every event's hash and link")
        verify.add_argument(
            "--expect", metavar="POSITION:SHA256", help="a head printed earlier, kept elsewhere"
        )

    def handle(self, *args, **options) -> None:
        expect = _head(options["expect"]) if options.get("expect") else None
        report = audit_verify(expect=expect)
        if not report.intact:
            for problem in report.problems:
                self.stderr.write(problem)
            raise CommandError(
                f"the audit chain is broken ({len(report.problems)} problem(s) shown, "
                f"{report.events} events read)"
            )
        self.stdout.write(
            f"audit chain intact: {report.events} events; head "
            f"{report.head_position}:{report.head_hash}"
        )
