"""manage.py erase: purge a value from everything stored, four eyes on it.

    erase --value V --reason TEXT --token ALICES   request it (prints its id and token)
    erase --approve ID --token BOBS                approve another's request, and run it
    erase --refuse ID --token BOBS                 refuse it
    erase --run ID --token ANY_ADMINS              run an approved one again (interrupted)
    erase --list                                   the requests, and what each touched

Who acts is whoever holds the API token given (management/identity.py): a name alone
proves nothing, so one operator cannot be both people. Admins only (ERASE_VALUES)."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError, CommandParser

from reviewapp.accounts.audit import Channel, audit_channel
from reviewapp.accounts.roles import ERASE_VALUES
from reviewapp.management.identity import TOKEN_VARIABLE, token_holder
from reviewapp.models import ErasureRequest
from reviewapp.privacy.erasure import ErasureError, erasure_decide, erasure_request, run_erasure


class Command(BaseCommand):
    help = "Request, approve or list the erasure of a value (four eyes)."

    def add_arguments(self, parser: CommandParser) -> None:
        action = parser.add_mutually_exclusive_group(required=True)
        action.add_argument("--value", help="the value to erase (a request)")
        action.add_argument("--approve", type=int, metavar="ID", help="approve and run it")
        action.add_argument("--refuse", type=int, metavar="ID")
        action.add_argument(
            "--run", type=int, metavar="ID", help="run an approved erasure again (interrupted)"
        )
        action.add_argument("--list", action="store_true")
        parser.add_argument("--reason", default="", help="why (required with --value)")
        parser.add_argument(
            "--token", default=None, help=f"your API token (default: ${TOKEN_VARIABLE})"
        )

    def handle(self, *args, **options) -> None:
        try:
            with audit_channel(Channel.CLI):
                if options["list"]:
                    self._list()
                elif options["value"] is not None:
                    user = token_holder(options["token"], ERASE_VALUES)
                    request = erasure_request(options["value"], user=user, reason=options["reason"])
                    self.stdout.write(
                        f"erasure #{request.pk} requested: token {request.token}; "
                        "another admin must approve it (erase --approve "
                        f"{request.pk})"
                    )
                elif options["run"] is not None:
                    token_holder(options["token"], ERASE_VALUES)
                    self._report(options["run"], run_erasure(options["run"]))
                else:
                    user = token_holder(options["token"], ERASE_VALUES)
                    approve = options["approve"] is not None
                    pk = options["approve"] if approve else options["refuse"]
                    request = erasure_decide(pk, user=user, approve=approve, send=False)
                    if not approve:
                        self.stdout.write(f"erasure #{pk} refused")
                        return
                    self._report(pk, run_erasure(pk))
        except ErasureRequest.DoesNotExist:
            raise CommandError("no such erasure request") from None
        except ErasureError as exc:
            raise CommandError(str(exc)) from None

    def _report(self, pk: int, report: dict) -> None:
        self.stdout.write(f"erasure #{pk} done: {report['rows']} row(s) changed")
        for table, column, rows in report["tables"]:
            self.stdout.write(f"  {table}.{column}: {rows}")
        self.stdout.write(f"  protected values deleted: {report['protected_values_deleted']}")
        for name in report["files"]:
            self.stdout.write(f"  kept upload rewritten: {name}")
        self.stdout.write("  cache cleared")
        if report["audit_events_holding"]:
            positions = ", ".join(map(str, report["audit_events_holding"]))
            self.stderr.write(
                f"  the audit trail holds the value in events {positions}: people's own words, "
                "never rewritten (the hash chain would break)"
            )

    def _list(self) -> None:
        for request in ErasureRequest.objects.select_related("requested_by", "decided_by"):
            decided = f", {request.state} by {request.decided_by}" if request.decided_by else ""
            self.stdout.write(
                f"#{request.pk} {request.state} {request.token} requested by "
                f"{request.requested_by} {request.requested_at:%Y-%m-%d %H:%M}{decided}: "
                f"{request.reason}"
            )
            if request.report:
                self.stdout.write(f"  {json.dumps(request.report, sort_keys=True)}")
